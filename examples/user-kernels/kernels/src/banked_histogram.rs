//! The 256-bin byte histogram's fourth rung: the block's bins 32 times over, one copy per lane
//! index, laid out so that copy `l` lies wholly in bank `l`: every warp's `red.shared.add` is one
//! conflict-free pass, whatever the bytes.
//!
//! The first three rungs keep bins per warp, so a warp's 32 updates land in banks the bytes
//! choose (about 3.5 lanes on the busiest bank of 32 random ones, and more for repeated bytes):
//! ncu shows their shared-memory pipe saturated
//! (`bench/experiments/h200-logs/6530ec4-ncu-histogram_spread.log`). Here word `bin * 32 + l`
//! holds lane `l`'s copy of `bin` for all the warps of the block: the 32 lanes of one update
//! always hit 32 different banks, and the warps share the copies through the atomic (updates of
//! different warps are different instructions, which never conflict). The counters stay 32-bit
//! (no folds, unlike [`histogram_lanes`](fn@crate::histogram_lanes)) in 32 KB a block of 512
//! threads. Each thread has `UNROLL` 16-byte read-only loads in flight before it counts any of
//! them: with 2 (32 registers, ptxas 13) four blocks fill a multiprocessor's 2048 threads, with 4
//! (39 registers) three fit. Unmeasured.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::shared::Array;
use gpukern_device::vector::{self, LoadHint};
use gpukern_device::{kernel, mem, thread};

use crate::byte_histogram::BINS;

/// Threads per block of [`histogram_banked`](fn@histogram_banked): 16 warps sharing the 32
/// copies, so that the final merge (32 KB read, 256 global atomics) is paid once per 512 threads.
pub const BANKED_BLOCK: u32 = 512;
/// Copies of the bins: one per lane index (and bank).
const COPIES: usize = 32;
/// Words of the block's copies: bin `b` of copy `l` at `b * COPIES + l`.
const WORDS: usize = BINS * COPIES;
/// Bytes one vector load brings.
const LANES: usize = 16;

/// Adds the four bytes of `word` to copy `lane` of the bins.
///
/// # Safety
/// `lane < 32`; the bins were zeroed before a barrier.
#[inline(always)]
unsafe fn count(bins: Array<u32, WORDS>, lane: usize, word: u32) {
    let mut rest = word;
    for _ in 0..4 {
        // SAFETY: `255 * COPIES + lane < WORDS`.
        unsafe { bins.atomic_add((rest & 0xff) as usize * COPIES + lane, 1) };
        rest >>= 8;
    }
}

/// Adds the 16 bytes of `v` to copy `lane` of the bins.
///
/// # Safety
/// As [`count`].
#[inline(always)]
unsafe fn count_vector(bins: Array<u32, WORDS>, lane: usize, v: [u32; 4]) {
    let [a, b, c, d] = v;
    // SAFETY: forwarded contract.
    unsafe {
        count(bins, lane, a);
        count(bins, lane, b);
        count(bins, lane, c);
        count(bins, lane, d);
    }
}

/// Adds the histogram of `data[..n]` to `counts` (256 bins, zeroed by the caller before the
/// first launch).
///
/// One thread (lane `l`): zeroes 16 words of the block's copies; in a grid-stride loop over the
/// 16-byte vectors of `data` loads `UNROLL` vectors (read-only, `UNROLL * 16` bytes in flight)
/// before it counts their bytes into copy `l` (`red.shared.add` on word `byte * 32 + l`: bank
/// `l`, so a warp's update is one pass), then the vectors left one at a time; the first `n % 16`
/// threads of block 0 add the ragged end's bytes one each; after a barrier, threads `t < 256`
/// sum bin `t` over the 32 copies (copy `(k + t) % 32` at step `k`, so that a warp's 32 reads hit
/// 32 banks) and add it to `counts` with one global atomic. Traffic: 1 byte read per element, 256
/// atomics per block.
///
/// Launch: 1-D blocks of [`BANKED_BLOCK`] threads, any grid (the blocks resident at once).
/// Instances: `histogram_banked_x4` (4 vectors in flight), `histogram_banked_x2` (2).
///
/// # Safety
/// `data` holds `n` bytes, 16-byte aligned, and no thread writes it during the launch; `counts`
/// 256 counters.
#[kernel(
    instances(histogram_banked_x4 = 4, histogram_banked_x2 = 2),
    block(BANKED_BLOCK),
    barriers(2),
    shared(bins: Array<u32, WORDS>)
)]
#[inline(always)]
pub unsafe fn histogram_banked<const UNROLL: usize>(data: *const u8, n: usize, counts: *mut u32) {
    const {
        assert!(
            UNROLL >= 1 && UNROLL <= 4,
            "the vectors' counts are written out for 4"
        )
    };
    let block = BANKED_BLOCK as usize;
    let tid = thread::thread_idx_x() as usize;
    let lane = tid % COPIES;
    let words = data.cast::<u32>();
    // SAFETY: `k * 512 + tid < WORDS`; vectors `v < n / 16` and the bytes past them lie in
    // `data`, which nothing writes; `counts` holds 256.
    unsafe {
        for k in 0..WORDS / block {
            bins.store(k * block + tid, 0);
        }
        thread::sync_threads();
        let vectors = n / LANES;
        let stride = thread::grid_dim_x() as usize * block;
        let mut v = thread::block_idx_x() as usize * block + tid;
        while v + (UNROLL - 1) * stride < vectors {
            let group: [[u32; 4]; UNROLL] = core::array::from_fn(|k| {
                vector::load_hinted(words, 4 * (v + k * stride), LoadHint::ReadOnly)
            });
            // Unrolled by constant tests (LLVM leaves a loop over 4 vectors rolled, with the
            // vectors in local memory): every index is a constant.
            macro_rules! vector {
                ($k:literal) => {
                    if $k < UNROLL {
                        count_vector(bins, lane, group[$k]);
                    }
                };
            }
            vector!(0);
            vector!(1);
            vector!(2);
            vector!(3);
            v += UNROLL * stride;
        }
        while v < vectors {
            count_vector(bins, lane, vector::load_hinted(words, 4 * v, LoadHint::ReadOnly));
            v += stride;
        }
        if thread::block_idx_x() == 0 && tid < n % LANES {
            let byte = mem::load(data, LANES * vectors + tid);
            bins.atomic_add(byte as usize * COPIES + lane, 1);
        }
        thread::sync_threads();
        if tid < BINS {
            let total: u32 = (0..COPIES)
                .map(|k| bins.load(tid * COPIES + (k + tid) % COPIES))
                .sum();
            if total != 0 {
                atomic::add(counts, tid, total, Scope::Device);
            }
        }
    }
}
