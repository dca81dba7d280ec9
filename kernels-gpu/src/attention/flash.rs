//! The fused rung of attention ([`attention_flash`](fn@attention_flash)): FlashAttention-2's
//! forward on `mma.sync` `m16n8k16` (bf16 or f16 operands, f32 accumulators), for head dims 64
//! and 128.
//!
//! # Design
//! * **Block**: 4 warps (128 threads) per 64 query rows of one (batch, head), 16 rows per warp.
//!   The block's `Q` tile is copied to shared memory once and each warp keeps its 16 rows as
//!   `D / 16` `A` fragments in registers (`ldmatrix.x4`).
//! * **KV tiles** of 64 keys, double-buffered: while the block computes on tile `t`, the 16-byte
//!   `cp.async` copies of tile `t + 1` (`K` and `V`, zero past `kv_len`) land in the other
//!   stage; one barrier per tile.
//! * **Per tile and warp**: `S = Q K^T` (16 x 64, `D / 16 * 8` MMAs, `K` fragments by
//!   `ldmatrix.x4` of the `[key][dim]` tile), the online softmax in registers (each lane holds
//!   16 scores of two rows; row maxima over the 4 lanes of a quad with 2 shuffles; `ex2` with
//!   `scale * log2(e)` folded into the scores), `P` packed to 16-bit `A` fragments straight from
//!   the score accumulators, and `O += P V` (`4 * D / 8` MMAs, `V` fragments by
//!   `ldmatrix.x4.trans`).
//! * **Masks** (generic over [`Mask`]): the block visits only the tiles of the mask's key range
//!   for its rows ([`Mask::keys`]) that the mask does not empty ([`Mask::tile`]; the copies go to
//!   the next tile it keeps); tiles the mask keeps in part (and the ragged last tile) are masked
//!   element by element ([`Mask::keep`]), the others not. For the causal mask: the tiles its
//!   last row can see, those past the first row's diagonal masked. Blocks run from the last
//!   query tile to the first, so that the longest start first.
//! * **Traffic** per block: `64 D` elements of `Q` and `2 * 64 D` of `K` and `V` per tile
//!   (`64 * 4 D` flops per element of `K`/`V` fetched), `64 D` elements of output and 256 bytes
//!   of log-sum-exp. Shared memory: `(64 + 4 * 64) (D + 8)` 16-bit elements
//!   ([`flash_shared_bytes`]): 46,080 bytes at `D = 64`, 87,040 at `D = 128`; rows of `D + 8`
//!   elements so that an `ldmatrix` phase's 8 rows fall in 8 disjoint groups of 4 banks.
//!
//! # Rounding
//! The probabilities are rounded to the 16-bit type for the `P V` product (relative `2^-9` for
//! bf16, `2^-12` for f16, as FlashAttention does), while their sum `l` is kept in f32: the
//! output may differ from [`super::rows`]' by up to that rounding of the weights, `2^-9 max|v|`
//! for bf16.
//!
//! # NaN
//! A NaN in `v` at a key that a causal row does not see still reaches that row when the key is
//! in a tile the row visits (its weight 0 times NaN), as in FlashAttention; the rows rung keeps
//! such rows finite.

use super::tiles::{self, PAD};
use super::AttentionElement;
use crate::gpu::async_copy;
use crate::gpu::attention::{Causal, General, Mask, NoMask, TileMask};
use crate::gpu::mma::{ldmatrix_x4, ldmatrix_x4_trans};
use crate::gpu::vector::F4;
use crate::gpu::{bf16, f16, math, mem, shared, thread, warp};
use crate::kernel;

/// Query rows per block of [`attention_flash`](fn@attention_flash).
pub const FLASH_ROWS: usize = 64;
/// Keys per KV tile of [`attention_flash`](fn@attention_flash).
pub const FLASH_KEYS: usize = 64;
/// Threads per block of [`attention_flash`](fn@attention_flash): 4 warps of 16 query rows.
pub const FLASH_BLOCK: u32 = 128;
/// The head dims with a fused kernel.
pub const FLASH_HEAD_DIMS: [usize; 2] = [64, 128];

