//! Decode products (issue 36): `Y = X W^T` with `m` from 1 to 64 rows of bf16 `X` against a
//! large bf16 weight `W` stored `n x k` (as `nn.Linear` stores it), the result in bf16:
//! gpukern's `gpu.matmul_decode_to(x, w, y)` (the plan's choice) and, with `--plans`, every
//! plan forced ([`DecodePlan`]: `k` whole and in 2 and 4 slices, the read-only-load kernel at
//! `m <= 8`; the tutorial rung at `m = 1`). Peers: `bench/peers_matmul_decode.py`
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

use gpukern::{DecodePlan, DeviceMatrix, bf16};
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

/// The plans timed at a shape: the default, and with `plans` every one forced.
fn plans_at((m, _, _): (usize, usize, usize), plans: bool) -> Vec<Option<DecodePlan>> {
    let mut out = vec![None];
    if plans {
        for slices in [1, 2, 4] {
            out.push(Some(DecodePlan::Mma {
                slices,
                read_only: false,
            }));
        }
        if m <= 8 {
            out.push(Some(DecodePlan::Mma {
                slices: 1,
                read_only: true,
            }));
        }
        if m == 1 {
            out.push(Some(DecodePlan::Naive));
        }
    }
    out
}

/// Records this suite writes.
pub fn planned(quick: bool, plans: bool) -> usize {
    shapes(quick).into_iter().map(|s| plans_at(s, plans).len()).sum()
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

/// The record of `plan` (`None`: the default) at `shape`, nothing measured yet.
fn base(shape: (usize, usize, usize), plan: Option<DecodePlan>, chosen: DecodePlan) -> Record {
    let (m, n, k) = shape;
    let imp = match plan {
        None => "gpukern".to_string(),
        Some(p) => format!("gpukern:{}", p.name()),
    };
    let mut r = Record::new(KERNEL, imp, shape_name(shape))
        .with("m", m)
        .with("n", n)
        .with("k", k)
        .with("math", "bf16")
        .with("layout", "w n x k")
        .with("plan", plan.unwrap_or(chosen).name());
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
    let chosen = DecodePlan::choose(m, n, k, b.gpu.multiprocessors()?, true);
    let plans = plans_at(shape, b.plans);
    if sink.expired() {
        for plan in plans {
            sink.item(base(shape, plan, chosen), || Err("time budget spent".into()))?;
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
    for plan in plans {
        sink.item(base(shape, plan, chosen), || {
            let record = base(shape, plan, chosen).with("sets", sets);
            let call = |(x, w, y): &mut Bufs| -> Res<()> {
                match plan {
                    None => gpu.matmul_decode_to(x, w, y)?,
                    Some(p) => gpu.matmul_decode_with(x, w, y, p)?,
                }
                Ok(())
            };
            call(&mut bufs[0])?;
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
            let stats = b.timer.measure(|i| call(&mut bufs[i % sets]))?;
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
