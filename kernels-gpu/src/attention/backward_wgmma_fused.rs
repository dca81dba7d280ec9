//! The Hopper backward in one kernel (sm_90a only), FlashAttention-3's: a block per 128 keys
//! computes `dK` and `dV` as [`attention_bwd_wgmma_dkdv`](fn@super::backward_wgmma::attention_bwd_wgmma_dkdv)
//! does, and each query tile's share of `dQ` (`dS K` over the block's keys) is **added to an f32
//! buffer by the copy engine's bulk reductions**; a small kernel then scales and rounds the buffer to `dq`
//! ([`attention_bwd_wgmma_dq_convert`](fn@attention_bwd_wgmma_dq_convert), FlashAttention-3's
//! postprocess). `S` and `dP` are computed once: five products per tile where the two-kernel rung
//! ([`super::backward_wgmma`]) runs seven. The order of the additions into `dQ` varies from run to
//! run, so the bits of `dq` may too: the host runs this only when asked for and never for a
//! deterministic call (`AttentionOptions::deterministic`).
//!
//! # Design
//! * **Block**: as the `dK`/`dV` kernel: a producer warpgroup (`setmaxnreg` down to
//!   [`BWD_PRODUCER_REGISTERS`], thread 0 issues every TMA copy) and two consumer warpgroups
//!   (`setmaxnreg` up to [`BWD_CONSUMER_REGISTERS`], 240) of 64 keys each; `K` and `V` (128 x
//!   `D`) copied once, the `Q` and `dO` tiles of 64 queries through the same [`Ring`] (6 stages
//!   at `D = 64`, 4 at 128). Per tile and consumer: `S^T = K Q^T`, `dP^T = V dO^T`, `P^T`,
//!   `dV += P^T dO` and `dS^T = P^T (dP^T - delta)`, `dK += dS^T Q`, as there (`P^T`, `dS^T` from
//!   registers).
//! * **`dS` through shared memory**: each consumer stores its `dS^T` (64 keys x 64 queries,
//!   rounded to the element type) with 4-byte stores into a 128-byte-swizzled tile of rows of 64
//!   queries (conflict-free: the 8 rows of a store are 8 different chunks), fences it for the
//!   tensor cores and meets the warps that read it at a named barrier. The `dQ` product reads it
//!   MN-major (imm-trans-a 1, [`wgmma::mma_bf16_m64n64k128_mn_async`]), `K` N-major from the
//!   block's copy.
//! * **`dQ` split** (a thread holds 32 `dQ` accumulators at either head dim):
//!   * `D = 128`: each consumer computes half the tile's dims from the **whole** `dS` (both
//!     consumers' 128 keys: `m64n64k128`, `K`'s box `c` of 64 dims), FlashAttention-3's split; the
//!     two consumers meet at named barrier 1 (256 threads) once per tile, after their stores.
//!   * `D = 64`: each consumer computes the whole tile's `dQ` over its **own** 64 keys
//!     (`m64n64k64`, rows `64 c ..+ 64` of `K`), so its rows of the `dS^T` tile stay its own (named
//!     barrier `1 + c` of its 128 threads) and the two consumers' sums meet in the buffer: twice
//!     the atomics per tile of `D = 128`'s split, and no 32-dim `N`-major operand (the split along
//!     dims would read `K` from 64 bytes into a swizzled row, which no copy of ours checks).
//!
//!   The `dS^T` tile is double-buffered (step `n` in tile `n % 2`): a consumer retires its `dQ`
//!   product within its step, before its next arrival at the barrier, so a tile is stored again
//!   (two steps on) only after every thread that read it passed a barrier since (the
//!   simulator's race check asks for that barrier even within a warpgroup: a single tile at `D =
//!   64` was reported).
//! * **`dQ` accumulation** (FlashAttention-3's): after the product retires, each thread stores its
//!   32 accumulators into its consumer's 16 KiB **staging** in shared memory, in `dq_accum`'s
//!   **fragment order** ([`dq_accum_index`]: accumulators `4 j ..+ 4` of thread `t` as one
//!   16-byte piece at float `4 (128 j + t)` of its 4096-float part, so each warp's store is 512
//!   contiguous bytes, 8 stores a thread), fences them for the copy
//!   engine and meets the other writers at named barrier 3 (both consumers' 256 threads at `D =
//!   128`, `3 + c` of this consumer's 128 at 64); then its thread 0 hands the whole part to
//!   the copy engine as one `cp.reduce.async.bulk ... add.f32` ([`bulk::reduce_add_f32`]) into
//!   the part's 16 KiB of `dq_accum` (contiguous there too) and commits it. Before the next
//!   step's stores, thread 0 waits for its reads (`wait_group.read`, a step later: no wait in
//!   practice) ahead of the `dS^T` barrier, which tells the other threads; before the block
//!   ends, for its completion. It replaced 32 `red.global.add.f32` per thread and step, whose
//!   issue stalled the consumers (`H100` ncu, `bench/experiments/h200-logs/ae06472-h100-v22b-ncu-bwd-fused*`).
//!   `dq_accum` is zeroed by the preparation kernel before the launch (its rows are the
//!   preparation's padded rows) and read by the conversion after it.
//! * **Order and overlap** (FlashAttention-3's): per tile `dV`, then (after the barrier) `dQ`,
//!   then `dK`; `dV` and `dQ` retire with `dK` still in flight, which runs under the staging of
//!   `dQ` (and at `D = 64` under the next tile's scores too, as the `dK`/`dV` kernel overlaps; at
//!   `D = 128` it retires at the tile's end). `dQ` retires in its own tile: read by the next
//!   tile's ordinary instructions, ptxas serialised the pipeline (C7514). The next tile's
//!   statistics (`lse2`, `delta`) are loaded a tile ahead, once `dQ` and `dK` are issued, so
//!   that their latency is not on the scores' path (on an H100, against loading them after the
//!   `dQ` staging, `bench/experiments/third-wave/a8815f2-bwd-ab-{base,new}-{1,2}.jsonl`: 318.9
//!   and 319.4 TFLOP/s against 309.2 and 307.9 at 8 x 2048 x 32 x 64; at head dim 128 471.7 and
//!   473.1 against 480.6 and 474.3 at 4 x 4096 x 16 x 128, level or slightly slower).
//! * **Causal and ragged**: the `dK`/`dV` kernel's rules; besides, keys past `kv_len` (the zeros
//!   the copies fill the last block with) get `P = 0`, so that a row with a very small
//!   log-sum-exp cannot make `exp2(0 - lse2)` overflow into `dS` (those keys' `K` rows are zeros,
//!   but `inf * 0` is NaN).
//! * **Masks** ([`attention_bwd_wgmma_fused_masked`](fn@attention_bwd_wgmma_fused_masked), the
//!   masks that drop pairs only: windows, documents, varlen batches): a block walks the query
//!   tiles that meet [`Mask::rows`] of its 128 keys (their union over the group's heads) instead
//!   of every tile from the first causal one; each key's own rows (`rows` of the one key) are
//!   stored once by the quad's first lane into shared memory ([`KEY_ROWS_BYTES`], 16-bit halves
//!   relative to the walk's first row; in registers they spilled at `D = 128`) and read in each
//!   step, `P` zero outside them. The mask is made again from the parameters wherever it is used
//!   (`fresh_mask`): computed once, its fields were kept across `setmaxnreg` and spilled. Score
//!   modifications: ALiBi's bias (derivative 1, `BiasOf<General>`), its line for the step's
//!   tile from the mask's scores at two points (`bias_line`), at `D = 64` computed ahead of the
//!   products; at 128 (instances of their own, `masked_bias`; the other masks keep the code
//!   without a bias) where `P^T` is computed, with that step's `delta` loaded after `P^T` rather
//!   than a step ahead and the ring at the start of the shared window (`Ring::new_at_window`, no
//!   padding kept across `setmaxnreg`): each of the three kept otherwise, ptxas spilled 4 to 20
//!   bytes at 128 (`bench/experiments/third-wave/e4e58d4-alibi-bwd-ptxas.md`). A modification
//!   that is not a bias (the soft cap's; instances of their own, `masked_bent`, `BentOf<General>`):
//!   each element's score and derivative at once (`Mask::score_with_grad`) where `P^T` is
//!   computed, `P` packed for `dV` and `P` times the derivative kept in its place for `dS`, so
//!   that no derivative lives from `P` to `dS` (kept apart, it spilled 88 bytes at `D = 128`,
//!   32 at 64); `delta` and the ring as the bias's at 128. The host sends each call to the
//!   instance that takes its modification.
//!
//! # Registers and shared memory
//! A consumer thread holds `dK` and `dV` (`D / 2` f32 each: 64 at `D = 128`), `S^T` and `dP^T` (32
//! each), `P^T` and `dS^T` packed (16 each, the register operands of `dV` and `dK` in flight),
//! the next tile's statistics (4) and, from `dQ`'s issue to its staging, 32 `dQ` accumulators (a
//! fresh array per tile, not carried across the loop). At `D = 128` that leaves little of the 240
//! registers for the rest (no spills: ptxas, `tests/ptx.rs`). What
//! it took, each measured with ptxas: the tile's statistics `lse2` and `delta` one pair per
//! lane, shuffled to the lanes that need them (16 registers each otherwise); the `dS^T` stores'
//! offsets and the `dQ` product's descriptors computed in each step ([`hint::recompute`]: hoisted,
//! they were 16 registers); the causal test in 32 bits; the walk over query tiles in 32 bits, in
//! the producer's 24 registers too; the staging's place computed in each step from the thread
//! index, its barrier id an immediate at `D = 128`.
//! Shared memory: the ring (`fused_stages`: 3 stages at `D = 128`, 6 at 64), a 1024-byte gap,
//! `K` and `V`, the two `dS^T` tiles of 16 KiB (128 keys, each consumer's 8 KiB half), the two
//! consumers' `dQ` staging (16 KiB each), `K`/`V`'s barrier and the masked entry's key rows (512
//! bytes): [`bwd_wgmma_fused_shared_bytes`], 232,000 bytes at `D = 128` (of 232,448), 199,280 at
//! 64. ptxas's figures:
//! `bench/experiments/third-wave/*-attention-bwd-fused-ptxas.md`.
//!
//! # Traffic
//! Per block: `2 * 128 D` elements of `K`/`V` read once, `2 * 64 D` of `Q`/`dO` and 512 bytes of
//! statistics per query tile, `2 * 128 D` written (16-byte pieces); per tile two bulk
//! reductions of 16 KiB (the tile's `64 D` f32 at `D = 128`, twice that at `D = 64`), 8 16-byte
//! shared stores per thread into the staging. Flops per tile and consumer: `S^T`, `dP^T`, `dV`, `dK` (`4 * 64 * 64 * D * 2`) and
//! the `dQ` share (`64 * 64 * 128 * 2`: the tile's `64 * 128 * D * 2` over two consumers). The
//! conversion reads `4 D` bytes and writes `2 D` per query row and head.
//!
//! # Rounding
//! As the two-kernel rung: `P` and `dS` rounded to the 16-bit type for the products that take
//! them (`dS` as stored for `dQ`, the same values as the `dK` operand), f32 sums; `dq` is `scale`
//! times the f32 sum, rounded once by the conversion.

