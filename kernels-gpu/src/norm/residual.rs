//! Residual add fused into RMSNorm, the step between two sublayers of a pre-norm transformer
//! (Llama's `h = x + r; y = rmsnorm(h) * w`):
//! [`residual_rms_norm_block_reduce`](fn@residual_rms_norm_block_reduce), the tutorial, and
//! [`residual_rms_norm_rows`](fn@residual_rms_norm_rows), the row in registers.
//!
//! Both write the new residual `h[r][j] = x[r][j] + res[r][j]`, rounded once to the element
//! type, and `y[r][j] = h[r][j] / sqrt(mean_j h[r][j]^2 + eps) * w[j]`, where the statistic is
//! taken over the *rounded* `h` (the values the next sublayer adds to), in f32, as PyTorch eager
//! (`h = x + r` in bf16, then `rms_norm(h)`) and vLLM's `fused_add_rms_norm` compute it. Rules
//! at the edges are the norm family's (see the [family's doc](super)): a zero row gives zeros,
//! a NaN makes its row NaN, a row of finite `h` whose squares overflow f32 is redone scaled by a
//! power of two (`overflow`'s rescue, on the stored `h`).

use super::overflow::{overflowed, rescue, BlockRow};
use super::{
    block_sum, load_words, rcp_fast, rewiden_words, rsqrt_fast, scratch, widen_words, NormElem, ROW_BLOCK_MAX,
};
use crate::gpu::{bf16, block, math, shared, thread};
use crate::kernel;

/// Threads per block of the tutorial (one block per row): the norm tutorial's block.
pub const RESIDUAL_BLOCK: u32 = super::BLOCK;

/// Dynamic shared memory of the tutorial: one float per thread for the tree reduction.
pub const RESIDUAL_SHARED_BYTES: u32 = super::SHARED_BYTES;

/// Dynamic shared memory of the in-register kernel: one float per warp of the largest block.
pub const RESIDUAL_ROWS_SHARED_BYTES: u32 = super::ROWS_SHARED_BYTES;

/// The residual sum of two widened elements, rounded to the element type and widened back: what
/// is stored as `h` and what the statistic is taken over.
#[inline(always)]
fn rounded<E: NormElem>(v: f32) -> f32 {
    if E::LANES == 8 {
        crate::gpu::convert::bf16_to_f32(crate::gpu::convert::f32_to_bf16(v))
    } else {
        v
    }
}

/// Residual add and RMSNorm of one row per block, two passes over the row in memory.
///
/// Block `r` handles row `r`; thread `tid` handles entries `tid, tid + blockDim.x, ...`. Pass 1:
/// each thread reads `x` and `res`, stores `h = x + res` (rounded) and sums `h^2`; the block
/// reduces the sums ([`block::reduce_sum`], whose barriers also make every `h` of the row
/// visible to the block); pass 2: each thread re-reads its own `h` and writes
/// `h * (1 / sqrt(ms + eps)) * w`.
///
/// Instances: `residual_rms_norm_block_reduce_f32`, `residual_rms_norm_block_reduce_bf16`.
///
/// Global memory: `x` and `res` read once, `h` written once and read once, `y` written once,
/// `w` read once per block: minimum traffic 16 bytes per element in f32 (read `x`, `res`, write
/// `h`, `y`), 8 in bf16; this rung moves 20 (10 in bf16).
///
/// # Safety
/// `x`, `res`, `h` and `y` point to `rows * cols` elements of device memory, `h` and `y`
/// overlapping nothing; `w` to `cols`; `rows` blocks of [`RESIDUAL_BLOCK`] threads,
/// [`RESIDUAL_SHARED_BYTES`] of dynamic shared memory.
// Barriers: three, those of one `block::reduce_sum`.
#[kernel(
    instances(
        residual_rms_norm_block_reduce_f32 = f32,
        residual_rms_norm_block_reduce_bf16 = bf16,
    ),
    block(RESIDUAL_BLOCK),
    barriers(3)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn residual_rms_norm_block_reduce<E: NormElem>(
    x: *const E,
    res: *const E,
    w: *const E,
    h: *mut E,
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
    let at = row * cols;
    let (x_row, r_row) = (x.wrapping_add(at), res.wrapping_add(at));
    let (h_row, y_row) = (h.wrapping_add(at), y.wrapping_add(at));
    let scratch = shared::dynamic::<f32>();
    // SAFETY (loads and stores below): `j < cols`, inside the rows and the weight; `scratch`
    // holds `blockDim.x` floats and every thread of the block calls the reduction.
    let mut local = 0.0f32;
    let mut j = tid;
    while j < cols {
        let v = rounded::<E>(unsafe { E::load(x_row, j) + E::load(r_row, j) });
        unsafe { E::store(h_row, j, v) };
        local = math::fma(v, v, local);
        j += stride;
    }
    let ms = unsafe { block::reduce_sum(scratch, local) } / cols as f32;
    // The rare path (see `overflow`): the row's `h`, stored by the whole block before the
    // reduction's barriers, normalised again from memory.
    if overflowed(ms) {
        unsafe { rescue::<E, _, false>(BlockRow(scratch), (h_row, y_row), (w, w), cols, eps) };
        return;
    }
    let inv = 1.0 / math::sqrt(ms + eps);
    j = tid;
    while j < cols {
        let (v, g) = unsafe { (E::load(h_row, j), E::load(w, j)) };
        unsafe { E::store(y_row, j, v * inv * g) };
        j += stride;
    }
}

