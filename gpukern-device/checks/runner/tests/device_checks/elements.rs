//! `gpukern_device_checks::elements`: every element kernel against a CPU reference bit for bit
//! (NaN for any NaN), the output's tail past `n` untouched, on the hand-worked tables the
//! simulator tests use (`gpukern_device_checks::tables`) and over every 16-bit pattern.

use gpukern::{DeviceSlice, DeviceSliceMut, Element, LaunchConfig, Module, bf16, f16};
use gpukern_device_checks::elements::{
    axpy_bf16x2, axpy_f16x2, cast_f64_to_f32, round_trip_bf16, round_trip_f16, scale_bf16, scale_f16,
    scale_f64, scale_i32, scale_u8, scale_u32, scale_u64,
};
use gpukern_device_checks::tables::{BF16_CASES, F16_CASES, NANS, cast_f64_cases};
use libtest_mimic::Trial;
use rand::Rng;
use rand::rngs::StdRng;

use crate::{Check, Sizes, Target, expect_all, expect_eq, linear, trial};

/// Elements past `n` in every output, which no kernel may touch.
const TAIL: usize = 3;

/// A one-input, one-output element kernel's launcher, `kernel(x, y, n)`.
type MapLaunch<T, U> =
    unsafe fn(&Module, LaunchConfig, DeviceSlice<T>, DeviceSliceMut<U>, usize) -> gpukern::Result<()>;

/// Whether `a` and `b` are the same bits, or both NaN (the GPU's NaN is canonical, the `half`
/// crate's keeps the payload).
fn same_f16(a: &f16, b: &f16) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// [`same_f16`] for bf16.
fn same_bf16(a: &bf16, b: &bf16) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// [`same_f16`] for f32.
fn same_f32(a: &f32, b: &f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Runs `launch` over `x` (`n = x.len()`) into a `y` of `n + TAIL` elements filled with `fill`;
/// returns `y[..n]` after checking the tail still holds `fill`.
fn run_map<T: Element, U: Element + std::fmt::Debug>(
    module: &Module,
    name: &str,
    launch: MapLaunch<T, U>,
    x: &[T],
    fill: U,
    same: fn(&U, &U) -> bool,
) -> Result<Vec<U>, Box<dyn std::error::Error + Send + Sync>> {
    let gpu = module.gpu();
    let n = x.len();
    let xd = gpu.upload(x)?;
    let mut yd = gpu.upload(&vec![fill; n + TAIL])?;
    // SAFETY: `x` holds `n` elements and `y` more; the kernel touches elements below `n` only.
    unsafe { launch(module, linear(n), xd.view(), yd.view_mut(), n) }?;
    let mut y = yd.to_vec()?;
    expect_all(&format!("{name}, n {n}: the tail"), &y[n..], &[fill; TAIL], same)?;
    y.truncate(n);
    Ok(y)
}

/// `n` finite floats of both signs over 2^-30 to 2^20, every significand bit in use.
fn random_f32(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let b: u64 = rng.random();
            let exponent = 97 + (b >> 32) as u32 % 51;
            f32::from_bits(((b >> 63) as u32) << 31 | exponent << 23 | (b as u32 & 0x7f_ffff))
        })
        .collect()
}

fn scale_f64_doubles(module: &Module, sizes: &Sizes, rng: &mut StdRng) -> Check {
    for &n in sizes.elements {
        let mut x: Vec<f64> = (0..n)
            .map(|_| f64::from_bits(rng.random::<u64>() & 0xbfff_ffff_ffff_ffff)) // finite, |x| < 2
            .collect();
        x[0] = f64::MAX; // overflows to infinity
        if n > 1 {
            x[1] = f64::from_bits(1); // the smallest subnormal doubles exactly
        }
        let y = run_map(
            module,
            "scale_f64",
            scale_f64::launch_views::<Module>,
            &x,
            -7.0,
            |a, b| a.to_bits() == b.to_bits(),
        )?;
        let want: Vec<f64> = x.iter().map(|v| v * 2.0).collect();
        expect_all(&format!("scale_f64, n {n}"), &y, &want, |a, b| {
            a.to_bits() == b.to_bits()
        })?;
    }
    Ok(())
}

