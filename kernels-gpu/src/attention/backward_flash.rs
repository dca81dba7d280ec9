//! The fused rung of attention's backward: FlashAttention-2's backward on `mma.sync`
//! `m16n8k16` (bf16 or f16 operands, f32 accumulators), for head dims 64 and 128, without
//! atomics: one kernel per 64-key tile computing `dK` and `dV`
//! ([`attention_bwd_flash_dkdv`](fn@attention_bwd_flash_dkdv)), one per 64-query tile computing
//! `dQ` ([`attention_bwd_flash_dq`](fn@attention_bwd_flash_dq)), each recomputing the
//! probabilities from `Q`, `K` and the saved log-sum-exp (`lse2` and `delta` of
//! [`attention_bwd_prep`](fn@super::attention_bwd_prep)).
//!
//! # Design
//! * **Block**: 4 warps (128 threads), 16 rows of the block's 64 each (keys for `dK`/`dV`,
//!   queries for `dQ`); a lane holds the `m16n8` accumulator elements of rows `g`, `g + 8` of
//!   its warp's 16 (`g = lane / 4`) at columns `8 j + 2 (lane % 4) ..+ 2`.
//! * **`dK`, `dV`**: the block's `K` and `V` tiles are copied once; the `Q` and `dO` tiles of
//!   each query tile it visits (over the query heads of the key/value head's group, then the
//!   query tiles), with their 64 `lse2` and `delta`, are double-buffered by `cp.async`, one
//!   barrier per tile. Per part of the tile's queries (`dkdv_sub`) and warp: `S^T = K Q^T` and
//!   `dP^T = V dO^T`, then in one pass `P^T = exp2(S^T scale_log2 - lse2)` and `dS^T = P^T
//!   (dP^T - delta)` in their place, then `dV += P^T dO` and `dK += dS^T Q` (each packed to 16
//!   bits from the accumulators); `K` and `V` fragments reread from shared memory each tile, so
//!   that the two `16 x D` accumulators and the two products fit in registers at `D = 128`.
//!   (Computing `dP^T` before `P^T` was used, rather than after `dV`, ran the head-dim-64
//!   kernel 5-7% faster on an H100 and level at 128 [derived: run by run],
//!   `bench/experiments/third-wave/6313cdf-flash-ab-*.jsonl`, and leaves no score derivative
//!   to keep from `P` to `dS`.)
//! * **`dQ`**: the block's `Q` and `dO` tiles copied once, `K` and `V` tiles double-buffered as
//!   in the forward (`super::flash`); per tile and warp: `S = Q K^T`, `P`, `dP = dO V^T`,
//!   `dS = P (dP - delta)`, `dQ += dS K`.
//! * **Causal**: the `dK`/`dV` block visits the query tiles from the first that sees its first
//!   key, the `dQ` block the key tiles its last row sees; only tiles crossing the diagonal (and
//!   ragged tails) are masked element by element.
//! * **Masks** (the `general` instances, [`General`]: every shipped mask, varlen batches too):
//!   the `dK`/`dV` block visits the query tiles that meet [`Mask::rows`] of its keys (their
//!   union over the group's heads), the `dQ` block the key tiles that meet [`Mask::keys`] of
//!   its rows; a tile that [`Mask::tile`] (for `dK`/`dV`) or [`Mask::full_keys`] (for `dQ`)
//!   does not call whole is tested element by element ([`Mask::keep`]). Where the mask modifies
//!   scores (ALiBi, the soft cap), `P` takes the mask's score of `S scale` and `dS` is
//!   multiplied by its derivative ([`Mask::score_grad`]), computed with `P`; the `dK`/`dV`
//!   kernel asks the mask about each query row ([`Mask::row`]) only on the tiles it tests or
//!   whose scores it modifies: on an H100 the window and the documents ran faster than with
//!   the mask asked on every tile, ALiBi and the soft cap a little slower
//!   (`bench/experiments/third-wave/645ea16-head-ab-*.jsonl`,
//!   `0589db3-bwd-masks-h100.jsonl`; BENCHMARKS.md, thirty-fifth round). The unmasked
//!   instances ([`NoMask`]) read `causal` instead and compile none of this.
//! * **Traffic** (each kernel): per block `2 * 64 D` elements of its own tiles, `2 * 64 D` per
//!   tile visited of the other side's; `2 * 64 D` elements written. Flops: `4 * 64 * 64 D` per
//!   tile pair for `dK`/`dV` (`S`, `dV`, `dP`, `dK`) and `4 * 64 * 64 D` for `dQ` (`S`, `dP`,
//!   `dQ`, and `S` again): 8 products where the forward has 2, so the backward costs 2.5 times
//!   the forward's flops as FlashAttention counts them (the recomputed `S` not counted) and runs
//!   `2 * 64 (D + 8) * 6` bytes of shared memory ([`bwd_flash_shared_bytes`]).
//!
//! # Rounding
//! `P` and `dS` are rounded to the 16-bit type for the products that take them as operands
//! (as FlashAttention does); everything else is f32.
//!
//! # Determinism
//! No atomics: each output element is summed by one thread in a fixed order (the `dK`/`dV` of
//! a key/value head over its query heads in order), so a call gives the same bits every time.

