//! The per-row loss from the chunks' statistics and the gathered logit
//! ([`cross_entropy_finish`](fn@cross_entropy_finish)), and the mean of the losses
//! ([`cross_entropy_mean`](fn@cross_entropy_mean)).

use crate::gpu::{block, math, mem, shared, thread, warp};
use crate::kernel;
use crate::softmax::stats::{warp_stats, KahanSum, Stats};

/// Cross-entropy, step 2: the loss of each row from its chunks' statistics.
///
/// Warp `w` of block `b` handles row `r = b * (blockDim.x / 32) + w`: lane `l` merges the row's
/// partial statistics `l, l + 32, ...` (`partials[r * chunks ..]`, written by
/// `softmax_split_stats` at `t = 1`), the warp merges them (10 shuffles) into the row's
/// `(M, S)`, and lane 0 reads the label, gathers `x[r][label]` and writes
/// `loss[r] = (M - x[r][label]) + ln S`. A label outside `0..cols` (the host refuses them; this
/// is the kernel's own guard) reads nothing and writes NaN.
///
/// Global memory: `8 * chunks` bytes of partials (from L2), 8 bytes of label, 4 of logit and 4
/// of loss per row: nothing next to step 1's read of the row.
///
/// Launch: `ceil(rows / (blockDim.x / 32))` blocks of
/// [`FINISH_BLOCK`](super::FINISH_BLOCK) threads, no shared memory.
///
/// # Safety
/// `x` points to `rows * cols` floats, `labels` to `rows` labels, `partials` to the
/// `2 * rows * chunks` floats of step 1, `loss` to `rows` floats of device memory; the launch
/// shape is as above.
// Barriers: none, a warp per row (shuffles only).
#[kernel(block(crate::cross_entropy::FINISH_BLOCK), barriers(0))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn cross_entropy_finish(
    x: *const f32,
    labels: *const i64,
    partials: *const f32,
    loss: *mut f32,
    rows: usize,
    cols: usize,
    chunks: usize,
) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let row = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if row >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let lane = tid % warp::SIZE as usize;
    let partials = partials.cast::<Stats>().wrapping_add(row * chunks);
    let mut acc = Stats::empty(1.0);
    let mut i = lane;
    while i < chunks {
        // SAFETY: `i < chunks` indexes the row's partials.
        acc = acc.merge(unsafe { mem::load(partials, i) }, 1.0);
        i += warp::SIZE as usize;
    }
    let total = warp_stats(acc, 1.0);
    if lane == 0 {
        // SAFETY: `row < rows` indexes the labels and the losses.
        let label = unsafe { mem::load(labels, row) };
        let out = if label >= 0 && (label as u64) < cols as u64 {
            // SAFETY: `0 <= label < cols`: inside the row.
            let picked = unsafe { mem::load(x, row * cols + label as usize) };
            (total.m - picked) + math::ln(total.s)
        } else {
            f32::NAN
        };
        // SAFETY: as for the label.
        unsafe { mem::store(loss, row, out) };
    }
}

/// Threads of the one block of [`cross_entropy_mean`](fn@cross_entropy_mean); a power of two,
/// as the tree reduction needs.
pub const MEAN_BLOCK: u32 = 1024;

/// Dynamic shared memory of [`cross_entropy_mean`](fn@cross_entropy_mean): one float per thread.
pub const MEAN_SHARED_BYTES: u32 = MEAN_BLOCK * core::mem::size_of::<f32>() as u32;

/// The mean of `rows` losses, by one block: thread `tid` sums losses `tid, tid + blockDim.x, ...`
/// (compensated, [`KahanSum`]), the block reduces the sums in shared memory
/// ([`block::reduce_sum`]) and thread 0 writes `sum / rows` to `out[0]`. One block, so the
/// result is the same bits on every run.
///
/// Global memory: reads `4 * rows` bytes, writes 4.
///
/// Launch: 1 block of [`MEAN_BLOCK`] threads, [`MEAN_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `loss` points to `rows >= 1` floats and `out` to 1 float of device memory; the launch shape
/// is as above.
// Barriers: three, one `block::reduce_sum`.
#[kernel(block(MEAN_BLOCK), barriers(3))]
pub unsafe fn cross_entropy_mean(loss: *const f32, out: *mut f32, rows: usize) {
    let tid = thread::thread_idx_x() as usize;
    let stride = thread::block_dim_x() as usize;
    let mut sum = KahanSum::ZERO;
    let mut i = tid;
    while i < rows {
        // SAFETY: `i < rows`.
        sum.add(unsafe { mem::load(loss, i) });
        i += stride;
    }
    // SAFETY: every thread of the block calls the reduction; the shared memory holds
    // `blockDim.x` floats.
    let total = unsafe { block::reduce_sum(shared::dynamic::<f32>(), sum.value()) };
    if tid == 0 {
        // SAFETY: `out` holds one float.
        unsafe { mem::store(out, 0, total / rows as f32) };
    }
}
