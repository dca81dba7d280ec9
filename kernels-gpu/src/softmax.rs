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

/// A running f32 sum with Kahan's compensation: the rounding error of each addition is kept and
/// subtracted from the next term, so the error of a sum of `n` terms stays a few units in the
/// last place instead of growing with `n` (a thread of a long row adds tens of thousands of
/// terms: a plain running sum then drifts well past f32 rounding, about `sqrt(n) * 2^-24`).
/// Four flops per term, nothing next to a memory-bound kernel's loads.
///
/// Only additions and subtractions, which neither rustc nor ptxas reassociate or contract, so the
/// compensation survives compilation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KahanSum {
    /// The running sum.
    sum: f32,
    /// What the last additions rounded away, negated: the sum is `sum - compensation`.
    compensation: f32,
}

impl KahanSum {
    /// The empty sum.
    pub const ZERO: KahanSum = KahanSum {
        sum: 0.0,
        compensation: 0.0,
    };

    /// Adds `term`.
    #[inline(always)]
    pub fn add(&mut self, term: f32) {
        let corrected = term - self.compensation;
        let next = self.sum + corrected;
        self.compensation = (next - self.sum) - corrected;
        self.sum = next;
    }

    /// Multiplies the sum (and its compensation) by `factor`.
    #[inline(always)]
    pub fn scale(&mut self, factor: f32) {
        self.sum *= factor;
        self.compensation *= factor;
    }

    /// The compensated value of the sum.
    #[inline(always)]
    pub fn value(self) -> f32 {
        self.sum - self.compensation
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

    // Compensated: a thread adds cols / blockDim.x terms, 65536 for a row of 2^24.
    let mut local_sum = KahanSum::ZERO;
    j = tid;
    while j < cols {
        local_sum.add(math::exp(exponent(unsafe { mem::load(x_row, j) }, m, t)));
        j += stride;
    }
    let row_sum = unsafe { block::reduce_sum(scratch, local_sum.value()) };

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
// warp each ([`softmax_warp_1`] ... [`softmax_warp_8`]; rows of up to 128 columns optionally a
// group of 8 or 16 lanes, [`softmax_group_8x4`], [`softmax_group_16x2`]); up to 32768 a block
// each, the row held in registers ([`softmax_block_4`], [`softmax_block_8`]); the persistent
// twins of `softmax_warp_8` and the block kernels ([`softmax_persist_warp_8`],
// [`softmax_persist_block_4`], [`softmax_persist_block_8`]) stage the next row in shared memory
// while they finish the current one; longer rows cannot stay on chip and are
// read twice, by one block per row when there are many rows ([`softmax_stream`]), or by several
// blocks per row when there are few ([`softmax_split_stats`] then [`softmax_split_write`]).

use crate::gpu::vector::{self, F4};
use crate::gpu::{async_copy, hint, warp};

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
    group_stats::<{ warp::SIZE as usize }>(stats, t)
}

/// The statistics over each aligned group of `G` lanes (`G` a power of two up to 32) of one
/// [`Stats`] per lane, returned to every lane of the group: `log2 G` butterfly steps with lane
/// masks below `G`, so that no value crosses from one group to another.
///
/// Every lane of the warp calls it (the shuffles name the whole warp).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn group_stats<const G: usize>(stats: Stats, t: f32) -> Stats {
    const { assert!(G.is_power_of_two() && G <= warp::SIZE as usize) };
    let mut acc = stats;
    let mut mask = G as u32 / 2;
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
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
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

/// Where thread `tid` of a row's `threads` finds its entries: its vector `k` is vector
/// `tid + k * threads` of the row, and it has at most one head or tail scalar
/// ([`RowSplit::scalar`]).
///
/// `FIXED` is the number of threads when it is known at compile time (32 for a warp, 8 or 16 for
/// a lane group), else 0. With `FIXED` threads vector `k` lies a constant distance past vector 0,
/// an immediate offset in the instruction. With a run-time count, the vector indices are kept in
/// 32 bits (a register-held row has at most 8 * 1024 vectors): the offsets stay live from the
/// loads to the stores, and 64-bit ones would cost 8 registers more (72 instead of 64 for
/// `V = 8`, too many for 1024 threads).
#[derive(Clone, Copy)]
struct Held<const FIXED: usize> {
    split: RowSplit,
    tid: usize,
    threads: usize,
}

impl<const FIXED: usize> Held<FIXED> {
    /// Thread `tid` of `threads` on a row of `cols` floats starting at `row`.
    #[inline(always)]
    fn of(row: *const f32, cols: usize, tid: usize, threads: usize) -> Self {
        Held {
            split: RowSplit::of(row, cols),
            tid,
            threads,
        }
    }

