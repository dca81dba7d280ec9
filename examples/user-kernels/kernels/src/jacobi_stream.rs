//! The 5-point Jacobi step's third rung: [`stencil_columns`](fn@crate::stencil_columns)'s strips
//! of rows in registers, on a grid of exactly the blocks resident at once, each walking long
//! runs of rows with a steady number of rows in flight.
//!
//! [`stencil_columns`](fn@crate::stencil_columns) launches one block per 32 rows of a strip
//! (2048 blocks at 8192 x 8192: 5.17 waves of 396, so the last wave runs a sixth full) and
//! loads its rows in bursts of four, computing none of a burst before all of it has arrived.
//! Here the host launches the blocks that fit the device at once, and the grid's work (every
//! row of every strip of 1024 columns) is cut into equal runs of consecutive rows, one per
//! block: no tail wave, and two halo rows per run of about `rows * strips / blocks` rows instead
//! of per 32. Within a run each thread keeps a ring of `AHEAD` rows in flight: the load of row
//! `r + 1 + AHEAD` is issued as row `r + 1` leaves the ring to be computed with, so the loads
//! stay ahead all along the run (ptxas hoists the next step's loads too: 2 to 4 rows in flight
//! with `AHEAD = 2`). The halo column of lanes 0 and 31 is one predicated load per row, the
//! indices are 32-bit, and launch bounds of 4 blocks a multiprocessor hold it to 64 registers:
//! 32 warps resident, against `stencil_columns`' 24 (76 registers). A ring of 3 or 4 rows spills
//! under those bounds (ptxas 13), so the ring is 2; the second instance stores evict-first.
//! Unmeasured.

use gpukern_device::{kernel, mem, thread, vector, warp};

/// Threads per block of [`stencil_stream`](fn@stencil_stream): 8 warps side by side.
pub const STREAM_BLOCK: u32 = 256;
/// Columns one block covers in a row: 8 warps of 32 lanes of 4 floats.
pub const STREAM_COLS: usize = STREAM_BLOCK as usize * 4;
/// The fewest rows of a strip a block's run should hold (the host launches no more blocks than
/// give runs this long), so that the two halo rows a run reads stay a small share.
pub const STREAM_MIN_ROWS: usize = 32;

/// One row of a lane's strip: its 4 floats and the one halo float its lane needs (the column
/// left of the warp's 128 for lane 0, right of them for lane 31, nothing for the others).
#[derive(Clone, Copy)]
struct Row {
    v: [f32; 4],
    halo: f32,
}

/// A row of zeros: above the grid, or past the rows a run needs.
const ZERO: Row = Row {
    v: [0.0; 4],
    halo: 0.0,
};

/// Where a lane's strip lies: its first column and lane, the grid's shape and the last row its
/// run reads.
// 32-bit fields (the grid's sides fit, by the kernel's contract): half the registers of `usize`
// ones, which decide how many blocks fit a multiprocessor.
#[derive(Clone, Copy)]
struct Strip {
    gc: u32,
    lane: u32,
    rows: u32,
    cols: u32,
    /// `cols % 4 == 0`: rows start on 16-byte boundaries.
    aligned: bool,
}

impl Strip {
    /// Row `r` of the strip (zeros past `last` or the grid's rows: no load is issued).
    ///
    /// # Safety
    /// `x` holds `rows * cols` floats.
    #[inline(always)]
    unsafe fn row(self, x: *const f32, r: u32, last: u32) -> Row {
        let Strip {
            gc,
            lane,
            rows,
            cols,
            aligned,
        } = self;
        if r > last || r >= rows {
            return ZERO;
        }
        let row = x.wrapping_add(r as usize * cols as usize);
        // SAFETY (all loads): each index is checked against the row's `cols` first.
        unsafe {
            let v = if aligned && gc + 4 <= cols {
                vector::load_hinted(row, gc as usize, vector::LoadHint::ReadOnly)
            } else {
                core::array::from_fn(|k| {
                    if gc + (k as u32) < cols {
                        mem::load(row, gc as usize + k)
                    } else {
                        0.0
                    }
                })
            };
            // One load for both ends of the warp: the column left of lane 0's, right of lane 31's.
            let (wanted, hc) = if lane == 0 {
                (gc >= 1 && gc - 1 < cols, gc.wrapping_sub(1))
            } else {
                (lane == 31 && gc + 4 < cols, gc + 4)
            };
            let halo = if wanted { mem::load(row, hc as usize) } else { 0.0 };
            Row { v, halo }
        }
    }

    /// Output row `gr` from the rows above, at and below it, stored to `out` (evict-first where
    /// `EVICT_FIRST`: results no kernel reads soon, whose lines should leave L2 before the
    /// input's halo rows).
    ///
    /// # Safety
    /// `out` holds `rows * cols` floats; every lane of the warp calls it (the shuffles).
    #[inline(always)]
    unsafe fn compute<const EVICT_FIRST: bool>(self, out: *mut f32, gr: u32, up: Row, mid: Row, down: Row) {
        let Strip {
            gc,
            lane,
            rows,
            cols,
            aligned,
        } = self;
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
            let c = gc + k as u32;
            if gr == 0 || gr == rows - 1 || c == 0 || c + 1 >= cols {
                mid.v[k]
            } else {
                0.25 * (up.v[k] + down.v[k] + west[k] + east[k])
            }
        });
        let row = out.wrapping_add(gr as usize * cols as usize);
        // SAFETY: indices checked against the grid.
        unsafe {
            if aligned && gc + 4 <= cols {
                let hint = if EVICT_FIRST {
                    vector::StoreHint::EvictFirst
                } else {
                    vector::StoreHint::Default
                };
                vector::store_hinted(row, gc as usize, v, hint);
            } else {
                for (k, &value) in v.iter().enumerate() {
                    if gc + (k as u32) < cols {
                        mem::store(row, gc as usize + k, value);
                    }
                }
            }
        }
    }
}

