//! Decode attention, step 2 of 2 of the streaming and tensor-core rungs
//! ([`decode_attention_tiles_combine`](fn@decode_attention_tiles_combine)): a row's partials
//! from [`super::tiles`] or [`super::tensor`] (the same layout) merged by their log-sum-exp, a
//! block per row, the chunks' loads issued 8 at a time per warp.

use super::tiles::{TILE_BLOCK, TILE_WARPS, WARP};
use super::KvElem;
use crate::gpu::block::Scratch;
use crate::gpu::{bf16, dependent, f16, math, mem, shared, thread, vector};
use crate::kernel;

/// Warps' shares of a combined row: `TILE_WARPS` rows of up to 256 dims.
const COMBINE_FLOATS: usize = TILE_WARPS * super::MAX_HEAD_DIM;

/// Chunks a warp of the combine loads at once.
const COMBINE_UNROLL: usize = 8;

/// Decode attention, step 2 of 2 of the streaming rung ([`super::tiles`]) and of the tensor-core
/// rung ([`super::tensor`]): the output row and its log-sum-exp from the row's `splits` partials,
/// a block per row.
///
/// Block `r` (a row of `q`): the block's maximum `M` of the partial maxima (`ml[(r * splits +
/// c) * 2]`, base 2; thread `tid` reads chunks `tid, tid + 128, ..`). Warp `w` then takes chunks
/// `w, w + 4, ..`, 8 at a time (their loads issued together): lane `l` adds `2^(m_c - M)` times
/// dims `4 l ..+ 4` (and `4 (l + 32) ..+ 4` at head dim 256) of chunk `c`'s output (16-byte
/// loads) and `2^(m_c - M) s_c` to its sum (an empty chunk, `m_c = -inf`, weighs 0). The warps'
/// shares meet in shared memory; threads `tid < head_dim / 4` write `out[r][4 tid ..+ 4]` =
/// output / sum, rounded once to `E`, and thread 0 `lse[r] = ln 2 (M + log2 S)`.
///
/// Global memory: the row's partials, `(head_dim + 2) * 4` bytes per chunk (written by step 1
/// just before, mostly from L2), and the output row.
///
/// Launch: `rows` blocks of [`TILE_BLOCK`] threads, plain or dependent on step 1 (a programmatic
/// dependent launch: every thread first waits, [`dependent::wait`], for step 1 to complete).
///
/// # Safety
/// `ml` holds `2 * rows * splits` floats and `acc` `head_dim` times as many, all written by step
/// 1 (`splits >= 1`, chunk 0 of every row holding a key it sees); `out` holds `rows * head_dim`
/// elements, `lse` `rows` floats; `head_dim` is a multiple of 4 up to 256; `acc` and `out`
/// 16-byte aligned.
// Barriers: two in the block maximum, one after the warps' shares are written.
#[kernel(
    instances(bf16, f16),
    block(TILE_BLOCK),
    barriers(3),
    shared(
        scratch: Scratch<f32, { TILE_BLOCK as usize }>,
        shares: shared::Array<f32, COMBINE_FLOATS>,
        sums: shared::Array<f32, TILE_WARPS>
    )
)]
pub unsafe fn decode_attention_tiles_combine<E: KvElem>(
    ml: *const f32,
    acc: *const f32,
    out: *mut E,
    lse: *mut f32,
    splits: usize,
    head_dim: usize,
) {
    // Launched dependent on the first step (which may let it start early): nothing of the
    // partials is read before the first step has completed.
    dependent::wait();
    let tid = thread::thread_idx_x() as usize;
    let (w, lane) = (tid / WARP, tid % WARP);
    let r = thread::block_idx_x() as usize;
    let first = r * splits;
    let mut top = f32::NEG_INFINITY;
    let mut c = tid;
    while c < splits {
        // SAFETY: `c < splits`: a partial of row `r`.
        top = math::max_nan(top, unsafe { mem::load(ml, 2 * (first + c)) });
        c += TILE_BLOCK as usize;
    }
    // SAFETY: every thread of the block is here; the scratch is this call's.
    let big_m = unsafe { scratch.reduce(top, math::max_nan) };
    let quads = head_dim / 4;
    let mut o = [[0.0f32; 4]; 2];
    let mut total = 0.0f32;
    let mut c0 = w;
    while c0 < splits {
        let mut weight = [0.0f32; COMBINE_UNROLL];
        let mut x = [[[0.0f32; 4]; 2]; COMBINE_UNROLL];
        unroll_8!(8, |k| {
            let c = c0 + k * TILE_WARPS;
            if c < splits {
                // SAFETY: `c < splits`; `(max, sum)` at an even index (8-byte aligned).
                let pair: [f32; 2] = unsafe { vector::load(ml, 2 * (first + c)) };
                weight[k] = math::fast::exp2(pair[0] - big_m);
                total = math::fma(weight[k], pair[1], total);
                unroll_8!(2, |j| {
                    let qd = lane + j * WARP;
                    if qd < quads {
                        // SAFETY: dims `4 qd ..+ 4 <= head_dim` of partial `first + c`,
                        // 16-byte aligned.
                        x[k][j] = unsafe { vector::load(acc, (first + c) * head_dim + 4 * qd) };
                    }
                });
            }
        });
        unroll_8!(8, |k| {
            unroll_8!(2, |j| {
                unroll_8!(4, |e| {
                    o[j][e] = math::fma(weight[k], x[k][j][e], o[j][e]);
                });
            });
        });
        c0 += COMBINE_UNROLL * TILE_WARPS;
    }
    // SAFETY (the shared writes): this warp's own row of `shares` (`w * 256 + 4 qd ..+ 4`, below
    // 256 dims) and slot of `sums`, read after the barrier below.
    unroll_8!(2, |j| {
        let qd = lane + j * WARP;
        if qd < quads {
            unsafe { vector::store(shares.ptr(), w * super::MAX_HEAD_DIM + 4 * qd, o[j]) };
        }
    });
    if lane == 0 {
        unsafe { sums.store(w, total) };
    }
    thread::sync_threads();
    if tid < quads {
        let mut y = [0.0f32; 4];
        let mut big_s = 0.0f32;
        unroll_8!(4, |ww| {
            // SAFETY: written before the barrier above.
            let part: [f32; 4] = unsafe { vector::load(shares.ptr(), ww * super::MAX_HEAD_DIM + 4 * tid) };
            big_s += unsafe { sums.load(ww) };
            unroll_8!(4, |e| {
                y[e] += part[e];
            });
        });
        let inv = 1.0 / big_s;
        let mut v = [E::ZERO; 4];
        unroll_8!(4, |e| {
            v[e] = E::from_f32(y[e] * inv);
        });
        // SAFETY: row `r`, dims `4 tid ..+ 4 <= head_dim`, 8-byte aligned.
        unsafe { vector::store(out, r * head_dim + 4 * tid, v) };
        if tid == 0 {
            // SAFETY: `r < rows`.
            unsafe { mem::store(lse, r, (big_m + math::fast::log2(big_s)) * math::LN_2) };
        }
    }
}
