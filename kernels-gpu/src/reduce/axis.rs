//! Reductions along one axis of a row-major `rows x cols` matrix, one output per row (ndarray's
//! `Axis(1)`) or per column (`Axis(0)`): sums ([`sum_rows`](fn@sum_rows),
//! [`sum_cols`](fn@sum_cols)), maxima ([`max_rows`](fn@max_rows), [`max_cols`](fn@max_cols))
//! and the indices of the maxima ([`argmax_rows`](fn@argmax_rows),
//! [`argmax_cols`](fn@argmax_cols)). One launch each, no atomics: every output is written by one
//! thread, in an order fixed by the shape, so the result is the same every run. The three
//! reductions share two kernel bodies (`rows_body`, `cols_body`) and differ only in their
//! [`AxisFold`].

use super::{argmax_combine, warp_argmax, Best};
use crate::gpu::{math, mem, shared, thread, warp};
use crate::kernel;

/// Rows one block of a `*_rows` kernel takes: one per warp.
pub const ROWS_PER_BLOCK: u32 = 8;

/// Threads per block of a `*_rows` kernel.
pub const ROWS_BLOCK: u32 = ROWS_PER_BLOCK * warp::SIZE;

/// Columns one block of a `*_cols` kernel takes (its x extent): a warp reads 32 consecutive
/// floats of a row, 128 contiguous bytes.
pub const COLS_BLOCK_X: u32 = 32;

/// Row groups of one block of a `*_cols` kernel (its y extent): thread `(tx, ty)` folds rows `ty,
/// ty + COLS_BLOCK_Y, ...`; 32 groups make blocks of 1024 threads, so that a matrix of 8192
/// columns (256 blocks) fills the multiprocessors.
pub const COLS_BLOCK_Y: u32 = 32;

/// Elements a thread loads before it folds them (in index order), so that that many loads are
/// in flight where one at a time would leave each thread waiting on each load.
const UNROLL: usize = 4;

/// Dynamic shared memory of a `*_cols` kernel: one partial per thread, 8 bytes each (the
/// largest partial, an argmax's value and index).
pub const COLS_SHARED_BYTES: u32 = COLS_BLOCK_X * COLS_BLOCK_Y * core::mem::size_of::<Best>() as u32;

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
    fn out(acc: Best) -> u32 {
        acc.index
    }
}

/// `out[r]` = the fold `F` of row `r`, for `r < rows`: the body of the `*_rows` kernels.
///
/// One warp per row (warp `w` of block `g` takes row `g * ROWS_PER_BLOCK + w`): lane `l` folds
/// columns `l, l + 32, ...` (each load a coalesced 128-byte read of the row by the warp, 4 loads
/// issued before they are folded in order), the warp combines its lanes with shuffles, and lane 0
/// writes `out[r]`. Warps past the last row fold nothing but still take part in the shuffles.
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per row. Launch: 1-D blocks of
/// exactly [`ROWS_BLOCK`] threads, `ceil(rows / ROWS_PER_BLOCK)` blocks, no shared memory.
///
/// # Safety
/// `x` holds `rows * cols` floats and `out` `rows` outputs of device memory; they do not overlap;
/// `cols <= u32::MAX` (the argmax's indices).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn rows_body<F: AxisFold>(x: *const f32, out: *mut F::Out, rows: usize, cols: usize) {
    let tid = thread::thread_idx_x() as usize;
    let lanes = warp::SIZE as usize;
    let (w, lane) = (tid / lanes, tid % lanes);
    let row = thread::block_idx_x() as usize * ROWS_PER_BLOCK as usize + w;
    let mut acc = F::identity();
    if row < rows {
        let base = row * cols;
        let mut c = lane;
        while c + (UNROLL - 1) * lanes < cols {
            let mut v = [0.0f32; UNROLL];
            for (k, v) in v.iter_mut().enumerate() {
                // SAFETY: `row < rows`, `c + k * 32 < cols`.
                *v = unsafe { mem::load(x, base + c + k * lanes) };
            }
            for (k, &v) in v.iter().enumerate() {
                acc = F::step(acc, v, (c + k * lanes) as u32);
            }
            c += UNROLL * lanes;
        }
        while c < cols {
            // SAFETY: `row < rows`, `c < cols`.
            acc = F::step(acc, unsafe { mem::load(x, base + c) }, c as u32);
            c += lanes;
        }
    }
    let total = F::warp(acc);
    if row < rows && lane == 0 {
        // SAFETY: `row < rows`.
        unsafe { mem::store(out, row, F::out(total)) }
    }
}

