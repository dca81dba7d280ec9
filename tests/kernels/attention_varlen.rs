//! Variable-length batches (`gpukern::VarlenMask`, `AttentionMask::Varlen`): sequences of ragged
//! lengths packed in a batch of one, against a reference built without the varlen mask at all:
//! `cpu::attention` run on each sequence alone (its own `q`, `k`, `v` slices, the plain causal
//! or window mask), the rows concatenated. Sequences with no keys, no queries, more queries than
//! keys and fewer, tiles shared by two sequences; every rung; planted wrong offsets and a
//! planted rule that the same check rejects; and the errors.

use gpukern::{
    AttentionAlgorithm, AttentionMask, AttentionOptions, AttentionTensor, Error, Gpu, bf16, cpu, f16,
};
use libtest_mimic::Trial;
use ndarray::{Array4, s};
use rand::rngs::StdRng;

use super::attention::{TestElement, check_attention_abs};
use super::attention_masks::{Operands, Verdict, operands, planted_passes, run};
use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// The rule inside each sequence.
#[derive(Clone, Copy, Debug)]
enum Rule {
    All,
    Causal,
    Window(usize),
}

impl Rule {
    fn name(self) -> String {
        match self {
            Rule::All => "none".into(),
            Rule::Causal => "causal".into(),
            Rule::Window(w) => format!("window{w}"),
        }
    }

    /// The mask of one sequence alone, and the `within` of the varlen mask.
    fn mask(self) -> AttentionMask<'static> {
        match self {
            Rule::All => AttentionMask::None,
            Rule::Causal => AttentionMask::Causal,
            Rule::Window(window) => AttentionMask::SlidingWindow { window },
        }
    }
}

/// Query and key lengths of the small sequences: one with more keys than queries, one with no
/// query, one with no key, one with more queries than keys (its first rows see none under the
/// causal rule), one of a single token, and one longer than a block tile (128 rows), so that
/// tiles straddle sequences.
const SMALL: [(usize, usize); 6] = [(37, 50), (0, 12), (9, 0), (40, 23), (1, 1), (140, 131)];

/// Longer sequences for the GPU (past a thousand, tiles of every rung inside and across them).
const LONG: [(usize, usize); 4] = [(1031, 1031), (517, 700), (0, 5), (1200, 900)];

/// Cumulative offsets of `lens` (queries, keys).
fn offsets(lens: &[(usize, usize)]) -> (Vec<usize>, Vec<usize>) {
    let (mut cu_q, mut cu_k) = (vec![0], vec![0]);
    for &(lq, lk) in lens {
        cu_q.push(cu_q[cu_q.len() - 1] + lq);
        cu_k.push(cu_k[cu_k.len() - 1] + lk);
    }
    (cu_q, cu_k)
}

/// Every trial of varlen attention.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    let rules = [Rule::All, Rule::Causal, Rule::Window(17)];
    for (i, rule) in rules.into_iter().enumerate() {
        let (label, d) = [("bf16", 64), ("f16", 128), ("bf16", 128)][i];
        let name = format!("attention::varlen::{}::{label}_d{d}", rule.name());
        trials.push(trial(sim, &name, move |gpu, rng| {
            case_named(label, gpu, rng, rule, &SMALL, (2, 1), d, RUNGS)
        }));
    }
    trials.push(trial(sim, "attention::varlen::planted", planted));
    trials.push(trial(sim, "errors::attention_varlen", |gpu, _| errors(gpu)));
    for rule in rules {
        for (label, d) in [("bf16", 128), ("f16", 64)] {
            let name = format!("attention::varlen_small::{}::{label}_d{d}", rule.name());
            trials.push(trial(cuda, &name, move |gpu, rng| {
                case_named(label, gpu, rng, rule, &SMALL, (2, 1), d, ALL_RUNGS)
            }));
        }
        let rule = if let Rule::Window(_) = rule {
            Rule::Window(300)
        } else {
            rule
        };
        let name = format!("attention::varlen::{}::bf16_d128", rule.name());
        trials.push(trial(cuda, &name, move |gpu, rng| {
            case_named("bf16", gpu, rng, rule, &LONG, (4, 2), 128, ALL_RUNGS)
        }));
    }
    trials.push(trial(cuda, "attention::varlen::planted", planted));
    trials.push(trial(cuda, "errors::attention_varlen", |gpu, _| errors(gpu)));
    trials
}

/// The rungs the simulator runs.
const RUNGS: &[AttentionAlgorithm] = &[
    AttentionAlgorithm::Rows,
    AttentionAlgorithm::Flash,
    AttentionAlgorithm::WgmmaPingPong,
];

