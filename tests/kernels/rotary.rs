//! The rotary family (half-split and interleaved, i32 and i64 positions) against
//! `cpu::rotary_rows`: per backend, both algorithms on ragged and Llama-sized shapes
//! (`rotary::TxHxKxD`: tokens, q heads, kv heads, head size), large positions (`rotary::far`),
//! the checks and errors (`errors::rotary`); the free function (`global::rotary`).

use gpukern::{Error, Gpu, PositionElement, RotaryAlgorithm, RotaryLayout, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, global_trial, trial};

/// Llama 3's base.
const THETA: f64 = 500_000.0;

/// Simulator shapes `(tokens, heads, kv_heads, head_dim)`: one token, GQA with a head size of a
/// multiple of 16 (every kernel), a head size of 8 (interleaved vectors, half-split tutorial), of
/// 6 (the tutorial for both), a block with threads past the token's items (48 items, 64
/// threads), and a token of more items than a block's 1024 threads (1032 half-split, 2064
/// interleaved: the threads loop).
const SIM_SHAPES: &[(usize, usize, usize, usize)] = &[
    (1, 4, 2, 32),
    (3, 2, 1, 8),
    (2, 3, 1, 6),
    (2, 40, 8, 16),
    (1, 120, 9, 128),
];

/// CUDA shapes: Llama-3-8B (32 heads, 8 kv heads of 128) at 1, 8 and 4096 tokens and on either
/// side of the default's choice of block on an H200 (a thread per item up to 528 tokens on its
/// 132 SMs), a ragged one, and the vector kernel's block on either side of its 1024 threads
/// (1024 items half-split, and 1032).
const CUDA_SHAPES: &[(usize, usize, usize, usize)] = &[
    (1, 32, 8, 128),
    (8, 32, 8, 128),
    (528, 32, 8, 128),
    (529, 32, 8, 128),
    (4096, 32, 8, 128),
    (77, 5, 3, 64),
    (9, 3, 2, 24),
    (3, 120, 8, 128),
    (3, 120, 9, 128),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_SHAPES);
    trials.extend(backend_trials(cuda, CUDA_SHAPES));
    trials.push(global_trial("rotary", global));
    trials
}

fn backend_trials(target: &Target, shapes: &'static [(usize, usize, usize, usize)]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "rotary::far", far),
        trial(target, "errors::rotary", |gpu, _| errors(gpu)),
    ];
    for &(tokens, heads, kv, d) in shapes {
        trials.push(trial(
            target,
            &format!("rotary::i32::{tokens}x{heads}x{kv}x{d}"),
            move |gpu, rng| shape::<i32>(gpu, rng, (tokens, heads, kv, d), 4096),
        ));
        trials.push(trial(
            target,
            &format!("rotary::i64::{tokens}x{heads}x{kv}x{d}"),
            move |gpu, rng| shape::<i64>(gpu, rng, (tokens, heads, kv, d), 4096),
        ));
    }
    trials
}

/// A rotated value's tolerance: the kernels' cos and sin are within a few f32 ulps of the f64
/// ones of the same f32 angle, the rotation is in f32, and the output is rounded once to bf16
/// (2^-9 relative); an absolute floor for a sum that cancels to near 0 (|x| <= 1, so a few ulps
/// of 1 in f32, then the bf16 rounding of that).
const ABS: f32 = 1e-5;
const REL: f32 = 1.0 / 256.0;

/// Fails unless each `got[i]` is within `ABS + REL * |want[i]|` of `want[i]`.
fn close(what: &str, got: &[f32], want: &[f32]) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    // A NaN difference fails too.
    let within = |i: usize| (got[i] - want[i]).abs() <= ABS + REL * want[i].abs();
    match (0..got.len()).find(|&i| !within(i)) {
        None => Ok(()),
        Some(i) => Err(format!("{what}: element {i} got {}, expected {}", got[i], want[i]).into()),
    }
}

/// Both layouts with both algorithms on random `q` and `k` at the given positions.
fn every_call<P: PositionElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (tokens, heads, kv, d): (usize, usize, usize, usize),
    positions: &[P],
    wide: &[i64],
) -> Check {
    let round = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let (q, k) = (
        round(random_vec(rng, tokens * heads * d)),
        round(random_vec(rng, tokens * kv * d)),
    );
    let f32s = |v: &[bf16]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let dpos = gpu.upload_positions(positions)?;
    let freqs = gpu.rotary_frequencies(d, THETA)?;
    let inv_freq = gpukern::ops::rotary::rotary_inv_freq(d, THETA);
    let mut failures = Vec::new();
    for layout in [RotaryLayout::HalfSplit, RotaryLayout::Interleaved] {
        let half = layout == RotaryLayout::HalfSplit;
        let want_q = cpu::rotary_rows(&f32s(&q), d, wide, &inv_freq, half);
        let want_k = cpu::rotary_rows(&f32s(&k), d, wide, &inv_freq, half);
        for algorithm in RotaryAlgorithm::ALL {
            let matrix = |v: &[bf16], cols| Array2::from_shape_vec((tokens, cols), v.to_vec());
            let mut dq = gpu.upload_matrix(&matrix(&q, heads * d).map_err(|e| e.to_string())?)?;
            let mut dk = gpu.upload_matrix(&matrix(&k, kv * d).map_err(|e| e.to_string())?)?;
            gpu.rotary_with(&mut dq, &mut dk, &dpos, &freqs, layout, algorithm)?;
            let what = format!(
                "{layout:?} {} {} {tokens}x{heads}x{kv}x{d}",
                algorithm.name(),
                std::any::type_name::<P>()
            );
            for (name, got, want) in [("q", dq, &want_q), ("k", dk, &want_k)] {
                let got = f32s(&got.as_vec().to_vec()?);
                if let Err(e) = close(&format!("{what} {name}"), &got, want) {
                    failures.push(e.to_string());
                }
            }
        }
    }
    all_passed(failures)
}

