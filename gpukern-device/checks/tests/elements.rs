//! Element types beyond f32 in the simulator ([`gpukern_device_checks::elements`],
//! [`gpukern_device::convert`]):
//!
//! 1. The conversions on hand-worked edge cases (normal, subnormal, infinite, NaN, every kind of
//!    rounding tie, carries into the exponent, overflow to infinity) with the bits the GPU's
//!    `cvt.rn` gives written out, then exhaustively: every f16 and bf16 widens exactly, narrows
//!    back to itself, and the midpoint between any two neighbours rounds to the even one.
//! 2. Every kernel of the module against a CPU reference on ragged sizes with an extra block of
//!    idle threads, bit for bit (NaN for NaN), the tail past `n` untouched.
//! 3. Planted bugs: a misaligned f16x2 pair, an f32 and an f64 read at a misaligned address,
//!    and a u8 store one past the end, each reported with kernel, block, thread and index.

use gpukern_device::convert::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, load_f16x2, store_f16x2};
use gpukern_device::sim::{Access, Dim3, Launch, LaunchConfig, SimError, Space, Violation};
use gpukern_device::{bf16, f16, mem, thread};
use gpukern_device_checks::elements::{
    axpy_bf16x2, axpy_f16x2, cast_f64_to_f32, round_trip_bf16, round_trip_f16, scale_bf16, scale_f16,
    scale_f64, scale_i32, scale_u32, scale_u64, scale_u8,
};
use gpukern_device_checks::tables::{cast_f64_cases, BF16_CASES, F16_CASES, NANS};

/// Threads per block in these launches (not a multiple of 32 on purpose: nothing here is warp
/// collective, and an odd block puts block edges at odd element indices).
const BLOCK: u32 = 96;

/// Enough blocks of [`BLOCK`] threads for `threads` threads, and one more whose threads all fall
/// past the end (the tail guard must hold them back).
fn config_for(threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(threads.div_ceil(BLOCK as usize) as u32 + 1, 1, 1),
        block: Dim3::new(BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Ragged sizes: one element, less than a block, a block and one, several blocks and a bit.
const SIZES: [usize; 5] = [1, 31, 97, 1000, 4099];

/// Elements past `n` in every output, which no kernel may touch.
const TAIL: usize = 3;

/// `n` pseudo-random 64-bit words.
fn random_bits(seed: u64, n: usize) -> Vec<u64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state ^ (state >> 29)
        })
        .collect()
}

/// `n` finite floats of every sign and a wide range of magnitudes (2^-30 to 2^20), all
/// significand bits in use, so that narrowing has something to round.
fn random_f32(seed: u64, n: usize) -> Vec<f32> {
    random_bits(seed, n)
        .into_iter()
        .map(|b| {
            let sign = (b >> 63) as u32;
            let exponent = 97 + (b >> 32) as u32 % 51;
            f32::from_bits((sign << 31) | (exponent << 23) | (b as u32 & 0x7f_ffff))
        })
        .collect()
}

/// Runs the one-input, one-output kernel `kernel(x, y, n)` over `x` (with `n = x.len()`) and
/// returns `y[..n]`, after checking that the launch passed and left `y`'s tail at `fill`.
fn run_map<T: Copy, U: Copy + PartialEq + std::fmt::Debug>(
    name: &'static str,
    kernel: unsafe fn(*const T, *mut U, usize),
    x: &[T],
    fill: U,
) -> Vec<U> {
    let n = x.len();
    let mut y = vec![fill; n + TAIL];
    let mut launch = Launch::new(name, config_for(n));
    let px = launch.input("x", x);
    let py = launch.output("y", &mut y);
    // SAFETY: `x` holds `n` elements and `y` more; the kernel touches elements below `n` only.
    let result = unsafe { launch.run(|| kernel(px, py, n)) };
    assert_eq!(result, Ok(()), "{name} at n = {n}");
    assert_eq!(y[n..], [fill; TAIL], "{name} at n = {n} wrote past the end");
    y.truncate(n);
    y
}

