//! Decode products: `Y = X W^T` with a few rows of `X` (`m` from 1 to 64, the tokens of a decode
//! step) against a large bf16 weight `W` stored as `nn.Linear` stores it, `n x k` row-major (each
//! output's weights contiguous along `k`): `torch.matmul(x, w.T)`. `X` is `m x k` and `Y` `m x n`,
//! both row-major; f32 accumulation, the result rounded once to bf16 (or kept in f32).
//!
//! Such a product is memory-bound: it reads `2 n k` bytes of weight for `2 m n k` flops, a flop
//! per byte at `m = 1`. The whole GPU must stream the weight exactly once, at the DRAM's rate.
//!
//! The ladder:
//! 1. [`decode_naive`](fn@decode_naive) (`matmul_decode_naive_bf16`), the tutorial rung: one
//!    thread per element of `Y`, the dot product of a row of `X` and a row of `W` element by
//!    element. Each row of `W` is read by the `m` threads of its column of `Y`, and a warp's 32
//!    threads read 32 rows `2k` bytes apart: no coalescing.
//! 2. [`decode_gemm`](fn@decode_gemm) (`matmul_decode_bf16_m8` ... `_m64`, the `_f32` twins),
//!    on tensor cores with the operands swapped: `Y^T = W X^T`, `W` the `A` operand of
//!    `mma.m16n8k16` (16 rows of weight) and `X^T` the `B` operand (8 rows of `X` per tile, the
//!    tiles `MT` of them for `m` up to `8 MT`). Each warp owns 16 rows of `W` over a slice of `k`
//!    and loads them straight from global memory into registers with 16-byte loads (evict-first:
//!    the weight is read once), no shared memory and no barrier.
//! 3. [`super::decode_wgmma`] (`matmul_decode_wgmma_*`, Hopper only): the weight copied by TMA
//!    through a ring of shared-memory stages and multiplied by `wgmma`, the rows of `X` read once
//!    per block and step. Rung 2 keeps its bytes in flight in registers and reloads `X` per warp:
//!    at `m = 64` its 164 registers per thread leave one block of 8 warps per SM.
//! 4. [`super::decode_rows`] (`matmul_decode_rows_*`, `m <= 8`): on CUDA cores, each warp
//!    streaming one whole row of `W`, 512 contiguous bytes per load instruction; the plan's
//!    choice at `m = 1`.
//!
//! # The permutation of `k` that makes every load 16 bytes
//! An `m16n8k16` fragment gives a lane (`g = lane / 4`, `t = lane % 4`) the elements
//! `A(g, 2t..2t+2)`, `A(g, 2t+8..2t+10)` (and rows `g + 8`) and `B(2t..2t+2, g)`,
//! `B(2t+8..2t+10, g)`: pairs of columns 8 apart, 4-byte loads. But a dot product does not care
//! in which order its terms are summed, so any permutation of `k`, applied to both operands,
//! gives the same product. Per step of 32 along `k` (two MMAs `j = 0, 1`), lane `(g, t)` loads
//! the 8 elements `kb + 8t .. kb + 8t + 8` of rows `g` and `g + 8` of its weight tile and of row
//! `g` of each `X` tile, as one 16-byte load each (words `w0..w3`, two elements each), and gives
//! MMA `j` the words `2j` and `2j + 1`: the fragment's logical column `c` of MMA `j` is physical
//! column `kb + 8t + 4j + 2 (c >= 8) + c % 2` (for `c` in `2t..2t+2` and `2t+8..2t+10`), the same
//! for `A` and `B`, a bijection of the 32 columns of the step.
//!
//! # Split of the work
//! A block is [`DECODE_WARPS`] warps (256 threads) over [`DECODE_BLOCK_ROWS`] = 128 rows of `W`
//! (16 per warp); the grid's `y` extent splits `k` into slices of `k_split` elements, one per
//! block row of the grid. With one slice the kernel writes `Y`; with several (the host's plan:
//! when the rows of `W` alone give too few blocks to keep enough loads in flight on every SM)
//! each slice writes its partial product in f32 to its own `m x n` plane and
//! [`matmul_decode_sum_bf16`](fn@matmul_decode_sum_bf16) (or, for an f32 result,
//! `matmul_sum_splits`) adds the planes in slice order (deterministic) and rounds once.
//!
//! # Edges
//! `k` must be a multiple of 8 and the matrices 16-byte aligned (each piece of 8 elements is
//! wholly inside or outside `k`; the host checks, and the tutorial rung takes the rest). Rows of
//! `W` past `n` and rows of `X` past `m` are zeros, not loaded; only elements inside `Y` are
//! stored.

