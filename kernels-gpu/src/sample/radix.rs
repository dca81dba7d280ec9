//! The sampling family's fast rung for filtered rows: each filter's threshold by a radix select
//! on the logits' order keys (three histogram passes at most per filter, 11, 11 and 10 bits,
//! where the tutorial rung bisects with up to 32 passes), one block of [`RADIX_BLOCK`] threads
//! per row; and the draw (`walk`) that this rung's row-split kernel (`cluster.rs`) shares.
//!
//! Top-k counts keys per bin (u32 shared atomics). Top-p sums each bin's weights in 32.32 fixed
//! point (u64 shared atomics, whose sums do not depend on the order the threads add in), and the
//! draw walks the same fixed point weights (integer prefix sums: exact, so exactly one thread
//! holds the target, where f32 bases from a tree scan could leave a gap that no thread owns or
//! an overlap that two threads own): the same threshold and token on every run, on the GPU and
//! in the simulator. They may differ from the f32 sums of the tutorial rung where a mass lies
//! within about `cols * 2^-32` of the goal or of the draw's target (a token at such a boundary
//! only), and a token whose weight is below `2^-32` of the row's largest is never drawn.

use super::{order_key, RowMax, NEG_INF_KEY};
use crate::gpu::block::Scratch;
use crate::gpu::convert::Float;
use crate::gpu::shared::Array;
use crate::gpu::{atomic, bf16, math, mem, random, thread};
use crate::kernel;

/// Threads per block of `sample_radix_*` (one block per row).
pub const RADIX_BLOCK: u32 = 1024;

/// Threads of the block, as a count.
const THREADS: usize = RADIX_BLOCK as usize;

/// Bins of one radix pass: 11 bits, two per thread.
const BINS: usize = 2048;

/// The passes of a select, `(shift, bits)` of the order key's digit, most significant first.
const LEVELS: [(u32, u32); 3] = [(21, 11), (10, 11), (0, 10)];

/// Independent loads in flight per thread in a pass over the row (eight, written out in
/// [`for_each`]).
const UNROLL: usize = 8;

/// 1.0 in the fixed point of top-p's weights (32 fraction bits): a weight is at most 1 (the
/// row's largest), so a row of up to 2^32 weights sums without overflow.
const FIXED_ONE: f32 = 4_294_967_296.0;

/// Logit `i` of the row at `x`, widened.
///
/// # Safety
/// `i` lies in the row.
#[inline(always)]
unsafe fn logit<T: Float>(x: *const T, i: usize) -> f32 {
    // SAFETY: the caller's.
    unsafe { mem::load(x, i) }.to_f32()
}

/// Calls `f(i, x_i)` for each column `i` of `lo..hi` this thread takes (`lo + tid`, then
/// strides of `threads`), `UNROLL` loads issued before their uses.
///
/// # Safety
/// `lo..hi` lies in the row at `x`.
#[inline(always)]
pub(crate) unsafe fn for_each<T: Float>(
    x: *const T,
    (lo, hi): (usize, usize),
    (tid, threads): (usize, usize),
    mut f: impl FnMut(usize, f32),
) {
    let mut i = lo + tid;
    // SAFETY (loads): every index is below `hi`.
    unsafe {
        // Written out, not as an array: rustc leaves an array of loads in local memory.
        while i + (UNROLL - 1) * threads < hi {
            let at = |u: usize| i + u * threads;
            let (v0, v1, v2, v3) = (logit(x, at(0)), logit(x, at(1)), logit(x, at(2)), logit(x, at(3)));
            let (v4, v5, v6, v7) = (logit(x, at(4)), logit(x, at(5)), logit(x, at(6)), logit(x, at(7)));
            f(at(0), v0);
            f(at(1), v1);
            f(at(2), v2);
            f(at(3), v3);
            f(at(4), v4);
            f(at(5), v5);
            f(at(6), v6);
            f(at(7), v7);
            i += UNROLL * threads;
        }
        while i < hi {
            f(i, logit(x, i));
            i += threads;
        }
    }
}

