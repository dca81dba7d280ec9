//! Row-wise softmax with an inverse temperature `t`: `y[r] = softmax(t * x[r])`.
//!
//! Computed as `y[r][j] = exp(d_j) / sum_j exp(d_j)` with `d_j = t * (x[r][j] - m_r)`, where `m_r`
//! is the row's maximum for `t >= 0` and its minimum for `t < 0`, so that `t * m_r` is the
//! maximum of `t * x[r]`. Every `d_j <= 0`, so nothing overflows, and `t * x` itself is never
//! formed (it could overflow near `f32::MAX`). The rules at the edges ([`exponent`]):
//! * an entry equal to `m_r` gets `d_j = 0`: entries at `+inf` (for `t > 0`) share the row's
//!   mass equally, and a row whose entries are all equal, even all `-inf`, is uniform;
//! * `t = 0` gives the uniform distribution;
//! * a NaN anywhere in a row makes that whole row NaN, and no other row.
//!
//! A vector is a matrix of one row.
//!
//! Kernels, slowest first: [`softmax_rows`] (the tutorial's block reduction, three passes over
//! the row), then the one-pass family below it ([`softmax_warp_1`] ... [`softmax_split_write`]),
//! which reads each element once where the row fits on chip.

use crate::gpu::{block, math, mem, shared, thread};
use crate::kernel;

/// Threads per block (one block per row). A power of two, as the tree reduction needs; 256
/// threads read a row in coalesced 1 KiB sweeps.
pub const BLOCK: u32 = 256;

/// Dynamic shared memory [`softmax_rows`] needs: one float per thread for the reductions.
pub const SHARED_BYTES: u32 = BLOCK * core::mem::size_of::<f32>() as u32;

/// The exponent `d` of one entry `x`, given the row's reference value `m` (see the module doc).
#[inline(always)]
pub fn exponent(x: f32, m: f32, t: f32) -> f32 {
    if m.is_nan() {
        f32::NAN
    } else if x == m || t == 0.0 {
        0.0
    } else {
        t * (x - m)
    }
}

/// Block-reduction softmax, three passes over the row.
///
/// Block `r` handles row `r`; thread `tid` handles elements `tid, tid + blockDim.x, ...` of it.
/// Pass 1: each thread takes the max (min for `t < 0`) over its elements, and the block reduces
/// them in shared memory to `m`. Pass 2: the same for the sum of `exp(d)`. Pass 3: each thread
/// writes `exp(d) / sum` for its elements. Global memory: the row is read three times and
/// written once.
///
/// Launch: `rows` blocks of `BLOCK` threads, `SHARED_BYTES` of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory and do not overlap; the launch
/// shape is as above.
#[kernel]
pub unsafe fn softmax_rows(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let stride = thread::block_dim_x() as usize;
    let x_row = x.wrapping_add(row * cols);
    let y_row = y.wrapping_add(row * cols);
    let scratch = shared::dynamic::<f32>();
    let largest = t >= 0.0;

    // SAFETY (loads and stores below): `j < cols`, inside the row; `scratch` holds
    // `blockDim.x` floats and every thread of the block calls the reductions.
    let mut local = if largest { f32::NEG_INFINITY } else { f32::INFINITY };
    let mut j = tid;
    while j < cols {
        let v = unsafe { mem::load(x_row, j) };
        local = if largest {
            math::max_nan(local, v)
        } else {
            math::min_nan(local, v)
        };
        j += stride;
    }
    let m = unsafe {
        if largest {
            block::reduce_max(scratch, local)
        } else {
            block::reduce_min(scratch, local)
        }
    };

    let mut local_sum = 0.0f32;
    j = tid;
    while j < cols {
        local_sum += math::exp(exponent(unsafe { mem::load(x_row, j) }, m, t));
        j += stride;
    }
    let row_sum = unsafe { block::reduce_sum(scratch, local_sum) };

    let inv_sum = 1.0 / row_sum;
    j = tid;
    while j < cols {
        let e = math::exp(exponent(unsafe { mem::load(x_row, j) }, m, t));
        unsafe { mem::store(y_row, j, e * inv_sum) };
        j += stride;
    }
}

