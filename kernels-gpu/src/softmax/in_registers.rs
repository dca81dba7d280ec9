//! One read and one write of each element, the row held in registers: a warp per row
//! ([`softmax_warp`](fn@softmax_warp): `softmax_warp_1` ... `softmax_warp_8`), a group of 8 or 16
//! lanes per short row ([`softmax_group`](fn@softmax_group): `softmax_group_8x4`,
//! `softmax_group_16x2`), or a block per row ([`softmax_block`](fn@softmax_block):
//! `softmax_block_4`, `softmax_block_8` and their `_el` twins). All share one body,
//! `row_in_registers`, and differ in who holds a row and how its statistics are merged.

use super::row::{reference, Held};
use super::stats::{block_stats, group_stats, warp_stats, Stats};
use super::{ROW_BLOCK_MAX, WARP_KERNEL_BLOCK};
use crate::gpu::{shared, thread, warp};
use crate::kernel;

/// Softmax of one row held in registers: the body of the warp-per-row, lane-group and
/// block-per-row kernels.
///
/// Thread `tid` of the row's `threads` loads vectors `tid + k * threads` (`k < V`) of the row,
/// all `V` loads before any use, plus at most one head or tail scalar ([`Held::load`]); then
/// [`Held::write`]: one exponential per entry, one read and one write of each.
///
/// `FIXED` is as in [`Held`]; with `LAST` the row's loads carry `evict_last` (L1 and L2, as
/// torch.compile's generated kernels load a row).
///
/// # Safety
/// `x_row` and `y_row` point to `cols` floats at the same address modulo 16 bytes;
/// `cols / 4 <= V * threads`; `threads == FIXED` unless `FIXED` is 0; `reduce` is called by all
/// the row's threads.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn row_in_registers<const V: usize, const FIXED: usize, const LAST: bool>(
    x_row: *const f32,
    y_row: *mut f32,
    cols: usize,
    t: f32,
    tid: usize,
    threads: usize,
    reduce: impl FnOnce(Stats) -> Stats,
) {
    let held = Held::<FIXED>::of(x_row, cols, tid, threads);
    // SAFETY: forwarded contract.
    unsafe {
        let (v, xs) = held.load::<V, LAST>(x_row, t);
        held.write::<V, false>(v, xs, reference(&v, xs, t), y_row, t, reduce)
    }
}

