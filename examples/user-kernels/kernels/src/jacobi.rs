//! A 5-point Jacobi step on an f32 grid, through a shared tile:
//! `out[r][c] = (in[r-1][c] + in[r+1][c] + in[r][c-1] + in[r][c+1]) / 4` inside, `in[r][c]` on
//! the boundary rows and columns.

use gpukern_device::shared::Tile;
use gpukern_device::{kernel, mem, thread, vector, warp};

/// Columns of output one block computes: 32 threads of 4 floats (one 16-byte vector each).
pub const STENCIL_COLS: usize = 128;
/// Rows of output one block computes: 8 thread rows, 4 rows each.
pub const STENCIL_ROWS: usize = 32;
/// The block: 32 x 8 threads; each warp is one thread row.
pub const STENCIL_BLOCK: (u32, u32) = (32, 8);
/// Floats from one row of the shared tile to the next: the block's columns at offset 4 (so that
/// their vectors stay 16-byte aligned), the left halo at 3 and the right one at 132.
pub const STENCIL_PITCH: usize = STENCIL_COLS + 8;
/// Rows of the shared tile: the block's rows and one halo row above and below.
pub const STENCIL_TILE_ROWS: usize = STENCIL_ROWS + 2;

/// Vectors of the tile's body (its rows times 32), loaded by the block's 256 threads in turn.
const BODY_VECTORS: usize = STENCIL_TILE_ROWS * STENCIL_COLS / 4;
/// Vectors each thread loads at most.
const LOADS: usize = BODY_VECTORS.div_ceil(256);
const _: () = assert!(LOADS == 5, "the tile's stores are written out for five vectors");

/// `in[r][c]`, 0 outside the grid.
///
/// # Safety
/// `x` holds `rows * cols` floats.
#[inline(always)]
unsafe fn at(x: *const f32, rows: usize, cols: usize, r: isize, c: isize) -> f32 {
    if r >= 0 && (r as usize) < rows && c >= 0 && (c as usize) < cols {
        // SAFETY: inside the grid.
        unsafe { mem::load(x, r as usize * cols + c as usize) }
    } else {
        0.0
    }
}

/// One Jacobi step of the `rows x cols` row-major grid `x` into `out` (see the module).
///
/// One block: a tile of [`STENCIL_ROWS`] x [`STENCIL_COLS`] outputs. Its threads copy the tile
/// and a one-element halo into shared memory (16-byte vector loads where the rows are 16-byte
/// aligned, `cols % 4 == 0`; zeros outside the grid), then each thread computes 4 consecutive
/// outputs in each of 4 rows: the rows above and below and its own as shared 16-byte vectors,
/// the left and right neighbours from the next lanes by warp shuffles (the halo at the warp's
/// ends), and stores them as one vector. Traffic: 4 bytes read and 4 written per element (plus
/// the halos, 2 rows of 34 per tile, from L2).
///
/// Launch: blocks of [`STENCIL_BLOCK`], a grid of `ceil(cols / 128) x ceil(rows / 32)`.
///
/// # Safety
/// `x` and `out` hold `rows * cols` floats; the launch is as above.
#[kernel(block(256), barriers(1), shared(tile: Tile<f32, { STENCIL_TILE_ROWS }, { STENCIL_PITCH }>))]
pub unsafe fn stencil(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    let (tx, ty) = (thread::thread_idx_x() as usize, thread::thread_idx_y() as usize);
    let tid = ty * 32 + tx;
    let row0 = thread::block_idx_y() as usize * STENCIL_ROWS;
    let col0 = thread::block_idx_x() as usize * STENCIL_COLS;
    let aligned = cols.is_multiple_of(4);
    // SAFETY (all accesses): global indices are checked against the grid; shared ones are
    // inside the tile (rows below 34, columns 3..133).
    unsafe {
        // The tile's body: every load issued before the first shared store.
        let body: [[f32; 4]; LOADS] = core::array::from_fn(|k| {
            let item = tid + 256 * k;
            let (r, v) = (item / 32, item % 32);
            let gr = row0 as isize + r as isize - 1;
            let gc = col0 + 4 * v;
            if item >= BODY_VECTORS || gr < 0 || gr as usize >= rows {
                [0.0; 4]
            } else if aligned && gc + 4 <= cols {
                vector::load(x, gr as usize * cols + gc)
            } else {
                core::array::from_fn(|l| at(x, rows, cols, gr, (gc + l) as isize))
            }
        });
        let put = |k: usize, v: [f32; 4]| {
            let item = tid + 256 * k;
            if item < BODY_VECTORS {
                vector::store(tile.row(item / 32), 4 + 4 * (item % 32), v);
            }
        };
        // Written out, not a loop: the five vectors stay in registers.
        let [b0, b1, b2, b3, b4] = body;
        put(0, b0);
        put(1, b1);
        put(2, b2);
        put(3, b3);
        put(4, b4);
        // The halo columns: 34 rows on each side.
        if tid < 2 * STENCIL_TILE_ROWS {
            let (side, r) = (tid / STENCIL_TILE_ROWS, tid % STENCIL_TILE_ROWS);
            let gc = if side == 0 {
                col0 as isize - 1
            } else {
                (col0 + STENCIL_COLS) as isize
            };
            let value = at(x, rows, cols, row0 as isize + r as isize - 1, gc);
            tile.store(r, if side == 0 { 3 } else { 4 + STENCIL_COLS }, value);
        }
        thread::sync_threads();

        let gc = col0 + 4 * tx;
        for j in 0..4 {
            let r = ty + 8 * j;
            let gr = row0 + r;
            // The whole warp (one thread row) takes or skips this row: the shuffles see all lanes.
            if gr >= rows {
                continue;
            }
            let mid: [f32; 4] = vector::load(tile.row(r + 1), 4 + 4 * tx);
            let up: [f32; 4] = vector::load(tile.row(r), 4 + 4 * tx);
            let down: [f32; 4] = vector::load(tile.row(r + 2), 4 + 4 * tx);
            let mut left = warp::shfl_up(mid[3], 1);
            let mut right = warp::shfl_down(mid[0], 1);
            if tx == 0 {
                left = tile.load(r + 1, 3);
            }
            if tx == 31 {
                right = tile.load(r + 1, 4 + STENCIL_COLS);
            }
            let west = [left, mid[0], mid[1], mid[2]];
            let east = [mid[1], mid[2], mid[3], right];
            let v: [f32; 4] = core::array::from_fn(|k| {
                let c = gc + k;
                if gr == 0 || gr == rows - 1 || c == 0 || c + 1 >= cols {
                    mid[k]
                } else {
                    0.25 * (up[k] + down[k] + west[k] + east[k])
                }
            });
            if aligned && gc + 4 <= cols {
                vector::store(out, gr * cols + gc, v);
            } else {
                for (k, &value) in v.iter().enumerate() {
                    if gc + k < cols {
                        mem::store(out, gr * cols + gc + k, value);
                    }
                }
            }
        }
    }
}
