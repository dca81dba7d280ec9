//! The attention masks (`gpukern::AttentionMask`: sliding window, ALiBi, documents, soft cap)
//! against `cpu::attention` with the same mask (f64, written out independently of
//! `gpukern_device::attention`), on every rung that has them (rows, flash, the `wgmma`
//! ping-pong), ragged shapes with `q_len != kv_len` where the mask allows it; planted wrong
//! masks (a window one key too wide, documents split elsewhere) that the same check rejects; and
//! the masks' errors.

use gpukern::{
    AttentionAlgorithm, AttentionMask, AttentionOptions, AttentionTensor, DocumentMask, Error, Gpu, bf16,
    cpu, f16,
};
use libtest_mimic::Trial;
use ndarray::Array4;
use rand::rngs::StdRng;

use super::attention::{TestElement, check_attention_abs, random4};
use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// The shipped masks the trials walk (the causal one has the family's own trials).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// No mask (`false`) or the causal one, through `AttentionOptions::mask`.
    Plain(bool),
    Window(usize),
    Alibi,
    Document,
    SoftCap(bool),
}

impl Kind {
    pub(crate) fn name(self) -> String {
        match self {
            Kind::Plain(causal) => (if causal { "causal" } else { "none" }).into(),
            Kind::Window(w) => format!("window{w}"),
            Kind::Alibi => "alibi".into(),
            Kind::Document => "document".into(),
            Kind::SoftCap(causal) => format!("softcap{}", if causal { "_causal" } else { "" }),
        }
    }
}

/// Batch, q_len, kv_len, heads, kv_heads.
pub(crate) type Shape = (usize, usize, usize, usize, usize);

/// The masks of the simulator's trials, each with a ragged shape that has several tiles of
/// every rung, tiles the mask empties and tiles it cuts (documents: `q_len == kv_len`).
const SIM_MASKS: [(Kind, Shape); 5] = [
    (Kind::Window(37), (1, 150, 170, 2, 1)),
    (Kind::Alibi, (1, 140, 131, 2, 1)),
    (Kind::Document, (2, 150, 150, 2, 1)),
    (Kind::SoftCap(false), (1, 70, 135, 2, 2)),
    (Kind::SoftCap(true), (1, 135, 135, 1, 1)),
];

