//! The FP8 product (`Gpu::matmul_fp8_into`, `kernels_gpu::matmul::fp8`) against the f64 product
//! of the dequantised operands (`matmul_fp8_reference`), every kernel reached through its plan:
//! `{sim,cuda}::matmul_fp8::<plan>::<out>::<scalings>::MxKxN` with `<plan>` one of
//! `fast-128x256`, `fast-128x128`, `promoted-128x128`, `block-128x128`,
//! `promoted-overlap-128x128`, `block-overlap-128x128`, `promoted-staged-128x128`,
//! `block-staged-128x128`, `promoted-128x192`, `fast-pair-128x256`, `promoted-pair-128x128`,
//! `block-pair-128x128` (`Fp8Plan::name`; the staged ones bf16 only, `n` a multiple of 8; the
//! 128 x 192 tile and the pairs bf16 only; a pair's simulator shapes have one row of tiles, its
//! second block's tile past `m`, and two: one whole pair),
//! `<out>` `bf16` or `f32`, `<scalings>` `tensor-tensor`, `row-row`, `tensor-row` or
//! `block-block`; `{sim,cuda}::matmul_fp8_auto::...` with the plan by shape;
//! `{sim,cuda}::matmul_fp8_e5m2::<plan>::bf16::<scalings>::MxKxN` (`B^T` in E5M2, quantised on the
//! host with the amax to 57344, for the four plans that have an E5M2 kernel);
//! `{sim,cuda}::matmul_fp8::planted` (the check fails on a dropped scale, a wrong block scale
//! index, a lost step of 128 along `k` and a pair's lost half of a tile of `B^T`), `{sim,cuda}::matmul_fp8::errors` and `global::matmul_fp8` (the free function
//! on a view).
//!
//! The bound per element: `g * sum_k |a_ik b_jk| + u (|c| + g sum_k |a_ik b_jk|)`, `g` the
//! accumulation's `Fp8Accumulation::error_factor(k)` and `u` the result's unit roundoff (`2^-8`
//! bf16, `2^-24` f32). Operands: uniform in `[-1, 1]` times a power of two per row (from `2^-3`
//! to `2^3`), so that per-row and per-block scales differ from the tensor's; quantised on the
//! host (`quantize_e4m3_reference`) and uploaded (`Gpu::upload_fp8`). Large products check a
//! sample of rows (every row through the last tile's) against the reference of those rows.

use gpukern::{
    E4M3, E5M2, Fp8Accumulation, Fp8Element, Fp8Matrix, Fp8Output, Fp8Plan, Fp8Scaling, Fp8Tile, Gpu, bf16,
    fp8_dequantize, quantize_e4m3_reference,
};
use libtest_mimic::Trial;
use ndarray::{Array2, Axis};
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};

/// A product's `(m, k, n)`.
type Shape = (usize, usize, usize);

/// Simulator shapes: one element with `k` 16; both edges ragged with three steps along `k`
/// (the last 16 wide) over two persistent blocks; a `k` not a multiple of 16 (the operands
/// padded into rows of 112 bytes).
const SIM_SHAPES: &[Shape] = &[(1, 16, 1), (130, 272, 136), (33, 100, 40)];
/// CUDA shapes: the simulator's, `k = 0`, a 1000^3 product, every edge ragged with a ragged `k`,
/// 4096^3.
const CUDA_SHAPES: &[Shape] = &[
    (1, 16, 1),
    (130, 272, 136),
    (33, 100, 40),
    (3, 0, 5),
    (1000, 1000, 1000),
    (4097, 4100, 4092),
    (4096, 4096, 4096),
];
/// A simulator shape for the 128 x 192 tile beside [`SIM_SHAPES`] (whose `n` of at most 136
/// leaves its last 56 columns unstored): `n` over two whole tiles and a ragged third, `m` and
/// `k` ragged.
const SIM_MID_SHAPE: Shape = (70, 136, 392);
/// Above this many rows, check a sample of them.
const FULL_CHECK_ROWS: usize = 1024;

