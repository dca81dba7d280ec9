//! 8-bit floating-point elements, the two formats of Hopper's FP8 tensor cores (OCP 8-bit
//! floating point, "OFP8"; PyTorch's `float8_e4m3fn` and `float8_e5m2`):
//!
//! | type | sign, exponent, mantissa bits | bias | largest finite | smallest subnormal | infinity | NaN |
//! |---|---|---|---|---|---|---|
//! | [`E4M3`] | 1, 4, 3 | 7 | 448 (`0x7e`) | `2^-9` (`0x01`) | none | `S.1111.111` (`0x7f`, `0xff`) |
//! | [`E5M2`] | 1, 5, 2 | 15 | 57344 (`0x7b`) | `2^-16` (`0x01`) | `S.11111.00` | `S.11111.{01,10,11}` |
//!
//! Conversions, the same code on the host, in the simulator and (where there is no conversion
//! instruction) on the GPU, integer operations on the bits only:
//! * `to_f32`: exact (every FP8 value is an f32).
//! * `from_f32`: to nearest, ties to even, as PyTorch's `x.to(torch.float8_e4m3fn)`: a value
//!   that rounds past the largest finite one becomes NaN for [`E4M3`] (which has no infinity:
//!   from 464, the midpoint between 448 and 480, on) and infinity for [`E5M2`] (from 61440 on);
//!   infinities become NaN ([`E4M3`]) or stay infinite; NaN stays NaN.
//! * `from_f32_saturating`: the same rounding, but a finite value past the largest finite one,
//!   and an infinity, becomes the largest finite value of its sign (`satfinite`, what
//!   `cvt.rn.satfinite.e4m3x2.f32` does on sm_89 and newer; the quantisation kernels' rounding);
//!   NaN stays NaN.
//! * `from_f64` (host only): `from_f32`'s rule applied to the exact f64 value (no double
//!   rounding through f32).
//!
//! Both types are one byte, `#[repr(transparent)]` over their bits, and [`crate::DeviceCopy`]:
//! device buffers of them are buffers of bytes.

use crate::device_copy::DeviceCopy;

/// The layout of one FP8 format.
struct Format {
    /// Mantissa bits.
    mant: u32,
    /// Exponent bias.
    bias: i32,
    /// The largest finite magnitude's bits (sign clear).
    max: u8,
    /// The magnitude bits of the canonical NaN.
    nan: u8,
    /// The magnitude bits of infinity, if the format has one.
    inf: Option<u8>,
}

const E4M3_FORMAT: Format = Format {
    mant: 3,
    bias: 7,
    max: 0x7e,
    nan: 0x7f,
    inf: None,
};

const E5M2_FORMAT: Format = Format {
    mant: 2,
    bias: 15,
    max: 0x7b,
    nan: 0x7f,
    inf: Some(0x7c),
};

/// `x` rounded to the format `f`, to nearest, ties to even; past the largest finite magnitude
/// (or an infinite `x`) the largest finite value when `saturate`, else infinity or NaN.
#[inline(always)]
const fn encode(f: &Format, x: f32, saturate: bool) -> u8 {
    let bits = x.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        return sign | f.nan;
    }
    let overflow = if saturate {
        sign | f.max
    } else {
        match f.inf {
            Some(inf) => sign | inf,
            None => sign | f.nan,
        }
    };
    if abs == 0x7f80_0000 {
        return overflow;
    }
    let exp32 = (abs >> 23) as i32;
    if exp32 == 0 {
        // Zero or an f32 subnormal (below 2^-126): far under half the smallest FP8 subnormal.
        return sign;
    }
    let e = exp32 - 127;
    let emin = 1 - f.bias;
    let sig = (1 << 23) | (abs & 0x7f_ffff);
    // The quantum of the FP8 value near `x` is 2^(max(e, emin) - mant); `sig` is in units of
    // 2^(e - 23), so the rounded value is `sig >> shift` quanta (shift >= 23 - mant > 0).
    let top = if e > emin { e } else { emin };
    let shift = (23 + top - f.mant as i32 - e) as u32;
    let q = if shift >= 32 {
        0
    } else {
        let (q, rem, half) = (sig >> shift, sig & ((1 << shift) - 1), 1u32 << (shift - 1));
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    // Below the smallest normal `q` is the whole magnitude's bits (2^mant quanta is the smallest
    // normal, exponent field 1); above, the exponent field plus the mantissa, a carry out of the
    // mantissa stepping the exponent.
    let code = if e < emin {
        q as i64
    } else {
        (((e + f.bias) as i64) << f.mant) + q as i64 - (1i64 << f.mant)
    };
    if code > f.max as i64 {
        overflow
    } else {
        sign | code as u8
    }
}

