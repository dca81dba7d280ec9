//! Rung 2: square tiles of `A` and `B` staged in shared memory, so each element loaded from
//! global memory is used `TILE` times.

use crate::gpu::{math, mem, shared, thread};
use crate::kernel;

/// Side of the square tiles of [`matmul_tiled`](fn@matmul_tiled), and of its thread block (32 x 32 = 1024
/// threads, the most a block may have): one thread per element of a tile.
pub const TILE: usize = 32;

/// Dynamic shared memory [`matmul_tiled`](fn@matmul_tiled) needs: one tile of `A` and one of `B`.
pub const TILED_SHARED_BYTES: u32 = (2 * TILE * TILE * core::mem::size_of::<f32>()) as u32;

/// Tiled matmul: block `(bx, by)` computes the `TILE x TILE` tile of `C` at rows `by*TILE..`,
/// columns `bx*TILE..`; thread `(tx, ty)` of the block owns `C[by*TILE + ty][bx*TILE + tx]`.
///
/// For each step along `k`, every thread loads one element of the `A` tile and one of the `B`
/// tile from global into shared memory (zero where the tile hangs over the matrix edge), the
/// block waits at a barrier, each thread accumulates the dot product of its row of the `A` tile
/// with its column of the `B` tile from shared memory, and the block waits again before the
/// tiles are overwritten. Per tile step a block reads `2 * TILE^2` floats from global memory and
/// does `2 * TILE^3` flops: `TILE / 4` flops per byte, against `1 / 4` for the naive kernel.
///
/// Launch: blocks of `TILE x TILE` threads, `ceil(n / TILE) x ceil(m / TILE)` blocks,
/// `TILED_SHARED_BYTES` of dynamic shared memory.
///
/// # Safety
/// As [`matmul_naive`](fn@super::matmul_naive), plus the launch shape above.
// Barriers: two per step along `k`, after the tiles are stored and after they are used.
#[kernel(block(TILE * TILE), barriers(2))]
pub unsafe fn matmul_tiled(a: *const f32, b: *const f32, c: *mut f32, m: usize, n: usize, k: usize) {
    let tx = thread::thread_idx_x() as usize;
    let ty = thread::thread_idx_y() as usize;
    let row = thread::block_idx_y() as usize * TILE + ty;
    let col = thread::block_idx_x() as usize * TILE + tx;
    let tile_a = shared::dynamic::<f32>();
    let tile_b = tile_a.wrapping_add(TILE * TILE);
    let mine = ty * TILE + tx;

    let mut acc = 0.0f32;
    let mut k0 = 0;
    while k0 < k {
        // SAFETY: global indices are checked against the matrix edges; shared indices are
        // below TILE * TILE, inside each tile.
        unsafe {
            let a_col = k0 + tx;
            let a_val = if row < m && a_col < k {
                mem::load(a, row * k + a_col)
            } else {
                0.0
            };
            mem::store(tile_a, mine, a_val);
            let b_row = k0 + ty;
            let b_val = if b_row < k && col < n {
                mem::load(b, b_row * n + col)
            } else {
                0.0
            };
            mem::store(tile_b, mine, b_val);
        }
        thread::sync_threads();
        let mut i = 0;
        while i < TILE {
            // SAFETY: `ty * TILE + i` and `i * TILE + tx` are below TILE * TILE.
            acc = unsafe {
                math::fma(
                    mem::load(tile_a, ty * TILE + i),
                    mem::load(tile_b, i * TILE + tx),
                    acc,
                )
            };
            i += 1;
        }
        thread::sync_threads();
        k0 += TILE;
    }
    if row < m && col < n {
        // SAFETY: `row < m`, `col < n`.
        unsafe { mem::store(c, row * n + col, acc) }
    }
}
