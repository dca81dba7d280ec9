//! The half-precision matmul (bf16, f16 operands; the result in the operands' type or f32)
//! against `cpu::matmul_f64` of the same operands: `{sim,cuda}::matmul_half::MxKxN` (every
//! kernel: both copy widths, both result types, both element types), `global::matmul_half` (the
//! free functions on views), and `matmul_half_check::planted_kernels_fail` (the check refuses a
//! kernel that drops one term of `k` or reads 4-bit operands at k = 4097).
//!
//! The check, per element: `|C - C_ref| <= u_out |C_ref| + eta + ACC_FACTOR * terms(k) * 2^-24 *
//! sum_l |A(i,l) B(l,j)|`, with `u_out` the unit roundoff of the result type (`2^-8` bf16,
//! `2^-11` f16, 0 for f32: the final rounding, exact bound), `eta` half its subnormal spacing
//! (`subnormal_rounding`: the final rounding of a subnormal result) and `terms(k) = max(sqrt(k),
//! min(k, 16))`: the f32 sums' error on random data grows like `sqrt(k)` (the worst case `γ_k`
//! grows like `k`, and a kernel dropping a whole term of `k = 4097` stays under it).

use gpukern::ops::matmul::HalfTile;
use gpukern::{Element, Gpu, MatmulElement, MatmulOutput, bf16, cpu, f16};
use libtest_mimic::{Failed, Trial};
use ndarray::{Array2, ArrayView2, s};
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_matrix;
use crate::common::trial::{Target, global_trial, trial};

/// Shapes `(m, k, n)` in the simulator: single elements, ragged edges, odd `k` (2-byte loads),
/// and shapes with `k`, `n` multiples of 8 (16-byte copies, pair stores) over several blocks.
const SIM_SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (17, 9, 33),
    (65, 131, 47),
    (3, 7, 5),
    (130, 40, 136),
    (33, 64, 16),
];

/// Shapes on CUDA: the simulator's, then 4097x4093x4095 (2-byte loads, every edge ragged),
/// 1024^3 and 1000x4096x1000 (16-byte copies, deep `k`).
const CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (17, 9, 33),
    (65, 131, 47),
    (3, 7, 5),
    (130, 40, 136),
    (33, 64, 16),
    (1024, 1024, 1024),
    (1000, 4096, 1000),
    (4097, 4093, 4095),
];

/// Factor on the `sqrt(k)`-scaled error of the f32 sums (see the module documentation).
const ACC_FACTOR: f64 = 4.0;

/// Every trial of the half-precision matmul.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, shapes) in [(sim, SIM_SHAPES), (cuda, CUDA_SHAPES)] {
        for &shape in shapes {
            let (m, k, n) = shape;
            trials.push(trial(
                target,
                &format!("matmul_half::{m}x{k}x{n}"),
                move |gpu, rng| half_shape(gpu, rng, shape),
            ));
        }
        trials.push(trial(target, "matmul_half::errors", |gpu, _| half_errors(gpu)));
    }
    trials.push(global_trial("matmul_half", global_half));
    trials.push(Trial::test(
        "matmul_half_check::planted_kernels_fail",
        planted_kernels_fail,
    ));
    trials
}

/// A random `rows x cols` matrix of `T` (uniform in [-1, 1), rounded to `T`).
pub(super) fn random_of<T: Copy>(
    rng: &mut StdRng,
    rows: usize,
    cols: usize,
    from: fn(f32) -> T,
) -> Array2<T> {
    random_matrix(rng, rows, cols).mapv(from)
}

/// Half the spacing of the subnormal results of the type whose unit roundoff is `u_out`
/// (`u_out` times its smallest normal): the final rounding's absolute error where the result is
/// subnormal, which `u_out |C_ref|` alone does not cover (a 1 x 1 x 1 f16 product of
/// `-1.7e-5` rounds to the subnormal spacing `2^-24`). `2^-25` for f16, `2^-134` for bf16, 0
/// for f32 (exact).
fn subnormal_rounding(u_out: f64) -> f64 {
    if u_out == f64::powi(2.0, -11) {
        f64::powi(2.0, -25)
    } else if u_out == f64::powi(2.0, -8) {
        f64::powi(2.0, -134)
    } else {
        0.0
    }
}

