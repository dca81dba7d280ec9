//! Attention backward, its preparation and its tutorial rung. With `P = exp(scale Q K^T - lse)`
//! the forward's probabilities (recomputed from `q`, `k` and the saved log-sum-exp) and `dO`
//! the output's gradient:
//!
//! ```text
//! D_i  = sum_d dO[i, d] O[i, d]              (attention_bwd_prep)
//! dV_j = sum_i P_ij dO_i
//! dS_ij = P_ij (dO_i . V_j - D_i)
//! dQ_i = scale sum_j dS_ij K_j               (attention_bwd_rows_dq: a warp per query row)
//! dK_j = scale sum_i dS_ij Q_i               (attention_bwd_rows_dkdv: a warp per key row)
//! ```
//!
//! where `dK` and `dV` of a key/value head sum over the query heads of its group. The sums run
//! over the pairs the mask keeps. Every thread sums in a fixed order and no two write one
//! element: the results are the same bits on every run.

use super::AttentionElement;
use crate::gpu::attention::{General, Mask};
use crate::gpu::{bf16, f16, math, mem, thread, vector, warp};
use crate::kernel;

/// Threads per block of the backward's row kernels: 4 warps, a row each.
pub const BWD_ROWS_BLOCK: u32 = 128;

/// Rows per block of the backward's row kernels.
pub const BWD_ROWS_PER_BLOCK: u32 = BWD_ROWS_BLOCK / warp::SIZE;

/// The backward's per-row statistics (`lse2`, `delta`) hold the query rows of each (batch,
/// head) padded to a multiple of this (the fused rung's query tile), so that the fused rung
/// copies them in whole 16-byte pieces.
pub const BWD_Q_PAD: usize = 64;

/// Dimensions of the head one lane holds at most: `MAX_HEAD_DIM / 32`.
const LANE_DIMS: usize = super::MAX_HEAD_DIM / warp::SIZE as usize;

/// Lanes of a warp that share one row of [`attention_bwd_prep`](fn@attention_bwd_prep) at head
/// dim `head_dim`: one per 8 dims, rounded up to a power of two (16 at 128, 8 at 64, 32 from 136
/// to 256), so that a warp takes `32 / prep_lanes` rows.
pub const fn prep_lanes(head_dim: usize) -> usize {
    let chunks = head_dim.div_ceil(8);
    let mut lanes = 1;
    while lanes < chunks && lanes < warp::SIZE as usize {
        lanes *= 2;
    }
    lanes
}

/// Padded rows per block of [`attention_bwd_prep`](fn@attention_bwd_prep) at head dim
/// `head_dim` (blocks of [`BWD_ROWS_BLOCK`] threads): the host's launch and the kernel agree on it.
pub const fn prep_rows_per_block(head_dim: usize) -> usize {
    BWD_ROWS_PER_BLOCK as usize * (warp::SIZE as usize / prep_lanes(head_dim))
}

/// Padded row `r`'s `(b, h, i)` (rows ordered `(b, h, i)` with `i < q_pad`): by 32-bit
/// divisions where `narrow` (the caller's `padded_rows <= u32::MAX`), 64-bit ones otherwise.
#[inline(always)]
pub fn padded_row_coords(r: usize, q_pad: usize, heads: usize, narrow: bool) -> (usize, usize, usize) {
    if narrow {
        let (r, q_pad, heads) = (r as u32, q_pad as u32, heads as u32);
        let (bh, i) = (r / q_pad, r % q_pad);
        ((bh / heads) as usize, (bh % heads) as usize, i as usize)
    } else {
        let (bh, i) = (r / q_pad, r % q_pad);
        (bh / heads, bh % heads, i)
    }
}

