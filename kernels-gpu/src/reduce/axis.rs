//! Reductions along one axis of a row-major `rows x cols` matrix, one output per row (ndarray's
//! `Axis(1)`) or per column (`Axis(0)`): sums, maxima and the indices of the maxima. The three
//! reductions share each kernel, generic over its [`AxisFold`], whose instances are the entry
//! points (`sum_rows` is [`reduce_rows`](fn@reduce_rows) with [`Sum`]); the host picks the kernel
//! by shape:
//!
//! * per row: a warp per row ([`reduce_rows`](fn@reduce_rows): `sum_rows`, `max_rows`,
//!   `argmax_rows`); 16-byte loads with `group` lanes per row for rows of a multiple of 4 up to
//!   [`VEC_MAX_COLS`] columns ([`reduce_rows_vec`](fn@reduce_rows_vec): `*_rows_vec`); a thread
//!   per row up to [`NARROW_MAX_COLS`] ([`reduce_rows_narrow`](fn@reduce_rows_narrow):
//!   `*_rows_narrow`); a warp per [`SHORT_ROWS`] rows up to [`SHORT_MAX_COLS`]
//!   ([`reduce_rows_short`](fn@reduce_rows_short): `*_rows_short`);
//! * per column: a thread per column and row group, combined in shared memory
//!   ([`reduce_cols`](fn@reduce_cols): `sum_cols`, `max_cols`, `argmax_cols`); a thread per column
//!   ([`reduce_cols_narrow`](fn@reduce_cols_narrow): `*_cols_narrow`);
//! * too few outputs to fill the device: the axis cut into spans, each folded into one partial
//!   ([`reduce_rows_parts`](fn@reduce_rows_parts), [`reduce_cols_parts`](fn@reduce_cols_parts):
//!   `*_rows_parts`, `*_cols_parts`; the argmax's [`argmax_rows_parts`](fn@argmax_rows_parts),
//!   [`argmax_cols_parts`](fn@argmax_cols_parts)), then the partials' `parts x outputs` matrix
//!   reduced by its columns (`sum_cols`, `max_cols`, or [`argmax_parts`](fn@argmax_parts) on
//!   value-index pairs).
//!
//! No atomics: every output and partial is written by one thread, in an order fixed by the shape
//! and the device's residency, so the result is the same every run on one device.

use super::{argmax_combine, warp_argmax, Best};
use crate::gpu::{math, mem, shared, thread, vector, warp};
use crate::kernel;

/// Rows one block of a `*_rows` kernel takes: one per warp.
pub const ROWS_PER_BLOCK: u32 = 8;

/// Threads per block of a `*_rows` kernel.
pub const ROWS_BLOCK: u32 = ROWS_PER_BLOCK * warp::SIZE;

/// The longest rows the `*_rows_narrow` kernels (a thread per row) take; longer rows take a warp
/// each.
pub const NARROW_MAX_COLS: usize = 24;

/// The longest rows the `*_rows_short` kernels (a warp per [`SHORT_ROWS`] rows) take: one round
/// of 4 loads per lane.
pub const SHORT_MAX_COLS: usize = warp::SIZE as usize * UNROLL;

/// The longest rows the `*_rows_vec` kernels take (16 lanes per row, 4 vectors each); longer
/// rows take a warp each with 4-byte loads, which measured faster at 8192 columns.
pub const VEC_MAX_COLS: usize = 256;

/// Rows one warp of a `*_rows_short` kernel takes, all their loads issued before any is folded.
pub const SHORT_ROWS: usize = 4;

/// Threads per block of a `*_rows_narrow` kernel: a row each.
pub const NARROW_BLOCK: u32 = 256;

/// Matrices of fewer rows than this are reduced along `Axis(0)` by the `*_cols_narrow` kernels
/// (a thread per column) whatever their width: the `*_cols` kernels' 32 row groups would each
/// hold less than one round of 4 loads. Taller matrices take them once their columns are at
/// least a quarter of the threads resident on the device (each thread keeps 4 loads in flight).
pub const NARROW_COLS_MAX_ROWS: usize = COLS_BLOCK_Y as usize * UNROLL;

/// Columns one block of a `*_cols` kernel takes (its x extent): a warp reads 32 consecutive
/// floats of a row, 128 contiguous bytes.
pub const COLS_BLOCK_X: u32 = 32;

/// Row groups of one block of a `*_cols` kernel (its y extent): thread `(tx, ty)` folds rows `ty,
/// ty + COLS_BLOCK_Y, ...`; 32 groups make blocks of 1024 threads, so that a matrix of 8192
/// columns (256 blocks) fills the multiprocessors.
pub const COLS_BLOCK_Y: u32 = 32;

/// Elements a thread loads before it folds them (in index order), so that that many loads are
/// in flight where one at a time would leave each thread waiting on each load.
const UNROLL: usize = 4;