use super::backward_wgmma::{
    dkdv_stage_bytes, dkdv_stages, dq_stage_bytes, pack_fragment, store_gradient, wait_older,
    BwdWgmmaElement, BwdWgmmaHead, BOX_128, BOX_64, BWD_CONSUMER_REGISTERS, BWD_PRODUCER_REGISTERS,
    BWD_WGMMA_KEYS, BWD_WGMMA_Q_TILE, CONSUMER_ROWS, WARPGROUP,
};
use super::fresh_mask;
use super::wgmma::{k_major_descriptor, n_major_descriptor, D128, D64, WGMMA_BOX_COLS};
use crate::gpu::attention::{BentOf, BiasOf, General, KeysOf, Mask, NoMask};
use crate::gpu::pipeline::Ring;
use crate::gpu::tma::{self, Tensor4d};
use crate::gpu::{barrier, bf16, bulk, f16, hint, math, mbarrier, mem, thread, vector, warp, wgmma};
use crate::kernel;

/// Floats of one consumer's `dQ` share of a query tile in `dq_accum`: 64 rows x 64 dims, 32
/// accumulators of 128 threads.
pub const DQ_PART: usize = CONSUMER_ROWS * WGMMA_BOX_COLS;

/// Threads per block of [`attention_bwd_wgmma_dq_convert`](fn@attention_bwd_wgmma_dq_convert).
pub const DQ_CONVERT_BLOCK: u32 = 256;

/// `dS^T` tiles of the fused kernel: two, double-buffered (tile `n % 2` at step `n`), so that a
/// barrier of step `n - 1` lies between a tile's reads (step `n - 2`'s `dQ`) and its next stores.
const DS_TILES: usize = 2;

/// Bytes of one consumer's `dQ` share staged in shared memory for its bulk reduction
/// ([`DQ_PART`] floats, in `dq_accum`'s fragment order).
const DQ_STAGING_BYTES: usize = 4 * DQ_PART;

/// Stages of the fused kernel's ring of `Q` and `dO` tiles at head dim `d`: the `dK`/`dV`
/// kernel's six at 64, one fewer than its four at 128 (three tiles ahead of the consumers; the
/// fourth's 32 KiB hold the staged `dQ` shares).
const fn fused_stages(d: usize) -> usize {
    if d > 64 {
        3
    } else {
        dkdv_stages(d)
    }
}

/// Dynamic shared memory of [`attention_bwd_wgmma_fused`](fn@attention_bwd_wgmma_fused) at head
/// dim `d`: the ring (`fused_stages`), a 1024-byte gap, `K` and `V`, the `dS^T` tiles of 128
/// rows of 128 bytes, the two consumers' staged `dQ` shares, `K`/`V`'s barrier (16 bytes) and,
/// for the masked instances, each key's rows ([`KEY_ROWS_BYTES`]).
pub const fn bwd_wgmma_fused_shared_bytes(d: usize) -> usize {
    Ring::shared_bytes(fused_stages(d), dkdv_stage_bytes(d)) as usize
        + 1024
        + dq_stage_bytes(d)
        + DS_TILES * BOX_128
        + 2 * DQ_STAGING_BYTES
        + 16
        + KEY_ROWS_BYTES
}

/// Bytes of the masked instances' rows of each of the block's keys: one `u32` per key, the first
/// row that sees it and the one past the last, relative to the walk's first row, in its 16-bit
/// halves (so the masked instances take `q_len` below 2^16: [`BWD_FUSED_MASKED_MAX_ROWS`]).
/// Kept in shared memory, not registers: at head dim 128 the consumers have none to spare.
pub const KEY_ROWS_BYTES: usize = 4 * BWD_WGMMA_KEYS;

/// The most query rows (`q_len`) of a masked call of the fused kernel: its rows relative to the
/// walk's first one fit 16 bits ([`KEY_ROWS_BYTES`]).
pub const BWD_FUSED_MASKED_MAX_ROWS: usize = 0xffff;

const _: () = assert!(
    bwd_wgmma_fused_shared_bytes(128) == 232_000
        && bwd_wgmma_fused_shared_bytes(64) == 199_280
        && bwd_wgmma_fused_shared_bytes(128) <= 232_448,
    "the documented sizes, within the 227 KiB a block may opt in to"
);

/// Floats of the f32 `dQ` buffer the fused kernel adds into: every query row of each (batch,
/// head) padded to `q_pad` (a multiple of 64), `head_dim` each.
pub const fn bwd_wgmma_dq_accum_len(batch: usize, heads: usize, q_pad: usize, head_dim: usize) -> usize {
    batch * heads * q_pad * head_dim
}

/// Where element (`row`, `dim`) of head `bh = b heads + h`'s `dQ` lies in `dq_accum` (fragment
/// order): its query tile `row / 64` of `q_pad / 64`, its 64-dim part `dim / 64` of `d / 64`
/// ([`DQ_PART`] floats each), then accumulator `i = 4 j + r` of thread `t` at `4 (128 j + t) +
/// r`, where `t = 32 w + 4 g + q` holds row `16 w + g + 8 (r / 2)`, dim `8 j + 2 q + r % 2` of
/// the part (the `m64nNk16` layout, [`wgmma`]'s documentation): a thread's four accumulators of
/// one `j` are one 16-byte piece, and a warp's pieces of one `j` 512 contiguous bytes.
#[inline(always)]
pub fn dq_accum_index(bh: usize, row: usize, dim: usize, q_pad: usize, d: usize) -> usize {
    let (r, c) = (row % 64, dim % 64);
    let (w, g, h) = (r / 16, r % 8, (r % 16) / 8);
    let (j, q, e) = (c / 8, (c % 8) / 2, c % 2);
    let t = 32 * w + 4 * g + q;
    ((bh * (q_pad / 64) + row / 64) * (d / 64) + dim / 64) * DQ_PART + 4 * (128 * j + t) + 2 * h + e
}