/// The preparation of attention's backward: each query row's `D = dO . O` and log-sum-exp in
/// units of `log2`.
///
/// A group of `g = `[`prep_lanes`]`(head_dim)` consecutive lanes takes padded row `r` (block
/// `x` and group `j` of the block: `r = x `[`prep_rows_per_block`]` + j`) of the `padded_rows
/// = batch * heads * q_pad` rows, ordered `(b, h, i)` with `i < q_pad` (coordinates by 32-bit
/// divisions where the rows fit). For `i < q_len` lane `c` of the group reads dims `8 c ..+ 8`
/// of `d_o[b, i, h, :]` and `o[b, i, h, :]`, one 16-byte load each where `vectors` (else 8
/// scalar loads), multiplies them and the group sums its lanes (`log2 g` shuffles); the group's
/// lane 0 stores the sum at `delta[r]` and `lse[(b h) q_len + i] * log2(e)` at `lse2[r]`, `+inf`
/// where the log-sum-exp is `-inf` (a row that sees no key: its probabilities `exp2(u - lse2)`
/// are then 0, never NaN). Padding rows (`i >= q_len`) get `delta = 0`, `lse2 = +inf`. For `r <
/// accum_rows` lane `c` also zeroes floats `8 c ..+ 8` of the row's `head_dim` floats of
/// `dq_accum` (`dq_accum[r head_dim ..]`, two 16-byte stores): the one-kernel rung's f32 `dQ`,
/// whose rows are these padded rows, zeroed here rather than by a pass of its own; the other
/// rungs pass `accum_rows = 0`.
///
/// Global memory: per row `2 head_dim` elements and 4 bytes read, 8 bytes written (and `4
/// head_dim` bytes of zeros where `r < accum_rows`); a warp's loads of one tensor are whole rows
/// of 16-byte pieces.
///
/// Launch: `ceil(padded_rows / `[`prep_rows_per_block`]`(head_dim))` blocks of
/// [`BWD_ROWS_BLOCK`] threads, no shared memory.
///
/// # Safety
/// * `o` and `d_o` hold `[b, i, h, d]` at `b s_b + i s_s + h s_h + d` (their own strides) for
///   `b < padded_rows / (heads q_pad)`, `i < q_len`, `h < heads`, `d < head_dim`; where
///   `vectors`, both are 16-byte aligned and their strides multiples of 8; `lse` holds `batch *
///   heads * q_len` floats; `lse2` and `delta` `padded_rows` floats each, overlapping no input;
///   `dq_accum` holds `accum_rows * head_dim` floats, 16-byte aligned, overlapping nothing else.
/// * `padded_rows` is a multiple of `heads * q_pad`, `q_len <= q_pad`, `heads, q_pad >= 1`,
///   `head_dim` a multiple of 8 up to 256, `accum_rows <= padded_rows`.
///
/// Instances: `attention_bwd_prep_bf16`, `attention_bwd_prep_f16`.
// Barriers: none (shuffles only).
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(attention_bwd_prep_bf16 = bf16, attention_bwd_prep_f16 = f16),
        block(BWD_ROWS_BLOCK),
        barriers(0)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_prep<T: AttentionElement>(
    o: *const T,
    d_o: *const T,
    lse: *const f32,
    lse2: *mut f32,
    delta: *mut f32,
    dq_accum: *mut f32,
    padded_rows: usize,
    accum_rows: usize,
    q_len: usize,
    q_pad: usize,
    heads: usize,
    head_dim: usize,
    o_sb: usize,
    o_ss: usize,
    o_sh: usize,
    do_sb: usize,
    do_ss: usize,
    do_sh: usize,
    vectors: bool,
) {
    let lanes = prep_lanes(head_dim);
    let tid = thread::thread_idx_x() as usize;
    let warp_rows = warp::SIZE as usize / lanes;
    let first = (thread::block_idx_x() as usize * (thread::block_dim_x() / warp::SIZE) as usize
        + tid / warp::SIZE as usize)
        * warp_rows;
    if first >= padded_rows {
        return; // the whole warp leaves together
    }
    let lane = tid % warp::SIZE as usize;
    let r = first + lane / lanes;
    let dim = 8 * (lane % lanes);
    // Lanes past the rows or the head dim read and write nothing, but take part in the sum's
    // shuffles (every lane of the warp must).
    let mine = r < padded_rows && dim < head_dim;
    if mine && r < accum_rows {
        // SAFETY: `r < accum_rows`, dims `dim ..+ 8 <= head_dim` (a multiple of 8) of its row;
        // 16-byte aligned (the buffer is, and `r head_dim + dim` is a multiple of 8 floats).
        unsafe { vector::store::<f32, 8>(dq_accum, r * head_dim + dim, [0.0; 8]) };
    }
    let (b, h, i) = padded_row_coords(r, q_pad, heads, padded_rows <= u32::MAX as usize);
    let mut part = 0.0f32;
    if mine && i < q_len {
        let o_row = o.wrapping_add(b * o_sb + i * o_ss + h * o_sh);
        let do_row = d_o.wrapping_add(b * do_sb + i * do_ss + h * do_sh);
        let (x, y): ([f32; 8], [f32; 8]) = if vectors {
            // SAFETY: dims `dim ..+ 8 <= head_dim` of row `(b, i, h)` of both; 16-byte aligned
            // (`vectors`: aligned bases, strides and `dim` multiples of 8 elements).
            let (x, y): ([u32; 4], [u32; 4]) = unsafe {
                (
                    vector::load(o_row.cast::<u32>(), dim / 2),
                    vector::load(do_row.cast::<u32>(), dim / 2),
                )
            };
            // Four words of two elements, the lower address in the low half.
            let widen = |w: [u32; 4]| {
                let mut f = [0.0f32; 8];
                unroll_8!(4, |k| {
                    [f[2 * k], f[2 * k + 1]] = T::unpack(w[k]);
                });
                f
            };
            (widen(x), widen(y))
        } else {
            // SAFETY: as above, element by element (no alignment beyond the element's).
            let widen = |row: *const T| core::array::from_fn(|e| unsafe { mem::load(row, dim + e) }.to_f32());
            (widen(o_row), widen(do_row))
        };
        unroll_8!(8, |e| {
            part = math::fma(x[e], y[e], part);
        });
    }
    unroll_8!(5, |k| {
        let mask = 16 >> k;
        if mask < lanes {
            part += warp::shfl_xor(part, mask as u32);
        }
    });
    if r < padded_rows && dim == 0 {
        let bh = b * heads + h;
        // SAFETY: `r < padded_rows`; where `i < q_len`, row `i` of head `(b, h)` of `lse`.
        unsafe {
            if i >= q_len {
                mem::store(delta, r, 0.0);
                mem::store(lse2, r, f32::INFINITY);
            } else {
                let l = mem::load(lse, bh * q_len + i);
                mem::store(delta, r, part);
                mem::store(
                    lse2,
                    r,
                    if l == f32::NEG_INFINITY {
                        f32::INFINITY
                    } else {
                        l * core::f32::consts::LOG2_E
                    },
                );
            }
        }
    }
}

