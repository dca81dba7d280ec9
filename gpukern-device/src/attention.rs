//! Attention masks and score modifications written in Rust (FlexAttention's idea): a [`Mask`]
//! says which keys a query row sees and may change each score, and the attention kernels that
//! are generic over it (`kernels_gpu::attention`: the rows, `mma.sync` and `wgmma` rungs)
//! compile it into their inner loop.
//!
//! A mask is told the call's sizes ([`MaskShape`]) and three kernel parameters of its own
//! ([`MaskArgs`]: a device pointer, an integer, a float), and answers three questions:
//! * [`Mask::keep`]: does row `q` of head `h` of batch `b` see key `kv`? (Indices from 0 at the
//!   start of each sequence; with `q_len != kv_len` the masks here align the query rows to the
//!   end of the keys, as FlashAttention's causal mask does.)
//! * [`Mask::score`] (only if [`Mask::SCORE_MOD`]): the score `s` (already multiplied by the
//!   call's scale) replaced by another (a bias, a cap);
//! * [`Mask::keys`] and [`Mask::tile`]: the same at the scale of a tile, so that a kernel skips
//!   the tiles the mask empties (no copy, no product) and the per-element test on the tiles it
//!   keeps whole. Both must agree with `keep`: a tile called [`TileMask::Full`] keeps every
//!   pair, [`TileMask::Empty`] none; [`TileMask::Partial`] is always right, only slower.
//!
//! The kernels call `keep` only for rows below `q_len` and keys below `kv_len`, and `tile` for
//! ranges inside them. Shipped: [`NoMask`], [`Causal`], [`SlidingWindow`], [`Alibi`] (a score
//! modification with the causal mask), [`Document`] (each token's document as an interval of
//! tokens in device memory, computed once per mask) and [`SoftCap`] (logit
//! soft-capping, with or without the causal mask); and [`General`], any of them chosen at run
//! time, so that one kernel instance serves every shipped mask (the library's kernels have their
//! own instances of [`NoMask`] and [`Causal`], the common cases, and one of [`General`] for the
//! rest: each instance is PTX that the driver compiles when the module loads). A mask of your own
//! is compiled into the same kernels in your kernel crate (`kernels_gpu::attention_mask_kernels!`)
//! and run through `gpukern::AttentionMask::Custom`.

use core::ops::Range;

use crate::{math, mem};

/// What a mask says about a tile of (query rows x keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileMask {
    /// No pair of the tile is kept: the kernel skips the tile.
    Empty,
    /// Every pair is kept: the kernel tests no element.
    Full,
    /// Some pairs: the kernel tests each with [`Mask::keep`].
    Partial,
}

/// A mask's own kernel parameters, the same for every mask type so that every masked kernel has
/// one signature: a device pointer (`data`), an integer and a float, each the mask's to read.
#[derive(Clone, Copy, Debug)]
pub struct MaskArgs {
    /// Device memory the mask reads (e.g. [`Document`]'s ids), or a dummy.
    pub data: *const i32,
    /// An integer (e.g. [`SlidingWindow`]'s window).
    pub int: usize,
    /// A float (e.g. [`SoftCap`]'s cap).
    pub float: f32,
}

/// The sizes of the call a mask sees.
#[derive(Clone, Copy, Debug)]
pub struct MaskShape {
    /// Query rows per sequence.
    pub q_len: usize,
    /// Keys per sequence.
    pub kv_len: usize,
    /// Query heads.
    pub heads: usize,
}

/// A mask and score modification of attention, compiled into the kernels generic over it (see
/// the [module](self)).
pub trait Mask: Copy {
    /// Whether [`Mask::score`] changes scores (else the kernels never call it).
    const SCORE_MOD: bool = false;
    /// Whether every call's score modification is a bias ([`Mask::score_is_bias`] always
    /// true): a kernel may then add it as a bias. False by default (not known).
    const SCORE_IS_BIAS: bool = false;
    /// Whether the mask ever drops a pair (else the kernels never call `keep` or `tile`).
    const MASKS: bool = true;
    /// Whether every tile a block visits (those that meet [`Mask::keys`] of its rows) keeps a
    /// pair at least: the kernels then walk them all without asking [`Mask::tile`]. True of
    /// every mask whose rows see intervals of keys that move right from one row to the next
    /// (all the shipped ones); false by default.
    const CONTIGUOUS: bool = false;
    /// Whether [`Mask::rows`] of one key (`kv..kv + 1`) is exactly the rows that see it (an
    /// interval, clamped to `q_len`), the same for every head: the one-kernel Hopper backward
    /// keeps each key's rows and tests no pair, so it takes a mask only where this holds (and,
    /// for a mask of your own, where it modifies no score). True of the shipped masks; false by
    /// default (the default `rows`, every row, is not exact).
    const KEY_ROWS_EXACT: bool = false;

