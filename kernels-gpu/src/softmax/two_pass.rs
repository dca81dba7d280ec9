//! Rows too long to keep on chip when there are few of them: several blocks per row, in two
//! launches, the chunks' statistics ([`softmax_split_stats`](fn@softmax_split_stats)) then the
//! merge and the write ([`softmax_split_finish`](fn@softmax_split_finish): `softmax_split_write`,
//! or its evict-first twin `softmax_split_write_streaming`).

use super::row::RowSplit;
use super::stats::{block_stats, exponent, Stats};
use super::stream::{range_stats, range_write};
use super::STREAM_BLOCK;
use crate::gpu::{math, mem, shared, thread};
use crate::kernel;

/// The vectors `start..end` of a row that chunk `chunk` of `chunk_vecs` vectors covers.
#[inline(always)]
pub(crate) fn chunk_range(split: RowSplit, chunk: usize, chunk_vecs: usize) -> (usize, usize) {
    let start = (chunk * chunk_vecs).min(split.vecs);
    (start, (start + chunk_vecs).min(split.vecs))
}

/// Split-row softmax, step 1 of 2: the statistics of one chunk of a row.
///
/// Block `b` handles chunk `b % chunks` of row `b / chunks`, the vectors
/// `chunk * chunk_vecs .. (chunk + 1) * chunk_vecs` of the row, streamed as in
/// `softmax_stream`'s first pass (chunk 0 also takes the head and tail scalars); thread 0 writes
/// the block's merged [`Stats`] to `partials[b]` (two floats).
///
/// Global memory: reads each element once (4 bytes), writes 8 bytes per block.
///
/// Launch: `rows * chunks` blocks of `STREAM_BLOCK` threads, `STATS_SHARED_BYTES` of dynamic
/// shared memory, with `chunks * chunk_vecs >= cols / 4`.
///
/// # Safety
/// `x` points to `rows * cols` floats, `partials` to `2 * rows * chunks` floats of device memory;
/// the launch shape is as above.
// Barriers: one, in `block_stats`.
#[kernel(block(STREAM_BLOCK), barriers(1))]
pub unsafe fn softmax_split_stats(
    x: *const f32,
    partials: *mut f32,
    rows: usize,
    cols: usize,
    chunks: usize,
    chunk_vecs: usize,
    t: f32,
) {
    let b = thread::block_idx_x() as usize;
    let (row, chunk) = (b / chunks, b % chunks);
    if row >= rows {
        return; // the whole block leaves together
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let x_row = x.wrapping_add(row * cols);
    let split = RowSplit::of(x_row, cols);
    let (start, end) = chunk_range(split, chunk, chunk_vecs);
    // SAFETY: indices stay inside the row; `b < rows * chunks` indexes `partials`; every thread
    // reaches the reduction.
    unsafe {
        let mut acc = range_stats(x_row, split, start, end, tid, threads, t);
        if chunk == 0 {
            if let Some(i) = split.scalar(tid) {
                acc = acc.merge(Stats::one(mem::load(x_row, i)), t);
            }
        }
        let total = block_stats(shared::dynamic::<Stats>(), acc, t);
        if tid == 0 {
            mem::store(partials.cast::<Stats>(), b, total);
        }
    }
}

/// Split-row softmax, step 2 of 2: merge a row's chunk statistics, write one chunk; with
/// `STREAMING` its loads of `x` and stores of `y` carry the evict-first hint.
///
/// Block `b` handles chunk `c = l % chunks` of row `l / chunks` with `l = gridDim.x - 1 - b`:
/// the blocks run in the reverse order of [`softmax_split_stats`](fn@softmax_split_stats), so the first chunks read are
/// the last ones step 1 read, still in L2. Every thread merges the row's partials
/// `tid, tid + blockDim.x, ...`, the block merges them (`block_stats`), and the chunk's
/// vectors are read again and written as in `softmax_stream`'s second pass (chunk 0 also
/// writes the head and tail scalars). Every block of a row merges the same partials in the same
/// order, so all use the same `(M, S)`.
///
/// Global memory: reads each element once and writes it once (8 bytes per element), plus
/// `8 * chunks` bytes of partials per block from L2. With step 1, 12 bytes per element; the
/// second read of the chunks still in L2 does not reach DRAM, so DRAM sees between 8 and 12.
///
/// Launch: as [`softmax_split_stats`](fn@softmax_split_stats), with the same `chunks` and `chunk_vecs`.
///
/// Instances, one PTX entry each:
/// * `softmax_split_write` (plain loads and stores);
/// * `softmax_split_write_streaming` (`STREAMING`: `ld.global.cs`, `st.global.cs` on `x`, their
///   last use, and `y`): as its blocks walk the chunks in the reverse order of step 1, the chunks
///   step 1 left in L2 are read first, and neither those lines once read nor the output lines
///   displace the chunks still waiting there; the same values, the L2 hits of the second read
///   are what the hint is for.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; `partials` holds step 1's `2 * rows * chunks` floats; the launch
/// shape is as above.
// Barriers: one, in `block_stats`.
#[kernel(
    instances(softmax_split_write = false, softmax_split_write_streaming = true),
    block(STREAM_BLOCK),
    barriers(1)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn softmax_split_finish<const STREAMING: bool>(
    x: *const f32,
    partials: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    chunks: usize,
    chunk_vecs: usize,
    t: f32,
) {
    let b = (thread::grid_dim_x() - 1 - thread::block_idx_x()) as usize;
    let (row, chunk) = (b / chunks, b % chunks);
    if row >= rows {
        return; // the whole block leaves together
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    let split = RowSplit::of(x_row, cols);
    let (start, end) = chunk_range(split, chunk, chunk_vecs);
    let partials = partials.cast::<Stats>().wrapping_add(row * chunks);
    // SAFETY: `i < chunks` indexes the row's partials; indices stay inside the row; every thread
    // reaches the reduction.
    unsafe {
        let mut acc = Stats::empty(t);
        let mut i = tid;
        while i < chunks {
            acc = acc.merge(mem::load(partials, i), t);
            i += threads;
        }
        let total = block_stats(shared::dynamic::<Stats>(), acc, t);
        range_write::<STREAMING>(x_row, y_row, split, start, end, tid, threads, total, t);
        if chunk == 0 {
            if let Some(i) = split.scalar(tid) {
                let e = math::exp(exponent(mem::load(x_row, i), total.m, t));
                mem::store(y_row, i, e / total.s);
            }
        }
    }
}
