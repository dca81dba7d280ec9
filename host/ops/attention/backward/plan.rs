//! The plan of an attention backward call: which rung runs it, chosen once per call from the
//! head dim and the operands' alignment (a pure function, unit-tested without a `Gpu`).
//!
//! The rules, in order:
//! 1. [`AttentionAlgorithm::Rows`] asked for: the rows rung (`attention_bwd_rows_dq_*` and
//!    `attention_bwd_rows_dkdv_*`).
//! 2. Head dim 64 or 128 ([`BWD_FLASH_HEAD_DIMS`]) with 16-byte aligned operands (every buffer,
//!    every offset and stride a multiple of 8 elements): the fused rung
//!    (`attention_bwd_flash_dq_d<D>_*`, `attention_bwd_flash_dkdv_d<D>_*`). It reads each
//!    `K`/`V` tile once per 64 query rows and each `Q`/`dO` tile once per 64 keys, where the rows
//!    rung rereads them per row, and multiplies on the tensor cores.
//! 3. Anything else: the rows rung (head dims 8..=256 in steps of 8, any strides).
//!
//! [`AttentionAlgorithm::Flash`] asked for where rule 2 does not hold is an error that says what
//! the rung supports; so are the wgmma rung's algorithms ([`AttentionAlgorithm::Wgmma`] and its schedules), which
//! have no backward yet.

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
}

impl BackwardPlan {
    /// The plan of `algorithm` for a checked call (head dim in `8..=256`, a multiple of 8);
    /// `aligned`: every operand read by the fused rung 16-byte aligned with offsets and strides
    /// multiples of 8 elements. `Err` says why the rung asked for does not apply.
    pub(crate) fn choose(
        algorithm: AttentionAlgorithm,
        head_dim: usize,
        aligned: bool,
    ) -> Result<BackwardPlan, String> {
        debug_assert!(head_dim % HEAD_DIM_MULTIPLE == 0 && head_dim <= MAX_HEAD_DIM);
        let fused = BWD_FLASH_HEAD_DIMS.contains(&head_dim) && aligned;
        match algorithm {
            AttentionAlgorithm::Rows => Ok(BackwardPlan::Rows),
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
            | AttentionAlgorithm::WgmmaPersistent => Err(format!(
                "the wgmma rung has no backward: ask for auto, rows or flash (head dims \
                 {BWD_FLASH_HEAD_DIMS:?}, aligned)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, true),
                Ok(want),
                "{d}"
            );
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Auto, d, false),
                Ok(BackwardPlan::Rows),
                "{d} unaligned"
            );
            assert_eq!(
                BackwardPlan::choose(AttentionAlgorithm::Rows, d, true),
                Ok(BackwardPlan::Rows)
            );
        }
    }

    /// The fused rung on request where it applies, an error naming what it supports elsewhere;
    /// the wgmma rung is always an error.
    #[test]
    fn flash_on_request_wgmma_never() {
        let flash = |d, aligned| BackwardPlan::choose(AttentionAlgorithm::Flash, d, aligned);
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
                assert!(BackwardPlan::choose(alg, d, true).is_err());
            }
        }
    }
}
