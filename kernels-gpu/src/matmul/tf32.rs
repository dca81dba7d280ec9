//! Matrix product `C = A * B` on TF32 tensor cores, f32 in and out, row-major (`A` is `m x k`,
//! `B` is `k x n`): the opt-in fast path that trades precision for speed. Each operand is
//! rounded to TF32 (10 explicit significand bits, unit roundoff `u = 2^-11`) before it is
//! multiplied; products are exact and the sums are in f32. So element `(i, j)` is off the exact
//! product by at most about `(2u + k * 2^-23) * sum_k |A(i,k)| |B(k,j)|` (the precise bound is
//! on gpukern's `MatmulAlgorithm::Tf32`), a relative error of about 1e-3 where the f32 kernels of
//! [`crate::matmul`] give 1e-6.
//!
//! One generic kernel, [`tf32_gemm`](fn@tf32_gemm), an instance per [`Tf32Tiling`] with 16-byte (`_vec4`) or
//! 4-byte copies of the operands, and with the operands rounded to TF32 or (`_trunc`) handed to
//! the tensor core as f32 bits, which it truncates: unit roundoff `2^-10` instead of `2^-11`,
//! so a bound of about `2^-9 + k * 2^-23` instead of `2^-10 + k * 2^-23`, for 256 fewer
//! instructions per warp per tile (the rounding is a compare and an add per element).
//!
//! # Design
//! * **Block tile** `BM x BN` of `C` (128 x 128 or 128 x 256), stepping `BK = 32` along `k`
//!   (`BK = 16` in [`TF32_128X128_K16`], the tiling for GPUs with 99 KiB of shared memory per
//!   block).
//!   Per step a block copies `4 * BK * (BM + BN)` bytes (32 KiB or 48 KiB) from global memory
//!   and does `2 * BM * BN * BK` flops (1 or 2 MFLOP): 32 or 43 flops per byte. A kernel at
//!   the predicted ~330 TFLOP/s (derived: see "Predicted" below) against the
//!   ~4.8 TB/s of DRAM (quoted: NVIDIA H200 datasheet) needs ~70 flops per DRAM byte, so most
//!   of these re-reads must hit L2, which the grouped block order ([`GROUP_ROWS`]) arranges: the blocks
//!   resident at once share their `A` rows and `B` columns.
//! * **Warp tile** 64 x 64: each warp issues `4 x 8` `mma.m16n8k8` per step of 8 along `k`, from
//!   4 `A` fragments (4 registers each) and 8 `B` fragments (2 each) it loads from shared memory:
//!   4 KiB of shared-memory reads for 32 MMAs (65,536 flops), 128 bytes per MMA. Shared memory
//!   delivers 128 bytes per clock per multiprocessor, one MMA's operands; `mma.sync` with TF32
//!   on Hopper issues at most about one MMA per 1.5 clocks per multiprocessor (two thirds of the
//!   tensor-core peak). So the warp tile must be at least 64 x 64 (64 x 32 needs 192 bytes per
//!   MMA, which shared memory cannot feed), and no larger fits: the 64 x 64 accumulators are 128
//!   registers per thread, plus 32 for one step's fragments.
//! * **What one thread holds**: 128 f32 accumulators (`acc[i][j][0..4]`: rows `g`, `g + 8` and
//!   columns `2t`, `2t + 1` of the `16 x 8` MMA tile `(i, j)` of its warp tile, `g = lane / 4`,
//!   `t = lane % 4`), and per step of 8 along `k` 16 `A` and 16 `B` values rounded to TF32.
//! * **Pipeline**: `STAGES` (3 or 4) shared-memory stages filled with `cp.async` (global to
//!   shared without registers): while the block computes on tile `t`, tiles `t + 1 ..
//!   t + STAGES - 1` are in flight. One barrier per tile: the stage refilled at step `t` was
//!   last read at step `t - 1`, before that barrier.
//! * **Bank conflicts**: the `A` tile is stored row-major with rows of `BK + 4 = 36` floats, so
//!   the fragment load `A(g, t)` of lane `4g + t` hits bank `(36g + t) % 32 = 4g + t`: 32
//!   different banks. The `B` tile is stored `[k][n]` with rows of `BN + 8` floats (136 or 264,
//!   both 8 mod 32), so `B(t, g)` hits bank `8t + g`: again all 32. The 16-byte copies into
//!   either tile write 8 consecutive 16-byte words per quarter warp: no conflict.
//! * **Edges**: copies past `m`, `n` or `k` are zero-filled (`cp.async` with a source size of
//!   0), so ragged shapes are exact up to the TF32 rounding; the epilogue stores only elements
//!   inside `C`. The `_vec4` kernels need `k % 4 == 0`, `n % 4 == 0` and 16-byte aligned
//!   matrices (then a 16-byte piece is wholly inside or outside); the others copy 4 bytes at a
//!   time and take any shape and alignment.
//!
//! Predicted: `mma.sync` bound at about two thirds of the H200's dense TF32 peak
//! (~494 TFLOP/s at boost clock; quoted: NVIDIA H200 datasheet),
//! i.e. ~330 TFLOP/s (derived: two thirds of the peak), if the shared-memory traffic
//! (about 85% of its bandwidth at that rate, fills included; derived: bytes per MMA) overlaps
//! the MMAs. Measured: BENCHMARKS.md, the `gpukern:tf32` rows against cuBLAS TF32 (the `_trunc`
//! kernels are timed only in a `--plans` run).