    /// The mask of one call.
    fn new(args: MaskArgs, shape: MaskShape) -> Self;

    /// Whether row `q` of head `h` of batch `b` sees key `kv` (`q < q_len`, `kv < kv_len`).
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool;

    /// The mask as a kernel uses it for row `q` of head `h` of batch `b`: the kernels call it
    /// once per row (and tile), and then ask the result about that row only. A mask with work
    /// per row or per head (a load, a slope) does it here, once, instead of once per key; the
    /// mask itself by default.
    #[inline(always)]
    fn row(&self, b: usize, h: usize, q: usize) -> Self {
        let _ = (b, h, q);
        *self
    }

    /// For a row's mask (what [`Mask::row`] gave): `Some(end)` when the row keeps exactly the
    /// keys below `end` and none past it (in 32 bits, as the kernels compare keys), so that a
    /// kernel may test a tile's keys against one bound, a comparison with a constant per key
    /// (the Hopper forward's consumers had no registers for the keys themselves); `None` (the
    /// default) when not, or not known: the kernels then ask [`Mask::keep`] key by key.
    #[inline(always)]
    fn row_end(&self) -> Option<u32> {
        None
    }

    /// Whether this mask changes scores (asked once per call, only where [`Mask::SCORE_MOD`]): a
    /// mask that holds several, chosen at run time ([`General`]), says it per call.
    /// [`Mask::SCORE_MOD`] by default.
    #[inline(always)]
    fn modifies_scores(&self) -> bool {
        Self::SCORE_MOD
    }

    /// The score of the pair (`s`: `scale * q . k`), modified; `s` itself by default.
    #[inline(always)]
    fn score(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        let _ = (b, h, q, kv);
        s
    }

    /// Keys outside this range are dropped for every row of `q`: the kernels visit only the
    /// tiles that meet it. `0..kv_len` by default.
    fn keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize>;

    /// Keys that every row of `q` keeps: the kernels test no element of a tile inside them
    /// (and every element of the others). Empty by default.
    #[inline(always)]
    fn full_keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        let _ = (b, h, q);
        0..0
    }

    /// The query rows that may see a key of `kv` (non-empty, inside the keys): rows outside
    /// this range see none of them, so the backward's kernels that walk the rows for a tile of
    /// keys (`dK`, `dV`) visit only the rows inside it (clamped to `q_len`). Every row
    /// (`0..usize::MAX`) by default: right for every mask, only slower.
    #[inline(always)]
    fn rows(&self, b: usize, h: usize, kv: Range<usize>) -> Range<usize> {
        let _ = (b, h, kv);
        0..usize::MAX
    }

    /// Whether this call's score modification is a bias: `score(s) = s + score(0)`, a term that
    /// does not depend on `s` (ALiBi's), so its derivative is 1 (asked once per call, only where
    /// [`Mask::modifies_scores`]). A kernel that adds biases but bends no score takes the mask
    /// through [`BiasOf`]. False by default (not known).
    #[inline(always)]
    fn score_is_bias(&self) -> bool {
        false
    }

    /// The derivative of [`Mask::score`] at `s` (called only where the mask modifies scores):
    /// the backward multiplies each pair's gradient by it. 1 by default, right for a bias added
    /// to the score (ALiBi); a mask that scales or bends the scores (a soft cap) gives its own.
    #[inline(always)]
    fn score_grad(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        let _ = (s, b, h, q, kv);
        1.0
    }

    /// [`Mask::score`] and [`Mask::score_grad`] at `s` together (called only where the mask
    /// modifies scores): a mask whose derivative follows from its score (the soft cap's)
    /// computes the two at once. Both asked apart by default.
    #[inline(always)]
    fn score_with_grad(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> (f32, f32) {
        (self.score(s, b, h, q, kv), self.score_grad(s, b, h, q, kv))
    }

    /// What the mask keeps of the tile of rows `q` and keys `kv` (both non-empty, inside the
    /// sequences): the kernels skip the tiles it calls [`TileMask::Empty`] (unless
    /// [`Mask::CONTIGUOUS`]); [`TileMask::Full`] must agree with [`Mask::full_keys`].
    /// [`TileMask::Partial`] by default.
    #[inline(always)]
    fn tile(&self, b: usize, h: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        let _ = (b, h, q, kv);
        TileMask::Partial
    }
}

