//! The plan of a rotary call: the tutorial or the block-per-token vector kernel, chosen once from
//! the algorithm, the layout, the head size and the buffers' alignment, and the vector kernel's
//! block from the token's items and the token count.

use kernels_gpu::rotary::{ROTARY_MAX_BLOCK, rotary_items};

/// The pairs' layout of a rotary embedding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RotaryLayout {
    /// Llama / GPT-NeoX (HF's `rotate_half`): pair `i` is `(x[i], x[i + head_dim / 2])`.
    #[default]
    HalfSplit,
    /// GPT-J: pair `i` is `(x[2i], x[2i + 1])`.
    Interleaved,
}

/// Which rotary kernel runs. All give the same bits (the same cos, sin and rotation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RotaryAlgorithm {
    /// The tutorial (`rotary_*_scalar_*`): a thread per pair. Any even head size.
    Scalar,
    /// A block per token (`rotary_half_*`, `rotary_interleaved_*`): cos and sin once per token
    /// in shared memory, 16-byte vectors; for a head size of a multiple of 16 (half-split) or 8
    /// (interleaved) and aligned buffers, else the tutorial runs. Its block is chosen from the
    /// tokens ([`RotaryPlan::choose`]): a thread per item for few tokens, a thread per two items
    /// for many. The default.
    #[default]
    Rows,
    /// The vector kernel with a thread per item of the token ([`RotaryPlan::per_item_block`]),
    /// whatever the tokens: for tests and tuning.
    RowsPerItem,
    /// The vector kernel with a thread per two items of the token
    /// ([`RotaryPlan::two_items_block`]), whatever the tokens: for tests and tuning.
    RowsTwoItems,
}

impl RotaryAlgorithm {
    /// Every algorithm, the tutorial first.
    pub const ALL: [RotaryAlgorithm; 4] = [
        RotaryAlgorithm::Scalar,
        RotaryAlgorithm::Rows,
        RotaryAlgorithm::RowsPerItem,
        RotaryAlgorithm::RowsTwoItems,
    ];

    /// A short name: `scalar`, `rows`, `rows-per-item`, `rows-two-items`.
    pub fn name(self) -> &'static str {
        match self {
            RotaryAlgorithm::Scalar => "scalar",
            RotaryAlgorithm::Rows => "rows",
            RotaryAlgorithm::RowsPerItem => "rows-per-item",
            RotaryAlgorithm::RowsTwoItems => "rows-two-items",
        }
    }
}

/// [`RotaryPlan::choose`] gives the vector kernel a thread per item while the tokens are at most
/// this many per multiprocessor, and a thread per two items past it. On the H200 (132 SMs),
/// Llama-3-8B's 320 items a token, against the 128 threads looping over the items that every
/// count had before: a thread per item ran 3.39 us at 1 token and 3.50 us at 8 against 5.00 and
/// 4.90 (each thread's loads go out at once instead of in three rounds), but 24.45 us against
/// 23.26 at 4096 tokens and 178.8 against 162.9 at 32768, where the GPU is full either way and
/// the per-item block's threads wait through their token's table
/// (`bench/experiments/third-wave/0dd81b7-rotary-ab-{base,x}-1.jsonl`). Between them
/// (`bench/experiments/third-wave/5b71824-rotary-sweep-1.jsonl`): a thread per item 3.76 us
/// against 5.38 at 64 tokens, 5.05 against 5.53 at 256, 6.61 against 6.90 at 512; 9.07 against
/// 8.91 at 1024, 14.40 against 14.14 at 2048. So the boundary lies between 512 and 1024 tokens,
/// 528 here. Past it, a thread per two items (160 threads, two whole rounds) against the 128
/// looping threads (two and a half), `gpukern:rows` of two binaries in one call (the records in
/// `bench/experiments/third-wave/`), at 1024, 2048, 4096 and 32768 tokens:
/// 8.62, 13.70, 23.09, 162.40 us (`e6dcd19-rotary-ab-h-1.jsonl`)
/// against 8.77, 14.02, 23.14, 162.99 us (`e6dcd19-rotary-ab-main-1.jsonl`).
pub const PER_ITEM_MAX_TOKENS_PER_SM: usize = 4;

/// What one rotary call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotaryPlan {
    /// The tutorial kernel.
    Scalar,
    /// The block-per-token vector kernel with `block` threads.
    Rows {
        /// Threads per block: a multiple of 32 up to `ROTARY_MAX_BLOCK`.
        block: u32,
    },
}