use super::mma_tiling::MmaTiling;
use super::WARP;
use crate::gpu::async_copy::{self, cp_async_16, cp_async_4};
use crate::gpu::mma::{mma_m16n8k8_tf32, to_tf32};
use crate::gpu::vector::{self, F2, F4};
use crate::gpu::{mem, shared, thread};
use crate::kernel;

/// Tile shape of one TF32 kernel: the [`MmaTiling`] of the half-precision kernels too, with
/// [`A_PAD`] and [`B_PAD`] floats of padding.
pub type Tf32Tiling = MmaTiling;

/// 128 x 128 per block, four warps of 64 x 64 (128 threads), `BK = 32`, three stages: 105 KiB
/// of shared memory, so two blocks (eight warps) share a multiprocessor and one block's MMAs
/// cover the other's barrier. Four times the blocks of [`TF32_128X256`] for the same `C`: the
/// better choice when `C` has too few 128 x 256 tiles to fill the GPU.
pub const TF32_128X128: Tf32Tiling = Tf32Tiling {
    block_rows: 128,
    block_cols: 128,
    block_k: 32,
    warp_rows: 64,
    warp_cols: 64,
    stages: 3,
    a_pad: A_PAD,
    b_pad: B_PAD,
    element_bytes: 4,
};

/// 128 x 256 per block, eight warps of 64 x 64 (256 threads), `BK = 32`, four stages: 204 KiB
/// of shared memory, one block per multiprocessor. A third fewer global bytes per flop than
/// [`TF32_128X128`] (43 against 32 flops per byte copied), and a deeper pipeline.
pub const TF32_128X256: Tf32Tiling = Tf32Tiling {
    block_rows: 128,
    block_cols: 256,
    block_k: 32,
    warp_rows: 64,
    warp_cols: 64,
    stages: 4,
    a_pad: A_PAD,
    b_pad: B_PAD,
    element_bytes: 4,
};

/// 128 x 128 per block, four warps of 64 x 64 (128 threads), `BK = 16`, four stages: 74 KiB of
/// shared memory (75,776 bytes), for GPUs whose opt-in limit per block is below the 105 KiB of
/// [`TF32_128X128`]: 99 KiB on compute capability 8.6, 8.9 and 12.0. Half the depth per stage
/// and one stage more keeps three tiles (48 along `k`) in flight; the `A` rows of `BK + 4 = 20`
/// floats still put a warp's fragment loads on 32 banks (`(20g + t) % 32` is a permutation of
/// `4g' + t`). Twice the barriers of [`TF32_128X128`] per step of `k`.
pub const TF32_128X128_K16: Tf32Tiling = Tf32Tiling {
    block_rows: 128,
    block_cols: 128,
    block_k: 16,
    warp_rows: 64,
    warp_cols: 64,
    stages: 4,
    a_pad: A_PAD,
    b_pad: B_PAD,
    element_bytes: 4,
};

