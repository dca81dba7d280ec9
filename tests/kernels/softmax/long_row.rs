//! One row of 2^24, the longest row of the benchmarks: on CUDA through every softmax algorithm
//! at `t = 1` and `t = 10` (`cuda::softmax_long_row::`), each element within
//! [`long_row_tolerance`] of the f64 reference; and on the CPU (`sim::softmax::*`), that the
//! kernels' compensated sum stays within that tolerance where the plain sum it replaced does not.

use gpukern::kernels::softmax as ksoft;
use gpukern::ops::softmax::{OnePassConfig, SoftmaxAlgorithm};
use gpukern::{DeviceMatrix, Gpu, cpu};
use libtest_mimic::Trial;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, plain_trials, trial};
use crate::common::{lcg_vec, random_matrix};

/// The trials of this file.
pub(super) fn trials(cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for t in [1.0, 10.0] {
        trials.push(trial(
            cuda,
            &format!("softmax_long_row::1x{LONG_ROW}::t={t}"),
            move |gpu, rng| softmax_long_row(gpu, rng, t),
        ));
    }
    trials.extend(plain_trials!(
        "softmax",
        [
            a_long_row_sums_to_f32_rounding_with_compensation_and_not_without,
            kahan_sum_keeps_what_a_plain_sum_rounds_away,
        ]
    ));
    trials
}

/// The length of the long-row precision trials: 2^24, the longest row of the benchmarks.
const LONG_ROW: usize = 1 << 24;

/// Per-element relative tolerance of a softmax over one row of [`LONG_ROW`] entries in [-1, 1)
/// at inverse temperature `t`. Worst-case budget of one element: `ex2.approx` (2^-22.5, 1.7e-7
/// relative); the f32 roundings of `x - m`, of `t * (x - m)` and of its product by log2(e), each
/// up to half an ulp of a value of magnitude up to `2|t|` (about `|t| * 1.7e-7` each, relative in
/// the exponential); the row's sum (compensated: a few 1e-7, the rescaling by `exp` in the merges
/// included); the division and the output's and the reference's roundings (6e-8 each). About
/// 1e-6 at `t = 1`, 3.5e-6 at `t = 10`: the tolerance is twice the `t = 1` budget plus
/// `3e-7 * |t|`. A plain f32 running sum per thread fails it: the tutorial kernel's sums were
/// off by 5e-5 at `t = 10` (measured on the CPU with its thread layout, below).
fn long_row_tolerance(t: f32) -> f32 {
    2e-6 + 3e-7 * t.abs()
}

