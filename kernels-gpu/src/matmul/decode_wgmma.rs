//! Decode products on Hopper's warpgroup tensor cores (sm_90a only): `Y = X W^T` with `m <= 64`
//! rows of `X` against a large bf16 weight `W` stored `n x k`, the weight streamed once through
//! shared memory by the copy engine. The rung after [`super::decode`]'s `mma.sync` kernels, whose
//! loads go straight to registers: here a ring of stages of up to 200 KiB keeps the weight's
//! bytes in flight per SM without registers, and the rows of `X` are read once per block and
//! step, then reused by every row of the block's weight tile from shared memory.
//!
//! # Schedule
//! [`super::wgmma_ws`]'s block (a producer warpgroup whose thread 0 issues TMA copies into a
//! `pipeline::Ring`, two consumer warpgroups on `wgmma`), not persistent: block `(bx, s)` owns
//! the `BN` rows `bx BN ..` of `W` (columns of `Y`) over slice `s` of `k` (`k_split` elements,
//! a multiple of 64).
//! * Per stage the producer copies one box of `X` (`64 x 64` at row 0: the rows past `m` are the
//!   copy engine's zero fill) and one of `W` (`BN x 64`), both K-major.
//! * Consumer `c` multiplies the whole box of `X` (`A`, the `M = 64` of `wgmma.m64nNk16`) by its
//!   `N = BN / 2` rows of the box of `W` (`B` K-major, imm-trans-b 0:
//!   [`wgmma::mma_bf16_kmajor_m64n128k64_async`] and its narrower twin), so its accumulators are
//!   `Y(0..64, bx BN + c N ..+ N)` over the slice.
//! * The epilogue stores the rows below `m` and the columns below `n` into plane `s` of `out`
//!   (`out[s m n + i n + j]`): `Y` itself with one slice, else f32 partial products that
//!   `matmul_decode_sum_bf16` (or `matmul_sum_splits`) adds in slice order (deterministic).
//!
//! The tensor cores compute all 64 rows of the box of `X` whatever `m` is: `2 64 BN 64` flops per
//! stage for `BN 128` bytes of weight, 64 flops per byte. At 3.9 TB/s that is 250 TFLOP/s, about a
//! quarter of the H200's dense bf16 rate, so the rows past `m` cost time only if the copies
//! outrun the tensor cores (unmeasured).
//!
//! # Traffic
//! Per stage a block moves `(64 + BN) 128` bytes by TMA: the weight's `BN 128` bytes from DRAM
//! once, and `8 KiB` of `X` from L2 (`X` is `2 m k` bytes, read `ceil(n / BN)` times over the
//! grid). Minimum traffic of the product: `2 (m k + n k + m n)` bytes.
//!
//! # Edges
//! `k` ragged against 64 and `n` against `BN`: the maps end at `k` and `n` and fill zeros. `k`
//! must be a multiple of 8 and the matrices 16-byte aligned (the copy engine's rows); the host
//! checks.

use super::grouped::KMajorBf16;
use super::wgmma::MAP_WORDS;
use super::wgmma_ws::{WsTiling, WS_64X128};
use crate::gpu::pipeline::{Consumer, Ring};
use crate::gpu::tile::{self, Output};
use crate::gpu::tma::{self, Tensor2d};
use crate::gpu::{bf16, thread, wgmma};
use crate::kernel;

/// Threads of a warpgroup.
const WARPGROUP: usize = 128;
/// The step along `k` per stage: one 128-byte row of bf16.
pub const DECODE_WGMMA_BK: usize = 64;
/// The rows of `X` a block's products cover: the `M` of `wgmma.m64nNk16`, so `m <= 64`.
pub const DECODE_WGMMA_ROWS: usize = 64;

/// 64 x 256 per tile (256 rows of `W`), five stages of 40 KiB, two consumers of 64 x 128 side
/// by side (205,904 bytes of shared memory).
pub const DECODE_64X256: WsTiling = WsTiling {
    block_rows: 64,
    block_cols: 256,
    stages: 5,
    consumers: 2,
};

/// 64 x 224 per tile (224 rows of `W`), six stages of 36 KiB, two consumers of 64 x 112 side
/// by side (222,304 bytes of shared memory): 128 blocks for a weight of 28672 rows, where 256 rows
/// give 112, so that nearly every SM of an H200 (132) streams its share.
pub const DECODE_64X224: WsTiling = WsTiling {
    block_rows: 64,
    block_cols: 224,
    stages: 6,
    consumers: 2,
};

