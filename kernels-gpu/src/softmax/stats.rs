//! The row statistics every softmax kernel reduces: the exponent of an entry relative to the
//! row's reference value, Kahan-compensated sums, and the online `(max, sum)` pair [`Stats`]
//! merged across a lane group, a warp (`warp_stats`) or a block (`block_stats`).

use crate::gpu::{math, mem, thread, warp};

/// The exponent `d` of one entry `x`, given the row's reference value `m` (see the
/// [family's doc](super)).
#[inline(always)]
pub fn exponent(x: f32, m: f32, t: f32) -> f32 {
    if m.is_nan() {
        f32::NAN
    } else if x == m || t == 0.0 {
        0.0
    } else {
        t * (x - m)
    }
}

/// A running f32 sum with Kahan's compensation: the rounding error of each addition is kept and
/// subtracted from the next term, so the error of a sum of `n` terms stays a few units in the
/// last place instead of growing with `n` (a thread of a long row adds tens of thousands of
/// terms: a plain running sum then drifts well past f32 rounding, about `sqrt(n) * 2^-24`).
/// Four flops per term, nothing next to a memory-bound kernel's loads.
///
/// Only additions and subtractions, which neither rustc nor ptxas reassociate or contract, so the
/// compensation survives compilation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KahanSum {
    /// The running sum.
    sum: f32,
    /// What the last additions rounded away, negated: the sum is `sum - compensation`.
    compensation: f32,
}

impl KahanSum {
    /// The empty sum.
    pub const ZERO: KahanSum = KahanSum {
        sum: 0.0,
        compensation: 0.0,
    };

    /// Adds `term`.
    #[inline(always)]
    pub fn add(&mut self, term: f32) {
        let corrected = term - self.compensation;
        let next = self.sum + corrected;
        self.compensation = (next - self.sum) - corrected;
        self.sum = next;
    }

    /// Multiplies the sum (and its compensation) by `factor`.
    #[inline(always)]
    pub fn scale(&mut self, factor: f32) {
        self.sum *= factor;
        self.compensation *= factor;
    }

    /// The compensated value of the sum.
    #[inline(always)]
    pub fn value(self) -> f32 {
        self.sum - self.compensation
    }
}

/// The softmax statistics of a set of entries of one row, for an inverse temperature `t`.
///
/// `m` is their reference value (max for `t >= 0`, min for `t < 0`; NaN if any entry is NaN) and
/// `s = sum exp(exponent(x, m, t))` over them. The empty set has `m` = the reference's identity
/// (`-inf` for `t >= 0`, `+inf` for `t < 0`) and `s = 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// The reference value.
    pub m: f32,
    /// The sum of the exponentials relative to `m`.
    pub s: f32,
}

impl Stats {
    /// The statistics of no entries.
    #[inline(always)]
    pub fn empty(t: f32) -> Stats {
        let m = if t >= 0.0 {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        };
        Stats { m, s: 0.0 }
    }

    /// The statistics of the one entry `x`: it is its own reference, so it counts `exp(0) = 1`.
    #[inline(always)]
    pub fn one(x: f32) -> Stats {
        Stats { m: x, s: 1.0 }
    }

    /// The statistics of the union of two disjoint sets of entries.
    ///
    /// The common reference `m` is the larger (smaller for `t < 0`) of the two; each sum is
    /// rescaled to it by `exp(exponent(m_i, m, t))`. Through [`exponent`] that factor is exactly
    /// 1 when `m_i == m` (also when both are the same infinity, where `m_i - m` would be NaN), 0
    /// when `m_i` is the identity `-inf` and `m` is not (never `0 * NaN`), and NaN when `m` is
    /// NaN. Bit for bit commutative, so both lanes of a shuffle exchange get the same result.
    #[inline(always)]
    pub fn merge(self, other: Stats, t: f32) -> Stats {
        let m = if t >= 0.0 {
            math::max_nan(self.m, other.m)
        } else {
            math::min_nan(self.m, other.m)
        };
        let s = self.s * math::exp(exponent(self.m, m, t)) + other.s * math::exp(exponent(other.m, m, t));
        Stats { m, s }
    }
}

/// The statistics over the warp of one [`Stats`] per lane, returned to every lane
/// ([`group_stats`] of the whole warp).
///
/// Every lane of the warp calls it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) fn warp_stats(stats: Stats, t: f32) -> Stats {
    group_stats::<{ warp::SIZE as usize }>(stats, t)
}

/// The statistics over each aligned group of `G` lanes (`G` a power of two up to 32) of one
/// [`Stats`] per lane, returned to every lane of the group: `log2 G` butterfly steps with lane
/// masks below `G`, so that no value crosses from one group to another.
///
/// In two rounds rather than one round of [`Stats::merge`]: first the group's reference value
/// `M` (a butterfly of one shuffle and one `max.NaN` per step, on `sign(t) * m` so that one
/// maximum serves both signs of `t`), then each lane rescales its own sum once,
/// `s * exp(exponent(m, M, t))`, and the group adds those (a butterfly of one shuffle and one
/// addition per step). The same `(M, S)` as merging pairwise, and the same rules at the edges
/// (they are [`exponent`]'s), for one exponential per lane instead of two per step with
/// `exponent`'s tests around each. Every step is bit for bit commutative (a maximum, a sum of
/// two), so every lane of the group gets the same result.
///
/// Every lane of the warp calls it (the shuffles name the whole warp).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) fn group_stats<const G: usize>(stats: Stats, t: f32) -> Stats {
    const { assert!(G.is_power_of_two() && G <= warp::SIZE as usize) };
    let sign = if t >= 0.0 { 1.0f32 } else { -1.0 };
    let mut key = sign * stats.m;
    let mut mask = G as u32 / 2;
    while mask > 0 {
        key = math::max_nan_fast(key, warp::shfl_xor(key, mask));
        mask /= 2;
    }
    let m = sign * key;
    let mut s = stats.s * math::exp(exponent(stats.m, m, t));
    mask = G as u32 / 2;
    while mask > 0 {
        s += warp::shfl_xor(s, mask);
        mask /= 2;
    }
    Stats { m, s }
}

/// The statistics over the block of one [`Stats`] per thread, returned to every thread.
///
/// Each warp reduces its lanes with shuffles and lane 0 stores the result in `scratch[warp]`;
/// after one barrier every warp reads all the warps' results and reduces them the same way, so
/// all threads get the same value with no second barrier (the block uses `scratch` once).
///
/// # Safety
/// Called once per launch by every thread of a block whose size is a multiple of 32;
/// `scratch` points to `blockDim.x / 32` [`Stats`] of shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) unsafe fn block_stats(scratch: *mut Stats, stats: Stats, t: f32) -> Stats {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let (warp_idx, lane) = (tid / warp::SIZE as usize, tid % warp::SIZE as usize);
    let mine = warp_stats(stats, t);
    // SAFETY: `warp_idx, lane < warps`, the size of `scratch`; each slot is written by one lane
    // before the barrier and only read after it.
    unsafe {
        if lane == 0 {
            mem::store(scratch, warp_idx, mine);
        }
        thread::sync_threads();
        let other = if lane < warps {
            mem::load(scratch, lane)
        } else {
            Stats::empty(t)
        };
        warp_stats(other, t)
    }
}
