//! Float functions the kernels need that `core` does not provide on the GPU.
//!
//! * [`fast`]: the GPU's approximate instructions, one each (`tanh.approx`, `ex2.approx`,
//!   `lg2.approx`, `rcp.approx`, `rsqrt.approx`, `sin.approx`, `cos.approx`, `div.approx`),
//!   each with the bound the PTX ISA gives, checked on the GPU by the `math` device trials.
//! * [`accurate`]: `exp`, `exp2`, `log`, `tanh`, `erf`, `sin`, `cos`, `rcp`, `rsqrt` in plain
//!   Rust (basic operations and `fma`), within 1 or 2 ulp, the same bits on the GPU as on the
//!   CPU; `tests/math.rs` measures each against f64.
//! * [`packed`]: [`packed::Bf16x2`] and [`packed::F16x2`], two 16-bit lanes per instruction
//!   (`fma`, `max`/`min` with or without NaN propagation, `tanh`, `exp2`).
//! * Here: [`exp`], [`exp2`], [`exp2_ftz`], [`ln`] (the fast forms the library's kernels use),
//!   [`fma`], [`sqrt`], and the NaN rules of minimum and maximum: `f32::max` / `f32::min` drop
//!   a NaN operand (IEEE maxNum, `max.f32`), [`max_nan`] / [`min_nan`] (and their one-instruction
//!   `_fast` forms, `max.NaN.f32`) propagate it.

pub mod accurate;
pub mod fast;
pub mod packed;

/// `log2(e)`: turns `exp(x)` into `exp2(x * LOG2_E)`.
pub const LOG2_E: f32 = core::f32::consts::LOG2_E;

/// `e^x`, computed as `2^(x * log2 e)`.
///
/// On the GPU `2^x` is the `ex2.approx.f32` instruction (relative error about 2^-22); the rounding
/// of `x * log2 e` adds a relative error of about `|x| * 6e-8`.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp2(x * LOG2_E)
}

/// `2^x`.
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::exp2f32(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.exp2()
    }
}

/// `2^x` with subnormals flushed to zero (`ex2.approx.ftz.f32` on the GPU): the same `MUFU.EX2`
/// as [`exp2`] without the fix-up ptxas wraps around it for subnormal results (a compare and two
/// multiplications: `2^x` for `x < -126` computed as `(2^(x/2))^2`).
///
/// The rule for using it: the argument is `<= 0` (a softmax's exponent relative to the row's
/// reference) and a result below `2^-126` (about `1.2e-38`) may become 0. Such a term is then
/// off by less than `2^-126` in absolute terms, far below any f32 tolerance of a probability or
/// a sum of at least 1. A subnormal argument is read as 0 and gives 1, which `2^x` rounds to
/// anyway. The simulator computes `x.exp2()` and flushes the same way.
#[inline(always)]
pub fn exp2_ftz(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register instruction; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "ex2.approx.ftz.f32 {out}, {x};",
                out = out(reg32) out,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let x = if x.is_subnormal() { 0.0 } else { x };
        let e = x.exp2();
        if e.is_subnormal() {
            0.0
        } else {
            e
        }
    }
}

/// The larger of `a` and `b`; NaN if either is NaN (unlike `f32::max`, which drops a NaN).
#[inline(always)]
pub fn max_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

/// [`max_nan`] in one instruction on the GPU (`max.NaN.f32`, sm_80 and newer): the larger of `a`
/// and `b`, NaN if either is NaN. Unlike [`max_nan`], which of two zeros of opposite signs it
/// returns is unspecified; for a maximum that is only subtracted from (a softmax's reference
/// value) that does not matter.
#[inline(always)]
pub fn max_nan_fast(a: f32, b: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register instruction; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "max.NaN.f32 {out}, {a}, {b};",
                out = out(reg32) out,
                a = in(reg32) a,
                b = in(reg32) b,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        max_nan(a, b)
    }
}

/// The smaller of `a` and `b`; NaN if either is NaN.
#[inline(always)]
pub fn min_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a < b {
        a
    } else {
        b
    }
}

/// [`min_nan`] in one instruction on the GPU (`min.NaN.f32`, sm_80 and newer): the smaller of
/// `a` and `b`, NaN if either is NaN; which of two zeros of opposite signs it returns is
/// unspecified (as for [`max_nan_fast`]).
#[inline(always)]
pub fn min_nan_fast(a: f32, b: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register instruction; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "min.NaN.f32 {out}, {a}, {b};",
                out = out(reg32) out,
                a = in(reg32) a,
                b = in(reg32) b,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        min_nan(a, b)
    }
}

/// `a * b + c` with one rounding (`fma.rn.f32` on the GPU).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::fmaf32(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

/// `sqrt(x)`, correctly rounded (`sqrt.rn.f32` on the GPU); NaN for `x < 0`.
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::sqrtf32(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.sqrt()
    }
}

/// `ln(2)`: turns `log2(x)` into `ln(x)`.
pub const LN_2: f32 = core::f32::consts::LN_2;

/// The natural logarithm, computed as `log2(x) * ln 2`.
///
/// On the GPU `log2` is the `lg2.approx.f32` instruction (absolute error about 2^-22 near 1,
/// relative error about 2^-22 elsewhere); `ln(0) = -inf`, `ln(inf) = inf`, NaN for `x < 0`.
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register instruction; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "lg2.approx.f32 {out}, {x};",
                out = out(reg32) out,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        out * LN_2
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.log2() * LN_2
    }
}
