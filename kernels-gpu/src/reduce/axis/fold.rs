//! What the axis kernels fold ([`AxisFold`]: [`Sum`], [`Max`], [`Argmax`]) and the folds they
//! share: a strided run of one lane, a column, a row by a warp, a column by a block.

use super::super::{argmax_combine, warp_argmax, Best};
use super::{COLS_BLOCK_X, COLS_BLOCK_Y, UNROLL};
use crate::gpu::{math, mem, shared, thread, warp};

/// What an axis kernel folds: a running partial per thread, combined over a warp or a block.
pub trait AxisFold {
    /// The running partial.
    type Acc: Copy;
    /// What is written per output.
    type Out: Copy;
    /// The partial of nothing.
    fn identity() -> Self::Acc;
    /// `acc` with element `x`, at index `index` along the reduced axis, folded in after it; a
    /// thread's steps come in increasing index order.
    fn step(acc: Self::Acc, x: f32, index: u32) -> Self::Acc;
    /// Two partials combined, `a` over lower indices than `b`.
    fn combine(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The combination over the warp, returned to every lane.
    fn warp(acc: Self::Acc) -> Self::Acc;
    /// The partial of lane `lane ^ mask` (every lane of the warp calls it).
    fn shuffle_xor(acc: Self::Acc, mask: u32) -> Self::Acc;
    /// The output of a finished partial.
    fn out(acc: Self::Acc) -> Self::Out;
}

/// Sums (f32, in the order the kernels fix).
pub struct Sum;

impl AxisFold for Sum {
    type Acc = f32;
    type Out = f32;
    #[inline(always)]
    fn identity() -> f32 {
        0.0
    }
    #[inline(always)]
    fn step(acc: f32, x: f32, _: u32) -> f32 {
        acc + x
    }
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn warp(acc: f32) -> f32 {
        warp::reduce_sum(acc)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle_xor(acc: f32, mask: u32) -> f32 {
        warp::shfl_xor(acc, mask)
    }
    #[inline(always)]
    fn out(acc: f32) -> f32 {
        acc
    }
}

/// Maxima: NaN if any element is NaN ([`math::max_nan`]).
pub struct Max;

impl AxisFold for Max {
    type Acc = f32;
    type Out = f32;
    #[inline(always)]
    fn identity() -> f32 {
        f32::NEG_INFINITY
    }
    #[inline(always)]
    fn step(acc: f32, x: f32, _: u32) -> f32 {
        math::max_nan(acc, x)
    }
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        math::max_nan(a, b)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn warp(acc: f32) -> f32 {
        warp::reduce_max(acc)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle_xor(acc: f32, mask: u32) -> f32 {
        warp::shfl_xor(acc, mask)
    }
    #[inline(always)]
    fn out(acc: f32) -> f32 {
        acc
    }
}

/// Indices of the maxima, by the family's rule ([`argmax_combine`]: the first NaN, else the
/// first of the largest value).
pub struct Argmax;

impl AxisFold for Argmax {
    type Acc = Best;
    type Out = u32;
    #[inline(always)]
    fn identity() -> Best {
        Best::NONE
    }
    /// The indices of a thread's steps increase, so a later element wins only if it is larger,
    /// or a NaN after none (one compare and a NaN test, where [`argmax_combine`] also compares
    /// the indices).
    #[inline(always)]
    fn step(acc: Best, x: f32, index: u32) -> Best {
        if x > acc.value || (x.is_nan() && !acc.value.is_nan()) {
            Best { value: x, index }
        } else {
            acc
        }
    }
    #[inline(always)]
    fn combine(a: Best, b: Best) -> Best {
        argmax_combine(a, b)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn warp(acc: Best) -> Best {
        warp_argmax(acc)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle_xor(acc: Best, mask: u32) -> Best {
        Best {
            value: warp::shfl_xor(acc.value, mask),
            index: warp::shfl_xor_u32(acc.index, mask),
        }
    }
    /// The index of `acc`; 0 for [`Best::NONE`], which a lane keeps only when none of its
    /// entries is larger than `-inf` (all `-inf`): its first index.
    #[inline(always)]
    fn out(acc: Best) -> u32 {
        if acc.index == Best::NONE.index {
            0
        } else {
            acc.index
        }
    }
}

/// Folds entries `first, first + stride, ...` below `end` of one lane of the reduced axis into
/// `acc`, in index order: `load(i)` reads entry `i` and `fold(acc, e, i)` folds it in. Issues
/// [`UNROLL`] loads before it folds any of them.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) fn fold_strided<A: Copy, E: Copy>(
    mut acc: A,
    (first, stride, end): (usize, usize, usize),
    load: impl Fn(usize) -> E,
    fold: impl Fn(A, E, usize) -> A,
) -> A {
    let mut i = first;
    while i + (UNROLL - 1) * stride < end {
        let v: [E; UNROLL] = core::array::from_fn(|k| load(i + k * stride));
        for (k, &e) in v.iter().enumerate() {
            acc = fold(acc, e, i + k * stride);
        }
        i += UNROLL * stride;
    }
    while i < end {
        acc = fold(acc, load(i), i);
        i += stride;
    }
    acc
}

/// Folds entries `first, first + stride, ...` below `end` of column `col` of the row-major
/// `x` (`cols` columns) into `acc` with `F`, in row order: [`fold_strided`] for a column, written
/// with one pointer stepping down the column and the loads at fixed multiples of one stride
/// from it, so that few registers stay live across the loop and ptxas keeps the [`UNROLL`]
/// loads in flight (with four pointers, one per load, it interleaved loads and folds).
///
/// # Safety
/// `x` holds `end * cols` floats of device memory (at least); `col < cols`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) unsafe fn fold_column<F: AxisFold>(
    mut acc: F::Acc,
    x: *const f32,
    (col, cols): (usize, usize),
    (first, stride, end): (usize, usize, usize),
) -> F::Acc {
    let step = stride * cols;
    let mut p = x.wrapping_add(first * cols + col);
    let mut r = first;
    while r + (UNROLL - 1) * stride < end {
        // SAFETY: rows `r + k * stride < end` of column `col`, at `p + k * step`.
        let v: [f32; UNROLL] = core::array::from_fn(|k| unsafe { mem::load(p, k * step) });
        for (k, &v) in v.iter().enumerate() {
            acc = F::step(acc, v, (r + k * stride) as u32);
        }
        p = p.wrapping_add(UNROLL * step);
        r += UNROLL * stride;
    }
    while r < end {
        // SAFETY: row `r < end` of column `col`.
        acc = F::step(acc, unsafe { mem::load(p, 0) }, r as u32);
        p = p.wrapping_add(step);
        r += stride;
    }
    acc
}

/// The fold `F` of columns `lo..hi` of row `row` by one warp, returned to every lane: lane `l`
/// folds columns `lo + l, lo + l + 32, ...` (each step a coalesced 128-byte read of the row by
/// the warp), then the warp combines its lanes with shuffles. For `row >= rows` the lanes fold
/// nothing but still take part in the shuffles.
///
/// # Safety
/// `x` holds `rows * cols` floats of device memory; `lo <= hi <= cols`; the whole warp calls it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) unsafe fn warp_fold_row<F: AxisFold>(
    x: *const f32,
    (row, rows, cols): (usize, usize, usize),
    (lo, hi): (usize, usize),
) -> F::Acc {
    let lanes = warp::SIZE as usize;
    let lane = thread::thread_idx_x() as usize % lanes;
    let mut acc = F::identity();
    if row < rows {
        let base = row * cols;
        acc = fold_strided(
            acc,
            (lo + lane, lanes, hi),
            // SAFETY: `row < rows` and `i < hi <= cols`.
            |i| unsafe { mem::load(x, base + i) },
            |acc, v, i| F::step(acc, v, i as u32),
        );
    }
    F::warp(acc)
}

/// The fold `F` of entries `lo..hi` of column `col` by one block: thread `(tx, ty)` folds entries
/// `lo + ty, lo + ty + 32, ...` of its column (`fold_run(acc, (first, stride, end))` folds the
/// entries `first, first + stride, ...` below `end` into `acc`; the 32 threads of a row of the
/// block read 32 adjacent columns), writes its partial to shared memory, and after a barrier
/// thread `(tx, 0)` combines the [`COLS_BLOCK_Y`] partials of its column in order. Returns the
/// column's fold on threads `(tx, 0)` with `col < cols`, `None` on the others. Threads with
/// `col >= cols` fold nothing but pass the barrier.
///
/// # Safety
/// Every thread of a [`COLS_BLOCK_X`] x [`COLS_BLOCK_Y`] block calls it, with the launch's
/// [`COLS_SHARED_BYTES`] of dynamic shared memory; `fold_run` may read entries `lo..hi` of
/// column `col` when `col < cols`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) unsafe fn block_fold_col<F: AxisFold>(
    (col, cols): (usize, usize),
    (lo, hi): (usize, usize),
    fold_run: impl Fn(F::Acc, (usize, usize, usize)) -> F::Acc,
) -> Option<F::Acc> {
    let (tx, ty) = (thread::thread_idx_x() as usize, thread::thread_idx_y() as usize);
    let (bx, by) = (COLS_BLOCK_X as usize, COLS_BLOCK_Y as usize);
    let mut acc = F::identity();
    if col < cols {
        acc = fold_run(acc, (lo + ty, by, hi));
    }
    let scratch = shared::dynamic::<F::Acc>();
    // SAFETY: `ty * bx + tx < COLS_BLOCK_X * COLS_BLOCK_Y` partials of at most 8 bytes, the
    // launch's shared memory.
    unsafe {
        mem::store(scratch, ty * bx + tx, acc);
        thread::sync_threads();
    }
    if ty != 0 || col >= cols {
        return None;
    }
    let mut total = acc;
    for k in 1..by {
        // SAFETY: `k * bx + tx` is in the block's scratch, written before the barrier.
        total = F::combine(total, unsafe { mem::load(scratch, k * bx + tx) });
    }
    Some(total)
}
