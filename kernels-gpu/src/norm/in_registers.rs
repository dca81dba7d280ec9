//! The fast norms: one block per row, the row held in registers as 16-byte vectors, so that
//! each entry is read once and written once ([`rms_norm_rows_f32`](fn@rms_norm_rows_f32),
//! [`rms_norm_rows_bf16`](fn@rms_norm_rows_bf16), [`layer_norm_rows_f32`](fn@layer_norm_rows_f32),
//! [`layer_norm_rows_bf16`](fn@layer_norm_rows_bf16)).

use super::{block_sum, load_x, rcp_fast, rsqrt_fast, scratch, store_y, NormElem};
use crate::gpu::{bf16, math, thread, warp};
use crate::kernel;

/// Dynamic shared memory of the in-register kernels: two areas of one float per warp of the
/// largest block, one per `block_sum` (LayerNorm sums twice, and a separate area spares the
/// barrier that reusing one would need).
pub const ROWS_SHARED_BYTES: u32 = 2 * super::ROW_BLOCK_MAX / warp::SIZE * core::mem::size_of::<f32>() as u32;

/// RMSNorm (`LAYER = false`) or LayerNorm (`LAYER = true`) of one row per block, the row in
/// registers: the body of the `*_rows*_*` kernels (16, 32 or 64 elements per thread). With
/// `STREAM` the loads of `x` and the stores of `y` carry the streaming cache hint (evict first:
/// each is touched once), the `*_rows*_cs_*` candidates.
///
/// Block `r` handles row `r`. Thread `tid` of the block's `T` threads loads the row's vectors
/// `tid + k * T` (`k < V`, each [`NormElem::LANES`] elements, 16 bytes), all `V` loads issued
/// before any use, and widens them to f32. RMSNorm: the block sums the squares (`block_sum`,
/// one barrier) and each thread stores `x * (1 / sqrt(ms + eps)) * w` for its vectors. LayerNorm:
/// the block sums `x - x[r][0]` (the mean, shifted: see the [family's doc](super)), then
/// `(x - mu)^2` over the registers (the variance, two passes with no second read of memory),
/// then each thread stores `(x - mu) * rstd * w + b`. Weight and bias vectors are read at the
/// store, the same ones by every block (from L2 after the first blocks).
///
/// Global memory: `x` read once, `y` written once: 8 bytes per element in f32, 4 in bf16, plus
/// the weight (and bias) once per block from L2.
///
/// Launch: `rows` blocks of `T` threads, `T` a multiple of 32 and at most 1024, with
/// `cols / LANES <= V * T`; [`ROWS_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` and `b`
/// to `cols` (`b` is not read by RMSNorm); all four 16-byte aligned; `cols >= 1` a multiple of
/// `LANES`; the launch shape is as above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
// Index loops over the register arrays: each index is a constant once unrolled, which is what
// keeps the arrays in registers.
#[allow(clippy::needless_range_loop)]
unsafe fn norm_rows<E: NormElem, const V: usize, const LAYER: bool, const STREAM: bool>(
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
    let lanes = E::LANES;
    let tid = thread::thread_idx_x();
    let threads = thread::block_dim_x();
    // 32-bit vector indices: a held row has at most 16 * 1024 vectors.
    let vecs = (cols / lanes) as u32;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // Whether vector `tid + k * T` is in the row, with the right side uniform over the block.
    let valid = |k: usize| tid < vecs.saturating_sub(k as u32 * threads);
    let offset = |k: usize| (tid + k as u32 * threads) as usize * lanes;
    // `1 / cols` once, so that each statistic is a multiply, not an IEEE division.
    let inv_n = rcp_fast(cols as f32);

    let mut v = [[0.0f32; 8]; V];
    unroll_16!(V, |k| {
        if valid(k) {
            // SAFETY: vector `tid + k * T < vecs` lies inside the row, 16-byte aligned.
            v[k] = unsafe { load_x::<E, STREAM>(x_row, offset(k)) };
        }
    });

    if LAYER {
        // SAFETY: `cols >= 1`.
        let shift = unsafe { E::load(x_row, 0) };
        // The row is shifted and centred in place, so that one copy of it stays live: `x - shift`
        // kept beside `x` would double the registers (79 at 32 floats per thread, one block of 512
        // threads per multiprocessor).
        let mut s = 0.0f32;
        unroll_16!(V, |k| {
            if valid(k) {
                for c in 0..lanes {
                    v[k][c] -= shift;
                    s += v[k][c];
                }
            }
        });
        // The mean of `x - shift`: deviations are `(x - shift) - mu`, where `x - shift` is exact
        // for entries near the shift, so a large mean costs no precision (see the family's doc).
        // SAFETY: every thread of the block reaches both sums, each with its own scratch area.
        let mu = unsafe { block_sum(scratch(0), s) } * inv_n;
        let mut q = 0.0f32;
        unroll_16!(V, |k| {
            if valid(k) {
                for c in 0..lanes {
                    v[k][c] -= mu;
                    q = math::fma(v[k][c], v[k][c], q);
                }
            }
        });
        let var = unsafe { block_sum(scratch(1), q) } * inv_n;
        let rstd = rsqrt_fast(var + eps);
        unroll_16!(V, |k| {
            if valid(k) {
                // SAFETY: as for the loads; the weight and bias have `cols` elements, aligned.
                let (g, beta) = unsafe { (E::load_vec(w, offset(k)), E::load_vec(b, offset(k))) };
                let mut out = [0.0f32; 8];
                for c in 0..lanes {
                    out[c] = math::fma(v[k][c] * rstd, g[c], beta[c]);
                }
                // SAFETY: as for the loads; `y` has `x`'s shape and alignment.
                unsafe { store_y::<E, STREAM>(y_row, offset(k), out) };
            }
        });
    } else {
        let mut q = 0.0f32;
        unroll_16!(V, |k| {
            if valid(k) {
                for c in 0..lanes {
                    q = math::fma(v[k][c], v[k][c], q);
                }
            }
        });
        // SAFETY: every thread of the block reaches the sum.
        let ms = unsafe { block_sum(scratch(0), q) } * inv_n;
        let inv = rsqrt_fast(ms + eps);
        unroll_16!(V, |k| {
            if valid(k) {
                // SAFETY: as for the loads; the weight has `cols` elements, aligned.
                let g = unsafe { E::load_vec(w, offset(k)) };
                let mut out = [0.0f32; 8];
                for c in 0..lanes {
                    out[c] = v[k][c] * inv * g[c];
                }
                // SAFETY: as for the loads; `y` has `x`'s shape and alignment.
                unsafe { store_y::<E, STREAM>(y_row, offset(k), out) };
            }
        });
    }
}

