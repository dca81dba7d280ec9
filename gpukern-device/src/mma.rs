//! Warp-level tensor-core matrix multiply-accumulate (`mma.sync`): TF32 (`m16n8k8`, and the
//! conversion of f32 operands to TF32), BF16 and FP16 (`m16n8k16`, [`mma_m16n8k16_bf16`],
//! [`mma_m16n8k16_f16`], f32 accumulators), and the `ldmatrix` loads of 16-bit fragments from
//! shared memory ([`ldmatrix_x4`], [`ldmatrix_x4_trans`]).
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

// ---------------------------------------------------------------------------------------------
// BF16 and FP16: `mma.m16n8k16` and the `ldmatrix` fragment loads that feed it.
// ---------------------------------------------------------------------------------------------

/// Which 16-bit type an [`mma_m16n8k16_bf16`] / [`mma_m16n8k16_f16`] operand register packs
/// (two elements, the lower-index one in the low half).
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy)]
enum Half16 {
    Bf16,
    F16,
}

#[cfg(not(target_arch = "nvptx64"))]
impl Half16 {
    /// The two elements of a packed register, widened (exactly) to f64: `[low, high]`.
    fn unpack(self, word: u32) -> [f64; 2] {
        let widen = |bits: u16| -> f64 {
            match self {
                Half16::Bf16 => f64::from(f32::from_bits(u32::from(bits) << 16)),
                Half16::F16 => half::f16::from_bits(bits).to_f64(),
            }
        };
        [widen(word as u16), widen((word >> 16) as u16)]
    }
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.<ty>.<ty>.f32` on `a`, `b`, `c` (the fragments of
/// [`mma_m16n8k16_bf16`]), evaluating to `D`: the one `asm!` of the bf16 and f16 wrappers.
#[cfg(target_arch = "nvptx64")]
macro_rules! mma_m16n8k16_asm {
    ($ty:literal, $a:expr, $b:expr, $c:expr) => {{
        let (a, b): ([u32; 4], [u32; 2]) = ($a, $b);
        let mut d: [f32; 4] = $c;
        // SAFETY: registers only; every lane of the warp reaches it (the caller's contract, as
        // for a barrier). Not `pure`: a warp-collective instruction must be neither dropped nor
        // moved.
        unsafe {
            core::arch::asm!(
                concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty, ".f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};"),
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
    }};
}

/// `D = A * B + C` on one 16 x 8 x 16 tile with BF16 operands and f32 accumulators,
/// warp-collective (every lane of the warp calls it together, at the same place). Each operand
/// register packs two bf16, the lower-index element in the low 16 bits. With `g = lane / 4`,
/// `t = lane % 4` (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"):
///
/// | register | elements (row, column) |
/// |---|---|
/// | `a[0]`, `a[1]`, `a[2]`, `a[3]` | `A(g, 2t..2t+2)`, `A(g + 8, 2t..2t+2)`, `A(g, 2t+8..2t+10)`, `A(g + 8, 2t+8..2t+10)` |
/// | `b[0]`, `b[1]` | `B(2t..2t+2, g)`, `B(2t+8..2t+10, g)` |
/// | `c[0..4]` (and `D`) | `C(g, 2t)`, `C(g, 2t + 1)`, `C(g + 8, 2t)`, `C(g + 8, 2t + 1)` (as [`mma_m16n8k8_tf32`]) |
///
/// [`ldmatrix_x4`] loads an `A` fragment in this layout and [`ldmatrix_x4_trans`] two `B`
/// fragments from a row-major `[k][n]` tile.
///
/// On the GPU `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` (sm_80 and newer): products
/// exact, sums in f32. In the simulator the lanes gather their rows and columns with warp
/// shuffles, sum the exact products and `c` in f64 and round once to f32 (as
/// [`mma_m16n8k8_tf32`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        mma_m16n8k16_asm!("bf16", a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        sim_mma_k16(Half16::Bf16, a, b, c)
    }
}

/// [`mma_m16n8k16_bf16`] with FP16 operands (the same fragment layout): on the GPU
/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_m16n8k16_f16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        mma_m16n8k16_asm!("f16", a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        sim_mma_k16(Half16::F16, a, b, c)
    }
}

/// The simulator's `m16n8k16` (see [`mma_m16n8k16_bf16`]). Every lane runs the same loops, so
/// every shuffle is one rendezvous of the whole warp at one source location.
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
// The register index `r` also places the elements (`8 (r / 2)`, `8r`).
#[allow(clippy::needless_range_loop)]
fn sim_mma_k16(ty: Half16, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    use crate::sim::device::{lane_id, warp_shuffle};
    let lane = lane_id();
    let (g, t) = (lane / 4, lane % 4);
    // Rows `g` and `g + 8` of `A`: register `r` of lane `4g + j` holds
    // `A(g + 8 (r % 2), 2j + 8 (r / 2) + {0, 1})`.
    let mut rows = [[0.0f64; 16]; 2];
    for r in 0..4 {
        for j in 0..4u32 {
            let pair = ty.unpack(warp_shuffle(a[r], 4 * g + j));
            let col = 2 * j as usize + 8 * (r / 2);
            rows[r % 2][col..col + 2].copy_from_slice(&pair);
        }
    }
    // Columns `2t` and `2t + 1` of `B`: register `r` of lane `4 col + j` holds
    // `B(2j + 8r + {0, 1}, col)`.
    let mut cols = [[0.0f64; 16]; 2];
    for r in 0..2 {
        for j in 0..4u32 {
            for (h, col) in cols.iter_mut().enumerate() {
                let pair = ty.unpack(warp_shuffle(b[r], 4 * (2 * t + h as u32) + j));
                let row = 2 * j as usize + 8 * r;
                col[row..row + 2].copy_from_slice(&pair);
            }
        }
    }
    let dot = |row: &[f64; 16], col: &[f64; 16], acc: f32| -> f32 {
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

/// Loads four 8 x 8 matrices of 16-bit elements from shared memory, warp-collective: lane `l`
/// passes the address of row `l % 8` of matrix `l / 8` (16 contiguous bytes, 16-byte aligned),
/// and gets, in register `i`, the two elements `(l / 4, 2 (l % 4) .. 2 (l % 4) + 2)` of matrix
/// `i` packed (the lower column in the low half).
///
/// With lane `l` pointing at row `l % 16`, column `8 (l / 16)` of a row-major 16 x 16 tile of
/// `A`, the four registers are the `A` fragment of [`mma_m16n8k16_bf16`]: 4 shared-memory
/// requests of 128 bytes per warp, instead of 16 of 4-byte loads.
///
/// On the GPU `ldmatrix.sync.aligned.m8n8.x4.shared.b16`. In the simulator each lane gathers
/// the row addresses it needs from the other lanes with warp shuffles and reads the elements
/// with checked loads.
///
/// # Safety
/// Every lane's `row` is 16-byte aligned and points to 8 initialised 16-bit elements of the
/// block's shared memory; every lane of the warp calls it together.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn ldmatrix_x4(row: *const u16) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let addr = crate::async_copy::shared_address(row.cast_mut());
        let r: [u32; 4];
        // SAFETY: the caller's contract. Reads shared memory (so not `nomem`: the stores and
        // `cp.async` waits before it stay before it); writes none.
        unsafe {
            let (r0, r1, r2, r3): (u32, u32, u32, u32);
            core::arch::asm!(
                "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{addr}];",
                r0 = out(reg32) r0,
                r1 = out(reg32) r1,
                r2 = out(reg32) r2,
                r3 = out(reg32) r3,
                addr = in(reg32) addr,
                options(nostack, readonly),
            );
            r = [r0, r1, r2, r3];
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: forwarded contract.
        unsafe { sim_ldmatrix::<false>(row) }
    }
}

/// [`ldmatrix_x4`] transposed: lane `l` gets, in register `i`, the elements `(2 (l % 4), l / 4)`
/// and `(2 (l % 4) + 1, l / 4)` of matrix `i` (the lower row in the low half).
///
/// With lane `l` pointing at row `l % 16`, column `8 (l / 16)` of a row-major 16 x 16 tile of
/// `B` stored `[k][n]`, registers 0 and 1 are the `B` fragment of [`mma_m16n8k16_bf16`] for
/// columns 0..8 of the tile, and registers 2 and 3 that for columns 8..16.
///
/// On the GPU `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`.
///
/// # Safety
/// As [`ldmatrix_x4`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn ldmatrix_x4_trans(row: *const u16) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let addr = crate::async_copy::shared_address(row.cast_mut());
        let r: [u32; 4];
        // SAFETY: as `ldmatrix_x4`.
        unsafe {
            let (r0, r1, r2, r3): (u32, u32, u32, u32);
            core::arch::asm!(
                "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{addr}];",
                r0 = out(reg32) r0,
                r1 = out(reg32) r1,
                r2 = out(reg32) r2,
                r3 = out(reg32) r3,
                addr = in(reg32) addr,
                options(nostack, readonly),
            );
            r = [r0, r1, r2, r3];
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: forwarded contract.
        unsafe { sim_ldmatrix::<true>(row) }
    }
}

/// The simulator's [`ldmatrix_x4`] (`TRANS = false`) and [`ldmatrix_x4_trans`]: every lane
/// shuffles every lane's row address (two 32-bit halves each: the same rendezvous for all), then
/// reads its elements with checked shared-memory loads.
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
unsafe fn sim_ldmatrix<const TRANS: bool>(row: *const u16) -> [u32; 4] {
    use crate::sim::device::{lane_id, warp_shuffle};
    let lane = lane_id();
    assert!(
        row.cast::<u128>().is_aligned(),
        "ldmatrix: lane {lane}'s row address {row:p} is not 16-byte aligned"
    );
    let address = row as usize as u64;
    let mut rows = [core::ptr::null::<u16>(); 32];
    for (src, slot) in rows.iter_mut().enumerate() {
        let lo = warp_shuffle(address as u32, src as u32);
        let hi = warp_shuffle((address >> 32) as u32, src as u32);
        *slot = ((u64::from(hi) << 32) | u64::from(lo)) as usize as *const u16;
    }
    let (g, t) = ((lane / 4) as usize, (lane % 4) as usize);
    let mut out = [0u32; 4];
    for (i, word) in out.iter_mut().enumerate() {
        let [lo, hi]: [u16; 2] = if TRANS {
            // SAFETY: rows `2t`, `2t + 1` of matrix `i`, column `g`: inside the 8 elements the
            // caller vouches for (checked by the simulator).
            unsafe {
                [
                    crate::mem::load(rows[8 * i + 2 * t], g),
                    crate::mem::load(rows[8 * i + 2 * t + 1], g),
                ]
            }
        } else {
            // SAFETY: row `g` of matrix `i`, columns `2t`, `2t + 1`: as above.
            unsafe {
                [
                    crate::mem::load(rows[8 * i + g], 2 * t),
                    crate::mem::load(rows[8 * i + g], 2 * t + 1),
                ]
            }
        };
        *word = u32::from(lo) | (u32::from(hi) << 16);
    }
    out
}
