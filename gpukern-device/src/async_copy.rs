//! Asynchronous copies from global to shared memory (`cp.async`, sm_80 and newer): the copy
//! runs in the background while the thread goes on, so a kernel can fetch the tile after next
//! while it computes on this one, without staging the data in registers.
//!
//! The protocol, per thread: issue copies ([`cp_async_16`], [`cp_async_4`]), close them into a
//! group with [`commit_group`], and before reading the destination wait with
//! [`wait_group::<N>`](wait_group) until at most `N` of this thread's groups are still in flight;
//! then a block barrier makes every thread's completed copies visible to the whole block.
//!
//! [`cp_async_16_after`] and [`wait_all`] serve kernels whose threads each read back only the
//! slots they copied themselves (the persistent softmax kernels): there the wait alone suffices,
//! no barrier.
//!
//! In the simulator a copy reads its source (a checked load) when issued and lands in shared
//! memory only at the wait that retires its group, as late as the GPU may land it: until then
//! the destination words are pending, and any access to them (by any thread, the issuer
//! included, or a second copy into them) is reported. A barrier completes no copy. The landed
//! words count as the issuing thread's write in the barrier interval of the wait, so another
//! thread that reads them before a barrier after that wait is reported as a shared-memory race.
//! The simulator also checks the copies' bounds and alignment, and that the destination is
//! shared memory.

use crate::vector::F4;

/// The shared-memory address of `p` (`cvta.to.shared`), as a `cp.async` destination operand
/// (and an `ldmatrix` source, [`crate::mma`]).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn shared_address<T>(p: *mut T) -> u32 {
    let out: u64;
    // SAFETY: an address conversion; no memory access.
    unsafe {
        core::arch::asm!(
            "cvta.to.shared.u64 {out}, {p};",
            out = out(reg64) out,
            p = in(reg64) p,
            options(pure, nomem, nostack),
        );
    }
    // Shared-window addresses fit in 32 bits.
    out as u32
}

/// Copies 16 bytes from `src` (global memory) to `dst` (shared memory) in the background: the
/// first `src_bytes` bytes from `src`, and zeros for the rest (`src_bytes = 0` writes 16 zero
/// bytes and reads nothing, which is how a tile is zero-filled past a matrix edge).
///
/// On the GPU `cp.async.cg.shared.global [dst], [src], 16, src_bytes` (cached in L2 only: the
/// data is used from shared memory, not from L1).
///
/// # Safety
/// * `dst` and `src` are 16-byte aligned; `dst` points into the block's shared memory, `src`
///   into global memory with `src_bytes` readable bytes (`src_bytes <= 16`, a multiple of 4 for
///   the simulator); with `src_bytes = 0` `src` must still be a valid global address.
/// * Nothing reads `dst` before this thread's [`wait_group`] covering the copy and, for other
///   threads, a barrier after it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cp_async_16(dst: *mut f32, src: *const f32, src_bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let dst = shared_address(dst);
        // SAFETY: the caller's contract. Not `nomem`: the copy writes shared memory that later
        // loads read, so the compiler must keep it before them.
        unsafe {
            core::arch::asm!(
                "cp.async.cg.shared.global [{dst}], [{src}], 16, {n};",
                dst = in(reg32) dst,
                src = in(reg64) src,
                n = in(reg32) src_bytes,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        assert!(
            dst.cast::<u128>().is_aligned() && src.cast::<u128>().is_aligned(),
            "misaligned 16-byte cp.async from {src:p} to {dst:p}"
        );
        // SAFETY: forwarded contract.
        unsafe { sim_copy(dst, src, 4, src_bytes) }
    }
}