/// A kept logit's weight `exp((v - max) * inv_t)` in 32.32 fixed point: `2^32` at `v = max`,
/// 0 for weights below `2^-32` of the largest (never drawn: they sum to at most `cols * 2^-32`
/// of the kept mass).
#[inline(always)]
pub(crate) fn fixed_weight(v: f32, max: f32, inv_t: f32) -> u64 {
    (math::accurate::exp((v - max) * inv_t) * FIXED_ONE) as u64
}

/// The draw over columns `lo..hi`: the first column (in column order) at which the running sum
/// of the fixed point `weight(x_i)` exceeds `target(total)`, `total` being the sum of the
/// range's weights (integer sums: exact, so the segments' bases tile `0..total` and exactly
/// one thread holds the target). Returns that column in the one thread that found it, `None`
/// in the others (and in every thread when no weight is positive).
///
/// What one thread does: sums the weights of its own contiguous segment of
/// `ceil((hi - lo) / THREADS)` columns, a block exclusive scan gives the segments' bases, the
/// last thread publishes the total (one barrier), and the thread whose segment holds the target
/// walks it. Reads the range twice (the second time one segment): the same token every run, on
/// the GPU and in the simulator.
///
/// # Safety
/// Every thread of the block (of `THREADS` threads) calls it, at the same place; `lo..hi` lies
/// in the row at `x`; `target(total) < total` for `total > 0`; `sums` and `total_slot` are the
/// block's and used by nothing else meanwhile.
#[inline(always)]
pub(crate) unsafe fn walk<T: Float, const THREADS: usize>(
    x: *const T,
    (lo, hi): (usize, usize),
    weight: impl Fn(f32) -> u64,
    target: impl FnOnce(u64) -> u64,
    sums: Scratch<u64, THREADS>,
    total_slot: Array<u64, 1>,
) -> Option<i32> {
    let tid = thread::thread_idx_x() as usize;
    let segment = (hi - lo).div_ceil(THREADS);
    let start = (lo + tid * segment).min(hi);
    let end = (start + segment).min(hi);
    // SAFETY: columns of `start..end` lie in `lo..hi`; every thread reaches the scan and the
    // barrier; the slot is written by one thread before the barrier and read after it.
    unsafe {
        let mut own = 0u64;
        for i in start..end {
            own += weight(logit(x, i));
        }
        let base = sums.scan_exclusive(own, 0, |a, b| a + b);
        if tid == THREADS - 1 {
            total_slot.store(0, base + own);
        }
        thread::sync_threads();
        let total = total_slot.load(0);
        if total == 0 {
            return None;
        }
        let target = target(total);
        // The one segment that straddles the target (an empty segment straddles nothing).
        if !(base <= target && target < base + own) {
            return None;
        }
        let mut acc = base;
        for i in start..end {
            acc += weight(logit(x, i));
            if acc > target {
                return Some(i as i32);
            }
        }
        None // unreachable: `acc` reaches `base + own > target`
    }
}

/// The uniform number of row `r`'s draw: Philox4x32-10's first word at counter `(r, offset)`
/// under key `seed`, as 24 bits in `[0, 1)` (the tutorial rung's, so both rungs draw the same
/// token for a seed up to rounding at a boundary between tokens).
#[inline(always)]
pub(crate) fn uniform(r: usize, seed: u64, offset: u64) -> f32 {
    let word = random::philox4x32_10(
        [r as u32, offset as u32, (offset >> 32) as u32, 0],
        [seed as u32, (seed >> 32) as u32],
    )[0];
    random::unit_f32(word)
}

/// `floor(u * total)` for the uniform number `u` (a multiple of `2^-24` in `[0, 1)`), exactly:
/// below `total` for `total > 0`.
#[inline(always)]
pub(crate) fn scaled(u: f32, total: u64) -> u64 {
    let k = (u * 16_777_216.0) as u64;
    (total >> 24) * k + (((total & 0xff_ffff) * k) >> 24)
}

/// The pick of one radix pass, in shared memory: digit, the value of the bins above it, the
/// bin's own value; `NONE` as the digit when no bin reaches the goal.
type Pick = Array<u64, 3>;

/// No bin reached the goal.
const NONE: u64 = u64::MAX;

