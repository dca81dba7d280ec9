//! Decode attention, the tensor-core rung in one launch
//! ([`decode_attention_tensor_fused`](fn@decode_attention_tensor_fused)): [`super::tensor`]'s
//! blocks, then, in the last block of each row group to finish, the combine
//! ([`super::fused_combine`]) that [`super::tiles_combine`] does as a second launch.
//!
//! # Why
//! At batch 1 and a few thousand cached tokens a call is a few tens of microseconds, and the
//! second launch (its start, the gap before it, a block per row that reads a few KiB) is a fixed
//! share of it (BENCHMARKS.md, the third wave's thirteenth round, has the ncu figures). Here the
//! partials are merged by the block that wrote the group's last one, while the other blocks'
//! partials are still in L2. Simulator-checked, not yet timed on a GPU: the two-launch form
//! stays the default. An earlier one-launch form (BENCHMARKS.md, "Tried and reverted") merged a
//! row per warp with 4-byte loads, 8 chunks per round trip, and lost at batch 1; this merge
//! issues 16 chunks' 16-byte loads per thread and shares short items' chunks among threads.

use super::fused_combine::{last_of_group, merge_rows, MERGE_SCRATCH_FLOATS};
use super::tensor::{q_elems, tensor_chunk, TENSOR_STAGES};
use super::tiles::{stage_elems, TILE_BLOCK};
use super::KvElem;
use crate::gpu::{bf16, f16, shared, thread};
use crate::kernel;

// The merge's scratch fits in the ring, which is free by then, at every head dim.
const _: () = assert!(MERGE_SCRATCH_FLOATS * 4 <= TENSOR_STAGES * stage_elems(64) * 2);

/// Decode attention in one launch (tensor cores): [`super::tensor`]'s chunk of the context for
/// up to [`super::TENSOR_ROWS`] query rows per block, then the combine of the row group by the
/// last of its blocks to finish; `D` = `head_dim` (64, 128 or 256).
///
/// Block `(x, y)` is [`super::tensor`]'s (sequence `y`, kv head `x % kv_heads`, row group
/// `g = (x / kv_heads) % groups`, chunk `x / (kv_heads groups)`), and its threads do exactly
/// what that kernel's do, up to the chunk's partials stored in `ml` and `acc`. Then the hand-off
/// ([`super::fused_combine`]): a barrier, thread 0 fences (device scope) and adds 1 to the row
/// group's counter `counters[(y kv_heads + x % kv_heads) groups + g]`; the block whose add reads
/// `splits - 1` is the group's last: thread 0 fences again and sets the counter back to 0, and
/// after a barrier the block's threads merge the group's rows: item `(r, 4 dims)` by one thread
/// (or, with fewer items than threads, by `128 / items` threads that meet in shared memory),
/// every chunk's `(max, sum)` (8 bytes) and output (16 bytes) loaded 16 chunks at a time and
/// merged online; `out[row][4 d ..+ 4]` = output / sum rounded once to `E`, `lse[row]` = `ln 2
/// (max + log2 sum)`. The other blocks end after their count.
///
/// Global memory: each K and V row of the chunk read once per row group, in 16-byte pieces, and
/// `(D + 2) * 4` bytes of partial per row and chunk written, as [`super::tensor`]; the last block
/// of a group reads the group's partials back (mostly from L2) and writes its rows of `out` and
/// `lse`; one atomic per block. Shared memory: [`super::tensor_shared_bytes`]`(D)` (dynamic).
///
/// Launch: grid `(splits * groups * kv_heads, batch)`, blocks of [`TILE_BLOCK`] threads,
/// `tensor_shared_bytes(D)` bytes of dynamic shared memory.
///
/// # Safety
/// As [`super::tensor`]'s kernel, and: `out` holds `batch * q_len * heads * D` elements and
/// `lse` a float per row (`batch * q_len * heads`); `counters` holds `batch * kv_heads *
/// groups` words (`groups = ceil(heads / kv_heads * q_len / 16)`), all 0 when the launch starts
/// (every launch leaves them 0), and no other launch in flight uses them or the partials.
// Barriers: the tensor rung's three, two in the hand-off (before thread 0's release, after its
// count), one in the merge (the threads' shares of short items).
#[kernel(
    instances(
        decode_attention_tensor_fused_bf16_64 = (bf16, 64),
        decode_attention_tensor_fused_bf16_128 = (bf16, 128),
        decode_attention_tensor_fused_bf16_256 = (bf16, 256),
        decode_attention_tensor_fused_f16_64 = (f16, 64),
        decode_attention_tensor_fused_f16_128 = (f16, 128),
        decode_attention_tensor_fused_f16_256 = (f16, 256),
    ),
    block(TILE_BLOCK),
    barriers(6)
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn decode_attention_tensor_fused<E: KvElem, const D: usize>(
    q: *const E,
    k_pool: *const E,
    v_pool: *const E,
    table: *const i32,
    lens: *const i32,
    ml: *mut f32,
    acc: *mut f32,
    out: *mut E,
    lse: *mut f32,
    counters: *mut u32,
    q_len: usize,
    heads: usize,
    kv_heads: usize,
    shift: u32,
    max_blocks: usize,
    splits: usize,
    chunk: usize,
    scale: f32,
) {
    // SAFETY: the kernel's contract is the chunk's.
    let block = unsafe {
        tensor_chunk::<E, D>(
            (q, k_pool, v_pool, table, lens),
            (ml, acc),
            (q_len, heads, kv_heads, shift, max_blocks),
            (splits, chunk, scale),
        )
    };
    let tid = thread::thread_idx_x() as usize;
    // The queries' area holds the flag and the ring the merge's scratch: neither is read after
    // the chunk's last tile, nor the ring after the partials' stores (the hand-off's barrier).
    let flag = shared::dynamic::<u32>();
    let scratch = shared::dynamic::<E>().wrapping_add(q_elems(D)).cast::<f32>();
    // SAFETY: every thread, the block's partials stored; the counter is the row group's (the
    // contract: `batch * kv_heads * groups` words), touched by its `splits` blocks alone.
    if !unsafe { last_of_group(counters, block.group_index(), splits, flag, tid) } {
        return;
    }
    // SAFETY: every thread of the group's last block; every chunk's partial of the group's rows
    // stored and released to it; `out` and `lse` hold the rows (the contract); the scratch is
    // the ring's first floats (16-byte aligned, `MERGE_SCRATCH_FLOATS` of them, free).
    unsafe {
        merge_rows::<E, D>(
            (ml.cast_const(), acc.cast_const()),
            (out, lse),
            (splits, block.row_count),
            tid,
            scratch,
            |r| block.q_row(r),
        )
    };
}
