//! Decode attention, the streaming rung ([`decode_attention_tiles`](fn@decode_attention_tiles)):
//! a block of 4 warps per `(sequence, kv head, chunk of the context, group of up to`
//! [`TILE_ROWS`] `query rows)`, the chunk's K and V rows streamed through a ring of
//! shared-memory stages by 16-byte `cp.async` copies, each warp scoring its slice of every tile's
//! keys against all the group's rows (lanes own keys, so a dot product needs one shuffle), then
//! [`super::tiles_combine`] merging each row's chunks by their log-sum-exp, a block per row.
//!
//! # Why not [`super::split`]'s warps
//! The split rung gives each warp a short chunk and splits a key's dimensions over 16 lanes
//! (head dim 128), so each key costs `log2 16 + log2 2` dependent shuffles per row, and a warp
//! has two 16-byte loads per lane in flight: about 1 KiB, too little to cover the memory's
//! latency with the warps a multiprocessor holds. Here a block keeps `STAGES - 1` tiles of 64
//! keys in flight (32 KiB of K and V per tile at head dim 128), and the chunk count comes from
//! the blocks the device holds (`host/ops/decode_attention/plan.rs`), so that its partials and
//! the combine stay small next to the context.

use super::{KvElem, VEC};
use crate::gpu::async_copy::{self, cp_async_16_shared};
use crate::gpu::wgmma::shared_address;
use crate::gpu::{bf16, f16, math, mem, shared, thread, vector, warp};
use crate::kernel;

/// Threads per block of [`decode_attention_tiles`](fn@decode_attention_tiles) and
/// [`super::tiles_combine`]: 4 warps.
pub const TILE_BLOCK: u32 = 128;
/// Warps per block.
pub(crate) const TILE_WARPS: usize = TILE_BLOCK as usize / WARP;
/// Keys per tile (one stage of the ring): 16 per warp.
pub const TILE_KEYS: usize = 64;
/// Keys of a tile per warp: lanes `l` and `l + 16` score key `l`, each over half the dims.
const WARP_KEYS: usize = TILE_KEYS / TILE_WARPS;
/// Query rows per block (q heads of the kv head times queries); more rows are more blocks.
pub const TILE_ROWS: usize = 8;
/// Lanes of a warp.
pub(crate) const WARP: usize = warp::SIZE as usize;
/// Elements of padding after each K and V row in shared memory (16 bytes), so that the 8 rows a
/// quarter-warp reads (lanes own keys) fall in 8 disjoint groups of 4 banks.
pub(super) const PAD: usize = 8;
/// Floats of padding after each half row of the scaled queries, so that the two halves a warp
/// reads at once lie in different banks.
const Q_PAD: usize = 4;

// The register arrays and their unrolled loops are sized for 8 rows and 16 keys per warp.
const _: () = assert!(TILE_ROWS == 8 && WARP_KEYS == 16 && VEC == 8);

// A thread copies at most 16 rows of a tile (`D / 16` at `D = 256`), one piece column of them
// (the block a whole number of rows of `D / 8 <= 32` pieces); and at most two pieces of the
// queries.
const _: () = assert!(TILE_KEYS * super::MAX_HEAD_DIM / VEC / TILE_BLOCK as usize == 16);
const _: () = assert!(TILE_BLOCK as usize / 32 * 32 == TILE_BLOCK as usize);
const _: () = assert!(TILE_ROWS * super::MAX_HEAD_DIM / VEC <= 2 * TILE_BLOCK as usize);

/// Stages of the ring at head dim `d`: 3 (two tiles in flight while one is computed), 2 past
/// 128 (a stage is 66 KiB there).
pub const fn tile_stages(d: usize) -> usize {
    if d > 128 {
        2
    } else {
        3
    }
}

/// 16-bit elements of one stage: the K tile, then the V tile, rows of `d + 8`.
pub(super) const fn stage_elems(d: usize) -> usize {
    2 * TILE_KEYS * (d + PAD)
}

/// Floats of the scaled query rows: `TILE_ROWS` rows of two halves of `d / 2 + 4`.
const fn q_floats(d: usize) -> usize {
    TILE_ROWS * (d + 2 * Q_PAD)
}