fn integer_scales(module: &Module, sizes: &Sizes, rng: &mut StdRng) -> Check {
    for &n in sizes.elements {
        let edges = [u64::MAX, 1 << 63, u64::from(u32::MAX), 1 << 31];
        let x64: Vec<u64> = (0..n)
            .map(|i| edges.get(i).copied().unwrap_or_else(|| rng.random()))
            .collect();
        let x32: Vec<u32> = x64.iter().map(|&b| b as u32).collect();
        let xi: Vec<i32> = x64.iter().map(|&b| b as i32).collect();
        let x8: Vec<u8> = (0..n).map(|i| (i * 37) as u8).collect();
        let eq = |a: &_, b: &_| a == b;

        let y = run_map(
            module,
            "scale_u64",
            scale_u64::launch_views::<Module>,
            &x64,
            7,
            |a, b| a == b,
        )?;
        let want: Vec<u64> = x64.iter().map(|v| v.wrapping_mul(2)).collect();
        expect_all(&format!("scale_u64, n {n}"), &y, &want, eq)?;
        let y = run_map(
            module,
            "scale_u32",
            scale_u32::launch_views::<Module>,
            &x32,
            7,
            |a, b| a == b,
        )?;
        let want: Vec<u32> = x32.iter().map(|v| v.wrapping_mul(2)).collect();
        expect_all(&format!("scale_u32, n {n}"), &y, &want, |a, b| a == b)?;
        let y = run_map(
            module,
            "scale_i32",
            scale_i32::launch_views::<Module>,
            &xi,
            7,
            |a, b| a == b,
        )?;
        let want: Vec<i32> = xi.iter().map(|v| v.wrapping_mul(2)).collect();
        expect_all(&format!("scale_i32, n {n}"), &y, &want, |a, b| a == b)?;
        let y = run_map(
            module,
            "scale_u8",
            scale_u8::launch_views::<Module>,
            &x8,
            7,
            |a, b| a == b,
        )?;
        let want: Vec<u8> = x8.iter().map(|v| v.saturating_mul(2)).collect();
        expect_all(&format!("scale_u8, n {n}"), &y, &want, |a, b| a == b)?;
    }
    Ok(())
}

/// Every 16-bit pattern (NaN, infinities and subnormals included), then 5 more: a ragged end.
fn all_16_bit() -> Vec<u16> {
    (0..=u16::MAX).chain(0..5).collect()
}

fn half_scales(module: &Module, _: &Sizes, _: &mut StdRng) -> Check {
    let x: Vec<f16> = all_16_bit().into_iter().map(f16::from_bits).collect();
    let y = run_map(
        module,
        "scale_f16",
        scale_f16::launch_views::<Module>,
        &x,
        f16::from_bits(0x1234),
        same_f16,
    )?;
    let want: Vec<f16> = x.iter().map(|v| f16::from_f32(v.to_f32() * 2.0)).collect();
    expect_all("scale_f16 over every f16", &y, &want, same_f16)?;
    expect_eq(
        "scale_f16 of 65504 and of the smallest subnormal",
        [y[0x7bff].to_bits(), y[1].to_bits()],
        [0x7c00, 2],
    )?;

    let x: Vec<bf16> = all_16_bit().into_iter().map(bf16::from_bits).collect();
    let y = run_map(
        module,
        "scale_bf16",
        scale_bf16::launch_views::<Module>,
        &x,
        bf16::from_bits(0x1234),
        same_bf16,
    )?;
    let want: Vec<bf16> = x.iter().map(|v| bf16::from_f32(v.to_f32() * 2.0)).collect();
    expect_all("scale_bf16 over every bf16", &y, &want, same_bf16)?;
    expect_eq(
        "scale_bf16 of the largest and smallest",
        [y[0x7f7f].to_bits(), y[1].to_bits()],
        [0x7f80, 2],
    )
}

