//! Decode products on `wgmma` with a stream-K grid (sm_90a only): [`super::decode_wgmma`]'s
//! block (a TMA producer, two `wgmma` consumers, the same tiles of 256, 224 or 128 rows of `W`)
//! on a persistent grid of one block per SM, each block taking an equal share of the product's
//! steps, so that every SM streams the weight to the end where a grid of one block per tile
//! leaves some idle (28672 rows in tiles of 224 are 128 blocks for the H200's 132 SMs).
//!
//! # Schedule ([`DecodeStreamK`])
//! The steps of 64 along `k` of every tile in a line, tile after tile: `S = tiles iters`. Block
//! `b` of `C` takes steps `b S / C .. (b + 1) S / C` (floor divisions, so shares differ by at
//! most one step). A block's range crosses tiles: the tiles inside it are *whole* (stored to `Y`
//! as [`super::decode_wgmma`] stores them); its first and last tile may be *split*, shared with
//! the blocks before and after it (their *contributors*, consecutive blocks).
//!
//! # The hand-off of a split tile
//! Per thread, no barrier: each consumer thread of each contributor stores its partial sums
//! (f32, the elements inside `m` and `n`) to the contributor's slot in `slots` (two slots per
//! block: its first tile's and its last tile's), fences (device scope), and counts itself in on
//! its own counter (`counters[j0 256 + t]`, `j0` the tile's first contributor, `t` the thread's
//! index among the 256 consumer threads). The thread that arrives last fences again, adds the
//! partials of the tile's contributors in block order (its own from registers), rounds once and
//! stores to `Y`, then resets its counter to 0 for the next launch. The threads of a contributor
//! hold the same elements (the same fragment layout), so each thread's hand-off is its own; the
//! sum's order, and so the result bit for bit, does not depend on which block ended last. No
//! block waits for another: nothing assumes the grid is resident. The partials are read with
//! plain loads: ptxas assembles the device fence (`fence.acq_rel.gpu`) as `MEMBAR.ALL.GPU` then
//! `CCTL.IVALL` (nvdisasm of the sm_90a cubin, ptxas 13.5), so no stale L1 line is read after it.
//!
//! # Traffic
//! The weight once (`2 n k` bytes), `X` from L2 per step; per split tile each contributor writes
//! its `m x BN` partial (`4 m BN` bytes) and the last reads the others' back: at most two split
//! tiles per block, `16 m BN C` bytes over the grid (1.8 MB at `m = 8`, `BN = 224`, `C = 132`,
//! against the weight's 470 MB at 28672 x 8192).
//!
//! # Edges
//! As [`super::decode_wgmma`]: `k` ragged against 64 and `n` against `BN` by the maps' zero
//! fill; `k` a multiple of 8, the matrices 16-byte aligned; the host checks.

use super::decode_wgmma::{
    consume_steps, decode_tensors, Decode64x128, Decode64x224, Decode64x256, DecodeShape, DECODE_WGMMA_BK,
};
use super::grouped::KMajorBf16;
use crate::gpu::atomic::{self, Scope};
use crate::gpu::pipeline::Ring;
use crate::gpu::tile::{self, Output};
use crate::gpu::{bf16, mem, thread};
use crate::kernel;

/// Threads of a warpgroup.
const WARPGROUP: usize = 128;

/// Consumer threads per block: the counters of a split tile, one per consumer thread.
pub const STREAM_K_CONSUMER_THREADS: usize = 256;

/// Slots of partial sums per block: its first tile's and its last tile's.
pub const STREAM_K_SLOTS_PER_BLOCK: usize = 2;

/// How a stream-K decode launch shares out its steps, read the same way by the kernel and the
/// host (the module documentation). Every position counts steps of 64 along `k` from the first
/// tile's first step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodeStreamK {
    /// Tiles of `BN` rows of `W`: `ceil(n / BN)`.
    pub tiles: usize,
    /// Steps of 64 along `k` per tile: `ceil(k / 64)`.
    pub iters: usize,
    /// Blocks of the grid, at most `tiles iters` (every block has a step).
    pub blocks: usize,
}

