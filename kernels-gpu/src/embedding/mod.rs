//! Embedding gather: token ids (i32 or i64, a device buffer) to rows of a `vocab x hidden` bf16
//! table, `y[t][j] = table[ids[t]][j]`, PyTorch's `F.embedding(ids, table)`. The host checks the
//! ids against the vocabulary when they are uploaded; the kernels never read outside the table
//! whatever an id is: a row whose id is negative or at least `vocab` is written as zeros.
//!
//! The ladder, one file per rung:
//! * [`scalar`]: the tutorial, a thread per output element.
//! * [`rows`]: 16-byte vectors (`bf16x8`), two in flight per thread, a grid-stride loop.

pub mod rows;
pub mod scalar;

pub use rows::*;
pub use scalar::*;

/// A token id's integer type: i32 or i64.
pub trait TokenId: Copy + 'static {
    /// The table row of the id, or `None` outside `0..vocab`.
    fn row(self, vocab: usize) -> Option<usize>;
}

impl TokenId for i32 {
    #[inline(always)]
    fn row(self, vocab: usize) -> Option<usize> {
        (self >= 0 && (self as usize) < vocab).then_some(self as usize)
    }
}

impl TokenId for i64 {
    #[inline(always)]
    fn row(self, vocab: usize) -> Option<usize> {
        (self >= 0 && (self as u64) < vocab as u64).then_some(self as usize)
    }
}