/// The value of the bits `b` of format `f`, exactly.
#[inline(always)]
fn decode(f: &Format, b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let mag = b & 0x7f;
    if let Some(inf) = f.inf {
        if mag == inf {
            return sign * f32::INFINITY;
        }
        if mag > inf {
            return f32::NAN;
        }
    } else if mag == f.nan {
        return f32::NAN;
    }
    let exp = (mag >> f.mant) as i32;
    let man = (mag & ((1 << f.mant) - 1)) as u32;
    if exp == 0 {
        // man * 2^(1 - bias - mant), a power of two times a small integer: exact.
        let scale = f32::from_bits(((1 - f.bias - f.mant as i32 + 127) as u32) << 23);
        sign * man as f32 * scale
    } else {
        let bits = (((exp - f.bias + 127) as u32) << 23) | (man << (23 - f.mant));
        sign * f32::from_bits(bits)
    }
}

/// `x` rounded to format `f` from its exact f64 value, `from_f32`'s rule: past the midpoint
/// between the largest finite value and the next step (that midpoint itself when the largest
/// finite value's code is odd, the tie going to the even code) infinity or NaN; else the nearest
/// finite value, found among the saturating f32 conversion's result and its two neighbours
/// (`x as f32` is within `2^-24` relative of `x`, so within one code of the answer), compared
/// exactly in f64.
#[cfg(not(target_arch = "nvptx64"))]
fn encode_f64(f: &Format, x: f64) -> u8 {
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    if x.is_nan() {
        return sign | f.nan;
    }
    let max = f64::from(decode(f, f.max));
    let threshold = max + (max - f64::from(decode(f, f.max - 1))) / 2.0;
    if x.abs() > threshold || (x.abs() == threshold && f.max & 1 == 1) {
        return encode(f, f32::INFINITY, false) | sign;
    }
    let guess = encode(f, x as f32, true);
    let mut best = guess;
    for b in [guess.wrapping_sub(1), guess.wrapping_add(1)] {
        // Stay on `guess`'s side of zero and among the finite values.
        if (b ^ guess) & 0x80 != 0 || (b & 0x7f) > f.max {
            continue;
        }
        let (v, now) = (f64::from(decode(f, b)), f64::from(decode(f, best)));
        let (d, dn) = ((x - v).abs(), (x - now).abs());
        if d < dn || (d == dn && b & 1 == 0) {
            best = b;
        }
    }
    best
}

macro_rules! fp8_type {
    ($name:ident, $format:ident, $doc:literal) => {
        #[doc = $doc]
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name(pub u8);

        // SAFETY: one byte of plain bits, every pattern valid, no padding.
        unsafe impl DeviceCopy for $name {}

        impl $name {
            /// Zero.
            pub const ZERO: $name = $name(0);
            /// The largest finite value.
            pub const MAX: $name = $name($format.max);
            /// The canonical NaN.
            pub const NAN: $name = $name($format.nan);

            /// The value of these bits.
            #[inline(always)]
            pub const fn from_bits(bits: u8) -> $name {
                $name(bits)
            }

            /// The bits.
            #[inline(always)]
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// The value, exactly.
            #[inline(always)]
            pub fn to_f32(self) -> f32 {
                decode(&$format, self.0)
            }

            /// `x` to nearest, ties to even; past the largest finite value infinity or NaN (see
            /// the module documentation).
            #[inline(always)]
            pub const fn from_f32(x: f32) -> $name {
                $name(encode(&$format, x, false))
            }

            /// `x` to nearest, ties to even; past the largest finite value, and for an
            /// infinity, the largest finite value of its sign (`satfinite`).
            #[inline(always)]
            pub const fn from_f32_saturating(x: f32) -> $name {
                $name(encode(&$format, x, true))
            }

            /// `x` to nearest, ties to even, from its exact value (host only).
            #[cfg(not(target_arch = "nvptx64"))]
            pub fn from_f64(x: f64) -> $name {
                $name(encode_f64(&$format, x))
            }

            /// Whether this is a NaN.
            #[inline(always)]
            pub fn is_nan(self) -> bool {
                self.to_f32().is_nan()
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(
                    f,
                    "{}({:#04x} = {})",
                    stringify!($name),
                    self.0,
                    self.to_f32()
                )
            }
        }

        impl From<$name> for f32 {
            fn from(x: $name) -> f32 {
                x.to_f32()
            }
        }

        impl From<$name> for f64 {
            fn from(x: $name) -> f64 {
                f64::from(x.to_f32())
            }
        }
    };
}

