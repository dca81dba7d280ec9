//! Decode attention, step 2 of 2 ([`decode_attention_combine`](fn@decode_attention_combine)):
//! a row's partials from [`super::split`] merged by their log-sum-exp.

use super::{KvElem, ATTN_BLOCK, DIMS_PER_LANE};
use crate::gpu::{bf16, f16, math, mem, thread, warp};
use crate::kernel;

/// Decode attention, step 2: the output row and its log-sum-exp from the row's `splits`
/// partials.
///
/// Warp `w` of block `b` merges row `r = b * (blockDim.x / 32) + w` (for `r < rows`): lane `l`
/// takes the maximum of the partial maxima `l, l + 32, ...` (`ml[(r * splits + c) * 2]`, base 2)
/// and the warp the row's `M` (5 shuffles; an empty chunk's `-inf` never wins, since chunk 0 holds
/// key 0, seen by every query); then the row's sum `S = sum_c 2^(m_c - M) s_c` the same way;
/// then for each of its dimensions `l, l + 32, ...` (below `head_dim`, at most 8) the lane adds
/// `2^(m_c - M) acc_c[d]` over the chunks and writes `out[r][d] = that / S`, rounded once to
/// `E`; lane 0 writes `lse[r] = ln 2 (M + log2 S)`.
///
/// Global memory: the row's partials, `(head_dim + 2) * 4` bytes per chunk (written by step 1
/// just before, mostly from L2), and the output row.
///
/// Launch: `ceil(rows / (blockDim.x / 32))` blocks of [`ATTN_BLOCK`] threads, no shared memory.
///
/// # Safety
/// `ml` holds `2 * rows * splits` floats and `acc` `head_dim` times as many, all written by step
/// 1 (`splits >= 1`); `out` holds `rows * head_dim` elements, `lse` `rows` floats; `head_dim <=
/// 256`.
// Barriers: none, a warp per row (shuffles only).
#[kernel(instances(bf16, f16), block(ATTN_BLOCK), barriers(0))]
pub unsafe fn decode_attention_combine<E: KvElem>(
    ml: *const f32,
    acc: *const f32,
    out: *mut E,
    lse: *mut f32,
    rows: usize,
    splits: usize,
    head_dim: usize,
) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let r = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if r >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let lane = tid % warp::SIZE as usize;
    let first = r * splits;
    let mut top = f32::NEG_INFINITY;
    let mut c = lane;
    while c < splits {
        // SAFETY: `c < splits`: a partial of row `r`.
        top = math::max_nan(top, unsafe { mem::load(ml, 2 * (first + c)) });
        c += warp::SIZE as usize;
    }
    let big_m = warp::reduce_max(top);
    // The weight of chunk `c`; 0 for an empty chunk (`-inf`).
    // SAFETY (callers): `c < splits`.
    let weight = |c: usize| math::fast::exp2(unsafe { mem::load(ml, 2 * (first + c)) } - big_m);
    let mut sum = 0.0f32;
    let mut c = lane;
    while c < splits {
        // SAFETY: as above.
        sum += weight(c) * unsafe { mem::load(ml, 2 * (first + c) + 1) };
        c += warp::SIZE as usize;
    }
    let big_s = warp::reduce_sum(sum);
    let inv = 1.0 / big_s;
    for k in 0..DIMS_PER_LANE {
        let d = lane + k * warp::SIZE as usize;
        if d < head_dim {
            let mut o = 0.0f32;
            for c in 0..splits {
                // SAFETY: `c < splits`, `d < head_dim`.
                o = math::fma(
                    weight(c),
                    unsafe { mem::load(acc, (first + c) * head_dim + d) },
                    o,
                );
            }
            // SAFETY: `r < rows`, `d < head_dim`.
            unsafe { mem::store(out, r * head_dim + d, E::from_f32(o * inv)) };
        }
    }
    if lane == 0 {
        // SAFETY: `r < rows`.
        unsafe { mem::store(lse, r, (big_m + math::fast::log2(big_s)) * math::LN_2) };
    }
}
