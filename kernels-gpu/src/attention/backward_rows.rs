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

use super::{visible_keys, AttentionElement};
use crate::gpu::{bf16, f16, math, mem, thread, warp};
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

/// The preparation of attention's backward: each query row's `D = dO . O` and log-sum-exp in
/// units of `log2`.
///
/// Warp `r = blockIdx.x * (blockDim.x / 32) + warp` takes padded row `r` of the `padded_rows =
/// batch * heads * q_pad` rows, ordered `(b, h, i)` with `i < q_pad`. For `i < q_len` lane `l`
/// multiplies `d_o[b, i, h, d]` and `o[b, i, h, d]` at the dims `d = l + 32c < head_dim` and the
/// warp sums the products (5 shuffles); lane 0 stores the sum at `delta[r]` and
/// `lse[(b h) q_len + i] * log2(e)` at `lse2[r]`, `+inf` where the log-sum-exp is `-inf` (a row
/// that sees no key: its probabilities `exp2(u - lse2)` are then 0, never NaN). Padding rows
/// (`i >= q_len`) get `delta = 0`, `lse2 = +inf`. For `r < accum_rows` the warp also zeroes the
/// row's `head_dim` floats of `dq_accum` (`dq_accum[r head_dim ..]`, lane `l` the floats `l +
/// 32c`): the one-kernel rung's f32 `dQ`, whose rows are these padded rows, zeroed here rather
/// than by a pass of its own; the other rungs pass `accum_rows = 0`.
///
/// Global memory: per row `2 head_dim` elements and 4 bytes read, 8 bytes written (and `4
/// head_dim` bytes of zeros where `r < accum_rows`).
///
/// Launch: `ceil(padded_rows / (blockDim.x / 32))` blocks of a multiple of 32 threads
/// ([`BWD_ROWS_BLOCK`]), no shared memory.
///
/// # Safety
/// * `o` and `d_o` hold `[b, i, h, d]` at `b s_b + i s_s + h s_h + d` (their own strides) for
///   `b < padded_rows / (heads q_pad)`, `i < q_len`, `h < heads`, `d < head_dim`; `lse` holds
///   `batch * heads * q_len` floats; `lse2` and `delta` `padded_rows` floats each, overlapping
///   no input; `dq_accum` holds `accum_rows * head_dim` floats, overlapping nothing else.
/// * `padded_rows` is a multiple of `heads * q_pad`, `q_len <= q_pad`, `heads, q_pad >= 1`,
///   `head_dim <= 256`, `accum_rows <= padded_rows`.
///
/// Instances: `attention_bwd_prep_bf16`, `attention_bwd_prep_f16`.
// Barriers: none (shuffles only).
#[kernel(
    instances(attention_bwd_prep_bf16 = bf16, attention_bwd_prep_f16 = f16),
    block(BWD_ROWS_BLOCK),
    barriers(0)
)]
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
) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let r = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if r >= padded_rows {
        return; // the whole warp leaves together
    }
    let lane = tid % warp::SIZE as usize;
    if r < accum_rows {
        let accum_row = dq_accum.wrapping_add(r * head_dim);
        unroll_8!(LANE_DIMS, |c| {
            let dim = lane + c * warp::SIZE as usize;
            if dim < head_dim {
                // SAFETY: `r < accum_rows`, `dim < head_dim` (the contract).
                unsafe { mem::store(accum_row, dim, 0.0) };
            }
        });
    }
    let i = r % q_pad;
    let bh = r / q_pad;
    let (h, b) = (bh % heads, bh / heads);
    if i >= q_len {
        if lane == 0 {
            // SAFETY: `r < padded_rows`.
            unsafe {
                mem::store(delta, r, 0.0);
                mem::store(lse2, r, f32::INFINITY);
            }
        }
        return;
    }
    let o_row = o.wrapping_add(b * o_sb + i * o_ss + h * o_sh);
    let do_row = d_o.wrapping_add(b * do_sb + i * do_ss + h * do_sh);
    let mut part = 0.0f32;
    unroll_8!(LANE_DIMS, |c| {
        let dim = lane + c * warp::SIZE as usize;
        if dim < head_dim {
            // SAFETY: `dim < head_dim` of row `(b, i, h)` of both (the contract).
            let (x, y) = unsafe { (mem::load(o_row, dim), mem::load(do_row, dim)) };
            part = math::fma(x.to_f32(), y.to_f32(), part);
        }
    });
    let sum = warp::reduce_sum(part);
    if lane == 0 {
        // SAFETY: row `i < q_len` of head `(b, h)` of `lse`; `r < padded_rows`.
        unsafe {
            let l = mem::load(lse, bh * q_len + i);
            mem::store(delta, r, sum);
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

/// Attention backward, `dQ`: a warp per query row.
///
/// Warp `r` takes query row `(b, h, i)` of the `rows = batch * heads * q_len` (the order of the
/// log-sum-exp), reading key/value head `h / group` and the row's statistics at `w = (b heads +
/// h) q_pad + i`. Lane `l` holds dims `l + 32c` of `q` and `dO` and of its `dQ` accumulators.
/// For each key `j` the row sees, the warp sums `s = q . k_j` and `dp = dO . v_j` (5 shuffles
/// each); then `p = exp2(s scale_log2 - lse2[w])`, `ds = p (dp - delta[w])` and `acc += ds
/// k_j`. It stores `scale acc` rounded to `T` at `dq[b, i, h, :]` (contiguous `[batch, q_len,
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
///
/// Instances: `attention_bwd_rows_dq_bf16`, `attention_bwd_rows_dq_f16`.
// Barriers: none (shuffles only).
#[kernel(
    instances(attention_bwd_rows_dq_bf16 = bf16, attention_bwd_rows_dq_f16 = f16),
    block(BWD_ROWS_BLOCK),
    barriers(0)
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_rows_dq<T: AttentionElement>(
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
    causal: bool,
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
    for j in 0..visible_keys(i, q_len, kv_len, causal) {
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
        // Every lane of the warp is here (the loop count is the row's).
        let (s, dp) = (warp::reduce_sum(s), warp::reduce_sum(dp));
        let p = math::exp2(s * scale_log2 - l2);
        let ds = p * (dp - dd);
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
/// head `h` of the group (`kvh group ..+ group`) and each query row `i` that sees key `j` (all,
/// or with the causal mask `i >= j + q_len - kv_len`), the warp sums `s = q_i . k_j` and `dp =
/// dO_i . v_j` (5 shuffles each); then `p = exp2(s scale_log2 - lse2[w])` (`w` the row's
/// statistics), `dv += p dO_i` and `dk += p (dp - delta[w]) q_i`. It stores `scale dk` and `dv`
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
///
/// Instances: `attention_bwd_rows_dkdv_bf16`, `attention_bwd_rows_dkdv_f16`.
// Barriers: none (shuffles only).
#[kernel(
    instances(attention_bwd_rows_dkdv_bf16 = bf16, attention_bwd_rows_dkdv_f16 = f16),
    block(BWD_ROWS_BLOCK),
    barriers(0)
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_rows_dkdv<T: AttentionElement>(
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
    causal: bool,
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
    // The first query row that sees key `j`: `visible_keys(i) > j`.
    let first = if causal {
        (j + q_len).saturating_sub(kv_len)
    } else {
        0
    };
    for hh in 0..group {
        let h = kvh * group + hh;
        for i in first..q_len {
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
            // Every lane of the warp is here (the loop counts are the key's).
            let (s, dp) = (warp::reduce_sum(s), warp::reduce_sum(dp));
            let w = (b * heads + h) * q_pad + i;
            // SAFETY: `w < batch * heads * q_pad`.
            let (l2, dd) = unsafe { (mem::load(lse2, w), mem::load(delta, w)) };
            let p = math::exp2(s * scale_log2 - l2);
            let ds = p * (dp - dd);
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
