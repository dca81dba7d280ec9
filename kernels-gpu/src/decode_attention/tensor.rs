//! Decode attention, the tensor-core rung ([`decode_attention_tensor`](fn@decode_attention_tensor)):
//! [`super::tiles`]' blocks, ring and partials, with the arithmetic on `mma.sync` `m16n8k16`.
//!
//! # Why not [`super::tiles`]' lanes
//! The tiles rung keeps enough K and V in flight (two tiles of 32 KiB per block at head dim
//! 128), but its lanes score keys with scalar FMAs: a tile of 64 keys costs each of its 4 warps
//! about a thousand instructions for 4 query rows, and with 8 warps per multiprocessor (its
//! registers) the schedulers spend their cycles on that arithmetic and its dependent latencies
//! rather than keeping the memory busy (the ncu log
//! `bench/experiments/h200-logs/a0c9d50-ncu-decode-attention-tiles.log`). Here a warp's 16 keys
//! of a tile are `2 D / 16` tensor-core steps for the scores and `D / 8` for `P V`, all the
//! group's rows (up to 16: the q heads of a kv head times the queries) at once, the K and V
//! fragments read from the ring by `ldmatrix`: a few hundred instructions per block and tile.
//! Rows beyond the group's are zeros in `A` (the tensor core's work is not what bounds a
//! stream of K and V read once).

use super::tiles::{
    copy_tile, merge_partials, next_stage, stage_elems, PageRows, PAD, TILE_BLOCK, TILE_KEYS, TILE_WARPS,
    WARP,
};
use super::{KvElem, VEC};
use crate::gpu::async_copy::{self, cp_async_16};
use crate::gpu::mma::{ldmatrix_x4, ldmatrix_x4_trans};
use crate::gpu::{bf16, dependent, f16, math, mem, shared, thread, vector, warp};
use crate::kernel;

/// Query rows per block of [`decode_attention_tensor`](fn@decode_attention_tensor): the 16 rows
/// of an `mma` tile (q heads of the kv head times queries); more rows are more blocks.
pub const TENSOR_ROWS: usize = 16;
/// Stages of the ring: two tiles of [`TILE_KEYS`] keys in flight while one is computed.
pub const TENSOR_STAGES: usize = 3;
/// The largest head dim whose queries' `A` fragments a lane keeps in registers for the whole
/// chunk (`D / 16` fragments of 4 words): 32 words at 128; at 256 they are read from shared
/// memory at every tile, the outputs' 128 words leaving no room.
const Q_HELD_DIM: usize = 128;
/// Keys of a tile per warp: one `k` step of `P V`, two `n` tiles of the scores.
const WARP_KEYS: usize = TILE_KEYS / TILE_WARPS;

const _: () = assert!(WARP_KEYS == 16 && TILE_BLOCK as usize == TILE_WARPS * WARP);

/// 16-bit elements of the queries in shared memory: [`TENSOR_ROWS`] rows of `d + 8`.
pub(super) const fn q_elems(d: usize) -> usize {
    TENSOR_ROWS * (d + PAD)
}

/// Dynamic shared memory of [`decode_attention_tensor`](fn@decode_attention_tensor) at head dim
/// `d`: the queries, then [`TENSOR_STAGES`] stages of K and V tiles (rows of `d + 8`). 108,800
/// bytes at `d = 128` (two blocks per multiprocessor), 57,600 at 64, 211,200 at 256.
pub const fn tensor_shared_bytes(d: usize) -> usize {
    (q_elems(d) + TENSOR_STAGES * stage_elems(d)) * 2
}

/// Floats of the warps' partials merged at the end (in the ring, free by then): per warp and
/// row, `(max, sum)` and `d` outputs.
const fn merge_floats(d: usize) -> usize {
    TILE_WARPS * TENSOR_ROWS * (d + 2)
}

const _: () = assert!(merge_floats(256) <= TENSOR_STAGES * stage_elems(256) / 2);
const _: () = assert!(merge_floats(64) <= TENSOR_STAGES * stage_elems(64) / 2);

