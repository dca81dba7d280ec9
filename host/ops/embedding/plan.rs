//! The plan of an embedding gather: the tutorial or the vector kernel, chosen once from the
//! algorithm, the shape and the buffers' alignment.

/// Which embedding kernel runs. Both copy the same bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EmbeddingAlgorithm {
    /// The tutorial (`embedding_scalar_*`): a thread per output element. Any shape.
    Scalar,
    /// 16-byte vectors, two in flight per thread (`embedding_i32`, `embedding_i64`): for rows
    /// of a multiple of 8 and aligned buffers, else the tutorial runs.
    Rows,
    /// The plan's choice ([`EmbeddingPlan::choose`]): the tutorial for small outputs, where its
    /// thread per element spreads a few rows over more blocks, else the vector kernel where the
    /// vectors fit. The default.
    #[default]
    Auto,
}

impl EmbeddingAlgorithm {
    /// Every kernel of the ladder, the tutorial first ([`EmbeddingAlgorithm::Auto`] picks one of
    /// them).
    pub const ALL: [EmbeddingAlgorithm; 2] = [EmbeddingAlgorithm::Scalar, EmbeddingAlgorithm::Rows];

    /// A short name: `scalar`, `rows`, `auto`.
    pub fn name(self) -> &'static str {
        match self {
            EmbeddingAlgorithm::Scalar => "scalar",
            EmbeddingAlgorithm::Rows => "rows",
            EmbeddingAlgorithm::Auto => "auto",
        }
    }
}

/// What one embedding gather runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddingPlan {
    /// The tutorial kernel.
    Scalar,
    /// The vector kernel.
    Rows,
}

/// Outputs below which [`EmbeddingAlgorithm::Auto`] runs the tutorial: the vector kernel's
/// block covers 512 vectors (4096 outputs), so that a few rows make few blocks, where the
/// tutorial's block of 256 outputs makes 16 times as many. On the H200 at hidden 4096, two runs
/// (`bench/experiments/third-wave/340df98-rotary-embedding-ab-x-{1,2}.jsonl`): 8 tokens, the
/// tutorial 44.7 and 46.6 GB/s against 41.1 and 42.7 for the vector kernel; 64 tokens (the
/// boundary) level, 291.7 and 311.1 against 305.7 and 314.5; 256 tokens, the vector kernel 964.2
/// and 1006.2 against 574.5 and 582.8.
pub const SMALL_OUTPUTS: usize = 1 << 18;

impl EmbeddingPlan {
    /// The plan of `algorithm` for `tokens` rows of `hidden` bf16; `aligned`: the table and the
    /// output start on a 16-byte boundary.
    pub fn choose(
        algorithm: EmbeddingAlgorithm,
        tokens: usize,
        hidden: usize,
        aligned: bool,
    ) -> EmbeddingPlan {
        let vectors_fit = aligned && hidden % 8 == 0;
        match algorithm {
            EmbeddingAlgorithm::Rows if vectors_fit => EmbeddingPlan::Rows,
            EmbeddingAlgorithm::Auto if vectors_fit && tokens.saturating_mul(hidden) >= SMALL_OUTPUTS => {
                EmbeddingPlan::Rows
            }
            _ => EmbeddingPlan::Scalar,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_need_whole_vectors_and_alignment() {
        use EmbeddingAlgorithm::{Auto, Rows, Scalar};
        for algorithm in [Rows, Auto] {
            assert_eq!(
                EmbeddingPlan::choose(algorithm, 4096, 4096, true),
                EmbeddingPlan::Rows
            );
            assert_eq!(
                EmbeddingPlan::choose(algorithm, 4096, 12, true),
                EmbeddingPlan::Scalar
            );
            assert_eq!(
                EmbeddingPlan::choose(algorithm, 4096, 4096, false),
                EmbeddingPlan::Scalar
            );
        }
        assert_eq!(EmbeddingPlan::choose(Rows, 1, 8, true), EmbeddingPlan::Rows);
        assert_eq!(
            EmbeddingPlan::choose(Scalar, 4096, 4096, true),
            EmbeddingPlan::Scalar
        );
    }

    /// The default runs the tutorial under `SMALL_OUTPUTS` outputs and the vector kernel from
    /// there: 63 and 64 tokens of 4096.
    #[test]
    fn auto_takes_the_tutorial_for_small_outputs() {
        use EmbeddingAlgorithm::Auto;
        assert_eq!(EmbeddingAlgorithm::default(), Auto);
        assert_eq!(EmbeddingPlan::choose(Auto, 8, 4096, true), EmbeddingPlan::Scalar);
        assert_eq!(EmbeddingPlan::choose(Auto, 63, 4096, true), EmbeddingPlan::Scalar);
        assert_eq!(EmbeddingPlan::choose(Auto, 64, 4096, true), EmbeddingPlan::Rows);
        assert_eq!(
            EmbeddingPlan::choose(Auto, usize::MAX, 4096, true),
            EmbeddingPlan::Rows
        );
    }
}
