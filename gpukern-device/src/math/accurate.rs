//! Accurate f32 functions written in plain Rust: basic operations and `fma` only (each
//! correctly rounded on the GPU, `.rn`, and on the CPU), so the GPU computes bit for bit what the
//! simulator and a host test compute. Their error bounds, in ulps of the exact result, are
//! measured (over about two million inputs spread over the bit patterns of each domain, both
//! signs, and the special values) by `gpukern-device/tests/math.rs` against f64 references over dense sweeps of each
//! domain (and asserted there); the GPU trials (`device_checks`, `cuda::math_accurate_*`) check
//! that the GPU's bits equal the host's.
//!
//! The algorithms are the textbook ones: argument reduction (Cody and Waite's split constants,
//! computed with `fma`), a polynomial on the reduced interval (Taylor coefficients, or
//! near-minimax fits from `gpukern-device/tools/fit_math.py`), and the reconstruction.

use super::{fma, LN_2, LOG2_E};

/// `1.5 * 2^23`: adding and subtracting it rounds an f32 of magnitude below `2^22` to the
/// nearest integer (ties to even), with no `round` instruction (not in `core`).
const ROUND: f32 = 12_582_912.0;

/// `x` rounded to the nearest integer (ties to even), for `|x| < 2^22`.
#[inline(always)]
fn round(x: f32) -> f32 {
    (x + ROUND) - ROUND
}

/// `|x|`, on the bits.
#[inline(always)]
fn abs(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0x7fff_ffff)
}

/// `|x|` with the sign of `sign`, on the bits.
#[inline(always)]
fn with_sign_of(x: f32, sign: f32) -> f32 {
    f32::from_bits((x.to_bits() & 0x7fff_ffff) | (sign.to_bits() & 0x8000_0000))
}

/// `2^k` for an integer `k` in `[-126, 127]`, from its bits.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `p * 2^k` for `k` in `[-150, 128]` with one rounding: `2^k` split in two normal powers
/// (`p * 2^(k/2)` is exact), so that results that overflow or are subnormal come out right.
#[inline(always)]
fn scale(p: f32, k: i32) -> f32 {
    let half = k >> 1;
    p * pow2(half) * pow2(k - half)
}

/// `ln 2` in two parts: `LN2_HI` (the f32 nearest) and the rest.
const LN2_HI: f32 = LN_2;
const LN2_LO: f32 = -1.904_654_3e-9;

/// `e^r - 1 - r` for `|r| <= ln(2) / 2`, as `r^2 (1/2 + r/6 + ... + r^5/5040)` (Taylor to degree
/// 7: truncation below `r^8 / 8!`, 0.05 ulp of `e^r`).
#[inline(always)]
fn expm1_tail(r: f32) -> f32 {
    let p = fma(r, 1.0 / 5040.0, 1.0 / 720.0);
    let p = fma(p, r, 1.0 / 120.0);
    let p = fma(p, r, 1.0 / 24.0);
    let p = fma(p, r, 1.0 / 6.0);
    let p = fma(p, r, 0.5);
    p * (r * r)
}

/// `e^x`, within 1 ulp of the exact value over `tests/math.rs`'s sweep
/// (`exp_is_within_its_bound`); `inf` past `ln(f32::MAX)` (88.72: an `x` up to 89 is scaled and
/// overflows), 0 below `ln(2^-150)` (-103.97), subnormal results rounded once. NaN for NaN.
///
/// `x = k ln 2 + r` with `|r| <= ln(2)/2` (`r` exact to about `2^-33`), `e^r = 1 + r + r^2 P(r)`,
/// then `2^k` applied with one rounding.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    if x > 89.0 {
        return f32::INFINITY;
    }
    if x < -104.0 {
        return 0.0;
    }
    // Also NaN: the comparisons above are false and the arithmetic keeps it.
    let k = round(x * LOG2_E);
    let r = fma(-k, LN2_HI, x);
    let r = fma(-k, LN2_LO, r);
    scale(1.0 + (r + expm1_tail(r)), k as i32)
}

/// `2^x`, within 1 ulp of the exact value (`tests/math.rs`: `exp2_is_within_its_bound`);
/// `inf` from `x >= 128`, 0 from `x <= -150`, subnormal results rounded once. NaN for NaN.
///
/// `x = k + f` with `|f| <= 1/2` (exact), `2^f` by a Taylor polynomial in `f` (coefficients
/// `ln(2)^n / n!`, degree 7), then `2^k`.
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    if x >= 128.0 {
        return f32::INFINITY;
    }
    if x < -151.0 {
        return 0.0;
    }
    let k = round(x);
    let f = x - k;
    // 2^f - 1 = f (c1 + f (c2 + ...)), c_n = ln(2)^n / n!.
    let p = fma(f, 1.525_273_4e-5, 1.540_353_1e-4);
    let p = fma(p, f, 1.333_355_8e-3);
    let p = fma(p, f, 9.618_129e-3);
    let p = fma(p, f, 5.550_411e-2);
    let p = fma(p, f, 0.240_226_5);
    let p = fma(p, f, LN_2);
    scale(fma(p, f, 1.0), k as i32)
}

