//! The attention family against `cpu::attention` (f64 on the same rounded inputs): per backend,
//! element type (bf16, f16) and algorithm, ragged shapes (sequence 1, 7, 33; head dims 8 to
//! 256), causal and not, grouped-query and multi-query heads, `q_len != kv_len` both ways (rows
//! that see no key among them), a packed QKV buffer read in place through strides
//! (`attention::packed_qkv`), NaN in one key (`attention::nan_key`: the causal rows before it
//! stay finite), and the errors (`errors::attention`); the free functions
//! (`global::attention`). The output is checked element by element against the reference's
//! rounding (half a unit of the output type plus f32 sums), the log-sum-exp to 1e-4.

use gpukern::{
    AttentionAlgorithm, AttentionElement, AttentionOptions, AttentionTensor, DeviceVec, Error, Gpu, bf16,
    cpu, f16,
};
use libtest_mimic::Trial;
use ndarray::{Array4, ArrayView4};
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};

/// One trial's sizes: batch, q_len, kv_len, heads, kv_heads, head_dim, causal.
type Case = (usize, usize, usize, usize, usize, usize, bool);

/// Simulator cases: tiny and ragged (the simulator runs each lane, and each `mma` as a warp's
/// shuffles): the fused rung's two query tiles and two KV tiles (causal, `q_len < kv_len`) at
/// head dim 64, one ragged tile at 128.
const SIM_CASES: &[Case] = &[
    (1, 1, 1, 1, 1, 8, false),
    (1, 7, 7, 2, 1, 8, true),
    (2, 33, 33, 2, 2, 64, true),
    (1, 33, 17, 2, 1, 64, false),
    (1, 5, 9, 4, 2, 16, true),
    (1, 9, 5, 2, 1, 8, true),
    (1, 3, 4, 1, 1, 256, false),
    (1, 70, 80, 1, 1, 64, true),
    (1, 20, 40, 1, 1, 128, false),
];

/// Simulator cases of the Hopper rung alone (`wgmma_case`): several of its 128-row blocks and
/// 128-key tiles (64-key tiles at head dim 256), ragged, causal with `q_len` above and below
/// `kv_len`, GQA.
const SIM_WGMMA_CASES: &[Case] = &[
    (1, 300, 300, 2, 1, 64, true),
    (2, 130, 259, 2, 2, 128, true),
    (1, 257, 129, 2, 1, 128, true),
    (1, 129, 300, 1, 1, 64, false),
    (1, 140, 150, 2, 1, 256, true),
    (1, 70, 200, 1, 1, 256, false),
];

/// CUDA cases: ragged lengths past a 64-row tile, every head-dim class, GQA and MQA.
const CUDA_CASES: &[Case] = &[
    (1, 1, 1, 1, 1, 8, false),
    (2, 129, 129, 4, 2, 64, true),
    (2, 129, 129, 4, 2, 64, false),
    (1, 200, 333, 8, 1, 128, true),
    (1, 333, 200, 4, 4, 128, true),
    (1, 257, 257, 2, 2, 256, false),
    (1, 300, 450, 4, 2, 256, true),
    (1, 100, 100, 3, 3, 96, true),
    (1, 65, 130, 2, 1, 40, false),
    // Sequences of thousands against the f64 reference (the Hopper rung's 128-row blocks and
    // 128-key tiles, ragged, GQA, causal with q_len != kv_len).
    (1, 1031, 1031, 4, 2, 128, true),
    (1, 1500, 2049, 2, 1, 64, true),
    (1, 2049, 1000, 2, 2, 128, false),
];