/// The position of query row `q` among the keys (rows aligned to the end of the keys: the last
/// row at the last key), which may be negative when `q_len > kv_len`. In 32 bits, as the masks
/// below compute (`q_len + kv_len < 2^30`, which the host checks): a 64-bit comparison is two
/// instructions.
#[inline(always)]
fn position(q: usize, shape: &MaskShape) -> i32 {
    q as i32 + shape.kv_len as i32 - shape.q_len as i32
}

/// Every row sees every key.
#[derive(Clone, Copy, Debug)]
pub struct NoMask {
    kv_len: usize,
}

impl Mask for NoMask {
    const MASKS: bool = false;
    const CONTIGUOUS: bool = true;
    const KEY_ROWS_EXACT: bool = true;
    #[inline(always)]
    fn new(_: MaskArgs, shape: MaskShape) -> Self {
        NoMask { kv_len: shape.kv_len }
    }
    #[inline(always)]
    fn keep(&self, _: usize, _: usize, _: usize, _: usize) -> bool {
        true
    }
    #[inline(always)]
    fn keys(&self, _: usize, _: usize, _: Range<usize>) -> Range<usize> {
        0..self.kv_len
    }
    #[inline(always)]
    fn full_keys(&self, _: usize, _: usize, _: Range<usize>) -> Range<usize> {
        0..self.kv_len
    }
    #[inline(always)]
    fn tile(&self, _: usize, _: usize, _: Range<usize>, _: Range<usize>) -> TileMask {
        TileMask::Full
    }
}

/// The causal mask, bottom-right aligned: row `q` sees keys `kv <= q + kv_len - q_len`.
#[derive(Clone, Copy, Debug)]
pub struct Causal {
    shape: MaskShape,
    /// The row's first key not seen, once [`Mask::row`] has given it (in 32 bits, as the
    /// kernels' keys: one comparison per key).
    own_end: Option<u32>,
}

impl Causal {
    /// The first key row `q` does not see (`kv_len` at most, 0 for a row that sees none).
    #[inline(always)]
    pub fn end(&self, q: usize) -> usize {
        (q + 1 + self.shape.kv_len)
            .saturating_sub(self.shape.q_len)
            .min(self.shape.kv_len)
    }
}

impl Mask for Causal {
    const CONTIGUOUS: bool = true;
    const KEY_ROWS_EXACT: bool = true;
    #[inline(always)]
    fn new(_: MaskArgs, shape: MaskShape) -> Self {
        Causal { shape, own_end: None }
    }
    #[inline(always)]
    fn row(&self, _: usize, _: usize, q: usize) -> Self {
        Causal {
            own_end: Some(self.end(q) as u32),
            ..*self
        }
    }
    #[inline(always)]
    fn row_end(&self) -> Option<u32> {
        self.own_end
    }
    #[inline(always)]
    fn keep(&self, _: usize, _: usize, q: usize, kv: usize) -> bool {
        match self.own_end {
            Some(end) => (kv as u32) < end,
            None => kv + self.shape.q_len <= q + self.shape.kv_len,
        }
    }
    #[inline(always)]
    fn keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        0..self.end(q.end - 1)
    }
    #[inline(always)]
    fn full_keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        0..self.end(q.start)
    }
    #[inline(always)]
    fn tile(&self, _: usize, _: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        if kv.end <= self.end(q.start) {
            TileMask::Full
        } else if kv.start >= self.end(q.end - 1) {
            TileMask::Empty
        } else {
            TileMask::Partial
        }
    }
    #[inline(always)]
    fn rows(&self, _: usize, _: usize, kv: Range<usize>) -> Range<usize> {
        // Row `q` sees key `kv.start` from `q = kv.start + q_len - kv_len` on.
        let first = (kv.start + self.shape.q_len).saturating_sub(self.shape.kv_len);
        first.min(self.shape.q_len)..self.shape.q_len
    }
}

/// The causal mask limited to a window: row `q` (at position `p = q + kv_len - q_len`) sees
/// keys `p - window < kv <= p` (`args.int` = `window` >= 1: the row's own key and `window - 1`
/// before it).
#[derive(Clone, Copy, Debug)]
pub struct SlidingWindow {
    shape: MaskShape,
    window: i32,
}

impl SlidingWindow {
    /// The keys row `q` sees, as a range of positions (possibly empty or past the keys).
    #[inline(always)]
    fn span(&self, q: usize) -> (i32, i32) {
        let p = position(q, &self.shape);
        (p - self.window + 1, p + 1)
    }
}

