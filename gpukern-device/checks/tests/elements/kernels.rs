//! Every kernel of [`gpukern_device_checks::elements`] against a CPU reference on ragged sizes
//! with an extra block of idle threads, bit for bit (NaN for NaN), the tail past `n` untouched.

use gpukern_device::sim::Launch;
use gpukern_device::{bf16, f16};
use gpukern_device_checks::elements::{
    axpy_bf16x2, axpy_f16x2, cast_f64_to_f32, round_trip_bf16, round_trip_f16, scale_bf16, scale_f16,
    scale_f64, scale_i32, scale_u32, scale_u64, scale_u8,
};
use gpukern_device_checks::tables::{cast_f64_cases, BF16_CASES, F16_CASES, NANS};

use super::{
    aligned, config_for, elements, elements_mut, random_bits, random_f32, run_map, same_bf16, same_f16,
    same_f32, SIZES, TAIL,
};

#[test]
fn scale_f64_doubles_exactly() {
    for &n in &SIZES {
        let mut x: Vec<f64> = random_bits(1, n)
            .into_iter()
            .map(|b| f64::from_bits(b & 0xbfff_ffff_ffff_ffff)) // finite, |x| < 2
            .collect();
        x[0] = f64::MAX; // overflows to infinity
        if n > 1 {
            x[1] = f64::from_bits(1); // the smallest subnormal doubles exactly
        }
        let y = run_map("scale_f64", scale_f64, &x, -7.0);
        for (i, (&x, &y)) in x.iter().zip(&y).enumerate() {
            assert_eq!(y.to_bits(), (x * 2.0).to_bits(), "n = {n}, i = {i}");
        }
    }
}

#[test]
fn integer_scales_wrap() {
    for &n in &SIZES {
        let bits = random_bits(2, n);
        let edges = |i: usize, b: u64| match i {
            0 => u64::MAX,
            1 => 1 << 63,
            2 => u64::from(u32::MAX),
            3 => 1 << 31,
            _ => b,
        };
        let x64: Vec<u64> = bits.iter().enumerate().map(|(i, &b)| edges(i, b)).collect();
        let x32: Vec<u32> = x64.iter().map(|&b| b as u32).collect();
        let xi: Vec<i32> = x64.iter().map(|&b| b as i32).collect();

        let y = run_map("scale_u64", scale_u64, &x64, 7);
        assert!(
            x64.iter().zip(&y).all(|(x, y)| *y == x.wrapping_mul(2)),
            "u64, n = {n}"
        );
        let y = run_map("scale_u32", scale_u32, &x32, 7);
        assert!(
            x32.iter().zip(&y).all(|(x, y)| *y == x.wrapping_mul(2)),
            "u32, n = {n}"
        );
        let y = run_map("scale_i32", scale_i32, &xi, 7);
        assert!(
            xi.iter().zip(&y).all(|(x, y)| *y == x.wrapping_mul(2)),
            "i32, n = {n}"
        );
    }
}

#[test]
fn scale_u8_saturates_and_neighbouring_bytes_do_not_race() {
    for &n in &SIZES {
        let x: Vec<u8> = (0..n).map(|i| (i * 37) as u8).collect();
        let y = run_map("scale_u8", scale_u8, &x, 7);
        for (i, (&x, &y)) in x.iter().zip(&y).enumerate() {
            assert_eq!(y, x.saturating_mul(2), "n = {n}, i = {i}");
        }
    }
}

/// Every f16 bit pattern (NaN, infinities and subnormals included), then `extra` more.
fn all_f16(extra: usize) -> Vec<u16> {
    (0..=u16::MAX).chain(0..extra as u16).collect()
}

