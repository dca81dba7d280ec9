//! The sampling family's tutorial rung: each filter's threshold found by bisection over the
//! logits' order keys, every step one pass over the row in global memory (L1/L2 after the
//! first) and one block reduction.

use super::{order_key, RowMax, NEG_INF_KEY, SAMPLE_BLOCK};
use crate::gpu::block::Scratch;
use crate::gpu::convert::Float;
use crate::gpu::shared::Array;
use crate::gpu::{bf16, math, mem, random, thread};
use crate::kernel;

/// Threads of the block, as a count.
const THREADS: usize = SAMPLE_BLOCK as usize;

/// Logit `i` of the row at `x`, widened.
///
/// # Safety
/// `i` lies in the row.
#[inline(always)]
unsafe fn logit<T: Float>(x: *const T, i: usize) -> f32 {
    // SAFETY: the caller's.
    unsafe { mem::load(x, i) }.to_f32()
}

/// Logit `i`'s unnormalised probability `exp((x_i - max) * inv_t)` if its key is at least
/// `floor` (and above `-inf`'s), else 0.
#[inline(always)]
fn weight(v: f32, max: f32, inv_t: f32, floor: u32) -> f32 {
    let key = order_key(v);
    if key >= floor && key > NEG_INF_KEY {
        math::accurate::exp((v - max) * inv_t)
    } else {
        0.0
    }
}

/// The largest key `k` in `lo..=hi` with `enough(k)`, given `enough(lo)` and that `enough` only
/// turns false as `k` grows: 32 steps at most, each one call (one pass over the row).
#[inline(always)]
fn bisect(mut lo: u32, mut hi: u32, mut enough: impl FnMut(u32) -> bool) -> u32 {
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if enough(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// One row's token (see the module for the rules), by the tutorial's bisections.
///
/// One block per row `r = blockIdx.x`. Its threads: (1) find the row's largest key and its
/// first index (one strided pass, a block reduction of `(key, !index)`), which is the token for
/// greedy rows (`inv_t` infinite: `t = 0`), `+inf` maxima and rows with nothing to sample; (2)
/// with `0 < top_k < cols`, bisect for the largest key that at least `top_k` logits reach (up to
/// 32 passes, each a block count); (3) with `top_p < 1`, total the kept weights and bisect for
/// the largest key whose weights at or above it reach `top_p` of that total (up to 32 passes,
/// each a block sum in a fixed order); (4) draw: each thread sums the kept weights of its own
/// contiguous segment of `ceil(cols / 512)` columns, a block exclusive scan gives the segments'
/// bases (in shared memory), and the thread whose segment holds `u * total` walks it to the
/// token. Global memory: the row read `4 + (passes)` times (the later passes from L2 for rows that
/// fit it), 4 bytes written.
///
/// Launch: `rows` blocks of [`SAMPLE_BLOCK`] threads.
///
/// # Safety
/// `x` holds `rows * cols` logits (`cols >= 1`), `tokens` `rows` integers; the launch is as
/// above.
// Barriers: two per block collective: the maximum, the count in top-k's bisection, the sums of
// top-p's total and of its bisection, the scan of the segments; and one after the bases are
// written. Every loop holding one runs the same trips in every thread of the block.
#[kernel(
    instances(sample_search_f32 = f32, sample_search_bf16 = bf16),
    block(SAMPLE_BLOCK),
    barriers(11),
    shared(
        keys: Scratch<u64, THREADS>,
        counts: Scratch<u32, THREADS>,
        sums: Scratch<f32, THREADS>,
        bases: Array<f32, { THREADS + 1 }>
    )
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn sample_search<T: Float>(
    x: *const T,
    tokens: *mut i32,
    rows: usize,
    cols: usize,
    inv_t: f32,
    top_k: usize,
    top_p: f32,
    seed: u64,
    offset: u64,
) {
    let r = thread::block_idx_x() as usize;
    let tid = thread::thread_idx_x() as usize;
    if r >= rows {
        return;
    }
    // SAFETY (all accesses): columns below `cols` of row `r < rows`; the shared items are the
    // block's own, every collective reached by the whole block.
    unsafe {
        let x = x.add(r * cols);
        // (1) The largest key and its first index.
        let mut best = 0u64;
        let mut i = tid;
        while i < cols {
            best = best.max(RowMax::rank(logit(x, i), i));
            i += THREADS;
        }
        let row = RowMax::of(keys.reduce(best, u64::max));
        if row.greedy(inv_t.is_finite()) {
            if tid == 0 {
                mem::store(tokens, r, row.token());
            }
            return;
        }
        let (max_key, first) = (row.key, row.first);
        let max = logit(x, first as usize);
        // (2) Top-k: the largest key that at least `top_k` logits reach.
        let mut floor = NEG_INF_KEY + 1;
        if top_k > 0 && top_k < cols {
            floor = bisect(floor, max_key, |key| {
                let mut count = 0u32;
                let mut i = tid;
                while i < cols {
                    count += u32::from(order_key(logit(x, i)) >= key);
                    i += THREADS;
                }
                counts.reduce(count, |a, b| a + b) as usize >= top_k
            });
        }
        // (3) Top-p: the largest key whose weights at or above it reach `top_p` of the kept mass.
        let mass_from = |key: u32| {
            let mut sum = 0.0f32;
            let mut i = tid;
            while i < cols {
                sum += weight(logit(x, i), max, inv_t, key);
                i += THREADS;
            }
            sums.reduce(sum, |a, b| a + b)
        };
        if top_p < 1.0 {
            let goal = top_p * mass_from(floor);
            floor = bisect(floor, max_key, |key| mass_from(key) >= goal);
        }
        // (4) The draw: segments' kept weights, their bases, and the walk.
        let segment = cols.div_ceil(THREADS);
        let (start, end) = ((tid * segment).min(cols), ((tid + 1) * segment).min(cols));
        let mut own = 0.0f32;
        for i in start..end {
            own += weight(logit(x, i), max, inv_t, floor);
        }
        let base = sums.scan_exclusive(own, 0.0, |a, b| a + b);
        bases.store(tid, base);
        if tid == THREADS - 1 {
            bases.store(THREADS, base + own);
        }
        thread::sync_threads();
        let total = bases.load(THREADS);
        let word = random::philox4x32_10(
            [r as u32, offset as u32, (offset >> 32) as u32, 0],
            [seed as u32, (seed >> 32) as u32],
        )[0];
        let target = random::unit_f32(word) * total;
        let next = bases.load(tid + 1);
        // The one segment whose bases straddle the target (bases never decrease; an empty
        // segment straddles nothing).
        if base <= target && target < next {
            let (mut acc, mut token) = (base, -1);
            for i in start..end {
                let w = weight(logit(x, i), max, inv_t, floor);
                if w > 0.0 {
                    token = i as i32;
                    acc += w;
                    if acc > target {
                        break;
                    }
                }
            }
            // Rounding may leave `acc` short of `next`: the segment's last kept token then.
            mem::store(tokens, r, token);
        }
    }
}
