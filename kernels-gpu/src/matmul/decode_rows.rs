//! The decode product on CUDA cores with the weight's rows streamed whole
//! ([`decode_rows`](fn@decode_rows), `matmul_decode_rows_*`): `Y = X W^T` for `m <= 8` rows of
//! `X` against a bf16 weight `W` stored `n x k` (see [`super::decode`] for the product and its
//! other rungs).
//!
//! At `m = 1` a decode product does one multiply-add per weight element: CUDA cores keep up with
//! the DRAM, and a warp can read its rows of `W` as the copy kernels read memory, 512 contiguous
//! bytes per load instruction (32 lanes of 16 bytes), where the tensor-core rung reads 16 rows of
//! 64 bytes per instruction to fill an MMA fragment. Each lane sums its own columns; the lanes'
//! sums are added by shuffles once per row, at the end.
//!
//! Per weight element a row of `X` costs one multiply-add and its loads come from L1 (`X` is a
//! few KiB to a few tens of KiB, read by every warp): the rung is for small `m`, where the
//! multiply-adds stay under the SM's rate at the DRAM's pace; the tensor-core rungs take the rest.
//!
//! One row of `W` per warp: against a 28672 x 8192 weight at `m = 1` on the H200, one row per
//! warp (8 steps of 256 in flight) streamed 4010 GB/s where 2 rows (4 steps) streamed 3882 and
//! 4 rows (2 steps) 3839 (`bench/experiments/third-wave/3bdb6ee-decode-gemm.jsonl`, `rows-r1`,
//! `rows`, `rows-r4`): more warps of shorter work even out the last wave. Evict-first loads of
//! the weight: 4098 GB/s there against 4036 without L1 lines and with 256-byte L2 fetches, and
//! 3523 against 3508 at 8192 x 8192 (`bench/experiments/third-wave/048a939-decode-gemm.jsonl`,
//! where `gpukern:rows-ef` is the evict-first kernel and `gpukern:rows` the other; since then
//! `rows` names the evict-first kernel and `rows-na` the other).

use super::decode::{slice_of_k, weight_hint};
use super::WARP;
use crate::gpu::tile::Output;
use crate::gpu::vector::{self, LoadHint};
use crate::gpu::{bf16, math, thread, warp};
use crate::kernel;

/// Warps per block of [`decode_rows`](fn@decode_rows).
pub const DECODE_ROWS_WARPS: usize = 8;
/// Threads per block of [`decode_rows`](fn@decode_rows).
pub const DECODE_ROWS_BLOCK: u32 = (DECODE_ROWS_WARPS * WARP) as u32;
/// Elements of `k` a warp covers per step: 32 lanes of 8 (one 16-byte load each).
pub const DECODE_ROWS_STEP: usize = WARP * 8;
/// The most rows of `X` the rung takes.
pub const DECODE_ROWS_MAX_M: usize = 8;

/// `a . b` over the two bf16 of each word, added to `acc` in f32 (exact products, one rounding
/// per multiply-add): a bf16 is the upper half of an f32, so each widens by a shift or a mask.
#[inline(always)]
fn dot8(a: &[u32; 4], b: &[u32; 4], mut acc: f32) -> f32 {
    let mut q = 0;
    while q < 4 {
        let (lo_a, lo_b) = (f32::from_bits(a[q] << 16), f32::from_bits(b[q] << 16));
        let (hi_a, hi_b) = (
            f32::from_bits(a[q] & 0xffff_0000),
            f32::from_bits(b[q] & 0xffff_0000),
        );
        acc = math::fma(lo_a, lo_b, acc);
        acc = math::fma(hi_a, hi_b, acc);
        q += 1;
    }
    acc
}

