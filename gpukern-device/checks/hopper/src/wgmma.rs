//! Warpgroup products (`wgmma`): one warpgroup computes `C = A B` for `64 x 64` bf16 tiles `A`
//! (row-major) and `B` (row-major `k x n`) into the f32 `64 x 64` `c` ([`crate::tiles`]), the
//! tiles brought to shared memory by the threads' own stores, by tensor copies, or (the ring) by
//! bulk copies of tiles already in the swizzled layout.
//!
//! The correct kernels are [`wgmma_stores_twin`](fn@wgmma_stores_twin), [`wgmma_async_twin`](fn@wgmma_async_twin), [`wgmma_tma_twin`](fn@wgmma_tma_twin),
//! [`wgmma_rows_twin`](fn@wgmma_rows_twin) and [`wgmma_ring_twin`](fn@wgmma_ring_twin); each `*_planted` kernel is one of them with one
//! mistake. Launch: one block of [`THREADS`] threads ([`RING_THREADS`] for the ring),
//! [`SHARED_BYTES`] ([`RING_SHARED_BYTES`]) of dynamic shared memory.

use gpukern_device::tma::{self, Tensor2d};
use gpukern_device::{bf16, kernel, mbarrier, thread, wgmma};

use crate::tiles::{a_descriptors, aligned, b_descriptors, fill_tile, store_result, TILE_BYTES};

/// Threads per block: one warpgroup.
pub const THREADS: u32 = 128;
/// Dynamic shared memory: alignment slack, a 1 KiB header (the barrier), the tiles of `A` and `B`.
pub const SHARED_BYTES: u32 = (1024 + 1024 + 2 * TILE_BYTES) as u32;

/// Where the tiles are: `A`, then `B`, after the header.
fn tiles() -> (*mut u8, *mut u8) {
    (aligned(1024), aligned(1024 + TILE_BYTES))
}

/// The product of the tiles in shared memory, waited for; `sbo` the 8-row-group distance the
/// descriptors of `A` give.
///
/// # Safety
/// The whole warpgroup calls it; the tiles are written and visible to the tensor cores.
unsafe fn product(sbo: u32) -> [f32; 32] {
    let (a, b) = tiles();
    let (a, b) = (wgmma::shared_address(a), wgmma::shared_address(b));
    // SAFETY: the caller's contract.
    unsafe {
        wgmma::mma_bf16_m64n64k64(
            <[f32; 32] as wgmma::Accumulators>::zeroed(),
            a_descriptors(a, sbo),
            b_descriptors(b),
            false,
        )
    }
}

/// The warpgroup copies `a` and `b` into the tiles with ordinary stores, fenced for the tensor
/// cores (`fence.proxy.async`) if `FENCED`, then a block barrier.
///
/// # Safety
/// `a` and `b` hold `64 x 64` bf16 each.
unsafe fn fill<const FENCED: bool>(a: *const bf16, b: *const bf16) {
    let (ta, tb) = tiles();
    // SAFETY: the caller's contract.
    unsafe {
        fill_tile(a, ta);
        fill_tile(b, tb);
    }
    if FENCED {
        wgmma::fence_proxy_async();
    }
    thread::sync_threads();
}

/// The correct kernel: the warpgroup stores `A` and `B` into the tiles, each thread fences its
/// stores for the tensor cores, a block barrier; then the product, stored to `c`.
///
/// # Safety
/// `a`, `b`, `c` hold `64 x 64` elements; the launch of the module documentation.
#[kernel]
pub unsafe fn wgmma_stores_twin(a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe {
        fill::<true>(a, b);
        store_result(c, &product(1024), 64);
    }
}

/// [`wgmma_stores_twin`](fn@wgmma_stores_twin) without the fence (`Rule::ProxyFence`): the tensor cores (the asynchronous
/// proxy) read operands written by ordinary stores with no `fence.proxy.async` after them.
///
/// # Safety
/// As [`wgmma_stores_twin`](fn@wgmma_stores_twin).
#[kernel]
pub unsafe fn wgmma_proxy_planted(a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract (the missing fence is the planted bug).
    unsafe {
        fill::<false>(a, b);
        store_result(c, &product(1024), 64);
    }
}

