//! Decode attention over a paged KV cache, FlashDecoding's scheme, and the cache's append.
//!
//! # The paged KV cache
//! K and V live in two pools of fixed-size blocks, `[num_blocks, block_size, kv_heads, head_dim]`
//! elements each (bf16 or f16, [`KvElem`]); `block_size` is a power of two (16 is the usual
//! choice). Sequence `b` of a batch owns the blocks listed in row `b` of its block table
//! (`[batch, max_blocks]` `i32`): its token at position `p` is row `p % block_size` of block
//! `table[b][p / block_size]`. `lens[b]` (`[batch]` `i32`) is the number of tokens it holds.
//! The host checks every block id a launch reads or writes (`0 <= id < num_blocks`) and every
//! length (`lens[b] + new <= max_blocks * block_size`) before it launches; the kernels trust
//! them.
//!
//! * [`append`]: `kv_cache_append*` writes a step's new K and V rows (`[batch, new, kv_heads,
//!   head_dim]`) at positions `lens[b] .. lens[b] + new` through the table: an element per thread
//!   (the tutorial rung), or a 16-byte vector of 8 elements per thread.
//!
//! # Attention of the newest queries
//! `q` is `[batch, q_len, heads, head_dim]` (`1 <= q_len <=` [`MAX_Q_LEN`]): the last `q_len`
//! tokens of each sequence, already appended, so query `i` sits at position
//! `lens[b] - q_len + i` and sees keys `0 ..= lens[b] - q_len + i` (causal among the new ones).
//! Grouped-query attention: `heads` is a multiple of `kv_heads`, q head `h` reads kv head
//! `h / (heads / kv_heads)`. Scores are `scale * q.k`; the kernels work in base 2 (`q` is scaled
//! by `scale * log2 e` once, so each exponential is one `ex2.approx`), and the row's
//! log-sum-exp is written in natural-log units, as FlashAttention's `softmax_lse`. Output:
//! `out` (`[batch, q_len, heads, head_dim]`, the element type, rounded once) and `lse` (`[batch,
//! q_len, heads]` f32).
//!
//! * [`warp_rows`] (the tutorial rung, the reference of the fast one on the GPU): one warp per
//!   `(sequence, query, head)`, lanes across the head's dimensions, one key at a time, any
//!   `head_dim` that is a multiple of 8 up to [`MAX_HEAD_DIM`].
//! * [`split`] (FlashDecoding): the context cut into `splits` chunks; a warp per `(sequence, kv
//!   head, group of up to` [`ROWS_PER_WARP`] `query rows, chunk)`, where the rows are the q heads
//!   that share the kv head times the queries, so that each K and V row it loads (16 bytes per
//!   lane) serves all of them. Each warp writes its rows' partial `(max, sum, unnormalised
//!   output)`; [`combine`] merges a row's chunks by their log-sum-exp. `head_dim` 64, 128 or 256.
//! * [`tiles`] (the streaming rung): a block of 4 warps per `(sequence, kv head,
//!   chunk, group of up to` [`TILE_ROWS`] `query rows)`; the chunk's K and V rows stream through
//!   a ring of shared-memory stages (16-byte `cp.async`, two tiles of 64 keys in flight while one
//!   is computed), lanes own keys (one shuffle per dot product), all the group's rows scored
//!   against each K row, the warps' online softmaxes merged in shared memory; the chunk count
//!   fills the device with blocks rather than warps, so partials stay few, and
//!   [`tiles_combine`] merges them a block per row. `head_dim` 64, 128 or 256.
//! * [`tensor`] (the tensor-core rung, the default): [`tiles`]' grid, ring and partials, but the
//!   scores and `P V` on `mma.sync` (`m16n8k16`, the group's up to [`TENSOR_ROWS`] query rows as
//!   the rows of `A`, K and V fragments by `ldmatrix` from the ring), so that a tile costs a
//!   few hundred instructions per block instead of thousands, and the multiprocessor's issue
//!   slots no longer bound the stream; [`tiles_combine`] merges its partials.
//! * [`tensor_fused`] (the tensor-core rung in one launch; simulator-checked, not yet timed on
//!   the GPU, so not the default): [`tensor`]'s blocks, and the last block of each row group to
//!   finish merges the group's chunks ([`fused_combine`]: an atomic ticket per row group in a
//!   small counter buffer, left 0 for the next launch), where [`tiles_combine`] is a second
//!   launch.
//!
//! # Rules at the edges
//! Every query sees at least its own key (the host refuses `lens[b] < q_len`), so a row's
//! maximum is finite for finite inputs; a NaN in `q`, K or V makes the rows that read it NaN. A
//! chunk past a sequence's length (sequences of a batch differ in length, the chunks are cut for
//! the longest) writes an empty partial (`max = -inf`, `sum = 0`), which the combine weighs 0.

