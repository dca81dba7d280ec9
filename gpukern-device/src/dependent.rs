//! Programmatic dependent launches (sm_90): a kernel launched right after another on the same
//! stream as *dependent* (gpukern's `Module::dependent`, `cuLaunchKernelEx` with
//! `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`) may have its blocks start before the
//! kernel before it (the *prerequisite*) has finished, so that its launch latency and start-up
//! overlap the prerequisite's last blocks.
//!
//! * The dependent kernel calls [`wait`] before it reads anything the prerequisite writes (or
//!   writes anything the prerequisite reads): `wait` returns once the prerequisite grid has
//!   completed and its memory operations are visible. Call it first thing unless the work before
//!   it touches none of the prerequisite's buffers.
//! * The prerequisite may call [`launch_dependents`] when the dependent's blocks may be
//!   scheduled (for example after its main loop, before its epilogue); without it the dependent
//!   is scheduled as its blocks exit. It changes when the dependent starts, never what `wait`
//!   waits for.
//!
//! On a GPU before sm_90 and in a launch that is not dependent both are no-ops: a kernel that
//! calls them is correct launched either way. The simulator runs launches one after another in
//! stream order; in a dependent launch ([`crate::sim::Launch::dependent`]) it reports a thread
//! that reads or writes a global buffer before its [`wait`].

/// Waits until the prerequisite grid of a dependent launch has completed and its memory is
/// visible (`griddepcontrol.wait`); returns at once in a launch that is not dependent. Every
/// thread that reads or writes the prerequisite's buffers calls it before doing so.
#[inline(always)]
pub fn wait() {
    #[cfg(all(
        target_arch = "nvptx64",
        any(target_feature = "sm_90", target_feature = "sm_90a")
    ))]
    // SAFETY: a wait on the launch's dependency; no memory of the program is named.
    unsafe {
        core::arch::asm!("griddepcontrol.wait;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::dependent_wait();
}

/// Lets the dependent launch queued after this kernel schedule its blocks
/// (`griddepcontrol.launch_dependents`): once every block of this grid has called it or exited.
/// Has no effect on what the dependent's [`wait`] waits for (the whole grid's completion).
#[inline(always)]
pub fn launch_dependents() {
    #[cfg(all(
        target_arch = "nvptx64",
        any(target_feature = "sm_90", target_feature = "sm_90a")
    ))]
    // SAFETY: a scheduling hint for the dependent launch; no memory is touched.
    unsafe {
        core::arch::asm!("griddepcontrol.launch_dependents;", options(nostack, nomem));
    }
}
