//! The plan of an attention call: which rung runs it, chosen once per call from the shapes and
//! the device's facts. One rung exists so far ([`AttentionPlan::Rows`]); the fused `mma.sync`
//! rung is the named next step (`kernels_gpu::attention`'s docs), and this is where it will be
//! chosen over the rows rung.

use kernels_gpu::attention::{HEAD_DIM_MULTIPLE, MAX_HEAD_DIM};

/// What one attention call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttentionPlan {
    /// `attention_rows_*`: a warp per query row (the tutorial rung), any supported head dim
    /// and strides.
    Rows,
}

impl AttentionPlan {
    /// The plan of `algorithm` for a checked call (head dim in `8..=256`, a multiple of 8).
    pub(crate) fn choose(algorithm: AttentionAlgorithm, head_dim: usize) -> AttentionPlan {
        debug_assert!(head_dim % HEAD_DIM_MULTIPLE == 0 && head_dim <= MAX_HEAD_DIM);
        match algorithm {
            AttentionAlgorithm::Auto | AttentionAlgorithm::Rows => AttentionPlan::Rows,
        }
    }
}

/// Which rung computes an attention call. All give the same output up to rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttentionAlgorithm {
    /// The plan's choice from the shapes and the device.
    #[default]
    Auto,
    /// A warp per query row (`attention_rows_*`), the tutorial rung: every shape, no 16-bit
    /// rounding of the probabilities; the reference the fused rungs are checked against.
    Rows,
}

impl AttentionAlgorithm {
    /// Every algorithm.
    pub const ALL: [AttentionAlgorithm; 2] = [AttentionAlgorithm::Auto, AttentionAlgorithm::Rows];

    /// A short name: `auto`, `rows`; the bench's `impl` is `gpukern:<name>`.
    pub fn name(self) -> &'static str {
        match self {
            AttentionAlgorithm::Auto => "auto",
            AttentionAlgorithm::Rows => "rows",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every head dim the host accepts runs on the rows rung, by default and on request.
    #[test]
    fn every_supported_head_dim_has_a_rung() {
        for d in (HEAD_DIM_MULTIPLE..=MAX_HEAD_DIM).step_by(HEAD_DIM_MULTIPLE) {
            for algorithm in AttentionAlgorithm::ALL {
                assert_eq!(AttentionPlan::choose(algorithm, d), AttentionPlan::Rows);
            }
        }
    }
}
