//! The error bounds of [`gpukern_device::math`], measured against f64 references:
//!
//! * `accurate`: every function over a dense sweep of its domain (a million or more inputs
//!   spread over the f32 bit patterns of each range, both signs), its worst error in ulps of the
//!   exact result asserted against the bound its doc states. The functions are plain Rust with
//!   basic operations and `fma` only, so these are the GPU's errors too (the `math` device trials
//!   check that the GPU's bits equal the host's).
//! * `packed`: every operation on every pair of a grid of bf16 and f16 values against the exact
//!   result rounded once to the lane type.
//! * A planted error: the same measurement of a function off by 3 ulp fails its bound.
//!
//! The `fast` functions are the GPU's instructions; in the simulator they are correctly rounded,
//! so their bounds are checked on the GPU (`gpukern-device/checks`, the `math` trials).

use gpukern_device::math::packed::{Bf16x2, F16x2};
use gpukern_device::math::{accurate, fast};
use gpukern_device::{bf16, convert, f16};

/// The distance from `got` to `exact` in units of the last place of f32 at `exact` (subnormal
/// spacing below `f32::MIN_POSITIVE`). Infinities and NaN must match exactly (0 or `inf`).
fn ulps(got: f32, exact: f64) -> f64 {
    if exact.is_nan() || got.is_nan() {
        return if exact.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if exact.is_infinite() || got.is_infinite() {
        // An exact value past f32's range rounds to infinity.
        return if f64::from(got) == (exact as f32) as f64 {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let a = exact.abs().max(f64::from(f32::MIN_POSITIVE));
    let ulp = 2f64.powi(a.log2().floor() as i32 - 23);
    (f64::from(got) - exact).abs() / ulp
}

/// `count` f32 inputs spread evenly over the bit patterns of `[lo, hi]` (both positive), and
/// their negatives when `both_signs`.
fn sweep(lo: f32, hi: f32, count: u32, both_signs: bool) -> Vec<f32> {
    let (a, b) = (lo.to_bits(), hi.to_bits());
    let step = ((b - a) / count).max(1);
    let mut xs: Vec<f32> = (a..=b).step_by(step as usize).map(f32::from_bits).collect();
    xs.push(hi);
    if both_signs {
        let negatives: Vec<f32> = xs.iter().map(|x| -x).collect();
        xs.extend(negatives);
    }
    xs
}

/// The worst error in ulps of `f` against `exact` over `xs`, and where.
fn worst(xs: &[f32], f: impl Fn(f32) -> f32, exact: impl Fn(f64) -> f64) -> (f64, f32) {
    xs.iter()
        .map(|&x| (ulps(f(x), exact(f64::from(x))), x))
        .fold((0.0, 0.0), |w, e| if e.0 > w.0 { e } else { w })
}

/// Asserts `f`'s worst error over `xs` is at most `bound` ulps; prints it.
#[track_caller]
fn within(name: &str, xs: &[f32], f: impl Fn(f32) -> f32, exact: impl Fn(f64) -> f64, bound: f64) {
    let (err, at) = worst(xs, f, exact);
    println!(
        "{name}: worst {err:.3} ulp at x = {at:e} over {} inputs",
        xs.len()
    );
    assert!(
        err <= bound,
        "{name}: {err:.3} ulp at x = {at:e}, over its bound of {bound} ulp"
    );
}

#[test]
fn exp_is_within_its_bound() {
    let mut xs = sweep(1e-30, 89.0, 1 << 20, true);
    xs.extend(sweep(89.0, 104.0, 1 << 12, true));
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        88.72283,
        88.7229,
        -103.97,
    ]);
    within("accurate::exp", &xs, accurate::exp, f64::exp, 1.0);
}

#[test]
fn exp2_is_within_its_bound() {
    let mut xs = sweep(1e-30, 128.0, 1 << 20, true);
    xs.extend(sweep(128.0, 152.0, 1 << 12, true));
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -149.0,
        -149.5,
        -150.0,
        127.99999,
    ]);
    within("accurate::exp2", &xs, accurate::exp2, f64::exp2, 1.0);
}