/// One kept pair's probability and score gradient: `p = exp2(s scale_log2 - l2)` (where
/// `score_mod`, the mask's score of `s scale` times `log2(e)`) and `ds = p (dp - delta)` (times
/// the score's derivative, [`Mask::score_grad`], where `score_mod`); `s` is the raw dot product,
/// `diff` is `dp - delta`, `l2` the row's log-sum-exp in units of `log2`.
#[inline(always)]
fn pair_gradient<M: Mask>(
    mask: &M,
    score_mod: bool,
    s: f32,
    (scale, scale_log2): (f32, f32),
    (l2, diff): (f32, f32),
    (b, h, i, j): (usize, usize, usize, usize),
) -> (f32, f32) {
    if score_mod {
        let x = s * scale;
        let p = math::exp2(mask.score(x, b, h, i, j) * math::LOG2_E - l2);
        (p, p * diff * mask.score_grad(x, b, h, i, j))
    } else {
        let p = math::exp2(s * scale_log2 - l2);
        (p, p * diff)
    }
}

/// Attention backward, `dQ`: a warp per query row.
///
/// Warp `r` takes query row `(b, h, i)` of the `rows = batch * heads * q_len` (the order of the
/// log-sum-exp), reading key/value head `h / group` and the row's statistics at `w = (b heads +
/// h) q_pad + i`. Lane `l` holds dims `l + 32c` of `q` and `dO` and of its `dQ` accumulators.
/// For each key `j` the row sees (those of [`Mask::keys`] that [`Mask::keep`] keeps: `M` of
/// `mask_data`, `mask_int`, `mask_float` as the forward's), the warp sums `s = q . k_j` and `dp
/// = dO . v_j` (5 shuffles each); then `p = exp2(s scale_log2 - lse2[w])` (the mask's score of
/// `s scale` where it modifies scores), `ds = p (dp - delta[w])` (times the score's derivative,
/// [`Mask::score_grad`]) and `acc += ds k_j`. It stores `scale acc` rounded to `T` at `dq[b, i, h, :]` (contiguous `[batch, q_len,
/// heads, head_dim]`); a row that sees no key stores zeros.
///
/// Global memory: per row, `2 head_dim` elements of `q` and `dO` and `2 * visible keys *
/// head_dim` of `k` and `v` (reread by every row, as the forward's rows rung), `head_dim`
/// written.
///
/// Launch: as [`attention_bwd_prep`](fn@attention_bwd_prep) with `rows` warps.
///
/// # Safety
/// * `q`, `k`, `v`, `d_o` as the forward's rows rung (`attention_rows`) has `q`, `k`, `v`
///   (`d_o` with `q`'s dims and its own strides); `lse2` and `delta` hold `batch * heads *
///   q_pad` floats (`attention_bwd_prep`'s output); `dq` holds `rows * head_dim` elements,
///   overlapping no input.
/// * `rows` a multiple of `heads * q_len`; `heads`, `q_len`, `group >= 1`; `q_len <= q_pad`;
///   `head_dim <= 256`.
/// * `mask_data`, `mask_int`, `mask_float` are what the mask `M` reads (as for the forward's
///   rows rung, the forward's mask).
///
/// Instances: `attention_bwd_rows_dq_bf16`, `attention_bwd_rows_dq_f16` (the shipped masks,
/// [`General`]).
// Barriers: none (shuffles only).
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(attention_bwd_rows_dq_bf16 = (bf16, General), attention_bwd_rows_dq_f16 = (f16, General)),
        block(BWD_ROWS_BLOCK),
        barriers(0)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_rows_dq<T: AttentionElement, M: Mask>(
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dq: *mut T,
    rows: usize,
    q_len: usize,
    kv_len: usize,
    q_pad: usize,
    heads: usize,
    group: usize,
    head_dim: usize,
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
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let r = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if r >= rows {
        return; // the whole warp leaves together
    }
    let lane = tid % warp::SIZE as usize;
    let i = r % q_len;
    let h = (r / q_len) % heads;
    let b = r / (q_len * heads);
    let kvh = h / group;
    let q_row = q.wrapping_add(b * q_sb + i * q_ss + h * q_sh);
    let do_row = d_o.wrapping_add(b * do_sb + i * do_ss + h * do_sh);
    let k_head = k.wrapping_add(b * k_sb + kvh * k_sh);
    let v_head = v.wrapping_add(b * v_sb + kvh * v_sh);
    let w = (b * heads + h) * q_pad + i;
    // SAFETY: `w < batch * heads * q_pad` (the contract).
    let (l2, dd) = unsafe { (mem::load(lse2, w), mem::load(delta, w)) };

    let (mut qv, mut dov, mut acc) = ([0.0f32; LANE_DIMS], [0.0f32; LANE_DIMS], [0.0f32; LANE_DIMS]);
    unroll_8!(LANE_DIMS, |c| {
        let dim = lane + c * warp::SIZE as usize;
        if dim < head_dim {
            // SAFETY: `dim < head_dim` of row `(b, i, h)` (the contract).
            unsafe {
                qv[c] = mem::load(q_row, dim).to_f32();
                dov[c] = mem::load(do_row, dim).to_f32();
            }
        }
    });
    let mask = launch_mask!(M, mask_data, mask_int, mask_float, q_len, kv_len, heads).row(b, h, i);
    let score_mod = M::SCORE_MOD && mask.modifies_scores();
    let keys = mask.keys(b, h, i..i + 1);
    for j in keys.start..keys.end.min(kv_len) {
        // The same answer in every lane: the whole warp skips the key or none of it.
        if M::MASKS && !mask.keep(b, h, i, j) {
            continue;
        }
        let (k_row, v_row) = (k_head.wrapping_add(j * k_ss), v_head.wrapping_add(j * v_ss));
        let (mut s, mut dp) = (0.0f32, 0.0f32);
        let mut kj = [0.0f32; LANE_DIMS];
        unroll_8!(LANE_DIMS, |c| {
            let dim = lane + c * warp::SIZE as usize;
            if dim < head_dim {
                // SAFETY: key `j < kv_len`, `dim < head_dim` (the contract).
                unsafe {
                    kj[c] = mem::load(k_row, dim).to_f32();
                    s = math::fma(qv[c], kj[c], s);
                    dp = math::fma(dov[c], mem::load(v_row, dim).to_f32(), dp);
                }
            }
        });
        // Every lane of the warp is here (the loop count and the mask are the row's).
        let (s, dp) = (warp::reduce_sum(s), warp::reduce_sum(dp));
        let (_, ds) = pair_gradient(
            &mask,
            score_mod,
            s,
            (scale, scale_log2),
            (l2, dp - dd),
            (b, h, i, j),
        );
        unroll_8!(LANE_DIMS, |c| {
            acc[c] = math::fma(ds, kj[c], acc[c]);
        });
    }
    let dq_row = dq.wrapping_add(((b * q_len + i) * heads + h) * head_dim);
    unroll_8!(LANE_DIMS, |c| {
        let dim = lane + c * warp::SIZE as usize;
        if dim < head_dim {
            // SAFETY: row `(b, i, h)` of the contiguous `dq`, `dim < head_dim`.
            unsafe { mem::store(dq_row, dim, T::from_f32(acc[c] * scale)) };
        }
    });
}