/// Dynamic shared memory of [`decode_attention_tiles`](fn@decode_attention_tiles) at head dim
/// `d`: the scaled queries, then [`tile_stages`] stages of K and V tiles. 111,616 bytes at `d =
/// 128` (two blocks per multiprocessor), 57,600 at 64, 152,064 at 256.
pub const fn tiles_shared_bytes(d: usize) -> usize {
    q_floats(d) * 4 + tile_stages(d) * stage_elems(d) * 2
}

/// Floats of the warps' partials merged at the end (in the ring, free by then).
const fn merge_floats(d: usize) -> usize {
    TILE_WARPS * TILE_ROWS * (d + 2)
}

// The merge fits in the ring at every head dim.
const _: () = assert!(merge_floats(256) * 4 <= 2 * stage_elems(256) * 2);
const _: () = assert!(merge_floats(64) * 4 <= 2 * stage_elems(64) * 2);

/// The row of `q` (and of the partials) of the block's row `r`: group row `rr = group * 8 + r`
/// is query `rr % q_len` of q head `kvh * (heads / kv_heads) + rr / q_len`; and its causal limit
/// (the last key it sees).
#[inline(always)]
fn query_row(
    (b, kvh, group): (usize, usize, usize),
    (q_len, heads, kv_heads): (usize, usize, usize),
    len: usize,
    r: usize,
) -> (usize, usize) {
    let rr = group * TILE_ROWS + r;
    let (hg, qi) = (rr / q_len, rr % q_len);
    (
        (b * q_len + qi) * heads + kvh * (heads / kv_heads) + hg,
        len - q_len + qi,
    )
}

/// One thread's view of a sequence's pages for one kv head, made once per block, so that a
/// tile's copies compute each row's byte offset in a few 32-bit steps and one widening multiply
/// (positions, block ids and pool rows fit in `i32`, checked by the host).
#[derive(Clone, Copy)]
pub(super) struct PageRows {
    /// Row `b` of the block table.
    table_row: *const i32,
    /// `log2` of the block size.
    shift: u32,
    /// Bytes from one pool row (token) to the next: `kv_heads * D` elements.
    stride: u32,
    /// The byte of a pool row where the thread's piece of kv head `kvh` starts: element `kvh D +
    /// 8 piece`.
    offset: u32,
}

impl PageRows {
    /// The view of sequence `b`'s pages (`(b, max_blocks, shift, kv_heads, kvh)` as
    /// [`super::row_of`]'s) for dims `8 piece ..+ 8` of head dim `d`, elements of `E`.
    #[inline(always)]
    pub(super) fn new<E>(
        table: *const i32,
        (b, max_blocks, shift, kv_heads, kvh): (usize, usize, u32, usize, usize),
        d: usize,
        piece: usize,
    ) -> PageRows {
        let bytes = core::mem::size_of::<E>();
        PageRows {
            table_row: table.wrapping_add(b * max_blocks),
            shift,
            stride: (kv_heads * d * bytes) as u32,
            offset: ((kvh * d + piece * VEC) * bytes) as u32,
        }
    }

    /// The byte of a pool row where the thread's piece starts.
    #[inline(always)]
    pub(super) fn offset(self) -> usize {
        self.offset as usize
    }

    /// The byte offset in the pools of token `pos`'s row (the row's start, without
    /// [`PageRows::offset`]).
    ///
    /// # Safety
    /// `pos < max_blocks << shift` and the table's entry for it is a block id of the pools.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn row_bytes(self, pos: u32) -> usize {
        // SAFETY: the caller's contract.
        let block = unsafe { mem::load(self.table_row, (pos >> self.shift) as usize) } as u32;
        // The pool's row: below its capacity, which the host keeps within `i32`.
        let row = (block << self.shift) | (pos & ((1u32 << self.shift) - 1));
        (row as u64 * self.stride as u64) as usize
    }
}