/// The GPU's: the plan's choice too, and the persistent walk.
const ALL_RUNGS: &[AttentionAlgorithm] = &[
    AttentionAlgorithm::Auto,
    AttentionAlgorithm::Rows,
    AttentionAlgorithm::Flash,
    AttentionAlgorithm::WgmmaPingPong,
    AttentionAlgorithm::WgmmaPersistent,
];

/// The reference: each sequence alone through `cpu::attention` with `rule`'s own mask, the
/// outputs `[1, total_q, heads, d]` and log-sum-exps `[1, heads, total_q]` put back in place.
fn reference<T: TestElement>(
    p: &Operands<T>,
    cu: (&[usize], &[usize]),
    rule: Rule,
) -> gpukern::Result<(Vec<f32>, Vec<f32>)> {
    let (_, total_q, heads, d) = p.q.dim();
    let mut out = Array4::<f32>::zeros((1, total_q, heads, d));
    let mut lse = ndarray::Array3::<f32>::from_elem((1, heads, total_q), f32::NEG_INFINITY);
    let options = AttentionOptions {
        mask: rule.mask(),
        ..Default::default()
    };
    for b in 0..cu.0.len() - 1 {
        let (q0, q1, k0, k1) = (cu.0[b], cu.0[b + 1], cu.1[b], cu.1[b + 1]);
        if q0 == q1 {
            continue;
        }
        let (o, l) = cpu::attention(
            &p.q.slice(s![.., q0..q1, .., ..]),
            &p.k.slice(s![.., k0..k1, .., ..]),
            &p.v.slice(s![.., k0..k1, .., ..]),
            &options,
        )?;
        out.slice_mut(s![.., q0..q1, .., ..]).assign(&o);
        lse.slice_mut(s![.., .., q0..q1]).assign(&l);
    }
    Ok((out.into_raw_vec_and_offset().0, lse.into_raw_vec_and_offset().0))
}

/// [`case`] in the element type named `label`: `"bf16"`, else f16.
#[allow(clippy::too_many_arguments)]
fn case_named(
    label: &str,
    gpu: &Gpu,
    rng: &mut StdRng,
    rule: Rule,
    lens: &[(usize, usize)],
    heads: (usize, usize),
    d: usize,
    rungs: &[AttentionAlgorithm],
) -> Check {
    match label {
        "bf16" => case::<bf16>(gpu, rng, rule, lens, heads, d, rungs),
        _ => case::<f16>(gpu, rng, rule, lens, heads, d, rungs),
    }
}

/// One packed batch under one rule: each rung of `rungs` against the per-sequence reference
/// (the rows rung to the output's rounding, the fused rungs to their rounded probabilities); a
/// rung the GPU cannot take (no `wgmma`) is skipped only on CUDA.
fn case<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    rule: Rule,
    lens: &[(usize, usize)],
    heads: (usize, usize),
    d: usize,
    rungs: &[AttentionAlgorithm],
) -> Check {
    let (cu_q, cu_k) = offsets(lens);
    let shape = (1, cu_q[cu_q.len() - 1], cu_k[cu_k.len() - 1], heads.0, heads.1);
    let p = operands::<T>(gpu, rng, shape, d)?;
    let (want_out, want_lse) = reference(&p, (&cu_q, &cu_k), rule)?;
    let varlen = gpu.varlen_mask(&cu_q, &cu_k, rule.mask())?;
    for &algorithm in rungs {
        let options = AttentionOptions {
            mask: AttentionMask::Varlen(&varlen),
            algorithm,
            ..Default::default()
        };
        let got = match run(gpu, &p, &options) {
            Err(Error::InvalidArgument { .. })
                if !gpu.is_simulator() && algorithm != AttentionAlgorithm::Rows =>
            {
                continue;
            }
            other => other?,
        };
        let abs = if algorithm == AttentionAlgorithm::Rows {
            1e-5
        } else {
            T::UNIT
        };
        check_attention_abs::<T>(
            &format!("varlen {} {}", rule.name(), algorithm.name()),
            (&got.0, &got.1),
            (&want_out, &want_lse),
            abs,
        )?;
    }
    Ok(())
}

/// Planted wrong varlen masks: the keys' offsets one token off at one boundary, no rule where
/// the reference is causal, a window one key wider; the check must reject each, on the rows and
/// the Hopper rung.
fn planted(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let lens = [(37, 50), (40, 23), (70, 70)];
    let (cu_q, cu_k) = offsets(&lens);
    let p = operands::<bf16>(gpu, rng, (1, cu_q[3], cu_k[3], 1, 1), 64)?;
    let mut shifted = cu_k.clone();
    shifted[1] += 1;
    let mut failures = Vec::new();
    for (what, rule, planted) in [
        (
            "keys' offsets one token off",
            Rule::All,
            gpu.varlen_mask(&cu_q, &shifted, AttentionMask::None)?,
        ),
        (
            "no rule for causal",
            Rule::Causal,
            gpu.varlen_mask(&cu_q, &cu_k, AttentionMask::None)?,
        ),
        (
            "window one key wider",
            Rule::Window(9),
            gpu.varlen_mask(&cu_q, &cu_k, AttentionMask::SlidingWindow { window: 10 })?,
        ),
    ] {
        let (want_out, want_lse) = reference(&p, (&cu_q, &cu_k), rule)?;
        let planted = AttentionMask::Varlen(&planted);
        failures.extend(planted_passes(gpu, &p, what, planted, (&want_out, &want_lse))?);
    }
    all_passed(failures)
}

