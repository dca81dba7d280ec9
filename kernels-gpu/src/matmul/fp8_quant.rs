//! Quantisation to FP8 E4M3 with a computed scale, as inference stacks quantise activations and
//! weights for an FP8 product: per tensor (one scale) or per row (one scale a row), the scale
//! from the absolute maximum (`amax`) so that the largest magnitude maps to 448, E4M3's largest
//! finite value.
//!
//! Two launches:
//! 1. [`fp8_amax`](fn@fp8_amax) (`fp8_amax_f32`, `fp8_amax_bf16`): one block per row, the
//!    row's `amax = max |x|` by a tree reduction in shared memory, stored per row and folded
//!    into the tensor's `amax` with an atomic maximum on its bits (a non-negative f32 orders as
//!    its bits; a NaN's bits are above infinity's, so a NaN anywhere makes the `amax` NaN). The
//!    maximum does not depend on the order, so the result does not depend on the launch.
//! 2. [`fp8_quantize`](fn@fp8_quantize) (`fp8_quantize_{tensor,row}_{f32,bf16}`): one thread
//!    per element, `q = satfinite_rn(x * (448 / amax))` with the row's or the tensor's `amax`
//!    (a scale of 1 where the `amax` is 0 or not finite), and the dequantisation scale
//!    `amax / 448` (1 there) written once per row or once for the tensor: `x ~ q * scale`.
//!
//! On sm_90 the rounding is `cvt.rn.satfinite.e4m3x2.f32`; elsewhere (and in the simulator)
//! [`E4M3::from_f32_saturating`], the same function of the bits. The CPU reference
//! (`gpukern::quantize_e4m3_reference`) computes the same f32 operations.

use crate::gpu::fp8::{pack_e4m3x2, E4M3};
use crate::gpu::{atomic, bf16, block, mem, shared, thread};
use crate::kernel;

/// E4M3's largest finite value: the `amax` maps to it.
pub const E4M3_MAX: f32 = 448.0;

/// Threads per block of both kernels (a power of two, as the tree reduction needs).
pub const QUANT_BLOCK: u32 = 256;

/// Dynamic shared memory of [`fp8_amax`](fn@fp8_amax): one float per thread.
pub const AMAX_SHARED_BYTES: u32 = QUANT_BLOCK * core::mem::size_of::<f32>() as u32;

/// An element the quantisation reads: f32 or bf16, widened exactly to f32.
pub trait QuantInput: Copy {
    /// `p[i]` as f32.
    ///
    /// # Safety
    /// `p.add(i)` is readable device memory.
    unsafe fn load_f32(p: *const Self, i: usize) -> f32;
}

impl QuantInput for f32 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load_f32(p: *const f32, i: usize) -> f32 {
        // SAFETY: forwarded contract.
        unsafe { mem::load(p, i) }
    }
}

impl QuantInput for bf16 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load_f32(p: *const bf16, i: usize) -> f32 {
        // SAFETY: forwarded contract.
        crate::gpu::convert::bf16_to_f32(unsafe { mem::load(p, i) })
    }
}

/// `|x|` (the sign bit cleared; a NaN stays NaN).
#[inline(always)]
fn magnitude(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0x7fff_ffff)
}

/// The quantisation scale of an `amax`: `448 / amax`, or 1 where that is not a positive finite
/// number's scale (`amax` zero, infinite or NaN).
#[inline(always)]
pub fn quant_scale(amax: f32) -> f32 {
    if amax > 0.0 && amax < f32::INFINITY {
        E4M3_MAX / amax
    } else {
        1.0
    }
}

/// The dequantisation scale of an `amax`: `amax / 448`, or 1 as [`quant_scale`].
#[inline(always)]
pub fn dequant_scale(amax: f32) -> f32 {
    if amax > 0.0 && amax < f32::INFINITY {
        amax / E4M3_MAX
    } else {
        1.0
    }
}

