//! Warp-level tensor-core matrix multiply-accumulate (`mma.sync`) in TF32, and the conversion
//! of f32 operands to TF32.
//!
//! TF32 is an f32 with its significand cut to 10 explicit bits (8-bit exponent, 1 + 10 bits of
//! significand, unit roundoff `2^-11` when rounded to nearest). In a register it is an f32 bit
//! pattern whose low 13 bits the tensor core ignores; [`to_tf32`] rounds them away.
//!
//! # Fragment layout of [`mma_m16n8k8_tf32`]
//! The warp computes `D (16 x 8) = A (16 x 8) * B (8 x 8) + C (16 x 8)`. With `g = lane / 4`
//! (the group) and `t = lane % 4` (the thread in the group), lane `4g + t` holds
//! (PTX ISA, "Matrix Fragments for mma.m16n8k8", `.tf32`):
//!
//! | register | element (row, column) |
//! |---|---|
//! | `a[0]`, `a[1]`, `a[2]`, `a[3]` | `A(g, t)`, `A(g + 8, t)`, `A(g, t + 4)`, `A(g + 8, t + 4)` |
//! | `b[0]`, `b[1]` | `B(t, g)`, `B(t + 4, g)` |
//! | `c[0]`, `c[1]`, `c[2]`, `c[3]` (and `D`) | `C(g, 2t)`, `C(g, 2t + 1)`, `C(g + 8, 2t)`, `C(g + 8, 2t + 1)` |
//!
//! So a lane's `A` elements are two rows apart by 8 and two columns apart by 4, its `B` elements
//! one column, and its accumulators two adjacent columns of two rows.

/// `x` rounded to TF32 (10 explicit significand bits), to nearest with ties away from zero, as
/// the bits of an f32 whose low 13 bits are zero: the operand form [`mma_m16n8k8_tf32`] takes.
///
/// On the GPU `cvt.rna.tf32.f32`. NaN stays NaN, infinities stay infinite, and a finite value
/// above the largest TF32 by half a TF32 unit or more becomes infinite. The relative error is at
/// most `2^-11` for normal values.
#[inline(always)]
pub fn to_tf32(x: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: a register-to-register conversion; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "cvt.rna.tf32.f32 {out}, {x};",
                out = out(reg32) out,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        round_tf32(x)
    }
}

/// The simulator's [`to_tf32`]: adding half a TF32 unit (bit 12) to the magnitude and cutting
/// the low 13 bits rounds to nearest with ties away from zero; a carry out of the significand
/// steps the exponent, up to infinity.
#[cfg(not(target_arch = "nvptx64"))]
fn round_tf32(x: f32) -> u32 {
    if !x.is_finite() {
        return x.to_bits();
    }
    let bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    let magnitude = ((bits & 0x7fff_ffff) + 0x1000) & !0x1fff;
    sign | magnitude
}

/// `D = A * B + C` on one 16 x 8 x 8 TF32 tile, warp-collective: every lane of the warp calls it
/// together, at the same place, with its fragments in the layout of the module documentation
/// (`a` and `b` as [`to_tf32`] bit patterns; the low 13 bits are ignored). Returns this lane's
/// four elements of `D`.
///
/// On the GPU `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` (sm_80 and newer): the
/// products of TF32 values are exact, the sums are in f32. In the simulator each lane gathers
/// the rows of `A` and columns of `B` it needs with 32 warp shuffles (a rendezvous of the whole
/// warp, which reports a lane that does not arrive), then sums the exact products and `c` in f64
/// and rounds once to f32: at least as accurate as the hardware, whose sum order and rounding
/// the PTX ISA leaves open.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_m16n8k8_tf32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let mut d = c;
        // SAFETY: registers only; every lane of the warp reaches it (caller's contract, as for a
        // barrier). Not `pure`: a warp-collective instruction must be neither dropped nor moved.
        unsafe {
            core::arch::asm!(
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
                d0 = inout(reg32) d[0],
                d1 = inout(reg32) d[1],
                d2 = inout(reg32) d[2],
                d3 = inout(reg32) d[3],
                a0 = in(reg32) a[0],
                a1 = in(reg32) a[1],
                a2 = in(reg32) a[2],
                a3 = in(reg32) a[3],
                b0 = in(reg32) b[0],
                b1 = in(reg32) b[1],
                options(nomem, nostack),
            );
        }
        d
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        sim_mma(a, b, c)
    }
}

/// The simulator's [`mma_m16n8k8_tf32`] (see there). Every lane runs the same loops, so every
/// shuffle below is one rendezvous of the whole warp at one source location.
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn sim_mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    use crate::sim::device::{lane_id, warp_shuffle};
    // What the tensor core reads of an operand: the TF32 part of the bits.
    let operand = |bits: u32| -> f64 {
        let x = f32::from_bits(bits);
        if x.is_nan() {
            f64::NAN
        } else {
            f64::from(f32::from_bits(bits & !0x1fff))
        }
    };
    let lane = lane_id();
    let (g, t) = (lane / 4, lane % 4);
    // Rows `g` and `g + 8` of `A`: register `r` of lane `4g + j` is `A(g + 8*(r%2), j + 4*(r/2))`.
    let mut rows = [[0.0f64; 8]; 2];
    for r in 0..4 {
        for j in 0..4 {
            let v = warp_shuffle(a[r], 4 * g + j);
            rows[r % 2][j as usize + 4 * (r / 2)] = operand(v);
        }
    }
    // Columns `2t` and `2t + 1` of `B`: register `r` of lane `4*col + j` is `B(j + 4r, col)`.
    let mut cols = [[0.0f64; 8]; 2];
    for r in 0..2 {
        for j in 0..4 {
            for (h, col) in cols.iter_mut().enumerate() {
                let v = warp_shuffle(b[r], 4 * (2 * t + h as u32) + j);
                col[j as usize + 4 * r] = operand(v);
            }
        }
    }
    let dot = |row: &[f64; 8], col: &[f64; 8], acc: f32| -> f32 {
        let sum: f64 = row.iter().zip(col).map(|(x, y)| x * y).sum();
        (sum + f64::from(acc)) as f32
    };
    [
        dot(&rows[0], &cols[0], c[0]),
        dot(&rows[0], &cols[1], c[1]),
        dot(&rows[1], &cols[0], c[2]),
        dot(&rows[1], &cols[1], c[3]),
    ]
}
