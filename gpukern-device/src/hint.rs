//! Hints to the compiler that change no value.

/// `x`, as a value the compiler must compute again where this call stands.
///
/// An inline `mov.b32` that LLVM may neither hoist out of a loop nor merge with another call
/// (it is not `pure`). Values derived from it inside a loop body are therefore computed in each
/// iteration instead of being hoisted ahead of the loop and kept live in registers across it: for
/// a loop whose per-iteration addresses are cheap to recompute, that trades a few integer
/// instructions per iteration for registers (and so for occupancy). In the simulator, `x`.
#[inline(always)]
pub fn recompute(x: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: a register move; no memory, no other effect.
        unsafe {
            core::arch::asm!("mov.b32 {out}, {x};", out = out(reg32) out, x = in(reg32) x, options(nomem, nostack));
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x
    }
}

/// [`recompute`] for a pointer (`mov.b64`). The result is a generic address to LLVM even where
/// `p` was known to point to shared memory, so pass it only where that does not matter (to an
/// instruction that converts it, as [`crate::async_copy::cp_async_16_after`] does).
#[inline(always)]
pub fn recompute_ptr<T>(p: *mut T) -> *mut T {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: *mut T;
        // SAFETY: a register move; no memory, no other effect.
        unsafe {
            core::arch::asm!("mov.b64 {out}, {p};", out = out(reg64) out, p = in(reg64) p, options(nomem, nostack));
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        p
    }
}
