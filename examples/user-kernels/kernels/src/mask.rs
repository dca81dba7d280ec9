//! An attention mask of the crate's own, compiled into the library's attention kernels
//! (FlexAttention's idea, in Rust): [`PrefixLm`], and its kernels by
//! `kernels_gpu::attention_mask_kernels!` ([`prefix_lm`]).

use core::ops::Range;

use gpukern_device::attention::{Mask, MaskArgs, MaskShape, TileMask};

/// The prefix-LM mask (T5's and PaLI's): every query row sees the first `prefix` keys (a prompt
/// read both ways) and, past them, the keys up to its own position (causal), the rows aligned to
/// the end of the keys as the causal mask is (row `q` at position `q + kv_len - q_len`). Its
/// parameter: `prefix` in [`MaskArgs::int`]. Row `q` sees the keys `0..end(q)`, `end(q) =
/// max(prefix, position + 1)` within `0..=kv_len`: an interval that grows with `q`, so the
/// kernels skip the tiles past the last row's end and test no key of the tiles before the first
/// row's.
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

kernels_gpu::attention_mask_kernels!(prefix_lm, PrefixLm);