/// The highest digit `d` whose bins from the top, itself included, reach `goal` (the values of
/// the bins above it staying below), as `(d, above, count of d)`, the same in every thread;
/// `None` when the sum of all bins stays below `goal`. Thread `t` holds digits
/// `BINS - 1 - 2t` and `BINS - 2 - 2t`: their values and their keys' counts.
///
/// # Safety
/// Every thread of the block calls it, at the same place; `scan` and `pick` are the block's.
#[inline(always)]
unsafe fn pick_bin(
    (high, low): (u64, u64),
    (count_high, count_low): (u32, u32),
    goal: u64,
    scan: Scratch<u64, THREADS>,
    pick: Pick,
) -> Option<(u32, u64, u32)> {
    let tid = thread::thread_idx_x() as usize;
    // SAFETY: every thread reaches the scan (two barriers) and the barrier after; thread 0's
    // store of the default is ordered before the scan's barriers, the one chosen store after
    // them and before the last barrier, and every read after it.
    unsafe {
        if tid == 0 {
            pick.store(0, NONE);
        }
        let above = scan.scan_exclusive(high + low, 0, |a, b| a + b);
        let top = (BINS - 1 - 2 * tid) as u64;
        if above < goal && above + high >= goal {
            pick.store(0, top);
            pick.store(1, above);
            pick.store(2, u64::from(count_high));
        } else if above + high < goal && above + high + low >= goal {
            pick.store(0, top - 1);
            pick.store(1, above + high);
            pick.store(2, u64::from(count_low));
        }
        thread::sync_threads();
        let digit = pick.load(0);
        (digit != NONE).then(|| (digit as u32, pick.load(1), pick.load(2) as u32))
    }
}