impl RotaryPlan {
    /// The plan of `algorithm` for `tokens` tokens of `heads` heads (of `q` and `k` together) of
    /// `head_dim` (even, at least 2) in `layout` on a GPU of `multiprocessors` SMs; `aligned`:
    /// `q` and `k` start on a 16-byte boundary. The vector kernel needs whole vectors and a
    /// token's items ([`rotary_items`]) below `2^32` (it counts them in 32 bits); else the
    /// tutorial runs. Its block: a thread per item ([`RotaryPlan::per_item_block`]) for at most
    /// [`PER_ITEM_MAX_TOKENS_PER_SM`] tokens per SM, else a thread per two items
    /// ([`RotaryPlan::two_items_block`]); or as `algorithm` forces it.
    pub fn choose(
        algorithm: RotaryAlgorithm,
        layout: RotaryLayout,
        (tokens, heads, head_dim): (usize, usize, usize),
        aligned: bool,
        multiprocessors: usize,
    ) -> RotaryPlan {
        let vector = match layout {
            RotaryLayout::HalfSplit => 16,
            RotaryLayout::Interleaved => 8,
        };
        let items_fit = heads.checked_mul(head_dim).is_some()
            && rotary_items(heads, head_dim, layout == RotaryLayout::HalfSplit) <= u32::MAX as usize;
        if algorithm == RotaryAlgorithm::Scalar || !aligned || head_dim % vector != 0 || !items_fit {
            return RotaryPlan::Scalar;
        }
        let few = tokens <= PER_ITEM_MAX_TOKENS_PER_SM.saturating_mul(multiprocessors.max(1));
        let items_per_thread = match algorithm {
            RotaryAlgorithm::RowsPerItem => 1,
            RotaryAlgorithm::RowsTwoItems => 2,
            _ if few => 1,
            _ => 2,
        };
        RotaryPlan::Rows {
            block: rows_block(heads, head_dim, layout, items_per_thread),
        }
    }

    /// Threads per block of the vector kernel with a thread per item, for `heads` heads (of `q`
    /// and `k` together) of `head_dim` in `layout`: the token's items ([`rotary_items`]) in
    /// whole warps, at most [`ROTARY_MAX_BLOCK`] (whose threads then loop over the rest).
    pub fn per_item_block(heads: usize, head_dim: usize, layout: RotaryLayout) -> u32 {
        rows_block(heads, head_dim, layout, 1)
    }

    /// Threads per block of the vector kernel with a thread per two items: half the token's
    /// items ([`rotary_items`]), rounded up, in whole warps, at least one, at most
    /// [`ROTARY_MAX_BLOCK`].
    pub fn two_items_block(heads: usize, head_dim: usize, layout: RotaryLayout) -> u32 {
        rows_block(heads, head_dim, layout, 2)
    }
}