/// Dynamic shared memory of a `*_cols` kernel: one partial per thread, 8 bytes each (the
/// largest partial, an argmax's value and index).
pub const COLS_SHARED_BYTES: u32 = COLS_BLOCK_X * COLS_BLOCK_Y * core::mem::size_of::<Best>() as u32;

/// What an axis kernel folds: a running partial per thread, combined over a warp or a block.
pub trait AxisFold {
    /// The running partial.
    type Acc: Copy;
    /// What is written per output.
    type Out: Copy;
    /// The partial of nothing.
    fn identity() -> Self::Acc;
    /// `acc` with element `x`, at index `index` along the reduced axis, folded in after it; a
    /// thread's steps come in increasing index order.
    fn step(acc: Self::Acc, x: f32, index: u32) -> Self::Acc;
    /// Two partials combined, `a` over lower indices than `b`.
    fn combine(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The combination over the warp, returned to every lane.
    fn warp(acc: Self::Acc) -> Self::Acc;
    /// The partial of lane `lane ^ mask` (every lane of the warp calls it).
    fn shuffle_xor(acc: Self::Acc, mask: u32) -> Self::Acc;
    /// The output of a finished partial.
    fn out(acc: Self::Acc) -> Self::Out;
}

/// Sums (f32, in the order the kernels fix).
pub struct Sum;

impl AxisFold for Sum {
    type Acc = f32;
    type Out = f32;
    #[inline(always)]
    fn identity() -> f32 {
        0.0
    }
    #[inline(always)]
    fn step(acc: f32, x: f32, _: u32) -> f32 {
        acc + x
    }
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn warp(acc: f32) -> f32 {
        warp::reduce_sum(acc)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle_xor(acc: f32, mask: u32) -> f32 {
        warp::shfl_xor(acc, mask)
    }
    #[inline(always)]
    fn out(acc: f32) -> f32 {
        acc
    }
}

/// Maxima: NaN if any element is NaN ([`math::max_nan`]).
pub struct Max;

impl AxisFold for Max {
    type Acc = f32;
    type Out = f32;
    #[inline(always)]
    fn identity() -> f32 {
        f32::NEG_INFINITY
    }
    #[inline(always)]
    fn step(acc: f32, x: f32, _: u32) -> f32 {
        math::max_nan(acc, x)
    }
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        math::max_nan(a, b)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn warp(acc: f32) -> f32 {
        warp::reduce_max(acc)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle_xor(acc: f32, mask: u32) -> f32 {
        warp::shfl_xor(acc, mask)
    }
    #[inline(always)]
    fn out(acc: f32) -> f32 {
        acc
    }
}

/// Indices of the maxima, by the family's rule ([`argmax_combine`]: the first NaN, else the
/// first of the largest value).
pub struct Argmax;

impl AxisFold for Argmax {
    type Acc = Best;
    type Out = u32;
    #[inline(always)]
    fn identity() -> Best {
        Best::NONE
    }
    /// The indices of a thread's steps increase, so a later element wins only if it is larger,
    /// or a NaN after none (one compare and a NaN test, where [`argmax_combine`] also compares
    /// the indices).
    #[inline(always)]
    fn step(acc: Best, x: f32, index: u32) -> Best {
        if x > acc.value || (x.is_nan() && !acc.value.is_nan()) {
            Best { value: x, index }
        } else {
            acc
        }
    }
    #[inline(always)]
    fn combine(a: Best, b: Best) -> Best {
        argmax_combine(a, b)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn warp(acc: Best) -> Best {
        warp_argmax(acc)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle_xor(acc: Best, mask: u32) -> Best {
        Best {
            value: warp::shfl_xor(acc.value, mask),
            index: warp::shfl_xor_u32(acc.index, mask),
        }
    }
    /// The index of `acc`; 0 for [`Best::NONE`], which a lane keeps only when none of its
    /// entries is larger than `-inf` (all `-inf`): its first index.
    #[inline(always)]
    fn out(acc: Best) -> u32 {
        if acc.index == Best::NONE.index {
            0
        } else {
            acc.index
        }
    }
}

/// Folds entries `first, first + stride, ...` below `end` of one lane of the reduced axis into
/// `acc`, in index order: `load(i)` reads entry `i` and `fold(acc, e, i)` folds it in. Issues
/// [`UNROLL`] loads before it folds any of them.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn fold_strided<A: Copy, E: Copy>(
    mut acc: A,
    (first, stride, end): (usize, usize, usize),
    load: impl Fn(usize) -> E,
    fold: impl Fn(A, E, usize) -> A,
) -> A {
    let mut i = first;
    while i + (UNROLL - 1) * stride < end {
        let v: [E; UNROLL] = core::array::from_fn(|k| load(i + k * stride));
        for (k, &e) in v.iter().enumerate() {
            acc = fold(acc, e, i + k * stride);
        }
        i += UNROLL * stride;
    }
    while i < end {
        acc = fold(acc, load(i), i);
        i += stride;
    }
    acc
}

/// Folds entries `first, first + stride, ...` below `end` of column `col` of the row-major
/// `x` (`cols` columns) into `acc` with `F`, in row order: [`fold_strided`] for a column, written
/// with one pointer stepping down the column and the loads at fixed multiples of one stride
/// from it, so that few registers stay live across the loop and ptxas keeps the [`UNROLL`]
/// loads in flight (with four pointers, one per load, it interleaved loads and folds).
///
/// # Safety
/// `x` holds `end * cols` floats of device memory (at least); `col < cols`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn fold_column<F: AxisFold>(
    mut acc: F::Acc,
    x: *const f32,
    (col, cols): (usize, usize),
    (first, stride, end): (usize, usize, usize),
) -> F::Acc {
    let step = stride * cols;
    let mut p = x.wrapping_add(first * cols + col);
    let mut r = first;
    while r + (UNROLL - 1) * stride < end {
        // SAFETY: rows `r + k * stride < end` of column `col`, at `p + k * step`.
        let v: [f32; UNROLL] = core::array::from_fn(|k| unsafe { mem::load(p, k * step) });
        for (k, &v) in v.iter().enumerate() {
            acc = F::step(acc, v, (r + k * stride) as u32);
        }
        p = p.wrapping_add(UNROLL * step);
        r += UNROLL * stride;
    }
    while r < end {
        // SAFETY: row `r < end` of column `col`.
        acc = F::step(acc, unsafe { mem::load(p, 0) }, r as u32);
        p = p.wrapping_add(step);
        r += stride;
    }
    acc
}

/// The fold `F` of columns `lo..hi` of row `row` by one warp, returned to every lane: lane `l`
/// folds columns `lo + l, lo + l + 32, ...` (each step a coalesced 128-byte read of the row by
/// the warp), then the warp combines its lanes with shuffles. For `row >= rows` the lanes fold
/// nothing but still take part in the shuffles.
///
/// # Safety
/// `x` holds `rows * cols` floats of device memory; `lo <= hi <= cols`; the whole warp calls it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn warp_fold_row<F: AxisFold>(
    x: *const f32,
    (row, rows, cols): (usize, usize, usize),
    (lo, hi): (usize, usize),
) -> F::Acc {
    let lanes = warp::SIZE as usize;
    let lane = thread::thread_idx_x() as usize % lanes;
    let mut acc = F::identity();
    if row < rows {
        let base = row * cols;
        acc = fold_strided(
            acc,
            (lo + lane, lanes, hi),
            // SAFETY: `row < rows` and `i < hi <= cols`.
            |i| unsafe { mem::load(x, base + i) },
            |acc, v, i| F::step(acc, v, i as u32),
        );
    }
    F::warp(acc)
}

/// The fold `F` of entries `lo..hi` of column `col` by one block: thread `(tx, ty)` folds entries
/// `lo + ty, lo + ty + 32, ...` of its column (`fold_run(acc, (first, stride, end))` folds the
/// entries `first, first + stride, ...` below `end` into `acc`; the 32 threads of a row of the
/// block read 32 adjacent columns), writes its partial to shared memory, and after a barrier
/// thread `(tx, 0)` combines the [`COLS_BLOCK_Y`] partials of its column in order. Returns the
/// column's fold on threads `(tx, 0)` with `col < cols`, `None` on the others. Threads with
/// `col >= cols` fold nothing but pass the barrier.
///
/// # Safety
/// Every thread of a [`COLS_BLOCK_X`] x [`COLS_BLOCK_Y`] block calls it, with the launch's
/// [`COLS_SHARED_BYTES`] of dynamic shared memory; `fold_run` may read entries `lo..hi` of
/// column `col` when `col < cols`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn block_fold_col<F: AxisFold>(
    (col, cols): (usize, usize),
    (lo, hi): (usize, usize),
    fold_run: impl Fn(F::Acc, (usize, usize, usize)) -> F::Acc,
) -> Option<F::Acc> {
    let (tx, ty) = (thread::thread_idx_x() as usize, thread::thread_idx_y() as usize);
    let (bx, by) = (COLS_BLOCK_X as usize, COLS_BLOCK_Y as usize);
    let mut acc = F::identity();
    if col < cols {
        acc = fold_run(acc, (lo + ty, by, hi));
    }
    let scratch = shared::dynamic::<F::Acc>();
    // SAFETY: `ty * bx + tx < COLS_BLOCK_X * COLS_BLOCK_Y` partials of at most 8 bytes, the
    // launch's shared memory.
    unsafe {
        mem::store(scratch, ty * bx + tx, acc);
        thread::sync_threads();
    }
    if ty != 0 || col >= cols {
        return None;
    }
    let mut total = acc;
    for k in 1..by {
        // SAFETY: `k * bx + tx` is in the block's scratch, written before the barrier.
        total = F::combine(total, unsafe { mem::load(scratch, k * bx + tx) });
    }
    Some(total)
}

/// `out[r]` = the fold `F` of row `r`, for `r < rows`: a warp per row.
///
/// One warp per row (warp `w` of block `g` takes row `g * ROWS_PER_BLOCK + w`) through
/// `warp_fold_row`, 4 loads of each lane issued before they are folded in order; lane 0 writes
/// `out[r]`.
///
/// Instances, one PTX entry each:
/// * `sum_rows` ([`Sum`]): `out[r] = x[r][0] + ... + x[r][cols - 1]`;
/// * `max_rows` ([`Max`]): the largest entry of row `r` (NaN if it holds one);
/// * `argmax_rows` ([`Argmax`]): the column of row `r`'s largest entry (its first NaN, else the
///   first of the largest value).
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per row (4 bytes). Launch:
/// 1-D blocks of exactly [`ROWS_BLOCK`] threads, `ceil(rows / ROWS_PER_BLOCK)` blocks, no shared
/// memory.
///
/// # Safety
/// `x` holds `rows * cols` floats and `out` `rows` outputs of device memory; they do not overlap;
/// `cols <= u32::MAX` (the argmax's indices).
// Barriers: none, a warp per row exchanges by shuffles only.
#[kernel(
    instances(sum_rows = Sum, max_rows = Max, argmax_rows = Argmax),
    block(ROWS_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_rows<F: AxisFold>(
    x: *const f32,
    out: *mut <F as AxisFold>::Out,
    rows: usize,
    cols: usize,
) {
    let tid = thread::thread_idx_x() as usize;
    let lanes = warp::SIZE as usize;
    let (w, lane) = (tid / lanes, tid % lanes);
    let row = thread::block_idx_x() as usize * ROWS_PER_BLOCK as usize + w;
    // SAFETY: the caller's contract; the whole row.
    let total = unsafe { warp_fold_row::<F>(x, (row, rows, cols), (0, cols)) };
    if row < rows && lane == 0 {
        // SAFETY: `row < rows`.
        unsafe { mem::store(out, row, F::out(total)) }
    }
}

/// `out[r]` = the fold `F` of row `r`, for `r < rows`, a thread per row: for rows of at most
/// [`NARROW_MAX_COLS`] columns, where a warp per row would leave most lanes idle. Thread `t` of
/// block `g` folds row `g * NARROW_BLOCK + t` in column order, 4 loads issued before they are
/// folded; the warp's loads cover its 32 rows' adjacent bytes, each 128-byte line read through L1
/// by the loads of consecutive columns.
///
/// Instances: `sum_rows_narrow` ([`Sum`]), `max_rows_narrow` ([`Max`]), `argmax_rows_narrow`
/// ([`Argmax`]), each [`reduce_rows`](fn@reduce_rows)'s result for such rows.
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per row. Launch: 1-D blocks
/// of [`NARROW_BLOCK`] threads, `ceil(rows / NARROW_BLOCK)` blocks, no shared memory.
///
/// # Safety
/// As [`reduce_rows`](fn@reduce_rows).
// Barriers: none, a thread per row exchanges nothing.
#[kernel(
    instances(sum_rows_narrow = Sum, max_rows_narrow = Max, argmax_rows_narrow = Argmax),
    block(NARROW_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_rows_narrow<F: AxisFold>(
    x: *const f32,
    out: *mut <F as AxisFold>::Out,
    rows: usize,
    cols: usize,
) {
    let row = thread::block_idx_x() as usize * NARROW_BLOCK as usize + thread::thread_idx_x() as usize;
    if row < rows {
        let base = row * cols;
        let total = fold_strided(
            F::identity(),
            (0, 1, cols),
            // SAFETY: `row < rows`, `j < cols`.
            |j| unsafe { mem::load(x, base + j) },
            |acc, v, j| F::step(acc, v, j as u32),
        );
        // SAFETY: `row < rows`.
        unsafe { mem::store(out, row, F::out(total)) }
    }
}

/// `out[r]` = the fold `F` of row `r`, for `r < rows`, a warp per [`SHORT_ROWS`] rows: for rows
/// of at most [`SHORT_MAX_COLS`] columns, where a warp per row would keep at most one round of
/// loads in flight. Warp `w` of block `g` takes rows `(g * ROWS_PER_BLOCK + w) * SHORT_ROWS ..`;
/// lane `l` loads columns `l, l + 32, ...` of each of them (up to 16 loads, all issued before any
/// is folded; each a coalesced read of a row by the warp), folds them row by row in column order,
/// the warp combines each row with shuffles, and lane 0 writes the outputs.
///
/// Instances: `sum_rows_short` ([`Sum`]), `max_rows_short` ([`Max`]), `argmax_rows_short`
/// ([`Argmax`]), each [`reduce_rows`](fn@reduce_rows)'s result for such rows.
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per row. Launch: 1-D blocks
/// of exactly [`ROWS_BLOCK`] threads, `ceil(rows / (ROWS_PER_BLOCK * SHORT_ROWS))` blocks, no
/// shared memory.
///
/// # Safety
/// As [`reduce_rows`](fn@reduce_rows), with `cols <= SHORT_MAX_COLS`.
// Barriers: none, a warp per 4 short rows exchanges by shuffles only.
#[kernel(
    instances(sum_rows_short = Sum, max_rows_short = Max, argmax_rows_short = Argmax),
    block(ROWS_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_rows_short<F: AxisFold>(
    x: *const f32,
    out: *mut <F as AxisFold>::Out,
    rows: usize,
    cols: usize,
) {
    let tid = thread::thread_idx_x() as usize;
    let lanes = warp::SIZE as usize;
    let (w, lane) = (tid / lanes, tid % lanes);
    let first = (thread::block_idx_x() as usize * ROWS_PER_BLOCK as usize + w) * SHORT_ROWS;
    let loaded = |j: usize, k: usize| first + j < rows && lane + k * lanes < cols;
    let v: [[f32; UNROLL]; SHORT_ROWS] = core::array::from_fn(|j| {
        core::array::from_fn(|k| {
            if loaded(j, k) {
                // SAFETY: row `first + j < rows`, column `lane + 32 k < cols`.
                unsafe { mem::load(x, (first + j) * cols + lane + k * lanes) }
            } else {
                0.0
            }
        })
    });
    for (j, row) in v.iter().enumerate() {
        let mut acc = F::identity();
        for (k, &e) in row.iter().enumerate() {
            if loaded(j, k) {
                acc = F::step(acc, e, (lane + k * lanes) as u32);
            }
        }
        let total = F::warp(acc);
        if first + j < rows && lane == 0 {
            // SAFETY: `first + j < rows`.
            unsafe { mem::store(out, first + j, F::out(total)) }
        }
    }
}

/// `out[r]` = the fold `F` of row `r`, for `r < rows`, with 16-byte loads and `group` lanes per
/// row: for rows of a multiple of 4 columns. A warp takes `32 / group` adjacent rows (warp `w` of
/// block `g`: rows `(g * ROWS_PER_BLOCK + w) * 32 / group ..`); lane `i` of a row's group folds its
/// 4-float vectors `i, i + group, ...` (4 loads issued before they are folded, each a coalesced
/// read of `16 group` contiguous bytes of the row by the group), then the group combines its
/// lanes with `log2(group)` shuffles and its first lane writes `out[r]`. The host takes `group` =
/// the power of two that gives each lane at most 4 vectors of a row (rows of up to
/// [`VEC_MAX_COLS`] columns: up to 16 lanes), so that short rows need few shuffles per element;
/// the lanes loop over longer rows.
///
/// Instances: `sum_rows_vec` ([`Sum`]), `max_rows_vec` ([`Max`]), `argmax_rows_vec`
/// ([`Argmax`]), each [`reduce_rows`](fn@reduce_rows)'s result for such rows.
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per row. Launch: 1-D blocks
/// of exactly [`ROWS_BLOCK`] threads, `ceil(rows / (ROWS_PER_BLOCK * 32 / group))` blocks, no
/// shared memory.
///
/// # Safety
/// As [`reduce_rows`](fn@reduce_rows); `x` 16-byte aligned, `cols % 4 == 0`, `group` a power of
/// two up to 32.
// Barriers: none, lanes per row exchange by shuffles only.
#[kernel(
    instances(sum_rows_vec = Sum, max_rows_vec = Max, argmax_rows_vec = Argmax),
    block(ROWS_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_rows_vec<F: AxisFold>(
    x: *const f32,
    out: *mut <F as AxisFold>::Out,
    rows: usize,
    cols: usize,
    group: usize,
) {
    let tid = thread::thread_idx_x() as usize;
    let lanes = warp::SIZE as usize;
    let group = group.clamp(1, lanes);
    let (w, lane) = (tid / lanes, tid % lanes);
    let row = (thread::block_idx_x() as usize * ROWS_PER_BLOCK as usize + w) * (lanes / group) + lane / group;
    let i = lane % group;
    let mut acc = F::identity();
    if row < rows {
        let base = row * cols;
        acc = fold_strided(
            acc,
            (i, group, cols / 4),
            // SAFETY: vector `v < cols / 4` of row `row < rows`, 16-byte aligned (`x` is and
            // `cols % 4 == 0`).
            |v| unsafe { vector::load4(x, base + 4 * v) },
            |mut acc, f: vector::F4, v| {
                for (e, &x) in f.0.iter().enumerate() {
                    acc = F::step(acc, x, (4 * v + e) as u32);
                }
                acc
            },
        );
    }
    let mut mask = group / 2;
    while mask > 0 {
        acc = F::combine(acc, F::shuffle_xor(acc, mask as u32));
        mask /= 2;
    }
    if row < rows && i == 0 {
        // SAFETY: `row < rows`.
        unsafe { mem::store(out, row, F::out(acc)) }
    }
}

/// The split pass of a row reduction whose rows are too few to fill the device: each row's
/// columns are cut into `parts = ceil(cols / span)` spans of `span`, and warp `u` of the grid
/// (block `g`, warp `w`: `u = g * ROWS_PER_BLOCK + w`) folds span `u % parts` of row
/// `u / parts` through `warp_fold_row`. Returns, on lane 0 of a warp with a row, the partial
/// and its slot `part * rows + row`: the partials form a `parts x rows` matrix whose columns
/// the finish reduces.
///
/// Launch: as [`reduce_rows`](fn@reduce_rows), `ceil(rows * parts / ROWS_PER_BLOCK)` blocks.
///
/// # Safety
/// `x` holds `rows * cols` floats of device memory; `span >= 1`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn rows_parts<F: AxisFold>(
    x: *const f32,
    rows: usize,
    cols: usize,
    span: usize,
) -> Option<(usize, F::Acc)> {
    let tid = thread::thread_idx_x() as usize;
    let lanes = warp::SIZE as usize;
    let (w, lane) = (tid / lanes, tid % lanes);
    let unit = thread::block_idx_x() as usize * ROWS_PER_BLOCK as usize + w;
    let span = span.max(1);
    let parts = cols.div_ceil(span).max(1);
    let (row, part) = (unit / parts, unit % parts);
    let lo = (part * span).min(cols);
    let hi = (lo + span).min(cols);
    // SAFETY: `lo <= hi <= cols`; the caller's contract.
    let total = unsafe { warp_fold_row::<F>(x, (row, rows, cols), (lo, hi)) };
    (row < rows && lane == 0).then_some((part * rows + row, total))
}

/// `out[c]` = the fold `F` of column `c`, for `c < cols`: a block per 32 columns.
///
/// Block `g` takes columns `g * 32 ..` through `block_fold_col` over all rows (each load, the 32
/// threads of a row of the block read 128 contiguous bytes; 4 loads issued before they are
/// folded in order); thread `(tx, 0)` writes `out[c]`.
///
/// Instances, one PTX entry each:
/// * `sum_cols` ([`Sum`]): `out[c] = x[0][c] + ... + x[rows - 1][c]` (also the finish of the
///   split sums, on their `parts x outputs` partials);
/// * `max_cols` ([`Max`]): the largest entry of column `c` (NaN if it holds one; also the finish
///   of the split maxima);
/// * `argmax_cols` ([`Argmax`]): the row of column `c`'s largest entry (its first NaN, else the
///   first of the largest value).
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per column (4 bytes).
/// Launch: 2-D blocks of exactly [`COLS_BLOCK_X`] x [`COLS_BLOCK_Y`] threads, `ceil(cols / 32)`
/// blocks along x, [`COLS_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` holds `rows * cols` floats and `out` `cols` outputs of device memory; they do not overlap;
/// `rows <= u32::MAX` (the argmax's indices).
// Barriers: one, before the block's row groups meet in shared memory.
#[kernel(
    instances(sum_cols = Sum, max_cols = Max, argmax_cols = Argmax),
    block(COLS_BLOCK_X * COLS_BLOCK_Y),
    barriers(1)
)]
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_cols<F: AxisFold>(
    x: *const f32,
    out: *mut <F as AxisFold>::Out,
    rows: usize,
    cols: usize,
) {
    let col = thread::block_idx_x() as usize * COLS_BLOCK_X as usize + thread::thread_idx_x() as usize;
    // SAFETY: the block calls it; `load` reads `r < rows`, `col < cols`.
    let total = unsafe {
        block_fold_col::<F>((col, cols), (0, rows), |acc, run| {
            fold_column::<F>(acc, x, (col, cols), run)
        })
    };
    if let Some(total) = total {
        // SAFETY: `col < cols`.
        unsafe { mem::store(out, col, F::out(total)) }
    }
}

/// `out[c]` = the fold `F` of column `c`, for `c < cols`, a thread per column: for matrices wide
/// enough to fill the device that way, or with fewer than [`NARROW_COLS_MAX_ROWS`] rows (too few
/// for [`reduce_cols`](fn@reduce_cols)' row groups). Thread `t` of block `g` folds column `g *
/// NARROW_BLOCK + t` in row order, 4 loads issued before they are folded; each load of a warp
/// reads 32 adjacent columns of a row, 128 contiguous bytes.
///
/// Instances: `sum_cols_narrow` ([`Sum`]), `max_cols_narrow` ([`Max`]), `argmax_cols_narrow`
/// ([`Argmax`]), each [`reduce_cols`](fn@reduce_cols)' result.
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per column. Launch: 1-D
/// blocks of [`NARROW_BLOCK`] threads, `ceil(cols / NARROW_BLOCK)` blocks, no shared memory.
///
/// # Safety
/// As [`reduce_cols`](fn@reduce_cols).
// Barriers: none, a thread per column exchanges nothing.
#[kernel(
    instances(sum_cols_narrow = Sum, max_cols_narrow = Max, argmax_cols_narrow = Argmax),
    block(NARROW_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_cols_narrow<F: AxisFold>(
    x: *const f32,
    out: *mut <F as AxisFold>::Out,
    rows: usize,
    cols: usize,
) {
    let col = thread::block_idx_x() as usize * NARROW_BLOCK as usize + thread::thread_idx_x() as usize;
    if col < cols {
        // SAFETY: rows `0..rows` of column `col < cols`.
        let total = unsafe { fold_column::<F>(F::identity(), x, (col, cols), (0, 1, rows)) };
        // SAFETY: `col < cols`.
        unsafe { mem::store(out, col, F::out(total)) }
    }
}

/// The split pass of a column reduction whose columns are too few to fill the device: block
/// `(g, p)` folds columns `g * 32 ..` over rows `p * span .. min((p + 1) * span, rows)` through
/// `block_fold_col`. Returns, on threads `(tx, 0)` with a column, the partial and its slot
/// `p * cols + col`: the partials form a `parts x cols` matrix whose columns the finish reduces.
///
/// Launch: as [`reduce_cols`](fn@reduce_cols), `parts = ceil(rows / span)` blocks along y.
///
/// # Safety
/// As [`reduce_cols`](fn@reduce_cols)'s for `x`; `span >= 1`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn cols_parts<F: AxisFold>(
    x: *const f32,
    rows: usize,
    cols: usize,
    span: usize,
) -> Option<(usize, F::Acc)> {
    let col = thread::block_idx_x() as usize * COLS_BLOCK_X as usize + thread::thread_idx_x() as usize;
    let part = thread::block_idx_y() as usize;
    let lo = (part * span.max(1)).min(rows);
    let hi = (lo + span.max(1)).min(rows);
    // SAFETY: the block calls it; `load` reads `r < hi <= rows`, `col < cols`.
    let total = unsafe {
        block_fold_col::<F>((col, cols), (lo, hi), |acc, run| {
            fold_column::<F>(acc, x, (col, cols), run)
        })
    };
    total.map(|t| (part * cols + col, t))
}

/// The split pass of [`reduce_rows`](fn@reduce_rows) for rows too few to fill the device:
/// `partials[p * rows + r]` = the fold `F` of span `p` (columns `p * span ..`, `ceil(cols /
/// span)` spans) of row `r`, a warp per span (`rows_parts`); the column kernel of the same fold
/// ([`reduce_cols`](fn@reduce_cols)) on the `parts x rows` partials finishes.
///
/// Instances: `sum_rows_parts` ([`Sum`], finished by `sum_cols`), `max_rows_parts` ([`Max`],
/// finished by `max_cols`); the argmax's split pass writes pairs: [`argmax_rows_parts`](fn@argmax_rows_parts).
///
/// Global memory: reads `4 rows cols` bytes, writes 4 per span. Launch: as `rows_parts`.
///
/// # Safety
/// As [`reduce_rows`](fn@reduce_rows), `partials` holding `rows * ceil(cols / span)` partials;
/// `span >= 1`.
// Barriers: none, as `reduce_rows`.
#[kernel(instances(sum_rows_parts = Sum, max_rows_parts = Max), block(ROWS_BLOCK), barriers(0))]
#[inline(always)]
pub unsafe fn reduce_rows_parts<F: AxisFold>(
    x: *const f32,
    partials: *mut <F as AxisFold>::Acc,
    rows: usize,
    cols: usize,
    span: usize,
) {
    // SAFETY: forwarded contract; the slot is below `rows * parts`.
    unsafe {
        if let Some((slot, acc)) = rows_parts::<F>(x, rows, cols, span) {
            mem::store(partials, slot, acc);
        }
    }
}

/// The split pass of [`reduce_cols`](fn@reduce_cols) for columns too few to fill the device:
/// `partials[p * cols + c]` = the fold `F` of span `p` (rows `p * span ..`, one span per block row
/// of the grid) of column `c` (`cols_parts`); the column kernel of the same fold on the
/// `parts x cols` partials finishes.
///
/// Instances: `sum_cols_parts` ([`Sum`], finished by `sum_cols`), `max_cols_parts` ([`Max`],
/// finished by `max_cols`); the argmax's split pass writes pairs: [`argmax_cols_parts`](fn@argmax_cols_parts).
///
/// Global memory: reads `4 rows cols` bytes, writes 4 per span and column. Launch: as
/// `cols_parts`.
///
/// # Safety
/// As [`reduce_cols`](fn@reduce_cols), `partials` holding `cols * ceil(rows / span)` partials;
/// `span >= 1`; the grid's y extent is `ceil(rows / span)`.
// Barriers: one, as `reduce_cols`.
#[kernel(
    instances(sum_cols_parts = Sum, max_cols_parts = Max),
    block(COLS_BLOCK_X * COLS_BLOCK_Y),
    barriers(1)
)]
#[inline(always)]
pub unsafe fn reduce_cols_parts<F: AxisFold>(
    x: *const f32,
    partials: *mut <F as AxisFold>::Acc,
    rows: usize,
    cols: usize,
    span: usize,
) {
    // SAFETY: forwarded contract; the slot is below `cols * parts`.
    unsafe {
        if let Some((slot, acc)) = cols_parts::<F>(x, rows, cols, span) {
            mem::store(partials, slot, acc);
        }
    }
}

