//! Scaled dot-product attention, forward: for each batch `b`, head `h` and query row `i`,
//!
//! ```text
//! s_j    = scale * <q[b, i, h, :], k[b, j, h / group, :]>        for the keys j row i may see
//! lse    = ln(sum_j exp(s_j))                                     (the row's log-sum-exp)
//! o[b, i, h, :] = sum_j exp(s_j - lse) * v[b, j, h / group, :]
//! ```
//!
//! with `q`, `k`, `v` laid out `[batch, seq, heads, head_dim]` (FlashAttention's layout), any
//! element strides along batch, sequence and heads (so that the three parts of a packed QKV
//! projection are read where they are), `head_dim` contiguous. Grouped-query and multi-query
//! attention: `kv_heads` divides `heads` and query head `h` reads key/value head `h / group`,
//! `group = heads / kv_heads`. The query and key lengths may differ; causal masking is aligned
//! bottom-right, as FlashAttention does: row `i` sees the keys `j <= i + kv_len - q_len`.
//! The softmax is the seeds' softmax with inverse temperature `scale` (by default
//! `1 / sqrt(head_dim)`), computed online in f32 with base-2 exponentials: the kernels take
//! `scale * log2(e)` and work in units of `log2`, so that each probability is one `ex2`.
//!
//! # Rules at the edges
//! * A row that sees no key (causal with `kv_len < q_len`, the first `q_len - kv_len` rows)
//!   gets output 0 and log-sum-exp `-inf`, never NaN.
//! * A NaN in `q`, `k` or `v` makes NaN the rows whose scores or sums it enters, and no other.
//!
//! # The ladder
//! * [`rows`]: the tutorial rung, a warp per query row: lane `l` holds the row's dimensions
//!   `l, l + 32, ...` of `q` and of the output accumulator; per key, a warp sum of the
//!   dot product (5 shuffles), the online softmax update, and the `P V` sum. Every shape the
//!   host accepts (head dims up to 256); the reference the fused rung is checked against on the
//!   GPU.
//! * [`flash`]: the fused rung, FlashAttention-2's forward on `mma.sync` (a block of 4 warps per
//!   64 query rows, `Q` in registers, double-buffered 64-key tiles of `K` and `V` by
//!   `cp.async`, the online softmax in registers, `P` fed back to the tensor cores), for head
//!   dims 64 and 128 with 16-byte aligned operands; the host plan sends every other call to
//!   [`rows`].
//! * [`wgmma`]: the Hopper rung (sm_90a only), FlashAttention-3's design: a producer warpgroup
//!   copying `Q`, `K` and `V` by TMA into a ring, two consumer warpgroups of 64 query rows each
//!   computing `S = Q K^T` and `O += P V` on `wgmma` (`P` from registers), 128-key tiles (64 at
//!   head dim 256); head dims 64, 128 and 256 with strides of whole 16 bytes. Its items stay
//!   under `attention::wgmma`.
//!
//! The backward (`dq`, `dk`, `dv` from `d_out`, the output and the log-sum-exp), a ladder of its
//! own, deterministic (no atomics) but for its last rung:
//! * [`backward_rows`]: the preparation (`attention_bwd_prep`: each row's `D = dO . O` and
//!   log-sum-exp in units of `log2`), and the tutorial rung: a warp per query row for `dQ`, a
//!   warp per key row for `dK` and `dV` (summing over the query heads of its group); every
//!   shape, the reference the fused rung is checked against on the GPU.
//! * [`backward_flash`]: FlashAttention-2's backward on `mma.sync`, a kernel per 64-key tile for
//!   `dK`/`dV` and one per 64-query tile for `dQ`, head dims 64 and 128 with 16-byte aligned
//!   operands.
//! * [`backward_wgmma`]: the Hopper rung (sm_90a only), the same split on `wgmma` with TMA
//!   copies and warp-specialised blocks: a kernel per 128 keys for `dK`/`dV` (transposed scores,
//!   `P^T` and `dS^T` fed from registers), one per 128 query rows for `dQ`; head dims 64 and
//!   128. Its items stay under `attention::backward_wgmma`.
//! * [`backward_wgmma_fused`]: FlashAttention-3's one-kernel backward (sm_90a only): the
//!   `dK`/`dV` kernel's blocks also compute each query tile's share of `dQ` (`dS` through shared
//!   memory, `dQ += dS K` on `wgmma`) and add it into an f32 buffer by atomic reductions, which a
//!   small kernel then scales and rounds: five products per tile where the split runs seven, the
//!   order of the additions (and so the bits of `dq`) varying from run to run. Head dims 64 and
//!   128; the host's default at those head dims unless the call asks to be deterministic.
//!
//! [`tiles`] holds what the fused rungs share: the `cp.async` tile copy and the `ldmatrix`
//! fragment loaders.