/// Varlen's errors: offsets of different counts, not from 0, decreasing; a rule other than
/// none, causal or a window; a window of 0; a batch other than 1; totals other than the
/// tensors'; the causal flag beside the mask; the backward on a rung that takes no mask.
fn errors(gpu: &Gpu) -> Check {
    let buf = |n: usize| gpu.upload(&vec![bf16::from_f32(0.5); n]);
    let (qb, kb) = (buf(2 * 8 * 2 * 8)?, buf(16 * 2 * 8)?);
    let q = AttentionTensor::contiguous(&qb, [1, 16, 2, 8])?;
    let q2 = AttentionTensor::contiguous(&qb, [2, 8, 2, 8])?;
    let k = AttentionTensor::contiguous(&kb, [1, 16, 2, 8])?;
    let k2 = AttentionTensor::contiguous(&kb, [2, 8, 2, 8])?;
    let varlen = gpu.varlen_mask(&[0, 5, 16], &[0, 9, 16], AttentionMask::Causal)?;
    let short = gpu.varlen_mask(&[0, 5, 15], &[0, 9, 16], AttentionMask::None)?;
    let invalid = |r: &gpukern::Result<()>| matches!(r, Err(Error::InvalidArgument { .. }));
    let mismatch = |r: &gpukern::Result<()>| matches!(r, Err(Error::ShapeMismatch { .. }));
    let with = |mask, causal| AttentionOptions {
        mask,
        causal,
        ..Default::default()
    };
    let mask = |cu_q: &[usize], cu_k: &[usize], within| gpu.varlen_mask(cu_q, cu_k, within).map(|_| ());
    let cases: Vec<(&str, gpukern::Result<()>, Verdict)> = vec![
        (
            "offsets of different counts",
            mask(&[0, 5, 16], &[0, 16], AttentionMask::None),
            invalid,
        ),
        ("no offsets", mask(&[], &[], AttentionMask::None), invalid),
        (
            "offsets not from 0",
            mask(&[1, 16], &[0, 16], AttentionMask::None),
            invalid,
        ),
        (
            "decreasing offsets",
            mask(&[0, 9, 5, 16], &[0, 1, 2, 16], AttentionMask::None),
            invalid,
        ),
        (
            "ALiBi within",
            mask(&[0, 16], &[0, 16], AttentionMask::Alibi),
            invalid,
        ),
        (
            "window 0 within",
            mask(&[0, 16], &[0, 16], AttentionMask::SlidingWindow { window: 0 }),
            invalid,
        ),
        (
            "a batch of two",
            gpu.attention(&q2, &k2, &k2, &with(AttentionMask::Varlen(&varlen), false))
                .map(|_| ()),
            mismatch,
        ),
        (
            "totals other than the tensors'",
            gpu.attention(&q, &k, &k, &with(AttentionMask::Varlen(&short), false))
                .map(|_| ()),
            mismatch,
        ),
        (
            "the causal flag beside the mask",
            gpu.attention(&q, &k, &k, &with(AttentionMask::Varlen(&varlen), true))
                .map(|_| ()),
            invalid,
        ),
    ];
    let mut failures = Vec::new();
    for (what, result, ok) in cases {
        if !ok(&result) {
            failures.push(format!("{what}: {result:?}"));
        }
    }
    // The backward takes a varlen mask on the rungs that take masks only: the mma.sync rung
    // asked for is an error.
    let options = with(AttentionMask::Varlen(&varlen), false);
    let fwd = gpu.attention(&q, &k, &k, &options)?;
    let out = AttentionTensor::contiguous(&fwd.out, [1, 16, 2, 8])?;
    let flash = AttentionOptions {
        algorithm: AttentionAlgorithm::Flash,
        ..options
    };
    let backward = gpu.attention_backward(&q, &q, &k, &k, &out, &fwd.lse, &flash);
    if !matches!(backward, Err(Error::InvalidArgument { .. })) {
        failures.push(format!(
            "backward with varlen on Flash: {:?}",
            backward.map(|_| ())
        ));
    }
    all_passed(failures)
}
