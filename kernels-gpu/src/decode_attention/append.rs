//! `kv_cache_append*`: a step's new K and V rows written into the paged cache through the block
//! table, at positions `lens[b] .. lens[b] + new` of each sequence.

use super::{row_of, KvElem, APPEND_BLOCK, VEC};
use crate::gpu::{bf16, f16, mem, thread, vector};
use crate::kernel;

/// Append, the tutorial rung: one thread per element of the new rows.
///
/// Thread `i = blockIdx.x * blockDim.x + threadIdx.x` (for `i < batch * new * kv_heads *
/// head_dim`) takes element `i` of `k_new` and `v_new` (`[batch, new, kv_heads, head_dim]`):
/// dimension `d = i % head_dim` of kv head `kvh` of new token `t` of sequence `b`; it reads
/// `lens[b]` and the table entry of position `p = lens[b] + t`, and writes the element to row
/// `p % block_size` of that block, in both pools.
///
/// Global memory: each new element read once and written once per pool (2 x 2 x 2 bytes per
/// element pair), plus a length and a table entry per thread (from L1).
///
/// Launch: `ceil(batch * new * kv_heads * head_dim / blockDim.x)` blocks of [`APPEND_BLOCK`]
/// threads, no shared memory.
///
/// # Safety
/// `k_new` and `v_new` hold `batch * new * kv_heads * head_dim` elements, `lens` `batch`,
/// `table` `batch * max_blocks` entries; for every sequence, `lens[b] + new <= max_blocks *
/// block_size` and the table's entries for positions `lens[b] .. lens[b] + new` are block ids of
/// the pools `k_pool` and `v_pool`; `block_size == 1 << shift`.
// Barriers: none.
#[kernel(instances(bf16, f16), block(APPEND_BLOCK), barriers(0))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kv_cache_append<E: KvElem>(
    k_new: *const E,
    v_new: *const E,
    k_pool: *mut E,
    v_pool: *mut E,
    table: *const i32,
    lens: *const i32,
    batch: usize,
    new: usize,
    kv_heads: usize,
    head_dim: usize,
    shift: u32,
    max_blocks: usize,
) {
    let i = thread::index_1d();
    if i >= batch * new * kv_heads * head_dim {
        return;
    }
    let d = i % head_dim;
    let kvh = (i / head_dim) % kv_heads;
    let t = (i / (head_dim * kv_heads)) % new;
    let b = i / (head_dim * kv_heads * new);
    // SAFETY: `i` is inside the new rows; the position's table entry is a block id (the contract).
    unsafe {
        let pos = mem::load(lens, b) as usize + t;
        let dst = row_of(table, b, max_blocks, pos, shift, kv_heads, kvh, head_dim) + d;
        mem::store(k_pool, dst, mem::load(k_new, i));
        mem::store(v_pool, dst, mem::load(v_new, i));
    }
}

/// Append, vectorised: one thread per 16-byte vector (8 elements) of the new rows.
///
/// Thread `i` (for `i < batch * new * kv_heads * head_dim / 8`) moves elements `8i .. 8i + 8` of
/// `k_new` and `v_new` (one kv head's dimensions `8 (i % (head_dim / 8)) ..`, `head_dim` a
/// multiple of 8) to the cache as [`kv_cache_append`](fn@kv_cache_append) does, with one
/// 16-byte load and one 16-byte store per pool.
///
/// Global memory: as the tutorial rung (the minimum), in 16-byte accesses.
///
/// Launch: `ceil(batch * new * kv_heads * head_dim / 8 / blockDim.x)` blocks of
/// [`APPEND_BLOCK`] threads, no shared memory.
///
/// # Safety
/// As [`kv_cache_append`](fn@kv_cache_append), with `head_dim` a multiple of 8 and every buffer
/// 16-byte aligned.
// Barriers: none.
#[kernel(instances(bf16, f16), block(APPEND_BLOCK), barriers(0))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn kv_cache_append_vec<E: KvElem>(
    k_new: *const E,
    v_new: *const E,
    k_pool: *mut E,
    v_pool: *mut E,
    table: *const i32,
    lens: *const i32,
    batch: usize,
    new: usize,
    kv_heads: usize,
    head_dim: usize,
    shift: u32,
    max_blocks: usize,
) {
    let i = thread::index_1d();
    let vecs = head_dim / VEC;
    if i >= batch * new * kv_heads * vecs {
        return;
    }
    let d = (i % vecs) * VEC;
    let kvh = (i / vecs) % kv_heads;
    let t = (i / (vecs * kv_heads)) % new;
    let b = i / (vecs * kv_heads * new);
    // SAFETY: as the tutorial rung; the vectors are 16-byte aligned (`head_dim % 8 == 0`, 2-byte
    // elements: `dst` is even).
    unsafe {
        let pos = mem::load(lens, b) as usize + t;
        let dst = row_of(table, b, max_blocks, pos, shift, kv_heads, kvh, head_dim) + d;
        // The 8 elements moved as the bits of 4 floats (no arithmetic on them), each vector
        // stored as soon as it is loaded: a vector held across the other's load went through
        // local memory (a 16-byte stack frame in ptxas's report).
        let k = vector::load4(k_new.cast::<f32>(), i * 4);
        vector::store4(k_pool.cast::<f32>(), dst / 2, k);
        let v = vector::load4(v_new.cast::<f32>(), i * 4);
        vector::store4(v_pool.cast::<f32>(), dst / 2, v);
    }
}