// ---------------------------------------------------------------------------------------------
// One pass over the input: online (max, sum) statistics, 16-byte accesses
// ---------------------------------------------------------------------------------------------
//
// Every fast kernel below computes, per thread, the statistics [`Stats`] of the entries it holds
// (their reference value `m` and the sum of `exp(exponent(x, m, t))`), merges them across the warp
// with shuffles ([`warp::shfl_xor`]) and across the block through shared memory, and writes
// `exp(exponent(x, M, t)) / S` with the row's `(M, S)`. Merging rescales each partial sum to the
// common reference, so one reduction gives both the reference and the sum.
//
// Rows are read as 16-byte vectors. A row whose start is not 16-byte aligned (a row `r > 0` when
// `cols` is not a multiple of 4) splits into up to 3 head scalars, aligned vectors, and up to 3
// tail scalars ([`RowSplit`]); the host passes `x` and `y` at the same address modulo 16 bytes,
// so the same split holds for the output row.
//
// Which kernel a shape gets (gpukern's `OnePassConfig::plan`): rows of up to 1024 columns take a
// warp each ([`softmax_warp_1`] ... [`softmax_warp_8`]); up to 32768 a block each, the row held
// in registers ([`softmax_block_4`], [`softmax_block_8`]); longer rows cannot stay on chip and are
// read twice, by one block per row when there are many rows ([`softmax_stream`]), or by several
// blocks per row when there are few ([`softmax_split_stats`] then [`softmax_split_write`]).

use crate::gpu::vector::{self, F4};
use crate::gpu::warp;

/// Threads per block of the warp-per-row kernels: 8 warps, one row each. Small blocks let the
/// multiprocessor fill up with whole blocks (8 per SM at 256 threads) and leave a partial last
/// block little to waste.
pub const WARP_KERNEL_BLOCK: u32 = 256;

/// Rows per block of the warp-per-row kernels.
pub const WARP_KERNEL_ROWS: u32 = WARP_KERNEL_BLOCK / warp::SIZE;

/// Most threads a block-per-row kernel takes (the CUDA limit).
pub const ROW_BLOCK_MAX: u32 = 1024;

/// Threads per block of the kernels that stream a row from memory twice ([`softmax_stream`],
/// [`softmax_split_stats`], [`softmax_split_write`]).
pub const STREAM_BLOCK: u32 = 512;

/// Vectors each thread of the streaming kernels loads before it uses any: 64 bytes per thread,
/// 32 KiB per 512-thread block in flight, enough with two or more blocks per multiprocessor to
/// cover the DRAM latency (Little's law: about 32 KB per SM on an H200).
pub const STREAM_UNROLL: usize = 4;

/// Dynamic shared memory of the block-per-row and streaming kernels: one [`Stats`] (8 bytes) per
/// warp of the largest block, for the cross-warp step of the reduction.
pub const STATS_SHARED_BYTES: u32 = ROW_BLOCK_MAX / warp::SIZE * core::mem::size_of::<Stats>() as u32;

/// The softmax statistics of a set of entries of one row, for an inverse temperature `t`.
///
/// `m` is their reference value (max for `t >= 0`, min for `t < 0`; NaN if any entry is NaN) and
/// `s = sum exp(exponent(x, m, t))` over them. The empty set has `m` = the reference's identity
/// (`-inf` for `t >= 0`, `+inf` for `t < 0`) and `s = 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// The reference value.
    pub m: f32,
    /// The sum of the exponentials relative to `m`.
    pub s: f32,
}

impl Stats {
    /// The statistics of no entries.
    #[inline(always)]
    pub fn empty(t: f32) -> Stats {
        let m = if t >= 0.0 {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        };
        Stats { m, s: 0.0 }
    }