/// Random positions below `max`.
fn shape<P: PositionElement + TryFrom<i64>>(
    gpu: &Gpu,
    rng: &mut StdRng,
    dims: (usize, usize, usize, usize),
    max: i64,
) -> Check {
    let wide: Vec<i64> = (0..dims.0).map(|_| rng.random_range(0..max)).collect();
    let positions: Vec<P> = wide.iter().filter_map(|&p| P::try_from(p).ok()).collect();
    every_call(gpu, rng, dims, &positions, &wide)
}

/// Positions 0, 1 and up to `2^24 - 1` (angles of millions of radians, reduced in f64).
fn far(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let wide = [0i64, 1, 131_071, 1_000_003, (1 << 24) - 1];
    let positions: Vec<i32> = wide.iter().map(|&p| p as i32).collect();
    every_call(gpu, rng, (wide.len(), 2, 1, 16), &positions, &wide)
}

/// Positions out of range, a bad head size or base, mismatched shapes are refused.
fn errors(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for bad in [-1i64, 1 << 24] {
        if !matches!(
            gpu.upload_positions(&[0, bad]),
            Err(Error::InvalidArgument { .. })
        ) {
            failures.push(format!("position {bad} was accepted"));
        }
    }
    let mut positions = gpu.upload_positions(&[0i32, 5])?;
    if positions.update(&[3, -2]).is_ok() || positions.update(&[1]).is_ok() {
        failures.push("update accepted a bad position or length".into());
    }
    for (d, theta) in [(0, 1e4), (7, 1e4), (8, f64::NAN), (8, 0.5)] {
        if gpu.rotary_frequencies(d, theta).is_ok() {
            failures.push(format!("head_dim {d}, theta {theta} accepted"));
        }
    }
    let freqs = gpu.rotary_frequencies(8, 1e4)?;
    let zeros = |rows, cols| gpu.upload_matrix(&Array2::from_elem((rows, cols), bf16::ZERO));
    let (mut q, mut k) = (zeros(2, 16)?, zeros(2, 12)?);
    if gpu
        .rotary(&mut q, &mut k, &positions, &freqs, RotaryLayout::HalfSplit)
        .is_ok()
    {
        failures.push("k of 12 columns (not whole heads of 8) was accepted".into());
    }
    let (mut q, mut k) = (zeros(3, 16)?, zeros(3, 8)?);
    if let Err(e) = expect_shape_mismatch(
        "positions",
        gpu.rotary(&mut q, &mut k, &positions, &freqs, RotaryLayout::HalfSplit),
        &[3],
        &[2],
    ) {
        failures.push(e.to_string());
    }
    let (mut q, mut k) = (zeros(0, 16)?, zeros(0, 8)?);
    let none = gpu.upload_positions::<i64>(&[])?;
    gpu.rotary(&mut q, &mut k, &none, &freqs, RotaryLayout::Interleaved)?;
    all_passed(failures)
}

/// The free function.
fn global(rng: &mut StdRng) -> Check {
    let (tokens, heads, kv, d) = (3, 2, 1, 16);
    let q: Vec<bf16> = random_vec(rng, tokens * heads * d)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let k: Vec<bf16> = random_vec(rng, tokens * kv * d)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let positions = [7i64, 0, 2048];
    let qa = Array2::from_shape_vec((tokens, heads * d), q.clone()).map_err(|e| e.to_string())?;
    let ka = Array2::from_shape_vec((tokens, kv * d), k.clone()).map_err(|e| e.to_string())?;
    let (gq, gk) = gpukern::rotary(&qa, &ka, &positions, d, 10_000.0, RotaryLayout::HalfSplit)?;
    let inv_freq = gpukern::ops::rotary::rotary_inv_freq(d, 10_000.0);
    let f = |v: &[bf16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
    let mut failures = Vec::new();
    for (name, got, x) in [("q", gq, &q), ("k", gk, &k)] {
        let want = cpu::rotary_rows(&f(x), d, &positions, &inv_freq, true);
        if let Err(e) = close(
            &format!("gpukern::rotary {name}"),
            &f(&got.iter().copied().collect::<Vec<_>>()),
            &want,
        ) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}