/// Lanes of a warp.
const WARP: usize = warp::SIZE as usize;
/// Elements of one 16-byte copy.
const PIECE: usize = 8;
/// Largest head dim of the fused kernel (the register arrays' size).
const MAX_D: usize = 128;

/// Dynamic shared memory of [`attention_flash`](fn@attention_flash) for head dim `d`: the `Q`
/// tile and two stages of `K` and `V`, rows of `d + 8` 16-bit elements.
pub const fn flash_shared_bytes(d: usize) -> usize {
    (FLASH_ROWS + 4 * FLASH_KEYS) * (d + PAD) * 2
}

/// Attention forward, fused (FlashAttention-2 on `mma.sync`; the module documentation has the
/// design).
///
/// Block `(x, h, b)` computes query rows `64 (gridDim.x - 1 - x) ..+ 64` of head `h` of batch
/// `b`. Thread `tid` of it copies pieces `tid + 128 l` (16 bytes each) of every 64-row tile;
/// warp `w` computes rows `16 w ..+ 16` of the block's, lane `4g + t` holding rows `g` and
/// `g + 8` of them: their scores at keys `8j + 2t, 8j + 2t + 1` of each tile, and their output
/// at dims `8j + 2t, 8j + 2t + 1`. Per KV tile it waits for the tile's copies and at the
/// block's barrier, issues the next tile's copies, computes `S = Q K^T`, updates the running
/// maxima `m` and sums `l` and rescales its output, and adds `P V`. Then it stores
/// `O / l` (pairs of elements) and, lanes `t = 0`, `lse = m ln 2 + ln l` for its rows below
/// `q_len`; a row that sees no key stores zeros and `-inf`.
///
/// Launch: grid `(ceil(q_len / 64), heads, batch)`, [`FLASH_BLOCK`] threads,
/// [`flash_shared_bytes`]`(D)` bytes of dynamic shared memory; an sm_80 or newer GPU.
///
/// # Safety
/// * As [`attention_rows`](fn@super::attention_rows) for the operands (with `rows = batch *
///   heads * q_len`), `head_dim = D`, and `o` contiguous `[batch, q_len, heads, D]`.
/// * `q`, `k`, `v`, `o` 16-byte aligned, every stride a multiple of 8 elements.
/// * `mask_data`, `mask_int`, `mask_float` are what the mask `M` reads
///   ([`MaskArgs`](crate::gpu::attention::MaskArgs)).
///
/// Instances: `attention_flash_d<D>_<T>` ([`NoMask`]), `attention_flash_causal_d<D>_<T>`
/// ([`Causal`]) and `attention_flash_general_d<D>_<T>` ([`General`]: the other shipped masks,
/// chosen at run time) for `D` 64 and 128 and `T` bf16 and f16.
// Barriers: one after the prologue's copies, one per KV tile.
#[cfg_attr(
    feature = "attention",
    kernel(
        instances(
            attention_flash_d64_bf16 = (bf16, 64, NoMask),
            attention_flash_d128_bf16 = (bf16, 128, NoMask),
            attention_flash_d64_f16 = (f16, 64, NoMask),
            attention_flash_d128_f16 = (f16, 128, NoMask),
            attention_flash_causal_d64_bf16 = (bf16, 64, Causal),
            attention_flash_causal_d128_bf16 = (bf16, 128, Causal),
            attention_flash_causal_d64_f16 = (f16, 64, Causal),
            attention_flash_causal_d128_f16 = (f16, 128, Causal),
            attention_flash_general_d64_bf16 = (bf16, 64, General),
            attention_flash_general_d128_bf16 = (bf16, 128, General),
            attention_flash_general_d64_f16 = (f16, 64, General),
            attention_flash_general_d128_f16 = (f16, 128, General),
        ),
        block(FLASH_BLOCK),
        barriers(2)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn attention_flash<T: AttentionElement, const D: usize, M: Mask>(
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
    lse: *mut f32,
    q_len: usize,
    kv_len: usize,
    heads: usize,
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
    scale_log2: f32,
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
            (FLASH_ROWS * D / PIECE) % FLASH_BLOCK as usize == 0,
            "whole pieces per thread"
        );
    }
    let tid = thread::thread_idx_x() as usize;
    let (w, lane) = (tid / WARP, tid % WARP);
    let (g, t4) = (lane / 4, lane % 4);
    let q_tiles = thread::grid_dim_x() as usize;
    let q0 = (q_tiles - 1 - thread::block_idx_x() as usize) * FLASH_ROWS;
    let h = thread::block_idx_y() as usize;
    let b = thread::block_idx_z() as usize;
    let kvh = h / group;
    let pitch = D + PAD;

    let smem = shared::dynamic::<F4>().cast::<u16>();
    let stage_k = |s: usize| smem.wrapping_add((FLASH_ROWS + s * FLASH_KEYS) * pitch);
    let stage_v = |s: usize| smem.wrapping_add((FLASH_ROWS + (2 + s) * FLASH_KEYS) * pitch);
    let (q16, k16, v16) = (q.cast::<u16>(), k.cast::<u16>(), v.cast::<u16>());
    let (q_base, k_base, v_base) = (b * q_sb + h * q_sh, b * k_sb + kvh * k_sh, b * v_sb + kvh * v_sh);

    let mask = launch_mask!(M, mask_data, mask_int, mask_float, q_len, kv_len, heads);
    let scale = scale_log2 * (1.0 / math::LOG2_E);
    let score_mod = M::SCORE_MOD && mask.modifies_scores();
    // The block's rows and the key tiles of the mask's range for them.
    let q_rows = q0..(q0 + FLASH_ROWS).min(q_len);
    let keys = mask.keys(b, h, q_rows.clone());
    let end_tile = keys.end.min(kv_len).div_ceil(FLASH_KEYS);
    let class = |t: usize| {
        let k0 = t * FLASH_KEYS;
        mask.tile(b, h, q_rows.clone(), k0..(k0 + FLASH_KEYS).min(kv_len))
    };
    // The first tile at or after `t` that the mask does not empty (`end_tile` if none).
    let next_tile = |mut t: usize| {
        while M::MASKS && !M::CONTIGUOUS && t < end_tile && class(t) == TileMask::Empty {
            t += 1;
        }
        t
    };

    let threads = FLASH_BLOCK as usize;
    // Copies rows `row0 ..+ 64` of a tensor (`src` at element `base`, rows `stride` apart) to
    // the shared tile `dst`, zeros for rows at or past `rows`.
    let copy_tile = |dst: *mut u16, src: *const u16, base: usize, stride: usize, row0: usize, rows: usize| {
        // SAFETY: `dst` is one of the block's 64-row tiles in the dynamic shared memory; the
        // sources are aligned with strides of whole pieces and hold the rows below `rows`
        // (the contract).
        unsafe { tiles::copy_tile::<D>(tid, threads, dst, src, base, stride, row0, rows) }
    };

    let mut t = next_tile(keys.start / FLASH_KEYS);
    copy_tile(smem, q16, q_base, q_ss, q0, q_len);
    if t < end_tile {
        copy_tile(stage_k(0), k16, k_base, k_ss, t * FLASH_KEYS, kv_len);
        copy_tile(stage_v(0), v16, v_base, v_ss, t * FLASH_KEYS, kv_len);
    }
    async_copy::commit_group();
    async_copy::wait_pending(0);
    thread::sync_threads();

    // This warp's 16 query rows as `A` fragments, one per 16 dims.
    let mut qf = [[0u32; 4]; MAX_D / 16];
    unroll_8!(D / 16, |kk| {
        let row = 16 * w + lane % 16;
        // SAFETY: row below 64, columns `16 kk + 8 (lane / 16) ..+ 8 <= D` of the Q tile,
        // 16-byte aligned; the whole warp is here.
        qf[kk] = unsafe { ldmatrix_x4(smem.wrapping_add(row * pitch + 16 * kk + 8 * (lane / 16))) };
    });

    let mut acc = [[0.0f32; 4]; MAX_D / 8];
    let (mut m, mut l) = ([f32::NEG_INFINITY; 2], [0.0f32; 2]);
    let rows = [q0 + 16 * w + g, q0 + 16 * w + g + 8];
    // The rows the mask is asked about: a row past `q_len` (not stored) as the last one.
    let mask_rows = rows.map(|i| i.min(q_len - 1));
    // The mask as each of the lane's two rows sees it (its per-row work done once), and the keys
    // all the block's rows keep (tiles inside them need no test).
    let masks = mask_rows.map(|i| mask.row(b, h, i));
    let full = mask.full_keys(b, h, q_rows.clone());
    let mut n = 0;
    while t < end_tile {
        if n > 0 {
            // Tile `t`'s copies (the only group in flight) have landed; after the barrier
            // every thread's are visible, and everyone is done with the previous tile's stage.
            async_copy::wait_pending(0);
            thread::sync_threads();
        }
        let after = next_tile(t + 1);
        if after < end_tile {
            let (s, row0) = ((n + 1) % 2, after * FLASH_KEYS);
            copy_tile(stage_k(s), k16, k_base, k_ss, row0, kv_len);
            copy_tile(stage_v(s), v16, v_base, v_ss, row0, kv_len);
        }
        async_copy::commit_group();
        let (sk, sv) = (stage_k(n % 2), stage_v(n % 2));

        // S = Q K^T: 8 tiles of 8 keys.
        let mut s = [[0.0f32; 4]; FLASH_KEYS / 8];
        let mi = lane / 8;
        unroll_8!(D / 16, |kk| {
            unroll_8!(4, |jj| {
                let key = 16 * jj + 8 * (mi / 2) + lane % 8;
                // SAFETY: key row below 64, dims `16 kk + 8 (mi % 2) ..+ 8 <= D` of the K
                // tile, 16-byte aligned; the whole warp is here.
                let r = unsafe { ldmatrix_x4(sk.wrapping_add(key * pitch + 16 * kk + 8 * (mi % 2))) };
                s[2 * jj] = T::mma(qf[kk], [r[0], r[1]], s[2 * jj]);
                s[2 * jj + 1] = T::mma(qf[kk], [r[2], r[3]], s[2 * jj + 1]);
            });
        });

        // The online softmax of the two rows this lane holds part of.
        let key0 = t * FLASH_KEYS;
        // Tiles the mask keeps in part, and the ragged last tile, are tested element by
        // element.
        let masked = key0 + FLASH_KEYS > kv_len
            || (M::MASKS && !(key0 >= full.start && key0 + FLASH_KEYS <= full.end));
        // Separate passes (the scale or the score modification, then the mask), each behind
        // one uniform branch, so that the code of each is written out once. The mask and the
        // score are asked about keys inside the sequence only (the score of a key past `kv_len`
        // as the last key's, then dropped): they may read memory by key.
        if score_mod {
            unroll_8!(2, |hh| {
                unroll_8!(8, |j| {
                    unroll_8!(2, |e| {
                        let key = (key0 + 8 * j + 2 * t4 + e).min(kv_len - 1);
                        let raw = s[j][2 * hh + e];
                        s[j][2 * hh + e] =
                            masks[hh].score(raw * scale, b, h, mask_rows[hh], key) * math::LOG2_E;
                    });
                });
            });
        } else {
            unroll_8!(8, |j| {
                unroll_8!(4, |c| {
                    s[j][c] *= scale_log2;
                });
            });
        }
        if masked {
            unroll_8!(2, |hh| {
                unroll_8!(8, |j| {
                    unroll_8!(2, |e| {
                        let key = key0 + 8 * j + 2 * t4 + e;
                        let keep = key < kv_len && (!M::MASKS || masks[hh].keep(b, h, mask_rows[hh], key));
                        if !keep {
                            s[j][2 * hh + e] = f32::NEG_INFINITY;
                        }
                    });
                });
            });
        }
        unroll_8!(2, |hh| {
            let mut mx = f32::NEG_INFINITY;
            unroll_8!(8, |j| {
                unroll_8!(2, |e| {
                    mx = math::max_nan(mx, s[j][2 * hh + e]);
                });
            });
            // The row's 64 scores are spread over the 4 lanes of the quad.
            mx = math::max_nan(mx, warp::shfl_xor(mx, 1));
            mx = math::max_nan(mx, warp::shfl_xor(mx, 2));
            let m_new = math::max_nan(m[hh], mx);
            // A row that has seen no key yet keeps weights 0 (not `-inf - -inf`).
            let base = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
            let rescale = math::exp2(m[hh] - base);
            m[hh] = m_new;
            let mut sum = 0.0f32;
            unroll_8!(8, |j| {
                unroll_8!(2, |e| {
                    let p = math::exp2(s[j][2 * hh + e] - base);
                    s[j][2 * hh + e] = p;
                    sum += p;
                });
            });
            l[hh] = math::fma(l[hh], rescale, sum);
            unroll_8!(2, |hi| {
                unroll_8!(8, |lo| {
                    let j = 8 * hi + lo;
                    if j < D / 8 {
                        acc[j][2 * hh] *= rescale;
                        acc[j][2 * hh + 1] *= rescale;
                    }
                });
            });
        });

        // O += P V: the score accumulators of keys `16 kk ..+ 16` are an `A` fragment.
        unroll_8!(4, |kk| {
            let a = [
                T::pack([s[2 * kk][0], s[2 * kk][1]]),
                T::pack([s[2 * kk][2], s[2 * kk][3]]),
                T::pack([s[2 * kk + 1][0], s[2 * kk + 1][1]]),
                T::pack([s[2 * kk + 1][2], s[2 * kk + 1][3]]),
            ];
            unroll_8!(D / 16, |jj| {
                // SAFETY: key row `16 kk + lane % 16` below 64, dims `16 jj + 8 (lane / 16) ..+
                // 8 <= D` of the V tile, 16-byte aligned; the whole warp is here.
                let r = unsafe {
                    ldmatrix_x4_trans(
                        sv.wrapping_add((16 * kk + lane % 16) * pitch + 16 * jj + 8 * (lane / 16)),
                    )
                };
                acc[2 * jj] = T::mma(a, [r[0], r[1]], acc[2 * jj]);
                acc[2 * jj + 1] = T::mma(a, [r[2], r[3]], acc[2 * jj + 1]);
            });
        });
        t = after;
        n += 1;
    }

    unroll_8!(2, |hh| {
        let total = l[hh] + warp::shfl_xor(l[hh], 1);
        let total = total + warp::shfl_xor(total, 2);
        let i = rows[hh];
        if i < q_len {
            // A row that saw no key: output 0 (not 0 / 0) and log-sum-exp -inf.
            let inv = if total > 0.0 { 1.0 / total } else { 0.0 };
            let o_row = o.wrapping_add(((b * q_len + i) * heads + h) * D).cast::<u32>();
            unroll_8!(2, |hi| {
                unroll_8!(8, |lo| {
                    let j = 8 * hi + lo;
                    if j < D / 8 {
                        let pair = T::pack([acc[j][2 * hh] * inv, acc[j][2 * hh + 1] * inv]);
                        // SAFETY: dims `8j + 2t4 ..+ 2 < D` of row `(b, i, h)` of the
                        // contiguous output, 4-byte aligned (aligned base, even offsets).
                        unsafe { mem::store(o_row, (8 * j + 2 * t4) / 2, pair) };
                    }
                });
            });
            if t4 == 0 {
                let out = if total > 0.0 {
                    m[hh] * math::LN_2 + math::ln(total)
                } else {
                    f32::NEG_INFINITY
                };
                // SAFETY: `i < q_len`, `h < heads`, `b < batch`.
                unsafe { mem::store(lse, (b * heads + h) * q_len + i, out) };
            }
        }
    });
}
