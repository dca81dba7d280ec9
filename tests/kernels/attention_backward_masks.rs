//! Attention backward with the shipped masks (sliding window, ALiBi, documents, the soft cap
//! with and without the causal mask, a varlen batch) against `cpu::attention_backward` with the
//! same mask (f64, the masks written out apart from `gpukern_device::attention`, a score
//! modification's derivative multiplying `dS`): the rungs that take them and the plan's choice,
//! on ragged shapes with `q_len != kv_len` where the mask allows it, GQA; the rungs that take no
//! mask asked for, an error; a planted wrong mask (a window one key wider, a cap 5% larger,
//! ALiBi's bias dropped) that the same check rejects. Tolerances as `attention_backward`'s (its module
//! documentation).

use gpukern::{AttentionAlgorithm, AttentionMask, AttentionOptions, Error, Gpu, bf16, cpu, f16};
use libtest_mimic::Trial;
use rand::rngs::StdRng;

use super::attention_backward::{Case, TestElement, backward, check_all, inputs};
use super::attention_masks::{Kind, Shape, document_ids, mask_of};
use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// The simulator's cases: each mask on a ragged shape with several of the fused rungs' tiles,
/// tiles the mask empties and tiles it cuts (documents: `q_len == kv_len`), and a head dim;
/// the one-kernel rung's ten masked instances (the masks that modify no score at head dims 64
/// and 128, ALiBi's bias at 64 and on its own instances at 128, the soft cap's on its own at
/// both, bf16 and f16: even places run bf16) among them, two key blocks at 200 keys.
const SIM_CASES: [(Kind, Shape, usize); 12] = [
    (Kind::Window(13), (1, 70, 90, 2, 1), 64),
    (Kind::Window(40), (1, 100, 200, 2, 1), 128),
    (Kind::Document, (2, 70, 70, 2, 1), 128),
    (Kind::Document, (2, 70, 70, 2, 2), 64),
    (Kind::Alibi, (1, 45, 40, 2, 1), 40),
    (Kind::SoftCap(false), (1, 33, 70, 2, 2), 128),
    (Kind::SoftCap(true), (1, 70, 70, 1, 1), 64),
    (Kind::Alibi, (1, 70, 90, 2, 1), 128),
    (Kind::Alibi, (1, 70, 200, 2, 1), 128),
    (Kind::Alibi, (1, 50, 90, 2, 2), 64),
    (Kind::SoftCap(true), (1, 40, 70, 2, 1), 128),
    (Kind::SoftCap(false), (1, 30, 40, 2, 2), 64),
];

/// The simulator's cases on which the `mma.sync` rung is not run: the three costliest there
/// (about 11 s of the 2-core CI machine's CPU); the other cases run each mask, head dim and type
/// of it. (On a GPU it runs every case.)
const SIM_FLASH_SKIPPED: [usize; 3] = [1, 2, 8];

/// The GPU's cases: past a thousand rows and keys (more rows than keys once: rows that see no
/// key), GQA, head dims 64 and 128 (and one the rows rung alone takes), each masked instance,
/// ALiBi (the masked instances' bias) and the soft cap (their bent scores) at 64 and 128 in
/// both types.
const CUDA_CASES: [(Kind, Shape, usize); 14] = [
    (Kind::Window(300), (1, 1031, 1100, 4, 2), 128),
    (Kind::Window(300), (1, 1100, 1031, 4, 2), 128),
    (Kind::Document, (2, 1031, 1031, 2, 2), 64),
    (Kind::Document, (2, 1031, 1031, 2, 1), 64),
    (Kind::Alibi, (1, 1031, 1031, 4, 1), 64),
    (Kind::SoftCap(false), (1, 1000, 1031, 2, 1), 64),
    (Kind::SoftCap(true), (1, 1031, 1031, 2, 1), 128),
    (Kind::Window(37), (1, 150, 170, 2, 1), 96),
    (Kind::Alibi, (1, 300, 333, 4, 2), 128),
    (Kind::Alibi, (1, 333, 300, 4, 2), 64),
    (Kind::Alibi, (2, 600, 650, 2, 1), 128),
    (Kind::Alibi, (1, 650, 600, 4, 2), 128),
    (Kind::SoftCap(true), (1, 600, 650, 4, 2), 64),
    (Kind::SoftCap(false), (2, 650, 600, 2, 1), 128),
];

