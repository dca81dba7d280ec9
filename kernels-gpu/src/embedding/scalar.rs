//! The tutorial embedding gather: a thread per output element
//! ([`embedding_scalar`](fn@embedding_scalar)).

use super::TokenId;
use crate::gpu::{bf16, mem, thread};
use crate::kernel;

/// Threads per block of the tutorial.
pub const EMBEDDING_SCALAR_BLOCK: u32 = 256;

/// `y[t][j] = table[ids[t]][j]`, one thread per output element; zeros for an id outside
/// `0..vocab`.
///
/// Thread `i = blockIdx.x * blockDim.x + threadIdx.x` (for `i < tokens * hidden`) takes token
/// `t = i / hidden` and column `j = i % hidden`: it loads `ids[t]` and, if the id is a row of the
/// table, copies `table[id][j]` to `y[i]` (else stores 0).
///
/// Instances: `embedding_scalar_i32`, `embedding_scalar_i64`.
///
/// Global memory: the gathered rows read once and `y` written once (4 bytes per output
/// element), 2-byte accesses; an id per thread (from L1).
///
/// # Safety
/// `table` points to `vocab * hidden` bf16 of device memory, `ids` to `tokens` ids, `y` to
/// `tokens * hidden` bf16 overlapping neither; a 1-D launch of at least `tokens * hidden`
/// threads (blocks of [`EMBEDDING_SCALAR_BLOCK`]).
// Barriers: none.
#[kernel(
    instances(embedding_scalar_i32 = i32, embedding_scalar_i64 = i64),
    block(EMBEDDING_SCALAR_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn embedding_scalar<I: TokenId>(
    table: *const bf16,
    ids: *const I,
    y: *mut bf16,
    tokens: usize,
    vocab: usize,
    hidden: usize,
) {
    let i = thread::index_1d();
    if i >= tokens * hidden {
        return;
    }
    let (t, j) = (i / hidden, i % hidden);
    // SAFETY: `t < tokens`; a row `< vocab` and `j < hidden` lie in the table; `i` in `y`.
    unsafe {
        let v = match mem::load(ids, t).row(vocab) {
            Some(row) => mem::load(table, row * hidden + j),
            None => <bf16 as crate::gpu::vector::Lane>::ZERO,
        };
        mem::store(y, i, v);
    }
}
