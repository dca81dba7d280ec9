//! Sums along one axis of a row-major `rows x cols` matrix: [`sum_rows`](fn@sum_rows) (one sum
//! per row, ndarray's `sum_axis(Axis(1))`) and [`sum_cols`](fn@sum_cols) (one per column,
//! `sum_axis(Axis(0))`). One launch each, no atomics: every output is written by one thread, in
//! an order fixed by the shape, so the result is the same every run.

use crate::gpu::{mem, shared, thread, warp};
use crate::kernel;

/// Rows one block of [`sum_rows`](fn@sum_rows) takes: one per warp.
pub const ROWS_PER_BLOCK: u32 = 8;

/// Threads per block of [`sum_rows`](fn@sum_rows).
pub const ROWS_BLOCK: u32 = ROWS_PER_BLOCK * warp::SIZE;

/// Columns one block of [`sum_cols`](fn@sum_cols) takes (its x extent): a warp reads 32
/// consecutive floats of a row, 128 contiguous bytes.
pub const COLS_BLOCK_X: u32 = 32;

/// Row groups of one block of [`sum_cols`](fn@sum_cols) (its y extent): thread `(tx, ty)` adds
/// rows `ty, ty + COLS_BLOCK_Y, ...`, so 8 loads of a column are in flight at once.
pub const COLS_BLOCK_Y: u32 = 8;

/// Dynamic shared memory of [`sum_cols`](fn@sum_cols): one float per thread.
pub const COLS_SHARED_BYTES: u32 = COLS_BLOCK_X * COLS_BLOCK_Y * 4;

/// `out[r] = x[r][0] + ... + x[r][cols - 1]` for `r < rows`.
///
/// One warp per row (warp `w` of block `g` takes row `g * ROWS_PER_BLOCK + w`): lane `l` adds
/// columns `l, l + 32, ...` (each step a coalesced 128-byte read of the row), the warp adds its
/// lanes' sums with shuffles, and lane 0 writes `out[r]`. Warps past the last row compute
/// nothing but still take part in the shuffles.
///
/// Global memory: reads `4 rows cols` bytes once, writes `4 rows`. Launch: 1-D blocks of
/// exactly [`ROWS_BLOCK`] threads, `ceil(rows / ROWS_PER_BLOCK)` blocks, no shared memory.
///
/// # Safety
/// `x` holds `rows * cols` floats and `out` `rows` floats of device memory; they do not overlap.
#[kernel]
pub unsafe fn sum_rows(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    let tid = thread::thread_idx_x() as usize;
    let lanes = warp::SIZE as usize;
    let (w, lane) = (tid / lanes, tid % lanes);
    let row = thread::block_idx_x() as usize * ROWS_PER_BLOCK as usize + w;
    let mut acc = 0.0f32;
    if row < rows {
        let base = row * cols;
        let mut c = lane;
        while c < cols {
            // SAFETY: `row < rows`, `c < cols`.
            acc += unsafe { mem::load(x, base + c) };
            c += lanes;
        }
    }
    let total = warp::reduce_sum(acc);
    if row < rows && lane == 0 {
        // SAFETY: `row < rows`.
        unsafe { mem::store(out, row, total) }
    }
}

/// `out[c] = x[0][c] + ... + x[rows - 1][c]` for `c < cols`.
///
/// Block `g` takes columns `g * 32 ..`: thread `(tx, ty)` adds column `g * 32 + tx` over rows
/// `ty, ty + 8, ...` (each step, the 32 threads of a row of the block read 128 contiguous bytes),
/// writes its sum to shared memory, and after a barrier thread `(tx, 0)` adds the 8 sums of its
/// column in order and writes `out[c]`.
///
/// Global memory: reads `4 rows cols` bytes once, writes `4 cols`. Launch: 2-D blocks of exactly
/// [`COLS_BLOCK_X`] x [`COLS_BLOCK_Y`] threads, `ceil(cols / 32)` blocks along x,
/// [`COLS_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` holds `rows * cols` floats and `out` `cols` floats of device memory; they do not overlap.
#[kernel]
pub unsafe fn sum_cols(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    let (tx, ty) = (thread::thread_idx_x() as usize, thread::thread_idx_y() as usize);
    let (bx, by) = (COLS_BLOCK_X as usize, COLS_BLOCK_Y as usize);
    let col = thread::block_idx_x() as usize * bx + tx;
    let mut acc = 0.0f32;
    if col < cols {
        let mut r = ty;
        while r < rows {
            // SAFETY: `r < rows`, `col < cols`.
            acc += unsafe { mem::load(x, r * cols + col) };
            r += by;
        }
    }
    let scratch = shared::dynamic::<f32>();
    // SAFETY: `ty * bx + tx < COLS_BLOCK_X * COLS_BLOCK_Y` floats of shared memory.
    unsafe {
        mem::store(scratch, ty * bx + tx, acc);
        thread::sync_threads();
    }
    if ty == 0 && col < cols {
        let mut total = acc;
        for k in 1..by {
            // SAFETY: `k * bx + tx` is in the block's scratch, written before the barrier.
            total += unsafe { mem::load(scratch, k * bx + tx) };
        }
        // SAFETY: `col < cols`.
        unsafe { mem::store(out, col, total) }
    }
}