/// CUDA cases of the fused rung against the rows rung (the tutorial rung as the reference on the
/// GPU, where the f64 reference on the CPU would take minutes): the bench's head dims at
/// sequences of thousands, ragged.
const FUSED_VS_ROWS: &[Case] = &[
    (1, 2048, 2048, 8, 8, 128, true),
    (1, 2048, 2048, 8, 2, 128, false),
    (2, 1537, 3001, 4, 4, 64, true),
    (1, 4096, 4096, 4, 1, 128, true),
    (1, 3999, 4001, 4, 2, 64, false),
    (1, 2048, 2048, 4, 2, 256, true),
    (1, 1537, 2999, 2, 2, 256, false),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_CASES);
    for (n, case) in SIM_WGMMA_CASES.iter().enumerate() {
        let (name, case) = (case_name(case), *case);
        let one = if n % 2 == 0 {
            trial(
                sim,
                &format!("attention::wgmma::bf16::{name}"),
                move |gpu, rng| wgmma_case::<bf16>(gpu, rng, case),
            )
        } else {
            trial(sim, &format!("attention::wgmma::f16::{name}"), move |gpu, rng| {
                wgmma_case::<f16>(gpu, rng, case)
            })
        };
        // The longest (the ragged GQA block at head dim 128) is in `slow_trials.rs`.
        trials.push(one);
    }
    // The ping-pong schedule on the first two cases (a ragged causal GQA block at head dims 64
    // and 128) and the first at head dim 256, on a block per tile and on the persistent grid (the
    // simulator's few multiprocessors: each block walks several tiles of the second case).
    for (rung, label) in [
        (AttentionAlgorithm::WgmmaPingPong, "wgmma_pingpong"),
        (AttentionAlgorithm::WgmmaPersistent, "wgmma_persistent"),
    ] {
        for (n, case) in [SIM_WGMMA_CASES[0], SIM_WGMMA_CASES[1], SIM_WGMMA_CASES[4]]
            .iter()
            .enumerate()
        {
            let (name, case) = (case_name(case), *case);
            let one = if n % 2 == 0 {
                trial(
                    sim,
                    &format!("attention::{label}::bf16::{name}"),
                    move |gpu, rng| wgmma_case_with::<bf16>(gpu, rng, case, rung),
                )
            } else {
                trial(
                    sim,
                    &format!("attention::{label}::f16::{name}"),
                    move |gpu, rng| wgmma_case_with::<f16>(gpu, rng, case, rung),
                )
            };
            // The longest (the ragged GQA block at head dim 128) is in `slow_trials.rs`.
            trials.push(one);
        }
    }
    // The ping-pong's causal instance at head dim 256 in f16 (the loop above runs it in bf16).
    trials.push(trial(
        sim,
        "attention::wgmma_pingpong::f16::1x70x100x1h1kv_d256_causal",
        |gpu, rng| {
            wgmma_case_with::<f16>(
                gpu,
                rng,
                (1, 70, 100, 1, 1, 256, true),
                AttentionAlgorithm::WgmmaPingPong,
            )
        },
    ));
    // The ping-pong at head dim 128 without a mask (its consumers hold `Q` in registers):
    // ragged, three block tiles per head, a KV tile and a ragged one.
    trials.push(trial(
        sim,
        "attention::wgmma_pingpong::bf16::1x257x129x2h1kv_d128_full",
        |gpu, rng| {
            wgmma_case_with::<bf16>(
                gpu,
                rng,
                (1, 257, 129, 2, 1, 128, false),
                AttentionAlgorithm::WgmmaPingPong,
            )
        },
    ));
    // Its persistent walk: 280 block tiles on the simulator's 132 multiprocessors, so that a
    // block loads `Q` into registers again after releasing it (among the slow trials).
    trials.push(trial(
        sim,
        "attention::wgmma_persistent::f16::walk_d128",
        |gpu, rng| {
            wgmma_case_with::<f16>(
                gpu,
                rng,
                (70, 129, 40, 2, 1, 128, false),
                AttentionAlgorithm::WgmmaPersistent,
            )
        },
    ));
    // More block tiles (140) than the simulator's 132 multiprocessors: eight persistent blocks
    // walk two tiles each (`Q` released and copied again, the ring's phases running on), rows
    // that see no key among them (causal, `q_len > kv_len`).
    // Among the slow trials (`slow_trials.rs`).
    trials.push(trial(
        sim,
        "attention::wgmma_persistent::bf16::walk",
        |gpu, rng| {
            wgmma_case_with::<bf16>(
                gpu,
                rng,
                (70, 129, 40, 2, 1, 64, true),
                AttentionAlgorithm::WgmmaPersistent,
            )
        },
    ));
    // Three consumer warpgroups (`Auto` at head dim 64 without a mask, 192-row block tiles):
    // two block tiles per head, the second of 8 rows (whose third consumer's rows are all past
    // the sequence), a KV tile and a ragged one; in f16 one ragged block tile of 70 rows (its
    // second consumer's rows partly, its third's all past the sequence). Then the causal
    // instances (from 2048 keys): the query rows at the keys' end, so that a few of the KV tiles
    // cross the diagonal; in bf16 two block tiles, the second of 8 rows, at the plan's boundary;
    // in f16 one ragged block tile and a ragged last KV tile. Last, the persistent walk, 140
    // block tiles on the simulator's 132 multiprocessors (among the slow trials).
    for (label, case) in [
        ("bf16", (1, 200, 130, 2, 1, 64, false)),
        ("f16", (1, 70, 70, 1, 1, 64, false)),
        ("bf16", (1, 200, 2048, 1, 1, 64, true)),
        ("f16", (1, 70, 2100, 1, 1, 64, true)),
    ] {
        let name = case_name(&case);
        trials.push(trial(
            sim,
            &format!("attention::auto_three::{label}::{name}"),
            move |gpu, rng| match label {
                "bf16" => wgmma_case_with::<bf16>(gpu, rng, case, AttentionAlgorithm::Auto),
                _ => wgmma_case_with::<f16>(gpu, rng, case, AttentionAlgorithm::Auto),
            },
        ));
    }
    trials.push(trial(sim, "attention::auto_three::f16::walk", |gpu, rng| {
        wgmma_case_with::<f16>(gpu, rng, (70, 129, 40, 2, 1, 64, false), AttentionAlgorithm::Auto)
    }));
    // Three rounds of the walk (300 block tiles, 36 blocks walk three): at head dim 64 block
    // tile `n` of a block's walk reads `Q` buffer `n % 2`, so the third reuses the first buffer
    // once the first tile released it (its barriers' second phase).
    trials.push(trial(
        sim,
        "attention::auto_three::f16::walk_three_rounds",
        |gpu, rng| {
            wgmma_case_with::<f16>(
                gpu,
                rng,
                (150, 129, 40, 2, 1, 64, false),
                AttentionAlgorithm::Auto,
            )
        },
    ));
    trials.push(trial(sim, "attention::wgmma::packed_qkv_d64", |gpu, rng| {
        packed_qkv_with(gpu, rng, (140, 64), AttentionAlgorithm::Wgmma)
    }));
    trials.push(trial(cuda, "attention::wgmma::packed_qkv_d128", |gpu, rng| {
        packed_qkv_with(gpu, rng, (1000, 128), AttentionAlgorithm::Wgmma)
    }));
    trials.push(trial(
        sim,
        "attention::wgmma::heads_outer_layout",
        heads_outer_layout,
    ));
    trials.push(trial(
        cuda,
        "attention::wgmma::heads_outer_layout",
        heads_outer_layout,
    ));
    trials.extend(backend_trials(cuda, CUDA_CASES));
    for (fused, rung) in [
        ("flash", AttentionAlgorithm::Flash),
        ("wgmma", AttentionAlgorithm::Wgmma),
        ("wgmma_pingpong", AttentionAlgorithm::WgmmaPingPong),
        ("wgmma_persistent", AttentionAlgorithm::WgmmaPersistent),
    ] {
        for (n, case) in FUSED_VS_ROWS.iter().enumerate() {
            if rung == AttentionAlgorithm::Flash && case.5 == 256 {
                // The fused `mma.sync` rung has no head dim 256.
                continue;
            }
            let (name, case) = (case_name(case), *case);
            trials.push(if n % 2 == 0 {
                trial(
                    cuda,
                    &format!("attention::{fused}_vs_rows::bf16::{name}"),
                    move |gpu, rng| fused_vs_rows::<bf16>(gpu, rng, case, rung),
                )
            } else {
                trial(
                    cuda,
                    &format!("attention::{fused}_vs_rows::f16::{name}"),
                    move |gpu, rng| fused_vs_rows::<f16>(gpu, rng, case, rung),
                )
            });
        }
    }
    // The persistent walk on the GPU: more block tiles than the H200's 132 multiprocessors (144
    // and 136), so that blocks walk a second tile (the fused-vs-rows cases have at most 128).
    for (label, case) in [
        ("bf16", (2, 1100, 1100, 8, 2, 128, true)),
        ("f16", (1, 2100, 2100, 8, 8, 64, false)),
    ] {
        let name = case_name(&case);
        let rung = AttentionAlgorithm::WgmmaPersistent;
        trials.push(trial(
            cuda,
            &format!("attention::wgmma_persistent_walk::{label}::{name}"),
            move |gpu, rng| match label {
                "bf16" => fused_vs_rows::<bf16>(gpu, rng, case, rung),
                _ => fused_vs_rows::<f16>(gpu, rng, case, rung),
            },
        ));
    }
    // The plan's choice at head dim 64, each case through `Auto` against the rows rung:
    // * `auto_three`: without a mask or with the causal one from 2048 keys, three consumer
    //   warpgroups (the fused-vs-rows cases above run two), on the persistent walk with 176 and
    //   168 block tiles, ragged, and causal at 2100 keys (its snake), at the plan's boundary
    //   (2048 keys) and past 4096 keys (a block per tile, 69 of them);
    // * `auto_walk_rounds`: blocks that walk three block tiles and more (two `Q` buffers, each
    //   reused once the tile two before released it): three consumers without a mask (384 block
    //   tiles of 192 rows on 132 blocks), two with the causal mask below 2048 keys (512 of 128
    //   rows);
    // * `auto_causal_walk`: just below the causal boundary (`THREE_CONSUMERS_CAUSAL_MIN_KEYS`),
    //   two consumers.
    for (group, label, case) in [
        ("auto_three", "bf16", (2, 2100, 2100, 8, 2, 64, false)),
        ("auto_three", "f16", (1, 3999, 4001, 8, 8, 64, false)),
        ("auto_three", "bf16", (2, 2100, 2100, 8, 2, 64, true)),
        ("auto_three", "f16", (1, 2048, 2048, 4, 1, 64, true)),
        ("auto_three", "f16", (1, 4300, 4200, 3, 1, 64, true)),
        ("auto_walk_rounds", "bf16", (8, 1000, 1000, 8, 8, 64, false)),
        ("auto_walk_rounds", "f16", (8, 1000, 1000, 8, 2, 64, true)),
        ("auto_causal_walk", "bf16", (1, 2047, 2047, 4, 2, 64, true)),
    ] {
        let name = case_name(&case);
        trials.push(trial(
            cuda,
            &format!("attention::{group}::{label}::{name}"),
            move |gpu, rng| match label {
                "bf16" => fused_vs_rows::<bf16>(gpu, rng, case, AttentionAlgorithm::Auto),
                _ => fused_vs_rows::<f16>(gpu, rng, case, AttentionAlgorithm::Auto),
            },
        ));
    }
    // The plan's choice at head dim 256 without a mask: one tile at a time on the persistent
    // walk (144 block tiles), which the ping-pong cases above do not run.
    trials.push(trial(
        cuda,
        "attention::auto_walk::bf16::2x1100x1100x8h2kv_d256_full",
        |gpu, rng| {
            fused_vs_rows::<bf16>(
                gpu,
                rng,
                (2, 1100, 1100, 8, 2, 256, false),
                AttentionAlgorithm::Auto,
            )
        },
    ));
    // The plan's causal boundary (`CAUSAL_PERSISTENT_MAX_KEYS`, 4096 keys): through `Auto`, the
    // persistent walk at 4096 keys and a block per tile just past it.
    trials.push(trial(
        cuda,
        "attention::auto_past_causal_walk::bf16::1x4100x4100x2h1kv_d128_causal",
        |gpu, rng| {
            fused_vs_rows::<bf16>(
                gpu,
                rng,
                (1, 4100, 4100, 2, 1, 128, true),
                AttentionAlgorithm::Auto,
            )
        },
    ));
    trials.push(trial(
        cuda,
        "attention::auto_causal_walk::f16::1x4096x4096x2h1kv_d128_causal",
        |gpu, rng| {
            fused_vs_rows::<f16>(
                gpu,
                rng,
                (1, 4096, 4096, 2, 1, 128, true),
                AttentionAlgorithm::Auto,
            )
        },
    ));
    // The causal walk at head dim 256 (one tile at a time) through `Auto`: 144 block tiles, so
    // that blocks walk a second, snaking round.
    trials.push(trial(
        cuda,
        "attention::auto_causal_walk::bf16::2x1100x1100x8h2kv_d256_causal",
        |gpu, rng| {
            fused_vs_rows::<bf16>(
                gpu,
                rng,
                (2, 1100, 1100, 8, 2, 256, true),
                AttentionAlgorithm::Auto,
            )
        },
    ));
    trials.extend(super::attention_faults::trials(sim));
    trials.push(global_trial("attention", global_attention));
    trials
}