/// [`reduce_rows_parts`](fn@reduce_rows_parts) with argmaxes: each span's best value and its
/// column in `values` and `indices`, finished by [`argmax_parts`](fn@argmax_parts). Writes 8
/// bytes per span.
///
/// # Safety
/// As [`reduce_rows_parts`](fn@reduce_rows_parts), `values` and `indices` holding the partials.
// Barriers: none, as `reduce_rows`.
#[kernel(block(ROWS_BLOCK), barriers(0))]
pub unsafe fn argmax_rows_parts(
    x: *const f32,
    values: *mut f32,
    indices: *mut u32,
    rows: usize,
    cols: usize,
    span: usize,
) {
    // SAFETY: forwarded contract; the slot is below `rows * parts`.
    unsafe {
        if let Some((slot, best)) = rows_parts::<Argmax>(x, rows, cols, span) {
            mem::store(values, slot, best.value);
            mem::store(indices, slot, best.index);
        }
    }
}

/// [`reduce_cols_parts`](fn@reduce_cols_parts) with argmaxes: each span's best value and its row
/// in `values` and `indices`, finished by [`argmax_parts`](fn@argmax_parts). Writes 8 bytes per
/// span and column.
///
/// # Safety
/// As [`reduce_cols_parts`](fn@reduce_cols_parts), `values` and `indices` holding the partials.
// Barriers: one, as `reduce_cols`.
#[kernel(block(COLS_BLOCK_X * COLS_BLOCK_Y), barriers(1))]
pub unsafe fn argmax_cols_parts(
    x: *const f32,
    values: *mut f32,
    indices: *mut u32,
    rows: usize,
    cols: usize,
    span: usize,
) {
    // SAFETY: forwarded contract; the slot is below `cols * parts`.
    unsafe {
        if let Some((slot, best)) = cols_parts::<Argmax>(x, rows, cols, span) {
            mem::store(values, slot, best.value);
            mem::store(indices, slot, best.index);
        }
    }
}