/// Threads per block of the vector kernel with a thread per `items_per_thread` items of the
/// token ([`rotary_items`]): rounded up, in whole warps, at least one, at most
/// [`ROTARY_MAX_BLOCK`].
fn rows_block(heads: usize, head_dim: usize, layout: RotaryLayout, items_per_thread: usize) -> u32 {
    let items = rotary_items(heads, head_dim, layout == RotaryLayout::HalfSplit);
    items
        .div_ceil(items_per_thread)
        .next_multiple_of(32)
        .clamp(32, ROTARY_MAX_BLOCK as usize) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of 8 tokens on 132 SMs (a thread per item).
    fn plan(
        algorithm: RotaryAlgorithm,
        layout: RotaryLayout,
        (heads, d): (usize, usize),
        aligned: bool,
    ) -> RotaryPlan {
        RotaryPlan::choose(algorithm, layout, (8, heads, d), aligned, 132)
    }

    /// The vector kernel for whole vectors of each half (half-split) or of the head
    /// (interleaved) and aligned buffers only.
    #[test]
    fn rows_need_whole_vectors() {
        use RotaryAlgorithm::{Rows, Scalar};
        use RotaryLayout::{HalfSplit, Interleaved};
        let rows = |block| RotaryPlan::Rows { block };
        assert_eq!(plan(Rows, HalfSplit, (40, 128), true), rows(320));
        assert_eq!(plan(Rows, HalfSplit, (40, 16), true), rows(64));
        assert_eq!(plan(Rows, HalfSplit, (40, 24), true), RotaryPlan::Scalar);
        assert_eq!(plan(Rows, Interleaved, (40, 24), true), rows(128));
        assert_eq!(plan(Rows, Interleaved, (40, 12), true), RotaryPlan::Scalar);
        assert_eq!(plan(Rows, HalfSplit, (40, 128), false), RotaryPlan::Scalar);
        assert_eq!(plan(Scalar, HalfSplit, (40, 128), true), RotaryPlan::Scalar);
    }

    /// A token's items below `2^32` only: `2^29 - 1` heads of 128 (half-split, 8 items each)
    /// are `2^32 - 8` items, `2^29` heads `2^32`.
    #[test]
    fn rows_count_items_in_32_bits() {
        use RotaryLayout::HalfSplit;
        let rows = |heads| plan(RotaryAlgorithm::Rows, HalfSplit, (heads, 128), true);
        assert_eq!(rows((1 << 29) - 1), RotaryPlan::Rows { block: 1024 });
        assert_eq!(rows(1 << 29), RotaryPlan::Scalar);
        assert_eq!(rows(usize::MAX / 64), RotaryPlan::Scalar);
    }

    /// A thread per item in whole warps, at least one warp, at most `ROTARY_MAX_BLOCK`.
    #[test]
    fn per_item_block_is_a_thread_per_item() {
        use RotaryLayout::{HalfSplit, Interleaved};
        // Llama-3-8B: 32 + 8 heads of 128, 8 items a head half-split, 16 interleaved.
        assert_eq!(RotaryPlan::per_item_block(40, 128, HalfSplit), 320);
        assert_eq!(RotaryPlan::per_item_block(40, 128, Interleaved), 640);
        assert_eq!(RotaryPlan::per_item_block(1, 16, HalfSplit), 32);
        assert_eq!(RotaryPlan::per_item_block(3, 48, HalfSplit), 32);
        assert_eq!(RotaryPlan::per_item_block(33, 16, HalfSplit), 64);
        assert_eq!(RotaryPlan::per_item_block(64, 256, HalfSplit), 1024);
        assert_eq!(RotaryPlan::per_item_block(65, 256, HalfSplit), 1024);
    }

    /// A thread per item up to 4 tokens per SM, a thread per two items past it; the forcing
    /// algorithms whatever the tokens.
    #[test]
    fn the_block_follows_the_tokens() {
        use RotaryAlgorithm::{Rows, RowsPerItem, RowsTwoItems};
        use RotaryLayout::HalfSplit;
        let at = |algorithm, tokens| RotaryPlan::choose(algorithm, HalfSplit, (tokens, 40, 128), true, 132);
        assert_eq!(at(Rows, 1), RotaryPlan::Rows { block: 320 });
        assert_eq!(at(Rows, 528), RotaryPlan::Rows { block: 320 });
        assert_eq!(at(Rows, 529), RotaryPlan::Rows { block: 160 });
        assert_eq!(at(Rows, 4096), RotaryPlan::Rows { block: 160 });
        assert_eq!(at(RowsPerItem, 4096), RotaryPlan::Rows { block: 320 });
        assert_eq!(at(RowsTwoItems, 1), RotaryPlan::Rows { block: 160 });
        // No SM count (a simulator's 0) counts as one.
        let few = |tokens| RotaryPlan::choose(Rows, HalfSplit, (tokens, 40, 128), true, 0);
        assert_eq!(few(4), RotaryPlan::Rows { block: 320 });
        assert_eq!(few(5), RotaryPlan::Rows { block: 160 });
    }

    /// Half the items, rounded up, in whole warps, one warp at least, at most 1024 threads.
    #[test]
    fn two_items_block_is_half_the_items() {
        use RotaryLayout::{HalfSplit, Interleaved};
        assert_eq!(RotaryPlan::two_items_block(40, 128, HalfSplit), 160);
        assert_eq!(RotaryPlan::two_items_block(40, 128, Interleaved), 320);
        assert_eq!(RotaryPlan::two_items_block(1, 16, HalfSplit), 32);
        assert_eq!(RotaryPlan::two_items_block(65, 16, HalfSplit), 64);
        assert_eq!(RotaryPlan::two_items_block(128, 256, HalfSplit), 1024);
        assert_eq!(RotaryPlan::two_items_block(129, 256, HalfSplit), 1024);
    }
}
