//! Vectors of any [`Lane`] type as single wide accesses: `N` consecutive elements moved as one
//! 4-, 8- or 16-byte access (`ld.global.v4.b32` and friends), or as several 16-byte accesses for
//! 32 and 64 bytes, with an optional cache hint ([`LoadHint`], [`StoreHint`]).
//!
//! The lanes travel as 32-bit words: on the GPU the compiler keeps them in registers, and a
//! `[bf16; 8]` is four registers of two lanes each.

use super::hint::{LoadHint, StoreHint};
use super::lane::Lane;
use crate::mem;

/// The most bytes one vector moves: four 16-byte accesses.
pub const MAX_BYTES: usize = 64;

/// Four 32-bit words, 16-byte aligned: one 16-byte access.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Words4([u32; 4]);

/// Two 32-bit words, 8-byte aligned: one 8-byte access.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Words2([u32; 2]);

/// `src`'s bits as a `Dst` of the same size (the vector's lanes as words, or back). Called only
/// where the two sizes are equal (the other arms of a `match` on the vector's bytes are dead
/// after monomorphisation); equal sizes let LLVM keep both in registers.
///
/// # Safety
/// `size_of::<Src>() == size_of::<Dst>()`, and every bit pattern is a valid `Dst` (true of the
/// lane types and of words).
#[inline(always)]
unsafe fn bits<Src, Dst>(src: &Src) -> Dst {
    debug_assert_eq!(core::mem::size_of::<Src>(), core::mem::size_of::<Dst>());
    // SAFETY: the caller's contract.
    unsafe { core::mem::transmute_copy(src) }
}

/// The bytes of `N` lanes of `T`, checked at compile time: 4, 8, 16, 32 or 64.
const fn vector_bytes<T, const N: usize>() -> usize {
    let bytes = N * core::mem::size_of::<T>();
    assert!(
        matches!(bytes, 4 | 8 | 16 | 32 | 64),
        "a vector is 4, 8, 16, 32 or 64 bytes: N * size_of::<T>() must be one of them"
    );
    bytes
}

/// Reads `p[i..i + N]` as one vector access (several 16-byte accesses past 16 bytes): `N` lanes
/// of `T`, `N * size_of::<T>()` bytes, one of 4, 8, 16, 32 or 64 (a compile error otherwise).
///
/// One thread moves `N` elements with one instruction per 16 bytes: `[bf16; 8]`, `[f32; 4]`,
/// `[u8; 16]` are one `ld.global.v4.b32`. Works on global and shared memory.
///
/// # Safety
/// `p.add(i)` points to `N` initialised elements in global or shared memory, aligned to the
/// vector's bytes (16 past 16): for a 16-byte-aligned buffer, `i` a multiple of `N`. The simulator
/// checks the bounds and the alignment (a misaligned-address fault on a GPU).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load<T: Lane, const N: usize>(p: *const T, i: usize) -> [T; N] {
    let bytes = const { vector_bytes::<T, N>() };
    let q = p.wrapping_add(i).cast::<u8>();
    // SAFETY (all arms): the caller's contract, for `bytes` bytes aligned at `q`; `bits` between
    // types of `bytes` bytes.
    unsafe {
        match bytes {
            4 => bits(&mem::load(q.cast::<u32>(), 0)),
            8 => bits(&mem::load(q.cast::<Words2>(), 0)),
            16 => bits(&mem::load(q.cast::<Words4>(), 0)),
            32 => bits(&[0, 1].map(|k| mem::load(q.cast::<Words4>(), k))),
            _ => bits(&[0, 1, 2, 3].map(|k| mem::load(q.cast::<Words4>(), k))),
        }
    }
}

/// Writes `v` to `p[i..i + N]` as one vector access (several 16-byte accesses past 16 bytes).
///
/// # Safety
/// `p.add(i)` points to `N` writable elements in global or shared memory, aligned as for
/// [`load`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store<T: Lane, const N: usize>(p: *mut T, i: usize, v: [T; N]) {
    let bytes = const { vector_bytes::<T, N>() };
    check_stored(&v);
    let q = p.wrapping_add(i).cast::<u8>();
    // SAFETY (all arms): the caller's contract; `bits` between types of `bytes` bytes.
    unsafe {
        match bytes {
            4 => mem::store(q.cast::<u32>(), 0, bits(&v)),
            8 => mem::store(q.cast::<Words2>(), 0, bits(&v)),
            16 => mem::store(q.cast::<Words4>(), 0, bits(&v)),
            32 => {
                let w: [Words4; 2] = bits(&v);
                w.iter()
                    .enumerate()
                    .for_each(|(k, &w)| mem::store(q.cast::<Words4>(), k, w));
            }
            _ => {
                let w: [Words4; 4] = bits(&v);
                w.iter()
                    .enumerate()
                    .for_each(|(k, &w)| mem::store(q.cast::<Words4>(), k, w));
            }
        }
    }
}