/// The row of `q` (and of the partials) of the block's row `r`: group row `rr = group * 16 + r`
/// is query `rr % q_len` of q head `kvh * (heads / kv_heads) + rr / q_len`; and its causal limit
/// (the last key it sees).
#[inline(always)]
fn query_row(
    (b, kvh, group): (usize, usize, usize),
    (q_len, heads, kv_heads): (usize, usize, usize),
    len: usize,
    r: usize,
) -> (usize, usize) {
    let rr = group * TENSOR_ROWS + r;
    let (hg, qi) = (rr / q_len, rr % q_len);
    (
        (b * q_len + qi) * heads + kvh * (heads / kv_heads) + hg,
        len - q_len + qi,
    )
}

/// The two `B` fragments (keys `n0 ..+ 8`, then `n0 + 8 ..+ 8`) of the scores `Q K^T` at dims
/// `c0 ..+ 16`, from a K tile of rows `pitch` apart (`ldmatrix.x4`), warp-collective.
///
/// # Safety
/// Rows `n0 ..+ 16`, dims `c0 ..+ 16` inside the tile, landed and visible to the warp; `pitch`
/// and `c0` multiples of 8; every lane calls it together.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn k_pair(tile: *const u16, pitch: usize, n0: usize, c0: usize, lane: usize) -> [[u32; 2]; 2] {
    let mi = lane / 8;
    // SAFETY: the caller's contract.
    let r =
        unsafe { ldmatrix_x4(tile.wrapping_add((n0 + 8 * (mi / 2) + lane % 8) * pitch + c0 + 8 * (mi % 2))) };
    [[r[0], r[1]], [r[2], r[3]]]
}

/// The two `B` fragments (dims `n0 ..+ 8`, then `n0 + 8 ..+ 8`) of `P V` for keys `k0 ..+ 16`,
/// from a V tile of rows `pitch` apart (`ldmatrix.x4.trans`), warp-collective.
///
/// # Safety
/// As [`k_pair`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn v_pair(tile: *const u16, pitch: usize, k0: usize, n0: usize, lane: usize) -> [[u32; 2]; 2] {
    // SAFETY: the caller's contract.
    let r = unsafe { ldmatrix_x4_trans(tile.wrapping_add((k0 + lane % 16) * pitch + n0 + 8 * (lane / 16))) };
    [[r[0], r[1]], [r[2], r[3]]]
}

