//! Loads and stores through raw pointers, the only way kernels touch memory.
//!
//! On the GPU these are plain pointer reads and writes. In the simulator each access is
//! checked: the pointer must lie in a buffer the launch registered (or in the block's shared
//! memory), the element must be inside it and aligned to its type (`align_of::<T>()`, as the
//! GPU requires), and accesses are tracked for races (shared memory and
//! output buffers), reads of shared memory nobody wrote, and reads of `cp.async` slots not waited
//! for, and stores of `wgmma` accumulators still in flight ([`crate::wgmma`]). The pointers the
//! simulator hands a kernel are simulated device addresses, which these
//! helpers translate: a kernel must touch memory through them, never by dereferencing a pointer.

/// Reads `p[i]`.
///
/// # Safety
/// `p.add(i)` must point to an initialised `T` in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load<T: Copy>(p: *const T, i: usize) -> T {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let host = crate::sim::device::check_access(
            p as usize,
            i,
            core::mem::size_of::<T>(),
            crate::sim::Access::Read,
        );
        let q = p.wrapping_add(i);
        // A GPU faults on an access not aligned to its size (`ld.global.f32` at an odd address).
        assert!(
            q.is_aligned(),
            "misaligned {}-byte read at {q:p}",
            core::mem::size_of::<T>()
        );
        // SAFETY: the simulator checked the access and returned the host address of a whole `T`
        // inside a registered buffer or shared memory (which may be less aligned than `T`).
        unsafe { (host as *const T).read_unaligned() }
    }
    // SAFETY: the caller guarantees `p.add(i)` is valid.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        *p.add(i)
    }
}

/// Writes `v` to `p[i]`.
///
/// # Safety
/// `p.add(i)` must point to writable memory for one `T` in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store<T: Copy>(p: *mut T, i: usize, v: T) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let host = crate::sim::device::check_access(
            p as usize,
            i,
            core::mem::size_of::<T>(),
            crate::sim::Access::Write,
        );
        let q = p.wrapping_add(i);
        assert!(
            q.is_aligned(),
            "misaligned {}-byte write at {q:p}",
            core::mem::size_of::<T>()
        );
        if core::mem::size_of::<T>() == 4 && core::mem::align_of::<T>() == 4 {
            // SAFETY: a 4-byte type aligned to 4 has no padding: all 4 bytes are initialised.
            crate::sim::device::check_stored_bits(unsafe { core::mem::transmute_copy::<T, u32>(&v) });
        }
        // SAFETY: the simulator checked the access and returned the host address of a whole
        // writable `T` inside an output buffer or shared memory.
        unsafe { (host as *mut T).write_unaligned(v) }
    }
    // SAFETY: the caller guarantees `p.add(i)` is valid and writable.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        *p.add(i) = v
    }
}
