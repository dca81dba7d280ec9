//! The residual add fused into RMSNorm (`Gpu::residual_rms_norm`) against
//! `cpu::residual_rms_norm_rows`: per backend, both algorithms on f32 and bf16 rows of ragged and
//! Llama-sized lengths (`residual_norm::<type>::RxC`), `h` exactly `round(x + res)` and `y` within
//! the norm family's tolerance; the edge rows (zero, NaN, squares that overflow f32) between
//! ordinary ones (`residual_norm::edges`); the errors (`errors::residual_norm`); the free function
//! (`global::residual_norm`).

use gpukern::{Error, Gpu, ResidualNormAlgorithm, ResidualNormElement, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2};
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, global_trial, trial};

/// Simulator shapes: a row of one vector, one warp's worth (520: 65 bf16 vectors, a partial
/// last warp), a length off the vector width (1001: the tutorial only), Llama's hidden size.
const SIM_SHAPES: &[(usize, usize)] = &[(1, 8), (3, 520), (2, 1001), (2, 4096)];

/// CUDA shapes: ragged ones, the bench's (hidden 4096 at 1, 8 and 4096 tokens), the in-register
/// limit (16384) and past it.
const CUDA_SHAPES: &[(usize, usize)] = &[
    (1, 4096),
    (8, 4096),
    (4096, 4096),
    (33, 1000),
    (7, 4097),
    (64, 16384),
    (3, 16392),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_SHAPES);
    trials.extend(backend_trials(cuda, CUDA_SHAPES));
    trials.push(global_trial("residual_norm", global));
    trials
}

fn backend_trials(target: &Target, shapes: &'static [(usize, usize)]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "residual_norm::edges::f32", |gpu, _| edges::<f32>(gpu)),
        trial(target, "residual_norm::edges::bf16", |gpu, _| edges::<bf16>(gpu)),
        trial(target, "errors::residual_norm", |gpu, _| errors(gpu)),
    ];
    for &(rows, cols) in shapes {
        trials.push(trial(
            target,
            &format!("residual_norm::f32::{rows}x{cols}"),
            move |gpu, rng| shape::<f32>(gpu, rng, (rows, cols)),
        ));
        trials.push(trial(
            target,
            &format!("residual_norm::bf16::{rows}x{cols}"),
            move |gpu, rng| shape::<bf16>(gpu, rng, (rows, cols)),
        ));
    }
    trials
}