/// Every trial of the masks.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    // Each mask on two of the fused rungs' (element type, head dim), so that each of the
    // `General` instances runs every mask but one in the simulator, the rows rung alongside.
    let configs = [("bf16", 64), ("f16", 128), ("bf16", 128), ("f16", 64)];
    for (i, (kind, shape)) in SIM_MASKS.into_iter().enumerate() {
        for (label, d) in [configs[i % 4], configs[(i + 2) % 4]] {
            let name = format!("attention::mask::{}::{label}_d{d}", kind.name());
            trials.push(trial(sim, &name, move |gpu, rng| {
                mask_case_named(label, gpu, rng, kind, shape, d, RUNGS)
            }));
        }
    }
    // The no-mask and causal instances of the fused rungs that the family's own trials leave
    // out (they walk the other element types and head dims), asked for through the mask option.
    for (causal, label, d) in [(false, "bf16", 64), (true, "bf16", 128), (true, "f16", 128)] {
        let kind = Kind::Plain(causal);
        let name = format!("attention::mask::{}::{label}_d{d}", kind.name());
        trials.push(trial(sim, &name, move |gpu, rng| {
            mask_case_named(label, gpu, rng, kind, (1, 135, 140, 2, 1), d, FUSED)
        }));
    }
    // Head dim 256, whose `General` instance is one tile at a time: the plan's choice and the
    // one-tile rung with a window, and the ping-pong asked for an error.
    trials.push(trial(sim, "attention::mask::window37::f16_d256", |gpu, rng| {
        wide_window::<f16>(gpu, rng, (1, 150, 170, 2, 1))
    }));
    trials.push(trial(sim, "attention::mask::window37::bf16_d256", |gpu, rng| {
        wide_window::<bf16>(gpu, rng, (1, 70, 100, 1, 1))
    }));
    trials.push(trial(sim, "attention::mask::planted", planted));
    trials.push(trial(sim, "errors::attention_masks", |gpu, _| errors(gpu)));
    // The simulator's cases on the GPU too (bf16, head dim 128): small enough for
    // compute-sanitizer.
    for (kind, shape) in SIM_MASKS {
        let name = format!("attention::mask_small::{}::bf16_d128", kind.name());
        trials.push(trial(cuda, &name, move |gpu, rng| {
            mask_case::<bf16>(gpu, rng, kind, shape, 128, RUNGS)
        }));
    }
    // On the GPU: the plan's choice and every rung against the f64 reference at sequences past
    // a thousand (GQA), and the bench's shape of the window and document masks against the rows
    // rung (the f64 reference would take minutes there).
    for (kind, shape) in [
        (Kind::Window(300), (1, 1031, 1100, 4, 2)),
        (Kind::Alibi, (1, 1031, 1031, 4, 1)),
        (Kind::Document, (2, 1031, 1031, 2, 2)),
        (Kind::SoftCap(false), (1, 1000, 1031, 2, 1)),
        (Kind::SoftCap(true), (1, 1031, 1031, 2, 1)),
    ] {
        for (label, d) in [("bf16", 128), ("f16", 64)] {
            let name = format!("attention::mask::{}::{label}_d{d}", kind.name());
            trials.push(trial(cuda, &name, move |gpu, rng| {
                mask_case_named(label, gpu, rng, kind, shape, d, ALL_RUNGS)
            }));
        }
    }
    for kind in [Kind::Window(1024), Kind::Document] {
        let name = format!("attention::mask_vs_rows::{}::bf16_4096", kind.name());
        trials.push(trial(cuda, &name, move |gpu, rng| {
            mask_vs_rows(gpu, rng, kind, (1, 4096, 4096, 4, 1), 128)
        }));
    }
    // The instances no trial above launches on the GPU (the coverage trial's list at b65b815):
    // the no-mask flash rung in f16 at head dim 64, and `General` in f16 at 128 (flash and
    // ping-pong) and in bf16 at 64 (flash), and the one-tile `General` at head dim 256 in both
    // types, on the simulator's small ragged shapes.
    for (kind, label, d, shape) in [
        (Kind::Plain(false), "f16", 64, (1, 135, 140, 2, 1)),
        (Kind::Window(37), "f16", 128, (1, 150, 170, 2, 1)),
        (Kind::Window(37), "bf16", 64, (1, 150, 170, 2, 1)),
        (Kind::Window(37), "bf16", 256, (1, 150, 170, 2, 1)),
        (Kind::Document, "f16", 256, (2, 150, 150, 2, 1)),
    ] {
        let name = format!("attention::mask_small::{}::{label}_d{d}", kind.name());
        trials.push(trial(cuda, &name, move |gpu, rng| {
            mask_case_named(label, gpu, rng, kind, shape, d, ALL_RUNGS)
        }));
    }
    trials.push(trial(cuda, "attention::mask::planted", planted));
    trials.push(trial(cuda, "errors::attention_masks", |gpu, _| errors(gpu)));
    trials
}

/// The rungs the simulator runs on each mask.
const RUNGS: &[AttentionAlgorithm] = &[
    AttentionAlgorithm::Rows,
    AttentionAlgorithm::Flash,
    AttentionAlgorithm::WgmmaPingPong,
];

/// The fused rungs alone.
const FUSED: &[AttentionAlgorithm] = &[AttentionAlgorithm::Flash, AttentionAlgorithm::WgmmaPingPong];

/// The GPU's: the plan's choice too, and the persistent walk where the mask allows it.
const ALL_RUNGS: &[AttentionAlgorithm] = &[
    AttentionAlgorithm::Auto,
    AttentionAlgorithm::Rows,
    AttentionAlgorithm::Flash,
    AttentionAlgorithm::WgmmaPingPong,
    AttentionAlgorithm::WgmmaPersistent,
];

/// Document ids of `batch` sequences of `seq` tokens: batch 0 packed documents of ragged
/// lengths (40, then 70, then the rest), the others runs of ids in no order (25 tokens of 7, 60
/// of 3, the rest 9), so that no tile classification may assume sorted ids.
pub(crate) fn document_ids(batch: usize, seq: usize) -> Vec<i32> {
    let mut ids = Vec::with_capacity(batch * seq);
    for b in 0..batch {
        for t in 0..seq {
            ids.push(if b == 0 {
                i32::from(t >= 40) + i32::from(t >= 110)
            } else {
                match t {
                    0..25 => 7,
                    25..85 => 3,
                    _ => 9,
                }
            });
        }
    }
    ids
}

