//! The 256-bin byte histogram's second rung: every lane counts into bins of its own, one byte
//! counter per bin, so that the 32 lanes of a warp never share a shared-memory bank.
//!
//! [`histogram`](fn@crate::histogram) spreads a bin over the block's 8 warps, but the 32 lanes
//! of one `red.shared.add` still hit random banks (a byte's bin decides it): about 3.5 lanes per
//! bank, so each warp's atomic takes several passes. Here a lane's 256 counters are 64 words in
//! the lane's own bank (word `row * 32 + lane`, four 8-bit counters a word), so every warp's
//! update is one conflict-free pass; the byte counters are folded into the block's 32-bit
//! totals before they can overflow.
//!
//! On the H200 it is the slower of the two, on 2^28 bytes: 1768 GB/s against 2190 for
//! [`histogram`](fn@crate::histogram) (`bench/experiments/user-kernels/user-d0d5de9.jsonl`).
//! ncu (`bench/experiments/h200-logs/d0d5de9-ncu-histogram_lanes.log`) shows why: the stalls on
//! shared memory are gone, but 66.6 KB of shared memory a block leave 3 blocks of 8 warps per
//! multiprocessor, and the folds add instructions. It stays as the measured rung.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::shared::Array;
use gpukern_device::vector::{self, LoadHint};
use gpukern_device::{kernel, mem, thread};

use crate::byte_histogram::{BINS, HIST_BLOCK};

/// Warps per block.
const WARPS: usize = HIST_BLOCK as usize / 32;
/// Words of one lane's counters: four 8-bit bins a word.
const ROWS: usize = BINS / 4;
/// Words of one warp's counters: a row of 32 words (one per lane) per 4 bins.
const WARP_WORDS: usize = ROWS * 32;
/// Bytes one vector load brings.
const LANES: usize = 16;
/// Loop trips between folds: a trip adds at most 32 to one byte counter (two vectors of 16
/// bytes), so 7 trips stay below 256.
const FOLD_EVERY: usize = 7;
/// The block's shared memory for [`histogram_lanes`](fn@histogram_lanes), in bytes: the lanes'
/// counters and the block's totals.
pub const LANE_HIST_SHARED: usize = 4 * (WARPS * WARP_WORDS + BINS);

/// Adds the four bytes of `word` to the lane's byte counters at `lane_base`.
///
/// # Safety
/// `lane_base = warp * WARP_WORDS + lane`; no counter above 255 - 4 before the call.
#[inline(always)]
unsafe fn count(counters: Array<u32, { WARPS * WARP_WORDS }>, lane_base: usize, word: u32) {
    let mut rest = word;
    for _ in 0..4 {
        let byte = rest & 0xff;
        // SAFETY: `(byte >> 2) * 32 + lane_base < WARPS * WARP_WORDS`; the word is the lane's own.
        unsafe { counters.atomic_add(lane_base + (byte as usize >> 2) * 32, 1 << (8 * (byte & 3))) };
        rest >>= 8;
    }
}

/// Adds the 16 bytes of `v` to the lane's counters.
///
/// # Safety
/// As [`count`].
#[inline(always)]
unsafe fn count_vector(counters: Array<u32, { WARPS * WARP_WORDS }>, lane_base: usize, v: [u32; 4]) {
    // SAFETY: forwarded contract.
    unsafe {
        count(counters, lane_base, v[0]);
        count(counters, lane_base, v[1]);
        count(counters, lane_base, v[2]);
        count(counters, lane_base, v[3]);
    }
}

/// Adds `sum` to total `bin`, if it is not 0.
///
/// # Safety
/// `bin < 256`.
#[inline(always)]
unsafe fn add_total(totals: Array<u32, BINS>, bin: usize, sum: u32) {
    if sum != 0 {
        // SAFETY: forwarded contract.
        unsafe { totals.atomic_add(bin, sum) };
    }
}