/// 64 x 128 per tile (128 rows of `W`), eight stages of 24 KiB, two consumers of 64 x 64
/// ([`WS_64X128`]: 197,760 bytes).
pub const DECODE_64X128: WsTiling = WS_64X128;

const _: () = assert!(
    DECODE_64X256.is_valid_k_major() && DECODE_64X224.is_valid_k_major() && DECODE_64X128.is_valid_k_major(),
    "the decode tilings tile their block with 64 x N consumers and fit shared memory"
);
const _: () = assert!(DECODE_64X256.shared_bytes() == 205_904);

/// A tile shape of [`decode_wgmma`](fn@decode_wgmma): the tiling, and one consumer thread's
/// accumulators (`[f32; N / 2]`, `N` = [`WsTiling::consumer_cols`]).
pub trait DecodeShape {
    /// The tiling.
    const TILING: WsTiling;
    /// One consumer thread's accumulators.
    type Acc: KMajorBf16;
    /// What every kernel on the shape needs of it, checked at compile time where a kernel names
    /// it (`let () = S::CHECKED;`): a valid K-major tiling of 384 threads, one box of 64 rows of
    /// `X` shared by the consumers side by side, accumulators as wide as a consumer's columns,
    /// one 128-byte row of bf16 per stage.
    const CHECKED: () = {
        assert!(
            Self::TILING.is_valid_k_major() && Self::TILING.threads() == 384,
            "a valid tiling of the entries' 384 threads"
        );
        assert!(
            Self::TILING.block_rows == DECODE_WGMMA_ROWS && Self::TILING.row_groups() == 1,
            "one box of 64 rows of X, shared by the consumers side by side"
        );
        assert!(
            <Self::Acc as wgmma::Accumulators>::N == Self::TILING.consumer_cols(),
            "the accumulators' wgmma width is the consumer's columns"
        );
        assert!(
            WsTiling::block_k(2) == DECODE_WGMMA_BK,
            "one 128-byte row of bf16 per stage"
        );
    };
}

/// [`DECODE_64X256`]: `wgmma.m64n128k16`, 64 accumulators per consumer thread.
#[derive(Clone, Copy, Debug)]
pub struct Decode64x256;
impl DecodeShape for Decode64x256 {
    const TILING: WsTiling = DECODE_64X256;
    type Acc = [f32; 64];
}

/// [`DECODE_64X224`]: `wgmma.m64n112k16`, 56 accumulators per consumer thread.
#[derive(Clone, Copy, Debug)]
pub struct Decode64x224;
impl DecodeShape for Decode64x224 {
    const TILING: WsTiling = DECODE_64X224;
    type Acc = [f32; 56];
}

/// [`DECODE_64X128`]: `wgmma.m64n64k16`, 32 accumulators per consumer thread.
#[derive(Clone, Copy, Debug)]
pub struct Decode64x128;
impl DecodeShape for Decode64x128 {
    const TILING: WsTiling = DECODE_64X128;
    type Acc = [f32; 32];
}

