//! The tutorial rung: a shared-memory tree reduction, one element per thread.
//!
//! Block `g` reduces elements `g * TREE_BLOCK .. (g + 1) * TREE_BLOCK` with
//! [`block::reduce`] (halving the active threads each round, a barrier
//! between rounds) and writes one partial; the host launches the same kernel on the partials
//! until one value is left. Simple and exact about its order, but a quarter of the threads'
//! loads are 4 bytes wide, most threads idle after the first round, and each pass is a launch.

use super::axis::{AxisFold, Max, Sum};
use crate::gpu::{block, mem, shared, thread};
use crate::kernel;

/// Threads per block of the tree kernels: a power of two (the tree halves it), and 256 keeps
/// several blocks resident per multiprocessor.
pub const TREE_BLOCK: u32 = 256;

/// Dynamic shared memory of the tree kernels: one float per thread.
pub const TREE_SHARED_BYTES: u32 = TREE_BLOCK * 4;

/// `partials[g]` = the fold `F` of `x[g * B .. min(n, (g + 1) * B)]` with `B = TREE_BLOCK`.
///
/// One thread per element: thread `i` loads `x[i]` (the fold's identity past `n`) into shared
/// memory, the block combines them in a tree ([`block::reduce`] with `F`'s combination), and
/// thread 0 writes the block's result to `partials[blockIdx.x]`.
///
/// Instances, one PTX entry each:
/// * `sum_tree` ([`Sum`]): `partials[g] = x[g * B] + ... + x[min(n, (g + 1) * B) - 1]`;
/// * `max_tree` ([`Max`]): their maximum, NaN if one of them is NaN
///   ([`max_nan`](crate::gpu::math::max_nan) in place of `+`, `-inf` past `n`).
///
/// Global memory: reads `4 n` bytes, writes 4 bytes per block. Launch: 1-D blocks of exactly
/// [`TREE_BLOCK`] threads, `ceil(n / TREE_BLOCK)` blocks, [`TREE_SHARED_BYTES`] of dynamic
/// shared memory.
///
/// # Safety
/// `x` holds `n` floats and `partials` `ceil(n / TREE_BLOCK)` floats of device memory; they do
/// not overlap.
// Barriers: three, those of one `block::reduce` (after the store, one per tree round in its
// loop, after the final read).
#[kernel(instances(sum_tree = Sum, max_tree = Max), block(TREE_BLOCK), barriers(3))]
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_tree<F: AxisFold<Acc = f32>>(x: *const f32, partials: *mut f32, n: usize) {
    let i = thread::index_1d();
    // SAFETY: `i < n`.
    let v = if i < n {
        unsafe { mem::load(x, i) }
    } else {
        F::identity()
    };
    // SAFETY: every thread of the power-of-two block calls it; the dynamic shared memory holds
    // `TREE_BLOCK` floats.
    let total = unsafe { block::reduce(shared::dynamic::<f32>(), v, F::combine) };
    if thread::thread_idx_x() == 0 {
        // SAFETY: `blockIdx.x < ceil(n / TREE_BLOCK)`, the length of `partials`.
        unsafe { mem::store(partials, thread::block_idx_x() as usize, total) }
    }
}
