//! Grouped (mixture-of-experts) product on Hopper's warpgroup tensor cores (sm_90a only): one
//! launch for `E` products `Y_e = X_e W_e^T` of different row counts `m_e` (the tokens routed to
//! expert `e`) sharing `k` and `n`. `torch._grouped_mm`'s convention:
//! * `X` is one packed `rows x k` bf16 matrix, the experts' rows one after another;
//! * `offsets` holds `E` cumulative **end** rows (u32, on the device: torch's `offs`), expert `e`
//!   owning rows `offsets[e - 1] .. offsets[e]` (from 0 for `e = 0`) of `X` and of `Y`;
//! * `W` is `E x n x k` (each expert's weight as `nn.Linear` stores it, `n x k`; torch's `mat_b`
//!   is its transpose `E x k x n`), dense, read as one `(E n) x k` matrix;
//! * `Y` is `rows x n` bf16, each element rounded once from its f32 sum; rows past the last
//!   expert's end are not written.
//!
//! The offsets stay on the device (the kernel reads them), so the launch has no host read and
//! can be captured in a CUDA graph and replayed with new offsets written into the same buffer.
//!
//! # Schedule
//! The warp-specialised, persistent kernel of [`super::wgmma_ws`] (a producer warpgroup issuing
//! TMA copies into a `pipeline::Ring`, two consumer warpgroups on `wgmma`, `setmaxnreg`), with
//! the tiles of all experts in one linear list:
//! 1. Every block first builds two tables of `E + 1` u32 in shared memory
//!    ([`expert_tables`]): `ends[e]`, the first row of expert `e` (`ends[E]` past the last),
//!    and `first[e]`, the first of expert `e`'s row tiles (`ceil(m_e / BM)` each) in the list:
//!    a prefix sum over the experts, one warp scanning chunks of them.
//! 2. Tile `t` of the list is row tile `g = t / ceil(n / BN)` and column tile `t % ceil(n / BN)`;
//!    its expert is the last `e` with `first[e] <= g` (a binary search, [`locate`]); block `b` of
//!    `G` takes tiles `b, b + G, ...`, the producer and the consumers walking the same list.
//! 3. The split tail ([`tail_halves`]): when the `r = tiles % G` tiles of the last, partial
//!    round fit one round as column halves (`2 r <= G`), the list ends with their `2 r` halves
//!    (`BM x BN / 2` each) instead, so that the last round takes half a tile's time. Every block
//!    computes the split from the list it built, so no host read is needed. Only the 128 x 256
//!    tile splits ([`GroupedShape::SPLITS`]).
//! 4. The producer copies boxes of `X` (`BM x 64` at the tile's first row) and of `W` (at row
//!    `e n + col0` of the `(E n) x k` view; [`w_box_rows`]: where the tail splits, `BN / 2 x 64`,
//!    two per step of a whole tile and one of a half, else `BN x 64`), both K-major; the consumers multiply them with `B` K-major (`wgmma` imm-trans-b 0:
//!    [`crate::gpu::wgmma::mma_bf16_kmajor_m64n256k64_async`], `m64n128k64` for a half tile).
//! 5. The epilogue stores only rows below the expert's end ([`crate::gpu::tile::store_rows`]'s
//!    masked store, `m` = the expert's end row).
//!
//! # Edges
//! * An expert's last row tile: the box of `X` reads rows of the next expert (or zeros past
//!   `rows`); the product rows they give are dropped by the masked store, so no expert writes
//!   another's rows.
//! * `n` ragged against `BN`: the boxes of `W` read rows of the next expert's weight (zeros past
//!   `E n`); they give columns `>= n`, which are not stored. A half tile of the split tail whose
//!   columns all lie past `n` is skipped by the producer and the consumers alike. (A 3-D tensor map `k x n x E` would
//!   read zeros there instead; the stored elements are the same, and one 2-D map keeps the
//!   copy to `tma::load_2d`, which the simulator models, and the box to one coordinate pair.)
//! * `k` ragged against 64: both maps end at `k` and fill zeros beyond, so the tail adds nothing.
//! * Offsets that are not monotone, or past `rows`: each is clamped to `rows`, and an end below
//!   the one before counts as the one before (`ends[e + 1] = max(ends[e], min(offsets[e],
//!   rows))`). So the experts' rows never overlap and never leave `X` and `Y`, whatever the
//!   buffer holds; an expert whose end goes backwards gets no rows. (The host's
//!   `matmul_grouped_with_offsets` refuses such offsets before uploading them.)
//!
//! # Traffic and work
//! Per tile step along `k`: `(BM + BN) 128` bytes by TMA, `2 BM BN 64` flops, as
//! [`super::wgmma_ws`]; a half tile's step `(BM + BN / 2) 128` bytes for half the flops. Minimum traffic of a launch: `2 (rows k + E n k + rows n)` bytes (every
//! expert's weight once, however few its rows), for `2 sum(m_e) n k` flops.

