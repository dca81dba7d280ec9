//! Decode attention, the fast rung ([`decode_attention_split`](fn@decode_attention_split)):
//! FlashDecoding's split of the context into chunks, a warp per chunk and group of query rows,
//! each writing its rows' partial `(max, sum, output)`; [`super::combine`] merges them.

use super::{row_of, KvElem, ATTN_BLOCK, ROWS_PER_WARP, VEC};
use crate::gpu::{bf16, f16, math, mem, thread, vector, warp};
use crate::kernel;

// The row loops below are unrolled by hand for 4 rows.
const _: () = assert!(ROWS_PER_WARP == 4);

/// Where this lane's 8 dimensions of key `j`'s K and V rows start in the pools (the block table
/// read once), or 0 past the chunk.
///
/// # Safety
/// As the kernel's: when `valid`, `j` is below the sequence's length.
#[inline(always)]
unsafe fn key_at(
    table: *const i32,
    (b, max_blocks, shift): (usize, usize, u32),
    (kv_heads, kvh, head_dim, part): (usize, usize, usize, usize),
    j: usize,
    valid: bool,
) -> usize {
    if !valid {
        return 0;
    }
    // SAFETY: the caller's contract.
    unsafe { row_of(table, b, max_blocks, j, shift, kv_heads, kvh, head_dim) + part * VEC }
}

/// One key's K and V vectors of one lane (8 dimensions each) at `at` ([`key_at`]), zeros past
/// the chunk.
///
/// # Safety
/// When `valid`, `at` is [`key_at`] of a key below the sequence's length.
#[inline(always)]
unsafe fn load_kv<E: KvElem>(
    k_pool: *const E,
    v_pool: *const E,
    at: usize,
    valid: bool,
) -> ([E; VEC], [E; VEC]) {
    if !valid {
        return ([E::ZERO; VEC], [E::ZERO; VEC]);
    }
    // SAFETY: the caller's contract; 8 elements inside a row, 16-byte aligned.
    unsafe { (vector::load(k_pool, at), vector::load(v_pool, at)) }
}

