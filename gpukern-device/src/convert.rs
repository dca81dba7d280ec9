//! Half-precision elements ([`f16`](struct@f16), [`bf16`] from the `half` crate): conversions to
//! and from f32, and pairs moved as one 32-bit access with the math done in f32.
//!
//! Kernels keep 16-bit values in memory and compute in f32: load, widen (exact), compute,
//! narrow (rounded to nearest, ties to even) and store. On the GPU each conversion is one
//! instruction on a 16-bit register (`cvt.f32.f16`, `cvt.rn.f16.f32`, `cvt.rn.bf16.f32`; bf16 to
//! f32 is a 16-bit shift, see [`bf16_to_f32`]), and a pair is stored
//! with one `cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32` (sm_80 and newer). In the simulator the
//! conversions are the `half` crate's (bf16 to f32 is the same shift), which give the same bits
//! for every finite value, subnormals and rounding ties included, and for infinities; a NaN stays
//! a NaN, its payload may differ (the GPU's `cvt.rn` returns the canonical NaN).
//!
//! f64 needs no helper on the device: `x as f32` is `cvt.rn.f32.f64` and `x as f64` is
//! `cvt.f64.f32`, the same rounding as on the CPU. On the host, [`f64_to_f16`] and
//! [`f64_to_bf16`] round an f64 once to 16 bits (the simulator's model of the packed
//! instructions, and references in tests): `half`'s own `from_f64` does not, see them.

use crate::mem;
use half::{bf16, f16};

/// `x` widened to f32 (exact: every f16, subnormals included, is an f32).
///
/// On the GPU `cvt.f32.f16`; a register operation, no memory.
#[inline(always)]
pub fn f16_to_f32(x: f16) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register conversion; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "cvt.f32.f16 {out}, {x};",
                out = out(reg32) out,
                x = in(reg16) x.to_bits(),
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.to_f32()
    }
}

/// `x` rounded to the nearest f16, ties to even; beyond the largest f16 (65504) by half a unit
/// or more it becomes infinite, below the smallest subnormal (2^-24) by half a unit or more it
/// becomes zero.
///
/// On the GPU `cvt.rn.f16.f32`; a register operation, no memory.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> f16 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u16;
        // SAFETY: a register-to-register conversion; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "cvt.rn.f16.f32 {out}, {x};",
                out = out(reg16) out,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        f16::from_bits(out)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        f16::from_f32(x)
    }
}

/// `x` widened to f32 (exact: a bf16 is the upper half of an f32).
///
/// A shift of the 16 bits into the upper half, on the GPU and in the simulator alike: exact for
/// every input, a NaN's payload included (the `half` crate's `to_f32` would quiet a signalling
/// NaN), so both sides agree bit for bit. One integer instruction, no dearer than
/// `cvt.f32.bf16` (which ptxas also accepts from sm_80, PTX 7.1); a register operation, no
/// memory.
#[inline(always)]
pub fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits(u32::from(x.to_bits()) << 16)
}

/// `x` rounded to the nearest bf16, ties to even (bf16 has f32's exponent range, so only values
/// within half a unit of f32's largest round up to infinity).
///
/// On the GPU `cvt.rn.bf16.f32` (sm_80 and newer); a register operation, no memory.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> bf16 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u16;
        // SAFETY: a register-to-register conversion; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "cvt.rn.bf16.f32 {out}, {x};",
                out = out(reg16) out,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        bf16::from_bits(out)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        bf16::from_f32(x)
    }
}

/// `x` rounded once to the nearest 16-bit value whose bits `from_f32` and `to_f64` convert
/// (ties to even), `overflow` the magnitude from which it is infinite: the neighbours of
/// `from_f32(x as f32)` (within one step of the answer) compared exactly in f64.
#[cfg(not(target_arch = "nvptx64"))]
fn nearest_16(x: f64, from_f32: fn(f32) -> u16, to_f64: fn(u16) -> f64, overflow: f64) -> u16 {
    let guess = from_f32(x as f32);
    if !x.is_finite() {
        return guess;
    }
    if x.abs() >= overflow {
        // At or past the midpoint between the largest finite value and the next power of two.
        return from_f32(x.signum() as f32 * f32::INFINITY);
    }
    let mut best = guess;
    for bits in [guess.wrapping_sub(1), guess.wrapping_add(1)] {
        let (value, now) = (to_f64(bits), to_f64(best));
        if !value.is_finite() {
            continue;
        }
        let (d, dn) = ((x - value).abs(), (x - now).abs());
        if d < dn || (d == dn && bits & 1 == 0) {
            best = bits;
        }
    }
    best
}

/// `x` rounded once to the nearest f16, ties to even; infinite from 65520 (the midpoint between
/// 65504, the largest finite f16, and 65536) on. Host only.
///
/// `half`'s `f16::from_f64` is not this: its fallback drops the low 32 bits of the f64 before
/// rounding, so a value just past a tie rounds as the tie (`4.62890625 * -0.06793212890625 +
/// 4.62890625` to 4.3125, where `fma.rn.f16x2` on the H200 gives the right 4.31640625).
#[cfg(not(target_arch = "nvptx64"))]
pub fn f64_to_f16(x: f64) -> f16 {
    let bits = nearest_16(
        x,
        |v| f16::from_f32(v).to_bits(),
        |b| f64::from(f16::from_bits(b).to_f32()),
        65520.0,
    );
    f16::from_bits(bits)
}