/// Whether two f16 are the same bits, or both NaN (the GPU's NaN is the canonical `0x7fff`,
/// the `half` crate's keeps the input's payload).
fn same_f16(a: f16, b: f16) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// [`same_f16`] for bf16.
fn same_bf16(a: bf16, b: bf16) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// [`same_f16`] for f32.
fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

// ---------------------------------------------------------------------------------------------
// 1. The conversions.

// The hand-worked tables (`F16_CASES`, `BF16_CASES`, `NANS`) live in the crate's `tables`
// module: gpukern's GPU trials of `round_trip_f16` / `round_trip_bf16` check against them too.

#[test]
fn f32_to_f16_on_the_hand_worked_cases() {
    for &(x, expected) in F16_CASES {
        let h = f32_to_f16(f32::from_bits(x));
        assert_eq!(h.to_bits(), expected, "f32 {x:#010x}");
        // Widening is exact and gives the value the f16 stands for.
        assert_eq!(f16_to_f32(h), h.to_f32());
    }
    for x in NANS {
        assert!(f32_to_f16(f32::from_bits(x)).is_nan(), "f32 {x:#010x}");
    }
}

#[test]
fn f32_to_bf16_on_the_hand_worked_cases() {
    for &(x, expected) in BF16_CASES {
        let b = f32_to_bf16(f32::from_bits(x));
        assert_eq!(b.to_bits(), expected, "f32 {x:#010x}");
        assert_eq!(bf16_to_f32(b).to_bits(), u32::from(expected) << 16);
    }
    for x in NANS {
        assert!(f32_to_bf16(f32::from_bits(x)).is_nan(), "f32 {x:#010x}");
    }
}

/// The value of the f16 with bits `h` from its fields (an independent decoding).
fn f16_value(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((h >> 10) & 0x1f);
    let fraction = f64::from(h & 0x3ff);
    match exponent {
        0 => sign * fraction * 2f64.powi(-24),
        31 if fraction == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + fraction / 1024.0) * 2f64.powi(e - 15),
    }
}

#[test]
fn every_f16_widens_exactly_and_narrows_back_to_itself() {
    for h in 0..=u16::MAX {
        let x = f16_to_f32(f16::from_bits(h));
        let value = f16_value(h);
        if value.is_nan() {
            assert!(x.is_nan(), "f16 {h:#06x}");
            assert!(f32_to_f16(x).is_nan(), "f16 {h:#06x}");
        } else {
            assert_eq!(f64::from(x), value, "f16 {h:#06x}");
            assert_eq!(f32_to_f16(x).to_bits(), h, "f16 {h:#06x}");
        }
    }
}

#[test]
fn every_f16_midpoint_rounds_to_the_even_neighbour() {
    // Positive finite neighbours h, h + 1 (0x7bff's upper neighbour is infinity, whose
    // "midpoint" 65520 is the overflow threshold); negatives mirror them through the sign bit.
    for h in 0..0x7bffu16 {
        let (lo, hi) = (f16_value(h), f16_value(h + 1));
        // 11 significant bits each, so the midpoint needs 12: exact in f32.
        let mid = ((lo + hi) / 2.0) as f32;
        assert_eq!(f64::from(mid), (lo + hi) / 2.0);
        let even = if h % 2 == 0 { h } else { h + 1 };
        for sign in [0, 0x8000] {
            let s = if sign == 0 { 1.0 } else { -1.0 };
            let at = |x: f32| f32_to_f16(s * x).to_bits();
            assert_eq!(at(mid), even | sign, "midpoint above f16 {h:#06x}");
            assert_eq!(at(mid.next_down()), h | sign, "below the midpoint above {h:#06x}");
            assert_eq!(
                at(mid.next_up()),
                (h + 1) | sign,
                "above the midpoint above {h:#06x}"
            );
        }
    }
    assert_eq!(f32_to_f16(65520.0).to_bits(), 0x7c00);
    assert_eq!(f32_to_f16(65520f32.next_down()).to_bits(), 0x7bff);
}