/// The name of a case.
fn case_name(&(b, sq, skv, h, hk, d, causal): &Case) -> String {
    let mask = if causal { "causal" } else { "full" };
    format!("{b}x{sq}x{skv}x{h}h{hk}kv_d{d}_{mask}")
}

/// One backend's trials.
fn backend_trials(target: &Target, cases: &'static [Case]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "attention::packed_qkv", packed_qkv),
        trial(target, "attention::nan_key", nan_key),
        trial(target, "errors::attention", |gpu, _| errors(gpu)),
    ];
    // The simulator runs each rung once; CUDA also the plan's choice.
    let every = target.prefix != "sim";
    for (n, case) in cases.iter().enumerate() {
        let name = case_name(case);
        let case = *case;
        // Alternate the element types so that both meet every kind of case; both at head dims
        // 128 and 256, so that every fused kernel is launched.
        if n % 2 == 0 || case.5 >= 128 {
            trials.push(trial(
                target,
                &format!("attention::bf16::{name}"),
                move |gpu, rng| run_case::<bf16>(gpu, rng, case, every),
            ));
        }
        if n % 2 == 1 || case.5 >= 128 {
            trials.push(trial(
                target,
                &format!("attention::f16::{name}"),
                move |gpu, rng| run_case::<f16>(gpu, rng, case, every),
            ));
        }
    }
    trials
}