/// Every trial of the masked backward.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, cases) in [(sim, &SIM_CASES[..]), (cuda, &CUDA_CASES[..])] {
        for (n, &(kind, shape, d)) in cases.iter().enumerate() {
            let name = format!("attention_backward::mask::{}::{n}_d{d}", kind.name());
            trials.push(if n % 2 == 0 {
                trial(target, &format!("{name}_bf16"), move |gpu, rng| {
                    mask_case::<bf16>(gpu, rng, (n, kind), shape, d)
                })
            } else {
                trial(target, &format!("{name}_f16"), move |gpu, rng| {
                    mask_case::<f16>(gpu, rng, (n, kind), shape, d)
                })
            });
        }
        trials.push(trial(target, "attention_backward::mask::varlen", varlen));
        trials.push(trial(target, "attention_backward::mask::planted", planted));
    }
    trials
}

/// The rungs a masked backward is checked on: the plan's choice (on a GPU; in the simulator
/// the plan's choice is one of the others, which run the same launches, and the plan's rules
/// have their own tests), the rows rung, the `mma.sync` rung (head dims 64 and 128; an error
/// elsewhere; in the simulator not on the cases of [`SIM_FLASH_SKIPPED`], `case` the case's
/// place) and the one-kernel Hopper rung (where it applies: `wgmma`, head dims 64 and 128; an
/// error elsewhere).
fn rungs(gpu: &Gpu, case: Option<usize>) -> Vec<AttentionAlgorithm> {
    let sim = gpu.is_simulator();
    let skips_flash = sim && case.is_some_and(|n| SIM_FLASH_SKIPPED.contains(&n));
    [
        AttentionAlgorithm::Auto,
        AttentionAlgorithm::Rows,
        AttentionAlgorithm::Flash,
        AttentionAlgorithm::WgmmaFused,
    ]
    .into_iter()
    .filter(|&a| match a {
        AttentionAlgorithm::Auto => !sim,
        AttentionAlgorithm::Flash => !skips_flash,
        _ => true,
    })
    .collect()
}

/// Whether `algorithm` takes a masked call at head dim `d` on `gpu`: the `mma.sync` rung and,
/// where it has `wgmma`, the one-kernel rung at head dims 64 and 128 (the cases' operands are
/// aligned).
fn takes_masks(gpu: &Gpu, algorithm: AttentionAlgorithm, d: usize) -> bool {
    match algorithm {
        AttentionAlgorithm::Flash => [64, 128].contains(&d),
        AttentionAlgorithm::WgmmaFused => gpu.has_wgmma() && [64, 128].contains(&d),
        _ => true,
    }
}

/// The rungs that take no mask but the causal one: each must refuse a masked call.
const UNMASKED_RUNGS: [AttentionAlgorithm; 1] = [AttentionAlgorithm::Wgmma];

/// One mask on one shape: each rung of [`rungs`] against the f64 reference; the rungs of
/// [`UNMASKED_RUNGS`] an error.
fn mask_case<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (n, kind): (usize, Kind),
    shape: Shape,
    d: usize,
) -> Check {
    let doc = gpu.document_mask(&document_ids(shape.0, shape.1), shape.0, shape.1)?;
    let options = AttentionOptions {
        mask: mask_of(kind, Some(&doc))?,
        ..Default::default()
    };
    check_rungs::<T>(gpu, rng, case_of(shape, d), &options, (kind.name(), Some(n)))
}

/// A backward case of `shape` at head dim `d` (the mask in the options).
fn case_of((b, sq, skv, h, hk): Shape, d: usize) -> Case {
    (b, sq, skv, h, hk, d, false)
}