/// A round-trip kernel's launcher, `kernel(x, h, y, n)`.
type RoundTripLaunch<H> = unsafe fn(
    &Module,
    LaunchConfig,
    DeviceSlice<f32>,
    DeviceSliceMut<H>,
    DeviceSliceMut<f32>,
    usize,
) -> gpukern::Result<()>;

/// A 16-bit type's narrowing from f32, widening to f32, and bits.
type Conversions<H> = (fn(f32) -> H, fn(H) -> f32, fn(H) -> u16);

/// Runs a round trip over the hand-worked `cases`, the NaNs and random floats, `n` in all, and
/// checks the 16-bit output against `narrow` (and each case's worked-out bits) and the widened
/// output against `widen` of it.
fn round_trip<H: Element + std::fmt::Debug>(
    module: &Module,
    rng: &mut StdRng,
    name: &str,
    launch: RoundTripLaunch<H>,
    cases: &[(u32, u16)],
    convert: Conversions<H>,
    same: fn(&H, &H) -> bool,
) -> Check {
    let (narrow, widen, bits) = convert;
    let gpu = module.gpu();
    for n in [1, 30, cases.len() + NANS.len(), 1000, 4099] {
        let mut x: Vec<f32> = cases
            .iter()
            .map(|&(b, _)| b)
            .chain(NANS)
            .map(f32::from_bits)
            .collect();
        x.extend(random_f32(rng, n.saturating_sub(x.len())));
        x.truncate(n);
        let xd = gpu.upload(&x)?;
        let fill = narrow(1234.0);
        let mut hd = gpu.upload(&vec![fill; n + TAIL])?;
        let mut yd = gpu.upload(&vec![-7.0f32; n + TAIL])?;
        // SAFETY: `x` holds `n` elements, `h` and `y` more.
        unsafe { launch(module, linear(n), xd.view(), hd.view_mut(), yd.view_mut(), n) }?;
        let (h, y) = (hd.to_vec()?, yd.to_vec()?);
        expect_all(&format!("{name}, n {n}: h's tail"), &h[n..], &[fill; TAIL], same)?;
        expect_all(
            &format!("{name}, n {n}: y's tail"),
            &y[n..],
            &[-7.0; TAIL],
            same_f32,
        )?;
        let want_h: Vec<H> = x.iter().map(|&v| narrow(v)).collect();
        expect_all(&format!("{name}, n {n}: h"), &h[..n], &want_h, same)?;
        let want_y: Vec<f32> = h[..n].iter().map(|&v| widen(v)).collect();
        expect_all(&format!("{name}, n {n}: y"), &y[..n], &want_y, same_f32)?;
        let worked: Vec<u16> = cases.iter().take(n).map(|&(_, b)| b).collect();
        let got: Vec<u16> = h.iter().take(worked.len()).map(|&v| bits(v)).collect();
        expect_all(
            &format!("{name}, n {n}: the hand-worked cases"),
            &got,
            &worked,
            |a, b| a == b,
        )?;
    }
    Ok(())
}

fn round_trips(module: &Module, _: &Sizes, rng: &mut StdRng) -> Check {
    let f16_conv = (
        f16::from_f32 as fn(f32) -> f16,
        f16::to_f32 as fn(f16) -> f32,
        f16::to_bits as fn(f16) -> u16,
    );
    round_trip(
        module,
        rng,
        "round_trip_f16",
        round_trip_f16::launch_views::<Module>,
        F16_CASES,
        f16_conv,
        same_f16,
    )?;
    let bf16_conv = (
        bf16::from_f32 as fn(f32) -> bf16,
        bf16::to_f32 as fn(bf16) -> f32,
        bf16::to_bits as fn(bf16) -> u16,
    );
    round_trip(
        module,
        rng,
        "round_trip_bf16",
        round_trip_bf16::launch_views::<Module>,
        BF16_CASES,
        bf16_conv,
        same_bf16,
    )
}

/// A packed-pair axpy's launcher, `kernel(a, x, y, n)`.
type AxpyLaunch<T> =
    unsafe fn(&Module, LaunchConfig, f32, DeviceSlice<T>, DeviceSliceMut<T>, usize) -> gpukern::Result<()>;

