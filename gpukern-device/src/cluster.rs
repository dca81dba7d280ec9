//! Thread-block clusters (sm_90 and newer, PTX ISA 7.8): a launch groups its blocks into
//! clusters of up to 8 (16 with the non-portable size), which the GPU runs at once on one GPC;
//! their threads can synchronise through the cluster barrier and reach each other's shared
//! memory (distributed shared memory, DSMEM).
//!
//! The protocol for an exchange: each block writes its value to its own shared memory; every
//! thread [`arrive`]s at the cluster barrier (release: its earlier writes become visible) and
//! [`wait`]s (acquire: the others' writes before their arrival are visible); then any thread
//! maps a shared address into another block's window with [`map_shared`] and reads it with
//! [`load_f32`]. A block's shared memory lives only as long as the block: before it exits, a
//! second barrier must make sure no other block still reads it (arrive after the last remote
//! read, wait just before exiting, so that the work between overlaps the barrier).
//!
//! The module is compiled for the host (the simulator) and for `sm_90` PTX only: an `sm_80`
//! module must contain none of these instructions, and a kernel that uses them is compiled with
//! `#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]` as this module is.
//!
//! In the simulator ([`crate::sim::Launch::cluster`]) a cluster's blocks run together, the
//! barrier synchronises all of their threads, and the DSMEM accesses are checked for bounds,
//! races and uninitialised reads as shared memory is, and for a target block that has exited.

/// A shared-memory address in the cluster's shared window (`.shared::cluster`): a word of some
/// block of the cluster, made by [`map_shared`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterAddress(
    #[cfg(target_arch = "nvptx64")] u32,
    #[cfg(not(target_arch = "nvptx64"))] usize,
);

/// `%cluster_ctarank`: this block's rank in its cluster, `0..size()`.
#[inline(always)]
pub fn block_rank() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reading a special register.
        unsafe {
            core::arch::asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack));
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::sim::device::cluster_shape().0
    }
}

/// `%cluster_nctarank`: the number of blocks in this block's cluster (1 in a launch without
/// clusters).
#[inline(always)]
pub fn size() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reading a special register.
        unsafe {
            core::arch::asm!("mov.u32 {r}, %cluster_nctarank;", r = out(reg32) r, options(pure, nomem, nostack));
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::sim::device::cluster_shape().1
    }
}

/// `%clusterid.x`: the x index of this block's cluster in the grid of clusters (`blockIdx.x /
/// cluster width`).
#[inline(always)]
pub fn id_x() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reading a special register.
        unsafe {
            core::arch::asm!("mov.u32 {r}, %clusterid.x;", r = out(reg32) r, options(pure, nomem, nostack));
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::sim::device::cluster_shape().2 .0
    }
}

/// `barrier.cluster.arrive` (release semantics, PTX's default: the thread's earlier writes,
/// shared and distributed, are visible to the threads that complete the matching [`wait`]).
/// Does not block.
///
/// # Safety
/// Every thread of every block of the cluster arrives, then waits, the same number of times; a
/// thread does not arrive twice without a wait between.
#[inline(always)]
pub unsafe fn arrive() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract. Not `nomem`: memory accesses must not move across it.
    unsafe {
        core::arch::asm!("barrier.cluster.arrive;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::cluster_arrive();
}

/// `barrier.cluster.wait` (acquire semantics, PTX's default): blocks until every thread of the
/// cluster has arrived.
///
/// # Safety
/// As [`arrive`], which the thread called before.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn wait() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("barrier.cluster.wait;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::cluster_wait();
}

/// [`arrive`] then [`wait`]: every thread of the cluster synchronised, all writes before it
/// visible to all after it.
///
/// # Safety
/// As [`arrive`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn sync() {
    // SAFETY: forwarded contract.
    unsafe {
        arrive();
        wait();
    }
}

/// `fence.acq_rel.cluster`: orders the thread's memory accesses before it against those after
/// it for all threads of the cluster (for DSMEM handshakes through flags rather than the
/// barrier; the barrier's own release/acquire needs no fence). The simulator models no memory
/// ordering: a no-op there.
#[inline(always)]
pub fn fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence has no precondition.
    unsafe {
        core::arch::asm!("fence.acq_rel.cluster;", options(nostack));
    }
}

/// `mapa.shared::cluster`: the address of `p`, a location in this block's shared memory, in the
/// shared memory of the cluster's block `rank` (the same offset in that block's window).
///
/// # Safety
/// `p` points into this block's shared memory; `rank < size()`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn map_shared(p: *mut f32, rank: u32) -> ClusterAddress {
    #[cfg(target_arch = "nvptx64")]
    {
        let local: u64;
        let mapped: u32;
        // SAFETY: address conversions; no memory access. Shared-window addresses fit in 32 bits.
        unsafe {
            core::arch::asm!(
                "cvta.to.shared.u64 {local}, {p};",
                local = out(reg64) local,
                p = in(reg64) p,
                options(pure, nomem, nostack),
            );
            core::arch::asm!(
                "mapa.shared::cluster.u32 {mapped}, {local}, {rank};",
                mapped = out(reg32) mapped,
                local = in(reg32) local as u32,
                rank = in(reg32) rank,
                options(pure, nomem, nostack),
            );
        }
        ClusterAddress(mapped)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        ClusterAddress(crate::sim::device::map_shared(p as usize, rank))
    }
}

/// `ld.shared::cluster.f32`: float `i` from `a` (in any block of the cluster).
///
/// # Safety
/// `a` is from [`map_shared`] and float `i` past it lies in that block's shared memory; the
/// block has not exited; the write read here happened before a cluster barrier both sides
/// passed.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load_f32(a: ClusterAddress, i: usize) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let v: f32;
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "ld.shared::cluster.f32 {v}, [{a}];",
                v = out(reg32) v,
                a = in(reg32) a.0 + 4 * i as u32,
                options(nostack, readonly),
            );
        }
        v
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let host = crate::sim::device::check_cluster_access(a.0 + 4 * i, 4, crate::sim::Access::Read);
        // SAFETY: `host` was checked to be 4 bytes of a cluster block's shared memory.
        unsafe { (host as *const f32).read_unaligned() }
    }
}

/// `st.shared::cluster.f32`: stores `v` as float `i` from `a` (in any block of the cluster).
///
/// # Safety
/// As [`load_f32`]; no other thread touches the float before a cluster barrier.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store_f32(a: ClusterAddress, i: usize, v: f32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!(
            "st.shared::cluster.f32 [{a}], {v};",
            a = in(reg32) a.0 + 4 * i as u32,
            v = in(reg32) v,
            options(nostack),
        );
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let host = crate::sim::device::check_cluster_access(a.0 + 4 * i, 4, crate::sim::Access::Write);
        // SAFETY: `host` was checked to be 4 bytes of a cluster block's shared memory.
        unsafe { (host as *mut f32).write_unaligned(v) }
    }
}