impl Mask for SlidingWindow {
    const CONTIGUOUS: bool = true;
    const KEY_ROWS_EXACT: bool = true;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        SlidingWindow {
            shape,
            // A window past every key is no bound (and stays in 32 bits).
            window: args.int.min(shape.q_len + shape.kv_len) as i32,
        }
    }
    #[inline(always)]
    fn keep(&self, _: usize, _: usize, q: usize, kv: usize) -> bool {
        let (lo, hi) = self.span(q);
        let kv = kv as i32;
        (kv >= lo) & (kv < hi)
    }
    #[inline(always)]
    fn keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        hull(|r| self.span(r), q, self.shape.kv_len)
    }
    #[inline(always)]
    fn full_keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        core(|r| self.span(r), q, self.shape.kv_len)
    }
    #[inline(always)]
    fn tile(&self, _: usize, _: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        classify(|r| self.span(r), q, kv)
    }
    #[inline(always)]
    fn rows(&self, _: usize, _: usize, kv: Range<usize>) -> Range<usize> {
        band(|r| self.span(r), kv, self.shape.q_len)
    }
}

/// ALiBi (Press et al.): the causal mask, and each score plus `slope_h (kv - p)` (`p` the row's
/// position among the keys: `kv - p <= 0` for every key it sees), with the slopes of the paper,
/// `slope_h = 2^(-8 (h + 1) / heads)`.
#[derive(Clone, Copy, Debug)]
pub struct Alibi {
    causal: Causal,
    /// The slope of the row's head, once [`Mask::row`] has given it.
    slope: Option<f32>,
}

impl Alibi {
    /// The slope of head `h`.
    #[inline(always)]
    pub fn slope(h: usize, heads: usize) -> f32 {
        math::exp2(-8.0 * (h + 1) as f32 / heads as f32)
    }
}

impl Mask for Alibi {
    const SCORE_MOD: bool = true;
    const SCORE_IS_BIAS: bool = true;
    const CONTIGUOUS: bool = true;
    const KEY_ROWS_EXACT: bool = true;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        Alibi {
            causal: Causal::new(args, shape),
            slope: None,
        }
    }
    #[inline(always)]
    fn row(&self, _: usize, h: usize, _: usize) -> Self {
        Alibi {
            slope: Some(Alibi::slope(h, self.causal.shape.heads)),
            ..*self
        }
    }
    #[inline(always)]
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
        self.causal.keep(b, h, q, kv)
    }
    #[inline(always)]
    fn score_is_bias(&self) -> bool {
        true
    }
    #[inline(always)]
    fn score(&self, s: f32, _: usize, h: usize, q: usize, kv: usize) -> f32 {
        let distance = kv as i32 - position(q, &self.causal.shape);
        let slope = match self.slope {
            Some(slope) => slope,
            None => Alibi::slope(h, self.causal.shape.heads),
        };
        math::fma(slope, distance as f32, s)
    }
    #[inline(always)]
    fn keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        self.causal.keys(b, h, q)
    }
    #[inline(always)]
    fn full_keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        self.causal.full_keys(b, h, q)
    }
    #[inline(always)]
    fn tile(&self, b: usize, h: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        self.causal.tile(b, h, q, kv)
    }
    #[inline(always)]
    fn rows(&self, b: usize, h: usize, kv: Range<usize>) -> Range<usize> {
        self.causal.rows(b, h, kv)
    }
}

/// Document masking: several documents packed in each sequence, each a run of tokens, a row
/// seeing only the keys of its own document (`q_len == kv_len == seq`). `args.int` is `seq`;
/// `args.data` holds per batch `b` a record of `2 seq` i32 ([`document_record`]): for each token
/// the first token of its document and the one past its last, computed once per mask from the
/// ids (the host's `DocumentMask`). A row's keys are then an interval, as a sliding window's:
/// the rows' intervals only move right from one row to the next, so a tile is classified from
/// its first and last rows' (four loads), and a key tested with two comparisons.
#[derive(Clone, Copy, Debug)]
pub struct Document {
    data: *const i32,
    seq: usize,
    kv_len: usize,
    /// The row's document, once [`Mask::row`] has loaded it.
    own: Option<(i32, i32)>,
}

/// The length of one batch's record of [`Document`]'s data for sequences of `seq` tokens.
#[inline(always)]
pub const fn document_record(seq: usize) -> usize {
    2 * seq
}

