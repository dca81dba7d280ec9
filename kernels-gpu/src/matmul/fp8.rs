//! FP8 matrix product on Hopper's warpgroup tensor cores (sm_90a only): `C = (sa A) (sb B^T)^T`
//! with `A` (`m x k`) and `B^T` (`n x k`, the weight as `nn.Linear` stores it) in E4M3, both
//! row-major, f32 accumulation, the result in bf16 (rounded once) or f32, and dequantisation
//! scales per tensor, per row of `A` / per column of `C` (a row of `B^T`), or per block
//! (DeepGEMM's layout: one per `1 x 128` of `A`, one per `128 x 128` of `B^T`).
//!
//! FP8 `wgmma` reads both operands K-major only (PTX ISA, `wgmma.mma_async`: no imm-trans for
//! `.e4m3` / `.e5m2`), so `B` is taken transposed, `n x k`: cuBLASLt's `_scaled_mm` "TN" layout.
//!
//! The schedule is [`super::wgmma_ws`]'s (a producer warpgroup issuing TMA copies into a
//! [`Ring`], two consumer warpgroups, `setmaxnreg`, a persistent grid over `grouped_tile`
//! order): a stage still holds `(BM + BN)` rows of 128 bytes, which for one-byte elements is a
//! step of `BK = 128` along `k`, four `wgmma.m64nNk32` per consumer ([`wgmma::Accumulators::mma_e4m3`]).
//! What this rung adds is the accumulation and the scales ([`Fp8Mode`]):
//! * [`Fast`]: every step's products go into the `wgmma` accumulators, scaled once at the end.
//!   The tensor core adds FP8 products into its accumulators with fewer significand bits than
//!   f32 (about 14 kept), so the error grows with `k` (`gpukern::ops::matmul::Fp8Accumulation`
//!   gives the bound).
//! * [`Promoted`]: each step of 128 along `k` overwrites the `wgmma` accumulators (scale-d
//!   false), is waited for, and is added into a second array of f32 accumulators in ordinary
//!   registers (DeepGEMM's promotion): the tensor core's short sums cover 128 values only.
//!   Both arrays live in registers, so it runs on the 128 x 128 tile (`2 x 64` f32 per thread).
//!   The loop is DeepGEMM's and cuBLASLt's order: while step `s`'s products run, the consumer
//!   waits for step `s + 1`'s stage and makes its descriptors, so that between `s`'s retirement
//!   and `s + 1`'s issue lies the promotion alone (the other consumer's products keep the
//!   tensor core busy meanwhile). A step's four descriptors are one value plus `2 j`
//!   (`step_descriptors`) and the ring's place is kept in registers (`Place`), not divided out
//!   per step: on the H200 these took the 128 x 128 promoted kernel from 889.7 to 1117.0
//!   TFLOP/s at 4096^3 and the block-scaled one from 742.2 to 1054.2 (two binaries in turn,
//!   `bench/experiments/third-wave/8f07132-fp8-ab-base-1.jsonl` and `8f07132-fp8-ab-new-1.jsonl`).
//! * [`BlockScaled`]: [`Promoted`] with the step's block scales applied at each promotion:
//!   `total += part * sa[row, step] * sb[col / 128, step]`.
//! * [`PromotedOverlap`], [`BlockScaledOverlap`]: the same sums, but a consumer issues step
//!   `s + 1`'s products into a second array of accumulators before it waits for step `s`'s
//!   (`wait_group 1`) and promotes them (one `fma` per accumulator), so the tensor core has work
//!   while a warpgroup adds. Three arrays of `N / 2` registers: the 128 x 128 tile. Since the
//!   one-array loop's reordering it is no faster (the host plan's `OVERLAP_PROMOTION`), so a rung,
//!   not the default.
//!
//! The epilogue stores each thread's results from its registers ([`tile::store_rows`]), or in
//! [`fp8_gemm`](fn@fp8_gemm)'s [`Staged`] epilogue (bf16, the promoted and block-scaled 128 x 128 kernels) stages them in
//! shared memory for two tensor stores by the copy engine, so that a consumer's epilogue ends
//! at shared memory (the eleventh round's named next step; not the host's default: on the H200
//! level at 4096^3 and slower at 8192^3, `bench/experiments/third-wave/016d620-fp8-staged.jsonl`).
//!
//! A [`Pair`] kernel runs in clusters of two blocks on vertically adjacent tiles (rows `2 u` and
//! `2 u + 1` of tiles, one column), which share their tile of `B^T`: each block's producer copies
//! its own tile of `A` and half of `B^T`'s rows into both blocks' stage at once (the copy
//! engine's multicast, [`crate::gpu::tma::load_2d_multicast`]), so each block fetches `BM + BN / 2`
//! rows per step instead of `BM + BN` (cuBLASLt's `2 x 1` clusters); a stage's `empty` barrier
//! counts both blocks' consumer warps, each consumer warp releases a stage in both
//! ([`crate::gpu::pipeline::Ring::new_cluster`]), and each producer drains the ring before its
//! block exits. When the rows of tiles are odd, the last pair's second block computes a tile past
//! `m` (zeros in, nothing stored) so that both blocks walk the same steps.
//!
//! Per stage a block moves `(BM + BN) 128` bytes and does `2 BM BN 128` flops: 128 x 256 tiles
//! 48 KiB for 8,388,608 flops (171 flops per byte), 128 x 128 tiles 32 KiB for 4,194,304.
//!
//! `k` is zero-filled past its end by the copy engine (the maps' bounds), so a ragged `k` adds
//! zeros; the rows of `A` and `B^T` must start 16 bytes apart for the copy engine (`lda`, `ldb`
//! multiples of 16: the host pads a ragged `k` into such rows).
//!
//! Compiled into the `sm_90a` PTX only (and the simulator).

