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
//! modification with the causal mask), [`Document`] (ids in device memory, with the tile
//! classification precomputed per block of [`DOC_BLOCK`] tokens) and [`SoftCap`] (logit
//! soft-capping, with or without the causal mask).

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
    /// Whether the mask ever drops a pair (else the kernels never call `keep` or `tile`).
    const MASKS: bool = true;

    /// The mask of one call.
    fn new(args: MaskArgs, shape: MaskShape) -> Self;

    /// Whether row `q` of head `h` of batch `b` sees key `kv` (`q < q_len`, `kv < kv_len`).
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool;

    /// The score of the pair (`s`: `scale * q . k`), modified; `s` itself by default.
    #[inline(always)]
    fn score(&self, s: f32, b: usize, h: usize, q: usize, kv: usize) -> f32 {
        let _ = (b, h, q, kv);
        s
    }

    /// Keys outside this range are dropped for every row of `q`: the kernels visit only the
    /// tiles that meet it. `0..kv_len` by default.
    fn keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize>;

    /// What the mask keeps of the tile of rows `q` and keys `kv` (both non-empty, inside the
    /// sequences). [`TileMask::Partial`] by default.
    #[inline(always)]
    fn tile(&self, b: usize, h: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        let _ = (b, h, q, kv);
        TileMask::Partial
    }
}

/// The position of query row `q` among the keys (rows aligned to the end of the keys: the last
/// row at the last key), which may be negative when `q_len > kv_len`.
#[inline(always)]
fn position(q: usize, shape: &MaskShape) -> isize {
    q as isize + shape.kv_len as isize - shape.q_len as isize
}

/// Every row sees every key.
#[derive(Clone, Copy, Debug)]
pub struct NoMask {
    kv_len: usize,
}

impl Mask for NoMask {
    const MASKS: bool = false;
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
    fn tile(&self, _: usize, _: usize, _: Range<usize>, _: Range<usize>) -> TileMask {
        TileMask::Full
    }
}

/// The causal mask, bottom-right aligned: row `q` sees keys `kv <= q + kv_len - q_len`.
#[derive(Clone, Copy, Debug)]
pub struct Causal {
    shape: MaskShape,
}

impl Causal {
    /// The first key row `q` does not see (`kv_len` at most, 0 for a row that sees none).
    #[inline(always)]
    pub fn end(&self, q: usize) -> usize {
        (q + 1 + self.shape.kv_len).saturating_sub(self.shape.q_len).min(self.shape.kv_len)
    }
}

impl Mask for Causal {
    #[inline(always)]
    fn new(_: MaskArgs, shape: MaskShape) -> Self {
        Causal { shape }
    }
    #[inline(always)]
    fn keep(&self, _: usize, _: usize, q: usize, kv: usize) -> bool {
        kv + self.shape.q_len <= q + self.shape.kv_len
    }
    #[inline(always)]
    fn keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        0..self.end(q.end - 1)
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
}

/// The causal mask limited to a window: row `q` (at position `p = q + kv_len - q_len`) sees
/// keys `p - window < kv <= p` (`args.int` = `window` >= 1: the row's own key and `window - 1`
/// before it).
#[derive(Clone, Copy, Debug)]
pub struct SlidingWindow {
    shape: MaskShape,
    window: isize,
}

impl SlidingWindow {
    /// The keys row `q` sees, as a range of positions (possibly empty or past the keys).
    #[inline(always)]
    fn span(&self, q: usize) -> (isize, isize) {
        let p = position(q, &self.shape);
        (p - self.window + 1, p + 1)
    }
}

impl Mask for SlidingWindow {
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        SlidingWindow {
            shape,
            window: args.int as isize,
        }
    }
    #[inline(always)]
    fn keep(&self, _: usize, _: usize, q: usize, kv: usize) -> bool {
        let (lo, hi) = self.span(q);
        let kv = kv as isize;
        kv >= lo && kv < hi
    }
    #[inline(always)]
    fn keys(&self, _: usize, _: usize, q: Range<usize>) -> Range<usize> {
        let clamp = |x: isize| x.clamp(0, self.shape.kv_len as isize) as usize;
        let (lo, _) = self.span(q.start);
        let (_, hi) = self.span(q.end - 1);
        let (lo, hi) = (clamp(lo), clamp(hi));
        lo..hi.max(lo)
    }
    #[inline(always)]
    fn tile(&self, _: usize, _: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        // Row spans move right by one per row: the first row has the leftmost, the last the
        // rightmost.
        let (first_lo, first_hi) = self.span(q.start);
        let (last_lo, last_hi) = self.span(q.end - 1);
        let (k0, k1) = (kv.start as isize, kv.end as isize);
        if k1 <= first_lo.max(0) && k1 <= last_lo || k0 >= last_hi {
            TileMask::Empty
        } else if k0 >= last_lo && k1 <= first_hi {
            TileMask::Full
        } else {
            TileMask::Partial
        }
    }
}

