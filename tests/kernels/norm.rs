//! The norm family (RMSNorm, LayerNorm; f32 and bf16) against `cpu::rms_norm_rows` and
//! `cpu::layer_norm_rows`: per backend, every algorithm on ragged and large shapes
//! (`norm::{rms,layer}::<type>::RxC`), the edge rules (`norm::edges`: constant, zero, NaN and
//! infinite rows, a row of mean 1e4), the errors (`errors::norm`); the free functions
//! (`global::norm`).

use gpukern::ops::norm::{NormAlgorithm, NormElement};
use gpukern::{DeviceMatrix, Error, Gpu, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2};
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, global_trial, trial};

/// Simulator shapes: row lengths off the block (256) and the vector widths (4, 8): 1, 3, 4 and 8
/// (one and two f32 vectors, one bf16: a block of one warp, mostly idle, in the looped kernels),
/// 1000 (a multiple of 8), 4097 (of neither: the tutorial kernel), 1024, and 8200 (2050 f32
/// vectors: up to 4 per thread of 544 threads, a partly filled last warp; the looped kernels of
/// 1024 threads take 3 steps, the last of 2 vectors).
///
/// 77 x 520 (130 f32 vectors, 65 bf16): the warp-per-row kernels on a partly filled last block,
/// and, on the persistent grid of the simulator's few resident blocks, several rows per warp.
const SIM_SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (3, 3),
    (5, 4),
    (3, 8),
    (2, 1000),
    (2, 4097),
    (3, 1024),
    (1, 8200),
    (77, 520),
];

/// CUDA shapes: ragged ones, the bench's, the in-register limit (32768) and past it.
const CUDA_SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (7, 3),
    (64, 1000),
    (33, 4097),
    (8192, 1024),
    (1000, 4096),
    (300, 16384),
    (5, 32768),
    (3, 40000),
];

/// f32 outputs: f32 statistics over up to 32768 entries and `1 / sqrt` (correctly rounded):
/// a few units in the last place of O(1) values.
const F32_ABS: f32 = 5e-5;
const F32_REL: f32 = 1e-5;
/// bf16 outputs: one rounding to 8 significant bits (2^-9 relative) on top of the f32 result.
const BF16_ABS: f32 = 1e-3;
const BF16_REL: f32 = 1.0 / 128.0;

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_SHAPES);
    trials.extend(backend_trials(cuda, CUDA_SHAPES));
    trials.push(global_trial("norm", global_norm));
    trials
}

/// One backend's trials.
fn backend_trials(target: &Target, shapes: &'static [(usize, usize)]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "norm::edges", |gpu, _| edges(gpu)),
        trial(target, "norm::overflow::f32", |gpu, _| overflow::<f32>(gpu)),
        trial(target, "norm::overflow::bf16", |gpu, _| overflow::<bf16>(gpu)),
        trial(target, "errors::norm", |gpu, _| errors(gpu)),
    ];
    for &(rows, cols) in shapes {
        trials.push(trial(
            target,
            &format!("norm::f32::{rows}x{cols}"),
            move |gpu, rng| shape::<f32>(gpu, rng, (rows, cols)),
        ));
        trials.push(trial(
            target,
            &format!("norm::bf16::{rows}x{cols}"),
            move |gpu, rng| shape::<bf16>(gpu, rng, (rows, cols)),
        ));
    }
    trials
}