#[test]
fn scale_f16_on_every_f16() {
    // 65536 + 5 elements: every pattern once, and a ragged end.
    let x: Vec<f16> = all_f16(5).into_iter().map(f16::from_bits).collect();
    let y = run_map("scale_f16", scale_f16, &x, f16::from_bits(0x1234));
    for (&x, &y) in x.iter().zip(&y) {
        let expected = f16::from_f32(x.to_f32() * 2.0);
        assert!(
            same_f16(y, expected),
            "x = {:#06x}: {:#06x}",
            x.to_bits(),
            y.to_bits()
        );
    }
    // Spot checks of the reference itself: overflow to infinity, a subnormal doubling.
    assert_eq!(y[0x7bff].to_bits(), 0x7c00);
    assert_eq!(y[0x0001].to_bits(), 0x0002);
}

#[test]
fn scale_bf16_on_every_bf16() {
    let x: Vec<bf16> = all_f16(5).into_iter().map(bf16::from_bits).collect();
    let y = run_map("scale_bf16", scale_bf16, &x, bf16::from_bits(0x1234));
    for (&x, &y) in x.iter().zip(&y) {
        let expected = bf16::from_f32(x.to_f32() * 2.0);
        assert!(
            same_bf16(y, expected),
            "x = {:#06x}: {:#06x}",
            x.to_bits(),
            y.to_bits()
        );
    }
    assert_eq!(y[0x7f7f].to_bits(), 0x7f80);
    assert_eq!(y[0x0001].to_bits(), 0x0002);
}

/// Runs `round_trip_*`: the edge cases' inputs, the NaNs, then random floats up to `n` in all.
fn round_trip_inputs(cases: &[(u32, u16)], n: usize) -> Vec<f32> {
    let mut x: Vec<f32> = cases
        .iter()
        .map(|&(bits, _)| bits)
        .chain(NANS)
        .map(f32::from_bits)
        .collect();
    x.extend(random_f32(3, n.saturating_sub(x.len())));
    x.truncate(n);
    x
}

/// Runs a round-trip kernel over `x`; returns the 16-bit output and the widened one.
fn run_round_trip<H: Copy + PartialEq + std::fmt::Debug>(
    name: &'static str,
    kernel: unsafe fn(*const f32, *mut H, *mut f32, usize),
    x: &[f32],
    fill: H,
) -> (Vec<H>, Vec<f32>) {
    let n = x.len();
    let mut h = vec![fill; n + TAIL];
    let mut y = vec![-7.0f32; n + TAIL];
    let mut launch = Launch::new(name, config_for(n));
    let px = launch.input("x", x);
    let ph = launch.output("h", &mut h);
    let py = launch.output("y", &mut y);
    // SAFETY: `x` holds `n` elements, `h` and `y` more.
    let result = unsafe { launch.run(|| kernel(px, ph, py, n)) };
    assert_eq!(result, Ok(()), "{name} at n = {n}");
    assert_eq!(h[n..], [fill; TAIL]);
    assert_eq!(y[n..], [-7.0; TAIL]);
    h.truncate(n);
    y.truncate(n);
    (h, y)
}

#[test]
fn round_trip_f16_rounds_to_nearest_even() {
    for n in [1, 30, F16_CASES.len() + NANS.len(), 1000, 4099] {
        let x = round_trip_inputs(F16_CASES, n);
        let (h, y) = run_round_trip("round_trip_f16", round_trip_f16, &x, f16::from_bits(0x1234));
        for i in 0..n {
            assert!(
                same_f16(h[i], f16::from_f32(x[i])),
                "x = {:#010x}",
                x[i].to_bits()
            );
            assert!(same_f32(y[i], h[i].to_f32()), "x = {:#010x}", x[i].to_bits());
            if let Some(&(_, expected)) = F16_CASES.get(i) {
                assert_eq!(h[i].to_bits(), expected, "hand-worked case {i}");
            }
        }
    }
}