/// One row of [`LONG_ROW`] through every softmax algorithm (the tutorial kernel, the default
/// one-pass plan: rows split over blocks, and one streaming block for the row; the split
/// path's bench candidates) at `t`, each
/// element within [`long_row_tolerance`] of the f64 reference.
fn softmax_long_row(gpu: &Gpu, rng: &mut StdRng, t: f32) -> Check {
    let x = random_matrix(rng, 1, LONG_ROW);
    let want = cpu::softmax_rows(&x, t);
    let want = want.as_slice().unwrap_or_default();
    let dx = gpu.upload_matrix(&x)?;
    let stream = OnePassConfig {
        split_max_rows: 0,
        ..OnePassConfig::default()
    };
    let mut failures = Vec::new();
    let mut check = |what: String, got: gpukern::Result<DeviceMatrix>| {
        let what = format!("{what} 1x{LONG_ROW}, t = {t}");
        let result = got
            .and_then(|y| y.to_array())
            .map_err(|e| format!("{what}: {e}").into())
            .and_then(|y| {
                check_rel_each(
                    &what,
                    y.as_slice().unwrap_or_default(),
                    want,
                    long_row_tolerance(t),
                )
            });
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    for algorithm in SoftmaxAlgorithm::ALL {
        check(
            format!("softmax_with({})", algorithm.name()),
            gpu.softmax_with(&dx, t, algorithm),
        );
    }
    // The stream, and the split candidates of the bench: evict-first writes, chunks of 8192
    // and 32768 columns.
    let candidates = [
        stream,
        OnePassConfig {
            split_streaming: true,
            ..OnePassConfig::default()
        },
        OnePassConfig {
            split_chunk: 8192,
            ..OnePassConfig::default()
        },
        OnePassConfig {
            split_chunk: 32768,
            ..OnePassConfig::default()
        },
    ];
    for config in candidates {
        let mut y = poisoned_matrix(gpu, 1, LONG_ROW)?;
        let got = gpu.softmax_into_one_pass(&dx, &mut y, t, &config).map(|()| y);
        check(
            format!("softmax_into_one_pass({:?})", config.plan(1, LONG_ROW)),
            got,
        );
    }
    all_passed(failures)
}

/// The relative error of a row's sum of exponentials as the tutorial kernel (`softmax_block_reduce`)
/// forms it: thread `tid` of `threads` adds entries `tid, tid + threads, ...` with `add`, then the
/// block adds the partial sums by a tree (in f32, as `block::reduce_sum`).
fn row_sum_error(terms: &[f32], threads: usize, add: impl Fn(&[f32], usize, usize) -> f32) -> f64 {
    let exact: f64 = terms.iter().map(|&e| f64::from(e)).sum();
    let mut partials: Vec<f32> = (0..threads).map(|tid| add(terms, tid, threads)).collect();
    while partials.len() > 1 {
        let half = partials.len() / 2;
        for i in 0..half {
            partials[i] += partials[i + half];
        }
        partials.truncate(half);
    }
    (f64::from(partials[0]) - exact).abs() / exact
}

/// A row of 2^24 at `t = 10`, the sums laid out as the tutorial kernel's 256 threads add them:
/// with the kernels' [`ksoft::KahanSum`] the sum stays at f32 rounding; with the plain running
/// sum it had (the planted defect), its error is past the long-row tolerance of the CUDA trials
/// ([`long_row_tolerance`], 5e-6 at `t = 10`): the trial would catch the old kernel.
fn a_long_row_sums_to_f32_rounding_with_compensation_and_not_without() {
    const LONG_ROW: usize = 1 << 24;
    const T: f32 = 10.0;
    /// The CUDA trials' per-element tolerance at `t = 10` (`long_row_tolerance(10.0)`).
    const TRIAL_TOLERANCE: f64 = 5e-6;
    let x = lcg_vec(41, LONG_ROW);
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let terms: Vec<f32> = x
        .iter()
        .map(|&v| (f64::from(ksoft::exponent(v, m, T))).exp() as f32)
        .collect();
    let threads = ksoft::BLOCK as usize;
    let plain = row_sum_error(&terms, threads, |e, tid, stride| {
        e.iter().skip(tid).step_by(stride).fold(0.0f32, |s, &v| s + v)
    });
    let compensated = row_sum_error(&terms, threads, |e, tid, stride| {
        let mut sum = ksoft::KahanSum::ZERO;
        e.iter().skip(tid).step_by(stride).for_each(|&v| sum.add(v));
        sum.value()
    });
    println!("2^24 terms at t = {T}: plain running sums {plain:.2e}, compensated {compensated:.2e}");
    assert!(compensated < 5e-7, "compensated sum off by {compensated:.2e}");
    assert!(
        plain > TRIAL_TOLERANCE,
        "the planted plain sum passes: {plain:.2e}"
    );
}

fn kahan_sum_keeps_what_a_plain_sum_rounds_away() {
    // 1 + 2^24 terms of 2^-24: a plain f32 sum stays at 1 (each term is half an ulp of 1 and
    // rounds away), the compensated one reaches 2.
    let mut sum = ksoft::KahanSum::ZERO;
    sum.add(1.0);
    let tiny = f32::powi(2.0, -24);
    for _ in 0..(1 << 24) {
        sum.add(tiny);
    }
    assert_eq!(sum.value(), 2.0);
    let mut scaled = sum;
    scaled.scale(0.5);
    assert_eq!(scaled.value(), 1.0);
}
