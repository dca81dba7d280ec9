//! The fast rotary embedding: a block per token, its cos and sin computed once in shared memory,
//! the heads rotated by 16-byte vectors ([`rotary_rows`](fn@rotary_rows)).

use super::{cos_sin, rotate, Layout, Position};
use crate::gpu::convert::Float;
use crate::gpu::vector::Lane;
use crate::gpu::{bf16, mem, shared, thread, vector};
use crate::kernel;

/// Most threads per block of the vector kernel (one block per token): the host gives a block at
/// most a thread per item of the token ([`rotary_items`]) and at most this many, and the block's
/// threads loop over the rest.
pub const ROTARY_MAX_BLOCK: u32 = 1024;

/// A token's items in the vector kernel for `heads` heads (of `q` and `k` together) of
/// `head_dim`: 8 pairs of a head (two 16-byte vectors) half-split, one vector of 4 pairs
/// interleaved.
pub const fn rotary_items(heads: usize, head_dim: usize, half_split: bool) -> usize {
    heads * if half_split { head_dim / 16 } else { head_dim / 8 }
}

/// Dynamic shared memory of [`rotary_rows`](fn@rotary_rows) for heads of `head_dim`: the
/// token's `head_dim / 2` cosines, then its sines.
pub const fn rotary_shared_bytes(head_dim: usize) -> u32 {
    (head_dim * core::mem::size_of::<f32>()) as u32
}

/// Rotates the `q` and `k` heads of one token per block, by vectors of 8 bf16.
///
/// Block `t` handles token `t`. Its threads first compute the token's cos and sin for the
/// `head_dim / 2` frequencies ([`cos_sin`], thread `tid` takes `tid, tid + blockDim.x, ...`)
/// into shared memory; one barrier; then they deal out the token's items, thread `tid` taking
/// `tid, tid + blockDim.x, ...`: an item is, half-split, 8 pairs of one head (the 16-byte
/// vectors at `x[8j..]` and `x[half + 8j..]`, two loads in flight, the cos and sin of
/// `8j..8j + 8` read from shared memory as vectors), or, interleaved, one 16-byte vector of 4
/// pairs. Each pair is rotated in f32 and stored rounded once, one vector store per vector.
///
/// Instances (`P`, layout): `rotary_half_i32`, `rotary_half_i64` (half-split: `head_dim` a
/// multiple of 16), `rotary_interleaved_i32`, `rotary_interleaved_i64` (`head_dim` a multiple
/// of 8).
///
/// Global memory: `q` and `k` read and written once by 16-byte vectors (4 bytes per element:
/// `4 (heads + kv_heads) head_dim` per token); a position and the `inv_freq` table per block.
///
/// Launch: `tokens` blocks of any multiple of 32 threads up to [`ROTARY_MAX_BLOCK`] (the host's
/// plan: for few tokens a thread per item, [`rotary_items`], so that each thread's loads go out
/// at once; for many, a thread per two items, so that fewer threads wait through the table), and
/// [`rotary_shared_bytes`]`(head_dim)` of dynamic shared memory.
///
/// # Safety
/// As [`rotary_scalar`](fn@super::rotary_scalar), and `q`, `k` 16-byte aligned, `head_dim` a
/// multiple of 16 (half-split) or 8 (interleaved); the launch shape is as above.
// Barriers: one, between the table and its use.
#[kernel(
    instances(
        rotary_half_i32 = (i32, Layout::HALF_SPLIT),
        rotary_half_i64 = (i64, Layout::HALF_SPLIT),
        rotary_interleaved_i32 = (i32, Layout::INTERLEAVED),
        rotary_interleaved_i64 = (i64, Layout::INTERLEAVED),
    ),
    block(ROTARY_MAX_BLOCK),
    barriers(1)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub unsafe fn rotary_rows<P: Position, const HALF_SPLIT: bool>(
    q: *mut bf16,
    k: *mut bf16,
    positions: *const P,
    inv_freq: *const f32,
    tokens: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
) {
    let token = thread::block_idx_x() as usize;
    if token >= tokens {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let half = head_dim / 2;
    let table = shared::dynamic::<f32>();
    // SAFETY: `token < tokens`; `i < half` entries of `inv_freq` and of each half of the table
    // (`head_dim` floats of dynamic shared memory), each written by one thread before the
    // barrier and read only after it.
    unsafe {
        let pos = mem::load(positions, token).to_f32();
        let mut i = tid;
        while i < half {
            let (c, s) = cos_sin(pos, mem::load(inv_freq, i));
            mem::store(table, i, c);
            mem::store(table, half + i, s);
            i += threads;
        }
        thread::sync_threads();
    }
    // Items per head: 8 pairs (two vectors) half-split, one vector of 4 pairs interleaved
    // (`rotary_items`). In 32 bits, so that the division is the 32-bit one: the host runs this
    // kernel only where a token's items fit (`RotaryPlan::choose`).
    let per_head = rotary_items(1, head_dim, HALF_SPLIT) as u32;
    let items = rotary_items(heads + kv_heads, head_dim, HALF_SPLIT) as u32;
    let mut item = tid as u32;
    while item < items {
        let (h, j) = ((item / per_head) as usize, (item % per_head) as usize);
        let base = if h < heads {
            q.wrapping_add((token * heads + h) * head_dim)
        } else {
            k.wrapping_add((token * kv_heads + h - heads) * head_dim)
        };
        // SAFETY: head `h` of `q` or `k` has `head_dim` elements from `base`, 16-byte aligned
        // (`head_dim` a multiple of 8); the vectors below lie inside it, at multiples of 8; the
        // table's vectors at multiples of 8 (half-split: `half` a multiple of 8) or 4 floats.
        unsafe {
            if HALF_SPLIT {
                let at = 8 * j;
                let x1: [bf16; 8] = vector::load(base, at);
                let x2: [bf16; 8] = vector::load(base, at + half);
                let c: [f32; 8] = vector::load(table, at);
                let s: [f32; 8] = vector::load(table, half + at);
                let (mut y1, mut y2) = ([<bf16 as Lane>::ZERO; 8], [<bf16 as Lane>::ZERO; 8]);
                for l in 0..8 {
                    let (a, b) = rotate(Float::to_f32(x1[l]), Float::to_f32(x2[l]), c[l], s[l]);
                    y1[l] = <bf16 as Float>::from_f32(a);
                    y2[l] = <bf16 as Float>::from_f32(b);
                }
                vector::store(base, at, y1);
                vector::store(base, at + half, y2);
            } else {
                let at = 8 * j;
                let x: [bf16; 8] = vector::load(base, at);
                let c: [f32; 4] = vector::load(table, 4 * j);
                let s: [f32; 4] = vector::load(table, half + 4 * j);
                let mut y = [<bf16 as Lane>::ZERO; 8];
                for l in 0..4 {
                    let (a, b) = rotate(Float::to_f32(x[2 * l]), Float::to_f32(x[2 * l + 1]), c[l], s[l]);
                    y[2 * l] = <bf16 as Float>::from_f32(a);
                    y[2 * l + 1] = <bf16 as Float>::from_f32(b);
                }
                vector::store(base, at, y);
            }
        }
        item += threads as u32;
    }
}
