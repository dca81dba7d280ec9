//! Matrix product `C = A * B` on BF16 or FP16 tensor cores with f32 accumulation, row-major
//! (`A` is `m x k`, `B` is `k x n`), the result in the input type (rounded once from the f32
//! accumulator, to nearest, ties to even) or in f32: the `mma.sync` path of the half-precision
//! GEMM, for every GPU from sm_80 on (a Hopper `wgmma` path may later be chosen over it on
//! sm_90a by the host's plan).
//!
//! The products of two bf16 (8-bit significands) or two f16 (11-bit) are exact in f32, and the
//! tensor core sums them in f32; so against the exact product of the given (already rounded)
//! operands the only errors are the f32 sums (about `sqrt(k) * 2^-24` relative on random data)
//! and, for a half-precision result, its final rounding (`2^-8` relative for bf16, `2^-11` for
//! f16), which dominates.
//!
//! One generic kernel, [`half_gemm`](fn@half_gemm), an instance per input type, output type and copy width.
//!
//! # Design
//! * **Block tile** `BM x BN = 128 x 128` of `C` ([`HALF_128X128`]), stepping `BK = 32` along
//!   `k`: per step a block copies `2 * BK * (BM + BN)` = 16 KiB from global memory and does
//!   `2 * BM * BN * BK` = 1 MFLOP (64 flops per byte, twice the TF32 kernels' for the same
//!   tile, as the elements are half the size).
//! * **Warp tile** 64 x 64 (4 warps, 128 threads): per step of 16 along `k` each warp loads 4 `A`
//!   fragments with `ldmatrix.x4` and 8 `B` fragments with 4 `ldmatrix.x4.trans`, 8 shared
//!   requests of 512 bytes each for 32 `mma.m16n8k16` (131,072 flops).
//! * **What one thread holds**: 128 f32 accumulators (`acc[i][j][0..4]`: rows `g`, `g + 8` and
//!   columns `2t`, `2t + 1` of MMA tile `(i, j)` of its warp tile, `g = lane / 4`, `t = lane %
//!   4`), and per step of 16 along `k` 16 `A` and 16 `B` registers (two elements each).
//! * **Pipeline**: [`HALF_128X128`]`.stages` (4) shared-memory stages; while the block computes
//!   on tile `t`, tiles `t + 1 .. t + 3` are in flight. One barrier per tile, as in
//!   [`super::tf32`].
//! * **Bank conflicts**: `A` rows of `BK + 8 = 40` elements (80 bytes) and `B` rows of
//!   `BN + 8 = 136` (272 bytes): the 8 rows of 16 bytes one `ldmatrix` phase reads start at word
//!   offsets `20 r` or `68 r` (mod 32: `0, 20, 8, 28, 16, 4, 24, 12` and `0, 4, .., 28`), 8
//!   disjoint groups of 4 banks: no conflict; rows stay 16-byte aligned for the copies.
//! * **Edges and copy widths**: with `VEC` (the `_vec8` kernels: `k % 8 == 0`, `n % 8 == 0`,
//!   16-byte aligned matrices) each piece of 8 elements is one 16-byte `cp.async`, wholly inside
//!   the matrix or zero-filled (a source size of 0). Without, rows of `A` or `B` need not even
//!   be 4-byte aligned (`k` or `n` odd): each thread loads its pieces element by element (2-byte
//!   loads, zero past `m`, `n` or `k`) and stores them to shared memory as one 16-byte store per
//!   piece, synchronously, into the stage the block finished with before the tile's barrier.
//!   The shared layout, and so the MMAs, are the same in both; the epilogue stores only
//!   elements inside `C` (pairs with `VEC`, single elements without).
//!
//! Measured: BENCHMARKS.md, the `gpukern:bf16` and `gpukern:fp16` rows against cuBLAS
//! `cublasGemmEx` with the same types.

use core::marker::PhantomData;

use super::mma_tiling::{MmaOperand, MmaTiling};
use super::tf32::grouped_tile;
use super::WARP;
use crate::gpu::async_copy::{self, cp_async_16};
use crate::gpu::mma::{ldmatrix_x4, ldmatrix_x4_trans, mma_m16n8k16_bf16, mma_m16n8k16_f16};
use crate::gpu::tile::Output;
use crate::gpu::vector::F4;
use crate::gpu::{bf16, f16, mem, shared, thread};
use crate::kernel;