/// Rows of the `mma.m16n8k8` tile.
pub const MMA_M: usize = 16;
/// Columns of the `mma.m16n8k8` tile.
pub const MMA_N: usize = 8;
/// Depth of the `mma.m16n8k8` tile.
pub const MMA_K: usize = 8;
/// Floats of padding after each row of the `A` tile: rows of `BK + 4` floats put the fragment
/// loads of a warp on 32 different banks (see the module documentation) and keep rows 16-byte
/// aligned for the copies.
pub const A_PAD: usize = 4;
/// Floats of padding after each row of the `B` tile: rows of `BN + 8` floats (8 mod 32) put
/// the fragment loads of a warp on 32 different banks, rows 16-byte aligned.
pub const B_PAD: usize = 8;
/// Block rows per group in the block order: consecutive blocks walk down a group of 8 block
/// rows before moving one block column right, so the blocks running at once share the `B`
/// columns and `A` rows they read, and L2 serves them.
pub const GROUP_ROWS: usize = 8;

/// This block's tile `(row, column)` in the grid of `C`'s tiles (`tiles_n` columns, `tiles_m`
/// rows), from its linear index `id`: blocks in order of `id` fill a group of [`GROUP_ROWS`]
/// tile rows column by column.
#[inline(always)]
pub(super) fn grouped_tile(id: usize, tiles_m: usize, tiles_n: usize) -> (usize, usize) {
    let per_group = GROUP_ROWS * tiles_n;
    let group = id / per_group;
    let first = group * GROUP_ROWS;
    let rows = (tiles_m - first).min(GROUP_ROWS);
    let within = id - group * per_group;
    (first + within % rows, within / rows)
}

/// An f32 as an MMA operand: rounded to TF32 ([`to_tf32`], to nearest) with `ROUND`, else its
/// raw bits, which the tensor core reads truncated (the low 13 bits ignored: toward zero, unit
/// roundoff `2^-10`), saving the two instructions per element the rounding costs.
#[inline(always)]
fn operand<const ROUND: bool>(x: f32) -> u32 {
    if ROUND {
        to_tf32(x)
    } else {
        x.to_bits()
    }
}

