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
//! source and writes of the asynchronous proxy into shared memory, then counted down on the
//! barrier; its alignment, the barrier (live, init fenced), the bytes against the phase's
//! `expect_tx`, and every later touch of the destination before the thread waited for the phase
//! are checked as for [`crate::tma`].

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
        use crate::sim::device;
        check_alignment(bytes, src as usize, dst as usize, |at| {
            format!("a bulk copy of {bytes} bytes from {src:p} to shared byte {at}")
        });
        let target = device::copy_target(bar as usize);
        let (src, dst) = (src.cast::<u32>(), dst as usize);
        for i in 0..bytes as usize / 4 {
            // SAFETY: inside the source (the caller's contract; the load is checked).
            let word: u32 = unsafe { crate::mem::load(src, i) };
            device::copy_write(dst + 4 * i, &word.to_ne_bytes(), target, None);
        }
        device::copy_complete(bar as usize, bytes);
    }
}

/// Adds `bytes / 4` floats from `src` (this block's shared memory) into as many at `dst` (global
/// memory), float `i` into `dst[i]`, each add atomic at device scope
/// (`cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32`): one thread hands a whole
/// tile of partial sums to the copy engine, where [`crate::atomic::reduce_add`] takes an
/// instruction per float and thread. Issued by one thread; completes in the background as
/// [`crate::tma::store_2d`] does: commit it ([`commit_group`]) and wait for it
/// ([`wait_group_read`]) before `src` is written again, and ([`wait_group`]) before the kernel
/// relies on the sums or returns. Adds from several threads or blocks into one float land in no
/// fixed order. The GPU's f32 add flushes subnormals to zero; the simulator performs the adds
/// when the call is issued, as checked atomic adds, and checks `src` as a store's source.
///
/// # Safety
/// * `src` and `dst` are 16-byte aligned and `bytes` a multiple of 16; `src` holds `bytes` of
///   this block's shared memory, written by this thread or by others before a block or named
///   barrier, each writer having called [`fence_shared`] after its writes.
/// * `dst` points to `bytes` of writable global memory that nothing accesses other than by
///   atomic adds until the reduction completes.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_add_f32(dst: *mut f32, src: *const f32, bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let src = crate::async_copy::shared_address(src.cast_mut());
        // SAFETY: the caller's contract. Not `nomem`: the copy reads shared memory and writes
        // global memory.
        unsafe {
            core::arch::asm!(
                "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{dst}], [{src}], {bytes};",
                dst = in(reg64) dst,
                src = in(reg32) src,
                bytes = in(reg32) bytes,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        use crate::sim::device;
        check_alignment(bytes, dst as usize, src as usize, |at| {
            format!("a bulk reduction of {bytes} bytes from shared byte {at} to {dst:p}")
        });
        device::check_async_read(src as usize, bytes as usize, device::AsyncRead::Store);
        device::bulk_store(src as usize, bytes as usize);
        for i in 0..bytes as usize / 4 {
            // SAFETY: inside the source and the destination (the caller's contract; both
            // accesses are checked).
            unsafe {
                let v: f32 = crate::mem::load(src, i);
                crate::atomic::reduce_add(dst, i, v, crate::atomic::Scope::Device);
            }
        }
    }
}

/// The simulator's alignment rule of a bulk operation between global address `global` and
/// shared address `shared`: both 16-byte aligned, `bytes` a multiple of 16; else a
/// `tma-alignment` report that begins with `what(shared byte offset)`.
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
fn check_alignment(bytes: u32, global: usize, shared: usize, what: impl FnOnce(usize) -> String) {
    use crate::sim::{device, hopper::violation, Rule};
    if bytes % 16 != 0 || global % 16 != 0 || shared % 16 != 0 {
        let at = shared.wrapping_sub(device::shared_base() as usize);
        device::fail(violation(
            Rule::TmaAlignment,
            format!(
                "{}: both sides 16-byte aligned and a multiple of 16 bytes",
                what(at)
            ),
        ));
    }
}

/// Orders this thread's earlier shared-memory accesses (and, after a block barrier, the other
/// threads') before its later bulk copies into the same memory, and its earlier stores before
/// later reads by the copy engine or the tensor cores (`fence.proxy.async.shared::cta`): what the
/// thread that refills a slot calls before the copy, and every thread that wrote a tile a
/// [`crate::tma::store_2d`] or a `wgmma` reads, after its stores. The simulator counts it (a
/// store the asynchronous proxy reads with no fence of its writer since is reported).
#[inline(always)]
pub fn fence_shared() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence only.
    unsafe {
        core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::proxy_fence();
}

/// Closes this thread's bulk stores ([`crate::tma::store_2d`]) issued since the last commit into
/// a bulk async-group (`cp.async.bulk.commit_group`; with none, an empty group). The simulator,
/// which performs a store when it is issued, counts the groups: a store's source in shared
/// memory may not be written again, nor the thread return, before a wait covers its group.
#[inline(always)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: bookkeeping of this thread's bulk groups.
    unsafe {
        core::arch::asm!("cp.async.bulk.commit_group;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::bulk_commit();
}

/// Waits until at most `N` of this thread's bulk async-groups still read their shared-memory
/// sources (`cp.async.bulk.wait_group.read N`): the others' sources may be written again (by
/// this thread, or by another after a block barrier), as the simulator checks.
#[inline(always)]
pub fn wait_group_read<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a wait on this thread's own bulk groups.
    unsafe {
        core::arch::asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::bulk_wait(N);
}

/// Waits until at most `N` of this thread's bulk async-groups are incomplete
/// (`cp.async.bulk.wait_group N`): their writes to global memory are done, and their reads (as
/// [`wait_group_read`]).
#[inline(always)]
pub fn wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a wait on this thread's own bulk groups.
    unsafe {
        core::arch::asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::bulk_wait(N);
}