/// `ln(x)`, within 1 ulp of the exact value over `tests/math.rs`'s sweep of every binade,
/// subnormals included (`log_is_within_its_bound`); `ln(±0) = -inf`, `ln(inf) = inf`, NaN for `x < 0`
/// and NaN.
///
/// `x = 2^e m` with `m` in `[sqrt(2)/2, sqrt(2))`, `f = m - 1` (exact), `s = f / (2 + f)`, and
/// `ln(m) = 2 atanh(s) = f - s (f - R(s^2))` with `R` the series `2 s^2 / 3 + 2 s^4 / 5 + ...`
/// (Taylor to `s^10`, `|s| <= 0.1716`), then `ln(x) = e ln 2 + ln(m)`.
#[inline(always)]
pub fn log(x: f32) -> f32 {
    if x.is_nan() || x <= 0.0 {
        return if x == 0.0 { f32::NEG_INFINITY } else { f32::NAN };
    }
    if x == f32::INFINITY {
        return x;
    }
    // Subnormals: scale by 2^23 first.
    let (x, bias) = if x < f32::MIN_POSITIVE {
        (x * 8_388_608.0, -23)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let mut e = ((bits >> 23) as i32) - 127 + bias;
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    if m > core::f32::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let r = fma(z, 2.0 / 11.0, 2.0 / 9.0);
    let r = fma(r, z, 2.0 / 7.0);
    let r = fma(r, z, 2.0 / 5.0);
    let r = fma(r, z, 2.0 / 3.0);
    let r = r * z;
    let lm = fma(-s, f - r, f);
    let e = e as f32;
    fma(e, LN2_HI, fma(e, LN2_LO, lm))
}

/// Below it `tanh(x)` rounds to `x`.
const TINY: f32 = 1.0 / 4096.0;

/// Where [`tanh`] switches from its polynomial to the exponential.
const TANH_SMALL: f32 = 0.55;

/// `tanh(x)`, within 2 ulp of the exact value over `tests/math.rs`'s sweep (`tanh_is_within_its_bound`); `tanh(±0) = ±0`, `±1` from `|x| >= 9.02`, NaN for NaN.
///
/// `|x| < 0.55`: `x + x^3 P(x^2)` (a degree-5 near-minimax fit, `tools/fit_math.py`); above,
/// `1 - 2 / (e^(2|x|) + 1)` with [`exp`] and the sign of `x`.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = abs(x);
    if a < TINY {
        // `tanh(x) = x` to half an ulp (the cube is below 2^-24 of `x`); keeps the sign of 0.
        return x;
    }
    if a < TANH_SMALL {
        let t = x * x;
        let p = fma(t, 2.526_444e-3, -8.526_374e-3);
        let p = fma(p, t, 2.181_846e-2);
        let p = fma(p, t, -5.396_47e-2);
        let p = fma(p, t, 0.133_333_24);
        let p = fma(p, t, -0.333_333_34);
        return fma(p * t, x, x);
    }
    let e = exp(2.0 * a);
    with_sign_of(1.0 - 2.0 / (e + 1.0), x)
}

/// `erf(x)`, within 2 ulp of the exact value (`tests/math.rs`: `erf_is_within_its_bound`);
/// `erf(±0) = ±0`, `±1` from `|x| >= 4`, NaN for NaN.
///
/// `|x| < 1`: `x + x (Q(x^2) - 1)` (degree 6, near-minimax); `1 <= |x| < 4`: `1 - erfc(|x|)` with
/// `erfc(x) = e^(-x^2) R(1/x - 5/8) / x` (degree 10 in a centred variable, near-minimax) and
/// [`exp`]; the sign of `x`.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = abs(x);
    if a < 1.0 {
        let t = x * x;
        let q = fma(t, 7.853_847e-5, -8.010_189e-4);
        let q = fma(q, t, 5.188_327_3e-3);
        let q = fma(q, t, -2.685_381e-2);
        let q = fma(q, t, 0.112_835_854);
        let q = fma(q, t, -0.376_126_26);
        // `2/sqrt(pi) - 1`: the polynomial's 1 is added by the last `fma`, exactly once rounded.
        let q = fma(q, t, 0.128_379_17);
        return fma(x, q, x);
    }
    if x.is_nan() || a >= 4.0 {
        // Also NaN: `with_sign_of(1.0, NaN)` would not be NaN.
        return if x.is_nan() { x } else { with_sign_of(1.0, x) };
    }
    let u = 1.0 / a;
    let v = u - 0.625;
    let r = fma(v, 2.046_435_7e-2, -4.741_812e-2);
    let r = fma(r, v, 4.766_868_4e-2);
    let r = fma(r, v, -2.472_906_6e-2);
    let r = fma(r, v, -1.033_123_9e-2);
    let r = fma(r, v, 4.962_497_2e-2);
    let r = fma(r, v, -7.802_925e-2);
    let r = fma(r, v, 7.210_145e-2);
    let r = fma(r, v, -1.294_665_9e-3);
    let r = fma(r, v, -0.171_585_65);
    let r = fma(r, v, 0.489_524_78);
    let erfc = exp(-(a * a)) * r * u;
    with_sign_of(1.0 - erfc, x)
}

