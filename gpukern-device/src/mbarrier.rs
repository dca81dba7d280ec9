//! Shared-memory transaction barriers (`mbarrier`, sm_90): the completion signal of the Hopper
//! bulk tensor copies ([`crate::tma`]). A barrier is one 8-byte word of shared memory that counts
//! arrivals and expected bytes; its phase completes when every expected thread has arrived and
//! every expected byte has landed, and waiters test the phase by its parity (0, 1, 0, ...).
//!
//! The protocol of a copy pipeline: one thread [`init`]s each barrier with an arrival count
//! (then [`fence_init`] and a block barrier, so that every thread and the copy engine see it);
//! per stage, the thread that issues the copies calls [`arrive_expect_tx`] with their total
//! bytes and issues them, and the consumers [`wait_parity`] for the stage's phase.
//!
//! In the simulator each barrier is a record of the block ([`crate::sim`]'s Hopper state), not
//! the word itself (which is still written by `init` and touched by every operation, so that
//! bounds and races are checked): the arrivals and bytes its phase expects, its phase, and who
//! initialised it. The copies are performed when issued and count their bytes down at once. A
//! wait polls: the thread checks the phase and, while it is incomplete, hands control to the
//! scheduler, which resumes it in the next round; a round in which every running thread polls and
//! nothing changed is reported as a deadlock naming the barrier, its phase and what it still
//! expects (on a GPU the waits would never return). So threads may wait at different places for
//! different barriers, as the producer and consumer warpgroups of a warp-specialized kernel do.
//!
//! The simulator checks each rule of the protocol ([`crate::sim::Rule`]): an `init` by more than
//! one thread (or of a live barrier), any use of a barrier never initialised, invalidated
//! ([`inval`]), or whose init no block barrier (threads) or [`fence_init`] (the copy engine) made
//! visible; more arrivals in a phase than the count; copies delivering more bytes than the
//! phase's `expect_tx`; a wait whose parity names a phase the barrier has already gone past (a
//! phase reused before this waiter saw it); a copy's destination touched before the thread waited
//! for the phase the copy completes on.

/// Initialises the barrier at `bar` (8-byte aligned, in shared memory) for `count` arrivals per
/// phase, in phase 0.
///
/// # Safety
/// `bar` points to 8 bytes of this block's shared memory, not in use by a pending copy; no other
/// thread touches it before a block barrier after [`fence_init`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn init(bar: *mut u64, count: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "mbarrier.init.shared::cta.b64 [{bar}], {count};",
                bar = in(reg32) bar,
                count = in(reg32) count,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::mbarrier_init(bar as usize, count);
}

/// Makes this thread's [`init`]s visible to the copy engine (the async proxy) and, after a block
/// barrier, to every thread: `fence.mbarrier_init.release.cluster` and
/// `fence.proxy.async.shared::cta`. The simulator records both.
#[inline(always)]
pub fn fence_init() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: fences only.
    unsafe {
        core::arch::asm!(
            "fence.mbarrier_init.release.cluster;",
            "fence.proxy.async.shared::cta;",
            options(nostack),
        );
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::mbarrier_fence_init();
}

/// Invalidates the barrier at `bar` (`mbarrier.inval`), so that its 8 bytes may be used for
/// something else or initialised again; any other operation on it until a new [`init`] is an
/// error (reported by the simulator).
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory that no thread or copy uses any
/// more (every thread that waits on it has passed its last phase).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn inval(bar: *mut u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "mbarrier.inval.shared::cta.b64 [{bar}];",
                bar = in(reg32) bar,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::mbarrier_inval(bar as usize);
}

/// Arrives at `bar` once and adds `bytes` to the bytes its current phase waits for
/// (`mbarrier.arrive.expect_tx`): what the thread issuing a stage's copies calls before issuing
/// them.
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn arrive_expect_tx(bar: *mut u64, bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{bar}], {bytes};",
                bar = in(reg32) bar,
                bytes = in(reg32) bytes,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::mbarrier_arrive(bar as usize, bytes);
}

