//! The plan of an attention call: which rung runs it, chosen once per call from the head dim
//! and the operands' alignment (a pure function, unit-tested without a `Gpu`).
//!
//! The rules, in order:
//! 1. [`AttentionAlgorithm::Rows`] asked for: the rows rung.
//! 2. Head dim 64 or 128 ([`FLASH_HEAD_DIMS`]) with 16-byte aligned operands (every buffer, every
//!    offset and stride a multiple of 8 elements): the fused rung, `attention_flash_d<D>`. It
//!    reads `K` and `V` once per 64 query rows where the rows rung reads them once per row,
//!    and multiplies on the tensor cores.
//! 3. Anything else: the rows rung (head dims 8..=256 in steps of 8, any strides). Head dim 256
//!    goes there too: its fused kernel would hold 128 f32 output accumulators and 64 `Q`
//!    registers per thread besides the scores, past the 255 registers ptxas allows without
//!    spilling.
//!
//! [`AttentionAlgorithm::Flash`] asked for where rule 2 does not hold is an error that says what
//! the fused rung supports.

use kernels_gpu::attention::{FLASH_HEAD_DIMS, HEAD_DIM_MULTIPLE, MAX_HEAD_DIM};

/// What one attention call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttentionPlan {
    /// `attention_rows_*`: a warp per query row (the tutorial rung), any supported head dim
    /// and strides.
    Rows,
    /// `attention_flash_d<head_dim>_*`: the fused `mma.sync` rung.
    Flash {
        /// 64 or 128.
        head_dim: usize,
    },
}

impl AttentionPlan {
    /// The plan of `algorithm` for a checked call (head dim in `8..=256`, a multiple of 8);
    /// `aligned`: every operand 16-byte aligned with strides and offsets multiples of 8
    /// elements. `Err` says why the fused rung asked for does not apply.
    pub(crate) fn choose(
        algorithm: AttentionAlgorithm,
        head_dim: usize,
        aligned: bool,
    ) -> Result<AttentionPlan, String> {
        debug_assert!(head_dim % HEAD_DIM_MULTIPLE == 0 && head_dim <= MAX_HEAD_DIM);
        let fused = FLASH_HEAD_DIMS.contains(&head_dim) && aligned;
        match algorithm {
            AttentionAlgorithm::Rows => Ok(AttentionPlan::Rows),
            AttentionAlgorithm::Auto if fused => Ok(AttentionPlan::Flash { head_dim }),
            AttentionAlgorithm::Auto => Ok(AttentionPlan::Rows),
            AttentionAlgorithm::Flash if fused => Ok(AttentionPlan::Flash { head_dim }),
            AttentionAlgorithm::Flash => Err(format!(
                "the fused rung takes head dims {FLASH_HEAD_DIMS:?} with 16-byte aligned operands \
                 (offsets and strides multiples of 8 elements), not head dim {head_dim}{}",
                if aligned { "" } else { " with these strides" }
            )),
        }
    }
}

/// Which rung computes an attention call. All give the same output up to rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttentionAlgorithm {
    /// The plan's choice (the module documentation's rules): the fused rung where it applies,
    /// else the rows rung.
    #[default]
    Auto,
    /// A warp per query row (`attention_rows_*`), the tutorial rung: every shape, no 16-bit
    /// rounding of the probabilities; the reference the fused rung is checked against.
    Rows,
    /// The fused `mma.sync` rung (`attention_flash_d64_*`, `attention_flash_d128_*`): head dims
    /// 64 and 128, 16-byte aligned operands; an error elsewhere.
    Flash,
}

impl AttentionAlgorithm {
    /// Every algorithm.
    pub const ALL: [AttentionAlgorithm; 3] = [
        AttentionAlgorithm::Auto,
        AttentionAlgorithm::Rows,
        AttentionAlgorithm::Flash,
    ];

    /// A short name: `auto`, `rows`, `flash`; the bench's `impl` is `gpukern:<name>`.
    pub fn name(self) -> &'static str {
        match self {
            AttentionAlgorithm::Auto => "auto",
            AttentionAlgorithm::Rows => "rows",
            AttentionAlgorithm::Flash => "flash",
        }
    }
}

/// The sizes of a checked attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Batch.
    pub batch: usize,
    /// Query rows per batch and head.
    pub q_len: usize,
    /// Keys (and values) per batch and head.
    pub kv_len: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (dividing `heads`).
    pub kv_heads: usize,
    /// Elements per head.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Query rows of the whole call: `batch * heads * q_len`, the log-sum-exp's length.
    pub fn rows(&self) -> usize {
        self.batch * self.heads * self.q_len
    }

    /// Elements of the output: `batch * q_len * heads * head_dim`.
    pub fn out_len(&self) -> usize {
        self.rows() * self.head_dim
    }

    /// The forward pass's flops as FlashAttention counts them: `4 batch heads q_len kv_len
    /// head_dim` (two products), halved with the causal mask.
    pub fn flops(&self, causal: bool) -> f64 {
        let f = 4.0 * (self.rows() as f64) * (self.kv_len as f64) * (self.head_dim as f64);
        if causal { f / 2.0 } else { f }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every head dim the host accepts has a rung: the fused one at 64 and 128 when aligned,
    /// the rows one elsewhere (on each side of 64 and 128, at 256, and unaligned).
    #[test]
    fn each_head_dim_and_alignment_has_its_rung() {
        let auto = |d, aligned| AttentionPlan::choose(AttentionAlgorithm::Auto, d, aligned);
        for d in (HEAD_DIM_MULTIPLE..=MAX_HEAD_DIM).step_by(HEAD_DIM_MULTIPLE) {
            let want = if d == 64 || d == 128 {
                AttentionPlan::Flash { head_dim: d }
            } else {
                AttentionPlan::Rows
            };
            assert_eq!(auto(d, true), Ok(want), "head dim {d}");
            assert_eq!(auto(d, false), Ok(AttentionPlan::Rows), "head dim {d}, unaligned");
            assert_eq!(
                AttentionPlan::choose(AttentionAlgorithm::Rows, d, true),
                Ok(AttentionPlan::Rows)
            );
        }
    }

    /// The fused rung asked for: taken where it applies, an error naming what it supports
    /// elsewhere.
    #[test]
    fn flash_on_request_or_an_error() {
        let flash = |d, aligned| AttentionPlan::choose(AttentionAlgorithm::Flash, d, aligned);
        assert_eq!(flash(64, true), Ok(AttentionPlan::Flash { head_dim: 64 }));
        assert_eq!(flash(128, true), Ok(AttentionPlan::Flash { head_dim: 128 }));
        for (d, aligned) in [
            (56, true),
            (72, true),
            (120, true),
            (136, true),
            (256, true),
            (64, false),
        ] {
            let err = flash(d, aligned).expect_err("not fused");
            assert!(err.contains("[64, 128]"), "{err}");
        }
    }
}
