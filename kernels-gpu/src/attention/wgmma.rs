//! The Hopper rung of attention ([`attention_wgmma`](fn@attention_wgmma), sm_90a only):
//! FlashAttention-3's forward design on the warpgroup tensor cores, bf16 or f16, head dims 64,
//! 128 and 256, written on the device crate's vocabulary (`pipeline::Ring`, `tma`, `tile`,
//! `wgmma`).
//!
//! # Design
//! * **Block**: three warpgroups (384 threads, launch bounds `(384, 1)`) per 128 query rows of
//!   one (batch, head). Warpgroup 0 is the producer: it gives registers back (`setmaxnreg` to
//!   [`PRODUCER_REGISTERS`]) and its thread 0 issues every copy. Warpgroups 1 and 2 are the
//!   consumers (`setmaxnreg` to [`CONSUMER_REGISTERS`]), each owning 64 of the 128 rows. At
//!   head dim 64 without a mask or with the causal one,
//!   [`attention_wgmma_three`](fn@attention_wgmma_three): four warpgroups (512 threads) per 192
//!   rows, three consumers taking turns ([`PingPongThree`]).
//! * **Copies** (TMA, 128-byte swizzled boxes of 128 rows x 64 dims, zeros past each sequence's
//!   end): `Q` (128 x `D`) once per block tile, on a barrier of its own (at head dim 64 into one
//!   of two buffers, [`wgmma_q_buffers`]); `K` and `V` tiles of 128 keys through a
//!   3-stage [`Ring`] (one stage: `K` then `V`, `D / 64` boxes each). The operands are 4-D tensor
//!   maps of `[batch, seq, heads, head_dim]` with their strides, so packed or strided layouts
//!   need no copy (strides multiples of 16 bytes; the host plan falls back otherwise).
//! * **Head dim 256** ([`D256`]): a consumer thread holds 128 output accumulators, so the KV
//!   tiles are 64 keys ([`wgmma_keys`]: the scores `wgmma.m64n64k16`, 32 per thread; `P V`
//!   `wgmma.m64n256k16` over 4 steps of 16 keys) and the ring has two stages of 64 KiB
//!   ([`wgmma_stages`]), beside 64 KiB of `Q`. The `K` and `V` maps' boxes are 64 rows.
//! * **Per KV tile and consumer**: `S = Q K^T` as `D / 64` groups of four `wgmma.m64n128k16`
//!   with both operands K-major in shared memory (64 f32 scores per thread); the online softmax
//!   on that fragment in registers (a thread holds 32 scores of each of two rows; row maxima and
//!   sums over the quad by 2 shuffles each; `scale * log2(e)` folded into the exponent, one
//!   `ex2` per score; the causal mask only on tiles that cross the diagonal or the end of the
//!   keys); `P` rounded to the 16-bit type **in registers** and used as the `A` operand of
//!   `O += P V` (eight `wgmma.m64nDk16` with `A` from registers, `V` N-major), since the score
//!   accumulators of 16 keys are exactly the register `A` fragment of one step; then the stage
//!   is released to the producer.
//! * **Schedules** ([`WgmmaSchedule`]): [`OneTile`], each consumer's scores, softmax and `P V`
//!   in turn, each product waited for, the two consumers (and the producer) overlapping one
//!   another on the multiprocessor without a schedule of their own; or [`PingPong`],
//!   FlashAttention-3's: in its turn a consumer issues tile `t`'s scores and tile `t - 1`'s
//!   `P V` back to back and hands the turn over (two `mbarrier`s, or two named barriers in
//!   [`PingPongNamed`]'s instances; [`PingPongHeldQ`]'s consumers also hold `Q` in registers),
//!   so that one consumer's softmax
//!   runs under the other's products and its own `P V`. The plan runs the ping-pong: on the H200
//!   it was the faster at each shape of `bench/experiments/third-wave/e0302b7-attention.jsonl`
//!   (526.9 against 480.5 TFLOP/s at `4x4096x16x128`, 467.2 against 420.5 causal).
//! * **Masks** (generic over [`Mask`]): each head's blocks run from the last query tile to the
//!   first (for the causal mask the longest first); a block visits only the KV tiles of the
//!   mask's key range for its rows that the mask does not empty (the producer copies and the
//!   consumers compute the same tiles), and a consumer tests element by element only the tiles
//!   the mask keeps in part for its 64 rows (and the ragged last tile). A score modification
//!   runs on every score before the row maxima.
//! * **Traffic** per block: `128 D` elements of `Q`, `2 * keys * D` of `K` and `V` per KV tile
//!   (`128 * 4 D` flops per element of `K`/`V` fetched: twice the `mma.sync` rung's reuse), `128
//!   D` of output and 512 bytes of log-sum-exp. Shared memory ([`wgmma_shared_bytes`]): three
//!   stages of `512 D` bytes (two of `256 D` at `D = 256`), `256 D` of `Q` (two buffers at `D =
//!   64`), barriers and alignment: 133,168 bytes at `D = 64`, 231,456 at `D = 128`, 198,688 at
//!   `D = 256`.
//!
//! Tried before: FlashAttention-3's intra-warpgroup overlap alone (the next tile's `Q K^T`
//! issued with this tile's `P V`; commits b6f382a and 36692f0), slower at head dim 128 than
//! [`OneTile`] in the lead's H200 run of 36692f0; the ping-pong (first at fe0719c) is that
//! overlap plus the turns.
//!
//! * **Persistent** where the host asks for it: the grid's size is the host's choice, a block per
//!   tile or fewer blocks each walking several tiles (`Work`), whose producer then copies the
//!   next tile's `Q` once the consumers have retired the last scores of the tile that read its
//!   buffer before (with one buffer this tile, under its last products and stores; with the two
//!   of head dim 64 the tile before, so the copy runs under this tile's products), and its `K`
//!   and `V` into the stages they free.
//!
//! # Rounding and edges
//! As [`super::flash`]: `P` is rounded to the 16-bit type for `P V` while its sum stays f32; a row
//! that sees no key gives 0 and log-sum-exp `-inf`. Keys past `kv_len` are zeros in shared
//! memory (the copy engine's fill), so a NaN outside the sequence never enters a row.

use super::AttentionElement;
use crate::gpu::attention::{Causal, General, Mask, MaskArgs, MaskShape, NoMask, Shipped, TileMask};
use crate::gpu::pipeline::Ring;
use crate::gpu::tma::{self, Tensor4d};
use crate::gpu::{barrier, bf16, f16, math, mbarrier, mem, mma, thread, vector, warp, wgmma};
use crate::kernel;
use core::marker::PhantomData;

/// The barriers an [`attention_wgmma`](fn@attention_wgmma) instance uses: the ring's
/// initialisation and the `Q` barrier's; with named turns (`S::NAMED_TURNS`) also the turns'
/// named barriers: three waits and three hand-overs in the loop, each a barrier per consumer (its
/// id an immediate), and consumer 1's first hand-over.
pub const fn forward_barriers(named_turns: bool) -> u32 {
    if named_turns {
        15
    } else {
        2
    }
}

/// Query rows per block of [`attention_wgmma`](fn@attention_wgmma): 64 per consumer warpgroup.
pub const WGMMA_ROWS: usize = 128;
/// Keys per KV tile at head dims 64 and 128 (the `N` of the scores' `wgmma`, the `k` of `P V`);
/// [`wgmma_keys`] gives every head dim's.
pub const WGMMA_KEYS: usize = 128;
/// Threads per block: a producer and two consumer warpgroups.
pub const WGMMA_BLOCK: u32 = 384;
/// The head dims of the wgmma rung.
pub const WGMMA_HEAD_DIMS: [usize; 3] = [64, 128, 256];
/// Columns of one TMA box: one 128-byte swizzle row of a 16-bit type.
pub const WGMMA_BOX_COLS: usize = 64;
/// Rows of one TMA box of every operand (`Q` rows or keys).
pub const WGMMA_BOX_ROWS: usize = 128;

/// Keys per KV tile at head dim `d`: 128, and 64 at head dim 256, where a consumer thread holds
/// 128 output accumulators and 128 keys' scores would leave too few registers for the rest (the
/// tile is also the rows of the `K` and `V` maps' boxes).
pub const fn wgmma_keys(d: usize) -> usize {
    if d > 128 {
        64
    } else {
        WGMMA_KEYS
    }
}

/// Stages of the `K`/`V` ring at head dim `d`: three, so that the producer stays a tile ahead
/// although a stage is free only once both consumers' `P V` on it retired (at `D = 128` three
/// stages and `Q` fill the 227 KiB a block may have); two at `D = 256`, whose `Q` alone takes 64
/// KiB and each stage 64 KiB.
pub const fn wgmma_stages(d: usize) -> usize {
    wgmma_stages_for(d, 2)
}

/// Stages of the `K`/`V` ring at head dim `d` with `consumers` consumer warpgroups: as
/// [`wgmma_stages`] for two; four for the three of [`attention_wgmma_three`](fn@attention_wgmma_three)
/// (head dim 64), whose stage is free only once the third consumer's `P V` on it retired, a turn
/// later than the second's.
pub const fn wgmma_stages_for(d: usize, consumers: usize) -> usize {
    if d > 128 {
        2
    } else if consumers > 2 {
        4
    } else {
        3
    }
}
/// Rows per consumer warpgroup (the `M` of `wgmma`).
const CONSUMER_ROWS: usize = 64;
/// Threads of a warpgroup.
const WARPGROUP: usize = 128;
/// Query rows per block of [`attention_wgmma_three`](fn@attention_wgmma_three): 64 per consumer
/// warpgroup, three consumers.
pub const WGMMA_THREE_ROWS: usize = 192;
/// Threads per block of [`attention_wgmma_three`](fn@attention_wgmma_three): a producer and three
/// consumer warpgroups.
pub const WGMMA_THREE_BLOCK: u32 = 512;

/// The block of the forward with `consumers` consumer warpgroups: its query rows (64 a consumer,
/// the rows of `Q`'s boxes too) and its threads (a producer warpgroup beside the consumers):
/// [`WGMMA_ROWS`] and [`WGMMA_BLOCK`] for two, [`WGMMA_THREE_ROWS`] and [`WGMMA_THREE_BLOCK`] for
/// three.
pub const fn wgmma_block(consumers: usize) -> (usize, u32) {
    (consumers * CONSUMER_ROWS, ((consumers + 1) * WARPGROUP) as u32)
}

