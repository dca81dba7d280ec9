//! Decode products (issue 36): `Y = X W^T` with `m` from 1 to 64 rows of bf16 `X` against a
//! large bf16 weight `W` stored `n x k` (as `nn.Linear` stores it), the result in bf16:
//! gpukern's `gpu.matmul_decode_to(x, w, y)` (the plan's choice) and, with `--plans`, every
//! plan forced ([`DecodePlan`]: `k` whole and in 2 and 4 slices, the read-only-load kernels at
//! `m <= 8` (`gpukern:mma-nc`, `gpukern:mma-na`); on Hopper the Hopper rung's tiles in 2, 4 and
//! 7 slices; the tutorial rung at `m = 1`). Always, at `m <= 8`: the CUDA-core rung whole and in
//! 2 slices (`gpukern:rows`, `gpukern:rows-s2`), and at `m = 1` reading the weight without L1
//! lines and with 256-byte L2 fetches (`gpukern:rows-na`). On a Hopper GPU, always: the Hopper rung's tiles
//! (`gpukern:wgmma-256`, `gpukern:wgmma-224`, `gpukern:wgmma-128`, and `DecodePlan::choose_wgmma`'s choice), the
//! `mma.sync` rung's own choice where the default is the Hopper rung, the grouped GEMM with one
//! expert on the same weight (`gpukern:grouped`) and the ordinary bf16 product on the weight
//! stored `k x n` (`gpukern:matmul-kxn`, timed on its own transposed copy). Peers: `bench/peers_matmul_decode.py`
//! (`torch.matmul(x, w.T)`, and under `torch.compile`).
//!
//! Records: `kernel` `matmul_decode`, keys `m`, `n`, `k`; `plan` the plan's name. Counts:
//! `2 m n k` flops; minimum traffic `2 (m k + n k + m n)` bytes (each operand read once, the
//! result written once): GB/s is the weight's streaming rate, near enough.
//!
//! Inputs: uniform in [-1, 1), rounded to bf16. The check: the relative error norm over 256
//! columns of `Y` spread over `n` (all of them when fewer) against the f64 product of the
//! rounded inputs on the CPU, tolerance three bf16 unit roundoffs (3 / 256), which a lost step
//! of 32 along `k` or a wrong row fails (`tests/kernels/matmul/decode.rs` plants them against
//! the per-element bound); the whole product is too large for a CPU reference at `m = 64`.

use gpukern::{DecodeLoads, DecodePlan, DecodeTile, DeviceMatrix, bf16};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::record::{Check, Record, Res, Sink};

/// The `kernel` of every record here.
const KERNEL: &str = "matmul_decode";
/// Three bf16 unit roundoffs.
const TOL: f64 = 3.0 / 256.0;
/// Columns of `Y` checked per shape.
const CHECKED_COLUMNS: usize = 256;

/// The suite's shapes `(m, n, k)`.
pub fn shapes(quick: bool) -> Vec<(usize, usize, usize)> {
    crate::suite::shapes3("matmul_decode", quick)
}

/// One row of the suite at a shape.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Row {
    /// `gpu.matmul_decode_to` (`None`, the plan's choice) or `gpu.matmul_decode_with(plan)`.
    Decode(Option<DecodePlan>),
    /// `gpu.matmul_grouped` with one expert of all `m` rows: the Hopper grouped GEMM on the same
    /// `n x k` weight (impl `gpukern:grouped`).
    Grouped,
    /// `gpu.matmul_to(x, wt, y)`: gpukern's ordinary bf16 product (the `wgmma` kernel on
    /// Hopper) on the weight stored transposed, `k x n` (impl `gpukern:matmul-kxn`): what the
    /// decode entry point would be without its own kernels, given a weight in that layout.
    Dense,
}

/// The rows at a shape: [`plans_at`]'s, then on a Hopper GPU the grouped and the ordinary
/// product.
fn rows_at(shape: (usize, usize, usize), plans: bool, wgmma: bool, sms: usize) -> Vec<Row> {
    let mut out: Vec<Row> = plans_at(shape, plans, wgmma, sms)
        .into_iter()
        .map(Row::Decode)
        .collect();
    if wgmma {
        out.extend([Row::Grouped, Row::Dense]);
    }
    out
}