/// Attention backward, `dK` and `dV`: a warp per key row.
///
/// Warp `r` takes key row `(b, kvh, j)` of the `key_rows = batch * kv_heads * kv_len`. Lane `l`
/// holds dims `l + 32c` of `k_j` and `v_j` and of its `dK` and `dV` accumulators. For each query
/// head `h` of the group (`kvh group ..+ group`) and each query row `i` that sees key `j` (those
/// of [`Mask::rows`] that [`Mask::keep`] keeps), the warp sums `s = q_i . k_j` and `dp = dO_i .
/// v_j` (5 shuffles each); then `p = exp2(s scale_log2 - lse2[w])` (`w` the row's statistics;
/// the mask's score where it modifies scores), `dv += p dO_i` and `dk += p (dp - delta[w]) q_i`
/// (times [`Mask::score_grad`]). It stores `scale dk` and `dv`
/// rounded to `T` at `[b, j, kvh, :]` of `dk` and `dv` (contiguous `[batch, kv_len, kv_heads,
/// head_dim]`); a key no row sees stores zeros.
///
/// Global memory: per key row, `2 head_dim` elements of `k` and `v` and `2 * (rows that see
/// it) * head_dim` of `q` and `dO` (reread by every key), `2 head_dim` written.
///
/// Launch: as [`attention_bwd_prep`](fn@attention_bwd_prep) with `key_rows` warps.
///
/// # Safety
/// * As [`attention_bwd_rows_dq`](fn@attention_bwd_rows_dq) for the inputs; `dk` and `dv`
///   hold `key_rows * head_dim` elements each, overlapping no input and each other.
/// * `key_rows` a multiple of `kv_heads * kv_len`; `kv_heads`, `kv_len >= 1`; `heads = group *
///   kv_heads` (`group` may be 0: no query head, zeros); `q_len <= q_pad`; `head_dim <= 256`.
/// * The mask's arguments as for [`attention_bwd_rows_dq`](fn@attention_bwd_rows_dq).
///
/// Instances: `attention_bwd_rows_dkdv_bf16`, `attention_bwd_rows_dkdv_f16` (the shipped masks,
/// [`General`]).
// Barriers: none (shuffles only).
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(attention_bwd_rows_dkdv_bf16 = (bf16, General), attention_bwd_rows_dkdv_f16 = (f16, General)),
        block(BWD_ROWS_BLOCK),
        barriers(0)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_rows_dkdv<T: AttentionElement, M: Mask>(
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dk: *mut T,
    dv: *mut T,
    key_rows: usize,
    q_len: usize,
    kv_len: usize,
    q_pad: usize,
    kv_heads: usize,
    group: usize,
    head_dim: usize,
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
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let r = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if r >= key_rows {
        return; // the whole warp leaves together
    }
    let lane = tid % warp::SIZE as usize;
    let j = r % kv_len;
    let kvh = (r / kv_len) % kv_heads;
    let b = r / (kv_len * kv_heads);
    let heads = kv_heads * group;
    let k_row = k.wrapping_add(b * k_sb + j * k_ss + kvh * k_sh);
    let v_row = v.wrapping_add(b * v_sb + j * v_ss + kvh * v_sh);

    let (mut kv, mut vv) = ([0.0f32; LANE_DIMS], [0.0f32; LANE_DIMS]);
    let (mut dk_acc, mut dv_acc) = ([0.0f32; LANE_DIMS], [0.0f32; LANE_DIMS]);
    unroll_8!(LANE_DIMS, |c| {
        let dim = lane + c * warp::SIZE as usize;
        if dim < head_dim {
            // SAFETY: key `j < kv_len`, `dim < head_dim` (the contract).
            unsafe {
                kv[c] = mem::load(k_row, dim).to_f32();
                vv[c] = mem::load(v_row, dim).to_f32();
            }
        }
    });
    let mask = launch_mask!(M, mask_data, mask_int, mask_float, q_len, kv_len, heads);
    let score_mod = M::SCORE_MOD && mask.modifies_scores();
    for hh in 0..group {
        let h = kvh * group + hh;
        let band = mask.rows(b, h, j..j + 1);
        for i in band.start..band.end.min(q_len) {
            // The same answer in every lane, as in the `dQ` kernel.
            if M::MASKS && !mask.keep(b, h, i, j) {
                continue;
            }
            let q_row = q.wrapping_add(b * q_sb + i * q_ss + h * q_sh);
            let do_row = d_o.wrapping_add(b * do_sb + i * do_ss + h * do_sh);
            let (mut qi, mut doi) = ([0.0f32; LANE_DIMS], [0.0f32; LANE_DIMS]);
            let (mut s, mut dp) = (0.0f32, 0.0f32);
            unroll_8!(LANE_DIMS, |c| {
                let dim = lane + c * warp::SIZE as usize;
                if dim < head_dim {
                    // SAFETY: row `i < q_len` of head `h < heads`, `dim < head_dim`.
                    unsafe {
                        qi[c] = mem::load(q_row, dim).to_f32();
                        doi[c] = mem::load(do_row, dim).to_f32();
                    }
                    s = math::fma(qi[c], kv[c], s);
                    dp = math::fma(doi[c], vv[c], dp);
                }
            });
            // Every lane of the warp is here (the loop counts and the mask are the key's).
            let (s, dp) = (warp::reduce_sum(s), warp::reduce_sum(dp));
            let w = (b * heads + h) * q_pad + i;
            // SAFETY: `w < batch * heads * q_pad`.
            let (l2, dd) = unsafe { (mem::load(lse2, w), mem::load(delta, w)) };
            let (p, ds) = pair_gradient(
                &mask,
                score_mod,
                s,
                (scale, scale_log2),
                (l2, dp - dd),
                (b, h, i, j),
            );
            unroll_8!(LANE_DIMS, |c| {
                dv_acc[c] = math::fma(p, doi[c], dv_acc[c]);
                dk_acc[c] = math::fma(ds, qi[c], dk_acc[c]);
            });
        }
    }
    let out = ((b * kv_len + j) * kv_heads + kvh) * head_dim;
    unroll_8!(LANE_DIMS, |c| {
        let dim = lane + c * warp::SIZE as usize;
        if dim < head_dim {
            // SAFETY: row `(b, j, kvh)` of the contiguous `dk` and `dv`, `dim < head_dim`.
            unsafe {
                mem::store(dk, out + dim, T::from_f32(dk_acc[c] * scale));
                mem::store(dv, out + dim, T::from_f32(dv_acc[c]));
            }
        }
    });
}