/// Issues one thread's `cp.async` copies of a tile: the thread's piece (dims `8 piece ..+ 8`,
/// as made into `pages`) of the tile's rows `row0 + l * row_step` (`l < D / 16`, key `key0 + l *
/// row_step`) from the K and V pools to the stage tiles `sk` and `sv` (rows of `D + 8`), zeros
/// for keys at or past `end`. The rows' block-table entries are read first, 8 at a time, so that
/// their latencies overlap.
///
/// # Safety
/// `pages` made for the sequence and kv head as [`PageRows::new`] says, the table's entries
/// below `end` block ids of the pools, `end < 2^31`; `row0 + (D / 16 - 1) * row_step < 64`,
/// `piece < D / 8` (the piece `pages` was made for); `sk` and `sv` 16-byte aligned tiles of 64
/// rows in shared memory, not read before the copies' wait and a barrier.
#[inline(always)]
pub(super) unsafe fn copy_tile<E: KvElem, const D: usize>(
    (k_pool, v_pool): (*const E, *const E),
    pages: PageRows,
    (key0, end): (usize, usize),
    (row0, row_step, piece): (usize, usize, usize),
    (sk, sv): (*mut E, *mut E),
) {
    let pitch = D + PAD;
    let (key0, end, row_step32) = (key0 as u32, end as u32, row_step as u32);
    // The thread's piece of a pool row starts `offset` bytes in.
    let (k_first, v_first) = (
        k_pool.cast::<u8>().wrapping_add(pages.offset()),
        v_pool.cast::<u8>().wrapping_add(pages.offset()),
    );
    // The stage tiles' shared-memory addresses, once: each row's destination is a constant
    // offset from the thread's first.
    let first = ((row0 * pitch + piece * VEC) * core::mem::size_of::<E>()) as u32;
    let (sk_at, sv_at) = (shared_address(sk) + first, shared_address(sv) + first);
    // A key at or past `end` copies zeros; its row's address is the chunk's last key's (read
    // for its table entry only, so that no load waits on a predicate).
    let last = end.max(1) - 1;
    // Up to 8 rows at a time (two rounds at head dim 256), so that the offsets stay in
    // registers.
    unroll_8!(2, |hi| {
        if 8 * hi < D / 16 {
            let mut from = [0usize; 8];
            unroll_8!(8, |lo| {
                let (l, key) = (8 * hi + lo, key0 + (8 * hi + lo) as u32 * row_step32);
                if l < D / 16 {
                    // SAFETY: `min(key, last) < end`: the table's entry is a block id.
                    from[lo] = unsafe { pages.row_bytes(key.min(last)) };
                }
            });
            unroll_8!(8, |lo| {
                let (l, key) = (8 * hi + lo, key0 + (8 * hi + lo) as u32 * row_step32);
                if l < D / 16 {
                    let to = ((l * row_step * pitch) * core::mem::size_of::<E>()) as u32;
                    // SAFETY: row `row0 + l * row_step < 64`, dims `8 piece ..+ 8 <= D` of the
                    // stage's tiles, 16-byte aligned (`pitch` and the tiles' starts multiples of
                    // 8 elements); the source piece lies in the pools (16-byte aligned: `D` a
                    // multiple of 8), and is read only for a key below `end`.
                    unsafe {
                        cp_async_16_shared(sk_at + to, k_first.wrapping_add(from[lo]).cast(), key < end);
                        cp_async_16_shared(sv_at + to, v_first.wrapping_add(from[lo]).cast(), key < end);
                    }
                }
            });
        }
    });
}

/// The ring's stage after stage `s` of `stages`: a counter kept in a register, where `t %
/// stages` of a tile index took a 64-bit division by a constant at every tile.
#[inline(always)]
pub(super) fn next_stage(s: usize, stages: usize) -> usize {
    if s + 1 == stages {
        0
    } else {
        s + 1
    }
}

