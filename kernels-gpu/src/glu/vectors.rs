//! The fast GLU: 16-byte vectors of both halves, several in flight per thread
//! ([`glu_vectors`](fn@glu_vectors)).

use super::{store_gated, Act, GluElem};
use crate::gpu::vector::{self, LoadHint};
use crate::gpu::{bf16, thread};
use crate::kernel;

/// Threads per block of the vector kernel.
pub const VECTOR_BLOCK: u32 = 256;

/// Vectors of each half a thread loads before it computes any (64 bytes of each half in flight).
pub const VECTOR_UNROLL: usize = 4;

/// `y[r][j] = act(x[r][j]) * x[r][n + j]` by vectors of `N` lanes (16 bytes: `bf16x8`, `f32x4`).
///
/// The output is cut into `rows * n / N` chunks of `N` lanes (`n` a multiple of `N`, so a chunk
/// lies in one row). Thread `t` of block `b` takes, in a grid-stride loop, chunks
/// `(b * VECTOR_UNROLL + k) * blockDim.x + t` for `k < VECTOR_UNROLL` (each `k` coalesced across
/// the warp): for each it loads the gate's vector `x[r][c..c + N]` and the up half's
/// `x[r][n + c..n + c + N]` (all `2 VECTOR_UNROLL` loads issued before any use; streaming hint,
/// read once), then computes in f32 ([`super::gated`]) and stores `y[r][c..c + N]` as one
/// vector, rounded once ([`store_gated`]).
///
/// Instances (`T`, `N`, `ACT`): `swiglu_f32`, `swiglu_bf16`, `geglu_f32`, `geglu_bf16`,
/// `geglu_erf_f32`, `geglu_erf_bf16`.
///
/// Global memory: `x` read once, `y` written once, 16-byte accesses: 12 bytes per output element
/// in f32, 6 in bf16.
///
/// Launch: 1-D blocks of [`VECTOR_BLOCK`] threads, any grid (one sweep covers the output with
/// `ceil(chunks / (VECTOR_BLOCK * VECTOR_UNROLL))` blocks).
///
/// # Safety
/// `x` points to `rows * 2 n` elements of device memory, `y` to `rows * n` not overlapping it,
/// both 16-byte aligned; `n` a multiple of `N`.
// Barriers: none.
#[kernel(
    instances(
        swiglu_f32 = (f32, 4, Act::SILU),
        swiglu_bf16 = (bf16, 8, Act::SILU),
        geglu_f32 = (f32, 4, Act::GELU_TANH),
        geglu_bf16 = (bf16, 8, Act::GELU_TANH),
        geglu_erf_f32 = (f32, 4, Act::GELU_ERF),
        geglu_erf_bf16 = (bf16, 8, Act::GELU_ERF),
    ),
    block(VECTOR_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub unsafe fn glu_vectors<T: GluElem, const N: usize, const ACT: u8>(
    x: *const T,
    y: *mut T,
    rows: usize,
    n: usize,
) {
    let per_row = n / N;
    let chunks = rows * per_row;
    let threads = thread::block_dim_x() as usize;
    let stride = thread::grid_dim_x() as usize * threads * VECTOR_UNROLL;
    let mut first =
        thread::block_idx_x() as usize * threads * VECTOR_UNROLL + thread::thread_idx_x() as usize;
    // 32-bit division where the indices fit (a 64-bit one is several times dearer).
    let small = chunks <= u32::MAX as usize;
    let split = |c: usize| {
        if small {
            (
                (c as u32 / per_row as u32) as usize,
                (c as u32 % per_row as u32) as usize,
            )
        } else {
            (c / per_row, c % per_row)
        }
    };
    while first < chunks {
        let mut gate = [[T::ZERO; N]; VECTOR_UNROLL];
        let mut up = [[T::ZERO; N]; VECTOR_UNROLL];
        unroll_8!(VECTOR_UNROLL, |k| {
            let c = first + k * threads;
            if c < chunks {
                let (r, v) = split(c);
                let at = r * 2 * n + v * N;
                // SAFETY: chunk `c < chunks` lies in row `r < rows`: both halves' vectors are
                // inside `x`, at multiples of `N` of an aligned buffer (`2 n` a multiple of `N`).
                unsafe {
                    gate[k] = vector::load_hinted(x, at, LoadHint::Streaming);
                    up[k] = vector::load_hinted(x, at + n, LoadHint::Streaming);
                }
            }
        });
        unroll_8!(VECTOR_UNROLL, |k| {
            let c = first + k * threads;
            if c < chunks {
                // SAFETY: `c * N + N <= rows * n`, a multiple of `N` of an aligned buffer.
                unsafe { store_gated::<T, N, ACT>(y, c * N, &gate[k], &up[k]) };
            }
        });
        first += stride;
    }
}