/// Warp-per-row softmax, the row in registers, `V` vectors per lane.
///
/// Warp `w` of block `b` handles row `b * (blockDim.x / 32) + w`: lane `l` holds vectors
/// `l, l + 32, ..., l + 32 * (V - 1)` of the row (`4 * V` floats in registers) and at most one
/// head or tail scalar; the warp merges its lanes' statistics with 10 shuffles
/// (`row_in_registers`). No shared memory, no barrier: rows are independent warps.
///
/// Global memory: each entry read once and written once, 8 bytes per element, in 512-byte
/// coalesced warp accesses.
///
/// Launch: `ceil(rows / (blockDim.x / 32))` blocks of
/// [`WARP_KERNEL_BLOCK`] threads, no shared memory; for rows with
/// `cols / 4 <= 32 * V`.
///
/// Instances, one PTX entry each:
/// * `softmax_warp_1`: rows of up to 128 columns (+3 when the row is not aligned), 4 floats per
///   lane. 8192 x 128 is 8192 warps, 1024 blocks: one wave of 8 blocks per SM on an H200, with
///   16 bytes per lane in flight;
/// * `softmax_warp_2`: rows of up to 256 columns, 8 floats per lane;
/// * `softmax_warp_4`: rows of up to 512 columns, 16 floats per lane;
/// * `softmax_warp_8`: rows of up to 1024 columns, 32 floats per lane (128 bytes per lane in
///   flight, all 8 loads issued before the first use).
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
// Barriers: none, shuffles only.
#[kernel(
    instances(
        softmax_warp_1 = 1,
        softmax_warp_2 = 2,
        softmax_warp_4 = 4,
        softmax_warp_8 = 8
    ),
    block(WARP_KERNEL_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn softmax_warp<const V: usize>(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let row = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if row >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let lane = tid % warp::SIZE as usize;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // SAFETY: the row is inside the buffers; the caller's shape gives `cols / 4 <= 32 * V`; all
    // 32 lanes of the warp reach the reduction.
    unsafe {
        row_in_registers::<V, { warp::SIZE as usize }, false>(
            x_row,
            y_row,
            cols,
            t,
            lane,
            warp::SIZE as usize,
            |s| warp_stats(s, t),
        )
    }
}

/// Threads per block of the lane-group kernels ([`softmax_group`](fn@softmax_group)): 8 warps,
/// `256 / G` rows per block.
pub const GROUP_KERNEL_BLOCK: u32 = 256;

/// Lane-group softmax, several short rows per warp, each held in registers: `G` lanes per row,
/// `V` vectors per lane.
///
/// The block's threads form groups of `G` consecutive lanes (`G` = 8 or 16, so a warp holds
/// `32 / G` rows); group `g` of block `b` handles row `b * (blockDim.x / G) + g`. Lane `l` of a
/// group holds vectors `l, l + G, ..., l + G * (V - 1)` of the row (`4 * V` floats) and at most
/// one head or tail scalar (lanes 0..7 of the group); the group merges its lanes' statistics
/// with `2 * log2 G` shuffles whose lane masks stay inside the group (`group_stats`). A group
/// past the last row takes part in the shuffles with no entries and stores nothing; a warp whose
/// groups are all past it leaves.
///
/// Why: a row of up to 128 columns is 512 bytes. A warp per row (`softmax_warp_1`) gives each
/// lane one 16-byte load and spends 5 butterfly steps on 128 floats; `G` lanes per row give each
/// lane `V` loads in flight at once, `log2 G` steps, and `32 / G` times fewer warps and blocks
/// to schedule (8192 x 128: 256 blocks for `G = 8`, 512 for `G = 16`, against 1024), which is
/// what a one-wave kernel of 4 MB spends its time on.
///
/// Global memory: each entry read once and written once, 8 bytes per element; a warp's load
/// instruction covers `32 / G` rows' whole 128-byte segments.
///
/// Launch: `ceil(rows / (blockDim.x / G))` blocks of [`GROUP_KERNEL_BLOCK`] threads, no shared
/// memory; for rows with `cols / 4 <= G * V`.
///
/// Instances, one PTX entry each:
/// * `softmax_group_8x4` (8 lanes per row, 4 vectors per lane): rows of up to 128 columns (+3
///   when the row is not aligned), 4 rows per warp, 32 rows per block, 64 bytes per lane in
///   flight;
/// * `softmax_group_16x2` (16 lanes, 2 vectors): rows of up to 128 columns (+3), 2 rows per warp
///   (PyTorch's choice for such rows), 16 rows per block.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
// Barriers: none, shuffles only.
#[kernel(
    instances(softmax_group_8x4 = (8, 4), softmax_group_16x2 = (16, 2)),
    block(GROUP_KERNEL_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn softmax_group<const G: usize, const V: usize>(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    t: f32,
) {
    // Lanes 0..7 of the group take a row's head and tail scalars.
    const { assert!(G >= 8 && G <= warp::SIZE as usize && G.is_power_of_two()) };
    let tid = thread::thread_idx_x() as usize;
    let groups = thread::block_dim_x() as usize / G;
    let first = thread::block_idx_x() as usize * groups;
    let warp_first_row = first + tid / warp::SIZE as usize * (warp::SIZE as usize / G);
    if warp_first_row >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let row = first + tid / G;
    // A group past the last row holds an empty row (no entries to load or store).
    let live_cols = if row < rows { cols } else { 0 };
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // SAFETY: a live row is inside the buffers, an empty one is never dereferenced; the caller's
    // shape gives `cols / 4 <= G * V`; all 32 lanes of the warp reach the shuffles.
    unsafe {
        row_in_registers::<V, G, false>(x_row, y_row, live_cols, t, tid % G, G, |s| group_stats::<G>(s, t))
    }
}

/// Block-per-row softmax, the row in registers, `V` vectors per thread; with `LAST` the row
/// loaded with `evict_last` (L1 and L2, as torch.compile's generated kernels load it).
///
/// Block `r` handles row `r`: thread `tid` holds vectors `tid + k * blockDim.x` (`k < V`) of the
/// row and at most one head or tail scalar; the block merges the statistics with shuffles and one
/// barrier (`block_stats`), then every thread writes its entries.
///
/// Global memory: each entry read once and written once, 8 bytes per element. Shared memory:
/// one [`Stats`] per warp.
///
/// Launch: `rows` blocks of a multiple of 32 threads, at most 1024, with
/// `cols / 4 <= V * blockDim.x`; [`STATS_SHARED_BYTES`](super::STATS_SHARED_BYTES) of dynamic
/// shared memory.
///
/// Instances, one PTX entry each:
/// * `softmax_block_4` (`V = 4`, 16 floats per thread): rows of up to `16 * blockDim.x`
///   columns; the host uses it up to 8192 columns (512 threads). 8192 x 4096 runs 256-thread
///   blocks; about 40 registers let 6 blocks share a multiprocessor, 96 KB of loads in flight
///   per SM;
/// * `softmax_block_8` (`V = 8`, 32 floats per thread): rows of up to `32 * blockDim.x`
///   columns; the host uses it from 8193 to 32768 columns (up to 1024 threads). A 32768-column
///   row is 128 KiB, half a multiprocessor's register file: one row per SM at a time;
/// * `softmax_block_4_el`, `softmax_block_8_el` (`LAST`): what the host runs where
///   `OnePassConfig::block_evict_last` is set (the default); the plain two where it is off.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
// Block: sized to the row, up to 1024 threads. Barriers: one, in `block_stats`.
#[kernel(
    instances(
        softmax_block_4 = (4, false),
        softmax_block_8 = (8, false),
        softmax_block_4_el = (4, true),
        softmax_block_8_el = (8, true),
    ),
    block(ROW_BLOCK_MAX),
    barriers(1)
)]
#[inline(always)]
pub unsafe fn softmax_block<const V: usize, const LAST: bool>(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    t: f32,
) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let scratch = shared::dynamic::<Stats>();
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // SAFETY: the row is inside the buffers; the caller's shape gives `cols / 4 <= V * threads`
    // and the shared memory; every thread of the block reaches the reduction.
    unsafe {
        row_in_registers::<V, 0, LAST>(x_row, y_row, cols, t, tid, threads, |s| {
            block_stats(scratch, s, t)
        })
    }
}