/// RMSNorm through `norm_rows` (no bias: `w` stands in for it, never read).
///
/// # Safety
/// As `norm_rows`.
#[inline(always)]
unsafe fn rms_rows<E: NormElem, const V: usize, const STREAM: bool>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_rows::<E, V, false, STREAM>(x, w, w, y, rows, cols, eps) }
}

/// LayerNorm through `norm_rows`.
///
/// # Safety
/// As `norm_rows`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn layer_rows<E: NormElem, const V: usize, const STREAM: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_rows::<E, V, true, STREAM>(x, w, b, y, rows, cols, eps) }
}

rms_kernel!(
    /// `norm_rows` as RMSNorm on f32, 8 vectors of 4 per thread: rows of up to 32768
    /// columns (1024 threads), a multiple of 4. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows_f32(f32) = rms_rows::<f32, 8, false>
);

rms_kernel!(
    /// `norm_rows` as RMSNorm on bf16 (f32 statistics), 4 vectors of 8 per thread: rows of up
    /// to 32768 columns, a multiple of 8. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows_bf16(bf16) = rms_rows::<bf16, 4, false>
);

layer_kernel!(
    /// `norm_rows` as LayerNorm on f32, 8 vectors of 4 per thread: rows of up to 32768
    /// columns, a multiple of 4. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows_f32(f32) = layer_rows::<f32, 8, false>
);

layer_kernel!(
    /// `norm_rows` as LayerNorm on bf16 (f32 statistics), 4 vectors of 8 per thread: rows of
    /// up to 32768 columns, a multiple of 8. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows_bf16(bf16) = layer_rows::<bf16, 4, false>
);

rms_kernel!(
    /// `norm_rows` as RMSNorm on f32, 4 vectors of 4 (16 floats) per thread: rows of up to
    /// 16384 columns, a multiple of 4; fewer registers than the 32-float kernel, so more blocks
    /// share a multiprocessor. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows16_f32(f32) = rms_rows::<f32, 4, false>
);