/// A test element: bf16 or f16, with its rounding unit (half an ulp relative).
pub(crate) trait TestElement: AttentionElement {
    const UNIT: f32;
}

impl TestElement for bf16 {
    const UNIT: f32 = 1.0 / 256.0;
}

impl TestElement for f16 {
    const UNIT: f32 = 1.0 / 2048.0;
}

/// A random `[b, s, h, d]` array of `T` in [-1, 1).
pub(crate) fn random4<T: TestElement>(rng: &mut StdRng, dims: [usize; 4]) -> Array4<T> {
    Array4::from_shape_fn(dims, |_| T::from_f32(rng.random_range(-1.0f32..1.0)))
}

/// Fails unless the output is within `2 UNIT |want| + 1e-5` of the reference element by
/// element (the output's own rounding plus f32 sums; NaN where the reference is), and the
/// log-sum-exp within `1e-4 + 1e-5 |want|` (the same infinity where the reference is
/// infinite).
fn check_attention<T: TestElement>(
    what: &str,
    (out, lse): (&[T], &[f32]),
    (want_out, want_lse): (&[f32], &[f32]),
) -> Check {
    check_attention_abs::<T>(what, (out, lse), (want_out, want_lse), 1e-5)
}

/// [`check_attention`] with an absolute output tolerance of `abs`.
pub(crate) fn check_attention_abs<T: TestElement>(
    what: &str,
    (out, lse): (&[T], &[f32]),
    (want_out, want_lse): (&[f32], &[f32]),
    abs: f32,
) -> Check {
    let got: Vec<f32> = out.iter().map(|x| x.to_f32()).collect();
    check_close(&format!("{what}: out"), &got, want_out, abs, 2.0 * T::UNIT)?;
    check_close(&format!("{what}: lse"), lse, want_lse, 1e-4, 1e-5)
}

