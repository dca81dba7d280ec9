//! The plan of a rotary call: the tutorial or the block-per-token vector kernel, chosen once from
//! the algorithm, the layout, the head size and the buffers' alignment.

/// The pairs' layout of a rotary embedding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RotaryLayout {
    /// Llama / GPT-NeoX (HF's `rotate_half`): pair `i` is `(x[i], x[i + head_dim / 2])`.
    #[default]
    HalfSplit,
    /// GPT-J: pair `i` is `(x[2i], x[2i + 1])`.
    Interleaved,
}

/// Which rotary kernel runs. Both give the same bits (the same cos, sin and rotation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RotaryAlgorithm {
    /// The tutorial (`rotary_*_scalar_*`): a thread per pair. Any even head size.
    Scalar,
    /// A block per token (`rotary_half_*`, `rotary_interleaved_*`): cos and sin once per token
    /// in shared memory, 16-byte vectors; for a head size of a multiple of 16 (half-split) or 8
    /// (interleaved) and aligned buffers, else the tutorial runs. The default.
    #[default]
    Rows,
}

impl RotaryAlgorithm {
    /// Every algorithm, the tutorial first.
    pub const ALL: [RotaryAlgorithm; 2] = [RotaryAlgorithm::Scalar, RotaryAlgorithm::Rows];

    /// A short name: `scalar`, `rows`.
    pub fn name(self) -> &'static str {
        match self {
            RotaryAlgorithm::Scalar => "scalar",
            RotaryAlgorithm::Rows => "rows",
        }
    }
}

/// What one rotary call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotaryPlan {
    /// The tutorial kernel.
    Scalar,
    /// The block-per-token vector kernel.
    Rows,
}

impl RotaryPlan {
    /// The plan of `algorithm` for heads of `head_dim` (even, at least 2) in `layout`;
    /// `aligned`: `q` and `k` start on a 16-byte boundary.
    pub fn choose(
        algorithm: RotaryAlgorithm,
        layout: RotaryLayout,
        head_dim: usize,
        aligned: bool,
    ) -> RotaryPlan {
        let vector = match layout {
            RotaryLayout::HalfSplit => 16,
            RotaryLayout::Interleaved => 8,
        };
        if algorithm == RotaryAlgorithm::Rows && aligned && head_dim % vector == 0 {
            RotaryPlan::Rows
        } else {
            RotaryPlan::Scalar
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector kernel for whole vectors of each half (half-split) or of the head
    /// (interleaved) and aligned buffers only.
    #[test]
    fn rows_need_whole_vectors() {
        use RotaryAlgorithm::{Rows, Scalar};
        use RotaryLayout::{HalfSplit, Interleaved};
        assert_eq!(RotaryPlan::choose(Rows, HalfSplit, 128, true), RotaryPlan::Rows);
        assert_eq!(RotaryPlan::choose(Rows, HalfSplit, 16, true), RotaryPlan::Rows);
        assert_eq!(RotaryPlan::choose(Rows, HalfSplit, 24, true), RotaryPlan::Scalar);
        assert_eq!(RotaryPlan::choose(Rows, Interleaved, 24, true), RotaryPlan::Rows);
        assert_eq!(
            RotaryPlan::choose(Rows, Interleaved, 12, true),
            RotaryPlan::Scalar
        );
        assert_eq!(
            RotaryPlan::choose(Rows, HalfSplit, 128, false),
            RotaryPlan::Scalar
        );
        assert_eq!(
            RotaryPlan::choose(Scalar, HalfSplit, 128, true),
            RotaryPlan::Scalar
        );
    }
}