impl DecodeStreamK {
    /// The schedule of `tiles` tiles of `iters` steps on `blocks` blocks (at least 1, at most
    /// the steps).
    pub const fn new(tiles: usize, iters: usize, blocks: usize) -> DecodeStreamK {
        let steps = tiles * iters;
        let blocks = if blocks < 1 {
            1
        } else if blocks > steps {
            steps
        } else {
            blocks
        };
        DecodeStreamK { tiles, iters, blocks }
    }

    /// Steps of the whole product.
    pub const fn steps(self) -> usize {
        self.tiles * self.iters
    }

    /// Whether the schedule's products fit 64 bits (`steps (blocks + 1)`): the host launches
    /// only schedules that do (every shape that fits a GPU's memory, by far).
    pub const fn fits(self) -> bool {
        match self.steps().checked_mul(self.blocks + 1) {
            Some(_) => self.steps() > 0,
            None => false,
        }
    }

    /// The first step of block `b` (`b = blocks`: the end of the line). In 64 bits
    /// ([`DecodeStreamK::fits`]).
    pub const fn start(self, b: usize) -> usize {
        b * self.steps() / self.blocks
    }

    /// The block whose range holds step `s`: the largest `b` with `start(b) <= s`.
    pub const fn block_of(self, s: usize) -> usize {
        ((s + 1) * self.blocks - 1) / self.steps()
    }

    /// The first and last contributor of tile `t`: the blocks whose ranges hold its first and
    /// last steps. One block: the tile is whole.
    pub const fn contributors(self, t: usize) -> (usize, usize) {
        (
            self.block_of(t * self.iters),
            self.block_of((t + 1) * self.iters - 1),
        )
    }

    /// The slot of block `q`'s partial of tile `t` (a tile of its range): `2 q` for the tile of
    /// its first step, `2 q + 1` for another (its last tile). Of a split tile's contributors
    /// only the first can hold it in its second slot: the others start inside it.
    pub const fn slot(self, q: usize, t: usize) -> usize {
        if self.start(q) / self.iters == t {
            STREAM_K_SLOTS_PER_BLOCK * q
        } else {
            STREAM_K_SLOTS_PER_BLOCK * q + 1
        }
    }

    /// Floats of `slots` a launch of `m` rows and tiles of `bn` rows of `W` needs.
    pub const fn slot_floats(self, m: usize, bn: usize) -> usize {
        STREAM_K_SLOTS_PER_BLOCK * self.blocks * m * bn
    }

    /// Words of `counters` a launch needs (all zero before the first launch; every launch
    /// leaves them zero).
    pub const fn counter_words(self) -> usize {
        self.blocks * STREAM_K_CONSUMER_THREADS
    }
}