/// Decode attention, step 1 of 2 (tensor cores): one chunk of the context for up to
/// [`TENSOR_ROWS`] query rows per block, `D` = `head_dim` (64, 128 or 256).
///
/// Block `(x, y)`: sequence `b = y`, kv head `kvh = x % kv_heads`, row group `g = (x /
/// kv_heads) % groups` (`groups = ceil(G q_len / 16)`, `G = heads / kv_heads`; group row `rr` is
/// query `rr % q_len` of q head `kvh G + rr / q_len`) and chunk `c = x / (kv_heads * groups)`:
/// keys `c * chunk .. min((c + 1) * chunk, lens[b])`. The block copies its rows' queries (zeros
/// for rows past the group's) into shared memory with the first tile, and streams the chunk by
/// tiles of 64 keys through a ring of [`TENSOR_STAGES`] stages exactly as
/// [`super::tiles`] does (thread `tid` copies piece `tid % (D / 8)` of rows `tid / (D / 8) + l *
/// 1024 / D`, 16-byte `cp.async`, zeros past the chunk; `STAGES - 1` tiles ahead, one barrier
/// per tile). Warp `w` takes keys `16 w ..+ 16` of each tile: lane `(g, t) = (l / 4, l % 4)`
/// computes the scores of rows `g` and `g + 8` against keys `16 w + 8 j + 2 t + {0, 1}` (`j <
/// 2`) as `D / 16` `mma` steps per `j` (the queries' `A` fragments by `ldmatrix`, once per chunk
/// and held in registers at `D <= 128`, at every tile at 256; K's `B` fragments by `ldmatrix`),
/// scales them by `scale * log2 e` in f32 and, on a tile that reaches past the chunk or a row's
/// causal limit, masks those keys to `-inf`; the row's maximum over the 16 keys (two `shfl_xor`
/// within the quad) updates its running maximum, the lane's share of the sum and its outputs
/// (two rows, dims `8 n + 2 t + {0, 1}`; rescaled only when a maximum moved, so most tiles of a
/// long context skip the multiplies); the probabilities, rounded to `E`, are the `A` fragment of `P V`, `D / 8`
/// `mma` steps against V's fragments (`ldmatrix.trans`). After the last tile the block lets the
/// combine launched after it start ([`dependent::launch_dependents`]); each quad's sums are added,
/// the 4 warps' `(max, sum, output)` merged in shared memory, and the block writes each of its
/// rows' partial as [`super::tiles`] does (`ml[(row * splits + c) * 2 ..]` = `(max, sum)` in base
/// 2, `(-inf, 0)` for a chunk with no key the row sees; `acc[(row * splits + c) * D ..]` the
/// output not yet divided by the sum), for [`super::tiles_combine`].
///
/// Global memory: each K and V row of the chunk read once per row group (once per kv head when
/// `G q_len <= 16`), in 16-byte pieces; `(D + 2) * 4` bytes of partial per row and chunk.
/// Shared memory: [`tensor_shared_bytes`]`(D)` (dynamic).
///
/// Launch: grid `(splits * groups * kv_heads, batch)`, blocks of [`TILE_BLOCK`] threads,
/// `tensor_shared_bytes(D)` bytes of dynamic shared memory.
///
/// # Safety
/// As [`super::tiles`]' kernel: `q` holds `batch * q_len * heads * D` elements, `lens` `batch`,
/// `table` `batch * max_blocks`, `ml` `2 * batch * q_len * heads * splits` floats and `acc` `D`
/// times as many; `heads % kv_heads == 0`; `splits * chunk >= lens[b]`, and for every sequence
/// `q_len <= lens[b] <= max_blocks << shift` and the table's entries for positions below
/// `lens[b]` are block ids of the pools; every buffer 16-byte aligned; the launch as above.
// Barriers: one per tile (the copies landed, the stage about to be refilled free), one before
// the warps' partials are written to the ring, one after.
#[kernel(
    instances(
        decode_attention_tensor_bf16_64 = (bf16, 64),
        decode_attention_tensor_bf16_128 = (bf16, 128),
        decode_attention_tensor_bf16_256 = (bf16, 256),
        decode_attention_tensor_f16_64 = (f16, 64),
        decode_attention_tensor_f16_128 = (f16, 128),
        decode_attention_tensor_f16_256 = (f16, 256),
    ),
    block(TILE_BLOCK),
    barriers(3)
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn decode_attention_tensor<E: KvElem, const D: usize>(
    q: *const E,
    k_pool: *const E,
    v_pool: *const E,
    table: *const i32,
    lens: *const i32,
    ml: *mut f32,
    acc: *mut f32,
    q_len: usize,
    heads: usize,
    kv_heads: usize,
    shift: u32,
    max_blocks: usize,
    splits: usize,
    chunk: usize,
    scale: f32,
) {
    // SAFETY: the kernel's contract is the chunk's.
    unsafe {
        tensor_chunk::<E, D>(
            (q, k_pool, v_pool, table, lens),
            (ml, acc),
            (q_len, heads, kv_heads, shift, max_blocks),
            (splits, chunk, scale),
        )
    };
}

/// Where a block of the tensor rung stands once its chunk's partials are stored
/// ([`tensor_chunk`]): its sequence, kv head and row group, and what maps its rows to rows of
/// `q`; what the fused combine ([`super::tensor_fused`]) reads.
#[derive(Clone, Copy)]
pub(super) struct TensorBlock {
    /// `(sequence, kv head, row group)`.
    at: (usize, usize, usize),
    /// `(q_len, heads, kv_heads)`.
    sizes: (usize, usize, usize),
    /// Row groups per kv head.
    groups: usize,
    /// The sequence's length.
    len: usize,
    /// Rows of the group (up to [`TENSOR_ROWS`]).
    pub(super) row_count: usize,
}

impl TensorBlock {
    /// The row of `q` (and of the partials, times `splits`) of the group's row `r`.
    #[inline(always)]
    pub(super) fn q_row(self, r: usize) -> usize {
        query_row(self.at, self.sizes, self.len, r).0
    }

    /// The index of the row group among the launch's `batch * kv_heads * groups`: its counter.
    #[inline(always)]
    pub(super) fn group_index(self) -> usize {
        let (b, kvh, group) = self.at;
        (b * self.sizes.2 + kvh) * self.groups + group
    }
}