/// The correct asynchronous product: as [`wgmma_stores_twin`](fn@wgmma_stores_twin), the product issued with
/// `mma_bf16_m64n64k64_async` and retired with `wait_accumulators::<0>` before the accumulators
/// are stored.
///
/// # Safety
/// As [`wgmma_stores_twin`](fn@wgmma_stores_twin).
#[kernel]
pub unsafe fn wgmma_async_twin(a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe {
        fill::<true>(a, b);
        let acc = issue();
        let acc = wgmma::wait_accumulators::<0, _>(acc);
        store_result(c, &acc, 64);
    }
}

/// [`wgmma_async_twin`](fn@wgmma_async_twin) without the wait (`Rule::WgmmaAccumulators`): the accumulators are
/// stored while the product writing them is in flight.
///
/// # Safety
/// As [`wgmma_stores_twin`](fn@wgmma_stores_twin).
#[kernel]
pub unsafe fn wgmma_accumulators_planted(a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract (the missing wait is the planted bug).
    unsafe {
        fill::<true>(a, b);
        let acc = issue();
        store_result(c, &acc, 64);
    }
}

/// The product of the tiles, issued and committed, not waited for.
///
/// # Safety
/// As [`product`].
unsafe fn issue() -> [f32; 32] {
    let (a, b) = tiles();
    let (a, b) = (wgmma::shared_address(a), wgmma::shared_address(b));
    // SAFETY: the caller's contract.
    unsafe {
        wgmma::mma_bf16_m64n64k64_async(
            <[f32; 32] as wgmma::Accumulators>::zeroed(),
            a_descriptors(a, 1024),
            b_descriptors(b),
            false,
        )
    }
}

/// The correct kernel of the products whose rows past `m` are dropped: every warp takes part in
/// the product (it is warpgroup-collective), and only the stores skip the rows at or past `m`.
///
/// # Safety
/// As [`wgmma_stores_twin`](fn@wgmma_stores_twin), `m <= 64`.
#[kernel]
pub unsafe fn wgmma_rows_twin(a: *const bf16, b: *const bf16, c: *mut f32, m: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        fill::<true>(a, b);
        store_result(c, &product(1024), m);
    }
}

/// [`wgmma_rows_twin`](fn@wgmma_rows_twin) whose warps skip the product when their 16 rows start at or past `m`
/// (`Rule::WgmmaOrder`): a warpgroup-collective instruction under a condition that differs
/// between its warps, so part of the warpgroup never executes it.
///
/// # Safety
/// As [`wgmma_rows_twin`](fn@wgmma_rows_twin).
#[kernel]
pub unsafe fn wgmma_order_planted(a: *const bf16, b: *const bf16, c: *mut f32, m: usize) {
    let warp = (thread::thread_idx_x() / 32) as usize;
    // SAFETY: forwarded contract (the per-warp condition is the planted bug).
    unsafe {
        fill::<true>(a, b);
        let acc = match 16 * warp < m {
            true => product(1024),
            false => <[f32; 32] as wgmma::Accumulators>::zeroed(),
        };
        store_result(c, &acc, m);
    }
}

/// The correct kernel with tiles from tensor copies: thread 0 asks the copy engine for the
/// `64 x 64` boxes of `a` and `b` (their maps at `maps` and `maps + 16` words: bf16, boxes of
/// 64 x 64, 128-byte swizzle), every thread waits, and the warpgroup's product (descriptors with
/// 8-row groups 1024 bytes apart, as the copy engine writes them) is stored to `c`.
///
/// # Safety
/// As [`wgmma_stores_twin`](fn@wgmma_stores_twin), and the maps encode `a` and `b`.
#[kernel]
pub unsafe fn wgmma_tma_twin(maps: *const u64, a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { tma_product(maps, a, b, c, 1024) }
}

