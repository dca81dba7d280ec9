//! Too few outputs to fill the device: the reduced axis cut into spans, each folded into one
//! partial ([`reduce_rows_parts`](fn@reduce_rows_parts), [`reduce_cols_parts`](fn@reduce_cols_parts),
//! the argmax's [`argmax_rows_parts`](fn@argmax_rows_parts) and
//! [`argmax_cols_parts`](fn@argmax_cols_parts)), and [`argmax_parts`](fn@argmax_parts), the
//! argmax's finish on the value-index pairs.

use super::super::{argmax_combine, Best};
use super::fold::{block_fold_col, fold_column, fold_strided, warp_fold_row, Argmax, AxisFold, Max, Sum};
use super::{COLS_BLOCK_X, COLS_BLOCK_Y, ROWS_BLOCK, ROWS_PER_BLOCK};
use crate::gpu::{mem, thread, warp};
use crate::kernel;

/// The split pass of a row reduction whose rows are too few to fill the device: each row's
/// columns are cut into `parts = ceil(cols / span)` spans of `span`, and warp `u` of the grid
/// (block `g`, warp `w`: `u = g * ROWS_PER_BLOCK + w`) folds span `u % parts` of row
/// `u / parts` through `warp_fold_row`. Returns, on lane 0 of a warp with a row, the partial
/// and its slot `part * rows + row`: the partials form a `parts x rows` matrix whose columns
/// the finish reduces.
///
/// Launch: as [`reduce_rows`](fn@super::reduce_rows), `ceil(rows * parts / ROWS_PER_BLOCK)` blocks.
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

/// The split pass of a column reduction whose columns are too few to fill the device: block
/// `(g, p)` folds columns `g * 32 ..` over rows `p * span .. min((p + 1) * span, rows)` through
/// `block_fold_col`. Returns, on threads `(tx, 0)` with a column, the partial and its slot
/// `p * cols + col`: the partials form a `parts x cols` matrix whose columns the finish reduces.
///
/// Launch: as [`reduce_cols`](fn@super::reduce_cols), `parts = ceil(rows / span)` blocks along y.
///
/// # Safety
/// As [`reduce_cols`](fn@super::reduce_cols)'s for `x`; `span >= 1`.
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

/// The split pass of [`reduce_rows`](fn@super::reduce_rows) for rows too few to fill the device:
/// `partials[p * rows + r]` = the fold `F` of span `p` (columns `p * span ..`, `ceil(cols /
/// span)` spans) of row `r`, a warp per span (`rows_parts`); the column kernel of the same fold
/// ([`reduce_cols`](fn@super::reduce_cols)) on the `parts x rows` partials finishes.
///
/// Instances: `sum_rows_parts` ([`Sum`], finished by `sum_cols`), `max_rows_parts` ([`Max`],
/// finished by `max_cols`); the argmax's split pass writes pairs: [`argmax_rows_parts`](fn@argmax_rows_parts).
///
/// Global memory: reads `4 rows cols` bytes, writes 4 per span. Launch: as `rows_parts`.
///
/// # Safety
/// As [`reduce_rows`](fn@super::reduce_rows), `partials` holding `rows * ceil(cols / span)` partials;
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

/// The split pass of [`reduce_cols`](fn@super::reduce_cols) for columns too few to fill the device:
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
/// As [`reduce_cols`](fn@super::reduce_cols), `partials` holding `cols * ceil(rows / span)` partials;
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
/// as [`reduce_cols`](fn@super::reduce_cols) on the `parts x outputs` pairs.
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