/// The plans timed at a shape: the default, and with `plans` every one forced; with `wgmma`
/// (a Hopper GPU of `sms` SMs) the Hopper rung too, whatever `plans` says: its tiles with `k`
/// whole, [`DecodePlan::choose_wgmma`]'s choice, its stream-K form of each tile on `sms` blocks, the `mma.sync` rung's own choice and, where
/// that keeps `k` whole at `m <= 8`, its no-L1-allocation variant (`gpukern:mma-na`), so that
/// one run compares them at every `m`.
fn plans_at(
    (m, n, k): (usize, usize, usize),
    plans: bool,
    wgmma: bool,
    sms: usize,
) -> Vec<Option<DecodePlan>> {
    let mut out = vec![None];
    if wgmma {
        let mut hopper = vec![DecodePlan::choose_wgmma(m, n, k, sms)];
        for tile in [DecodeTile::Rows256, DecodeTile::Rows224, DecodeTile::Rows128] {
            hopper.push(DecodePlan::Wgmma { tile, slices: 1 });
        }
        // The stream-K form on one block per SM (`gpukern:wgmma-224-sk132` on an H200), each
        // tile: every SM streams to the end, the split tiles added up in the launch.
        for tile in [DecodeTile::Rows224, DecodeTile::Rows256, DecodeTile::Rows128] {
            hopper.push(DecodePlan::stream_k(tile, sms));
        }
        // And the `mma.sync` rung's own choice where the default is the Hopper rung, and at
        // `m <= 8` its variant reading the weight without L1 lines, 256 bytes per L2 fetch.
        let mma = DecodePlan::choose(m, n, k, sms, true, false);
        hopper.push(mma);
        if let DecodePlan::Mma { slices: 1, .. } = mma {
            if m <= 8 {
                hopper.push(DecodePlan::Mma {
                    slices: 1,
                    loads: DecodeLoads::NoAllocate,
                });
            }
        }
        for p in hopper {
            if !out.contains(&Some(p)) {
                out.push(Some(p));
            }
        }
    }
    // The CUDA-core rung at `m <= 8`, whole and in 2 slices; at `m = 1` without L1 lines.
    if m <= 8 {
        let rows = |slices, loads| DecodePlan::Rows { slices, loads };
        let mut cuda_cores = vec![rows(1, DecodeLoads::EvictFirst), rows(2, DecodeLoads::EvictFirst)];
        if m == 1 {
            cuda_cores.push(rows(1, DecodeLoads::NoAllocate));
        }
        for p in cuda_cores {
            if !out.contains(&Some(p)) {
                out.push(Some(p));
            }
        }
    }
    if plans {
        for slices in [1, 2, 4] {
            let p = Some(DecodePlan::Mma {
                slices,
                loads: DecodeLoads::EvictFirst,
            });
            if !out.contains(&p) {
                out.push(p);
            }
        }
        if m <= 8 {
            for loads in [DecodeLoads::ReadOnly, DecodeLoads::NoAllocate] {
                let p = Some(DecodePlan::Mma { slices: 1, loads });
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        if wgmma {
            // The Hopper rung split: whether spreading the weight's blocks evenly over the SMs
            // pays for the partial products.
            for tile in [DecodeTile::Rows256, DecodeTile::Rows128] {
                for slices in [2, 4, 7] {
                    let p = Some(DecodePlan::Wgmma { tile, slices });
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
        if m == 1 {
            out.push(Some(DecodePlan::Naive));
        }
    }
    out
}

/// Records this suite writes.
pub fn planned(quick: bool, plans: bool) -> usize {
    // The Hopper rows are counted as on an H200 (132 SMs); elsewhere fewer are written.
    shapes(quick)
        .into_iter()
        .map(|s| rows_at(s, plans, true, 132).len())
        .sum()
}

/// The shape's name: `MxNxK`.
fn shape_name((m, n, k): (usize, usize, usize)) -> String {
    format!("{m}x{n}x{k}")
}

/// One set of buffers: `X`, `W`, `Y`.
type Bufs = (DeviceMatrix<bf16>, DeviceMatrix<bf16>, DeviceMatrix<bf16>);

/// One shape's inputs and the reference of its checked columns.
struct Inputs {
    x: Vec<bf16>,
    w: Vec<bf16>,
    /// The checked columns of `Y` and their f64 reference (row-major `m x cols.len()`, in f32).
    cols: Vec<usize>,
    reference: Vec<f32>,
}

fn inputs((m, n, k): (usize, usize, usize)) -> Inputs {
    let x: Vec<bf16> = random_vec(m * k, -1.0, 1.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let w: Vec<bf16> = random_vec(n * k, -1.0, 1.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let step = n.div_ceil(CHECKED_COLUMNS).max(1);
    let cols: Vec<usize> = (0..n).step_by(step).collect();
    let mut reference = Vec::with_capacity(m * cols.len());
    for i in 0..m {
        for &j in &cols {
            let s: f64 = (0..k)
                .map(|l| f64::from(x[i * k + l].to_f32()) * f64::from(w[j * k + l].to_f32()))
                .sum();
            reference.push(s as f32);
        }
    }
    Inputs {
        x,
        w,
        cols,
        reference,
    }
}

/// The record of `row` at `shape`, nothing measured yet.
fn base(shape: (usize, usize, usize), row: Row, chosen: DecodePlan) -> Record {
    let (m, n, k) = shape;
    let (imp, plan, layout) = match row {
        Row::Decode(None) => ("gpukern".to_string(), chosen.name(), "w n x k"),
        Row::Decode(Some(p)) => (format!("gpukern:{}", p.name()), p.name(), "w n x k"),
        Row::Grouped => ("gpukern:grouped".to_string(), "grouped".to_string(), "w n x k"),
        Row::Dense => ("gpukern:matmul-kxn".to_string(), "matmul".to_string(), "w k x n"),
    };
    let mut r = Record::new(KERNEL, imp, shape_name(shape))
        .with("m", m)
        .with("n", n)
        .with("k", k)
        .with("math", "bf16")
        .with("layout", layout)
        .with("plan", plan);
    r.dtype = "bf16";
    r
}

/// Minimum bytes and flops.
fn rates((m, n, k): (usize, usize, usize)) -> (Option<f64>, Option<f64>) {
    let bytes = crate::suite::bytes(KERNEL, &[("m", m), ("n", n), ("k", k)]);
    let flops = crate::suite::flops(KERNEL, &[("m", m), ("n", n), ("k", k)]);
    (Some(bytes), Some(flops))
}

/// Every row at one shape.
fn rows(b: &mut Bench, sink: &mut Sink, shape: (usize, usize, usize)) -> Res<()> {
    let (m, n, k) = shape;
    let sms = b.gpu.multiprocessors()?;
    let chosen = DecodePlan::choose(m, n, k, sms, true, b.gpu.has_wgmma());
    let rows = rows_at(shape, b.plans, b.gpu.has_wgmma(), sms);
    if sink.expired() {
        for row in rows {
            sink.item(base(shape, row, chosen), || Err("time budget spent".into()))?;
        }
        return Ok(());
    }
    sink.note(&format!(
        "{KERNEL} {}: preparing inputs and the reference",
        shape_name(shape)
    ));
    let inputs = inputs(shape);
    let (bytes, flops) = rates(shape);
    let sets = sets_for(bytes.unwrap_or(0.0) as usize);
    let gpu = b.gpu.clone();
    let mut bufs: Vec<Bufs> = Vec::new();
    for _ in 0..sets {
        bufs.push((
            gpu.upload_matrix(&ArrayView2::from_shape((m, k), &inputs.x)?)?,
            gpu.upload_matrix(&ArrayView2::from_shape((n, k), &inputs.w)?)?,
            gpu.upload_matrix(&ArrayView2::from_shape((m, n), &vec![bf16::NAN; m * n])?)?,
        ));
    }
    // The grouped row's offsets (one expert of all `m` rows) and the dense row's `k x n` weights,
    // made when their rows come.
    let mut offsets = None;
    let mut transposed: Vec<DeviceMatrix<bf16>> = Vec::new();
    for row in rows {
        if row == Row::Grouped && offsets.is_none() {
            offsets = Some(gpu.upload(&[m as u32])?);
        }
        if row == Row::Dense && transposed.is_empty() {
            let mut wt = vec![bf16::ZERO; k * n];
            for j in 0..n {
                for l in 0..k {
                    wt[l * n + j] = inputs.w[j * k + l];
                }
            }
            for _ in 0..sets {
                transposed.push(gpu.upload_matrix(&ArrayView2::from_shape((k, n), &wt)?)?);
            }
        }
        sink.item(base(shape, row, chosen), || {
            let record = base(shape, row, chosen).with("sets", sets);
            let call = |i: usize, (x, w, y): &mut Bufs| -> Res<()> {
                match row {
                    Row::Decode(None) => gpu.matmul_decode_to(x, w, y)?,
                    Row::Decode(Some(p)) => gpu.matmul_decode_with(x, w, y, p)?,
                    Row::Grouped => {
                        let o = offsets.as_ref().ok_or("no offsets")?;
                        gpu.matmul_grouped(x, w, o, y)?
                    }
                    Row::Dense => gpu.matmul_to(x, &transposed[i], y)?,
                }
                Ok(())
            };
            call(0, &mut bufs[0])?;
            let y = bufs[0].2.as_vec().to_vec()?;
            let out: Vec<f32> = (0..m)
                .flat_map(|i| inputs.cols.iter().map(move |&j| (i, j)))
                .map(|(i, j)| y[i * n + j].to_f32())
                .collect();
            let check = Check::new(&out, &inputs.reference, TOL, "cpu_f64_columns");
            let record = record.checked(&check).with("checked_columns", inputs.cols.len());
            if !check.passed() {
                return Ok(record);
            }
            let stats = b.timer.measure(|i| call(i % sets, &mut bufs[i % sets]))?;
            Ok(record.timed(&stats, bytes, flops))
        })?;
    }
    Ok(())
}

/// Every shape of the suite.
pub fn matmul_decode(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for shape in shapes(b.quick) {
        if !b.wants(&shape_name(shape)) {
            continue;
        }
        rows(b, sink, shape)?;
    }
    Ok(())
}