/// `pi / 2` in three parts (Cody and Waite), each product with an integer below `2^22` exact in
/// an `fma`.
const PIO2_1: f32 = 1.570_796_4;
const PIO2_2: f32 = -4.371_139e-8;
const PIO2_3: f32 = -1.715_124_5e-15;

/// The quadrant `k` (mod 4) and `r = x - k pi/2` with `|r| <= pi/4` (a little more for large
/// `x`), for `|x| < 2^22 pi/2`.
#[inline(always)]
fn reduce_pio2(x: f32) -> (i32, f32) {
    let k = round(x * core::f32::consts::FRAC_2_PI);
    let r = fma(-k, PIO2_1, x);
    let r = fma(-k, PIO2_2, r);
    let r = fma(-k, PIO2_3, r);
    (k as i32, r)
}

/// `sin(r)` for `|r| <= pi/4`: `r + r^3 S(r^2)` (Taylor to degree 9).
#[inline(always)]
fn sin_poly(r: f32) -> f32 {
    let z = r * r;
    let s = fma(z, 2.755_731_9e-6, -1.984_127e-4);
    let s = fma(s, z, 8.333_333e-3);
    let s = fma(s, z, -0.166_666_67);
    fma(s * z, r, r)
}

/// `cos(r)` for `|r| <= pi/4`: `1 + r^2 C(r^2)` (Taylor to degree 10).
#[inline(always)]
fn cos_poly(r: f32) -> f32 {
    let z = r * r;
    let c = fma(z, -2.755_732e-7, 2.480_158_7e-5);
    let c = fma(c, z, -1.388_888_9e-3);
    let c = fma(c, z, 4.166_666_8e-2);
    let c = fma(c, z, -0.5);
    fma(c, z, 1.0)
}

/// The largest `|x|` for which [`sin`] and [`cos`] keep their bound (their argument reduction
/// uses three parts of `pi / 2`); past it the result is NaN rather than silently inaccurate.
pub const TRIG_MAX: f32 = 65536.0;

/// `sin(x)` for `|x| <= TRIG_MAX` (65536), within 2 ulp of the exact value (`tests/math.rs`:
/// `sin_and_cos_are_within_their_bound`);
/// `sin(±0) = ±0`; NaN for larger `|x|`, infinities and NaN.
///
/// `x = k pi/2 + r`, then `±sin(r)` or `±cos(r)` by the quadrant.
#[inline(always)]
pub fn sin(x: f32) -> f32 {
    if x.is_nan() || abs(x) > TRIG_MAX {
        return f32::NAN;
    }
    let (k, r) = reduce_pio2(x);
    let v = if k & 1 == 0 { sin_poly(r) } else { cos_poly(r) };
    if k & 2 == 0 {
        v
    } else {
        -v
    }
}

/// `cos(x)` for `|x| <= TRIG_MAX`, with [`sin`]'s bounds (`tests/math.rs`:
/// `sin_and_cos_are_within_their_bound`); NaN for larger `|x|`, infinities and NaN.
#[inline(always)]
pub fn cos(x: f32) -> f32 {
    if x.is_nan() || abs(x) > TRIG_MAX {
        return f32::NAN;
    }
    let (k, r) = reduce_pio2(x);
    let v = if k & 1 == 0 { cos_poly(r) } else { sin_poly(r) };
    if (k + 1) & 2 == 0 {
        v
    } else {
        -v
    }
}

/// `1 / x`, correctly rounded (`div.rn.f32`: at most half an ulp).
#[inline(always)]
pub fn rcp(x: f32) -> f32 {
    1.0 / x
}

/// `1 / sqrt(x)` as `1 / sqrt.rn(x)`: two correct roundings, within 1.5 ulp of the exact value
/// (`tests/math.rs`: `rsqrt_is_within_its_bound`); `inf` for `+0`, NaN for `x < 0`.
#[inline(always)]
pub fn rsqrt(x: f32) -> f32 {
    1.0 / super::sqrt(x)
}