/// The body of [`decode_attention_tensor`](fn@decode_attention_tensor) (its doc says what one
/// thread does), up to the chunk's partials stored: `(q, k_pool, v_pool, table, lens)`, the
/// partials `(ml, acc)`, `(q_len, heads, kv_heads, shift, max_blocks)` and `(splits, chunk,
/// scale)` as the kernel's parameters. Returns the block's place.
///
/// # Safety
/// Every thread of the block; the kernel's contract.
#[inline(always)]
#[allow(clippy::type_complexity)]
pub(super) unsafe fn tensor_chunk<E: KvElem, const D: usize>(
    (q, k_pool, v_pool, table, lens): (*const E, *const E, *const E, *const i32, *const i32),
    (ml, acc): (*mut f32, *mut f32),
    (q_len, heads, kv_heads, shift, max_blocks): (usize, usize, usize, u32, usize),
    (splits, chunk, scale): (usize, usize, f32),
) -> TensorBlock {
    const {
        assert!(
            D == 64 || D == 128 || D == 256,
            "instances for head dims 64, 128, 256"
        );
    }
    let stages = TENSOR_STAGES;
    let pitch = D + PAD;
    let lanes_per_key = D / VEC;

    let tid = thread::thread_idx_x() as usize;
    let (w, lane) = (tid / WARP, tid % WARP);
    let (gq, tq) = (lane / 4, lane % 4);
    let rows = heads / kv_heads * q_len;
    let groups = rows.div_ceil(TENSOR_ROWS);
    // The kv heads vary fastest, as in the tiles rung.
    let bx = thread::block_idx_x() as usize;
    let kvh = bx % kv_heads;
    let (group, c) = ((bx / kv_heads) % groups, bx / kv_heads / groups);
    let b = thread::block_idx_y() as usize;
    let row_count = (rows - group * TENSOR_ROWS).min(TENSOR_ROWS);
    let at = (b, kvh, group);
    let sizes = (q_len, heads, kv_heads);
    // SAFETY: `b < batch`.
    let len = unsafe { mem::load(lens, b) } as usize;
    let start = c * chunk;
    let end = (start + chunk).min(len);
    let tiles = end.saturating_sub(start).div_ceil(TILE_KEYS);

    let qs = shared::dynamic::<E>();
    let ring = qs.wrapping_add(q_elems(D));
    let stage_k = |s: usize| ring.wrapping_add(s * stage_elems(D));
    let stage_v = |s: usize| ring.wrapping_add(s * stage_elems(D) + TILE_KEYS * pitch);

    // The queries: piece `p = tid + 128 k` is dims `8 (p % (D / 8)) ..+ 8` of row `p / (D / 8)`,
    // zeros for rows past the group's; copied with the first tile (group 0 of the copies).
    let mut p = tid;
    while p < TENSOR_ROWS * lanes_per_key {
        let (r, i) = (p / lanes_per_key, p % lanes_per_key);
        let (from, n) = if r < row_count {
            (query_row(at, sizes, len, r).0 * D + i * VEC, 16)
        } else {
            (0, 0)
        };
        // SAFETY: row `r < 16` of the query area, dims `8 i ..+ 8 <= D`, 16-byte aligned
        // (`pitch` a multiple of 8 elements); the source is dims `8 i ..+ 8` of a row of `q`
        // (16-byte aligned), or nothing read; read after the first tile's wait and barrier.
        unsafe {
            cp_async_16(
                qs.wrapping_add(r * pitch + i * VEC).cast(),
                q.wrapping_add(from).cast(),
                n,
            )
        };
        p += TILE_BLOCK as usize;
    }

    let piece = tid % lanes_per_key;
    let (row0, row_step) = (tid / lanes_per_key, TILE_BLOCK as usize / lanes_per_key);
    let pages = PageRows::new::<E>(table, (b, max_blocks, shift, kv_heads, kvh), D, piece);
    // SAFETY (every use): keys below `end <= lens[b] < 2^31`; the stages are the ring's.
    let copy = |t: usize, s: usize| unsafe {
        copy_tile::<E, D>(
            (k_pool, v_pool),
            pages,
            (start + t * TILE_KEYS + row0, end),
            (row0, row_step, piece),
            (stage_k(s), stage_v(s)),
        )
    };
    for s in 0..stages - 1 {
        if s < tiles {
            copy(s, s);
        }
        async_copy::commit_group();
    }

    // This lane's rows `gq` and `gq + 8` of the group: their causal limits (a row past the
    // group's holds zeros and is never written; any limit will do).
    let mut limit = [0usize; 2];
    unroll_8!(2, |h| {
        let r = gq + 8 * h;
        limit[h] = if r < row_count {
            query_row(at, sizes, len, r).1
        } else {
            len - 1
        };
    });
    // Keys below this need no mask for either of the lane's rows: the tiles before the chunk's
    // last (and, with several queries, before the causal edge) skip the comparisons.
    let unmasked_end = end.min(limit[0] + 1).min(limit[1] + 1);
    let q_scale = scale * math::LOG2_E;
    let mut m = [f32::NEG_INFINITY; 2];
    let mut sum = [0.0f32; 2];
    // Outputs: `o[n]` holds dims `8 n + 2 t + {0, 1}` of rows `g` (0, 1) and `g + 8` (2, 3).
    let mut o = [[0.0f32; 4]; super::MAX_HEAD_DIM / 8];
    let q16 = qs.cast::<u16>().cast_const();
    let mut qa = [[0u32; 4]; 8];

    // Tile `t`'s stage, and the stage tile `t + stages - 1` is copied into.
    let (mut read, mut refill) = (0, stages - 1);
    for t in 0..tiles {
        // As in the tiles rung: tile `t` (and, for `t = 0`, the queries) landed, every warp done
        // with tile `t - 1`, whose stage the copies below refill.
        async_copy::wait_pending(stages - 2);
        thread::sync_threads();
        if t + stages - 1 < tiles {
            copy(t + stages - 1, refill);
        }
        async_copy::commit_group();
        let (sk, sv) = (
            stage_k(read).cast::<u16>().cast_const(),
            stage_v(read).cast::<u16>().cast_const(),
        );
        (read, refill) = (next_stage(read, stages), next_stage(refill, stages));
        let k0 = w * WARP_KEYS;

        // The queries' `A` fragments at dims `16 kk ..+ 16`: read once, after the first tile's
        // barrier (which orders the queries' copies), where they fit the registers (`D <=
        // 128`); at every tile otherwise.
        // SAFETY (every use): rows `0 ..+ 16` of the queries, dims `16 kk ..+ 16 <= D`; landed
        // and ordered by the barrier above.
        let q_frag = |kk: usize| unsafe {
            ldmatrix_x4(q16.wrapping_add((lane % 16) * pitch + 16 * kk + 8 * (lane / 16)))
        };
        if D <= Q_HELD_DIM && t == 0 {
            unroll_8!(8, |kk| {
                if kk < D / 16 {
                    qa[kk] = q_frag(kk);
                }
            });
        }

        // Scores of the 16 rows against the warp's 16 keys, two `n` tiles of 8 keys.
        let mut s = [[0.0f32; 4]; 2];
        unroll_8!(8, |hi| {
            unroll_8!(2, |lo| {
                let kk = 2 * hi + lo;
                if kk < D / 16 {
                    let a = if D <= Q_HELD_DIM { qa[kk % 8] } else { q_frag(kk) };
                    // SAFETY: rows `k0 ..+ 16` of the K tile, dims `16 kk ..+ 16 <= D`; landed
                    // and ordered by the barrier above.
                    let bk = unsafe { k_pair(sk, pitch, k0, 16 * kk, lane) };
                    s[0] = E::mma(a, bk[0], s[0]);
                    s[1] = E::mma(a, bk[1], s[1]);
                }
            });
        });

        // The online softmax of rows `g` (h = 0) and `g + 8` (h = 1).
        let key_base = start + t * TILE_KEYS + k0 + 2 * tq;
        let mut top = [f32::NEG_INFINITY; 2];
        // The lane's keys are `key_base + 8 j + {0, 1}`: all below `unmasked_end`, or masked
        // one by one (the chunk's last tile, the causal edge).
        if key_base + 9 < unmasked_end {
            unroll_8!(2, |j| {
                unroll_8!(4, |e| {
                    s[j][e] *= q_scale;
                    top[e / 2] = math::max_nan_fast(top[e / 2], s[j][e]);
                });
            });
        } else {
            unroll_8!(2, |j| {
                unroll_8!(4, |e| {
                    let (h, key) = (e / 2, key_base + 8 * j + e % 2);
                    s[j][e] = if key < end && key <= limit[h] {
                        s[j][e] * q_scale
                    } else {
                        f32::NEG_INFINITY
                    };
                    top[h] = math::max_nan_fast(top[h], s[j][e]);
                });
            });
        }
        let mut alpha = [0.0f32; 2];
        let mut m_ref = [0.0f32; 2];
        unroll_8!(2, |h| {
            unroll_8!(2, |k| {
                top[h] = math::max_nan_fast(top[h], warp::shfl_xor(top[h], 1 << k));
            });
            // While every key so far is masked for the row (`m_new` still -inf), the exponents
            // are taken against 0 and give `alpha = p = 0`.
            let m_new = math::max_nan(m[h], top[h]);
            m_ref[h] = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
            alpha[h] = math::fast::exp2(m[h] - m_ref[h]);
            m[h] = m_new;
            sum[h] *= alpha[h];
        });
        unroll_8!(2, |j| {
            unroll_8!(4, |e| {
                let h = e / 2;
                s[j][e] = math::fast::exp2(s[j][e] - m_ref[h]);
                sum[h] += s[j][e];
            });
        });
        // Once the rows' maxima settle, `alpha` is exactly 1 and the outputs keep their scale:
        // the multiplies are skipped (most tiles of a long context).
        if alpha[0] != 1.0 || alpha[1] != 1.0 {
            unroll_8!(4, |hi| {
                unroll_8!(8, |lo| {
                    let n = 8 * hi + lo;
                    if n < D / 8 {
                        unroll_8!(4, |e| {
                            o[n][e] *= alpha[e / 2];
                        });
                    }
                });
            });
        }

        // P V: the probabilities as the `A` fragment (keys `2t, 2t + 1` of `n` tile 0, then of
        // tile 1), V's fragments two `n` tiles of dims at a time.
        let a = [
            E::pack([s[0][0], s[0][1]]),
            E::pack([s[0][2], s[0][3]]),
            E::pack([s[1][0], s[1][1]]),
            E::pack([s[1][2], s[1][3]]),
        ];
        unroll_8!(2, |hi| {
            unroll_8!(8, |lo| {
                let nn = 8 * hi + lo;
                if nn < D / 16 {
                    // SAFETY: rows `k0 ..+ 16` of the V tile, dims `16 nn ..+ 16 <= D`; landed
                    // and ordered by the barrier above.
                    let bv = unsafe { v_pair(sv, pitch, k0, 16 * nn, lane) };
                    o[2 * nn] = E::mma(a, bv[0], o[2 * nn]);
                    o[2 * nn + 1] = E::mma(a, bv[1], o[2 * nn + 1]);
                }
            });
        });
    }

    // The chunk's keys are all read: the combine launched after this kernel may schedule its
    // blocks (it waits for this grid's completion before reading the partials).
    dependent::launch_dependents();

    // The quad's shares of each row's sum added.
    unroll_8!(2, |h| {
        unroll_8!(2, |k| {
            sum[h] += warp::shfl_xor(sum[h], 1 << k);
        });
    });

    // The 4 warps' partials merged through the ring: `(max, sum)` pairs, then the outputs.
    async_copy::wait_pending(0);
    thread::sync_threads();
    let pairs = ring.cast::<f32>();
    let outs = pairs.wrapping_add(2 * TILE_WARPS * TENSOR_ROWS);
    unroll_8!(2, |h| {
        let slot_of = w * TENSOR_ROWS + gq + 8 * h;
        // SAFETY: inside the ring (`merge_floats(D)` of it); the outputs 8-byte aligned (`outs`
        // at 128 floats, rows of `D`, dims `8 n + 2 t`); nothing reads them before the next
        // barrier, every copy has landed and every warp is done with the ring.
        unsafe {
            unroll_8!(4, |hi| {
                unroll_8!(8, |lo| {
                    let n = 8 * hi + lo;
                    if n < D / 8 {
                        vector::store(outs, slot_of * D + 8 * n + 2 * tq, [o[n][2 * h], o[n][2 * h + 1]]);
                    }
                });
            });
            if tq == 0 {
                mem::store(pairs, 2 * slot_of, m[h]);
                mem::store(pairs, 2 * slot_of + 1, sum[h]);
            }
        }
    });
    thread::sync_threads();
    // SAFETY: every thread, after the barrier that follows the warps' writes of `pairs`; the
    // partial of row `r` is one of `ml` and `acc` (`row_q` a row of `q`, `c < splits`).
    unsafe {
        merge_partials::<D>(pairs, TENSOR_ROWS, row_count, tid, ml, acc, |r| {
            query_row(at, sizes, len, r).0 * splits + c
        })
    };
    TensorBlock {
        at,
        sizes,
        groups,
        len,
        row_count,
    }
}