    /// The statistics of the one entry `x`: it is its own reference, so it counts `exp(0) = 1`.
    #[inline(always)]
    pub fn one(x: f32) -> Stats {
        Stats { m: x, s: 1.0 }
    }

    /// The statistics of the union of two disjoint sets of entries.
    ///
    /// The common reference `m` is the larger (smaller for `t < 0`) of the two; each sum is
    /// rescaled to it by `exp(exponent(m_i, m, t))`. Through [`exponent`] that factor is exactly
    /// 1 when `m_i == m` (also when both are the same infinity, where `m_i - m` would be NaN), 0
    /// when `m_i` is the identity `-inf` and `m` is not (never `0 * NaN`), and NaN when `m` is
    /// NaN. Bit for bit commutative, so both lanes of a shuffle exchange get the same result.
    #[inline(always)]
    pub fn merge(self, other: Stats, t: f32) -> Stats {
        let m = if t >= 0.0 {
            math::max_nan(self.m, other.m)
        } else {
            math::min_nan(self.m, other.m)
        };
        let s = self.s * math::exp(exponent(self.m, m, t)) + other.s * math::exp(exponent(other.m, m, t));
        Stats { m, s }
    }
}

/// How one row lies in memory: `head` scalars up to the first 16-byte boundary, `vecs` aligned
/// 4-float vectors, then `tail` scalars (`head, tail <= 3`).
#[derive(Clone, Copy)]
struct RowSplit {
    head: usize,
    vecs: usize,
    tail: usize,
}

impl RowSplit {
    /// The split of a row of `cols` floats starting at `row`.
    #[inline(always)]
    fn of(row: *const f32, cols: usize) -> RowSplit {
        let misaligned = (row as usize / 4) % 4;
        let head = ((4 - misaligned) % 4).min(cols);
        let vecs = (cols - head) / 4;
        RowSplit {
            head,
            vecs,
            tail: cols - head - 4 * vecs,
        }
    }

    /// The float offset of vector `j`.
    #[inline(always)]
    fn vector(self, j: usize) -> usize {
        self.head + 4 * j
    }

    /// The scalar element (head or tail) thread `tid` of the row's threads handles, if any:
    /// threads `0..head` take the head, threads `4..4 + tail` the tail (at most 7 threads).
    #[inline(always)]
    fn scalar(self, tid: usize) -> Option<usize> {
        if tid < self.head {
            Some(tid)
        } else if tid >= 4 && tid - 4 < self.tail {
            Some(self.head + 4 * self.vecs + tid - 4)
        } else {
            None
        }
    }
}

/// The statistics over the warp of one [`Stats`] per lane, returned to every lane: five
/// butterfly steps of two shuffles and one [`Stats::merge`] each.
///
/// Every lane of the warp calls it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn warp_stats(stats: Stats, t: f32) -> Stats {
    let mut acc = stats;
    let mut mask = warp::SIZE / 2;
    while mask > 0 {
        let other = Stats {
            m: warp::shfl_xor(acc.m, mask),
            s: warp::shfl_xor(acc.s, mask),
        };
        acc = acc.merge(other, t);
        mask /= 2;
    }
    acc
}

/// The statistics over the block of one [`Stats`] per thread, returned to every thread.
///
/// Each warp reduces its lanes with shuffles and lane 0 stores the result in `scratch[warp]`;
/// after one barrier every warp reads all the warps' results and reduces them the same way, so
/// all threads get the same value with no second barrier (the block uses `scratch` once).
///
/// # Safety
/// Called once per launch by every thread of a block whose size is a multiple of 32;
/// `scratch` points to `blockDim.x / 32` [`Stats`] of shared memory.
#[inline(always)]
unsafe fn block_stats(scratch: *mut Stats, stats: Stats, t: f32) -> Stats {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let (warp_idx, lane) = (tid / warp::SIZE as usize, tid % warp::SIZE as usize);
    let mine = warp_stats(stats, t);
    // SAFETY: `warp_idx, lane < warps`, the size of `scratch`; each slot is written by one lane
    // before the barrier and only read after it.
    unsafe {
        if lane == 0 {
            mem::store(scratch, warp_idx, mine);
        }
        thread::sync_threads();
        let other = if lane < warps {
            mem::load(scratch, lane)
        } else {
            Stats::empty(t)
        };
        warp_stats(other, t)
    }
}

