//! Sampling the next token from rows of logits, as a language model does at each decode step:
//! the logits divided by a temperature `t`, then top-k and top-p (nucleus) filtering, then a
//! multinomial draw from Philox4x32-10 (`gpukern_device::random`); `t = 0` is greedy (the first
//! index of the row's largest logit). One block per row.
//!
//! # The rules (the host checks the options; the kernel follows them for any row)
//! * The probabilities are `p_i = exp((x_i - max) / t)` over the row, normalised over the tokens
//!   that survive the filters. `t > 0` and finite; `t = 0` is greedy.
//! * Top-k keeps the tokens whose logit is at least the `k`-th largest: ties at the `k`-th value
//!   are all kept (as Hugging Face's `TopKLogitsWarper`), so more than `k` tokens may survive.
//!   `k = 0` or `k >= cols` keeps every token.
//! * Top-p keeps, after top-k, the fewest most probable tokens whose mass is at least `p` of
//!   the kept mass: a token survives when the mass of the tokens at least as probable as it,
//!   itself included, reaches `p` no sooner than at its value (ties at the boundary all kept).
//!   `p = 1` keeps every token; `0 < p <= 1`.
//! * The draw: `u` uniform in `[0, 1)` from `philox4x32_10([row, offset_lo, offset_hi, 0],
//!   [seed_lo, seed_hi])`'s first word (24 bits), and the token is the first index (in column
//!   order) at which the running sum of the kept `p_i` exceeds `u` times their total. The sums
//!   run in a fixed order (the fast rung's in 32.32 fixed point, exact: `radix.rs`), so the
//!   same seed, offset and logits give the same token on the GPU and in the simulator, and
//!   every run.
//! * NaN logits are never chosen (they count as below `-inf`); a row whose logits are all NaN or
//!   `-inf` gives token `-1`; a row with a `+inf` logit gives the first `+inf` index (the limit
//!   of the probabilities as that logit grows).

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod cluster;
pub mod radix;
pub mod search;

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub use cluster::*;
pub use radix::*;
pub use search::*;

/// Threads per block of the tutorial rung's kernels (one block per row).
pub const SAMPLE_BLOCK: u32 = 512;

/// A logit's order-preserving key: larger floats give larger keys, `-0.0` below `+0.0`, NaN 0
/// (below every number, `-inf`'s key being `0x007f_ffff`).
#[inline(always)]
pub fn order_key(x: f32) -> u32 {
    if x.is_nan() {
        0
    } else {
        let b = x.to_bits();
        if b >> 31 == 1 {
            !b
        } else {
            b | 0x8000_0000
        }
    }
}

/// The key of `-inf`: the keys of the logits that can be sampled are above it.
pub const NEG_INF_KEY: u32 = 0x007f_ffff;

/// The key of `+inf`.
pub const POS_INF_KEY: u32 = 0xff80_0000;

/// The row maximum of the sampling kernels' first pass: the largest order key ([`order_key`])
/// and the first column holding it, and what a row that is not drawn stores.
#[derive(Clone, Copy)]
pub struct RowMax {
    /// The largest order key of the row.
    pub key: u32,
    /// The first column whose key it is.
    pub first: i32,
}

impl RowMax {
    /// Column `i`'s ranked key: its logit's order key above, the complement of `i` below, so that
    /// the largest ranked key of a row (a thread's maximum over its columns, then the block's
    /// `u64::max` reduction) is the largest logit at its first column.
    #[inline(always)]
    pub fn rank(v: f32, i: usize) -> u64 {
        Self::rank_key(order_key(v), i)
    }

    /// [`RowMax::rank`] from the logit's order key `key`, for a rung that has it already.
    #[inline(always)]
    pub fn rank_key(key: u32, i: usize) -> u64 {
        u64::from(key) << 32 | u64::from(!(i as u32))
    }

    /// The row maximum of the row's largest ranked key ([`RowMax::rank`]).
    #[inline(always)]
    pub fn of(best: u64) -> RowMax {
        RowMax {
            key: (best >> 32) as u32,
            first: !(best as u32) as i32,
        }
    }

    /// Whether the row's token is not drawn: greedy (`sampling` false: `t = 0`), a `+inf`
    /// maximum, or nothing to sample (every logit NaN or `-inf`).
    #[inline(always)]
    pub fn greedy(&self, sampling: bool) -> bool {
        !sampling || self.key == POS_INF_KEY || self.key <= NEG_INF_KEY
    }

    /// The token of a row that is not drawn: `-1` when nothing can be sampled, else the first
    /// column of the maximum.
    #[inline(always)]
    pub fn token(&self) -> i32 {
        if self.key <= NEG_INF_KEY {
            -1
        } else {
            self.first
        }
    }
}
