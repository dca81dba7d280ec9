//! `gpukern_device_checks::math`: the math functions on the device.
//!
//! * `accurate`: each function over a sweep of its domain must give the host's bits exactly
//!   (the functions are plain Rust with correctly rounded operations; their ulp bounds are
//!   measured on the host by `gpukern-device/tests/math.rs`).
//! * `fast`: each instruction over a sweep of its domain within the bound its doc states, against
//!   f64; the worst error of each is printed (`--nocapture`), so a run records what the GPU gives.
//! * `packed`: every bf16x2 and f16x2 operation over pairs of edge values (zeros of both signs,
//!   NaN, infinities, subnormals) and random pairs: the correctly rounded ones bit for bit as the
//!   simulator's model, the approximate ones within 2 ulp of the lane type.

use gpukern::Module;
use gpukern::gpukern_device::convert;
use gpukern_device_checks::math::{
    ACCURATE, FAST, PACKED, math_accurate, math_div_fast, math_fast, math_packed, packed_op,
};
use libtest_mimic::Trial;
use rand::Rng;
use rand::rngs::StdRng;

use crate::{Check, Sizes, Target, linear, trial};

pub fn trials(target: &Target) -> Vec<Trial> {
    vec![
        trial(target, "math::accurate_gives_the_hosts_bits", accurate_bits),
        trial(target, "math::fast_within_its_bounds", fast_bounds),
        trial(target, "math::packed_matches_the_model", packed),
    ]
}

/// `count` f32 inputs spread over the bit patterns of `[lo, hi]` (both positive), with their
/// negatives when `both_signs`.
fn sweep(lo: f32, hi: f32, count: usize, both_signs: bool) -> Vec<f32> {
    let (a, b) = (lo.to_bits(), hi.to_bits());
    let step = ((b - a) as usize / count).max(1);
    let mut xs: Vec<f32> = (a..=b).step_by(step).map(f32::from_bits).collect();
    if both_signs {
        let negatives: Vec<f32> = xs.iter().map(|x| -x).collect();
        xs.extend(negatives);
    }
    xs
}

/// A launcher of `kernel(x, y, n, which)`.
type Unary = for<'a> unsafe fn(
    &'a Module,
    gpukern::LaunchConfig,
    gpukern::DeviceSlice<'a, f32>,
    gpukern::DeviceSliceMut<'a, f32>,
    usize,
    u32,
) -> gpukern::Result<()>;

/// `kernel(x, y, n, which)` on the device.
fn run(
    module: &Module,
    launch: Unary,
    x: &[f32],
    which: u32,
) -> Result<Vec<f32>, Box<dyn std::error::Error + Send + Sync>> {
    let gpu = module.gpu();
    let xd = gpu.upload(x)?;
    let mut yd = gpu.zeros_of::<f32>(x.len())?;
    // SAFETY: both hold `x.len()` floats; `which` is in the table.
    unsafe { launch(module, linear(x.len()), xd.view(), yd.view_mut(), x.len(), which) }?;
    Ok(yd.to_vec()?)
}

fn accurate_bits(module: &Module, sizes: &Sizes, _: &mut StdRng) -> Check {
    let mut xs = sweep(1e-30, 3e38, sizes.math, true);
    xs.extend(sweep(0.25, 8.0, sizes.math, true));
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
    ]);
    for (which, (name, f)) in ACCURATE.iter().enumerate() {
        let got = run(module, math_accurate::launch_views::<Module>, &xs, which as u32)?;
        for (x, g) in xs.iter().zip(&got) {
            let want = f(*x);
            if g.to_bits() != want.to_bits() && !(g.is_nan() && want.is_nan()) {
                return Err(
                    format!("accurate::{name}({x:e}) = {g:e} on the device, {want:e} on the host").into(),
                );
            }
        }
    }
    Ok(())
}

/// The error measure of a bound: relative, absolute, or in ulps of f32 at the exact value.
#[derive(Clone, Copy)]
enum Measure {
    Relative,
    Absolute,
    Ulps,
}

impl Measure {
    fn of(self, got: f32, exact: f64) -> f64 {
        let diff = (f64::from(got) - exact).abs();
        match self {
            Measure::Relative => diff / exact.abs(),
            Measure::Absolute => diff,
            Measure::Ulps => {
                let a = exact.abs().max(f64::from(f32::MIN_POSITIVE));
                diff / 2f64.powi(a.log2().floor() as i32 - 23)
            }
        }
    }
}

/// One documented bound of a fast function: over `[lo, hi]` (and the negatives when
/// `both_signs`), `measure` of the error at most `limit`, against `exact`.
struct Bound {
    which: usize,
    lo: f32,
    hi: f32,
    both_signs: bool,
    measure: Measure,
    limit: f64,
    exact: fn(f64) -> f64,
}