/// The scalings of `A` and `B^T` a trial runs, and their name.
const PAIRS: [(&str, Fp8Scaling, Fp8Scaling); 3] = [
    ("tensor-tensor", Fp8Scaling::Tensor, Fp8Scaling::Tensor),
    ("row-row", Fp8Scaling::Row, Fp8Scaling::Row),
    ("tensor-row", Fp8Scaling::Tensor, Fp8Scaling::Row),
];
/// DeepGEMM's block scales.
const BLOCKS: (&str, Fp8Scaling, Fp8Scaling) =
    ("block-block", Fp8Scaling::Block1x128, Fp8Scaling::Block128x128);

/// Every trial of the FP8 product.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, shapes) in [(sim, SIM_SHAPES), (cuda, CUDA_SHAPES)] {
        for plan in Fp8Plan::ALL {
            let pairs: Vec<_> = if plan.block_scales {
                vec![BLOCKS]
            } else {
                PAIRS.to_vec()
            };
            let mid_shapes: Vec<Shape> = if target.prefix == "sim" && plan.tile == Fp8Tile::Mid {
                shapes.iter().copied().chain([SIM_MID_SHAPE]).collect()
            } else {
                shapes.to_vec()
            };
            for (pair_name, sa, sb) in pairs {
                for &shape in &mid_shapes {
                    let (m, k, n) = shape;
                    // The simulator runs the first shape in every pairing and the larger ones
                    // in one (each costs seconds there).
                    if target.prefix == "sim" && shape != shapes[0] && pair_name == "tensor-row" {
                        continue;
                    }
                    // The staged plans store C with the copy engine: `n` a multiple of 8 (the
                    // others are refused, `errors`); in the simulator the 130 x 272 x 136 product
                    // alone, whose two persistent blocks stage two tiles each.
                    if plan.staged && (n % 8 != 0 || target.prefix == "sim" && shape != SIM_SHAPES[1]) {
                        continue;
                    }
                    for out in ["bf16", "f32"] {
                        // The staged kernels, the 128 x 192 tile and the pairs write bf16 (f32 is
                        // refused, `errors`).
                        if (plan.staged || plan.pair || plan.tile == Fp8Tile::Mid) && out == "f32" {
                            continue;
                        }
                        // The f32 result at the small shapes only (the large ones' host reference
                        // costs seconds each; bf16 covers them).
                        if out == "f32" && m * n > 1 << 16 {
                            continue;
                        }
                        let name = format!("matmul_fp8::{}::{out}::{pair_name}::{m}x{k}x{n}", plan.name());
                        let run = Run {
                            shape,
                            scalings: (sa, sb),
                            how: How::Plan(plan),
                        };
                        trials.push(trial(target, &name, move |gpu, rng| match out {
                            "bf16" => product::<bf16>(gpu, rng, run),
                            _ => product::<f32>(gpu, rng, run),
                        }));
                    }
                }
            }
        }
        let auto: &[Shape] = if target.prefix == "sim" {
            &[(65, 144, 72)]
        } else {
            &[(2048, 2048, 2048), (8192, 1024, 8192)]
        };
        for &shape in auto {
            for accumulation in [Fp8Accumulation::Fast, Fp8Accumulation::Promoted] {
                let (m, k, n) = shape;
                let name = format!("matmul_fp8_auto::{}::row-row::{m}x{k}x{n}", accumulation.name());
                let run = Run {
                    shape,
                    scalings: (Fp8Scaling::Row, Fp8Scaling::Row),
                    how: How::Auto(accumulation),
                };
                trials.push(trial(target, &name, move |gpu, rng| {
                    product::<bf16>(gpu, rng, run)
                }));
            }
        }
        // `B^T` in E5M2: its three kernels, the first shapes and 4096^3 on CUDA.
        for p in E5M2_PLANS {
            let plan = Fp8Plan::ALL[p];
            for (pair_name, sa, sb) in [PAIRS[0], PAIRS[1]] {
                for &shape in shapes.iter().take(2).chain(if target.prefix == "cuda" {
                    &[(4096, 4096, 4096)][..]
                } else {
                    &[][..]
                }) {
                    let (m, k, n) = shape;
                    let name = format!("matmul_fp8_e5m2::{}::bf16::{pair_name}::{m}x{k}x{n}", plan.name());
                    let run = Run {
                        shape,
                        scalings: (sa, sb),
                        how: How::Plan(plan),
                    };
                    trials.push(trial(target, &name, move |gpu, rng| product_e5m2(gpu, rng, run)));
                }
            }
        }
        trials.push(trial(target, "matmul_fp8::planted", planted));
        trials.push(trial(target, "matmul_fp8::errors", |gpu, _| errors(gpu)));
    }
    trials.push(global_trial("matmul_fp8", global_fp8));
    trials
}

