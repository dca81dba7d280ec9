//! Named barriers: a barrier among some of the block's warps (`bar.sync id, threads`), where
//! [`crate::thread::sync_threads`] is one among all of them. A warpgroup that reuses a staging
//! tile of its own, or two warpgroups that take turns, wait for each other only, while the rest
//! of the block (a producer warp, another warpgroup) runs on.
//!
//! * [`sync`]: this thread counts itself in at barrier `id` and waits until `threads` threads
//!   have: every access made before by one of them is then ordered before every access made
//!   after by any thread that waited there.
//! * [`arrive`]: this thread counts itself in and goes on without waiting (`bar.arrive`): its
//!   earlier accesses are ordered before the later ones of the threads that wait at that
//!   barrier's completion, and it learns nothing itself.
//!
//! The barrier's identity is `id` (1 to 15; 0 is [`crate::thread::sync_threads`]'s), not the
//! call's place in the source: threads may reach it from different calls. Both forms are
//! `.aligned` (`bar.*` in PTX): every lane of a warp calls them together, with the same `id`
//! and `threads`, so `threads` is a multiple of 32 and the barrier completes when that many
//! threads, whole warps, have counted themselves in.
//!
//! In the simulator a thread at [`sync`] waits until the barrier completes; the barrier's
//! completion joins what its threads knew (the shared-memory race check, the `wgmma`, bulk-store
//! and `mbarrier` protocols) into the threads that waited. It reports (rule
//! [`crate::sim::Rule::NamedBarrier`]) an `id` past 15 or 0, a count that is no multiple of 32
//! or exceeds the block, threads at one barrier with different counts, a barrier completed by
//! part of a warp, a thread counting itself in twice before the barrier completes, and a
//! barrier that never completes (its waiters would hang). It does not order global memory:
//! accesses of one block's threads to a global buffer are ordered by block barriers (and
//! releases) only, so a kernel that hands global data between its warps by named barriers
//! alone is reported as racing.

/// Counts this thread in at named barrier `id` and waits until `threads` threads have
/// (`bar.sync id, threads`); see the [module documentation](self).
///
/// # Safety
/// * `1 <= id <= 15`, and `threads` is a multiple of 32 no larger than the block.
/// * Every lane of the calling warp calls it together, with the same `id` and `threads`; every
///   thread counted in at one completion of barrier `id` passes the same `threads`, and exactly
///   `threads` threads reach it (else the waiters hang).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn sync(id: u32, threads: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("bar.sync {id}, {threads};", id = in(reg32) id, threads = in(reg32) threads, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::named_barrier(id, threads, true);
}

/// Counts this thread in at named barrier `id` without waiting (`bar.arrive id, threads`); see
/// the [module documentation](self).
///
/// # Safety
/// As [`sync`]; at least one of the `threads` threads of each completion waits ([`sync`]), or
/// the arrival orders nothing.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn arrive(id: u32, threads: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("bar.arrive {id}, {threads};", id = in(reg32) id, threads = in(reg32) threads, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::named_barrier(id, threads, false);
}
