//! Four floats moved as one 16-byte access (`ld.v4.f32` / `st.v4.f32` on the GPU): a quarter of
//! the load/store instructions of four scalar accesses, and a whole 16-byte word per thread of a
//! warp, which is what a coalesced global access and a conflict-free shared access want. Also
//! two floats as one 8-byte store ([`F2`], for the TF32 matmul's accumulator pairs).

use crate::mem;

/// Four consecutive floats, 16-byte aligned so that the compiler emits one vector access.
///
/// `[f32; 4]` alone is only 4-byte aligned, which makes LLVM split the access into four.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct F4(pub [f32; 4]);

impl F4 {
    /// `[0.0; 4]`.
    pub const ZERO: F4 = F4([0.0; 4]);
}

/// Reads `p[i..i + 4]` as one 16-byte access.
///
/// # Safety
/// `p.add(i)` is 16-byte aligned and points to four initialised floats in global or shared memory.
/// (The simulator checks the alignment, which a GPU would punish with a misaligned-address fault.)
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load4(p: *const f32, i: usize) -> F4 {
    let q = p.wrapping_add(i).cast::<F4>();
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(q.is_aligned(), "misaligned 16-byte read at {q:p}");
    // SAFETY: the caller guarantees four floats at an aligned `q` (bounds checked in the simulator).
    unsafe { mem::load(q, 0) }
}

/// Writes `v` to `p[i..i + 4]` as one 16-byte access.
///
/// # Safety
/// `p.add(i)` is 16-byte aligned and points to four writable floats in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store4(p: *mut f32, i: usize, v: F4) {
    let q = p.wrapping_add(i).cast::<F4>();
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(q.is_aligned(), "misaligned 16-byte write at {q:p}");
    // SAFETY: the caller guarantees four writable floats at an aligned `q`.
    unsafe { mem::store(q, 0, v) }
}

/// [`load4`] with the streaming cache hint (`ld.global.cs.v4.f32`: cache, evict first), for
/// data read once: its lines are the first the L1 and L2 evict, so a stream of them displaces
/// less of what the caches hold. The hint changes no value; the simulator treats it as [`load4`].
///
/// # Safety
/// As [`load4`], and `p` points to global memory (not shared).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load4_streaming(p: *const f32, i: usize) -> F4 {
    #[cfg(target_arch = "nvptx64")]
    {
        let q = p.wrapping_add(i);
        let (a, b, c, d): (f32, f32, f32, f32);
        // SAFETY: the caller guarantees four floats of global memory at a 16-byte aligned `q`;
        // a generic address of global memory converts to a global one with `cvta.to.global`.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ld.global.cs.v4.f32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
                q = in(reg64) q,
                a = out(reg32) a,
                b = out(reg32) b,
                c = out(reg32) c,
                d = out(reg32) d,
                options(readonly, nostack, preserves_flags),
            );
        }
        F4([a, b, c, d])
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: forwarded contract.
        unsafe { load4(p, i) }
    }
}

/// [`store4`] with the streaming cache hint (`st.global.cs.v4.f32`: evict first), for results no
/// kernel reads soon. The simulator treats it as [`store4`].
///
/// # Safety
/// As [`store4`], and `p` points to global memory (not shared).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store4_streaming(p: *mut f32, i: usize, v: F4) {
    #[cfg(target_arch = "nvptx64")]
    {
        let q = p.wrapping_add(i);
        let [a, b, c, d] = v.0;
        // SAFETY: the caller guarantees four writable floats of global memory at a 16-byte
        // aligned `q`.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u64 g; cvta.to.global.u64 g, {q}; st.global.cs.v4.f32 [g], {{{a}, {b}, {c}, {d}}}; }}",
                q = in(reg64) q,
                a = in(reg32) a,
                b = in(reg32) b,
                c = in(reg32) c,
                d = in(reg32) d,
                options(nostack, preserves_flags),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: forwarded contract.
        unsafe { store4(p, i, v) }
    }
}

/// Two consecutive floats, 8-byte aligned so that the compiler emits one 8-byte access.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct F2(pub [f32; 2]);

/// Reads `p[i..i + 2]` as one 8-byte access.
///
/// # Safety
/// `p.add(i)` is 8-byte aligned and points to two initialised floats in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load2(p: *const f32, i: usize) -> F2 {
    let q = p.wrapping_add(i).cast::<F2>();
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(q.is_aligned(), "misaligned 8-byte read at {q:p}");
    // SAFETY: the caller guarantees two floats at an aligned `q` (bounds checked in the simulator).
    unsafe { mem::load(q, 0) }
}

/// Writes `v` to `p[i..i + 2]` as one 8-byte access.
///
/// # Safety
/// `p.add(i)` is 8-byte aligned and points to two writable floats in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store2(p: *mut f32, i: usize, v: F2) {
    let q = p.wrapping_add(i).cast::<F2>();
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(q.is_aligned(), "misaligned 8-byte write at {q:p}");
    // SAFETY: the caller guarantees two writable floats at an aligned `q`.
    unsafe { mem::store(q, 0, v) }
}