/// The free function (`gpukern::matmul_fp8`, per-row quantisation on the device, promoted
/// accumulation) on a view against the reference of the host's quantisation (the same bits).
fn global_fp8(rng: &mut StdRng) -> Check {
    let gpu = Gpu::global()?;
    if !runs_here(gpu)? {
        return Ok(());
    }
    let (m, k, n) = (37, 200, 45);
    let x = operand(rng, m, k + 3);
    let w = operand(rng, n, k);
    let xv = x.slice(ndarray::s![.., ..k]);
    let got = gpukern::matmul_fp8(&xv, &w)?.mapv(|v| f64::from(v.to_f32()));
    let (ha, hb) = (
        Host::new(&xv.to_owned(), Fp8Scaling::Row),
        Host::new(&w, Fp8Scaling::Row),
    );
    let rows: Vec<usize> = (0..m).collect();
    let reference = reference_rows(&ha.dequantized(), &hb.dequantized(), &rows);
    let g = Fp8Accumulation::Promoted.error_factor(k);
    match bound_violation(&got, &rows, (&reference.0, &reference.1), g, unit_of::<bf16>()) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("gpukern::matmul_fp8 {m}x{k}x{n}: {e}").into()),
    }
}

/// How a trial picks its kernel.
#[derive(Clone, Copy, Debug)]
enum How {
    /// This plan, whatever the shape.
    Plan(Fp8Plan),
    /// The plan by shape for this accumulation.
    Auto(Fp8Accumulation),
}

/// One product a trial runs.
#[derive(Clone, Copy, Debug)]
struct Run {
    shape: Shape,
    scalings: (Fp8Scaling, Fp8Scaling),
    how: How,
}

impl How {
    /// The accumulation whose bound applies.
    fn accumulation(self, block: bool) -> Fp8Accumulation {
        match self {
            How::Plan(p) => p.accumulation,
            How::Auto(_) if block => Fp8Accumulation::Promoted,
            How::Auto(a) => a,
        }
    }
}

/// Whether `gpu` runs the FP8 kernels; if not, checks that a product is refused with the
/// `sm_90a` error (`Ok(false)`).
fn runs_here(gpu: &Gpu) -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    if gpu.has_wgmma() {
        return Ok(true);
    }
    let q = Array2::from_elem((8, 16), E4M3::ZERO);
    let (a, b) = (
        gpu.upload_fp8(&q, &[1.0], Fp8Scaling::Tensor)?,
        gpu.upload_fp8(&q, &[1.0], Fp8Scaling::Tensor)?,
    );
    match gpu.matmul_fp8(&a, &b, Fp8Accumulation::Fast) {
        Err(gpukern::Error::InvalidArgument { detail, .. }) if detail.contains("sm_90a") => Ok(false),
        other => Err(format!(
            "an FP8 product off compute capability 9.0 gave {:?}",
            other.map(|_| ())
        )
        .into()),
    }
}

/// A random `rows x cols` matrix: uniform in `[-1, 1]`, row `i` times `2^(i % 7 - 3)`.
fn operand(rng: &mut StdRng, rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, _)| {
        rng.random_range(-1.0f32..1.0) * 2f32.powi((i % 7) as i32 - 3)
    })
}