/// Arrives at `bar` once (`mbarrier.arrive`), with no bytes: what a consumer calls when it is
/// done with a stage, so that the producer may refill it.
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory whose current phase still
/// expects an arrival.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn arrive(bar: *mut u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract. Not `nomem`: the arrival releases this thread's accesses.
        unsafe {
            core::arch::asm!(
                "mbarrier.arrive.shared::cta.b64 _, [{bar}];",
                bar = in(reg32) bar,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::mbarrier_arrive(bar as usize, 0);
}

/// Lane 0 of the calling warp arrives at `bar` once, for the whole warp: how a consumer warp says
/// it is done with what `bar` guards when the barrier counts warps (its [`init`] count is the
/// consumer warps, not their threads), as [`crate::pipeline::Consumer::release`] does for a ring
/// stage. On the GPU, lane 0's `mbarrier.arrive` (lane `thread_idx_x() % 32`: blocks of one
/// dimension); the other lanes do nothing. The simulator first checks that every lane of the
/// warp reached this call (as it checks a shuffle: a lane that returned or waits elsewhere is
/// reported), then lane 0 arrives. The arrival releases lane 0's own ordinary shared-memory
/// accesses only: nothing orders the other lanes' before it (no warp barrier runs), so a thread
/// that waits for the phase and then writes what those lanes read races with them, and the
/// simulator says so; such lanes arrive themselves ([`arrive`], a count of threads).
///
/// # Safety
/// Every lane of the warp calls it, at the same call; the block is one-dimensional; `bar` is an
/// initialised barrier of this block's shared memory whose current phase still expects this
/// warp's arrival; the warp's reads of what `bar` guards are done (for `wgmma`, after the wait
/// that retires the products reading it).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub unsafe fn warp_arrive(bar: *mut u64) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::warp_converge();
    if crate::thread::thread_idx_x() % 32 == 0 {
        // SAFETY: the caller's contract; one arrival for the warp.
        unsafe { arrive(bar) };
    }
}

/// Arrives once, with no bytes, at the barrier at `bar`'s place in the shared memory of the
/// cluster's block `rank` (`mapa.shared::cluster`, then `mbarrier.arrive.shared::cluster`, PTX's
/// default semantics: release at CTA scope, as CUTLASS's cluster barrier arrives): how a consumer
/// whose stage another block's multicast copies also fill tells that block's producer the stage
/// is free. `rank` may be this block's own.
///
/// In the simulator the arrival counts on the peer's barrier as its own threads' do, carrying
/// what this thread knows (its retired products, the phases it saw) to the threads that wait for
/// that phase; the peer's init must have reached the cluster (its [`fence_init`] and then a
/// cluster barrier), and the peer must wait for the phase this arrival counts towards before it
/// exits (else the arrival may reach a block that is gone: reported, rule `ClusterExit`).
///
/// # Safety
/// `bar` is the address, in this block's shared memory, of a barrier that block `rank` of the
/// cluster initialised at the same offset and published to the cluster (a cluster barrier after
/// its init); its current phase still expects this arrival; block `rank` has not exited and
/// waits for this phase before it does; compute capability 9.0.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn arrive_cluster(bar: *mut u64, rank: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract. Not `nomem`: the arrival releases this thread's accesses.
        unsafe {
            core::arch::asm!(
                "{{",
                ".reg .b32 remote;",
                "mapa.shared::cluster.u32 remote, {bar}, {rank};",
                "mbarrier.arrive.shared::cluster.b64 _, [remote];",
                "}}",
                bar = in(reg32) bar,
                rank = in(reg32) rank,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::mbarrier_arrive_remote(bar as usize, rank);
}

/// Lanes `0..blocks` of the calling warp each arrive once at the barrier at `bar`'s place in the
/// cluster's block of their own lane's rank ([`arrive_cluster`]): one arrival for the whole warp
/// on each of the first `blocks` blocks of the cluster, as [`warp_arrive`] gives one on this
/// block's. The simulator first checks that every lane of the warp reached this call.
///
/// # Safety
/// Every lane of the warp calls it, at the same call; the block is one-dimensional;
/// `1 <= blocks <= 32` and at most the cluster's size; for each of those blocks, the contract of
/// [`arrive_cluster`]; the warp's reads of what `bar` guards are done.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn warp_arrive_cluster(bar: *mut u64, blocks: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::warp_converge();
    let lane = crate::thread::thread_idx_x() % 32;
    if lane < blocks {
        // SAFETY: the caller's contract; one arrival for the warp on each block.
        unsafe { arrive_cluster(bar, lane) };
    }
}

/// Whether the phase of parity `parity` (0 or 1) of `bar` has completed
/// (`mbarrier.try_wait.parity`, which may wait a little before answering no).
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn try_wait_parity(bar: *mut u64, parity: u32) -> bool {
    let bar = crate::async_copy::shared_address(bar);
    let done: u32;
    // SAFETY: the caller's contract. Not `nomem`: the wait orders the loads of the data it guards.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .pred p;",
            "mbarrier.try_wait.parity.shared::cta.b64 p, [{bar}], {parity};",
            "selp.u32 {done}, 1, 0, p;",
            "}}",
            bar = in(reg32) bar,
            parity = in(reg32) parity,
            done = out(reg32) done,
            options(nostack),
        );
    }
    done != 0
}

/// Waits until the phase of parity `parity` of `bar` has completed: a loop around
/// `try_wait.parity` on the GPU; a polling loop in the simulator (see the module documentation).
/// A fresh barrier is in phase 0, so a wait for parity 1 returns at once (the phase "before" it
/// counts as complete): how a producer waits for stages that no consumer has used yet.
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn wait_parity(bar: *mut u64, parity: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: forwarded contract.
        while !unsafe { try_wait_parity(bar, parity) } {}
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::mbarrier_wait(bar as usize, parity);
}