/// `x` rounded once to the nearest bf16, ties to even; infinite from the midpoint between the
/// largest finite bf16, `(2 - 2^-7) 2^127`, and `2^128` on. Host only; `half`'s `bf16::from_f64`
/// has the fallback of [`f64_to_f16`]'s note.
#[cfg(not(target_arch = "nvptx64"))]
pub fn f64_to_bf16(x: f64) -> bf16 {
    let bits = nearest_16(
        x,
        |v| bf16::from_f32(v).to_bits(),
        |b| f64::from(bf16::from_bits(b).to_f32()),
        (2.0 - 2f64.powi(-8)) * 2f64.powi(127),
    );
    bf16::from_bits(bits)
}

/// `[lo, hi]` rounded to f16 and packed into 32 bits, `lo` in the low half (the element at the
/// lower address once stored).
///
/// On the GPU one `cvt.rn.f16x2.f32` (which puts its first source in the upper half).
#[inline(always)]
pub fn pack_f16x2([lo, hi]: [f32; 2]) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: a register-to-register conversion; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "cvt.rn.f16x2.f32 {out}, {hi}, {lo};",
                out = out(reg32) out,
                hi = in(reg32) hi,
                lo = in(reg32) lo,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        u32::from(f16::from_f32(lo).to_bits()) | (u32::from(f16::from_f32(hi).to_bits()) << 16)
    }
}

/// `[lo, hi]` rounded to bf16 and packed into 32 bits, `lo` in the low half.
///
/// On the GPU one `cvt.rn.bf16x2.f32` (sm_80 and newer).
#[inline(always)]
pub fn pack_bf16x2([lo, hi]: [f32; 2]) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: a register-to-register conversion; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "cvt.rn.bf16x2.f32 {out}, {hi}, {lo};",
                out = out(reg32) out,
                hi = in(reg32) hi,
                lo = in(reg32) lo,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        u32::from(bf16::from_f32(lo).to_bits()) | (u32::from(bf16::from_f32(hi).to_bits()) << 16)
    }
}

/// The 32-bit word holding `p[i]` and `p[i + 1]`, read as one access, with the simulator's
/// alignment check (a GPU faults on a misaligned access).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn load_pair<T>(p: *const T, i: usize) -> u32 {
    let q = p.wrapping_add(i).cast::<u32>();
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(q.is_aligned(), "misaligned 4-byte pair read at {q:p}");
    // SAFETY: the caller guarantees two initialised 16-bit elements at an aligned `q` (bounds
    // checked in the simulator).
    unsafe { mem::load(q, 0) }
}

/// Writes `word` to `p[i]` and `p[i + 1]` as one access (alignment checked in the simulator).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn store_pair<T>(p: *mut T, i: usize, word: u32) {
    let q = p.wrapping_add(i).cast::<u32>();
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(q.is_aligned(), "misaligned 4-byte pair write at {q:p}");
    // SAFETY: the caller guarantees two writable 16-bit elements at an aligned `q`.
    unsafe { mem::store(q, 0, word) }
}

/// Reads the f16 pair `p[i..i + 2]` as one 4-byte access (an `f16x2`) and widens both to f32.
///
/// The simulator reports an out-of-bounds pair at its index in pairs (`i / 2` from the buffer's
/// start), as [`crate::vector::load2`] does for its pairs.
///
/// # Safety
/// `p.add(i)` is 4-byte aligned (`i` even from an aligned buffer) and points to two initialised
/// f16 in global or shared memory. (The simulator checks the alignment, which a GPU would punish
/// with a misaligned-address fault.)
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load_f16x2(p: *const f16, i: usize) -> [f32; 2] {
    // SAFETY: forwarded from the caller.
    let word = unsafe { load_pair(p, i) };
    [
        f16_to_f32(f16::from_bits(word as u16)),
        f16_to_f32(f16::from_bits((word >> 16) as u16)),
    ]
}

/// Rounds `v` to two f16 (ties to even) and writes them to `p[i..i + 2]` as one 4-byte access.
///
/// # Safety
/// `p.add(i)` is 4-byte aligned and points to two writable f16 in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store_f16x2(p: *mut f16, i: usize, v: [f32; 2]) {
    // SAFETY: forwarded from the caller.
    unsafe { store_pair(p, i, pack_f16x2(v)) }
}

/// Reads the bf16 pair `p[i..i + 2]` as one 4-byte access (a `bf16x2`) and widens both to f32.
///
/// # Safety
/// As [`load_f16x2`]: `p.add(i)` 4-byte aligned, two initialised bf16 in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load_bf16x2(p: *const bf16, i: usize) -> [f32; 2] {
    // SAFETY: forwarded from the caller.
    let word = unsafe { load_pair(p, i) };
    [
        bf16_to_f32(bf16::from_bits(word as u16)),
        bf16_to_f32(bf16::from_bits((word >> 16) as u16)),
    ]
}

/// Rounds `v` to two bf16 (ties to even) and writes them to `p[i..i + 2]` as one 4-byte access.
///
/// # Safety
/// `p.add(i)` is 4-byte aligned and points to two writable bf16 in global or shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store_bf16x2(p: *mut bf16, i: usize, v: [f32; 2]) {
    // SAFETY: forwarded from the caller.
    unsafe { store_pair(p, i, pack_bf16x2(v)) }
}

/// An element a kernel keeps in memory and computes on in f32: `f32` itself, [`f16`](struct@f16)
/// and [`bf16`]. What a kernel generic over its element type bounds it with
/// (`#[kernel(instances(f32, bf16, f16))] pub unsafe fn scale<T: Float>(..)`).
pub trait Float: Copy + 'static {
    /// The element widened to f32 (exact for all three).
    fn to_f32(self) -> f32;
    /// `x` rounded to the element (to nearest, ties to even; the identity for f32).
    fn from_f32(x: f32) -> Self;
}

impl Float for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f32 {
        x
    }
}

impl Float for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16_to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f16 {
        f32_to_f16(x)
    }
}

impl Float for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16_to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> bf16 {
        f32_to_bf16(x)
    }
}