/// `out[c]` = the index of the best of the pairs `(values[p * outputs + c], indices[p *
/// outputs + c])`, `p < parts` (by [`argmax_combine`]): the finish of
/// [`argmax_rows_parts`](fn@argmax_rows_parts) and [`argmax_cols_parts`](fn@argmax_cols_parts),
/// as [`reduce_cols`](fn@reduce_cols) on the `parts x outputs` pairs.
///
/// Reads 8 bytes per pair, writes 4 per output. Launch as `argmax_cols` on `outputs` columns.
///
/// # Safety
/// `values` and `indices` hold `parts * outputs` elements, `out` `outputs`, of device memory.
// Barriers: one, as `reduce_cols`.
#[kernel(block(COLS_BLOCK_X * COLS_BLOCK_Y), barriers(1))]
pub unsafe fn argmax_parts(
    values: *const f32,
    indices: *const u32,
    out: *mut u32,
    parts: usize,
    outputs: usize,
) {
    let col = thread::block_idx_x() as usize * COLS_BLOCK_X as usize + thread::thread_idx_x() as usize;
    // SAFETY: the block calls it; `load` reads pair `p * outputs + col`, `p < parts`,
    // `col < outputs`.
    let total = unsafe {
        block_fold_col::<Argmax>((col, outputs), (0, parts), |acc, run| {
            fold_strided(
                acc,
                run,
                |p| Best {
                    value: mem::load(values, p * outputs + col),
                    index: mem::load(indices, p * outputs + col),
                },
                |a, b, _| argmax_combine(a, b),
            )
        })
    };
    if let Some(total) = total {
        // SAFETY: `col < outputs`.
        unsafe { mem::store(out, col, Argmax::out(total)) }
    }
}