/// [`cp_async_16`] to a destination given as a shared-memory address (a
/// [`crate::wgmma::shared_address`] plus a byte offset), 16 bytes from `src` where `read`, else
/// 16 zero bytes (`src` not read): a kernel that copies many rows into one tile converts the
/// tile's start once, and the rows' offsets fold into the instruction's immediate, where each
/// generic pointer took its own 64-bit address arithmetic and conversion; and the zero fill is a
/// predicate (PTX's `ignore-src`, on sm_90 and newer), not a source size the address must carry
/// (the sm_80 module, PTX ISA 7.0, passes a source size of 16 or 0). On sm_90 the copy also asks
/// L2 to fetch the whole 128-byte line (`.L2::128B`), which made decode attention's copies
/// faster (BENCHMARKS.md, twelfth round).
///
/// # Safety
/// As [`cp_async_16`] with `src_bytes` 16 where `read` and 0 elsewhere; `dst` a 16-byte aligned
/// shared-memory address of the block's shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cp_async_16_shared(dst: u32, src: *const f32, read: bool) {
    #[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
    {
        // SAFETY: the caller's contract, as `cp_async_16`'s.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred zero; setp.eq.u32 zero, {read}, 0; cp.async.cg.shared.global.L2::128B [{dst}], [{src}], 16, zero; }}",
                dst = in(reg32) dst,
                src = in(reg64) src,
                read = in(reg32) read as u32,
                options(nostack),
            );
        }
    }
    // `ignore-src` needs PTX ISA 7.5; the sm_80 module is 7.0: a source size there.
    #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_90")))]
    {
        // SAFETY: the caller's contract, as `cp_async_16`'s.
        unsafe {
            core::arch::asm!(
                "cp.async.cg.shared.global [{dst}], [{src}], 16, {n};",
                dst = in(reg32) dst,
                src = in(reg64) src,
                n = in(reg32) if read { 16u32 } else { 0 },
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let dst = crate::sim::device::shared_base()
            .wrapping_add(dst as usize)
            .cast::<f32>();
        // SAFETY: forwarded contract: `dst` is the same shared-memory word as on the GPU.
        unsafe { cp_async_16(dst, src, if read { 16 } else { 0 }) }
    }
}

/// Copies 4 bytes from `src` (global memory) to `dst` (shared memory) in the background, or
/// writes a zero and reads nothing when `src_bytes` is 0: the form for operands whose rows are
/// not 16-byte aligned.
///
/// On the GPU `cp.async.ca.shared.global [dst], [src], 4, src_bytes` (4-byte copies must go
/// through L1).
///
/// # Safety
/// As [`cp_async_16`], with 4-byte alignment and `src_bytes` either 0 or 4.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cp_async_4(dst: *mut f32, src: *const f32, src_bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let dst = shared_address(dst);
        // SAFETY: the caller's contract (see `cp_async_16`).
        unsafe {
            core::arch::asm!(
                "cp.async.ca.shared.global [{dst}], [{src}], 4, {n};",
                dst = in(reg32) dst,
                src = in(reg64) src,
                n = in(reg32) src_bytes,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: forwarded contract.
        unsafe { sim_copy(dst, src, 1, src_bytes) }
    }
}

/// The simulator's copy: `words` floats to `dst`, the first `src_bytes / 4` read from `src`
/// (checked loads, now), the rest zero; the destination is pending until the wait that retires
/// the copy's group.
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
unsafe fn sim_copy(dst: *mut f32, src: *const f32, words: usize, src_bytes: u32) {
    let src_bytes = src_bytes as usize;
    assert!(
        src_bytes <= 4 * words && src_bytes & 3 == 0,
        "cp.async of {} bytes with a source size of {src_bytes} bytes (the simulator takes multiples of 4)",
        4 * words
    );
    crate::sim::device::async_copy(dst as usize, src as usize, words, src_bytes);
}

/// Closes this thread's copies issued since the last commit into one group
/// (`cp.async.commit_group`). A commit with no copy makes an empty group, which completes at
/// once; committing on every pipeline step, copies or not, keeps the group count uniform.
#[inline(always)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands; orders this thread's earlier copies into a group.
    unsafe {
        core::arch::asm!("cp.async.commit_group;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::async_commit();
}

/// Waits until at most `N` of this thread's committed groups are still in flight
/// (`cp.async.wait_group N`): with `N = 0`, until all have landed. Makes this thread's copies
/// visible to itself; other threads see them after a barrier that follows the wait.
#[inline(always)]
pub fn wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands. Not `nomem`: loads of the copied data must stay after it.
    unsafe {
        core::arch::asm!("cp.async.wait_group {n};", n = const N, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::async_wait(Some(N as usize));
}

/// [`wait_group`] with the count as an argument, for kernels whose pipeline depth is a const
/// generic (`wait_group::<{ STAGES - 2 }>` is not expressible in stable Rust). `n` is a constant
/// wherever it is used, so after inlining the `match` folds to the one `cp.async.wait_group n`;
/// a count above 7 waits for everything (`n = 0`), which is always correct, only slower.
#[inline(always)]
pub fn wait_pending(n: usize) {
    match n {
        1 => wait_group::<1>(),
        2 => wait_group::<2>(),
        3 => wait_group::<3>(),
        4 => wait_group::<4>(),
        5 => wait_group::<5>(),
        6 => wait_group::<6>(),
        7 => wait_group::<7>(),
        _ => wait_group::<0>(),
    }
}

/// [`cp_async_16`] of a whole 16-byte vector, issued only once `after` is known.
///
/// `after` is an input of the instruction and nothing else: pass a value computed from what the
/// thread last read from `dst`, and the compiler cannot issue the copy before that read (the
/// write-after-read order on a reused slot is then a data dependence in the program, not left to
/// the scheduler).
///
/// # Safety
/// As [`cp_async_16`] with `src_bytes = 16`; nothing reads `dst` until this thread's
/// [`wait_all`] (and, for other threads, a barrier after it).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cp_async_16_after(dst: *mut F4, src: *const F4, after: f32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let dst = shared_address(dst);
        // SAFETY: the caller's contract (see `cp_async_16`); `after` only orders the asm.
        unsafe {
            core::arch::asm!(
                "cp.async.cg.shared.global [{dst}], [{src}], 16; // after {after}",
                dst = in(reg32) dst,
                src = in(reg64) src,
                after = in(reg32) after,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = after;
        // SAFETY: forwarded contract.
        unsafe { cp_async_16(dst.cast(), src.cast(), 16) }
    }
}

/// Waits until every copy this thread started has landed in shared memory
/// (`cp.async.wait_all`: a commit of the pending copies and a wait for all groups).
#[inline(always)]
pub fn wait_all() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: waits for this thread's own copies; not `nomem`, so that the loads of the copied
    // data stay after it.
    unsafe {
        core::arch::asm!("cp.async.wait_all;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::async_wait(None);
}