/// The Hopper rung alone on one case against the reference (the fused rungs' tolerance).
fn wgmma_case<T: TestElement>(gpu: &Gpu, rng: &mut StdRng, case: Case) -> Check {
    wgmma_case_with::<T>(gpu, rng, case, AttentionAlgorithm::Wgmma)
}

/// [`wgmma_case`] with the Hopper rung's schedule `algorithm` (`Wgmma` or `WgmmaPingPong`).
fn wgmma_case_with<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (b, sq, skv, h, hk, d, causal): Case,
    algorithm: AttentionAlgorithm,
) -> Check {
    let (q, k, v) = (
        random4::<T>(rng, [b, sq, h, d]),
        random4::<T>(rng, [b, skv, hk, d]),
        random4::<T>(rng, [b, skv, hk, d]),
    );
    let up = |a: &Array4<T>| gpu.upload(a.as_slice().expect("standard layout"));
    let (qb, kb, vb) = (up(&q)?, up(&k)?, up(&v)?);
    let options = AttentionOptions {
        causal,
        scale: None,
        algorithm,
        ..Default::default()
    };
    let got = gpu.attention(
        &AttentionTensor::contiguous(&qb, [b, sq, h, d])?,
        &AttentionTensor::contiguous(&kb, [b, skv, hk, d])?,
        &AttentionTensor::contiguous(&vb, [b, skv, hk, d])?,
        &options,
    )?;
    let (want_out, want_lse) = cpu::attention(&q, &k, &v, &options)?;
    check_attention_abs::<T>(
        "wgmma",
        (&got.out.to_vec()?, &got.lse.to_vec()?),
        (
            &want_out.into_raw_vec_and_offset().0,
            &want_lse.into_raw_vec_and_offset().0,
        ),
        T::UNIT,
    )
}

/// The check of a fused rung's bf16 output against the reference (`run_case`'s tolerance for
/// the fused rungs: their rounded probabilities add up to `UNIT max|v|`, `|v| < 1` here); what
/// the planted-fault trials (`attention_faults`) put their emulations through.
pub(crate) fn check_fused(
    what: &str,
    (out, lse): (&[bf16], &[f32]),
    (want_out, want_lse): (&[f32], &[f32]),
) -> Check {
    check_attention_abs::<bf16>(what, (out, lse), (want_out, want_lse), bf16::UNIT)
}

/// Every algorithm (`every`; else the rungs alone, not `Auto`) on one case against the
/// reference.
fn run_case<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (b, sq, skv, h, hk, d, causal): Case,
    every: bool,
) -> Check {
    let (q, k, v) = (
        random4::<T>(rng, [b, sq, h, d]),
        random4::<T>(rng, [b, skv, hk, d]),
        random4::<T>(rng, [b, skv, hk, d]),
    );
    let (qb, kb, vb) = (
        gpu.upload(q.as_slice().expect("standard layout"))?,
        gpu.upload(k.as_slice().expect("standard layout"))?,
        gpu.upload(v.as_slice().expect("standard layout"))?,
    );
    let (qt, kt, vt) = (
        AttentionTensor::contiguous(&qb, [b, sq, h, d])?,
        AttentionTensor::contiguous(&kb, [b, skv, hk, d])?,
        AttentionTensor::contiguous(&vb, [b, skv, hk, d])?,
    );
    let mut options = AttentionOptions {
        causal,
        ..Default::default()
    };
    let (want_out, want_lse) = cpu::attention(&q, &k, &v, &options)?;
    let (want_out, want_lse) = (
        want_out.into_raw_vec_and_offset().0,
        want_lse.into_raw_vec_and_offset().0,
    );
    for algorithm in AttentionAlgorithm::ALL {
        // `Auto` and `WgmmaFused` (a backward schedule: the forward's Hopper choice) run kernels
        // the other algorithms run; the simulator spares them.
        if !every
            && matches!(
                algorithm,
                AttentionAlgorithm::Auto | AttentionAlgorithm::WgmmaFused
            )
        {
            continue;
        }
        options.algorithm = algorithm;
        let result = gpu.attention(&qt, &kt, &vt, &options);
        // The fused `mma.sync` rung takes head dims 64 and 128, the Hopper rung (on a GPU with
        // `wgmma`) 256 too.
        let supported = match algorithm {
            AttentionAlgorithm::Flash => d == 64 || d == 128,
            AttentionAlgorithm::Wgmma
            | AttentionAlgorithm::WgmmaPingPong
            | AttentionAlgorithm::WgmmaPersistent
            | AttentionAlgorithm::WgmmaFused => (d == 64 || d == 128 || d == 256) && gpu.has_wgmma(),
            AttentionAlgorithm::Auto | AttentionAlgorithm::Rows => true,
        };
        if !supported {
            match result {
                Err(Error::InvalidArgument { .. }) => continue,
                other => {
                    return Err(
                        format!("{} at head dim {d}: {:?}", algorithm.name(), other.map(|_| ())).into(),
                    );
                }
            }
        }
        let got = result?;
        // The fused rung rounds the probabilities to `T` for `P V`: up to `UNIT max|v|` more
        // (|v| < 1 here); the rows rung only the output.
        let fused = (d == 64 || d == 128 || d == 256) && algorithm != AttentionAlgorithm::Rows;
        check_attention_abs::<T>(
            algorithm.name(),
            (&got.out.to_vec()?, &got.lse.to_vec()?),
            (&want_out, &want_lse),
            if fused { T::UNIT } else { 1e-5 },
        )?;
    }
    Ok(())
}

