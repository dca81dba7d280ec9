//! Warp reductions and scans over any [`Shuffle`] value with a closure: five shuffles each.

use super::shuffle::{shfl_up, shfl_xor, Shuffle};
use super::{lane_id, SIZE};
use crate::math;

/// Combines one value per lane with `op` and returns the result to every lane of the warp.
///
/// A butterfly over lane masks 16, 8, 4, 2, 1: five shuffles (of each 32-bit word of `T`), after
/// which every lane holds the same value for an `op` that is associative and commutative bit for
/// bit (`+` on integers, max, min; on floats `+` may differ between lanes in the last bit, since
/// each lane adds in its own order).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce<T: Shuffle>(value: T, op: impl Fn(T, T) -> T) -> T {
    let mut v = value;
    let mut mask = SIZE / 2;
    while mask > 0 {
        v = op(v, shfl_xor(v, mask));
        mask /= 2;
    }
    v
}

/// The sum over the warp of one value per lane (see [`reduce`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce_sum(value: f32) -> f32 {
    reduce(value, |a, b| a + b)
}

/// The maximum over the warp of one value per lane; NaN if any value is NaN (see [`reduce`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce_max(value: f32) -> f32 {
    reduce(value, math::max_nan)
}

/// The minimum over the warp of one value per lane; NaN if any value is NaN (see [`reduce`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce_min(value: f32) -> f32 {
    reduce(value, math::min_nan)
}

/// The inclusive scan of one value per lane: lane `l` gets `op(v_0, op(v_1, ... v_l))`, combined
/// in lane order (`op(earlier, later)`), so `op` need only be associative.
///
/// Five steps (Hillis and Steele): at distance 1, 2, 4, 8, 16 each lane combines the partial
/// result of the lane that far below, one [`shfl_up`] per step.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn scan_inclusive<T: Shuffle>(value: T, op: impl Fn(T, T) -> T) -> T {
    let lane = lane_id();
    let mut v = value;
    let mut d = 1;
    while d < SIZE {
        let below = shfl_up(v, d);
        if lane >= d {
            v = op(below, v);
        }
        d *= 2;
    }
    v
}

/// The exclusive scan: lane `l` gets `op(v_0, ... v_(l-1))`, and lane 0 `identity`: the
/// [`scan_inclusive`] of the lane below (one more shuffle).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn scan_exclusive<T: Shuffle>(value: T, identity: T, op: impl Fn(T, T) -> T) -> T {
    let inclusive = scan_inclusive(value, op);
    let below = shfl_up(inclusive, 1);
    if lane_id() == 0 {
        identity
    } else {
        below
    }
}
