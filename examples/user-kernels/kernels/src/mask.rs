//! An attention mask of the crate's own, compiled into the library's attention kernels
//! (FlexAttention's idea, in Rust): [`PrefixLm`], and its kernels by
//! `kernels_gpu::attention_mask_kernels!` ([`prefix_lm`], the forward's and the backward's).

use core::ops::Range;

use gpukern_device::attention::{Mask, MaskArgs, MaskShape, TileMask};

/// The prefix-LM mask (T5's and PaLI's): every query row sees the first `prefix` keys (a prompt
/// read both ways) and, past them, the keys up to its own position (causal), the rows aligned to
/// the end of the keys as the causal mask is (row `q` at position `q + kv_len - q_len`). Its
/// parameter: `prefix` in [`MaskArgs::int`]. Row `q` sees the keys `0..end(q)`, `end(q) =
/// max(prefix, position + 1)` within `0..=kv_len`: an interval that grows with `q`, so the
/// kernels skip the tiles past the last row's end and test no key of the tiles before the first
/// row's. A key is seen by every row (in the prefix) or by the rows from its position on: an
/// interval, which [`Mask::rows`] gives exactly (`KEY_ROWS_EXACT`, the backward's one-kernel
/// Hopper rung).
#[derive(Clone, Copy, Debug)]
pub struct PrefixLm {
    prefix: i32,
    /// `kv_len - q_len`: row `q`'s position is `q + offset`.
    offset: i32,
    kv_len: i32,
    /// The row's end ([`Mask::row`]); `kv_len` before a row is chosen.
    end: i32,
}

impl PrefixLm {
    /// The first key row `q` does not see. In 32 bits: the host checks `q_len + kv_len < 2^30`
    /// for every mask but none and causal.
    #[inline(always)]
    fn end_of(&self, q: usize) -> i32 {
        let position = q as i32 + self.offset;
        let end = if self.prefix > position + 1 {
            self.prefix
        } else {
            position + 1
        };
        end.clamp(0, self.kv_len)
    }
}

impl Mask for PrefixLm {
    const CONTIGUOUS: bool = true;
    // `rows` of one key is exactly the rows that see it, for every head: the backward's
    // one-kernel Hopper rung takes the mask.
    const KEY_ROWS_EXACT: bool = true;

    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        let kv_len = shape.kv_len as i32;
        PrefixLm {
            prefix: args.int.min(shape.kv_len) as i32,
            offset: kv_len - shape.q_len as i32,
            kv_len,
            end: kv_len,
        }
    }

    #[inline(always)]
    fn row(&self, _: usize, _: usize, q: usize) -> Self {
        PrefixLm {
            end: self.end_of(q),
            ..*self
        }
    }

    #[inline(always)]
    fn row_end(&self) -> Option<u32> {
        Some(self.end as u32)
    }

    #[inline(always)]
    fn keep(&self, _: usize, _: usize, q: usize, kv: usize) -> bool {
        (kv as i32) < self.end_of(q)
    }

    #[inline(always)]
    fn keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        0..self.end_of(q.end - 1) as usize
    }

    #[inline(always)]
    fn full_keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        0..self.end_of(q.start) as usize
    }

    /// The rows that see a key of `kv`: those that see its first key (a row's keys are `0..end`,
    /// so a row that sees any key of `kv` sees `kv.start`): every row for a key of the prefix,
    /// else the rows at or past its position (`q + offset >= kv`).
    #[inline(always)]
    fn rows(&self, _: usize, _: usize, kv: Range<usize>) -> Range<usize> {
        let key = kv.start as i32;
        if key < self.prefix {
            0..usize::MAX
        } else {
            (key - self.offset).max(0) as usize..usize::MAX
        }
    }

    #[inline(always)]
    fn tile(&self, _: usize, _: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        if kv.start as i32 >= self.end_of(q.end - 1) {
            TileMask::Empty
        } else if kv.end as i32 <= self.end_of(q.start) {
            TileMask::Full
        } else {
            TileMask::Partial
        }
    }
}

kernels_gpu::attention_mask_kernels!(prefix_lm, PrefixLm, backward);
