//! Rows too long to keep on chip, read twice by one block per row ([`softmax_stream`](fn@softmax_stream)): the
//! streamed statistics of a range of a row's vectors (`range_stats`) and the streamed write
//! (`range_write`), which the split-row kernels of [`two_pass`](super::two_pass) share.

use super::row::{map4, RowSplit};
use super::stats::{block_stats, exponent, KahanSum, Stats};
use super::STREAM_BLOCK;
use crate::gpu::vector::{self, F4};
use crate::gpu::{math, mem, shared, thread};
use crate::kernel;

/// Vectors each thread of the streaming kernels loads before it uses any: 64 bytes per thread,
/// 32 KiB per 512-thread block in flight, enough with two or more blocks per multiprocessor to
/// cover the DRAM latency (Little's law: about 32 KB per SM on an H200).
pub const STREAM_UNROLL: usize = 4;

/// The statistics of the vectors `start..end` of a row that thread `tid` of `threads` handles
/// (`start + tid + i * threads`), streamed from memory [`STREAM_UNROLL`] vectors at a time:
/// all of a group's loads are issued before any is used, and the running sum is rescaled once
/// per group, to the larger of its reference and the group's.
///
/// # Safety
/// `x_row` is a row that splits as `split`, and `end <= split.vecs`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn range_stats(
    x_row: *const f32,
    split: RowSplit,
    start: usize,
    end: usize,
    tid: usize,
    threads: usize,
    t: f32,
) -> Stats {
    let sign = if t >= 0.0 { 1.0f32 } else { -1.0 };
    let mut acc = Stats::empty(t);
    // Compensated: one block streams a whole row in `softmax_stream`, thousands of groups per
    // thread for a row of 2^24.
    let mut sum = KahanSum::ZERO;
    let mut first = start + tid;
    while first < end {
        let mut v = [F4::ZERO; STREAM_UNROLL];
        for (k, slot) in v.iter_mut().enumerate() {
            let j = first + k * threads;
            if j < end {
                // SAFETY: vector `j < vecs` lies inside the row and is 16-byte aligned.
                *slot = unsafe { vector::load4(x_row, split.vector(j)) };
            }
        }
        let mut key = sign * acc.m;
        for (k, vk) in v.iter().enumerate() {
            if first + k * threads < end {
                for c in 0..4 {
                    key = math::max_nan(key, sign * vk.0[c]);
                }
            }
        }
        let m = sign * key;
        sum.scale(math::exp(exponent(acc.m, m, t)));
        let mut group = 0.0f32;
        for (k, vk) in v.iter().enumerate() {
            if first + k * threads < end {
                let e = map4(*vk, |x| math::exp(exponent(x, m, t)));
                group += (e.0[0] + e.0[1]) + (e.0[2] + e.0[3]);
            }
        }
        sum.add(group);
        acc = Stats { m, s: sum.value() };
        first += STREAM_UNROLL * threads;
    }
    acc
}

/// Writes `exp(exponent(x, row.m, t)) / row.s` for the vectors `start..end` of a row that thread
/// `tid` of `threads` handles, reading them again [`STREAM_UNROLL`] at a time. `STREAMING`: the
/// loads and stores carry the evict-first hint ([`vector::load4_streaming`],
/// [`vector::store4_streaming`]), for a last read of `x` and an output no one reads soon, so
/// that they displace what L2 still holds for later blocks as little as possible.
///
/// # Safety
/// `x_row` and `y_row` are rows of global memory that split as `split`, and `end <= split.vecs`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn range_write<const STREAMING: bool>(
    x_row: *const f32,
    y_row: *mut f32,
    split: RowSplit,
    start: usize,
    end: usize,
    tid: usize,
    threads: usize,
    row: Stats,
    t: f32,
) {
    let inv = 1.0 / row.s;
    let mut first = start + tid;
    while first < end {
        let mut v = [F4::ZERO; STREAM_UNROLL];
        for (k, slot) in v.iter_mut().enumerate() {
            let j = first + k * threads;
            if j < end {
                // SAFETY: vector `j < vecs` lies inside the row (global memory) and is 16-byte
                // aligned.
                *slot = unsafe {
                    if STREAMING {
                        vector::load4_streaming(x_row, split.vector(j))
                    } else {
                        vector::load4(x_row, split.vector(j))
                    }
                };
            }
        }
        for (k, vk) in v.iter().enumerate() {
            let j = first + k * threads;
            if j < end {
                let out = map4(*vk, |x| math::exp(exponent(x, row.m, t)) * inv);
                // SAFETY: as for the loads; `y_row` splits like `x_row`.
                unsafe {
                    if STREAMING {
                        vector::store4_streaming(y_row, split.vector(j), out)
                    } else {
                        vector::store4(y_row, split.vector(j), out)
                    }
                };
            }
        }
        first += STREAM_UNROLL * threads;
    }
}

/// Block-per-row softmax for rows too long to keep on chip: two reads of the row.
///
/// Block `r` handles row `r`. Pass 1: thread `tid` streams vectors `tid, tid + blockDim.x, ...`
/// [`STREAM_UNROLL`] at a time, keeping running statistics (`range_stats`); threads 0..7 add
/// the head and tail scalars; the block merges the statistics (`block_stats`). Pass 2: the
/// same vectors are read again and `exp(exponent(x, M, t)) / S` written.
///
/// Global memory: 12 bytes per element (read twice, write once). The second read of a row comes
/// right after the first, so with one row of up to a few hundred KiB per block in flight the whole
/// grid's rows fit the H200's 50 MB L2 and DRAM sees close to 8 bytes per element.
///
/// Launch: `rows` blocks of `STREAM_BLOCK` threads, `STATS_SHARED_BYTES` of dynamic shared
/// memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
// Barriers: one, in `block_stats`.
#[kernel(block(STREAM_BLOCK), barriers(1))]
pub unsafe fn softmax_stream(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    let split = RowSplit::of(x_row, cols);
    let scalar = split.scalar(tid);
    // SAFETY: indices stay inside the row (see the helpers); every thread reaches the reduction.
    unsafe {
        let mut acc = range_stats(x_row, split, 0, split.vecs, tid, threads, t);
        let xs = scalar.map_or(0.0, |i| mem::load(x_row, i));
        if scalar.is_some() {
            acc = acc.merge(Stats::one(xs), t);
        }
        let total = block_stats(shared::dynamic::<Stats>(), acc, t);
        range_write::<false>(x_row, y_row, split, 0, split.vecs, tid, threads, total, t);
        if let Some(i) = scalar {
            mem::store(y_row, i, math::exp(exponent(xs, total.m, t)) / total.s);
        }
    }
}
