//! Helpers shared by the test binaries: the run's random seed, seeded generators and random
//! inputs.
//!
//! Every run draws a fresh seed (or takes `GPUKERN_TEST_SEED`), and each test derives its own
//! generator from that seed and its name, so a failure reproduces with the same seed whatever
//! order or subset of tests runs.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::sync::OnceLock;

use ndarray::Array2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The variable that fixes the seed of a run, to reproduce a failure.
pub const SEED_ENV: &str = "GPUKERN_TEST_SEED";

/// This run's seed: `GPUKERN_TEST_SEED` if set, else a fresh random one (the same for the whole
/// process).
///
/// Panics if `GPUKERN_TEST_SEED` is set but is not a `u64`.
pub fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| match std::env::var(SEED_ENV) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{SEED_ENV}={s:?} is not a u64 seed: {e}")),
        Err(_) => rand::random(),
    })
}

/// How to rerun with this run's seed, for failure messages.
pub fn seed_hint() -> String {
    let seed = seed();
    format!("seed {seed}; rerun with {SEED_ENV}={seed}")
}

/// The variable that turns a missing GPU into a failure of the CUDA tests.
pub const REQUIRE_GPU_ENV: &str = "GPUKERN_REQUIRE_GPU";

/// Whether `GPUKERN_REQUIRE_GPU=1` is set.
pub fn require_gpu() -> bool {
    std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| v == "1")
}

/// Whether the CUDA trials are reported as ignored, given what `Gpu::new(0)` returned: only when
/// there is no GPU ([`gpukern::Error::is_no_gpu`]: no driver, no device) and `require_gpu` is
/// off. A GPU that is present but failing (any other error) runs them, so they fail with the
/// error instead of passing as "ignored".
pub fn cuda_trials_ignored<T>(opened: &Result<T, gpukern::Error>, require_gpu: bool) -> bool {
    match opened {
        Ok(_) => false,
        Err(e) => e.is_no_gpu() && !require_gpu,
    }
}

/// A generator for the test called `name`, derived from the run's seed and the name.
pub fn rng_for(name: &str) -> StdRng {
    // FNV-1a: a stable hash, so the stream of a test does not change between Rust versions.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    StdRng::seed_from_u64(seed() ^ hash)
}

/// `len` floats drawn uniformly from [-1, 1).
pub fn random_vec(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// A `rows x cols` matrix of floats drawn uniformly from [-1, 1).
pub fn random_matrix(rng: &mut StdRng, rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), random_vec(rng, rows * cols))
        .expect("rows * cols elements make a rows x cols matrix")
}

/// The largest `|a[i] - b[i]|` (NaN if any difference is NaN), 0 for empty or
/// infinite if the lengths differ.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs())
        .fold(0.0, |m, d| {
            if d.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(d)
            }
        })
}

/// `None` if every element of `got` (row-major `m x n`) lies within the TF32 error bound of
/// `MatmulAlgorithm::Tf32` around the product of `a` (`m x k`) and `b` (`k x n`):
/// `|got - A B| <= tf32_error_factor(k) * |A| |B|` element by element (plus `2^-23 |A| |B|` for
/// the f32 rounding of the f64 references), NaN nowhere. Else the first element outside it.
pub fn tf32_violation(
    a: &ndarray::ArrayView2<'_, f32>,
    b: &ndarray::ArrayView2<'_, f32>,
    got: &[f32],
) -> Option<String> {
    let factor = gpukern::ops::matmul::tf32_error_factor(a.ncols());
    tf32_violation_with(a, b, got, factor)
}

/// [`tf32_violation`] with the bound `factor * |A| |B|` (plus `2^-23 |A| |B|`) in place of
/// `tf32_error_factor(k)`: for the truncating kernels, `Tf32Tile::error_factor(k)`.
pub fn tf32_violation_with(
    a: &ndarray::ArrayView2<'_, f32>,
    b: &ndarray::ArrayView2<'_, f32>,
    got: &[f32],
    factor: f64,
) -> Option<String> {
    let (want, scale) = match (
        gpukern::cpu::matmul(a, b),
        gpukern::cpu::matmul(&a.mapv(f32::abs), &b.mapv(f32::abs)),
    ) {
        (Ok(want), Ok(scale)) => (want, scale),
        (Err(e), _) | (_, Err(e)) => return Some(format!("no reference: {e}")),
    };
    let factor = factor + f64::powi(2.0, -23);
    let (m, n) = want.dim();
    if got.len() != m * n {
        return Some(format!("{} elements for a {m} x {n} result", got.len()));
    }
    for ((i, j), &w) in want.indexed_iter() {
        let g = got[i * n + j];
        let bound = factor * f64::from(scale[(i, j)]);
        let error = (f64::from(g) - f64::from(w)).abs();
        if error.is_nan() || error > bound {
            return Some(format!(
                "C[{i}][{j}] = {g}, want {w}: error {error:.3e} above the TF32 bound {bound:.3e}"
            ));
        }
    }
    None
}
