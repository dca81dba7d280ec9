//! The GLU family (SwiGLU, GeGLU with the tanh and the erf GELU; f32 and bf16) against
//! `cpu::glu_rows`: per backend, every algorithm (and `Auto`) on ragged and Llama-sized rows
//! (`glu::<type>::RxN`, `N` the half's width), the edge values (`glu::edges`: NaN, infinities,
//! large gates of both signs), the errors (`errors::glu`); the free functions (`global::glu`).

use gpukern::{DeviceMatrix, GeluApprox, GluAlgorithm, GluElement, Gpu, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, global_trial, trial};

/// Simulator shapes `(rows, n)`: one vector, a half off both vector widths (3, 12: the tutorial
/// for bf16), a ragged row count over several blocks' sweeps (33 x 520).
const SIM_SHAPES: &[(usize, usize)] = &[(1, 8), (2, 3), (5, 12), (33, 520)];

/// CUDA shapes: Llama-3-8B's MLP (n = 14336) at 1, 8 and 4096 tokens, a ragged one, a half off
/// the vector width, each side of `Auto`'s boundary (`SMALL_OUTPUTS`, 2^18 outputs: 18 and 19
/// rows of 14336), and more rows than a grid's y extent (the rows kernel's stride down the rows).
const CUDA_SHAPES: &[(usize, usize)] = &[
    (1, 14336),
    (8, 14336),
    (4096, 14336),
    (77, 1000),
    (9, 4099),
    (18, 14336),
    (19, 14336),
    (70_001, 16),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_SHAPES);
    trials.extend(backend_trials(cuda, CUDA_SHAPES));
    trials.push(global_trial("glu", global));
    trials
}

fn backend_trials(target: &Target, shapes: &'static [(usize, usize)]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "glu::edges::f32", |gpu, _| edges::<f32>(gpu)),
        trial(target, "glu::edges::bf16", |gpu, _| edges::<bf16>(gpu)),
        trial(target, "errors::glu", |gpu, _| errors(gpu)),
    ];
    for &(rows, n) in shapes {
        trials.push(trial(
            target,
            &format!("glu::f32::{rows}x{n}"),
            move |gpu, rng| shape::<f32>(gpu, rng, (rows, n)),
        ));
        trials.push(trial(
            target,
            &format!("glu::bf16::{rows}x{n}"),
            move |gpu, rng| shape::<bf16>(gpu, rng, (rows, n)),
        ));
    }
    trials
}

/// An element type of the trials (converted through `Float`, a bound of `GluElement`) and its
/// tolerance. f32: the activations' few ulps (fast `exp`
/// and `rcp` for SiLU and the tanh GELU, 2-ulp `erf`) on O(1) values, and an absolute floor for the
/// erf GELU's `1 + erf` near -1 (cancellation: a few f32 ulps of 1). bf16: one rounding to 8
/// significant bits on top.
trait Elem: GluElement {
    const ABS: f32;
    const REL: f32;
}

impl Elem for f32 {
    const ABS: f32 = 2e-6;
    const REL: f32 = 4e-6;
}

impl Elem for bf16 {
    const ABS: f32 = 1e-5;
    const REL: f32 = 1.0 / 128.0;
}

/// The three activations: their name, the GPU call and the f64 reference.
type Call<T> = fn(&Gpu, &DeviceMatrix<T>, &mut DeviceMatrix<T>, GluAlgorithm) -> gpukern::Result<()>;