/// ALiBi (Press et al.): the causal mask, and each score plus `slope_h (kv - p)` (`p` the row's
/// position among the keys: `kv - p <= 0` for every key it sees), with the slopes of the paper,
/// `slope_h = 2^(-8 (h + 1) / heads)`.
#[derive(Clone, Copy, Debug)]
pub struct Alibi {
    causal: Causal,
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
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        Alibi {
            causal: Causal::new(args, shape),
        }
    }
    #[inline(always)]
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
        self.causal.keep(b, h, q, kv)
    }
    #[inline(always)]
    fn score(&self, s: f32, _: usize, h: usize, q: usize, kv: usize) -> f32 {
        let distance = kv as isize - position(q, &self.causal.shape);
        math::fma(Alibi::slope(h, self.causal.shape.heads), distance as f32, s)
    }
    #[inline(always)]
    fn keys(&self, b: usize, h: usize, q: Range<usize>) -> Range<usize> {
        self.causal.keys(b, h, q)
    }
    #[inline(always)]
    fn tile(&self, b: usize, h: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        self.causal.tile(b, h, q, kv)
    }
}

/// Tokens per block of [`Document`]'s precomputed tile classification.
pub const DOC_BLOCK: usize = 64;

/// Document masking: several documents packed in each sequence, a row seeing only the keys of
/// its own document (`q_len == kv_len == seq`). `args.int` is `seq`; `args.data` holds per
/// batch `b` a record of `seq + 2 ceil(seq / 64)` i32 ([`document_record`]): the document id of
/// each token, then for each block of [`DOC_BLOCK`] tokens the least and greatest id in it (the
/// block sparsity, computed once per mask: the host's `DocumentMask`), from which a tile is
/// classified with a few loads whatever order the ids are in.
#[derive(Clone, Copy, Debug)]
pub struct Document {
    data: *const i32,
    seq: usize,
    kv_len: usize,
}

/// The length of one batch's record of [`Document`]'s data for sequences of `seq` tokens.
#[inline(always)]
pub const fn document_record(seq: usize) -> usize {
    seq + 2 * seq.div_ceil(DOC_BLOCK)
}

impl Document {
    /// The ids of batch `b`, followed by its block table.
    #[inline(always)]
    fn record(&self, b: usize) -> *const i32 {
        self.data.wrapping_add(b * document_record(self.seq))
    }

    /// The least and greatest id over the blocks that tokens `t` of batch `b` touch.
    #[inline(always)]
    fn id_range(&self, b: usize, t: Range<usize>) -> (i32, i32) {
        let table = self.record(b).wrapping_add(self.seq);
        let (mut lo, mut hi) = (i32::MAX, i32::MIN);
        let mut block = t.start / DOC_BLOCK;
        while block * DOC_BLOCK < t.end {
            // SAFETY: block `block < ceil(seq / 64)` of batch `b`'s table (the contract: `t`
            // inside the sequence).
            let (l, h) = unsafe { (mem::load(table, 2 * block), mem::load(table, 2 * block + 1)) };
            lo = lo.min(l);
            hi = hi.max(h);
            block += 1;
        }
        (lo, hi)
    }
}

impl Mask for Document {
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        Document {
            data: args.data,
            seq: args.int,
            kv_len: shape.kv_len,
        }
    }
    #[inline(always)]
    fn keep(&self, b: usize, _: usize, q: usize, kv: usize) -> bool {
        let ids = self.record(b);
        // SAFETY: `q`, `kv < seq`: tokens of batch `b`'s record (the contract).
        unsafe { mem::load(ids, q) == mem::load(ids, kv) }
    }
    #[inline(always)]
    fn keys(&self, _: usize, _: usize, _: Range<usize>) -> Range<usize> {
        0..self.kv_len
    }
    #[inline(always)]
    fn tile(&self, b: usize, _: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        let (q_lo, q_hi) = self.id_range(b, q);
        let (k_lo, k_hi) = self.id_range(b, kv);
        if q_hi < k_lo || k_hi < q_lo {
            TileMask::Empty
        } else if q_lo == q_hi && k_lo == k_hi && q_lo == k_lo {
            TileMask::Full
        } else {
            TileMask::Partial
        }
    }
}

/// Logit soft-capping (Gemma 2's): each score `s` becomes `cap tanh(s / cap)` (`args.float` =
/// `cap` > 0), with the causal mask where `args.int` is not 0 and no mask where it is.
#[derive(Clone, Copy, Debug)]
pub struct SoftCap {
    causal: Causal,
    masked: bool,
    cap: f32,
    inverse: f32,
}

impl Mask for SoftCap {
    const SCORE_MOD: bool = true;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        SoftCap {
            causal: Causal::new(args, shape),
            masked: args.int != 0,
            cap: args.float,
            inverse: 1.0 / args.float,
        }
    }
    #[inline(always)]
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
        !self.masked || self.causal.keep(b, h, q, kv)
    }
    #[inline(always)]
    fn score(&self, s: f32, _: usize, _: usize, _: usize, _: usize) -> f32 {
        self.cap * math::accurate::tanh(s * self.inverse)
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
    fn tile(&self, b: usize, h: usize, q: Range<usize>, kv: Range<usize>) -> TileMask {
        if self.masked {
            self.causal.tile(b, h, q, kv)
        } else {
            TileMask::Full
        }
    }
}