    /// Whether the thread's vector `k` lies inside the row: `tid + k * threads < vecs`, written
    /// as `tid < vecs - k * threads` (0 if negative), whose right side is the same for every
    /// thread of the row (a uniform register), so no per-thread value per `k` stays live.
    #[inline(always)]
    fn valid(self, k: usize) -> bool {
        let threads = if FIXED != 0 {
            FIXED as u32
        } else {
            self.threads as u32
        };
        (self.tid as u32) < (self.split.vecs as u32).saturating_sub(k as u32 * threads)
    }

    /// The float offset of the thread's vector `k` in the row.
    #[inline(always)]
    fn offset(self, k: usize) -> usize {
        if FIXED != 0 {
            self.split.vector(self.tid + k * FIXED)
        } else {
            self.split.head + 4 * (self.tid as u32 + k as u32 * self.threads as u32) as usize
        }
    }

    /// The thread's head or tail scalar, if any.
    #[inline(always)]
    fn scalar(self) -> Option<usize> {
        self.split.scalar(self.tid)
    }

    /// Loads the thread's entries of `x_row`: `V` vectors (all loads issued before any use) and
    /// the scalar (0 if none).
    ///
    /// # Safety
    /// `x_row` is the row `self` describes; `cols / 4 <= V * threads`.
    #[inline(always)]
    unsafe fn load<const V: usize>(self, x_row: *const f32) -> ([F4; V], f32) {
        const { assert!(V <= MAX_VECTORS, "unroll_8! unrolls up to 8 vectors") };
        let mut v = [F4::ZERO; V];
        unroll_8!(V, |k| {
            if self.valid(k) {
                // SAFETY: vector `tid + k * threads < vecs` lies inside the row, 16-byte aligned.
                v[k] = unsafe { vector::load4(x_row, self.offset(k)) };
            }
        });
        // SAFETY: a head or tail index is inside the row.
        let xs = self.scalar().map_or(0.0, |i| unsafe { mem::load(x_row, i) });
        (v, xs)
    }

    /// The largest `sign * x` over the thread's entries (`-inf` if it holds none; NaN if one is
    /// NaN): the thread's reference value times `sign`.
    #[inline(always)]
    fn key<const V: usize>(self, v: &[F4; V], xs: f32, sign: f32) -> f32 {
        let mut key = f32::NEG_INFINITY;
        unroll_8!(V, |k| {
            if self.valid(k) {
                for c in 0..4 {
                    key = math::max_nan(key, sign * v[k].0[c]);
                }
            }
        });
        if self.scalar().is_some() {
            key = math::max_nan(key, sign * xs);
        }
        key
    }

    /// The rest of the row's softmax once the thread holds its entries `v`, `xs` and their
    /// `key` ([`Held::key`]): replaces each entry by `e = exp(exponent(x, m, t))` (`m` the
    /// thread's reference), sums them, merges the statistics over the row's threads with
    /// `reduce` into `(M, S)`, and stores `e * exp(exponent(m, M, t)) / S` to `y_row`, which is
    /// `exp(exponent(x, M, t)) / S` (the factor is 1 for the thread that holds the row's
    /// reference, 0 for a thread whose entries all lie at `-inf` below a finite `M`).
    ///
    /// # Safety
    /// `y_row` splits like the row `self` describes; `reduce` is called by all the row's threads.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn write<const V: usize>(
        self,
        mut v: [F4; V],
        xs: f32,
        key: f32,
        sign: f32,
        y_row: *mut f32,
        t: f32,
        reduce: impl FnOnce(Stats) -> Stats,
    ) {
        let m = sign * key;
        let mut s = 0.0f32;
        unroll_8!(V, |k| {
            if self.valid(k) {
                v[k] = map4(v[k], |x| math::exp(exponent(x, m, t)));
                s += (v[k].0[0] + v[k].0[1]) + (v[k].0[2] + v[k].0[3]);
            }
        });
        let scalar = self.scalar();
        let es = if scalar.is_some() {
            math::exp(exponent(xs, m, t))
        } else {
            0.0
        };
        s += es;

        let row = reduce(Stats { m, s });
        let factor = math::exp(exponent(m, row.m, t)) / row.s;
        unroll_8!(V, |k| {
            if self.valid(k) {
                let out = map4(v[k], |e| e * factor);
                // SAFETY: as for the loads; `y_row` splits like `x_row`.
                unsafe { vector::store4(y_row, self.offset(k), out) };
            }
        });
        if let Some(i) = scalar {
            // SAFETY: as for the scalar load.
            unsafe { mem::store(y_row, i, es * factor) };
        }
    }
}

