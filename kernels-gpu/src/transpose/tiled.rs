//! The fast rung: a 32x32 tile through shared memory, so that reads and writes are coalesced.

use super::{BLOCK_ROWS, TILE};
use crate::gpu::{mem, shared, thread};
use crate::kernel;

/// Floats per row of the shared tile: one past [`TILE`], so that the 32 threads of a warp reading
/// a column of the tile (addresses `33 k` apart) hit 32 different banks instead of one.
const PITCH: usize = TILE as usize + 1;

/// Dynamic shared memory of [`transpose_tiled`](fn@transpose_tiled): one padded tile.
pub const TILED_SHARED_BYTES: u32 = (TILE as usize * PITCH * 4) as u32;

/// Rows of the tile each thread moves.
const PER_THREAD: usize = (TILE / BLOCK_ROWS) as usize;

/// The `TILE x TILE` tile of `a` at block `(bx, by)` (rows `by * TILE ..`, columns
/// `bx * TILE ..`) written transposed into `b`.
///
/// Thread `(tx, ty)` reads `a[by * 32 + ty + 8 j][bx * 32 + tx]` for `j < 4` (a warp: 128
/// contiguous bytes of a row) into `tile[ty + 8 j][tx]`; after a barrier it writes
/// `tile[tx][ty + 8 j]` (a column of the tile: the padding keeps its 32 reads on 32 banks) to
/// `b[bx * 32 + ty + 8 j][by * 32 + tx]` (a warp: 128 contiguous bytes of a row of `b`).
/// Elements outside the matrix (ragged edges) are neither read nor written.
///
/// Global memory: reads and writes `4 rows cols` bytes each, every access coalesced. Launch:
/// 2-D blocks of exactly [`TILE`] x [`BLOCK_ROWS`] threads, `ceil(cols / TILE)` x
/// `ceil(rows / TILE)` blocks, [`TILED_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `a` and `b` hold `rows * cols` floats of device memory each and do not overlap.
// Barriers: one, between the tile's stores and its loads.
#[kernel(block(TILE * BLOCK_ROWS), barriers(1))]
pub unsafe fn transpose_tiled(a: *const f32, b: *mut f32, rows: usize, cols: usize) {
    let tile = shared::dynamic::<f32>();
    let (tx, ty) = (thread::thread_idx_x() as usize, thread::thread_idx_y() as usize);
    let (t, step) = (TILE as usize, BLOCK_ROWS as usize);
    let (row0, col0) = (
        thread::block_idx_y() as usize * t,
        thread::block_idx_x() as usize * t,
    );
    for j in 0..PER_THREAD {
        let (r, c) = (row0 + ty + j * step, col0 + tx);
        if r < rows && c < cols {
            // SAFETY: `r < rows`, `c < cols`; `(ty + 8 j) * PITCH + tx` lies in the tile.
            unsafe { mem::store(tile, (ty + j * step) * PITCH + tx, mem::load(a, r * cols + c)) }
        }
    }
    thread::sync_threads();
    for j in 0..PER_THREAD {
        // Element (row0 + tx, col0 + ty + 8 j) of `a` goes to row `col0 + ty + 8 j`, column
        // `row0 + tx` of `b`.
        let (r, c) = (row0 + tx, col0 + ty + j * step);
        if r < rows && c < cols {
            // SAFETY: `r < rows`, `c < cols`, so the tile slot was written before the barrier;
            // `c * rows + r < rows * cols`.
            unsafe { mem::store(b, c * rows + r, mem::load(tile, tx * PITCH + ty + j * step)) }
        }
    }
}