/// In the simulator: each stored f32 checked as [`mem::store`] checks a 4-byte store (a `wgmma`
/// accumulator still in flight is reported). Nothing on the GPU.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn check_stored<T: Lane, const N: usize>(v: &[T; N]) {
    #[cfg(not(target_arch = "nvptx64"))]
    if T::IS_F32 {
        for x in v {
            // SAFETY: `T` is f32 (`IS_F32`), 4 bytes of plain bits.
            crate::sim::device::check_stored_bits(unsafe { core::mem::transmute_copy::<T, u32>(x) });
        }
    }
    #[cfg(target_arch = "nvptx64")]
    let _ = v;
}

/// [`load`] with a cache hint: `hint` decides the instruction (see [`LoadHint`]); every hint
/// reads the same values. A constant `hint` leaves one instruction per 16 bytes.
///
/// # Safety
/// As [`load`], and `p` points to global memory (every hint but [`LoadHint::Default`] is a
/// `ld.global`); for [`LoadHint::ReadOnly`] and [`LoadHint::NoAllocate`], no thread of the grid writes `p[i..i + N]` during
/// the kernel (the simulator reports a read-only load from a buffer the launch may write).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load_hinted<T: Lane, const N: usize>(p: *const T, i: usize, hint: LoadHint) -> [T; N] {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if hint == LoadHint::ReadOnly || hint == LoadHint::NoAllocate {
            crate::sim::device::check_read_only(p.wrapping_add(i) as usize);
        }
        // SAFETY: forwarded contract; in the simulator a hint is a plain load.
        unsafe { load(p, i) }
    }
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: forwarded contract.
        unsafe { gpu::load_hinted(p, i, hint) }
    }
}

/// [`store`] with a cache hint (see [`StoreHint`]); every hint writes the same values.
///
/// # Safety
/// As [`store`], and `p` points to global memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store_hinted<T: Lane, const N: usize>(p: *mut T, i: usize, v: [T; N], hint: StoreHint) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = hint; // the simulator has no caches
                      // SAFETY: forwarded contract.
        unsafe { store(p, i, v) }
    }
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: forwarded contract.
        unsafe { gpu::store_hinted(p, i, v, hint) }
    }
}

/// The GPU side of the hinted accesses: the hint picks a wrapper of [`super::ptx`], applied to
/// each 16-byte piece (or to the one 4- or 8-byte access).
#[cfg(target_arch = "nvptx64")]
mod gpu {
    use super::super::ptx;
    use super::{bits, load, store, vector_bytes, LoadHint, StoreHint};
    use crate::vector::Lane;

    /// The vector `p[i..i + N]` from `access(q)`, one call per access (the address of each 4-,
    /// 8- or 16-byte piece), each returning its words in the first of four.
    #[inline(always)]
    unsafe fn gather<T: Lane, const N: usize>(
        p: *const T,
        i: usize,
        access: impl Fn(*const u8) -> [u32; 4],
    ) -> [T; N] {
        let bytes = const { vector_bytes::<T, N>() };
        let q = p.wrapping_add(i).cast::<u8>();
        // SAFETY (all arms): `bits` between types of `bytes` bytes.
        unsafe {
            match bytes {
                4 => bits(&access(q)[0]),
                8 => {
                    let [a, b, _, _] = access(q);
                    bits(&[a, b])
                }
                16 => bits(&access(q)),
                32 => bits(&[0, 1].map(|k| access(q.wrapping_add(16 * k)))),
                _ => bits(&[0, 1, 2, 3].map(|k| access(q.wrapping_add(16 * k)))),
            }
        }
    }

