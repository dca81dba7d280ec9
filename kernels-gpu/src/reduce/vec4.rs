//! The fast rung: 16-byte loads in a grid-stride loop over a persistent grid, a warp-shuffle
//! reduction, one partial per block, and a second launch of one block on the partials.
//!
//! Thread `tid` of block `g` takes 4-float vectors `g * VEC_TILE + tid + k * VEC_BLOCK` for
//! `k < VEC_UNROLL`, then moves on by the grid's `gridDim.x * VEC_TILE` vectors; its
//! `VEC_UNROLL` loads are issued before any is used, 64 bytes in flight per thread. Sums are kept
//! in four independent lanes (one per float of a vector), so consecutive adds do not wait on
//! each other. The first `n % 4` threads of the grid also take one tail element each. Then a
//! warp reduction (shuffles), one value per warp through shared memory, warp 0 again, and
//! thread 0 writes `partials[g]`.
//!
//! The host sizes the grid to the blocks resident on the device at once (fewer for small `n`):
//! a few hundred to a thousand partials, which one block of the same kernel (or of
//! [`argmax_pairs`](fn@argmax_pairs)) reduces in the second launch. The grid depends only on
//! `n` and the device, so the order of the additions, and the result, is the same every run.

use super::{argmax_combine, block_combine, warp_argmax, Best, WARPS};
use crate::gpu::vector::{self, F4};
use crate::gpu::{math, mem, thread, warp};
use crate::kernel;

/// Threads per block of the vector-load kernels (8 warps).
pub const VEC_BLOCK: u32 = 256;

/// 4-float vectors each thread loads per sweep before it combines any: 64 bytes in flight per
/// thread, as in the add family's `VEC_UNROLL`.
pub const VEC_UNROLL: usize = 4;

/// Vectors one block covers per sweep.
pub const VEC_TILE: usize = VEC_BLOCK as usize * VEC_UNROLL;

/// Dynamic shared memory of the vector-load kernels: one [`Best`] (8 bytes, the largest
/// per-warp value) per warp.
pub const VEC_SHARED_BYTES: u32 = (WARPS * core::mem::size_of::<Best>()) as u32;

/// Calls `visit(index, vector, 4)` for each 4-float vector of `x[..n]` this thread takes in the
/// grid-stride loop (`index` the vector's first element), then `visit(index, [x, pad, pad, pad],
/// 1)` for the one tail element it takes, if any: `count` says how many floats are elements (a
/// sum or max may ignore it, given the identity as `pad`, and so keep its running values in
/// registers instead of indexing them by a variable).
///
/// # Safety
/// `x` holds `n` floats of device memory, 16-byte aligned; 1-D blocks of [`VEC_BLOCK`] threads.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn sweep(x: *const f32, n: usize, pad: f32, visit: impl FnMut(usize, F4, usize)) {
    // SAFETY: forwarded contract.
    unsafe { sweep_u::<VEC_UNROLL>(x, n, pad, visit) }
}

/// [`sweep`] with `U` vectors per thread and sweep (`VEC_BLOCK * U` vectors per block).
///
/// # Safety
/// As [`sweep`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn sweep_u<const U: usize>(
    x: *const f32,
    n: usize,
    pad: f32,
    mut visit: impl FnMut(usize, F4, usize),
) {
    let vectors = n / 4;
    let threads = VEC_BLOCK as usize;
    let tile = threads * U;
    let stride = thread::grid_dim_x() as usize * tile;
    let mut start = thread::block_idx_x() as usize * tile + thread::thread_idx_x() as usize;
    const { assert!(U <= 8, "unroll_8! unrolls up to 8 vectors") };
    while start < vectors {
        let mut loaded = [F4::ZERO; U];
        unroll_8!(U, |k| {
            let v = start + k * threads;
            if v < vectors {
                // SAFETY: vector `v < n / 4` holds floats `4v..4v + 4 <= n`, aligned as `x` is.
                loaded[k] = unsafe { vector::load4(x, 4 * v) };
            }
        });
        unroll_8!(U, |k| {
            let v = start + k * threads;
            if v < vectors {
                visit(4 * v, loaded[k], 4);
            }
        });
        start += stride;
    }
    let i = 4 * vectors + thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        visit(i, F4([unsafe { mem::load(x, i) }, pad, pad, pad]), 1);
    }
}

