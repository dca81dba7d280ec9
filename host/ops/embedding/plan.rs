//! The plan of an embedding gather: the tutorial or the vector kernel, chosen once from the
//! algorithm, the row width and the buffers' alignment.

/// Which embedding kernel runs. Both copy the same bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EmbeddingAlgorithm {
    /// The tutorial (`embedding_scalar_*`): a thread per output element. Any shape.
    Scalar,
    /// 16-byte vectors, four in flight per thread (`embedding_i32`, `embedding_i64`): for rows
    /// of a multiple of 8 and aligned buffers, else the tutorial runs. The default.
    #[default]
    Rows,
}

impl EmbeddingAlgorithm {
    /// Every algorithm, the tutorial first.
    pub const ALL: [EmbeddingAlgorithm; 2] = [EmbeddingAlgorithm::Scalar, EmbeddingAlgorithm::Rows];

    /// A short name: `scalar`, `rows`.
    pub fn name(self) -> &'static str {
        match self {
            EmbeddingAlgorithm::Scalar => "scalar",
            EmbeddingAlgorithm::Rows => "rows",
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

impl EmbeddingPlan {
    /// The plan of `algorithm` for rows of `hidden` bf16; `aligned`: the table and the output
    /// start on a 16-byte boundary.
    pub fn choose(algorithm: EmbeddingAlgorithm, hidden: usize, aligned: bool) -> EmbeddingPlan {
        if algorithm == EmbeddingAlgorithm::Rows && aligned && hidden % 8 == 0 {
            EmbeddingPlan::Rows
        } else {
            EmbeddingPlan::Scalar
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_need_whole_vectors_and_alignment() {
        use EmbeddingAlgorithm::{Rows, Scalar};
        assert_eq!(EmbeddingPlan::choose(Rows, 4096, true), EmbeddingPlan::Rows);
        assert_eq!(EmbeddingPlan::choose(Rows, 8, true), EmbeddingPlan::Rows);
        assert_eq!(EmbeddingPlan::choose(Rows, 12, true), EmbeddingPlan::Scalar);
        assert_eq!(EmbeddingPlan::choose(Rows, 4096, false), EmbeddingPlan::Scalar);
        assert_eq!(EmbeddingPlan::choose(Scalar, 4096, true), EmbeddingPlan::Scalar);
    }
}