fp8_type!(
    E4M3,
    E4M3_FORMAT,
    "An FP8 E4M3 number (`float8_e4m3fn`): 4 exponent bits, 3 mantissa bits, no infinity, \
     finite up to 448."
);
fp8_type!(
    E5M2,
    E5M2_FORMAT,
    "An FP8 E5M2 number (`float8_e5m2`): 5 exponent bits, 2 mantissa bits, IEEE-like with \
     infinities, finite up to 57344."
);

/// `[lo, hi]` rounded to E4M3 with `satfinite` and packed into 16 bits, `lo` in the low byte
/// (the element at the lower address once stored).
///
/// On the GPU (sm_89 and newer: the sm_90 and sm_90a modules) one
/// `cvt.rn.satfinite.e4m3x2.f32` (which puts its first source in the upper byte); elsewhere
/// [`E4M3::from_f32_saturating`] twice.
#[inline(always)]
pub fn pack_e4m3x2([lo, hi]: [f32; 2]) -> u16 {
    #[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
    {
        let out: u16;
        // SAFETY: a register-to-register conversion; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "cvt.rn.satfinite.e4m3x2.f32 {out}, {hi}, {lo};",
                out = out(reg16) out,
                hi = in(reg32) hi,
                lo = in(reg32) lo,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_90")))]
    {
        u16::from(E4M3::from_f32_saturating(lo).0) | (u16::from(E4M3::from_f32_saturating(hi).0) << 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known encodings, both ways where exact, and the rounding of ties and overflows.
    #[test]
    fn table() {
        let e4 = |x: f32| E4M3::from_f32(x).0;
        let e5 = |x: f32| E5M2::from_f32(x).0;
        let p9 = 2f32.powi(-9);
        for (x, b) in [
            (0.0, 0x00),
            (-0.0, 0x80),
            (1.0, 0x38),
            (-1.0, 0xb8),
            (1.125, 0x39),
            (448.0, 0x7e),
            (-448.0, 0xfe),
            (2f32.powi(-6), 0x08),
            (p9, 0x01),
            (7.0 * p9, 0x07),
            (0.5, 0x30),
            (240.0, 0x77),
        ] {
            assert_eq!(e4(x), b, "e4m3 from {x}");
            assert_eq!(E4M3(b).to_f32().to_bits(), f32::to_bits(x), "e4m3 of {b:#x}");
        }
        // Ties to even: 464 between 448 (even) and 480 (beyond max: NaN); 0.5 * 2^-9 to 0;
        // 1.5 * 2^-9 to 2 * 2^-9; 1.0625 (between 1 and 1.125) to 1.
        assert_eq!(e4(464.0), 0x7e);
        assert_eq!(e4(464.01), 0x7f);
        assert_eq!(e4(-500.0), 0xff);
        assert_eq!(e4(f32::INFINITY), 0x7f);
        assert_eq!(e4(f32::NAN) & 0x7f, 0x7f);
        assert_eq!(e4(0.5 * p9), 0x00);
        assert_eq!(e4(0.5001 * p9), 0x01);
        assert_eq!(e4(1.5 * p9), 0x02);
        assert_eq!(e4(1.0625), 0x38);
        assert_eq!(e4(1.1875), 0x3a);
        assert_eq!(E4M3::from_f32_saturating(1e6).0, 0x7e);
        assert_eq!(E4M3::from_f32_saturating(-f32::INFINITY).0, 0xfe);
        assert!(E4M3(0x7f).is_nan() && E4M3(0xff).is_nan());

        for (x, b) in [
            (1.0, 0x3c),
            (-2.0, 0xc0),
            (57344.0, 0x7b),
            (2f32.powi(-14), 0x04),
            (2f32.powi(-16), 0x01),
            (1.25, 0x3d),
            (f32::INFINITY, 0x7c),
            (f32::NEG_INFINITY, 0xfc),
        ] {
            assert_eq!(e5(x), b, "e5m2 from {x}");
            assert_eq!(E5M2(b).to_f32().to_bits(), f32::to_bits(x), "e5m2 of {b:#x}");
        }
        // 61440 is the midpoint between 57344 (odd mantissa) and 65536: to infinity.
        assert_eq!(e5(61439.0), 0x7b);
        assert_eq!(e5(61440.0), 0x7c);
        assert_eq!(E5M2::from_f32_saturating(1e9).0, 0x7b);
        assert!(E5M2(0x7d).is_nan() && E5M2(0x7e).is_nan() && E5M2(0xff).is_nan());
    }

    /// The nearest value by brute force over every code (ties to the even code, finite codes
    /// only; past the largest finite value the format's overflow), against the conversion.
    fn brute(codes: impl Fn(u8) -> f32, max: u8, x: f64, overflow: u8) -> u8 {
        let mut best: Option<(f64, u8)> = None;
        let threshold = {
            let m = f64::from(codes(max));
            m + (m - f64::from(codes(max - 1))) / 2.0
        };
        if x.abs() > threshold || (x.abs() == threshold && max & 1 == 1) {
            return if x < 0.0 { overflow | 0x80 } else { overflow };
        }
        for b in 0..=255u8 {
            if (b & 0x7f) > max || ((b & 0x80) != 0) != x.is_sign_negative() {
                continue;
            }
            let d = (f64::from(codes(b)) - x).abs();
            match best {
                Some((bd, bb)) if d > bd || (d == bd && (b & 1 == 1 || bb & 1 == 0)) => {}
                _ => best = Some((d, b)),
            }
        }
        best.map(|(_, b)| b).unwrap_or(0)
    }

    #[test]
    fn nearest_by_brute_force() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..200_000 {
            // Magnitudes from 2^-20 to 2^17, both signs, and exact midpoints.
            let r = next();
            let mag = 2f64.powf(-20.0 + 37.0 * (r >> 11) as f64 / (1u64 << 53) as f64);
            let x = if r & 1 == 1 { -mag } else { mag };
            let x = x as f32;
            let xd = f64::from(x);
            assert_eq!(
                E4M3::from_f32(x).0,
                brute(|b| E4M3(b).to_f32(), 0x7e, xd, 0x7f),
                "e4m3 {x} (#{i})"
            );
            assert_eq!(
                E5M2::from_f32(x).0,
                brute(|b| E5M2(b).to_f32(), 0x7b, xd, 0x7c),
                "e5m2 {x} (#{i})"
            );
            assert_eq!(E4M3::from_f64(xd).0, E4M3::from_f32(x).0, "e4m3 from_f64 {x}");
            assert_eq!(E5M2::from_f64(xd).0, E5M2::from_f32(x).0, "e5m2 from_f64 {x}");
        }
        // Every midpoint between neighbouring finite values, and just either side of it.
        for (name, dec, max) in [
            ("e4m3", (|b| E4M3(b).to_f32()) as fn(u8) -> f32, 0x7eu8),
            ("e5m2", |b| E5M2(b).to_f32(), 0x7b),
        ] {
            for b in 0..max {
                let (lo, hi) = (f64::from(dec(b)), f64::from(dec(b + 1)));
                let mid = (lo + hi) / 2.0;
                let even = if b & 1 == 0 { b } else { b + 1 };
                let got = |x: f64| match name {
                    "e4m3" => E4M3::from_f64(x).0,
                    _ => E5M2::from_f64(x).0,
                };
                assert_eq!(got(mid), even, "{name} midpoint of {b:#x}");
                assert_eq!(got(mid - mid * 1e-12), b, "{name} below the midpoint of {b:#x}");
                assert_eq!(
                    got(mid + mid * 1e-12),
                    b + 1,
                    "{name} above the midpoint of {b:#x}"
                );
                assert_eq!(got(-mid), even | 0x80, "{name} negative midpoint of {b:#x}");
            }
        }
    }

    /// Every finite code decodes and encodes back to itself, saturating or not.
    #[test]
    fn round_trip() {
        for b in 0..=255u8 {
            let (x4, x5) = (E4M3(b), E5M2(b));
            if !x4.is_nan() {
                assert_eq!(E4M3::from_f32(x4.to_f32()), x4);
                assert_eq!(E4M3::from_f32_saturating(x4.to_f32()), x4);
                assert_eq!(E4M3::from_f64(f64::from(x4)), x4);
            }
            if !x5.is_nan() {
                assert_eq!(E5M2::from_f32(x5.to_f32()), x5);
                assert_eq!(E5M2::from_f64(f64::from(x5)), x5);
                if x5.to_f32().is_finite() {
                    assert_eq!(E5M2::from_f32_saturating(x5.to_f32()), x5);
                }
            }
        }
        let [lo, hi] = [1.0f32, -448.0];
        assert_eq!(pack_e4m3x2([lo, hi]), 0x38 | (0xfe << 8));
    }
}