use super::wgmma::MAP_WORDS;
use super::wgmma_ws::{
    tail_halves, tail_item, tile_product, StepProduct, Ws128x128, Ws128x256, WsShape, WsTiling,
};
use crate::gpu::pipeline::Ring;
use crate::gpu::tma::{self, Tensor2d};
use crate::gpu::{bf16, mem, shared, thread, tile, warp, wgmma};
use crate::kernel;

/// Most experts one launch takes: its two tables of `E + 1` u32 (8 KiB at 1024) sit in shared
/// memory beside the ring, within the 227 KiB a block may have.
pub const GROUPED_MAX_EXPERTS: usize = 1024;

/// Threads of a warpgroup.
const WARPGROUP: usize = 128;
/// Rows of a tile per consumer warpgroup (the `M` of `wgmma.m64nNk16`).
const CONSUMER_ROWS: usize = 64;
/// The step along `k` per stage: one 128-byte row of bf16.
const BK: usize = 64;
/// Registers per thread the producer keeps and the consumers take, as [`super::wgmma_ws`]:
/// `128 x 40 + 256 x 232 <= 65536`.
const PRODUCER_REGISTERS: u32 = 40;
/// See [`PRODUCER_REGISTERS`].
const CONSUMER_REGISTERS: u32 = 232;

/// Dynamic shared memory of every grouped launch of tiling `t`: the ring of `t`
/// ([`WsTiling::shared_bytes`]), then room for the two tables ([`expert_tables`]) of the most
/// experts, `GROUPED_MAX_EXPERTS + 1` u32 each. One size per kernel, whatever the launch's
/// experts (one block per SM either way): a kernel launched with several sizes must be opted in
/// to the largest before any launch, and concurrent launches of one kernel with different sizes
/// raced in the host's opt-in (`CUDA_ERROR_INVALID_VALUE` on the H200 at 3 experts).
pub const fn grouped_shared_bytes(t: WsTiling) -> u32 {
    ((t.shared_bytes() as usize).next_multiple_of(16) + 2 * 4 * (GROUPED_MAX_EXPERTS + 1)) as u32
}

const _: () = assert!(
    grouped_shared_bytes(super::wgmma_ws::WS_128X256) <= 232_448
        && grouped_shared_bytes(super::wgmma_ws::WS_128X128) <= 232_448,
    "the ring and the tables of the most experts fit a block's shared memory"
);

/// A consumer's accumulators that have the bf16 product with `B` K-major
/// ([`wgmma::mma_bf16_kmajor_m64n256k64_async`] and its narrower kin).
pub trait KMajorBf16: wgmma::Accumulators {
    /// Four bf16 steps of 16 along `k`, `B` K-major, left in flight.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_kmajor_m64n256k64_async`].
    unsafe fn mma_kmajor_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
}

/// [`KMajorBf16`] for `[f32; $len]` by `$f`.
macro_rules! kmajor {
    ($len:tt: $f:ident) => {
        impl KMajorBf16 for [f32; $len] {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_kmajor_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$f(self, a, b, accumulate) }
            }
        }
    };
}

kmajor!(128: mma_bf16_kmajor_m64n256k64_async);
kmajor!(64: mma_bf16_kmajor_m64n128k64_async);
kmajor!(56: mma_bf16_kmajor_m64n112k64_async);
kmajor!(32: mma_bf16_kmajor_m64n64k64_async);