/// An element type the trials convert to and from f32.
trait TestElem: NormElement {
    const ABS: f32;
    const REL: f32;
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl TestElem for f32 {
    const ABS: f32 = F32_ABS;
    const REL: f32 = F32_REL;
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl TestElem for bf16 {
    const ABS: f32 = BF16_ABS;
    const REL: f32 = BF16_REL;
    fn from_f32(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

/// Fails unless each `got[i]` is within `abs + rel * |want[i]|` of `want[i]`, and NaN exactly
/// where `want` is.
fn check_close(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) -> Check {
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
        Some(i) => Err(format!(
            "{what}: element {i} (row {}) got {}, expected {} (tolerance {abs:e} + {rel:e} relative)",
            i, got[i], want[i]
        )
        .into()),
    }
}

/// Inputs rounded to `T` and back, so that the reference sees what the kernel sees.
fn rounded<T: TestElem>(v: &[f32]) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = v.iter().map(|&x| T::from_f32(x)).collect();
    let f = t.iter().map(|&x| x.to_f32()).collect();
    (t, f)
}

/// Downloads a matrix as f32.
fn download<T: TestElem>(y: &DeviceMatrix<T>) -> gpukern::Result<Vec<f32>> {
    Ok(y.as_vec().to_vec()?.into_iter().map(T::to_f32).collect())
}

/// Both norms with every algorithm (and `_into` a matrix of NaNs) on random rows, weights in
/// [0.5, 1.5) and biases in [-1, 1).
fn shape<T: TestElem>(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let (x, xf) = rounded::<T>(
        &random_vec(rng, rows * cols)
            .iter()
            .map(|v| 3.0 * v + 0.5)
            .collect::<Vec<_>>(),
    );
    let (w, wf) = rounded::<T>(
        &(0..cols)
            .map(|_| rng.random_range(0.5..1.5))
            .collect::<Vec<f32>>(),
    );
    let (b, bf) = rounded::<T>(&random_vec(rng, cols));
    let mut failures = Vec::new();
    every_algorithm(
        gpu,
        (&x, &xf, (rows, cols)),
        (&w, &wf, &b, &bf),
        &format!("{} {rows}x{cols}", std::any::type_name::<T>()),
        &mut failures,
    )?;
    all_passed(failures)
}

/// Both norms of the rows `x` (`xf`: the same rounded to `T` and back, what the references see)
/// with every algorithm, and with the default into a matrix of NaNs, against `cpu`'s f64
/// references within `T`'s tolerance; each failure pushed, named with `what`.
fn every_algorithm<T: TestElem>(
    gpu: &Gpu,
    (x, xf, (rows, cols)): (&[T], &[f32], (usize, usize)),
    (w, wf, b, bf): (&[T], &[f32], &[T], &[f32]),
    what: &str,
    failures: &mut Vec<String>,
) -> Check {
    let eps = 1e-5;
    let dx =
        gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x.to_vec()).map_err(|e| e.to_string())?)?;
    let (dw, db) = (gpu.upload(w)?, gpu.upload(b)?);
    let want_rms = cpu::rms_norm_rows(xf, cols, wf, eps);
    let want_layer = cpu::layer_norm_rows(xf, cols, wf, bf, eps);
    let mut check = |variant: String, got: gpukern::Result<Vec<f32>>, want: &[f32]| {
        let variant = format!("{variant} {what}");
        if let Err(e) = got
            .map_err(|e| e.to_string().into())
            .and_then(|g| check_close(&variant, &g, want, T::ABS, T::REL))
        {
            failures.push(format!("{variant}: {e}"));
        }
    };
    for algorithm in NormAlgorithm::ALL {
        let name = algorithm.name();
        check(
            format!("rms_norm_with({name})"),
            gpu.rms_norm_with(&dx, &dw, eps, algorithm)
                .and_then(|y| download(&y)),
            &want_rms,
        );
        check(
            format!("layer_norm_with({name})"),
            gpu.layer_norm_with(&dx, &dw, &db, eps, algorithm)
                .and_then(|y| download(&y)),
            &want_layer,
        );
    }
    let poisoned = || -> gpukern::Result<DeviceMatrix<T>> {
        let nan = Array2::from_elem((rows, cols), T::from_f32(f32::NAN));
        gpu.upload_matrix(&nan)
    };
    check(
        "rms_norm_into".into(),
        poisoned().and_then(|mut y| {
            gpu.rms_norm_into(&dx, &dw, eps, &mut y)
                .and_then(|()| download(&y))
        }),
        &want_rms,
    );
    check(
        "layer_norm_into".into(),
        poisoned().and_then(|mut y| {
            gpu.layer_norm_into(&dx, &dw, &db, eps, &mut y)
                .and_then(|()| download(&y))
        }),
        &want_layer,
    );
    Ok(())
}