/// An operand quantised on the host: its FP8 values (E4M3 unless named), scales and scaling.
struct Host<T = E4M3> {
    q: Array2<T>,
    scales: Vec<f32>,
    scaling: Fp8Scaling,
}

impl Host {
    fn new(x: &Array2<f32>, scaling: Fp8Scaling) -> Host {
        let (q, scales) = quantize_e4m3_reference(x, scaling);
        Host { q, scales, scaling }
    }
}

impl Host<E5M2> {
    /// `x` in E5M2 with amax scales (the amax to 57344, E5M2's largest finite value), on the
    /// host: the E5M2 operand of the `.e4m3.e5m2` kernels.
    fn e5m2(x: &Array2<f32>, scaling: Fp8Scaling) -> Host<E5M2> {
        let (rows, cols) = x.dim();
        let mut amax = vec![0.0f32; scaling.scale_count(rows, cols)];
        for ((i, j), &v) in x.indexed_iter() {
            let s = scaling.scale_index(i, j, cols);
            amax[s] = amax[s].max(v.abs());
        }
        let scales: Vec<f32> = amax
            .iter()
            .map(|&a| if a > 0.0 { a / 57344.0 } else { 1.0 })
            .collect();
        let q = Array2::from_shape_fn((rows, cols), |(i, j)| {
            E5M2::from_f32(x[(i, j)] / scales[scaling.scale_index(i, j, cols)])
        });
        Host { q, scales, scaling }
    }
}

impl<T: Fp8Element> Host<T> {
    fn upload(&self, gpu: &Gpu) -> gpukern::Result<Fp8Matrix<T>> {
        gpu.upload_fp8(&self.q, &self.scales, self.scaling)
    }
    fn dequantized(&self) -> Array2<f64> {
        fp8_dequantize(&self.q, &self.scales, self.scaling)
    }
}

/// The E5M2 trials' plans (`B^T` in E5M2 has these kernels, bf16 result).
const E5M2_PLANS: [usize; 4] = [0, 1, 2, 4];

