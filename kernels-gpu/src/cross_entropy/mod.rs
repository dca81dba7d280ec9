//! Cross-entropy loss of logits with one integer label per row:
//! `loss[r] = logsumexp(x[r]) - x[r][label[r]]`, and the mean of the rows' losses.
//!
//! Fused into one read of the logits: the row's online `(max, sum)` statistics (softmax's
//! [`Stats`](crate::softmax::Stats) at `t = 1`) are computed per chunk of the row by
//! [`softmax_split_stats`](fn@crate::softmax::softmax_split_stats) (several blocks per row, so
//! that a few rows of 2^20 columns fill the GPU as well as 8192 rows of 32768), and
//! [`cross_entropy_finish`](fn@cross_entropy_finish) merges a row's chunks, gathers the
//! labelled logit and writes the row's loss; [`cross_entropy_mean`](fn@cross_entropy_mean)
//! averages the losses. A second formulation, [`cross_entropy_warp`](fn@cross_entropy_warp),
//! gives each chunk (or whole row) to one warp instead of one block, with no barrier, and writes
//! the loss itself where a warp takes the whole row (one launch). `logsumexp(x) = M + ln S` for the row's `(M, S)`; the loss is computed
//! as `(M - x[label]) + ln S`, whose subtraction is exact when the labelled logit is near the
//! maximum (a confident prediction, the usual case), where `M + ln S - x[label]` would round at
//! the size of `M`.
//!
//! # Rules at the edges (as PyTorch)
//! * A NaN in a row makes its loss NaN; an infinite logit gives an infinite or NaN loss (`+inf`
//!   elsewhere than at the label: `+inf`; at the label: `inf - inf`, NaN; a row of all `-inf`:
//!   NaN). Other rows are never affected; the mean is NaN if any loss is.
//! * A label outside `0..cols` is refused on the host before anything is launched; the kernel
//!   itself never reads outside the row whatever the label (it writes NaN for such a row).

use crate::gpu::warp;

pub mod finish;
pub mod warp_chunks;

// Every rung's items (its kernels' launcher modules among them) at the family's level.
pub use finish::*;
pub use warp_chunks::*;

/// Threads per block of [`cross_entropy_finish`](fn@cross_entropy_finish): 8 warps, one row
/// each.
pub const FINISH_BLOCK: u32 = 256;

/// Rows per block of [`cross_entropy_finish`](fn@cross_entropy_finish).
pub const FINISH_ROWS: u32 = FINISH_BLOCK / warp::SIZE;