/// Tile shape of one half-precision kernel ([`half_gemm`](fn@half_gemm)'s numbers, for the host).
pub type HalfTiling = MmaTiling<HalfOperand>;

/// The 16-bit operands of [`half_gemm`](fn@half_gemm) in shared memory: [`HALF_PAD`] after the
/// rows of both tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HalfOperand;

impl MmaOperand for HalfOperand {
    const BYTES: usize = core::mem::size_of::<u16>();
    const A_PAD: usize = HALF_PAD;
    const B_PAD: usize = HALF_PAD;
}

/// 128 x 128 per block, four warps of 64 x 64 (128 threads), `BK = 32`, four stages: 74 KiB of
/// shared memory (75,776 bytes), so it also fits the 99 KiB per block of compute capability
/// 8.6, 8.9 and 12.0, and three blocks fit an H100/H200 multiprocessor's shared memory.
pub const HALF_128X128: HalfTiling = HalfTiling {
    block_rows: 128,
    block_cols: 128,
    block_k: 32,
    warp_rows: 64,
    warp_cols: 64,
    stages: 4,
    element: PhantomData,
};

/// Rows of the `mma.m16n8k16` tile.
pub const MMA_M: usize = 16;
/// Columns of the `mma.m16n8k16` tile.
pub const MMA_N: usize = 8;
/// Depth of the `mma.m16n8k16` tile.
pub const MMA_K: usize = 16;
/// Elements of padding after each row of the `A` and `B` tiles: 16 bytes, which keeps rows
/// 16-byte aligned (for `cp.async` and `ldmatrix`) and spreads an `ldmatrix` phase's 8 rows
/// over all 32 banks (see the module documentation).
pub const HALF_PAD: usize = 8;
/// Elements of one 16-byte copy.
const PIECE: usize = 8;

/// Four 32-bit words moved as one 16-byte access (a piece of 8 half-precision elements).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct U4([u32; 4]);

/// A 16-bit input type of the tensor cores: its `m16n8k16` MMA.
pub trait HalfInput: Copy {
    /// `D = A * B + C` on one 16 x 8 x 16 tile ([`mma_m16n8k16_bf16`] or
    /// [`mma_m16n8k16_f16`]), warp-collective.
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

impl HalfInput for bf16 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma_m16n8k16_bf16(a, b, c)
    }
}

impl HalfInput for f16 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma_m16n8k16_f16(a, b, c)
    }
}