/// The rows a check covers: all of a small product; else the first and last 130 rows and every
/// 61st in between.
fn checked_rows(m: usize) -> Vec<usize> {
    if m <= FULL_CHECK_ROWS {
        return (0..m).collect();
    }
    let mut rows: Vec<usize> = (0..130)
        .chain(m - 130..m)
        .chain((130..m - 130).step_by(61))
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// The reference of `rows` of `A B` (`da`, `db` dequantised, `db` as `B^T`), and beside it
/// `sum_k |a b|`.
fn reference_rows(da: &Array2<f64>, db: &Array2<f64>, rows: &[usize]) -> (Array2<f64>, Array2<f64>) {
    let a = da.select(Axis(0), rows);
    (a.dot(&db.t()), a.mapv(f64::abs).dot(&db.mapv(f64::abs).t()))
}

/// The worst `|got - want| / bound` over the checked rows (`got` the whole `m x n` result as
/// f64), failing above 1 with the element; NaN fails.
fn bound_violation(
    got: &Array2<f64>,
    rows: &[usize],
    (want, mag): (&Array2<f64>, &Array2<f64>),
    g: f64,
    u: f64,
) -> Result<f64, String> {
    let mut worst = 0.0f64;
    for (r, &i) in rows.iter().enumerate() {
        for j in 0..want.ncols() {
            let (w, s) = (want[(r, j)], mag[(r, j)]);
            let bound = g * s + u * (w.abs() + g * s) + f64::MIN_POSITIVE;
            let e = (got[(i, j)] - w).abs();
            // NaN fails too.
            if e.is_nan() || e > bound {
                return Err(format!(
                    "element ({i}, {j}) = {}, want {w} (error {e:.3e}, bound {bound:.3e}, sum |ab| {s:.3e})",
                    got[(i, j)]
                ));
            }
            worst = worst.max(e / bound);
        }
    }
    Ok(worst)
}

/// The unit roundoff of a result type.
fn unit_of<O: ResultElement>() -> f64 {
    if std::mem::size_of::<O>() == 2 {
        1.0 / 256.0
    } else {
        1.0 / 16_777_216.0
    }
}

/// A device result as f64.
fn to_f64<O: ResultElement>(c: &gpukern::DeviceMatrix<O>) -> gpukern::Result<Array2<f64>> {
    Ok(c.to_array()?.mapv(O::widen))
}

/// One product into a poisoned (NaN) output, checked within its bound.
fn product<O: ResultElement>(gpu: &Gpu, rng: &mut StdRng, run: Run) -> Check {
    let (m, k, n) = run.shape;
    let (sa, sb) = run.scalings;
    let (a, b) = (operand(rng, m, k), operand(rng, n, k));
    product_of::<O, E4M3>(gpu, run, Host::new(&a, sa), Host::new(&b, sb))
}

/// [`product`] with `B^T` in E5M2.
fn product_e5m2(gpu: &Gpu, rng: &mut StdRng, run: Run) -> Check {
    let (m, k, n) = run.shape;
    let (sa, sb) = run.scalings;
    let (a, b) = (operand(rng, m, k), operand(rng, n, k));
    product_of::<bf16, E5M2>(gpu, run, Host::new(&a, sa), Host::e5m2(&b, sb))
}

/// One product of quantised operands into a poisoned output, checked within its bound.
fn product_of<O: ResultElement, B: Fp8Element>(gpu: &Gpu, run: Run, ha: Host, hb: Host<B>) -> Check {
    if !runs_here(gpu)? {
        return Ok(());
    }
    let (m, k, n) = run.shape;
    let sa = run.scalings.0;
    let (a, b) = (ha.upload(gpu)?, hb.upload(gpu)?);
    let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), O::nan_value()))?;
    match run.how {
        How::Plan(p) => gpu.matmul_fp8_plan_into(&a, &b, &mut c, p)?,
        How::Auto(acc) => gpu.matmul_fp8_into(&a, &b, &mut c, acc)?,
    }
    let got = to_f64(&c)?;
    let rows = checked_rows(m);
    let (want, mag) = reference_rows(&ha.dequantized(), &hb.dequantized(), &rows);
    let g = run.how.accumulation(sa.is_block()).error_factor(k);
    match bound_violation(&got, &rows, (&want, &mag), g, unit_of::<O>()) {
        Ok(worst) => {
            if m * n >= 1 << 20 {
                println!("{m}x{k}x{n} {:?}: worst error / bound {worst:.3}", run.how);
            }
            Ok(())
        }
        Err(e) => Err(format!("{m}x{k}x{n} {:?}: {e}", run.how).into()),
    }
}