/// The decode product on `wgmma` (the module documentation). What one thread does: every
/// thread lays out the ring; thread 0 of the producer warpgroup walks the block's steps of 64
/// along its slice of `k`, waiting for each stage to be empty and refilling it with a box of `X`
/// (`64 x 64`) and one of `W` (`BN x 64`) by TMA (the producer's other threads return); each
/// consumer thread walks the same steps, taking part in its warpgroup's four K-major products
/// per stage (`64 x 64` of `X` by `N` rows of `W`), lane 0 of each warp then marking the stage
/// empty; after the last step it stores its `N / 2` accumulators inside `m` and `n` into plane
/// `blockIdx.y` of `out` as `O`. Per stage a block moves `(64 + BN) 128` bytes and does
/// `2 64 BN 64` flops.
///
/// # Safety
/// * `maps` holds two tensor maps of [`MAP_WORDS`] words each, 64-byte aligned: `x` (`m x k`,
///   box `64 x 64`) and `w` (`n x k`, box `BN x 64`), bf16, 128-byte swizzle, zero fill; `x`, `w`
///   hold `m x k` and `n x k` bf16, dense, 16-byte aligned; `out` holds `slices m n` elements
///   (`slices = ceil(k / k_split)`), overlapping neither; `1 <= m <= 64`, `n >= 1`, `k >= 1`,
///   `k_split` a positive multiple of [`DECODE_WGMMA_BK`].
/// * The launch: 384 threads, a grid of `(ceil(n / BN), slices)`, `S::TILING.shared_bytes()` of
///   dynamic shared memory; a compute capability 9.0 GPU.
///
/// Instances, one PTX entry each (in the sm_90a module), launch bounds `(384, 1)`:
/// `matmul_decode_wgmma_bf16_64x256` and `_f32_64x256` (256 rows of `W` per block: per step
/// 40 KiB by TMA, 2,097,152 flops), `matmul_decode_wgmma_bf16_64x224` and `_f32_64x224` (224
/// rows: 36 KiB, 1,835,008 flops; 128 blocks for 28672 rows), `matmul_decode_wgmma_bf16_64x128`
/// and `_f32_64x128` (128 rows: 24 KiB, 1,048,576 flops; twice the blocks, for weights of few
/// rows). The `f32` instances write the sums unrounded (an f32 result, or the partial planes of
/// a split `k`).
// Launch bounds: 384 threads, one block per SM (the ring takes most of the shared memory).
// Barriers: one, the ring's initialisation; the ring runs on mbarriers only.
#[kernel(
    launch_bounds(384, 1),
    instances(
        matmul_decode_wgmma_bf16_64x256 = (bf16, Decode64x256),
        matmul_decode_wgmma_f32_64x256 = (f32, Decode64x256),
        matmul_decode_wgmma_bf16_64x224 = (bf16, Decode64x224),
        matmul_decode_wgmma_f32_64x224 = (f32, Decode64x224),
        matmul_decode_wgmma_bf16_64x128 = (bf16, Decode64x128),
        matmul_decode_wgmma_f32_64x128 = (f32, Decode64x128),
    ),
    barriers(1)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn decode_wgmma<O: Output, S: DecodeShape>(
    maps: *const u64,
    x: *const bf16,
    w: *const bf16,
    out: *mut O,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    let t = S::TILING;
    let () = S::CHECKED;
    let (bn, stages) = (t.block_cols, t.stages);
    let (a_bytes, stage_bytes) = (t.a_bytes(), t.stage_bytes());
    let cols = t.consumer_cols();
    let tid = thread::thread_idx_x() as usize;
    let group = tid / WARPGROUP;
    let col0 = thread::block_idx_x() as usize * bn;
    let slice = thread::block_idx_y() as usize;
    // This block's steps of 64 along `k`: those of its slice (at least one: the host launches
    // `ceil(k / k_split)` slices).
    let steps = k_split / DECODE_WGMMA_BK;
    let kt0 = slice * steps;
    let kt1 = (kt0 + steps).min(k.div_ceil(DECODE_WGMMA_BK));

    // SAFETY: every thread, first; the launch's shared memory is the ring's
    // (`t.shared_bytes()`); stages of whole 1024-byte atoms (`(64 + BN) 128`).
    let ring = unsafe { Ring::new(stages, stage_bytes, (t.consumers * WARPGROUP / 32) as u32) };

    if group == 0 {
        if tid != 0 {
            return;
        }
        let (tx, tw) = decode_tensors(maps, x, w, (m, n, k), bn);
        let mut producer = ring.producer();
        for kt in kt0..kt1 {
            // SAFETY: the one producer thread; the stage is free and expects `stage_bytes` =
            // `64 128` (the box of `X` at 0) + `BN 128` (that of `W` at `a_bytes`), both
            // 1024-byte aligned; the maps are the kernel's.
            unsafe {
                let stage = producer.acquire();
                stage.load(0, &tx, 0, kt * DECODE_WGMMA_BK);
                stage.load(a_bytes, &tw, col0, kt * DECODE_WGMMA_BK);
            }
        }
        return;
    }

    // An empty slice (which the host never launches) stores nothing.
    if kt0 >= kt1 {
        return;
    }
    // This consumer's `N` columns of the tile: rows `c N ..` of the box of `W`.
    let consumer = group - 1;
    let mut ring_consumer = ring.consumer();
    // SAFETY: every thread of the consumer warpgroups, the producer filling the same steps;
    // `kt0 < kt1`.
    let acc = unsafe { consume_steps::<S>(&mut ring_consumer, (kt0, kt1), a_bytes, consumer * cols) };
    // SAFETY: plane `slice` of `out` holds `m x n` (the contract); only rows below `m` and
    // columns below `n` are stored.
    unsafe {
        tile::store_rows(
            &acc,
            tid % WARPGROUP,
            out.wrapping_add(slice * m * n),
            (0, col0 + consumer * cols),
            (m, n),
            |_, _, v| v,
        )
    };
}

