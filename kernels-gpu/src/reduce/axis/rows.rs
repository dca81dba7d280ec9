//! One output per row: a warp per row ([`reduce_rows`](fn@reduce_rows)), a thread per row
//! ([`reduce_rows_narrow`](fn@reduce_rows_narrow)), a warp per [`SHORT_ROWS`] rows
//! ([`reduce_rows_short`](fn@reduce_rows_short)), `group` lanes per row with 16-byte loads
//! ([`reduce_rows_vec`](fn@reduce_rows_vec)).

use super::fold::{fold_strided, warp_fold_row, Argmax, AxisFold, Max, Sum};
use super::{NARROW_BLOCK, ROWS_BLOCK, ROWS_PER_BLOCK, SHORT_ROWS, UNROLL};
use crate::gpu::{mem, thread, vector, warp};
use crate::kernel;

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
/// [`NARROW_MAX_COLS`](super::NARROW_MAX_COLS) columns, where a warp per row would leave most lanes
/// idle. Thread `t` of block `g` folds row `g * NARROW_BLOCK + t` in column order, 4 loads issued
/// before they are folded; the warp's loads cover its 32 rows' adjacent bytes, each 128-byte line
/// read through L1 by the loads of consecutive columns.
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
/// of at most [`SHORT_MAX_COLS`](super::SHORT_MAX_COLS) columns, where a warp per row would keep at
/// most one round of loads in flight. Warp `w` of block `g` takes rows `(g * ROWS_PER_BLOCK + w) *
/// SHORT_ROWS ..`; lane `l` loads columns `l, l + 32, ...` of each of them (up to 16 loads, all
/// issued before any is folded; each a coalesced read of a row by the warp), folds them row by row
/// in column order, the warp combines each row with shuffles, and lane 0 writes the outputs.
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
/// [`VEC_MAX_COLS`](super::VEC_MAX_COLS) columns: up to 16 lanes), so that short rows need few
/// shuffles per element; the lanes loop over longer rows.
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