/// A tile shape of [`grouped_gemm`](fn@grouped_gemm): a [`WsShape`] whose consumers' accumulators
/// have the K-major product, and those of its half tile (`BM x BN / 2`, the split tail's).
pub trait GroupedShape {
    /// The tiling.
    const TILING: WsTiling;
    /// One consumer thread's accumulators.
    type Acc: KMajorBf16;
    /// One consumer thread's accumulators of a half tile: half the width.
    type HalfAcc: KMajorBf16;
    /// Whether the last, partial round splits into column halves ([`tail_halves`]), `W`'s box
    /// then being half a tile's columns ([`w_box_rows`]).
    const SPLITS: bool;
}

/// Rows of `W`'s box (`x 64` columns of `k`) in the tensor map of shape `S`: half a tile's
/// columns where the tail splits (a whole tile copies two, a half tile one), else a tile's.
pub const fn w_box_rows<S: GroupedShape>() -> usize {
    if S::SPLITS {
        S::TILING.block_cols / 2
    } else {
        S::TILING.block_cols
    }
}

impl GroupedShape for Ws128x256 {
    const TILING: WsTiling = <Ws128x256 as WsShape>::TILING;
    type Acc = <Ws128x256 as WsShape>::Acc;
    type HalfAcc = <Ws128x256 as WsShape>::HalfAcc;
    const SPLITS: bool = true;
}

impl GroupedShape for Ws128x128 {
    const TILING: WsTiling = <Ws128x128 as WsShape>::TILING;
    type Acc = <Ws128x128 as WsShape>::Acc;
    type HalfAcc = <Ws128x128 as WsShape>::HalfAcc;
    /// Not split: with `W` in two boxes of 64 rows a step this tile ran slower on an H100, even
    /// where nothing split (BENCHMARKS.md, thirty-first round).
    const SPLITS: bool = false;
}

/// Fills the two tables of the experts in shared memory: `ends[0] = 0`, `ends[e + 1] =
/// max(ends[e], min(offsets[e], rows))` (expert `e`'s rows are `ends[e] .. ends[e + 1]`), and
/// `first[0] = 0`, `first[e + 1] = first[e] + ceil((ends[e + 1] - ends[e]) / bm)` (where expert
/// `e`'s row tiles start in the list; `first[experts]` is the list's row tiles).
///
/// What one thread does: thread `i` reads `offsets[e]` for `e = i, i + threads, ...` and writes
/// it, clamped to `rows`, to `ends[e + 1]`; after a block barrier, lane `l` of warp 0 takes the
/// `l`-th chunk of `ceil(E / 32)` experts: a running maximum of its ends and a sum of its tile
/// counts, combined over the lanes by two exclusive scans, then written back; a block barrier.
/// Traffic: `4 E` bytes of global memory, `~16 E` of shared.
///
/// # Safety
/// Every thread of the block (1-D, a multiple of 32 threads) calls it, once; `offsets` holds
/// `experts` u32; `ends` and `first` point to `experts + 1` u32 each of this block's shared
/// memory, touched by nothing else. Two block barriers.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn expert_tables(
    offsets: *const u32,
    experts: usize,
    rows: usize,
    bm: usize,
    ends: *mut u32,
    first: *mut u32,
) {
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let mut e = tid;
    while e < experts {
        // SAFETY: `e < experts`: inside `offsets` and the table (the contract).
        unsafe {
            let end = (mem::load(offsets, e) as usize).min(rows);
            mem::store(ends, e + 1, end as u32);
        }
        e += threads;
    }
    if tid == 0 {
        // SAFETY: element 0 of each table.
        unsafe {
            mem::store(ends, 0, 0);
            mem::store(first, 0, 0);
        }
    }
    thread::sync_threads();
    if tid < warp::SIZE as usize {
        let chunk = experts.div_ceil(warp::SIZE as usize);
        let lo = (tid * chunk).min(experts);
        let hi = (lo + chunk).min(experts);
        // The chunk's own maximum end, then the maximum of the chunks before it: the end of
        // the expert before the chunk (0 for the first).
        let mut top = 0u32;
        for i in lo..hi {
            // SAFETY: `i + 1 <= experts`: inside the table; written before the barrier.
            top = top.max(unsafe { mem::load(ends, i + 1) });
        }
        let before = warp::scan_exclusive(top, 0, |a: u32, b: u32| a.max(b));
        // Clamp the chunk's ends to a running maximum, counting its row tiles.
        let (mut prev, mut tiles) = (before, 0u32);
        for i in lo..hi {
            // SAFETY: as above; this lane alone writes `i + 1`.
            unsafe {
                let end = prev.max(mem::load(ends, i + 1));
                mem::store(ends, i + 1, end);
                tiles += (end - prev).div_ceil(bm as u32);
                mem::store(first, i + 1, tiles);
                prev = end;
            }
        }
        let offset = warp::scan_exclusive(tiles, 0, |a: u32, b: u32| a + b);
        for i in lo..hi {
            // SAFETY: as above; the lane's own writes.
            unsafe { mem::store(first, i + 1, mem::load(first, i + 1) + offset) };
        }
    }
    thread::sync_threads();
}

