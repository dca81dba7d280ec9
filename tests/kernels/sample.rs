//! The sampling family against `cpu::sample_rows` (the same rules by sorting, in f64): per
//! backend, shape and option set (greedy, temperature alone, top-k, top-p, both), f32 and bf16
//! logits, the token of every row equal to the reference's (or, where the device's f32 sums
//! put the draw within `NUDGE` of a boundary between tokens, between the reference's tokens at
//! `u ± NUDGE`) (`sample::RxC`); NaN, infinite and tied logits, every rung (`sample::edges`);
//! the same tokens on a second run and new ones at a new offset (`sample::seeds`); on CUDA, the
//! frequencies of 2^17 draws from one row against its probabilities, on the radix and the
//! cluster kernel (`sample::frequencies`), and the GPU's tokens equal to the simulator's for the
//! same logits, seed and rung (`sample::same_as_simulator`); options out of range refused
//! (`errors::sample`); the free function (`global::sample`).

use gpukern::{Gpu, SampleAlgorithm, SampleOptions, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};

/// Simulator shapes: one logit, rows shorter than the block, ragged past it (512 threads), and
/// rows that the cluster kernel splits over 2 and 4 blocks (`2x5000`, `1x9001`).
const SIM_SHAPES: &[(usize, usize)] = &[(1, 1), (3, 7), (2, 1200), (2, 5000), (1, 9001)];

/// CUDA shapes: a Llama-2 vocabulary at batch 1 and 64, a Llama-3 one, and a ragged long row.
const CUDA_SHAPES: &[(usize, usize)] = &[(1, 32000), (64, 32000), (8, 128256), (3, 1_000_003), (300, 77)];

/// How far the draw's uniform number is nudged when the device's token differs from the
/// reference's: the device sums up to a million f32 weights (relative error about `1e-7 *
/// log2(n)` per level of its tree), so a draw within this of a boundary may fall either side.
const NUDGE: f64 = 1e-5;

/// The option sets every shape is drawn with.
fn option_sets(seed: u64) -> Vec<(&'static str, SampleOptions)> {
    let base = SampleOptions {
        seed,
        offset: 7,
        ..SampleOptions::default()
    };
    vec![
        ("greedy", SampleOptions::greedy()),
        ("t1", base),
        (
            "t0.7-k5",
            SampleOptions {
                temperature: 0.7,
                top_k: 5,
                ..base
            },
        ),
        (
            "t1.3-p0.9",
            SampleOptions {
                temperature: 1.3,
                top_p: 0.9,
                ..base
            },
        ),
        (
            "k50-p0.8",
            SampleOptions {
                top_k: 50,
                top_p: 0.8,
                ..base
            },
        ),
        ("k1", SampleOptions { top_k: 1, ..base }),
        (
            "t0.9-k1000-p0.5",
            SampleOptions {
                temperature: 0.9,
                top_k: 1000,
                top_p: 0.5,
                ..base
            },
        ),
    ]
}

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_SHAPES);
    trials.extend(backend_trials(cuda, CUDA_SHAPES));
    trials.push(trial(cuda, "sample::frequencies", |gpu, _| frequencies(gpu)));
    trials.push(trial(cuda, "sample::same_as_simulator", same_as_simulator));
    trials.push(global_trial("sample", global_sample));
    trials
}

/// One backend's trials.
fn backend_trials(target: &Target, shapes: &'static [(usize, usize)]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "sample::edges", |gpu, _| edges(gpu)),
        trial(target, "sample::seeds", |gpu, _| seeds(gpu)),
        trial(target, "errors::sample", |gpu, _| errors(gpu)),
    ];
    for &(rows, cols) in shapes {
        trials.push(trial(
            target,
            &format!("sample::{rows}x{cols}"),
            move |gpu, rng| shape(gpu, rng, (rows, cols)),
        ));
    }
    trials
}

