//! The tutorial rotary embedding: a thread per pair ([`rotary_scalar`](fn@rotary_scalar)).

use super::{cos_sin, rotate, Layout, Position};
use crate::gpu::convert::{bf16_to_f32, f32_to_bf16};
use crate::gpu::{bf16, mem, thread};
use crate::kernel;

/// Threads per block of the tutorial.
pub const ROTARY_SCALAR_BLOCK: u32 = 256;

/// Rotates `q` and `k` in place, one thread per pair.
///
/// Thread `t = blockIdx.x * blockDim.x + threadIdx.x` (for `t < tokens * (heads + kv_heads) *
/// head_dim / 2`) takes token `t / P` (`P` pairs per token), head `h` (the first `heads` are
/// `q`'s, the next `kv_heads` `k`'s) and pair `i < head_dim / 2`: it reads the token's position
/// and `inv_freq[i]`, computes the pair's cos and sin ([`cos_sin`]), loads the pair's two
/// elements (`HALF_SPLIT`: `i` and `i + head_dim / 2`; interleaved: `2i` and `2i + 1`), rotates
/// them in f32 and stores both, rounded once.
///
/// Instances (`P`, layout): `rotary_half_scalar_i32`, `rotary_half_scalar_i64` (half-split),
/// `rotary_interleaved_scalar_i32`, `rotary_interleaved_scalar_i64`.
///
/// Global memory: `q` and `k` read and written once (8 bytes per pair), 2-byte accesses; a
/// position and an `inv_freq` per pair (from L1).
///
/// # Safety
/// `q` points to `tokens * heads * head_dim` bf16 and `k` to `tokens * kv_heads * head_dim` of
/// device memory, not overlapping; `positions` to `tokens` elements, `inv_freq` to
/// `head_dim / 2` floats; `head_dim` even and at least 2; a 1-D launch of at least as many
/// threads as pairs (blocks of [`ROTARY_SCALAR_BLOCK`]).
// Barriers: none.
#[kernel(
    instances(
        rotary_half_scalar_i32 = (i32, Layout::HALF_SPLIT),
        rotary_half_scalar_i64 = (i64, Layout::HALF_SPLIT),
        rotary_interleaved_scalar_i32 = (i32, Layout::INTERLEAVED),
        rotary_interleaved_scalar_i64 = (i64, Layout::INTERLEAVED),
    ),
    block(ROTARY_SCALAR_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn rotary_scalar<P: Position, const HALF_SPLIT: bool>(
    q: *mut bf16,
    k: *mut bf16,
    positions: *const P,
    inv_freq: *const f32,
    tokens: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
) {
    let half = head_dim / 2;
    let per_token = (heads + kv_heads) * half;
    let t = thread::index_1d();
    if t >= tokens * per_token {
        return;
    }
    let (token, rem) = (t / per_token, t % per_token);
    let (h, i) = (rem / half, rem % half);
    let base = if h < heads {
        q.wrapping_add((token * heads + h) * head_dim)
    } else {
        k.wrapping_add((token * kv_heads + h - heads) * head_dim)
    };
    let (a, b) = if HALF_SPLIT {
        (i, i + half)
    } else {
        (2 * i, 2 * i + 1)
    };
    // SAFETY: `token < tokens`, `i < head_dim / 2`, and `a, b < head_dim` inside head `h` of
    // `q` (`h < heads`) or `k`.
    unsafe {
        let (c, s) = cos_sin(mem::load(positions, token).to_f32(), mem::load(inv_freq, i));
        let (x1, x2) = rotate(
            bf16_to_f32(mem::load(base, a)),
            bf16_to_f32(mem::load(base, b)),
            c,
            s,
        );
        mem::store(base, a, f32_to_bf16(x1));
        mem::store(base, b, f32_to_bf16(x2));
    }
}
