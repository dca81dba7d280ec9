//! Reductions of a vector to one value (`sum`, `max`, `argmax`) and of a matrix along one axis
//! (`sum_rows`, `max_rows`, `argmax_rows`: one output per row; `sum_cols`, `max_cols`,
//! `argmax_cols`: one per column).
//!
//! Minimum traffic: a vector reduction reads `4 n` bytes (the few partials between passes are
//! negligible); an axis reduction reads `4 rows cols` bytes and writes one float per output.
//!
//! # The ladder, one file per rung
//! * [`tree`]: the tutorial's shared-memory tree ([`reduce_tree`](fn@reduce_tree): `sum_tree`,
//!   `max_tree`): one element per thread, one partial per block, launched again on
//!   the partials until one value is left (`ceil(log_256 n)` launches).
//! * [`vec4`]: 16-byte loads in a grid-stride loop over a persistent grid, warp shuffles, one
//!   partial per block ([`sum_vec4`](fn@sum_vec4), [`max_vec4`](fn@max_vec4),
//!   `argmax_vec4`), then a second launch of one block on the partials
//!   ([`sum_vec4`](fn@sum_vec4) / [`max_vec4`](fn@max_vec4) again, or
//!   [`argmax_pairs`](fn@argmax_pairs)): two launches for any `n`. Tuning candidates of the
//!   argmax: `argmax_vec4_u8` (8 vectors per thread),
//!   `argmax_vec4_lanes` and `argmax_vec4_lanes_u8`
//!   (a running best per lane: one compare and two selects per element).
//! * [`axis`]: reductions along one axis of a matrix, each kernel generic over the reduction
//!   ([`axis::AxisFold`]: [`axis::Sum`], [`axis::Max`], [`axis::Argmax`]), its instances the
//!   entry points. One output per row (`Axis(1)`): a warp per row
//!   ([`reduce_rows`](fn@reduce_rows): `sum_rows`, `max_rows`, `argmax_rows`), 16-byte loads with
//!   a group of lanes per row ([`reduce_rows_vec`](fn@reduce_rows_vec)), a thread per row
//!   ([`reduce_rows_narrow`](fn@reduce_rows_narrow)) and a warp per 4 rows
//!   ([`reduce_rows_short`](fn@reduce_rows_short)). One output per column (`Axis(0)`): a thread
//!   per column and row group, the groups combined in shared memory
//!   ([`reduce_cols`](fn@reduce_cols): `sum_cols`, `max_cols`, `argmax_cols`), and a thread per
//!   column ([`reduce_cols_narrow`](fn@reduce_cols_narrow)). When the outputs are too few to fill
//!   the device, the split passes ([`reduce_rows_parts`](fn@reduce_rows_parts),
//!   [`reduce_cols_parts`](fn@reduce_cols_parts), and the argmax's
//!   [`argmax_rows_parts`](fn@argmax_rows_parts), [`argmax_cols_parts`](fn@argmax_cols_parts))
//!   fold spans of the axis into a matrix of partials, which the column kernels (or
//!   [`argmax_parts`](fn@argmax_parts)) reduce.
//!
//! # Rules
//! * No float atomics: every partial is written by one thread to its own slot and combined by a
//!   fixed tree, so on one device every result is the same bit for bit from run to run (the
//!   grid, and with it the order of the additions, depends only on `n` and the device's
//!   residency).
//! * `max` is NaN if any element is NaN ([`math::max_nan`](crate::gpu::math::max_nan)).
//! * `argmax` ([`argmax_combine`]): a NaN wins over every number (the first NaN, as
//!   `torch.argmax`), otherwise the largest value; ties (`-0.0` and `0.0` included) go to the
//!   lowest index. The rule is a maximum under a total order, so any tree of combinations gives
//!   the sequential answer.

use crate::gpu::{shared, thread, warp};

pub mod axis;
pub mod tree;
pub mod vec4;

// Every rung's items (its kernels' launcher modules among them) at the family's level.
pub use axis::*;
pub use tree::*;
pub use vec4::*;

/// Warps of a [`VEC_BLOCK`]-thread block.
const WARPS: usize = (vec4::VEC_BLOCK / warp::SIZE) as usize;

/// A candidate of an argmax: a value and its index (`u32::MAX` for none).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Best {
    /// The value.
    pub value: f32,
    /// Its index.
    pub index: u32,
}

impl Best {
    /// No candidate: loses to every element (`-inf` at the largest index).
    pub const NONE: Best = Best {
        value: f32::NEG_INFINITY,
        index: u32::MAX,
    };
}

/// The argmax of two candidates: a NaN beats a number, a larger value a smaller one, and
/// between equal values (or two NaNs) the lower index wins. A maximum under a total order on
/// `(is NaN, value, -index)`, so associative and commutative.
#[inline(always)]
pub fn argmax_combine(a: Best, b: Best) -> Best {
    let (a_nan, b_nan) = (a.value.is_nan(), b.value.is_nan());
    let take_b = if a_nan || b_nan {
        if a_nan && b_nan {
            b.index < a.index
        } else {
            b_nan
        }
    } else {
        b.value > a.value || (b.value == a.value && b.index < a.index)
    };
    if take_b {
        b
    } else {
        a
    }
}

/// [`argmax_combine`] over the warp: every lane gets the warp's best.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn warp_argmax(best: Best) -> Best {
    let mut acc = best;
    let mut mask = warp::SIZE / 2;
    while mask > 0 {
        let other = Best {
            value: warp::shfl_xor(acc.value, mask),
            index: warp::shfl_xor_u32(acc.index, mask),
        };
        acc = argmax_combine(acc, other);
        mask /= 2;
    }
    acc
}

/// Combines one value per thread of a [`VEC_BLOCK`]-thread block with `op` (`identity` where a
/// warp has nothing): a warp reduction, each warp's result through shared memory, and a
/// reduction of those by warp 0. The result is valid on thread 0 (warp 0 holds it).
///
/// # Safety
/// Every thread of a 1-D block of [`VEC_BLOCK`] threads calls it; the dynamic shared memory
/// holds at least [`WARPS`] values of `T` that nothing else uses during the call.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn block_combine<T: Copy>(value: T, identity: T, warp_op: impl Fn(T) -> T) -> T {
    let scratch = shared::dynamic::<T>();
    let tid = thread::thread_idx_x() as usize;
    let (warp_idx, lane) = (tid / warp::SIZE as usize, tid % warp::SIZE as usize);
    let mine = warp_op(value);
    // SAFETY: `warp_idx < WARPS` slots (caller's contract); lane 0 of each warp writes its own.
    unsafe {
        if lane == 0 {
            crate::gpu::mem::store(scratch, warp_idx, mine);
        }
        thread::sync_threads();
    }
    let mut total = identity;
    if warp_idx == 0 {
        // SAFETY: `lane < WARPS` slots, written before the barrier.
        let v = if lane < WARPS {
            unsafe { crate::gpu::mem::load(scratch, lane) }
        } else {
            identity
        };
        total = warp_op(v);
    }
    total
}