/// Softmax of one row held in registers: the body of the warp-per-row, lane-group and
/// block-per-row kernels.
///
/// Thread `tid` of the row's `threads` loads vectors `tid + k * threads` (`k < V`) of the row,
/// all `V` loads before any use, plus at most one head or tail scalar ([`Held::load`]); then
/// [`Held::write`]: one exponential per entry, one read and one write of each.
///
/// `FIXED` is as in [`Held`].
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
    let held = Held::<FIXED>::of(x_row, cols, tid, threads);
    let sign = if t >= 0.0 { 1.0f32 } else { -1.0 };
    // SAFETY: forwarded contract.
    unsafe {
        let (v, xs) = held.load::<V>(x_row);
        let key = held.key(&v, xs, sign);
        held.write(v, xs, key, sign, y_row, t, reduce)
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

/// Threads per block of the lane-group kernels ([`softmax_group_8x4`], [`softmax_group_16x2`]):
/// 8 warps, `256 / G` rows per block.
pub const GROUP_KERNEL_BLOCK: u32 = 256;

/// Lane-group softmax, several short rows per warp, each held in registers: the body of
/// [`softmax_group_8x4`] and [`softmax_group_16x2`].
///
/// The block's threads form groups of `G` consecutive lanes (`G` = 8 or 16, so a warp holds
/// `32 / G` rows); group `g` of block `b` handles row `b * (blockDim.x / G) + g`. Lane `l` of a
/// group holds vectors `l, l + G, ..., l + G * (V - 1)` of the row (`4 * V` floats) and at most
/// one head or tail scalar (lanes 0..7 of the group); the group merges its lanes' statistics
/// with `2 * log2 G` shuffles whose lane masks stay inside the group ([`group_stats`]). A group
/// past the last row takes part in the shuffles with no entries and stores nothing; a warp whose
/// groups are all past it leaves.
///
/// Why: a row of up to 128 columns is 512 bytes. A warp per row ([`softmax_warp_1`]) gives each
/// lane one 16-byte load and spends 5 butterfly steps on 128 floats; `G` lanes per row give each
/// lane `V` loads in flight at once, `log2 G` steps, and `32 / G` times fewer warps and blocks
/// to schedule (8192 x 128: 256 blocks for `G = 8`, 512 for `G = 16`, against 1024), which is
/// what a one-wave kernel of 4 MB spends its time on.
///
/// Global memory: each entry read once and written once, 8 bytes per element; a warp's load
/// instruction covers `32 / G` rows' whole 128-byte segments.
///
/// Launch: `ceil(rows / (blockDim.x / G))` blocks of [`GROUP_KERNEL_BLOCK`] threads, no shared
/// memory; for rows with `cols / 4 <= G * V`.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
#[inline(always)]
unsafe fn softmax_group<const G: usize, const V: usize>(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    t: f32,
) {
    // Lanes 0..7 of the group take a row's head and tail scalars.
    const { assert!(G >= 8 && G <= warp::SIZE as usize && G.is_power_of_two()) };
    let tid = thread::thread_idx_x() as usize;
    let groups = thread::block_dim_x() as usize / G;
    let first = thread::block_idx_x() as usize * groups;
    let warp_first_row = first + tid / warp::SIZE as usize * (warp::SIZE as usize / G);
    if warp_first_row >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let row = first + tid / G;
    // A group past the last row holds an empty row (no entries to load or store).
    let live_cols = if row < rows { cols } else { 0 };
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // SAFETY: a live row is inside the buffers, an empty one is never dereferenced; the caller's
    // shape gives `cols / 4 <= G * V`; all 32 lanes of the warp reach the shuffles.
    unsafe { row_in_registers::<V, G>(x_row, y_row, live_cols, t, tid % G, G, |s| group_stats::<G>(s, t)) }
}

/// [`softmax_group`] with 8 lanes per row and 4 vectors per lane: rows of up to 128 columns
/// (+3 when the row is not aligned), 4 rows per warp, 32 rows per block, 64 bytes per lane in
/// flight.
///
/// # Safety
/// As [`softmax_group`].
#[kernel]
pub unsafe fn softmax_group_8x4(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_group::<8, 4>(x, y, rows, cols, t) }
}