/// The tensors of `X` (`m x k`, boxes of `64 x 64` rows and columns) and `W` (`n x k`, boxes of
/// `bn x 64`) whose maps are at `maps` (`X`'s, then `W`'s [`MAP_WORDS`] on), both maps
/// prefetched: what the producer of [`decode_wgmma`](fn@decode_wgmma) and of
/// [`super::decode_stream_k`] copies from.
#[inline(always)]
pub(super) fn decode_tensors(
    maps: *const u64,
    x: *const bf16,
    w: *const bf16,
    (m, n, k): (usize, usize, usize),
    bn: usize,
) -> (Tensor2d<bf16>, Tensor2d<bf16>) {
    let tx = Tensor2d {
        map: maps,
        data: x,
        rows: m,
        cols: k,
        stride: k,
        box_rows: DECODE_WGMMA_ROWS,
        box_cols: DECODE_WGMMA_BK,
    };
    let tw = Tensor2d {
        map: maps.wrapping_add(MAP_WORDS),
        data: w,
        rows: n,
        cols: k,
        stride: k,
        box_rows: bn,
        box_cols: DECODE_WGMMA_BK,
    };
    tma::prefetch_map(tx.map);
    tma::prefetch_map(tw.map);
    (tx, tw)
}

/// One consumer thread's products over steps `first..end` of one tile: per step it waits for
/// the ring's stage, takes part in its warpgroup's four K-major products (the box of `X`, `64 x
/// 64`, by rows `b_row ..` of the box of `W` at `a_bytes` in the stage), and releases the
/// previous step's stage; after the last step it waits for its products and releases that
/// stage. Returns the retired accumulators: the tile's sums over the steps. Shared memory only:
/// `(64 + BN) 128` bytes read per step by the tensor cores.
///
/// The loop is written with its test at the bottom: it runs at least once, so no path takes the
/// zeroed accumulators to a wait without a product in between (ptxas would serialise the
/// `wgmma`s, C7515).
///
/// # Safety
/// Every thread of the consumer warpgroups calls it with the same steps, the producer filling
/// one stage per step in the same order; `first < end`.
#[inline(always)]
pub(super) unsafe fn consume_steps<S: DecodeShape>(
    ring_consumer: &mut Consumer,
    (first, end): (usize, usize),
    a_bytes: usize,
    b_row: usize,
) -> S::Acc {
    let mut acc = <S::Acc as wgmma::Accumulators>::zeroed();
    let mut used = None;
    let mut kt = first;
    loop {
        // SAFETY: every thread of the consumer warps, each stage released once below.
        let stage = unsafe { ring_consumer.wait() };
        let a_desc = tile::k_major_descriptors(stage.address(0), 0);
        let b_desc = tile::k_major_descriptors(stage.address(a_bytes), b_row);
        // SAFETY: the whole warpgroup is here; the stage's copies have landed and nothing writes
        // it before this warp's release, after the wait that retires these products; then the
        // previous step's products are done and its stage released.
        unsafe {
            acc = acc.mma_kmajor_async(a_desc, b_desc, kt > first);
            acc = wgmma::wait_accumulators::<1, _>(acc);
        }
        if let Some(done) = used.replace(stage) {
            // SAFETY: the whole warp, once for the stage it waited for one step ago.
            unsafe { ring_consumer.release(&done) };
        }
        kt += 1;
        if kt >= end {
            break;
        }
    }
    // SAFETY: the whole warpgroup is here, the last step's products in flight.
    acc = unsafe { wgmma::wait_accumulators::<0, _>(acc) };
    if let Some(done) = used {
        // SAFETY: as above, for the last step's stage.
        unsafe { ring_consumer.release(&done) };
    }
    acc
}