/// The body of every half-precision matmul kernel: block `(bx, by)` computes one `BM x BN` tile
/// of `C` (which one: `grouped_tile` of its linear index `by * gridDim.x + bx`, as the TF32
/// kernels).
///
/// The warp tile is `MI x NJ` MMA tiles (`16 MI x 8 NJ` elements of `C`); warp `w` owns warp
/// tile `(w / (BN / 8NJ), w % (BN / 8NJ))`. What one thread does, per tile of `BK` along `k`:
/// 1. waits for its copies of this tile (`cp.async.wait_group STAGES - 2`) and at the block's
///    one barrier per tile, after which the whole tile is in shared memory;
/// 2. fetches its pieces of the tile `STAGES - 1` ahead into the stage the block finished with
///    before that barrier: with `VEC` 16-byte `cp.async` copies, committed as one group (an
///    empty group past the last tile); without, 2-byte loads and a 16-byte shared store per
///    piece (zeros past the matrix edges either way);
/// 3. for each step of 16 along `k`: loads its warp's `MI` `A` fragments (`ldmatrix.x4`) and
///    `NJ` `B` fragments (`ldmatrix.x4.trans`, two per load) and issues `MI * NJ` MMAs into its
///    f32 accumulators.
///
/// At the end it stores its accumulators inside `C` as `O` (pairs with `VEC`).
///
/// # Safety
/// * `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` elements; `c` overlaps neither; `m, n >= 1`.
/// * The launch: 1-D blocks of `(BM / 16MI) * (BN / 8NJ) * 32` threads, a grid of
///   `(ceil(n / BN), ceil(m / BM))`, `STAGES * stage_elements` 16-bit elements of dynamic shared
///   memory (as [`HalfTiling::shared_bytes`]); an sm_80 or newer GPU.
/// * With `VEC`: `k % 8 == 0`, `n % 8 == 0`, and `a`, `b`, `c` 16-byte aligned.
///
/// Instances (`I`, `O`, [`HALF_128X128`]'s numbers, `VEC`), one PTX entry each:
/// * `matmul_bf16_128x128` (bf16 in and out, 2-byte element loads): any `k`, `n` and alignment
///   (`k` odd included). Per tile of 32 along `k` a block reads 16 KiB and does 1,048,576
///   flops. Launch: 128 threads, grid `(ceil(n/128), ceil(m/128))`,
///   `HALF_128X128.shared_bytes()` (75,776) bytes of dynamic shared memory. Minimum traffic:
///   `2 (m k + k n + m n)` bytes.
/// * `matmul_bf16_128x128_vec8` (`VEC`: 16-byte `cp.async` copies and pair stores): for `k` and
///   `n` multiples of 8 and 16-byte aligned matrices.
/// * `matmul_bf16_f32out_128x128` (an f32 result, the accumulators stored unrounded): any shape
///   and alignment; minimum traffic `2 (m k + k n) + 4 m n` bytes. `_vec8`: 16-byte copies and
///   8-byte stores, `k`, `n` multiples of 8, 16-byte aligned matrices.
/// * `matmul_f16_128x128`, `matmul_f16_128x128_vec8`, `matmul_f16_f32out_128x128`,
///   `matmul_f16_f32out_128x128_vec8`: the same four on f16 (an f16 or an f32 result).
// Barriers: one per tile in the main loop, as `tf32_gemm`.
#[kernel(
    instances(
        matmul_bf16_128x128 = (
            bf16,
            bf16,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            false,
        ),
        matmul_bf16_128x128_vec8 = (
            bf16,
            bf16,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            true,
        ),
        matmul_bf16_f32out_128x128 = (
            bf16,
            f32,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            false,
        ),
        matmul_bf16_f32out_128x128_vec8 = (
            bf16,
            f32,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            true,
        ),
        matmul_f16_128x128 = (
            f16,
            f16,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            false,
        ),
        matmul_f16_128x128_vec8 = (
            f16,
            f16,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            true,
        ),
        matmul_f16_f32out_128x128 = (
            f16,
            f32,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            false,
        ),
        matmul_f16_f32out_128x128_vec8 = (
            f16,
            f32,
            HALF_128X128.block_rows,
            HALF_128X128.block_cols,
            HALF_128X128.block_k,
            HALF_128X128.warp_rows / MMA_M,
            HALF_128X128.warp_cols / MMA_N,
            HALF_128X128.stages,
            true,
        ),
    ),
    block((BM / (MMA_M * MI)) * (BN / (MMA_N * NJ)) * WARP),
    barriers(1)
)]
#[inline(always)]
// Index loops over the register arrays: each index is a constant once unrolled, which is what
// keeps the arrays in registers.
#[allow(clippy::needless_range_loop)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn half_gemm<
    I: HalfInput,
    O: Output,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const MI: usize,
    const NJ: usize,
    const STAGES: usize,
    const VEC: bool,