/// [`softmax_group`] with 16 lanes per row and 2 vectors per lane: rows of up to 128 columns
/// (+3), 2 rows per warp (PyTorch's choice for such rows), 16 rows per block.
///
/// # Safety
/// As [`softmax_group`].
#[kernel]
pub unsafe fn softmax_group_16x2(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_group::<16, 2>(x, y, rows, cols, t) }
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

// ---------------------------------------------------------------------------------------------
// Persistent kernels: the next row in flight while the current one is reduced and written
// ---------------------------------------------------------------------------------------------
//
// A register-held kernel ([`softmax_warp_8`], [`softmax_block_4`], [`softmax_block_8`]) loads its
// row, then computes and writes it, then exits: between its last load's arrival and the next
// block's first load the SM's share of the row pipeline is idle (the exponentials, the reduction,
// the stores, the block's exit and the next block's start). At 32768 columns a block is 1024
// threads of 64 registers, the whole register file: one row per SM, and that gap is all the SM's.
// The persistent kernels keep each row's warp or block alive over rows `first, first + step, ...`
// and start copying the next row into shared memory ([`async_copy::cp_async_16_after`]) as soon as the
// current one has been read out of it, so its loads fly during the current row's exponentials,
// reduction and stores. Each thread copies exactly the vectors it will hold, into its own slots,
// and reads back only those: the staging needs no barrier.

/// Shared memory of [`softmax_persist_block_4`] / [`softmax_persist_block_8`] for `vectors` per
/// thread of `threads`: one 16-byte slot per vector of the row, then two sets of per-warp
/// [`Stats`] (consecutive rows alternate between them, so that a warp writing the next row's
/// statistics never meets one still reading the current row's).
pub const fn persist_block_shared_bytes(vectors: u32, threads: u32) -> u32 {
    vectors * threads * core::mem::size_of::<F4>() as u32 + 2 * STATS_SHARED_BYTES
}

/// Shared memory of [`softmax_persist_warp_8`]: 8 16-byte slots per lane of a
/// [`WARP_KERNEL_BLOCK`]-thread block (32 KiB).
pub const PERSIST_WARP_SHARED_BYTES: u32 = 8 * WARP_KERNEL_BLOCK * core::mem::size_of::<F4>() as u32;