/// `op` lane by lane: four independent running values, written out so that they stay in
/// registers.
#[inline(always)]
fn lanes(a: F4, b: F4, op: impl Fn(f32, f32) -> f32) -> F4 {
    let ([a0, a1, a2, a3], [b0, b1, b2, b3]) = (a.0, b.0);
    F4([op(a0, b0), op(a1, b1), op(a2, b2), op(a3, b3)])
}

/// `partials[blockIdx.x]` = the sum of the elements of `x[..n]` this block takes (see the
/// module): with one block, the sum of `x`.
///
/// Global memory: reads `4 n` bytes once, writes 4 bytes per block. Launch: 1-D blocks of
/// exactly [`VEC_BLOCK`] threads, any grid (the host uses the resident blocks, at most
/// `ceil(n / 4 / VEC_TILE)`, at least 1), [`VEC_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` holds `n` floats of device memory, 16-byte aligned; `partials` holds `gridDim.x`
/// floats and does not overlap `x`.
// Barriers: one, in `block_combine` (the warps' results meet in shared memory).
#[kernel(block(VEC_BLOCK), barriers(1))]
pub unsafe fn sum_vec4(x: *const f32, partials: *mut f32, n: usize) {
    let mut acc = F4::ZERO;
    // SAFETY: forwarded contract.
    unsafe { sweep(x, n, 0.0, |_, v, _| acc = lanes(acc, v, |a, b| a + b)) };
    let [a0, a1, a2, a3] = acc.0;
    let mine = (a0 + a1) + (a2 + a3);
    // SAFETY: every thread calls it; the shared memory holds `WARPS` floats.
    let total = unsafe { block_combine(mine, 0.0, warp::reduce_sum) };
    if thread::thread_idx_x() == 0 {
        // SAFETY: `blockIdx.x < gridDim.x`, the length of `partials`.
        unsafe { mem::store(partials, thread::block_idx_x() as usize, total) }
    }
}

/// `partials[blockIdx.x]` = the maximum of the elements of `x[..n]` this block takes, NaN if one
/// is NaN (`-inf` for a block with none): [`sum_vec4`](fn@sum_vec4) with
/// [`max_nan`](math::max_nan).
///
/// Global memory, launch and safety as [`sum_vec4`](fn@sum_vec4).
///
/// # Safety
/// As [`sum_vec4`](fn@sum_vec4).
// Barriers: one, in `block_combine` (the warps' results meet in shared memory).
#[kernel(block(VEC_BLOCK), barriers(1))]
pub unsafe fn max_vec4(x: *const f32, partials: *mut f32, n: usize) {
    let mut acc = F4([f32::NEG_INFINITY; 4]);
    // SAFETY: forwarded contract.
    unsafe {
        sweep(x, n, f32::NEG_INFINITY, |_, v, _| {
            acc = lanes(acc, v, math::max_nan)
        })
    };
    let [a0, a1, a2, a3] = acc.0;
    let mine = math::max_nan(math::max_nan(a0, a1), math::max_nan(a2, a3));
    // SAFETY: every thread calls it; the shared memory holds `WARPS` floats.
    let total = unsafe { block_combine(mine, f32::NEG_INFINITY, warp::reduce_max) };
    if thread::thread_idx_x() == 0 {
        // SAFETY: `blockIdx.x < gridDim.x`, the length of `partials`.
        unsafe { mem::store(partials, thread::block_idx_x() as usize, total) }
    }
}

/// Vectors per thread and sweep of the `_u8` argmax candidates: 128 bytes of loads in flight
/// per thread.
pub const VEC_UNROLL_8: usize = 8;

/// Vectors one block of the `_u8` candidates covers per sweep (what the host sizes the grid by).
pub const VEC_TILE_8: usize = VEC_BLOCK as usize * VEC_UNROLL_8;

/// This thread's argmax with the exact [`argmax_combine`] on every element, `U` vectors per sweep.
///
/// # Safety
/// As [`sweep`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn combine_all<const U: usize>(x: *const f32, n: usize) -> Best {
    let mut best = Best::NONE;
    // SAFETY: forwarded contract.
    unsafe {
        sweep_u::<U>(x, n, f32::NEG_INFINITY, |i, v, count| {
            for (j, value) in v.0.into_iter().enumerate().take(count) {
                best = argmax_combine(
                    best,
                    Best {
                        value,
                        index: (i + j) as u32,
                    },
                );
            }
        })
    };
    best
}