rms_kernel!(
    /// `norm_rows` as RMSNorm on bf16, 2 vectors of 8 (16 elements) per thread: rows of up to
    /// 16384 columns, a multiple of 8. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows16_bf16(bf16) = rms_rows::<bf16, 2, false>
);

layer_kernel!(
    /// `norm_rows` as LayerNorm on f32, 4 vectors of 4 (16 floats) per thread: rows of up to
    /// 16384 columns, a multiple of 4. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows16_f32(f32) = layer_rows::<f32, 4, false>
);

layer_kernel!(
    /// `norm_rows` as LayerNorm on bf16, 2 vectors of 8 (16 elements) per thread: rows of up
    /// to 16384 columns, a multiple of 8. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows16_bf16(bf16) = layer_rows::<bf16, 2, false>
);

rms_kernel!(
    /// `norm_rows` as RMSNorm on f32, 16 vectors of 4 (64 floats, 256 bytes in flight) per
    /// thread: rows of up to 65536 columns (the host takes it to 32768), a multiple of 4; a
    /// 16384-column row is a block of 256 threads. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows64_f32(f32) = rms_rows::<f32, 16, false>
);

rms_kernel!(
    /// `norm_rows` as RMSNorm on bf16, 8 vectors of 8 (64 elements) per thread: a multiple of
    /// 8 columns. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows64_bf16(bf16) = rms_rows::<bf16, 8, false>
);

layer_kernel!(
    /// `norm_rows` as LayerNorm on f32, 16 vectors of 4 (64 floats) per thread: a multiple of
    /// 4 columns. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows64_f32(f32) = layer_rows::<f32, 16, false>
);

layer_kernel!(
    /// `norm_rows` as LayerNorm on bf16, 8 vectors of 8 (64 elements) per thread: a multiple
    /// of 8 columns. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows64_bf16(bf16) = layer_rows::<bf16, 8, false>
);

rms_kernel!(
    /// [`rms_norm_rows16_f32`](fn@rms_norm_rows16_f32) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): RMSNorm on f32, 4 vectors of 4 per thread. A
    /// tuning candidate. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows16_cs_f32(f32) = rms_rows::<f32, 4, true>
);

rms_kernel!(
    /// [`rms_norm_rows16_bf16`](fn@rms_norm_rows16_bf16) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): RMSNorm on bf16, 2 vectors of 8 per thread. A
    /// tuning candidate. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows16_cs_bf16(bf16) = rms_rows::<bf16, 2, true>
);

layer_kernel!(
    /// [`layer_norm_rows16_f32`](fn@layer_norm_rows16_f32) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): LayerNorm on f32, 4 vectors of 4 per thread. A
    /// tuning candidate. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows16_cs_f32(f32) = layer_rows::<f32, 4, true>
);

layer_kernel!(
    /// [`layer_norm_rows16_bf16`](fn@layer_norm_rows16_bf16) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): LayerNorm on bf16, 2 vectors of 8 per thread. A
    /// tuning candidate. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows16_cs_bf16(bf16) = layer_rows::<bf16, 2, true>
);

rms_kernel!(
    /// [`rms_norm_rows_f32`](fn@rms_norm_rows_f32) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): RMSNorm on f32, 8 vectors of 4 per thread. A
    /// tuning candidate. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows_cs_f32(f32) = rms_rows::<f32, 8, true>
);

rms_kernel!(
    /// [`rms_norm_rows_bf16`](fn@rms_norm_rows_bf16) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): RMSNorm on bf16, 4 vectors of 8 per thread. A
    /// tuning candidate. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    rms_norm_rows_cs_bf16(bf16) = rms_rows::<bf16, 4, true>
);

layer_kernel!(
    /// [`layer_norm_rows_f32`](fn@layer_norm_rows_f32) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): LayerNorm on f32, 8 vectors of 4 per thread. A
    /// tuning candidate. Minimum traffic, moved: 8 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows_cs_f32(f32) = layer_rows::<f32, 8, true>
);

layer_kernel!(
    /// [`layer_norm_rows_bf16`](fn@layer_norm_rows_bf16) with the streaming cache hint on the loads of `x` and the stores
    /// of `y` (`norm_rows` with `STREAM`): LayerNorm on bf16, 4 vectors of 8 per thread. A
    /// tuning candidate. Minimum traffic, moved: 4 bytes per element.
    ///
    /// # Safety
    /// As `norm_rows`.
    layer_norm_rows_cs_bf16(bf16) = layer_rows::<bf16, 4, true>
);