#[test]
fn every_bf16_widens_exactly_and_its_midpoints_round_to_even() {
    for b in 0..=u16::MAX {
        let x = bf16_to_f32(bf16::from_bits(b));
        assert_eq!(x.to_bits(), u32::from(b) << 16, "bf16 {b:#06x}");
        let back = f32_to_bf16(x);
        assert!(
            back.to_bits() == b || (x.is_nan() && back.is_nan()),
            "bf16 {b:#06x}"
        );
    }
    for b in 0..0x7f80u16 {
        // Neighbours b, b + 1 (0x7f7f's upper one is infinity); the midpoint's f32 bits are
        // b's with the 16 bits below set to 0x8000.
        let mid = (u32::from(b) << 16) | 0x8000;
        let even = if b % 2 == 0 { b } else { b + 1 };
        for sign in [0u32, 0x8000_0000] {
            let at = |bits: u32| f32_to_bf16(f32::from_bits(bits | sign)).to_bits();
            let s = (sign >> 16) as u16;
            assert_eq!(at(mid), even | s, "midpoint above bf16 {b:#06x}");
            assert_eq!(at(mid - 1), b | s, "below the midpoint above bf16 {b:#06x}");
            assert_eq!(at(mid + 1), (b + 1) | s, "above the midpoint above bf16 {b:#06x}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. The kernels against CPU references.

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

/// Two 16-bit elements, 4-byte aligned, so that a buffer of them starts where `load_f16x2`
/// may read.
#[repr(C, align(4))]
#[derive(Clone, Copy)]
struct Pair<T>([T; 2]);

/// `values` followed by `tail` copies of `fill`, in storage that starts 4-byte aligned.
fn aligned<T: Copy>(values: &[T], fill: T, tail: usize) -> Vec<Pair<T>> {
    let len = values.len() + tail;
    let mut pairs = vec![Pair([fill; 2]); len.div_ceil(2)];
    for (i, &v) in values.iter().enumerate() {
        pairs[i / 2].0[i % 2] = v;
    }
    pairs
}

/// The first `len` elements of `pairs`.
fn elements<T>(pairs: &[Pair<T>], len: usize) -> &[T] {
    assert!(len <= 2 * pairs.len());
    // SAFETY: `Pair<T>` is `repr(C)` over `[T; 2]`, and `T` (f16, bf16) is 2 bytes with align 2,
    // so there is no padding.
    unsafe { std::slice::from_raw_parts(pairs.as_ptr().cast::<T>(), len) }
}

/// [`elements`], writable.
fn elements_mut<T>(pairs: &mut [Pair<T>], len: usize) -> &mut [T] {
    assert!(len <= 2 * pairs.len());
    // SAFETY: as in `elements`.
    unsafe { std::slice::from_raw_parts_mut(pairs.as_mut_ptr().cast::<T>(), len) }
}

/// Runs `kernel(a, x, y, n)` (an axpy on 16-bit pairs) over random `x`, `y` of `n` elements for
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

// ---------------------------------------------------------------------------------------------
// 3. Planted bugs.

/// The report of `violation` in thread `thread` of block 0 of `kernel`.
fn report(kernel: &str, thread: u32, violation: Violation) -> SimError {
    SimError {
        kernel: kernel.into(),
        block: Dim3::new(0, 0, 0),
        thread: Dim3::new(thread, 0, 0),
        violation,
    }
}

/// Asserts that `result` is a panic report of thread 0 of block 0 of `kernel` whose message
/// starts with `prefix` (the rest is an address).
fn assert_panic_report(result: Result<(), SimError>, kernel: &str, prefix: &str) {
    let err = result.expect_err("the simulator should have caught the planted bug");
    println!("{err}");
    assert_eq!(
        (err.kernel.as_str(), err.block, err.thread),
        (kernel, Dim3::new(0, 0, 0), Dim3::new(0, 0, 0))
    );
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.starts_with(prefix)),
        "report text: {err}"
    );
}

/// `axpy_f16x2`'s pair copy with a planted bug when `bug`: pair `j` starts at element `2j + 1`,
/// so every pair straddles two 4-byte words (a misaligned-address fault on the GPU).
unsafe fn copy_pairs(x: *const f16, y: *mut f16, n: usize, bug: bool) {
    let i = 2 * thread::index_1d() + usize::from(bug);
    if i + 1 < n {
        // SAFETY: `i + 1 < n`; aligned unless `bug`.
        unsafe { store_f16x2(y, i, load_f16x2(x, i)) }
    }
}

#[test]
fn a_misaligned_f16x2_pair_is_reported() {
    let n = 64;
    let xs = aligned(&vec![f16::ONE; n], f16::ZERO, 0);
    for bug in [false, true] {
        let mut ys = aligned(&vec![f16::ZERO; n], f16::ZERO, 0);
        let y = elements_mut(&mut ys, n);
        let mut launch = Launch::new("copy_pairs", config_for(n / 2));
        let px = launch.input("x", elements(&xs, n));
        let py = launch.output("y", y);
        // SAFETY: `x` and `y` hold `n` f16; the planted misalignment is what is under test.
        let result = unsafe { launch.run(|| copy_pairs(px, py, n, bug)) };
        if bug {
            assert_panic_report(result, "copy_pairs", "misaligned 4-byte pair read at ");
        } else {
            assert_eq!(result, Ok(()));
            assert!(elements(&ys, n).iter().all(|v| *v == f16::ONE));
        }
    }
}

/// Reads `x[i]` as an f32 and an f64 from `offset` bytes into `x` (aligned when the offset is
/// a multiple of 8) and writes their sum to `y[i]`.
unsafe fn read_at_offset(x: *const u64, y: *mut f64, n: usize, offset: usize) {
    let i = thread::index_1d();
    if i < n {
        let base = x.cast::<u8>().wrapping_add(offset);
        // SAFETY: `i < n`; `x` holds `n + 1` words, so both reads stay inside; aligned unless
        // `offset` is not a multiple of the type's size (the planted bug).
        unsafe {
            let a = mem::load(base.cast::<f32>(), 2 * i);
            let b = mem::load(base.cast::<f64>(), i);
            mem::store(y, i, f64::from(a) + b);
        }
    }
}

#[test]
fn misaligned_scalar_reads_are_reported() {
    let n = 40;
    let x = vec![0u64; n + 1];
    for (offset, expected) in [
        (0, None),
        (2, Some("misaligned 4-byte read at ")),
        (4, Some("misaligned 8-byte read at ")),
    ] {
        let mut y = vec![1.0f64; n];
        let mut launch = Launch::new("read_at_offset", config_for(n));
        let px = launch.input("x", &x);
        let py = launch.output("y", &mut y);
        // SAFETY: `x` holds `n + 1` words; the planted misalignment is what is under test.
        let result = unsafe { launch.run(|| read_at_offset(px, py, n, offset)) };
        match expected {
            None => {
                assert_eq!(result, Ok(()));
                assert_eq!(y, vec![0.0; n]);
            }
            Some(prefix) => assert_panic_report(result, "read_at_offset", prefix),
        }
    }
}

/// `scale_u8`'s store with a planted bug when `bug`: the tail guard is `i <= n`, so thread `n`
/// stores one byte past the end of `y`.
unsafe fn store_bytes(y: *mut u8, n: usize, bug: bool) {
    let i = thread::index_1d();
    if i < n || (bug && i == n) {
        // SAFETY: `i < n`, unless `bug` (the planted out-of-bounds store).
        unsafe { mem::store(y, i, i as u8) }
    }
}

#[test]
fn a_u8_store_past_the_end_is_reported_with_its_index() {
    let n = 70;
    for bug in [false, true] {
        let mut y = vec![0u8; n];
        let mut launch = Launch::new("store_bytes", config_for(n));
        let py = launch.output("y", &mut y);
        // SAFETY: `y` holds `n` bytes; the planted store past the end is what is under test.
        let result = unsafe { launch.run(|| store_bytes(py, n, bug)) };
        if bug {
            let err = result.expect_err("the simulator should have caught the planted bug");
            println!("{err}");
            let expected = Violation::OutOfBounds {
                space: Space::Global,
                buffer: "y".into(),
                access: Access::Write,
                index: n,
                len: n,
            };
            assert_eq!(
                err,
                report("store_bytes", n as u32, expected),
                "report text: {err}"
            );
        } else {
            assert_eq!(result, Ok(()));
            assert!(y.iter().enumerate().all(|(i, &v)| v == i as u8));
        }
    }
}