use super::tf32::grouped_tile;
use super::wgmma::MAP_WORDS;
use super::wgmma_ws::{Ws128x128, Ws128x192, Ws128x256, WsShape, WsTiling, MAX_SHARED};
use crate::gpu::fp8::{E4M3, E5M2};
use crate::gpu::pipeline::{Consumer, Ring, Stage, RING_ALIGN};
use crate::gpu::tile::Output;
use crate::gpu::tma::{self, Tensor2d};
use crate::gpu::wgmma::Accumulators;
use crate::gpu::{barrier, bf16, bulk, cluster, math, mem, thread, tile, wgmma};
use crate::kernel;

/// Bytes of one row of a 128-byte swizzled box: 128 E4M3 values along `k`.
const SWIZZLE_ROW: usize = 128;
/// The step along `k` per stage: one swizzle row of one-byte elements.
pub const FP8_BLOCK_K: usize = SWIZZLE_ROW;
/// Threads of a warpgroup.
const WARPGROUP: usize = 128;
/// Rows of `C` per consumer warpgroup.
const CONSUMER_ROWS: usize = 64;
/// Registers per thread the producer keeps (as [`super::wgmma_ws`]).
const PRODUCER_REGISTERS: u32 = 40;
/// Registers per thread the consumers ask for: `128 x 40 + 256 x 232 <= 65536`.
const CONSUMER_REGISTERS: u32 = 232;
/// Rows and columns of `B^T` one block scale covers (DeepGEMM's 128 x 128), and columns of `A`
/// one of its scales covers (`1 x 128`): one stage's step along `k`.
pub const FP8_SCALE_BLOCK: usize = 128;

const _: () = assert!(FP8_BLOCK_K == WsTiling::block_k(1) && FP8_SCALE_BLOCK == FP8_BLOCK_K);

/// How an FP8 kernel stores its tile: [`Registers`] or [`Staged`].
pub trait Fp8Epilogue {
    /// Whether each consumer stages its results in shared memory for the copy engine's tensor
    /// stores (else its threads store them from registers).
    const STAGED: bool;
}

/// Each thread stores its results from its registers ([`tile::store_rows`]).
#[derive(Clone, Copy, Debug)]
pub struct Registers;
/// Each consumer stages its results in shared memory and the copy engine stores them
/// ([`tile::stage_boxes`]; bf16 result, the 128 x 128 tile).
#[derive(Clone, Copy, Debug)]
pub struct Staged;

impl Fp8Epilogue for Registers {
    const STAGED: bool = false;
}
impl Fp8Epilogue for Staged {
    const STAGED: bool = true;
}

/// How many blocks of a cluster share each tile of `B^T`: [`Single`] or [`Pair`].
pub trait Fp8Cluster {
    /// Blocks per cluster (1: no cluster).
    const BLOCKS: u32;
}

/// One block per tile, no cluster.
#[derive(Clone, Copy, Debug)]
pub struct Single;
/// Clusters of two blocks on vertically adjacent tiles sharing their tile of `B^T` by multicast
/// copies (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Pair;

impl Fp8Cluster for Single {
    const BLOCKS: u32 = 1;
}
impl Fp8Cluster for Pair {
    const BLOCKS: u32 = 2;
}

/// Marks `stage` empty for the calling warp: in this block ([`Single`]), or in both blocks of the
/// pair ([`Pair`]), whose producers both copy into it.
///
/// # Safety
/// As [`crate::gpu::pipeline::Consumer::release`] (and `release_cluster` for a pair, on the
/// ring of `Ring::new_cluster`).
#[inline(always)]
unsafe fn release<C: Fp8Cluster>(consumer: &Consumer, stage: &Stage) {
    // SAFETY: forwarded contract.
    unsafe {
        if C::BLOCKS > 1 {
            consumer.release_cluster(stage, C::BLOCKS);
        } else {
            consumer.release(stage);
        }
    }
}

/// How an FP8 kernel accumulates along `k` and where its scales apply.
pub trait Fp8Mode {
    /// Whether each step of 128 along `k` is added into f32 registers of its own.
    const PROMOTED: bool;
    /// Whether the scales are per block (applied at each promotion), else per tensor or per
    /// row (applied once, in the epilogue).
    const BLOCK_SCALES: bool;
    /// Whether (promoted) each step's promotion runs while the next step's products are in
    /// flight: two arrays of `wgmma` accumulators taken in turn, `wait_group 1` between them
    /// (else one array and `wait_group 0` before each promotion).
    const OVERLAP: bool;
}

/// All of `k` in the `wgmma` accumulators; scales per tensor or per row.
#[derive(Clone, Copy, Debug)]
pub struct Fast;
/// Each step of 128 along `k` promoted into f32 registers; scales per tensor or per row.
#[derive(Clone, Copy, Debug)]
pub struct Promoted;
/// Promoted, with block scales (`1 x 128` of `A`, `128 x 128` of `B^T`) at each promotion.
#[derive(Clone, Copy, Debug)]
pub struct BlockScaled;
/// [`Promoted`], each promotion overlapping the next step's products ([`Fp8Mode::OVERLAP`]).
#[derive(Clone, Copy, Debug)]
pub struct PromotedOverlap;
/// [`BlockScaled`], each promotion overlapping the next step's products.
#[derive(Clone, Copy, Debug)]
pub struct BlockScaledOverlap;

impl Fp8Mode for Fast {
    const PROMOTED: bool = false;
    const BLOCK_SCALES: bool = false;
    const OVERLAP: bool = false;
}
impl Fp8Mode for Promoted {
    const PROMOTED: bool = true;
    const BLOCK_SCALES: bool = false;
    const OVERLAP: bool = false;
}
impl Fp8Mode for BlockScaled {
    const PROMOTED: bool = true;
    const BLOCK_SCALES: bool = true;
    const OVERLAP: bool = false;
}
impl Fp8Mode for PromotedOverlap {
    const PROMOTED: bool = true;
    const BLOCK_SCALES: bool = false;
    const OVERLAP: bool = true;
}
impl Fp8Mode for BlockScaledOverlap {
    const PROMOTED: bool = true;
    const BLOCK_SCALES: bool = true;
    const OVERLAP: bool = true;
}

