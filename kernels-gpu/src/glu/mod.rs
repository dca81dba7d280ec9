//! Gated linear units, the MLP activation of Llama (SwiGLU) and of Gemma (GeGLU): the input is a
//! `rows x 2n` matrix whose row holds the **gate half first** (columns `0..n`) and the **up half**
//! second (columns `n..2n`), as a fused `gate_up` projection writes it and as
//! `gate, up = x.chunk(2, dim=-1)` reads it; the output is `rows x n`,
//!
//! `y[r][j] = act(x[r][j]) * x[r][n + j]`,
//!
//! PyTorch's `F.silu(gate) * up` (SwiGLU) and `F.gelu(gate, approximate=...) * up` (GeGLU; vLLM's
//! `SiluAndMul`, `GeluAndMul`). Each element of the input is read once and each output written
//! once; the activation and the product are computed in f32 and rounded once, at the store (where
//! PyTorch eager in bf16 rounds `act(gate)` to bf16 before the product, a second rounding).
//!
//! The activations ([`Act`]), each in f32:
//! * `silu(g) = g / (1 + e^-g)`, as `g * rcp(1 + 2^(-g log2 e))` with [`math::fast::exp2_ftz`]
//!   (`ex2.approx.ftz`, 2 ulp) and [`math::fast::rcp_ftz`] (`rcp.approx.ftz`, 1 ulp): a few ulps
//!   of f32. `silu(-inf)` is NaN (`-inf * 0`, as PyTorch's `x / (1 + exp(-x))`), and `g` below
//!   about -87.3 gives `-0` (the reciprocal of `1 + e^-g` past `2^126` flushes to zero; the exact
//!   value there is at most about `1e-36`).
//! * GELU, tanh form: `g/2 (1 + tanh(u))`, `u = sqrt(2/pi) (g + 0.044715 g^3)`, computed as the
//!   equal `g * sigmoid(2u) = g * rcp(1 + 2^(-2u log2 e))` with the same `exp2_ftz` and `rcp_ftz`
//!   as SiLU, the exponent as `g (K0 + K1 g^2)` with its constants folded (three operations): a
//!   few ulps of f32, no cancellation where `tanh(u)` nears -1, and no branches. `g` below about
//!   -10 gives `-0` (the exact value there is under `2e-37`); `gelu(-inf)` is NaN (`-inf * 0`), as
//!   SiLU's.
//! * GELU, erf form (PyTorch's default `approximate='none'`): `g/2 (1 + erf(g / sqrt 2))` with
//!   [`math::accurate::erf`] (2 ulp).
//!
//! The flush-to-zero forms skip the plain `ex2.approx` and `rcp.approx`'s handling of
//! subnormals: under ncu at 4096 x 14336 in bf16 they cut the SwiGLU kernel's instructions from
//! 50.9 M to 35.1 M and GeGLU's from 55.5 M to 39.0 M
//! (`bench/experiments/h200-logs/11e19b2-ncu-{swiglu,geglu}-{fold,ftz}.log`).
//!
//! A NaN in the gate or the up half makes its output NaN and no other.
//!
//! The ladder, one file per rung:
//! * [`scalar`]: the tutorial, one thread per output element, 2-byte (bf16) or 4-byte accesses.
//! * [`vectors`]: 16-byte vectors of the device crate (`bf16x8`, `f32x4`), four vectors of each
//!   half in flight per thread, a grid-stride loop.
//! * [`rows`]: the same vectors on a 2-D grid (blocks along a row and down the rows), so that a
//!   thread finds its row and column without a division; plain loads and stores.
//!
//! The two vector rungs share the computation and the store of an output vector,
//! [`store_gated`]; they differ in where a thread's vectors are and how their loads are hinted.

use crate::gpu::convert::Float;
use crate::gpu::math;
use crate::gpu::vector::{self, Lane, StoreHint};

pub mod rows;
pub mod scalar;
pub mod vectors;