/// Fails unless each row's token is the reference's, or lies between the reference's tokens at
/// `u - NUDGE` and `u + NUDGE` (a row of a million logits puts many tokens in that span).
fn check_tokens(what: &str, got: &[i32], x: &[f32], cols: usize, options: &SampleOptions) -> Check {
    let rows = x.len() / cols.max(1);
    if got.len() != rows {
        return Err(format!("{what}: {} tokens, expected {rows}", got.len()).into());
    }
    match cpu::sample_rows_rejected(got, x, cols, options, NUDGE).first() {
        None => Ok(()),
        Some(bad) => Err(format!(
            "{what}: row {} drew {:?}, expected {} ({} to {} within the nudge)",
            bad.row, bad.got, bad.want, bad.span.0, bad.span.1
        )
        .into()),
    }
}

/// Logits spread over [-6, 6) (a few dominant tokens, a long tail), every option set, f32 and
/// bf16.
fn shape(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let x: Vec<f32> = (0..rows * cols).map(|_| rng.random_range(-6.0f32..6.0)).collect();
    let x16: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let x16_wide: Vec<f32> = x16.iter().map(|v| v.to_f32()).collect();
    let dx =
        gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x.clone()).map_err(|e| e.to_string())?)?;
    let dx16 = gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x16).map_err(|e| e.to_string())?)?;
    let mut failures = Vec::new();
    let mut tokens = gpu.zeros_of::<i32>(rows)?;
    for (name, options) in option_sets(rng.random()) {
        for algorithm in SampleAlgorithm::ALL {
            let what = format!("sample({}, {name}) {rows}x{cols}", algorithm.name());
            gpu.sample_into_with(&dx, &options, &mut tokens, algorithm)?;
            if let Err(e) = check_tokens(&what, &tokens.to_vec()?, &x, cols, &options) {
                failures.push(e.to_string());
            }
            gpu.sample_into_with(&dx16, &options, &mut tokens, algorithm)?;
            if let Err(e) = check_tokens(
                &format!("{what} bf16"),
                &tokens.to_vec()?,
                &x16_wide,
                cols,
                &options,
            ) {
                failures.push(e.to_string());
            }
        }
    }
    all_passed(failures)
}

/// Rows of NaN, `-inf`, `+inf` and ties: all NaN or `-inf` give -1; a `+inf` gives its first
/// index; top-k keeps every logit tied with the k-th (a row of equal logits with `top_k = 1`
/// still draws among all of them); a NaN is never drawn.
fn edges(gpu: &Gpu) -> Check {
    let cols = 600;
    let mut rows: Vec<Vec<f32>> = Vec::new();
    rows.push(vec![f32::NAN; cols]);
    rows.push(vec![f32::NEG_INFINITY; cols]);
    let mut inf = vec![0.0f32; cols];
    inf[100] = f32::INFINITY;
    inf[550] = f32::INFINITY;
    rows.push(inf);
    rows.push(vec![1.5f32; cols]);
    let mut nan_heavy = vec![f32::NAN; cols];
    nan_heavy[3] = -1.0;
    nan_heavy[599] = -2.0;
    rows.push(nan_heavy);
    let x: Vec<f32> = rows.concat();
    let n = rows.len();
    let dx = gpu.upload_matrix(&Array2::from_shape_vec((n, cols), x.clone()).map_err(|e| e.to_string())?)?;
    let mut failures = Vec::new();
    let mut tokens = gpu.zeros_of::<i32>(n)?;
    for algorithm in SampleAlgorithm::ALL {
        for (name, options) in option_sets(3) {
            let name = format!("{name}, {}", algorithm.name());
            gpu.sample_into_with(&dx, &options, &mut tokens, algorithm)?;
            let got = tokens.to_vec()?;
            if let Err(e) = check_tokens(&format!("edges, {name}"), &got, &x, cols, &options) {
                failures.push(e.to_string());
            }
            let fixed = [(0, -1), (1, -1), (2, 100)];
            for (r, want) in fixed {
                if got[r] != want {
                    failures.push(format!("edges, {name}: row {r} gave {}, expected {want}", got[r]));
                }
            }
            if !(got[4] == 3 || got[4] == 599) {
                failures.push(format!("edges, {name}: the NaN row drew {}", got[4]));
            }
        }
    }
    let ties = gpu
        .sample(
            &dx,
            &SampleOptions {
                top_k: 1,
                seed: 11,
                ..SampleOptions::default()
            },
        )?
        .to_vec()?;
    if ties[3] < 0 || ties[3] as usize >= cols {
        failures.push(format!("ties with top_k = 1 drew {}", ties[3]));
    }
    all_passed(failures)
}