/// The barrier instructions of an [`attention_bwd_wgmma_fused`](fn@attention_bwd_wgmma_fused)
/// instance: the ring's initialisation, the `K`/`V` barrier's, the `dS^T` tile's named one and
/// the staging's; with a mask (`masked`) also the named barrier ahead of the loop that shows
/// the key rows to the quads' other lanes.
pub const fn fused_barriers(masked: bool) -> u32 {
    if masked {
        5
    } else {
        4
    }
}

/// The shipped masks with their biases ([`General`] without the soft cap, which the host runs
/// on another rung): the masked instances' `M` at head dim 64, and at 128 the `bias` instances'.
#[cfg(feature = "attention")]
type GeneralBias = BiasOf<General>;

/// The shipped masks' keys ([`General`] without its score modifications): the masked instances'
/// `M` at head dim 128, for the masks that modify no score (with `GeneralBias`'s code there,
/// windows and documents ran 6% and 9% slower on an H100:
/// `bench/experiments/third-wave/bc34902-bwd-masks-h100-2.jsonl` against main's in the same
/// call, `0589db3-skip-ab-0589db3-{1,2}.jsonl`).
#[cfg(feature = "attention")]
type GeneralKeys = KeysOf<General>;

/// The shipped masks with their score modifications that are not biases (the soft cap's,
/// element by element with its derivative), no bias (the host sends ALiBi to the `bias`
/// instances): the `bent` instances' `M`.
#[cfg(feature = "attention")]
type GeneralBent = BentOf<General>;

/// A consumer thread's `P^T` of one step with a mask (`M::MASKS`; a bias added to its scores,
/// [`BiasOf`]: the `GeneralBias` instances, or its scores bent, [`BentOf`]: `GeneralBent`'s):
/// for each of its 32 elements (keys `k` of the thread, queries `q0 + 8 j + 2 q + e` of the
/// tile) `P = exp2(s scale_log2 + bias - lse2)`, or `exp2(score(s scale) log2(e) - lse2)` with
/// a bent score, where the query lies in the key's rows (from [`Mask::rows`], packed in
/// `key_rows` relative to the walk's `first_row`), 0 elsewhere (and for keys past `kv_len`,
/// whose rows are empty); in place in `st` `P`, or with a bent score `P` times the score's
/// derivative (what `dS` takes); `bias` (log2 units) on the step's line `(bias0, step)` from
/// `bias_line` (0 without one); `mask` makes the mask (called only for a bent score); returns
/// the `P` packed to `T` as `pack_fragment` packs them (each
/// pair as it is computed: packed after the loop, ptxas spilled at head dim 128). `(l2,
/// lane_q)`: this lane's two statistics of the tile and its quad index, the other rows'
/// shuffled in as in the kernel.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn masked_probabilities<T: BwdWgmmaElement, M: Mask>(
    st: &mut [f32; 32],
    (l2, lane_q): (&[f32; 2], u32),
    key_rows: *const u32,
    first_row: u32,
    (b, h, q0): (usize, usize, usize),
    (scale_log2, scale): (f32, f32),
    (bias0, step): (f32, f32),
    mask: impl Fn() -> M,
) -> [u32; 16] {
    let t = hint::recompute(thread::thread_idx_x()) as usize;
    let (c, w, g) = (t / WARPGROUP - 1, (t % WARPGROUP) / 32, (t % 32) / 4);
    // A modification that is not a bias (`BentOf`: the soft cap's), element by element: the
    // mask and the thread's first key (the other instances compute neither). Asked whether the
    // call modifies scores: without that test ptxas spilled 160 bytes at `D = 128`.
    let bent = if M::SCORE_MOD && !M::SCORE_IS_BIAS {
        let key0 = thread_key(c, w, g);
        let mask = mask();
        mask.modifies_scores().then_some((mask, key0))
    } else {
        None
    };
    // Per key, its rows as columns of this tile, clamped to `0..=64`.
    let base = q0 as u32 - first_row;
    let cols: [[u32; 2]; 2] = core::array::from_fn(|hh| {
        // SAFETY: this thread's key's slot, written before the barrier ahead of the loop.
        let packed = unsafe { mem::load(key_rows, CONSUMER_ROWS * c + 16 * w + g + 8 * hh) };
        let clamp = |x: u32| x.saturating_sub(base).min(BWD_WGMMA_Q_TILE as u32);
        [clamp(packed & 0xffff), clamp(packed >> 16)]
    });
    let mut p = [0u32; 16];
    unroll_8!(8, |j| {
        unroll_8!(2, |hh| {
            let mut pair = [0.0f32; 2];
            unroll_8!(2, |e| {
                let i = 4 * j + 2 * hh + e;
                let col = (8 * j + 2 * (lane_q as usize) + e) as u32;
                let l2 = warp::shfl_idx(l2[e], lane_q + 4 * j as u32);
                let seen = col >= cols[hh][0] && col < cols[hh][1];
                if let Some((mask, key0)) = bent {
                    // The modified score and its derivative; `P` from the one, and `P` times
                    // the other kept for `dS` (`dS = P grad (dP - delta)`).
                    let (score, grad) =
                        mask.score_with_grad(st[i] * scale, b, h, q0 + col as usize, key0 + 8 * hh);
                    let prob = if seen {
                        math::exp2_ftz(math::fma(score, math::LOG2_E, -l2))
                    } else {
                        0.0
                    };
                    pair[e] = prob;
                    st[i] = prob * grad;
                } else {
                    // (Without score modifications, `-l2` itself: the instances that take none
                    // keep their code.)
                    let shift = if M::SCORE_MOD && M::SCORE_IS_BIAS {
                        math::fma((8 * j + e) as f32 - (8 * hh) as f32, step, bias0) - l2
                    } else {
                        -l2
                    };
                    let prob = if seen {
                        math::exp2_ftz(math::fma(st[i], scale_log2, shift))
                    } else {
                        0.0
                    };
                    pair[e] = prob;
                    st[i] = prob;
                }
            });
            p[2 * j + hh] = T::pack(pair);
        });
    });
    p
}

/// The bias line of a consumer thread's step with mask `M` (`BiasOf<General>`, whose one score
/// modification is ALiBi's bias): in log2 units, the bias of its first key at its lane's first
/// query of the tile (`q0 + 2 q`), and its change per query further; `(0, 0)` when the call's
/// mask adds none. Asked of the mask at two points; the rest of the thread's elements lie on
/// that line (ALiBi's bias is linear in `kv - q`). Computed ahead of the step's products, where
/// registers are free at `D = 64`; at 128 in `masked_probabilities` (the module
/// documentation).
#[inline(always)]
fn bias_line<M: Mask>(mask: M, (b, h, q0): (usize, usize, usize), lane_q: u32) -> (f32, f32) {
    if !(M::SCORE_MOD && mask.modifies_scores()) {
        return (0.0, 0.0);
    }
    let t = hint::recompute(thread::thread_idx_x()) as usize;
    let (c, w, g) = (t / WARPGROUP - 1, (t % WARPGROUP) / 32, (t % 32) / 4);
    let key = thread_key(c, w, g);
    let q = q0 + 2 * lane_q as usize;
    let at = |q: usize, kv: usize| mask.score(0.0, b, h, q, kv) * math::LOG2_E;
    (at(q, key), at(q + 1, key) - at(q, key))
}

/// Consumer thread `(c, w, g)`'s first key (its second is 8 further): the block's first key,
/// computed again from the block index, and the thread's row in the block.
#[inline(always)]
fn thread_key(c: usize, w: usize, g: usize) -> usize {
    hint::recompute(thread::block_idx_x()) as usize * BWD_WGMMA_KEYS + CONSUMER_ROWS * c + 16 * w + g
}

