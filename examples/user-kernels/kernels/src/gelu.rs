//! Bias + GELU on bf16 rows: `y[r][c] = gelu(x[r][c] + bias[c])`, GELU's tanh form.

use gpukern_device::{bf16, kernel, math, vector};

/// Threads per block of [`bias_gelu`](fn@bias_gelu).
pub const GELU_BLOCK: u32 = 256;

/// Lanes of one vector: 8 bf16, 16 bytes.
pub const GELU_LANES: usize = 8;

/// GELU, tanh form: `t/2 (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3)))`, with the GPU's
/// `tanh.approx` (relative error below `2^-10.987`, under a bf16 result's own rounding) and two
/// `fma`s: 7 instructions.
#[inline(always)]
pub fn gelu(t: f32) -> f32 {
    let u = t * math::fma(0.035_677_41, t * t, 0.797_884_6); // sqrt(2/pi) (t + 0.044715 t^3)
    let half = 0.5 * t;
    math::fma(half, math::fast::tanh(u), half)
}

/// `y[r][c] = gelu(x[r][c] + bias[c])` over a row-major `rows x cols` matrix of bf16, `bias` f32.
///
/// One thread: [`vector::map`]'s grid-stride loop, 8 elements (16 bytes) per vector, four
/// vectors loaded before it computes any; the bias's 8 lanes come as two 16-byte read-only loads
/// when `cols` is a multiple of 8. Traffic: 2 bytes read and 2 written per element (the bias,
/// `4 cols` bytes, stays in L1/L2).
///
/// Launch: 1-D blocks of [`GELU_BLOCK`] threads, `vector::map_blocks(rows * cols, 8,
/// GELU_BLOCK)` blocks (any grid works).
///
/// # Safety
/// `x` and `y` hold `rows * cols` elements, `bias` `cols`.
#[kernel(block(GELU_BLOCK), barriers(0))]
pub unsafe fn bias_gelu(x: *const bf16, bias: *const f32, y: *mut bf16, rows: usize, cols: usize) {
    // SAFETY: the buffers hold what the contract says (gpukern allocates them 16-byte aligned).
    unsafe {
        vector::map::<bf16, bf16, GELU_LANES>(x, y, rows * cols, |chunk, v| {
            let b = chunk.load_columns(bias, cols);
            core::array::from_fn(|k| gelu(v[k] + b[k]))
        })
    }
}