use super::tiles::{a_fragment, b_pair, b_pair_trans, copy_tile, pack_a, PAD, TILE_ROWS};
use super::{fresh_mask, visible_keys, AttentionElement};
use crate::gpu::async_copy::{self, cp_async_16};
use crate::gpu::attention::{General, Mask, NoMask, TileMask};
use crate::gpu::{bf16, f16, hint, math, mem, shared, thread, warp};
use crate::kernel;

/// Threads per block of the fused backward kernels: 4 warps of 16 rows.
pub const BWD_FLASH_BLOCK: u32 = 128;
/// Rows (keys or queries) per block of the fused backward kernels, and per tile they visit.
pub const BWD_FLASH_TILE: usize = TILE_ROWS;
/// The head dims with a fused backward.
pub const BWD_FLASH_HEAD_DIMS: [usize; 2] = [64, 128];

/// Lanes of a warp.
const WARP: usize = warp::SIZE as usize;
/// Largest head dim of the fused kernels (the register arrays' size).
const MAX_D: usize = 128;
/// Columns of the `16 x 64` products computed at once by the `dQ` kernel (half a tile), and at
/// most by the `dK`/`dV` kernel ([`dkdv_sub`]): next to the `16 x D` accumulators at `D = 128`,
/// whole-tile products spill on sm_90.
const SUB: usize = 32;

/// Columns of the `16 x 64` products computed at once by the `dK`/`dV` kernel at head dim `d`:
/// 16 at `d = 128`, where its two `16 x 128` accumulators take 128 registers (32 spills 12
/// bytes on sm_90 with ptxas 13.0), else 32.
const fn dkdv_sub(d: usize) -> usize {
    if d > 64 {
        16
    } else {
        SUB
    }
}

/// Dynamic shared memory of either fused backward kernel for head dim `d`: six 64-row tiles of
/// `d + 8` 16-bit elements (the block's own two, two stages of the other side's two) and two
/// stages of 64 `lse2` and 64 `delta`.
pub const fn bwd_flash_shared_bytes(d: usize) -> usize {
    6 * TILE_ROWS * (d + PAD) * 2 + 4 * TILE_ROWS * 4
}

