//! Asynchronous copies from global to shared memory (`cp.async`, sm_80 and newer): a thread
//! starts a copy and goes on computing; the data lands in shared memory without passing through
//! its registers. Copies are gathered into groups ([`commit_group`]), and [`wait_group`] waits
//! until at most `N` of this thread's groups are still in flight.
//!
//! A copy is only this thread's: before other threads read the data, the block must pass a
//! barrier after the issuing thread's [`wait_group`]. The usual multi-stage pipeline is
//! `wait_group::<STAGES - 2>(); sync_threads(); issue the next stage; commit_group(); compute`.
//!
//! In the simulator a copy is done at once, as a checked load from global and a store to shared
//! memory at the point of the call; [`commit_group`] and [`wait_group`] do nothing. So the
//! simulator checks bounds, alignment and shared-memory races between barriers, but not a read
//! of a copy's destination before the thread's own `wait_group`.

#[cfg(not(target_arch = "nvptx64"))]
use crate::gpu::mem;

/// Copies 16 bytes from global `src` to shared `dst`: the first `src_bytes` (0, 4, 8, 12 or 16)
/// from `src`, the rest filled with zeros (`cp.async.cg`, which bypasses L1).
///
/// # Safety
/// `dst` is 16-byte aligned and points to 16 bytes of this block's shared memory; `src` is
/// 16-byte aligned and points to device memory of which the first `src_bytes` are readable.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cp_async_16(dst: *mut f32, src: *const f32, src_bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: per the contract; the asm writes shared memory (no `nomem`), so the compiler keeps
    // it ordered with the kernel's other memory accesses.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .u64 s64, g64;",
            ".reg .u32 s32;",
            "cvta.to.shared.u64 s64, {dst};",
            "cvt.u32.u64 s32, s64;",
            "cvta.to.global.u64 g64, {src};",
            "cp.async.cg.shared.global [s32], [g64], 16, {n};",
            "}}",
            dst = in(reg64) dst,
            src = in(reg64) src,
            n = in(reg32) src_bytes,
            options(nostack),
        );
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        assert!(
            dst.cast::<crate::gpu::vector::F4>().is_aligned()
                && src.cast::<crate::gpu::vector::F4>().is_aligned(),
            "misaligned 16-byte cp.async ({src:p} -> {dst:p})"
        );
        for j in 0..4 {
            // SAFETY: the contract (checked by the simulator's accesses).
            unsafe {
                let v = if 4 * (j as u32) < src_bytes {
                    mem::load(src, j)
                } else {
                    0.0
                };
                mem::store(dst, j, v);
            }
        }
    }
}

/// Copies 4 bytes from global `src` to shared `dst`, or writes a zero there when `src_bytes` is 0
/// (`cp.async.ca`, 4 bytes: for rows that are not 16-byte aligned).
///
/// # Safety
/// `dst` points to a float of this block's shared memory; `src` points to a readable float when
/// `src_bytes` is 4.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cp_async_4(dst: *mut f32, src: *const f32, src_bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: per the contract, as `cp_async_16`.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .u64 s64, g64;",
            ".reg .u32 s32;",
            "cvta.to.shared.u64 s64, {dst};",
            "cvt.u32.u64 s32, s64;",
            "cvta.to.global.u64 g64, {src};",
            "cp.async.ca.shared.global [s32], [g64], 4, {n};",
            "}}",
            dst = in(reg64) dst,
            src = in(reg64) src,
            n = in(reg32) src_bytes,
            options(nostack),
        );
    }
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the contract (checked by the simulator's accesses).
    unsafe {
        let v = if src_bytes >= 4 { mem::load(src, 0) } else { 0.0 };
        mem::store(dst, 0, v);
    }
}

/// Closes this thread's current group of copies (`cp.async.commit_group`); a group may be empty.
#[inline(always)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands; orders this thread's outstanding copies into a group.
    unsafe {
        core::arch::asm!("cp.async.commit_group;", options(nostack));
    }
}

/// Waits until at most `N` of this thread's committed groups are still in flight
/// (`cp.async.wait_group N`): the copies of every older group have landed in shared memory.
#[inline(always)]
pub fn wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands; a wait. Not `nomem`: shared-memory reads must not move above it.
    unsafe {
        core::arch::asm!("cp.async.wait_group {n};", n = const N, options(nostack));
    }
}