/// Residual add and RMSNorm of one row per block, the row in registers: each entry of `x` and
/// `res` read once, `h` and `y` written once.
///
/// Block `r` handles row `r`. Thread `tid` of the block's `T` threads loads the row's vectors
/// `tid + k * T` (`k < V`, each [`NormElem::LANES`] elements, 16 bytes; bf16 as `bf16x8`) of
/// `x` and of `res`, all `2 V` loads issued before any use; adds them in f32, rounds the sums to
/// the element type, stores them as `h` and holds them (bf16 packed, 4 registers a vector); the
/// block sums the squares (`block_sum`, one barrier), and each thread stores
/// `h * (1 / sqrt(ms + eps)) * w` for its vectors, reading the weight's vectors at the store (the
/// same for every block, from L2).
///
/// Instances (`E`, `V`): `residual_rms_norm_rows_f32` (f32, 4 vectors: 16 elements per thread),
/// `residual_rms_norm_rows_bf16` (bf16, 2 vectors: 16 elements): rows of up to 16384 columns,
/// a multiple of the vector width.
///
/// Global memory: `x`, `res` read once, `h`, `y` written once: 16 bytes per element in f32, 8 in
/// bf16, plus the weight once per block from L2.
///
/// Launch: `rows` blocks of `T` threads, `T` a multiple of 32, at most 1024, with
/// `cols / LANES <= V * T`; [`RESIDUAL_ROWS_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x`, `res`, `h` and `y` point to `rows * cols` elements of device memory, `h` and `y`
/// overlapping nothing, `w` to `cols`; all five 16-byte aligned; `cols >= 1` a multiple of
/// `LANES`; the launch shape is as above.
// Barriers: one, the `block_sum` (the rescue's own are on a path the whole block takes).
#[kernel(
    instances(residual_rms_norm_rows_f32 = (f32, 4), residual_rms_norm_rows_bf16 = (bf16, 2)),
    block(ROW_BLOCK_MAX),
    barriers(1)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub unsafe fn residual_rms_norm_rows<E: NormElem, const V: usize>(
    x: *const E,
    res: *const E,
    w: *const E,
    h: *mut E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let lanes = E::LANES;
    let tid = thread::thread_idx_x();
    let threads = thread::block_dim_x();
    // 32-bit vector indices: a held row has at most 4 * 1024 vectors.
    let vecs = (cols / lanes) as u32;
    let at = row * cols;
    let (x_row, r_row) = (x.wrapping_add(at), res.wrapping_add(at));
    let (h_row, y_row) = (h.wrapping_add(at), y.wrapping_add(at));
    let valid = |k: usize| tid < vecs.saturating_sub(k as u32 * threads);
    let offset = |k: usize| (tid + k as u32 * threads) as usize * lanes;
    let inv_n = rcp_fast(cols as f32);

    let mut xs = [[0u32; 4]; V];
    let mut rs = [[0u32; 4]; V];
    unroll_8!(V, |k| {
        if valid(k) {
            // SAFETY: vector `tid + k * T < vecs` lies inside the row, 16-byte aligned.
            unsafe {
                xs[k] = load_words(x_row, offset(k));
                rs[k] = load_words(r_row, offset(k));
            }
        }
    });
    // `h`, rounded, kept as the element type's words (what `store_vec` writes), so that a bf16
    // row is held packed.
    let mut hs = [[0u32; 4]; V];
    let mut q = 0.0f32;
    unroll_8!(V, |k| {
        if valid(k) {
            let (a, b) = (widen_words::<E>(xs[k]), widen_words::<E>(rs[k]));
            let mut sum = [0.0f32; 8];
            for c in 0..lanes {
                sum[c] = a[c] + b[c];
            }
            hs[k] = pack_words::<E>(sum);
            let hv = widen_words::<E>(hs[k]);
            for c in 0..lanes {
                q = math::fma(hv[c], hv[c], q);
            }
            // SAFETY: as for the loads; `h` has `x`'s shape and alignment.
            unsafe { store_words(h_row, offset(k), hs[k]) };
        }
    });
    // SAFETY: every thread of the block reaches the sum; its barrier also orders the stores of
    // `h` above before the rescue's loads of them.
    let ms = unsafe { block_sum(scratch(0), q) } * inv_n;
    if overflowed(ms) {
        // SAFETY: every thread of the block is here; `h_row` was stored by the block.
        unsafe { rescue::<E, _, false>(BlockRow(scratch(1)), (h_row, y_row), (w, w), cols, eps) };
        return;
    }
    let inv = rsqrt_fast(ms + eps);
    unroll_8!(V, |k| {
        if valid(k) {
            // SAFETY: as for the loads; the weight has `cols` elements, aligned.
            let g = widen_words::<E>(unsafe { load_words(w, offset(k)) });
            let hv = rewiden_words::<E>(hs[k]);
            let mut out = [0.0f32; 8];
            for c in 0..lanes {
                out[c] = hv[c] * inv * g[c];
            }
            // SAFETY: as for the loads; `y` has `x`'s shape and alignment.
            unsafe { E::store_vec(y_row, offset(k), out) };
        }
    });
}

/// The first `LANES` floats of `v` rounded to the element type, as the sixteen bytes' words
/// ([`widen_words`] reads them back).
#[inline(always)]
fn pack_words<E: NormElem>(v: [f32; 8]) -> [u32; 4] {
    if E::LANES == 4 {
        [v[0].to_bits(), v[1].to_bits(), v[2].to_bits(), v[3].to_bits()]
    } else {
        super::pack_bf16x8(v)
    }
}

/// Sixteen bytes of elements as words, stored as one 16-byte access.
///
/// # Safety
/// As [`NormElem::store_vec`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn store_words<E: NormElem>(p: *mut E, i: usize, w: [u32; 4]) {
    // SAFETY: forwarded contract: sixteen writable bytes at an aligned `p + i`.
    unsafe { crate::gpu::vector::store::<u32, 4>(p.wrapping_add(i).cast::<u32>(), 0, w) }
}
