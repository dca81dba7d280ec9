//! `setmaxnreg`: a warpgroup's registers per thread raised or lowered at run time, so that the
//! warpgroups of a warp-specialised kernel share the register file unevenly.

/// `setmaxnreg.inc.sync.aligned.u32 N`: the warpgroup asks for `N` registers per thread (a
/// multiple of 8, 24 to 256), taken from those other warpgroups released. Warpgroup-collective;
/// ptxas honours it only in an entry with launch bounds (`#[kernel(launch_bounds(..))]`), else
/// it warns (C7508) and ignores it. The simulator keeps the block's registers: an increase waits
/// until the others' decreases cover it, and one they never cover is reported (on the GPU the
/// warpgroup would wait forever).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub fn setmaxnreg_inc<const N: u32>() {
    const {
        assert!(
            N % 8 == 0 && N >= 24 && N <= 256,
            "setmaxnreg takes 24..=256, a multiple of 8"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a register-allocation hint, reached by the whole warpgroup (the caller's design).
    unsafe {
        core::arch::asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::setmaxnreg(true, N);
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: the warpgroup gives registers back, keeping `N` per
/// thread (a multiple of 8, 24 to 256). As [`setmaxnreg_inc`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub fn setmaxnreg_dec<const N: u32>() {
    const {
        assert!(
            N % 8 == 0 && N >= 24 && N <= 256,
            "setmaxnreg takes 24..=256, a multiple of 8"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `setmaxnreg_inc`.
    unsafe {
        core::arch::asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::setmaxnreg(false, N);
}