/// A fused rung (`rung`: flash or wgmma) against the rows rung on one case: outputs within the
/// sum of both rungs' errors against the exact result (the rows rung's output rounding, the
/// fused rung's rounded probabilities and output rounding: `UNIT + 4 UNIT |want|`), log-sum-exp
/// within `2e-4`.
fn fused_vs_rows<T: TestElement>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (b, sq, skv, h, hk, d, causal): Case,
    rung: AttentionAlgorithm,
) -> Check {
    let (q, k, v) = (
        random4::<T>(rng, [b, sq, h, d]),
        random4::<T>(rng, [b, skv, hk, d]),
        random4::<T>(rng, [b, skv, hk, d]),
    );
    let up = |a: &Array4<T>| gpu.upload(a.as_slice().expect("standard layout"));
    let (qb, kb, vb) = (up(&q)?, up(&k)?, up(&v)?);
    let (qt, kt, vt) = (
        AttentionTensor::contiguous(&qb, [b, sq, h, d])?,
        AttentionTensor::contiguous(&kb, [b, skv, hk, d])?,
        AttentionTensor::contiguous(&vb, [b, skv, hk, d])?,
    );
    let run = |algorithm| {
        let options = AttentionOptions {
            causal,
            scale: None,
            algorithm,
            ..Default::default()
        };
        gpu.attention(&qt, &kt, &vt, &options)
    };
    let (rows, flash) = (run(AttentionAlgorithm::Rows)?, run(rung)?);
    let wide = |x: &DeviceVec<T>| -> gpukern::Result<Vec<f32>> {
        Ok(x.to_vec()?.iter().map(|e| e.to_f32()).collect())
    };
    check_close(
        &format!("{} vs rows: out", rung.name()),
        &wide(&flash.out)?,
        &wide(&rows.out)?,
        T::UNIT,
        4.0 * T::UNIT,
    )?;
    check_close(
        &format!("{} vs rows: lse", rung.name()),
        &flash.lse.to_vec()?,
        &rows.lse.to_vec()?,
        2e-4,
        1e-5,
    )
}

/// A packed QKV projection `[b, s, 3, h, d]` read in place: three strided views of one buffer,
/// with an explicit scale, against the reference on the three parts copied out.
fn packed_qkv(gpu: &Gpu, rng: &mut StdRng) -> Check {
    packed_qkv_with(gpu, rng, (9, 16), AttentionAlgorithm::Auto)
}

/// [`packed_qkv`] at sequence and head dim `(s, d)` with `algorithm` (the Hopper rung reads the
/// three parts through strided 4-D tensor maps; the fused rungs' tolerance then).
fn packed_qkv_with(
    gpu: &Gpu,
    rng: &mut StdRng,
    (s, d): (usize, usize),
    algorithm: AttentionAlgorithm,
) -> Check {
    let (b, h) = (2, 2);
    let qkv: Vec<bf16> = (0..b * s * 3 * h * d)
        .map(|_| bf16::from_f32(rng.random_range(-1.0f32..1.0)))
        .collect();
    let buffer = gpu.upload(&qkv)?;
    let strides = [s * 3 * h * d, 3 * h * d, d];
    let part = |p: usize| AttentionTensor::strided(&buffer, p * h * d, [b, s, h, d], strides);
    let options = AttentionOptions {
        causal: true,
        scale: Some(0.3),
        algorithm,
        ..Default::default()
    };
    let got = gpu.attention(&part(0)?, &part(1)?, &part(2)?, &options)?;
    let view = ArrayView4::from_shape((b, s, 3 * h, d), &qkv)?;
    let copy = |p: usize| view.slice(ndarray::s![.., .., p * h..(p + 1) * h, ..]).to_owned();
    let (want_out, want_lse) = cpu::attention(&copy(0), &copy(1), &copy(2), &options)?;
    let abs = if algorithm == AttentionAlgorithm::Auto {
        1e-5
    } else {
        bf16::UNIT
    };
    check_attention_abs::<bf16>(
        "packed qkv",
        (&got.out.to_vec()?, &got.lse.to_vec()?),
        (
            &want_out.into_raw_vec_and_offset().0,
            &want_lse.into_raw_vec_and_offset().0,
        ),
        abs,
    )
}