/// The mask of `kind` (documents from `doc`).
pub(crate) fn mask_of(kind: Kind, doc: Option<&DocumentMask>) -> Result<AttentionMask<'_>, String> {
    Ok(match kind {
        Kind::Plain(false) => AttentionMask::None,
        Kind::Plain(true) => AttentionMask::Causal,
        Kind::Window(window) => AttentionMask::SlidingWindow { window },
        Kind::Alibi => AttentionMask::Alibi,
        Kind::Document => AttentionMask::Document(doc.ok_or("no document mask")?),
        Kind::SoftCap(causal) => AttentionMask::SoftCap { cap: 0.2, causal },
    })
}

/// Random operands on the device.
pub(crate) struct Operands<T> {
    pub(crate) q: Array4<T>,
    pub(crate) k: Array4<T>,
    pub(crate) v: Array4<T>,
    bufs: [gpukern::DeviceVec<T>; 3],
}

/// Random `q` `[b, sq, h, d]`, `k` and `v` `[b, skv, hk, d]` in `T`, on the host and the device.
pub(crate) fn operands<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (b, sq, skv, h, hk): Shape,
    d: usize,
) -> gpukern::Result<Operands<T>> {
    let (q, k, v) = (
        random4::<T>(rng, [b, sq, h, d]),
        random4::<T>(rng, [b, skv, hk, d]),
        random4::<T>(rng, [b, skv, hk, d]),
    );
    let up = |a: &Array4<T>| gpu.upload(a.as_slice().expect("standard layout"));
    let bufs = [up(&q)?, up(&k)?, up(&v)?];
    Ok(Operands { q, k, v, bufs })
}

/// Runs `options` on the operands: output and log-sum-exp.
pub(crate) fn run<T: TestElement>(
    gpu: &Gpu,
    ops: &Operands<T>,
    options: &AttentionOptions,
) -> gpukern::Result<(Vec<T>, Vec<f32>)> {
    let dims = |a: &Array4<T>| {
        let (b, s, h, d) = a.dim();
        [b, s, h, d]
    };
    let got = gpu.attention(
        &AttentionTensor::contiguous(&ops.bufs[0], dims(&ops.q))?,
        &AttentionTensor::contiguous(&ops.bufs[1], dims(&ops.k))?,
        &AttentionTensor::contiguous(&ops.bufs[2], dims(&ops.v))?,
        options,
    )?;
    Ok((got.out.to_vec()?, got.lse.to_vec()?))
}

/// A sliding window at head dim 256: the plan's choice and the one-tile Hopper rung against the
/// reference, and `WgmmaPingPong` an error that names the head dim (its ping-pong runs no mask
/// but the causal one).
fn wide_window<T: TestElement>(gpu: &Gpu, rng: &mut StdRng, shape: Shape) -> Check {
    let rungs = [AttentionAlgorithm::Auto, AttentionAlgorithm::Wgmma];
    mask_case::<T>(gpu, rng, Kind::Window(37), shape, 256, &rungs)?;
    let ops = operands::<T>(gpu, rng, shape, 256)?;
    let options = AttentionOptions {
        mask: mask_of(Kind::Window(37), None)?,
        algorithm: AttentionAlgorithm::WgmmaPingPong,
        ..Default::default()
    };
    match run(gpu, &ops, &options) {
        Err(Error::InvalidArgument { detail, .. }) if detail.contains("head dim 256") || !gpu.has_wgmma() => {
            Ok(())
        }
        other => Err(format!(
            "wgmma-pingpong with a window at head dim 256: {:?}",
            other.map(|_| ())
        )
        .into()),
    }
}

/// [`mask_case`] in the element type named `label`: `"bf16"`, else f16.
fn mask_case_named(
    label: &str,
    gpu: &Gpu,
    rng: &mut StdRng,
    kind: Kind,
    shape: Shape,
    d: usize,
    rungs: &[AttentionAlgorithm],
) -> Check {
    match label {
        "bf16" => mask_case::<bf16>(gpu, rng, kind, shape, d, rungs),
        _ => mask_case::<f16>(gpu, rng, kind, shape, d, rungs),
    }
}

/// One mask on one shape: each rung of `rungs` against the f64 reference (the rows rung to the
/// output's rounding, the fused rungs also to their rounded probabilities); a rung the call
/// cannot take here (no `wgmma` on this GPU) is skipped only on CUDA without sm_90a.
fn mask_case<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    kind: Kind,
    shape: Shape,
    d: usize,
    rungs: &[AttentionAlgorithm],
) -> Check {
    let ops = operands::<T>(gpu, rng, shape, d)?;
    let doc = gpu.document_mask(&document_ids(shape.0, shape.1), shape.0, shape.1)?;
    let mut options = AttentionOptions {
        mask: mask_of(kind, Some(&doc))?,
        ..Default::default()
    };
    let (want_out, want_lse) = cpu::attention(&ops.q, &ops.k, &ops.v, &options)?;
    let (want_out, want_lse) = (
        want_out.into_raw_vec_and_offset().0,
        want_lse.into_raw_vec_and_offset().0,
    );
    for &algorithm in rungs {
        options.algorithm = algorithm;
        let got = match run(gpu, &ops, &options) {
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
            &format!("{} {}", kind.name(), algorithm.name()),
            (&got.0, &got.1),
            (&want_out, &want_lse),
            abs,
        )?;
    }
    Ok(())
}

