//! Rotary position embedding (RoPE), applied in place to the queries and keys of attention:
//! `q` is `tokens x heads x head_dim`, `k` is `tokens x kv_heads x head_dim`, both bf16 and
//! contiguous, and token `t` is at position `positions[t]` (i32 or i64, a device buffer). Each
//! head's vector is cut into `head_dim / 2` pairs `(x1, x2)`, pair `i` rotated by the angle
//! `pos * inv_freq[i]`:
//!
//! `x1' = x1 cos - x2 sin`, `x2' = x2 cos + x1 sin`.
//!
//! Two layouts of the pairs ([`Layout`]):
//! * half-split (Llama, GPT-NeoX; HF's `rotate_half`): pair `i` is `(x[i], x[i + head_dim/2])`;
//! * interleaved (GPT-J, the original RoFormer): pair `i` is `(x[2i], x[2i + 1])`.
//!
//! # Precision
//! `inv_freq[i] = theta^(-2i / head_dim)` is a table of `head_dim / 2` floats the host computes
//! in f64 and rounds once to f32 (HF computes it in f32, which may differ by an ulp). Each kernel
//! computes the angle as `f32(pos) * inv_freq[i]` rounded once to f32, as HF's `freqs` (exact
//! positions up to `2^24`), reduces it by `2 pi` in f64 (exact to about `2^-40` for angles below
//! `2^24`: no loss to a large position) and takes [`math::accurate::cos`] and `sin` of the
//! reduced f32 angle (2 ulp): cos and sin within about 2 ulp of those of the f32 angle. The
//! rotation is computed in f32 and rounded once to bf16 (where HF rounds cos and sin to bf16 and
//! each product too). A position is used only as a number: no memory is read by it, so a
//! position out of the host's checked range reads nothing it should not.
//!
//! The ladder, one file per rung:
//! * [`scalar`]: the tutorial, a thread per pair, its cos and sin computed by itself.
//! * [`rows`]: a block per token: the token's `head_dim / 2` cos and sin computed once into
//!   shared memory, then every head of `q` and `k` rotated by 16-byte vectors (`bf16x8`).

use crate::gpu::math;

pub mod rows;
pub mod scalar;

pub use rows::*;
pub use scalar::*;

/// The pairs' layout, a const parameter of the kernels.
pub struct Layout;

impl Layout {
    /// Half-split (Llama, NeoX): pair `i` is `(x[i], x[i + head_dim / 2])`.
    pub const HALF_SPLIT: bool = true;
    /// Interleaved (GPT-J): pair `i` is `(x[2i], x[2i + 1])`.
    pub const INTERLEAVED: bool = false;
}

/// A position's integer type: i32 or i64.
pub trait Position: Copy + 'static {
    /// The position as f32 (exact up to `2^24`).
    fn to_f32(self) -> f32;
}

impl Position for i32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
}

impl Position for i64 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
}

/// `2 pi` in f64.
const TAU: f64 = core::f64::consts::TAU;
/// `1 / (2 pi)` in f64.
const FRAC_1_TAU: f64 = 1.0 / core::f64::consts::TAU;

/// `(cos a, sin a)` of the f32 angle `a = pos * inv_freq` (one rounding), reduced by `2 pi` in
/// f64 and taken with the accurate f32 functions (see the module's precision notes). The same
/// bits on the GPU and on the CPU.
#[inline(always)]
pub fn cos_sin(pos: f32, inv_freq: f32) -> (f32, f32) {
    let angle = pos * inv_freq;
    let a = angle as f64;
    // Truncation towards zero: `r` in `(-2 pi, 2 pi)`, inside the accurate functions' range.
    let k = (a * FRAC_1_TAU) as i64 as f64;
    let r = (a - k * TAU) as f32;
    (math::accurate::cos(r), math::accurate::sin(r))
}

/// The pair `(x1, x2)` rotated by `(c, s)`: `(x1 c - x2 s, x2 c + x1 s)`, each with one `fma`.
#[inline(always)]
pub fn rotate(x1: f32, x2: f32, c: f32, s: f32) -> (f32, f32) {
    (math::fma(x1, c, -(x2 * s)), math::fma(x2, c, x1 * s))
}