/// Operands laid out `[b, h, s, d]` in memory (heads outer), given as strided `[b, s, h, d]`
/// views: their tensor maps break the driver's nesting rule, so the plan sends the call to the
/// fused `mma.sync` rung (right against the reference) and the Hopper rung asked for is an
/// error.
fn heads_outer_layout(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (b, s, h, d) = (1, 40, 2, 64);
    let bhsd = |rng: &mut StdRng| random4::<bf16>(rng, [b, h, s, d]);
    let (q, k, v) = (bhsd(rng), bhsd(rng), bhsd(rng));
    let up = |a: &Array4<bf16>| gpu.upload(a.as_slice().expect("standard layout"));
    let (qb, kb, vb) = (up(&q)?, up(&k)?, up(&v)?);
    let strides = [h * s * d, d, s * d];
    let t = |x| AttentionTensor::strided(x, 0, [b, s, h, d], strides);
    let run = |algorithm| {
        let options = AttentionOptions {
            causal: true,
            scale: None,
            algorithm,
            ..Default::default()
        };
        gpu.attention(&t(&qb)?, &t(&kb)?, &t(&vb)?, &options)
    };
    match run(AttentionAlgorithm::Wgmma) {
        Err(Error::InvalidArgument { .. }) => {}
        other => return Err(format!("wgmma on a heads-outer layout: {:?}", other.map(|_| ())).into()),
    }
    let got = run(AttentionAlgorithm::Auto)?;
    let bshd = |a: &Array4<bf16>| a.view().permuted_axes([0, 2, 1, 3]).to_owned();
    let options = AttentionOptions {
        causal: true,
        ..Default::default()
    };
    let (want_out, want_lse) = cpu::attention(&bshd(&q), &bshd(&k), &bshd(&v), &options)?;
    check_attention_abs::<bf16>(
        "heads-outer layout",
        (&got.out.to_vec()?, &got.lse.to_vec()?),
        (
            &want_out.into_raw_vec_and_offset().0,
            &want_lse.into_raw_vec_and_offset().0,
        ),
        bf16::UNIT,
    )
}

/// A NaN in key 3 (causal, 8 rows): rows 0..3 never see it and stay finite and right, rows
/// 3.. are NaN (output and log-sum-exp), as the reference.
fn nan_key(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (s, d) = (8, 8);
    let q = random4::<bf16>(rng, [1, s, 1, d]);
    let mut k = random4::<bf16>(rng, [1, s, 1, d]);
    let v = random4::<bf16>(rng, [1, s, 1, d]);
    k[[0, 3, 0, 5]] = bf16::NAN;
    let options = AttentionOptions {
        causal: true,
        ..Default::default()
    };
    let up = |a: &Array4<bf16>| gpu.upload(a.as_slice().expect("standard layout"));
    let (qb, kb, vb) = (up(&q)?, up(&k)?, up(&v)?);
    let t = |x| AttentionTensor::contiguous(x, [1, s, 1, d]);
    let got = gpu.attention(&t(&qb)?, &t(&kb)?, &t(&vb)?, &options)?;
    let (out, lse) = (got.out.to_vec()?, got.lse.to_vec()?);
    if lse[..3].iter().any(|x| !x.is_finite()) || lse[3..].iter().any(|x| !x.is_nan()) {
        return Err(format!("lse {lse:?}: rows 0..3 finite, 3.. NaN expected").into());
    }
    let (want_out, want_lse) = cpu::attention(&q, &k, &v, &options)?;
    check_attention::<bf16>(
        "nan key",
        (&out, &lse),
        (
            &want_out.into_raw_vec_and_offset().0,
            &want_lse.into_raw_vec_and_offset().0,
        ),
    )
}

