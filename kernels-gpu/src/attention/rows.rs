//! The tutorial rung of attention ([`attention_rows`](fn@attention_rows)): a warp per query row,
//! scores, online softmax and the `P V` sum one key at a time. Simple and exact to f32 rounding
//! (no 16-bit rounding of the probabilities), for every head dim up to 256: the reference the
//! fused rung is checked against on the GPU.

use super::AttentionElement;
use crate::gpu::attention::{General, Mask};
use crate::gpu::{bf16, f16, math, mem, thread, warp};
use crate::kernel;

/// Threads per block of [`attention_rows`](fn@attention_rows): 4 warps, a query row each.
pub const ROWS_BLOCK: u32 = 128;

/// Query rows per block of [`attention_rows`](fn@attention_rows).
pub const ROWS_PER_BLOCK: u32 = ROWS_BLOCK / warp::SIZE;

/// Dimensions of the head one lane holds at most: `MAX_HEAD_DIM / 32`.
const LANE_DIMS: usize = super::MAX_HEAD_DIM / warp::SIZE as usize;

/// Attention forward, a warp per query row.
///
/// Warp `r = blockIdx.x * (blockDim.x / 32) + warp` takes row `r` of the `batch * heads *
/// q_len` rows, ordered `(b, h, i)` (the order of `lse`): query row `i` of head `h` of batch
/// `b`, reading key/value head `h / group`. Lane `l` loads `q[b, i, h, l + 32c]` for the `c`
/// with `l + 32c < head_dim` (at most 8) and keeps 8 f32 accumulators. For each key `j` of the
/// mask `M`'s range for the row ([`Mask::keys`]) that the mask keeps ([`Mask::keep`], a
/// warp-uniform test), it:
/// 1. sums its part of `q . k_j` and the warp adds the parts (5 shuffles): the score `s`, taken
///    to units of `log2` as `u = s * scale_log2` (with a score modification, `u = score(s *
///    scale) log2(e)`);
/// 2. updates the running maximum `m` and sum `l` (online softmax, one `ex2` for the new
///    probability and one to rescale the old sums), and its accumulators
///    `acc = acc * 2^(m_old - m) + 2^(u - m) v_j`.
///
/// Then it stores `acc / l` rounded to `T` at `o[b, i, h, :]` (contiguous `[batch, q_len, heads,
/// head_dim]`) and lane 0 stores `lse[r] = m ln 2 + ln l`; a row that sees no key stores zeros
/// and `-inf`.
///
/// Global memory: per row, `head_dim` elements of `q` and `2 * visible keys * head_dim` of `k`
/// and `v` (reread by every row: `kv_len` times what the fused rung reads, which is why this
/// rung is a reference), `head_dim` elements of output and 4 bytes of `lse`.
///
/// Launch: `ceil(batch * heads * q_len / (blockDim.x / 32))` blocks of a multiple of 32 threads
/// ([`ROWS_BLOCK`]), no shared memory.
///
/// # Safety
/// * `q` holds `[b, i, h, d]` at `b q_sb + i q_ss + h q_sh + d` for every `b < rows / (heads *
///   q_len)`, `i < q_len`, `h < heads`, `d < head_dim`; `k` and `v` the same with `kv_len` rows,
///   `heads / group` heads and their own strides; `o` holds `rows * head_dim` elements and `lse`
///   `rows` floats, overlapping no input.
/// * `rows` is a multiple of `heads * q_len`; `heads`, `q_len`, `group >= 1`; `kv_len >= 1`;
///   `head_dim <= 256`.
/// * `mask_data`, `mask_int`, `mask_float` are what the mask `M` reads
///   ([`MaskArgs`](crate::gpu::attention::MaskArgs)).
/// * The launch shape is as above.
///
/// Instances: `attention_rows_bf16`, `attention_rows_f16` (the element type of `q`, `k`, `v` and
/// `o`), both with the mask [`General`] (every shipped mask, chosen at run time: this rung is
/// the reference of the fused ones, not their rival).
// Barriers: none, a warp per row (shuffles only).
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(attention_rows_bf16 = (bf16, General), attention_rows_f16 = (f16, General)),
        block(ROWS_BLOCK),
        barriers(0)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_rows<T: AttentionElement, M: Mask>(
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
    lse: *mut f32,
    rows: usize,
    q_len: usize,
    kv_len: usize,
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
    scale_log2: f32,
    mask_data: *const i32,
    mask_int: usize,
    mask_float: f32,
) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let r = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
    if r >= rows {
        return; // the whole warp leaves together: no shuffle is missed by part of it
    }
    let lane = tid % warp::SIZE as usize;
    let i = r % q_len;
    let h = (r / q_len) % heads;
    let b = r / (q_len * heads);
    let kvh = h / group;
    let q_row = q.wrapping_add(b * q_sb + i * q_ss + h * q_sh);
    let k_head = k.wrapping_add(b * k_sb + kvh * k_sh);
    let v_head = v.wrapping_add(b * v_sb + kvh * v_sh);

    let mut qv = [0.0f32; LANE_DIMS];
    let mut acc = [0.0f32; LANE_DIMS];
    unroll_8!(LANE_DIMS, |c| {
        let dim = lane + c * warp::SIZE as usize;
        if dim < head_dim {
            // SAFETY: `dim < head_dim` of row `(b, i, h)` of `q` (the contract).
            qv[c] = unsafe { mem::load(q_row, dim) }.to_f32();
        }
    });
    let mask = launch_mask!(M, mask_data, mask_int, mask_float, q_len, kv_len, heads).row(b, h, i);
    let scale = scale_log2 * (1.0 / math::LOG2_E);
    let keys = mask.keys(b, h, i..i + 1);
    let score_mod = M::SCORE_MOD && mask.modifies_scores();
    let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
    for j in keys.start..keys.end.min(kv_len) {
        // The same answer in every lane: the whole warp skips the key or none of it.
        if M::MASKS && !mask.keep(b, h, i, j) {
            continue;
        }
        let (k_row, v_row) = (k_head.wrapping_add(j * k_ss), v_head.wrapping_add(j * v_ss));
        let mut part = 0.0f32;
        unroll_8!(LANE_DIMS, |c| {
            let dim = lane + c * warp::SIZE as usize;
            if dim < head_dim {
                // SAFETY: key `j < kv_len`, `dim < head_dim` (the contract).
                part = math::fma(qv[c], unsafe { mem::load(k_row, dim) }.to_f32(), part);
            }
        });
        // Every lane of the warp is here (the loop count and the mask are the row's).
        let dot = warp::reduce_sum(part);
        let u = if score_mod {
            mask.score(dot * scale, b, h, i, j) * math::LOG2_E
        } else {
            dot * scale_log2
        };
        let m_new = math::max_nan(m, u);
        // A row that has seen no score above `-inf` yet keeps weights 0 (not `-inf - -inf`).
        let base = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
        let rescale = math::exp2(m - base);
        let p = math::exp2(u - base);
        l = math::fma(l, rescale, p);
        unroll_8!(LANE_DIMS, |c| {
            let dim = lane + c * warp::SIZE as usize;
            if dim < head_dim {
                // SAFETY: as for `k`.
                let vj = unsafe { mem::load(v_row, dim) }.to_f32();
                acc[c] = math::fma(acc[c], rescale, p * vj);
            }
        });
        m = m_new;
    }
    // A row that sees no key: output 0 (not 0 / 0) and log-sum-exp -inf (a NaN sum stays NaN).
    let empty = l == 0.0;
    let inv = if empty { 0.0 } else { 1.0 / l };
    let o_row = o.wrapping_add(((b * q_len + i) * heads + h) * head_dim);
    unroll_8!(LANE_DIMS, |c| {
        let dim = lane + c * warp::SIZE as usize;
        if dim < head_dim {
            // SAFETY: row `(b, i, h)` of the contiguous output, `dim < head_dim`.
            unsafe { mem::store(o_row, dim, T::from_f32(acc[c] * inv)) };
        }
    });
    if lane == 0 {
        let out = if empty {
            f32::NEG_INFINITY
        } else {
            m * math::LN_2 + math::ln(l)
        };
        // SAFETY: `r < rows`.
        unsafe { mem::store(lse, r, out) };
    }
}