/// `!(value <= best)`: true when `value` is larger or either is NaN (one `setp.gtu`). The lane
/// loop relies on the unordered case: its "none yet" is a NaN `best`, which every number beats.
#[inline(always)]
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn above_or_unordered(value: f32, best: f32) -> bool {
    !(value <= best)
}

/// This thread's argmax with a cheaper loop, `U` vectors per sweep: one running best per lane
/// of the vector (lane `j` sees elements `4v + j` in increasing order, so a strict `>` keeps the
/// first of equal values and no index is compared), the first element index of the vector that
/// holds it, and this thread's first NaN. Per element of a vector with no NaN: one compare
/// (`!(v <= best)`, true for any number over the NaN that means "none yet") and two selects;
/// a vector holding a NaN (one `uno` test per pair of lanes finds it) takes the exact path, which
/// records the first NaN and never lets a NaN into a lane's best. At the end the four lanes and
/// the NaN meet through [`argmax_combine`] with their true indices: the same answer as
/// [`combine_all`].
///
/// # Safety
/// As [`sweep`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn lanes_best<const U: usize>(x: *const f32, n: usize) -> Best {
    // NaN: no element yet (every number compares `!(v <= NaN)`).
    let mut best = [f32::NAN; 4];
    let mut at = [u32::MAX; 4];
    let mut first_nan = u32::MAX;
    // SAFETY: forwarded contract.
    unsafe {
        sweep_u::<U>(x, n, f32::NAN, |i, v, count| {
            let [v0, v1, v2, v3] = v.0;
            let has_nan = v0.is_nan() | v1.is_nan() | v2.is_nan() | v3.is_nan();
            // Selects, not conditional stores, so that `best` and `at` stay in registers.
            if count == 4 && !has_nan {
                for (j, value) in v.0.into_iter().enumerate() {
                    let take = above_or_unordered(value, best[j]);
                    best[j] = if take { value } else { best[j] };
                    at[j] = if take { i as u32 } else { at[j] };
                }
            } else {
                // A vector with a NaN, or the tail element (`count == 1`, padded with NaN): the
                // element at lane `j` is `i + j`; a NaN never enters a lane's best.
                for (j, value) in v.0.into_iter().enumerate() {
                    let nan = j < count && value.is_nan();
                    if nan && first_nan == u32::MAX {
                        first_nan = (i + j) as u32;
                    }
                    let take = j < count && !value.is_nan() && above_or_unordered(value, best[j]);
                    best[j] = if take { value } else { best[j] };
                    at[j] = if take { i as u32 } else { at[j] };
                }
            }
        })
    };
    let mut total = if first_nan == u32::MAX {
        Best::NONE
    } else {
        Best {
            value: f32::NAN,
            index: first_nan,
        }
    };
    for j in 0..4 {
        if at[j] != u32::MAX {
            total = argmax_combine(
                total,
                Best {
                    value: best[j],
                    index: at[j] + j as u32,
                },
            );
        }
    }
    total
}

/// Thread 0 writes the block's argmax of `best` (every thread's) to `values[g]`, `indices[g]`.
///
/// # Safety
/// Every thread of the block calls it; the shared memory holds `WARPS` pairs; the outputs hold
/// `gridDim.x` elements.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn write_block_best(best: Best, values: *mut f32, indices: *mut u32) {
    // SAFETY: forwarded contract.
    let total = unsafe { block_combine(best, Best::NONE, warp_argmax) };
    if thread::thread_idx_x() == 0 {
        let g = thread::block_idx_x() as usize;
        // SAFETY: `g < gridDim.x`, the length of both outputs.
        unsafe {
            mem::store(values, g, total.value);
            mem::store(indices, g, total.index);
        }
    }
}