use super::WARP;
use crate::gpu::convert::bf16_to_f32;
use crate::gpu::mma::mma_m16n8k16_bf16;
use crate::gpu::tile::Output;
use crate::gpu::vector::{self, LoadHint};
use crate::gpu::{bf16, mem, thread};
use crate::kernel;

/// Threads per block of [`decode_naive`](fn@decode_naive) (a row of `Y` per `blockIdx.y`).
pub const DECODE_NAIVE_BLOCK: u32 = 256;

/// Warps per block of [`decode_gemm`](fn@decode_gemm).
pub const DECODE_WARPS: usize = 8;
/// Threads per block of [`decode_gemm`](fn@decode_gemm).
pub const DECODE_BLOCK: u32 = (DECODE_WARPS * WARP) as u32;
/// Rows of `W` per warp: the `m16` of the MMA.
pub const DECODE_WARP_ROWS: usize = 16;
/// Rows of `W` per block of [`decode_gemm`](fn@decode_gemm).
pub const DECODE_BLOCK_ROWS: usize = DECODE_WARPS * DECODE_WARP_ROWS;
/// Elements of `k` per step of a warp: two MMAs of `k16`, one 16-byte load per row and lane.
pub const DECODE_STEP: usize = 32;
/// Rows of `X` per MMA tile (the `n8` of the MMA).
pub const DECODE_TILE_M: usize = 8;
/// The most rows of `X` the kernels take: 8 tiles of 8.
pub const DECODE_MAX_M: usize = 64;
/// A slice of `k` is a multiple of this (the largest unrolled step, 4 x 32 elements).
pub const DECODE_SLICE_ALIGN: usize = 128;
/// [`decode_gemm`](fn@decode_gemm)'s `LOADS`: `W` with the evict-first hint
/// ([`LoadHint::EvictFirst`]).
pub const DECODE_EVICT_FIRST: u8 = 0;
/// [`decode_gemm`](fn@decode_gemm)'s `LOADS`: `W` through the read-only path, `ld.global.nc`
/// ([`LoadHint::ReadOnly`]).
pub const DECODE_READ_ONLY: u8 = 1;
/// [`decode_gemm`](fn@decode_gemm)'s `LOADS`: `W` through the read-only path with no L1 line and
/// 256-byte L2 fetches, `ld.global.nc.L1::no_allocate.L2::256B` ([`LoadHint::NoAllocate`]): a
/// warp's `U = 4` steps read 256 contiguous bytes of each of its rows, one such fetch.
pub const DECODE_NO_ALLOCATE: u8 = 2;
/// Threads per block of [`matmul_decode_sum_bf16`](fn@matmul_decode_sum_bf16).
pub const DECODE_SUM_BLOCK: u32 = 256;

/// The hint of a decode kernel's loads of `W` for its `LOADS` parameter: [`DECODE_READ_ONLY`],
/// [`DECODE_NO_ALLOCATE`], else evict-first.
#[inline(always)]
pub(super) const fn weight_hint(loads: u8) -> LoadHint {
    match loads {
        DECODE_READ_ONLY => LoadHint::ReadOnly,
        DECODE_NO_ALLOCATE => LoadHint::NoAllocate,
        _ => LoadHint::EvictFirst,
    }
}

/// The slice of `k` that grid row `slice` of a split decode product covers: `slice * k_split ..
/// min((slice + 1) * k_split, k)`, as `(k0, k1)`.
#[inline(always)]
pub(super) fn slice_of_k(slice: usize, k_split: usize, k: usize) -> (usize, usize) {
    let k0 = slice * k_split;
    (k0, if k0 + k_split < k { k0 + k_split } else { k })
}

/// The tutorial rung: thread `j` of block `(bx, i)` computes `Y[i][bx * 256 + j]`, the dot
/// product of row `i` of `X` and row `bx * 256 + j` of `W`, in f32, element by element, rounded
/// once to `O`.
///
/// Launch: 1-D blocks of [`DECODE_NAIVE_BLOCK`] threads, a grid of `(ceil(n / 256), m)`.
///
/// # Safety
/// `x`, `w`, `y` point to `m*k`, `n*k` and `m*n` elements of device memory; `y` overlaps
/// neither.
// Barriers: none, no shared memory.
#[kernel(
    instances(matmul_decode_naive_bf16 = bf16, matmul_decode_naive_f32 = f32),
    block(DECODE_NAIVE_BLOCK),
    barriers(0)
)]
pub unsafe fn decode_naive<O: Output>(
    x: *const bf16,
    w: *const bf16,
    y: *mut O,
    m: usize,
    n: usize,
    k: usize,
) {
    let j = thread::index_1d();
    let i = thread::block_idx_y() as usize;
    if i < m && j < n {
        let mut acc = 0.0f32;
        for l in 0..k {
            // SAFETY: `i < m`, `j < n`, `l < k`: inside both matrices.
            let (a, b) = unsafe { (mem::load(x, i * k + l), mem::load(w, j * k + l)) };
            acc = crate::gpu::math::fma(bf16_to_f32(a), bf16_to_f32(b), acc);
        }
        // SAFETY: `i < m`, `j < n`.
        unsafe { O::store(y, i * n + j, acc) }
    }
}

