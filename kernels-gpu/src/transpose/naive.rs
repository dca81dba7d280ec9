//! The tutorial rung: one thread per element.

use super::{BLOCK_ROWS, TILE};
use crate::gpu::{mem, thread};
use crate::kernel;

/// `b[c * rows + r] = a[r * cols + c]` for the one element `(r, c)` of this thread.
///
/// Thread `(tx, ty)` of block `(bx, by)` takes `r = by * BLOCK_ROWS + ty`, `c = bx * TILE + tx`:
/// a warp reads 32 consecutive floats of a row of `a` (one 128-byte transaction) and writes
/// them 4 `rows` bytes apart in `b` (32 transactions). Threads outside the matrix do nothing.
///
/// Global memory: reads and writes `4 rows cols` bytes each (minimum traffic `8 rows cols`; the
/// strided writes cost more DRAM bandwidth than that). Launch: 2-D blocks of [`TILE`] x
/// [`BLOCK_ROWS`] threads, `ceil(cols / TILE)` x `ceil(rows / BLOCK_ROWS)` blocks, no shared
/// memory.
///
/// # Safety
/// `a` and `b` hold `rows * cols` floats of device memory each and do not overlap.
// Barriers: none, no shared memory.
#[kernel(block(TILE * BLOCK_ROWS), barriers(0))]
pub unsafe fn transpose_naive(a: *const f32, b: *mut f32, rows: usize, cols: usize) {
    let r = thread::block_idx_y() as usize * BLOCK_ROWS as usize + thread::thread_idx_y() as usize;
    let c = thread::block_idx_x() as usize * TILE as usize + thread::thread_idx_x() as usize;
    if r < rows && c < cols {
        // SAFETY: `r < rows`, `c < cols`.
        unsafe { mem::store(b, c * rows + r, mem::load(a, r * cols + c)) }
    }
}
