//! The plan of an attention backward call: which rung runs it, chosen once per call from the
//! head dim and the operands' alignment (a pure function, unit-tested without a `Gpu`).
//!
//! The rules, in order:
//! 0. A mask other than none and causal (`BackwardFacts::masked`): the one-kernel Hopper rung's
//!    masked instances (`attention_bwd_wgmma_fused_masked_*`, every shipped mask: those that
//!    drop pairs only, ALiBi's bias, the soft cap's bent scores, each on instances of its own)
//!    for `Auto` and `WgmmaFused` where rule 2 holds, the call is not deterministic and `q_len`
//!    is at most [`BWD_FUSED_MASKED_MAX_ROWS`]; else the `mma.sync` rung's general instances
//!    (`attention_bwd_flash_{dq,dkdv}_general_d<D>_*`, every shipped mask) for `Auto` and
//!    `Flash` where rule 3 holds (deterministic calls, GPUs without `wgmma`, longer sequences,
//!    custom masks the one-kernel rung does not take); else the rows rung for `Auto` and
//!    `Rows`; any other algorithm is an error that names those three. A custom mask runs its own
//!    instances of each rung (`attention_mask_kernels!`), the one-kernel rung's only where its
//!    type says `KEY_ROWS_EXACT` and modifies no score (`BackwardFacts::fused_mask`).
//! 1. [`AttentionAlgorithm::Rows`] asked for: the rows rung (`attention_bwd_rows_dq_*` and
//!    `attention_bwd_rows_dkdv_*`).
//! 2. On a GPU with `wgmma` (sm_90a), head dim 64 or 128 ([`BWD_WGMMA_HEAD_DIMS`]), aligned
//!    operands as in rule 3, and tensor maps the driver encodes for `Q`, `dO`, `K` and `V`: the
//!    Hopper rung (`attention_bwd_wgmma_dq_d<D>_*`, `attention_bwd_wgmma_dkdv_d<D>_*`), for
//!    [`AttentionAlgorithm::Auto`] and the wgmma algorithms ([`AttentionAlgorithm::Wgmma`] and
//!    its schedules, which name the forward's schedule and all run this one backward).
//!
//!    [`AttentionAlgorithm::WgmmaFused`] asks for the one-kernel form of that rung
//!    (`attention_bwd_wgmma_fused_d<D>_*`, then `attention_bwd_wgmma_dq_convert_*`): where rule 2
//!    holds and the call is not deterministic (its `dQ` is added by atomics in an order that
//!    varies); an error elsewhere. `Auto` chooses it at head dims 64 and 128 when the call is
//!    not deterministic ([`FUSED_BY_DEFAULT_HEAD_DIMS`], where it measured faster).
//! 3. Head dim 64 or 128 ([`BWD_FLASH_HEAD_DIMS`]) with 16-byte aligned operands (every buffer,
//!    every offset and stride a multiple of 8 elements): the fused rung
//!    (`attention_bwd_flash_dq_d<D>_*`, `attention_bwd_flash_dkdv_d<D>_*`). It reads each
//!    `K`/`V` tile once per 64 query rows and each `Q`/`dO` tile once per 64 keys, where the rows
//!    rung rereads them per row, and multiplies on the tensor cores.
//! 4. Anything else: the rows rung (head dims 8..=256 in steps of 8, any strides).
//!
//! [`AttentionAlgorithm::Flash`] asked for where rule 3 does not hold, or a wgmma algorithm
//! where rule 2 does not, is an error that says what the rung supports.

use kernels_gpu::attention::backward_wgmma::BWD_WGMMA_HEAD_DIMS;
use kernels_gpu::attention::backward_wgmma_fused::BWD_FUSED_MASKED_MAX_ROWS;
use kernels_gpu::attention::{BWD_FLASH_HEAD_DIMS, HEAD_DIM_MULTIPLE, MAX_HEAD_DIM};

use super::super::AttentionAlgorithm;

/// What one attention backward call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackwardPlan {
    /// A warp per query row for `dQ`, a warp per key row for `dK` and `dV`.
    Rows,
    /// The fused `mma.sync` kernels, 64-row tiles.
    Flash {
        /// 64 or 128.
        head_dim: usize,
    },
    /// The Hopper kernels: warp-specialised blocks of 128 keys (`dK`, `dV`) and 128 query rows
    /// (`dQ`), TMA and `wgmma`.
    Wgmma {
        /// 64 or 128.
        head_dim: usize,
    },
    /// The one-kernel Hopper backward: blocks of 128 keys computing `dK`, `dV` and adding `dQ`
    /// into an f32 buffer by atomics, then its conversion to `dq` (not deterministic).
    WgmmaFused {
        /// 64 or 128.
        head_dim: usize,
    },
}