/// Decode attention, step 1 of 2 (streaming): one chunk of the context for up to
/// [`TILE_ROWS`] query rows per block, `D` = `head_dim` (64, 128 or 256).
///
/// Block `(x, y)`: sequence `b = y`, kv head `kvh = x % kv_heads`, row group `g = (x /
/// kv_heads) % groups` (`groups = ceil(G q_len / 8)`, `G = heads / kv_heads`; rows as in
/// [`super::split`]) and chunk `c = x / (kv_heads * groups)`: keys `c * chunk .. min((c + 1) *
/// chunk, lens[b])`. The block's threads load its rows' queries, issue the first tiles' copies,
/// then write the queries, scaled by `scale * log2 e`, to shared memory as f32. The chunk goes
/// by tiles of 64 keys through a ring of [`tile_stages`] stages:
/// thread `tid` copies piece `tid % (D / 8)` (16 bytes, 8 elements) of the tile's K and V rows
/// `tid / (D / 8) + l * 1024 / D` (`l < D / 16`, their block-table entries read first; zeros past
/// the chunk), `STAGES - 1` tiles ahead of the one computed, one barrier per tile. Warp `w` takes keys `16 w .. 16 w + 16` of each tile: lane
/// `l` scores key `16 w + l % 16` over dims `(l / 16) D / 2 ..+ D / 2` against each row (8
/// dims of K and of each row's query per shared load, then one `shfl_xor 16`), masked to `-inf`
/// past the chunk or the row's causal limit; the warp's maximum over its 16 keys (4 shuffles)
/// updates the row's running maximum and sum (two `ex2.approx` per lane), and for `P V` lane
/// `(slot, part)` (`D / 8` lanes per key) adds dims `8 part ..+ 8` of V rows `16 w + slot,
/// 16 w + slot + 32 / (D / 8), ..` weighted by their probabilities (`shfl_idx` from the lane
/// that scored the key). At the end each warp's slots are added (shuffles), the 4 warps'
/// `(max, sum, output)` merged in shared memory, and the block writes each row's partial as
/// [`super::split`] does: `ml[(row * splits + c) * 2 ..]` = `(max, sum)` in base 2 (`(-inf, 0)`
/// for a chunk with no key the row sees), `acc[(row * splits + c) * D ..]` the output not yet
/// divided by the sum.
///
/// Global memory: each K and V row of the chunk read once per row group (once per kv head when
/// `G q_len <= 8`), in 16-byte pieces, 16 consecutive threads per 256-byte row at `D = 128`;
/// `(D + 2) * 4` bytes of partial per row and chunk. Shared memory: [`tiles_shared_bytes`]`(D)`
/// (dynamic).
///
/// Launch: grid `(splits * groups * kv_heads, batch)`, blocks of [`TILE_BLOCK`] threads,
/// `tiles_shared_bytes(D)` bytes of dynamic shared memory.
///
/// # Safety
/// `q` holds `batch * q_len * heads * D` elements, `lens` `batch`, `table` `batch * max_blocks`,
/// `ml` `2 * batch * q_len * heads * splits` floats and `acc` `D` times as many; `heads %
/// kv_heads == 0`; `splits * chunk >= lens[b]`, and for every sequence `q_len <= lens[b] <=
/// max_blocks << shift` and the table's entries for positions below `lens[b]` are block ids of
/// the pools; every buffer 16-byte aligned; the launch as above.
// Barriers: one per tile (the copies landed, the stage about to be refilled free), one before
// the warps' partials are written to the ring, one after.
#[kernel(
    instances(
        decode_attention_tiles_bf16_64 = (bf16, 64),
        decode_attention_tiles_bf16_128 = (bf16, 128),
        decode_attention_tiles_bf16_256 = (bf16, 256),
        decode_attention_tiles_f16_64 = (f16, 64),
        decode_attention_tiles_f16_128 = (f16, 128),
        decode_attention_tiles_f16_256 = (f16, 256),
    ),
    block(TILE_BLOCK),
    barriers(3)
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn decode_attention_tiles<E: KvElem, const D: usize>(
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
    const {
        assert!(
            D == 64 || D == 128 || D == 256,
            "instances for head dims 64, 128, 256"
        );
    }
    let stages = tile_stages(D);
    let pitch = D + PAD;
    let half = D / 2;
    let q_pitch = D + 2 * Q_PAD;
    let lanes_per_key = D / VEC;
    let slots = WARP / lanes_per_key;

    let tid = thread::thread_idx_x() as usize;
    let (w, lane) = (tid / WARP, tid % WARP);
    let rows = heads / kv_heads * q_len;
    let groups = rows.div_ceil(TILE_ROWS);
    // The kv heads vary fastest, so that the blocks running at once read whole tokens (all
    // kv heads of a position lie together in a pool block).
    let bx = thread::block_idx_x() as usize;
    let kvh = bx % kv_heads;
    let (group, c) = ((bx / kv_heads) % groups, bx / kv_heads / groups);
    let b = thread::block_idx_y() as usize;
    // Rows of this block: warp-uniform, every loop over rows below runs alike in all lanes.
    let row_count = (rows - group * TILE_ROWS).min(TILE_ROWS);
    let at = (b, kvh, group);
    let sizes = (q_len, heads, kv_heads);
    // SAFETY: `b < batch`.
    let len = unsafe { mem::load(lens, b) } as usize;
    let start = c * chunk;
    let end = (start + chunk).min(len);
    let tiles = end.saturating_sub(start).div_ceil(TILE_KEYS);

    let qs = shared::dynamic::<f32>();
    let ring = qs.wrapping_add(q_floats(D)).cast::<E>();
    let stage_k = |s: usize| ring.wrapping_add(s * stage_elems(D));
    let stage_v = |s: usize| ring.wrapping_add(s * stage_elems(D) + TILE_KEYS * pitch);

    // This thread's pieces of the queries (piece `p = tid + 128 k` is dims `8 (p % (D / 8)) ..+
    // 8` of row `p / (D / 8)`), loaded now and written to shared memory once the first tiles'
    // copies are issued, so that their latencies overlap.
    let q_piece = |k: usize| {
        let p = tid + k * TILE_BLOCK as usize;
        (p < row_count * lanes_per_key).then_some((p / lanes_per_key, p % lanes_per_key))
    };
    let mut qx = [[E::ZERO; VEC]; 2];
    unroll_8!(2, |k| {
        if let Some((r, i)) = q_piece(k) {
            let (row_q, _) = query_row(at, sizes, len, r);
            // SAFETY: row `row_q` of `q`, dims `8 i ..+ 8 <= D`, 16-byte aligned.
            qx[k] = unsafe { vector::load(q, row_q * D + i * VEC) };
        }
    });

    // Thread `tid` copies piece `tid % (D / 8)` of rows `tid / (D / 8) + l * 1024 / D` of a tile.
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

    let mut limit = [0usize; TILE_ROWS];
    unroll_8!(8, |r| {
        if r < row_count {
            limit[r] = query_row(at, sizes, len, r).1;
        }
    });
    let mut m = [f32::NEG_INFINITY; TILE_ROWS];
    let mut sum = [0.0f32; TILE_ROWS];
    let mut o = [[0.0f32; VEC]; TILE_ROWS];
    let (kk, h) = (lane % WARP_KEYS, lane / WARP_KEYS);
    let (slot, part) = (lane / lanes_per_key, lane % lanes_per_key);

    for s in 0..stages - 1 {
        if s < tiles {
            copy(s, s);
        }
        async_copy::commit_group();
    }
    // The queries scaled by `scale * log2 e`, as f32 in the two halves of their rows.
    let q_scale = scale * math::LOG2_E;
    unroll_8!(2, |k| {
        if let Some((r, i)) = q_piece(k) {
            let mut f = [0.0f32; VEC];
            unroll_8!(8, |e| {
                f[e] = qx[k][e].to_f32() * q_scale;
            });
            let (h, o) = ((i * VEC) / half, (i * VEC) % half);
            // SAFETY: row `r < 8`, half `h`, floats `o ..+ 8 <= D / 2`: inside the query area,
            // 16-byte aligned (`q_pitch`, the half's start and `o` multiples of 4 floats). Read
            // after the first tile's barrier.
            unsafe { vector::store(qs, r * q_pitch + h * (half + Q_PAD) + o, f) };
        }
    });
    // Tile `t`'s stage, and the stage tile `t + stages - 1` is copied into.
    let (mut read, mut refill) = (0, stages - 1);
    for t in 0..tiles {
        // Tile `t`'s group has landed (at most `stages - 2` later ones in flight); after the
        // barrier every thread's copies are visible, and every warp is done with tile `t - 1`,
        // whose stage the copies below refill.
        async_copy::wait_pending(stages - 2);
        thread::sync_threads();
        if t + stages - 1 < tiles {
            copy(t + stages - 1, refill);
        }
        async_copy::commit_group();
        let (sk, sv) = (stage_k(read), stage_v(read));
        (read, refill) = (next_stage(read, stages), next_stage(refill, stages));

        // Scores: this lane's key against every row, over its half of the dims.
        let key_row = sk.wrapping_add((w * WARP_KEYS + kk) * pitch + h * half);
        let mut dot = [0.0f32; TILE_ROWS];
        // Two pieces of 8 dims per step (`D / 16` is even), both K loads issued first.
        let mut i = 0;
        while i < half / VEC {
            let mut kf = [[0.0f32; VEC]; 2];
            unroll_8!(2, |ii| {
                // SAFETY: row `16 w + kk < 64` of the K tile, dims `h D / 2 + 8 (i + ii) ..+ 8 <=
                // D`, 16-byte aligned; landed and ordered by the barrier above.
                let kx: [E; VEC] = unsafe { vector::load(key_row, (i + ii) * VEC) };
                unroll_8!(8, |e| {
                    kf[ii][e] = kx[e].to_f32();
                });
            });
            unroll_8!(8, |r| {
                if r < row_count {
                    let qrow = qs.wrapping_add(r * q_pitch + h * (half + Q_PAD) + i * VEC);
                    // SAFETY: row `r`'s half `h`, floats `8 i ..+ 16 <= D / 2`, written before
                    // the first barrier; 16-byte aligned.
                    let qv: [f32; 2 * VEC] = unsafe { vector::load(qrow, 0) };
                    unroll_8!(2, |ii| {
                        unroll_8!(8, |e| {
                            dot[r] = math::fma(qv[ii * VEC + e], kf[ii][e], dot[r]);
                        });
                    });
                }
            });
            i += 2;
        }
        let key = start + t * TILE_KEYS + w * WARP_KEYS + kk;
        let mut prob = [0.0f32; TILE_ROWS];
        unroll_8!(8, |r| {
            if r < row_count {
                let full = dot[r] + warp::shfl_xor(dot[r], 16);
                let score = if key < end && key <= limit[r] {
                    full
                } else {
                    f32::NEG_INFINITY
                };
                let mut top = score;
                unroll_8!(4, |k| {
                    top = math::max_nan_fast(top, warp::shfl_xor(top, 1 << k));
                });
                // While every key so far is masked for the row (`m_new` still -inf), the
                // exponents are taken against 0 and give `alpha = p = 0`.
                let m_new = math::max_nan(m[r], top);
                let m_ref = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
                let alpha = math::fast::exp2(m[r] - m_ref);
                prob[r] = math::fast::exp2(score - m_ref);
                sum[r] = math::fma(sum[r], alpha, prob[r]);
                unroll_8!(8, |e| {
                    o[r][e] *= alpha;
                });
                m[r] = m_new;
            }
        });

        // P V: `slots` keys per step, `D / 8` lanes each, 8 dims per lane.
        let mut j = slot;
        while j < WARP_KEYS {
            // SAFETY: row `16 w + j < 64` of the V tile, dims `8 part ..+ 8 <= D`, 16-byte
            // aligned; landed and ordered by the barrier above.
            let vx: [E; VEC] =
                unsafe { vector::load(sv.wrapping_add((w * WARP_KEYS + j) * pitch), part * VEC) };
            let mut vf = [0.0f32; VEC];
            unroll_8!(8, |e| {
                vf[e] = vx[e].to_f32();
            });
            unroll_8!(8, |r| {
                if r < row_count {
                    let pj = warp::shfl_idx(prob[r], j as u32);
                    unroll_8!(8, |e| {
                        o[r][e] = math::fma(pj, vf[e], o[r][e]);
                    });
                }
            });
            j += slots;
        }
    }

    // The warp's sums (lanes `l` and `l + 16` hold the same) and outputs (one per slot) added.
    unroll_8!(8, |r| {
        if r < row_count {
            unroll_8!(4, |k| {
                sum[r] += warp::shfl_xor(sum[r], 1 << k);
            });
            let mut mask = lanes_per_key;
            while mask < WARP {
                unroll_8!(8, |e| {
                    o[r][e] += warp::shfl_xor(o[r][e], mask as u32);
                });
                mask *= 2;
            }
        }
    });

    // The 4 warps' partials merged through the ring: `(max, sum)` pairs, then the outputs.
    async_copy::wait_pending(0);
    thread::sync_threads();
    let pairs = ring.cast::<f32>();
    let outs = pairs.wrapping_add(2 * TILE_WARPS * TILE_ROWS);
    unroll_8!(8, |r| {
        if r < row_count && slot == 0 {
            let slot_of = w * TILE_ROWS + r;
            // SAFETY: inside the ring (`merge_floats(D)` of it), 16-byte aligned for the
            // outputs (`outs` at 64 floats, rows of `D`, `8 part`); nothing reads it before the
            // next barrier, every copy has landed.
            unsafe {
                vector::store(outs, slot_of * D + part * VEC, o[r]);
                if part == 0 {
                    mem::store(pairs, 2 * slot_of, m[r]);
                    mem::store(pairs, 2 * slot_of + 1, sum[r]);
                }
            }
        }
    });
    thread::sync_threads();
    // SAFETY: every thread, after the barrier that follows the warps' writes of `pairs`; the
    // partial of row `r` is one of `ml` and `acc` (`row_q` a row of `q`, `c < splits`).
    unsafe {
        merge_partials::<D>(pairs, TILE_ROWS, row_count, tid, ml, acc, |r| {
            query_row(at, sizes, len, r).0 * splits + c
        })
    };
}