/// The same options twice give the same tokens; another offset (a decode step) or seed gives
/// different ones over 32 rows of equal logits.
fn seeds(gpu: &Gpu) -> Check {
    let (rows, cols) = (32, 50);
    let x = vec![0.25f32; rows * cols];
    let dx = gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x).map_err(|e| e.to_string())?)?;
    let options = SampleOptions {
        seed: 1234,
        offset: 5,
        ..SampleOptions::default()
    };
    let first = gpu.sample(&dx, &options)?.to_vec()?;
    let again = gpu.sample(&dx, &options)?.to_vec()?;
    let next = gpu
        .sample(&dx, &SampleOptions { offset: 6, ..options })?
        .to_vec()?;
    let other = gpu
        .sample(&dx, &SampleOptions { seed: 99, ..options })?
        .to_vec()?;
    if first != again {
        return Err("the same seed and offset drew different tokens".into());
    }
    if first == next || first == other {
        return Err("a new offset or seed drew the same 32 tokens".into());
    }
    // Equal logits: tokens spread over the row, not stuck at one end.
    let distinct = first.iter().collect::<std::collections::BTreeSet<_>>().len();
    if distinct < 12 {
        return Err(format!("32 draws from 50 equal logits gave only {distinct} tokens").into());
    }
    Ok(())
}

/// 2^17 rows of the same 6 logits at temperature 0.8 with top-k 5 (the radix kernel) and
/// without (the cluster kernel): each token's frequency within 5 standard deviations of its
/// probability (the excluded token never drawn).
fn frequencies(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for top_k in [5, 0] {
        if let Err(e) = frequencies_with(gpu, top_k) {
            failures.push(format!("top_k {top_k}: {e}"));
        }
    }
    all_passed(failures)
}

