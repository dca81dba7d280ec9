//! Bulk copies (`cp.async.bulk`, sm_90, PTX ISA 8.0): one thread asks the copy engine for a
//! contiguous range of global memory to be copied into shared memory, completing on an
//! [`crate::mbarrier`], with no registers or per-thread instructions per byte. Where
//! [`crate::tma`] copies a 2-D box described by a tensor map, this copies plain bytes: a whole
//! row of a matrix, say, for the kernels that stream rows through a ring of shared-memory slots.
//!
//! PTX ISA 8.0 is what the `sm_90a` module is built with (the `sm_90` one is 7.8): call it only
//! from code under `#[cfg(target_feature = "sm_90a")]` on the GPU, as [`crate::wgmma`].
//!
//! In the simulator the copy is done when issued, word by word through checked loads of the
//! source and writes of the asynchronous proxy into shared memory (bounds-checked; ordered by the
//! barrier, which the race checker does not model, as for [`crate::tma`]), then counted down on
//! the barrier.

/// Copies `bytes` bytes from `src` (global memory) to `dst` (this block's shared memory),
/// completing `bytes` on `bar`
/// (`cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`). Issued by one thread.
///
/// # Safety
/// * `src` and `dst` are 16-byte aligned and `bytes` a multiple of 16; `src` points to `bytes`
///   readable bytes of global memory, `dst` to `bytes` of this block's shared memory that
///   nothing reads or writes until a wait on `bar` for this phase (and, if other threads read
///   it before, a block barrier or barrier phase ordered those reads before this call).
/// * `bar` is an initialised barrier of this block whose current phase expects these bytes
///   ([`crate::mbarrier::arrive_expect_tx`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn load<T>(dst: *mut T, src: *const T, bytes: u32, bar: *mut u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        let dst = crate::async_copy::shared_address(dst);
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract. Not `nomem`: the copy writes shared memory.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{src}], {bytes}, [{bar}];",
                dst = in(reg32) dst,
                src = in(reg64) src,
                bytes = in(reg32) bytes,
                bar = in(reg32) bar,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        assert!(
            bytes % 16 == 0 && (src as usize) % 16 == 0 && (dst as usize) % 16 == 0,
            "bulk copy of {bytes} bytes from {src:p} to {dst:p}: both 16-byte aligned, a multiple of 16 bytes"
        );
        let (src, dst) = (src.cast::<u32>(), dst.cast::<u8>());
        for i in 0..bytes as usize / 4 {
            // SAFETY: inside the source (the caller's contract; the load is checked).
            let word: u32 = unsafe { crate::mem::load(src, i) };
            // A write by the asynchronous proxy: checked for bounds, ordered by the barrier.
            let host = crate::sim::device::check_proxy_write(dst.wrapping_add(4 * i) as usize, 0, 4);
            // SAFETY: the simulator checked that `host` holds 4 bytes of shared memory.
            unsafe { (host as *mut u32).write_unaligned(word) };
        }
        // SAFETY: the caller's contract.
        unsafe { crate::mbarrier::sim::update(bar, |s| s.complete_tx(bytes)) };
    }
}

/// Orders this thread's earlier shared-memory accesses (and, after a block barrier, the other
/// threads') before its later bulk copies into the same memory (`fence.proxy.async.shared::cta`):
/// what the thread that refills a slot calls before the copy. Nothing in the simulator.
#[inline(always)]
pub fn fence_shared() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence only.
    unsafe {
        core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack));
    }
}
