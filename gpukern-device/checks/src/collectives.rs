//! [`gpukern_device::warp`]'s shuffles, scans and votes and [`gpukern_device::block::Scratch`]'s
//! collectives on the device: each thread records what every one returned, for the runner to
//! compare with the formulas.

use gpukern_device::block::Scratch;
use gpukern_device::{kernel, mem, thread, warp};

/// Threads per block of [`warp_and_block_collectives`](fn@warp_and_block_collectives).
pub const THREADS: u32 = 128;

/// Values each thread of [`warp_and_block_collectives`](fn@warp_and_block_collectives) records.
pub const RECORDS: usize = 10;

/// Thread `t` (global index) of blocks of [`THREADS`] writes to `out[RECORDS t..]`:
/// `shfl_down(t, 3)`, `shfl_up(t, 5)`, `shfl_idx(t, 9)`, the bits of `shfl_xor(t as f64 / 2, 6)`,
/// the warp's inclusive and exclusive (from 100) sums of `t + 1`, `match_any(lane / 5)`,
/// `(ballot(t % 3 == 0) & lanes_below()).count_ones()`, and the block's sum of `t` and
/// inclusive scan of `t + 1` through one [`Scratch`].
///
/// # Safety
/// Blocks of [`THREADS`] threads; `out` holds `RECORDS` values per thread of the grid.
#[kernel(block(THREADS), shared(scratch: Scratch<u64, { THREADS as usize }>))]
pub unsafe fn warp_and_block_collectives(out: *mut u64) {
    let t = thread::index_1d();
    let v = t as u64;
    let lane = warp::lane_id();
    // SAFETY: every thread of the block calls the collectives; the block has THREADS threads.
    let (block_sum, block_scan) = unsafe {
        (
            scratch.reduce(v, |a, b| a + b),
            scratch.scan_inclusive(v + 1, |a, b| a + b),
        )
    };
    let records = [
        warp::shfl_down(v, 3),
        warp::shfl_up(v, 5),
        warp::shfl_idx(v, 9),
        warp::shfl_xor(t as f64 / 2.0, 6).to_bits(),
        warp::scan_inclusive(v + 1, |a, b| a + b),
        warp::scan_exclusive(v + 1, 100, |a, b| a + b),
        u64::from(warp::match_any(lane / 5)),
        u64::from((warp::ballot(t.is_multiple_of(3)) & warp::lanes_below()).count_ones()),
        block_sum,
        block_scan,
    ];
    for (k, r) in records.into_iter().enumerate() {
        // SAFETY: `RECORDS` values per thread.
        unsafe { mem::store(out, RECORDS * t + k, r) };
    }
}
