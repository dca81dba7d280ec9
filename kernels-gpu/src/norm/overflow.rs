//! The rare path of every norm kernel: a row whose statistics overflowed f32.
//!
//! A row of finite entries can still overflow the f32 sums a kernel takes: RMSNorm's sum of
//! squares passes `f32::MAX` (about `3.4e38`) once entries reach about `1.8e19 / sqrt(cols)`,
//! LayerNorm's sum of squared deviations once the spread does (and its sum of `x - x[0]` near
//! `f32::MAX` itself). The kernels' statistic then comes out `inf` (or NaN, `inf - inf`), and
//! `1 / sqrt(inf)` is 0: RMSNorm would write zeros and LayerNorm exactly the bias, finite and
//! wrong. So every kernel tests its statistic once per row (uniform over the row's threads), and
//! where it is not finite has [`rescue`] redo the row from memory on `x` scaled by a power of two
//! (exact): `x * 2^-e` with `2^e <= max |x| < 2^(e+1)`, whose squares cannot overflow. A row with
//! an infinite or NaN entry keeps the family's rules: [`rescue`] computes it unscaled, as the
//! kernels do. The common path pays one comparison per row (and, in the kernels that go on to
//! further rows, one flag); the rescue re-reads the row two or three times and writes it once.

use super::NormElem;
use crate::gpu::{math, mem, thread, warp};

/// The threads that normalise one row together, and how they reduce over themselves.
pub(crate) trait RowThreads: Copy {
    /// This thread's place among them, and their number.
    fn place(self) -> (usize, usize);
    /// Entries a thread takes together, the row's threads dealing out chunks of this many in
    /// turn (1: single entries). The warp kernels' threads take their vectors as they loaded
    /// them, so that a row they stored before is written again by the same threads: the
    /// simulator does not order the lanes of a warp, and the hardware does not promise to.
    fn chunk(self) -> usize {
        1
    }
    /// `op` over one value of each of them, returned to all: an `op` whose identity is 0 (a
    /// sum, or a maximum of magnitudes).
    ///
    /// # Safety
    /// Every one of the row's threads calls it, with the same `op`.
    unsafe fn fold(self, value: f32, op: impl Fn(f32, f32) -> f32 + Copy) -> f32;
}

/// The 32 lanes of a warp (the lane is the place), each taking chunks of the given number of
/// entries (the warp kernels' vectors).
#[derive(Clone, Copy)]
pub(crate) struct WarpRow(pub usize);

impl RowThreads for WarpRow {
    #[inline(always)]
    fn place(self) -> (usize, usize) {
        let lanes = warp::SIZE as usize;
        (thread::thread_idx_x() as usize % lanes, lanes)
    }

    #[inline(always)]
    fn chunk(self) -> usize {
        self.0
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn fold(self, value: f32, op: impl Fn(f32, f32) -> f32 + Copy) -> f32 {
        warp_fold(value, op)
    }
}

/// The threads of a 1-D block whose size is a multiple of 32, reducing through the 32 floats
/// of shared memory at the pointer, each reduction after a block barrier (so the area may have
/// served the kernel's own reductions of the row before).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct BlockRow(pub *mut f32);

impl RowThreads for BlockRow {
    #[inline(always)]
    fn place(self) -> (usize, usize) {
        (thread::thread_idx_x() as usize, thread::block_dim_x() as usize)
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn fold(self, value: f32, op: impl Fn(f32, f32) -> f32 + Copy) -> f32 {
        let lanes = warp::SIZE as usize;
        let (tid, threads) = self.place();
        let (warp_idx, lane) = (tid / lanes, tid % lanes);
        let mine = warp_fold(value, op);
        // SAFETY: the caller's contract: every thread of the block is here, so the barriers
        // are reached by all; the area holds 32 floats, one per warp of the largest block, each
        // written by one lane between two barriers and read after the second.
        unsafe {
            thread::sync_threads();
            if lane == 0 {
                mem::store(self.0, warp_idx, mine);
            }
            thread::sync_threads();
            let other = if lane < threads / lanes {
                mem::load(self.0, lane)
            } else {
                0.0
            };
            warp_fold(other, op)
        }
    }
}

/// `op` over the warp by a butterfly of shuffles: every lane gets the same bits.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn warp_fold(value: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = value;
    let mut mask = warp::SIZE / 2;
    while mask > 0 {
        acc = op(acc, warp::shfl_xor(acc, mask));
        mask /= 2;
    }
    acc
}

/// Calls `f(j)` for the entries `j < cols` of the row that this thread takes ([`RowThreads`]),
/// in increasing order.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn each_entry<G: RowThreads>(rows: G, cols: usize, mut f: impl FnMut(usize)) {
    let (me, size) = rows.place();
    let chunk = rows.chunk().max(1);
    let mut start = me * chunk;
    while start < cols {
        for j in start..(start + chunk).min(cols) {
            f(j);
        }
        start += size * chunk;
    }
}

/// `|x|` (NaN stays NaN): the sign bit cleared.
#[inline(always)]
fn magnitude(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0x7fff_ffff)
}