/// The fast rung (see the module documentation): warp `wp` of block `(bx, s)` computes rows
/// `bx * 128 + 16 wp .. + 16` of `Y^T` (columns of `Y`) over the slice `s * k_split ..
/// min((s + 1) * k_split, k)` of `k`, for `m <= 8 MT` rows of `X`, `U` steps of 32 along `k`
/// per loop iteration (all their loads issued before the first MMA; for `MT = 1` the next
/// iteration's loads of `W` are issued before this one's MMAs), and stores them as `O` into
/// plane `s` of `out` (`out[s * m * n + i * n + j]`). `LOADS` picks the loads of `W`
/// ([`DECODE_EVICT_FIRST`], [`DECODE_READ_ONLY`] or [`DECODE_NO_ALLOCATE`]).
///
/// Launch: 1-D blocks of [`DECODE_BLOCK`] threads, a grid of `(ceil(n / 128), slices)` with
/// `slices = ceil(k / k_split)`.
///
/// # Safety
/// `x`, `w` point to `m*k` and `n*k` bf16 of device memory, 16-byte aligned, that no thread
/// writes during the launch; `out` to `slices * m * n` elements, overlapping neither; `k` a
/// multiple of 8, `k_split` a positive multiple of [`DECODE_SLICE_ALIGN`]; `1 <= m <= 8 MT`.
// Barriers: none, no shared memory: each warp works alone.
#[kernel(
    instances(
        matmul_decode_bf16_m8 = (bf16, 1, 4, 0),
        matmul_decode_bf16_m16 = (bf16, 2, 4, 0),
        matmul_decode_bf16_m32 = (bf16, 4, 2, 0),
        matmul_decode_bf16_m64 = (bf16, 8, 2, 0),
        matmul_decode_f32_m8 = (f32, 1, 4, 0),
        matmul_decode_f32_m16 = (f32, 2, 4, 0),
        matmul_decode_f32_m32 = (f32, 4, 2, 0),
        matmul_decode_f32_m64 = (f32, 8, 2, 0),
        matmul_decode_bf16_m8_nc = (bf16, 1, 4, 1),
        matmul_decode_bf16_m8_na = (bf16, 1, 4, 2),
    ),
    block(DECODE_BLOCK),
    barriers(0)
)]
#[inline(always)]
// Index loops over the register arrays: each index is a constant once unrolled.
#[allow(clippy::needless_range_loop)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn decode_gemm<O: Output, const MT: usize, const U: usize, const LOADS: u8>(
    x: *const bf16,
    w: *const bf16,
    out: *mut O,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    const {
        assert!(
            MT >= 1 && MT <= 8 && U >= 1 && U <= 8,
            "unroll_8! unrolls up to 8 steps"
        );
        assert!(
            DECODE_SLICE_ALIGN % (U * DECODE_STEP) == 0,
            "whole iterations per slice"
        );
    }
    let tid = thread::thread_idx_x() as usize;
    let (warp, lane) = (tid / WARP, tid % WARP);
    let (g, t) = (lane / 4, lane % 4);
    let row0 = thread::block_idx_x() as usize * DECODE_BLOCK_ROWS + warp * DECODE_WARP_ROWS;
    // A warp without a row of `W` has nothing to do (no barrier follows).
    if row0 >= n {
        return;
    }
    let slice = thread::block_idx_y() as usize;
    let (k0, k1) = slice_of_k(slice, k_split, k);
    let (r_lo, r_hi) = (row0 + g, row0 + g + 8);
    let hint = weight_hint(LOADS);
    // The matrices as words of two bf16: element `e` (even) is word `e / 2`.
    let (w32, x32) = (w.cast::<u32>(), x.cast::<u32>());

    // This lane's 16-byte pieces of its two rows of `W`, and of its row of each tile of `X`, for
    // the `U` steps from `kb`: zeros past the slice or the matrices.
    type Pieces<const U: usize, const MT: usize> = ([[u32; 4]; U], [[u32; 4]; U], [[[u32; 4]; MT]; U]);
    let fetch = |kb: usize| -> Pieces<U, MT> {
        let mut lo = [[0u32; 4]; U];
        let mut hi = [[0u32; 4]; U];
        let mut xv = [[[0u32; 4]; MT]; U];
        unroll_8!(U, |u| {
            let col = kb + u * DECODE_STEP + 8 * t;
            if col < k1 {
                // SAFETY: `r < n`, `col + 8 <= k1 <= k` (`k` and `col` multiples of 8), so
                // `w[r * k + col .. + 8]` is inside `W`, 16-byte aligned (`k % 8 == 0`, an
                // aligned buffer); no thread writes `W`.
                if r_lo < n {
                    lo[u] = unsafe { vector::load_hinted::<u32, 4>(w32, (r_lo * k + col) / 2, hint) };
                }
                if r_hi < n {
                    hi[u] = unsafe { vector::load_hinted::<u32, 4>(w32, (r_hi * k + col) / 2, hint) };
                }
                unroll_8!(MT, |j| {
                    let row = DECODE_TILE_M * j + g;
                    if row < m {
                        // SAFETY: `row < m`, `col + 8 <= k`: `x[row * k + col .. + 8]`, aligned
                        // as above; no thread writes `X`.
                        xv[u][j] = unsafe {
                            vector::load_hinted::<u32, 4>(x32, (row * k + col) / 2, LoadHint::ReadOnly)
                        };
                    }
                });
            }
        });
        (lo, hi, xv)
    };

    let mut acc = [[0.0f32; 4]; MT];
    // The products of `U` steps with this lane's pieces.
    let mut products = |(lo, hi, xv): &Pieces<U, MT>| {
        unroll_8!(U, |u| {
            unroll_8!(MT, |j| {
                let x = xv[u][j];
                acc[j] = mma_m16n8k16_bf16([lo[u][0], hi[u][0], lo[u][1], hi[u][1]], [x[0], x[1]], acc[j]);
                acc[j] = mma_m16n8k16_bf16([lo[u][2], hi[u][2], lo[u][3], hi[u][3]], [x[2], x[3]], acc[j]);
            });
        });
    };
    // `kb`, `k1` are the same for the whole warp: every lane runs every MMA.
    let mut kb = k0;
    if MT == 1 {
        // Software-pipelined (`m <= 8`): the next iteration's pieces are on their way while this
        // one's products run, so a warp always has loads in flight. Not for more tiles of `X`:
        // their registers (142 for 8 tiles unpipelined) would grow past what keeps a block
        // resident.
        let mut pieces = fetch(kb);
        while kb < k1 {
            let kb_next = kb + U * DECODE_STEP;
            let next = fetch(kb_next);
            products(&pieces);
            pieces = next;
            kb = kb_next;
        }
    } else {
        while kb < k1 {
            products(&fetch(kb));
            kb += U * DECODE_STEP;
        }
    }

    // `acc[j]`: `Y^T(r_lo, 8j + 2t ..+ 2)` then `Y^T(r_hi, ..)`, i.e. `Y[8j + 2t (+1)][r]`.
    let plane = slice * m * n;
    unroll_8!(MT, |j| {
        let i = DECODE_TILE_M * j + 2 * t;
        unroll_8!(2, |h| {
            let r = if h == 0 { r_lo } else { r_hi };
            if r < n {
                // SAFETY: `i < m` (or `i + 1 < m`) and `r < n`: inside plane `slice` of `out`.
                unsafe {
                    if i < m {
                        O::store(out, plane + i * n + r, acc[j][2 * h]);
                    }
                    if i + 1 < m {
                        O::store(out, plane + (i + 1) * n + r, acc[j][2 * h + 1]);
                    }
                }
            }
        });
    });
}

/// The second pass of a split decode product: thread `i` writes `y[i] = partial[i] +
/// partial[len + i] + ...` over `slices` planes, in that order (so the result does not depend on
/// the launch), rounded once to bf16.
///
/// Launch: 1-D blocks of [`DECODE_SUM_BLOCK`] threads, `ceil(len / DECODE_SUM_BLOCK)` blocks.
///
/// # Safety
/// `partial` holds `slices * len` floats, `y` holds `len` elements and does not overlap it.
// Barriers: none.
#[kernel(block(DECODE_SUM_BLOCK), barriers(0))]
pub unsafe fn matmul_decode_sum_bf16(partial: *const f32, y: *mut bf16, len: usize, slices: usize) {
    let i = thread::index_1d();
    if i < len {
        let mut sum = 0.0f32;
        for s in 0..slices {
            // SAFETY: `s < slices`, `i < len`.
            sum += unsafe { mem::load(partial, s * len + i) };
        }
        // SAFETY: `i < len`.
        unsafe { <bf16 as Output>::store(y, i, sum) }
    }
}
