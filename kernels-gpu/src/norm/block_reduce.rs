//! The tutorial norms: one block per row, the row re-read from memory for each pass, tree
//! reductions in shared memory ([`block::reduce_sum`]). Any row length, any alignment.

use super::overflow::{overflowed, rescue, BlockRow};
use super::NormElem;
use crate::gpu::{bf16, block, math, shared, thread};
use crate::kernel;

/// Threads per block (one block per row). A power of two, as the tree reduction needs; 256
/// threads read a row in coalesced sweeps of 1 KiB (f32).
pub const BLOCK: u32 = 256;

/// Dynamic shared memory of the tutorial kernels: one float per thread for the reductions.
pub const SHARED_BYTES: u32 = BLOCK * core::mem::size_of::<f32>() as u32;

/// RMSNorm of one row per block, two passes over the row in memory.
///
/// Block `r` handles row `r`; thread `tid` handles entries `tid, tid + blockDim.x, ...`. Pass 1:
/// each thread sums the squares of its entries and the block reduces them (`block::reduce_sum`)
/// to `ms`; pass 2: each thread writes `x * (1 / sqrt(ms / cols + eps)) * w`.
///
/// Instances: `rms_norm_block_reduce_f32` (f32) and `rms_norm_block_reduce_bf16` (bf16, f32
/// statistics).
///
/// Global memory: `x` read twice, `y` written once, `w` read once per block: minimum traffic 8
/// bytes per element in f32 (read `x`, write `y`), 4 in bf16; this rung moves 12 (6 in bf16).
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` to
/// `cols`; `rows` blocks of [`BLOCK`] threads, [`SHARED_BYTES`] of dynamic shared memory.
// Barriers: three, those of one `block::reduce_sum`.
#[kernel(
    instances(rms_norm_block_reduce_f32 = f32, rms_norm_block_reduce_bf16 = bf16),
    block(BLOCK),
    barriers(3)
)]
#[inline(always)]
pub unsafe fn rms_norm_block_reduce<E: NormElem>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let stride = thread::block_dim_x() as usize;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    let scratch = shared::dynamic::<f32>();
    // SAFETY (loads and stores below): `j < cols`, inside the row and the weight; `scratch`
    // holds `blockDim.x` floats and every thread of the block calls the reduction.
    let mut local = 0.0f32;
    let mut j = tid;
    while j < cols {
        let v = unsafe { E::load(x_row, j) };
        local = math::fma(v, v, local);
        j += stride;
    }
    let ms = unsafe { block::reduce_sum(scratch, local) } / cols as f32;
    // The rare path of a row whose squares overflowed (see `overflow`): uniform over the block.
    if overflowed(ms) {
        unsafe { rescue::<E, _, false>(BlockRow(scratch), (x_row, y_row), (w, w), cols, eps) };
        return;
    }
    let inv = 1.0 / math::sqrt(ms + eps);
    j = tid;
    while j < cols {
        let (v, g) = unsafe { (E::load(x_row, j), E::load(w, j)) };
        unsafe { E::store(y_row, j, v * inv * g) };
        j += stride;
    }
}

/// LayerNorm of one row per block, three passes over the row in memory.
///
/// Block `r` handles row `r`; thread `tid` handles entries `tid, tid + blockDim.x, ...`. Pass 1:
/// each thread sums `x - x[r][0]` over its entries and the block reduces them to the mean `mu`
/// (the shift keeps the terms small, see the [family's doc](super)); pass 2: the same for
/// `(x - mu)^2`, the variance; pass 3: each thread writes `(x - mu) * rstd * w + b`.
///
/// Instances: `layer_norm_block_reduce_f32` (f32) and `layer_norm_block_reduce_bf16` (bf16, f32
/// statistics).
///
/// Global memory: `x` read three times, `y` written once, `w` and `b` read once per block:
/// minimum traffic 8 bytes per element in f32, 4 in bf16; this rung moves 16 (8 in bf16).
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` and `b`
/// to `cols`; `cols >= 1`; `rows` blocks of [`BLOCK`] threads, [`SHARED_BYTES`] of dynamic
/// shared memory.
// Barriers: six, those of two `block::reduce_sum` (the mean, then the variance).
#[kernel(
    instances(layer_norm_block_reduce_f32 = f32, layer_norm_block_reduce_bf16 = bf16),
    block(BLOCK),
    barriers(6)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm_block_reduce<E: NormElem>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let stride = thread::block_dim_x() as usize;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    let scratch = shared::dynamic::<f32>();
    let n = cols as f32;
    // SAFETY (loads and stores below): `j < cols`, inside the row, the weight and the bias
    // (`cols >= 1`, so entry 0 exists); `scratch` holds `blockDim.x` floats and every thread of
    // the block calls the reductions (each ends with a barrier, so `scratch` can be reused).
    let shift = unsafe { E::load(x_row, 0) };
    let mut local = 0.0f32;
    let mut j = tid;
    while j < cols {
        local += unsafe { E::load(x_row, j) } - shift;
        j += stride;
    }
    // The mean of `x - shift`; deviations are `(x - shift) - mu` (see the family's doc).
    let mu = unsafe { block::reduce_sum(scratch, local) } / n;
    local = 0.0;
    j = tid;
    while j < cols {
        let d = (unsafe { E::load(x_row, j) } - shift) - mu;
        local = math::fma(d, d, local);
        j += stride;
    }
    let var = unsafe { block::reduce_sum(scratch, local) } / n;
    // The rare path of a row whose sums overflowed (see `overflow`): uniform over the block.
    if overflowed(var) {
        unsafe { rescue::<E, _, true>(BlockRow(scratch), (x_row, y_row), (w, b), cols, eps) };
        return;
    }
    let rstd = 1.0 / math::sqrt(var + eps);
    j = tid;
    while j < cols {
        let (v, g, beta) = unsafe { (E::load(x_row, j), E::load(w, j), E::load(b, j)) };
        unsafe { E::store(y_row, j, math::fma(((v - shift) - mu) * rstd, g, beta)) };
        j += stride;
    }
}
