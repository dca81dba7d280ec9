//! The plan of a transpose: the kernel that runs (the 16-byte one needs aligned rows) and the
//! tile each block covers, chosen once per call.

use kernels_gpu::transpose as family;

/// What one transpose call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TransposePlan {
    /// The kernel.
    pub(crate) algorithm: TransposeAlgorithm,
    /// `(columns, rows)` of the input one block covers.
    pub(crate) tile: (usize, usize),
    /// Threads per block, `(TILE, BLOCK_ROWS)` for every kernel.
    pub(crate) block: (u32, u32, u32),
    /// Static shared memory of the kernel.
    pub(crate) shared_bytes: u32,
}

impl TransposePlan {
    /// The plan of `algorithm` on a `rows x cols` matrix whose buffers are (`aligned`) or are not
    /// 16-byte aligned ([`TransposeAlgorithm::effective`]).
    pub(crate) fn choose(
        algorithm: TransposeAlgorithm,
        rows: usize,
        cols: usize,
        aligned: bool,
    ) -> TransposePlan {
        let algorithm = algorithm.effective(rows, cols, aligned);
        let (tile, shared_bytes) = match algorithm {
            TransposeAlgorithm::Naive => ((family::TILE as usize, family::BLOCK_ROWS as usize), 0),
            TransposeAlgorithm::Tiled => (
                (family::TILE as usize, family::TILE as usize),
                family::TILED_SHARED_BYTES,
            ),
            TransposeAlgorithm::Tiled64 => (
                (family::TILE_64 as usize, family::TILE_64 as usize),
                family::TILED_64_SHARED_BYTES,
            ),
            TransposeAlgorithm::Vec4_64 => (
                (family::TILE_64 as usize, family::TILE_64 as usize),
                family::VEC4_64_SHARED_BYTES,
            ),
        };
        TransposePlan {
            algorithm,
            tile,
            block: (family::TILE, family::BLOCK_ROWS, 1),
            shared_bytes,
        }
    }
}

/// Which transpose kernel to run. Both are exact (they move bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TransposeAlgorithm {
    /// One thread per element: coalesced reads, strided writes (`transpose_naive`).
    Naive,
    /// A 32x32 tile through padded shared memory, 4 elements per thread, coalesced reads and
    /// writes (`transpose_tiled`).
    Tiled,
    /// `transpose_tiled_64`: a 64x64 tile (padded to 65 columns), 16 elements per thread, 4-byte
    /// accesses; any shape; the default (the fastest at 8192 x 8192 on the H200, and as fast as
    /// [`TransposeAlgorithm::Vec4_64`] on the ragged shape, `bench/results/latest.jsonl`).
    #[default]
    Tiled64,
    /// Tuning candidate `transpose_vec4_64`: a 64x64 swizzled tile, 16-byte global loads and
    /// stores; for `rows % 4 == 0` and `cols % 4 == 0` (every row 16-byte aligned), otherwise
    /// [`TransposeAlgorithm::Tiled64`] runs.
    Vec4_64,
}

impl TransposeAlgorithm {
    /// Every algorithm, the tutorial's first.
    pub const ALL: [TransposeAlgorithm; 4] = [
        TransposeAlgorithm::Naive,
        TransposeAlgorithm::Tiled,
        TransposeAlgorithm::Tiled64,
        TransposeAlgorithm::Vec4_64,
    ];

    /// A short name: `naive`, `tiled`, `tiled_64`, `vec4_64`.
    pub fn name(self) -> &'static str {
        match self {
            TransposeAlgorithm::Naive => "naive",
            TransposeAlgorithm::Tiled => "tiled",
            TransposeAlgorithm::Tiled64 => "tiled_64",
            TransposeAlgorithm::Vec4_64 => "vec4_64",
        }
    }

    /// The algorithm that runs on a `rows x cols` matrix whose buffers are (`aligned`) or are not
    /// 16-byte aligned: [`TransposeAlgorithm::Vec4_64`] needs every row of both 16-byte aligned.
    pub fn effective(self, rows: usize, cols: usize, aligned: bool) -> TransposeAlgorithm {
        match self {
            TransposeAlgorithm::Vec4_64 if !(aligned && rows % 4 == 0 && cols % 4 == 0) => {
                TransposeAlgorithm::Tiled64
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 16-byte kernel where every row of both matrices is 16-byte aligned, the 64x64 tiled
    /// kernel on each side of that rule; the others as asked.
    #[test]
    fn the_vec4_kernel_only_on_aligned_rows_of_multiples_of_four() {
        let kernel = |rows, cols, aligned| {
            TransposePlan::choose(TransposeAlgorithm::Vec4_64, rows, cols, aligned).algorithm
        };
        assert_eq!(kernel(8, 8, true), TransposeAlgorithm::Vec4_64);
        assert_eq!(kernel(8, 8, false), TransposeAlgorithm::Tiled64);
        assert_eq!(kernel(9, 8, true), TransposeAlgorithm::Tiled64);
        assert_eq!(kernel(8, 9, true), TransposeAlgorithm::Tiled64);
        for algorithm in [
            TransposeAlgorithm::Naive,
            TransposeAlgorithm::Tiled,
            TransposeAlgorithm::Tiled64,
        ] {
            assert_eq!(TransposePlan::choose(algorithm, 9, 7, false).algorithm, algorithm);
        }
        assert_eq!(
            TransposePlan::choose(TransposeAlgorithm::Naive, 1, 1, true).tile,
            (32, 8)
        );
        assert_eq!(
            TransposePlan::choose(TransposeAlgorithm::Tiled, 1, 1, true).tile,
            (32, 32)
        );
        assert_eq!(
            TransposePlan::choose(TransposeAlgorithm::Tiled64, 1, 1, true).tile,
            (64, 64)
        );
    }
}
