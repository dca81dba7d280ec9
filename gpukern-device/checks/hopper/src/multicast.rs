//! A ring shared by a cluster of two blocks through multicast tensor copies
//! ([`gpukern_device::pipeline::Ring::new_cluster`]): each block computes its `64 x 64` part of
//! `C = A B` (`A` `128 x 256`, rows `64 r..64 r + 64` for rank `r`; `B` `256 x 64`; both bf16,
//! row-major) in [`STEPS`] steps of 64 along `k`. Per step a block's producer copies its own tile
//! of `A` and half of the step's tile of `B` (32 rows of `k`, the half of its rank) into the stage
//! of both blocks at once, so each stage of a block is written by both producers; its consumer
//! warpgroup multiplies on `wgmma` and releases the stage in both blocks.
//!
//! The correct kernel is [`multicast_ring_twin`](fn@multicast_ring_twin); each `*_planted`
//! kernel is it with one mistake. Launch: two blocks of [`THREADS`] threads in one cluster of
//! `(2, 1, 1)`, [`SHARED_BYTES`] of dynamic shared memory; `maps` holds the tensor maps of `A`
//! (box `64 x 64`) and, 16 words on, of `B` (box `32 x 64`), bf16, 128-byte swizzle; `c` holds
//! `128 x 64` floats.

use gpukern_device::pipeline::Ring;
use gpukern_device::tma::Tensor2d;
use gpukern_device::{bf16, cluster, kernel, thread, wgmma};

use crate::tiles::{a_descriptors, b_descriptors, store_result, TILE_BYTES};

/// Threads per block: a producer warpgroup (its thread 0 issues the copies) and a consumer
/// warpgroup.
pub const THREADS: u32 = 256;
/// Steps of 64 along `k` (`k = 256`).
pub const STEPS: usize = 4;
/// Stages of the ring.
const STAGES: usize = 2;
/// Bytes of a stage: a tile of `A` and one of `B`.
const STAGE_BYTES: usize = 2 * TILE_BYTES;
/// Bytes of half a tile of `B` (32 rows of 128 bytes), each block's part.
const HALF_B: usize = TILE_BYTES / 2;
/// Dynamic shared memory of a block: the ring.
pub const SHARED_BYTES: u32 = Ring::shared_bytes(STAGES, STAGE_BYTES);

/// The correct kernel: the ring made for both blocks (each stage's `empty` barrier counts the
/// consumer warps of both) and published by a cluster barrier; each consumer warp releases a
/// stage in both blocks once the product reading it retired; each producer drains the ring
/// before its block exits.
///
/// # Safety
/// The launch of the module documentation; `a`, `b` hold `128 x 256` and `256 x 64` bf16.
#[kernel]
pub unsafe fn multicast_ring_twin(maps: *const u64, a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { shared_ring::<2, true, true>(maps, a, b, c) }
}

/// [`multicast_ring_twin`](fn@multicast_ring_twin) whose ring counts and releases this block's
/// consumers only (`Rule::WgmmaOperands`): the other block's producer refills a stage of this
/// block with its half of `B` while this block's product may still read it.
///
/// # Safety
/// As [`multicast_ring_twin`](fn@multicast_ring_twin).
#[kernel]
pub unsafe fn multicast_release_planted(maps: *const u64, a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract (the local release is the planted bug).
    unsafe { shared_ring::<1, true, true>(maps, a, b, c) }
}

/// [`multicast_ring_twin`](fn@multicast_ring_twin) whose producers do not drain the ring
/// (`Rule::ClusterExit`): a block may exit while the other block's consumers still arrive on its
/// barriers.
///
/// # Safety
/// As [`multicast_ring_twin`](fn@multicast_ring_twin).
#[kernel]
pub unsafe fn multicast_drain_planted(maps: *const u64, a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract (the missing drain is the planted bug).
    unsafe { shared_ring::<2, true, false>(maps, a, b, c) }
}