/// The check fails on planted wrong results, the results of wrong kernels computed on the host:
/// the product without `B^T`'s scales, with each step's block scales of `B^T` taken from the
/// next step (a wrong block scale index), and without the first step of 128 along `k` (a lost
/// `k` tile), while the kernel's own result passes; for every promoted and block plan and the
/// fast 128 x 128 one, at a `k` of four steps (where the fast bound is tight enough to see one
/// step lost: at `k` = 4096 the fast bound, a worst case, is as wide as a lost step's typical
/// size) and `n` over two blocks of 128. Column block `s` of the operands is scaled by
/// `2^(s - 1)`, so that the steps' block scales differ.
fn planted(gpu: &Gpu, rng: &mut StdRng) -> Check {
    if !runs_here(gpu)? {
        return Ok(());
    }
    let (m, k, n) = (70, 512, 136);
    let blocky = |rng: &mut StdRng, rows: usize| {
        let mut x = operand(rng, rows, k);
        for ((_, j), v) in x.indexed_iter_mut() {
            *v *= 2f32.powi((j / 128) as i32 - 1);
        }
        x
    };
    let mut failures = Vec::new();
    for p in [1, 2, 3, 4, 5] {
        let plan = Fp8Plan::ALL[p];
        let (sa, sb) = if plan.block_scales {
            (Fp8Scaling::Block1x128, Fp8Scaling::Block128x128)
        } else {
            (Fp8Scaling::Row, Fp8Scaling::Row)
        };
        let (ha, hb) = (Host::new(&blocky(rng, m), sa), Host::new(&blocky(rng, n), sb));
        let mut c = gpu.zeros_matrix_of::<f32>(m, n)?;
        gpu.matmul_fp8_plan_into(&ha.upload(gpu)?, &hb.upload(gpu)?, &mut c, plan)?;
        let got = to_f64(&c)?;
        let rows: Vec<usize> = (0..m).collect();
        let (da, db) = (ha.dequantized(), hb.dequantized());
        let reference = reference_rows(&da, &db, &rows);
        let g = plan.accumulation.error_factor(k);
        let u = unit_of::<f32>();
        let check = |got: &Array2<f64>| bound_violation(got, &rows, (&reference.0, &reference.1), g, u);
        if let Err(e) = check(&got) {
            failures.push(format!("{}: the kernel's own result fails: {e}", plan.name()));
        }
        let wrong = |what: &str, da: &Array2<f64>, db: &Array2<f64>, failures: &mut Vec<String>| {
            let (planted, _) = reference_rows(da, db, &rows);
            if check(&planted).is_ok() {
                failures.push(format!("{}: a result {what} passed", plan.name()));
            }
        };
        // A dropped scale: B^T's.
        let ones = vec![1.0; hb.scales.len()];
        wrong(
            "without B^T's scales",
            &da,
            &fp8_dequantize(&hb.q, &ones, sb),
            &mut failures,
        );
        if plan.block_scales {
            // A wrong block scale index: step s of B^T with the scale of step s + 1.
            let blocks = k.div_ceil(128);
            let shifted: Vec<f32> = (0..hb.scales.len())
                .map(|i| hb.scales[i - i % blocks + (i % blocks + 1) % blocks])
                .collect();
            wrong(
                "with B^T's block scales of the next step",
                &da,
                &fp8_dequantize(&hb.q, &shifted, sb),
                &mut failures,
            );
        }
        // A lost step along k: the first 128 columns of A zeroed.
        let mut lost = da.clone();
        lost.slice_mut(ndarray::s![.., ..128]).fill(0.0);
        wrong("without the first 128 of k", &lost, &db, &mut failures);
        // A pair's lost multicast: the second half of each 128-row tile of B^T (the other
        // block's copy) zeroed.
        let mut half = db.clone();
        for (j, mut row) in half.axis_iter_mut(Axis(0)).enumerate() {
            if j % 128 >= 64 {
                row.fill(0.0);
            }
        }
        wrong(
            "without the other block's half of each tile of B^T",
            &da,
            &half,
            &mut failures,
        );
    }
    all_passed(failures)
}