/// `f` applied to each of the four floats of `v`.
#[inline(always)]
fn map4(v: F4, f: impl Fn(f32) -> f32) -> F4 {
    F4([f(v.0[0]), f(v.0[1]), f(v.0[2]), f(v.0[3])])
}

/// Most vectors per thread a register-held row may take: [`unroll_8!`] unrolls up to 8.
const MAX_VECTORS: usize = 8;

/// Softmax of one row held in registers: the body of the warp-per-row and block-per-row kernels.
///
/// Thread `tid` of the row's `threads` loads vectors `tid + k * threads` (`k < V`) of the row,
/// all `V` loads before any use, plus at most one head or tail scalar ([`RowSplit::scalar`]). It
/// takes the reference `m` of its own entries, replaces each entry by `e = exp(exponent(x, m, t))`
/// and sums them; `reduce` merges these statistics over the row's threads into `(M, S)`; the
/// thread then stores `e * exp(exponent(m, M, t)) / S`, which is `exp(exponent(x, M, t)) / S` (the
/// factor is 1 for the thread that holds the row's reference, 0 for a thread whose entries all
/// lie at `-inf` below a finite `M`). One exponential per entry, one read and one write of each.
///
/// `FIXED` is the number of threads when it is known at compile time (32 for a warp), else 0.
///
/// # Safety
/// `x_row` and `y_row` point to `cols` floats at the same address modulo 16 bytes;
/// `cols / 4 <= V * threads`; `threads == FIXED` unless `FIXED` is 0; `reduce` is called by all
/// the row's threads.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row_in_registers<const V: usize, const FIXED: usize>(
    x_row: *const f32,
    y_row: *mut f32,
    cols: usize,
    t: f32,
    tid: usize,
    threads: usize,
    reduce: impl FnOnce(Stats) -> Stats,
) {
    const { assert!(V <= MAX_VECTORS, "unroll_8! unrolls up to 8 vectors") };
    let split = RowSplit::of(x_row, cols);
    let sign = if t >= 0.0 { 1.0f32 } else { -1.0 };
    let scalar = split.scalar(tid);
    // With `FIXED` threads (a warp) vector `k` lies a constant distance past vector 0, an
    // immediate offset in the instruction. With a run-time count, the vector indices are kept in
    // 32 bits (a register-held row has at most 8 * 1024 vectors): the offsets stay live from the
    // loads to the stores, and 64-bit ones would cost 8 registers more (72 instead of 64 for
    // `V = 8`, too many for 1024 threads).
    let (tid32, threads32, vecs32) = (tid as u32, threads as u32, split.vecs as u32);
    let valid = |k: usize| {
        if FIXED != 0 {
            tid + k * FIXED < split.vecs
        } else {
            tid32 + k as u32 * threads32 < vecs32
        }
    };
    let offset = |k: usize| {
        if FIXED != 0 {
            split.vector(tid + k * FIXED)
        } else {
            split.head + 4 * (tid32 + k as u32 * threads32) as usize
        }
    };

    let mut v = [F4::ZERO; V];
    unroll_8!(V, |k| {
        if valid(k) {
            // SAFETY: vector `tid + k * threads < vecs` lies inside the row, 16-byte aligned.
            v[k] = unsafe { vector::load4(x_row, offset(k)) };
        }
    });
    // SAFETY: a head or tail index is inside the row.
    let xs = scalar.map_or(0.0, |i| unsafe { mem::load(x_row, i) });

    // The thread's reference: max of `sign * x` is the max for t >= 0 and minus the min for t < 0.
    let mut key = f32::NEG_INFINITY;
    unroll_8!(V, |k| {
        if valid(k) {
            for c in 0..4 {
                key = math::max_nan(key, sign * v[k].0[c]);
            }
        }
    });
    if scalar.is_some() {
        key = math::max_nan(key, sign * xs);
    }
    let m = sign * key;

    let mut s = 0.0f32;
    unroll_8!(V, |k| {
        if valid(k) {
            v[k] = map4(v[k], |x| math::exp(exponent(x, m, t)));
            s += (v[k].0[0] + v[k].0[1]) + (v[k].0[2] + v[k].0[3]);
        }
    });
    let es = if scalar.is_some() {
        math::exp(exponent(xs, m, t))
    } else {
        0.0
    };
    s += es;

    let row = reduce(Stats { m, s });
    let factor = math::exp(exponent(m, row.m, t)) / row.s;
    unroll_8!(V, |k| {
        if valid(k) {
            let out = map4(v[k], |e| e * factor);
            // SAFETY: as for the loads; `y_row` splits like `x_row`.
            unsafe { vector::store4(y_row, offset(k), out) };
        }
    });
    if let Some(i) = scalar {
        // SAFETY: as for the scalar load.
        unsafe { mem::store(y_row, i, es * factor) };
    }
}