const _: () = assert!(
    wgmma_block(2).0 == WGMMA_ROWS
        && wgmma_block(2).1 == WGMMA_BLOCK
        && wgmma_block(3).0 == WGMMA_THREE_ROWS
        && wgmma_block(3).1 == WGMMA_THREE_BLOCK,
    "the named blocks are the two and three consumers'"
);
/// Registers per thread the producer keeps.
pub const PRODUCER_REGISTERS: u32 = 40;
/// Registers per thread the consumers ask for: `128 x 40 + 256 x 232 = 384 x 168`, what the
/// block holds at its start (the launch bounds' 168 per thread): the consumers' increases draw
/// only on what the producer gave back (48 for the producer hung the H200 at a8752bd; the
/// simulator reports it).
pub const CONSUMER_REGISTERS: u32 = 232;

const _: () = assert!(
    (WARPGROUP as u32) * PRODUCER_REGISTERS + 2 * (WARPGROUP as u32) * CONSUMER_REGISTERS
        <= WGMMA_BLOCK * (65536 / WGMMA_BLOCK / 8 * 8),
    "the consumers' increases fit in what the producer gives back"
);

/// Registers per thread the producer of [`attention_wgmma_three`](fn@attention_wgmma_three)
/// keeps (its block starts with 128 a thread).
pub const THREE_PRODUCER_REGISTERS: u32 = 32;
/// Registers per thread the three consumers of [`attention_wgmma_three`](fn@attention_wgmma_three)
/// ask for: `128 x 32 + 384 x 160 = 512 x 128` (FlashAttention-3's split for three consumer
/// warpgroups).
pub const THREE_CONSUMER_REGISTERS: u32 = 160;

const _: () = assert!(
    (WARPGROUP as u32) * THREE_PRODUCER_REGISTERS + 3 * (WARPGROUP as u32) * THREE_CONSUMER_REGISTERS
        <= WGMMA_THREE_BLOCK * (65536 / WGMMA_THREE_BLOCK / 8 * 8),
    "the three consumers' increases fit in what the producer gives back"
);

/// Bytes of one ring stage for head dim `d`: `K` and `V`, `d / 64` boxes of [`wgmma_keys`]`(d)`
/// rows each.
pub const fn wgmma_stage_bytes(d: usize) -> usize {
    2 * (d / WGMMA_BOX_COLS) * kv_box_bytes(d)
}

/// Bytes of one box of `K` or `V` at head dim `d`: its keys' rows of 128 bytes.
const fn kv_box_bytes(d: usize) -> usize {
    wgmma_keys(d) * 128
}

/// Dynamic shared memory of [`attention_wgmma`](fn@attention_wgmma) for head dim `d`: the ring
/// (alignment slack, stages, barriers), a 1024-byte gap, the [`wgmma_q_buffers`] buffers of
/// `Q`, their barriers, the consumers' two `mbarrier` turns (used by the [`PingPong`] schedule;
/// unused with named turns) and the buffers' releases.
pub const fn wgmma_shared_bytes(d: usize) -> usize {
    wgmma_shared_bytes_for(d, 2)
}

/// [`wgmma_shared_bytes`] with `consumers` consumer warpgroups (`Q`'s boxes of `64 consumers`
/// rows, [`wgmma_stages_for`]'s ring): [`attention_wgmma_three`](fn@attention_wgmma_three)'s
/// with three.
pub const fn wgmma_shared_bytes_for(d: usize, consumers: usize) -> usize {
    let stages = wgmma_stages_for(d, consumers);
    let q = wgmma_q_buffers(d);
    Ring::shared_bytes(stages, wgmma_stage_bytes(d)) as usize - 2 * stages * 8
        + 1024
        + q * (d / WGMMA_BOX_COLS) * q_box_bytes(consumers)
        + 8 * (2 * q + 2)
}

/// `Q` buffers of a block at head dim `d`: two at head dim 64, where shared memory has room for
/// them beside the ring (block tile `n` of a block's walk uses buffer `n % 2`, so that the
/// producer copies the next block tile's `Q` while the consumers still read this one's), one at
/// 128 and 256, whose ring and `Q` fill the 227 KiB a block may have.
pub const fn wgmma_q_buffers(d: usize) -> usize {
    if d == 64 {
        2
    } else {
        1
    }
}

/// Bytes of one box of `Q` with `consumers` consumer warpgroups: 64 rows of 128 bytes each.
const fn q_box_bytes(consumers: usize) -> usize {
    consumers * CONSUMER_ROWS * 128
}

const _: () = assert!(
    wgmma_shared_bytes(64) == 133_168
        && wgmma_shared_bytes(128) == 231_456
        && wgmma_shared_bytes(256) == 198_688
        && wgmma_shared_bytes(128) <= 232_448
        && wgmma_shared_bytes_for(64, 3) <= 232_448,
    "the documented sizes, within the 227 KiB a block may opt in to"
);

/// A 16-bit element type of the wgmma rung: its scores product and its two `P V` widths.
pub trait WgmmaElement: AttentionElement {
    /// [`wgmma::mma_bf16_m64n128k64_kb_async`] or its f16 twin.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k64_kb_async`].
    unsafe fn scores(acc: [f32; 64], a: u64, b: u64, accumulate: bool) -> [f32; 64];
    /// [`wgmma::mma_bf16_m64n64k128_rs_async`] or its f16 twin.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n64k128_rs_async`].
    unsafe fn pv64(acc: [f32; 32], a: [u32; 32], b: u64, accumulate: bool) -> [f32; 32];
    /// [`wgmma::mma_bf16_m64n128k128_rs_async`] or its f16 twin.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k128_rs_async`].
    unsafe fn pv128(acc: [f32; 64], a: [u32; 32], b: u64, accumulate: bool) -> [f32; 64];
    /// [`wgmma::mma_bf16_m64n64k64_kb_async`] or its f16 twin: the scores of a 64-key tile.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n64k64_kb_async`].
    unsafe fn scores64(acc: [f32; 32], a: u64, b: u64, accumulate: bool) -> [f32; 32];
    /// [`wgmma::mma_bf16_m64n256k64_rs_async`] or its f16 twin: `P V` of a 64-key tile at head
    /// dim 256.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n256k64_rs_async`].
    unsafe fn pv256(acc: [f32; 128], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 128];
    /// [`wgmma::mma_bf16_m64n128k64_rk_async`] or its f16 twin: the scores of one 64-dim box
    /// with `Q` from registers.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k64_rk_async`].
    unsafe fn scores_rk(acc: [f32; 64], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 64];
    /// [`wgmma::mma_bf16_m64n64k64_rk_async`] or its f16 twin: 64 keys' scores with `Q` from
    /// registers.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n64k64_rk_async`].
    unsafe fn scores64_rk(acc: [f32; 32], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 32];
}