    /// `put(q, words)` over the vector's accesses (the words of a 4- or 8-byte access first).
    #[inline(always)]
    unsafe fn scatter<T: Lane, const N: usize>(
        p: *mut T,
        i: usize,
        v: [T; N],
        put: impl Fn(*mut u8, [u32; 4]),
    ) {
        let bytes = const { vector_bytes::<T, N>() };
        let q = p.wrapping_add(i).cast::<u8>();
        // SAFETY (all arms): `bits` between types of `bytes` bytes.
        unsafe {
            match bytes {
                4 => put(q, [bits(&v), 0, 0, 0]),
                8 => {
                    let [a, b]: [u32; 2] = bits(&v);
                    put(q, [a, b, 0, 0])
                }
                16 => put(q, bits(&v)),
                32 => {
                    let w: [[u32; 4]; 2] = bits(&v);
                    w.iter()
                        .enumerate()
                        .for_each(|(k, &w)| put(q.wrapping_add(16 * k), w));
                }
                _ => {
                    let w: [[u32; 4]; 4] = bits(&v);
                    w.iter()
                        .enumerate()
                        .for_each(|(k, &w)| put(q.wrapping_add(16 * k), w));
                }
            }
        }
    }

    /// One hinted access of `W` words through `f::<W>`, `W` from the vector's bytes.
    macro_rules! by_width {
        ($bytes:expr, $f:ident, $($arg:expr),*) => {
            match $bytes {
                4 => ptx::$f::<1>($($arg),*),
                8 => ptx::$f::<2>($($arg),*),
                _ => ptx::$f::<4>($($arg),*),
            }
        };
    }

    #[inline(always)]
    pub(super) unsafe fn load_hinted<T: Lane, const N: usize>(
        p: *const T,
        i: usize,
        hint: LoadHint,
    ) -> [T; N] {
        let bytes = const { vector_bytes::<T, N>() };
        // SAFETY (all arms): the caller's contract, for each access of the vector.
        unsafe {
            match hint {
                LoadHint::Default => load(p, i),
                LoadHint::ReadOnly => gather(p, i, |q| by_width!(bytes, ld_nc, q)),
                #[cfg(target_feature = "sm_90")]
                LoadHint::NoAllocate => gather(p, i, |q| by_width!(bytes, ld_nc_no_allocate, q)),
                #[cfg(not(target_feature = "sm_90"))]
                LoadHint::NoAllocate => gather(p, i, |q| by_width!(bytes, ld_nc, q)),
                LoadHint::Streaming => gather(p, i, |q| by_width!(bytes, ld_cs, q)),
                #[cfg(target_feature = "sm_90")]
                LoadHint::EvictFirst => {
                    let policy = crate::vector::l2_policy::<false>();
                    gather(p, i, |q| by_width!(bytes, ld_evict_first, q, policy))
                }
                #[cfg(target_feature = "sm_90")]
                LoadHint::EvictLast => {
                    let policy = crate::vector::l2_policy::<true>();
                    gather(p, i, |q| by_width!(bytes, ld_evict_last, q, policy))
                }
                #[cfg(not(target_feature = "sm_90"))]
                LoadHint::EvictFirst => gather(p, i, |q| by_width!(bytes, ld_cs, q)),
                #[cfg(not(target_feature = "sm_90"))]
                LoadHint::EvictLast => load(p, i),
            }
        }
    }

    #[inline(always)]
    pub(super) unsafe fn store_hinted<T: Lane, const N: usize>(
        p: *mut T,
        i: usize,
        v: [T; N],
        hint: StoreHint,
    ) {
        let bytes = const { vector_bytes::<T, N>() };
        // SAFETY (all arms): the caller's contract, for each access of the vector.
        unsafe {
            match hint {
                StoreHint::Default => store(p, i, v),
                StoreHint::Streaming => scatter(p, i, v, |q, w| by_width!(bytes, st_cs, q, w)),
                #[cfg(target_feature = "sm_90")]
                StoreHint::EvictFirst => {
                    let policy = crate::vector::l2_policy::<false>();
                    scatter(p, i, v, |q, w| by_width!(bytes, st_evict_first, q, w, policy))
                }
                #[cfg(target_feature = "sm_90")]
                StoreHint::EvictLast => {
                    let policy = crate::vector::l2_policy::<true>();
                    scatter(p, i, v, |q, w| by_width!(bytes, st_evict_last, q, w, policy))
                }
                #[cfg(not(target_feature = "sm_90"))]
                StoreHint::EvictFirst => scatter(p, i, v, |q, w| by_width!(bytes, st_cs, q, w)),
                #[cfg(not(target_feature = "sm_90"))]
                StoreHint::EvictLast => store(p, i, v),
            }
        }
    }
}