use crate::gpu::convert::Float;
use crate::gpu::vector::Lane;
use crate::gpu::{bf16, f16, warp};

pub mod append;
pub mod combine;
pub mod fused_combine;
pub mod split;
pub mod tensor;
pub mod tensor_fused;
pub mod tiles;
pub mod tiles_combine;
pub mod warp_rows;

// Every rung's items (its kernels' launcher modules among them) at the family's level.
pub use append::*;
pub use combine::*;
pub use fused_combine::*;
pub use split::*;
pub use tensor::*;
pub use tensor_fused::*;
pub use tiles::*;
pub use tiles_combine::*;
pub use warp_rows::*;

/// An element of the KV cache, the queries and the output: bf16 or f16, computed on in f32
/// (and, in [`tensor`], on the tensor cores with f32 accumulators).
pub trait KvElem: Float + Lane {
    /// `D = A * B + C` on one 16 x 8 x 16 tile of this type (`mma_m16n8k16_bf16` or `_f16`),
    /// warp-collective.
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
    /// Two f32 rounded to this type and packed in a register (the first in the low half).
    fn pack(v: [f32; 2]) -> u32;
}
impl KvElem for bf16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        crate::gpu::mma::mma_m16n8k16_bf16(a, b, c)
    }
    #[inline(always)]
    fn pack(v: [f32; 2]) -> u32 {
        crate::gpu::convert::pack_bf16x2(v)
    }
}
impl KvElem for f16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        crate::gpu::mma::mma_m16n8k16_f16(a, b, c)
    }
    #[inline(always)]
    fn pack(v: [f32; 2]) -> u32 {
        crate::gpu::convert::pack_f16x2(v)
    }
}

/// Elements per 16-byte vector of a [`KvElem`].
pub const VEC: usize = 8;

/// The largest head dimension.
pub const MAX_HEAD_DIM: usize = 256;

/// Dimensions a lane of [`warp_rows`]' and [`combine`]'s warps holds: `MAX_HEAD_DIM / 32`.
pub const DIMS_PER_LANE: usize = MAX_HEAD_DIM / warp::SIZE as usize;

/// The most new queries per sequence of one call.
pub const MAX_Q_LEN: usize = 16;

/// Query rows (q heads of a kv head times queries) one warp of [`split`] holds: each lane keeps
/// 8 dimensions of each row's query and output in registers (64 floats for 4 rows).
pub const ROWS_PER_WARP: usize = 4;

/// Threads per block of the attention kernels: 4 warps, each its own work.
pub const ATTN_BLOCK: u32 = 128;

/// Warps per block of the attention kernels.
pub const ATTN_WARPS: u32 = ATTN_BLOCK / warp::SIZE;

/// Threads per block of the append kernels.
pub const APPEND_BLOCK: u32 = 256;

/// The index, in a pool, of element 0 of the row of token `pos` of sequence `b` for kv head
/// `kvh`: block `table[b][pos >> shift]`, row `pos & (block_size - 1)`.
///
/// # Safety
/// `b < batch`, `pos >> shift < max_blocks`, and the table's entry is a block id of the pool.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn row_of(
    table: *const i32,
    b: usize,
    max_blocks: usize,
    pos: usize,
    shift: u32,
    kv_heads: usize,
    kvh: usize,
    head_dim: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let block = unsafe { crate::gpu::mem::load(table, b * max_blocks + (pos >> shift)) } as usize;
    let row = (block << shift) | (pos & ((1usize << shift) - 1));
    (row * kv_heads + kvh) * head_dim
}
