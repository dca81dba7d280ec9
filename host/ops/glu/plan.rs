//! The plan of a GLU call: the tutorial, the vector kernel or the rows kernel, chosen once from
//! the algorithm, the shape and the buffers' alignment.

/// Which GLU kernel runs. All compute the same values (f32, one rounding at the store).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GluAlgorithm {
    /// The tutorial (`*_scalar_*`): one thread per output element. Any shape.
    Scalar,
    /// 16-byte vectors of both halves, four in flight per thread, a 1-D grid-stride loop
    /// (`swiglu_bf16`, ...): for a half width `n` of a multiple of the vector width and 16-byte
    /// aligned buffers; otherwise the tutorial runs.
    Vectors,
    /// 16-byte vectors on a 2-D grid, a block per span of a row (`swiglu_rows_bf16`, ...): the
    /// same conditions as [`GluAlgorithm::Vectors`].
    Rows,
    /// The plan's choice ([`GluPlan::choose`]): the tutorial for small outputs, where it spreads
    /// over more blocks, else the rows kernel where the vectors fit. The default.
    #[default]
    Auto,
}

impl GluAlgorithm {
    /// Every kernel of the ladder, the tutorial first ([`GluAlgorithm::Auto`] picks one of them).
    pub const ALL: [GluAlgorithm; 3] = [GluAlgorithm::Scalar, GluAlgorithm::Vectors, GluAlgorithm::Rows];

    /// A short name: `scalar`, `vectors`, `rows`, `auto`.
    pub fn name(self) -> &'static str {
        match self {
            GluAlgorithm::Scalar => "scalar",
            GluAlgorithm::Vectors => "vectors",
            GluAlgorithm::Rows => "rows",
            GluAlgorithm::Auto => "auto",
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
    /// The rows kernel.
    Rows,
}

/// Outputs below which [`GluAlgorithm::Auto`] runs the tutorial: a thread per output spreads a
/// few rows over more SMs than a vector per thread does. SwiGLU bf16 on the H200
/// (`bench/experiments/third-wave/0165faf-glu.jsonl`): at 8 x 14336 the tutorial moves 207.0
/// GB/s against 168.0 for the rows kernel, at 64 x 14336 the rows kernel 996.3 against 761.2;
/// the boundary sits between the two measured shapes (18 and 19 rows of 14336). With the rows
/// kernel's one vector per thread, two runs (`048a939-glu-ab-u1-b{1,2}.jsonl`): at 16 x 14336
/// the tutorial 360.3 and 374.0 GB/s against 340.0 and 350.4, at 32 x 14336 the rows kernel
/// 597.3 and 649.2 against 529.9 and 543.3: still between the two.
pub const SMALL_OUTPUTS: usize = 1 << 18;

impl GluPlan {
    /// The plan of `algorithm` for `rows` rows of halves of `n` elements, `lanes` per 16-byte
    /// vector; `aligned`: the input and the output start on a 16-byte boundary.
    pub fn choose(algorithm: GluAlgorithm, rows: usize, n: usize, lanes: usize, aligned: bool) -> GluPlan {
        let vectors_fit = aligned && n % lanes == 0;
        match algorithm {
            GluAlgorithm::Vectors if vectors_fit => GluPlan::Vectors,
            GluAlgorithm::Rows if vectors_fit => GluPlan::Rows,
            GluAlgorithm::Auto if vectors_fit && rows.saturating_mul(n) >= SMALL_OUTPUTS => GluPlan::Rows,
            _ => GluPlan::Scalar,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector kernels for an aligned half of a multiple of the vector width only.
    #[test]
    fn vectors_need_whole_vectors_and_alignment() {
        use GluAlgorithm::{Rows, Scalar, Vectors};
        for (algorithm, plan) in [(Vectors, GluPlan::Vectors), (Rows, GluPlan::Rows)] {
            assert_eq!(GluPlan::choose(algorithm, 4, 14336, 8, true), plan);
            assert_eq!(GluPlan::choose(algorithm, 4, 8, 8, true), plan);
            assert_eq!(GluPlan::choose(algorithm, 4, 12, 8, true), GluPlan::Scalar);
            assert_eq!(GluPlan::choose(algorithm, 4, 12, 4, true), plan);
            assert_eq!(GluPlan::choose(algorithm, 4, 14336, 8, false), GluPlan::Scalar);
        }
        assert_eq!(GluPlan::choose(Scalar, 4, 14336, 8, true), GluPlan::Scalar);
    }

    /// The default: the tutorial below [`SMALL_OUTPUTS`] outputs or where the vectors do not
    /// fit, the rows kernel from there on.
    #[test]
    fn auto_takes_the_tutorial_for_small_outputs() {
        let auto = |rows, n, aligned| GluPlan::choose(GluAlgorithm::Auto, rows, n, 8, aligned);
        assert_eq!(GluAlgorithm::default(), GluAlgorithm::Auto);
        assert_eq!(auto(1, SMALL_OUTPUTS - 8, true), GluPlan::Scalar);
        assert_eq!(auto(1, SMALL_OUTPUTS, true), GluPlan::Rows);
        assert_eq!(auto(64, SMALL_OUTPUTS / 64, true), GluPlan::Rows);
        assert_eq!(auto(8, 14336, true), GluPlan::Scalar);
        assert_eq!(auto(18, 14336, true), GluPlan::Scalar);
        assert_eq!(auto(19, 14336, true), GluPlan::Rows);
        assert_eq!(auto(4096, 14336, true), GluPlan::Rows);
        assert_eq!(auto(4096, 14336, false), GluPlan::Scalar);
        assert_eq!(auto(4096, 14332, true), GluPlan::Scalar);
        assert_eq!(auto(usize::MAX, 8, true), GluPlan::Rows);
    }
}
