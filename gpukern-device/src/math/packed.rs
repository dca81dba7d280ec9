//! Pairs of 16-bit floats in one 32-bit register, [`Bf16x2`] and [`F16x2`], with the
//! instructions the hardware has for them: each computes both lanes at once, rounded once to
//! the lane type (`fma.rn.bf16x2`, `max.NaN.f16x2`, `tanh.approx.bf16x2`, ...).
//!
//! Where an instruction needs a newer module than the one being built (the bf16 `tanh` and
//! `exp2` need sm_90), the sm_80 module computes each lane in f32 with [`super::fast`] and rounds
//! it: the same bound. In the simulator every operation is computed exactly in f64 and rounded
//! once to the lane type, which equals the GPU's correctly rounded instructions (`fma`, `add`,
//! `mul`, `max`, `min`) bit for bit, and is within the approximate ones' bounds.
//!
//! Lane 0 is the low half: the element at the lower address once stored.

use half::{bf16, f16};

/// Two bf16 in one 32-bit word, lane 0 in the low half.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16x2(pub u32);

/// Two f16 in one 32-bit word, lane 0 in the low half.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16x2(pub u32);

/// One instruction `$op.$ty` on the GPU (`$cfg`-gated, else `$fallback`), `$sim` per lane in f64
/// in the simulator.
macro_rules! packed_ops {
    ($pair:ident, $lane:ident, $ty:literal, $to_f64:expr, $from_f64:expr, $to_f32:expr, $from_f32:expr, $tanh:literal, $ex2:literal, $approx_cfg:meta) => {
        /// `a + b` in each lane, rounded once (an `fma` with 1).
        impl core::ops::Add for $pair {
            type Output = $pair;
            #[inline(always)]
            fn add(self, b: $pair) -> $pair {
                $pair::from_f32([1.0, 1.0]).fma(self, b)
            }
        }

        /// `a * b` in each lane, rounded once (an `fma` adding -0, which keeps the sign of a zero
        /// product).
        impl core::ops::Mul for $pair {
            type Output = $pair;
            #[inline(always)]
            fn mul(self, b: $pair) -> $pair {
                self.fma(b, $pair::from_f32([-0.0, -0.0]))
            }
        }

        impl $pair {
            /// Both lanes from f32, each rounded to nearest (ties to even).
            #[inline(always)]
            pub fn from_f32(v: [f32; 2]) -> $pair {
                let pack: fn([f32; 2]) -> u32 = $from_f32;
                $pair(pack(v))
            }

            /// Both lanes widened to f32 (exact).
            #[inline(always)]
            pub fn to_f32(self) -> [f32; 2] {
                let widen: fn($lane) -> f32 = $to_f32;
                self.lanes().map(widen)
            }

            /// The pair from two lanes.
            #[inline(always)]
            pub fn new(lanes: [$lane; 2]) -> $pair {
                $pair(u32::from(lanes[0].to_bits()) | (u32::from(lanes[1].to_bits()) << 16))
            }

            /// Its two lanes.
            #[inline(always)]
            pub fn lanes(self) -> [$lane; 2] {
                [$lane::from_bits(self.0 as u16), $lane::from_bits((self.0 >> 16) as u16)]
            }

            /// Each lane through `f` in f64, rounded once (the simulator's model).
            #[cfg(not(target_arch = "nvptx64"))]
            fn each(self, other: [$pair; 2], f: impl Fn(f64, f64, f64) -> f64) -> $pair {
                let (to, from): (fn($lane) -> f64, fn(f64) -> $lane) = ($to_f64, $from_f64);
                let [a, b, c] = [self, other[0], other[1]].map(|p| p.lanes().map(to));
                $pair::new([from(f(a[0], b[0], c[0])), from(f(a[1], b[1], c[1]))])
            }

            /// `self * b + c` in each lane with one rounding (`fma.rn`).
            #[inline(always)]
            pub fn fma(self, b: $pair, c: $pair) -> $pair {
                #[cfg(target_arch = "nvptx64")]
                {
                    let out: u32;
                    // SAFETY: a register-to-register instruction; no memory, no side effects.
                    unsafe {
                        core::arch::asm!(
                            concat!("fma.rn.", $ty, " {out}, {a}, {b}, {c};"),
                            out = out(reg32) out, a = in(reg32) self.0, b = in(reg32) b.0, c = in(reg32) c.0,
                            options(pure, nomem, nostack, preserves_flags),
                        );
                    }
                    $pair(out)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    self.each([b, c], |a, b, c| a.mul_add(b, c))
                }
            }

            /// The larger of each lane pair; a NaN lane gives the other lane (`max`, IEEE
            /// maxNum), NaN only if both are; `-0 < +0`.
            #[inline(always)]
            pub fn max(self, b: $pair) -> $pair {
                binary!(self, b, concat!("max.", $ty), max_num)
            }

            /// The smaller of each lane pair; a NaN lane gives the other lane (`min`); `-0 < +0`.
            #[inline(always)]
            pub fn min(self, b: $pair) -> $pair {
                binary!(self, b, concat!("min.", $ty), min_num)
            }

            /// The larger of each lane pair, NaN if either is NaN (`max.NaN`); `-0 < +0`.
            #[inline(always)]
            pub fn max_nan(self, b: $pair) -> $pair {
                binary!(self, b, concat!("max.NaN.", $ty), |a: f64, b: f64| if a.is_nan() || b.is_nan() { f64::NAN } else { max_num(a, b) })
            }

            /// The smaller of each lane pair, NaN if either is NaN (`min.NaN`); `-0 < +0`.
            #[inline(always)]
            pub fn min_nan(self, b: $pair) -> $pair {
                binary!(self, b, concat!("min.NaN.", $ty), |a: f64, b: f64| if a.is_nan() || b.is_nan() { f64::NAN } else { min_num(a, b) })
            }

            /// `tanh` of each lane (`tanh.approx`): within 2 ulp of the lane type of the exact
            /// value (checked on the GPU by the `math` device trials).
            #[inline(always)]
            pub fn tanh(self) -> $pair {
                unary!(self, $tanh, $approx_cfg, super::fast::tanh, f64::tanh)
            }

            /// `2^x` of each lane (`ex2.approx`): within 2 ulp of the lane type of the exact value.
            #[inline(always)]
            pub fn exp2(self) -> $pair {
                unary!(self, $ex2, $approx_cfg, super::fast::exp2, f64::exp2)
            }
        }
    };
}