/// Warp-per-row softmax, the row in registers: the body of [`softmax_warp_1`] ... [`softmax_warp_8`].
///
/// Warp `w` of block `b` handles row `b * (blockDim.x / 32) + w`: lane `l` holds vectors
/// `l, l + 32, ..., l + 32 * (V - 1)` of the row (`4 * V` floats in registers) and at most one
/// head or tail scalar; the warp merges its lanes' statistics with 10 shuffles
/// ([`row_in_registers`]). No shared memory, no barrier: rows are independent warps.
///
/// Global memory: each entry read once and written once, 8 bytes per element, in 512-byte
/// coalesced warp accesses.
///
/// Launch: `ceil(rows / (blockDim.x / 32))` blocks of [`WARP_KERNEL_BLOCK`] threads, no shared
/// memory; for rows with `cols / 4 <= 32 * V`.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
#[inline(always)]
unsafe fn softmax_warp<const V: usize>(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let row = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if row >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let lane = tid % warp::SIZE as usize;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // SAFETY: the row is inside the buffers; the caller's shape gives `cols / 4 <= 32 * V`; all
    // 32 lanes of the warp reach the reduction.
    unsafe {
        row_in_registers::<V, { warp::SIZE as usize }>(
            x_row,
            y_row,
            cols,
            t,
            lane,
            warp::SIZE as usize,
            |s| warp_stats(s, t),
        )
    }
}

/// [`softmax_warp`] with 1 vector per lane: rows of up to 128 columns (+3 when the row is not
/// aligned), 4 floats per lane. 8192 x 128 is 8192 warps, 1024 blocks: one wave of 8 blocks per
/// SM on an H200, with 16 bytes per lane in flight.
///
/// # Safety
/// As [`softmax_warp`].
#[kernel]
pub unsafe fn softmax_warp_1(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_warp::<1>(x, y, rows, cols, t) }
}

/// [`softmax_warp`] with 2 vectors per lane: rows of up to 256 columns, 8 floats per lane.
///
/// # Safety
/// As [`softmax_warp`].
#[kernel]
pub unsafe fn softmax_warp_2(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_warp::<2>(x, y, rows, cols, t) }
}

/// [`softmax_warp`] with 4 vectors per lane: rows of up to 512 columns, 16 floats per lane.
///
/// # Safety
/// As [`softmax_warp`].
#[kernel]
pub unsafe fn softmax_warp_4(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_warp::<4>(x, y, rows, cols, t) }
}

/// [`softmax_warp`] with 8 vectors per lane: rows of up to 1024 columns, 32 floats per lane
/// (128 bytes per lane in flight, all 8 loads issued before the first use).
///
/// # Safety
/// As [`softmax_warp`].
#[kernel]
pub unsafe fn softmax_warp_8(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_warp::<8>(x, y, rows, cols, t) }
}