/// Decode attention, step 1 of 2: one chunk of the context for up to [`ROWS_PER_WARP`] query
/// rows per warp, `D` = `head_dim` (64, 128 or 256).
///
/// The query rows of kv head `kvh` of sequence `b` are its `G = heads / kv_heads` q heads times
/// the `q_len` queries, row `r = hg * q_len + qi` for q head `kvh * G + hg`. Warp `u =
/// blockIdx.x * (blockDim.x / 32) + warp` of block row `blockIdx.y = b * kv_heads + kvh` takes
/// rows `4 (u % groups) ..` (`groups = ceil(G q_len / 4)`) and chunk `c = u / groups`: keys
/// `c * chunk .. min((c + 1) * chunk, lens[b])`. The warp's lanes form `32 / (D / 8)` slots of
/// `D / 8` lanes, each slot one key per step: lane `(slot, part)` loads dimensions `8 part ..
/// 8 part + 8` of its key's K and V rows (one 16-byte load each, the next step's loads issued
/// before this step's arithmetic) and keeps the same dimensions of each row's query (scaled by
/// `scale * log2 e`) and unnormalised output in registers. Per step and row: the slot's dot
/// product (`log2(D / 8)` shuffles), the maximum over the slots (`log2(32 / (D / 8))`), and the
/// online update (two `ex2.approx`); a key past a row's causal limit `lens[b] - q_len + qi`
/// scores `-inf`. At the end the slots' sums and outputs are added (shuffles) and slot 0 writes
/// each row's partial: `ml[(row * splits + c) * 2 ..]` = `(max, sum)` in base 2 and
/// `acc[(row * splits + c) * D ..]` the output not yet divided by the sum, where `row = (b *
/// q_len + qi) * heads + h` is the query's row of `q`.
///
/// Global memory: each K and V row of the chunk read once per group of 4 rows (once per kv head
/// when `G * q_len <= 4`; the groups of one chunk sit in the same or neighbouring blocks, so the
/// later reads tend to hit L1 or L2), in 16-byte accesses; `(D + 2) * 4` bytes of partial per
/// row and chunk.
///
/// Launch: grid `(ceil(groups * splits / (blockDim.x / 32)), batch * kv_heads)`, blocks of
/// [`ATTN_BLOCK`] threads, no shared memory.
///
/// # Safety
/// `q` holds `batch * q_len * heads * D` elements, `lens` `batch`, `table` `batch * max_blocks`,
/// `ml` `2 * batch * q_len * heads * splits` floats and `acc` `D` times as many; `heads %
/// kv_heads == 0`; `splits * chunk >= lens[b]`, and for every sequence `q_len <= lens[b] <=
/// max_blocks << shift` and the table's entries for positions below `lens[b]` are block ids of
/// the pools; every buffer 16-byte aligned.
// Barriers: none, a warp per unit of work (shuffles only).
#[kernel(
    instances(
        decode_attention_split_bf16_64 = (bf16, 64),
        decode_attention_split_bf16_128 = (bf16, 128),
        decode_attention_split_bf16_256 = (bf16, 256),
        decode_attention_split_f16_64 = (f16, 64),
        decode_attention_split_f16_128 = (f16, 128),
        decode_attention_split_f16_256 = (f16, 256),
    ),
    block(ATTN_BLOCK),
    barriers(0)
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn decode_attention_split<E: KvElem, const D: usize>(
    q: *const E,
    k_pool: *const E,
    v_pool: *const E,
    table: *const i32,
    lens: *const i32,
    ml: *mut f32,
    acc: *mut f32,
    q_len: usize,
    heads: usize,
    kv_heads: usize,
    shift: u32,
    max_blocks: usize,
    splits: usize,
    chunk: usize,
    scale: f32,
) {
    // Lanes per key and keys (slots) per step.
    let lanes_per_key: usize = D / VEC;
    let slots: usize = warp::SIZE as usize / lanes_per_key;
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let u = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    let group_heads = heads / kv_heads;
    let rows = group_heads * q_len;
    let groups = rows.div_ceil(ROWS_PER_WARP);
    if u >= groups * splits {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let (group, c) = (u % groups, u / groups);
    let bk = thread::block_idx_y() as usize;
    let (b, kvh) = (bk / kv_heads, bk % kv_heads);
    let lane = tid % warp::SIZE as usize;
    let (slot, part) = (lane / lanes_per_key, lane % lanes_per_key);
    // SAFETY: `b < batch`.
    let len = unsafe { mem::load(lens, b) } as usize;
    let start = c * chunk;
    let end = (start + chunk).min(len);

    // Each row's query row (of `q`, `out`), causal limit, and this lane's query dimensions. The
    // loops over rows and dimensions are unrolled by hand (`unroll_8!`) so that the arrays stay
    // in registers.
    let q_scale = scale * math::LOG2_E;
    let mut row_of_q = [usize::MAX; ROWS_PER_WARP];
    let mut limit = [0usize; ROWS_PER_WARP];
    let mut qv = [[0.0f32; VEC]; ROWS_PER_WARP];
    unroll_8!(4, |i| {
        let r = group * ROWS_PER_WARP + i;
        if r < rows {
            let (hg, qi) = (r / q_len, r % q_len);
            row_of_q[i] = (b * q_len + qi) * heads + kvh * group_heads + hg;
            limit[i] = len - q_len + qi;
            // SAFETY: a row of `q`, dimensions `8 part .. 8 part + 8 <= D`, 16-byte aligned.
            let x: [E; VEC] = unsafe { vector::load(q, row_of_q[i] * D + part * VEC) };
            unroll_8!(8, |e| {
                qv[i][e] = x[e].to_f32() * q_scale;
            });
        }
    });

    let mut m = [f32::NEG_INFINITY; ROWS_PER_WARP];
    let mut s = [0.0f32; ROWS_PER_WARP];
    let mut o = [[0.0f32; VEC]; ROWS_PER_WARP];
    let seq = (b, max_blocks, shift);
    let head = (kv_heads, kvh, D, part);
    let mut j0 = start;
    // Two steps in flight: the next step's K and V rows on their way while this step computes,
    // and the block-table entry of the step after it, so that no load waits for the table.
    // SAFETY (the table reads and loads): keys below `end <= lens[b]`.
    let mut next = unsafe {
        let first = key_at(table, seq, head, j0 + slot, j0 + slot < end);
        load_kv(k_pool, v_pool, first, j0 + slot < end)
    };
    let j1 = j0 + slot + slots;
    // SAFETY: as above.
    let mut at_next = unsafe { key_at(table, seq, head, j1, j1 < end) };
    while j0 < end {
        let j = j0 + slot;
        let (kx, vx) = next;
        let j_next = j + slots;
        let j_after = j_next + slots;
        // SAFETY: as above.
        unsafe {
            next = load_kv(k_pool, v_pool, at_next, j_next < end);
            at_next = key_at(table, seq, head, j_after, j_after < end);
        }
        let (mut k, mut v) = ([0.0f32; VEC], [0.0f32; VEC]);
        unroll_8!(8, |e| {
            k[e] = kx[e].to_f32();
            v[e] = vx[e].to_f32();
        });
        unroll_8!(4, |i| {
            // Warp-uniform: the same rows in every lane.
            if row_of_q[i] != usize::MAX {
                let mut dot = 0.0f32;
                unroll_8!(8, |e| {
                    dot = math::fma(qv[i][e], k[e], dot);
                });
                let mut mask = lanes_per_key / 2;
                while mask > 0 {
                    dot += warp::shfl_xor(dot, mask as u32);
                    mask /= 2;
                }
                let score = if j < end && j <= limit[i] {
                    dot
                } else {
                    f32::NEG_INFINITY
                };
                let mut top = score;
                let mut mask = lanes_per_key;
                while mask < warp::SIZE as usize {
                    top = math::max_nan(top, warp::shfl_xor(top, mask as u32));
                    mask *= 2;
                }
                // Branch-free, so that the four rows' shuffle chains interleave: while every
                // key so far is masked for the row (`m_new` still -inf), the exponents are taken
                // against 0 and give `alpha = p = 0`, leaving `s` and `o` at 0.
                let m_new = math::max_nan(m[i], top);
                let m_ref = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
                let alpha = math::fast::exp2(m[i] - m_ref);
                let p = math::fast::exp2(score - m_ref);
                s[i] = s[i] * alpha + p;
                unroll_8!(8, |e| {
                    o[i][e] = math::fma(p, v[e], o[i][e] * alpha);
                });
                m[i] = m_new;
            }
        });
        j0 += slots;
    }

    // The slots' sums and outputs added; slot 0 writes the partials.
    unroll_8!(4, |i| {
        if row_of_q[i] != usize::MAX {
            let mut mask = lanes_per_key;
            while mask < warp::SIZE as usize {
                s[i] += warp::shfl_xor(s[i], mask as u32);
                unroll_8!(8, |e| {
                    o[i][e] += warp::shfl_xor(o[i][e], mask as u32);
                });
                mask *= 2;
            }
            if slot == 0 {
                let p = row_of_q[i] * splits + c;
                // SAFETY: partial `p` of `ml` and `acc`; dimensions `8 part .. 8 part + 8 <= D`.
                unsafe {
                    vector::store(acc, p * D + part * VEC, o[i]);
                    if part == 0 {
                        mem::store(ml, 2 * p, m[i]);
                        mem::store(ml, 2 * p + 1, s[i]);
                    }
                }
            }
        }
    });
}