/// Block `r` computes `amax = max_j |x[r][j]|` (NaN if the row holds one), stores it at
/// `row_amax[r]` and folds its bits into `tensor_amax[0]` with an atomic maximum.
///
/// Launch: `rows` blocks of [`QUANT_BLOCK`] threads, [`AMAX_SHARED_BYTES`] of dynamic shared
/// memory.
///
/// # Safety
/// `x` points to `rows * cols` elements, `row_amax` to `rows` floats, `tensor_amax` to one
/// `u32` holding 0 (or an earlier `amax`'s bits) before the launch.
// Barriers: three, those of one `block::reduce_max`.
#[kernel(
    instances(fp8_amax_f32 = f32, fp8_amax_bf16 = bf16),
    block(QUANT_BLOCK),
    barriers(3)
)]
#[inline(always)]
pub unsafe fn fp8_amax<I: QuantInput>(
    x: *const I,
    row_amax: *mut f32,
    tensor_amax: *mut u32,
    rows: usize,
    cols: usize,
) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together
    }
    let tid = thread::thread_idx_x() as usize;
    let stride = thread::block_dim_x() as usize;
    let mut local = 0.0f32;
    let mut j = tid;
    while j < cols {
        // SAFETY: `row < rows`, `j < cols`.
        local = crate::gpu::math::max_nan(local, magnitude(unsafe { I::load_f32(x, row * cols + j) }));
        j += stride;
    }
    // SAFETY: the scratch holds `blockDim.x` floats; every thread of the block calls it.
    let amax = unsafe { block::reduce_max(shared::dynamic::<f32>(), local) };
    if tid == 0 {
        // SAFETY: `row < rows`; `tensor_amax` holds one u32.
        unsafe {
            mem::store(row_amax, row, amax);
            atomic::max(tensor_amax, 0, amax.to_bits(), atomic::Scope::Device);
        }
    }
}

/// Thread `(j, r)` of the grid writes `q[r][j] = satfinite_rn(x[r][j] * quant_scale(amax))` with
/// `amax` the row's (`PER_ROW`: `row_amax[r]`) or the tensor's (`f32::from_bits(tensor_amax[0])`),
/// two elements per thread (`j` even); thread 0 of block `(0, r)` writes the row's dequantisation
/// scale `dequant_scale(amax)` to `scale[r]` (`PER_ROW`), or that of block `(0, 0)` the tensor's
/// to `scale[0]`.
///
/// Launch: 1-D blocks of [`QUANT_BLOCK`] threads, a grid of `(ceil(cols / 512), rows)`.
///
/// # Safety
/// `x` and `q` point to `rows * cols` elements, `row_amax` to `rows` floats and `tensor_amax` to
/// one `u32` written by [`fp8_amax`](fn@fp8_amax) on the same `x`, `scale` to `rows` floats
/// (`PER_ROW`) or one.
// Barriers: none.
#[kernel(
    instances(
        fp8_quantize_tensor_f32 = (f32, false),
        fp8_quantize_tensor_bf16 = (bf16, false),
        fp8_quantize_row_f32 = (f32, true),
        fp8_quantize_row_bf16 = (bf16, true),
    ),
    block(QUANT_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn fp8_quantize<I: QuantInput, const PER_ROW: bool>(
    x: *const I,
    row_amax: *const f32,
    tensor_amax: *const u32,
    q: *mut E4M3,
    scale: *mut f32,
    rows: usize,
    cols: usize,
) {
    let row = thread::block_idx_y() as usize;
    let j = 2 * thread::index_1d();
    if row >= rows {
        return;
    }
    // SAFETY: `row < rows`; `tensor_amax` holds one u32.
    let amax = unsafe {
        if PER_ROW {
            mem::load(row_amax, row)
        } else {
            f32::from_bits(mem::load(tensor_amax, 0))
        }
    };
    if j == 0 && (PER_ROW || row == 0) {
        // SAFETY: `scale` holds `rows` floats (`PER_ROW`) or one.
        unsafe { mem::store(scale, if PER_ROW { row } else { 0 }, dequant_scale(amax)) };
    }
    let s = quant_scale(amax);
    let base = row * cols + j;
    if j + 1 < cols {
        // SAFETY: `j + 1 < cols`: both elements inside the row.
        let (a, b) = unsafe { (I::load_f32(x, base), I::load_f32(x, base + 1)) };
        let pair = pack_e4m3x2([a * s, b * s]);
        // SAFETY: as above.
        unsafe {
            mem::store(q, base, E4M3(pair as u8));
            mem::store(q, base + 1, E4M3((pair >> 8) as u8));
        }
    } else if j < cols {
        // SAFETY: `j < cols`.
        unsafe { mem::store(q, base, E4M3::from_f32_saturating(I::load_f32(x, base) * s)) };
    }
}