/// The plan's choice against the rows rung with the same mask at the bench's sequence length:
/// within both rungs' errors (as `attention::fused_vs_rows`).
fn mask_vs_rows(gpu: &Gpu, rng: &mut StdRng, kind: Kind, shape: Shape, d: usize) -> Check {
    let ops = operands::<bf16>(gpu, rng, shape, d)?;
    let doc = gpu.document_mask(&document_ids(shape.0, shape.1), shape.0, shape.1)?;
    let options = AttentionOptions {
        mask: mask_of(kind, Some(&doc))?,
        ..Default::default()
    };
    let fused = run(gpu, &ops, &options)?;
    let rows = run(
        gpu,
        &ops,
        &AttentionOptions {
            algorithm: AttentionAlgorithm::Rows,
            ..options
        },
    )?;
    let want: Vec<f32> = rows.0.iter().map(|x| x.to_f32()).collect();
    let got: Vec<f32> = fused.0.iter().map(|x| x.to_f32()).collect();
    check_close(
        "fused vs rows: out",
        &got,
        &want,
        <bf16 as TestElement>::UNIT,
        4.0 * <bf16 as TestElement>::UNIT,
    )?;
    check_close("fused vs rows: lse", &fused.1, &rows.1, 2e-4, 1e-5)
}

/// Planted wrong masks: the kernels run a window one key wider, and documents split one token
/// later, than the reference's; the check must reject both (it would pass them if it were
/// blind to a mask's edge), on the rows and the Hopper rung.
fn planted(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let shape = (1, 150, 150, 1, 1);
    let ops = operands::<bf16>(gpu, rng, shape, 64)?;
    let ids = document_ids(1, 150);
    let mut shifted = ids.clone();
    shifted[40] = shifted[39];
    let (doc, wrong_doc) = (
        gpu.document_mask(&ids, 1, 150)?,
        gpu.document_mask(&shifted, 1, 150)?,
    );
    let mut failures = Vec::new();
    for (what, want, planted) in [
        (
            "window one key wider",
            AttentionMask::SlidingWindow { window: 20 },
            AttentionMask::SlidingWindow { window: 21 },
        ),
        (
            "documents split one token later",
            AttentionMask::Document(&doc),
            AttentionMask::Document(&wrong_doc),
        ),
    ] {
        let reference = AttentionOptions {
            mask: want,
            ..Default::default()
        };
        let (want_out, want_lse) = cpu::attention(&ops.q, &ops.k, &ops.v, &reference)?;
        let (want_out, want_lse) = (
            want_out.into_raw_vec_and_offset().0,
            want_lse.into_raw_vec_and_offset().0,
        );
        failures.extend(planted_passes(gpu, &ops, what, planted, (&want_out, &want_lse))?);
    }
    all_passed(failures)
}

/// The rows and the Hopper rung run with the `planted` mask on `ops`, each checked against the
/// correct mask's reference `want` (output, log-sum-exp): a message for each rung whose planted
/// result passes the check (a rung the GPU cannot take is skipped only on CUDA).
pub(crate) fn planted_passes(
    gpu: &Gpu,
    ops: &Operands<bf16>,
    what: &str,
    planted: AttentionMask,
    (want_out, want_lse): (&[f32], &[f32]),
) -> gpukern::Result<Vec<String>> {
    let mut passed = Vec::new();
    for algorithm in [AttentionAlgorithm::Rows, AttentionAlgorithm::WgmmaPingPong] {
        let options = AttentionOptions {
            mask: planted,
            algorithm,
            ..Default::default()
        };
        let got = match run(gpu, ops, &options) {
            Err(Error::InvalidArgument { .. }) if !gpu.is_simulator() => continue,
            other => other?,
        };
        let verdict = check_attention_abs::<bf16>(
            what,
            (&got.0, &got.1),
            (want_out, want_lse),
            <bf16 as TestElement>::UNIT,
        );
        if verdict.is_ok() {
            passed.push(format!("{what} ({}) passed the check", algorithm.name()));
        }
    }
    Ok(passed)
}