/// The loop of the persistent kernels: rows `first, first + step, ...` below `rows`, each held
/// in registers by `threads` threads as in [`row_in_registers`], the next one staged.
///
/// For each row the thread waits for its copies ([`async_copy::wait_all`]) and reads its `V`
/// vectors from its slots `stage + tid + k * threads` into registers; right after each read it
/// starts the copy of its vector `k` of the next row into the same slot (issued once the value
/// read is in a register, see [`async_copy::cp_async_16_after`]) and then loads the next row's head or tail
/// scalar; then it finishes the current row ([`Held::key`], [`Held::write`], with
/// `reduce(stats, parity)`, parity alternating between rows). So the next row's loads are in
/// flight through all of the current row's exponentials, reduction and stores.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats at the same address modulo 16 bytes; `first < rows`;
/// `cols / 4 <= V * threads`; `threads == FIXED` unless `FIXED` is 0; `stage + tid + k * threads`
/// (`k < V`) are 16-byte shared-memory slots of this thread only; `reduce` is called by all the
/// row's threads, which all take the same rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn persist_rows<const V: usize, const FIXED: usize>(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    t: f32,
    (first, step): (usize, usize),
    (tid, threads): (usize, usize),
    stage: *mut F4,
    mut reduce: impl FnMut(Stats, usize) -> Stats,
) {
    const { assert!(V <= MAX_VECTORS, "unroll_8! unrolls up to 8 vectors") };
    let sign = if t >= 0.0 { 1.0f32 } else { -1.0 };
    // The thread's index and count, recomputed where each iteration uses them, and its slots
    // and vector indices from those: hoisted ahead of the loop, the 8 slot addresses and vector
    // indices of a thread would stay live across it, some 30 registers more than the row itself
    // needs (96 instead of 64 at 1024 threads, which then cannot launch).
    let fresh = || {
        let threads = if FIXED != 0 {
            FIXED
        } else {
            hint::recompute(threads as u32) as usize
        };
        (hint::recompute(tid as u32) as usize, threads)
    };
    let held_of = |row: usize| {
        let (tid, threads) = fresh();
        Held::<FIXED>::of(x.wrapping_add(row * cols), cols, tid, threads)
    };
    let slot = |k: usize| {
        let (tid, threads) = fresh();
        stage.wrapping_add(tid + k * threads)
    };
    // Starts the copy of vector `k` of the thread in the row `held` describes, once `after` is
    // known.
    let stage_vector = |held: Held<FIXED>, x_row: *const f32, k: usize, after: f32| {
        let src = x_row.wrapping_add(held.offset(k)).cast::<F4>();
        // The slot's address from a base LLVM cannot hoist: its reassociation of
        // `stage + (tid + k * threads)` into `(stage + k * threads) + tid` would otherwise keep
        // 8 hoisted 64-bit addresses live across the loop.
        let (tid, threads) = fresh();
        let dst = hint::recompute_ptr(stage).wrapping_add(tid + k * threads);
        // SAFETY: vector `k` of the thread lies inside the row, 16-byte aligned (the caller checks
        // `valid(k)`); the slot is this thread's, and its previous contents were read before
        // `after` was known.
        unsafe { async_copy::cp_async_16_after(dst, src, after) };
    };
    // SAFETY (scalar loads): a head or tail index is inside its row.
    let scalar_of =
        |held: Held<FIXED>, x_row: *const f32| held.scalar().map_or(0.0, |i| unsafe { mem::load(x_row, i) });

    let mut row = first;
    let mut xs_next = {
        let (held, x_row) = (held_of(row), x.wrapping_add(row * cols));
        unroll_8!(V, |k| {
            if held.valid(k) {
                stage_vector(held, x_row, k, 0.0);
            }
        });
        scalar_of(held, x_row)
    };
    let mut parity = 0;
    loop {
        let held = held_of(row);
        let next = row + step;
        let (next_held, next_row) = (held_of(next), x.wrapping_add(next * cols));
        let more = next < rows;
        async_copy::wait_all();
        let mut v = [F4::ZERO; V];
        unroll_8!(V, |k| {
            if held.valid(k) {
                // SAFETY: the slot holds this thread's copy of vector `k`, landed (waited for).
                v[k] = unsafe { mem::load(slot(k), 0) };
            }
            // The slot's next contents go on their way as soon as its value is in a register.
            if more && next_held.valid(k) {
                stage_vector(next_held, next_row, k, v[k].0[0]);
            }
        });
        let xs = xs_next;
        if more {
            xs_next = scalar_of(next_held, next_row);
        }
        let key = held.key(&v, xs, sign);
        // SAFETY: the row is inside `y`; every thread of the row reaches `reduce`.
        unsafe {
            held.write(v, xs, key, sign, y.wrapping_add(row * cols), t, |s| {
                reduce(s, parity)
            });
        }
        if !more {
            break;
        }
        row = next;
        parity ^= 1;
    }
}

