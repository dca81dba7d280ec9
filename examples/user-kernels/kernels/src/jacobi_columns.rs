//! The 5-point Jacobi step's second rung: no shared tile and no barrier. Each thread walks a
//! strip of 4 columns down [`COLUMN_ROWS`] rows, keeping the rows above, at and below its output
//! row in registers, so that every element of the grid is read once (plus two halo rows per strip
//! and two halo columns per warp, from L1/L2), loads run ahead of the arithmetic, and the only
//! limit on the blocks an SM holds is their registers.

use gpukern_device::{kernel, mem, thread, vector, warp};

/// Rows of output one thread (and one block) computes, top to bottom.
pub const COLUMN_ROWS: usize = 32;
/// Threads per block of [`stencil_columns`](fn@stencil_columns): 4 warps side by side (blocks
/// of 4 warps fit the register file more tightly than blocks of 8: 7 blocks, 28 warps, of this
/// kernel's 68 registers, against 3 blocks, 24 warps).
pub const COLUMN_BLOCK: u32 = 128;
/// Columns one block covers: 4 warps of 32 lanes of 4 floats.
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

/// Row `r` of the strip at column `gc` (zeros outside the grid): its 4 floats as one 16-byte
/// read-only load, and the halo float of lane `lane`.
///
/// # Safety
/// `x` holds `rows * cols` floats; `cols % 4 == 0` and `gc + 4 <= cols`.
#[inline(always)]
unsafe fn row(x: *const f32, rows: usize, cols: usize, r: isize, gc: usize, lane: usize) -> Row {
    if r < 0 || r as usize >= rows {
        return Row {
            v: [0.0; 4],
            halo: 0.0,
        };
    }
    let base = r as usize * cols;
    // SAFETY: inside row `r` by the contract; the halos are checked against the row.
    unsafe {
        let v = vector::load_hinted(x, base + gc, vector::LoadHint::ReadOnly);
        let halo = match lane {
            0 if gc >= 1 => mem::load(x, base + gc - 1),
            31 if gc + 4 < cols => mem::load(x, base + gc + 4),
            _ => 0.0,
        };
        Row { v, halo }
    }
}

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

/// The outputs of one thread's strip (see [`stencil_columns`](fn@stencil_columns)) where the
/// warp's 128 columns lie inside the grid and its rows are 16-byte aligned: rows loaded
/// [`AHEAD`] at a time as vectors.
///
/// # Safety
/// As [`row`] with `VECTOR`; `out` holds `rows * cols` floats; the whole warp calls it with the
/// same `row0`.
#[inline(always)]
unsafe fn walk(x: *const f32, out: *mut f32, rows: usize, cols: usize, row0: usize, gc: usize, lane: usize) {
    // SAFETY (all accesses): `row` checks its indices; stores are checked against the grid.
    unsafe {
        let load = |r: isize| row(x, rows, cols, r, gc, lane);
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
                vector::store(out, gr * cols + gc, v);
                up = mid;
                mid = down;
            }
        }
    }
}

/// The outputs of one thread's strip where the warp's columns cross the grid's edge or its rows
/// are not 16-byte aligned: each output from its five neighbours, float by float, checked
/// against the grid (few registers, so that this rare path does not raise the fast one's).
///
/// # Safety
/// `x` and `out` hold `rows * cols` floats.
#[inline(always)]
unsafe fn walk_checked(x: *const f32, out: *mut f32, rows: usize, cols: usize, row0: usize, gc: usize) {
    for gr in row0..(row0 + COLUMN_ROWS).min(rows) {
        for c in gc..(gc + 4).min(cols) {
            // SAFETY: `gr < rows`, `c < cols`; `at` checks the neighbours.
            unsafe {
                let (r, cc) = (gr as isize, c as isize);
                let value = if gr == 0 || gr == rows - 1 || c == 0 || c + 1 >= cols {
                    at(x, rows, cols, r, cc)
                } else {
                    0.25 * (at(x, rows, cols, r - 1, cc)
                        + at(x, rows, cols, r + 1, cc)
                        + at(x, rows, cols, r, cc - 1)
                        + at(x, rows, cols, r, cc + 1))
                };
                mem::store(out, gr * cols + c, value);
            }
        }
    }
}

/// One Jacobi step of the `rows x cols` row-major grid `x` into `out` (the same step as
/// [`stencil`](fn@super::stencil)).
///
/// One thread: the 4 columns `gc .. gc + 4` (`gc = 4 * (blockIdx.x * 128 + threadIdx.x)`) of the
/// [`COLUMN_ROWS`] rows from `blockIdx.y * COLUMN_ROWS`. It holds the rows above and at its
/// output row, loads the next [`AHEAD`] rows (16-byte read-only vectors where the rows are
/// 16-byte aligned, `cols % 4 == 0`) before computing any of their outputs, takes the left and
/// right neighbours from the next lanes by warp shuffles (lanes 0 and 31 load the warp's halo
/// columns) and stores each output row as one vector. A warp whose 128 columns cross the grid's
/// edge, or a grid whose rows are not 16-byte aligned, computes each output from its five
/// neighbours, checked (`walk_checked`). No shared memory; 68 registers on sm_90a, no spills
/// (`ptxas -v`). Traffic: 4 bytes read
/// and 4 written per element, plus 2 halo rows per 32 (from L2 when the strip above was read
/// recently).
///
/// Launch: 1-D blocks of [`COLUMN_BLOCK`] threads, a grid of `ceil(cols / 512) x ceil(rows /
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
    // SAFETY: the vector walk only where the warp's 128 columns are inside the grid and aligned;
    // the launch is the kernel's.
    unsafe {
        if cols.is_multiple_of(4) && warp_col + 128 <= cols {
            walk(x, out, rows, cols, row0, gc, lane);
        } else {
            walk_checked(x, out, rows, cols, row0, gc);
        }
    }
}