/// Warp `wp` of block `(bx, s)` computes `Y[i][r]` for the row `r = 8 bx + wp` of `W` and every
/// row `i < m <= M` of `X`, over the slice `s * k_split .. min((s + 1) * k_split, k)` of `k`,
/// and stores them as `O` into plane `s` of `out` (`out[s m n + i n + r]`).
///
/// Per loop iteration a lane loads, for each of `U` steps of 256 along `k`, the 8 elements
/// `kb + 256 u + 8 lane ..+ 8` of row `r` of `W` (16 bytes, hinted by `LOADS`,
/// [`super::decode::DECODE_EVICT_FIRST`] or [`super::decode::DECODE_NO_ALLOCATE`]) and of the
/// `m` rows of `X` (read-only path: `X` stays in L1), all before the first multiply-add; a
/// warp's load instruction reads 512 contiguous bytes of the row. Each lane keeps `M` sums;
/// after the slice, five shuffles per sum add the lanes' sums and lane 0 stores them.
///
/// Global memory: `W`'s row slice read once, `X`'s slice read by every warp (from L1 after the
/// first), `m` elements of `out` written per warp.
///
/// Launch: 1-D blocks of [`DECODE_ROWS_BLOCK`] threads, a grid of `(ceil(n / 8), slices)` with
/// `slices = ceil(k / k_split)`.
///
/// # Safety
/// `x`, `w` point to `m*k` and `n*k` bf16 of device memory, 16-byte aligned, that no thread
/// writes during the launch; `out` to `slices * m * n` elements, overlapping neither; `k` a
/// multiple of 8, `k_split` a positive multiple of 8; `1 <= m <= M`.
// Barriers: none, no shared memory: each warp works alone.
#[kernel(
    instances(
        matmul_decode_rows_bf16_m1 = (bf16, 1, 8, 0),
        matmul_decode_rows_bf16_m1_na = (bf16, 1, 8, 2),
        matmul_decode_rows_bf16_m2 = (bf16, 2, 4, 0),
        matmul_decode_rows_bf16_m4 = (bf16, 4, 4, 0),
        matmul_decode_rows_bf16_m8 = (bf16, 8, 2, 0),
        matmul_decode_rows_f32_m1 = (f32, 1, 8, 0),
        matmul_decode_rows_f32_m2 = (f32, 2, 4, 0),
        matmul_decode_rows_f32_m4 = (f32, 4, 4, 0),
        matmul_decode_rows_f32_m8 = (f32, 8, 2, 0),
    ),
    block(DECODE_ROWS_BLOCK),
    barriers(0)
)]
#[inline(always)]
// Index loops over the register arrays: each index is a constant once unrolled.
#[allow(clippy::needless_range_loop)]
pub unsafe fn decode_rows<O: Output, const M: usize, const U: usize, const LOADS: u8>(
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
            M >= 1 && M <= DECODE_ROWS_MAX_M && U >= 1 && U <= 8,
            "unroll_8! unrolls up to 8"
        );
    }
    let tid = thread::thread_idx_x() as usize;
    let (wp, lane) = (tid / WARP, tid % WARP);
    let row = thread::block_idx_x() as usize * DECODE_ROWS_WARPS + wp;
    // A warp without a row of `W` has nothing to do (no barrier follows).
    if row >= n {
        return;
    }
    let slice = thread::block_idx_y() as usize;
    let (k0, k1) = slice_of_k(slice, k_split, k);
    let hint = weight_hint(LOADS);
    // The matrices as words of two bf16: element `e` (even) is word `e / 2`.
    let (w32, x32) = (w.cast::<u32>(), x.cast::<u32>());

    let mut acc = [0.0f32; M];
    // `kb` and `k1` are the same for the whole warp.
    let mut kb = k0;
    while kb < k1 {
        let mut wv = [[0u32; 4]; U];
        let mut xv = [[[0u32; 4]; M]; U];
        unroll_8!(U, |u| {
            let col = kb + u * DECODE_ROWS_STEP + 8 * lane;
            if col < k1 {
                // SAFETY: `row < n`, `col + 8 <= k1 <= k` (`k`, `col` multiples of 8):
                // `w[row k + col ..+ 8]` is inside `W`, 16-byte aligned; no thread writes `W`.
                wv[u] = unsafe { vector::load_hinted::<u32, 4>(w32, (row * k + col) / 2, hint) };
                unroll_8!(M, |i| {
                    if i < m {
                        // SAFETY: `i < m`, `col + 8 <= k`: `x[i k + col ..+ 8]`, aligned as
                        // above; no thread writes `X`.
                        xv[u][i] = unsafe {
                            vector::load_hinted::<u32, 4>(x32, (i * k + col) / 2, LoadHint::ReadOnly)
                        };
                    }
                });
            }
        });
        unroll_8!(U, |u| {
            unroll_8!(M, |i| {
                acc[i] = dot8(&wv[u], &xv[u][i], acc[i]);
            });
        });
        kb += U * DECODE_ROWS_STEP;
    }

    let plane = slice * m * n;
    unroll_8!(M, |i| {
        let sum = warp::reduce_sum(acc[i]);
        if lane == 0 && i < m {
            // SAFETY: `i < m`, `row < n`: inside plane `slice` of `out`.
            unsafe { O::store(out, plane + i * n + row, sum) };
        }
    });
}