/// [`wgmma_tma_twin`](fn@wgmma_tma_twin) whose descriptors of `A` put its 8-row groups 512 bytes apart
/// (`Rule::WgmmaDescriptor`): the stride does not match the dense tile the copy engine wrote, so
/// the tensor cores read rows of the wrong groups.
///
/// # Safety
/// As [`wgmma_tma_twin`](fn@wgmma_tma_twin).
#[kernel]
pub unsafe fn wgmma_descriptor_planted(maps: *const u64, a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract (the stride is the planted bug).
    unsafe { tma_product(maps, a, b, c, 512) }
}

/// The body of the tensor-copy kernels.
///
/// # Safety
/// As [`wgmma_tma_twin`](fn@wgmma_tma_twin).
unsafe fn tma_product(maps: *const u64, a: *const bf16, b: *const bf16, c: *mut f32, sbo: u32) {
    let bar = aligned(0).cast::<u64>();
    let tensor = |map: *const u64, data: *const bf16| Tensor2d {
        map,
        data,
        rows: 64,
        cols: 64,
        stride: 64,
        box_rows: 64,
        box_cols: 64,
    };
    if thread::thread_idx_x() == 0 {
        // SAFETY: 8 bytes of the header, used by nothing else.
        unsafe { mbarrier::init(bar, 1) };
        mbarrier::fence_init();
    }
    thread::sync_threads();
    let (ta, tb) = tiles();
    if thread::thread_idx_x() == 0 {
        // SAFETY: the contract's maps; the tiles are 1024-byte aligned and unused.
        unsafe {
            mbarrier::arrive_expect_tx(bar, 2 * TILE_BYTES as u32);
            tma::load_2d(ta.cast::<bf16>(), &tensor(maps, a), bar, 0, 0);
            tma::load_2d(tb.cast::<bf16>(), &tensor(maps.wrapping_add(16), b), bar, 0, 0);
        }
    }
    // SAFETY: the wait orders the tiles before the product.
    unsafe {
        mbarrier::wait_parity(bar, 0);
        store_result(c, &product(sbo), 64);
    }
}

/// Threads of the ring kernels: a producer warpgroup (thread 0 issues the copies) and a consumer
/// warpgroup.
pub const RING_THREADS: u32 = 256;
/// Steps of 64 along `k` of the ring kernels (`k = 256`).
pub const RING_STEPS: usize = 4;
/// Stages of the ring.
const STAGES: usize = 2;
/// Bytes of one stage: a tile of `A` and one of `B`.
const STAGE_BYTES: usize = 2 * TILE_BYTES;
/// Dynamic shared memory of the ring kernels: slack, the header (barriers), the stages.
pub const RING_SHARED_BYTES: u32 = (1024 + 1024 + STAGES * STAGE_BYTES) as u32;

/// The correct ring: `c = A B` for `A` `64 x 256` and `B` `256 x 64`, given as [`RING_STEPS`]
/// pairs of tiles already in the swizzled layout (`a` and `b` hold tile `s` of `A` and of `B` at
/// byte `8192 s`). The producer (thread 0) copies step `s` into stage `s % 2` with two bulk copies,
/// after waiting for the stage's `empty` barrier; the consumer warpgroup waits for the stage's
/// `full` barrier, issues the step's product (`mma_bf16_m64n64k64_async`), waits until only that
/// one is in flight (`wait_accumulators::<1>`) and then, lane 0 of each warp, marks the previous
/// step's stage empty; after the last step it waits for everything, marks the last stage empty
/// and stores `c`.
///
/// # Safety
/// `a`, `b` hold `RING_STEPS * 4096` bf16, 16-byte aligned; `c` `64 x 64` floats; the launch of
/// the module documentation.
#[kernel]
pub unsafe fn wgmma_ring_twin(a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { ring::<false>(a, b, c) }
}