/// The bounds [`gpukern_device::math::fast`]'s docs state.
fn bounds() -> Vec<Bound> {
    let b = |which, lo, hi, both_signs, measure, limit: f64, exact| Bound {
        which,
        lo,
        hi,
        both_signs,
        measure,
        limit,
        exact,
    };
    use Measure::*;
    vec![
        b(0, 1e-6, 20.0, true, Relative, 2f64.powf(-10.987), f64::tanh),
        b(1, 1e-6, 126.0, true, Relative, 2f64.powi(-22), f64::exp2),
        b(2, 0.5, 2.0, false, Absolute, 2f64.powi(-22), f64::log2),
        b(2, 2.0, 3e38, false, Relative, 2f64.powi(-22), f64::log2),
        b(2, 1e-37, 0.5, false, Relative, 2f64.powi(-22), f64::log2),
        b(3, 1e-37, 3e37, true, Ulps, 1.0, |x| 1.0 / x),
        b(4, 1e-37, 3e38, false, Relative, 2f64.powf(-22.9), |x| {
            1.0 / x.sqrt()
        }),
        b(
            5,
            1e-6,
            std::f32::consts::PI,
            true,
            Absolute,
            2f64.powf(-20.5),
            f64::sin,
        ),
        b(
            5,
            std::f32::consts::PI,
            100.0 * std::f32::consts::PI,
            true,
            Absolute,
            2f64.powf(-20.5) + 100.0 * std::f64::consts::PI * 2f64.powi(-22),
            f64::sin,
        ),
        b(
            6,
            1e-6,
            std::f32::consts::PI,
            true,
            Absolute,
            2f64.powf(-20.5),
            f64::cos,
        ),
        b(
            6,
            std::f32::consts::PI,
            100.0 * std::f32::consts::PI,
            true,
            Absolute,
            2f64.powf(-20.5) + 100.0 * std::f64::consts::PI * 2f64.powi(-22),
            f64::cos,
        ),
        b(
            7,
            1e-6,
            80.0,
            true,
            Relative,
            2f64.powi(-22) + 80.0 * 2f64.powi(-24),
            f64::exp,
        ),
        b(8, 0.5, 2.0, false, Absolute, 2f64.powi(-22), f64::ln),
        b(9, 1e-6, 126.0, true, Relative, 2f64.powi(-22), f64::exp2),
        b(10, 1.2e-38, 8e37, true, Ulps, 1.0, |x| 1.0 / x),
        b(
            8,
            2.0,
            3e38,
            false,
            Relative,
            2f64.powi(-22) + 2f64.powi(-24),
            f64::ln,
        ),
    ]
}

fn fast_bounds(module: &Module, sizes: &Sizes, rng: &mut StdRng) -> Check {
    for bound in bounds() {
        let name = FAST[bound.which].0;
        let xs = sweep(bound.lo, bound.hi, sizes.math, bound.both_signs);
        let got = run(module, math_fast::launch_views::<Module>, &xs, bound.which as u32)?;
        let (err, at) = xs
            .iter()
            .zip(&got)
            .map(|(&x, &g)| (bound.measure.of(g, (bound.exact)(f64::from(x))), x))
            .fold((0.0f64, 0.0f32), |w, e| if e.0 > w.0 { e } else { w });
        println!(
            "fast::{name} on [{:e}, {:e}]: worst error {err:.3e} at {at:e}, bound {:.3e}",
            bound.lo, bound.hi, bound.limit
        );
        if err.is_nan() || err > bound.limit {
            return Err(format!(
                "fast::{name}: error {err:e} at x = {at:e}, over its bound {:e}",
                bound.limit
            )
            .into());
        }
    }
    // The `.ftz` forms flush: `2^-130` and `1 / 2^127` (subnormal) are zeros, `2^x` of a
    // subnormal `x` is 1 and its reciprocal infinite, where the plain forms keep them.
    let tiny = f32::from_bits(1);
    for (which, x, want) in [
        (9, -130.0f32, 0.0f32),
        (10, 2f32.powi(127), 0.0),
        (10, -(2f32.powi(127)), -0.0),
        (9, tiny, 1.0),
        (10, tiny, f32::INFINITY),
    ] {
        let got = run(module, math_fast::launch_views::<Module>, &[x], which)?[0];
        if got.to_bits() != want.to_bits() {
            return Err(format!(
                "fast::{}({x:e}) = {got:e}, not the flushed {want:e}",
                FAST[which as usize].0
            )
            .into());
        }
    }
    // `div`: within 3 ulp for |b| in [2^-126, 2^126]: quotients of magnitudes up to 2^60 each,
    // and of large divisors by large dividends (b up to 2^125).
    let n = sizes.math;
    let sign = |rng: &mut StdRng| if rng.random::<bool>() { 1.0 } else { -1.0 };
    let mut pairs: Vec<(f32, f32)> = Vec::with_capacity(2 * n);
    for k in 0..2 * n {
        let range = if k < n { -60.0..60.0 } else { 100.0..125.0 };
        let a = sign(rng) * 2f32.powf(rng.random_range(range.clone()));
        let b = sign(rng) * 2f32.powf(rng.random_range(range));
        pairs.push((a, b));
    }
    let (a, b): (Vec<f32>, Vec<f32>) = pairs.into_iter().unzip();
    let gpu = module.gpu();
    let (ad, bd) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut yd = gpu.zeros_of::<f32>(a.len())?;
    // SAFETY: all hold `a.len()` floats.
    unsafe { math_div_fast::launch(module, linear(a.len()), &ad, &bd, &mut yd, a.len()) }?;
    let y = yd.to_vec()?;
    let err = (0..a.len())
        .map(|i| Measure::Ulps.of(y[i], f64::from(a[i]) / f64::from(b[i])))
        .fold(0.0, f64::max);
    println!("fast::div: worst error {err:.3} ulp, bound 3");
    if err.is_nan() || err > 3.0 {
        return Err(format!("fast::div: {err} ulp, over its bound of 3").into());
    }
    Ok(())
}

