//! Expected results worked out by hand, shared by this crate's simulator tests and gpukern's GPU
//! trials (`tests/device_checks.rs`), so that both hold the kernels to the same table (host
//! only: nothing here is device code).

/// f32 inputs (as bits) and the f16 bits `cvt.rn.f16.f32` gives, worked out by hand.
pub const F16_CASES: &[(u32, u16)] = &[
    (0x3f80_0000, 0x3c00), // 1.0
    (0xc000_0000, 0xc000), // -2.0
    (0x0000_0000, 0x0000), // +0
    (0x8000_0000, 0x8000), // -0 keeps its sign
    (0x477f_e000, 0x7bff), // 65504, the largest f16
    (0x477f_ef00, 0x7bff), // 65519, below the midpoint to infinity
    (0x477f_f000, 0x7c00), // 65520: the tie between 65504 (odd) and "65536" rounds to infinity
    (0x4780_0000, 0x7c00), // 65536 overflows
    (0x7f80_0000, 0x7c00), // +inf
    (0xff80_0000, 0xfc00), // -inf
    (0x3880_0000, 0x0400), // 2^-14, the smallest normal f16
    (0x387f_c000, 0x03ff), // 1023 * 2^-24, the largest subnormal
    (0x387f_e000, 0x0400), // 2^-14 - 2^-25: tie between 0x03ff (odd) and 0x0400, rounds up
    (0x3380_0000, 0x0001), // 2^-24, the smallest subnormal
    (0x3300_0000, 0x0000), // 2^-25: tie between 0 (even) and 2^-24, rounds to zero
    (0x3300_0001, 0x0001), // just above 2^-25 rounds up
    (0xb300_0000, 0x8000), // -2^-25 rounds to -0
    (0x33c0_0000, 0x0002), // 3 * 2^-25: tie between 1 (odd) and 2 units, rounds to 2
    (0x0000_0001, 0x0000), // the smallest f32 subnormal becomes zero
    (0x3f80_1000, 0x3c00), // 1 + 2^-11: tie between 1.0 (even) and 1 + 2^-10, stays 1.0
    (0x3f80_1001, 0x3c01), // just above that tie rounds up
    (0x3f80_3000, 0x3c02), // 1 + 3 * 2^-11: tie between 0x3c01 (odd) and 0x3c02, rounds up
    (0x3f7f_f000, 0x3c00), // 1 - 2^-12: tie between 0x3bff (odd) and 1.0, carries into the exponent
    (0x4500_1000, 0x6800), // 2049: tie between 2048 (even) and 2050
    (0x4500_3000, 0x6802), // 2051: tie between 2050 (odd) and 2052
    (0xc500_3000, 0xe802), // -2051: ties are symmetric in sign
];

/// f32 inputs (as bits) and the bf16 bits `cvt.rn.bf16.f32` gives, worked out by hand.
pub const BF16_CASES: &[(u32, u16)] = &[
    (0x3f80_0000, 0x3f80), // 1.0
    (0x8000_0000, 0x8000), // -0
    (0x3f80_8000, 0x3f80), // 1 + 2^-8: tie between 1.0 (even) and 1 + 2^-7, stays 1.0
    (0x3f80_8001, 0x3f81), // just above that tie rounds up
    (0x3f81_8000, 0x3f82), // 1 + 3 * 2^-8: tie between 0x3f81 (odd) and 0x3f82, rounds up
    (0x3f81_7fff, 0x3f81), // just below that tie rounds down
    (0xbf81_8000, 0xbf82), // the same tie, negative
    (0x3fff_8000, 0x4000), // tie between 0x3fff (odd) and 2.0, carries into the exponent
    (0x7f7f_7fff, 0x7f7f), // just below the midpoint above the largest bf16
    (0x7f7f_8000, 0x7f80), // that midpoint, a tie from an odd bf16: infinity
    (0x7f7f_ffff, 0x7f80), // f32::MAX rounds to infinity
    (0x7f80_0000, 0x7f80), // +inf
    (0xff80_0000, 0xff80), // -inf
    (0x0001_0000, 0x0001), // a subnormal bf16, exact
    (0x0000_8000, 0x0000), // tie between 0 (even) and the smallest subnormal
    (0x0001_8000, 0x0002), // tie between 0x0001 (odd) and 0x0002
    (0x0000_0001, 0x0000), // the smallest f32 subnormal becomes zero
    (0x007f_ffff, 0x0080), // the largest f32 subnormal rounds up to the smallest normal bf16
];

/// f32 NaNs (quiet, signalling, negative); a conversion of each must give a NaN, any NaN.
pub const NANS: [u32; 4] = [0x7fc0_0000, 0x7f80_0001, 0xffc0_1234, 0x7fbf_ffff];

/// f64 inputs of `cast_f64_to_f32` and the f32 `cvt.rn.f32.f64` gives (a NaN: any NaN).
pub fn cast_f64_cases() -> [(f64, f32); 10] {
    [
        (1.0 / 3.0, (1.0f64 / 3.0) as f32),
        (-0.0, -0.0),
        (f64::MAX, f32::INFINITY), // overflows to infinity
        // Below the overflow midpoint: f32::MAX.
        (f64::from(f32::MAX) * (1.0 + 2f64.powi(-25)), f32::MAX),
        (1e-40, 1e-40f32), // an f32 subnormal
        (1e-50, 0.0),      // below every f32: zero
        // Tie between 1.0 (even) and 1 + 2^-23.
        (1.0 + 2f64.powi(-24), 1.0),
        // Tie between 1 + 2^-23 (odd) and 1 + 2^-22.
        (1.0 + 3.0 * 2f64.powi(-24), 1.0 + 2f32.powi(-22)),
        (f64::NAN, f32::NAN),
        (f64::NEG_INFINITY, f32::NEG_INFINITY),
    ]
}

/// What `print_values` prints on 4 blocks: glibc's `printf` of the kernel's format and values
/// (the lines a GPU run must print too, in any order of the blocks).
pub const PRINT_VALUES_LINES: [&str; 4] = [
    "block 0: int -7 hex 0xfa long 0 float 0.500 exp 1.500000e+00 g 0 ptr 0x1000 char A 100%",
    "block 1: int -14 hex 0xfb long 10000000000 float 0.750 exp 1.500000e+01 g 0.125 ptr 0x1010 char B 100%",
    "block 2: int -21 hex 0xfc long 20000000000 float 1.000 exp 1.500000e+02 g 0.25 ptr 0x1020 char C 100%",
    "block 3: int -28 hex 0xfd long 30000000000 float 1.250 exp 1.500000e+03 g 0.375 ptr 0x1030 char D 100%",
];

/// What `print_once` prints on any grid.
pub const PRINT_ONCE_LINE: &str = "print_once: no conversions";