#[test]
fn round_trip_bf16_rounds_to_nearest_even() {
    for n in [1, 30, BF16_CASES.len() + NANS.len(), 1000, 4099] {
        let x = round_trip_inputs(BF16_CASES, n);
        let (h, y) = run_round_trip("round_trip_bf16", round_trip_bf16, &x, bf16::from_bits(0x1234));
        for i in 0..n {
            assert!(
                same_bf16(h[i], bf16::from_f32(x[i])),
                "x = {:#010x}",
                x[i].to_bits()
            );
            assert!(same_f32(y[i], h[i].to_f32()), "x = {:#010x}", x[i].to_bits());
            if let Some(&(_, expected)) = BF16_CASES.get(i) {
                assert_eq!(h[i].to_bits(), expected, "hand-worked case {i}");
            }
        }
    }
}

/// ragged `n`, and checks `y` against `from_f32(fma(a, x, y))` bit for bit, the tail untouched.
fn check_axpy<T: Copy + PartialEq + std::fmt::Debug>(
    name: &'static str,
    kernel: unsafe fn(f32, *const T, *mut T, usize),
    to_f32: fn(T) -> f32,
    from_f32: fn(f32) -> T,
) {
    let fill = from_f32(1234.0);
    for n in [1, 2, 7, 96, 193, 1000, 4099] {
        let x: Vec<T> = random_f32(4, n).into_iter().map(|v| from_f32(v * 1e-3)).collect();
        let y0: Vec<T> = random_f32(5, n).into_iter().map(|v| from_f32(v * 1e-3)).collect();
        let a = 0.7f32;
        let xs = aligned(&x, fill, 0);
        let mut ys = aligned(&y0, fill, TAIL);
        {
            let mut launch = Launch::new(name, config_for(n.div_ceil(2)));
            let px = launch.input("x", elements(&xs, n));
            let py = launch.output("y", elements_mut(&mut ys, n + TAIL));
            // SAFETY: both buffers start 4-byte aligned, `x` holds `n` elements and `y` more.
            let result = unsafe { launch.run(|| kernel(a, px, py, n)) };
            assert_eq!(result, Ok(()), "{name}, n = {n}");
        }
        let y = elements(&ys, n + TAIL);
        for i in 0..n {
            let expected = from_f32(a.mul_add(to_f32(x[i]), to_f32(y0[i])));
            // Compared as f32 bits: `==` on the 16-bit type would take -0 for +0.
            let (got, expected) = (to_f32(y[i]).to_bits(), to_f32(expected).to_bits());
            assert_eq!(got, expected, "{name}, n = {n}, i = {i}");
        }
        assert_eq!(y[n..], [fill; TAIL], "{name}, n = {n}: tail");
    }
}

#[test]
fn axpy_f16x2_matches_fma_rounded_once() {
    check_axpy("axpy_f16x2", axpy_f16x2, f16::to_f32, f16::from_f32);
}

#[test]
fn axpy_bf16x2_matches_fma_rounded_once() {
    check_axpy("axpy_bf16x2", axpy_bf16x2, bf16::to_f32, bf16::from_f32);
}

#[test]
fn cast_f64_to_f32_rounds_to_nearest_even() {
    let (edges, expected_edges): (Vec<f64>, Vec<f32>) = cast_f64_cases().into_iter().unzip();
    for &n in &SIZES {
        let mut x: Vec<f64> = random_bits(6, n)
            .into_iter()
            .map(|b| f64::from_bits((b & 0x800f_ffff_ffff_ffff) | ((896 + (b >> 52) % 254) << 52)))
            .collect();
        for (slot, &e) in x.iter_mut().zip(&edges) {
            *slot = e;
        }
        let y = run_map("cast_f64_to_f32", cast_f64_to_f32, &x, -7.0);
        for (i, (&x, &y)) in x.iter().zip(&y).enumerate() {
            assert!(same_f32(y, x as f32), "n = {n}, i = {i}, x = {x:e}");
            if let Some(&e) = expected_edges.get(i) {
                assert!(same_f32(y, e), "n = {n}, edge {i}: {y:e}, expected {e:e}");
            }
        }
    }
}
