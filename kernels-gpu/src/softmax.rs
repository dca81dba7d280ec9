//! Row-wise softmax with an inverse temperature `t`:
//! `y[r][j] = exp(t*x[r][j] - M_r) / sum_j exp(t*x[r][j] - M_r)`, with `M_r = max_j t*x[r][j]`.
//!
//! Subtracting the row maximum keeps every exponent at most 0, so nothing overflows. A vector
//! is a matrix of one row.

use crate::gpu::{block, math, mem, shared, thread};
use crate::kernel;

/// Threads per block (one block per row). A power of two, as the tree reduction needs; 256
/// threads read a row in coalesced 1 KiB sweeps.
pub const BLOCK: u32 = 256;

/// Dynamic shared memory [`softmax_rows`] needs: one float per thread for the reductions.
pub const SHARED_BYTES: u32 = BLOCK * core::mem::size_of::<f32>() as u32;

/// Block-reduction softmax, three passes over the row.
///
/// Block `r` handles row `r`; thread `tid` handles elements `tid, tid + blockDim.x, ...` of it.
/// Pass 1: each thread takes the max of `t*x` over its elements, and the block reduces the
/// maxima in shared memory. Pass 2: the same for the sum of `exp(t*x - max)`. Pass 3: each
/// thread writes `exp(t*x - max) / sum` for its elements. Global memory: the row is read three
/// times and written once.
///
/// Launch: `rows` blocks of `BLOCK` threads, `SHARED_BYTES` of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory and do not overlap; the launch
/// shape is as above.
#[kernel]
pub unsafe fn softmax_rows(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let stride = thread::block_dim_x() as usize;
    let x_row = x.wrapping_add(row * cols);
    let y_row = y.wrapping_add(row * cols);
    let scratch = shared::dynamic::<f32>();

    // SAFETY (loads and stores below): `j < cols`, inside the row; `scratch` holds
    // `blockDim.x` floats and every thread of the block calls the reductions.
    let mut local_max = f32::NEG_INFINITY;
    let mut j = tid;
    while j < cols {
        local_max = math::max_nan(local_max, t * unsafe { mem::load(x_row, j) });
        j += stride;
    }
    let row_max = unsafe { block::reduce_max(scratch, local_max) };

    let mut local_sum = 0.0f32;
    j = tid;
    while j < cols {
        local_sum += math::exp(t * unsafe { mem::load(x_row, j) } - row_max);
        j += stride;
    }
    let row_sum = unsafe { block::reduce_sum(scratch, local_sum) };

    let inv_sum = 1.0 / row_sum;
    j = tid;
    while j < cols {
        let e = math::exp(t * unsafe { mem::load(x_row, j) } - row_max);
        unsafe { mem::store(y_row, j, e * inv_sum) };
        j += stride;
    }
}