/// The rules at the edges, on both algorithms and two row lengths (the in-register kernel at
/// 1024, the tutorial at 1001): a constant row (LayerNorm gives the bias, RMSNorm finite), a
/// zero row, a NaN row, a row with an infinity, a row of mean 1e4 and spread 1 (where
/// `E[x^2] - E[x]^2` in f32 would be off by far more than the tolerance) between ordinary rows,
/// which must stay exact.
fn edges(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for cols in [1024usize, 1001] {
        let ordinary: Vec<f32> = crate::common::lcg_vec(7, cols);
        let mut x = Vec::new();
        x.extend(&ordinary);
        x.extend(std::iter::repeat_n(2.5f32, cols)); // constant
        x.extend(std::iter::repeat_n(0.0f32, cols)); // zero
        let mut nan_row = ordinary.clone();
        nan_row[cols / 2] = f32::NAN;
        x.extend(&nan_row);
        let mut inf_row = ordinary.clone();
        inf_row[3] = f32::INFINITY;
        x.extend(&inf_row);
        x.extend(ordinary.iter().map(|v| 1e4 + v)); // large mean
        x.extend(&ordinary);
        let rows = x.len() / cols;
        let w: Vec<f32> = (0..cols).map(|j| 0.5 + (j % 7) as f32 * 0.25).collect();
        let b: Vec<f32> = (0..cols).map(|j| (j % 5) as f32 - 2.0).collect();
        let eps = 1e-6;
        let dx =
            gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x.clone()).map_err(|e| e.to_string())?)?;
        let (dw, db) = (gpu.upload(&w)?, gpu.upload(&b)?);
        let want_rms = cpu::rms_norm_rows(&x, cols, &w, eps);
        let want_layer = cpu::layer_norm_rows(&x, cols, &w, &b, eps);
        // The constant row's LayerNorm is the bias exactly, finite.
        if want_layer[cols..2 * cols] != b[..] {
            failures.push("the reference's constant row is not the bias".into());
        }
        for algorithm in NormAlgorithm::ALL {
            let name = algorithm.name();
            let got = gpu.rms_norm_with(&dx, &dw, eps, algorithm)?.to_array()?;
            if let Err(e) = check_close(
                &format!("rms edges {name} cols {cols}"),
                got.as_slice().unwrap_or_default(),
                &want_rms,
                1e-5,
                1e-5,
            ) {
                failures.push(e.to_string());
            }
            let got = gpu.layer_norm_with(&dx, &dw, &db, eps, algorithm)?.to_array()?;
            let got = got.as_slice().unwrap_or_default();
            if let Err(e) = check_close(
                &format!("layer edges {name} cols {cols}"),
                got,
                &want_layer,
                1e-4,
                1e-5,
            ) {
                failures.push(e.to_string());
            }
            if got[cols..2 * cols] != b[..] {
                failures.push(format!(
                    "layer {name} cols {cols}: a constant row is not exactly the bias"
                ));
            }
        }
    }
    all_passed(failures)
}

/// Row lengths of the overflow trial: every kernel's kind of row. 8 and 520 (a warp per row;
/// 520 also the in-register rows, and 77 rows of it), 1001 (odd: only the tutorial kernel), 1024 (in registers),
/// 8200 (looped and two-pass kernels over several steps).
const OVERFLOW_COLS: &[usize] = &[8, 520, 1001, 1024, 8200];

/// Rows of finite entries whose f32 statistics overflow, between ordinary rows that must stay
/// exact, with every algorithm (and the default plan into a poisoned output), against the f64
/// references: ordinary rows scaled by 1e19 (RMSNorm's squares overflow from about 1e19 /
/// sqrt(cols)) and 1e30, a row of mean 4e30 and spread 1e30, a row of entries near +-1e38
/// (LayerNorm's sums of `x - x[0]` overflow too), and beside them a row of huge entries with an
/// infinite one, which keeps the family's rules (RMSNorm: 0 at the finite entries, NaN at the
/// infinite; LayerNorm: all NaN). Before the rescue path RMSNorm wrote zeros and LayerNorm the
/// bias for these rows.
fn overflow<T: TestElem>(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for &cols in OVERFLOW_COLS {
        let ordinary: Vec<f32> = crate::common::lcg_vec(11, cols);
        let rows: Vec<Vec<f32>> = vec![
            ordinary.clone(),
            ordinary.iter().map(|v| v * 1e19).collect(),
            ordinary.iter().map(|v| v * 1e30).collect(),
            ordinary.iter().map(|v| (4.0 + v) * 1e30).collect(),
            ordinary
                .iter()
                .map(|v| if *v < 0.0 { -1e38 } else { 1e38 } * (0.5 + v.abs()))
                .collect(),
            {
                let mut r: Vec<f32> = ordinary.iter().map(|v| v * 1e30).collect();
                r[cols / 2] = f32::INFINITY;
                r
            },
            ordinary.clone(),
        ];
        // At 520 columns the pattern eleven times over: 77 rows, several per warp on the
        // persistent grids of the warp-per-row kernels, so that a warp redoes rows it stored.
        let reps = if cols == 520 { 11 } else { 1 };
        let (x, xf) = rounded::<T>(&rows.concat().repeat(reps));
        let n_rows = rows.len() * reps;
        let (w, wf) = rounded::<T>(&(0..cols).map(|j| 0.5 + (j % 7) as f32 * 0.25).collect::<Vec<_>>());
        let (b, bf) = rounded::<T>(&(0..cols).map(|j| (j % 5) as f32 - 2.0).collect::<Vec<_>>());
        let what = format!("overflow {} {n_rows}x{cols}", std::any::type_name::<T>());
        every_algorithm(
            gpu,
            (&x, &xf, (n_rows, cols)),
            (&w, &wf, &b, &bf),
            &what,
            &mut failures,
        )?;
    }
    all_passed(failures)
}