/// An activation's name, its GPU call and its f64 reference.
type Activation<T> = (&'static str, Call<T>, fn(f64) -> f64);

fn activations<T: Elem>() -> [Activation<T>; 3] {
    [
        ("swiglu", |g, x, y, a| g.swiglu_into_with(x, y, a), cpu::silu64),
        (
            "geglu(tanh)",
            |g, x, y, a| g.geglu_into_with(x, GeluApprox::Tanh, y, a),
            cpu::gelu_tanh64,
        ),
        (
            "geglu(erf)",
            |g, x, y, a| g.geglu_into_with(x, GeluApprox::Erf, y, a),
            cpu::gelu_erf64,
        ),
    ]
}

/// Fails unless each `got[i]` is within `abs + rel * |want[i]|` of `want[i]`, NaN exactly where
/// `want` is, infinities equal.
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

/// Every activation with every algorithm on the `rows x 2n` input `x` (values of `T` as f32),
/// each into an output poisoned with NaN.
fn every_call<T: Elem>(gpu: &Gpu, x: &[f32], (rows, n): (usize, usize), failures: &mut Vec<String>) -> Check {
    let input = Array2::from_shape_vec(
        (rows, 2 * n),
        x.iter().map(|&v| T::from_f32(v)).collect::<Vec<T>>(),
    )
    .map_err(|e| e.to_string())?;
    let dx = gpu.upload_matrix(&input)?;
    for (name, call, act) in activations::<T>() {
        let want = cpu::glu_rows(x, n, act);
        for algorithm in GluAlgorithm::ALL.into_iter().chain([GluAlgorithm::Auto]) {
            let mut y = gpu.upload_matrix(&Array2::from_elem((rows, n), T::from_f32(f32::NAN)))?;
            call(gpu, &dx, &mut y, algorithm)?;
            let got: Vec<f32> = y.as_vec().to_vec()?.into_iter().map(T::to_f32).collect();
            let what = format!(
                "{name} {} {} {rows}x{n}",
                algorithm.name(),
                std::any::type_name::<T>()
            );
            if let Err(e) = close(&what, &got, &want, T::ABS, T::REL) {
                failures.push(e.to_string());
            }
        }
    }
    Ok(())
}

/// Random gates in [-6, 6) (both tails of the activations) and up values in [-2, 2).
fn shape<T: Elem>(gpu: &Gpu, rng: &mut StdRng, (rows, n): (usize, usize)) -> Check {
    let gate = random_vec(rng, rows * n);
    let up = random_vec(rng, rows * n);
    let mut x = Vec::with_capacity(2 * rows * n);
    for r in 0..rows {
        x.extend(gate[r * n..(r + 1) * n].iter().map(|v| 6.0 * v));
        x.extend(up[r * n..(r + 1) * n].iter().map(|v| 2.0 * v));
    }
    let x: Vec<f32> = x.into_iter().map(|v| T::from_f32(v).to_f32()).collect();
    let mut failures = Vec::new();
    every_call::<T>(gpu, &x, (rows, n), &mut failures)?;
    all_passed(failures)
}

/// Gates of 0, +-1e30, +-inf, NaN and -100 (SiLU's `e^100` overflows to give `-0`), up values of
/// 0, NaN and infinities, in a row of 16 (two bf16 vectors, four f32) and one of 13 (the tutorial
/// for both types).
fn edges<T: Elem>(gpu: &Gpu) -> Check {
    let gates = [
        0.0,
        1e30,
        -1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -100.0,
        100.0,
        0.5,
        -0.5,
        3.0,
        -3.0,
        1e-30,
        -8.0,
        8.0,
        2.0,
    ];
    let ups = [
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        f32::NAN,
        f32::INFINITY,
        0.0,
        -1.0,
        1.0,
        1.0,
        1.0,
        1.0,
    ];
    let mut failures = Vec::new();
    for n in [16usize, 13] {
        let mut x: Vec<f32> = gates[..n].to_vec();
        x.extend(&ups[..n]);
        let x: Vec<f32> = x.into_iter().map(|v| T::from_f32(v).to_f32()).collect();
        every_call::<T>(gpu, &x, (1, n), &mut failures)?;
    }
    all_passed(failures)
}

/// An odd number of columns and an output of the wrong shape are refused; empty inputs give
/// empty outputs.
fn errors(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    let odd = gpu.upload_matrix(&Array2::<f32>::ones((2, 7)))?;
    if !matches!(gpu.swiglu(&odd), Err(gpukern::Error::InvalidArgument { .. })) {
        failures.push("an odd number of columns was accepted".into());
    }
    let x = gpu.upload_matrix(&Array2::<f32>::ones((2, 8)))?;
    let mut wrong = gpu.zeros_matrix(2, 8)?;
    if let Err(e) = expect_shape_mismatch("output", gpu.swiglu_into(&x, &mut wrong), &[2, 4], &[2, 8]) {
        failures.push(e.to_string());
    }
    let empty = gpu.upload_matrix(&Array2::<f32>::zeros((0, 8)))?;
    let none = gpu.upload_matrix(&Array2::<f32>::zeros((3, 0)))?;
    let (a, b) = (gpu.swiglu(&empty)?, gpu.geglu(&none, GeluApprox::Erf)?);
    if a.dim() != (0, 4) || b.dim() != (3, 0) {
        failures.push(format!("empty inputs gave {:?} and {:?}", a.dim(), b.dim()));
    }
    all_passed(failures)
}

/// The free functions on a bf16 array (a transposed view) and an f32 one.
fn global(rng: &mut StdRng) -> Check {
    let (rows, n) = (3, 24);
    let x =
        Array2::from_shape_vec((2 * n, rows), random_vec(rng, 2 * rows * n)).map_err(|e| e.to_string())?;
    let x = x.t();
    let xs: Vec<f32> = x.iter().copied().collect();
    let mut failures = Vec::new();
    let got = gpukern::swiglu(&x)?;
    if let Err(e) = close(
        "gpukern::swiglu",
        &got.iter().copied().collect::<Vec<_>>(),
        &cpu::glu_rows(&xs, n, cpu::silu64),
        f32::ABS,
        f32::REL,
    ) {
        failures.push(e.to_string());
    }
    let xb = x.mapv(bf16::from_f32);
    let xbs: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
    let got = gpukern::geglu(&xb, GeluApprox::Tanh)?;
    if let Err(e) = close(
        "gpukern::geglu",
        &got.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
        &cpu::glu_rows(&xbs, n, cpu::gelu_tanh64),
        bf16::ABS,
        bf16::REL,
    ) {
        failures.push(e.to_string());
    }
    all_passed(failures)
}