// Without `attention` (`attention-generic` alone) the kernels are plain generic functions: the
// imports of their instances' arguments go unused.
#![cfg_attr(not(feature = "attention"), allow(unused_imports))]

use crate::gpu::convert::Float;
use crate::gpu::mma::{mma_m16n8k16_bf16, mma_m16n8k16_f16};
use crate::gpu::{bf16, f16};

/// The mask `M` of a forward kernel's launch, from the kernel's parameters: what the mask reads
/// (`mask_data`, `mask_int`, `mask_float`: [`MaskArgs`](crate::gpu::attention::MaskArgs)) and
/// the call's sizes. A macro, not a function: through an `#[inline(always)]` function the PTX
/// of the one-tile wgmma entries came out with its registers numbered differently.
macro_rules! launch_mask {
    ($m:ty, $data:expr, $int:expr, $float:expr, $q_len:expr, $kv_len:expr, $heads:expr) => {
        <$m as $crate::gpu::attention::Mask>::new(
            $crate::gpu::attention::MaskArgs {
                data: $data,
                int: $int,
                float: $float,
            },
            $crate::gpu::attention::MaskShape {
                q_len: $q_len,
                kv_len: $kv_len,
                heads: $heads,
            },
        )
    };
}

/// The mask `M` of a kernel's parameters, made where it is called: its integer and pointer pass
/// through [`hint::recompute`](crate::gpu::hint::recompute), so that LLVM computes the mask's
/// fields again at each use rather than once ahead and keeps them live across a kernel's loop
/// (ptxas spilled them there: the one-kernel Hopper backward's across its warpgroups'
/// `setmaxnreg`, the `mma.sync` backward's `dK`/`dV` kernel at head dim 128).
#[inline(always)]
pub(crate) fn fresh_mask<M: crate::gpu::attention::Mask>(
    (data, int, float): (*const i32, usize, f32),
    (q_len, kv_len, heads): (usize, usize, usize),
) -> M {
    use crate::gpu::hint;
    let int = hint::recompute(int as u32) as usize | (hint::recompute((int >> 32) as u32) as usize) << 32;
    let data = hint::recompute_ptr(data.cast_mut()).cast_const();
    launch_mask!(M, data, int, float, q_len, kv_len, heads)
}

pub mod backward_flash;
pub mod backward_rows;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod backward_wgmma;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod backward_wgmma_fused;
pub mod flash;
mod mask_kernels;
pub mod rows;
pub mod tiles;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod wgmma;

pub use backward_flash::*;
pub use backward_rows::*;
pub use flash::*;
pub use rows::*;

/// Largest head dimension of any rung: 8 per lane of [`rows`]' warp.
pub const MAX_HEAD_DIM: usize = 256;

/// Head dimensions are multiples of this (16 bytes of a 16-bit element: one vector copy).
pub const HEAD_DIM_MULTIPLE: usize = 8;

/// A 16-bit input and output type of the attention kernels: widened to f32 for the softmax, and
/// its `m16n8k16` MMA for the fused rung.
pub trait AttentionElement: Float {
    /// `D = A * B + C` on one 16 x 8 x 16 tile (`mma_m16n8k16_bf16` or `_f16`),
    /// warp-collective.
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
    /// Two f32 rounded to this type and packed into one register, the first in the low half.
    fn pack(v: [f32; 2]) -> u32;
    /// The two elements packed in `word` (the low half first) widened to f32, exactly.
    fn unpack(word: u32) -> [f32; 2];
}

impl AttentionElement for bf16 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma_m16n8k16_bf16(a, b, c)
    }
    #[inline(always)]
    fn pack(v: [f32; 2]) -> u32 {
        crate::gpu::convert::pack_bf16x2(v)
    }
    #[inline(always)]
    fn unpack(word: u32) -> [f32; 2] {
        // A bf16 is the f32 of its bits in the upper half.
        [f32::from_bits(word << 16), f32::from_bits(word & 0xffff_0000)]
    }
}

impl AttentionElement for f16 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma_m16n8k16_f16(a, b, c)
    }
    #[inline(always)]
    fn pack(v: [f32; 2]) -> u32 {
        crate::gpu::convert::pack_f16x2(v)
    }
    #[inline(always)]
    fn unpack(word: u32) -> [f32; 2] {
        [
            f16::from_bits(word as u16).to_f32(),
            f16::from_bits((word >> 16) as u16).to_f32(),
        ]
    }
}

/// The first key a causal row may not see: keys `0..causal_end(i)` are visible to query row
/// `i` (bottom-right alignment: row `q_len - 1` sees every key), `kv_len` without the mask.
#[inline(always)]
pub fn visible_keys(i: usize, q_len: usize, kv_len: usize, causal: bool) -> usize {
    if causal {
        (i + 1 + kv_len).saturating_sub(q_len).min(kv_len)
    } else {
        kv_len
    }
}