/// [`frequencies`] at one top-k.
fn frequencies_with(gpu: &Gpu, top_k: usize) -> Check {
    let logits = [1.0f32, 0.0, 2.0, -1.0, 0.5, -3.0];
    let (rows, cols) = (1usize << 17, logits.len());
    let x: Vec<f32> = (0..rows).flat_map(|_| logits).collect();
    let dx = gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x).map_err(|e| e.to_string())?)?;
    let options = SampleOptions {
        temperature: 0.8,
        top_k,
        seed: 42,
        ..SampleOptions::default()
    };
    let got = gpu.sample(&dx, &options)?.to_vec()?;
    let weights: Vec<f64> = logits
        .iter()
        .map(|&v| {
            if v > -3.0 || top_k == 0 {
                (f64::from(v) / 0.8).exp()
            } else {
                0.0
            }
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut failures = Vec::new();
    for (token, w) in weights.iter().enumerate() {
        let p = w / total;
        let count = got.iter().filter(|&&t| t == token as i32).count() as f64;
        let sd = (rows as f64 * p * (1.0 - p)).sqrt();
        if (count - rows as f64 * p).abs() > 5.0 * sd + 0.5 {
            failures.push(format!(
                "token {token}: {count} draws, expected {:.0} ± {sd:.0}",
                rows as f64 * p
            ));
        }
    }
    all_passed(failures)
}

/// The GPU's tokens are the simulator's, token for token, for the same logits, seed, options and
/// rung (each kernel's sums run in a fixed order that the launch shape alone sets, and the plan
/// sets the shape from the call alone): ragged rows split over 1 to 4 cluster blocks, every
/// option set, f32 and bf16, on several seeds.
fn same_as_simulator(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let sim = Gpu::simulator();
    let mut failures = Vec::new();
    for (rows, cols) in [(3, 1000), (2, 5000), (1, 9001)] {
        let x: Vec<f32> = (0..rows * cols).map(|_| rng.random_range(-6.0f32..6.0)).collect();
        let x16: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let matrix = Array2::from_shape_vec((rows, cols), x).map_err(|e| e.to_string())?;
        let matrix16 = Array2::from_shape_vec((rows, cols), x16).map_err(|e| e.to_string())?;
        let (dx, sx) = (gpu.upload_matrix(&matrix)?, sim.upload_matrix(&matrix)?);
        let (dx16, sx16) = (gpu.upload_matrix(&matrix16)?, sim.upload_matrix(&matrix16)?);
        for (name, options) in option_sets(rng.random()) {
            for algorithm in SampleAlgorithm::ALL {
                let what = format!("{rows}x{cols} {name} {}", algorithm.name());
                let mut on_gpu = gpu.zeros_of::<i32>(rows)?;
                let mut on_sim = sim.zeros_of::<i32>(rows)?;
                gpu.sample_into_with(&dx, &options, &mut on_gpu, algorithm)?;
                sim.sample_into_with(&sx, &options, &mut on_sim, algorithm)?;
                let (g, s) = (on_gpu.to_vec()?, on_sim.to_vec()?);
                if g != s {
                    failures.push(format!("{what}: GPU {g:?}, simulator {s:?}"));
                }
                gpu.sample_into_with(&dx16, &options, &mut on_gpu, algorithm)?;
                sim.sample_into_with(&sx16, &options, &mut on_sim, algorithm)?;
                let (g, s) = (on_gpu.to_vec()?, on_sim.to_vec()?);
                if g != s {
                    failures.push(format!("{what} bf16: GPU {g:?}, simulator {s:?}"));
                }
            }
        }
    }
    all_passed(failures)
}

/// Options out of range and shapes that disagree are refused before anything runs.
fn errors(gpu: &Gpu) -> Check {
    let dx = gpu.upload_matrix(&Array2::<f32>::zeros((2, 5)))?;
    let mut failures = Vec::new();
    let bad = [
        SampleOptions {
            temperature: -1.0,
            ..SampleOptions::default()
        },
        SampleOptions {
            temperature: f32::NAN,
            ..SampleOptions::default()
        },
        SampleOptions {
            top_p: 0.0,
            ..SampleOptions::default()
        },
        SampleOptions {
            top_p: 1.5,
            ..SampleOptions::default()
        },
    ];
    for options in bad {
        if gpu.sample(&dx, &options).is_ok() {
            failures.push(format!("{options:?} was accepted"));
        }
    }
    let mut three = gpu.zeros_of::<i32>(3)?;
    if gpu
        .sample_into(&dx, &SampleOptions::default(), &mut three)
        .is_ok()
    {
        failures.push("3 tokens for 2 rows was accepted".into());
    }
    let empty_cols = gpu.upload_matrix(&Array2::<f32>::zeros((2, 0)))?;
    if gpu.sample(&empty_cols, &SampleOptions::default()).is_ok() {
        failures.push("rows of 0 columns were accepted".into());
    }
    let no_rows = gpu.upload_matrix(&Array2::<f32>::zeros((0, 5)))?;
    if !gpu.sample(&no_rows, &SampleOptions::default())?.is_empty() {
        failures.push("no rows gave tokens".into());
    }
    all_passed(failures)
}

/// `gpukern::sample` on a view: greedy picks each row's largest.
fn global_sample(_rng: &mut StdRng) -> Check {
    let m = ndarray::arr2(&[[0.0f32, 5.0, 1.0], [2.0, -1.0, 0.5], [9.0, 9.0, 0.0]]);
    let got = gpukern::sample(&m.t(), &SampleOptions::greedy())?;
    if got.to_vec() != [2, 2, 0] {
        return Err(format!("greedy over the transposed view gave {got:?}, expected [2, 2, 0]").into());
    }
    Ok(())
}