/// The body of every TF32 matmul kernel: block `(bx, by)` computes one `BM x BN` tile of `C`
/// (which one: `grouped_tile` of its linear index `by * gridDim.x + bx`).
///
/// The warp tile is `MI x NJ` MMA tiles (`16 MI x 8 NJ` elements of `C`); warp `w` of the block
/// owns warp tile `(w / (BN / 8NJ), w % (BN / 8NJ))`. What one thread does, per tile of `BK`
/// along `k`:
/// 1. waits for its copies of this tile (`cp.async.wait_group STAGES - 2`) and at the block's
///    one barrier per tile, after which the whole tile is in shared memory;
/// 2. issues its copies of the tile `STAGES - 1` ahead into the stage the block finished with
///    before that barrier (16-byte pieces with `VEC`, 4-byte elements without; zeros past the
///    matrix edges), and commits them as one group (an empty group past the last tile);
/// 3. for each step of 8 along `k`: loads its `MI` `A` fragments and `NJ` `B` fragments from
///    the current stage, rounds each value to TF32 with `ROUND` (else hands the tensor core
///    the f32 bits, which it truncates), and issues `MI * NJ` MMAs into its
///    accumulators.
///
/// At the end it stores its accumulators inside `C` (8-byte stores with `VEC`).
///
/// # Safety
/// * `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` floats; `c` overlaps neither; `m, n >= 1`.
/// * The launch: 1-D blocks of `(BM / 16MI) * (BN / 8NJ) * 32` threads, a grid of
///   `(ceil(n / BN), ceil(m / BM))`, `STAGES * stage_floats` floats of dynamic shared memory (as
///   [`MmaTiling::shared_bytes`]); an sm_80 or newer GPU.
/// * With `VEC`: `k % 4 == 0`, `n % 4 == 0`, and `a`, `b`, `c` 16-byte aligned.
///
/// Instances (a [`Tf32Tiling`]'s numbers, `VEC`, `ROUND`), one PTX entry each:
/// * `matmul_tf32_128x128` ([`TF32_128X128`], 4-byte copies, rounding): any `k`, `n` and
///   alignment. There is no 16-byte-copy twin of this rounding kernel: the H200's ptxas spilled
///   it (which versions: BENCHMARKS.md, "What was tried"); the truncating
///   `matmul_tf32_128x128_vec4_trunc` has one. Per tile of 32 along `k` a block copies 32 KiB
///   and does 1,048,576 flops; each warp issues 128 MMAs from 128 shared loads per thread.
///   Launch: 128 threads, grid `(ceil(n/128), ceil(m/128))`, `TF32_128X128.shared_bytes()`
///   (107,520) bytes of dynamic shared memory.
/// * `matmul_tf32_128x128_k16` ([`TF32_128X128_K16`], 4-byte copies, rounding): the TF32 kernel
///   for GPUs that cannot give a block the 105 KiB of `matmul_tf32_128x128` (99 KiB on compute
///   capability 8.6, 8.9, 12.0). Per tile of 16 along `k` a block copies 16 KiB and does 524,288
///   flops; each warp issues 64 MMAs from 64 shared loads per thread. Launch: 128 threads,
///   `TF32_128X128_K16.shared_bytes()` (75,776) bytes of dynamic shared memory.
/// * `matmul_tf32_128x256_vec4` ([`TF32_128X256`], 16-byte copies, rounding): for `k` and `n`
///   multiples of 4 and 16-byte aligned matrices. Per tile of 32 along `k` a block copies 48 KiB
///   and does 2,097,152 flops; each warp issues 128 MMAs from 128 shared loads per thread.
///   Launch: 256 threads, grid `(ceil(n/256), ceil(m/128))`, `TF32_128X256.shared_bytes()`
///   (208,896) bytes of dynamic shared memory. `matmul_tf32_128x256`: 4-byte copies, any `k`,
///   `n` and alignment.
/// * `matmul_tf32_128x128_vec4_trunc`, `matmul_tf32_128x128_trunc`,
///   `matmul_tf32_128x256_vec4_trunc`, `matmul_tf32_128x256_trunc` (not `ROUND`): the rounding
///   kernels of those tilings and copies without the rounding to TF32. The tensor core truncates
///   the f32 operands (unit roundoff `2^-10` instead of `2^-11`), and each thread issues 32 fewer
///   conversions (64 instructions) per step of 8 along `k`.
// Barriers: one per tile in the main loop, after the wait for the tile's copies (the stages of
// the cp.async pipeline make a second one unnecessary).
#[kernel(
    instances(
        matmul_tf32_128x128 = (
            TF32_128X128.block_rows,
            TF32_128X128.block_cols,
            TF32_128X128.block_k,
            TF32_128X128.warp_rows / MMA_M,
            TF32_128X128.warp_cols / MMA_N,
            TF32_128X128.stages,
            false,
            true,
        ),
        matmul_tf32_128x128_k16 = (
            TF32_128X128_K16.block_rows,
            TF32_128X128_K16.block_cols,
            TF32_128X128_K16.block_k,
            TF32_128X128_K16.warp_rows / MMA_M,
            TF32_128X128_K16.warp_cols / MMA_N,
            TF32_128X128_K16.stages,
            false,
            true,
        ),
        matmul_tf32_128x256_vec4 = (
            TF32_128X256.block_rows,
            TF32_128X256.block_cols,
            TF32_128X256.block_k,
            TF32_128X256.warp_rows / MMA_M,
            TF32_128X256.warp_cols / MMA_N,
            TF32_128X256.stages,
            true,
            true,
        ),
        matmul_tf32_128x256 = (
            TF32_128X256.block_rows,
            TF32_128X256.block_cols,
            TF32_128X256.block_k,
            TF32_128X256.warp_rows / MMA_M,
            TF32_128X256.warp_cols / MMA_N,
            TF32_128X256.stages,
            false,
            true,
        ),
        matmul_tf32_128x128_vec4_trunc = (
            TF32_128X128.block_rows,
            TF32_128X128.block_cols,
            TF32_128X128.block_k,
            TF32_128X128.warp_rows / MMA_M,
            TF32_128X128.warp_cols / MMA_N,
            TF32_128X128.stages,
            true,
            false,
        ),
        matmul_tf32_128x128_trunc = (
            TF32_128X128.block_rows,
            TF32_128X128.block_cols,
            TF32_128X128.block_k,
            TF32_128X128.warp_rows / MMA_M,
            TF32_128X128.warp_cols / MMA_N,
            TF32_128X128.stages,
            false,
            false,
        ),
        matmul_tf32_128x256_vec4_trunc = (
            TF32_128X256.block_rows,
            TF32_128X256.block_cols,
            TF32_128X256.block_k,
            TF32_128X256.warp_rows / MMA_M,
            TF32_128X256.warp_cols / MMA_N,
            TF32_128X256.stages,
            true,
            false,
        ),
        matmul_tf32_128x256_trunc = (
            TF32_128X256.block_rows,
            TF32_128X256.block_cols,
            TF32_128X256.block_k,
            TF32_128X256.warp_rows / MMA_M,
            TF32_128X256.warp_cols / MMA_N,
            TF32_128X256.stages,
            false,
            false,
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
pub unsafe fn tf32_gemm<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const MI: usize,
    const NJ: usize,
    const STAGES: usize,
    const VEC: bool,
    const ROUND: bool,
>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
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
        assert!(
            BK % MMA_K == 0 && BK % 4 == 0,
            "whole MMA steps and 16-byte pieces per tile"
        );
        assert!(STAGES >= 2, "a pipeline of at least two stages");
        assert!(
            MI <= 8 && NJ <= 8 && BK / MMA_K <= 8,
            "unroll_8! unrolls up to 8 steps"
        );
        assert!(
            threads % (BK / 4) == 0 && (BM * BK / 4) % threads == 0,
            "A pieces per thread"
        );
        assert!(
            threads % (BN / 4) == 0 && (BK * BN / 4) % threads == 0,
            "B pieces per thread"
        );
        assert!(
            threads % BK == 0 && (BM * BK) % threads == 0,
            "A elements per thread"
        );
        assert!(
            threads % BN == 0 && (BK * BN) % threads == 0,
            "B elements per thread"
        );
    }
    let a_stride = BK + A_PAD;
    let b_stride = BN + B_PAD;
    let stage_floats = BM * a_stride + BK * b_stride;

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
    let smem = shared::dynamic::<F4>().cast::<f32>();

    // What this thread copies of each tile. With `VEC`: `A` rows `a_row + l * a_step` at
    // column `a_col` of the tile (a 16-byte piece each), `B` rows `b_row + l * b_step` at
    // column `b_col`. Without: single elements, `A` rows `a_row + l * a_step` at column `a_col`,
    // `B` rows `b_row + l * b_step` at column `b_col`. The pieces' columns are the same for
    // every `l` (the asserts above), so only rows step.
    let width = if VEC { 4 } else { 1 };
    let a_per_row = BK / width;
    let b_per_row = BN / width;
    let (a_row, a_col, a_step) = (tid / a_per_row, (tid % a_per_row) * width, threads / a_per_row);
    let (b_row, b_col, b_step) = (tid / b_per_row, (tid % b_per_row) * width, threads / b_per_row);
    let a_copies = BM * BK / width / threads;
    let b_copies = BK * BN / width / threads;
    // `A` rows of this thread inside `m`, one bit per copy (at most 32 copies per operand).
    let mut a_rows_in = 0u32;
    for l in 0..a_copies {
        if row0 + a_row + l * a_step < m {
            a_rows_in |= 1 << l;
        }
    }
    let b_col_in = col0 + b_col < n;
    // Tile 0's first piece of each operand; piece `l` is `l` row steps further.
    let a_src = a.wrapping_add((row0 + a_row) * k + a_col);
    let b_src = b.wrapping_add(b_row * n + col0 + b_col);

    // Copies tile `kt` into stage `stage` (global -> shared, in the background).
    let issue = |kt: usize, stage: usize| {
        let s_a = smem.wrapping_add(stage * stage_floats);
        let s_b = s_a.wrapping_add(BM * a_stride);
        let k0 = kt * BK;
        let a_k_in = k0 + a_col < k;
        for l in 0..a_copies {
            let inside = a_k_in && a_rows_in & (1 << l) != 0;
            let src = a_src.wrapping_add(l * a_step * k + k0);
            let dst = s_a.wrapping_add((a_row + l * a_step) * a_stride + a_col);
            // SAFETY: `dst` is inside stage `stage` (row below `BM`, columns below `BK`,
            // 16-byte aligned with `VEC`); `src` is read only `inside` the matrix (row below
            // `m`, column below `k`; with `VEC` the whole piece, as `k % 4 == 0`), else `a`.
            unsafe {
                let src = if inside { src } else { a };
                if VEC {
                    cp_async_16(dst, src, if inside { 16 } else { 0 });
                } else {
                    cp_async_4(dst, src, if inside { 4 } else { 0 });
                }
            }
        }
        for l in 0..b_copies {
            let row = b_row + l * b_step;
            let inside = b_col_in && k0 + row < k;
            let src = b_src.wrapping_add((k0 + l * b_step) * n);
            let dst = s_b.wrapping_add(row * b_stride + b_col);
            // SAFETY: as for `A`: row below `k` and columns below `n` when `inside` (with `VEC`
            // the whole piece, as `n % 4 == 0`), else `b`.
            unsafe {
                let src = if inside { src } else { b };
                if VEC {
                    cp_async_16(dst, src, if inside { 16 } else { 0 });
                } else {
                    cp_async_4(dst, src, if inside { 4 } else { 0 });
                }
            }
        }
    };

    let mut acc = [[[0.0f32; 4]; NJ]; MI];
    // The prologue: tiles 0 .. STAGES - 1 in flight, one group each (empty past the last).
    for s in 0..STAGES - 1 {
        if s < k_tiles {
            issue(s, s);
        }
        async_copy::commit_group();
    }
    let (mut read, mut write) = (0, STAGES - 1);
    for kt in 0..k_tiles {
        // Groups 0..=kt + STAGES - 2 are committed; this leaves at most STAGES - 2 in flight,
        // so tile `kt`'s group has landed; the barrier shows every thread's copies to all, and
        // tells that everyone is done with the stage `write` (read at step kt - 1).
        async_copy::wait_pending(STAGES - 2);
        thread::sync_threads();
        if kt + STAGES - 1 < k_tiles {
            issue(kt + STAGES - 1, write);
        }
        async_copy::commit_group();

        // This lane's first `A` element `A(g, t)` of its warp tile, and first `B` element
        // `B(t, g)`, in the current stage.
        let s_a = smem.wrapping_add(read * stage_floats + (wm * wm_rows + g) * a_stride + t);
        let s_b = smem.wrapping_add(read * stage_floats + BM * a_stride + t * b_stride + wn * wn_cols + g);
        // One step of 8 along `k`: fragments from shared memory, rounded to TF32, then the
        // warp tile's MMAs.
        let step = |kk: usize, acc: &mut [[[f32; 4]; NJ]; MI]| {
            let mut af = [[0u32; 4]; MI];
            unroll_8!(MI, |i| {
                let p = s_a.wrapping_add(i * MMA_M * a_stride + kk * MMA_K);
                // SAFETY: rows `g`, `g + 8` of MMA tile `i` (below `BM`), columns `t`, `t + 4`
                // of step `kk` (below `BK`), inside the stage.
                unsafe {
                    af[i] = [
                        operand::<ROUND>(mem::load(p, 0)),
                        operand::<ROUND>(mem::load(p, 8 * a_stride)),
                        operand::<ROUND>(mem::load(p, 4)),
                        operand::<ROUND>(mem::load(p, 8 * a_stride + 4)),
                    ];
                }
            });
            let mut bf = [[0u32; 2]; NJ];
            unroll_8!(NJ, |j| {
                let p = s_b.wrapping_add(kk * MMA_K * b_stride + j * MMA_N);
                // SAFETY: rows `t`, `t + 4` of step `kk` (below `BK`), column `g` of MMA tile
                // `j` (below `BN`), inside the stage.
                unsafe {
                    bf[j] = [
                        operand::<ROUND>(mem::load(p, 0)),
                        operand::<ROUND>(mem::load(p, 4 * b_stride)),
                    ];
                }
            });
            unroll_8!(MI, |i| {
                unroll_8!(NJ, |j| {
                    acc[i][j] = mma_m16n8k8_tf32(af[i], bf[j], acc[i][j]);
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
                    // SAFETY: `row < m` and only columns below `n` are stored; with `VEC`, `n % 4
                    // == 0` and an even `col` keep both elements in the row and 8-byte aligned.
                    unsafe {
                        if VEC {
                            if col < n {
                                vector::store2(c, row * n + col, F2([v0, v1]));
                            }
                        } else {
                            if col < n {
                                mem::store(c, row * n + col, v0);
                            }
                            if col + 1 < n {
                                mem::store(c, row * n + col + 1, v1);
                            }
                        }
                    }
                });
            }
        });
    });
}
