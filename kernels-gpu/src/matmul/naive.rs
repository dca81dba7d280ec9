//! Rung 1, the tutorial matmul: one thread per element of `C`, both operands read straight from
//! global memory (`2k` floats per element, a quarter of a flop per byte).

use crate::gpu::{math, mem, thread};
use crate::kernel;

/// Side of the 2-D thread block of [`matmul_naive`](fn@matmul_naive): 16 x 16 = 256 threads.
pub const NAIVE_BLOCK: u32 = 16;

/// Naive matmul: thread `(x, y)` of the grid computes `C[y][x]`, the dot product of row `y` of `A`
/// with column `x` of `B`, reading `2k` floats from global memory and writing one.
///
/// Launch: 2-D blocks of `NAIVE_BLOCK x NAIVE_BLOCK`, enough blocks to cover `n` columns (x) and
/// `m` rows (y). Threads outside `C` do nothing.
///
/// # Safety
/// `a`, `b`, `c` point to `m*k`, `k*n` and `m*n` floats of device memory; `c` overlaps neither.
// Barriers: none, no shared memory.
#[kernel(block(NAIVE_BLOCK * NAIVE_BLOCK), barriers(0))]
pub unsafe fn matmul_naive(a: *const f32, b: *const f32, c: *mut f32, m: usize, n: usize, k: usize) {
    let (col, row) = thread::index_2d();
    if row < m && col < n {
        let mut acc = 0.0f32;
        let mut i = 0;
        while i < k {
            // SAFETY: `row < m`, `col < n`, `i < k`: both indices are inside their matrices.
            acc = unsafe { math::fma(mem::load(a, row * k + i), mem::load(b, i * n + col), acc) };
            i += 1;
        }
        // SAFETY: `row < m`, `col < n`.
        unsafe { mem::store(c, row * n + col, acc) }
    }
}