/// `out[c]` = the fold `F` of column `c`, for `c < cols`: the body of the `*_cols` kernels.
///
/// Block `g` takes columns `g * 32 ..`: thread `(tx, ty)` folds column `g * 32 + tx` over rows
/// `ty, ty + 32, ...` (each load, the 32 threads of a row of the block read 128 contiguous bytes;
/// 4 loads issued before they are folded in order), writes its partial to shared memory, and
/// after a barrier thread `(tx, 0)` combines the 32 partials of its column in order and writes
/// `out[c]`.
///
/// Global memory: reads `4 rows cols` bytes once, writes one output per column. Launch: 2-D
/// blocks of exactly [`COLS_BLOCK_X`] x [`COLS_BLOCK_Y`] threads, `ceil(cols / 32)` blocks along
/// x, [`COLS_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` holds `rows * cols` floats and `out` `cols` outputs of device memory; they do not overlap;
/// `rows <= u32::MAX` (the argmax's indices).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn cols_body<F: AxisFold>(x: *const f32, out: *mut F::Out, rows: usize, cols: usize) {
    let (tx, ty) = (thread::thread_idx_x() as usize, thread::thread_idx_y() as usize);
    let (bx, by) = (COLS_BLOCK_X as usize, COLS_BLOCK_Y as usize);
    let col = thread::block_idx_x() as usize * bx + tx;
    let mut acc = F::identity();
    if col < cols {
        let mut r = ty;
        while r + (UNROLL - 1) * by < rows {
            let mut v = [0.0f32; UNROLL];
            for (k, v) in v.iter_mut().enumerate() {
                // SAFETY: `r + k * by < rows`, `col < cols`.
                *v = unsafe { mem::load(x, (r + k * by) * cols + col) };
            }
            for (k, &v) in v.iter().enumerate() {
                acc = F::step(acc, v, (r + k * by) as u32);
            }
            r += UNROLL * by;
        }
        while r < rows {
            // SAFETY: `r < rows`, `col < cols`.
            acc = F::step(acc, unsafe { mem::load(x, r * cols + col) }, r as u32);
            r += by;
        }
    }
    let scratch = shared::dynamic::<F::Acc>();
    // SAFETY: `ty * bx + tx < COLS_BLOCK_X * COLS_BLOCK_Y` partials of at most 8 bytes, the
    // launch's shared memory.
    unsafe {
        mem::store(scratch, ty * bx + tx, acc);
        thread::sync_threads();
    }
    if ty == 0 && col < cols {
        let mut total = acc;
        for k in 1..by {
            // SAFETY: `k * bx + tx` is in the block's scratch, written before the barrier.
            total = F::combine(total, unsafe { mem::load(scratch, k * bx + tx) });
        }
        // SAFETY: `col < cols`.
        unsafe { mem::store(out, col, F::out(total)) }
    }
}

/// `out[r] = x[r][0] + ... + x[r][cols - 1]` for `r < rows`: `rows_body` with [`Sum`]. Reads
/// `4 rows cols` bytes, writes `4 rows`.
///
/// # Safety
/// As `rows_body`.
#[kernel]
pub unsafe fn sum_rows(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { rows_body::<Sum>(x, out, rows, cols) }
}

/// `out[c] = x[0][c] + ... + x[rows - 1][c]` for `c < cols`: `cols_body` with [`Sum`]. Reads
/// `4 rows cols` bytes, writes `4 cols`.
///
/// # Safety
/// As `cols_body`.
#[kernel]
pub unsafe fn sum_cols(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { cols_body::<Sum>(x, out, rows, cols) }
}

/// `out[r]` = the largest entry of row `r` (NaN if it holds one): `rows_body` with [`Max`].
/// Reads `4 rows cols` bytes, writes `4 rows`.
///
/// # Safety
/// As `rows_body`.
#[kernel]
pub unsafe fn max_rows(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { rows_body::<Max>(x, out, rows, cols) }
}

/// `out[c]` = the largest entry of column `c` (NaN if it holds one): `cols_body` with [`Max`].
/// Reads `4 rows cols` bytes, writes `4 cols`.
///
/// # Safety
/// As `cols_body`.
#[kernel]
pub unsafe fn max_cols(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { cols_body::<Max>(x, out, rows, cols) }
}

/// `out[r]` = the column of row `r`'s largest entry (its first NaN, else the first of the
/// largest value): `rows_body` with [`Argmax`]. Reads `4 rows cols` bytes, writes `4 rows`.
///
/// # Safety
/// As `rows_body`.
#[kernel]
pub unsafe fn argmax_rows(x: *const f32, out: *mut u32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { rows_body::<Argmax>(x, out, rows, cols) }
}

/// `out[c]` = the row of column `c`'s largest entry (its first NaN, else the first of the
/// largest value): `cols_body` with [`Argmax`]. Reads `4 rows cols` bytes, writes `4 cols`.
///
/// # Safety
/// As `cols_body`.
#[kernel]
pub unsafe fn argmax_cols(x: *const f32, out: *mut u32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { cols_body::<Argmax>(x, out, rows, cols) }
}
