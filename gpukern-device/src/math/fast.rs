//! The GPU's approximate f32 functions: one multi-function-unit instruction each (`tanh.approx`,
//! `ex2.approx`, `lg2.approx`, `rcp.approx`, `rsqrt.approx`, `sin.approx`, `cos.approx`,
//! `div.approx`), a few times the throughput of [`super::accurate`]'s and less accurate.
//!
//! Each function's doc states its error bound against the exact value: the bound the PTX ISA
//! gives for the instruction, which `gpukern-device-checks`'s `math` trials check on the GPU
//! (`device_checks`, `cuda::math_fast_*`: every function over a sweep of its domain against an
//! f64 reference). In the simulator each function is the correctly rounded value (computed in
//! f64), which is within the same bound: a kernel tested there with a tolerance of the bound
//! passes on the GPU too.

/// One instruction `$op` (`tanh.approx.f32`, ...) on `x` on the GPU, `$sim` (f64) in the
/// simulator; with a trailing `ftz`, the `.ftz` form, whose subnormal input is read and subnormal
/// result written as a zero of its sign in the simulator too (`flush`).
macro_rules! unary {
    ($(#[$doc:meta])* $name:ident, $op:literal, $sim:expr) => {
        unary!(@emit $(#[$doc])* $name, $op, $sim, |v: f32| v);
    };
    ($(#[$doc:meta])* $name:ident, $op:literal, $sim:expr, ftz) => {
        unary!(@emit $(#[$doc])* $name, $op, $sim, flush);
    };
    // `$edge` is applied to the simulator's input and result.
    (@emit $(#[$doc:meta])* $name:ident, $op:literal, $sim:expr, $edge:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(x: f32) -> f32 {
            #[cfg(target_arch = "nvptx64")]
            {
                let out: f32;
                // SAFETY: a register-to-register instruction; no memory, no side effects.
                unsafe {
                    core::arch::asm!(
                        concat!($op, " {out}, {x};"),
                        out = out(reg32) out,
                        x = in(reg32) x,
                        options(pure, nomem, nostack, preserves_flags),
                    );
                }
                out
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let exact: fn(f64) -> f64 = $sim;
                let edge: fn(f32) -> f32 = $edge;
                edge(exact(f64::from(edge(x))) as f32)
            }
        }
    };
}

/// `v`, or a zero of its sign where it is subnormal: what a `.ftz` instruction reads and writes.
#[cfg(not(target_arch = "nvptx64"))]
fn flush(v: f32) -> f32 {
    if v.is_subnormal() {
        0.0f32.copysign(v)
    } else {
        v
    }
}

unary!(
    /// `tanh(x)`, one `tanh.approx.f32` (sm_75 and newer): relative error at most `2^-10.987`
    /// (the PTX ISA's bound; about 3.3 decimal digits, enough for an activation stored in bf16,
    /// whose own rounding is `2^-9`). `tanh(±0) = ±0`, `tanh(±inf) = ±1`, NaN for NaN.
    tanh,
    "tanh.approx.f32",
    f64::tanh
);

unary!(
    /// `2^x`, one `ex2.approx.f32`: relative error at most `2^-22` (about 2 ulp) over the whole
    /// range; subnormal results are kept. The same instruction as [`super::exp2`].
    exp2,
    "ex2.approx.f32",
    f64::exp2
);

unary!(
    /// `2^x`, one `ex2.approx.ftz.f32`: as [`exp2`] (relative error at most `2^-22`) where the
    /// result is normal (`x >= -126`); a result below `2^-126` is `+0` and a subnormal `x` is read
    /// as zero (`2^x = 1`). [`exp2`]'s handling of subnormals costs instructions this form does
    /// not spend: for sums such as `1 + 2^x`, which a subnormal does not change (the GLU
    /// kernels' instruction counts on both forms: `bench/experiments/h200-logs/11e19b2-ncu-*`).
    exp2_ftz,
    "ex2.approx.ftz.f32",
    f64::exp2,
    ftz
);

unary!(
    /// `1 / x`, one `rcp.approx.ftz.f32`: as [`rcp`] (at most 1 ulp) for `|x|` in `[2^-126,
    /// 2^126]`; past `2^126` the subnormal quotient is a zero of `x`'s sign, and a subnormal `x`
    /// is read as zero (`1 / x = ±inf`). Fewer instructions than [`rcp`], which keeps
    /// subnormals (as [`exp2_ftz`]).
    rcp_ftz,
    "rcp.approx.ftz.f32",
    |x| 1.0 / x,
    ftz
);

unary!(
    /// `log2(x)`, one `lg2.approx.f32`: absolute error at most `2^-22` for `x` in `[0.5, 2]`,
    /// relative error at most `2^-22` elsewhere; `log2(0) = -inf`, `log2(inf) = inf`, NaN for
    /// `x < 0`.
    log2,
    "lg2.approx.f32",
    f64::log2
);

unary!(
    /// `1 / x`, one `rcp.approx.f32`: at most 1 ulp from the exact value over the whole range
    /// (the correctly rounded `1.0 / x` is `div.rn`, a dozen instructions).
    rcp,
    "rcp.approx.f32",
    |x| 1.0 / x
);

unary!(
    /// `1 / sqrt(x)`, one `rsqrt.approx.f32`: relative error at most `2^-22.9`; `rsqrt(0) =
    /// inf`, NaN for `x < 0`.
    rsqrt,
    "rsqrt.approx.f32",
    |x| 1.0 / x.sqrt()
);

unary!(
    /// `sin(x)`, one `sin.approx.f32`: absolute error at most `2^-20.5` for `|x| <= pi`, and at
    /// most `2^-20.5 + |x| 2^-22` for `|x| <= 100 pi`: the argument is reduced in f32, so the
    /// error grows with `|x|` (measured on the H200: `3.6e-5` at `x = 311`, where the PTX ISA's
    /// `2^-20.5` does not hold; `gpukern-device/checks`' math trials check both ranges). Use
    /// [`super::accurate::sin`] for a relative bound.
    sin,
    "sin.approx.f32",
    f64::sin
);

unary!(
    /// `cos(x)`, one `cos.approx.f32`: absolute error at most `2^-20.5` for `|x| <= pi`, and at
    /// most `2^-20.5 + |x| 2^-22` for `|x| <= 100 pi` (the argument is reduced in f32, as for
    /// [`sin`]).
    cos,
    "cos.approx.f32",
    f64::cos
);

/// `e^x` as `2^(x log2 e)` with [`exp2`]: relative error at most `2^-22 + |x| 2^-24` (the
/// rounding of `x log2 e` is multiplied by `|x|`: about 5 ulp at `|x| = 80`). The same as
/// [`super::exp`].
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp2(x * super::LOG2_E)
}

/// `ln(x)` as `log2(x) ln 2` with [`log2`]: the error of [`log2`] times `ln 2`, plus half an ulp.
/// The same as [`super::ln`].
#[inline(always)]
pub fn log(x: f32) -> f32 {
    log2(x) * super::LN_2
}

/// `a / b`, one `div.approx.f32` (`__fdividef`): at most 3 ulp from the exact quotient for `|b|`
/// in `[2^-126, 2^126]`. It is `a * (1 / b)`: a reciprocal within 1 ulp, then a rounded product,
/// a relative error up to `1.5 2^-23`, which is 3 ulp for a quotient at the top of its binade
/// (the PTX ISA says 2; the H200 gave 2.008 in `gpukern-device/checks`' math trial at
/// `d0d5de9`). For `|b|` above `2^126` the result is 0 (where `a / b` would be subnormal or
/// tiny). The correctly rounded `a / b` is `div.rn`, a dozen instructions.
#[inline(always)]
pub fn div(a: f32, b: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register instruction; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "div.approx.f32 {out}, {a}, {b};",
                out = out(reg32) out,
                a = in(reg32) a,
                b = in(reg32) b,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        (f64::from(a) / f64::from(b)) as f32
    }
}