/// Block-per-row softmax, the row in registers: the body of [`softmax_block_4`] and
/// [`softmax_block_8`].
///
/// Block `r` handles row `r`: thread `tid` holds vectors `tid + k * blockDim.x` (`k < V`) of the
/// row and at most one head or tail scalar; the block merges the statistics with shuffles and one
/// barrier ([`block_stats`]), then every thread writes its entries.
///
/// Global memory: each entry read once and written once, 8 bytes per element. Shared memory:
/// one [`Stats`] per warp.
///
/// Launch: `rows` blocks of a multiple of 32 threads, at most 1024, with
/// `cols / 4 <= V * blockDim.x`; [`STATS_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
#[inline(always)]
unsafe fn softmax_block<const V: usize>(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let scratch = shared::dynamic::<Stats>();
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // SAFETY: the row is inside the buffers; the caller's shape gives `cols / 4 <= V * threads`
    // and the shared memory; every thread of the block reaches the reduction.
    unsafe {
        row_in_registers::<V, 0>(x_row, y_row, cols, t, tid, threads, |s| {
            block_stats(scratch, s, t)
        })
    }
}

/// [`softmax_block`] with 4 vectors (16 floats) per thread: rows of up to 16 * blockDim.x
/// columns; the host uses it up to 8192 columns (512 threads). 8192 x 4096 runs 256-thread blocks;
/// about 40 registers let 6 blocks share a multiprocessor, 96 KB of loads in flight per SM.
///
/// # Safety
/// As [`softmax_block`].
#[kernel]
pub unsafe fn softmax_block_4(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_block::<4>(x, y, rows, cols, t) }
}

/// [`softmax_block`] with 8 vectors (32 floats) per thread: rows of up to 32 * blockDim.x
/// columns; the host uses it from 8193 to 32768 columns (up to 1024 threads). A 32768-column row
/// is 128 KiB, half a multiprocessor's register file: one row per SM at a time.
///
/// # Safety
/// As [`softmax_block`].
#[kernel]
pub unsafe fn softmax_block_8(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_block::<8>(x, y, rows, cols, t) }
}

/// The statistics of the vectors `start..end` of a row that thread `tid` of `threads` handles
/// (`start + tid + i * threads`), streamed from memory [`STREAM_UNROLL`] vectors at a time:
/// all of a group's loads are issued before any is used, and the running sum is rescaled once
/// per group, to the larger of its reference and the group's.
///
/// # Safety
/// `x_row` is a row that splits as `split`, and `end <= split.vecs`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn range_stats(
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
        let mut s = acc.s * math::exp(exponent(acc.m, m, t));
        for (k, vk) in v.iter().enumerate() {
            if first + k * threads < end {
                let e = map4(*vk, |x| math::exp(exponent(x, m, t)));
                s += (e.0[0] + e.0[1]) + (e.0[2] + e.0[3]);
            }
        }
        acc = Stats { m, s };
        first += STREAM_UNROLL * threads;
    }
    acc
}

/// Writes `exp(exponent(x, row.m, t)) / row.s` for the vectors `start..end` of a row that thread
/// `tid` of `threads` handles, reading them again [`STREAM_UNROLL`] at a time.
///
/// # Safety
/// `x_row` and `y_row` are rows that split as `split`, and `end <= split.vecs`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn range_write(
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
                // SAFETY: vector `j < vecs` lies inside the row and is 16-byte aligned.
                *slot = unsafe { vector::load4(x_row, split.vector(j)) };
            }
        }
        for (k, vk) in v.iter().enumerate() {
            let j = first + k * threads;
            if j < end {
                let out = map4(*vk, |x| math::exp(exponent(x, row.m, t)) * inv);
                // SAFETY: as for the loads; `y_row` splits like `x_row`.
                unsafe { vector::store4(y_row, split.vector(j), out) };
            }
        }
        first += STREAM_UNROLL * threads;
    }
}

