//! Split `k`: when a product has too few tiles of `C` to fill the GPU, the register-tiled and wide
//! kernels ([`super::fast_gemm`](fn@super::fast_gemm), [`super::wide_gemm`](fn@super::wide_gemm)) split `k` over blocks, each slice writing
//! its partial product, and [`matmul_sum_splits`](fn@matmul_sum_splits) adds the parts.

use crate::gpu::{mem, thread};
use crate::kernel;

/// Threads per block of [`matmul_sum_splits`](fn@matmul_sum_splits).
pub const SUM_BLOCK: u32 = 256;

/// Adds the partial products of a split-`k` launch: thread `i` writes
/// `c[i] = partial[i] + partial[len + i] + ...` over `slices` parts (in that order, so the
/// result does not depend on the launch), reading `4 * slices` bytes and writing 4.
///
/// Launch: 1-D blocks of [`SUM_BLOCK`] threads, `ceil(len / SUM_BLOCK)` blocks.
///
/// # Safety
/// `partial` holds `slices * len` floats, `c` holds `len` and does not overlap it.
// Barriers: none.
#[kernel(block(SUM_BLOCK), barriers(0))]
pub unsafe fn matmul_sum_splits(partial: *const f32, c: *mut f32, len: usize, slices: usize) {
    let i = thread::index_1d();
    if i < len {
        let mut sum = 0.0f32;
        for s in 0..slices {
            // SAFETY: `s < slices`, `i < len`.
            sum += unsafe { mem::load(partial, s * len + i) };
        }
        // SAFETY: `i < len`.
        unsafe { mem::store(c, i, sum) }
    }
}
