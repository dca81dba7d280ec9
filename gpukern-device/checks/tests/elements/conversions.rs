//! The conversions ([`gpukern_device::convert`]) on hand-worked edge cases (normal, subnormal,
//! infinite, NaN, every kind of rounding tie, carries into the exponent, overflow to infinity)
//! with the bits the GPU's `cvt.rn` gives written out, then exhaustively: every f16 and bf16
//! widens exactly, narrows back to itself, and the midpoint between any two neighbours rounds to
//! the even one.

use gpukern_device::convert::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use gpukern_device::{bf16, f16};
use gpukern_device_checks::tables::{BF16_CASES, F16_CASES, NANS};

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
