//! The plan of a GLU call: the tutorial or the vector kernel, chosen once from the algorithm, the
//! half's width and the buffers' alignment.

/// Which GLU kernel runs. Both compute the same values (f32, one rounding at the store).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GluAlgorithm {
    /// The tutorial (`*_scalar_*`): one thread per output element. Any shape.
    Scalar,
    /// 16-byte vectors of both halves, four in flight per thread (`swiglu_bf16`, ...): for a
    /// half width `n` of a multiple of the vector width and 16-byte aligned buffers; otherwise
    /// the tutorial runs. The default.
    #[default]
    Vectors,
}

impl GluAlgorithm {
    /// Every algorithm, the tutorial first.
    pub const ALL: [GluAlgorithm; 2] = [GluAlgorithm::Scalar, GluAlgorithm::Vectors];

    /// A short name: `scalar`, `vectors`.
    pub fn name(self) -> &'static str {
        match self {
            GluAlgorithm::Scalar => "scalar",
            GluAlgorithm::Vectors => "vectors",
        }
    }
}

/// What one GLU call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GluPlan {
    /// The tutorial kernel.
    Scalar,
    /// The vector kernel.
    Vectors,
}

impl GluPlan {
    /// The plan of `algorithm` for halves of `n` elements of `lanes` per 16-byte vector;
    /// `aligned`: the input and the output start on a 16-byte boundary.
    pub fn choose(algorithm: GluAlgorithm, n: usize, lanes: usize, aligned: bool) -> GluPlan {
        if algorithm == GluAlgorithm::Vectors && aligned && n % lanes == 0 {
            GluPlan::Vectors
        } else {
            GluPlan::Scalar
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector kernel for an aligned half of a multiple of the vector width only.
    #[test]
    fn vectors_need_whole_vectors_and_alignment() {
        use GluAlgorithm::{Scalar, Vectors};
        assert_eq!(GluPlan::choose(Vectors, 14336, 8, true), GluPlan::Vectors);
        assert_eq!(GluPlan::choose(Vectors, 8, 8, true), GluPlan::Vectors);
        assert_eq!(GluPlan::choose(Vectors, 12, 8, true), GluPlan::Scalar);
        assert_eq!(GluPlan::choose(Vectors, 12, 4, true), GluPlan::Vectors);
        assert_eq!(GluPlan::choose(Vectors, 14336, 8, false), GluPlan::Scalar);
        assert_eq!(GluPlan::choose(Scalar, 14336, 8, true), GluPlan::Scalar);
    }
}