/// `(values[g], indices[g])` = the argmax (see [`argmax_combine`]) of the elements of `x[..n]`
/// block `g` takes, `(-inf, u32::MAX)` for a block with none; [`argmax_pairs`](fn@argmax_pairs)
/// then reduces the pairs.
///
/// Each thread keeps its best `(value, index)` over its vectors (`U` per sweep, all loaded before
/// any compare) and tail element, the exact [`argmax_combine`] on every element or, with `LANES`,
/// the cheaper per-lane loop of `lanes_best` (a compare and two selects per element, the exact
/// rule only for vectors holding a NaN; the same answer); the warp combines them with two
/// shuffles per step (value and index), the block through shared memory.
///
/// Instances, one PTX entry each:
/// * `argmax_vec4` (`U` = [`VEC_UNROLL`], exact): the default;
/// * `argmax_vec4_u8` ([`VEC_UNROLL_8`], exact), `argmax_vec4_lanes` ([`VEC_UNROLL`], lanes),
///   `argmax_vec4_lanes_u8` ([`VEC_UNROLL_8`], lanes): tuning candidates.
///
/// Global memory: reads `4 n` bytes once (minimum traffic), writes 8 bytes per block. Launch as
/// [`sum_vec4`](fn@sum_vec4), the grid at most `ceil(n / 4 / (VEC_BLOCK * U))` blocks.
///
/// # Safety
/// `x` holds `n <= u32::MAX` floats of device memory, 16-byte aligned; `values` and `indices`
/// hold `gridDim.x` elements each; none overlap.
// Barriers: one, in `block_combine` (the warps' results meet in shared memory).
#[kernel(
    instances(
        argmax_vec4 = (VEC_UNROLL, false),
        argmax_vec4_u8 = (VEC_UNROLL_8, false),
        argmax_vec4_lanes = (VEC_UNROLL, true),
        argmax_vec4_lanes_u8 = (VEC_UNROLL_8, true),
    ),
    block(VEC_BLOCK),
    barriers(1)
)]
#[inline(always)]
pub unsafe fn argmax_vec4_sweep<const U: usize, const LANES: bool>(
    x: *const f32,
    values: *mut f32,
    indices: *mut u32,
    n: usize,
) {
    // SAFETY: forwarded contract.
    unsafe {
        let best = if LANES {
            lanes_best::<U>(x, n)
        } else {
            combine_all::<U>(x, n)
        };
        write_block_best(best, values, indices)
    }
}

/// `(out_value[g], out_index[g])` = the argmax of the pairs `(values[i], indices[i])`, `i < n`,
/// that block `g` takes: the second pass of `argmax_vec4`, launched with one
/// block on its partials.
///
/// Thread `tid` of block `g` takes pairs `g * VEC_BLOCK + tid`, stepping by the grid's threads,
/// and combines them with [`argmax_combine`]; then the block as in
/// `argmax_vec4`.
///
/// Global memory: reads 8 bytes per pair, writes 8 bytes per block. Launch: 1-D blocks of
/// exactly [`VEC_BLOCK`] threads, any grid (the host uses one block), [`VEC_SHARED_BYTES`] of
/// dynamic shared memory.
///
/// # Safety
/// `values` and `indices` hold `n` elements each, `out_value` and `out_index` `gridDim.x`; the
/// outputs overlap no input.
// Barriers: one, in `block_combine` (the warps' results meet in shared memory).
#[kernel(block(VEC_BLOCK), barriers(1))]
pub unsafe fn argmax_pairs(
    values: *const f32,
    indices: *const u32,
    out_value: *mut f32,
    out_index: *mut u32,
    n: usize,
) {
    let mut best = Best::NONE;
    let step = thread::grid_size_1d();
    let mut i = thread::index_1d();
    while i < n {
        // SAFETY: `i < n`.
        let pair = unsafe {
            Best {
                value: mem::load(values, i),
                index: mem::load(indices, i),
            }
        };
        best = argmax_combine(best, pair);
        i += step;
    }
    // SAFETY: every thread calls it; the shared memory holds `WARPS` pairs.
    let total = unsafe { block_combine(best, Best::NONE, warp_argmax) };
    if thread::thread_idx_x() == 0 {
        let g = thread::block_idx_x() as usize;
        // SAFETY: `g < gridDim.x`, the length of both outputs.
        unsafe {
            mem::store(out_value, g, total.value);
            mem::store(out_index, g, total.index);
        }
    }
}