/// Lane values of both types' edges: zeros of both signs, NaN, infinities, the smallest
/// subnormal, ones, and ordinary values.
const EDGES: [f32; 12] = [
    0.0,
    -0.0,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    1.0,
    -1.0,
    0.5,
    -2.75,
    3.0e-5,
    1.0e-7,
    100.0,
];

/// The error of the lane `got` against the exact `want` in ulps of the lane type (`f16` or
/// bf16); an exact value that rounds to infinity in the lane type must give that infinity.
fn lane_ulps(got: f32, want: f64, f16: bool) -> f64 {
    let (mantissa, min_normal, rounded) = if f16 {
        (10, -14, convert::f64_to_f16(want).to_f32())
    } else {
        (7, -126, convert::f64_to_bf16(want).to_f32())
    };
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if rounded.is_infinite() || got.is_infinite() {
        return if got == rounded { 0.0 } else { f64::INFINITY };
    }
    let a = want.abs().max(2f64.powi(min_normal));
    (f64::from(got) - want).abs() / 2f64.powi(a.log2().floor() as i32 - mantissa)
}

fn packed(module: &Module, sizes: &Sizes, rng: &mut StdRng) -> Check {
    let gpu = module.gpu();
    for f16 in [false, true] {
        let pack = |v: [f32; 2]| {
            if f16 {
                gpukern::gpukern_device::math::packed::F16x2::from_f32(v).0
            } else {
                gpukern::gpukern_device::math::packed::Bf16x2::from_f32(v).0
            }
        };
        let unpack = |w: u32| {
            if f16 {
                gpukern::gpukern_device::math::packed::F16x2(w).to_f32()
            } else {
                gpukern::gpukern_device::math::packed::Bf16x2(w).to_f32()
            }
        };
        let mut a = Vec::new();
        let mut b = Vec::new();
        for &x in &EDGES {
            for &y in &EDGES {
                a.push(pack([x, y]));
                b.push(pack([y, x]));
            }
        }
        for _ in 0..sizes.math / 16 {
            let mut r = || rng.random_range(-8.0f32..8.0);
            a.push(pack([r(), r()]));
            b.push(pack([r(), r()]));
        }
        let (ad, bd) = (gpu.upload(&a)?, gpu.upload(&b)?);
        for (which, name) in PACKED.iter().enumerate() {
            let mut yd = gpu.zeros_of::<u32>(a.len())?;
            // SAFETY: all hold `a.len()` pairs; `which` is in the table.
            unsafe {
                math_packed::launch(
                    module,
                    linear(a.len()),
                    &ad,
                    &bd,
                    &mut yd,
                    a.len(),
                    which as u32,
                    u32::from(f16),
                )
            }?;
            let y = yd.to_vec()?;
            let ty = if f16 { "f16x2" } else { "bf16x2" };
            let approximate = *name == "tanh" || *name == "exp2";
            let mut worst = 0.0f64;
            for i in 0..a.len() {
                let want = packed_op(which as u32, f16, a[i], b[i]);
                if approximate {
                    let exact = unpack(a[i]).map(|x| {
                        if *name == "tanh" {
                            f64::from(x).tanh()
                        } else {
                            f64::from(x).exp2()
                        }
                    });
                    let got = unpack(y[i]);
                    for l in 0..2 {
                        worst = worst.max(lane_ulps(got[l], exact[l], f16));
                    }
                } else {
                    let (g, w) = (unpack(y[i]), unpack(want));
                    let same =
                        (0..2).all(|l| g[l].to_bits() == w[l].to_bits() || (g[l].is_nan() && w[l].is_nan()));
                    if !same {
                        return Err(format!(
                            "{ty} {name}({:?}, {:?}) = {g:?} on the device, {w:?} in the model",
                            unpack(a[i]),
                            unpack(b[i])
                        )
                        .into());
                    }
                }
            }
            if approximate {
                println!("{ty} {name}: worst error {worst:.3} ulp of the lane type, bound 2");
                if worst.is_nan() || worst > 2.0 {
                    return Err(format!("{ty} {name}: {worst} ulp, over its bound of 2").into());
                }
            }
        }
    }
    Ok(())
}