/// The bound of the module documentation for a product over `k` terms into a result of unit
/// roundoff `u_out`, as a function of an element's reference `w` and its sum of `|A B|` `s`:
/// `u_out |w| + eta + ACC_FACTOR terms(k) 2^-24 s`.
pub(super) fn element_bound(k: usize, u_out: f64) -> impl Fn(f64, f64) -> f64 {
    let terms = (k as f64).sqrt().max(k.min(16) as f64);
    let acc = ACC_FACTOR * terms * f64::powi(2.0, -24);
    let eta = subnormal_rounding(u_out);
    move |w, s| u_out * w.abs() + eta + acc * s
}

/// The first element of `got` (an `m x n` result, widened to f64) outside the bound of the
/// module documentation around `want` (`cpu::matmul_f64`), with `abs` the sums of `|A B|` and
/// `u_out` the result type's unit roundoff; `None` when every element is inside.
pub(super) fn half_violation(
    got: &[f64],
    want: &Array2<f64>,
    abs: &Array2<f64>,
    k: usize,
    u_out: f64,
) -> Option<String> {
    let bound_of = element_bound(k, u_out);
    let (want, abs) = (want.as_slice()?, abs.as_slice()?);
    if got.len() != want.len() {
        return Some(format!("{} elements, want {}", got.len(), want.len()));
    }
    got.iter()
        .zip(want)
        .zip(abs)
        .enumerate()
        .find_map(|(i, ((&g, &w), &s))| {
            let bound = bound_of(w, s);
            // `!(x <= b)` so that a NaN fails.
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            let outside = !((g - w).abs() <= bound);
            outside.then(|| {
                format!(
                    "element {i}: {g} against {w}, error {:.3e} > bound {bound:.3e}",
                    (g - w).abs()
                )
            })
        })
}

/// Unit roundoff of a result type (its final rounding).
fn unit_roundoff<O: MatmulElement>() -> f64 {
    match O::NAME {
        "bf16" => f64::powi(2.0, -8),
        "f16" => f64::powi(2.0, -11),
        _ => 0.0,
    }
}

/// The reference `C_ref` and `sum_l |A(i,l) B(l,j)|` of `a * b`.
pub(super) fn references<T: Copy + Into<f64>>(
    a: &ArrayView2<T>,
    b: &ArrayView2<T>,
) -> gpukern::Result<(Array2<f64>, Array2<f64>)> {
    let want = cpu::matmul_f64(a, b)?;
    let abs = cpu::matmul_f64(
        &a.mapv(|x| Into::<f64>::into(x).abs()),
        &b.mapv(|x| Into::<f64>::into(x).abs()),
    )?;
    Ok((want, abs))
}