/// What the backward's plan reads of a call beyond its algorithm and head dim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BackwardFacts {
    /// Every operand read by the fused rungs 16-byte aligned, offsets and strides multiples of 8
    /// elements.
    pub(crate) aligned: bool,
    /// The GPU runs the sm_90a module (`wgmma`).
    pub(crate) wgmma: bool,
    /// The driver encodes the four operands' tensor maps, and there is a key.
    pub(crate) tensor_maps: bool,
    /// The call has a mask other than none and causal (a window, ALiBi, documents, a soft cap,
    /// a varlen batch): the kernels' [`General`](kernels_gpu::gpu::attention::General)
    /// instances.
    pub(crate) masked: bool,
    /// The one-kernel rung takes the call's mask (`masked`): every shipped mask does, a custom
    /// one where its type says `KEY_ROWS_EXACT` and modifies no score (`MaskKernels`); the rows
    /// and `mma.sync` rungs take every mask.
    pub(crate) fused_mask: bool,
    /// `q_len` at most [`BWD_FUSED_MASKED_MAX_ROWS`] (the masked one-kernel instances keep
    /// each key's rows in 16 bits).
    pub(crate) short: bool,
}

/// Head dims at which `Auto` runs the one-kernel Hopper rung ([`BackwardPlan::WgmmaFused`])
/// when the call is not deterministic: 64 and 128, where it is the faster of the two Hopper
/// rungs. Since its `dQ` went through shared memory and the copy engine's bulk reductions
/// (`36043f3`, on an H100, two runs: `bench/experiments/third-wave/36043f3-bwd-ab-new-{1,2}.jsonl`):
/// 479.1 and 475.3 TFLOP/s against 386.9 and 384.6 for the two-kernel rung at 4 x 4096 x 16 x
/// 128, 513.4 and 515.9 against 402.2 and 403.5 at 1 x 16384 x 16 x 128, and at head dim 64
/// (8 x 2048 x 32 x 64) 305.8 and 304.8 against 279.2 and 276.5, causal 245.4 and 245.3
/// against 228.7 and 231.9.
pub(crate) const FUSED_BY_DEFAULT_HEAD_DIMS: [usize; 2] = [64, 128];

