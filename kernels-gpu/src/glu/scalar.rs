//! The tutorial GLU: one thread per output element ([`glu_scalar`](fn@glu_scalar)).

use super::{gated, Act, GluElem};
use crate::gpu::{bf16, mem, thread};
use crate::kernel;

/// Threads per block of the tutorial.
pub const SCALAR_BLOCK: u32 = 256;

/// `y[r][j] = act(x[r][j]) * x[r][n + j]`, one thread per output element.
///
/// Thread `i = blockIdx.x * blockDim.x + threadIdx.x` (for `i < rows * n`) takes row `i / n`,
/// column `j = i % n`: it loads the gate `x[r][j]` and the up value `x[r][n + j]` (one element
/// each), computes in f32 ([`gated`]) and stores `y[r][j]`, rounded once.
///
/// Instances (`T`, `ACT`): `swiglu_scalar_f32`, `swiglu_scalar_bf16` (SiLU),
/// `geglu_scalar_f32`, `geglu_scalar_bf16` (tanh GELU), `geglu_erf_scalar_f32`,
/// `geglu_erf_scalar_bf16` (erf GELU).
///
/// Global memory: `x` read once, `y` written once: `3 n` elements per row (12 bytes per output in
/// f32, 6 in bf16), with 4- or 2-byte accesses.
///
/// # Safety
/// `x` points to `rows * 2 n` elements of device memory, `y` to `rows * n` not overlapping `x`;
/// a 1-D launch of at least `rows * n` threads (blocks of [`SCALAR_BLOCK`]).
// Barriers: none.
#[kernel(
    instances(
        swiglu_scalar_f32 = (f32, Act::SILU),
        swiglu_scalar_bf16 = (bf16, Act::SILU),
        geglu_scalar_f32 = (f32, Act::GELU_TANH),
        geglu_scalar_bf16 = (bf16, Act::GELU_TANH),
        geglu_erf_scalar_f32 = (f32, Act::GELU_ERF),
        geglu_erf_scalar_bf16 = (bf16, Act::GELU_ERF),
    ),
    block(SCALAR_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn glu_scalar<T: GluElem, const ACT: u8>(x: *const T, y: *mut T, rows: usize, n: usize) {
    let i = thread::index_1d();
    if i >= rows * n {
        return;
    }
    let (r, j) = (i / n, i % n);
    let row = x.wrapping_add(r * 2 * n);
    // SAFETY: `r < rows` and `j < n`: both halves' entries lie in the row, `i` in `y`.
    unsafe {
        let (g, u) = (mem::load(row, j).to_f32(), mem::load(row, n + j).to_f32());
        mem::store(y, i, T::from_f32(gated::<ACT>(g, u)));
    }
}