/// One `m x k` times `k x n` product in `T` through `Gpu::matmul` (result `T`),
/// `Gpu::matmul_f32_out` (f32), `Gpu::matmul_to` into NaN-filled results of each type, and the
/// same through `Gpu::matmul_to_with(.., HalfTile::Square)` (the `mma.sync` kernels).
fn check_type<T>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (m, k, n): (usize, usize, usize),
    from: fn(f32) -> T,
    failures: &mut Vec<String>,
) -> Check
where
    T: MatmulElement + Into<f64>,
    f32: MatmulOutput<T>,
{
    let (a, b) = (random_of(rng, m, k, from), random_of(rng, k, n, from));
    let (want, abs) = references(&a.view(), &b.view())?;
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let what = |variant: &str| format!("{}: {m}x{k}x{n} {variant}", T::NAME);
    let mut check = |variant: &str, got: Vec<f64>, u_out: f64| {
        if let Some(e) = half_violation(&got, &want, &abs, k, u_out) {
            failures.push(format!("{}: {e}", what(variant)));
        }
    };
    let c = gpu.matmul(&da, &db)?;
    check_dim(&what("matmul"), c.dim(), (m, n))?;
    check("matmul", widen(&c.to_array()?), unit_roundoff::<T>());
    let c = gpu.matmul_f32_out(&da, &db)?;
    check_dim(&what("matmul_f32_out"), c.dim(), (m, n))?;
    check("matmul_f32_out", widen(&c.to_array()?), 0.0);
    // Into outputs filled with NaN: every element must be written.
    let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN))?;
    gpu.matmul_to(&da, &db, &mut c)?;
    check("matmul_to f32 (NaN-filled)", widen(&c.to_array()?), 0.0);
    let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), from(f32::NAN)))?;
    gpu.matmul_to(&da, &db, &mut c)?;
    check(
        "matmul_to (NaN-filled)",
        widen(&c.to_array()?),
        unit_roundoff::<T>(),
    );
    // The `mma.sync` kernels forced, whatever the plan picks here (on a Hopper GPU the
    // warp-specialised `wgmma` kernel takes the shapes it can): every GPU's path, both results.
    let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN))?;
    gpu.matmul_to_with(&da, &db, &mut c, HalfTile::Square)?;
    check("mma.sync f32 (NaN-filled)", widen(&c.to_array()?), 0.0);
    let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), from(f32::NAN)))?;
    gpu.matmul_to_with(&da, &db, &mut c, HalfTile::Square)?;
    check(
        "mma.sync (NaN-filled)",
        widen(&c.to_array()?),
        unit_roundoff::<T>(),
    );
    Ok(())
}

/// Elements widened to f64, row-major.
pub(super) fn widen<T: Copy + Into<f64>>(a: &Array2<T>) -> Vec<f64> {
    a.iter().map(|&x| x.into()).collect()
}

/// Both half types, both result types, every entry point, on one shape.
fn half_shape(gpu: &Gpu, rng: &mut StdRng, shape: (usize, usize, usize)) -> Check {
    let mut failures = Vec::new();
    check_type(gpu, rng, shape, bf16::from_f32, &mut failures)?;
    check_type(gpu, rng, shape, f16::from_f32, &mut failures)?;
    all_passed(failures)
}

/// Wrong shapes are refused; an empty product is fine (zeros for `k = 0`).
fn half_errors(gpu: &Gpu) -> Check {
    let a = gpu.upload_matrix(&Array2::from_elem((3, 4), bf16::ONE))?;
    let b = gpu.upload_matrix(&Array2::from_elem((5, 2), bf16::ONE))?;
    expect_shape_mismatch("matmul bf16", gpu.matmul(&a, &b), &[3, 4], &[5, 2])?;
    let b = gpu.upload_matrix(&Array2::from_elem((4, 2), bf16::ONE))?;
    let mut c = gpu.zeros_matrix(3, 3)?;
    if !matches!(
        gpu.matmul_to(&a, &b, &mut c),
        Err(gpukern::Error::ShapeMismatch { .. })
    ) {
        return Err("matmul_to into a 3x3 result of a 3x2 product was not refused".into());
    }
    let a0 = gpu.upload_matrix(&Array2::<f16>::zeros((3, 0)))?;
    let b0 = gpu.upload_matrix(&Array2::<f16>::zeros((0, 2)))?;
    let c = gpu.matmul(&a0, &b0)?.to_array()?;
    if c != Array2::<f16>::zeros((3, 2)) {
        return Err(format!("k = 0 gave {c:?}, not zeros").into());
    }
    Ok(())
}

/// `gpukern::matmul` and `matmul_f32_out` on bf16 and f16 views (contiguous, transposed,
/// sliced) against the reference of the same views.
fn global_half(rng: &mut StdRng) -> Check {
    let mut failures = Vec::new();
    global_type(rng, bf16::from_f32, &mut failures)?;
    global_type(rng, f16::from_f32, &mut failures)?;
    all_passed(failures)
}