/// `eps` negative or non-finite, weight or bias of the wrong length, an output of the wrong
/// shape are refused; empty inputs give empty outputs.
fn errors(gpu: &Gpu) -> Check {
    let x = gpu.upload_matrix(&Array2::<f32>::ones((2, 8)))?;
    let w = gpu.upload(&[1.0f32; 8])?;
    let short = gpu.upload(&[1.0f32; 7])?;
    let mut failures = Vec::new();
    for eps in [-1e-5, f32::NAN, f32::INFINITY] {
        for result in [
            gpu.rms_norm(&x, &w, eps).map(|_| ()),
            gpu.layer_norm(&x, &w, &w, eps).map(|_| ()),
        ] {
            if !matches!(result, Err(Error::InvalidArgument { .. })) {
                failures.push(format!("eps {eps}: {result:?}, expected InvalidArgument"));
            }
        }
    }
    for (what, result) in [
        ("rms weight", gpu.rms_norm(&x, &short, 1e-5).map(|_| ())),
        ("layer weight", gpu.layer_norm(&x, &short, &w, 1e-5).map(|_| ())),
        ("layer bias", gpu.layer_norm(&x, &w, &short, 1e-5).map(|_| ())),
    ] {
        if let Err(e) = expect_shape_mismatch(what, result, &[8], &[7]) {
            failures.push(e.to_string());
        }
    }
    let mut wrong = gpu.zeros_matrix(2, 7)?;
    if gpu.rms_norm_into(&x, &w, 1e-5, &mut wrong).is_ok() {
        failures.push("an output of the wrong shape was accepted".into());
    }
    let empty = gpu.upload_matrix(&Array2::<f32>::zeros((0, 8)))?;
    let no_cols = gpu.upload_matrix(&Array2::<f32>::zeros((3, 0)))?;
    let none = gpu.zeros(0)?;
    let a = gpu.rms_norm(&empty, &w, 1e-5)?;
    let c = gpu.layer_norm(&no_cols, &none, &none, 1e-5)?;
    if a.dim() != (0, 8) || c.dim() != (3, 0) {
        failures.push(format!("empty inputs gave {:?} and {:?}", a.dim(), c.dim()));
    }
    all_passed(failures)
}

/// The free functions on f32 and bf16 arrays (one transposed view).
fn global_norm(rng: &mut StdRng) -> Check {
    let (rows, cols) = (5, 40);
    let x = Array2::from_shape_vec((cols, rows), random_vec(rng, rows * cols)).map_err(|e| e.to_string())?;
    let x = x.t();
    let w = Array1::from_iter((0..cols).map(|j| 1.0 + j as f32 / 64.0));
    let b = Array1::from_iter((0..cols).map(|j| j as f32 / 32.0 - 0.5));
    let xs: Vec<f32> = x.iter().copied().collect();
    let mut failures = Vec::new();
    let got = gpukern::rms_norm(&x, &w, 1e-5)?;
    let want = cpu::rms_norm_rows(&xs, cols, w.as_slice().unwrap_or_default(), 1e-5);
    if let Err(e) = check_close(
        "gpukern::rms_norm",
        &got.iter().copied().collect::<Vec<_>>(),
        &want,
        F32_ABS,
        F32_REL,
    ) {
        failures.push(e.to_string());
    }
    let got = gpukern::layer_norm(&x, &w, &b, 1e-5)?;
    let want = cpu::layer_norm_rows(
        &xs,
        cols,
        w.as_slice().unwrap_or_default(),
        b.as_slice().unwrap_or_default(),
        1e-5,
    );
    if let Err(e) = check_close(
        "gpukern::layer_norm",
        &got.iter().copied().collect::<Vec<_>>(),
        &want,
        F32_ABS,
        F32_REL,
    ) {
        failures.push(e.to_string());
    }
    let xb = x.mapv(bf16::from_f32);
    let (wb, bb) = (w.mapv(bf16::from_f32), b.mapv(bf16::from_f32));
    let got = gpukern::layer_norm(&xb, &wb, &bb, 1e-5)?;
    let xf: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
    let wf: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();
    let bf: Vec<f32> = bb.iter().map(|v| v.to_f32()).collect();
    let want = cpu::layer_norm_rows(&xf, cols, &wf, &bf, 1e-5);
    if let Err(e) = check_close(
        "gpukern::layer_norm (bf16)",
        &got.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
        &want,
        BF16_ABS,
        BF16_REL,
    ) {
        failures.push(e.to_string());
    }
    all_passed(failures)
}