/// The stream-K decode product (the module documentation). What one thread does: every thread
/// lays out the ring; thread 0 of the producer warpgroup walks the block's steps (tile after
/// tile), refilling a stage per step with a box of `X` (`64 x 64`) and one of `W` (`BN x 64`)
/// by TMA (the producer's other threads return); each consumer thread walks the same steps in
/// segments of one tile each, taking part in its warpgroup's four K-major products per stage,
/// and after each segment stores its `N / 2` accumulators inside `m` and `n`: to `out` for a
/// whole tile, else through the hand-off (its partial to its slot, a fence and its counter; the
/// last to arrive adds the tile's partials in block order and stores them). Per stage a block
/// moves `(64 + BN) 128` bytes and does `2 64 BN 64` flops.
///
/// # Safety
/// * `maps` as [`decode_wgmma`](fn@super::decode_wgmma::decode_wgmma)'s; `x`, `w` hold `m x k` and `n x k` bf16,
///   dense, 16-byte aligned; `out` holds `m n` elements; `slots` holds
///   [`DecodeStreamK::slot_floats`] floats and `counters` [`DecodeStreamK::counter_words`]
///   words, all zero before the first launch and left so by every launch, used by no other
///   launch at the same time; none overlapping; `1 <= m <= 64`, `n >= 1`, `k >= 1`.
/// * The launch: 384 threads, a grid of [`DecodeStreamK::new`]`(ceil(n / BN), ceil(k / 64),
///   blocks).blocks` blocks, `S::TILING.shared_bytes()` of dynamic shared memory; a compute
///   capability 9.0 GPU.
///
/// Instances, one PTX entry each (in the sm_90a module), launch bounds `(384, 1)`:
/// `matmul_decode_wgmma_sk_bf16_64x256` and `_f32_64x256`, `_64x224` and `_64x128` likewise
/// (the tiles of [`super::decode_wgmma`]).
// Launch bounds: 384 threads, one block per SM (the ring takes most of the shared memory).
// Barriers: one, the ring's initialisation; the ring runs on mbarriers, the hand-off on fences
// and atomics.
#[kernel(
    launch_bounds(384, 1),
    instances(
        matmul_decode_wgmma_sk_bf16_64x256 = (bf16, Decode64x256),
        matmul_decode_wgmma_sk_f32_64x256 = (f32, Decode64x256),
        matmul_decode_wgmma_sk_bf16_64x224 = (bf16, Decode64x224),
        matmul_decode_wgmma_sk_f32_64x224 = (f32, Decode64x224),
        matmul_decode_wgmma_sk_bf16_64x128 = (bf16, Decode64x128),
        matmul_decode_wgmma_sk_f32_64x128 = (f32, Decode64x128),
    ),
    barriers(1)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn decode_wgmma_sk<O: Output, S: DecodeShape>(
    maps: *const u64,
    x: *const bf16,
    w: *const bf16,
    out: *mut O,
    slots: *mut f32,
    counters: *mut u32,
    m: usize,
    n: usize,
    k: usize,
) {
    let t = S::TILING;
    let () = S::CHECKED;
    const {
        assert!(
            S::TILING.consumers * WARPGROUP == STREAM_K_CONSUMER_THREADS,
            "a counter per consumer thread"
        );
    };
    let (bn, stages) = (t.block_cols, t.stages);
    let (a_bytes, stage_bytes) = (t.a_bytes(), t.stage_bytes());
    let cols = t.consumer_cols();
    let tid = thread::thread_idx_x() as usize;
    let group = tid / WARPGROUP;
    let schedule = DecodeStreamK {
        tiles: n.div_ceil(bn),
        iters: k.div_ceil(DECODE_WGMMA_BK),
        blocks: thread::grid_dim_x() as usize,
    };
    let block = thread::block_idx_x() as usize;
    let (s0, s1) = (schedule.start(block), schedule.start(block + 1));

    // SAFETY: every thread, first; the launch's shared memory is the ring's
    // (`t.shared_bytes()`); stages of whole 1024-byte atoms (`(64 + BN) 128`).
    let ring = unsafe { Ring::new(stages, stage_bytes, (t.consumers * WARPGROUP / 32) as u32) };

    if group == 0 {
        if tid != 0 {
            return;
        }
        let (tx, tw) = decode_tensors(maps, x, w, (m, n, k), bn);
        let mut producer = ring.producer();
        for s in s0..s1 {
            let (tile, kt) = (s / schedule.iters, s % schedule.iters);
            // SAFETY: the one producer thread; the stage is free and expects `stage_bytes` =
            // `64 128` (the box of `X` at 0) + `BN 128` (that of `W` at `a_bytes`), both
            // 1024-byte aligned; the maps are the kernel's.
            unsafe {
                let stage = producer.acquire();
                stage.load(0, &tx, 0, kt * DECODE_WGMMA_BK);
                stage.load(a_bytes, &tw, tile * bn, kt * DECODE_WGMMA_BK);
            }
        }
        return;
    }

    // This consumer's `N` columns of each tile: rows `c N ..` of the box of `W`.
    let consumer = group - 1;
    let ct = tid - WARPGROUP;
    let mut ring_consumer = ring.consumer();
    let mut s = s0;
    // One segment (the block's steps of one tile) per pass; every block has a step, so the
    // first pass runs.
    while s < s1 {
        let tile = s / schedule.iters;
        let end = s1.min((tile + 1) * schedule.iters);
        // SAFETY: every thread of the consumer warpgroups, the producer filling the same steps
        // in order; `s < end`.
        let acc = unsafe { consume_steps::<S>(&mut ring_consumer, (s, end), a_bytes, consumer * cols) };
        s = end;
        let col0 = tile * bn;
        let (j0, j1) = schedule.contributors(tile);
        if j0 == j1 {
            // SAFETY: `out` holds `m x n` (the contract); only rows below `m` and columns below
            // `n` are stored; the whole warpgroup is here (a whole tile is whole for the block).
            unsafe {
                tile::store_rows(
                    &acc,
                    tid % WARPGROUP,
                    out,
                    (0, col0 + consumer * cols),
                    (m, n),
                    |_, _, v| v,
                )
            };
            continue;
        }
        // SAFETY: the slots and counters are the contract's, the tile split (`j0 < j1`) with
        // this block among its contributors.
        unsafe {
            hand_off(
                &acc,
                (out, slots, counters),
                schedule,
                (tile, block, j0, j1),
                (ct, consumer * cols),
                (m, n, bn),
            )
        };
    }
}

