//! The plan of a cross-entropy call: which kernels compute the statistics, and how many chunks
//! each row is cut into, chosen once per call from the shape and the device's multiprocessors.

use kernels_gpu::softmax::STREAM_BLOCK;

/// Fewest 4-float vectors per block of the statistics step: 4 per thread of 512, one group of
/// loads in flight each (8192 columns).
const MIN_CHUNK_VECS: usize = 4 * STREAM_BLOCK as usize;
/// Most vectors per block: 8192, a chunk of 32768 columns (128 KiB of f32) per block.
const MAX_CHUNK_VECS: usize = 4 * MIN_CHUNK_VECS;
/// Blocks of the statistics step per multiprocessor the plan aims for at least (4 resident
/// blocks of 512 threads fill an SM's 2048 threads), twice over so that no SM idles at the end.
const BLOCKS_PER_SM: usize = 8;

/// The chunks per row and vectors per chunk of the statistics step for `rows x cols` on a device
/// of `sms` multiprocessors: chunks of at most `MAX_CHUNK_VECS` vectors, and more (down to
/// `MIN_CHUNK_VECS`) when there are too few rows to give every SM `BLOCKS_PER_SM` blocks.
pub fn cross_entropy_chunks(rows: usize, cols: usize, sms: usize) -> (usize, usize) {
    let vecs = (cols / 4).max(1);
    let at_most = vecs.div_ceil(MIN_CHUNK_VECS);
    let wanted = (BLOCKS_PER_SM * sms).div_ceil(rows.max(1));
    let chunks = vecs.div_ceil(MAX_CHUNK_VECS).max(wanted.min(at_most)).max(1);
    (chunks, vecs.div_ceil(chunks))
}

/// What one cross-entropy call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CrossEntropyPlan {
    /// `softmax_split_stats` at `t = 1`, a block per chunk, then `cross_entropy_finish`.
    Blocks {
        /// Chunks per row.
        chunks: usize,
        /// 4-float vectors per chunk.
        chunk_vecs: usize,
    },
    /// `cross_entropy_warp`, a warp per chunk, then `cross_entropy_finish` when `chunks > 1`.
    Warps {
        /// Chunks per row.
        chunks: usize,
        /// 4-float vectors per chunk.
        chunk_vecs: usize,
    },
}

impl CrossEntropyPlan {
    /// The plan of `algorithm` for `rows x cols >= 1` logits on a device of `sms`
    /// multiprocessors (read by the block plan only).
    pub(crate) fn choose(
        algorithm: CrossEntropyAlgorithm,
        rows: usize,
        cols: usize,
        sms: usize,
    ) -> CrossEntropyPlan {
        let warp_chunk_cols = match algorithm {
            CrossEntropyAlgorithm::Blocks => {
                let (chunks, chunk_vecs) = cross_entropy_chunks(rows, cols, sms);
                return CrossEntropyPlan::Blocks { chunks, chunk_vecs };
            }
            CrossEntropyAlgorithm::Warps8k => WARPS_8K_COLS,
            CrossEntropyAlgorithm::Warps32k => WARPS_32K_COLS,
            CrossEntropyAlgorithm::WarpRow => usize::MAX,
        };
        let (chunks, chunk_vecs) = warp_chunks(cols, warp_chunk_cols);
        CrossEntropyPlan::Warps { chunks, chunk_vecs }
    }
}

/// Columns per warp of [`CrossEntropyAlgorithm::Warps8k`] (32 KiB of f32).
const WARPS_8K_COLS: usize = 8192;
/// Columns per warp of [`CrossEntropyAlgorithm::Warps32k`] (128 KiB of f32).
const WARPS_32K_COLS: usize = 32768;

/// The chunks per row and vectors per chunk of a warp algorithm for rows of `cols` columns and
/// `chunk_cols` columns per warp.
fn warp_chunks(cols: usize, chunk_cols: usize) -> (usize, usize) {
    let vecs = (cols / 4).max(1);
    let chunk_vecs = (chunk_cols / 4).clamp(1, vecs);
    (vecs.div_ceil(chunk_vecs), chunk_vecs)
}

