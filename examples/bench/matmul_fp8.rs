//! FP8 products (issue 36): `C = dequant(A) dequant(B^T)^T` with E4M3 `A` (`m x k`) and `B^T`
//! (`n x k`), the result bf16: gpukern's `gpu.matmul_fp8_into(a, bt, c, accumulation)` (the
//! plan by shape) with scales per tensor and per row, fast and promoted accumulation, and block
//! scales (`1 x 128` of `A`, `128 x 128` of `B^T`, always promoted). Peers:
//! `bench/peers_matmul_fp8.py` (`torch._scaled_mm`, cuBLASLt and torch's row-wise kernel).
//!
//! Records: `kernel` `matmul_fp8`, keys `m`, `n`, `k`, `scaling` (`tensor`, `row`, `block`),
//! `accumulation` (`fast`, `promoted`), `plan` ([`Fp8Plan::name`]). Counts: `2 m n k` flops;
//! minimum traffic `m k + n k + 2 m n` bytes.
//!
//! Inputs: uniform in [-1, 1), quantised on the host with the record's scaling
//! (`quantize_e4m3_reference`). The check: the relative error norm over 64 rows by 256 columns of
//! `C` spread over the result against the f64 product of the dequantised operands (the same
//! reference as the CUDA trials), tolerance three bf16 unit roundoffs (3 / 256) for promoted
//! accumulation and eight (8 / 256) for fast, whose accumulators keep fewer bits: a dropped
//! scale fails it by orders of magnitude (`tests/kernels/matmul/fp8_product.rs` checks every
//! element against the per-element bound and plants a lost step of `k`).

use gpukern::{
    DeviceMatrix, Fp8Accumulation, Fp8Matrix, Fp8Plan, Fp8Scaling, bf16, fp8_dequantize,
    quantize_e4m3_reference,
};
use ndarray::{Array2, Axis};

use crate::Bench;
use crate::data::random_vec;
use crate::record::{Check, Record, Res, Sink};

/// The `kernel` of every record here.
const KERNEL: &str = "matmul_fp8";
/// Rows and columns of `C` checked per shape.
const CHECKED_ROWS: usize = 64;
const CHECKED_COLUMNS: usize = 256;

/// The scalings of `A` and `B^T`, and the accumulation.
type Variant = (Fp8Scaling, Fp8Scaling, Fp8Accumulation);

/// The variants timed at each shape.
const VARIANTS: [Variant; 5] = [
    (Fp8Scaling::Tensor, Fp8Scaling::Tensor, Fp8Accumulation::Fast),
    (Fp8Scaling::Tensor, Fp8Scaling::Tensor, Fp8Accumulation::Promoted),
    (Fp8Scaling::Row, Fp8Scaling::Row, Fp8Accumulation::Fast),
    (Fp8Scaling::Row, Fp8Scaling::Row, Fp8Accumulation::Promoted),
    (
        Fp8Scaling::Block1x128,
        Fp8Scaling::Block128x128,
        Fp8Accumulation::Promoted,
    ),
];

/// The suite's shapes `(m, n, k)`.
pub fn shapes(quick: bool) -> Vec<(usize, usize, usize)> {
    crate::suite::shapes3(KERNEL, quick)
}

/// The runs timed at a shape: each variant with the plan by shape (`None`), and with `--plans`
/// each kernel forced ([`Fp8Plan::ALL`]: tensor scales, or block scales for the block plan) that
/// `wants` (`--only-plans`).
fn runs(plans: bool, wants: impl Fn(&str) -> bool) -> Vec<(Variant, Option<Fp8Plan>)> {
    let mut out: Vec<(Variant, Option<Fp8Plan>)> = VARIANTS.iter().map(|&v| (v, None)).collect();
    if plans {
        for plan in Fp8Plan::ALL.into_iter().filter(|p| wants(p.name())) {
            let v = if plan.block_scales {
                VARIANTS[4]
            } else {
                (Fp8Scaling::Tensor, Fp8Scaling::Tensor, plan.accumulation)
            };
            out.push((v, Some(plan)));
        }
    }
    out
}

/// Records this suite writes.
pub fn planned(quick: bool, plans: bool) -> usize {
    shapes(quick).len() * runs(plans, |_| true).len()
}

/// The shape's name: `MxNxK`.
fn shape_name((m, n, k): (usize, usize, usize)) -> String {
    format!("{m}x{n}x{k}")
}

/// The record of one variant at `shape` (`forced`: the plan was forced, `gpukern:<plan>`),
/// nothing measured yet.
fn base(shape: (usize, usize, usize), (sa, _, acc): Variant, plan: Fp8Plan, forced: bool) -> Record {
    let (m, n, k) = shape;
    let imp = if forced {
        format!("gpukern:{}", plan.name())
    } else {
        "gpukern".to_string()
    };
    let mut r = Record::new(KERNEL, imp, shape_name(shape))
        .with("m", m)
        .with("n", n)
        .with("k", k)
        .with("math", "e4m3")
        .with("out", "bf16")
        .with("layout", "b n x k")
        .with("scaling", sa.name())
        .with("accumulation", acc.name())
        .with("plan", plan.name());
    r.dtype = "e4m3";
    r
}