/// The element type of `B^T` in an FP8 kernel (`A` is E4M3): E4M3 (`.e4m3.e4m3` products) or
/// E5M2 (`.e4m3.e5m2`, the pairing `wgmma` has for a wider-range operand).
pub trait Fp8Operand: Copy {
    /// Four steps of 32 along `k` of E4M3 `A` by this `B` on the calling warpgroup, committed and
    /// left in flight ([`Accumulators::mma_e4m3_async`], [`Accumulators::mma_e4m3_e5m2_async`]).
    ///
    /// # Safety
    /// As [`wgmma::mma_e4m3_m64n256k128_async`].
    unsafe fn mma_async<A: Accumulators>(acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A;
}

impl Fp8Operand for E4M3 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma_async<A: Accumulators>(acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A {
        // SAFETY: forwarded contract.
        unsafe { acc.mma_e4m3_async(a, b, accumulate) }
    }
}

impl Fp8Operand for E5M2 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma_async<A: Accumulators>(acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A {
        // SAFETY: forwarded contract.
        unsafe { acc.mma_e4m3_e5m2_async(a, b, accumulate) }
    }
}

/// `acc[i] += part[i] * f(i)` for every accumulator `i` of one thread, one `fma` each, unrolled
/// (constant indices); `part` retired, `acc` f32 registers of the thread's own.
#[inline(always)]
fn promote<A: Accumulators>(acc: &mut A, part: &A, f: impl Fn(usize) -> f32) {
    let len = A::N / 2;
    unroll_8!(2, |h| {
        unroll_8!(8, |j| {
            unroll_8!(8, |l| {
                let i = 64 * h + 8 * j + l;
                if i < len {
                    acc[i] = math::fma(part[i], f(i), acc[i]);
                }
            });
        });
    });
}

/// The four descriptors of one step of 128 along `k` (four `k32` products) of the K-major,
/// 128-byte swizzled rows from `row0` of the tile at shared address `tile`: the first's
/// ([`tile::k_major_descriptors`]), then each 32 bytes on, which is `+ 2` in the start field
/// (`address >> 4`, no carry below 256 KiB), so that one value is computed per step.
#[inline(always)]
fn step_descriptors(tile: u32, row0: usize) -> [u64; 4] {
    let d = tile::k_major_descriptors(tile, row0)[0];
    [d, d + 2, d + 4, d + 6]
}

/// A consumer's place in the ring (stage and phase parity), advanced once per step without a
/// division by the stage count ([`crate::gpu::pipeline::Consumer::wait_at`]).
#[derive(Clone, Copy)]
struct Place {
    stage: usize,
    parity: u32,
}

impl Place {
    /// This step's place; moves on to the next.
    #[inline(always)]
    fn next(&mut self, stages: usize) -> (usize, u32) {
        let here = (self.stage, self.parity);
        self.stage += 1;
        if self.stage == stages {
            self.stage = 0;
            self.parity ^= 1;
        }
        here
    }
}

/// `acc[i] *= f(i)` for every accumulator `i` of one thread, unrolled (constant indices), once
/// no product on `acc` is in flight.
#[inline(always)]
fn scale_in_place<A: Accumulators>(acc: &mut A, f: impl Fn(usize) -> f32) {
    let len = A::N / 2;
    unroll_8!(2, |h| {
        unroll_8!(8, |j| {
            unroll_8!(8, |l| {
                let i = 64 * h + 8 * j + l;
                if i < len {
                    acc[i] *= f(i);
                }
            });
        });
    });
}

/// Bytes of a consumer's staging tile in the [`Staged`] epilogue: its `64 x 128` bf16 results as
/// two boxes of `64 x 64` ([`tile::STAGED_BOX_BYTES`] each).
pub const FP8_STAGING_BYTES: usize = 2 * tile::STAGED_BOX_BYTES;

/// Dynamic shared memory of [`fp8_gemm`](fn@fp8_gemm) with the [`Staged`] epilogue: the ring of [`super::wgmma_ws::WS_128X128`],
/// the alignment to its tail ([`Ring::tail`]), and a staging tile per consumer.
pub const FP8_STAGED_SHARED_BYTES: u32 =
    super::wgmma_ws::WS_128X128.shared_bytes() + (RING_ALIGN + 2 * FP8_STAGING_BYTES) as u32;

/// The FP8 kernels (see the module documentation). What one thread does: thread 0
/// initialises the ring's barriers; the producer warpgroup lowers its registers and its thread 0
/// walks the block's tiles (persistent, in grouped order) and their steps of 128 along `k`,
/// refilling each free stage with a box of `A` (`BM x 128` bytes) and one of `B^T` (`BN x 128`
/// bytes) by TMA; each consumer thread raises its registers and, per step, takes part in its
/// warpgroup's four `m64nNk32` E4M3 products on its 64 rows of the tile, then (promoted modes)
/// waits for them and adds them, block-scaled in [`BlockScaled`], into its f32 sums; after a
/// tile's last step it scales its `N / 2` results by the row's scale of `A` and the column's of
/// `B^T` (tensor and row scales) and stores them inside `C` as `O`. Global traffic: the operands
/// once per tile they feed (`k (BM + BN)` bytes per tile), the scales (a few floats per thread
/// per tile, per step in [`BlockScaled`]), `C` once.
///
/// With the [`Staged`] epilogue (bf16 result, the 128 x 128 tile) the tile's store ends at
/// shared memory: each consumer writes its scaled `64 x 128` results into a staging tile of its own
/// ([`tile::stage_boxes`], 128-byte swizzled, conflict-free), fences them for the copy engine,
/// and after a named barrier of its warpgroup ([`crate::gpu::barrier::sync`], id 1 + the
/// consumer) its first thread issues two tensor stores of `64 x 64` into `C` and goes on to the
/// next tile; before the staging tile is written again, that thread waits for the stores' reads
/// (`cp.async.bulk.wait_group.read 0`) and the warpgroup meets at the barrier once more. The
/// copy engine drops what lies past `m` and `n`. Global traffic as above (`C` written
/// once, by the copy engine); per tile 16 KiB more written to and read from shared memory.
///
/// Scales: `a_scales[row * a_step]` and `b_scales[col * b_step]`, each step 0 (one scale for the
/// tensor) or 1 (one per row of `A` / per row of `B^T`); in [`BlockScaled`],
/// `a_scales[row * a_step + s]` for step `s` along `k` (an `m x k_blocks` matrix, `a_step =
/// k_blocks = ceil(k / 128)`) and `b_scales[(col / 128) * b_step + s]` (`ceil(n / 128) x
/// k_blocks`, `b_step = k_blocks`).
///
/// # Safety
/// * `maps` holds two tensor maps of [`MAP_WORDS`] words each, 64-byte aligned: `a` (`m x k`,
///   box `BM x 128`) and `b` (`B^T`, `n x k`, box `BN x 128`), one-byte elements, 128-byte swizzle,
///   zero fill; `a` and `b` hold `m` and `n` rows `lda` and `ldb` bytes apart (multiples of 16,
///   at least `k`), 16-byte aligned; `c` holds `m x n` elements, dense, 16-byte aligned, distinct
///   from the operands; the scales hold what the indexing above reads for every row `< m`,
///   column `< n` and step `< ceil(k / 128)`; `m, n >= 1`.
/// * With the [`Staged`] epilogue, three tensor maps at `maps`: the third is `C` (`m x n` bf16,
///   rows `n` apart, `n` a multiple of 8; box `64 x 64`, 128-byte swizzle); the launch gives
///   [`FP8_STAGED_SHARED_BYTES`] of dynamic shared memory.
/// * The launch: [`WsTiling::threads`] (384) threads, a grid of `(G, 1)` blocks with
///   `1 <= G <= tiles`, [`WsTiling::shared_bytes`] of dynamic shared memory; compute capability
///   9.0.
/// * A [`Pair`]: clusters of `(2, 1, 1)`, `G` even with `2 <= G <= 2 ceil(tiles_m / 2) tiles_n`
///   (all of its clusters resident at once: the blocks of a pair wait for each other), and the
///   map of `B^T` with a box of `BN / 2 x 128`.
///
/// Instances (`O`, `S`, `M`, `B`, the epilogue, the cluster; `B` E4M3, the epilogue
/// [`Registers`] and the cluster [`Single`] but where named), one PTX entry each (in the sm_90a module), launch bounds `(384, 1)`:
/// * [`Fast`] on [`super::wgmma_ws::WS_128X256`] (`m64n256k32`, 128 accumulators per consumer
///   thread; per step 48 KiB by TMA, 8,388,608 flops): `matmul_fp8_fast_128x256` (bf16 result;
///   minimum traffic `m k + n k + 2 m n` bytes), `matmul_fp8_fast_f32out_128x256` (f32 result,
///   `m k + n k + 4 m n`);
/// * [`Fast`] on [`super::wgmma_ws::WS_128X128`] (`m64n128k32`, for products with too few
///   128 x 256 tiles to fill the GPU; per step 32 KiB, 4,194,304 flops): `matmul_fp8_fast_128x128`,
///   `matmul_fp8_fast_f32out_128x128`;
/// * [`Promoted`] on `WS_128X128` (64 `wgmma` accumulators and 64 f32 sums per consumer thread):
///   `matmul_fp8_promoted_128x128`, `matmul_fp8_promoted_f32out_128x128`;
/// * [`Promoted`] on [`super::wgmma_ws::WS_128X192`] (96 `wgmma` accumulators and 96 f32 sums
///   per consumer thread; per step 40 KiB, 6,291,456 flops): `matmul_fp8_promoted_128x192`
///   (bf16 result);
/// * [`BlockScaled`] on `WS_128X128` (a consumer's 128 columns are one block of `B^T`):
///   `matmul_fp8_block_128x128`, `matmul_fp8_block_f32out_128x128`;
/// * [`PromotedOverlap`] and [`BlockScaledOverlap`] on `WS_128X128` (two arrays of 64 `wgmma`
///   accumulators taken in turn and 64 f32 sums per consumer thread; the same traffic):
///   `matmul_fp8_promoted_overlap_128x128`, `matmul_fp8_promoted_overlap_f32out_128x128`,
///   `matmul_fp8_block_overlap_128x128`, `matmul_fp8_block_overlap_f32out_128x128`;
/// * `B^T` in E5M2 (`B` = [`E5M2`], `.e4m3.e5m2` products), bf16 result, the same traffic:
///   `matmul_fp8_e5m2_fast_128x256`, `matmul_fp8_e5m2_fast_128x128`,
///   `matmul_fp8_e5m2_promoted_128x128`, `matmul_fp8_e5m2_promoted_overlap_128x128`.
/// * the [`Staged`] epilogue on `WS_128X128`, bf16 result: `matmul_fp8_promoted_staged_128x128`
///   ([`Promoted`]: tensor and row scales), `matmul_fp8_block_staged_128x128` ([`BlockScaled`]);
/// * a [`Pair`] (every other instance is [`Single`]), bf16 result, E4M3: `matmul_fp8_fast_pair_128x256`
///   ([`Fast`], per step each block copies 32 KiB instead of 48), `matmul_fp8_promoted_pair_128x128`
///   ([`Promoted`]) and `matmul_fp8_block_pair_128x128` ([`BlockScaled`]), 24 KiB instead of 32.
// Launch bounds: 384 threads, one block per multiprocessor (`setmaxnreg` needs the register
// budget at entry). Barriers: one, after the ring's initialisation (the ring runs on mbarriers);
// with the staged epilogue also its two named barriers; in a pair also the cluster barrier's
// arrive and wait after the ring's initialisation.
#[kernel(
    launch_bounds(384, 1),
    instances(
        matmul_fp8_fast_128x256 = (bf16, Ws128x256, Fast, E4M3, Registers, Single),
        matmul_fp8_fast_f32out_128x256 = (f32, Ws128x256, Fast, E4M3, Registers, Single),
        matmul_fp8_fast_128x128 = (bf16, Ws128x128, Fast, E4M3, Registers, Single),
        matmul_fp8_fast_f32out_128x128 = (f32, Ws128x128, Fast, E4M3, Registers, Single),
        matmul_fp8_promoted_128x128 = (bf16, Ws128x128, Promoted, E4M3, Registers, Single),
        matmul_fp8_promoted_f32out_128x128 = (f32, Ws128x128, Promoted, E4M3, Registers, Single),
        matmul_fp8_promoted_128x192 = (bf16, Ws128x192, Promoted, E4M3, Registers, Single),
        matmul_fp8_block_128x128 = (bf16, Ws128x128, BlockScaled, E4M3, Registers, Single),
        matmul_fp8_block_f32out_128x128 = (f32, Ws128x128, BlockScaled, E4M3, Registers, Single),
        matmul_fp8_e5m2_fast_128x256 = (bf16, Ws128x256, Fast, E5M2, Registers, Single),
        matmul_fp8_e5m2_fast_128x128 = (bf16, Ws128x128, Fast, E5M2, Registers, Single),
        matmul_fp8_e5m2_promoted_128x128 = (bf16, Ws128x128, Promoted, E5M2, Registers, Single),
        matmul_fp8_promoted_overlap_128x128 = (bf16, Ws128x128, PromotedOverlap, E4M3, Registers, Single),
        matmul_fp8_promoted_overlap_f32out_128x128 = (f32, Ws128x128, PromotedOverlap, E4M3, Registers, Single),
        matmul_fp8_block_overlap_128x128 = (bf16, Ws128x128, BlockScaledOverlap, E4M3, Registers, Single),
        matmul_fp8_block_overlap_f32out_128x128 = (f32, Ws128x128, BlockScaledOverlap, E4M3, Registers, Single),
        matmul_fp8_e5m2_promoted_overlap_128x128 = (bf16, Ws128x128, PromotedOverlap, E5M2, Registers, Single),
        matmul_fp8_promoted_staged_128x128 = (bf16, Ws128x128, Promoted, E4M3, Staged, Single),
        matmul_fp8_block_staged_128x128 = (bf16, Ws128x128, BlockScaled, E4M3, Staged, Single),
        matmul_fp8_fast_pair_128x256 = (bf16, Ws128x256, Fast, E4M3, Registers, Pair),
        matmul_fp8_promoted_pair_128x128 = (bf16, Ws128x128, Promoted, E4M3, Registers, Pair),
        matmul_fp8_block_pair_128x128 = (bf16, Ws128x128, BlockScaled, E4M3, Registers, Pair),
    ),
    barriers(if E::STAGED { 3 } else { 1 } + if C::BLOCKS > 1 { 2 } else { 0 })
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn fp8_gemm<O: Output, S: WsShape, M: Fp8Mode, B: Fp8Operand, E: Fp8Epilogue, C: Fp8Cluster>(
    maps: *const u64,
    a: *const E4M3,
    b: *const B,
    c: *mut O,
    a_scales: *const f32,
    b_scales: *const f32,
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    a_step: usize,
    b_step: usize,
) {
    let t = S::TILING;
    const {
        assert!(S::TILING.is_valid_k_major() && S::TILING.threads() == 384);
        assert!(<S::Acc as Accumulators>::N == S::TILING.consumer_cols());
        // Two arrays of accumulators fit the consumers' registers up to N = 192 only.
        assert!(!M::PROMOTED || <S::Acc as Accumulators>::N <= 192);
        // A consumer's columns lie in one 128-column block of `B^T`.
        assert!(!M::BLOCK_SCALES || S::TILING.consumer_cols() == FP8_SCALE_BLOCK);
        assert!(S::TILING.shared_bytes() == Ring::shared_bytes(S::TILING.stages, S::TILING.stage_bytes()));
        // The staging tiles: two consumers of 64 x 128 bf16, in the shared memory left.
        assert!(!E::STAGED || (S::TILING.consumers == 2 && S::TILING.consumer_cols() == 128));
        assert!(FP8_STAGED_SHARED_BYTES <= MAX_SHARED);
        // A pair halves `B^T`'s box into whole swizzle atoms (8 rows) and stores from registers.
        assert!(C::BLOCKS == 1 || (C::BLOCKS == 2 && S::TILING.block_cols % 16 == 0 && !E::STAGED));
    };
    let (bm, bn) = (t.block_rows, t.block_cols);
    let bk = FP8_BLOCK_K;
    let a_bytes = t.a_bytes();
    let tid = thread::thread_idx_x() as usize;
    let group = tid / WARPGROUP;
    let (tiles_m, tiles_n) = (m.div_ceil(bm), n.div_ceil(bn));
    // The grid walks units of `C::BLOCKS` vertically adjacent tiles, one per block of a cluster.
    let blocks = C::BLOCKS as usize;
    let rank = if blocks > 1 {
        cluster::block_rank() as usize
    } else {
        0
    };
    let units_m = tiles_m.div_ceil(blocks);
    let units = units_m * tiles_n;
    let (first, step) = (
        thread::block_idx_x() as usize / blocks,
        thread::grid_dim_x() as usize / blocks,
    );
    // The unit's tile of this block.
    let tile_of = |unit: usize| {
        let (unit_m, tile_n) = grouped_tile(unit, units_m, tiles_n);
        (unit_m * blocks + rank, tile_n)
    };
    let k_tiles = k.div_ceil(bk);

    let consumer_warps = (t.consumers * WARPGROUP / 32) as u32;
    // SAFETY: every thread (of every block of the cluster), first; the launch's shared memory is
    // the ring's (checked above); stages of whole 1024-byte atoms.
    let ring = unsafe {
        if blocks > 1 {
            Ring::new_cluster(t.stages, t.stage_bytes(), consumer_warps, C::BLOCKS)
        } else {
            Ring::new(t.stages, t.stage_bytes(), consumer_warps)
        }
    };

    if group == 0 {
        wgmma::setmaxnreg_dec::<PRODUCER_REGISTERS>();
        if tid != 0 {
            return;
        }
        let ta = Tensor2d {
            map: maps,
            data: a,
            rows: m,
            cols: k,
            stride: lda,
            box_rows: bm,
            box_cols: bk,
        };
        // A pair's blocks each copy half of the tile's rows (for both).
        let b_rows = bn / blocks;
        let tb = Tensor2d {
            map: maps.wrapping_add(MAP_WORDS),
            data: b,
            rows: n,
            cols: k,
            stride: ldb,
            box_rows: b_rows,
            box_cols: bk,
        };
        tma::prefetch_map(ta.map);
        tma::prefetch_map(tb.map);
        let mut producer = ring.producer();
        let mut unit = first;
        while unit < units {
            let (tile_m, tile_n) = tile_of(unit);
            let (row0, col0) = (tile_m * bm, tile_n * bn);
            for kt in 0..k_tiles {
                // SAFETY: the one producer thread; the stage is free (in both blocks of a pair:
                // its `empty` barrier counts both blocks' consumers) and expects `stage_bytes` =
                // `(BM + BN) 128`, which the boxes fill (`A` at 0; `B^T` at `a_bytes`, or its
                // halves at `a_bytes` and `a_bytes + (BN / 2) 128`, one from each block of a
                // pair; all 1024-byte aligned); the maps are the kernel's.
                unsafe {
                    let stage = producer.acquire();
                    stage.load(0, &ta, row0, kt * bk);
                    if blocks > 1 {
                        let part = a_bytes + rank * b_rows * bk;
                        stage.load_multicast(part, &tb, col0 + rank * b_rows, kt * bk, 0b11);
                    } else {
                        stage.load(a_bytes, &tb, col0, kt * bk);
                    }
                }
            }
            unit += step;
        }
        if blocks > 1 {
            // SAFETY: the producer, after its last acquire; the consumers release every stage.
            unsafe { producer.drain() };
        }
        return;
    }

    wgmma::setmaxnreg_inc::<CONSUMER_REGISTERS>();
    let consumer_index = group - 1;
    let rows = t.row_groups();
    let (cr, cc) = if rows == t.consumers {
        (consumer_index, 0)
    } else {
        (consumer_index % rows, consumer_index / rows)
    };
    let cn = t.consumer_cols();
    let lane = tid % WARPGROUP;
    // This thread's two rows within its consumer's 64 (`tile::position`): `16 w + g` and 8 on.
    let my_row = 16 * (lane / 32) + (lane % 32) / 4;
    // The wgmma accumulators, and (promoted) the f32 sums.
    let mut part = <S::Acc as Accumulators>::zeroed();
    let mut total = <S::Acc as Accumulators>::zeroed();
    // The second array of products ([`Fp8Mode::OVERLAP`]; unused otherwise).
    let mut other = <S::Acc as Accumulators>::zeroed();
    let consumer = ring.consumer();
    let mut place = Place { stage: 0, parity: 0 };
    let mut unit = first;
    while unit < units {
        let (tile_m, tile_n) = tile_of(unit);
        let (row0, col0) = (tile_m * bm + CONSUMER_ROWS * cr, tile_n * bn + cn * cc);
        // The scales' rows of this thread's two rows of `A` (clamped inside `A`: rows past `m`
        // are computed but never stored).
        let a_row = |r: usize| (row0 + my_row + 8 * r).min(m - 1);
        // The tensor or row scales of the epilogue, loaded at the tile's start so that their
        // latency hides behind its products (unused with block scales).
        // SAFETY: rows `< m` and the first scale of `B^T`: inside the scales (the contract).
        let epilogue_scales = if M::BLOCK_SCALES {
            (1.0, 1.0, 1.0)
        } else {
            unsafe {
                (
                    mem::load(a_scales, a_row(0) * a_step),
                    mem::load(a_scales, a_row(1) * a_step),
                    mem::load(b_scales, 0),
                )
            }
        };
        if k_tiles == 0 {
            // `k = 0`: zeros, from an array of their own (nothing but products may write the
            // wgmma accumulators, or ptxas serialises the products: warning C7515).
            let zeros = <S::Acc as Accumulators>::zeroed();
            // SAFETY: the contract's shapes and alignment.
            unsafe { tile::store_rows(&zeros, lane, c, (row0, col0), (m, n), |_, _, v| v) };
            unit += step;
            continue;
        }
        // The scales of step `kt`, `A`'s for this thread's two rows and `B^T`'s (1 without
        // block scales): loaded when the step is issued, multiplied at its promotion, a step
        // later, so that the loads' latency hides behind a step of products.
        let scales = |kt: usize| -> (f32, f32, f32) {
            if M::BLOCK_SCALES {
                // SAFETY: rows `< m`, the block column `< ceil(n / 128)`, `kt < k_blocks`:
                // inside the scales (the contract).
                unsafe {
                    (
                        mem::load(a_scales, a_row(0) * a_step + kt),
                        mem::load(a_scales, a_row(1) * a_step + kt),
                        mem::load(b_scales, (col0 / FP8_SCALE_BLOCK) * b_step + kt),
                    )
                }
            } else {
                (1.0, 1.0, 1.0)
            }
        };
        let descriptors = |stage: &crate::gpu::pipeline::Stage| {
            (
                step_descriptors(stage.address(0), cr * CONSUMER_ROWS),
                step_descriptors(stage.address(a_bytes), cn * cc),
            )
        };
        // Accumulator `i` is on row `my_row + 8 ((i / 2) % 2)`.
        let pick = |(a0, a1, b): (f32, f32, f32)| {
            let (s0, s1) = (a0 * b, a1 * b);
            // Bit 1 of `i` is `(i / 2) % 2`, the row's half.
            move |i: usize| if i & 2 == 0 { s0 } else { s1 }
        };
        if M::OVERLAP {
            // Two arrays of products in turn: step `kt + 1` is issued into one before step
            // `kt`'s, in the other, is waited for (`wait_group 1`) and promoted, so the tensor
            // core has the next step while this thread adds; the stage of step `kt` is released
            // once its products have retired.
            total = <S::Acc as Accumulators>::zeroed();
            // SAFETY (every `consumer.wait`, product, wait and release below): the whole
            // warpgroup is here; a stage's copies have landed (its wait) and nothing writes it
            // before this warp releases it, after the wait that retires its products; each
            // stage released once.
            // SAFETY: as above.
            let mut s0 = unsafe {
                let (st, parity) = place.next(t.stages);
                consumer.wait_at(st, parity)
            };
            let mut f0 = scales(0);
            let (a0, b0) = descriptors(&s0);
            // SAFETY: as above.
            part = unsafe { B::mma_async(part, a0, b0, false) };
            let mut kt = 0;
            let (mut s1, mut f1);
            // One half-step of the loop: step `kt` is in flight in `$cur` (stage `$s`, scales
            // `$f`); after the last step, `$cur` is waited for, promoted and the loop left; else
            // step `kt + 1` is issued into `$next` (stage `$s_next`, scales `$f_next`) before
            // `$cur` (the older group, retired by `wait_group 1`) is promoted. A macro rather
            // than a closure: the loop below is the two half-steps written out, the arrays in
            // turn, as the compiler best schedules it (a step closure called with the arrays
            // swapped measured 0.69x/0.72x torch against 0.80x/0.86x, `68d5081-fp8.jsonl`).
            macro_rules! half_step {
                ($cur:ident, $s:ident, $f:ident => $next:ident, $s_next:ident, $f_next:ident) => {
                    if kt + 1 == k_tiles {
                        // SAFETY: as above.
                        unsafe {
                            $cur = wgmma::wait_accumulators::<0, _>($cur);
                            release::<C>(&consumer, &$s);
                        }
                        promote(&mut total, &$cur, pick($f));
                        break;
                    }
                    // SAFETY: as above.
                    $s_next = unsafe {
                        let (st, parity) = place.next(t.stages);
                        consumer.wait_at(st, parity)
                    };
                    $f_next = scales(kt + 1);
                    let (a_next, b_next) = descriptors(&$s_next);
                    // SAFETY: as above; `$cur` holds the older group, retired by `wait_group 1`.
                    unsafe {
                        $next = B::mma_async($next, a_next, b_next, false);
                        $cur = wgmma::wait_accumulators::<1, _>($cur);
                        release::<C>(&consumer, &$s);
                    }
                    promote(&mut total, &$cur, pick($f));
                    kt += 1;
                };
            }
            loop {
                half_step!(part, s0, f0 => other, s1, f1);
                half_step!(other, s1, f1 => part, s0, f0);
            }
        }
        if M::PROMOTED && !M::OVERLAP {
            // One array of products, in the order that keeps the tensor core's idle gap short:
            // while step `kt`'s products run, wait for step `kt + 1`'s stage and make its
            // descriptors (and load its block scales); then retire step `kt` (`wait_group 0`),
            // release its stage, promote it, and issue step `kt + 1` at once into the same
            // array. What lies between a step's retirement and the next step's issue is the
            // promotion alone; the other consumer's products fill the tensor core meanwhile.
            total = <S::Acc as Accumulators>::zeroed();
            // SAFETY (every wait, product, retirement and release below): the whole warpgroup
            // is here; a stage's copies have landed (its wait) and nothing writes it before
            // this warp releases it, after the wait that retires its products; each stage
            // released once.
            let mut stage = unsafe {
                let (st, parity) = place.next(t.stages);
                consumer.wait_at(st, parity)
            };
            let mut f = scales(0);
            let (a0, b0) = descriptors(&stage);
            // SAFETY: as above.
            part = unsafe { B::mma_async(part, a0, b0, false) };
            for kt in 1..k_tiles {
                // SAFETY: as above.
                let s1 = unsafe {
                    let (st, parity) = place.next(t.stages);
                    consumer.wait_at(st, parity)
                };
                let (a1, b1) = descriptors(&s1);
                let f1 = scales(kt);
                // SAFETY: as above; `part` is promoted (read) before the next products
                // overwrite it.
                unsafe {
                    part = wgmma::wait_accumulators::<0, _>(part);
                    release::<C>(&consumer, &stage);
                }
                promote(&mut total, &part, pick(f));
                // SAFETY: as above.
                part = unsafe { B::mma_async(part, a1, b1, false) };
                stage = s1;
                f = f1;
            }
            // SAFETY: as above, for the last step.
            unsafe {
                part = wgmma::wait_accumulators::<0, _>(part);
                release::<C>(&consumer, &stage);
            }
            promote(&mut total, &part, pick(f));
        }
        let mut used = None;
        // The steps of the fast schedule (one array of products, accumulated in place).
        let single_steps = if M::PROMOTED { 0 } else { k_tiles };
        for kt in 0..single_steps {
            // SAFETY: every thread of the consumer warps, each stage released once below.
            let stage = unsafe {
                let (st, parity) = place.next(t.stages);
                consumer.wait_at(st, parity)
            };
            let a_desc = step_descriptors(stage.address(0), cr * CONSUMER_ROWS);
            let b_desc = step_descriptors(stage.address(a_bytes), cn * cc);
            // SAFETY: the whole warpgroup is here; the stage's copies have landed; the
            // previous step's products are done after this wait (at most this step's group in
            // flight), so its stage is released while this one's run.
            unsafe {
                part = B::mma_async(part, a_desc, b_desc, kt > 0);
                part = wgmma::wait_accumulators::<1, _>(part);
            }
            if let Some(done) = used.replace(stage) {
                // SAFETY: the whole warp, once for the stage it waited for one step ago.
                unsafe { release::<C>(&consumer, &done) };
            }
        }
        if !M::PROMOTED {
            // SAFETY: the whole warpgroup is here, the last step's products in flight.
            part = unsafe { wgmma::wait_accumulators::<0, _>(part) };
            if let Some(done) = used {
                // SAFETY: as above, for the last step's stage.
                unsafe { release::<C>(&consumer, &done) };
            }
        }
        let summed = if M::PROMOTED { &mut total } else { &mut part };
        if !M::BLOCK_SCALES {
            // Tensor or row scales, applied once the sums are done (no product is in flight):
            // the row's scale of `A` times the column's of `B^T` (rows clamped inside `A`:
            // those past `m` are never stored).
            let (sa0, sa1, sb0) = epilogue_scales;
            if b_step == 0 {
                let (s0, s1) = (sa0 * sb0, sa1 * sb0);
                scale_in_place(summed, |i| if (i / 2) % 2 == 0 { s0 } else { s1 });
            } else {
                // One scale per column (`b_step` 1): first the rows' scales, then (with those
                // registers free again) the columns'. This thread's columns are `col0 + 2 q`
                // plus the constant `8 (i / 4) + i % 2` of each accumulator, so every load is
                // at a constant offset from one pointer; past `n` (the last column tile) the
                // address is column 0's instead (a select, not a branch around the load: a
                // branch per load costs the accumulators their registers).
                scale_in_place(summed, |i| if (i / 2) % 2 == 0 { sa0 } else { sa1 });
                let first = col0 + 2 * (lane % 4);
                let base = b_scales.wrapping_add(first);
                scale_in_place(summed, |i| {
                    let offset = 8 * (i / 4) + i % 2;
                    let p = if first + offset < n {
                        base.wrapping_add(offset)
                    } else {
                        b_scales
                    };
                    // SAFETY: `p` is column `first + offset < n`, or column 0.
                    unsafe { mem::load(p, 0) }
                });
            }
        }
        if E::STAGED {
            // SAFETY: the staging tile is this consumer's (inside the launch's shared memory,
            // 1024-byte aligned past the ring); the whole warpgroup is here; `maps` holds `C`'s
            // map third (the contract).
            unsafe {
                stage_and_store(
                    &*summed,
                    &ring,
                    consumer_index,
                    lane,
                    maps,
                    c,
                    (m, n),
                    (row0, col0),
                )
            };
        } else {
            // SAFETY: the contract's shapes and alignment; every lane of the warpgroup.
            unsafe { tile::store_rows(&*summed, lane, c, (row0, col0), (m, n), |_, _, v| v) };
        }
        unit += step;
    }
    if E::STAGED && lane == 0 {
        // The last tile's stores: done before the block's shared memory goes.
        bulk::wait_group::<0>();
    }
}

/// The staged epilogue of consumer `consumer` (thread `lane` of its warpgroup): waits until the
/// staging tile's last stores have read it (its first thread's `wait_group_read`, then the
/// warpgroup's named barrier), stages `acc` into it, fences, meets the warpgroup again, and its
/// first thread stores the two boxes to `C` at (`row0`, `col0`) and commits them.
///
/// # Safety
/// Every lane of the warpgroup, with the same arguments but `lane`; `acc` retired; the launch's
/// shared memory holds the two consumers' staging tiles past the ring's tail; `maps` holds `C`'s
/// map (`m x n` `O`, box `64 x 64`) third.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn stage_and_store<O: Output, A: Accumulators>(
    acc: &A,
    ring: &Ring,
    consumer: usize,
    lane: usize,
    maps: *const u64,
    c: *mut O,
    (m, n): (usize, usize),
    (row0, col0): (usize, usize),
) {
    let id = 1 + consumer as u32;
    let staging = ring.tail().0.wrapping_add(consumer * FP8_STAGING_BYTES);
    let box_cols = tma::SWIZZLE_128B / core::mem::size_of::<O>();
    // SAFETY: the caller's contract: the barrier counts this warpgroup's 128 threads, whole
    // warps; the staging tile is free once its first thread's stores have read it.
    unsafe {
        if lane == 0 {
            bulk::wait_group_read::<0>();
        }
        barrier::sync(id, WARPGROUP as u32);
        tile::stage_boxes::<O, _>(acc, lane, staging, |_, _, v| v);
        bulk::fence_shared();
        barrier::sync(id, WARPGROUP as u32);
        if lane == 0 {
            let out = Tensor2d {
                map: maps.wrapping_add(2 * MAP_WORDS),
                data: c.cast_const(),
                rows: m,
                cols: n,
                stride: n,
                box_rows: CONSUMER_ROWS,
                box_cols,
            };
            for b in 0..FP8_STAGING_BYTES / tile::STAGED_BOX_BYTES {
                let src = staging.wrapping_add(b * tile::STAGED_BOX_BYTES).cast::<O>();
                tma::store_2d(&out, src, row0 as u32, (col0 + b * box_cols) as u32);
            }
            bulk::commit_group();
        }
    }
}