/// Persistent warp-per-row softmax, the next row staged in shared memory: [`softmax_warp_8`]
/// over several rows per warp.
///
/// Warp `w` of block `b` handles rows `b * 8 + w + i * 8 * gridDim.x`; for each, lane `l` holds
/// vectors `l + 32 k` (`k < 8`, rows of up to 1024 columns + 3) in registers, and while the warp
/// reduces (10 shuffles) and writes that row, the lane's 8 vectors of the warp's next row are
/// on their way into its 8 slots of shared memory ([`persist_rows`]).
///
/// Global memory: each entry read once (`cp.async`, through L2 only) and written once, 8 bytes
/// per element, 8 KiB per 1024-column row. Shared memory: 128 bytes per lane, 32 KiB per block
/// ([`PERSIST_WARP_SHARED_BYTES`]); each value is written once and read once, by its own lane.
///
/// Launch: at most `ceil(rows / 8)` blocks of [`WARP_KERNEL_BLOCK`] threads (the host launches
/// as many as are resident at once), [`PERSIST_WARP_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; `cols / 4 <= 256`; the launch shape is as above.
#[kernel]
pub unsafe fn softmax_persist_warp_8(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    const V: usize = 8;
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let (warp_idx, lane) = (tid / warp::SIZE as usize, tid % warp::SIZE as usize);
    let first = thread::block_idx_x() as usize * warps + warp_idx;
    if first >= rows {
        return; // the whole warp leaves together
    }
    let step = thread::grid_dim_x() as usize * warps;
    let stage = shared::dynamic::<F4>().wrapping_add(warp_idx * V * warp::SIZE as usize);
    // SAFETY: the caller's contract; the warp's slots are `8 * 32` of the block's `8 * 256`, lane
    // `l`'s are `l + 32 k`; every lane takes the same rows and reaches the shuffles.
    unsafe {
        persist_rows::<V, { warp::SIZE as usize }>(
            x,
            y,
            rows,
            cols,
            t,
            (first, step),
            (lane, warp::SIZE as usize),
            stage,
            |s, _| warp_stats(s, t),
        )
    }
}

/// Persistent block-per-row softmax, the next row staged in shared memory: the body of
/// [`softmax_persist_block_4`] and [`softmax_persist_block_8`].
///
/// Block `b` handles rows `b, b + gridDim.x, ...`; for each, thread `tid` holds vectors
/// `tid + k * blockDim.x` (`k < V`) in registers and at most one head or tail scalar, the block
/// merges the statistics with shuffles and one barrier ([`block_stats`], into the half of the
/// scratch this row's parity picks), and while it does so and writes the row, each thread's
/// vectors of the block's next row are on their way into its `V` slots of shared memory
/// ([`persist_rows`]).
///
/// Global memory: each entry read once (`cp.async`, through L2 only) and written once, 8 bytes
/// per element. Shared memory: `16 * V` bytes per thread (a whole row: 128 KiB at 32768
/// columns), each value written once and read once by its own thread, plus 512 bytes of
/// statistics ([`persist_block_shared_bytes`]).
///
/// Launch: at most `rows` blocks of a multiple of 32 threads, at most 1024, with
/// `cols / 4 <= V * blockDim.x` (the host launches as many as are resident at once);
/// `persist_block_shared_bytes(V, blockDim.x)` of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
#[inline(always)]
unsafe fn softmax_persist_block<const V: usize>(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    t: f32,
) {
    let first = thread::block_idx_x() as usize;
    if first >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let step = thread::grid_dim_x() as usize;
    let stage = shared::dynamic::<F4>();
    let scratch = stage.wrapping_add(V * threads).cast::<Stats>();
    const SCRATCH_SLOTS: usize = (ROW_BLOCK_MAX / warp::SIZE) as usize;
    // SAFETY: the caller's contract; thread `tid`'s slots are `tid + k * threads`; the scratch
    // halves hold one `Stats` per warp each; every thread takes the same rows and reaches the
    // barrier of each row's reduction.
    unsafe {
        persist_rows::<V, 0>(
            x,
            y,
            rows,
            cols,
            t,
            (first, step),
            (tid, threads),
            stage,
            |s, parity| block_stats(scratch.wrapping_add(parity * SCRATCH_SLOTS), s, t),
        )
    }
}

/// [`softmax_persist_block`] with 4 vectors (16 floats) per thread: rows of up to
/// `16 * blockDim.x` columns, the same blocks as [`softmax_block_4`] (256 threads at 4096
/// columns, 512 at 8192), with 64 bytes of shared memory per thread.
///
/// # Safety
/// As [`softmax_persist_block`].
#[kernel]
pub unsafe fn softmax_persist_block_4(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_persist_block::<4>(x, y, rows, cols, t) }
}

/// [`softmax_persist_block`] with 8 vectors (32 floats) per thread: rows of up to
/// `32 * blockDim.x` columns, the same blocks as [`softmax_block_8`]; at 32768 columns one block
/// of 1024 threads per SM holds a row in registers and stages the next in 128 KiB of shared
/// memory (the over-48 KiB opt-in).
///
/// # Safety
/// As [`softmax_persist_block`].
#[kernel]
pub unsafe fn softmax_persist_block_8(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_persist_block::<8>(x, y, rows, cols, t) }
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
