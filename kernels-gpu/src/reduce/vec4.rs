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
/// thread, as in [`crate::add::VEC_UNROLL`].
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
unsafe fn sweep(x: *const f32, n: usize, pad: f32, mut visit: impl FnMut(usize, F4, usize)) {
    let vectors = n / 4;
    let threads = VEC_BLOCK as usize;
    let stride = thread::grid_dim_x() as usize * VEC_TILE;
    let mut start = thread::block_idx_x() as usize * VEC_TILE + thread::thread_idx_x() as usize;
    while start < vectors {
        let mut loaded = [F4::ZERO; VEC_UNROLL];
        for (k, slot) in loaded.iter_mut().enumerate() {
            let v = start + k * threads;
            if v < vectors {
                // SAFETY: vector `v < n / 4` holds floats `4v..4v + 4 <= n`, aligned as `x` is.
                *slot = unsafe { vector::load4(x, 4 * v) };
            }
        }
        for (k, vec) in loaded.iter().enumerate() {
            let v = start + k * threads;
            if v < vectors {
                visit(4 * v, *vec, 4);
            }
        }
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
#[kernel]
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
#[kernel]
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

/// `(values[g], indices[g])` = the argmax (see [`argmax_combine`]) of the elements of `x[..n]`
/// block `g` takes, `(-inf, u32::MAX)` for a block with none; [`argmax_pairs`](fn@argmax_pairs)
/// then reduces the pairs.
///
/// Each thread keeps its best `(value, index)` over its vectors and tail element, the warp
/// combines them with two shuffles per step (value and index), the block through shared memory.
///
/// Global memory: reads `4 n` bytes once, writes 8 bytes per block. Launch as
/// [`sum_vec4`](fn@sum_vec4).
///
/// # Safety
/// `x` holds `n <= u32::MAX` floats of device memory, 16-byte aligned; `values` and `indices`
/// hold `gridDim.x` elements each; none overlap.
#[kernel]
pub unsafe fn argmax_vec4(x: *const f32, values: *mut f32, indices: *mut u32, n: usize) {
    let mut best = Best::NONE;
    // SAFETY: forwarded contract.
    unsafe {
        sweep(x, n, f32::NEG_INFINITY, |i, v, count| {
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
    // SAFETY: every thread calls it; the shared memory holds `WARPS` pairs.
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

/// `(out_value[g], out_index[g])` = the argmax of the pairs `(values[i], indices[i])`, `i < n`,
/// that block `g` takes: the second pass of [`argmax_vec4`](fn@argmax_vec4), launched with one
/// block on its partials.
///
/// Thread `tid` of block `g` takes pairs `g * VEC_BLOCK + tid`, stepping by the grid's threads,
/// and combines them with [`argmax_combine`]; then the block as in
/// [`argmax_vec4`](fn@argmax_vec4).
///
/// Global memory: reads 8 bytes per pair, writes 8 bytes per block. Launch: 1-D blocks of
/// exactly [`VEC_BLOCK`] threads, any grid (the host uses one block), [`VEC_SHARED_BYTES`] of
/// dynamic shared memory.
///
/// # Safety
/// `values` and `indices` hold `n` elements each, `out_value` and `out_index` `gridDim.x`; the
/// outputs overlap no input.
#[kernel]
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
