//! The fast embedding gather: 16-byte vectors, several in flight per thread
//! ([`embedding_rows`](fn@embedding_rows)).

use super::TokenId;
use crate::gpu::vector::{self, LoadHint, StoreHint};
use crate::gpu::{bf16, mem, thread};
use crate::kernel;

/// Threads per block of the vector kernel.
pub const EMBEDDING_BLOCK: u32 = 256;

/// Vectors a thread loads before it stores any (32 bytes in flight): on the H200 two ran 3485.3 and
/// 3526.3 GB/s at 4096 tokens of 4096 against 3411.7 and 3389.6 for four and 3445.3 and 3439.6 for
/// one, and 4124.2 and 4126.7 at 32768 tokens against 3984.2 and 3970.5 and 3792.5 and 3777.1
/// (`bench/experiments/third-wave/340df98-rotary-embedding-ab-{x,auto,y}-{1,2}.jsonl`).
pub const EMBEDDING_UNROLL: usize = 2;

/// `y[t][j] = table[ids[t]][j]` by vectors of 8 bf16; zeros for an id outside `0..vocab` (whose
/// vectors are read from row 0, inside the table, and dropped).
///
/// The output is cut into `tokens * hidden / 8` chunks of 8 (`hidden` a multiple of 8, so a
/// chunk lies in one row). Thread `t` of block `b` takes, in a grid-stride loop, chunks
/// `(b * EMBEDDING_UNROLL + k) * blockDim.x + t` for `k < EMBEDDING_UNROLL` (each `k` coalesced
/// across the warp). The first chunk's token and place in the row come from one division; where
/// a row holds at least a block's worth of chunks, each next chunk's from the last by one step
/// (at most one row further), else from a division of its own. For each chunk it loads the
/// token's id (only when the token changes; the same for the threads of a row, from L1) and the
/// table's vector `table[id][c..c + 8]` (all loads issued before any store), then stores the
/// vectors to `y`.
///
/// Instances: `embedding_i32`, `embedding_i64`.
///
/// Global memory: the gathered rows read once (a row gathered twice is read twice, the second
/// time likely from L2) and `y` written once, 16-byte accesses: 4 bytes per output element.
///
/// Launch: 1-D blocks of [`EMBEDDING_BLOCK`] threads, any grid.
///
/// # Safety
/// As [`embedding_scalar`](fn@super::embedding_scalar), and `table` and `y` 16-byte aligned,
/// `hidden` a multiple of 8.
// Barriers: none.
#[kernel(
    instances(embedding_i32 = i32, embedding_i64 = i64),
    block(EMBEDDING_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn embedding_rows<I: TokenId>(
    table: *const bf16,
    ids: *const I,
    y: *mut bf16,
    tokens: usize,
    vocab: usize,
    hidden: usize,
) {
    let per_row = hidden / 8;
    let chunks = tokens * per_row;
    let threads = thread::block_dim_x() as usize;
    let stride = thread::grid_dim_x() as usize * threads * EMBEDDING_UNROLL;
    let mut first =
        thread::block_idx_x() as usize * threads * EMBEDDING_UNROLL + thread::thread_idx_x() as usize;
    let small = chunks <= u32::MAX as usize;
    let split = |c: usize| {
        if small {
            (
                (c as u32 / per_row as u32) as usize,
                (c as u32 % per_row as u32) as usize,
            )
        } else {
            (c / per_row, c % per_row)
        }
    };
    // A row of at least `threads` chunks: chunk `c + threads` is in the same row or the next.
    let stepping = per_row >= threads;
    while first < chunks {
        // The rows move as words (two bf16 each, 16 bytes a vector): nothing of them is read.
        let (src, dst) = (table.cast::<u32>(), y.cast::<u32>());
        let mut v = [[0u32; 4]; EMBEDDING_UNROLL];
        let (mut t, mut j) = split(first);
        // The last token whose id was loaded (none yet) and its row.
        let mut cached: (usize, Option<usize>) = (usize::MAX, None);
        unroll_8!(EMBEDDING_UNROLL, |k| {
            let c = first + k * threads;
            if k > 0 {
                if stepping {
                    j += threads;
                    if j >= per_row {
                        j -= per_row;
                        t += 1;
                    }
                } else {
                    (t, j) = split(c);
                }
            }
            if c < chunks {
                if t != cached.0 {
                    // SAFETY: `t < tokens`, as `c < chunks`.
                    cached = (t, unsafe { mem::load(ids, t) }.row(vocab));
                }
                let row = cached.1;
                // A bad id reads row 0 and keeps none of it: an array chosen whole between a
                // load and zeros went to local memory, lanes chosen one by one stay in registers.
                let keep = row.is_some();
                if vocab > 0 {
                    // SAFETY: a row `< vocab` and the vector `8 j..8 j + 8 <= hidden` lie in the
                    // table, at a multiple of 8 bf16 (4 words) of an aligned buffer.
                    let at = (row.unwrap_or(0) * hidden + 8 * j) / 2;
                    let w: [u32; 4] = unsafe { vector::load_hinted(src, at, LoadHint::Default) };
                    v[k] = w.map(|x| if keep { x } else { 0 });
                }
            }
        });
        unroll_8!(EMBEDDING_UNROLL, |k| {
            let c = first + k * threads;
            if c < chunks {
                // SAFETY: `8 c + 8 <= tokens * hidden` bf16, a multiple of 4 words of an aligned
                // buffer.
                unsafe { vector::store_hinted(dst, 4 * c, v[k], StoreHint::Default) };
            }
        });
        first += stride;
    }
}