/// Block-per-row softmax for rows too long to keep on chip: two reads of the row.
///
/// Block `r` handles row `r`. Pass 1: thread `tid` streams vectors `tid, tid + blockDim.x, ...`
/// [`STREAM_UNROLL`] at a time, keeping running statistics ([`range_stats`]); threads 0..7 add
/// the head and tail scalars; the block merges the statistics ([`block_stats`]). Pass 2: the
/// same vectors are read again and `exp(exponent(x, M, t)) / S` written.
///
/// Global memory: 12 bytes per element (read twice, write once). The second read of a row comes
/// right after the first, so with one row of up to a few hundred KiB per block in flight the whole
/// grid's rows fit the H200's 50 MB L2 and DRAM sees close to 8 bytes per element.
///
/// Launch: `rows` blocks of [`STREAM_BLOCK`] threads, [`STATS_SHARED_BYTES`] of dynamic shared
/// memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
#[kernel]
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
        range_write(x_row, y_row, split, 0, split.vecs, tid, threads, total, t);
        if let Some(i) = scalar {
            mem::store(y_row, i, math::exp(exponent(xs, total.m, t)) / total.s);
        }
    }
}

/// The vectors `start..end` of a row that chunk `chunk` of `chunk_vecs` vectors covers.
#[inline(always)]
fn chunk_range(split: RowSplit, chunk: usize, chunk_vecs: usize) -> (usize, usize) {
    let start = (chunk * chunk_vecs).min(split.vecs);
    (start, (start + chunk_vecs).min(split.vecs))
}

/// Split-row softmax, step 1 of 2: the statistics of one chunk of a row.
///
/// Block `b` handles chunk `b % chunks` of row `b / chunks`, the vectors
/// `chunk * chunk_vecs .. (chunk + 1) * chunk_vecs` of the row, streamed as in
/// [`softmax_stream`]'s first pass (chunk 0 also takes the head and tail scalars); thread 0 writes
/// the block's merged [`Stats`] to `partials[b]` (two floats).
///
/// Global memory: reads each element once (4 bytes), writes 8 bytes per block.
///
/// Launch: `rows * chunks` blocks of [`STREAM_BLOCK`] threads, [`STATS_SHARED_BYTES`] of dynamic
/// shared memory, with `chunks * chunk_vecs >= cols / 4`.
///
/// # Safety
/// `x` points to `rows * cols` floats, `partials` to `2 * rows * chunks` floats of device memory;
/// the launch shape is as above.
#[kernel]
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

/// Split-row softmax, step 2 of 2: merge a row's chunk statistics, write one chunk.
///
/// Block `b` handles chunk `c = l % chunks` of row `l / chunks` with `l = gridDim.x - 1 - b`:
/// the blocks run in the reverse order of [`softmax_split_stats`], so the first chunks read are
/// the last ones step 1 read, still in L2. Every thread merges the row's partials
/// `tid, tid + blockDim.x, ...`, the block merges them ([`block_stats`]), and the chunk's
/// vectors are read again and written as in [`softmax_stream`]'s second pass (chunk 0 also
/// writes the head and tail scalars). Every block of a row merges the same partials in the same
/// order, so all use the same `(M, S)`.
///
/// Global memory: reads each element once and writes it once (8 bytes per element), plus
/// `8 * chunks` bytes of partials per block from L2. With step 1, 12 bytes per element.
///
/// Launch: as [`softmax_split_stats`], with the same `chunks` and `chunk_vecs`.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; `partials` holds step 1's `2 * rows * chunks` floats; the launch
/// shape is as above.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub unsafe fn softmax_split_write(
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
        range_write(x_row, y_row, split, start, end, tid, threads, total, t);
        if chunk == 0 {
            if let Some(i) = split.scalar(tid) {
                let e = math::exp(exponent(mem::load(x_row, i), total.m, t));
                mem::store(y_row, i, e / total.s);
            }
        }
    }
}