/// The errors: shapes that do not fit, unsupported head dims, a bad scale, strides past the
/// buffer, wrong output lengths; and the empty cases, which are empty results.
fn errors(gpu: &Gpu) -> Check {
    let buf = |n: usize| gpu.zeros_of::<bf16>(n);
    let opts = AttentionOptions::default();
    let mut failures = Vec::new();
    let mut expect = |what: &str, result: gpukern::Result<()>, want: fn(&Error) -> bool| match result {
        Err(e) if want(&e) => {}
        other => failures.push(format!("{what}: {other:?}")),
    };
    let shape_mismatch: fn(&Error) -> bool = |e| matches!(e, Error::ShapeMismatch { .. });
    let invalid: fn(&Error) -> bool = |e| matches!(e, Error::InvalidArgument { .. });
    let run = |qd: [usize; 4], kd: [usize; 4], vd: [usize; 4], o: &AttentionOptions| -> gpukern::Result<()> {
        let (qb, kb, vb) = (
            buf(qd.iter().product())?,
            buf(kd.iter().product())?,
            buf(vd.iter().product())?,
        );
        gpu.attention(
            &AttentionTensor::contiguous(&qb, qd)?,
            &AttentionTensor::contiguous(&kb, kd)?,
            &AttentionTensor::contiguous(&vb, vd)?,
            o,
        )
        .map(|_| ())
    };
    expect(
        "k and v differ",
        run([1, 4, 2, 8], [1, 4, 2, 8], [1, 5, 2, 8], &opts),
        shape_mismatch,
    );
    expect(
        "batch differs",
        run([2, 4, 2, 8], [1, 4, 2, 8], [1, 4, 2, 8], &opts),
        shape_mismatch,
    );
    expect(
        "head dim differs",
        run([1, 4, 2, 16], [1, 4, 2, 8], [1, 4, 2, 8], &opts),
        shape_mismatch,
    );
    expect(
        "kv heads 3 of 4",
        run([1, 4, 4, 8], [1, 4, 3, 8], [1, 4, 3, 8], &opts),
        shape_mismatch,
    );
    expect(
        "kv heads 0",
        run([1, 4, 4, 8], [1, 4, 0, 8], [1, 4, 0, 8], &opts),
        shape_mismatch,
    );
    expect(
        "head dim 12",
        run([1, 4, 1, 12], [1, 4, 1, 12], [1, 4, 1, 12], &opts),
        invalid,
    );
    expect(
        "head dim 264",
        run([1, 2, 1, 264], [1, 2, 1, 264], [1, 2, 1, 264], &opts),
        invalid,
    );
    expect(
        "head dim 0",
        run([1, 2, 1, 0], [1, 2, 1, 0], [1, 2, 1, 0], &opts),
        invalid,
    );
    let nan_scale = AttentionOptions {
        scale: Some(f32::NAN),
        ..Default::default()
    };
    expect(
        "scale NaN",
        run([1, 4, 1, 8], [1, 4, 1, 8], [1, 4, 1, 8], &nan_scale),
        invalid,
    );
    let small = buf(10)?;
    expect(
        "strides past the buffer",
        AttentionTensor::strided(&small, 4, [1, 1, 1, 8], [8, 8, 8]).map(|_| ()),
        invalid,
    );
    expect(
        "contiguous of the wrong length",
        AttentionTensor::contiguous(&small, [1, 1, 1, 8]).map(|_| ()),
        shape_mismatch,
    );
    let (qb, kb) = (buf(32)?, buf(32)?);
    let (q, k) = (
        AttentionTensor::contiguous(&qb, [1, 4, 1, 8])?,
        AttentionTensor::contiguous(&kb, [1, 4, 1, 8])?,
    );
    let (mut out, mut lse) = (buf(31)?, gpu.zeros_of::<f32>(4)?);
    expect(
        "out too short",
        gpu.attention_into(&q, &k, &k, &opts, &mut out, &mut lse),
        shape_mismatch,
    );
    // Empty batch, query length or heads: empty results, nothing launched. kv_len 0: every
    // row sees no key (output 0, log-sum-exp -inf).
    for (qd, kd) in [
        ([0, 4, 2, 8], [0, 4, 2, 8]),
        ([1, 0, 2, 8], [1, 4, 2, 8]),
        ([1, 4, 0, 8], [1, 4, 1, 8]),
    ] {
        if let Err(e) = run(qd, kd, kd, &opts) {
            failures.push(format!("empty {qd:?}: {e}"));
        }
    }
    let (qb, kb) = (buf(16)?, buf(0)?);
    let got = gpu.attention(
        &AttentionTensor::contiguous(&qb, [1, 2, 1, 8])?,
        &AttentionTensor::contiguous(&kb, [1, 0, 1, 8])?,
        &AttentionTensor::contiguous(&kb, [1, 0, 1, 8])?,
        &opts,
    )?;
    let (out, lse) = (got.out.to_vec()?, got.lse.to_vec()?);
    if out.iter().any(|x| x.to_f32() != 0.0) || lse.iter().any(|&x| x != f32::NEG_INFINITY) {
        failures.push(format!("kv_len 0: out {out:?}, lse {lse:?}"));
    }
    all_passed(failures)
}

/// `gpukern::attention` / `attention_lse` on host arrays (a transposed-axes view among them)
/// against the reference.
fn global_attention(rng: &mut StdRng) -> Check {
    let (b, s, h, d) = (1, 6, 2, 8);
    let q = random4::<f16>(rng, [b, s, h, d]);
    // `k` given as a view with permuted axes of a `[b, h, s, d]` array.
    let k_bhsd = random4::<f16>(rng, [b, h, s, d]);
    let k = k_bhsd.view().permuted_axes([0, 2, 1, 3]);
    let v = random4::<f16>(rng, [b, s, h, d]);
    let options = AttentionOptions {
        causal: true,
        ..Default::default()
    };
    let (out, lse) = gpukern::attention_lse(&q, &k, &v, &options)?;
    let plain = gpukern::attention(&q, &k, &v, &options)?;
    if plain != out {
        return Err("attention and attention_lse differ".into());
    }
    let (want_out, want_lse) = cpu::attention(&q, &k, &v, &options)?;
    check_attention::<f16>(
        "global",
        (
            &out.iter().copied().collect::<Vec<_>>(),
            &lse.iter().copied().collect::<Vec<_>>(),
        ),
        (
            &want_out.into_raw_vec_and_offset().0,
            &want_lse.into_raw_vec_and_offset().0,
        ),
    )
}
