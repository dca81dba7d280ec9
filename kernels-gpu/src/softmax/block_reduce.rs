//! The tutorial kernel: one block per row, three passes over the row, tree reductions in
//! shared memory ([`block::reduce_max`], [`block::reduce_sum`]).

use super::stats::{exponent, KahanSum};
use crate::gpu::{block, math, mem, shared, thread};
use crate::kernel;

/// Threads per block (one block per row). A power of two, as the tree reduction needs; 256
/// threads read a row in coalesced 1 KiB sweeps.
pub const BLOCK: u32 = 256;

/// Dynamic shared memory [`softmax_block_reduce`](fn@softmax_block_reduce) needs: one float per thread for the reductions.
pub const SHARED_BYTES: u32 = BLOCK * core::mem::size_of::<f32>() as u32;

/// Block-reduction softmax, three passes over the row.
///
/// Block `r` handles row `r`; thread `tid` handles elements `tid, tid + blockDim.x, ...` of it.
/// Pass 1: each thread takes the max (min for `t < 0`) over its elements, and the block reduces
/// them in shared memory to `m`. Pass 2: the same for the sum of `exp(d)`. Pass 3: each thread
/// writes `exp(d) / sum` for its elements. Global memory: the row is read three times and
/// written once.
///
/// Launch: `rows` blocks of [`BLOCK`] threads, [`SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory and do not overlap; the launch
/// shape is as above.
// Barriers: nine. Each `block::reduce` has three (after the store, one per tree round in its
// loop, after the final read); the kernel calls `reduce_max` or `reduce_min` (a branch on `t`,
// which is the same for the whole block), then `reduce_sum`: three call sites.
#[kernel(block(BLOCK), barriers(9))]
pub unsafe fn softmax_block_reduce(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let stride = thread::block_dim_x() as usize;
    let x_row = x.wrapping_add(row * cols);
    let y_row = y.wrapping_add(row * cols);
    let scratch = shared::dynamic::<f32>();
    let largest = t >= 0.0;

    // SAFETY (loads and stores below): `j < cols`, inside the row; `scratch` holds
    // `blockDim.x` floats and every thread of the block calls the reductions.
    let mut local = if largest { f32::NEG_INFINITY } else { f32::INFINITY };
    let mut j = tid;
    while j < cols {
        let v = unsafe { mem::load(x_row, j) };
        local = if largest {
            math::max_nan(local, v)
        } else {
            math::min_nan(local, v)
        };
        j += stride;
    }
    let m = unsafe {
        if largest {
            block::reduce_max(scratch, local)
        } else {
            block::reduce_min(scratch, local)
        }
    };

    // Compensated: a thread adds cols / blockDim.x terms, 65536 for a row of 2^24.
    let mut local_sum = KahanSum::ZERO;
    j = tid;
    while j < cols {
        local_sum.add(math::exp(exponent(unsafe { mem::load(x_row, j) }, m, t)));
        j += stride;
    }
    let row_sum = unsafe { block::reduce_sum(scratch, local_sum.value()) };

    let inv_sum = 1.0 / row_sum;
    j = tid;
    while j < cols {
        let e = math::exp(exponent(unsafe { mem::load(x_row, j) }, m, t));
        unsafe { mem::store(y_row, j, e * inv_sum) };
        j += stride;
    }
}