/// Clear errors: `k` differing, block scales on one operand, a wrong scale count, a plan for
/// other scales.
fn errors(gpu: &Gpu) -> Check {
    let up = |rows: usize, cols: usize, scaling: Fp8Scaling| {
        let q = Array2::from_elem((rows, cols), E4M3::ZERO);
        gpu.upload_fp8(&q, &vec![1.0; scaling.scale_count(rows, cols)], scaling)
    };
    let mut failures = Vec::new();
    let mut c = gpu.zeros_matrix_of::<bf16>(8, 8)?;
    let a = up(8, 32, Fp8Scaling::Tensor)?;
    let is_invalid = |r: gpukern::Result<()>, what: &str, needle: &str| match r {
        Err(gpukern::Error::InvalidArgument { detail, .. }) if detail.contains(needle) => None,
        other => Some(format!("{what}: {other:?}")),
    };
    match gpu.matmul_fp8_into(&a, &up(8, 16, Fp8Scaling::Tensor)?, &mut c, Fp8Accumulation::Fast) {
        Err(gpukern::Error::ShapeMismatch { .. }) => {}
        other => failures.push(format!("k differing: {other:?}")),
    }
    failures.extend(is_invalid(
        gpu.matmul_fp8_into(
            &a,
            &up(8, 32, Fp8Scaling::Block128x128)?,
            &mut c,
            Fp8Accumulation::Fast,
        ),
        "block scales on B^T only",
        "Block1x128",
    ));
    failures.extend(is_invalid(
        gpu.upload_fp8(
            &Array2::from_elem((8, 32), E4M3::ZERO),
            &[1.0, 2.0],
            Fp8Scaling::Tensor,
        )
        .map(|_| ()),
        "two scales for a tensor",
        "scales",
    ));
    if gpu.has_wgmma() {
        let b5 = gpu.upload_fp8(
            &Array2::from_elem((8, 32), E5M2::ZERO),
            &[1.0],
            Fp8Scaling::Tensor,
        )?;
        let mut c32 = gpu.zeros_matrix_of::<f32>(8, 8)?;
        failures.extend(is_invalid(
            gpu.matmul_fp8_into(&a, &b5, &mut c32, Fp8Accumulation::Fast),
            "E5M2 B^T into f32",
            "E5M2",
        ));
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &up(8, 32, Fp8Scaling::Tensor)?, &mut c, Fp8Plan::ALL[3]),
            "the block plan on tensor scales",
            "plan",
        ));
        // The staged plans: a bf16 result of E4M3 operands whose rows are whole 16 bytes.
        let staged = Fp8Plan::ALL[6];
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &up(8, 32, Fp8Scaling::Tensor)?, &mut c32, staged),
            "a staged plan into f32",
            "bf16 result",
        ));
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &b5, &mut c, staged),
            "a staged plan with E5M2 B^T",
            "E4M3 operands",
        ));
        let mut ragged = gpu.zeros_matrix_of::<bf16>(8, 12)?;
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &up(12, 32, Fp8Scaling::Tensor)?, &mut ragged, staged),
            "a staged plan with n = 12",
            "multiple of 8",
        ));
        // One side of that boundary: n = 16 runs.
        let mut even = gpu.zeros_matrix_of::<bf16>(8, 16)?;
        if let Err(e) = gpu.matmul_fp8_plan_into(&a, &up(16, 32, Fp8Scaling::Tensor)?, &mut even, staged) {
            failures.push(format!("a staged plan with n = 16: {e}"));
        }
        // The pairs: a bf16 result of E4M3 operands.
        let pair = Fp8Plan::ALL[10];
        assert!(pair.pair, "Fp8Plan::ALL's order");
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &up(8, 32, Fp8Scaling::Tensor)?, &mut c32, pair),
            "a pair plan into f32",
            "bf16 result",
        ));
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &b5, &mut c, pair),
            "a pair plan with E5M2 B^T",
            "E4M3 operands",
        ));
        // The 128 x 192 tile: a bf16 result of E4M3 operands.
        let mid = Fp8Plan::ALL[8];
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &up(8, 32, Fp8Scaling::Tensor)?, &mut c32, mid),
            "the 128 x 192 plan into f32",
            "bf16 result",
        ));
        failures.extend(is_invalid(
            gpu.matmul_fp8_plan_into(&a, &b5, &mut c, mid),
            "the 128 x 192 plan with E5M2 B^T",
            "E4M3 operands",
        ));
    }
    all_passed(failures)
}

/// A result type of the trials: its NaN (the poison) and its value in f64.
trait ResultElement: Fp8Output {
    fn nan_value() -> Self;
    fn widen(self) -> f64;
}
impl ResultElement for bf16 {
    fn nan_value() -> bf16 {
        bf16::NAN
    }
    fn widen(self) -> f64 {
        f64::from(self.to_f32())
    }
}
impl ResultElement for f32 {
    fn nan_value() -> f32 {
        f32::NAN
    }
    fn widen(self) -> f64 {
        f64::from(self)
    }
}
