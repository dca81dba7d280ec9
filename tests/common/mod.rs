//! Helpers shared by the test binaries: the run's random seed, seeded generators and random
//! inputs (and the fixed LCG inputs of the direct simulator trials); `assert_too_large`, the
//! expected error of an oversized launch or allocation; `check` and `trial`, the
//! comparisons and trial naming of the `kernels` harness.
//!
//! Every run draws a fresh seed (or takes `GPUKERN_TEST_SEED`), and each test derives its own
//! generator from that seed and its name, so a failure reproduces with the same seed whatever
//! order or subset of tests runs.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

pub mod check;
pub mod trial;

use std::sync::OnceLock;

use gpukern::kernels::sim::{Dim3, LaunchConfig};

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

/// Asserts that `result` is [`gpukern::Error::TooLarge`] and its message contains every one of `needles`.
#[track_caller]
pub fn assert_too_large<T: std::fmt::Debug>(result: gpukern::Result<T>, needles: &[&str]) {
    match result {
        Err(e @ gpukern::Error::TooLarge { .. }) => {
            let msg = e.to_string();
            for needle in needles {
                assert!(
                    msg.contains(needle),
                    "message {msg:?} does not contain {needle:?}"
                );
            }
        }
        other => panic!("expected Error::TooLarge, got {other:?}"),
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

/// The names of the `.entry` directives (kernel entry points) of a PTX module, in order.
pub fn ptx_entry_names(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|line| {
            let rest = line
                .trim()
                .strip_prefix(".visible")?
                .trim()
                .strip_prefix(".entry")?;
            let name = rest
                .trim()
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()?;
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// What a coverage check finds wrong with per-kernel launch `counts` (`gpukern::*_launch_counts`,
/// the kernels launched at least once) against the kernels it expects (`entries`, the
/// registry's): each kernel never launched, and each kernel launched that is not expected. Empty
/// when every kernel ran at least once.
pub fn coverage_gaps(counts: &[(&'static str, u64)], entries: &[String]) -> Vec<String> {
    let mut gaps = Vec::new();
    for entry in entries {
        match counts.iter().find(|(name, _)| name == entry) {
            None | Some((_, 0)) => gaps.push(format!("{entry}: never launched")),
            Some(_) => {}
        }
    }
    for (name, _) in counts {
        if !entries.iter().any(|e| e == name) {
            gaps.push(format!("{name}: launched, but not a kernel this check expects"));
        }
    }
    gaps
}

/// How a TF32 kernel rounds its operands, for [`tf32_statistical_violation`].
#[derive(Clone, Copy, Debug)]
pub struct OperandRounding {
    /// The unit roundoff `u`: `2^-11` for TF32 rounded to nearest, `2^-10` truncated.
    pub unit_roundoff: f64,
    /// Whether the operands are truncated (relative error in `[-u, 0]`) or rounded to nearest
    /// (in `[-u, u]`).
    pub truncates: bool,
}

/// TF32 rounded to nearest (the `Tf32` algorithm and the rounding tilings).
pub const TF32_ROUNDED: OperandRounding = OperandRounding {
    unit_roundoff: 1.0 / 2048.0,
    truncates: false,
};

/// TF32 truncated (the `_trunc` tilings).
pub const TF32_TRUNCATED: OperandRounding = OperandRounding {
    unit_roundoff: 1.0 / 1024.0,
    truncates: true,
};

/// Most the RMS error of a TF32 product may exceed the expected one, [`tf32_rms_ratio`].
pub const TF32_RMS_FACTOR: f64 = 2.0;

/// Fewest result elements for the statistical criterion: the ratio is an average over elements,
/// and with `N` elements its spread is about `1 / sqrt(2N)` (0.09 at 64); below that only the
/// worst-case bound applies.
pub const TF32_RMS_MIN_ELEMENTS: usize = 64;

/// The ratio of the RMS error of `got` (an `m x n` product of `a`, `b` by a TF32 kernel) to the
/// RMS error TF32 operands are expected to give.
///
/// Derivation. Each operand is replaced by `a (1 + d)`, with `d` spread uniformly over `[-u, u]`
/// (rounding to nearest: mean 0, mean square `u^2 / 3`) or `[-u, 0]` (truncation: mean `-u/2`,
/// variance `u^2 / 12`), independently per operand element. Then, to first order,
/// `err_ij = sum_p a_ip b_pj (d_a + d_b)`, whose mean square over the roundings is
/// `E[err_ij^2] = 2 var(d) S_ij + (2 mean(d))^2 C_ij^2`, with `S_ij = sum_p (a_ip b_pj)^2` and
/// `C_ij = sum_p a_ip b_pj`. The f32 accumulation adds about `2^-24 sqrt(k)` relative, far below
/// `u` (2^-11). The ratio `sqrt(sum_ij err_ij^2 / sum_ij E[err_ij^2])` is then about 1 for a
/// correct kernel (the simulator's and a CPU emulation of TF32 give 0.9 to 1.1), and grows with
/// any further error: an operand of `b` bits more has `2^(11 - b)` times the error; a dropped
/// term of `k` adds `|a b|`, about `sqrt(S / k)`, i.e. `sqrt(1 / k) / u` times the expected error.
pub fn tf32_rms_ratio(
    a: &ndarray::ArrayView2<'_, f32>,
    b: &ndarray::ArrayView2<'_, f32>,
    got: &[f32],
    rounding: OperandRounding,
) -> Result<f64, String> {
    let want = gpukern::cpu::matmul(a, b).map_err(|e| format!("no reference: {e}"))?;
    let squares = gpukern::cpu::matmul(&a.mapv(|v| v * v), &b.mapv(|v| v * v))
        .map_err(|e| format!("no reference: {e}"))?;
    let (m, n) = want.dim();
    if got.len() != m * n {
        return Err(format!("{} elements for a {m} x {n} result", got.len()));
    }
    let u = rounding.unit_roundoff;
    let (mean, var) = if rounding.truncates {
        (-u / 2.0, u * u / 12.0)
    } else {
        (0.0, u * u / 3.0)
    };
    let (mut observed, mut expected) = (0.0f64, 0.0f64);
    for ((i, j), &w) in want.indexed_iter() {
        let error = f64::from(got[i * n + j]) - f64::from(w);
        observed += error * error;
        let c = f64::from(w);
        expected += 2.0 * var * f64::from(squares[(i, j)]) + 4.0 * mean * mean * c * c;
    }
    if observed.is_nan() {
        return Err("NaN in the result".to_string());
    }
    if expected == 0.0 {
        return Ok(if observed == 0.0 { 0.0 } else { f64::INFINITY });
    }
    Ok((observed / expected).sqrt())
}

/// `None` if `got` passes both TF32 checks: every element within the worst-case bound
/// `factor * |A| |B|` ([`tf32_violation_with`]), and, with at least [`TF32_RMS_MIN_ELEMENTS`]
/// elements, the RMS error within [`TF32_RMS_FACTOR`] of the expected one ([`tf32_rms_ratio`]).
/// The worst-case bound alone accepts a kernel that drops a term of `k` or computes with bf16
/// operands; the statistical one does not.
pub fn tf32_statistical_violation(
    a: &ndarray::ArrayView2<'_, f32>,
    b: &ndarray::ArrayView2<'_, f32>,
    got: &[f32],
    factor: f64,
    rounding: OperandRounding,
) -> Option<String> {
    if let Some(e) = tf32_violation_with(a, b, got, factor) {
        return Some(e);
    }
    if got.len() < TF32_RMS_MIN_ELEMENTS {
        return None;
    }
    match tf32_rms_ratio(a, b, got, rounding) {
        Ok(ratio) if ratio <= TF32_RMS_FACTOR => None,
        Ok(ratio) => Some(format!(
            "RMS error {ratio:.2} times what TF32 operands give (at most {TF32_RMS_FACTOR})"
        )),
        Err(e) => Some(e),
    }
}

/// `v` rounded to nearest (ties away from zero, as `cvt.rna.tf32.f32`) to `bits` explicit
/// significand bits (TF32: 10, bf16: 7): a CPU emulation of a narrower operand format.
pub fn round_significand(v: f32, bits: u32) -> f32 {
    if !v.is_finite() || bits >= 23 {
        return v;
    }
    let drop = 23 - bits;
    let half = 1u32 << (drop - 1);
    let rounded = (v.to_bits() + half) & !((1u32 << drop) - 1);
    f32::from_bits(rounded)
}

/// `A * B` in f64 with both operands first rounded to `bits` explicit significand bits, rounded
/// to f32: what an exact-accumulation kernel with such operands returns.
pub fn matmul_with_operand_bits(
    a: &ndarray::ArrayView2<'_, f32>,
    b: &ndarray::ArrayView2<'_, f32>,
    bits: u32,
) -> Vec<f32> {
    let ra = a.mapv(|v| round_significand(v, bits));
    let rb = b.mapv(|v| round_significand(v, bits));
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    let mut out = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k)
                .map(|p| f64::from(ra[(i, p)]) * f64::from(rb[(p, j)]))
                .sum();
            out[i * n + j] = s as f32;
        }
    }
    out
}

/// `n` floats in [-1, 1) from a 64-bit LCG seeded with `seed`: the same inputs every run (the
/// direct simulator trials, whose shapes and special entries are chosen against fixed data).
pub fn lcg_vec(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// A `rows x cols` matrix of [`lcg_vec`] floats.
pub fn lcg_matrix(seed: u64, rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), lcg_vec(seed, rows * cols)).unwrap()
}

/// A 1-D launch of `blocks` blocks of `threads` threads with `shared_mem_bytes` of dynamic shared
/// memory, for kernels launched straight through the simulator.
pub fn launch_1d(blocks: u32, threads: u32, shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes,
    }
}