/// [`multicast_ring_twin`](fn@multicast_ring_twin) whose ring is published by a block barrier
/// only (`Rule::MbarrierUninitialized`): a producer's first copy into the other block may reach
/// a barrier that block has not initialised yet.
///
/// # Safety
/// As [`multicast_ring_twin`](fn@multicast_ring_twin).
#[kernel]
pub unsafe fn multicast_publish_planted(maps: *const u64, a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract (the missing cluster barrier is the planted bug).
    unsafe { shared_ring::<2, false, true>(maps, a, b, c) }
}

/// The body of the kernels: `BLOCKS` the blocks the ring's `empty` barriers count and the
/// consumers release (2, or 1: this block only); `PUBLISH` the cluster barrier after the ring's
/// initialisation; `DRAIN` the producer's drain.
///
/// # Safety
/// As [`multicast_ring_twin`](fn@multicast_ring_twin).
unsafe fn shared_ring<const BLOCKS: u32, const PUBLISH: bool, const DRAIN: bool>(
    maps: *const u64,
    a: *const bf16,
    b: *const bf16,
    c: *mut f32,
) {
    let (rank, tid) = (cluster::block_rank() as usize, thread::thread_idx_x());
    // SAFETY: every thread of both blocks, first; the launch gives the ring's bytes.
    let ring = unsafe {
        match PUBLISH {
            true => Ring::new_cluster(STAGES, STAGE_BYTES, 4, BLOCKS),
            false => Ring::new(STAGES, STAGE_BYTES, 4 * BLOCKS),
        }
    };
    if tid < 128 {
        if tid != 0 {
            return;
        }
        let ta = Tensor2d {
            map: maps,
            data: a,
            rows: 128,
            cols: 256,
            stride: 256,
            box_rows: 64,
            box_cols: 64,
        };
        let tb = Tensor2d {
            map: maps.wrapping_add(16),
            data: b,
            rows: 256,
            cols: 64,
            stride: 64,
            box_rows: 32,
            box_cols: 64,
        };
        let mut producer = ring.producer();
        for k in 0..STEPS {
            // SAFETY: the one producer; the stage is free in both blocks (its `empty` barrier
            // counts both blocks' consumers), expects `STAGE_BYTES`: this block's tile of `A`,
            // and the two halves of `B`'s tile, this block's and the other's.
            unsafe {
                let stage = producer.acquire();
                stage.load(0, &ta, 64 * rank, 64 * k);
                stage.load_multicast(TILE_BYTES + HALF_B * rank, &tb, 64 * k + 32 * rank, 0, 0b11);
            }
        }
        if DRAIN {
            // SAFETY: the producer, after its last acquire.
            unsafe { producer.drain() };
        }
        return;
    }
    let mut consumer = ring.consumer();
    let release = |consumer: &gpukern_device::pipeline::Consumer, stage| {
        // SAFETY: every lane of the warp, once per stage, after the product reading it retired.
        unsafe {
            match BLOCKS {
                1 => consumer.release(&stage),
                _ => consumer.release_cluster(&stage, BLOCKS),
            }
        }
    };
    let mut acc = <[f32; 32] as wgmma::Accumulators>::zeroed();
    let mut previous = None;
    for k in 0..STEPS {
        // SAFETY: the wait orders the stage's copies before the product; the whole consumer
        // warpgroup is here; the previous step's product retires at the wait below.
        unsafe {
            let stage = consumer.wait();
            let (ta, tb) = (stage.address(0), stage.address(TILE_BYTES));
            acc = wgmma::mma_bf16_m64n64k64_async(acc, a_descriptors(ta, 1024), b_descriptors(tb), k > 0);
            acc = wgmma::wait_accumulators::<1, _>(acc);
            if let Some(done) = previous.replace(stage) {
                release(&consumer, done);
            }
        }
    }
    // SAFETY: the whole warpgroup is here, the last product in flight.
    unsafe {
        acc = wgmma::wait_accumulators::<0, _>(acc);
        if let Some(done) = previous {
            release(&consumer, done);
        }
        store_result(c.wrapping_add(64 * 64 * rank), &acc, 64);
    }
}