/// Every variant at one shape.
fn rows(b: &mut Bench, sink: &mut Sink, shape: (usize, usize, usize)) -> Res<()> {
    let (m, n, k) = shape;
    let sms = b.gpu.multiprocessors()?;
    let plan_of = |(v, forced): (Variant, Option<Fp8Plan>)| {
        let (sa, sb, acc) = v;
        // The result is bf16, which has staged kernels.
        forced.unwrap_or_else(|| Fp8Plan::choose((m, n), (sa, sb), acc, sms, true))
    };
    let runs = runs(b.plans, |name| b.wants_plan(name));
    if sink.expired() {
        for &(v, forced) in &runs {
            sink.item(base(shape, v, plan_of((v, forced)), forced.is_some()), || {
                Err("time budget spent".into())
            })?;
        }
        return Ok(());
    }
    sink.note(&format!("{KERNEL} {}: preparing inputs", shape_name(shape)));
    let x = Array2::from_shape_vec((m, k), random_vec(m * k, -1.0, 1.0))?;
    let w = Array2::from_shape_vec((n, k), random_vec(n * k, -1.0, 1.0))?;
    let check_rows: Vec<usize> = (0..m).step_by(m.div_ceil(CHECKED_ROWS).max(1)).collect();
    let check_cols: Vec<usize> = (0..n).step_by(n.div_ceil(CHECKED_COLUMNS).max(1)).collect();
    let (bytes, flops) = (
        crate::suite::bytes(KERNEL, &[("m", m), ("n", n), ("k", k)]),
        crate::suite::flops(KERNEL, &[("m", m), ("n", n), ("k", k)]),
    );
    let gpu = b.gpu.clone();
    for &(v, forced) in &runs {
        let (sa, sb, acc) = v;
        let plan = plan_of((v, forced));
        sink.item(base(shape, v, plan, forced.is_some()), || {
            let (qa, scales_a) = quantize_e4m3_reference(&x, sa);
            let (qb, scales_b) = quantize_e4m3_reference(&w, sb);
            let reference = {
                let da = fp8_dequantize(
                    &qa.select(Axis(0), &check_rows),
                    &row_scales(&scales_a, sa, &check_rows, k),
                    sa,
                );
                let db = fp8_dequantize(&qb, &scales_b, sb).select(Axis(0), &check_cols);
                da.dot(&db.t())
            };
            let a: Fp8Matrix = gpu.upload_fp8(&qa, &scales_a, sa)?;
            let bt: Fp8Matrix = gpu.upload_fp8(&qb, &scales_b, sb)?;
            let mut c: DeviceMatrix<bf16> = gpu.upload_matrix(&Array2::from_elem((m, n), bf16::NAN))?;
            let call = |c: &mut DeviceMatrix<bf16>| -> Res<()> {
                match forced {
                    None => gpu.matmul_fp8_into(&a, &bt, c, acc)?,
                    Some(p) => gpu.matmul_fp8_plan_into(&a, &bt, c, p)?,
                }
                Ok(())
            };
            call(&mut c)?;
            let out_all = c.to_array()?;
            let out: Vec<f32> = check_rows
                .iter()
                .flat_map(|&i| check_cols.iter().map(move |&j| (i, j)))
                .map(|(i, j)| out_all[(i, j)].to_f32())
                .collect();
            let want: Vec<f32> = reference.iter().map(|&v| v as f32).collect();
            let tol = match acc {
                Fp8Accumulation::Fast => 8.0 / 256.0,
                Fp8Accumulation::Promoted => 3.0 / 256.0,
            };
            let check = Check::new(&out, &want, tol, "cpu_f64_dequantized_sample");
            let record = base(shape, v, plan, forced.is_some())
                .checked(&check)
                .with("checked_rows", check_rows.len())
                .with("checked_columns", check_cols.len());
            if !check.passed() {
                return Ok(record);
            }
            let stats = b.timer.measure(|_| call(&mut c))?;
            Ok(record.timed(&stats, Some(bytes), Some(flops)))
        })?;
    }
    Ok(())
}

/// The scales of the rows `rows` of a matrix of `cols` columns with `scaling`: what
/// [`fp8_dequantize`] takes for those rows alone (per-row and `1 x 128` scales are per row; a
/// tensor's scale is shared).
fn row_scales(scales: &[f32], scaling: Fp8Scaling, rows: &[usize], cols: usize) -> Vec<f32> {
    match scaling {
        Fp8Scaling::Tensor | Fp8Scaling::Block128x128 => {
            // `Block128x128` is never on `A` here; a tensor's one scale stays.
            scales.to_vec()
        }
        Fp8Scaling::Row => rows.iter().map(|&i| scales[i]).collect(),
        Fp8Scaling::Block1x128 => {
            let per_row = scaling.scale_count(1, cols);
            rows.iter()
                .flat_map(|&i| scales[i * per_row..(i + 1) * per_row].iter().copied())
                .collect()
        }
    }
}

/// Every shape of the suite.
pub fn matmul_fp8(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for shape in shapes(b.quick) {
        if !b.wants(&shape_name(shape)) {
            continue;
        }
        rows(b, sink, shape)?;
    }
    Ok(())
}