/// One row's token (see the module `sample` for the rules), by radix selects.
///
/// One block per row `r = blockIdx.x`. Its threads: (1) find the row's largest key and its
/// first index (one pass, a block reduction), the token for greedy rows, `+inf` maxima and rows
/// with nothing to sample; (2) with `0 < top_k < cols`, select the `top_k`-th largest key: per
/// pass a histogram of the next digit of the keys that share the digits chosen so far (2048 u32
/// bins in shared memory), and the digit at which the count from the top reaches the keys still
/// wanted (a block scan); it stops early when that bin's keys are exactly those wanted, so the
/// threshold is the bin's lowest key; (3) with `top_p < 1`, the same over the kept tokens' fixed
/// point weights (2048 u64 bins, and their counts: it stops when the bin holds one token), the
/// goal `top_p` of their total (the first pass's bins summed); (4) draw (`walk`) over the
/// same fixed point weights, the target `floor(u * total)`.
///
/// Global memory: the row read once from DRAM, then up to 8 more times (from L2 for rows that
/// fit it): 1 + (1 to 3) + (1 to 3) + 1 passes and one segment; 4 bytes written. Shared memory:
/// 24 KiB of bins and the collectives' scratch.
///
/// Launch: `rows` blocks of [`RADIX_BLOCK`] threads.
///
/// # Safety
/// `x` holds `rows * cols` logits (`cols >= 1`), `tokens` `rows` integers; the launch is as
/// above.
// Barriers: the maximum's reduction (2); per top-k pass, the bins zeroed, counted, and the pick
// (a scan's 2 and 1); per top-p pass the same, and the total's reduction (2) in its first pass;
// the draw's scan (2) and total (1): 2 + 5 + 7 + 3, the passes' loops kept as loops (the same
// trips in every thread; tests/ptx.rs checks the count).
#[kernel(
    instances(sample_radix_f32 = f32, sample_radix_bf16 = bf16),
    block(RADIX_BLOCK),
    barriers(17),
    shared(
        keys: Scratch<u64, THREADS>,
        scan: Scratch<u64, THREADS>,
        counts: Array<u32, BINS>,
        masses: Array<u64, BINS>,
        pick: Array<u64, 3>,
        total_slot: Array<u64, 1>
    )
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn sample_radix<T: Float>(
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
    let me = (tid, THREADS);
    // SAFETY (all accesses): columns below `cols` of row `r < rows`; bins below `BINS` (digits
    // of at most 11 bits; `2 * tid + 1 < BINS`); the shared items are the block's own, every
    // collective reached by the whole block (the branches below depend on block-wide values).
    unsafe {
        let x = x.add(r * cols);
        // (1) The largest key and its first index.
        let mut best = 0u64;
        for_each(x, (0, cols), me, |i, v| best = best.max(RowMax::rank(v, i)));
        let row = RowMax::of(keys.reduce(best, u64::max));
        if row.greedy(inv_t.is_finite()) {
            if tid == 0 {
                mem::store(tokens, r, row.token());
            }
            return;
        }
        let first = row.first;
        let max = logit(x, first as usize);
        // (2) Top-k: the `top_k`-th largest key, digit by digit.
        let mut floor = NEG_INF_KEY + 1;
        if top_k > 0 && top_k < cols {
            let (mut prefix, mut mask, mut need) = (0u32, 0u32, top_k as u64);
            for (level, &(shift, bits)) in LEVELS.iter().enumerate() {
                counts.store(2 * tid, 0);
                counts.store(2 * tid + 1, 0);
                thread::sync_threads();
                for_each(x, (0, cols), me, |_, v| {
                    let key = order_key(v);
                    if key > NEG_INF_KEY && key & mask == prefix {
                        counts.atomic_add(((key >> shift) & ((1 << bits) - 1)) as usize, 1);
                    }
                });
                thread::sync_threads();
                let counted = (counts.load(BINS - 1 - 2 * tid), counts.load(BINS - 2 - 2 * tid));
                let values = (u64::from(counted.0), u64::from(counted.1));
                // Fewer sampleable keys than `top_k` (the first pass only): all are kept.
                let Some((digit, above, count)) = pick_bin(values, counted, need, scan, pick) else {
                    break;
                };
                prefix |= digit << shift;
                mask |= ((1 << bits) - 1) << shift;
                need -= above;
                if u64::from(count) == need || level == LEVELS.len() - 1 {
                    floor = prefix.max(NEG_INF_KEY + 1);
                    break;
                }
            }
        }
        // (3) Top-p: the largest key whose kept weights at or above it reach `top_p` of the kept
        // mass, digit by digit, in fixed point.
        if top_p < 1.0 {
            let fixed = |v: f32| fixed_weight(v, max, inv_t);
            let (mut prefix, mut mask, mut goal) = (0u32, 0u32, 0u64);
            let mut above_all = 0u64;
            for (level, &(shift, bits)) in LEVELS.iter().enumerate() {
                counts.store(2 * tid, 0);
                counts.store(2 * tid + 1, 0);
                masses.store(2 * tid, 0);
                masses.store(2 * tid + 1, 0);
                thread::sync_threads();
                for_each(x, (0, cols), me, |_, v| {
                    let key = order_key(v);
                    if key >= floor && key > NEG_INF_KEY && key & mask == prefix {
                        let digit = ((key >> shift) & ((1 << bits) - 1)) as usize;
                        counts.atomic_add(digit, 1);
                        atomic::add(masses.ptr(), digit, fixed(v), atomic::Scope::Block);
                    }
                });
                thread::sync_threads();
                let values = (masses.load(BINS - 1 - 2 * tid), masses.load(BINS - 2 - 2 * tid));
                let counted = (counts.load(BINS - 1 - 2 * tid), counts.load(BINS - 2 - 2 * tid));
                if level == 0 {
                    let total = scan.reduce(values.0 + values.1, |a, b| a + b);
                    // The least integer at or past `top_p * total` (f64: exact to 2^-20
                    // of a weight at any row length tokens can index).
                    let exact = total as f64 * f64::from(top_p);
                    goal = exact as u64;
                    if (goal as f64) < exact {
                        goal += 1;
                    }
                }
                let Some((digit, above, count)) = pick_bin(values, counted, goal - above_all, scan, pick)
                else {
                    break; // unreachable: the total reaches the goal
                };
                above_all += above;
                prefix |= digit << shift;
                mask |= ((1 << bits) - 1) << shift;
                if count == 1 || level == LEVELS.len() - 1 {
                    floor = floor.max(prefix);
                    break;
                }
            }
        }
        // (4) The draw over the kept tokens.
        let u = uniform(r, seed, offset);
        let weight = |v: f32| {
            let key = order_key(v);
            if key >= floor && key > NEG_INF_KEY {
                fixed_weight(v, max, inv_t)
            } else {
                0
            }
        };
        if let Some(token) = walk(x, (0, cols), weight, |total| scaled(u, total), scan, total_slot) {
            mem::store(tokens, r, token);
        }
    }
}