#[test]
fn log_is_within_its_bound() {
    // Every binade, subnormals included, densely around 1.
    let mut xs = sweep(f32::from_bits(1), f32::MAX, 1 << 20, false);
    xs.extend(sweep(0.5, 2.0, 1 << 20, false));
    xs.extend([0.0, -0.0, -1.0, f32::INFINITY, f32::NAN, 1.0]);
    within(
        "accurate::log",
        &xs,
        accurate::log,
        |x| if x == 0.0 { f64::NEG_INFINITY } else { x.ln() },
        1.0,
    );
}

#[test]
fn tanh_is_within_its_bound() {
    let mut xs = sweep(1e-30, 10.0, 1 << 20, true);
    xs.extend(sweep(0.4, 0.7, 1 << 18, true));
    xs.extend([0.0, -0.0, 20.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    within("accurate::tanh", &xs, accurate::tanh, f64::tanh, 2.0);
    assert!(accurate::tanh(-0.0).is_sign_negative());
}

/// `erf` in f64: its Taylor series below 2.5 (at most 3 digits lost to cancellation), the
/// continued fraction of `erfc` above.
fn erf64(x: f64) -> f64 {
    let a = x.abs();
    let v = if a < 2.5 {
        let (mut term, mut sum, mut n) = (a, a, 0.0);
        while term.abs() > 1e-18 * sum.abs() {
            n += 1.0;
            term *= -a * a / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))).
        let mut f = a;
        for k in (1..200).rev() {
            f = a + (k as f64 / 2.0) / f;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / f
    };
    if x.is_nan() {
        x
    } else {
        v.copysign(x)
    }
}

#[test]
fn erf_is_within_its_bound() {
    let mut xs = sweep(1e-30, 5.0, 1 << 20, true);
    xs.extend(sweep(0.9, 1.1, 1 << 16, true));
    xs.extend([0.0, -0.0, 4.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    within("accurate::erf", &xs, accurate::erf, erf64, 2.0);
}

#[test]
fn sin_and_cos_are_within_their_bound() {
    let mut xs = sweep(1e-30, accurate::TRIG_MAX, 1 << 20, true);
    xs.extend(sweep(0.7, 0.9, 1 << 14, true));
    xs.extend([0.0, -0.0]);
    within("accurate::sin", &xs, accurate::sin, f64::sin, 2.0);
    within("accurate::cos", &xs, accurate::cos, f64::cos, 2.0);
    for x in [f32::INFINITY, f32::NAN, 70_000.0] {
        assert!(accurate::sin(x).is_nan() && accurate::cos(x).is_nan(), "{x}");
    }
}

#[test]
fn rcp_and_rsqrt_are_within_their_bound() {
    let xs = sweep(f32::from_bits(1), f32::MAX, 1 << 20, false);
    within("accurate::rcp", &xs, accurate::rcp, |x| 1.0 / x, 0.5);
    within("accurate::rsqrt", &xs, accurate::rsqrt, |x| 1.0 / x.sqrt(), 1.5);
}

#[test]
fn a_function_off_by_three_ulp_fails_the_measurement() {
    // The planted error: `tanh` nudged by 3 ulp. The same sweep and bound must reject it.
    let xs = sweep(0.1, 5.0, 1 << 12, true);
    let nudged = |x: f32| {
        let t = accurate::tanh(x);
        f32::from_bits(t.to_bits() + 3)
    };
    let (err, _) = worst(&xs, nudged, f64::tanh);
    assert!(err > 2.0, "a 3-ulp error measured {err} ulp");
}

#[test]
fn the_fast_functions_are_correctly_rounded_in_the_simulator() {
    // On the host they stand for the GPU's instructions with the exact value: within every
    // bound the docs give for the instructions (checked on the GPU by the device trials).
    let xs = sweep(1e-3, 80.0, 1 << 14, true);
    within("fast::tanh", &xs, fast::tanh, f64::tanh, 0.5);
    within("fast::exp2", &xs, fast::exp2, f64::exp2, 0.5);
    within("fast::sin", &xs, fast::sin, f64::sin, 0.5);
    within("fast::rcp", &xs, fast::rcp, |x| 1.0 / x, 0.5);
}

/// Every pair of a grid of lane values through `op` (on both lanes, swapped in the second)
/// against `exact` per lane, rounded once.
fn packed_matches<P: Copy>(
    name: &str,
    values: &[f32],
    make: impl Fn([f32; 2]) -> P,
    read: impl Fn(P) -> [f32; 2],
    round: impl Fn(f64) -> f32,
    op: impl Fn(P, P) -> P,
    exact: impl Fn(f64, f64) -> f64,
) {
    for &a in values {
        for &b in values {
            let got = read(op(make([a, b]), make([b, a])));
            let want = [round(exact(a.into(), b.into())), round(exact(b.into(), a.into()))];
            let same = |g: f32, w: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
            assert!(
                same(got[0], want[0]) && same(got[1], want[1]),
                "{name}({a}, {b}): {got:?}, want {want:?}"
            );
        }
    }
}

/// The larger of `a` and `b`, a NaN dropped (NaN only if both are), `-0 < +0`.
fn max_num(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || b < a || (a == b && b.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// `convert::f64_to_f16` / `f64_to_bf16` round once: a value just past a tie goes up, a tie to
/// the even neighbour, the overflow midpoint to infinity and just below it to the largest finite
/// value, subnormals and signed zeros as they are.
#[test]
fn f64_to_16_bits_rounds_once() {
    let h = |x: f64| convert::f64_to_f16(x).to_f32();
    // 4.314453125 is the tie between 4.3125 and 4.31640625 (spacing 2^-8).
    assert_eq!(h(4.314_453_125 + 2f64.powi(-20)), 4.316_406_3);
    assert_eq!(h(4.314_453_125 - 2f64.powi(-20)), 4.3125);
    assert_eq!(h(4.314_453_125), 4.3125); // even
    assert_eq!(h(1.0 + 3.0 * 2f64.powi(-11)), 1.0 + 2f32.powi(-9)); // tie, odd below: up
    assert_eq!(h(65519.999), 65504.0);
    assert_eq!(h(65520.0), f32::INFINITY);
    assert_eq!(h(-65520.0), f32::NEG_INFINITY);
    assert_eq!(h(2f64.powi(-25) + 2f64.powi(-40)), 2f32.powi(-24)); // past half the least subnormal
    assert_eq!(h(2f64.powi(-25)).to_bits(), 0.0f32.to_bits()); // the tie to zero, even
    assert_eq!(h(-1e-30).to_bits(), (-0.0f32).to_bits());
    assert!(h(f64::NAN).is_nan());
    let b = |x: f64| convert::f64_to_bf16(x).to_f32();
    // 1 + 2^-8 is the tie between 1 and 1 + 2^-7.
    assert_eq!(b(1.0 + 2f64.powi(-8) + 2f64.powi(-40)), 1.0 + 2f32.powi(-7));
    assert_eq!(b(1.0 + 2f64.powi(-8)), 1.0);
    assert_eq!(b(-(1.0 + 2f64.powi(-8) + 2f64.powi(-40))), -(1.0 + 2f32.powi(-7)));
    assert_eq!(b(f64::from(f32::MAX)), f32::INFINITY);
}

/// An fma whose exact result lies just past a tie of two f16 values (seen on the H200, where
/// `fma.rn.f16x2` gives the upper one): the model rounds the exact value once, as the device does.
#[test]
fn packed_fma_rounds_a_value_just_past_a_tie_up() {
    let a = F16x2::from_f32([4.628_906_3, 1.0]);
    let b = F16x2::from_f32([-0.067_932_13, 1.0]);
    assert_eq!(a.fma(b, a).to_f32(), [4.316_406_3, 2.0]);
    // And the tie itself goes to the even neighbour: 1 + 2^-11 between 1 and 1 + 2^-10.
    let one = F16x2::from_f32([1.0, 1.0]);
    let tie = F16x2::from_f32([2f32.powi(-11), 0.0]);
    assert_eq!(tie.fma(one, one).to_f32(), [1.0, 1.0]);
}

/// What the H200 computes for a NaN in either lane (seen there: `max.bf16x2` of `[0, NaN]` and
/// `[NaN, 0]` is `[0, 0]`), written out rather than modelled, so that the model above cannot be
/// wrong the same way as the simulator.
#[test]
fn packed_max_and_min_drop_a_nan_lane_and_the_nan_forms_keep_it() {
    let (a, b) = ([0.0f32, f32::NAN], [f32::NAN, 0.0]);
    let both_zero = |v: [f32; 2]| v == [0.0, 0.0];
    let both_nan = |v: [f32; 2]| v[0].is_nan() && v[1].is_nan();
    let (ba, bb) = (Bf16x2::from_f32(a), Bf16x2::from_f32(b));
    let (ha, hb) = (F16x2::from_f32(a), F16x2::from_f32(b));
    assert!(both_zero(ba.max(bb).to_f32()) && both_zero(bb.max(ba).to_f32()));
    assert!(both_zero(ba.min(bb).to_f32()) && both_zero(ha.max(hb).to_f32()));
    assert!(both_zero(ha.min(hb).to_f32()));
    assert!(both_nan(ba.max_nan(bb).to_f32()) && both_nan(ha.min_nan(hb).to_f32()));
    let nan = Bf16x2::from_f32([f32::NAN, f32::NAN]);
    assert!(both_nan(nan.max(nan).to_f32()));
}

#[test]
fn packed_pairs_round_each_lane_once() {
    let values: Vec<f32> = [-7.5, -1.0, -0.3, -0.0, 0.0, 0.1, 0.5, 1.0, 2.75, 300.0, f32::NAN]
        .into_iter()
        .collect();
    let b16 = |v: f32| bf16::from_f32(v).to_f32();
    let bvalues: Vec<f32> = values.iter().map(|&v| b16(v)).collect();
    let bround = |x: f64| convert::f64_to_bf16(x).to_f32();
    let (bmake, bread) = (Bf16x2::from_f32, Bf16x2::to_f32);
    packed_matches(
        "bf16x2 add",
        &bvalues,
        bmake,
        bread,
        bround,
        |a, b| a + b,
        |a, b| a + b,
    );
    packed_matches(
        "bf16x2 mul",
        &bvalues,
        bmake,
        bread,
        bround,
        |a, b| a * b,
        |a, b| a * b,
    );
    packed_matches(
        "bf16x2 fma",
        &bvalues,
        bmake,
        bread,
        bround,
        |a, b| a.fma(b, a),
        |a, b| a.mul_add(b, a),
    );
    packed_matches("bf16x2 max", &bvalues, bmake, bread, bround, Bf16x2::max, max_num);
    packed_matches(
        "bf16x2 min_nan",
        &bvalues,
        bmake,
        bread,
        bround,
        Bf16x2::min_nan,
        |a, b| {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                -max_num(-a, -b)
            }
        },
    );
    packed_matches(
        "bf16x2 tanh",
        &bvalues,
        bmake,
        bread,
        bround,
        |a, _| a.tanh(),
        |a, _| a.tanh(),
    );

    let h16 = |v: f32| f16::from_f32(v).to_f32();
    let hvalues: Vec<f32> = values.iter().map(|&v| h16(v)).collect();
    let hround = |x: f64| convert::f64_to_f16(x).to_f32();
    let (hmake, hread) = (F16x2::from_f32, F16x2::to_f32);
    packed_matches(
        "f16x2 fma",
        &hvalues,
        hmake,
        hread,
        hround,
        |a, b| a.fma(b, b),
        |a, b| a.mul_add(b, b),
    );
    packed_matches(
        "f16x2 max_nan",
        &hvalues,
        hmake,
        hread,
        hround,
        F16x2::max_nan,
        |a, b| {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                max_num(a, b)
            }
        },
    );
    packed_matches(
        "f16x2 exp2",
        &hvalues,
        hmake,
        hread,
        hround,
        |a, _| a.exp2(),
        |a, _| a.exp2(),
    );
    // Lane 0 is the low half.
    assert_eq!(Bf16x2::from_f32([1.0, 2.0]).0, 0x4000_3f80);
    assert_eq!(
        Bf16x2::new([bf16::ONE, bf16::ZERO]).lanes(),
        [bf16::ONE, bf16::ZERO]
    );
}