impl Document {
    /// The keys token `q` of batch `b` sees: its document's tokens.
    #[inline(always)]
    fn span(&self, b: usize, q: usize) -> (i32, i32) {
        let at = self.data.wrapping_add(b * document_record(self.seq) + 2 * q);
        // SAFETY: token `q < seq` of batch `b`'s record (the contract: `q` inside the sequence).
        unsafe { (mem::load(at, 0), mem::load(at, 1)) }
    }
}

/// Whether key `kv` lies in a row's interval: `own` when [`Mask::row`] has loaded it, else
/// `span()`.
#[inline(always)]
fn within(own: Option<(i32, i32)>, span: impl Fn() -> (i32, i32), kv: usize) -> bool {
    let (lo, hi) = match own {
        Some(own) => own,
        None => span(),
    };
    let k = kv as i32;
    (k >= lo) & (k < hi)
}

/// What rows `q` (their key intervals `span(row)` moving right with the row) keep of keys `kv`.
#[inline(always)]
fn classify(span: impl Fn(usize) -> (i32, i32), q: Range<usize>, kv: Range<usize>) -> TileMask {
    let (first_lo, first_hi) = span(q.start);
    let (last_lo, last_hi) = span(q.end - 1);
    let (k0, k1) = (kv.start as i32, kv.end as i32);
    if k1 <= first_lo || k0 >= last_hi {
        TileMask::Empty
    } else if k0 >= last_lo && k1 <= first_hi {
        TileMask::Full
    } else {
        TileMask::Partial
    }
}

/// The keys `lo..hi` (clamped to `0..kv_len`) of rows `q` whose intervals move right with the
/// row.
#[inline(always)]
fn hull(span: impl Fn(usize) -> (i32, i32), q: Range<usize>, kv_len: usize) -> Range<usize> {
    let clamp = |x: i32| x.clamp(0, kv_len as i32) as usize;
    let (lo, hi) = (clamp(span(q.start).0), clamp(span(q.end - 1).1));
    lo..hi.max(lo)
}

/// The keys `lo..hi` (clamped to `0..kv_len`, possibly empty) that every row of `q` sees, their
/// intervals moving right with the row: from the last row's start to the first row's end.
#[inline(always)]
fn core(span: impl Fn(usize) -> (i32, i32), q: Range<usize>, kv_len: usize) -> Range<usize> {
    let clamp = |x: i32| x.clamp(0, kv_len as i32) as usize;
    let (lo, hi) = (clamp(span(q.end - 1).0), clamp(span(q.start).1));
    lo..hi.max(lo)
}

/// The rows `0..q_len` whose key intervals `span(row)` (moving right with the row) meet keys
/// `kv`: from the first row whose interval ends past `kv.start` to the first whose interval
/// starts at `kv.end` or later, each found by a binary search (`2 log2(q_len)` calls of `span`,
/// the same for every thread that asks about the same keys).
#[inline(always)]
fn band(span: impl Fn(usize) -> (i32, i32), kv: Range<usize>, q_len: usize) -> Range<usize> {
    let (k0, k1) = (kv.start as i32, kv.end as i32);
    let start = first_row(q_len, |r| span(r).1 > k0);
    let end = first_row(q_len, |r| span(r).0 >= k1);
    start..end.max(start)
}