/// A two-operand instruction `$op` on the pairs, `$sim` per lane in the simulator.
macro_rules! binary {
    ($a:expr, $b:expr, $op:expr, $sim:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            let out: u32;
            // SAFETY: a register-to-register instruction; no memory, no side effects.
            unsafe {
                core::arch::asm!(
                    concat!($op, " {out}, {a}, {b};"),
                    out = out(reg32) out, a = in(reg32) $a.0, b = in(reg32) $b.0,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
            Self(out)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let f: fn(f64, f64) -> f64 = $sim;
            $a.each([$b, $b], |a, b, _| f(a, b))
        }
    }};
}

/// A one-operand approximate instruction `$op` where `$cfg` holds, else `$fallback` per lane in
/// f32; `$sim` per lane in the simulator.
macro_rules! unary {
    ($a:expr, $op:expr, $cfg:meta, $fallback:path, $sim:expr) => {{
        #[cfg(all(target_arch = "nvptx64", $cfg))]
        {
            let out: u32;
            // SAFETY: a register-to-register instruction; no memory, no side effects.
            unsafe {
                core::arch::asm!(
                    concat!($op, " {out}, {a};"),
                    out = out(reg32) out, a = in(reg32) $a.0,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
            Self(out)
        }
        #[cfg(all(target_arch = "nvptx64", not($cfg)))]
        {
            Self::from_f32($a.to_f32().map($fallback))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let f: fn(f64) -> f64 = $sim;
            $a.each([$a, $a], |a, _, _| f(a))
        }
    }};
}

packed_ops!(
    Bf16x2,
    bf16,
    "bf16x2",
    |x| f64::from(x.to_f32()),
    crate::convert::f64_to_bf16,
    crate::convert::bf16_to_f32,
    crate::convert::pack_bf16x2,
    "tanh.approx.bf16x2",
    "ex2.approx.ftz.bf16x2",
    target_feature = "sm_90"
);

packed_ops!(
    F16x2,
    f16,
    "f16x2",
    |x| f64::from(x.to_f32()),
    crate::convert::f64_to_f16,
    crate::convert::f16_to_f32,
    crate::convert::pack_f16x2,
    "tanh.approx.f16x2",
    "ex2.approx.f16x2",
    target_feature = "sm_80"
);

/// The simulator's `max`: the larger, a NaN dropped (NaN only if both are), `-0 < +0`.
#[cfg(not(target_arch = "nvptx64"))]
fn max_num(a: f64, b: f64) -> f64 {
    if b.is_nan() || (!a.is_nan() && (b < a || (a == b && b.is_sign_negative()))) {
        a
    } else {
        b
    }
}

/// The simulator's `min`: the smaller, a NaN dropped, `-0 < +0`.
#[cfg(not(target_arch = "nvptx64"))]
fn min_num(a: f64, b: f64) -> f64 {
    -max_num(-a, -b)
}
