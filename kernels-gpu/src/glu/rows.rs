//! The GLU by rows: a 2-D grid, blocks along a row's vectors and down the rows, no division
//! ([`glu_rows`](fn@glu_rows)).

use super::{store_gated, Act, GluElem};
use crate::gpu::vector::{self, LoadHint};
use crate::gpu::{bf16, thread};
use crate::kernel;

/// Threads per block of the rows kernel.
pub const ROWS_BLOCK: u32 = 128;

/// Vectors of each half one thread loads before it computes any: one, as torch.compile's
/// generated kernel takes (1024 elements per block of 4 warps,
/// `bench/experiments/h200-logs/3bdb6ee-inductor-configs.log`). Against two on the H200
/// (`bench/experiments/third-wave/3bdb6ee-glu-ab-u2-a*.jsonl` against
/// `048a939-glu-ab-u1-b*.jsonl`, the two binaries in turn twice in one call): SwiGLU bf16 at
/// 4096 x 14336 4054-4058 GB/s against 3983-3985, GeGLU 3975-3983 against 3822-3823, and faster at
/// every shape of the suite from 1 to 32768 rows: more, shorter blocks.
pub const ROWS_UNROLL: usize = 1;

/// Vectors of one row a block covers: [`ROWS_BLOCK`] threads times [`ROWS_UNROLL`].
pub const ROWS_SPAN: usize = ROWS_BLOCK as usize * ROWS_UNROLL;

/// `y[r][j] = act(x[r][j]) * x[r][n + j]` by vectors of `N` lanes (16 bytes), a block per
/// [`ROWS_SPAN`] vectors of a row.
///
/// Block `(bx, by)` takes rows `by, by + gridDim.y, ...` (a grid-stride loop down the rows, so
/// that any number of rows fits the grid's 65,535 limit on y); in each, thread `t` takes the
/// row's vectors `bx * ROWS_SPAN + k * blockDim.x + t` for `k < ROWS_UNROLL` (each `k`
/// coalesced across the warp), loads the gate's and the up half's vector of each (plain loads,
/// all before any use), computes in f32 ([`super::gated`]) and stores `y[r][c..c + N]` as one
/// vector, rounded once (a plain store; [`store_gated`]). The row and column come from the
/// grid: no division.
///
/// Instances (`T`, `N`, `ACT`): `swiglu_rows_f32`, `swiglu_rows_bf16`, `geglu_rows_f32`,
/// `geglu_rows_bf16`, `geglu_erf_rows_f32`, `geglu_erf_rows_bf16`.
///
/// Global memory: `x` read once, `y` written once, 16-byte accesses: 12 bytes per output element
/// in f32, 6 in bf16.
///
/// Launch: blocks of [`ROWS_BLOCK`] threads, `ceil(n / N / ROWS_SPAN) x min(rows, 65535)`.
///
/// # Safety
/// `x` points to `rows * 2 n` elements of device memory, `y` to `rows * n` not overlapping it,
/// both 16-byte aligned; `n` a multiple of `N`.
// Barriers: none.
#[kernel(
    instances(
        swiglu_rows_f32 = (f32, 4, Act::SILU),
        swiglu_rows_bf16 = (bf16, 8, Act::SILU),
        geglu_rows_f32 = (f32, 4, Act::GELU_TANH),
        geglu_rows_bf16 = (bf16, 8, Act::GELU_TANH),
        geglu_erf_rows_f32 = (f32, 4, Act::GELU_ERF),
        geglu_erf_rows_bf16 = (bf16, 8, Act::GELU_ERF),
    ),
    block(ROWS_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub unsafe fn glu_rows<T: GluElem, const N: usize, const ACT: u8>(
    x: *const T,
    y: *mut T,
    rows: usize,
    n: usize,
) {
    let per_row = n / N;
    let threads = thread::block_dim_x() as usize;
    let first = thread::block_idx_x() as usize * threads * ROWS_UNROLL + thread::thread_idx_x() as usize;
    let mut r = thread::block_idx_y() as usize;
    while r < rows {
        let (input, output) = (r * 2 * n, r * n);
        let mut gate = [[T::ZERO; N]; ROWS_UNROLL];
        let mut up = [[T::ZERO; N]; ROWS_UNROLL];
        unroll_8!(ROWS_UNROLL, |k| {
            let v = first + k * threads;
            if v < per_row {
                // SAFETY: vector `v < per_row` of row `r < rows`: both halves' vectors lie in
                // `x`, at multiples of `N` of an aligned buffer (`n` a multiple of `N`).
                unsafe {
                    gate[k] = vector::load_hinted(x, input + v * N, LoadHint::Default);
                    up[k] = vector::load_hinted(x, input + n + v * N, LoadHint::Default);
                }
            }
        });
        unroll_8!(ROWS_UNROLL, |k| {
            let v = first + k * threads;
            if v < per_row {
                // SAFETY: `output + v * N + N <= rows * n`, a multiple of `N` of an aligned buffer.
                unsafe { store_gated::<T, N, ACT>(y, output + v * N, &gate[k], &up[k]) };
            }
        });
        r += thread::grid_dim_y() as usize;
    }
}