/// Attention backward on Hopper's warpgroup tensor cores in one kernel: `dK`, `dV`, and `dQ`
/// added into an f32 buffer (the module documentation has the design).
///
/// Block `(x, kvh, b)` computes keys `128 x ..+ 128` of key/value head `kvh` of batch `b`.
/// Thread 0 initialises the barriers. The producer warpgroup's thread 0 copies `K` and `V` once,
/// then, for each step (query head `kvh group + n / per_head`, query tile `first + n % per_head`,
/// from the first tile that sees key `128 x`), waits for a free stage and copies the tile's `Q`
/// and `dO` into it. Consumer warpgroup `c` (1 or 2) computes keys `64 (c - 1) ..+ 64`: thread `t`
/// (warp `w`, `g = (t % 32) / 4`, `q = t % 4`) holds keys `16 w + g` and `+ 8`, their `P^T` and
/// `dS^T` at queries `8 j + 2 q` and `+ 1` of each tile, their `dK`, `dV` at dims `8 j + 2 q` and
/// `+ 1`, and 32 `dQ` accumulators (rows `16 w + g`, `+ 8` of the tile, dims `8 j + 2 q`, `+ 1`
/// of its part). Per step it takes two of its queries' `lse2` and `delta`, loaded in the step
/// before (the other 14 come by shuffles), waits for the stage, issues `S^T` and `dP^T` (at `D = 64` then retires the previous step's
/// `dK` and releases that step's stage), computes `P^T` once `S^T` retired and issues `dV += P^T
/// dO`, computes `dS^T` once `dP^T` retired, stores it (rounded) to its rows of the step's `dS^T`
/// tile, fences the stores, meets the tile's other readers at the named barrier, issues its `dQ`
/// product and `dK += dS^T Q`, retires `dV` and `dQ`, stores `dQ` to its staging, meets the
/// other writers, and its thread 0 adds the staging into `dq_accum` by one bulk reduction; it
/// loads the next step's statistics, then (at `D = 128`) retires `dK` and releases the stage.
/// After the last step thread 0 waits for its reductions. Then it stores `scale dK` and `dV`
/// (16-byte pieces after a transpose within the quad) for its keys below `kv_len`.
///
/// Global memory: `K`, `V` once and `Q`, `dO` per step by TMA; the statistics (L2); `dK`, `dV`
/// written once; `dq_accum` by two bulk reductions of 16 KiB per step ([`dq_accum_index`]).
///
/// Launch: grid `(ceil(kv_len / 128), kv_heads, batch)`, [`BWD_WGMMA_BLOCK`](super::backward_wgmma::BWD_WGMMA_BLOCK)
/// threads, [`bwd_wgmma_fused_shared_bytes`]`(D)` bytes of dynamic shared memory; a compute
/// capability 9.0 GPU. Then [`attention_bwd_wgmma_dq_convert`](fn@attention_bwd_wgmma_dq_convert)
/// on `dq_accum`.
///
/// # Safety
/// * As [`attention_bwd_wgmma_dkdv`](fn@super::backward_wgmma::attention_bwd_wgmma_dkdv) for
///   `maps` (`Q`, `dO` with boxes of 64 rows, `K`, `V` with boxes of 128), the operands, the
///   statistics (`q_pad` a multiple of 64), `dk` and `dv`; `heads = kv_heads group`, `kv_len >=
///   1`.
/// * `dq_accum` holds [`bwd_wgmma_dq_accum_len`]`(batch, heads, q_pad, D)` floats, 16-byte
///   aligned, zeroed (or holding the sums to add to), touched by nothing else during the launch.
///
/// Instances: `attention_bwd_wgmma_fused_d<D>_<T>` for `D` 64 and 128, `T` bf16 and f16 (no
/// mask, or the causal one); [`attention_bwd_wgmma_fused_masked`](fn@attention_bwd_wgmma_fused_masked)
/// takes the other masks.
// Launch bounds `(384, 1)` so that ptxas knows the register budget at entry (`setmaxnreg`).
// Barriers: `fused_barriers`.
#[cfg_attr(
    feature = "attention",
    kernel(
        launch_bounds(384, 1),
        instances(
            attention_bwd_wgmma_fused_d64_bf16 = (bf16, D64),
            attention_bwd_wgmma_fused_d128_bf16 = (bf16, D128),
            attention_bwd_wgmma_fused_d64_f16 = (f16, D64),
            attention_bwd_wgmma_fused_d128_f16 = (f16, D128),
        ),
        barriers(fused_barriers(false))
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_wgmma_fused<T: BwdWgmmaElement, H: BwdWgmmaHead>(
    maps: *const u64,
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dk: *mut T,
    dv: *mut T,
    dq_accum: *mut f32,
    q_len: usize,
    kv_len: usize,
    q_pad: usize,
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
    do_sb: usize,
    do_ss: usize,
    do_sh: usize,
    scale_log2: f32,
    scale: f32,
    causal: bool,
) {
    // SAFETY: the caller's contract, which is the body's without a mask.
    unsafe {
        fused_body::<T, H, NoMask>(
            maps,
            (q, k, v, d_o),
            (lse2, delta),
            (dk, dv, dq_accum),
            (q_len, kv_len, q_pad, heads, group, batch),
            [
                q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh,
            ],
            (scale_log2, scale),
            (causal, core::ptr::null(), 0, 0.0),
        )
    }
}

/// [`attention_bwd_wgmma_fused`](fn@attention_bwd_wgmma_fused) with a mask (`M`:
/// `BiasOf<`[`General`]`>`: windows, documents, varlen batches and ALiBi, at head dim 128 ALiBi
/// alone and `KeysOf<General>` for the others; `BentOf<General>`: the soft cap): each block
/// walks the query tiles of the rows that see its keys ([`Mask::rows`]), `P` zero outside each
/// key's rows, a bias added to each score on its line, a bent score and its derivative element
/// by element (the module documentation's walk, `bias_line` and `masked_probabilities`).
///
/// Launch: as the unmasked kernel, with [`bwd_wgmma_fused_shared_bytes`]`(D)` bytes (each key's
/// rows after `K`/`V`'s barrier).
///
/// # Safety
/// * As [`attention_bwd_wgmma_fused`](fn@attention_bwd_wgmma_fused), the statistics padded to
///   `q_pad = ceil(q_len / 64) 64` rows per head (which this kernel computes: its 32 parameters
///   are what a gpukern launch takes at most), `q_len` at most [`BWD_FUSED_MASKED_MAX_ROWS`].
/// * `mask_data`, `mask_int`, `mask_float` are what `M` reads
///   ([`MaskArgs`](crate::gpu::attention::MaskArgs)), its rows of each key the same for every
///   head of a group (as [`General`]'s).
///
/// Instances: `attention_bwd_wgmma_fused_masked_d<D>_<T>` for `D` 64 and 128, `T` bf16 and f16,
/// `attention_bwd_wgmma_fused_masked_bias_d128_<T>` (the bias at head dim 128) and
/// `attention_bwd_wgmma_fused_masked_bent_d<D>_<T>` (the soft cap, `BentOf<General>`).
// Barriers: `fused_barriers`.
#[cfg_attr(
    feature = "attention",
    kernel(
        launch_bounds(384, 1),
        instances(
            attention_bwd_wgmma_fused_masked_d64_bf16 = (bf16, D64, GeneralBias),
            attention_bwd_wgmma_fused_masked_d128_bf16 = (bf16, D128, GeneralKeys),
            attention_bwd_wgmma_fused_masked_bias_d128_bf16 = (bf16, D128, GeneralBias),
            attention_bwd_wgmma_fused_masked_d64_f16 = (f16, D64, GeneralBias),
            attention_bwd_wgmma_fused_masked_d128_f16 = (f16, D128, GeneralKeys),
            attention_bwd_wgmma_fused_masked_bias_d128_f16 = (f16, D128, GeneralBias),
            attention_bwd_wgmma_fused_masked_bent_d64_bf16 = (bf16, D64, GeneralBent),
            attention_bwd_wgmma_fused_masked_bent_d128_bf16 = (bf16, D128, GeneralBent),
            attention_bwd_wgmma_fused_masked_bent_d64_f16 = (f16, D64, GeneralBent),
            attention_bwd_wgmma_fused_masked_bent_d128_f16 = (f16, D128, GeneralBent),
        ),
        barriers(fused_barriers(true))
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_wgmma_fused_masked<T: BwdWgmmaElement, H: BwdWgmmaHead, M: Mask>(
    maps: *const u64,
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dk: *mut T,
    dv: *mut T,
    dq_accum: *mut f32,
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
    do_sb: usize,
    do_ss: usize,
    do_sh: usize,
    scale_log2: f32,
    scale: f32,
    mask_data: *const i32,
    mask_int: usize,
    mask_float: f32,
) {
    let q_pad = q_len.div_ceil(BWD_WGMMA_Q_TILE) * BWD_WGMMA_Q_TILE;
    // SAFETY: the caller's contract.
    unsafe {
        fused_body::<T, H, M>(
            maps,
            (q, k, v, d_o),
            (lse2, delta),
            (dk, dv, dq_accum),
            (q_len, kv_len, q_pad, heads, group, batch),
            [
                q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh,
            ],
            (scale_log2, scale),
            (false, mask_data, mask_int, mask_float),
        )
    }
}

/// The one-kernel backward of both entries: [`attention_bwd_wgmma_fused`](fn@attention_bwd_wgmma_fused)'s
/// parameters grouped (`causal` read only without a mask, the mask's parameters only with one).
///
/// # Safety
/// The entry's contract.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fused_body<T: BwdWgmmaElement, H: BwdWgmmaHead, M: Mask>(
    maps: *const u64,
    (q, k, v, d_o): (*const T, *const T, *const T, *const T),
    (lse2, delta): (*const f32, *const f32),
    (dk, dv, dq_accum): (*mut T, *mut T, *mut f32),
    (q_len, kv_len, q_pad, heads, group, batch): (usize, usize, usize, usize, usize, usize),
    [q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh]: [usize; 12],
    (scale_log2, scale): (f32, f32),
    (causal, mask_data, mask_int, mask_float): (bool, *const i32, usize, f32),
) {
    let d = H::D;
    const {
        assert!(
            H::D % WGMMA_BOX_COLS == 0 && H::D <= 128,
            "whole boxes, registers for D <= 128"
        );
    };
    let boxes = d / WGMMA_BOX_COLS;
    // `D = 128`: the consumers share each `dS^T` tile and split `dQ`'s dims; `D = 64`: each
    // computes `dQ` over its own keys (the module documentation).
    let shared_ds = d > 64;
    let tid = thread::thread_idx_x() as usize;
    let wg = tid / WARPGROUP;
    let kvh = thread::block_idx_y() as usize;
    let b = thread::block_idx_z() as usize;
    let kv_heads = heads / group;
    let q_tiles = q_len.div_ceil(BWD_WGMMA_Q_TILE) as u32;
    // The block's first key `k0`, and its walk in 32 bits (tiles and steps below 2^31: the
    // grid's limit): the query tiles of each head from the first row that sees key `k0` on
    // (`first_tile`, `per_head` of them), `steps` in all. The consumers compute it again from
    // the block index ([`hint::recompute`]) rather than keep the prologue's across the loop.
    // With a mask (`M::MASKS`, the masked instances): the query tiles that meet the rows
    // that see the block's keys ([`Mask::rows`], their union over the group's heads), instead
    // of every tile from the first causal one.
    let walk = || {
        let k0 = hint::recompute(thread::block_idx_x()) as usize * BWD_WGMMA_KEYS;
        let (first_tile, end_tile) = if M::MASKS {
            let mask = fresh_mask::<M>((mask_data, mask_int, mask_float), (q_len, kv_len, heads));
            let keys = k0..(k0 + BWD_WGMMA_KEYS).min(kv_len);
            let (mut lo, mut hi) = (q_len, 0);
            for hh in 0..group {
                let rows = mask.rows(b, kvh * group + hh, keys.clone());
                lo = lo.min(rows.start);
                hi = hi.max(rows.end.min(q_len));
            }
            let first = (lo / BWD_WGMMA_Q_TILE) as u32;
            (first, (hi.div_ceil(BWD_WGMMA_Q_TILE) as u32).max(first))
        } else {
            let first_row = if causal {
                (k0 + q_len).saturating_sub(kv_len)
            } else {
                0
            };
            (((first_row / BWD_WGMMA_Q_TILE) as u32).min(q_tiles), q_tiles)
        };
        let per_head = end_tile - first_tile;
        (k0, first_tile, per_head, group as u32 * per_head)
    };

    // SAFETY: every thread, first; the launch gives `bwd_wgmma_fused_shared_bytes(D)`: the
    // ring's bytes, then the tail; stages of whole 1024-byte atoms.
    // With a bias at `D = 128`, the ring at the window's start (`Ring::new_at_window`: its
    // padding, kept across `setmaxnreg`, spilled there).
    let ring = unsafe {
        if M::SCORE_MOD && d > 64 {
            Ring::new_at_window(fused_stages(d), dkdv_stage_bytes(d), (2 * WARPGROUP / 32) as u32)
        } else {
            Ring::new(fused_stages(d), dkdv_stage_bytes(d), (2 * WARPGROUP / 32) as u32)
        }
    };
    let (kv_tile, kv_address) = ring.tail();
    // After `K` and `V`: the `dS^T` tiles (1024-byte aligned), the staged `dQ` shares, then
    // `K`/`V`'s barrier.
    let ds_tile = kv_tile.wrapping_add(2 * boxes * BOX_128);
    let kv_bar = ds_tile
        .wrapping_add(DS_TILES * BOX_128 + 2 * DQ_STAGING_BYTES)
        .cast::<u64>();
    if tid == 0 {
        // SAFETY: 8 bytes past the `dS^T` tiles inside the launch's shared memory; nothing else
        // touches them before the block barrier below.
        unsafe { mbarrier::init(kv_bar, 1) };
        mbarrier::fence_init();
    }
    thread::sync_threads();

    let producer_walk = walk();
    if wg == 0 {
        wgmma::setmaxnreg_dec::<BWD_PRODUCER_REGISTERS>();
        if tid != 0 {
            return;
        }
        let (k0, first_tile, per_head, steps) = producer_walk;
        let tensor =
            |map: usize, data: *const T, len: usize, heads: usize, strides: [usize; 3], rows: usize| {
                Tensor4d {
                    map: maps.wrapping_add(16 * map),
                    data,
                    dims: [batch, heads, len, d],
                    strides,
                    box_rows: rows,
                    box_cols: WGMMA_BOX_COLS,
                }
            };
        let tq = tensor(0, q, q_len, heads, [q_sb, q_sh, q_ss], BWD_WGMMA_Q_TILE);
        let t_do = tensor(1, d_o, q_len, heads, [do_sb, do_sh, do_ss], BWD_WGMMA_Q_TILE);
        let tk = tensor(2, k, kv_len, kv_heads, [k_sb, k_sh, k_ss], BWD_WGMMA_KEYS);
        let tv = tensor(3, v, kv_len, kv_heads, [v_sb, v_sh, v_ss], BWD_WGMMA_KEYS);
        // SAFETY: the one producer thread; the barrier expects the `2 boxes` boxes of `K` and
        // `V`, each 1024-byte aligned inside the tail; the maps are the kernel's (its contract).
        unsafe {
            mbarrier::arrive_expect_tx(kv_bar, (2 * boxes * BOX_128) as u32);
            for j in 0..boxes {
                let at = [b as u32, kvh as u32, k0 as u32, (j * WGMMA_BOX_COLS) as u32];
                tma::load_4d(kv_tile.wrapping_add(j * BOX_128).cast::<T>(), &tk, kv_bar, at);
                tma::load_4d(
                    kv_tile.wrapping_add((boxes + j) * BOX_128).cast::<T>(),
                    &tv,
                    kv_bar,
                    at,
                );
            }
        }
        let mut producer = ring.producer();
        for n in 0..steps {
            let h = kvh * group + (n / per_head) as usize;
            let q0 = (first_tile + n % per_head) as usize * BWD_WGMMA_Q_TILE;
            // SAFETY: the one producer thread; the stage is free and expects `Q` and `dO`'s `2
            // boxes` boxes, which these fill, each 1024-byte aligned.
            unsafe {
                let stage = producer.acquire();
                for j in 0..boxes {
                    let at = [b, h, q0, j * WGMMA_BOX_COLS];
                    stage.load_4d(j * BOX_64, &tq, at);
                    stage.load_4d((boxes + j) * BOX_64, &t_do, at);
                }
            }
        }
        return;
    }

    wgmma::setmaxnreg_inc::<BWD_CONSUMER_REGISTERS>();
    let (k0, first_tile, per_head, steps) = walk();
    // The walk's end within each head (every tile but the first ones without a mask).
    let end_tile = if M::MASKS { first_tile + per_head } else { q_tiles };
    let c = wg - 1;
    let t = tid % WARPGROUP;
    let (w, g, qd) = (t / 32, (t % 32) / 4, t % 4);
    // This thread's two keys; from `row` (its first key's row in the block), computed again
    // where the stores after the loop need them, so that only 32-bit values derived from them
    // live across it.
    let keys_of = |row: usize| [k0 + row, k0 + row + 8];
    let keys = keys_of(CONSUMER_ROWS * c + 16 * w + g);
    // Per key, `key + q_len` and whether it lies past `kv_len`, in 32 bits (lengths below 2^31):
    // the mask's inputs.
    let key_q = keys.map(|key| (key + q_len) as u32);
    let key_past = keys.map(|key| key >= kv_len);
    // With a mask: per key the rows that see it ([`Mask::rows`] of the one key, of the group's
    // first head: `General`'s rows depend on no head), none for a key past `kv_len`, in 32 bits.
    // Written by the quad's first lane (its four lanes hold the same keys) into the block's
    // `KEY_ROWS_BYTES` after `K`/`V`'s barrier, read by the four in each step (after the named
    // barrier before the loop).
    let key_rows = kv_bar.wrapping_add(2).cast::<u32>();
    if M::MASKS && qd == 0 {
        let first_row = first_tile as usize * BWD_WGMMA_Q_TILE;
        unroll_8!(2, |hh| {
            let packed = if key_past[hh] {
                0
            } else {
                let mask = fresh_mask::<M>((mask_data, mask_int, mask_float), (q_len, kv_len, heads));
                let rows = mask.rows(b, kvh * group, keys[hh]..keys[hh] + 1);
                // `q_len <= 0xffff` (the contract): both fit.
                let rel = |x: usize| (x.min(q_len).max(first_row) - first_row) as u32;
                rel(rows.start) | rel(rows.end) << 16
            };
            // SAFETY: key `CONSUMER_ROWS c + 16 w + g + 8 hh < 128` of the block's slots, inside
            // the launch's shared memory; written by this lane alone, read after a barrier.
            unsafe { mem::store(key_rows, CONSUMER_ROWS * c + 16 * w + g + 8 * hh, packed) };
        });
    }
    // This consumer's 64 keys of `K` and `V` (8 KiB into each box): the `A` operands of the
    // transposed scores, per box of 64 dims.
    let own = |tile: usize, j: usize| {
        k_major_descriptor(
            kv_address + (tile * boxes * BOX_128 + j * BOX_128 + CONSUMER_ROWS * c * 128) as u32,
        )
    };
    // The last key of this consumer: a tile none of whose queries lies before it needs no mask
    // (but for keys past `kv_len`).
    let last_key = k0 + CONSUMER_ROWS * (c + 1) - 1;
    // The first float in `dq_accum` of this consumer's `dQ` part of a tile (its dims at `D =
    // 128`, the whole tile at 64), where its bulk reduction adds.
    let part = if shared_ds { c } else { 0 };
    let accum_at = |h: usize, q0: usize| {
        (((b * heads + h) * (q_pad / BWD_WGMMA_Q_TILE) + q0 / BWD_WGMMA_Q_TILE) * boxes + part) * DQ_PART
    };
    let mut dv_acc = <H::O as wgmma::Accumulators>::zeroed();
    let mut dk_acc = <H::O as wgmma::Accumulators>::zeroed();
    // SAFETY: `K`/`V`'s barrier, initialised; its phase 0 completes with their copies.
    unsafe { mbarrier::wait_parity(kv_bar, 0) };
    if steps == 0 {
        // No query sees these keys: zero gradients, from an array of their own (as in the
        // `dK`/`dV` kernel), and nothing to add to `dQ`. Both consumers leave here together
        // (`steps` is the block's), so neither waits at the named barrier for the other.
        let zeros = <H::O as wgmma::Accumulators>::zeroed();
        store_gradient::<T, H>(dk, &zeros, 1.0, keys, (b, kvh), (kv_len, kv_heads), qd);
        store_gradient::<T, H>(dv, &zeros, 1.0, keys, (b, kvh), (kv_len, kv_heads), qd);
        return;
    }
    // As in the `dK`/`dV` kernel: at `D = 64` the previous step's products retire under this
    // step's scores; at `D = 128` each step's products are waited for at its end.
    let overlap = d <= 64;
    if M::MASKS {
        // The key rows stored above, for the quad's other lanes: the loop's `dS^T` barrier (its
        // ids and counts), once before it.
        // SAFETY: whole warps; both consumers (or each one's 128 threads) reach it, `steps > 0`.
        unsafe {
            if shared_ds {
                barrier::sync(1, 2 * WARPGROUP as u32);
            } else {
                barrier::sync(1 + c as u32, WARPGROUP as u32);
            }
        }
    }
    let mut consumer = ring.consumer();
    // The step's query head and tile, walked in 32 bits (a 64-bit division per step costs
    // registers the loop does not have at `D = 128`).
    // A tile's statistics at this thread's queries `8 j + 2 q ..+ 2` (`j < 8`): the eight lanes
    // of a warp with the same `q` need the same 16 of each, so lane `4 g + q` loads those of `j =
    // g` and the others are shuffled in where used (two registers of each live beside the
    // products, not 16: the consumers' register peak is at the scores' issue, with `dK`, `dV`,
    // `S^T` and `dP^T` held). Loaded a step ahead (once the previous step's `dQ` and `dK` are
    // issued), so that the loads' latency is not on the scores' path.
    let load_stats = |h: usize, q0: usize| -> [[f32; 2]; 2] {
        let stats = (b * heads + h) * q_pad + q0 + 8 * g + 2 * qd;
        [lse2, delta].map(|x| {
            core::array::from_fn(|e| {
                // SAFETY: `q0 + 64 <= q_pad` (a multiple of 64), so inside head `(b, h)`'s padded
                // rows of both statistics (the contract).
                unsafe { mem::load(x, stats + e) }
            })
        })
    };
    let (mut hi, mut qt) = (0u32, first_tile);
    let mut next_stats = load_stats(kvh * group, first_tile as usize * BWD_WGMMA_Q_TILE);
    for n in 0..steps {
        let h = kvh * group + hi as usize;
        let q0 = qt as usize * BWD_WGMMA_Q_TILE;
        qt += 1;
        if qt == end_tile {
            qt = first_tile;
            hi += 1;
        }
        let [l2, dd] = next_stats;
        // Row `j`'s statistic `e` from the lane that loaded it (the lanes `4 j + q` computed in
        // each step: hoisted out of the loop, the eight of them took registers ptxas spilled).
        let lane_q = hint::recompute(qd as u32);
        let stat = |own: &[f32; 2], j: usize, e: usize| warp::shfl_idx(own[e], lane_q + 4 * j as u32);
        // SAFETY: every thread of the consumer warps; released once below (in the next step,
        // or after the loop).
        let stage = unsafe { consumer.wait() };
        // With a mask that adds a bias (ALiBi), its line for this step's tile (`bias_line`): at
        // `D = 64` ahead of the products, at 128 where `P^T` is computed (ahead of the products,
        // ptxas spilled it there).
        let line = || {
            if M::SCORE_MOD && M::SCORE_IS_BIAS {
                let mask = fresh_mask::<M>((mask_data, mask_int, mask_float), (q_len, kv_len, heads));
                bias_line(mask, (b, h, q0), lane_q)
            } else {
                (0.0, 0.0)
            }
        };
        let line_ahead = if overlap { line() } else { (0.0, 0.0) };
        let mut st = [0.0f32; 32];
        let mut dpt = [0.0f32; 32];
        // SAFETY: the whole warpgroup; `K`, `V` and the stage have landed and stay until the
        // waits below (the stage is released once this step's gradient products retired).
        unsafe {
            for j in 0..boxes {
                st = T::scores64(
                    st,
                    own(0, j),
                    k_major_descriptor(stage.address(j * BOX_64)),
                    j > 0,
                );
            }
            for j in 0..boxes {
                dpt = T::scores64(
                    dpt,
                    own(1, j),
                    k_major_descriptor(stage.address((boxes + j) * BOX_64)),
                    j > 0,
                );
            }
            // The previous step's `dK` (and `dV`, retired then) ran under these products'
            // issue: it retires (the `2 boxes` groups just issued stay in flight) and frees its
            // stage. Unconditional waits, as in the `dK`/`dV` kernel (C7517 otherwise).
            if overlap {
                dv_acc = wait_older(dv_acc, 2 * boxes);
                dk_acc = wait_older(dk_acc, 2 * boxes);
                if n > 0 {
                    consumer.release_previous();
                }
            }
            st = wait_older(st, boxes);
        }
        let p = if M::MASKS {
            masked_probabilities::<T, M>(
                &mut st,
                (&l2, lane_q),
                key_rows,
                first_tile * BWD_WGMMA_Q_TILE as u32,
                (b, h, q0),
                (scale_log2, scale),
                if overlap { line_ahead } else { line() },
                || fresh_mask::<M>((mask_data, mask_int, mask_float), (q_len, kv_len, heads)),
            )
        } else {
            // P^T = exp2(S^T scale_log2 - lse2); masked where a query does not see the key (the
            // tile crosses the diagonal) and for keys past `kv_len`; 0 for queries past `q_len`
            // (`lse2 = +inf` there).
            // One 32-bit test per element: per key the first query of the tile that sees it (64
            // for a key past `kv_len`: none does).
            let masked = (causal && last_key + q_len > q0 + kv_len) || last_key >= kv_len;
            let first_query: [u32; 2] = core::array::from_fn(|hh| {
                if key_past[hh] {
                    BWD_WGMMA_Q_TILE as u32
                } else if causal {
                    key_q[hh]
                        .saturating_sub(kv_len as u32 + q0 as u32)
                        .min(BWD_WGMMA_Q_TILE as u32)
                } else {
                    0
                }
            });
            let hidden = |hh: usize, col: usize| first_query[hh] > col as u32;
            unroll_8!(8, |j| {
                unroll_8!(2, |e| {
                    let l2 = stat(&l2, j, e);
                    unroll_8!(2, |hh| {
                        let i = 4 * j + 2 * hh + e;
                        let mut u = st[i];
                        if masked && hidden(hh, 8 * j + 2 * qd + e) {
                            u = f32::NEG_INFINITY;
                        }
                        st[i] = math::exp2_ftz(math::fma(u, scale_log2, -l2));
                    });
                });
            });
            pack_fragment::<T, 32, 16>(&st)
        };
        // SAFETY: the whole warpgroup; `dO` stays until the waits below; `p` and `dv_acc` are
        // not touched in flight.
        unsafe {
            dv_acc = H::grad::<T>(
                dv_acc,
                p,
                n_major_descriptor(stage.address(boxes * BOX_64), BOX_64),
                true,
            );
        }
        // With a bias at `D = 128`, this step's `delta` loaded here rather than a step ahead
        // (held across the products, ptxas spilled with the bias's line).
        let dd = if M::SCORE_MOD && !overlap {
            load_stats(h, q0)[1]
        } else {
            dd
        };
        // SAFETY: the whole warpgroup; `dP^T`'s groups, then `dV`'s one: `dP^T` retires.
        dpt = unsafe { wgmma::wait_accumulators::<1, _>(dpt) };
        // dS^T = P^T (dP^T - delta), in place of `dP^T`.
        unroll_8!(8, |j| {
            unroll_8!(2, |e| {
                let dd = stat(&dd, j, e);
                unroll_8!(2, |hh| {
                    let i = 4 * j + 2 * hh + e;
                    dpt[i] = st[i] * (dpt[i] - dd);
                });
            });
        });
        let ds = pack_fragment::<T, 32, 16>(&dpt);
        // This step's `dS^T` tile (double-buffered) and this consumer's 64 rows of it; the
        // stores are safe: the products that read this tile before (two steps ago) retired
        // before their threads arrived at the previous step's named barrier, which this thread
        // passed (module documentation).
        let tile = (n % 2) as usize;
        store_ds(ds_tile.wrapping_add(tile * BOX_128), &ds, c, w, g, qd);
        wgmma::fence_proxy_async();
        if t == 0 {
            // The previous step's reduction has read this consumer's staged `dQ` (issued a
            // step ago: no wait in practice); the barrier below tells the other threads.
            bulk::wait_group_read::<0>();
        }
        // Every row of the tile stored and fenced: both consumers' at `D = 128`, this one's at
        // 64.
        // SAFETY: whole warps; both consumers run the same `steps` (256 threads at barrier 1),
        // or each consumer's 128 threads at its own barrier.
        unsafe {
            if shared_ds {
                barrier::sync(1, 2 * WARPGROUP as u32);
            } else {
                barrier::sync(1 + c as u32, WARPGROUP as u32);
            }
        }
        // The `dQ` product's operands, from addresses computed again in each step (kept live
        // across the loop, they cost registers ptxas spilled at `D = 128`): the `dS^T` tile
        // (MN-major `A`), and `K` N-major, at `D = 128` box `c` (this consumer's 64 dims) over
        // the block's 128 keys, at `D = 64` this consumer's 64 keys of box 0.
        let kv_now = hint::recompute(kv_address);
        let ds_now = kv_now + (2 * boxes * BOX_128) as u32;
        let dq_keys = if shared_ds {
            n_major_descriptor(kv_now + (c * BOX_128) as u32, BOX_128)
        } else {
            n_major_descriptor(kv_now + (c * BOX_64) as u32, BOX_128)
        };
        let dq_ds = if shared_ds {
            ds_mn_descriptor(ds_now + (tile * BOX_128) as u32)
        } else {
            ds_mn_descriptor(ds_now + (tile * BOX_128 + c * BOX_64) as u32)
        };
        // FlashAttention-3's order: `dQ`, then `dK`, so that `dQ` (and `dV` before it) retire
        // while `dK` runs. `dQ` is retired in its own step: read by a later step's ordinary
        // instructions (the reductions), ptxas serialised the loop (C7514). Its accumulators are
        // a fresh array per step (scale-d 0): carried across the loop they cost 32 registers.
        // SAFETY: the whole warpgroup; the tile, `K` and `Q` stay until these products retire
        // (below, or at `D = 64` `dK` in the next step); `ds` and the accumulators are not
        // touched in flight.
        let mut dq_acc = unsafe {
            let zeros = <[f32; 32] as wgmma::Accumulators>::zeroed();
            let dq_acc = if shared_ds {
                T::dq128(zeros, dq_ds, dq_keys, false)
            } else {
                T::dq64(zeros, dq_ds, dq_keys, false)
            };
            dk_acc = H::grad::<T>(dk_acc, ds, n_major_descriptor(stage.address(0), BOX_64), true);
            dq_acc
        };
        // The next step's statistics, loaded while this step's last products run.
        if n + 1 < steps {
            next_stats = load_stats(kvh * group + hi as usize, qt as usize * BWD_WGMMA_Q_TILE);
        }
        // SAFETY: the whole warpgroup; `dV` and `dQ` retire, `dK` runs on under the reductions
        // (FlashAttention-3's order) and at `D = 64` under the next step's scores too.
        unsafe {
            dq_acc = wgmma::wait_accumulators::<1, _>(dq_acc);
        }
        // This consumer's `dQ` share into its staging (fragment order, as in `dq_accum`), then,
        // once every thread's stores are fenced and met, one bulk reduction of its 16 KiB by
        // thread 0, in the background under `dK`.
        // (Its place from `ds_tile` and an offset computed in each step from the thread index:
        // kept across the loop, the pointer or the offset cost registers ptxas spilled at `D =
        // 128`.)
        let c_now = hint::recompute(tid as u32) as usize / WARPGROUP - 1;
        let staging = ds_tile
            .wrapping_add(DS_TILES * BOX_128 + c_now * DQ_STAGING_BYTES)
            .cast::<f32>();
        stage_dq(staging, &dq_acc, t);
        bulk::fence_shared();
        // SAFETY: whole warps, once per step: at `D = 128` both consumers' 256 threads (they
        // meet at barrier 1 in each step anyway; an immediate barrier id), at 64 this
        // consumer's 128.
        unsafe {
            if shared_ds {
                barrier::sync(3, 2 * WARPGROUP as u32);
            } else {
                barrier::sync(3 + c as u32, WARPGROUP as u32);
            }
        }
        if t == 0 {
            // SAFETY: the staging holds the share, fenced by each writer before the barrier;
            // `accum_at(h, q0)` is the share's first float in `dq_accum` (16-byte aligned:
            // `DQ_PART` floats a share), touched only by reductions during the launch.
            unsafe {
                bulk::reduce_add_f32(
                    dq_accum.wrapping_add(accum_at(h, q0)),
                    staging,
                    DQ_STAGING_BYTES as u32,
                );
            }
            bulk::commit_group();
        }
        if !overlap {
            // SAFETY: the whole warpgroup; `dK`, the one group left, retires and the stage is free.
            unsafe {
                dv_acc = wgmma::wait_accumulators::<0, _>(dv_acc);
                dk_acc = wgmma::wait_accumulators::<0, _>(dk_acc);
                consumer.release(&stage);
            }
        }
    }
    if overlap {
        // SAFETY: the whole warpgroup; the last step's products retire, then free the stage
        // (`steps >= 1`).
        unsafe {
            dv_acc = wgmma::wait_accumulators::<0, _>(dv_acc);
            dk_acc = wgmma::wait_accumulators::<0, _>(dk_acc);
            consumer.release_last();
        }
    }
    if t == 0 {
        // The last reduction lands before the block ends (its source is this block's memory).
        bulk::wait_group::<0>();
    }
    let t = hint::recompute(tid as u32) as usize % WARPGROUP;
    let keys = keys_of(CONSUMER_ROWS * c + 16 * (t / 32) + (t % 32) / 4);
    store_gradient::<T, H>(dk, &dk_acc, scale, keys, (b, kvh), (kv_len, kv_heads), qd);
    store_gradient::<T, H>(dv, &dv_acc, 1.0, keys, (b, kvh), (kv_len, kv_heads), qd);
}

/// The descriptor of a `dS^T` tile read as the MN-major `A` of `dQ = dS K` (step 0 at shared
/// address `start`): 64 queries per 128-byte row, 8-key groups 1024 bytes apart (`SBO`); `LBO`
/// (the next 64 queries) unused with 64.
#[inline(always)]
fn ds_mn_descriptor(start: u32) -> u64 {
    wgmma::desc_sw128(start, BOX_128 as u32, 1024)
}

/// A consumer thread's store of its `dS^T` (`ds`, packed as the `dK` product's register
/// operand: register `4 j + r` holds key `16 w + g + 8 (r % 2)`, queries `16 j + 8 (r / 2) + 2
/// q` and `+ 1`) into its consumer `c`'s 64 rows of the 128-byte-swizzled `dS^T` tile at `tile`
/// (1024-byte aligned): 16 stores of 4 bytes; the 8 rows of a warp's store fall in 8 different
/// 16-byte chunks (the swizzle), so no two lanes share a bank.
///
/// The swizzle of byte `L = 128 key + 2 query` is `L ^ (g << 4)` (the row within its 8 is `g`,
/// and `4 q < 16` leaves the chunk bits to `j` and `r`), so each store's offset is `(t + imm) ^
/// (g << 4)` from one per-thread `t` and an immediate: `t` through [`hint::recompute`] in each
/// step, or LLVM hoists the 16 offsets out of the loop and keeps them live (at `D = 128` ptxas
/// spilled them).
#[inline(always)]
fn store_ds(tile: *mut u8, ds: &[u32; 16], c: usize, w: usize, g: usize, qd: usize) {
    let t = hint::recompute((c * BOX_64 + (16 * w + g) * 128 + 4 * qd) as u32) as usize;
    let gx = g << 4;
    unroll_8!(4, |j| {
        unroll_8!(4, |r| {
            // `c BOX_64 + swizzle_128b(128 key + 2 query)` (`tma::swizzle_128b`), the XOR
            // leaving `c BOX_64` and the row bits alone.
            let at = (t + 1024 * (r % 2) + 32 * j + 16 * (r / 2)) ^ gx;
            // SAFETY: inside consumer `c`'s 8 KiB of the tile (`key < 64`, `2 query + 4 <=
            // 128`), 4-byte aligned; the tile's earlier readers retired (the caller).
            unsafe { mem::store(tile.wrapping_add(at).cast::<u32>(), 0, ds[4 * j + r]) };
        });
    });
}

/// Stores a consumer thread's 32 `dQ` accumulators into its consumer's staging (16 KiB of
/// shared memory, `dq_accum`'s fragment order, [`dq_accum_index`]): accumulators `4 j ..+ 4` of
/// thread `t` as one 16-byte piece at float `4 (128 j + t)`, so that each warp's store of one `j`
/// is 512 contiguous bytes (no bank conflict): 8 stores where a float each took 32 (ncu's
/// source counters put the staging's 4-byte stores among the consumers' largest stalls,
/// `bench/experiments/h200-logs/53c2c9a-h100-v23a-ncu-bwd-fused-sass.csv.gz`).
#[inline(always)]
fn stage_dq(staging: *mut f32, acc: &[f32; 32], t: usize) {
    let t = hint::recompute(t as u32) as usize;
    unroll_8!(8, |j| {
        // SAFETY: inside the consumer's staging (`4 (128 j + t) + 4 <= DQ_PART`), 16-byte
        // aligned (the staging is); its last reduction has read it (the caller's wait and
        // barrier).
        unsafe {
            vector::store::<f32, 4>(
                staging,
                4 * (128 * j + t),
                [acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]],
            )
        };
    });
}

