//! Copies from global to shared memory that do not pass through registers (`cp.async`, sm_80
//! and later): a thread starts a 16-byte copy, keeps computing, and waits for its copies only
//! when it needs the data.
//!
//! Scope: thread. [`wait_all`] waits for the calling thread's own copies and makes them visible
//! to that thread only; a kernel whose threads read each other's copies needs a barrier after
//! the wait, one whose threads each read back only what they copied needs none.
//!
//! In the simulator a copy happens at once (a checked 16-byte read, then a checked shared-memory
//! write), so the waits have nothing to do.

use crate::gpu::mem;
use crate::gpu::vector::F4;

/// Starts copying the 16 bytes at `src` (global memory) to `dst` (shared memory), once `after`
/// is known.
///
/// `cp.async.cg.shared.global` with a 16-byte size: the data goes through L2 only (not L1) and
/// lands in shared memory without using a register. `after` is an input of the instruction and
/// nothing else: pass a value computed from what the thread last read from `dst`, and the copy
/// cannot be issued before that read completed (the write-after-read order on the slot is then a
/// data dependence, not a question of how the hardware orders a shared-memory load and an
/// asynchronous copy).
///
/// # Safety
/// `src` points to 16 readable bytes of global memory and `dst` to 16 writable bytes of the
/// block's shared memory, both 16-byte aligned; nothing reads `dst` until this thread's
/// [`wait_all`] (and, for other threads, a barrier after it).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn copy16(dst: *mut F4, src: *const F4, after: f32) {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: the caller guarantees both addresses; the generic shared address is turned
        // into a 32-bit `.shared` one and the generic global one into a `.global` one. Not
        // `nomem`: the compiler must keep it in order with the loads of `dst` around it.
        unsafe {
            core::arch::asm!(
                "cvta.to.shared.u64 {s64}, {dst};",
                "cvt.u32.u64 {s32}, {s64};",
                "cvta.to.global.u64 {g}, {src};",
                "cp.async.cg.shared.global [{s32}], [{g}], 16; // after {after}",
                dst = in(reg64) dst,
                src = in(reg64) src,
                s64 = out(reg64) _,
                s32 = out(reg32) _,
                g = out(reg64) _,
                after = in(reg32) after,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = after;
        assert!(src.is_aligned(), "misaligned 16-byte cp.async source at {src:p}");
        assert!(
            dst.is_aligned(),
            "misaligned 16-byte cp.async destination at {dst:p}"
        );
        // SAFETY: the caller guarantees both accesses (the simulator checks their bounds).
        unsafe { mem::store(dst, 0, mem::load(src, 0)) }
    }
}

/// Waits until every copy this thread started with [`copy16`] has landed in shared memory.
///
/// `cp.async.wait_all` (a commit of the pending copies and a wait for all groups).
#[inline(always)]
pub fn wait_all() {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: waits for this thread's own copies; not `nomem`, so that the loads of the
        // copied data stay after it.
        unsafe {
            core::arch::asm!("cp.async.wait_all;", options(nostack));
        }
    }
}