/// Folds the byte counters of warp `warp` into `totals` and zeroes them: lane `lane` takes rows
/// `lane` and `lane + 32` (bins `4 row ..= 4 row + 3`), reading the row's 32 words in an order
/// skewed by its lane so that the warp's 32 reads hit 32 banks.
///
/// # Safety
/// Every thread of the block calls it between two barriers; `warp < WARPS`, `lane < 32`.
#[inline(always)]
unsafe fn fold(
    counters: Array<u32, { WARPS * WARP_WORDS }>,
    totals: Array<u32, BINS>,
    warp: usize,
    lane: usize,
) {
    for half in 0..2 {
        let row = lane + 32 * half;
        let base = warp * WARP_WORDS + row * 32;
        // Two 16-bit sums a word: bytes 0 and 2, bytes 1 and 3 (at most 32 * 255 each).
        let (mut even, mut odd) = (0u32, 0u32);
        for k in 0..32 {
            let at = base + (k + lane) % 32;
            // SAFETY: `at < WARPS * WARP_WORDS`; the barrier before ordered the owners' adds.
            unsafe {
                let w = counters.load(at);
                even += w & 0x00ff_00ff;
                odd += (w >> 8) & 0x00ff_00ff;
                counters.store(at, 0);
            }
        }
        // SAFETY: the bins `4 row ..= 4 row + 3` are below 256.
        unsafe {
            add_total(totals, 4 * row, even & 0xffff);
            add_total(totals, 4 * row + 1, odd & 0xffff);
            add_total(totals, 4 * row + 2, even >> 16);
            add_total(totals, 4 * row + 3, odd >> 16);
        }
    }
}

/// Adds the histogram of `data[..n]` to `counts` (256 bins, zeroed by the caller before the
/// first launch).
///
/// One thread: zeroes its 64 counter words and one total; in a grid-stride loop over the
/// 16-byte vectors of `data` (two loaded before either is counted) adds each byte to its own
/// 8-bit counter with a conflict-free `red.shared.add`; every 7 trips (and at the end) the block
/// folds its counters into 32-bit totals between two barriers; the first `n % 16` threads of
/// block 0 add the ragged end's bytes to the totals; after a barrier, adds total `threadIdx.x`
/// to `counts` with one global atomic. Traffic: 1 byte read per element, 256 atomics per block.
///
/// Launch: 1-D blocks of [`HIST_BLOCK`] threads, [`LANE_HIST_SHARED`] bytes of shared memory
/// (declared: the launcher adds them), any grid.
///
/// # Safety
/// `data` holds `n` bytes, 16-byte aligned; `counts` 256 counters.
#[kernel(
    block(HIST_BLOCK),
    barriers(5),
    shared(counters: Array<u32, { WARPS * WARP_WORDS }>, totals: Array<u32, BINS>)
)]
pub unsafe fn histogram_lanes(data: *const u8, n: usize, counts: *mut u32) {
    let tid = thread::thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, tid % 32);
    let lane_base = warp * WARP_WORDS + lane;
    let words = data.cast::<u32>();
    // SAFETY: shared indices are below the arrays' lengths (see `count` and `fold`); vectors
    // `v < n / 16` and the bytes past them lie in `data`; `counts` holds 256.
    unsafe {
        for row in 0..ROWS {
            counters.store(lane_base + row * 32, 0);
        }
        totals.store(tid, 0);
        thread::sync_threads();
        let vectors = n / LANES;
        let stride = thread::grid_dim_x() as usize * HIST_BLOCK as usize;
        let first = thread::block_idx_x() as usize * HIST_BLOCK as usize;
        let mut trip = 0;
        // The loop's trips are the block's (its first thread's), so that the folds' barriers
        // are reached by every thread.
        let mut at = first;
        while at < vectors {
            let v = at + tid;
            if v < vectors {
                let a: [u32; 4] = vector::load_hinted(words, 4 * v, LoadHint::Streaming);
                if v + stride < vectors {
                    let b: [u32; 4] = vector::load_hinted(words, 4 * (v + stride), LoadHint::Streaming);
                    count_vector(counters, lane_base, a);
                    count_vector(counters, lane_base, b);
                } else {
                    count_vector(counters, lane_base, a);
                }
            }
            at += 2 * stride;
            trip += 1;
            if trip == FOLD_EVERY {
                trip = 0;
                thread::sync_threads();
                fold(counters, totals, warp, lane);
                thread::sync_threads();
            }
        }
        thread::sync_threads();
        fold(counters, totals, warp, lane);
        if thread::block_idx_x() == 0 && tid < n % LANES {
            let byte = mem::load(data, LANES * vectors + tid);
            totals.atomic_add(byte as usize, 1);
        }
        thread::sync_threads();
        let total = totals.load(tid);
        if total != 0 {
            atomic::add(counts, tid, total, Scope::Device);
        }
    }
}