/// Which kernels compute the loss. All give the same losses up to rounding (the chunks'
/// statistics merge in another order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CrossEntropyAlgorithm {
    /// A block of 512 threads per chunk of a row (`softmax_split_stats` at `t = 1`, chunks from
    /// [`cross_entropy_chunks`]), then `cross_entropy_finish`: two launches.
    Blocks,
    /// A warp per chunk of 8192 columns (32 KiB) of a row (`cross_entropy_warp`), then
    /// `cross_entropy_finish` where a row has more than one chunk. The default: the fastest at
    /// every benchmarked shape on the H200 (`bench/results/latest.jsonl`).
    #[default]
    Warps8k,
    /// As [`CrossEntropyAlgorithm::Warps8k`] with chunks of 32768 columns (128 KiB). A tuning
    /// candidate.
    Warps32k,
    /// A warp per whole row (`cross_entropy_warp` with one chunk), which also writes the loss:
    /// one launch. A tuning candidate.
    WarpRow,
}

impl CrossEntropyAlgorithm {
    /// Every algorithm.
    pub const ALL: [CrossEntropyAlgorithm; 4] = [
        CrossEntropyAlgorithm::Blocks,
        CrossEntropyAlgorithm::Warps8k,
        CrossEntropyAlgorithm::Warps32k,
        CrossEntropyAlgorithm::WarpRow,
    ];

    /// A short name: `fused` ([`CrossEntropyAlgorithm::Blocks`], the name it had in the
    /// benchmark records when it was the default), `warp-8k` (the default), `warp-32k`,
    /// `warp-row`.
    pub fn name(self) -> &'static str {
        match self {
            CrossEntropyAlgorithm::Blocks => "fused",
            CrossEntropyAlgorithm::Warps8k => "warp-8k",
            CrossEntropyAlgorithm::Warps32k => "warp-32k",
            CrossEntropyAlgorithm::WarpRow => "warp-row",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warp plans: one chunk up to their columns per warp, two one vector past it; a whole
    /// row for `warp-row`.
    #[test]
    fn warp_chunks_on_each_side_of_their_width() {
        let warps = |algorithm, cols| CrossEntropyPlan::choose(algorithm, 4, cols, 132);
        assert_eq!(
            warps(CrossEntropyAlgorithm::Warps8k, 8192),
            CrossEntropyPlan::Warps {
                chunks: 1,
                chunk_vecs: 2048
            }
        );
        assert_eq!(
            warps(CrossEntropyAlgorithm::Warps8k, 8196),
            CrossEntropyPlan::Warps {
                chunks: 2,
                chunk_vecs: 2048
            }
        );
        assert_eq!(
            warps(CrossEntropyAlgorithm::Warps8k, 3),
            CrossEntropyPlan::Warps {
                chunks: 1,
                chunk_vecs: 1
            }
        );
        assert_eq!(
            warps(CrossEntropyAlgorithm::Warps32k, 32768),
            CrossEntropyPlan::Warps {
                chunks: 1,
                chunk_vecs: 8192
            }
        );
        assert_eq!(
            warps(CrossEntropyAlgorithm::Warps32k, 32772),
            CrossEntropyPlan::Warps {
                chunks: 2,
                chunk_vecs: 8192
            }
        );
        assert_eq!(
            warps(CrossEntropyAlgorithm::WarpRow, 1 << 20),
            CrossEntropyPlan::Warps {
                chunks: 1,
                chunk_vecs: 1 << 18
            }
        );
    }

    /// The block plan: more chunks for few rows (down to `MIN_CHUNK_VECS`), at most
    /// `MAX_CHUNK_VECS` vectors each for many.
    #[test]
    fn block_chunks_fill_the_device_and_cap_the_chunk() {
        let blocks = |rows, cols| CrossEntropyPlan::choose(CrossEntropyAlgorithm::Blocks, rows, cols, 132);
        // Many rows: one chunk up to MAX_CHUNK_VECS vectors, two past it.
        assert_eq!(
            blocks(8192, 32768),
            CrossEntropyPlan::Blocks {
                chunks: 1,
                chunk_vecs: 8192
            }
        );
        assert_eq!(
            blocks(8192, 32772),
            CrossEntropyPlan::Blocks {
                chunks: 2,
                chunk_vecs: 4097
            }
        );
        // One row: as many chunks of MIN_CHUNK_VECS as the row holds, up to 8 per SM.
        assert_eq!(
            blocks(1, 8192 * 4),
            CrossEntropyPlan::Blocks {
                chunks: 4,
                chunk_vecs: 2048
            }
        );
        assert_eq!(
            blocks(1, 1 << 24),
            CrossEntropyPlan::Blocks {
                chunks: 1056,
                chunk_vecs: 3972
            }
        );
    }
}