/// Runs an axpy on 16-bit pairs over random `x`, `y` and checks `y = narrow(fma(a, x, y))` bit
/// for bit (compared as f32 bits: `==` on the 16-bit type would take -0 for +0), tail untouched.
fn axpy<T: Element + std::fmt::Debug>(
    module: &Module,
    rng: &mut StdRng,
    name: &str,
    launch: AxpyLaunch<T>,
    narrow: fn(f32) -> T,
    widen: fn(T) -> f32,
) -> Check {
    let gpu = module.gpu();
    let a = 0.7f32;
    for n in [1, 2, 7, 1000, 4099] {
        let x: Vec<T> = random_f32(rng, n).into_iter().map(|v| narrow(v * 1e-3)).collect();
        let mut y0: Vec<T> = random_f32(rng, n).into_iter().map(|v| narrow(v * 1e-3)).collect();
        let xd = gpu.upload(&x)?;
        y0.extend([narrow(1234.0); TAIL]);
        let mut yd = gpu.upload(&y0)?;
        // SAFETY: device buffers start 256-byte aligned (the simulator's: from the allocator, 16);
        // `x` holds `n` elements, `y` more.
        unsafe { launch(module, linear(n.div_ceil(2)), a, xd.view(), yd.view_mut(), n) }?;
        let y: Vec<u32> = yd.to_vec()?.into_iter().map(|v| widen(v).to_bits()).collect();
        let want: Vec<u32> = (0..n + TAIL)
            .map(|i| match i < n {
                true => widen(narrow(a.mul_add(widen(x[i]), widen(y0[i])))).to_bits(),
                false => widen(y0[i]).to_bits(),
            })
            .collect();
        expect_all(&format!("{name}, n {n} (f32 bits)"), &y, &want, |a, b| a == b)?;
    }
    Ok(())
}

fn axpys(module: &Module, _: &Sizes, rng: &mut StdRng) -> Check {
    axpy(
        module,
        rng,
        "axpy_f16x2",
        axpy_f16x2::launch_views::<Module>,
        f16::from_f32,
        f16::to_f32,
    )?;
    axpy(
        module,
        rng,
        "axpy_bf16x2",
        axpy_bf16x2::launch_views::<Module>,
        bf16::from_f32,
        bf16::to_f32,
    )
}

fn casts(module: &Module, sizes: &Sizes, rng: &mut StdRng) -> Check {
    let cases = cast_f64_cases();
    for &n in sizes.elements {
        let x: Vec<f64> = (0..n)
            .map(|i| match cases.get(i) {
                Some(&(v, _)) => v,
                // Every f32 exponent and a few beyond, every significand bit.
                None => {
                    let b: u64 = rng.random();
                    f64::from_bits((b & 0x800f_ffff_ffff_ffff) | ((896 + (b >> 52) % 254) << 52))
                }
            })
            .collect();
        let y = run_map(
            module,
            "cast_f64_to_f32",
            cast_f64_to_f32::launch_views::<Module>,
            &x,
            -7.0,
            same_f32,
        )?;
        let want: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        expect_all(&format!("cast_f64_to_f32, n {n}"), &y, &want, same_f32)?;
        let worked: Vec<f32> = cases.iter().take(n).map(|&(_, w)| w).collect();
        expect_all(
            "cast_f64_to_f32: the hand-worked cases",
            &y[..worked.len()],
            &worked,
            same_f32,
        )?;
    }
    Ok(())
}

/// The element trials of one backend.
pub fn trials(target: &Target) -> Vec<Trial> {
    vec![
        trial(target, "elements::scale_f64_doubles_exactly", scale_f64_doubles),
        trial(
            target,
            "elements::integer_scales_wrap_and_u8_saturates",
            integer_scales,
        ),
        trial(
            target,
            "elements::scale_f16_and_bf16_on_every_pattern",
            half_scales,
        ),
        trial(target, "elements::round_trips_round_to_nearest_even", round_trips),
        trial(target, "elements::axpy_pairs_match_fma_rounded_once", axpys),
        trial(target, "elements::cast_f64_to_f32_rounds_to_nearest_even", casts),
    ]
}
