//! The 256-bin byte histogram's third rung: each warp's bins four times over, interleaved so
//! that a bin's four copies lie in four neighbouring banks and lane `l` counts into copy `l % 4`.
//!
//! In [`histogram`](fn@crate::histogram) the 32 lanes of one `red.shared.add` hit 32 random
//! banks (about 3.5 lanes on the busiest, so each update takes several passes). Here word
//! `bin * 4 + l % 4` of the warp's bins lies in bank `4 * (bin % 8) + l % 4`: lanes of
//! different copies never share a bank, and the 8 lanes of one copy fall into 8 banks, about 2.5
//! on the busiest. The counters stay 32-bit (no folds, unlike
//! [`histogram_lanes`](fn@crate::histogram_lanes)) at 32 KB of shared memory a block, so that 7
//! blocks of 8 warps fit a multiprocessor.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::shared::Array;
use gpukern_device::vector::{self, LoadHint};
use gpukern_device::{kernel, mem, thread, warp};

use crate::byte_histogram::{BINS, HIST_BLOCK};

/// Warps per block.
const WARPS: usize = HIST_BLOCK as usize / 32;
/// Copies of each bin per warp.
pub const SPREAD: usize = 4;
/// Words of one warp's bins.
const WARP_WORDS: usize = BINS * SPREAD;
/// Bytes one vector load brings.
const LANES: usize = 16;

/// Adds the four bytes of `word` to the bins at `base` (the warp's bins plus the lane's copy).
///
/// # Safety
/// `base = warp * WARP_WORDS + lane % SPREAD`; the bins were zeroed before a barrier.
#[inline(always)]
unsafe fn count(bins: Array<u32, { WARPS * WARP_WORDS }>, base: usize, word: u32) {
    let mut rest = word;
    for _ in 0..4 {
        // SAFETY: `base + 255 * SPREAD < (warp + 1) * WARP_WORDS`.
        unsafe { bins.atomic_add(base + (rest & 0xff) as usize * SPREAD, 1) };
        rest >>= 8;
    }
}

/// Adds the histogram of `data[..n]` to `counts` (256 bins, zeroed by the caller before the
/// first launch).
///
/// One thread: zeroes its share of the block's bins; in a grid-stride loop over the 16-byte
/// vectors of `data` (two loaded before either is counted) adds each byte to copy `lane % 4` of
/// its warp's bins (`red.shared.add`); the first `n % 16` threads of block 0 add the ragged end's
/// bytes one each; after a barrier, sums bin `threadIdx.x` over the warps and copies (32 words)
/// and adds it to `counts` with one global atomic. Traffic: 1 byte read per element, 256
/// atomics per block.
///
/// Launch: 1-D blocks of [`HIST_BLOCK`] threads, any grid (a few blocks per multiprocessor).
///
/// # Safety
/// `data` holds `n` bytes, 16-byte aligned; `counts` 256 counters.
#[kernel(block(HIST_BLOCK), barriers(2), shared(bins: Array<u32, { WARPS * WARP_WORDS }>))]
pub unsafe fn histogram_spread(data: *const u8, n: usize, counts: *mut u32) {
    let tid = thread::thread_idx_x() as usize;
    let base = tid / 32 * WARP_WORDS + warp::lane_id() as usize % SPREAD;
    let words = data.cast::<u32>();
    // SAFETY: `k * 256 + tid < WARPS * WARP_WORDS`; `counts` holds 256; vectors `v < n / 16`
    // and the bytes past them lie in `data`.
    unsafe {
        for k in 0..WARPS * SPREAD {
            bins.store(k * BINS + tid, 0);
        }
        thread::sync_threads();
        let vectors = n / LANES;
        let stride = thread::grid_dim_x() as usize * HIST_BLOCK as usize;
        let mut v = thread::block_idx_x() as usize * HIST_BLOCK as usize + tid;
        let count_vector = |v: [u32; 4]| {
            for word in v {
                count(bins, base, word);
            }
        };
        while v < vectors {
            let a: [u32; 4] = vector::load_hinted(words, 4 * v, LoadHint::Streaming);
            if v + stride < vectors {
                let b: [u32; 4] = vector::load_hinted(words, 4 * (v + stride), LoadHint::Streaming);
                count_vector(a);
                count_vector(b);
            } else {
                count_vector(a);
            }
            v += 2 * stride;
        }
        if thread::block_idx_x() == 0 && tid < n % LANES {
            let byte = mem::load(data, LANES * vectors + tid);
            bins.atomic_add(base + byte as usize * SPREAD, 1);
        }
        thread::sync_threads();
        let total: u32 = (0..WARPS * SPREAD)
            .map(|k| bins.load(k / SPREAD * WARP_WORDS + tid * SPREAD + k % SPREAD))
            .sum();
        if total != 0 {
            atomic::add(counts, tid, total, Scope::Device);
        }
    }
}