/// One consumer thread's part of a split tile (the module documentation): its partial to block
/// `me`'s slot of `tile` (a matrix of `m` rows of the tile's `width` columns), a fence, its
/// counter; if last, the contributors' partials `j0..=j1` added in block order (its own from
/// `acc`) and stored to `out`, and the counter reset. `ct`: the thread's index among the
/// consumer threads; `c0`: its warpgroup's first column in the tile.
///
/// # Safety
/// As [`decode_wgmma_sk`]'s contract; `acc` retired; `j0 < j1`, `me` in `j0..=j1`.
#[inline(always)]
unsafe fn hand_off<O: Output, A: KMajorBf16>(
    acc: &A,
    (out, slots, counters): (*mut O, *mut f32, *mut u32),
    schedule: DecodeStreamK,
    (tile, me, j0, j1): (usize, usize, usize, usize),
    (ct, c0): (usize, usize),
    (m, n, bn): (usize, usize, usize),
) {
    let col0 = tile * bn;
    let width = bn.min(n - col0);
    // Contributor `q`'s slot: `2 q` past the first (each starts inside the tile), the first's
    // by the schedule.
    let first_slot = schedule.slot(j0, tile);
    let slot = |q: usize| {
        let index = if q == j0 {
            first_slot
        } else {
            STREAM_K_SLOTS_PER_BLOCK * q
        };
        slots.wrapping_add(index * m * bn)
    };
    let t = ct % WARPGROUP;
    // The thread holds an element inside the tile's `m x width`: its first row and column are
    // (`tile::position` of accumulator 0). The same for every contributor.
    let (row, col) = tile::position(0, t);
    if row >= m || c0 + col >= width {
        return;
    }
    // SAFETY: block `me`'s slot holds `m x bn >= m x width` floats; rows below `m`, columns
    // below `width` only.
    unsafe { tile::store_pairs(acc, t, slot(me), (0, c0), (m, width), |_, _, v| v) };
    atomic::fence(Scope::Device);
    let counter = j0 * STREAM_K_CONSUMER_THREADS + ct;
    // SAFETY: `counters` holds a word per consumer thread of every block (the contract), and
    // `j0` is a block.
    let arrived = unsafe { atomic::add(counters, counter, 1, Scope::Device) };
    if arrived as usize != j1 - j0 {
        return;
    }
    atomic::fence(Scope::Device);
    // The last: every other contributor's thread `ct` stored its pairs and fenced before its
    // count, which this thread's count read.
    let sum = |row: usize, col: usize, mine: [f32; 2]| -> [f32; 2] {
        let c = col - col0;
        let mut total = [0.0f32; 2];
        for q in j0..=j1 {
            let part = if q == me {
                mine
            } else {
                let p = slot(q);
                let i = row * width + c;
                // SAFETY: inside block `q`'s slot of `m x width` (`row < m`, `c < width`);
                // the second element only where it is inside the row.
                unsafe {
                    [
                        mem::load(p, i),
                        if c + 1 < width { mem::load(p, i + 1) } else { 0.0 },
                    ]
                }
            };
            if q == j0 {
                total = part;
            } else {
                total = [total[0] + part[0], total[1] + part[1]];
            }
        }
        total
    };
    // SAFETY: `out` holds `m x n`; rows below `m`, columns below `n`; no shuffles (each thread
    // decides alone whether it is last).
    unsafe { tile::store_pairs(acc, t, out, (0, col0 + c0), (m, n), sum) };
    // SAFETY: as the count above.
    unsafe { atomic::store(counters, counter, 0, Scope::Device) };
}