/// Attention backward, fused, `dK` and `dV` (the module documentation has the design).
///
/// Block `(x, kvh, b)` computes keys `64 x ..+ 64` of key/value head `kvh` of batch `b`. Thread
/// `tid` copies pieces `tid + 128 l` of every 64-row tile, and threads 0..32 the tile's `lse2`
/// and `delta` (16 bytes each). Warp `w` computes keys `16 w ..+ 16` of the block's. For each
/// visited query tile (query heads `kvh group ..+ group`, then the tiles from the first that
/// sees key `64 x`) it waits for the tile's copies and at the block's barrier, issues the next
/// tile's, and adds the tile's terms to its `dK` and `dV` accumulators. Then it stores `scale
/// dK` and `dV` (pairs of elements) for its keys below `kv_len`.
///
/// With a mask (`M::MASKS`) the visited tiles are those that meet the mask's rows of the
/// block's keys, `causal` is not read, and `P^T`, `dS^T` follow the mask (the module
/// documentation).
///
/// Launch: grid `(ceil(kv_len / 64), kv_heads, batch)`, [`BWD_FLASH_BLOCK`] threads,
/// [`bwd_flash_shared_bytes`]`(D)` bytes of dynamic shared memory; an sm_80 or newer GPU.
///
/// # Safety
/// * As [`attention_bwd_rows_dkdv`](fn@super::attention_bwd_rows_dkdv) with `head_dim = D`,
///   `kv_heads = gridDim.y` and `q_pad` a multiple of 64 (`q_pad >= q_len`); the mask's
///   arguments as there (read by the [`General`] instances only).
/// * `q`, `k`, `v`, `d_o`, `lse2`, `delta` 16-byte aligned, every stride a multiple of 8
///   elements; `dk`, `dv` 4-byte aligned.
///
/// Instances: `attention_bwd_flash_dkdv_d<D>_<T>` ([`NoMask`], `causal`) and
/// `attention_bwd_flash_dkdv_general_d<D>_<T>` ([`General`]) for `D` 64 and 128, `T` bf16 and
/// f16.
// Barriers: one after the prologue's copies, one per query tile.
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(
            attention_bwd_flash_dkdv_d64_bf16 = (bf16, 64, NoMask),
            attention_bwd_flash_dkdv_d128_bf16 = (bf16, 128, NoMask),
            attention_bwd_flash_dkdv_d64_f16 = (f16, 64, NoMask),
            attention_bwd_flash_dkdv_d128_f16 = (f16, 128, NoMask),
            attention_bwd_flash_dkdv_general_d64_bf16 = (bf16, 64, General),
            attention_bwd_flash_dkdv_general_d128_bf16 = (bf16, 128, General),
            attention_bwd_flash_dkdv_general_d64_f16 = (f16, 64, General),
            attention_bwd_flash_dkdv_general_d128_f16 = (f16, 128, General),
        ),
        block(BWD_FLASH_BLOCK),
        barriers(2)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn attention_bwd_flash_dkdv<T: AttentionElement, const D: usize, M: Mask>(
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dk: *mut T,
    dv: *mut T,
    q_len: usize,
    kv_len: usize,
    q_pad: usize,
    group: usize,
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
    mask_data: *const i32,
    mask_int: usize,
    mask_float: f32,
) {
    const {
        assert!(
            D % 16 == 0 && D <= MAX_D,
            "whole MMA steps, registers for D <= 128"
        );
        assert!(
            (TILE_ROWS * D / 8) % BWD_FLASH_BLOCK as usize == 0,
            "whole pieces per thread"
        );
    }
    let tid = thread::thread_idx_x() as usize;
    let (w, lane) = (tid / WARP, tid % WARP);
    let (g, t4) = (lane / 4, lane % 4);
    let threads = BWD_FLASH_BLOCK as usize;
    let k0 = thread::block_idx_x() as usize * TILE_ROWS;
    let kvh = thread::block_idx_y() as usize;
    let kv_heads = thread::grid_dim_y() as usize;
    let b = thread::block_idx_z() as usize;
    let heads = kv_heads * group;
    let pitch = D + PAD;
    let tile = TILE_ROWS * pitch;

    let smem = shared::dynamic::<crate::gpu::vector::F4>().cast::<u16>();
    let (sk, sv) = (smem, smem.wrapping_add(tile));
    let stage_q = |s: usize| smem.wrapping_add((2 + s) * tile);
    let stage_do = |s: usize| smem.wrapping_add((4 + s) * tile);
    let stats = smem.wrapping_add(6 * tile).cast::<f32>();
    let stage_l = |s: usize| stats.wrapping_add(s * TILE_ROWS);
    let stage_d = |s: usize| stats.wrapping_add((2 + s) * TILE_ROWS);
    let (q16, k16, v16, do16) = (
        q.cast::<u16>(),
        k.cast::<u16>(),
        v.cast::<u16>(),
        d_o.cast::<u16>(),
    );

    // The query tiles of each head: from the first row that sees key `k0` on; with a mask
    // (`M::MASKS`), those that meet the rows that see the block's keys ([`Mask::rows`], their
    // union over the group's heads).
    let q_tiles = q_len.div_ceil(TILE_ROWS);
    let (first_tile, end_tile) = if M::MASKS {
        let mask = fresh_mask::<M>((mask_data, mask_int, mask_float), (q_len, kv_len, heads));
        let (mut lo, mut hi) = (q_len, 0);
        for hh in 0..group {
            // The block's keys: non-empty (the grid's blocks start below `kv_len`).
            let rows = mask.rows(b, kvh * group + hh, k0..(k0 + TILE_ROWS).min(kv_len));
            lo = lo.min(rows.start);
            hi = hi.max(rows.end.min(q_len));
        }
        let first = lo / TILE_ROWS;
        (first, hi.div_ceil(TILE_ROWS).max(first))
    } else {
        let first_row = if causal {
            (k0 + q_len).saturating_sub(kv_len)
        } else {
            0
        };
        ((first_row / TILE_ROWS).min(q_tiles), q_tiles)
    };
    let per_head = end_tile - first_tile;
    let steps = group * per_head;

    // Issues the copies of step `n` (query head, query tile) into stage `s`. The thread's
    // index is recomputed there (`hint::recompute`), so that each piece's offsets are computed
    // per step rather than kept live across the loop (which spills at `D = 128` on sm_90).
    let issue = |n: usize, s: usize| {
        let tid = hint::recompute(tid as u32) as usize;
        let h = kvh * group + n / per_head;
        let q0 = (first_tile + n % per_head) * TILE_ROWS;
        // SAFETY: the stage tiles lie in the dynamic shared memory; the sources per the
        // contract (rows below `q_len` of head `h < heads`).
        unsafe {
            copy_tile::<D>(
                tid,
                threads,
                stage_q(s),
                q16,
                b * q_sb + h * q_sh,
                q_ss,
                q0,
                q_len,
            );
            copy_tile::<D>(
                tid,
                threads,
                stage_do(s),
                do16,
                b * do_sb + h * do_sh,
                do_ss,
                q0,
                q_len,
            );
        }
        if tid < 2 * TILE_ROWS / 4 {
            let (src, dst) = if tid < TILE_ROWS / 4 {
                (lse2, stage_l(s))
            } else {
                (delta, stage_d(s))
            };
            let piece = 4 * (tid % (TILE_ROWS / 4));
            // SAFETY: floats `q0 + piece ..+ 4 <= q_pad` of head `(b, h)`'s statistics, 16-byte
            // aligned (aligned base, `q_pad` and `q0` multiples of 64); `dst` inside the stage.
            unsafe {
                cp_async_16(
                    dst.wrapping_add(piece),
                    src.wrapping_add((b * heads + h) * q_pad + q0 + piece),
                    16,
                )
            };
        }
    };

    // SAFETY: the K and V tiles lie in the dynamic shared memory; rows below `kv_len`.
    unsafe {
        copy_tile::<D>(tid, threads, sk, k16, b * k_sb + kvh * k_sh, k_ss, k0, kv_len);
        copy_tile::<D>(tid, threads, sv, v16, b * v_sb + kvh * v_sh, v_ss, k0, kv_len);
    }
    if steps > 0 {
        issue(0, 0);
    }
    async_copy::commit_group();
    async_copy::wait_pending(0);
    thread::sync_threads();

    let mut dk_acc = [[0.0f32; 4]; MAX_D / 8];
    let mut dv_acc = [[0.0f32; 4]; MAX_D / 8];
    let keys = [k0 + 16 * w + g, k0 + 16 * w + g + 8];
    let sub = dkdv_sub(D);
    for n in 0..steps {
        if n > 0 {
            // Step `n`'s copies (the only group in flight) have landed; after the barrier
            // every thread's are visible, and everyone is done with step `n - 1`'s stage.
            async_copy::wait_pending(0);
            thread::sync_threads();
        }
        if n + 1 < steps {
            issue(n + 1, (n + 1) % 2);
        }
        async_copy::commit_group();
        let st = n % 2;
        let (sq, sdo, sl, sd) = (stage_q(st), stage_do(st), stage_l(st), stage_d(st));
        // The fragments' addresses recomputed per step, as the copies' offsets.
        let lane = hint::recompute(lane as u32) as usize;
        let h = kvh * group + n / per_head;
        let q0 = (first_tile + n % per_head) * TILE_ROWS;
        // The tile is masked element by element unless every pair of it is kept: with a mask,
        // what [`Mask::tile`] says; causal, unless its last key is visible to its first query.
        // The mask made again in each step ([`fresh_mask`]: kept across the loop, its fields
        // spilled at `D = 128`), and whether it modifies this call's scores.
        let mask = fresh_mask::<M>((mask_data, mask_int, mask_float), (q_len, kv_len, heads));
        let score_mod = M::SCORE_MOD && mask.modifies_scores();
        let masked = if M::MASKS {
            let keys = k0..(k0 + TILE_ROWS).min(kv_len);
            mask.tile(b, h, q0..(q0 + TILE_ROWS).min(q_len), keys) != TileMask::Full
        } else {
            causal && k0 + TILE_ROWS - 1 + q_len > q0 + kv_len
        };

        // Parts of `sub` queries, so that `S^T` and `dP^T` take `sub / 2` registers each.
        for part in 0..TILE_ROWS / sub {
            let c0 = sub * part;
            // S^T = K Q^T and dP^T = V dO^T: this warp's 16 keys by the part's `sub` queries
            // (arrays of 16 for the unrolled copies' constant indices; `sub / 8` used).
            let mut p = [[0.0f32; 4]; 16];
            let mut dp = [[0.0f32; 4]; 16];
            unroll_8!(D / 16, |kk| {
                // SAFETY: rows `16 w ..+ 16`, dims `16 kk ..+ 16 <= D` of the K tile; the warp.
                let a = unsafe { a_fragment(sk, pitch, 16 * w, 16 * kk, lane) };
                unroll_8!(sub / 16, |jj| {
                    // SAFETY: query rows `c0 + 16 jj ..+ 16` of the Q tile, dims as above.
                    let [b0, b1] = unsafe { b_pair(sq, pitch, c0 + 16 * jj, 16 * kk, lane) };
                    p[2 * jj] = T::mma(a, b0, p[2 * jj]);
                    p[2 * jj + 1] = T::mma(a, b1, p[2 * jj + 1]);
                });
            });
            unroll_8!(D / 16, |kk| {
                // SAFETY: as for `S^T`, on the V and dO tiles.
                let a = unsafe { a_fragment(sv, pitch, 16 * w, 16 * kk, lane) };
                unroll_8!(sub / 16, |jj| {
                    // SAFETY: as for `S^T`.
                    let [b0, b1] = unsafe { b_pair(sdo, pitch, c0 + 16 * jj, 16 * kk, lane) };
                    dp[2 * jj] = T::mma(a, b0, dp[2 * jj]);
                    dp[2 * jj + 1] = T::mma(a, b1, dp[2 * jj + 1]);
                });
            });

            // P^T = exp2(S^T scale_log2 - lse2) in place of `S^T`, and dS^T = P^T (dP^T -
            // delta) in place of `dP^T`; with a mask, the mask's score of `S^T scale` and `dS^T`
            // times its derivative ([`Mask::score_grad`]) where it modifies scores, dropped
            // pairs 0. Both products' operands computed in one pass (the derivative is not kept
            // from `P` to `dS`).
            unroll_8!(sub / 8, |j| {
                unroll_8!(2, |e| {
                    let qi = c0 + 8 * j + 2 * t4 + e;
                    // SAFETY: `qi < 64` of the stage's statistics.
                    let (l2, dd) = unsafe { (mem::load(sl, qi), mem::load(sd, qi)) };
                    if M::MASKS && (masked || score_mod) {
                        // The mask as the query row sees it (a row past `q_len`, whose `Q` and
                        // `dO` are zeros, as the last one); a tile it keeps whole without
                        // modifying scores takes the plain pass below.
                        let row = (q0 + qi).min(q_len - 1);
                        let rm = mask.row(b, h, row);
                        unroll_8!(2, |hh| {
                            let key = keys[hh];
                            let raw = p[j][2 * hh + e];
                            let (mut u, mut grad) = (raw * scale_log2, 1.0);
                            if score_mod {
                                let x = raw * scale;
                                u = rm.score(x, b, h, row, key) * math::LOG2_E;
                                grad = rm.score_grad(x, b, h, row, key);
                            }
                            if masked && !(key < kv_len && rm.keep(b, h, row, key)) {
                                u = f32::NEG_INFINITY;
                            }
                            let pr = math::exp2(u - l2);
                            p[j][2 * hh + e] = pr;
                            dp[j][2 * hh + e] = if score_mod {
                                pr * (dp[j][2 * hh + e] - dd) * grad
                            } else {
                                pr * (dp[j][2 * hh + e] - dd)
                            };
                        });
                    } else {
                        unroll_8!(2, |hh| {
                            let mut u = p[j][2 * hh + e] * scale_log2;
                            if masked && keys[hh] + q_len > q0 + qi + kv_len {
                                u = f32::NEG_INFINITY;
                            }
                            let pr = math::exp2(u - l2);
                            p[j][2 * hh + e] = pr;
                            dp[j][2 * hh + e] = pr * (dp[j][2 * hh + e] - dd);
                        });
                    }
                });
            });

            // dV += P^T dO and dK += dS^T Q: the part's queries are the inner dimension.
            unroll_8!(sub / 16, |kk| {
                let a = pack_a::<T>(p[2 * kk], p[2 * kk + 1]);
                unroll_8!(D / 16, |jj| {
                    // SAFETY: query rows `c0 + 16 kk ..+ 16`, dims `16 jj ..+ 16` of the dO
                    // tile.
                    let [b0, b1] = unsafe { b_pair_trans(sdo, pitch, c0 + 16 * kk, 16 * jj, lane) };
                    dv_acc[2 * jj] = T::mma(a, b0, dv_acc[2 * jj]);
                    dv_acc[2 * jj + 1] = T::mma(a, b1, dv_acc[2 * jj + 1]);
                });
            });
            unroll_8!(sub / 16, |kk| {
                let a = pack_a::<T>(dp[2 * kk], dp[2 * kk + 1]);
                unroll_8!(D / 16, |jj| {
                    // SAFETY: query rows `c0 + 16 kk ..+ 16`, dims `16 jj ..+ 16` of the Q tile.
                    let [b0, b1] = unsafe { b_pair_trans(sq, pitch, c0 + 16 * kk, 16 * jj, lane) };
                    dk_acc[2 * jj] = T::mma(a, b0, dk_acc[2 * jj]);
                    dk_acc[2 * jj + 1] = T::mma(a, b1, dk_acc[2 * jj + 1]);
                });
            });
        }
    }

    unroll_8!(2, |hh| {
        let j = keys[hh];
        if j < kv_len {
            let row = ((b * kv_len + j) * kv_heads + kvh) * D;
            let (dk_row, dv_row) = (
                dk.wrapping_add(row).cast::<u32>(),
                dv.wrapping_add(row).cast::<u32>(),
            );
            unroll_8!(2, |hi| {
                unroll_8!(8, |lo| {
                    let c = 8 * hi + lo;
                    if c < D / 8 {
                        let dk2 = T::pack([dk_acc[c][2 * hh] * scale, dk_acc[c][2 * hh + 1] * scale]);
                        let dv2 = T::pack([dv_acc[c][2 * hh], dv_acc[c][2 * hh + 1]]);
                        // SAFETY: dims `8c + 2t4 ..+ 2 < D` of row `(b, j, kvh)` of the
                        // contiguous outputs, 4-byte aligned (aligned base, even offsets).
                        unsafe {
                            mem::store(dk_row, (8 * c + 2 * t4) / 2, dk2);
                            mem::store(dv_row, (8 * c + 2 * t4) / 2, dv2);
                        }
                    }
                });
            });
        }
    });
}

