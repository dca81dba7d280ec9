//! The block's shared memory.
//!
//! All shared memory in gpukern is dynamic: its size in bytes is the launch's
//! `shared_mem_bytes`, chosen by the host wrapper, and each kernel documents how much it needs.

/// The start of this block's dynamic shared memory, as a pointer to `T`.
///
/// Every call in a block returns the same address. Reading or writing past the launch's
/// `shared_mem_bytes` is out of bounds (the simulator reports it).
#[inline(always)]
pub fn dynamic<T>() -> *mut T {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::sim::device::shared_base().cast::<T>()
    }
}