/// Whether a result is the error a case expects.
pub(crate) type Verdict = fn(&gpukern::Result<()>) -> bool;

/// The masks' errors: the causal flag with another mask, a window of 0, a cap of 0 or NaN, a
/// document mask of another shape, documents with `q_len != kv_len`, document ids that come
/// back after another, the causal flag beside a mask in the backward.
fn errors(gpu: &Gpu) -> Check {
    let buf = |n: usize| gpu.upload(&vec![bf16::from_f32(0.5); n]);
    let (qb, kb) = (buf(2 * 8 * 2 * 8)?, buf(2 * 6 * 2 * 8)?);
    let q = AttentionTensor::contiguous(&qb, [2, 8, 2, 8])?;
    let kq = AttentionTensor::contiguous(&qb, [2, 8, 2, 8])?;
    let k = AttentionTensor::contiguous(&kb, [2, 6, 2, 8])?;
    let doc = gpu.document_mask(&[0; 16], 2, 8)?;
    let other_doc = gpu.document_mask(&[0; 8], 1, 8)?;
    let mut failures = Vec::new();
    let invalid = |r: &gpukern::Result<()>| matches!(r, Err(Error::InvalidArgument { .. }));
    let mismatch = |r: &gpukern::Result<()>| matches!(r, Err(Error::ShapeMismatch { .. }));
    let cases: Vec<(&str, gpukern::Result<()>, Verdict)> = vec![
        (
            "causal with a window",
            gpu.attention(
                &q,
                &kq,
                &kq,
                &AttentionOptions {
                    causal: true,
                    mask: AttentionMask::SlidingWindow { window: 4 },
                    ..Default::default()
                },
            )
            .map(|_| ()),
            invalid,
        ),
        (
            "window 0",
            gpu.attention(
                &q,
                &kq,
                &kq,
                &AttentionOptions {
                    mask: AttentionMask::SlidingWindow { window: 0 },
                    ..Default::default()
                },
            )
            .map(|_| ()),
            invalid,
        ),
        (
            "cap 0",
            gpu.attention(
                &q,
                &kq,
                &kq,
                &AttentionOptions {
                    mask: AttentionMask::SoftCap {
                        cap: 0.0,
                        causal: false,
                    },
                    ..Default::default()
                },
            )
            .map(|_| ()),
            invalid,
        ),
        (
            "cap NaN",
            gpu.attention(
                &q,
                &kq,
                &kq,
                &AttentionOptions {
                    mask: AttentionMask::SoftCap {
                        cap: f32::NAN,
                        causal: true,
                    },
                    ..Default::default()
                },
            )
            .map(|_| ()),
            invalid,
        ),
        (
            "document mask of another batch",
            gpu.attention(
                &q,
                &kq,
                &kq,
                &AttentionOptions {
                    mask: AttentionMask::Document(&other_doc),
                    ..Default::default()
                },
            )
            .map(|_| ()),
            mismatch,
        ),
        (
            "documents with q_len != kv_len",
            gpu.attention(
                &q,
                &k,
                &k,
                &AttentionOptions {
                    mask: AttentionMask::Document(&doc),
                    ..Default::default()
                },
            )
            .map(|_| ()),
            mismatch,
        ),
        (
            "ids of another length",
            gpu.document_mask(&[0; 15], 2, 8).map(|_| ()),
            mismatch,
        ),
        (
            "an id that comes back",
            gpu.document_mask(&[0, 0, 1, 1, 0, 2, 2, 2], 1, 8).map(|_| ()),
            invalid,
        ),
    ];
    for (what, result, ok) in cases {
        if !ok(&result) {
            failures.push(format!("{what}: {result:?}"));
        }
    }
    // The backward checks a mask as the forward does: the causal flag beside ALiBi.
    let d_out = q;
    let fwd = gpu.attention(&q, &kq, &kq, &AttentionOptions::default())?;
    let out = AttentionTensor::contiguous(&fwd.out, [2, 8, 2, 8])?;
    let backward = gpu.attention_backward(
        &d_out,
        &q,
        &kq,
        &kq,
        &out,
        &fwd.lse,
        &AttentionOptions {
            mask: AttentionMask::Alibi,
            causal: true,
            ..Default::default()
        },
    );
    if !matches!(backward, Err(Error::InvalidArgument { .. })) {
        failures.push(format!(
            "backward with ALiBi and causal: {:?}",
            backward.map(|_| ())
        ));
    }
    all_passed(failures)
}