impl BackwardPlan {
    /// The plan of `algorithm` for a checked call (head dim in `8..=256`, a multiple of 8),
    /// `deterministic` when the call must give the same bits on every run. `Err` says why the
    /// rung asked for does not apply.
    pub(crate) fn choose(
        algorithm: AttentionAlgorithm,
        head_dim: usize,
        facts: BackwardFacts,
        deterministic: bool,
    ) -> Result<BackwardPlan, String> {
        debug_assert!(head_dim % HEAD_DIM_MULTIPLE == 0 && head_dim <= MAX_HEAD_DIM);
        let aligned = facts.aligned;
        let hopper = BWD_WGMMA_HEAD_DIMS.contains(&head_dim) && aligned && facts.wgmma && facts.tensor_maps;
        let fused = BWD_FLASH_HEAD_DIMS.contains(&head_dim) && aligned;
        if facts.masked {
            let fused_masked = hopper && !deterministic && facts.short && facts.fused_mask;
            return match algorithm {
                AttentionAlgorithm::Rows => Ok(BackwardPlan::Rows),
                AttentionAlgorithm::Auto | AttentionAlgorithm::WgmmaFused if fused_masked => {
                    Ok(BackwardPlan::WgmmaFused { head_dim })
                }
                AttentionAlgorithm::Auto | AttentionAlgorithm::Flash if fused => {
                    Ok(BackwardPlan::Flash { head_dim })
                }
                AttentionAlgorithm::Auto => Ok(BackwardPlan::Rows),
                _ => Err(format!(
                    "with a mask other than none and causal the backward runs the rows rung (Rows), \
                     the mma.sync rung (Flash: head dims {BWD_FLASH_HEAD_DIMS:?}, aligned operands) \
                     or the one-kernel wgmma rung (WgmmaFused: a GPU with wgmma, head dims \
                     {BWD_WGMMA_HEAD_DIMS:?}, aligned operands, not deterministic, q_len at \
                     most {BWD_FUSED_MASKED_MAX_ROWS}, a shipped mask or a custom one whose type \
                     says KEY_ROWS_EXACT and modifies no score); Auto picks the first \
                     of WgmmaFused, Flash, Rows that applies; not {algorithm:?} here"
                )),
            };
        }
        match algorithm {
            AttentionAlgorithm::Rows => Ok(BackwardPlan::Rows),
            AttentionAlgorithm::Auto
                if hopper && !deterministic && FUSED_BY_DEFAULT_HEAD_DIMS.contains(&head_dim) =>
            {
                Ok(BackwardPlan::WgmmaFused { head_dim })
            }
            AttentionAlgorithm::Auto
            | AttentionAlgorithm::Wgmma
            | AttentionAlgorithm::WgmmaPingPong
            | AttentionAlgorithm::WgmmaPersistent
                if hopper =>
            {
                Ok(BackwardPlan::Wgmma { head_dim })
            }
            AttentionAlgorithm::WgmmaFused if hopper && !deterministic => {
                Ok(BackwardPlan::WgmmaFused { head_dim })
            }
            AttentionAlgorithm::WgmmaFused if hopper => Err(
                "the fused wgmma backward adds dq by atomics in an order that varies from run to \
                 run, so it is not deterministic: ask for Wgmma (or Auto) with deterministic, or \
                 for WgmmaFused with deterministic: false"
                    .to_string(),
            ),
            AttentionAlgorithm::Auto | AttentionAlgorithm::Flash if fused => {
                Ok(BackwardPlan::Flash { head_dim })
            }
            AttentionAlgorithm::Auto => Ok(BackwardPlan::Rows),
            AttentionAlgorithm::Flash => Err(format!(
                "the fused backward takes head dims {BWD_FLASH_HEAD_DIMS:?} with 16-byte aligned \
                 operands (offsets and strides multiples of 8 elements), not head dim {head_dim}{}",
                if aligned { "" } else { " with these strides" }
            )),
            AttentionAlgorithm::Wgmma
            | AttentionAlgorithm::WgmmaPingPong
            | AttentionAlgorithm::WgmmaPersistent
            | AttentionAlgorithm::WgmmaFused => Err(format!(
                "the wgmma backward takes a GPU with wgmma (sm_90a), head dims \
                 {BWD_WGMMA_HEAD_DIMS:?} with 16-byte aligned operands, at least one key and \
                 tensor maps the driver encodes for q, d_out, k and v; not head dim {head_dim}{}",
                if !facts.wgmma {
                    " on this GPU"
                } else if !aligned {
                    " with these strides"
                } else if !facts.tensor_maps {
                    " with these tensor maps"
                } else {
                    ""
                }
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(aligned: bool) -> BackwardFacts {
        BackwardFacts {
            aligned,
            ..Default::default()
        }
    }

    /// Every head dim the host accepts has a backward rung: the fused one at 64 and 128 when
    /// aligned, the rows one elsewhere and whenever asked for.
    #[test]
    fn each_head_dim_and_alignment_has_its_rung() {
        for d in (HEAD_DIM_MULTIPLE..=MAX_HEAD_DIM).step_by(HEAD_DIM_MULTIPLE) {
            let want = if d == 64 || d == 128 {
                BackwardPlan::Flash { head_dim: d }
            } else {
                BackwardPlan::Rows
            };
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, facts(true), false),
                Ok(want),
                "{d}"
            );
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, facts(false), false),
                Ok(BackwardPlan::Rows),
                "{d} unaligned"
            );
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Rows, d, facts(true), false),
                Ok(BackwardPlan::Rows)
            );
        }
    }

    /// The fused rung on request where it applies, an error naming what it supports elsewhere;
    /// the wgmma algorithms without `wgmma` are an error.
    #[test]
    fn flash_on_request_wgmma_never() {
        let flash = |d, aligned| BackwardPlan::choose(AttentionAlgorithm::Flash, d, facts(aligned), false);
        assert_eq!(flash(64, true), Ok(BackwardPlan::Flash { head_dim: 64 }));
        assert_eq!(flash(128, true), Ok(BackwardPlan::Flash { head_dim: 128 }));
        for (d, aligned) in [(56, true), (72, true), (256, true), (64, false)] {
            let err = flash(d, aligned).expect_err("not fused");
            assert!(err.contains("[64, 128]"), "{err}");
        }
        for d in [64, 128, 8] {
            for alg in [
                AttentionAlgorithm::Wgmma,
                AttentionAlgorithm::WgmmaPingPong,
                AttentionAlgorithm::WgmmaPersistent,
            ] {
                assert!(BackwardPlan::choose(alg, d, facts(true), false).is_err());
            }
        }
    }

    /// The Hopper rung: by default when deterministic and for the wgmma
    /// algorithms where every fact holds, at head dims 64 and 128 only; one fact missing sends
    /// `Auto` to the fused `mma.sync` rung and the wgmma algorithms to an error naming the fact;
    /// `Flash` and `Rows` on request still run theirs.
    #[test]
    fn hopper_rung_on_each_side_of_its_facts() {
        let all = BackwardFacts {
            aligned: true,
            wgmma: true,
            tensor_maps: true,
            masked: false,
            fused_mask: true,
            short: true,
        };
        for d in [64, 128] {
            for alg in [
                AttentionAlgorithm::Auto,
                AttentionAlgorithm::Wgmma,
                AttentionAlgorithm::WgmmaPingPong,
                AttentionAlgorithm::WgmmaPersistent,
            ] {
                // `Auto` takes the one-kernel rung when not deterministic (its own test).
                let deterministic = alg == AttentionAlgorithm::Auto;
                assert_eq!(
                    BackwardPlan::choose(alg, d, all, deterministic),
                    Ok(BackwardPlan::Wgmma { head_dim: d })
                );
            }
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Flash, d, all, false),
                Ok(BackwardPlan::Flash { head_dim: d })
            );
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Rows, d, all, false),
                Ok(BackwardPlan::Rows)
            );
            for (missing, word) in [
                (BackwardFacts { wgmma: false, ..all }, "on this GPU"),
                (
                    BackwardFacts {
                        tensor_maps: false,
                        ..all
                    },
                    "tensor maps",
                ),
            ] {
                assert_eq!(
                    BackwardPlan::choose(AttentionAlgorithm::Auto, d, missing, false),
                    Ok(BackwardPlan::Flash { head_dim: d })
                );
                let err =
                    BackwardPlan::choose(AttentionAlgorithm::Wgmma, d, missing, false).expect_err("no wgmma");
                assert!(err.contains(word), "{err}");
            }
            let unaligned = BackwardFacts {
                aligned: false,
                ..all
            };
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, unaligned, false),
                Ok(BackwardPlan::Rows)
            );
        }
        for d in [8, 96, 256] {
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, all, false),
                Ok(BackwardPlan::Rows)
            );
            assert!(BackwardPlan::choose(AttentionAlgorithm::Wgmma, d, all, false).is_err());
        }
    }
    /// The one-kernel rung where the Hopper rung applies and the call is not deterministic: on
    /// request, and by default at head dims 64 and 128; deterministic, an error naming why when
    /// asked for, and the two-kernel rung by default; a fact missing, the Hopper rung's error.
    #[test]
    fn fused_rung_by_default_and_never_deterministic() {
        let all = BackwardFacts {
            aligned: true,
            wgmma: true,
            tensor_maps: true,
            masked: false,
            fused_mask: true,
            short: true,
        };
        let fused = AttentionAlgorithm::WgmmaFused;
        for d in [64, 128] {
            assert_eq!(
                BackwardPlan::choose(fused, d, all, false),
                Ok(BackwardPlan::WgmmaFused { head_dim: d })
            );
            let err = BackwardPlan::choose(fused, d, all, true).expect_err("deterministic");
            assert!(err.contains("not deterministic"), "{err}");
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, all, false),
                Ok(BackwardPlan::WgmmaFused { head_dim: d })
            );
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, all, true),
                Ok(BackwardPlan::Wgmma { head_dim: d })
            );
            for deterministic in [false, true] {
                assert_eq!(
                    BackwardPlan::choose(AttentionAlgorithm::Wgmma, d, all, deterministic),
                    Ok(BackwardPlan::Wgmma { head_dim: d })
                );
            }
            let err = BackwardPlan::choose(fused, d, BackwardFacts { wgmma: false, ..all }, false)
                .expect_err("no wgmma");
            assert!(err.contains("on this GPU"), "{err}");
        }
        for d in [8, 96, 256] {
            assert!(BackwardPlan::choose(fused, d, all, false).is_err());
        }
    }

    /// A masked call: the one-kernel rung's `General` instances where it applies (a shipped mask)
    /// and the call is not deterministic (by default and on request), the `mma.sync` rung or the
    /// rows rung otherwise and on request; every other rung an error naming those three, on each
    /// side of each fact (a custom mask among them).
    #[test]
    fn masked_calls_take_the_fused_flash_or_rows_rung() {
        let all = BackwardFacts {
            aligned: true,
            wgmma: true,
            tensor_maps: true,
            masked: true,
            fused_mask: true,
            short: true,
        };
        for d in [64, 128] {
            for alg in [AttentionAlgorithm::Auto, AttentionAlgorithm::WgmmaFused] {
                assert_eq!(
                    BackwardPlan::choose(alg, d, all, false),
                    Ok(BackwardPlan::WgmmaFused { head_dim: d })
                );
            }
            for missing in [
                BackwardFacts { wgmma: false, ..all },
                BackwardFacts {
                    tensor_maps: false,
                    ..all
                },
                BackwardFacts {
                    aligned: false,
                    ..all
                },
                BackwardFacts { short: false, ..all },
                BackwardFacts {
                    fused_mask: false,
                    ..all
                },
            ] {
                // The mma.sync rung where its own rule holds (aligned operands), else rows.
                let fallback = if missing.aligned {
                    BackwardPlan::Flash { head_dim: d }
                } else {
                    BackwardPlan::Rows
                };
                assert_eq!(
                    BackwardPlan::choose(AttentionAlgorithm::Auto, d, missing, false),
                    Ok(fallback)
                );
                assert_eq!(
                    BackwardPlan::choose(AttentionAlgorithm::Flash, d, missing, false).is_ok(),
                    missing.aligned
                );
                assert!(BackwardPlan::choose(AttentionAlgorithm::WgmmaFused, d, missing, false).is_err());
            }
            // Deterministic: the mma.sync rung (no atomics), or rows when unaligned.
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, all, true),
                Ok(BackwardPlan::Flash { head_dim: d })
            );
            assert_eq!(
                BackwardPlan::choose(
                    AttentionAlgorithm::Auto,
                    d,
                    BackwardFacts {
                        aligned: false,
                        ..all
                    },
                    true
                ),
                Ok(BackwardPlan::Rows)
            );
            assert!(BackwardPlan::choose(AttentionAlgorithm::WgmmaFused, d, all, true).is_err());
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Rows, d, all, false),
                Ok(BackwardPlan::Rows)
            );
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Flash, d, all, false),
                Ok(BackwardPlan::Flash { head_dim: d })
            );
            for alg in [
                AttentionAlgorithm::Wgmma,
                AttentionAlgorithm::WgmmaPingPong,
                AttentionAlgorithm::WgmmaPersistent,
            ] {
                let err = BackwardPlan::choose(alg, d, all, false).expect_err("masked");
                assert!(
                    err.contains("rows rung") && err.contains("Flash") && err.contains("WgmmaFused"),
                    "{err}"
                );
            }
        }
        // A custom mask the one-kernel rung does not take, asking for it, hears which it takes.
        let custom = BackwardFacts {
            fused_mask: false,
            ..all
        };
        let err =
            BackwardPlan::choose(AttentionAlgorithm::WgmmaFused, 128, custom, false).expect_err("custom");
        assert!(err.contains("KEY_ROWS_EXACT"), "{err}");
        // Head dims without the mma.sync rung: rows, and Flash an error.
        for d in [8, 96, 256] {
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, all, false),
                Ok(BackwardPlan::Rows)
            );
            assert!(BackwardPlan::choose(AttentionAlgorithm::Flash, d, all, false).is_err());
        }
    }

    /// The preparation's geometry: a row's lanes cover its 8-element pieces (a power of two, at
    /// most a warp), the block's rows follow; its coordinates by 32-bit divisions agree with the
    /// 64-bit ones, which rows past `u32::MAX` take.
    #[test]
    fn preparation_geometry() {
        use kernels_gpu::attention::{padded_row_coords, prep_lanes, prep_rows_per_block};
        for (d, lanes) in [
            (8, 1),
            (16, 2),
            (24, 4),
            (40, 8),
            (64, 8),
            (72, 16),
            (128, 16),
            (136, 32),
            (256, 32),
        ] {
            assert_eq!(prep_lanes(d), lanes, "head dim {d}");
            assert!(lanes * 8 >= d && lanes.is_power_of_two());
            assert_eq!(prep_rows_per_block(d), 4 * 32 / lanes, "head dim {d}");
        }
        let (q_pad, heads) = (192, 5);
        for r in [
            0,
            1,
            191,
            192,
            193,
            5 * 192 - 1,
            5 * 192,
            7 * 5 * 192 + 300,
            u32::MAX as usize - 7,
        ] {
            let (b, h, i) = padded_row_coords(r, q_pad, heads, true);
            assert_eq!(padded_row_coords(r, q_pad, heads, false), (b, h, i), "row {r}");
            assert_eq!((b * heads + h) * q_pad + i, r);
            assert!(h < heads && i < q_pad);
        }
        let r = (1usize << 33) + 12345;
        let (b, h, i) = padded_row_coords(r, q_pad, heads, false);
        assert_eq!((b * heads + h) * q_pad + i, r);
    }
}