/// One Jacobi step of the `rows x cols` row-major grid `x` into `out` (the same step as
/// [`stencil`](fn@super::stencil)).
///
/// The grid's work is the rows of its strips of [`STREAM_COLS`] columns, strip after strip;
/// block `b` of `B` takes the run of steps `b * S / B .. (b + 1) * S / B` of the `S = strips *
/// rows` (a run may end one strip and begin the next: each piece is walked on its own). One
/// thread: the 4 columns `gc .. gc + 4` (`gc = strip * 1024 + 4 * threadIdx.x`) of each of its
/// runs' rows, top to bottom. It loads the row above the run and its first row, then keeps
/// `AHEAD` rows in flight in a ring (16-byte read-only vectors where rows are 16-byte aligned,
/// `cols % 4 == 0`; lanes 0 and 31 also load the warp's halo column): taking row `r + 1` out of
/// the ring to compute output row `r` issues the load of row `r + 1 + AHEAD` into its place.
/// The left and right neighbours come from the next lanes by warp shuffles; each output row is
/// stored as one vector. No shared memory. Traffic: 4 bytes read and 4 written per element, plus
/// 2 halo rows per run (from L2 when the run above was read recently) and the halo columns (from
/// L1).
///
/// Launch: 1-D blocks of [`STREAM_BLOCK`] threads, any grid (the blocks resident at once, at
/// most `ceil(cols / 1024) * rows / STREAM_MIN_ROWS`). Instances: `stencil_stream_x2` (a ring
/// of 2, plain stores), `stencil_stream_x2_evict` (a ring of 2, evict-first stores).
///
/// # Safety
/// `x` and `out` hold `rows * cols` floats and do not overlap; `rows + 16` and `cols + 2048`
/// are below 2^32; the launch is as above.
// Barriers: none (shuffles only); a warp whose columns lie past the grid skips the strip as one.
#[kernel(
    instances(stencil_stream_x2 = (2, false), stencil_stream_x2_evict = (2, true)),
    launch_bounds(256, 4),
    block(STREAM_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn stencil_stream<const AHEAD: usize, const EVICT_FIRST: bool>(
    x: *const f32,
    out: *mut f32,
    rows: usize,
    cols: usize,
) {
    const {
        assert!(
            AHEAD >= 1 && AHEAD <= 8,
            "the ring's steps are written out for 8 rows"
        )
    };
    let tid = thread::thread_idx_x() as usize;
    let lane = warp::lane_id() as usize;
    let (b, blocks) = (thread::block_idx_x() as usize, thread::grid_dim_x() as usize);
    let steps = cols.div_ceil(STREAM_COLS) * rows;
    let (mut s, end) = (b * steps / blocks, (b + 1) * steps / blocks);
    while s < end {
        let (strip, r0) = (s / rows, s % rows);
        // Output rows `r0 .. r1` of this strip; the run reads rows `r0 - 1 ..= r1`.
        let r1 = rows.min(r0 + (end - s));
        s += r1 - r0;
        let gc = strip * STREAM_COLS + 4 * tid;
        // Uniform across the warp: its first column.
        if gc - 4 * lane >= cols {
            continue;
        }
        let strip = Strip {
            gc: gc as u32,
            lane: lane as u32,
            rows: rows as u32,
            cols: cols as u32,
            aligned: cols.is_multiple_of(4),
        };
        let (r0, r1) = (r0 as u32, r1 as u32);
        // SAFETY: `row` checks its indices against the grid, `compute` its stores; every lane of
        // the warp walks the same rows.
        unsafe {
            let load = |r: u32| strip.row(x, r, r1);
            let mut up = if r0 == 0 { ZERO } else { load(r0 - 1) };
            let mut mid = load(r0);
            let mut ring: [Row; AHEAD] = core::array::from_fn(|k| load(r0 + 1 + k as u32));
            let mut r = r0;
            while r < r1 {
                // Unrolled by constant tests (not a loop, which LLVM leaves rolled at 8 with the
                // ring in local memory): every ring index is a constant, so the ring stays in
                // registers. Past the run's last row nothing is loaded or stored.
                macro_rules! step {
                    ($k:literal) => {
                        if $k < AHEAD {
                            let gr = r + $k;
                            let down = ring[$k];
                            ring[$k] = load(gr + 1 + AHEAD as u32);
                            // Uniform across the warp: the shuffles see all lanes.
                            if gr < r1 {
                                strip.compute::<EVICT_FIRST>(out, gr, up, mid, down);
                            }
                            up = mid;
                            mid = down;
                        }
                    };
                }
                step!(0);
                step!(1);
                step!(2);
                step!(3);
                step!(4);
                step!(5);
                step!(6);
                step!(7);
                r += AHEAD as u32;
            }
        }
    }
}