/// The first row of `0..q_len` for which `past` holds (`q_len` if none), `past` false and then
/// true as the row grows: a binary search.
#[inline(always)]
fn first_row(q_len: usize, past: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0usize, q_len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if past(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

impl Mask for Document {
    const CONTIGUOUS: bool = true;
    const KEY_ROWS_EXACT: bool = true;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        Document {
            data: args.data,
            seq: args.int,
            kv_len: shape.kv_len,
            own: None,
        }
    }
    #[inline(always)]
    fn row(&self, b: usize, _: usize, q: usize) -> Self {
        Document {
            own: Some(self.span(b, q)),
            ..*self
        }
    }
    #[inline(always)]
    fn keep(&self, b: usize, _: usize, q: usize, kv: usize) -> bool {
        within(self.own, || self.span(b, q), kv)
    }
    #[inline(always)]
    fn keys(&self, b: usize, _: usize, q: Range<usize>) -> Range<usize> {
        hull(|r| self.span(b, r), q, self.kv_len)
    }
    #[inline(always)]
    fn full_keys(&self, b: usize, _: usize, q: Range<usize>) -> Range<usize> {
        core(|r| self.span(b, r), q, self.kv_len)
    }
    #[inline(always)]
    fn tile(&self, b: usize, _: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        classify(|r| self.span(b, r), q, kv)
    }
    #[inline(always)]
    fn rows(&self, b: usize, _: usize, kv: Range<usize>) -> Range<usize> {
        band(|r| self.span(b, r), kv, self.seq)
    }
}

/// Logit soft-capping (Gemma 2's): each score `s` becomes `cap tanh(s / cap)` (`args.float` =
/// `cap` > 0), with the causal mask where `args.int` is not 0 and no mask where it is. The
/// `tanh` is `1 - 2 / (2^(2 x log2 e) + 1)` with `ex2.approx` and `div.approx` (four
/// instructions; an absolute error of a few `2^-24`, which the cap multiplies: about `1e-5` at
/// cap 30, far below bf16's rounding of the scores' effect), not `tanh.approx`, whose relative
/// error `2^-11` times the cap moves the probabilities by a percent.
#[derive(Clone, Copy, Debug)]
pub struct SoftCap {
    causal: Causal,
    masked: bool,
    cap: f32,
    /// `2 log2(e) / cap`.
    factor: f32,
}

impl Mask for SoftCap {
    const SCORE_MOD: bool = true;
    const CONTIGUOUS: bool = true;
    const KEY_ROWS_EXACT: bool = true;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        SoftCap {
            causal: Causal::new(args, shape),
            masked: args.int != 0,
            cap: args.float,
            factor: 2.0 * math::LOG2_E / args.float,
        }
    }
    #[inline(always)]
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
        !self.masked || self.causal.keep(b, h, q, kv)
    }
    #[inline(always)]
    fn score(&self, s: f32, _: usize, _: usize, _: usize, _: usize) -> f32 {
        // `cap tanh(s / cap) = cap - 2 cap / (e^(2 s / cap) + 1)`: 0 for an infinite `e` (the
        // quotient's `div.approx` gives 0 past 2^126), `-cap` for `e = 0`, NaN for NaN.
        let e = math::fast::exp2(s * self.factor);
        self.cap - math::fast::div(2.0 * self.cap, e + 1.0)
    }
    #[inline(always)]
    fn score_grad(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        // `d/ds cap tanh(s / cap) = 1 - tanh(s / cap)^2`.
        let t = self.score(s, b, h, q, kv) / self.cap;
        math::fma(-t, t, 1.0)
    }
    #[inline(always)]
    fn score_with_grad(&self, s: f32, _: usize, _: usize, _: usize, _: usize) -> (f32, f32) {
        // `tanh(s / cap) = 1 - 2 / (e^(2 s / cap) + 1)` once; the score is `cap` times it, the
        // derivative `1 - tanh^2` (`score` and `score_grad` within a rounding of these).
        let e = math::fast::exp2(s * self.factor);
        let t = 1.0 - math::fast::div(2.0, e + 1.0);
        (self.cap * t, math::fma(-t, t, 1.0))
    }
    #[inline(always)]
    fn keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        if self.masked {
            self.causal.keys(b, h, q)
        } else {
            0..self.causal.shape.kv_len
        }
    }
    #[inline(always)]
    fn full_keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        if self.masked {
            self.causal.full_keys(b, h, q)
        } else {
            0..self.causal.shape.kv_len
        }
    }
    #[inline(always)]
    fn tile(&self, b: usize, h: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        if self.masked {
            self.causal.tile(b, h, q, kv)
        } else {
            TileMask::Full
        }
    }
    #[inline(always)]
    fn rows(&self, b: usize, h: usize, kv: Range<usize>) -> Range<usize> {
        if self.masked {
            self.causal.rows(b, h, kv)
        } else {
            0..self.causal.shape.q_len
        }
    }
}

/// Mask `M` with the score modifications a kernel applies itself and no others: its keys, and
/// with `SCORES` = [`BIASES`] its biases (its scores where [`Mask::score_is_bias`], ALiBi's; `s`
/// itself elsewhere, the soft cap's), with [`BENDS`] its other modifications (where not
/// [`Mask::score_is_bias`], the soft cap's, with their derivatives; `s` itself where it adds a
/// bias), with [`KEYS`] none ([`Mask::SCORE_MOD`] false). For the one-kernel Hopper backward's
/// masked instances, which apply a bias on lines and a bent score element by element, and whose
/// caller sends each call to the instance that takes its modification: [`KeysOf`], [`BiasOf`],
/// [`BentOf`]. Every other answer is `M`'s.
#[derive(Clone, Copy, Debug)]
pub struct KeysAnd<M, const SCORES: u8>(M);

/// [`KeysAnd`]'s `SCORES`: no score modification.
pub const KEYS: u8 = 0;
/// [`KeysAnd`]'s `SCORES`: the biases.
pub const BIASES: u8 = 1;
/// [`KeysAnd`]'s `SCORES`: the modifications that are not biases.
pub const BENDS: u8 = 2;

