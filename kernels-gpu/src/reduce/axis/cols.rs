//! One output per column: a block per 32 columns ([`reduce_cols`](fn@reduce_cols)), a thread
//! per column ([`reduce_cols_narrow`](fn@reduce_cols_narrow)).

use super::fold::{block_fold_col, fold_column, Argmax, AxisFold, Max, Sum};
use super::{COLS_BLOCK_X, COLS_BLOCK_Y, NARROW_BLOCK};
use crate::gpu::{mem, thread};
use crate::kernel;

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
/// blocks along x, [`COLS_SHARED_BYTES`](super::COLS_SHARED_BYTES) of dynamic shared memory.
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
/// enough to fill the device that way, or with fewer than
/// [`NARROW_COLS_MAX_ROWS`](super::NARROW_COLS_MAX_ROWS) rows (too few for
/// [`reduce_cols`](fn@reduce_cols)' row groups). Thread `t` of block `g` folds column `g *
/// NARROW_BLOCK + t` in row order, 4 loads issued before they are folded; each load of a warp reads
/// 32 adjacent columns of a row, 128 contiguous bytes.
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
