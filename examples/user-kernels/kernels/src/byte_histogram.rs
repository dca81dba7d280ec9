//! A 256-bin histogram of bytes: `counts[b] += #{i : data[i] == b}`.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::shared::Array;
use gpukern_device::vector::{self, LoadHint};
use gpukern_device::{kernel, mem, thread};

/// Bins: one per byte value.
pub const BINS: usize = 256;
/// Threads per block of [`histogram`](fn@histogram): one per bin for the final flush.
pub const HIST_BLOCK: u32 = BINS as u32;
/// Warps per block, each with bins of its own in shared memory (fewer threads bumping one
/// counter at once).
const WARPS: usize = HIST_BLOCK as usize / 32;
/// Bytes one vector load brings.
const LANES: usize = 16;

/// Adds the four bytes of `word` to the bins at `sub` (a warp's own).
///
/// # Safety
/// `sub + 256 <= bins`'s length; the bins were zeroed before a barrier.
#[inline(always)]
unsafe fn count(bins: Array<u32, { WARPS * BINS }>, sub: usize, word: u32) {
    let mut rest = word;
    for _ in 0..4 {
        // SAFETY: `sub + (rest & 255) < sub + 256`.
        unsafe { bins.atomic_add(sub + (rest & 0xff) as usize, 1) };
        rest >>= 8;
    }
}

/// Adds the 16 bytes of `v` to the bins at `sub`.
///
/// # Safety
/// As [`count`].
#[inline(always)]
unsafe fn count_vector(bins: Array<u32, { WARPS * BINS }>, sub: usize, v: [u32; 4]) {
    let [a, b, c, d] = v;
    // SAFETY: forwarded contract.
    unsafe {
        count(bins, sub, a);
        count(bins, sub, b);
        count(bins, sub, c);
        count(bins, sub, d);
    }
}

/// Adds the histogram of `data[..n]` to `counts` (256 bins, zeroed by the caller before the
/// first launch).
///
/// One thread: zeroes its bin in each warp's bins; in a grid-stride loop over the 16-byte
/// vectors of `data` (two loaded before either is counted) adds each byte to its warp's bins in
/// shared memory (`red.shared.add`: the per-warp copies spread the updates of one bin over 8
/// counters); the first `n % 16` threads of block 0 add the ragged end's bytes one each; after a
/// barrier, sums bin `threadIdx.x` over the warps and adds it to `counts` with one global atomic.
/// Traffic: 1 byte read per element, 256 atomics per block.
///
/// Launch: 1-D blocks of [`HIST_BLOCK`] threads, any grid (a few blocks per multiprocessor).
///
/// # Safety
/// `data` holds `n` bytes, 16-byte aligned; `counts` 256 counters.
#[kernel(block(HIST_BLOCK), barriers(2), shared(bins: Array<u32, { WARPS * BINS }>))]
pub unsafe fn histogram(data: *const u8, n: usize, counts: *mut u32) {
    let tid = thread::thread_idx_x() as usize;
    let sub = tid / 32 * BINS;
    let words = data.cast::<u32>();
    // SAFETY: `w * 256 + tid < WARPS * 256`; `counts` holds 256; vectors `v < n / 16` and the
    // bytes past them lie in `data`.
    unsafe {
        for w in 0..WARPS {
            bins.store(w * BINS + tid, 0);
        }
        thread::sync_threads();
        let vectors = n / LANES;
        let stride = thread::grid_dim_x() as usize * BINS;
        let mut v = thread::block_idx_x() as usize * BINS + tid;
        while v < vectors {
            let a: [u32; 4] = vector::load_hinted(words, 4 * v, LoadHint::Streaming);
            if v + stride < vectors {
                let b: [u32; 4] = vector::load_hinted(words, 4 * (v + stride), LoadHint::Streaming);
                count_vector(bins, sub, a);
                count_vector(bins, sub, b);
            } else {
                count_vector(bins, sub, a);
            }
            v += 2 * stride;
        }
        if thread::block_idx_x() == 0 && tid < n % LANES {
            let byte = mem::load(data, LANES * vectors + tid);
            bins.atomic_add(sub + byte as usize, 1);
        }
        thread::sync_threads();
        let total: u32 = (0..WARPS).map(|w| bins.load(w * BINS + tid)).sum();
        if total != 0 {
            atomic::add(counts, tid, total, Scope::Device);
        }
    }
}