/// The keys of mask `M` without its score modifications ([`KeysAnd`]).
pub type KeysOf<M> = KeysAnd<M, KEYS>;

/// Mask `M` with its biases and without its other score modifications ([`KeysAnd`]).
pub type BiasOf<M> = KeysAnd<M, BIASES>;

/// Mask `M` with its score modifications that are not biases (the soft cap's) and without its
/// biases ([`KeysAnd`]).
pub type BentOf<M> = KeysAnd<M, BENDS>;

impl<M: Mask, const SCORES: u8> KeysAnd<M, SCORES> {
    /// Whether this call's modification (of `M`, which modifies scores) is one this mask keeps.
    #[inline(always)]
    fn takes(&self) -> bool {
        match SCORES {
            BIASES => self.0.score_is_bias(),
            BENDS => !self.0.score_is_bias(),
            _ => false,
        }
    }
}

impl<M: Mask, const SCORES: u8> Mask for KeysAnd<M, SCORES> {
    const SCORE_MOD: bool = SCORES != KEYS && M::SCORE_MOD;
    const SCORE_IS_BIAS: bool = SCORES != BENDS;
    const MASKS: bool = M::MASKS;
    const CONTIGUOUS: bool = M::CONTIGUOUS;
    const KEY_ROWS_EXACT: bool = M::KEY_ROWS_EXACT;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        KeysAnd(M::new(args, shape))
    }
    #[inline(always)]
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
        self.0.keep(b, h, q, kv)
    }
    #[inline(always)]
    fn row(&self, b: usize, h: usize, q: usize) -> Self {
        KeysAnd(self.0.row(b, h, q))
    }
    #[inline(always)]
    fn row_end(&self) -> Option<u32> {
        self.0.row_end()
    }
    #[inline(always)]
    fn modifies_scores(&self) -> bool {
        Self::SCORE_MOD && self.0.modifies_scores() && self.takes()
    }
    #[inline(always)]
    fn score_is_bias(&self) -> bool {
        SCORES != BENDS
    }
    #[inline(always)]
    fn score(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        if Self::SCORE_MOD && self.takes() {
            self.0.score(s, b, h, q, kv)
        } else {
            s
        }
    }
    #[inline(always)]
    fn score_grad(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        if Self::SCORE_MOD && self.takes() {
            self.0.score_grad(s, b, h, q, kv)
        } else {
            1.0
        }
    }
    #[inline(always)]
    fn score_with_grad(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> (f32, f32) {
        if Self::SCORE_MOD && self.takes() {
            self.0.score_with_grad(s, b, h, q, kv)
        } else {
            (s, 1.0)
        }
    }
    #[inline(always)]
    fn keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        self.0.keys(b, h, q)
    }
    #[inline(always)]
    fn full_keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        self.0.full_keys(b, h, q)
    }
    #[inline(always)]
    fn rows(&self, b: usize, h: usize, kv: Range<usize>) -> Range<usize> {
        self.0.rows(b, h, kv)
    }
    #[inline(always)]
    fn tile(&self, b: usize, h: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        self.0.tile(b, h, q, kv)
    }
}

/// Which shipped mask a [`General`] is: the low [`General::KIND_BITS`] bits of `args.int`
/// ([`General::int`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Shipped {
    /// [`NoMask`].
    None = 0,
    /// [`Causal`].
    Causal = 1,
    /// [`SlidingWindow`].
    Window = 2,
    /// [`Alibi`].
    Alibi = 3,
    /// [`Document`].
    Document = 4,
    /// [`SoftCap`].
    SoftCap = 5,
}

/// Every shipped mask in one type, the choice made at run time: `args.int` is
/// [`General::int`]`(kind, value)`, `value` what that mask reads as its `args.int` (the window,
/// the sequence length, the causal flag); `args.data` and `args.float` are passed on as they
/// are. It keeps the kernel small whatever the kind: each shipped mask is an interval of keys
/// per row that moves right from one row to the next: around the row's position `p`, `p -
/// before <= kv <= p + after` (`before` the window less one or unbounded, `after` 0 for the
/// causal masks or unbounded), or the row's document; one test the same for every kind, and
/// ALiBi and the soft cap add their score modification ([`Mask::modifies_scores`]). A branch on
/// the kind is uniform: the same for every thread of a call.
#[derive(Clone, Copy, Debug)]
pub struct General {
    kind: Shipped,
    shape: MaskShape,
    before: i32,
    after: i32,
    alibi: Alibi,
    document: Document,
    softcap: SoftCap,
    /// The row's keys, once [`Mask::row`] has given them.
    own: Option<(i32, i32)>,
}