/// The sum of two floats, as an `op` of [`RowThreads::fold`].
#[inline(always)]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// `2^-e` for `2^e <= amax < 2^(e+1)`, `e >= 0` (`amax` finite and at least 1): a scale that
/// takes `amax` into `[1, 2)` exactly.
#[inline(always)]
fn power_of_two_scale(amax: f32) -> f32 {
    let e = ((amax.to_bits() >> 23) & 0xff).saturating_sub(127).min(126);
    f32::from_bits((127 - e) << 23)
}

/// Whether a row's statistic (RMSNorm's mean square, LayerNorm's variance) calls for
/// [`rescue`]: it is not finite.
#[inline(always)]
pub(crate) fn overflowed(statistic: f32) -> bool {
    !statistic.is_finite()
}

/// Writes RMSNorm (`LAYER = false`) or LayerNorm of the row `x_row` into `y_row` from memory,
/// right for any row: where its largest magnitude is finite and at least 1, on its entries
/// scaled by a power of two (see the module), whose sums cannot overflow; otherwise as the
/// kernels compute it (a row of small entries cannot overflow, and a row with an infinite or NaN
/// entry gets the family's rules: RMSNorm 0 at finite entries and NaN at the others, LayerNorm
/// all NaN). The kernels call it for a row whose statistic was not finite. LayerNorm takes
/// deviations from the row's first entry, as the kernels do (see the [family's doc](super)):
/// `x * s - x[0] * s` is exact where the entries are within a factor 2 of each other. Every one
/// of the row's threads calls it, and they take the same branches.
///
/// A called function (`rescue_call`), which the kernels reach only with nothing of theirs live
/// across the call: a block-per-row kernel returns right after it, and the kernels that go on to
/// further rows (a warp's rows, a ring's) only note that a row needs it and redo their rows once
/// they are done. Inlined, its code raised the in-register kernels' registers (the bf16
/// LayerNorm of 16 a thread from 31 to 40); called with the kernel's row still live, the call's
/// conventions did (to 46).
///
/// Global memory: `x_row` read two (RMSNorm) or three times, `y_row` written once, `w` and `b`
/// once.
///
/// # Safety
/// `x_row` and `y_row` point to `cols >= 1` elements of global memory that do not overlap, `w`
/// and `b` (read only with `LAYER`) to `cols`; every one of the row's threads calls it (`rows`'
/// contract).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn rescue<E: NormElem, G: RowThreads, const LAYER: bool>(
    rows: G,
    (x_row, y_row): (*const E, *mut E),
    (w, b): (*const E, *const E),
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { rescue_call::<E, G, LAYER>(rows, x_row, y_row, w, b, cols, eps) }
}

/// [`rescue`] as a called function, its parameters scalars (aggregates would go through a stack
/// frame).
///
/// # Safety
/// As [`rescue`].
#[inline(never)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn rescue_call<E: NormElem, G: RowThreads, const LAYER: bool>(
    rows: G,
    x_row: *const E,
    y_row: *mut E,
    w: *const E,
    b: *const E,
    cols: usize,
    eps: f32,
) {
    // SAFETY (loads and stores below): `j < cols`, inside the row, the weight and the bias; the
    // folds are reached by all of the row's threads (the caller's contract, and every branch
    // below depends only on folded values, the same for all).
    let mut amax = 0.0f32;
    each_entry(rows, cols, |j| {
        amax = math::max_nan(amax, magnitude(unsafe { E::load(x_row, j) }))
    });
    let amax = unsafe { rows.fold(amax, math::max_nan) };
    let s = if amax.is_finite() && amax >= 1.0 {
        power_of_two_scale(amax)
    } else {
        1.0
    };
    let inv_n = 1.0 / cols as f32;
    let shift = if LAYER {
        s * unsafe { E::load(x_row, 0) }
    } else {
        0.0
    };
    let mu = if LAYER {
        let mut t = 0.0f32;
        each_entry(rows, cols, |j| t += s * unsafe { E::load(x_row, j) } - shift);
        inv_n * unsafe { rows.fold(t, add) }
    } else {
        0.0
    };
    let mut q = 0.0f32;
    each_entry(rows, cols, |j| {
        let d = (s * unsafe { E::load(x_row, j) } - shift) - mu;
        q = math::fma(d, d, q);
    });
    // `(x - m) / sqrt(v + eps)` is `(x s - m s) / sqrt(v s^2 + eps s^2)`. Scaled, `eps s^2` may
    // vanish beside `v s^2`, which is then at least `2^-2 / cols` (RMSNorm), or is 0 only where
    // every deviation is 0 (LayerNorm: `y = b`).
    let denominator = inv_n * unsafe { rows.fold(q, add) } + eps * s * s;
    let rstd = if s < 1.0 && denominator == 0.0 {
        0.0
    } else {
        1.0 / math::sqrt(denominator)
    };
    each_entry(rows, cols, |j| unsafe {
        let (x, g) = (E::load(x_row, j), E::load(w, j));
        let out = if LAYER {
            math::fma(((s * x - shift) - mu) * rstd, g, E::load(b, j))
        } else {
            x * (s * rstd) * g
        };
        E::store(y_row, j, out);
    });
}