/// [`global_half`] for one element type.
fn global_type<T>(rng: &mut StdRng, from: fn(f32) -> T, failures: &mut Vec<String>) -> Check
where
    T: MatmulElement + Element + Into<f64>,
    f32: MatmulOutput<T>,
{
    let a = random_of(rng, 13, 17, from);
    let a_t = random_of(rng, 17, 13, from);
    let b_wide = random_of(rng, 17, 22, from);
    let cases: [(&str, ArrayView2<T>, ArrayView2<T>); 2] = [
        ("contiguous", a.view(), b_wide.view()),
        ("A transposed, B sliced ..;2", a_t.t(), b_wide.slice(s![.., ..;2])),
    ];
    for (what, a, b) in cases {
        let (want, abs) = references(&a, &b)?;
        let k = a.ncols();
        let got: Array2<T> = gpukern::matmul(&a, &b)?;
        if let Some(e) = half_violation(&widen(&got), &want, &abs, k, unit_roundoff::<T>()) {
            failures.push(format!("{} matmul {what}: {e}", T::NAME));
        }
        let got = gpukern::matmul_f32_out(&a, &b)?;
        if let Some(e) = half_violation(&widen(&got), &want, &abs, k, 0.0) {
            failures.push(format!("{} matmul_f32_out {what}: {e}", T::NAME));
        }
    }
    expect_shape_mismatch("matmul", gpukern::matmul(&a, &a), &[13, 17], &[13, 17])?;
    Ok(())
}

/// The check against planted wrong kernels (CPU functions giving their results) at 16x4097x16:
/// the exact product rounded to f32, to bf16 and to f16 passes; the product less its last term
/// of `k`, and the product of operands cut to 4 significand bits, fail, with either result
/// type.
fn planted_kernels_fail() -> Result<(), Failed> {
    let mut rng = crate::common::rng_for("matmul_half_check");
    let (m, k, n) = (16, 4097, 16);
    let a = random_of(&mut rng, m, k, bf16::from_f32);
    let b = random_of(&mut rng, k, n, bf16::from_f32);
    let (want, abs) = references(&a.view(), &b.view()).map_err(|e| e.to_string())?;
    let round = |c: &Array2<f64>, to: fn(f64) -> f64| c.iter().map(|&x| to(x)).collect::<Vec<f64>>();
    let as_f32 = |x: f64| f64::from(x as f32);
    let as_bf16 = |x: f64| bf16::from_f64(x).to_f64();
    let u_bf16 = f64::powi(2.0, -8);
    // Honest kernels.
    for (what, got, u) in [
        ("f32 result", round(&want, as_f32), 0.0),
        ("bf16 result", round(&want, as_bf16), u_bf16),
    ] {
        if let Some(e) = half_violation(&got, &want, &abs, k, u) {
            return Err(format!("the honest {what} was refused: {e}").into());
        }
    }
    // A kernel that skips the last term of `k`.
    let short =
        cpu::matmul_f64(&a.slice(s![.., ..k - 1]), &b.slice(s![..k - 1, ..])).map_err(|e| e.to_string())?;
    // A kernel that reads its operands with 4 significand bits (truncated).
    let cut = |x: bf16| bf16::from_bits(x.to_bits() & 0xfff8);
    let coarse = cpu::matmul_f64(&a.mapv(cut), &b.mapv(cut)).map_err(|e| e.to_string())?;
    for (what, wrong) in [("dropping the last k term", &short), ("4-bit operands", &coarse)] {
        for (result, got, u) in [
            ("f32", round(wrong, as_f32), 0.0),
            ("bf16", round(wrong, as_bf16), u_bf16),
        ] {
            if half_violation(&got, &want, &abs, k, u).is_none() {
                return Err(format!("a kernel {what} with a {result} result passed the check").into());
            }
        }
    }
    Ok(())
}