/// An element type of the trials, with its tolerance on `y` (the norm family's: f32 a few ulps,
/// bf16 one rounding to 8 significant bits on top).
trait Elem: ResidualNormElement {
    const ABS: f32;
    const REL: f32;
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Elem for f32 {
    const ABS: f32 = 5e-5;
    const REL: f32 = 1e-5;
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Elem for bf16 {
    const ABS: f32 = 1e-3;
    const REL: f32 = 1.0 / 128.0;
    fn from_f32(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

/// `v` rounded to `T` and back.
fn round<T: Elem>(v: f32) -> f32 {
    T::from_f32(v).to_f32()
}

/// Fails unless each `got[i]` is within `abs + rel * |want[i]|` of `want[i]` (`abs = rel = 0`:
/// equal bits but for the sign of zero), NaN exactly where `want` is.
fn close(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let bad = (0..got.len()).find(|&i| {
        let (g, w) = (got[i], want[i]);
        if w.is_nan() || g.is_nan() {
            !(w.is_nan() && g.is_nan())
        } else if w.is_infinite() {
            g != w
        } else {
            (g - w).abs() > abs + rel * w.abs()
        }
    });
    match bad {
        None => Ok(()),
        Some(i) => Err(format!("{what}: element {i} got {}, expected {}", got[i], want[i]).into()),
    }
}

/// Both algorithms on `x` and `res` (values of `T` as f32), `h` and `y` checked; each failure
/// pushed, named with `what`.
fn every_algorithm<T: Elem>(
    gpu: &Gpu,
    (x, res, w): (&[f32], &[f32], &[f32]),
    (rows, cols): (usize, usize),
    what: &str,
    failures: &mut Vec<String>,
) -> Check {
    let eps = 1e-5;
    let matrix = |v: &[f32]| {
        Array2::from_shape_vec(
            (rows, cols),
            v.iter().map(|&a| T::from_f32(a)).collect::<Vec<T>>(),
        )
        .map_err(|e| e.to_string())
    };
    let (dx, dr) = (gpu.upload_matrix(&matrix(x)?)?, gpu.upload_matrix(&matrix(res)?)?);
    let dw = gpu.upload(&w.iter().map(|&a| T::from_f32(a)).collect::<Vec<T>>())?;
    let (want_h, want_y) = cpu::residual_rms_norm_rows(x, res, cols, w, eps, round::<T>);
    for algorithm in ResidualNormAlgorithm::ALL {
        let name = format!("residual_rms_norm_with({}) {what}", algorithm.name());
        let (h, y) = gpu.residual_rms_norm_with(&dx, &dr, &dw, eps, algorithm)?;
        let got = |m: gpukern::DeviceMatrix<T>| -> gpukern::Result<Vec<f32>> {
            Ok(m.as_vec().to_vec()?.into_iter().map(T::to_f32).collect())
        };
        if let Err(e) = close(&format!("{name}: h"), &got(h)?, &want_h, 0.0, 0.0) {
            failures.push(e.to_string());
        }
        if let Err(e) = close(&format!("{name}: y"), &got(y)?, &want_y, T::ABS, T::REL) {
            failures.push(e.to_string());
        }
    }
    Ok(())
}

/// Random rows (`x` of mean 0.5 and spread 3, `res` in [-1, 1)) and weights in [0.5, 1.5).
fn shape<T: Elem>(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let x: Vec<f32> = random_vec(rng, rows * cols)
        .iter()
        .map(|v| round::<T>(3.0 * v + 0.5))
        .collect();
    let res: Vec<f32> = random_vec(rng, rows * cols).into_iter().map(round::<T>).collect();
    let w: Vec<f32> = random_vec(rng, cols)
        .iter()
        .map(|v| round::<T>(1.0 + 0.5 * v))
        .collect();
    let mut failures = Vec::new();
    let what = format!("{} {rows}x{cols}", std::any::type_name::<T>());
    every_algorithm::<T>(gpu, (&x, &res, &w), (rows, cols), &what, &mut failures)?;
    all_passed(failures)
}

/// Rows whose `h` is zero (`res = -x`), holds a NaN, or whose squares overflow f32 (entries of
/// 1e30, redone scaled: before the rescue RMSNorm gave zeros), between ordinary rows that must
/// stay exact; at 1024 columns (the in-register kernel) and 1001 (the tutorial).
fn edges<T: Elem>(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for cols in [1024usize, 1001] {
        let ordinary: Vec<f32> = crate::common::lcg_vec(5, cols)
            .into_iter()
            .map(round::<T>)
            .collect();
        let other: Vec<f32> = crate::common::lcg_vec(6, cols)
            .into_iter()
            .map(round::<T>)
            .collect();
        let mut x = Vec::new();
        let mut res = Vec::new();
        let mut push = |a: &[f32], b: &[f32]| {
            x.extend_from_slice(a);
            res.extend_from_slice(b);
        };
        push(&ordinary, &other);
        push(&ordinary, &ordinary.iter().map(|v| -v).collect::<Vec<_>>());
        let mut nan = ordinary.clone();
        nan[cols / 3] = f32::NAN;
        push(&nan, &other);
        let huge: Vec<f32> = ordinary.iter().map(|v| round::<T>(v * 1e30)).collect();
        push(&huge, &other);
        push(&other, &ordinary);
        let w: Vec<f32> = (0..cols).map(|j| 0.5 + (j % 7) as f32 * 0.25).collect();
        let rows = x.len() / cols;
        let what = format!("edges {} {rows}x{cols}", std::any::type_name::<T>());
        every_algorithm::<T>(gpu, (&x, &res, &w), (rows, cols), &what, &mut failures)?;
    }
    all_passed(failures)
}

/// A residual, weight or output of the wrong shape and a bad `eps` are refused; empty inputs
/// give empty outputs.
fn errors(gpu: &Gpu) -> Check {
    let x = gpu.upload_matrix(&Array2::<f32>::ones((2, 8)))?;
    let w = gpu.upload(&[1.0f32; 8])?;
    let short = gpu.upload(&[1.0f32; 7])?;
    let narrow = gpu.upload_matrix(&Array2::<f32>::ones((2, 7)))?;
    let mut failures = Vec::new();
    if let Err(e) = expect_shape_mismatch(
        "weight",
        gpu.residual_rms_norm(&x, &x, &short, 1e-5).map(|_| ()),
        &[8],
        &[7],
    ) {
        failures.push(e.to_string());
    }
    if let Err(e) = expect_shape_mismatch(
        "residual",
        gpu.residual_rms_norm(&x, &narrow, &w, 1e-5).map(|_| ()),
        &[2, 8],
        &[2, 7],
    ) {
        failures.push(e.to_string());
    }
    let (mut h, mut y) = (gpu.zeros_matrix(2, 8)?, gpu.zeros_matrix(2, 7)?);
    if gpu
        .residual_rms_norm_into(&x, &x, &w, 1e-5, (&mut h, &mut y))
        .is_ok()
    {
        failures.push("an output of the wrong shape was accepted".into());
    }
    for eps in [-1.0, f32::NAN, f32::INFINITY] {
        let r = gpu.residual_rms_norm(&x, &x, &w, eps);
        if !matches!(r, Err(Error::InvalidArgument { .. })) {
            failures.push(format!(
                "eps {eps}: {:?}, expected InvalidArgument",
                r.map(|_| ())
            ));
        }
    }
    let empty = gpu.upload_matrix(&Array2::<f32>::zeros((0, 8)))?;
    let (h, y) = gpu.residual_rms_norm(&empty, &empty, &w, 1e-5)?;
    if h.dim() != (0, 8) || y.dim() != (0, 8) {
        failures.push(format!("empty input gave {:?} and {:?}", h.dim(), y.dim()));
    }
    all_passed(failures)
}

/// The free function on bf16 arrays, one a transposed view.
fn global(rng: &mut StdRng) -> Check {
    let (rows, cols) = (3, 64);
    let x = Array2::from_shape_vec((cols, rows), random_vec(rng, rows * cols))
        .map_err(|e| e.to_string())?
        .mapv(bf16::from_f32);
    let x = x.t();
    let res = Array2::from_shape_vec((rows, cols), random_vec(rng, rows * cols))
        .map_err(|e| e.to_string())?
        .mapv(bf16::from_f32);
    let w = Array1::from_iter((0..cols).map(|j| bf16::from_f32(1.0 + j as f32 / 128.0)));
    let (h, y) = gpukern::residual_rms_norm(&x, &res, &w, 1e-6)?;
    let f = |a: &bf16| a.to_f32();
    let xs: Vec<f32> = x.iter().map(f).collect();
    let rs: Vec<f32> = res.iter().map(f).collect();
    let ws: Vec<f32> = w.iter().map(f).collect();
    let (want_h, want_y) = cpu::residual_rms_norm_rows(&xs, &rs, cols, &ws, 1e-6, round::<bf16>);
    let mut failures = Vec::new();
    for (what, got, want, abs, rel) in [
        ("h", h.iter().map(f).collect::<Vec<_>>(), want_h, 0.0, 0.0),
        ("y", y.iter().map(f).collect(), want_y, 1e-3, 1.0 / 128.0),
    ] {
        if let Err(e) = close(
            &format!("gpukern::residual_rms_norm {what}"),
            &got,
            &want,
            abs,
            rel,
        ) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}