/// The end of a chunk's block, [`decode_attention_tiles`](fn@decode_attention_tiles)'s and
/// [`super::tensor`]'s: the 4 warps' partials of each of the block's `row_count` rows, in `pairs`
/// (warp `w`'s row `r` in slot `w * warp_rows + r`: its `(max, sum)` at `2 slot`, its outputs,
/// rows of `D`, from `2 * TILE_WARPS * warp_rows` floats on), merged into the row's partial
/// `partial(r)`: `ml[2 partial(r) ..]` = `(max, sum)`, `acc[partial(r) D ..]` the outputs weighted
/// by `2^(max_w - max)`. Thread `tid` takes dims `4 d4 ..+ 4` of row `r` for each `r D / 4 + d4
/// = tid + k TILE_BLOCK`: 16-byte loads of shared memory, a 16-byte store of `acc`.
///
/// # Safety
/// Every thread of the block, after the barrier that follows the warps' writes of their slots;
/// `pairs` in shared memory, 16-byte aligned at the outputs, `TILE_WARPS * warp_rows * (D + 2)`
/// floats; for each `r < row_count`, `partial(r)` a partial of `ml` and `acc` (16-byte aligned).
#[inline(always)]
pub(super) unsafe fn merge_partials<const D: usize>(
    pairs: *mut f32,
    warp_rows: usize,
    row_count: usize,
    tid: usize,
    ml: *mut f32,
    acc: *mut f32,
    partial: impl Fn(usize) -> usize,
) {
    let outs = pairs.wrapping_add(2 * TILE_WARPS * warp_rows);
    let quads = D / 4;
    let mut u = tid;
    while u < row_count * quads {
        let (r, d4) = (u / quads, u % quads);
        // SAFETY (all shared reads): slots written before the barrier (the contract).
        let mut big_m = f32::NEG_INFINITY;
        unroll_8!(4, |ww| {
            big_m = math::max_nan(big_m, unsafe { mem::load(pairs, 2 * (ww * warp_rows + r)) });
        });
        let mut total = 0.0f32;
        let mut out = [0.0f32; 4];
        unroll_8!(4, |ww| {
            let slot_of = ww * warp_rows + r;
            let mw = unsafe { mem::load(pairs, 2 * slot_of) };
            // A warp (or the whole chunk) that saw no key of the row weighs 0.
            let weight = if big_m == f32::NEG_INFINITY {
                0.0
            } else {
                math::fast::exp2(mw - big_m)
            };
            total = math::fma(weight, unsafe { mem::load(pairs, 2 * slot_of + 1) }, total);
            let x: [f32; 4] = unsafe { vector::load(outs, slot_of * D + 4 * d4) };
            unroll_8!(4, |e| {
                out[e] = math::fma(weight, x[e], out[e]);
            });
        });
        let pi = partial(r);
        // SAFETY: partial `pi` of `ml` and `acc` (the contract); dims `4 d4 ..+ 4 <= D`, 16-byte
        // aligned.
        unsafe {
            vector::store(acc, pi * D + 4 * d4, out);
            if d4 == 0 {
                mem::store(ml, 2 * pi, big_m);
                mem::store(ml, 2 * pi + 1, total);
            }
        }
        u += TILE_BLOCK as usize;
    }
}
