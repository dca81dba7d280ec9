//! Vectors: several consecutive elements moved as one 4-, 8- or 16-byte access, which is what a
//! memory-bound kernel needs to reach the DRAM's bandwidth (a quarter of the instructions of four
//! 4-byte accesses, a whole 16-byte word per thread of a warp: a coalesced global access and a
//! conflict-free shared one).
//!
//! * Any element ([`Lane`]: f32, f16, bf16, the 8- to 64-bit integers, f64): [`load`] and
//!   [`store`] of `[T; N]` (`N * size_of::<T>()` of 4, 8, 16, 32 or 64 bytes; past 16, several
//!   16-byte accesses), and [`load_hinted`] / [`store_hinted`] with a cache hint ([`LoadHint`]:
//!   read-only `ld.global.nc`, streaming `.cs`, evict-first or evict-last; [`StoreHint`]). The
//!   simulator checks the bounds and the alignment of every access, and reports a read-only load
//!   from a buffer the launch may write.
//! * [`Chunk`]: `N` elements of a 1-D array one thread handles as a vector, whole or (the
//!   ragged end) partial, with its accesses and the column helpers of a row-major matrix.
//! * [`map`]: an element-wise kernel's whole loop (grid-stride, vectors, loads ahead of the
//!   stores, the ragged end): the user writes the per-element function.
//! * The f32 forms the library's kernels were written with: [`F4`] and [`load4`] / [`store4`]
//!   (and their streaming and evict twins), [`F2`] and [`load2`] / [`store2`].

mod access;
mod chunk;
mod hint;
mod lane;
mod map;
#[cfg(target_arch = "nvptx64")]
mod ptx;

pub use access::{load, load_hinted, store, store_hinted, MAX_BYTES};
pub use chunk::Chunk;
pub use hint::{LoadHint, StoreHint};
pub use lane::Lane;
pub use map::{map, map_blocks, map_hinted, MAP_UNROLL};

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
    {
        assert!(q.is_aligned(), "misaligned 16-byte write at {q:p}");
        v.0.iter()
            .for_each(|x| crate::sim::device::check_stored_bits(x.to_bits()));
    }
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

/// The L2 eviction priority that a [`load4_evict_words`] gives its lines, as Triton's
/// `eviction_policy`: `ld.global.L1::evict_*.L2::cache_hint` with an L2 cache policy of the whole
/// access. The hint changes no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evict {
    /// No hint (`ld.global.v4`).
    Normal,
    /// Keep the line (`evict_last`): the data is read again soon, from L2. Made by
    /// [`Evict::last`].
    Last(u64),
    /// Drop the line first (`evict_first`): the data's last read. Made by [`Evict::first`].
    First(u64),
}

impl Evict {
    /// [`Evict::Last`] with its policy (`createpolicy.fractional.L2::evict_last.b64`, fraction
    /// 1; 0 where [`EVICT_HINTS`] is false). Pure: LLVM computes it once per kernel.
    #[inline(always)]
    pub fn last() -> Evict {
        Evict::Last(l2_policy::<true>())
    }

    /// [`Evict::First`] with its policy (`createpolicy.fractional.L2::evict_first.b64`).
    #[inline(always)]
    pub fn first() -> Evict {
        Evict::First(l2_policy::<false>())
    }
}

/// Whether this build's loads carry [`Evict`]'s hints: the sm_90 and sm_90a modules. The sm_80
/// module's PTX 7.0 has no such load, and the simulator has no L2; there a hinted load is a plain
/// one.
pub const EVICT_HINTS: bool = cfg!(all(target_arch = "nvptx64", target_feature = "sm_90"));

/// An L2 cache policy of the whole access, `evict_last` (`LAST`) or `evict_first`; 0 where
/// [`EVICT_HINTS`] is false.
#[inline(always)]
pub(crate) fn l2_policy<const LAST: bool>() -> u64 {
    #[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
    {
        let out: u64;
        // SAFETY: creates an opaque policy value in a register; no memory, no side effects.
        unsafe {
            if LAST {
                core::arch::asm!(
                    "createpolicy.fractional.L2::evict_last.b64 {out};",
                    out = out(reg64) out,
                    options(pure, nomem, nostack, preserves_flags),
                );
            } else {
                core::arch::asm!(
                    "createpolicy.fractional.L2::evict_first.b64 {out};",
                    out = out(reg64) out,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
        }
        out
    }
    #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_90")))]
    {
        0
    }
}

/// `p[i..i + 4]` as one 16-byte access with the L2 eviction hint `evict`, returned as the
/// sixteen bytes' four words (so that data of any 4- or 2-byte type can be read through it);
/// where [`EVICT_HINTS`] is false, or with [`Evict::Normal`], a plain [`load4`].
///
/// # Safety
/// As [`load4`], and `p` points to global memory (not shared).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load4_evict_words(p: *const f32, i: usize, evict: Evict) -> [u32; 4] {
    #[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
    {
        let q = p.wrapping_add(i);
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller guarantees sixteen bytes of global memory at a 16-byte aligned `q`;
        // a generic address of global memory converts to a global one with `cvta.to.global`.
        unsafe {
            match evict {
                Evict::Normal => return load4(p, i).0.map(f32::to_bits),
                Evict::Last(policy) => core::arch::asm!(
                    "{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ld.global.L1::evict_last.L2::cache_hint.v4.b32 {{{a}, {b}, {c}, {d}}}, [g], {policy}; }}",
                    q = in(reg64) q,
                    policy = in(reg64) policy,
                    a = out(reg32) a,
                    b = out(reg32) b,
                    c = out(reg32) c,
                    d = out(reg32) d,
                    options(readonly, nostack, preserves_flags),
                ),
                Evict::First(policy) => core::arch::asm!(
                    "{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ld.global.L1::evict_first.L2::cache_hint.v4.b32 {{{a}, {b}, {c}, {d}}}, [g], {policy}; }}",
                    q = in(reg64) q,
                    policy = in(reg64) policy,
                    a = out(reg32) a,
                    b = out(reg32) b,
                    c = out(reg32) c,
                    d = out(reg32) d,
                    options(readonly, nostack, preserves_flags),
                ),
            }
        }
        [a, b, c, d]
    }
    #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_90")))]
    {
        let _ = evict; // the policy only steers the GPU's L2
                       // SAFETY: forwarded contract.
        unsafe { load4(p, i) }.0.map(f32::to_bits)
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
    {
        assert!(q.is_aligned(), "misaligned 8-byte write at {q:p}");
        v.0.iter()
            .for_each(|x| crate::sim::device::check_stored_bits(x.to_bits()));
    }
    // SAFETY: the caller guarantees two writable floats at an aligned `q`.
    unsafe { mem::store(q, 0, v) }
}