/// Attention backward, fused, `dQ` (the module documentation has the design).
///
/// Block `(x, h, b)` computes query rows `64 (gridDim.x - 1 - x) ..+ 64` of head `h` of batch
/// `b` (the longest causal blocks first). Thread `tid` copies pieces `tid + 128 l` of every
/// 64-row tile; warp `w` computes rows `16 w ..+ 16`, lane `4g + t` holding rows `g`, `g + 8` of
/// them with their `lse2` and `delta`. Per key tile its last row sees, it waits for the tile's
/// copies and at the block's barrier, issues the next tile's, and adds `dS K` to its `dQ`
/// accumulators; then stores `scale dQ` (pairs of elements) for its rows below `q_len`. With a
/// mask (`M::MASKS`) the key tiles are those that meet the mask's keys of the block's rows,
/// `causal` is not read, and `P`, `dS` follow the mask (the module documentation).
///
/// Launch: grid `(ceil(q_len / 64), heads, batch)`, [`BWD_FLASH_BLOCK`] threads,
/// [`bwd_flash_shared_bytes`]`(D)` bytes of dynamic shared memory; an sm_80 or newer GPU.
///
/// # Safety
/// * As [`attention_bwd_rows_dq`](fn@super::attention_bwd_rows_dq) with `head_dim = D`,
///   `heads = gridDim.y` and `rows = batch * heads * q_len`; the mask's arguments as there
///   (read by the [`General`] instances only).
/// * `q`, `k`, `v`, `d_o` 16-byte aligned, every stride a multiple of 8 elements; `dq` 4-byte
///   aligned.
///
/// Instances: `attention_bwd_flash_dq_d<D>_<T>` ([`NoMask`], `causal`) and
/// `attention_bwd_flash_dq_general_d<D>_<T>` ([`General`]) for `D` 64 and 128, `T` bf16 and
/// f16.
// Barriers: one after the prologue's copies, one per key tile.
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(
            attention_bwd_flash_dq_d64_bf16 = (bf16, 64, NoMask),
            attention_bwd_flash_dq_d128_bf16 = (bf16, 128, NoMask),
            attention_bwd_flash_dq_d64_f16 = (f16, 64, NoMask),
            attention_bwd_flash_dq_d128_f16 = (f16, 128, NoMask),
            attention_bwd_flash_dq_general_d64_bf16 = (bf16, 64, General),
            attention_bwd_flash_dq_general_d128_bf16 = (bf16, 128, General),
            attention_bwd_flash_dq_general_d64_f16 = (f16, 64, General),
            attention_bwd_flash_dq_general_d128_f16 = (f16, 128, General),
        ),
        block(BWD_FLASH_BLOCK),
        barriers(2)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn attention_bwd_flash_dq<T: AttentionElement, const D: usize, M: Mask>(
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dq: *mut T,
    q_len: usize,
    kv_len: usize,
    q_pad: usize,
    group: usize,
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
    mask_data: *const i32,
    mask_int: usize,
    mask_float: f32,
) {
    const {
        assert!(
            D % 16 == 0 && D <= MAX_D,
            "whole MMA steps, registers for D <= 128"
        );
        assert!(
            (TILE_ROWS * D / 8) % BWD_FLASH_BLOCK as usize == 0,
            "whole pieces per thread"
        );
    }
    let tid = thread::thread_idx_x() as usize;
    let (w, lane) = (tid / WARP, tid % WARP);
    let (g, t4) = (lane / 4, lane % 4);
    let threads = BWD_FLASH_BLOCK as usize;
    let q_tiles = thread::grid_dim_x() as usize;
    let q0 = (q_tiles - 1 - thread::block_idx_x() as usize) * TILE_ROWS;
    let h = thread::block_idx_y() as usize;
    let heads = thread::grid_dim_y() as usize;
    let b = thread::block_idx_z() as usize;
    let kvh = h / group;
    let pitch = D + PAD;
    let tile = TILE_ROWS * pitch;

    let smem = shared::dynamic::<crate::gpu::vector::F4>().cast::<u16>();
    let (sq, sdo) = (smem, smem.wrapping_add(tile));
    let stage_k = |s: usize| smem.wrapping_add((2 + s) * tile);
    let stage_v = |s: usize| smem.wrapping_add((4 + s) * tile);
    let (q16, k16, v16, do16) = (
        q.cast::<u16>(),
        k.cast::<u16>(),
        v.cast::<u16>(),
        d_o.cast::<u16>(),
    );
    let (k_base, v_base) = (b * k_sb + kvh * k_sh, b * v_sb + kvh * v_sh);

    let mask = launch_mask!(M, mask_data, mask_int, mask_float, q_len, kv_len, heads);
    let score_mod = M::SCORE_MOD && mask.modifies_scores();
    // The key tiles the block visits, and the keys every one of its rows sees (tiles inside
    // them need no test): with a mask (`M::MASKS`), the tiles that meet [`Mask::keys`] of the
    // block's rows and [`Mask::full_keys`]; causal, the keys its last row sees and those its
    // first row sees.
    let q_rows = q0..(q0 + TILE_ROWS).min(q_len);
    let (first_kt, end_kt, full) = if M::MASKS {
        let keys = mask.keys(b, h, q_rows.clone());
        let first = keys.start / TILE_ROWS;
        let end = keys.end.min(kv_len).div_ceil(TILE_ROWS).max(first);
        (first, end, mask.full_keys(b, h, q_rows.clone()))
    } else {
        let last_row = q_rows.end - 1;
        let end = visible_keys(last_row, q_len, kv_len, causal).div_ceil(TILE_ROWS);
        (0, end, 0..visible_keys(q0, q_len, kv_len, causal))
    };
    let kv_tiles = end_kt - first_kt;

    // SAFETY (the copies): the tiles lie in the dynamic shared memory; the sources per the
    // contract (rows below `q_len` of head `h`, below `kv_len` of head `kvh`).
    unsafe {
        copy_tile::<D>(tid, threads, sq, q16, b * q_sb + h * q_sh, q_ss, q0, q_len);
        copy_tile::<D>(tid, threads, sdo, do16, b * do_sb + h * do_sh, do_ss, q0, q_len);
        if kv_tiles > 0 {
            let row0 = first_kt * TILE_ROWS;
            copy_tile::<D>(tid, threads, stage_k(0), k16, k_base, k_ss, row0, kv_len);
            copy_tile::<D>(tid, threads, stage_v(0), v16, v_base, v_ss, row0, kv_len);
        }
    }
    async_copy::commit_group();

    let rows = [q0 + 16 * w + g, q0 + 16 * w + g + 8];
    let limits = rows.map(|i| visible_keys(i, q_len, kv_len, causal));
    // With a mask: the mask as each of the lane's two rows sees it (a row past `q_len`, not
    // stored, as the last one).
    let mask_rows = rows.map(|i| i.min(q_len - 1));
    let masks = mask_rows.map(|i| mask.row(b, h, i));
    // SAFETY: rows below `q0 + 64 <= q_pad` of head `(b, h)`'s statistics.
    let stat = |x: *const f32, i: usize| unsafe { mem::load(x, (b * heads + h) * q_pad + i) };
    let l2 = rows.map(|i| stat(lse2, i));
    let dd = rows.map(|i| stat(delta, i));
    async_copy::wait_pending(0);
    thread::sync_threads();

    let mut acc = [[0.0f32; 4]; MAX_D / 8];
    for n in 0..kv_tiles {
        let t = first_kt + n;
        if n > 0 {
            // As in the forward: tile `t`'s copies have landed and are visible after the
            // barrier, and everyone is done with tile `t - 1`'s stage.
            async_copy::wait_pending(0);
            thread::sync_threads();
        }
        if n + 1 < kv_tiles {
            let (s, row0) = ((n + 1) % 2, (t + 1) * TILE_ROWS);
            // SAFETY: as the prologue's copies.
            unsafe {
                copy_tile::<D>(tid, threads, stage_k(s), k16, k_base, k_ss, row0, kv_len);
                copy_tile::<D>(tid, threads, stage_v(s), v16, v_base, v_ss, row0, kv_len);
            }
        }
        async_copy::commit_group();
        let (sk, sv) = (stage_k(n % 2), stage_v(n % 2));

        // Two halves of 32 keys, so that `S` and `dP` take 16 registers each.
        for half in 0..TILE_ROWS / SUB {
            let c0 = SUB * half;
            // S = Q K^T and dP = dO V^T: this warp's 16 rows by the half's 32 keys.
            let mut p = [[0.0f32; 4]; SUB / 8];
            let mut dp = [[0.0f32; 4]; SUB / 8];
            unroll_8!(D / 16, |kk| {
                // SAFETY: rows `16 w ..+ 16`, dims `16 kk ..+ 16 <= D` of the Q and dO tiles,
                // key rows `c0 + 16 jj ..+ 16` of the K and V tiles; the whole warp is here.
                let (aq, ado) = unsafe {
                    (
                        a_fragment(sq, pitch, 16 * w, 16 * kk, lane),
                        a_fragment(sdo, pitch, 16 * w, 16 * kk, lane),
                    )
                };
                unroll_8!(2, |jj| {
                    // SAFETY: as above.
                    let ([k0, k1], [v0, v1]) = unsafe {
                        (
                            b_pair(sk, pitch, c0 + 16 * jj, 16 * kk, lane),
                            b_pair(sv, pitch, c0 + 16 * jj, 16 * kk, lane),
                        )
                    };
                    p[2 * jj] = T::mma(aq, k0, p[2 * jj]);
                    p[2 * jj + 1] = T::mma(aq, k1, p[2 * jj + 1]);
                    dp[2 * jj] = T::mma(ado, v0, dp[2 * jj]);
                    dp[2 * jj + 1] = T::mma(ado, v1, dp[2 * jj + 1]);
                });
            });

            // dS = P (dP - delta), P = exp2(S scale_log2 - lse2) (the mask's score where it
            // modifies scores, and `dS` times its derivative), dropped keys 0.
            let key0 = t * TILE_ROWS + c0;
            let masked = key0 < full.start || key0 + SUB > full.end.min(kv_len);
            unroll_8!(2, |hh| {
                unroll_8!(SUB / 8, |j| {
                    unroll_8!(2, |e| {
                        let key = key0 + 8 * j + 2 * t4 + e;
                        let raw = p[j][2 * hh + e];
                        let (mut u, mut grad) = (raw * scale_log2, 1.0);
                        if score_mod {
                            let x = raw * scale;
                            u = masks[hh].score(x, b, h, mask_rows[hh], key) * math::LOG2_E;
                            grad = masks[hh].score_grad(x, b, h, mask_rows[hh], key);
                        }
                        let keep = if M::MASKS {
                            key < kv_len && masks[hh].keep(b, h, mask_rows[hh], key)
                        } else {
                            key < limits[hh]
                        };
                        if masked && !keep {
                            u = f32::NEG_INFINITY;
                        }
                        let pr = math::exp2(u - l2[hh]);
                        p[j][2 * hh + e] = if score_mod {
                            pr * (dp[j][2 * hh + e] - dd[hh]) * grad
                        } else {
                            pr * (dp[j][2 * hh + e] - dd[hh])
                        };
                    });
                });
            });

            // dQ += dS K: the half's keys are the inner dimension.
            unroll_8!(2, |kk| {
                let a = pack_a::<T>(p[2 * kk], p[2 * kk + 1]);
                unroll_8!(D / 16, |jj| {
                    // SAFETY: key rows `c0 + 16 kk ..+ 16`, dims `16 jj ..+ 16` of the K tile.
                    let [b0, b1] = unsafe { b_pair_trans(sk, pitch, c0 + 16 * kk, 16 * jj, lane) };
                    acc[2 * jj] = T::mma(a, b0, acc[2 * jj]);
                    acc[2 * jj + 1] = T::mma(a, b1, acc[2 * jj + 1]);
                });
            });
        }
    }

    unroll_8!(2, |hh| {
        let i = rows[hh];
        if i < q_len {
            let dq_row = dq.wrapping_add(((b * q_len + i) * heads + h) * D).cast::<u32>();
            unroll_8!(2, |hi| {
                unroll_8!(8, |lo| {
                    let c = 8 * hi + lo;
                    if c < D / 8 {
                        let pair = T::pack([acc[c][2 * hh] * scale, acc[c][2 * hh + 1] * scale]);
                        // SAFETY: dims `8c + 2t4 ..+ 2 < D` of row `(b, i, h)` of the
                        // contiguous `dq`, 4-byte aligned.
                        unsafe { mem::store(dq_row, (8 * c + 2 * t4) / 2, pair) };
                    }
                });
            });
        }
    });
}