>(
    a: *const I,
    b: *const I,
    c: *mut O,
    m: usize,
    n: usize,
    k: usize,
) {
    let (wm_rows, wn_cols) = (MMA_M * MI, MMA_N * NJ);
    let warps_n = BN / wn_cols;
    let threads = (BM / wm_rows) * warps_n * WARP;
    const {
        let threads = (BM / (MMA_M * MI)) * (BN / (MMA_N * NJ)) * WARP;
        assert!(
            BM % (MMA_M * MI) == 0 && BN % (MMA_N * NJ) == 0,
            "warp tiles cover the block"
        );
        assert!(NJ % 2 == 0, "B fragments come two per ldmatrix.x4.trans");
        assert!(
            BK % MMA_K == 0 && BK % PIECE == 0,
            "whole MMA steps and 16-byte pieces per tile"
        );
        assert!(STAGES >= 2, "a pipeline of at least two stages");
        assert!(
            MI <= 8 && NJ <= 8 && BK / MMA_K <= 8,
            "unroll_8! unrolls up to 8 steps"
        );
        assert!(
            threads % (BK / PIECE) == 0 && (BM * BK / PIECE) % threads == 0,
            "A pieces per thread"
        );
        assert!(
            threads % (BN / PIECE) == 0 && (BK * BN / PIECE) % threads == 0,
            "B pieces per thread"
        );
        assert!(BM * BK / PIECE / threads <= 32, "one bit per A piece");
    }
    let a_stride = BK + HALF_PAD;
    let b_stride = BN + HALF_PAD;
    let stage_elements = BM * a_stride + BK * b_stride;

    let tid = thread::thread_idx_x() as usize;
    let (warp, lane) = (tid / WARP, tid % WARP);
    let (g, t) = (lane / 4, lane % 4);
    let (wm, wn) = (warp / warps_n, warp % warps_n);

    let tiles_n = thread::grid_dim_x() as usize;
    let tiles_m = thread::grid_dim_y() as usize;
    let id = thread::block_idx_y() as usize * tiles_n + thread::block_idx_x() as usize;
    let (tile_m, tile_n) = grouped_tile(id, tiles_m, tiles_n);
    let (row0, col0) = (tile_m * BM, tile_n * BN);
    let k_tiles = k.div_ceil(BK);

    // Shared memory taken as `F4` so that the module declares it 16-byte aligned.
    let smem = shared::dynamic::<F4>().cast::<u16>();
    // The operands as their 16-bit patterns (the element copies move bits, never values).
    let (a16, b16) = (a.cast::<u16>(), b.cast::<u16>());

    // What this thread copies of each tile: pieces of 8 elements, `A` rows `a_row + l * a_step`
    // at column `a_col` of the tile, `B` rows `b_row + l * b_step` at column `b_col`.
    let a_per_row = BK / PIECE;
    let b_per_row = BN / PIECE;
    let (a_row, a_col, a_step) = (tid / a_per_row, (tid % a_per_row) * PIECE, threads / a_per_row);
    let (b_row, b_col, b_step) = (tid / b_per_row, (tid % b_per_row) * PIECE, threads / b_per_row);
    let a_copies = BM * BK / PIECE / threads;
    let b_copies = BK * BN / PIECE / threads;
    // `A` rows of this thread inside `m`, one bit per piece.
    let mut a_rows_in = 0u32;
    for l in 0..a_copies {
        if row0 + a_row + l * a_step < m {
            a_rows_in |= 1 << l;
        }
    }
    // Tile 0's first piece of each operand, as element indices; piece `l` is `l` row steps on.
    let a_first = (row0 + a_row) * k + a_col;
    let b_first = b_row * n + col0 + b_col;

    // Fetches tile `kt` into stage `stage`.
    let fetch = |kt: usize, stage: usize| {
        let s_a = smem.wrapping_add(stage * stage_elements);
        let s_b = s_a.wrapping_add(BM * a_stride);
        let k0 = kt * BK;
        for l in 0..a_copies {
            let row_in = a_rows_in & (1 << l) != 0;
            let src = a_first + l * a_step * k + k0;
            let dst = s_a.wrapping_add((a_row + l * a_step) * a_stride + a_col);
            if VEC {
                let inside = row_in && k0 + a_col < k;
                // SAFETY: `dst` is a 16-byte aligned piece of stage `stage`; the source is read
                // only `inside` the matrix (row below `m`, the whole piece below `k` as
                // `k % 8 == 0`, 16-byte aligned as `a` is and `k % 8 == 0`), else `a`.
                unsafe {
                    let from = if inside { a16.wrapping_add(src) } else { a16 };
                    cp_async_16(dst.cast(), from.cast(), if inside { 16 } else { 0 });
                }
            } else {
                let mut w = [0u32; 4];
                for e in 0..PIECE {
                    if row_in && k0 + a_col + e < k {
                        // SAFETY: row below `m`, column below `k`: inside `A`.
                        let v = unsafe { mem::load(a16, src + e) };
                        w[e / 2] |= u32::from(v) << (16 * (e % 2));
                    }
                }
                // SAFETY: `dst` is a 16-byte aligned piece of stage `stage`.
                unsafe { mem::store(dst.cast::<U4>(), 0, U4(w)) };
            }
        }
        for l in 0..b_copies {
            let row = b_row + l * b_step;
            let row_in = k0 + row < k;
            let src = b_first + (k0 + l * b_step) * n;
            let dst = s_b.wrapping_add(row * b_stride + b_col);
            if VEC {
                let inside = row_in && col0 + b_col < n;
                // SAFETY: as for `A`: row below `k` and the whole piece below `n` (`n % 8 ==
                // 0`) when `inside`, else `b`.
                unsafe {
                    let from = if inside { b16.wrapping_add(src) } else { b16 };
                    cp_async_16(dst.cast(), from.cast(), if inside { 16 } else { 0 });
                }
            } else {
                let mut w = [0u32; 4];
                for e in 0..PIECE {
                    if row_in && col0 + b_col + e < n {
                        // SAFETY: row below `k`, column below `n`: inside `B`.
                        let v = unsafe { mem::load(b16, src + e) };
                        w[e / 2] |= u32::from(v) << (16 * (e % 2));
                    }
                }
                // SAFETY: `dst` is a 16-byte aligned piece of stage `stage`.
                unsafe { mem::store(dst.cast::<U4>(), 0, U4(w)) };
            }
        }
    };

    let mut acc = [[[0.0f32; 4]; NJ]; MI];
    // The prologue: tiles 0 .. STAGES - 1 fetched (in flight with `VEC`, one group each, empty
    // past the last).
    for s in 0..STAGES - 1 {
        if s < k_tiles {
            fetch(s, s);
        }
        async_copy::commit_group();
    }
    // This lane's `ldmatrix` rows: `A` row `lane % 16` at column `8 (lane / 16)` of an MMA
    // tile, `B` row (`k`) `lane % 16` at column `8 (lane / 16)` of a pair of MMA tiles.
    let (ld_row, ld_col) = (lane % 16, 8 * (lane / 16));
    let (mut read, mut write) = (0, STAGES - 1);
    for kt in 0..k_tiles {
        // Groups 0..=kt + STAGES - 2 are committed; this leaves at most STAGES - 2 in flight,
        // so tile `kt`'s group has landed; the barrier shows every thread's copies (and
        // stores) to all, and tells that everyone is done with the stage `write` (read at
        // step kt - 1).
        async_copy::wait_pending(STAGES - 2);
        thread::sync_threads();
        if kt + STAGES - 1 < k_tiles {
            fetch(kt + STAGES - 1, write);
        }
        async_copy::commit_group();

        let s_a = smem.wrapping_add(read * stage_elements + (wm * wm_rows + ld_row) * a_stride + ld_col);
        let s_b = smem
            .wrapping_add(read * stage_elements + BM * a_stride + ld_row * b_stride + wn * wn_cols + ld_col);
        // One step of 16 along `k`: fragments from shared memory, then the warp tile's MMAs.
        let step = |kk: usize, acc: &mut [[[f32; 4]; NJ]; MI]| {
            let mut af = [[0u32; 4]; MI];
            unroll_8!(MI, |i| {
                // SAFETY: row `lane % 16` of MMA tile `i` (below `BM`), columns `16 kk +
                // 8 (lane / 16) ..+ 8` (below `BK`), 16-byte aligned, inside the stage; the
                // whole warp is here.
                af[i] = unsafe { ldmatrix_x4(s_a.wrapping_add(i * MMA_M * a_stride + kk * MMA_K)) };
            });
            let mut bf = [[0u32; 2]; NJ];
            unroll_8!(NJ / 2, |jj| {
                // SAFETY: row `16 kk + lane % 16` (below `BK`), columns `16 jj + 8 (lane / 16)
                // ..+ 8` of the warp tile (below `BN`), 16-byte aligned, inside the stage.
                let r =
                    unsafe { ldmatrix_x4_trans(s_b.wrapping_add(kk * MMA_K * b_stride + jj * 2 * MMA_N)) };
                bf[2 * jj] = [r[0], r[1]];
                bf[2 * jj + 1] = [r[2], r[3]];
            });
            unroll_8!(MI, |i| {
                unroll_8!(NJ, |j| {
                    acc[i][j] = I::mma(af[i], bf[j], acc[i][j]);
                });
            });
        };
        unroll_8!(BK / MMA_K, |kk| {
            step(kk, &mut acc);
        });
        read = if read + 1 == STAGES { 0 } else { read + 1 };
        write = if write + 1 == STAGES { 0 } else { write + 1 };
    }

    unroll_8!(MI, |i| {
        unroll_8!(2, |h| {
            let row = row0 + wm * wm_rows + i * MMA_M + g + 8 * h;
            if row < m {
                unroll_8!(NJ, |j| {
                    let col = col0 + wn * wn_cols + j * MMA_N + 2 * t;
                    let (v0, v1) = (acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                    // SAFETY: `row < m` and only columns below `n` are stored; with `VEC`,
                    // `n % 8 == 0` and an even `col` keep both elements in the row and aligned
                    // to a pair.
                    unsafe {
                        if VEC {
                            if col < n {
                                O::store_pair(c, row * n + col, [v0, v1]);
                            }
                        } else {
                            if col < n {
                                O::store(c, row * n + col, v0);
                            }
                            if col + 1 < n {
                                O::store(c, row * n + col + 1, v1);
                            }
                        }
                    }
                });
            }
        });
    });
}