/// [`wgmma_ring_twin`](fn@wgmma_ring_twin) whose consumer marks each stage empty right after issuing its product
/// (`Rule::WgmmaOperands`): the producer refills the stage while the tensor cores may still read
/// it.
///
/// # Safety
/// As [`wgmma_ring_twin`](fn@wgmma_ring_twin).
#[kernel]
pub unsafe fn wgmma_operands_planted(a: *const bf16, b: *const bf16, c: *mut f32) {
    // SAFETY: forwarded contract (the early release is the planted bug).
    unsafe { ring::<true>(a, b, c) }
}

/// The body of the ring kernels: `EARLY` releases each stage before its product is retired.
///
/// # Safety
/// As [`wgmma_ring_twin`](fn@wgmma_ring_twin).
unsafe fn ring<const EARLY: bool>(a: *const bf16, b: *const bf16, c: *mut f32) {
    let tid = thread::thread_idx_x();
    let full = |s: usize| aligned(8 * s).cast::<u64>();
    let empty = |s: usize| aligned(8 * (STAGES + s)).cast::<u64>();
    let stage = |s: usize| aligned(1024 + s * STAGE_BYTES);
    if tid == 0 {
        for s in 0..STAGES {
            // SAFETY: 16 bytes of the header per stage, used by nothing else.
            unsafe {
                mbarrier::init(full(s), 1);
                mbarrier::init(empty(s), 4);
            }
        }
        mbarrier::fence_init();
    }
    thread::sync_threads();
    if tid < 128 {
        if tid != 0 {
            return;
        }
        for k in 0..RING_STEPS {
            let s = k % STAGES;
            // SAFETY: the barriers are initialised; the stage is free once its `empty` phase
            // completed; the tiles lie in `a` and `b`.
            unsafe {
                mbarrier::wait_parity(empty(s), (((k / STAGES) & 1) ^ 1) as u32);
                mbarrier::arrive_expect_tx(full(s), STAGE_BYTES as u32);
                let (ta, tb) = (stage(s), stage(s).wrapping_add(TILE_BYTES));
                let off = k * TILE_BYTES / 2;
                gpukern_device::bulk::load(
                    ta.cast::<bf16>(),
                    a.wrapping_add(off),
                    TILE_BYTES as u32,
                    full(s),
                );
                gpukern_device::bulk::load(
                    tb.cast::<bf16>(),
                    b.wrapping_add(off),
                    TILE_BYTES as u32,
                    full(s),
                );
            }
        }
        return;
    }
    let lane = tid % 32;
    let mut acc = <[f32; 32] as wgmma::Accumulators>::zeroed();
    for k in 0..RING_STEPS {
        let s = k % STAGES;
        let (ta, tb) = (stage(s), stage(s).wrapping_add(TILE_BYTES));
        let (ta, tb) = (wgmma::shared_address(ta), wgmma::shared_address(tb));
        // SAFETY: the wait orders the stage's copies before the product; the whole consumer
        // warpgroup is here.
        unsafe {
            mbarrier::wait_parity(full(s), ((k / STAGES) & 1) as u32);
            acc = wgmma::mma_bf16_m64n64k64_async(acc, a_descriptors(ta, 1024), b_descriptors(tb), k > 0);
            if EARLY && lane == 0 {
                mbarrier::arrive(empty(s));
            }
            acc = wgmma::wait_accumulators::<1, _>(acc);
            if !EARLY && k > 0 && lane == 0 {
                mbarrier::arrive(empty((k - 1) % STAGES));
            }
        }
    }
    // SAFETY: the whole warpgroup is here, the last product in flight.
    unsafe {
        acc = wgmma::wait_accumulators::<0, _>(acc);
        if !EARLY && lane == 0 {
            mbarrier::arrive(empty((RING_STEPS - 1) % STAGES));
        }
        store_result(c, &acc, 64);
    }
}
