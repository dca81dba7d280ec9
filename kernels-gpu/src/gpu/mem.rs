//! Loads and stores through raw pointers, the only way kernels touch memory.
//!
//! On the GPU these are plain pointer reads and writes. In the simulator each access is
//! checked: the pointer must lie in a buffer the launch registered (or in the block's shared
//! memory), the element must be inside it, and shared-memory accesses are tracked for races
//! and reads of memory nobody wrote.

/// Reads `p[i]`.
///
/// # Safety
/// `p.add(i)` must point to an initialised `T` in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load<T: Copy>(p: *const T, i: usize) -> T {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::check_access(p as usize, i, core::mem::size_of::<T>(), crate::sim::Access::Read);
    // SAFETY: the caller guarantees `p.add(i)` is valid (checked above in the simulator).
    unsafe { *p.add(i) }
}

/// Writes `v` to `p[i]`.
///
/// # Safety
/// `p.add(i)` must point to writable memory for one `T` in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store<T: Copy>(p: *mut T, i: usize, v: T) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::check_access(
        p as usize,
        i,
        core::mem::size_of::<T>(),
        crate::sim::Access::Write,
    );
    // SAFETY: the caller guarantees `p.add(i)` is valid and writable.
    unsafe { *p.add(i) = v }
}
