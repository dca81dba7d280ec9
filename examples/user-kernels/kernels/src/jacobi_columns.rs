//! The 5-point Jacobi step's second rung: no shared tile and no barrier. Each thread walks a
//! strip of 4 columns down [`COLUMN_ROWS`] rows, keeping the rows above, at and below its output
//! row in registers, so that every element of the grid is read once (plus two halo rows per strip
//! and two halo columns per warp, from L1/L2), loads run ahead of the arithmetic, and the only
//! limit on the blocks an SM holds is their registers.
//!
//! Measured on the H200 at 8192 x 8192: 3343 GB/s, 79.96% of the 4180.7 GB/s copy of the same
//! call (`bench/experiments/user-kernels/user-6530ec4.jsonl`, impl `gpukern:user-columns`), ahead
//! of the shared tile's 3272 and Triton's 3105, behind torch.compile's 3431. ncu
//! (`bench/experiments/h200-logs/6530ec4-ncu-stencil_columns.log`): 76 registers, 3 blocks of 8
//! warps per SM, 35% achieved occupancy, DRAM at 66% of its peak. A variant with the ragged warps
//! on a separate checked path and blocks of 4 warps (68 registers, 7 blocks resident) measured
//! slower, 2642 GB/s (`user-c2f8fa6.jsonl`), and was reverted.

use gpukern_device::{kernel, mem, thread, vector, warp};

/// Rows of output one thread (and one block) computes, top to bottom.
pub const COLUMN_ROWS: usize = 32;
/// Threads per block of [`stencil_columns`](fn@stencil_columns): 8 warps side by side.
pub const COLUMN_BLOCK: u32 = 256;
/// Columns one block covers: 8 warps of 32 lanes of 4 floats.
pub const COLUMN_COLS: usize = COLUMN_BLOCK as usize * 4;
/// Rows loaded ahead of the arithmetic, at a time.
const AHEAD: usize = 4;
const _: () = assert!(COLUMN_ROWS.is_multiple_of(AHEAD));

/// One row of a lane's strip: its 4 floats and the one halo float its lane needs (the column
/// left of the warp's 128 for lane 0, right of them for lane 31, nothing for the others).
#[derive(Clone, Copy)]
struct Row {
    v: [f32; 4],
    halo: f32,
}

/// Row `r` of the strip at column `gc` (zeros outside the grid); the halo of lane `lane`.
///
/// # Safety
/// `x` holds `rows * cols` floats.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row(
    x: *const f32,
    rows: usize,
    cols: usize,
    r: isize,
    gc: usize,
    lane: usize,
    aligned: bool,
) -> Row {
    if r < 0 || r as usize >= rows {
        return Row {
            v: [0.0; 4],
            halo: 0.0,
        };
    }
    let base = r as usize * cols;
    // SAFETY (all loads): each index is checked against the row's `cols` first.
    unsafe {
        let v = if aligned && gc + 4 <= cols {
            vector::load_hinted(x, base + gc, vector::LoadHint::ReadOnly)
        } else {
            core::array::from_fn(|k| {
                if gc + k < cols {
                    mem::load(x, base + gc + k)
                } else {
                    0.0
                }
            })
        };
        let halo = match lane {
            0 if gc >= 1 && gc - 1 < cols => mem::load(x, base + gc - 1),
            31 if gc + 4 < cols => mem::load(x, base + gc + 4),
            _ => 0.0,
        };
        Row { v, halo }
    }
}

/// One Jacobi step of the `rows x cols` row-major grid `x` into `out` (the same step as
/// [`stencil`](fn@super::stencil)).
///
/// One thread: the 4 columns `gc .. gc + 4` (`gc = 4 * (blockIdx.x * 256 + threadIdx.x)`) of the
/// [`COLUMN_ROWS`] rows from `blockIdx.y * COLUMN_ROWS`. It holds the rows above and at its
/// output row, loads the next `AHEAD` (4) rows (16-byte read-only vectors where the rows are
/// 16-byte aligned, `cols % 4 == 0`) before computing any of their outputs, takes the left and
/// right neighbours from the next lanes by warp shuffles (lanes 0 and 31 load the warp's halo
/// columns) and stores each output row as one vector. No shared memory. Traffic: 4 bytes read
/// and 4 written per element, plus 2 halo rows per 32 (from L2 when the strip above was read
/// recently).
///
/// Launch: 1-D blocks of [`COLUMN_BLOCK`] threads, a grid of `ceil(cols / 1024) x ceil(rows /
/// 32)`.
///
/// # Safety
/// `x` and `out` hold `rows * cols` floats and do not overlap; the launch is as above.
// Barriers: none (shuffles only); a warp whose columns all lie past the grid leaves as one.
#[kernel(block(COLUMN_BLOCK), barriers(0))]
pub unsafe fn stencil_columns(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    let lane = warp::lane_id() as usize;
    let gc = 4 * (thread::block_idx_x() as usize * COLUMN_BLOCK as usize + thread::thread_idx_x() as usize);
    let warp_col = gc - 4 * lane;
    if warp_col >= cols {
        return;
    }
    let row0 = thread::block_idx_y() as usize * COLUMN_ROWS;
    let aligned = cols.is_multiple_of(4);
    // SAFETY (all accesses): `row` checks its indices; stores are checked against the grid.
    unsafe {
        let load = |r: isize| row(x, rows, cols, r, gc, lane, aligned);
        let mut up = load(row0 as isize - 1);
        let mut mid = load(row0 as isize);
        for group in (0..COLUMN_ROWS).step_by(AHEAD) {
            let ahead: [Row; AHEAD] = core::array::from_fn(|k| load((row0 + group + k + 1) as isize));
            for (k, &down) in ahead.iter().enumerate() {
                let gr = row0 + group + k;
                // Uniform across the warp: the shuffles see all lanes.
                if gr >= rows {
                    return;
                }
                let mut left = warp::shfl_up(mid.v[3], 1);
                let mut right = warp::shfl_down(mid.v[0], 1);
                if lane == 0 {
                    left = mid.halo;
                }
                if lane == 31 {
                    right = mid.halo;
                }
                let west = [left, mid.v[0], mid.v[1], mid.v[2]];
                let east = [mid.v[1], mid.v[2], mid.v[3], right];
                let v: [f32; 4] = core::array::from_fn(|k| {
                    let c = gc + k;
                    if gr == 0 || gr == rows - 1 || c == 0 || c + 1 >= cols {
                        mid.v[k]
                    } else {
                        0.25 * (up.v[k] + down.v[k] + west[k] + east[k])
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
                up = mid;
                mid = down;
            }
        }
    }
}
