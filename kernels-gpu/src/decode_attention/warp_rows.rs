//! Decode attention, the tutorial rung ([`decode_attention_warp`](fn@decode_attention_warp)):
//! one warp per query row, one key at a time, no split. The reference the fast rung is checked
//! against on the GPU.

use super::{row_of, KvElem, ATTN_BLOCK, DIMS_PER_LANE};
use crate::gpu::{bf16, f16, math, mem, thread, warp};
use crate::kernel;

/// Decode attention of one query row per warp, the whole context in one pass.
///
/// Warp `g = blockIdx.x * (blockDim.x / 32) + warp` (for `g < batch * q_len * heads`) takes query
/// `qi = (g / heads) % q_len` of head `h = g % heads` of sequence `b = g / (heads * q_len)`, the
/// row `g` of `q`, `out` and `lse`. Lane `l` holds dimensions `l, l + 32, ...` (below `head_dim`,
/// at most 8) of the query, scaled by `scale * log2 e`, and of the output. For each key
/// `j = 0 ..= lens[b] - q_len + qi` of kv head `h / (heads / kv_heads)` (its row found through
/// the block table) the warp sums its lanes' products into the score (5 shuffles), updates the
/// online maximum and sum (two `ex2.approx`) and accumulates the V row weighted by the score's
/// exponential. Then it writes `out = acc / sum` (rounded once to `E`) and lane 0 the row's
/// log-sum-exp `ln 2 (max + log2 sum)`.
///
/// Global memory: the K and V rows of the context read once per query row (so `heads / kv_heads
/// * q_len` times per kv head: the rung is for checking, not for speed), in 2-byte accesses.
///
/// Launch: `ceil(batch * q_len * heads / (blockDim.x / 32))` blocks of [`ATTN_BLOCK`] threads
/// (a multiple of 32), no shared memory.
///
/// # Safety
/// `q` and `out` hold `batch * q_len * heads * head_dim` elements, `lse` `batch * q_len * heads`
/// floats, `lens` `batch`, `table` `batch * max_blocks`; `heads % kv_heads == 0`, `head_dim <=
/// 256`; for every sequence `q_len <= lens[b] <= max_blocks << shift` and the table's entries
/// for positions below `lens[b]` are block ids of the pools.
// Barriers: none, a warp per row (shuffles only).
#[kernel(instances(bf16, f16), block(ATTN_BLOCK), barriers(0))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn decode_attention_warp<E: KvElem>(
    q: *const E,
    k_pool: *const E,
    v_pool: *const E,
    table: *const i32,
    lens: *const i32,
    out: *mut E,
    lse: *mut f32,
    batch: usize,
    q_len: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    shift: u32,
    max_blocks: usize,
    scale: f32,
) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let g = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if g >= batch * q_len * heads {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let lane = tid % warp::SIZE as usize;
    let h = g % heads;
    let qi = (g / heads) % q_len;
    let b = g / (heads * q_len);
    let kvh = h / (heads / kv_heads);
    let dim = |k: usize| lane + k * warp::SIZE as usize;
    let mut qv = [0.0f32; DIMS_PER_LANE];
    let mut acc = [0.0f32; DIMS_PER_LANE];
    let q_scale = scale * math::LOG2_E;
    for (k, qk) in qv.iter_mut().enumerate() {
        if dim(k) < head_dim {
            // SAFETY: `g` is a row of `q`, `dim(k) < head_dim`.
            *qk = unsafe { mem::load(q, g * head_dim + dim(k)) }.to_f32() * q_scale;
        }
    }
    // SAFETY: `b < batch`.
    let last = unsafe { mem::load(lens, b) } as usize - q_len + qi;
    let (mut m, mut s) = (f32::NEG_INFINITY, 0.0f32);
    for j in 0..=last {
        // SAFETY: `j < lens[b]`: the table's entry is a block id (the contract).
        let row = unsafe { row_of(table, b, max_blocks, j, shift, kv_heads, kvh, head_dim) };
        let mut dot = 0.0f32;
        for (k, &qk) in qv.iter().enumerate() {
            if dim(k) < head_dim {
                // SAFETY: a dimension of the key's row.
                dot += qk * unsafe { mem::load(k_pool, row + dim(k)) }.to_f32();
            }
        }
        let score = warp::reduce_sum(dot);
        let m_new = math::max_nan(m, score);
        let alpha = math::fast::exp2(m - m_new);
        let p = math::fast::exp2(score - m_new);
        s = s * alpha + p;
        for (k, a) in acc.iter_mut().enumerate() {
            if dim(k) < head_dim {
                // SAFETY: as for the key.
                let v = unsafe { mem::load(v_pool, row + dim(k)) }.to_f32();
                *a = *a * alpha + p * v;
            }
        }
        m = m_new;
    }
    for (k, &a) in acc.iter().enumerate() {
        if dim(k) < head_dim {
            // SAFETY: `g` is a row of `out`.
            unsafe { mem::store(out, g * head_dim + dim(k), E::from_f32(a / s)) };
        }
    }
    if lane == 0 {
        // SAFETY: `g` is a row of `lse`.
        unsafe { mem::store(lse, g, (m + math::fast::log2(s)) * math::LN_2) };
    }
}