/// Where tile `tile` of the list lies: `(row0, end, expert, col_tile)`, its first row of `X`
/// and `Y`, its expert's end row, its expert and its column tile (of `tiles_n`). A binary search
/// for the last expert `e` with `first[e] <= tile / tiles_n` (empty experts share their
/// `first` with the next and are passed over).
///
/// # Safety
/// `first` and `ends` are the tables of [`expert_tables`] (visible to the caller); `tile` is
/// below `first[experts] * tiles_n`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn locate(
    first: *const u32,
    ends: *const u32,
    experts: usize,
    tiles_n: usize,
    bm: usize,
    tile: usize,
) -> (usize, usize, usize, usize) {
    let (g, col_tile) = (tile / tiles_n, tile % tiles_n);
    let (mut lo, mut hi) = (0usize, experts);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        // SAFETY: `mid < experts`: inside the table.
        if unsafe { mem::load(first, mid) } as usize <= g {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // SAFETY: `lo < experts`: `lo` and `lo + 1` inside the tables.
    let (tile0, start, end) = unsafe {
        (
            mem::load(first, lo) as usize,
            mem::load(ends, lo) as usize,
            mem::load(ends, lo + 1) as usize,
        )
    };
    (start + (g - tile0) * bm, end, lo, col_tile)
}

/// The grouped product (the module documentation). What one thread does: every thread builds
/// the experts' tables ([`expert_tables`]); then the producer warpgroup lowers its registers and
/// its thread 0 walks the block's items of the list (whole tiles, then at most one half tile of
/// the split tail: [`tail_halves`], [`locate`]) and their steps along `k`, refilling each empty
/// stage with a box of `X` (`BM x 64`) and `W`'s `BN` rows ([`w_box_rows`]: two boxes of
/// `BN / 2 x 64` where the tail splits, one for a half tile) by TMA; each consumer thread raises its registers and walks the same steps
/// (`tile_product`), taking part in its warpgroup's four K-major products per stage, lane 0
/// of each warp then marking the stage empty; after an item's last step it stores its
/// accumulators, rounded to bf16, in the rows of `Y` below its expert's end and the columns
/// below `n`. Per stage a block moves `(BM + BN) 128` bytes and does `2 BM BN 64` flops (a half
/// tile `(BM + BN / 2) 128` bytes and half the flops).
///
/// # Safety
/// * `maps` holds two tensor maps of [`MAP_WORDS`] words each, 64-byte aligned: `x` (`rows x
///   k`, box `BM x 64`) and `w` (`(experts n) x k`, box [`w_box_rows`]` x 64`), bf16, 128-byte swizzle, zero
///   fill; `x`, `w`, `y` hold `rows x k`, `experts x n x k` and `rows x n` bf16, dense, 16-byte
///   aligned, `y` overlapping neither; `offsets` holds `experts` u32 (any values: see the module
///   documentation); `1 <= experts <= GROUPED_MAX_EXPERTS`, `k >= 1`, `n >= 1`.
/// * The launch: 384 threads, a grid of `(G, 1)` blocks (any `G >= 1`; more than the list's
///   tiles leaves blocks idle), [`grouped_shared_bytes`]`(S::TILING)` of dynamic shared
///   memory; a compute capability 9.0 GPU.
///
/// Instances, one PTX entry each (in the sm_90a module), launch bounds `(384, 1)`:
/// `matmul_grouped_bf16_128x256` (tiles of 128 x 256: per step of 64 along `k` 48 KiB by TMA
/// and 4,194,304 flops) and `matmul_grouped_bf16_128x128` (128 x 128: 32 KiB and 2,097,152
/// flops, for products with too few wide tiles to fill the GPU).
// Barriers: three, the ring's initialisation and the two of the tables; the ring runs on
// mbarriers only.
#[kernel(
    launch_bounds(384, 1),
    instances(
        matmul_grouped_bf16_128x256 = Ws128x256,
        matmul_grouped_bf16_128x128 = Ws128x128,
    ),
    barriers(3)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn grouped_gemm<S: GroupedShape>(
    maps: *const u64,
    x: *const bf16,
    w: *const bf16,
    y: *mut bf16,
    offsets: *const u32,
    experts: usize,
    rows: usize,
    n: usize,
    k: usize,
) {
    let t = S::TILING;
    const {
        assert!(
            S::TILING.is_valid() && S::TILING.threads() == 384,
            "a valid tiling of the entries' 384 threads"
        );
        assert!(
            S::TILING.row_groups() == S::TILING.consumers,
            "every consumer along the rows: each owns whole columns of B's box"
        );
        assert!(
            <S::Acc as wgmma::Accumulators>::N == S::TILING.consumer_cols(),
            "the accumulators' wgmma width is the consumer's columns"
        );
        assert!(WsTiling::block_k(2) == BK, "one 128-byte row of bf16 per stage");
    };
    let (bm, bn, stages) = (t.block_rows, t.block_cols, t.stages);
    let (a_bytes, stage_bytes) = (t.a_bytes(), t.stage_bytes());
    let tid = thread::thread_idx_x() as usize;
    let group = tid / WARPGROUP;

    // SAFETY: every thread, first; the launch's shared memory starts with the ring's
    // (`t.shared_bytes()`); stages of whole 1024-byte atoms.
    let ring = unsafe { Ring::new(stages, stage_bytes, (t.consumers * WARPGROUP / 32) as u32) };
    let ends = shared::dynamic_after::<u32>(t.shared_bytes() as usize);
    let first = ends.wrapping_add(experts + 1);
    // SAFETY: every thread; the tables lie past the ring, inside `grouped_shared_bytes`.
    unsafe { expert_tables(offsets, experts, rows, bm, ends, first) };
    // SAFETY: element `experts` of the table just built.
    let row_tiles = unsafe { mem::load(first, experts) } as usize;
    let tiles_n = n.div_ceil(bn);
    let tiles = row_tiles * tiles_n;
    let (start, step) = (thread::block_idx_x() as usize, thread::grid_dim_x() as usize);
    // The last round's tiles in column halves ([`tail_halves`]): items `0 .. whole` are whole
    // tiles, `whole + h` (`h < 2 halves`) is half `h % 2` of tile `whole + h / 2`. `whole` is a
    // multiple of the grid, so every block reaches its half item (at most one) last.
    let halves = if S::SPLITS { tail_halves(tiles, step) } else { 0 };
    let (whole, items) = (tiles - halves, tiles + halves);
    // Half a tile's columns: where the tail splits, the rows of `W`'s box (a whole tile loads
    // two, a half tile one).
    let half_cols = bn / 2;
    let half_bytes = half_cols * (BK * 2);
    let k_tiles = k.div_ceil(BK);

    if group == 0 {
        wgmma::setmaxnreg_dec::<PRODUCER_REGISTERS>();
        if tid != 0 {
            return;
        }
        let tx = Tensor2d {
            map: maps,
            data: x,
            rows,
            cols: k,
            stride: k,
            box_rows: bm,
            box_cols: BK,
        };
        let tw = Tensor2d {
            map: maps.wrapping_add(MAP_WORDS),
            data: w,
            rows: experts * n,
            cols: k,
            stride: k,
            box_rows: w_box_rows::<S>(),
            box_cols: BK,
        };
        tma::prefetch_map(tx.map);
        tma::prefetch_map(tw.map);
        let mut producer = ring.producer();
        let mut item = start;
        while item < items {
            // SAFETY: the tables are built; the tile is below `tiles`.
            let (tile, half) = tail_item(item, whole);
            let (row0, _, expert, col_tile) = unsafe { locate(first, ends, experts, tiles_n, bm, tile) };
            let col0 = col_tile * bn + half.unwrap_or(0) * half_cols;
            // A half past `n` (the last column tile's second half) has nothing to compute.
            if col0 < n {
                let w_row = expert * n + col0;
                for kt in 0..k_tiles {
                    // SAFETY: the one producer thread; the stage is free and expects exactly the
                    // bytes copied into it: the box of `X` at 0 (`BM 128` bytes), then one box of
                    // `W` (`BN / 2` rows, `half_bytes`) at `a_bytes` for a half tile, two for a
                    // whole one where the tail splits, else one of `BN` rows (`stage_bytes`),
                    // each 1024-byte aligned; the maps are the kernel's.
                    unsafe {
                        if half.is_some() {
                            let stage = producer.acquire_bytes(a_bytes + half_bytes);
                            stage.load(0, &tx, row0, kt * BK);
                            stage.load(a_bytes, &tw, w_row, kt * BK);
                        } else {
                            let stage = producer.acquire();
                            stage.load(0, &tx, row0, kt * BK);
                            stage.load(a_bytes, &tw, w_row, kt * BK);
                            if S::SPLITS {
                                stage.load(a_bytes + half_bytes, &tw, w_row + half_cols, kt * BK);
                            }
                        }
                    }
                }
            }
            item += step;
        }
        return;
    }

    wgmma::setmaxnreg_inc::<CONSUMER_REGISTERS>();
    // This consumer's 64 rows of the tile, over all its columns.
    let consumer = group - 1;
    let mut acc = <S::Acc as wgmma::Accumulators>::zeroed();
    let mut ring_consumer = ring.consumer();
    let mut item = start;
    while item < whole {
        // SAFETY: the tables are built; `item < whole <= tiles`.
        let (row0, end, _, col_tile) = unsafe { locate(first, ends, experts, tiles_n, bm, item) };
        // SAFETY: every thread of the consumer warpgroup; the producer fills these `k_tiles`
        // stages with whole tiles.
        acc = unsafe { tile_product(acc, &mut ring_consumer, (consumer, KMajorStep), a_bytes, k_tiles) };
        // SAFETY: `y` holds `rows x n` (the contract) and `end <= rows`: only rows of this
        // expert below `end` and columns below `n` are stored.
        unsafe {
            tile::store_rows(
                &acc,
                tid % WARPGROUP,
                y,
                (row0 + consumer * CONSUMER_ROWS, col_tile * bn),
                (end, n),
                |_, _, v| v,
            )
        };
        item += step;
    }
    // The split tail: at most one half tile per block, with accumulators of half the width
    // (live only here, so the registers are the whole tile's). (`S::SPLITS` is a constant:
    // instances that never split have no such loop.)
    while S::SPLITS && item < items {
        let (tile, half) = tail_item(item, whole);
        // SAFETY: the tables are built; the tile is below `tiles`.
        let (row0, end, _, col_tile) = unsafe { locate(first, ends, experts, tiles_n, bm, tile) };
        let col0 = col_tile * bn + half.unwrap_or(0) * half_cols;
        if col0 < n {
            let half_acc = <S::HalfAcc as wgmma::Accumulators>::zeroed();
            // SAFETY: as above; the producer fills these stages with half tiles (`W`'s one box
            // at `a_bytes`, read by the half-width products).
            let half_acc = unsafe {
                tile_product(
                    half_acc,
                    &mut ring_consumer,
                    (consumer, KMajorStep),
                    a_bytes,
                    k_tiles,
                )
            };
            // SAFETY: as the whole tiles' store.
            unsafe {
                tile::store_rows(
                    &half_acc,
                    tid % WARPGROUP,
                    y,
                    (row0 + consumer * CONSUMER_ROWS, col0),
                    (end, n),
                    |_, _, v| v,
                )
            };
        }
        item += step;
    }
}

/// [`StepProduct`] of [`grouped_gemm`](fn@grouped_gemm): bf16, `W`'s box K-major (read as `B^T`) from its first row.
#[derive(Clone, Copy)]
struct KMajorStep;

impl<A: KMajorBf16> StepProduct<A> for KMajorStep {
    #[inline(always)]
    fn b_descriptors(self, b: u32) -> [u64; 4] {
        tile::k_major_descriptors(b, 0)
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma_async(self, acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A {
        // SAFETY: forwarded contract.
        unsafe { acc.mma_kmajor_async(a, b, accumulate) }
    }
}