/// The rungs of [`rungs`] on `options` against the reference, those of [`UNMASKED_RUNGS`] an
/// error that names the rows rung.
fn check_rungs<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    case: Case,
    options: &AttentionOptions,
    (what, n): (String, Option<usize>),
) -> Check {
    let x = inputs::<T>(rng, case, options)?;
    let want = cpu::attention_backward(&x.d_out, &x.q, &x.k, &x.v, options)?;
    for algorithm in rungs(gpu, n) {
        let options = AttentionOptions {
            algorithm,
            ..*options
        };
        let result = backward(gpu, &x, &options);
        if !takes_masks(gpu, algorithm, case.5) {
            match result {
                Err(Error::InvalidArgument { .. }) => continue,
                other => {
                    return Err(format!("{what} {}: {:?}", algorithm.name(), other.map(|_| ())).into());
                }
            }
        }
        let [dq, dk, dv] = result?;
        check_all(
            &format!("{what} {}", algorithm.name()),
            [&dq, &dk, &dv],
            &want,
            T::UNIT,
        )?;
    }
    for algorithm in UNMASKED_RUNGS {
        let options = AttentionOptions {
            algorithm,
            ..*options
        };
        match backward(gpu, &x, &options) {
            Err(Error::InvalidArgument { detail, .. }) if detail.contains("rows rung") => {}
            other => {
                return Err(format!("{what} {}: {:?}", algorithm.name(), other.map(|_| ())).into());
            }
        }
    }
    Ok(())
}

/// A packed batch of three sequences (rows and keys ragged, one sequence of a single row),
/// causal within each, bf16 at head dim 64.
fn varlen(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (cu_q, cu_k) = ([0usize, 30, 31, 70], [0usize, 40, 41, 90]);
    let mask = gpu.varlen_mask(&cu_q, &cu_k, AttentionMask::Causal)?;
    let options = AttentionOptions {
        mask: AttentionMask::Varlen(&mask),
        ..Default::default()
    };
    check_rungs::<bf16>(
        gpu,
        rng,
        (1, 70, 90, 2, 1, 64, false),
        &options,
        ("varlen".into(), None),
    )
}

/// Planted wrong masks: the kernels run a window one key wider, a soft cap 5% larger, and the
/// causal mask without ALiBi's bias, than the reference's; the check must reject each on every
/// rung that takes the reference's mask (it would pass them if it were blind to a mask's edge,
/// to the scores' modification and its derivative, or to a bias).
fn planted(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let mut failures = Vec::new();
    for (what, want, planted) in [
        (
            "window one key wider",
            AttentionMask::SlidingWindow { window: 20 },
            AttentionMask::SlidingWindow { window: 21 },
        ),
        (
            "ALiBi's bias dropped",
            AttentionMask::Alibi,
            AttentionMask::Causal,
        ),
        (
            "cap 5% larger",
            AttentionMask::SoftCap {
                cap: 0.2,
                causal: false,
            },
            AttentionMask::SoftCap {
                cap: 0.21,
                causal: false,
            },
        ),
    ] {
        let reference = AttentionOptions {
            mask: want,
            ..Default::default()
        };
        // The forward's output and log-sum-exp of the correct mask: only the backward differs.
        let x = inputs::<bf16>(rng, (1, 70, 70, 1, 1, 64, false), &reference)?;
        let want = cpu::attention_backward(&x.d_out, &x.q, &x.k, &x.v, &reference)?;
        for algorithm in rungs(gpu, None).into_iter().filter(|&a| takes_masks(gpu, a, 64)) {
            let options = AttentionOptions {
                mask: planted,
                algorithm,
                ..Default::default()
            };
            let [dq, dk, dv] = backward(gpu, &x, &options)?;
            if check_all(what, [&dq, &dk, &dv], &want, <bf16 as TestElement>::UNIT).is_ok() {
                failures.push(format!("{what}: {} passed", algorithm.name()));
            }
        }
    }
    all_passed(failures)
}