/// [`WgmmaElement`] for `$t` from its five products.
macro_rules! wgmma_element {
    ($t:ty: $scores:ident, $pv64:ident, $pv128:ident, $scores64:ident, $pv256:ident, $scores_rk:ident, $scores64_rk:ident) => {
        impl WgmmaElement for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn scores_rk(acc: [f32; 64], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 64] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$scores_rk(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn scores64_rk(acc: [f32; 32], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 32] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$scores64_rk(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn scores(acc: [f32; 64], a: u64, b: u64, accumulate: bool) -> [f32; 64] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$scores(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn pv64(acc: [f32; 32], a: [u32; 32], b: u64, accumulate: bool) -> [f32; 32] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$pv64(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn pv128(acc: [f32; 64], a: [u32; 32], b: u64, accumulate: bool) -> [f32; 64] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$pv128(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn scores64(acc: [f32; 32], a: u64, b: u64, accumulate: bool) -> [f32; 32] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$scores64(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn pv256(acc: [f32; 128], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 128] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$pv256(acc, a, b, accumulate) }
            }
        }
    };
}

wgmma_element!(
    bf16: mma_bf16_m64n128k64_kb_async,
    mma_bf16_m64n64k128_rs_async,
    mma_bf16_m64n128k128_rs_async,
    mma_bf16_m64n64k64_kb_async,
    mma_bf16_m64n256k64_rs_async,
    mma_bf16_m64n128k64_rk_async,
    mma_bf16_m64n64k64_rk_async
);
wgmma_element!(
    f16: mma_f16_m64n128k64_kb_async,
    mma_f16_m64n64k128_rs_async,
    mma_f16_m64n128k128_rs_async,
    mma_f16_m64n64k64_kb_async,
    mma_f16_m64n256k64_rs_async,
    mma_f16_m64n128k64_rk_async,
    mma_f16_m64n64k64_rk_async
);

/// A head dim of the wgmma rung: `D`, its KV tile's keys, a consumer thread's output
/// accumulators (`[f32; D / 2]`), scores (`[f32; KEYS / 2]`) and probabilities (`[u32; KEYS /
/// 4]`, the register `A` of `P V`), and its two products.
pub trait WgmmaHead {
    /// The head dim.
    const D: usize;
    /// Keys per KV tile ([`wgmma_keys`]`(D)`).
    const KEYS: usize;
    /// One consumer thread's output accumulators.
    type O: wgmma::Accumulators + core::ops::IndexMut<usize, Output = f32>;
    /// One consumer thread's scores of a KV tile.
    type S: wgmma::Accumulators + core::ops::IndexMut<usize, Output = f32>;
    /// One consumer thread's probabilities of a KV tile, packed pairwise.
    type P: Copy + Default + core::ops::IndexMut<usize, Output = u32>;
    /// `S (+)= Q K^T` of one 64-dim box ([`WgmmaElement::scores`] or
    /// [`WgmmaElement::scores64`]).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k64_kb_async`].
    unsafe fn scores<T: WgmmaElement>(s: Self::S, a: u64, b: u64, accumulate: bool) -> Self::S;
    /// [`WgmmaHead::scores`] with the box's `Q` from registers ([`WgmmaElement::scores_rk`] or
    /// [`WgmmaElement::scores64_rk`]).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k64_rk_async`].
    unsafe fn scores_rk<T: WgmmaElement>(s: Self::S, a: [u32; 16], b: u64, accumulate: bool) -> Self::S;
    /// `O += P V` of width `D` ([`WgmmaElement::pv64`], [`WgmmaElement::pv128`] or
    /// [`WgmmaElement::pv256`]).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k128_rs_async`].
    unsafe fn pv<T: WgmmaElement>(o: Self::O, a: Self::P, b: u64, accumulate: bool) -> Self::O;
}

/// Head dim 64: `wgmma.m64n64k16` for `P V`, 32 output accumulators per thread.
#[derive(Clone, Copy, Debug)]
pub struct D64;
/// Head dim 128: `wgmma.m64n128k16` for `P V`, 64 output accumulators per thread.
#[derive(Clone, Copy, Debug)]
pub struct D128;
/// Head dim 256: 64-key tiles, `wgmma.m64n64k16` for the scores and `wgmma.m64n256k16` for `P
/// V`, 128 output accumulators per thread.
#[derive(Clone, Copy, Debug)]
pub struct D256;

/// [`WgmmaHead`] for `$h`: head dim `$d`, its accumulator, score and probability arrays, and
/// the [`WgmmaElement`] products of its scores and `P V`.
macro_rules! wgmma_head {
    ($h:ty: $d:literal, O = $o:ty, S = $s:ty, P = $p:ty, $scores:ident, $scores_rk:ident, $pv:ident) => {
        impl WgmmaHead for $h {
            const D: usize = $d;
            const KEYS: usize = wgmma_keys($d);
            type O = $o;
            type S = $s;
            type P = $p;
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn scores<T: WgmmaElement>(s: $s, a: u64, b: u64, accumulate: bool) -> $s {
                // SAFETY: forwarded contract.
                unsafe { T::$scores(s, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn scores_rk<T: WgmmaElement>(s: $s, a: [u32; 16], b: u64, accumulate: bool) -> $s {
                // SAFETY: forwarded contract.
                unsafe { T::$scores_rk(s, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn pv<T: WgmmaElement>(o: $o, a: $p, b: u64, accumulate: bool) -> $o {
                // SAFETY: forwarded contract.
                unsafe { T::$pv(o, a, b, accumulate) }
            }
        }
    };
}

wgmma_head!(D64: 64, O = [f32; 32], S = [f32; 64], P = [u32; 32], scores, scores_rk, pv64);
wgmma_head!(D128: 128, O = [f32; 64], S = [f32; 64], P = [u32; 32], scores, scores_rk, pv128);
wgmma_head!(D256: 256, O = [f32; 128], S = [f32; 32], P = [u32; 16], scores64, scores64_rk, pv256);

/// The order in which a consumer warpgroup issues its products: [`OneTile`], [`PingPong`] or
/// [`PingPongNamed`].
pub trait WgmmaSchedule {
    /// Whether the two consumers take turns issuing (and each overlaps a tile's softmax with
    /// the previous tile's `P V`).
    const PING_PONG: bool;
    /// Whether the turns are named barriers (else `mbarrier`s).
    const NAMED_TURNS: bool;
    /// Whether each consumer holds its rows of `Q` in registers ([`PingPongHeldQ`]).
    const HELD_Q: bool;
    /// Consumer warpgroups: two ([`attention_wgmma`](fn@attention_wgmma)), or three
    /// ([`PingPongThree`], [`attention_wgmma_three`](fn@attention_wgmma_three)).
    const CONSUMERS: usize;
}

/// One tile at a time per consumer: its scores, softmax and `P V` in turn, each product waited
/// for; the two consumers overlap each other without a schedule of their own.
#[derive(Clone, Copy, Debug)]
pub struct OneTile;

/// FlashAttention-3's schedule: in its turn a consumer issues tile `t`'s scores and tile `t - 1`'s
/// `P V` back to back and hands the turn to the other consumer, then computes tile `t`'s softmax
/// while its own `P V` and the other consumer's products run. The turns are two `mbarrier`s
/// (one per consumer, four arrivals: the other consumer's warps), which the simulator models.
#[derive(Clone, Copy, Debug)]
pub struct PingPong;

/// [`PingPong`] with its turns on two named barriers of both consumers' 256 threads (`Turns`;
/// the hardware's `bar.sync` / `bar.arrive`, FlashAttention-3's warp-scheduler barriers), which
/// the simulator models. On the H200 the faster turns at every ping-pong instance but head dim
/// 128 without a mask, where the `mbarrier`s were level to 2.5% faster (1x16384x16x128: 604.6
/// and 603.5 TFLOP/s with `mbarrier` turns against 592.1 and 592.1 with named ones; with the
/// causal mask, where the named turns won, 589.5 and 586.7 against 599.1 and 592.4,
/// `bench/experiments/third-wave/3bf379d-attention-named-ab-{main,named}-{1,2}.jsonl`),
/// so the instances take the turns per head dim and mask; with them, in a second call, the
/// causal default at 4x4096x16x128 ran 534.0 and 534.0 against 526.5 and 525.5 and the head dim
/// 64 default 397.7 and 397.8 against 391.2 and 391.9 at 8x2048x32x64
/// (`bench/experiments/third-wave/d642144-attention-turns-ab-{main,turns}-{1,2}.jsonl`).
#[derive(Clone, Copy, Debug)]
pub struct PingPongNamed;

/// [`PingPong`] (its `mbarrier` turns) with `Q` held in registers: at a block tile's start each
/// consumer warp loads its 16 rows of `Q` into the register `A` fragments of the scores
/// (`ldmatrix` from the swizzled boxes, 32 registers at head dim 128) and releases `Q`, so that
/// the producer copies the next block tile's `Q` under this one's products instead of between
/// block tiles; the scores are `wgmma` with `A` from registers and `K` K-major
/// ([`wgmma::mma_bf16_m64n128k64_rk_async`]). The instances at head dim 128 without a mask: on
/// the H100 the default at `16x1024x16x128` went from 538.2 and 542.1 to 581.9 and 583.5
/// TFLOP/s, at `4x4096x16x128` from 619.2 and 612.5 to 650.8 and 650.9
/// (`bench/experiments/third-wave/9ccf09b-fwd-qregs-ab-{main,qregs}-{1,2}.jsonl`), where a
/// bound with no `Q` copy after a block's first tile (stale `Q`, timing only) had gained 4% at
/// 1k keys on the H200 (`f5cbae5-fwd-noq-ab-*.jsonl`). Not at head dim 64, where it was 4%
/// slower (381.1 and 384.0 against 396.9 and 398.3 at `8x2048x32x64`, the same records), nor
/// in the causal instance, whose consumers spilled 4 bytes with the 32 registers.
#[derive(Clone, Copy, Debug)]
pub struct PingPongHeldQ;

/// [`PingPongNamed`] among three consumer warpgroups (FlashAttention-3's at head dim 64): the
/// turn goes round from consumer 0 to 1 to 2, so that two consumers' products run under each
/// one's softmax. At head dim 64 a KV tile's products take half of head dim 128's time while its
/// softmax (the same 64 exponentials a thread) does not shrink, and the second consumer's
/// products alone no longer cover it. Blocks of 192 query rows, 512 threads
/// ([`attention_wgmma_three`](fn@attention_wgmma_three)). On the H100 the default at
/// `8x2048x32x64` went from 400.8 and 403.2 TFLOP/s (two consumers, persistent) to 465.7 and
/// 467.0 (`bench/experiments/third-wave/0343dcb-fwd-three-ab-{main,three}-{1,2}.jsonl`); from
/// 512 to 16384 keys 3-20% past the two consumers' walk in the same binary (334.0 against 323.1
/// at `32x512x32x64`, 511.9 against 427.5 at `1x16384x32x64`,
/// `bench/experiments/third-wave/69f9bbf-fwd-three-seq-1.jsonl`).
#[derive(Clone, Copy, Debug)]
pub struct PingPongThree;

impl WgmmaSchedule for OneTile {
    const PING_PONG: bool = false;
    const NAMED_TURNS: bool = false;
    const HELD_Q: bool = false;
    const CONSUMERS: usize = 2;
}

impl WgmmaSchedule for PingPong {
    const PING_PONG: bool = true;
    const NAMED_TURNS: bool = false;
    const HELD_Q: bool = false;
    const CONSUMERS: usize = 2;
}

impl WgmmaSchedule for PingPongNamed {
    const PING_PONG: bool = true;
    const NAMED_TURNS: bool = true;
    const HELD_Q: bool = false;
    const CONSUMERS: usize = 2;
}

impl WgmmaSchedule for PingPongHeldQ {
    const PING_PONG: bool = true;
    const NAMED_TURNS: bool = false;
    const HELD_Q: bool = true;
    const CONSUMERS: usize = 2;
}

impl WgmmaSchedule for PingPongThree {
    const PING_PONG: bool = true;
    const NAMED_TURNS: bool = true;
    const HELD_Q: bool = false;
    const CONSUMERS: usize = 3;
}

/// Attention forward on Hopper's warpgroup tensor cores (the module documentation has the
/// design).
///
/// The block tiles (128 query rows of one head of one batch) are numbered head by head, each
/// head's from its last query tile to its first (`Work`: for causal the longest first); block `x`
/// computes tiles `x, x + gridDim.x, ...` (one tile per block when the grid has a block per tile,
/// a persistent walk when it has fewer; with the causal mask every other round from its end,
/// `Work::walk`). Thread 0 initialises the barriers. Per tile, the
/// producer warpgroup's thread 0 waits until the consumers released the `Q` buffer's previous
/// tile (the tile before, or at head dim 64 with its two buffers the one before that), copies
/// the `Q` tile into it, then for each KV tile waits for a free stage and copies `K` and `V` into
/// it (TMA, 4-D maps, zeros past the sequences), running ahead into the next tile's stages while
/// the consumers finish this one. Consumer warpgroup `c` (1 or 2) computes rows `64 (c - 1) ..+
/// 64` of the tile: thread `t` of it (warp `w`, `g = (t % 32) / 4`, `q = t % 4`) holds rows `16
/// w + g` and `+ 8`, their scores at keys `8 j + 2 q` and `+ 1` of each KV tile and their output
/// at dims `8 j + 2 q` and `+ 1`. Per KV tile it waits for the stage, issues `S = Q K^T`, updates
/// its rows' running maxima `m` and sums `l` from the scores, rescales its output, packs `P` into
/// the register `A` fragment, issues `O += P V` and releases the stage once that retired (in the
/// order of its [`WgmmaSchedule`]); after its last scores it releases `Q` (with
/// [`PingPongHeldQ`] once its warps loaded their rows of `Q` into registers, at the tile's
/// start). Then it stores `O / l` (16-byte pieces, four pairs transposed within the quad) and,
/// threads `q = 0`, `lse = m ln 2 + ln l` for its rows below `q_len`; a row that sees no key
/// stores zeros and `-inf`.
///
/// Launch: a grid of `1 ..= ceil(q_len / 128) heads batch` blocks along `x`, [`WGMMA_BLOCK`]
/// threads, [`wgmma_shared_bytes`]`(D)` bytes of dynamic shared memory; a compute capability 9.0
/// GPU.
///
/// # Safety
/// * `maps` holds three tensor maps (`Q`, `K`, `V`) of 16 words each, 64-byte aligned, encoded
///   as [`Tensor4d`] maps of the operands (dims `D, seq, heads, batch` with the operands' element
///   strides, box `64, 128, 1, 1`, 128-byte swizzle, zero fill); `q`, `k`, `v` are the operands
///   they describe (the simulator copies through them), 16-byte aligned, every stride a multiple
///   of 8 elements; `kv_heads = heads / group`.
/// * As [`attention_flash`](fn@super::attention_flash) for `o` (contiguous `[batch, q_len,
///   heads, D]`, 4-byte aligned) and `lse` (`[batch, heads, q_len]`).
/// * `scale_log2 > 0` (the softmax takes the maxima of the unscaled scores).
///
/// * `mask_data`, `mask_int`, `mask_float` are what the mask `M` reads ([`MaskArgs`]).
///
/// Instances (`T`, head, schedule, mask): `attention_wgmma_d<D>_<T>` ([`OneTile`], with
/// [`CausalOrNot`]: no mask or the causal one, chosen at run time) for `D` 64, 128 and 256 and
/// `T` bf16 and f16; `attention_wgmma_general_d256_<T>` ([`OneTile`], [`General`]: the
/// ping-pong's consumers spilled with it, past 232 registers with the 128 output accumulators);
/// the ping-pong's `attention_wgmma_pingpong_d<D>_<T>` ([`NoMask`]) and
/// `attention_wgmma_pingpong_causal_d<D>_<T>` ([`Causal`]) for `D` 64, 128 and 256, and
/// `attention_wgmma_pingpong_general_d<D>_<T>` ([`General`]) for `D` 64 and 128, with named
/// turns ([`PingPongNamed`]) but at head dim 128 without a mask and with the general masks
/// ([`PingPong`]'s `mbarrier` turns: there the named ones were level or slower, or not yet
/// timed; at head dim 128 without a mask with `Q` in registers, [`PingPongHeldQ`]).
// Launch bounds `(384, 1)` so that ptxas knows the register budget at entry (`setmaxnreg`).
// Barriers: `forward_barriers`.
#[cfg_attr(
    feature = "attention",
    kernel(
        launch_bounds(384, 1),
        instances(
            attention_wgmma_d64_bf16 = (bf16, D64, OneTile, CausalOrNot),
            attention_wgmma_d128_bf16 = (bf16, D128, OneTile, CausalOrNot),
            attention_wgmma_d64_f16 = (f16, D64, OneTile, CausalOrNot),
            attention_wgmma_d128_f16 = (f16, D128, OneTile, CausalOrNot),
            attention_wgmma_d256_bf16 = (bf16, D256, OneTile, CausalOrNot),
            attention_wgmma_d256_f16 = (f16, D256, OneTile, CausalOrNot),
            attention_wgmma_general_d256_bf16 = (bf16, D256, OneTile, General),
            attention_wgmma_general_d256_f16 = (f16, D256, OneTile, General),
            attention_wgmma_pingpong_d128_bf16 = (bf16, D128, PingPongHeldQ, NoMask),
            attention_wgmma_pingpong_d128_f16 = (f16, D128, PingPongHeldQ, NoMask),
            attention_wgmma_pingpong_general_d64_bf16 = (bf16, D64, PingPong, General),
            attention_wgmma_pingpong_general_d128_bf16 = (bf16, D128, PingPong, General),
            attention_wgmma_pingpong_general_d64_f16 = (f16, D64, PingPong, General),
            attention_wgmma_pingpong_general_d128_f16 = (f16, D128, PingPong, General),
            attention_wgmma_pingpong_d64_bf16 = (bf16, D64, PingPongNamed, NoMask),
            attention_wgmma_pingpong_d64_f16 = (f16, D64, PingPongNamed, NoMask),
            attention_wgmma_pingpong_causal_d64_bf16 = (bf16, D64, PingPongNamed, Causal),
            attention_wgmma_pingpong_causal_d128_bf16 = (bf16, D128, PingPongNamed, Causal),
            attention_wgmma_pingpong_causal_d64_f16 = (f16, D64, PingPongNamed, Causal),
            attention_wgmma_pingpong_causal_d128_f16 = (f16, D128, PingPongNamed, Causal),
            attention_wgmma_pingpong_d256_bf16 = (bf16, D256, PingPongNamed, NoMask),
            attention_wgmma_pingpong_d256_f16 = (f16, D256, PingPongNamed, NoMask),
            attention_wgmma_pingpong_causal_d256_bf16 = (bf16, D256, PingPongNamed, Causal),
            attention_wgmma_pingpong_causal_d256_f16 = (f16, D256, PingPongNamed, Causal),
        ),
        barriers(forward_barriers(S::NAMED_TURNS))
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_wgmma<T: WgmmaElement, H: WgmmaHead, S: WgmmaSchedule, M: Mask>(
    maps: *const u64,
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
    lse: *mut f32,
    q_len: usize,
    kv_len: usize,
    heads: usize,
    group: usize,
    batch: usize,
    q_sb: usize,
    q_ss: usize,
    q_sh: usize,
    k_sb: usize,
    k_ss: usize,
    k_sh: usize,
    v_sb: usize,
    v_ss: usize,
    v_sh: usize,
    scale_log2: f32,
    mask_data: *const i32,
    mask_int: usize,
    mask_float: f32,
) {
    const { assert!(S::CONSUMERS == 2, "attention_wgmma_three runs three consumers") };
    // SAFETY: the kernel's contract.
    unsafe {
        forward::<T, H, S, M>(
            maps, q, k, v, o, lse, q_len, kv_len, heads, group, batch, q_sb, q_ss, q_sh, k_sb, k_ss, k_sh,
            v_sb, v_ss, v_sh, scale_log2, mask_data, mask_int, mask_float,
        )
    }
}

/// [`attention_wgmma`](fn@attention_wgmma) with three consumer warpgroups ([`PingPongThree`]):
/// block tiles of [`WGMMA_THREE_ROWS`] (192) query rows, consumer warpgroup `c` (1 to 3) computing
/// rows `64 (c - 1) ..+ 64`, the producer at [`THREE_PRODUCER_REGISTERS`] and the consumers at
/// [`THREE_CONSUMER_REGISTERS`] registers, a ring of [`wgmma_stages_for`]`(D, 3)` stages; the
/// rest (the walk, the copies, a consumer's work and traffic per KV tile) as there.
///
/// Launch: a grid of `1 ..= ceil(q_len / 192) heads batch` blocks along `x`,
/// [`WGMMA_THREE_BLOCK`] threads, [`wgmma_shared_bytes_for`]`(D, 3)` bytes of dynamic shared
/// memory; a compute capability 9.0 GPU.
///
/// # Safety
/// As [`attention_wgmma`](fn@attention_wgmma), with `Q`'s map's boxes 192 rows.
///
/// Instances: `attention_wgmma_three_d64_<T>` ([`NoMask`]) and
/// `attention_wgmma_three_causal_d64_<T>` ([`Causal`]) for `T` bf16 and f16. The causal
/// instance fits the 160 registers a thread of three consumers may have beside the producer
/// since the mask's keys are compared as constants against each row's bound ([`Mask::row_end`],
/// `online_softmax`); with every key computed into a register it spilled 96 bytes.
// Barriers: as `attention_wgmma`'s named turns, each turn's wait and hand-over a barrier per
// consumer (three ids).
#[cfg_attr(
    feature = "attention",
    kernel(
        launch_bounds(512, 1),
        instances(
            attention_wgmma_three_d64_bf16 = (bf16, D64, PingPongThree, NoMask),
            attention_wgmma_three_d64_f16 = (f16, D64, PingPongThree, NoMask),
            attention_wgmma_three_causal_d64_bf16 = (bf16, D64, PingPongThree, Causal),
            attention_wgmma_three_causal_d64_f16 = (f16, D64, PingPongThree, Causal),
        ),
        barriers(21)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_wgmma_three<T: WgmmaElement, H: WgmmaHead, S: WgmmaSchedule, M: Mask>(
    maps: *const u64,
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
    lse: *mut f32,
    q_len: usize,
    kv_len: usize,
    heads: usize,
    group: usize,
    batch: usize,
    q_sb: usize,
    q_ss: usize,
    q_sh: usize,
    k_sb: usize,
    k_ss: usize,
    k_sh: usize,
    v_sb: usize,
    v_ss: usize,
    v_sh: usize,
    scale_log2: f32,
    mask_data: *const i32,
    mask_int: usize,
    mask_float: f32,
) {
    const {
        assert!(
            S::CONSUMERS == 3 && S::NAMED_TURNS,
            "three consumers take named turns"
        )
    };
    // SAFETY: the kernel's contract.
    unsafe {
        forward::<T, H, S, M>(
            maps, q, k, v, o, lse, q_len, kv_len, heads, group, batch, q_sb, q_ss, q_sh, k_sb, k_ss, k_sh,
            v_sb, v_ss, v_sh, scale_log2, mask_data, mask_int, mask_float,
        )
    }
}

/// The body of [`attention_wgmma`](fn@attention_wgmma) and
/// [`attention_wgmma_three`](fn@attention_wgmma_three), for `S::CONSUMERS` consumer warpgroups.
///
/// # Safety
/// The kernels' contract, launched with their block and shared memory for `S::CONSUMERS`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn forward<T: WgmmaElement, H: WgmmaHead, S: WgmmaSchedule, M: Mask>(
    maps: *const u64,
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
    lse: *mut f32,
    q_len: usize,
    kv_len: usize,
    heads: usize,
    group: usize,
    batch: usize,
    q_sb: usize,
    q_ss: usize,
    q_sh: usize,
    k_sb: usize,
    k_ss: usize,
    k_sh: usize,
    v_sb: usize,
    v_ss: usize,
    v_sh: usize,
    scale_log2: f32,
    mask_data: *const i32,
    mask_int: usize,
    mask_float: f32,
) {
    let d = H::D;
    const {
        assert!(
            H::D % WGMMA_BOX_COLS == 0 && H::D <= 256,
            "whole boxes, registers for D <= 256"
        );
        assert!(
            <H::O as wgmma::Accumulators>::N == H::D,
            "the output's width is D"
        );
        assert!(
            H::KEYS == wgmma_keys(H::D) && <H::S as wgmma::Accumulators>::N == H::KEYS,
            "the scores' width is the tile's keys"
        );
    };
    let boxes = d / WGMMA_BOX_COLS;
    let kv_box = kv_box_bytes(d);
    // Query rows per block tile, and the bytes of one of `Q`'s boxes (those rows of 64 dims).
    let tile_rows = wgmma_block(S::CONSUMERS).0;
    let q_box = q_box_bytes(S::CONSUMERS);
    let tid = thread::thread_idx_x() as usize;
    let wg = tid / WARPGROUP;
    let mask = launch_mask!(M, mask_data, mask_int, mask_float, q_len, kv_len, heads);
    let work = Work {
        keys: H::KEYS,
        rows: tile_rows,
        q_tiles: q_len.div_ceil(tile_rows) as u32,
        heads: heads as u32,
        q_len,
        kv_len,
        mask,
    };
    let (first, stride) = (thread::block_idx_x(), thread::grid_dim_x());
    let total = work.q_tiles * (heads * batch) as u32;

    // SAFETY: every thread, first; the launch gives `wgmma_shared_bytes_for(D, S::CONSUMERS)`:
    // the ring's bytes, then the tail; stages of whole 1024-byte atoms.
    let ring = unsafe {
        Ring::new(
            wgmma_stages_for(d, S::CONSUMERS),
            wgmma_stage_bytes(d),
            (S::CONSUMERS * WARPGROUP / 32) as u32,
        )
    };
    let (q_tile, q_address) = ring.tail();
    // Past `Q`: its barriers (one per buffer), the consumers' two turns (the ping-pong with `mbarrier` turns:
    // `turn(c)` completes a phase when the other consumer's four warps hand consumer `c` the
    // turn; arithmetic, not an array indexed by `c`, which would live in local memory; named
    // turns, and three consumers, leave the two words unused), and `Q`'s releases (a phase when
    // every consumer warp has retired its last scores of a tile, so that the producer may copy
    // the next tile's `Q` over it).
    // With two `Q` buffers ([`wgmma_q_buffers`]) block tile `n` of the walk uses buffer `n % 2`
    // and its barriers' phase `n / 2`: the producer copies tile `n + 1`'s `Q` once tile `n - 1`
    // released the other buffer, under tile `n`'s products.
    let q_buffers = wgmma_q_buffers(d);
    let bars = q_tile.wrapping_add(q_buffers * boxes * q_box).cast::<u64>();
    let q_bar = |i: usize| bars.wrapping_add(i);
    let turn = |c: usize| bars.wrapping_add(q_buffers + c);
    let q_free0 = bars.wrapping_add(q_buffers + 2);
    let q_free = |i: usize| q_free0.wrapping_add(i);
    let q_place = |n: u32| {
        let i = if q_buffers == 2 { (n & 1) as usize } else { 0 };
        let phase = if q_buffers == 2 { (n >> 1) & 1 } else { n & 1 };
        (i, phase)
    };
    if tid == 0 {
        // SAFETY: `8 (2 q_buffers + 2)` bytes past `Q` inside the launch's shared memory;
        // nothing else touches them before the block barrier below.
        unsafe {
            for i in 0..q_buffers {
                mbarrier::init(q_bar(i), 1);
            }
            if !S::NAMED_TURNS {
                mbarrier::init(turn(0), (WARPGROUP / 32) as u32);
                mbarrier::init(turn(1), (WARPGROUP / 32) as u32);
            }
            for i in 0..q_buffers {
                mbarrier::init(q_free(i), (S::CONSUMERS * WARPGROUP / 32) as u32);
            }
        }
        mbarrier::fence_init();
    }
    thread::sync_threads();

    if wg == 0 {
        if S::CONSUMERS == 3 {
            wgmma::setmaxnreg_dec::<THREE_PRODUCER_REGISTERS>();
        } else {
            wgmma::setmaxnreg_dec::<PRODUCER_REGISTERS>();
        }
        if tid != 0 {
            return;
        }
        let tensor =
            |map: usize, data: *const T, len: usize, heads: usize, strides: [usize; 3], box_rows: usize| {
                Tensor4d {
                    map: maps.wrapping_add(16 * map),
                    data,
                    dims: [batch, heads, len, d],
                    strides,
                    box_rows,
                    box_cols: WGMMA_BOX_COLS,
                }
            };
        let kv_heads = heads / group;
        let tq = tensor(0, q, q_len, heads, [q_sb, q_sh, q_ss], tile_rows);
        let tk = tensor(1, k, kv_len, kv_heads, [k_sb, k_sh, k_ss], H::KEYS);
        let tv = tensor(2, v, kv_len, kv_heads, [v_sb, v_sh, v_ss], H::KEYS);
        tma::prefetch_map(tq.map);
        tma::prefetch_map(tk.map);
        tma::prefetch_map(tv.map);
        let mut producer = ring.producer();
        let (mut round, mut n) = (0u32, 0u32);
        while round * stride < total {
            let w = work.walk(round, first, stride);
            round += 1;
            if w >= total {
                continue;
            }
            let tile = work.tile(w);
            // SAFETY: the one producer thread; `Q`'s previous tile released (every consumer's
            // last scores retired) before its copy is overwritten; the barrier expects the
            // `boxes` boxes, each 1024-byte aligned inside the tail; the maps are the kernel's
            // (its contract).
            unsafe {
                let (i, _) = q_place(n);
                if n as usize >= q_buffers {
                    // The buffer's previous tile (`n - q_buffers`) released it: that tile's
                    // phase.
                    mbarrier::wait_parity(q_free(i), q_place(n - q_buffers as u32).1);
                }
                mbarrier::arrive_expect_tx(q_bar(i), (boxes * q_box) as u32);
                for j in 0..boxes {
                    tma::load_4d(
                        q_tile.wrapping_add((i * boxes + j) * q_box).cast::<T>(),
                        &tq,
                        q_bar(i),
                        [
                            tile.b as u32,
                            tile.h as u32,
                            tile.q0 as u32,
                            (j * WGMMA_BOX_COLS) as u32,
                        ],
                    );
                }
            }
            let mut t = tile.first;
            while t < tile.end {
                // SAFETY: the one producer thread; the stage is free and expects `K` and `V`'s
                // `2 boxes` boxes, which these fill, each 1024-byte aligned.
                unsafe {
                    let stage = producer.acquire();
                    for j in 0..boxes {
                        let at = [tile.b, tile.h / group, t * H::KEYS, j * WGMMA_BOX_COLS];
                        stage.load_4d(j * kv_box, &tk, at);
                        stage.load_4d((boxes + j) * kv_box, &tv, at);
                    }
                }
                t = work.next(&tile, t + 1);
            }
            n += 1;
        }
        return;
    }

    if S::CONSUMERS == 3 {
        wgmma::setmaxnreg_inc::<THREE_CONSUMER_REGISTERS>();
    } else {
        wgmma::setmaxnreg_inc::<CONSUMER_REGISTERS>();
    }
    let c = wg - 1;
    let t = tid % WARPGROUP;
    let (w, g, qd) = (t / 32, (t % 32) / 4, t % 4);
    // This consumer's 64 rows of `Q` (8 KiB into each box), per box of 64 dims: the first
    // step's descriptor (the products step along the box themselves).
    let q_desc_of = |i: usize, j: usize| {
        k_major_descriptor(q_address + ((i * boxes + j) * q_box + CONSUMER_ROWS * c * 128) as u32)
    };
    let mut turns = Turns::<S> {
        c,
        mine: turn(c),
        other: turn((c + 1) % 2),
        taken: 0,
        schedule: PhantomData,
    };
    if S::PING_PONG && c == S::CONSUMERS - 1 {
        // Consumer 0 issues first: the last hands it the turn.
        turns.hand_over();
    }
    let mut consumer = ring.consumer();
    // [`PingPongHeldQ`]: `Q` in registers, released at a block tile's start (two boxes at most:
    // 64 registers at head dim 256 would not fit beside its 128 output accumulators).
    let q_regs = S::HELD_Q && H::D <= 128;
    let (mut round, mut n) = (0u32, 0u32);
    while round * stride < total {
        let tile_index = work.walk(round, first, stride);
        round += 1;
        if tile_index >= total {
            continue;
        }
        let tile = work.tile(tile_index);
        let rows = [
            tile.q0 + CONSUMER_ROWS * c + 16 * w + g,
            tile.q0 + CONSUMER_ROWS * c + 16 * w + g + 8,
        ];
        // This consumer's rows as the mask is asked about them (a row past `q_len`, whose
        // output is not stored, as the last row).
        let first_row = (tile.q0 + CONSUMER_ROWS * c).min(q_len - 1);
        let own_rows = first_row..(tile.q0 + CONSUMER_ROWS * (c + 1)).min(q_len).max(first_row + 1);
        let mask_rows = rows.map(|i| i.min(q_len - 1));
        let rows_limits = Limits {
            // The mask as each of the thread's rows sees it (its per-row work done once per
            // block tile), and the keys all this consumer's rows keep (tiles inside them need no
            // test).
            masks: mask_rows.map(|i| mask.row(tile.b, tile.h, i)),
            full: {
                let full = mask.full_keys(tile.b, tile.h, own_rows);
                (full.start as u32, full.end as u32)
            },
            b: tile.b,
            h: tile.h,
            rows: mask_rows,
            kv_len: kv_len as u32,
            qd,
            scale_log2,
            scale: scale_log2 * (1.0 / math::LOG2_E),
            score_mod: M::SCORE_MOD && mask.modifies_scores(),
        };
        let mut s = <H::S as wgmma::Accumulators>::zeroed();
        let mut acc = <H::O as wgmma::Accumulators>::zeroed();
        let (mut m, mut l) = ([f32::NEG_INFINITY; 2], [0.0f32; 2]);
        // SAFETY: `Q`'s barrier, initialised; its phase completes with this tile's copies.
        let (qi, q_phase) = q_place(n);
        let q_desc = |j: usize| q_desc_of(qi, j);
        unsafe { mbarrier::wait_parity(q_bar(qi), q_phase) };
        let mut qa = [0u32; 32];
        if q_regs {
            // This warp's 16 rows of `Q` into registers (the `A` fragment of each step of 16
            // dims, by `ldmatrix` from the swizzled boxes), then `Q` released: the producer
            // copies the next block tile's `Q` under this one's products.
            let lane = t % 32;
            let r = CONSUMER_ROWS * c + 16 * w + lane % 16;
            unroll_8!(2, |j| {
                if j < boxes {
                    unroll_8!(4, |st| {
                        let at =
                            (qi * boxes + j) * q_box + tma::swizzle_128b(r * 128 + (2 * st + lane / 16) * 16);
                        // SAFETY: 16 bytes of row `r` of box `j` of `Q`, which has landed (the
                        // wait above) and stays until this consumer's warps release it below;
                        // every lane of the warp.
                        let v = unsafe { mma::ldmatrix_x4(q_tile.wrapping_add(at).cast::<u16>()) };
                        unroll_8!(4, |e| {
                            qa[16 * j + 4 * st + e] = v[e];
                        });
                    });
                }
            });
            // SAFETY: every lane of the consumer warps, `Q` read into registers; `q_free`
            // counts the consumer warps.
            unsafe { mbarrier::warp_arrive(q_free(qi)) };
        }
        if S::PING_PONG {
            if tile.first < tile.end {
                // The first tile: its scores and probabilities; the output is still zero.
                // SAFETY: every thread of the consumer warps; each stage released once below.
                let mut stage = unsafe { consumer.wait() };
                turns.take();
                // SAFETY: the whole warpgroup is here; `Q` and the stage have landed and stay
                // until the wait.
                unsafe { s = scores_q::<T, H>(s, q_regs, &qa, &q_desc, stage.address(0), boxes) };
                turns.hand_over();
                // SAFETY: the whole warpgroup, the scores in flight.
                s = unsafe { wgmma::wait_accumulators::<0, _>(s) };
                online_softmax::<_, H>(&mut s, &mut m, &mut l, tile.first, &rows_limits);
                let mut p = pack_probabilities::<T, H>(&s);
                let mut kt = work.next(&tile, tile.first + 1);
                while kt < tile.end {
                    // Tile `kt`'s scores and tile `kt - 1`'s `P V` in one turn; the softmax of
                    // tile `kt` runs while `P V` (and the other consumer's products) are in
                    // flight.
                    // SAFETY: as for tile 0; the next stage is released once below.
                    let next = unsafe { consumer.wait() };
                    turns.take();
                    // SAFETY: the whole warpgroup; both stages' tiles have landed and stay until
                    // the waits that retire their products (the previous stage is released after
                    // the second); `p` and the output accumulators are not touched in flight.
                    unsafe {
                        s = scores_q::<T, H>(s, q_regs, &qa, &q_desc, next.address(0), boxes);
                        acc = H::pv::<T>(
                            acc,
                            p,
                            n_major_descriptor(stage.address(boxes * kv_box), kv_box),
                            true,
                        );
                    }
                    turns.hand_over();
                    // SAFETY: the whole warpgroup, both groups in flight: the older (the scores)
                    // retires.
                    s = unsafe { wgmma::wait_accumulators::<1, _>(s) };
                    let rescale = online_softmax::<_, H>(&mut s, &mut m, &mut l, kt, &rows_limits);
                    // SAFETY: the whole warpgroup, the previous tile's `P V` in flight.
                    acc = unsafe { wgmma::wait_accumulators::<0, _>(acc) };
                    // SAFETY: its `P V` retired.
                    unsafe { consumer.release(&stage) };
                    rescale_output::<H>(&mut acc, rescale);
                    p = pack_probabilities::<T, H>(&s);
                    stage = next;
                    kt = work.next(&tile, kt + 1);
                }
                if !q_regs {
                    // Every scores product of the tile retired: `Q` may be overwritten.
                    // SAFETY: every lane of the consumer warps; `q_free` counts them.
                    unsafe { mbarrier::warp_arrive(q_free(qi)) };
                }
                turns.take();
                // SAFETY: as above, for the last tile's `P V`.
                unsafe {
                    acc = H::pv::<T>(
                        acc,
                        p,
                        n_major_descriptor(stage.address(boxes * kv_box), kv_box),
                        true,
                    )
                };
                turns.hand_over();
                // SAFETY: as above.
                unsafe {
                    acc = wgmma::wait_accumulators::<0, _>(acc);
                    consumer.release(&stage);
                }
            } else if !q_regs {
                // SAFETY: as above (no KV tile: `Q` was not read).
                unsafe { mbarrier::warp_arrive(q_free(qi)) };
            }
        } else {
            // One tile at a time: scores, softmax, `P V`, each waited for.
            let mut kt = tile.first;
            while kt < tile.end {
                // SAFETY: every thread of the consumer warps; released once below.
                let stage = unsafe { consumer.wait() };
                // SAFETY: the whole warpgroup is here; `Q` and the stage have landed and stay
                // until the waits below.
                unsafe {
                    s = scores_q::<T, H>(s, q_regs, &qa, &q_desc, stage.address(0), boxes);
                    s = wgmma::wait_accumulators::<0, _>(s);
                }
                let rescale = online_softmax::<_, H>(&mut s, &mut m, &mut l, kt, &rows_limits);
                rescale_output::<H>(&mut acc, rescale);
                let p = pack_probabilities::<T, H>(&s);
                // SAFETY: as above; the output accumulators are retired (the last wait).
                unsafe {
                    acc = H::pv::<T>(
                        acc,
                        p,
                        n_major_descriptor(stage.address(boxes * kv_box), kv_box),
                        true,
                    );
                    acc = wgmma::wait_accumulators::<0, _>(acc);
                    consumer.release(&stage);
                }
                kt = work.next(&tile, kt + 1);
            }
            // SAFETY: every lane of the consumer warps, every scores product retired; `q_free`
            // counts the consumer warps.
            unsafe { mbarrier::warp_arrive(q_free(qi)) };
        }
        // The general masks' instances keep 4-byte pairs: their consumers have no registers to
        // spare for the exchanges (ptxas spilled 40 bytes at head dim 128).
        let pieces = !M::SCORE_MOD;
        store_rows::<T, H>(
            o,
            lse,
            &acc,
            (m, l),
            rows,
            (tile.b, tile.h),
            (q_len, heads),
            (qd, pieces),
        );
        n += 1;
    }
}

/// Where one block tile of the persistent walk sits: `Q` rows `q0 ..+ 128` of head `h` of batch
/// `b`, and the KV tiles it visits: from `first` (the first the mask keeps) on, below `end`.
struct Tile {
    q0: usize,
    h: usize,
    b: usize,
    first: usize,
    end: usize,
}

/// The block tiles of a launch: tile `w` is query tile `q_tiles - 1 - w % q_tiles` (the last,
/// for causal the longest, first) of head `(w / q_tiles) % heads` of batch `w / (q_tiles heads)`.
/// The query tiles of one head run next to one another, so that the blocks running at once read
/// the `K` and `V` of a few heads, which stay in L2 (numbered by query tile first, every head at
/// once, the blocks on the H200 read 132 heads' `K` and `V` and ran 10-17% slower at a0c9d50).
struct Work<M> {
    /// Keys per KV tile ([`WgmmaHead::KEYS`]).
    keys: usize,
    /// Query rows per block tile (64 per consumer).
    rows: usize,
    q_tiles: u32,
    heads: u32,
    q_len: usize,
    kv_len: usize,
    mask: M,
}

impl<M: Mask> Work<M> {
    /// The block tile of round `round` of block `first`'s walk on a grid of `stride` blocks
    /// (past the last tile where the last round is short): round `r` covers tiles `r stride ..+
    /// stride`, block `first` taking the `first`-th of them, or with the causal mask (whose block
    /// tiles differ in length: the longest of each head first) the `first`-th from the round's
    /// end in odd rounds, a snake, so that a block that took a long tile takes a short one
    /// next. With a plain walk a block's tiles sat at one or two places in their heads (132
    /// blocks, 8 tiles a head at 1k keys causal: some blocks took 8 and 4 KV tiles in turn,
    /// others 5 and 1).
    #[inline(always)]
    fn walk(&self, round: u32, first: u32, stride: u32) -> u32 {
        let base = round * stride;
        // The general masks' instances walk plainly (the plan gives them a block per tile, and
        // their consumers have no registers to spare).
        if M::MASKS && !M::SCORE_MOD && round % 2 == 1 {
            base + (stride - 1 - first)
        } else {
            base + first
        }
    }

    /// Block tile `w` (`w < q_tiles * heads * batch`). In 32-bit arithmetic (every count here is
    /// below `2^31`, the grid's limit): the producer keeps 40 registers, and 64-bit division
    /// spilled there.
    #[inline(always)]
    fn tile(&self, w: u32) -> Tile {
        let head = w / self.q_tiles;
        let b = head / self.heads;
        let q0 = (self.q_tiles - 1 - (w - head * self.q_tiles)) as usize * self.rows;
        let (b, h) = (b as usize, (head - b * self.heads) as usize);
        // The mask's keys for the tile's rows bound the tiles it visits (producer and consumers).
        let keys = self.mask.keys(b, h, q0..(q0 + self.rows).min(self.q_len));
        let mut tile = Tile {
            q0,
            h,
            b,
            first: 0,
            end: keys.end.min(self.kv_len).div_ceil(self.keys),
        };
        tile.first = self.next(&tile, keys.start / self.keys);
        tile
    }

    /// The first KV tile at or after `t` that the mask does not empty for the block tile's rows
    /// (`tile.end` if none): the producer and the consumers step through the same tiles.
    #[inline(always)]
    fn next(&self, tile: &Tile, mut t: usize) -> usize {
        if M::MASKS && !M::CONTIGUOUS {
            let rows = tile.q0..(tile.q0 + self.rows).min(self.q_len);
            while t < tile.end
                && self.mask.tile(
                    tile.b,
                    tile.h,
                    rows.clone(),
                    t * self.keys..(t * self.keys + self.keys).min(self.kv_len),
                ) == TileMask::Empty
            {
                t += 1;
            }
        }
        t.min(tile.end)
    }
}

/// A consumer thread's epilogue for one block tile: its two rows' output `acc / l` (with
/// `pieces`, 16-byte pieces after a transpose within the quad; else 4-byte pairs) and, threads
/// `q = 0`, `lse = m ln 2 + ln l`, for the rows below `q_len`; a row that saw no key stores zeros
/// and `-inf`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn store_rows<T: WgmmaElement, H: WgmmaHead>(
    o: *mut T,
    lse: *mut f32,
    acc: &H::O,
    (m, l): ([f32; 2], [f32; 2]),
    rows: [usize; 2],
    (b, h): (usize, usize),
    (q_len, heads): (usize, usize),
    (qd, pieces): (usize, bool),
) {
    let d = H::D;
    let out = o.cast::<u32>();
    unroll_8!(2, |hh| {
        let total = l[hh] + warp::shfl_xor(l[hh], 1);
        let total = total + warp::shfl_xor(total, 2);
        let i = rows[hh];
        // A row that saw no key: output 0 (not 0 / 0) and log-sum-exp -inf.
        let inv = if total > 0.0 { 1.0 / total } else { 0.0 };
        // Pair `j` of the row: dims `8 j + 2 q` and `+ 1`, packed.
        let pair = |j: usize| T::pack([acc[4 * j + 2 * hh] * inv, acc[4 * j + 2 * hh + 1] * inv]);
        if !pieces {
            if i < q_len {
                let row = ((b * q_len + i) * heads + h) * d;
                unroll_8!(8, |hi| {
                    unroll_8!(8, |lo| {
                        let j = 8 * hi + lo;
                        if j < H::D / 8 {
                            // SAFETY: dims `8 j + 2 q ..+ 2 < D` of row `(b, i, h)` of the
                            // contiguous output, 4-byte aligned (aligned base, even offsets).
                            unsafe { mem::store(out, (row + 8 * j + 2 * qd) / 2, pair(j)) };
                        }
                    });
                });
            }
        } else {
            // Row `(b, i, h)` in 16-byte pieces (every row of the contiguous output starts on one):
            // a warp's store covers whole 32-byte sectors (the 4-byte pairs used half of each, and
            // four times the stores held the consumer: ncu and the cycle counts of the
            // twenty-third round). The exchanges run in every lane, the stores only for rows
            // below `q_len`.
            let row = ((b * q_len + i.min(q_len - 1)) * heads + h) * d / 8;
            // SAFETY: with `i < q_len`, row `(b, i, h)` of the contiguous output: `D / 2` words
            // (`D / 8` pairs, a multiple of 4 with `D` a multiple of 64), 16-byte aligned (the
            // plan's aligned output).
            unsafe { store_row_pieces(out.wrapping_add(4 * row), H::D / 8, pair, qd, i < q_len) };
        }
        if i < q_len && qd == 0 {
            let out = if total > 0.0 {
                m[hh] * math::LN_2 + math::ln(total)
            } else {
                f32::NEG_INFINITY
            };
            // SAFETY: `i < q_len`, `h < heads`, `b < batch`.
            unsafe { mem::store(lse, (b * heads + h) * q_len + i, out) };
        }
    });
}

/// Stores one row of `pairs` packed pairs (`pair(j)`: dims `8 j + 2 q` and `+ 1`, this lane `q`
/// of its quad) in 16-byte pieces: four pairs `j0 ..+ 4` (dims `8 j0 ..+ 32`) at a time,
/// transposed within the quad (two exchanges of two words each: lanes `q` and `q ^ 1`, then `q ^
/// 2`), so that lane `q` holds the four pairs of dims `8 (j0 + q) ..+ 8` and stores them as one
/// 16-byte piece: a warp's store covers whole 32-byte sectors where 4-byte pairs used half of
/// each. Every lane of the warp calls it (the exchanges are shuffles); only lanes with `store`
/// write. The forward's epilogue ([`store_rows`]) and the backward's gradients use it.
///
/// # Safety
/// With `store`, `row` points to `4 pairs` writable words (the row's `8 pairs` elements),
/// 16-byte aligned, `pairs` a multiple of 4.
#[inline(always)]
pub(super) unsafe fn store_row_pieces(
    row: *mut u32,
    pairs: usize,
    pair: impl Fn(usize) -> u32,
    qd: usize,
    store: bool,
) {
    let (bit0, bit1) = (qd & 1 != 0, qd & 2 != 0);
    unroll_8!(2, |hi| {
        unroll_8!(4, |lo| {
            let j0 = 4 * (4 * hi + lo);
            if j0 < pairs {
                let mut v = [pair(j0), pair(j0 + 1), pair(j0 + 2), pair(j0 + 3)];
                quad_exchange(&mut v, (0, 1), 1, bit0);
                quad_exchange(&mut v, (2, 3), 1, bit0);
                quad_exchange(&mut v, (0, 2), 2, bit1);
                quad_exchange(&mut v, (1, 3), 2, bit1);
                if store {
                    // SAFETY: words `4 (j0 + q) ..+ 4 <= 4 pairs` of the row, 16-byte aligned
                    // (the contract).
                    unsafe { vector::store::<u32, 4>(row, 4 * (j0 + qd), v) };
                }
            }
        });
    });
}

/// One step of a 4 x 4 transpose of words across a quad: lanes `q` and `q ^ lanes` trade `v[b]`
/// of the lane whose `upper` bit is clear for `v[a]` of the lane whose bit is set (`upper`: this
/// lane's bit). Every lane of the warp calls it (a shuffle); `a` and `b` are constants where it is
/// inlined, so `v` stays in registers.
#[inline(always)]
fn quad_exchange(v: &mut [u32; 4], (a, b): (usize, usize), lanes: u32, upper: bool) {
    let r = warp::shfl_xor_u32(if upper { v[a] } else { v[b] }, lanes);
    if upper {
        v[a] = r;
    } else {
        v[b] = r;
    }
}

/// A consumer's side of the ping-pong. Every consumer issues (visited KV tiles + 1) times (the
/// first scores, one pair of products per later tile, the last `P V`), taking the turn before
/// and handing it to the next (`c + 1`, the last to 0) after each; the last consumer hands
/// consumer 0 the first turn at the start.
///
/// * `mbarrier` turns ([`PingPong`]): this consumer's turn barrier and the other's, and the
///   turns it has taken; a hand-over is lane 0 of each of its warps arriving on the other's
///   barrier (four arrivals a phase), so neither barrier is ever two phases ahead of its
///   consumer's parity wait.
/// * Named turns ([`PingPongNamed`], [`PingPongThree`], [`barrier`]): consumer `c`'s turn is
///   barrier `1 + c` of 256 threads, which completes when this consumer's 128 threads wait there
///   ([`Turns::take`]) and the previous consumer's 128 have counted in without waiting
///   ([`Turns::hand_over`]): FlashAttention-3's warp-scheduler barriers, the hardware's, where
///   an `mbarrier` turn is a shared-memory word and a polling loop. The previous consumer counts
///   in again only after a whole round of turns, which passes through this consumer's wait, so
///   no consumer counts itself in twice at one completion. The last hand-over of a block is
///   never taken: the barrier is left part-counted when the block exits. The `mbarrier` turns
///   are for two consumers only.
struct Turns<S> {
    /// This consumer (0 to `S::CONSUMERS - 1`; each named call picks its barrier's id as an
    /// immediate by a branch on it).
    c: usize,
    /// This consumer's `mbarrier` turn.
    mine: *mut u64,
    /// The other consumer's.
    other: *mut u64,
    /// Turns taken on `mine`.
    taken: u32,
    /// Which turns: [`WgmmaSchedule::NAMED_TURNS`].
    schedule: PhantomData<S>,
}

/// Threads at a named turn's barrier: the waiting consumer and the one handing it the turn.
const TURN_THREADS: u32 = 2 * WARPGROUP as u32;

impl<S: WgmmaSchedule> Turns<S> {
    /// Waits for this consumer's next turn (the previous consumer's hand-over): the next phase
    /// of its `mbarrier`, or named barrier `1 + c`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn take(&mut self) {
        if S::NAMED_TURNS {
            // SAFETY: every thread of this consumer's warps calls it; the barrier counts them
            // and the other consumer's, which counts itself in once per turn (the turns
            // alternate: it hands over again only after its own turn, which follows this one).
            unsafe {
                if self.c == 0 {
                    barrier::sync(1, TURN_THREADS)
                } else if S::CONSUMERS == 2 || self.c == 1 {
                    barrier::sync(2, TURN_THREADS)
                } else {
                    barrier::sync(3, TURN_THREADS)
                }
            }
        } else {
            // SAFETY: an initialised barrier of the block; its phases complete in order, at
            // most one ahead of this consumer (the other waits for this one's hand-over in
            // between).
            unsafe { mbarrier::wait_parity(self.mine, self.taken & 1) };
            self.taken += 1;
        }
    }

    /// Hands the turn to the next consumer.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn hand_over(&self) {
        if S::NAMED_TURNS {
            // SAFETY: every thread of this consumer's warps, at its turn's end.
            unsafe {
                if self.c == 0 {
                    barrier::arrive(2, TURN_THREADS)
                } else if S::CONSUMERS == 2 || self.c == 2 {
                    barrier::arrive(1, TURN_THREADS)
                } else {
                    barrier::arrive(3, TURN_THREADS)
                }
            }
        } else {
            // SAFETY: every lane of this consumer's warps calls it at its turn's end; the other
            // consumer's barrier counts them.
            unsafe { mbarrier::warp_arrive(self.other) };
        }
    }
}

/// What the online softmax of a consumer thread's two rows needs: the mask as each row sees it,
/// the keys its consumer's 64 rows all keep, the block tile's batch and head, the thread's two
/// rows (clamped below `q_len`), the keys, the thread's place in its quad and the scale (times
/// `log2(e)`, and as given).
struct Limits<M> {
    masks: [M; 2],
    full: (u32, u32),
    b: usize,
    h: usize,
    rows: [usize; 2],
    kv_len: u32,
    qd: usize,
    scale_log2: f32,
    scale: f32,
    /// `M::SCORE_MOD` and the mask modifies this call's scores.
    score_mod: bool,
}

/// `S = Q K^T` of one KV tile issued (not waited for): `boxes` groups of four steps of 16 dims,
/// the `K` tile at shared address `k_tile` (its `H::KEYS` rows as `B^T`, one 64-dim box after
/// another).
///
/// # Safety
/// As [`WgmmaHead::scores`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn scores<T: WgmmaElement, H: WgmmaHead>(
    mut s: H::S,
    q_desc: &impl Fn(usize) -> u64,
    k_tile: u32,
    boxes: usize,
) -> H::S {
    for j in 0..boxes {
        let k_desc = k_major_descriptor(k_tile + (j * kv_box_bytes(H::D)) as u32);
        // SAFETY: forwarded contract.
        s = unsafe { H::scores::<T>(s, q_desc(j), k_desc, j > 0) };
    }
    s
}

/// [`scores`], or with `q_regs` the same products with `Q` from this thread's registers `qa`
/// (16 per 64-dim box, [`WgmmaElement::scores_rk`]).
///
/// # Safety
/// As [`WgmmaHead::scores`]; with `q_regs`, `qa` holds the consumer's `Q` fragment.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn scores_q<T: WgmmaElement, H: WgmmaHead>(
    mut s: H::S,
    q_regs: bool,
    qa: &[u32; 32],
    q_desc: &impl Fn(usize) -> u64,
    k_tile: u32,
    boxes: usize,
) -> H::S {
    if !q_regs {
        // SAFETY: forwarded contract.
        return unsafe { scores::<T, H>(s, q_desc, k_tile, boxes) };
    }
    for j in 0..boxes.min(2) {
        let k_desc = k_major_descriptor(k_tile + (j * kv_box_bytes(H::D)) as u32);
        let a: [u32; 16] = core::array::from_fn(|e| qa[16 * j + e]);
        // SAFETY: forwarded contract.
        s = unsafe { H::scores_rk::<T>(s, a, k_desc, j > 0) };
    }
    s
}

/// The descriptor of the first step of 16 dims of the K-major tile (`Q`'s rows or `K`'s keys)
/// starting at shared address `start` (8-row groups 1024 bytes apart: `SBO`; `LBO` unused):
/// [`crate::gpu::tile::k_major_descriptors`]' first. The backward's too.
#[inline(always)]
pub(super) fn k_major_descriptor(start: u32) -> u64 {
    wgmma::desc_sw128(start, 16, 1024)
}

/// The descriptor of the first step of 16 rows of an N-major tile (`V`'s keys; the backward's
/// `dO`, `Q` and `K`) at shared address `start` (the products step it by 16 rows, 2048 bytes,
/// themselves): its 64-dim boxes `box_bytes` apart (`LBO`), 8-row groups 1024 bytes (`SBO`).
#[inline(always)]
pub(super) fn n_major_descriptor(start: u32, box_bytes: usize) -> u64 {
    wgmma::desc_sw128(start, box_bytes as u32, 1024)
}

/// The online softmax of one tile's scores `s` (this thread's 64 of its two rows: accumulator
/// `i` is row `(i / 2) % 2`, key `8 (i / 4) + 2 q + i % 2` of tile `kt`), in place: masked
/// where needed, the running maxima `m` (of the scaled scores, in units of `log2`) and sums `l`
/// updated, `s` replaced by the probabilities relative to the new maxima. Returns each row's
/// factor for the output accumulated so far.
///
/// The maxima are taken of the unscaled scores, which the scale (above zero: the host plan's
/// rule) does not reorder, so that each probability is one `fma` (the score times `scale *
/// log2(e)` minus the scaled maximum) and one `ex2`. One instruction per maximum (`max.NaN`,
/// NaN kept; the sign of a zero maximum does not matter to what is subtracted from it) and per
/// exponential (`ex2.approx.ftz`: every exponent here is at most 0, and a probability below
/// `2^-126` flushed to 0 is far below any tolerance): the softmax runs between the products,
/// its instruction count on the critical path of a consumer.
#[inline(always)]
fn online_softmax<M: Mask, H: WgmmaHead>(
    s: &mut H::S,
    m: &mut [f32; 2],
    l: &mut [f32; 2],
    kt: usize,
    r: &Limits<M>,
) -> [f32; 2] {
    // Keys in 32 bits (below 2^31, the grid's limit): a 64-bit comparison per score is two
    // instructions and two registers.
    let key0 = (kt * H::KEYS) as u32;
    let keys = H::KEYS as u32;
    // Groups of 32 keys: four of a 128-key tile, two of a 64-key one.
    let groups = H::KEYS / 32;
    // Tiles the mask keeps in part for this consumer's rows, and the ragged last tile, are tested
    // element by element.
    let masked = key0 + keys > r.kv_len || (M::MASKS && !(key0 >= r.full.0 && key0 + keys <= r.full.1));
    let last = r.kv_len - 1;
    // With a score modification the scores become `score(s * scale) log2(e)`, taken as they are.
    let factor = if r.score_mod { 1.0 } else { r.scale_log2 };
    // The element `i` of thread `qd`'s row `hh`, and its key, for the passes below.
    let at = |hh: usize, hi: usize, lo: usize, e: usize| {
        (
            4 * (4 * hi + lo) + 2 * hh + e,
            key0 + (8 * (4 * hi + lo) + 2 * r.qd + e) as u32,
        )
    };
    // Separate passes (the score modification, then the mask), each behind one uniform branch,
    // so that the code of each is written out once, not once per combination. The mask and the
    // score are asked about keys inside the sequence only (the score of a key past `kv_len` as
    // the last key's, then dropped): they may read memory by key.
    let masks = &r.masks;
    if r.score_mod {
        unroll_8!(2, |hh| {
            unroll_8!(groups, |hi| {
                unroll_8!(4, |lo| {
                    unroll_8!(2, |e| {
                        let (i, key) = at(hh, hi, lo, e);
                        let (row, key) = (r.rows[hh], key.min(last) as usize);
                        s[i] = masks[hh].score(s[i] * r.scale, r.b, r.h, row, key) * math::LOG2_E;
                    });
                });
            });
        });
    }
    // The keys each row keeps below one bound (a mask that says [`Mask::row_end`]: its, inside
    // the sequence), or `None`: the keys computed and tested one by one. Without a mask too
    // (`NoMask` says no bound; the ragged tail): the sequence's end as a bound there changed the
    // no-mask instances' loop and cost head dim 128's ping-pong 1.3% at 4x4096x16x128 (derived:
    // sums of the runs in b3e31ce-fwd-three-causal-ab-{main,final}-{1,2}.jsonl; BENCHMARKS.md,
    // twenty-sixth round).
    let ends = masks.map(|mk| mk.row_end().map(|end| end.min(r.kv_len)));
    if let (true, [Some(end0), Some(end1)]) = (masked, ends) {
        // Key `key0 + 2 q + o` (`o` the element's offset, a constant where unrolled) against the
        // row's bound less `key0 + 2 q`, once per row: a comparison with a constant per key, no
        // register per key (computing every key spilled the three consumers' causal instance:
        // 96 bytes).
        let base = key0 + 2 * r.qd as u32;
        let bounds = [end0, end1].map(|end| end as i32 - base as i32);
        unroll_8!(2, |hh| {
            unroll_8!(groups, |hi| {
                unroll_8!(4, |lo| {
                    unroll_8!(2, |e| {
                        let offset = (8 * (4 * hi + lo) + e) as i32;
                        if offset >= bounds[hh] {
                            s[at(hh, hi, lo, e).0] = f32::NEG_INFINITY;
                        }
                    });
                });
            });
        });
    } else if masked {
        unroll_8!(2, |hh| {
            unroll_8!(groups, |hi| {
                unroll_8!(4, |lo| {
                    unroll_8!(2, |e| {
                        let (i, key) = at(hh, hi, lo, e);
                        let row = r.rows[hh];
                        let keep =
                            key < r.kv_len && (!M::MASKS || masks[hh].keep(r.b, r.h, row, key as usize));
                        if !keep {
                            s[i] = f32::NEG_INFINITY;
                        }
                    });
                });
            });
        });
    }
    let mut rescale = [0.0f32; 2];
    unroll_8!(2, |hh| {
        let mut mx = f32::NEG_INFINITY;
        unroll_8!(groups, |hi| {
            unroll_8!(4, |lo| {
                unroll_8!(2, |e| {
                    mx = math::max_nan_fast(mx, s[at(hh, hi, lo, e).0]);
                });
            });
        });
        // The row's scores of the tile are spread over the 4 threads of the quad.
        mx = math::max_nan_fast(mx, warp::shfl_xor(mx, 1));
        mx = math::max_nan_fast(mx, warp::shfl_xor(mx, 2));
        let m_new = math::max_nan_fast(m[hh], mx * factor);
        // A row that has seen no key yet keeps weights 0 (not `-inf - -inf`).
        let base = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
        rescale[hh] = math::exp2_ftz(m[hh] - base);
        m[hh] = m_new;
        let mut sum = 0.0f32;
        unroll_8!(groups, |hi| {
            unroll_8!(4, |lo| {
                unroll_8!(2, |e| {
                    let i = 4 * (4 * hi + lo) + 2 * hh + e;
                    let p = math::exp2_ftz(math::fma(s[i], factor, -base));
                    s[i] = p;
                    sum += p;
                });
            });
        });
        l[hh] = math::fma(l[hh], rescale[hh], sum);
    });
    rescale
}

/// The output accumulators of row `hh` scaled by `rescale[hh]` (accumulators `4 j + 2 hh` and
/// `+ 1` for each pair `j` of columns); skipped by a warp none of whose rows' maxima moved (every
/// factor exactly 1, as most tiles' are once a row has seen a few), a warp-uniform branch that
/// saves `D / 2` multiplications per thread.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn rescale_output<H: WgmmaHead>(acc: &mut H::O, rescale: [f32; 2]) {
    if !warp::any(rescale[0] != 1.0 || rescale[1] != 1.0) {
        return;
    }
    unroll_8!(2, |hh| {
        unroll_8!(8, |hi| {
            unroll_8!(8, |lo| {
                let j = 8 * hi + lo;
                if j < H::D / 8 {
                    acc[4 * j + 2 * hh] *= rescale[hh];
                    acc[4 * j + 2 * hh + 1] *= rescale[hh];
                }
            });
        });
    });
}

/// The probabilities `s` as the register `A` fragment of `P V`: step `j` (keys `16 j ..+ 16`)
/// is accumulators `8 j ..+ 8`, packed pairwise to `T` (the first in the low half).
#[inline(always)]
fn pack_probabilities<T: WgmmaElement, H: WgmmaHead>(s: &H::S) -> H::P {
    let mut p = H::P::default();
    unroll_8!(H::KEYS / 16, |j| {
        unroll_8!(4, |r| {
            p[4 * j + r] = T::pack([s[8 * j + 2 * r], s[8 * j + 2 * r + 1]]);
        });
    });
    p
}

/// The one-tile schedule's mask: none or the causal one, chosen at run time (the kind in the low
/// bits of `args.int`, as [`General`] reads it; any other kind is no mask). The schedule is the
/// ladder's step between the `mma.sync` rung and the ping-pong, and runs no other mask: one
/// instance per head dim and type, and the register budget of the ping-pong's consumers is not
/// its.
#[derive(Clone, Copy, Debug)]
pub struct CausalOrNot {
    causal: Causal,
    on: bool,
    kv_len: usize,
}

impl Mask for CausalOrNot {
    const CONTIGUOUS: bool = true;
    #[inline(always)]
    fn new(args: MaskArgs, shape: MaskShape) -> Self {
        CausalOrNot {
            causal: Causal::new(args, shape),
            on: args.int & ((1 << General::KIND_BITS) - 1) == Shipped::Causal as usize,
            kv_len: shape.kv_len,
        }
    }
    #[inline(always)]
    fn row(&self, b: usize, h: usize, q: usize) -> Self {
        CausalOrNot {
            causal: self.causal.row(b, h, q),
            ..*self
        }
    }
    #[inline(always)]
    fn row_end(&self) -> Option<u32> {
        if self.on {
            self.causal.row_end()
        } else {
            Some(self.kv_len as u32)
        }
    }
    #[inline(always)]
    fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
        !self.on || self.causal.keep(b, h, q, kv)
    }
    #[inline(always)]
    fn keys(&self, b: usize, h: usize, q: core::ops::Range<usize>) -> core::ops::Range<usize> {
        if self.on {
            self.causal.keys(b, h, q)
        } else {
            0..self.kv_len
        }
    }
    #[inline(always)]
    fn full_keys(&self, b: usize, h: usize, q: core::ops::Range<usize>) -> core::ops::Range<usize> {
        if self.on {
            self.causal.full_keys(b, h, q)
        } else {
            0..self.kv_len
        }
    }
    #[inline(always)]
    fn tile(&self, b: usize, h: usize, q: core::ops::Range<usize>, kv: core::ops::Range<usize>) -> TileMask {
        if self.on {
            self.causal.tile(b, h, q, kv)
        } else {
            TileMask::Full
        }
    }
}