/// Threads of [`attention_bwd_wgmma_dq_convert`](fn@attention_bwd_wgmma_dq_convert): one per
/// 8 dims of two query rows (`16 w + g` and `+ 8` of a 64-row tile) of each (batch, head), over
/// the tiles that hold the `q_len` rows.
pub const fn dq_convert_threads(batch: usize, q_len: usize, heads: usize, head_dim: usize) -> usize {
    batch * q_len.div_ceil(BWD_WGMMA_Q_TILE) * (BWD_WGMMA_Q_TILE / 2) * heads * (head_dim / 8)
}

/// The fused backward's last step: `dq = scale dq_accum`, rounded to `T`, from the f32 buffer
/// in fragment order ([`dq_accum_index`]) to the contiguous `[batch, q_len, heads, head_dim]`
/// `dq` (FlashAttention-3's postprocess).
///
/// Thread `x` (of `threads = `[`dq_convert_threads`]) takes dims `8 j ..+ 8` (`j < head_dim /
/// 8`, the part `j / 8`) of rows `16 w + g` and `+ 8` (`k = 8 w + g < 32`) of query tile `qt` of
/// head `h` of batch `b`, `x` read as `((b, qt), k, h, j)` with `j` fastest. In fragment order
/// those 16 floats are the pieces of `j % 8` of the quad `t0 = 4 k ..+ 4`: 64 contiguous bytes
/// (`4 (128 (j % 8) + t0) ..+ 16` of the part), two whole sectors; lane `q`'s piece holds row
/// `16 w + g`'s dims `8 j + 2 q ..+ 2` and row `+ 8`'s. It scales them and stores each row's
/// chunk as one 16-byte store (rows below `q_len`). A warp's stores are whole rows of consecutive
/// heads, 512 contiguous bytes per row at `D = 128`. Coordinates by shifts and 32-bit divisions
/// (rows below 2^32: the buffer's `4 head_dim` bytes a row bound them).
///
/// Global memory: 64 bytes read and 32 written per thread.
///
/// Launch: `ceil(threads / DQ_CONVERT_BLOCK)` blocks of [`DQ_CONVERT_BLOCK`] threads, no shared
/// memory.
///
/// # Safety
/// `dq_accum` holds [`bwd_wgmma_dq_accum_len`]`(batch, heads, q_pad, head_dim)` floats, 16-byte
/// aligned, `dq` `batch q_len heads head_dim` elements, 16-byte aligned; `head_dim` is 64 or 128,
/// `q_pad` a multiple of 64 at least `q_len`, `threads = `[`dq_convert_threads`]`(batch, q_len,
/// heads, head_dim)`.
///
/// Instances: `attention_bwd_wgmma_dq_convert_bf16`, `attention_bwd_wgmma_dq_convert_f16`.
// Barriers: none.
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(
            attention_bwd_wgmma_dq_convert_bf16 = bf16,
            attention_bwd_wgmma_dq_convert_f16 = f16,
        ),
        block(DQ_CONVERT_BLOCK),
        barriers(0)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_wgmma_dq_convert<T: BwdWgmmaElement>(
    dq_accum: *const f32,
    dq: *mut T,
    threads: usize,
    q_len: usize,
    q_pad: usize,
    heads: usize,
    head_dim: usize,
    scale: f32,
) {
    let x = thread::index_1d();
    if x >= threads {
        return;
    }
    // `head_dim / 8` chunks a row: 8 or 16, a shift; 32 row pairs a tile.
    let shift = if head_dim > 64 { 4 } else { 3 };
    let j = x & ((1 << shift) - 1);
    let rest = (x >> shift) as u32;
    let (h, rest) = (rest % heads as u32, rest / heads as u32);
    let (k, tile) = ((rest % 32) as usize, rest / 32);
    let q_tiles = q_len.div_ceil(BWD_WGMMA_Q_TILE) as u32;
    let (qt, b) = ((tile % q_tiles) as usize, (tile / q_tiles) as usize);
    let (w, g) = (k / 8, k % 8);
    let i = qt * BWD_WGMMA_Q_TILE + 16 * w + g;
    let at = dq_accum_index(b * heads + h as usize, i, 8 * j, q_pad, head_dim);
    // SAFETY: `at` is the first float of quad `t0 = 4 k`'s piece of `j % 8` (row `i`'s dim `8
    // j`, accumulator 0 of lane 0), so `at ..+ 16` lie in the buffer (`i < q_pad`, the
    // contract), 16-byte aligned; rows `i` and `i + 8` of head `h` of batch `b` in `dq`, chunk
    // `j`, 16-byte aligned, stored only below `q_len`.
    unsafe {
        let e: [[f32; 4]; 4] = core::array::from_fn(|q| vector::load::<f32, 4>(dq_accum, at + 4 * q));
        let row = |r: usize| -> [u32; 4] {
            core::array::from_fn(|q| T::pack([e[q][2 * r] * scale, e[q][2 * r + 1] * scale]))
        };
        let out = ((b * q_len + i) * heads + h as usize) * head_dim + 8 * j;
        if i < q_len {
            vector::store::<u32, 4>(dq.cast::<u32>(), out / 2, row(0));
        }
        if i + 8 < q_len {
            vector::store::<u32, 4>(dq.cast::<u32>(), (out + 8 * heads * head_dim) / 2, row(1));
        }
    }
}