impl General {
    /// The bits of `args.int` that hold the kind.
    pub const KIND_BITS: u32 = 3;

    /// `args.int` of mask `kind` whose own `args.int` is `value` (`value < 2^61`).
    #[inline(always)]
    pub const fn int(kind: Shipped, value: usize) -> usize {
        (value << Self::KIND_BITS) | kind as usize
    }

    /// The mask's kind.
    #[inline(always)]
    pub fn kind(&self) -> Shipped {
        self.kind
    }

    /// The keys row `q` of batch `b` sees, as positions `lo..hi` (possibly empty or past the
    /// keys).
    #[inline(always)]
    fn span(&self, b: usize, q: usize) -> (i32, i32) {
        if self.kind == Shipped::Document {
            return self.document.span(b, q);
        }
        let p = position(q, &self.shape);
        (p - self.before, p + 1 + self.after)
    }
}

impl Mask for General {
    const SCORE_MOD: bool = true;
    const CONTIGUOUS: bool = true;
    const KEY_ROWS_EXACT: bool = true;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        let kind = match args.int & ((1 << Self::KIND_BITS) - 1) {
            1 => Shipped::Causal,
            2 => Shipped::Window,
            3 => Shipped::Alibi,
            4 => Shipped::Document,
            5 => Shipped::SoftCap,
            _ => Shipped::None,
        };
        let own = MaskArgs {
            int: args.int >> Self::KIND_BITS,
            ..args
        };
        // Further than any key from any row: no bound.
        let unbounded = (shape.q_len + shape.kv_len) as i32;
        let (before, after) = match kind {
            Shipped::Causal | Shipped::Alibi => (unbounded, 0),
            Shipped::Window => (own.int.min(shape.q_len + shape.kv_len) as i32 - 1, 0),
            Shipped::SoftCap if own.int != 0 => (unbounded, 0),
            _ => (unbounded, unbounded),
        };
        General {
            kind,
            shape,
            before,
            after,
            alibi: Alibi::new(own, shape),
            document: Document::new(own, shape),
            softcap: SoftCap::new(own, shape),
            own: None,
        }
    }
    #[inline(always)]
    fn row(&self, b: usize, h: usize, q: usize) -> Self {
        General {
            own: Some(self.span(b, q)),
            alibi: if self.kind == Shipped::Alibi {
                self.alibi.row(b, h, q)
            } else {
                self.alibi
            },
            ..*self
        }
    }
    #[inline(always)]
    fn modifies_scores(&self) -> bool {
        matches!(self.kind, Shipped::Alibi | Shipped::SoftCap)
    }
    #[inline(always)]
    fn score_is_bias(&self) -> bool {
        self.kind != Shipped::SoftCap
    }
    #[inline(always)]
    fn keep(&self, b: usize, _: usize, q: usize, kv: usize) -> bool {
        within(self.own, || self.span(b, q), kv)
    }
    #[inline(always)]
    fn score(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        match self.kind {
            Shipped::Alibi => self.alibi.score(s, b, h, q, kv),
            Shipped::SoftCap => self.softcap.score(s, b, h, q, kv),
            _ => s,
        }
    }
    #[inline(always)]
    fn score_grad(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        match self.kind {
            Shipped::SoftCap => self.softcap.score_grad(s, b, h, q, kv),
            _ => 1.0,
        }
    }
    #[inline(always)]
    fn score_with_grad(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> (f32, f32) {
        match self.kind {
            Shipped::Alibi => (self.alibi.score(s, b, h, q, kv), 1.0),
            Shipped::SoftCap => self.softcap.score_with_grad(s, b, h, q, kv),
            _ => (s, 1.0),
        }
    }
    #[inline(always)]
    fn keys(&self, b: usize, _: usize, q: Range<usize>) -> Range<usize> {
        hull(|r| self.span(b, r), q, self.shape.kv_len)
    }
    #[inline(always)]
    fn full_keys(&self, b: usize, _: usize, q: Range<usize>) -> Range<usize> {
        core(|r| self.span(b, r), q, self.shape.kv_len)
    }
    #[inline(always)]
    fn tile(&self, b: usize, _: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        classify(|r| self.span(b, r), q, kv)
    }
    #[inline(always)]
    fn rows(&self, b: usize, _: usize, kv: Range<usize>) -> Range<usize> {
        band(|r| self.span(b, r), kv, self.shape.q_len)
    }
}