pub use rows::*;
pub use scalar::*;
pub use vectors::*;

/// Which activation a GLU kernel applies to its gate (a const parameter of the kernels).
pub struct Act;

impl Act {
    /// SwiGLU: `silu(gate) * up`.
    pub const SILU: u8 = 0;
    /// GeGLU with the tanh GELU: `gelu_tanh(gate) * up`.
    pub const GELU_TANH: u8 = 1;
    /// GeGLU with the erf GELU: `gelu(gate) * up`.
    pub const GELU_ERF: u8 = 2;
}

/// `sqrt(2 / pi)`, the tanh GELU's scale.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// `-2 sqrt(2/pi) log2(e)`: the tanh GELU's exponent `-2u log2 e` is `g (GELU_K0 + GELU_K1 g^2)`.
const GELU_K0: f32 = -2.0 * SQRT_2_OVER_PI * math::LOG2_E;
/// `0.044715 GELU_K0`, the cubic term's share of the exponent.
const GELU_K1: f32 = 0.044_715 * GELU_K0;
/// `1 / sqrt(2)`, the erf GELU's scale.
const FRAC_1_SQRT_2: f32 = core::f32::consts::FRAC_1_SQRT_2;

/// `act(g) * u` in f32 for the activation `ACT` ([`Act`]).
#[inline(always)]
pub fn gated<const ACT: u8>(g: f32, u: f32) -> f32 {
    let a = if ACT == Act::SILU {
        g * math::fast::rcp_ftz(1.0 + math::fast::exp2_ftz(g * -math::LOG2_E))
    } else if ACT == Act::GELU_TANH {
        // `g/2 (1 + tanh(u)) = g sigmoid(2u)`: the sigmoid form has no cancellation where
        // `tanh(u)` nears -1, so the fast `exp2_ftz` and `rcp_ftz` (as SiLU's) keep a few ulps,
        // where the accurate `tanh` with its branches left the kernel compute-bound. The exponent
        // `-2u log2 e` is `g (K0 + K1 g^2)`, the constants folded: three operations before `ex2`
        // where there were six; GeGLU bf16 at 4096 x 14336 went from 4150.0-4154.7 to
        // 4229.8-4230.6 GB/s on the H200 (`bench/experiments/third-wave/e8642c3-glu-fold-ab.jsonl`).
        let t = g * math::fma(GELU_K1, g * g, GELU_K0);
        g * math::fast::rcp_ftz(1.0 + math::fast::exp2_ftz(t))
    } else {
        let half = 0.5 * g;
        math::fma(half, math::accurate::erf(g * FRAC_1_SQRT_2), half)
    };
    a * u
}

/// An element type of the GLU kernels: f32 or bf16, loaded and stored as [`Lane`]s and widened
/// to f32 ([`Float`]).
pub trait GluElem: Lane + Float {}

impl GluElem for f32 {}
impl GluElem for crate::gpu::bf16 {}

/// One output vector of the vector rungs ([`vectors`], [`rows`]): `y[o..o + N] = act(gate) * up`
/// computed lane by lane in f32 ([`gated`]) and stored as one 16-byte vector, rounded once (a
/// plain store).
///
/// # Safety
/// `y[o..o + N]` lies in `y`, at a multiple of `N` of a 16-byte aligned buffer.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub unsafe fn store_gated<T: GluElem, const N: usize, const ACT: u8>(
    y: *mut T,
    o: usize,
    gate: &[T; N],
    up: &[T; N],
) {
    let mut out = [T::ZERO; N];
    // Unrolled by hand: LLVM leaves a loop of the GELU's body rolled, and the lanes then go
    // through local memory.
    unroll_8!(N, |l| {
        out[l] = T::from_f32(gated::<ACT>(gate[l].to_f32(), up[l].to_f32()));
    });
    // SAFETY: the caller's contract.
    unsafe { vector::store_hinted(y, o, out, StoreHint::Default) };
}
