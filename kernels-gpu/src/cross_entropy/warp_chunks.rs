//! Cross-entropy's statistics by warps ([`cross_entropy_warp`](fn@cross_entropy_warp)): each warp
//! streams one chunk of one row and merges its lanes with shuffles only, no shared memory and no
//! barrier, so that no warp waits for another; where a warp takes a whole row it also writes
//! the row's loss, in one launch.

use crate::gpu::{math, mem, thread, warp};
use crate::kernel;
use crate::softmax::row::RowSplit;
use crate::softmax::stats::{warp_stats, Stats};
use crate::softmax::stream::range_stats;
use crate::softmax::two_pass::chunk_range;

/// Threads per block of [`cross_entropy_warp`](fn@cross_entropy_warp): 8 warps, each its own
/// chunk.
pub const WARP_CHUNK_BLOCK: u32 = 256;

/// Chunks (warps) per block of [`cross_entropy_warp`](fn@cross_entropy_warp).
pub const WARP_CHUNK_WARPS: u32 = WARP_CHUNK_BLOCK / warp::SIZE;

/// Cross-entropy, statistics of one chunk of a row per warp; with one chunk per row, the loss.
///
/// Warp `g = blockIdx.x * (blockDim.x / 32) + warp` of the grid handles chunk `g % chunks` of
/// row `g / chunks`: the vectors `chunk * chunk_vecs .. (chunk + 1) * chunk_vecs` of the row
/// (as softmax's split rows; chunk 0 also takes the head and tail scalars of a row that is not
/// 16-byte aligned). Lane `l` streams vectors `l, l + 32, ...` of the chunk, four 16-byte loads
/// in flight at a time, into online `(max, sum)` statistics at `t = 1` (softmax's
/// `range_stats`: one `ex2.approx` per element, plus one per group of four vectors to rescale
/// the running sum), and the warp merges them (10 shuffles). Then lane 0:
/// * `chunks == 1`: reads the label, gathers `x[r][label]` and writes
///   `loss[r] = (M - x[r][label]) + ln S` (NaN for a label outside `0..cols`, which the host
///   refuses; the gather never leaves the row);
/// * `chunks > 1`: writes the chunk's [`Stats`] to `partials[g]`, for
///   [`cross_entropy_finish`](fn@super::cross_entropy_finish).
///
/// Global memory: each logit read once, 4 bytes per element (the minimum); per row 8 bytes of
/// label, 4 of gathered logit and 4 of loss, or 8 bytes of partials per chunk.
///
/// Launch: `ceil(rows * chunks / (blockDim.x / 32))` blocks of a multiple of 32 threads
/// ([`WARP_CHUNK_BLOCK`]), no shared memory, with `chunks * chunk_vecs >= cols / 4`.
///
/// # Safety
/// `x` points to `rows * cols >= 1` floats, `labels` to `rows` labels, `loss` to `rows` floats
/// and, when `chunks > 1`, `partials` to `2 * rows * chunks` floats of device memory; the launch
/// shape is as above.
// Barriers: none, a warp per chunk (shuffles only).
#[kernel(block(WARP_CHUNK_BLOCK), barriers(0))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn cross_entropy_warp(
    x: *const f32,
    labels: *const i64,
    partials: *mut f32,
    loss: *mut f32,
    rows: usize,
    cols: usize,
    chunks: usize,
    chunk_vecs: usize,
) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let g = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    let (row, chunk) = (g / chunks, g % chunks);
    if row >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let lane = tid % warp::SIZE as usize;
    let x_row = x.wrapping_add(row * cols);
    let split = RowSplit::of(x_row, cols);
    let (start, end) = chunk_range(split, chunk, chunk_vecs);
    // SAFETY: indices stay inside the row (`end <= vecs`, scalars from the split); all 32 lanes
    // reach the shuffles; `row < rows` and `g < rows * chunks` index the labels, losses and
    // partials.
    unsafe {
        let mut acc = range_stats(x_row, split, start, end, lane, warp::SIZE as usize, 1.0);
        if chunk == 0 {
            if let Some(i) = split.scalar(lane) {
                acc = acc.merge(Stats::one(mem::load(x_row, i)), 1.0);
            }
        }
        let total = warp_stats(acc, 1.0);
        if lane == 0 {
            if chunks == 1 {
                let label = mem::load(labels, row);
                let out = if label >= 0 && (label as u64) < cols as u64 {
                    let picked = mem::load(x_row, label as usize);
                    (total.m - picked) + math::ln(total.s)
                } else {
                    f32::NAN
                };
                mem::store(loss, row, out);
            } else {
                mem::store(partials.cast::<Stats>(), g, total);
            }
        }
    }
}
