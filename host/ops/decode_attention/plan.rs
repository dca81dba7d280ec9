//! The plan of a decode-attention call: the tutorial warp rung, FlashDecoding's split (a warp
//! per chunk), the streaming tiles rung (a block per chunk) or the tensor-core rung (the tiles
//! rung's blocks with `mma.sync` arithmetic; in two launches, or in one with the combine fused
//! in), with how many chunks the context is cut into, chosen once per call from the batch, the
//! kv heads, the query rows per kv head, the longest context, the head dim and the device's
//! multiprocessors.

use kernels_gpu::decode_attention::{
    ATTN_WARPS, ROWS_PER_WARP, TENSOR_ROWS, TILE_KEYS, TILE_ROWS, tensor_shared_bytes, tiles_shared_bytes,
};

/// Warps of the split step per multiprocessor the plan aims for: one full wave. A warp has two
/// 16-byte loads per lane in flight, so a multiprocessor needs all the warps it can hold to keep
/// its share of the memory system busy; the split kernel's registers (about 150 per thread on
/// sm_90, ptxas -v) let 12 warps (3 blocks of 4) be resident.
const WARPS_PER_SM: usize = 12;
/// Fewest keys per chunk: below this, a chunk's partial (`(head_dim + 2) * 4` bytes per row,
/// written and read back by the combine) is no longer small next to the chunk's K and V rows
/// (32 keys of `head_dim` 128 in bf16: 16 KiB of K and V against 520 bytes of partial).
pub(crate) const MIN_CHUNK_KEYS: usize = 32;
/// Most chunks per row: bounds the partials and the combine's loop.
pub(crate) const MAX_SPLITS: usize = 256;
/// Waves of blocks the tiles rung aims for: every multiprocessor holds as many blocks as its
/// shared memory allows ([`tile_blocks_per_sm`]), twice over, so that a block that finishes
/// early is followed by another. A guess (unmeasured): the bench's `gpukern:tiles-<n>` rows at
/// half and twice the planned count are there to tune it.
const TILE_WAVES: usize = 2;
/// Fewest tiles of `TILE_KEYS` keys per chunk of the tiles rung: a block streams at least two
/// tiles, so that one is in flight while the other is computed.
pub(crate) const MIN_CHUNK_TILES: usize = 2;
/// Shared memory of a multiprocessor that blocks may use (the H100/H200's 228 KiB) and what
/// the driver keeps per block (1 KiB).
const SM_SHARED: usize = 228 * 1024;
const BLOCK_RESERVED: usize = 1024;
/// Blocks of the tiles rung a multiprocessor holds by registers: ptxas -v gives its kernels
/// 198 to 206 registers per thread (sm_90, bf16), 25 K to 26 K per block of 128 threads, of 64 K.
const REGISTER_BLOCKS: usize = 2;
/// Blocks of the tensor rung a multiprocessor holds by registers: ptxas -v gives its kernels
/// 150 registers per thread at head dim 64 (sm_90, bf16; 19.2 K per block of 128 threads, of
/// 64 K: 3 blocks) and 219 at 128 (28 K: 2 blocks, as its shared memory allows there), with the
/// queries' fragments held in registers for the whole chunk.
const TENSOR_REGISTER_BLOCKS: usize = 3;
/// Waves of blocks the tensor rung aims for: one, every multiprocessor holding as many blocks
/// as it can. A guess from the tiles rung's tuning rows (its half-count rows, one wave, were as
/// fast or faster than its planned two waves at every shape of
/// `bench/experiments/third-wave/a8752bd-decode-attention.jsonl`); the bench's
/// `gpukern:tensor-<n>` rows at half and twice the planned count are there to tune it.
const TENSOR_WAVES: usize = 1;

/// Which kernels compute decode attention. All give the same output up to rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DecodeAlgorithm {
    /// The tutorial rung: one warp per query row over the whole context (`decode_attention_warp`),
    /// one launch. Any `head_dim` that is a multiple of 8 up to 256; the reference of the split
    /// rung on the GPU.
    Warp,
    /// FlashDecoding: the context cut into chunks ([`decode_splits`]), a warp per chunk and
    /// group of 4 query rows (`decode_attention_split`), then `decode_attention_combine`. For
    /// `head_dim` 64, 128 and 256; other head dims run [`DecodeAlgorithm::Warp`].
    Split,
    /// As [`DecodeAlgorithm::Split`] with the given number of chunks (at least 1, at most one
    /// per key of the longest context): for tests and tuning.
    Splits(usize),
    /// The streaming rung: a block of 4 warps per chunk of the context and group of up to 8
    /// query rows, K and V streamed through shared memory (`decode_attention_tiles`), chunks
    /// from [`tile_splits`], then `decode_attention_tiles_combine`. For `head_dim` 64, 128 and
    /// 256; other head dims run [`DecodeAlgorithm::Warp`].
    Tiles,
    /// As [`DecodeAlgorithm::Tiles`] with the given number of chunks (at least 1, at most one
    /// per key of the longest context; chunks need not be whole tiles): for tests and tuning.
    TileSplits(usize),
    /// The tensor-core rung: the tiles rung's blocks and ring for groups of up to 16 query rows,
    /// scores and `P V` on `mma.sync` (`decode_attention_tensor`), chunks from
    /// [`tensor_splits`], then `decode_attention_tiles_combine`. For `head_dim` 64, 128 and 256
    /// (where the ring fits in a block's shared memory; else [`DecodeAlgorithm::Split`]); other
    /// head dims run [`DecodeAlgorithm::Warp`]. The default: 1.4-2.6x the tiles rung at every
    /// bench shape on the H200 (0.1572 against 0.3894 ms at batch 1, 32 heads, 8 kv heads, d 128
    /// and 131,072 cached tokens, `bench/experiments/third-wave/8a0d945-decode-attention.jsonl`).
    #[default]
    Tensor,
    /// As [`DecodeAlgorithm::Tensor`] with the given number of chunks (at least 1, at most one
    /// per key of the longest context; chunks need not be whole tiles): for tests and tuning.
    TensorSplits(usize),
    /// The tensor-core rung in one launch: [`DecodeAlgorithm::Tensor`]'s blocks and chunks, and
    /// the last block of each row group to finish merges the group's chunks
    /// (`decode_attention_tensor_fused`; an atomic ticket per row group in a counter buffer
    /// the call allocates zeroed, or the [`super::DecodeWorkspace`] holds, which every launch
    /// leaves zero), so that no second launch follows. For the head dims and devices of
    /// [`DecodeAlgorithm::Tensor`], with its fallbacks. Not the default: on the H200 it was
    /// level with or slower than the two launches (1780.3 against 1864.1 GB/s at batch 1 and
    /// 8192 cached tokens, 3596.4 against 3606.5 at batch 8, 3834.4 against 3896.2 at batch 1
    /// and 131072, the `into` forms, `bench/experiments/third-wave/858a660-decode-ab-main-1.jsonl`).
    TensorFused,
    /// As [`DecodeAlgorithm::TensorFused`] with the given number of chunks (as
    /// [`DecodeAlgorithm::TensorSplits`]): for tests and tuning.
    TensorFusedSplits(usize),
}

impl DecodeAlgorithm {
    /// A short name: `warp`, `split`, `split-<n>`, `tiles`, `tiles-<n>`, `tensor`, `tensor-<n>`,
    /// `tensor-fused`, `tensor-fused-<n>`.
    pub fn name(self) -> String {
        match self {
            DecodeAlgorithm::Warp => "warp".into(),
            DecodeAlgorithm::Split => "split".into(),
            DecodeAlgorithm::Splits(n) => format!("split-{n}"),
            DecodeAlgorithm::Tiles => "tiles".into(),
            DecodeAlgorithm::TileSplits(n) => format!("tiles-{n}"),
            DecodeAlgorithm::Tensor => "tensor".into(),
            DecodeAlgorithm::TensorSplits(n) => format!("tensor-{n}"),
            DecodeAlgorithm::TensorFused => "tensor-fused".into(),
            DecodeAlgorithm::TensorFusedSplits(n) => format!("tensor-fused-{n}"),
        }
    }
}

/// The shape facts the plan reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DecodeShape {
    /// Sequences.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// New queries per sequence.
    pub q_len: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// The longest context of the batch (at least 1).
    pub context: usize,
}

/// What one decode-attention call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecodePlan {
    /// `decode_attention_warp`.
    Warp,
    /// `decode_attention_split` with `splits` chunks of `chunk` keys (`splits * chunk >=
    /// context`, no chunk empty for the longest sequence), then `decode_attention_combine`.
    Split {
        /// Chunks per row.
        splits: usize,
        /// Keys per chunk.
        chunk: usize,
    },
    /// `decode_attention_tiles` with `splits` chunks of `chunk` keys (as for `Split`), then
    /// `decode_attention_tiles_combine`.
    Tiles {
        /// Chunks per row.
        splits: usize,
        /// Keys per chunk.
        chunk: usize,
    },
    /// `decode_attention_tensor` with `splits` chunks of `chunk` keys (as for `Split`), then
    /// `decode_attention_tiles_combine`.
    Tensor {
        /// Chunks per row.
        splits: usize,
        /// Keys per chunk.
        chunk: usize,
    },
    /// `decode_attention_tensor_fused` with `splits` chunks of `chunk` keys (as for `Split`),
    /// the combine inside it: one launch.
    TensorFused {
        /// Chunks per row.
        splits: usize,
        /// Keys per chunk.
        chunk: usize,
    },
}

impl DecodePlan {
    /// Chunks per row of the plan's partials (0 for the warp rung, which has none).
    pub(crate) fn splits(self) -> usize {
        match self {
            DecodePlan::Warp => 0,
            DecodePlan::Split { splits, .. }
            | DecodePlan::Tiles { splits, .. }
            | DecodePlan::Tensor { splits, .. }
            | DecodePlan::TensorFused { splits, .. } => splits,
        }
    }

    /// Words of the plan's hand-off counters for `batch` sequences of `kv_heads` kv heads and
    /// `rows` query rows per kv head: one per row group of [`TENSOR_ROWS`] rows of the fused
    /// plan (`batch * kv_heads * ceil(rows / 16)`), none for the others.
    pub(crate) fn counter_words(self, batch: usize, kv_heads: usize, rows: usize) -> usize {
        match self {
            DecodePlan::TensorFused { .. } => batch
                .saturating_mul(kv_heads)
                .saturating_mul(rows.div_ceil(TENSOR_ROWS)),
            _ => 0,
        }
    }
}

/// Whether the split rung has an instance for `head_dim`.
pub(crate) fn split_head_dim(head_dim: usize) -> bool {
    matches!(head_dim, 64 | 128 | 256)
}

/// Chunks per row of the split rung for `batch` sequences of `kv_heads` kv heads, `rows` query
/// rows per kv head (q heads per kv head times queries) and a longest context of `context` keys
/// on a device of `sms` multiprocessors: as many warps as `WARPS_PER_SM` on every
/// multiprocessor hold (one wave), but no chunk under `MIN_CHUNK_KEYS` keys (so one chunk for a short
/// context) and at most `MAX_SPLITS`.
pub fn decode_splits(batch: usize, kv_heads: usize, rows: usize, context: usize, sms: usize) -> usize {
    let warps = batch.max(1) * kv_heads.max(1) * rows.max(1).div_ceil(ROWS_PER_WARP);
    // Rounded down: one chunk more than fits would start a second, nearly empty wave (measured
    // on the H200 at batch 8: 25 chunks, 448 blocks for 396 places, 1.13 waves).
    let wanted = (WARPS_PER_SM * sms.max(1) / warps).max(1);
    let at_most = context.div_ceil(MIN_CHUNK_KEYS).clamp(1, MAX_SPLITS);
    wanted.clamp(1, at_most)
}

/// Blocks of the tiles rung one multiprocessor holds at `head_dim`, by their shared memory
/// (`tiles_shared_bytes`) and registers: 2 at 64 and 128, 1 at 256.
pub fn tile_blocks_per_sm(head_dim: usize) -> usize {
    (SM_SHARED / (tiles_shared_bytes(head_dim) + BLOCK_RESERVED)).clamp(1, REGISTER_BLOCKS)
}

/// Chunks per row of the tiles rung for `batch` sequences of `kv_heads` kv heads, `rows` query
/// rows per kv head and a longest context of `context` keys at `head_dim` on a device of `sms`
/// multiprocessors: `TILE_WAVES` waves of the blocks the multiprocessors hold
/// ([`tile_blocks_per_sm`]; a block per chunk, kv head, sequence and group of 8 rows), rounded
/// down, but no chunk under `MIN_CHUNK_TILES` tiles of 64 keys (one chunk for a short context)
/// and at most `MAX_SPLITS`.
pub fn tile_splits(
    batch: usize,
    kv_heads: usize,
    rows: usize,
    context: usize,
    head_dim: usize,
    sms: usize,
) -> usize {
    let resident = TILE_WAVES * sms.max(1) * tile_blocks_per_sm(head_dim);
    block_splits(
        resident,
        batch.max(1) * kv_heads.max(1) * rows.max(1).div_ceil(TILE_ROWS),
        context,
    )
}

/// Chunks per row for a rung of a block per chunk, kv head, sequence and row group: `resident`
/// blocks (the waves the plan aims for) shared among `groups` such rows, rounded
/// down, but no chunk under `MIN_CHUNK_TILES` tiles of 64 keys of `context` (one chunk for a
/// short context) and at most `MAX_SPLITS`. The tiles and the tensor rungs' rule.
fn block_splits(resident: usize, groups: usize, context: usize) -> usize {
    let wanted = (resident / groups.max(1)).max(1);
    let at_most = context.div_ceil(MIN_CHUNK_TILES * TILE_KEYS).clamp(1, MAX_SPLITS);
    wanted.clamp(1, at_most)
}

/// `n` chunks of a `context` of keys cut into whole tiles of 64 keys, then as few chunks as
/// those cover (none empty): `(chunks, keys per chunk)`.
fn whole_tile_chunks(context: usize, n: usize) -> (usize, usize) {
    let context = context.max(1);
    let chunk = context.div_ceil(n.max(1)).next_multiple_of(TILE_KEYS);
    (context.div_ceil(chunk), chunk)
}

/// The tiles rung's `(chunks, keys per chunk)` for the arguments of [`tile_splits`]: its count
/// cut into whole tiles of 64 keys, then as few chunks as those cover (none empty).
pub fn tile_chunks(
    batch: usize,
    kv_heads: usize,
    rows: usize,
    context: usize,
    head_dim: usize,
    sms: usize,
) -> (usize, usize) {
    whole_tile_chunks(
        context,
        tile_splits(batch, kv_heads, rows, context.max(1), head_dim, sms),
    )
}

/// Blocks of the tensor rung one multiprocessor holds at `head_dim`, by their shared memory
/// (`tensor_shared_bytes`) and registers: 3 at 64, 2 at 128, 1 at 256.
pub fn tensor_blocks_per_sm(head_dim: usize) -> usize {
    (SM_SHARED / (tensor_shared_bytes(head_dim) + BLOCK_RESERVED)).clamp(1, TENSOR_REGISTER_BLOCKS)
}

/// Chunks per row of the tensor rung for `batch` sequences of `kv_heads` kv heads, `rows` query
/// rows per kv head and a longest context of `context` keys at `head_dim` on a device of `sms`
/// multiprocessors: `TENSOR_WAVES` waves of the blocks the multiprocessors hold
/// ([`tensor_blocks_per_sm`]; a block per chunk, kv head, sequence and group of 16 rows),
/// rounded down, but no chunk under `MIN_CHUNK_TILES` tiles of 64 keys (one chunk for a short
/// context) and at most `MAX_SPLITS`.
pub fn tensor_splits(
    batch: usize,
    kv_heads: usize,
    rows: usize,
    context: usize,
    head_dim: usize,
    sms: usize,
) -> usize {
    let resident = TENSOR_WAVES * sms.max(1) * tensor_blocks_per_sm(head_dim);
    block_splits(
        resident,
        batch.max(1) * kv_heads.max(1) * rows.max(1).div_ceil(TENSOR_ROWS),
        context,
    )
}

/// The tensor rung's `(chunks, keys per chunk)` for the arguments of [`tensor_splits`]: its
/// count cut into whole tiles of 64 keys, then as few chunks as those cover (none empty).
pub fn tensor_chunks(
    batch: usize,
    kv_heads: usize,
    rows: usize,
    context: usize,
    head_dim: usize,
    sms: usize,
) -> (usize, usize) {
    whole_tile_chunks(
        context,
        tensor_splits(batch, kv_heads, rows, context.max(1), head_dim, sms),
    )
}

impl DecodePlan {
    /// [`DecodePlan::choose`] on a device whose blocks may opt in to `max_shared` bytes of
    /// shared memory: where the tiles or tensor rung's ring does not fit (head dim 128 and 256
    /// on GPUs of 99 KiB per block), the split rung instead.
    pub(crate) fn choose_on(
        algorithm: DecodeAlgorithm,
        shape: DecodeShape,
        sms: usize,
        max_shared: usize,
    ) -> DecodePlan {
        match DecodePlan::choose(algorithm, shape, sms) {
            DecodePlan::Tiles { .. } if tiles_shared_bytes(shape.head_dim) > max_shared => {
                DecodePlan::choose(DecodeAlgorithm::Split, shape, sms)
            }
            DecodePlan::Tensor { .. } | DecodePlan::TensorFused { .. }
                if tensor_shared_bytes(shape.head_dim) > max_shared =>
            {
                DecodePlan::choose(DecodeAlgorithm::Split, shape, sms)
            }
            plan => plan,
        }
    }

    /// The plan of `algorithm` for `shape` on a device of `sms` multiprocessors.
    pub(crate) fn choose(algorithm: DecodeAlgorithm, shape: DecodeShape, sms: usize) -> DecodePlan {
        let context = shape.context.max(1);
        let rows = shape.heads / shape.kv_heads.max(1) * shape.q_len;
        let wanted = match algorithm {
            DecodeAlgorithm::Warp => return DecodePlan::Warp,
            _ if !split_head_dim(shape.head_dim) => return DecodePlan::Warp,
            DecodeAlgorithm::Tiles => {
                let (splits, chunk) =
                    tile_chunks(shape.batch, shape.kv_heads, rows, context, shape.head_dim, sms);
                return DecodePlan::Tiles { splits, chunk };
            }
            DecodeAlgorithm::TileSplits(n) => {
                let chunk = context.div_ceil(n.clamp(1, context));
                return DecodePlan::Tiles {
                    splits: context.div_ceil(chunk),
                    chunk,
                };
            }
            DecodeAlgorithm::Tensor => {
                let (splits, chunk) =
                    tensor_chunks(shape.batch, shape.kv_heads, rows, context, shape.head_dim, sms);
                return DecodePlan::Tensor { splits, chunk };
            }
            DecodeAlgorithm::TensorSplits(n) => {
                let chunk = context.div_ceil(n.clamp(1, context));
                return DecodePlan::Tensor {
                    splits: context.div_ceil(chunk),
                    chunk,
                };
            }
            DecodeAlgorithm::TensorFused | DecodeAlgorithm::TensorFusedSplits(_) => {
                let unfused = match algorithm {
                    DecodeAlgorithm::TensorFusedSplits(n) => DecodeAlgorithm::TensorSplits(n),
                    _ => DecodeAlgorithm::Tensor,
                };
                return match DecodePlan::choose(unfused, shape, sms) {
                    DecodePlan::Tensor { splits, chunk } => DecodePlan::TensorFused { splits, chunk },
                    plan => plan,
                };
            }
            DecodeAlgorithm::Split => decode_splits(shape.batch, shape.kv_heads, rows, context, sms),
            DecodeAlgorithm::Splits(n) => n.clamp(1, context),
        };
        // Equal chunks; then as few chunks as those cover, so that none is empty.
        let chunk = context.div_ceil(wanted);
        DecodePlan::Split {
            splits: context.div_ceil(chunk),
            chunk,
        }
    }
}

/// Warps per block of the attention kernels, as a `usize` (the launch shapes).
pub(crate) const WARPS: usize = ATTN_WARPS as usize;

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(batch: usize, q_len: usize, head_dim: usize, context: usize) -> DecodeShape {
        DecodeShape {
            batch,
            heads: 32,
            kv_heads: 8,
            q_len,
            head_dim,
            context,
        }
    }

    /// The bench's shapes on an H200 (132 SMs): batch 1 wants 198 chunks, held to 128 (32 keys
    /// each); batch 8 wants 24 (1536 warps for 1584 places; 171 keys each).
    #[test]
    fn bench_shapes() {
        assert_eq!(
            DecodePlan::choose(DecodeAlgorithm::Split, shape(1, 1, 128, 4096), 132),
            DecodePlan::Split {
                splits: 128,
                chunk: 32
            }
        );
        assert_eq!(
            DecodePlan::choose(DecodeAlgorithm::Split, shape(8, 1, 128, 4096), 132),
            DecodePlan::Split {
                splits: 24,
                chunk: 171
            }
        );
    }

    /// The tiles rung at the bench's shapes on an H200 (132 SMs, 2 blocks each at d 128): 528
    /// blocks wanted, 66 chunks at batch 1 (8 blocks per chunk), 8 at batch 8; held to 2 tiles
    /// per chunk at short contexts; whole tiles per chunk, then as few chunks as cover.
    #[test]
    fn tiles_bench_shapes() {
        let tiles =
            |batch, context| DecodePlan::choose(DecodeAlgorithm::Tiles, shape(batch, 1, 128, context), 132);
        assert_eq!(tile_blocks_per_sm(64), 2);
        assert_eq!(tile_blocks_per_sm(128), 2);
        assert_eq!(tile_blocks_per_sm(256), 1);
        assert_eq!(tile_splits(1, 8, 4, 1 << 20, 128, 132), 66);
        assert_eq!(tile_splits(8, 8, 4, 1 << 20, 128, 132), 8);
        // Context 4096: at most 32 chunks of 2 tiles.
        assert_eq!(
            tiles(1, 4096),
            DecodePlan::Tiles {
                splits: 32,
                chunk: 128
            }
        );
        assert_eq!(
            tiles(1, 8192),
            DecodePlan::Tiles {
                splits: 64,
                chunk: 128
            }
        );
        // 32768 / 66 = 497 keys, rounded up to 512: 64 chunks.
        assert_eq!(
            tiles(1, 32768),
            DecodePlan::Tiles {
                splits: 64,
                chunk: 512
            }
        );
        assert_eq!(
            tiles(1, 131072),
            DecodePlan::Tiles {
                splits: 64,
                chunk: 2048
            }
        );
        assert_eq!(
            tiles(8, 4096),
            DecodePlan::Tiles {
                splits: 8,
                chunk: 512
            }
        );
        assert_eq!(
            tiles(8, 32768),
            DecodePlan::Tiles {
                splits: 8,
                chunk: 4096
            }
        );
        // A ragged context: the last chunk is short, none empty.
        assert_eq!(
            tiles(1, 8193),
            DecodePlan::Tiles {
                splits: 65,
                chunk: 128
            }
        );
        // Two row groups (q_len 3, GQA 4: 12 rows): 33 chunks wanted, 1986 keys rounded to 2048;
        // a short context is one chunk.
        assert_eq!(
            DecodePlan::choose(DecodeAlgorithm::Tiles, shape(1, 3, 128, 1 << 16), 132),
            DecodePlan::Tiles {
                splits: 32,
                chunk: 2048
            }
        );
        assert_eq!(
            tiles(1, 100),
            DecodePlan::Tiles {
                splits: 1,
                chunk: 128
            }
        );
    }

    /// The tensor rung at the bench's shapes on an H200 (132 SMs; 2 blocks each at d 128 by
    /// shared memory, 3 at 64, 1 at 256): one wave of 264 blocks, 33 chunks at batch 1 (8 blocks
    /// per chunk), 4 at batch 8; whole tiles per chunk, then as few chunks as cover.
    #[test]
    fn tensor_bench_shapes() {
        let tensor =
            |batch, context| DecodePlan::choose(DecodeAlgorithm::Tensor, shape(batch, 1, 128, context), 132);
        assert_eq!(tensor_shared_bytes(128), 108_800);
        assert_eq!(tensor_blocks_per_sm(64), 3);
        assert_eq!(tensor_blocks_per_sm(128), 2);
        assert_eq!(tensor_blocks_per_sm(256), 1);
        assert_eq!(tensor_splits(1, 8, 4, 1 << 20, 128, 132), 33);
        assert_eq!(tensor_splits(8, 8, 4, 1 << 20, 128, 132), 4);
        // 8192 / 33 = 249 keys, rounded up to 256: 32 chunks.
        assert_eq!(
            tensor(1, 8192),
            DecodePlan::Tensor {
                splits: 32,
                chunk: 256
            }
        );
        // 131072 / 33 = 3972 keys, rounded up to 4032: 33 chunks, the last short.
        assert_eq!(
            tensor(1, 131072),
            DecodePlan::Tensor {
                splits: 33,
                chunk: 4032
            }
        );
        assert_eq!(
            tensor(8, 8192),
            DecodePlan::Tensor {
                splits: 4,
                chunk: 2048
            }
        );
        assert_eq!(
            tensor(8, 131072),
            DecodePlan::Tensor {
                splits: 4,
                chunk: 32768
            }
        );
        // 16 rows are one group (GQA 4, q_len 4); 17 rows (q_len 5 at GQA 4 is 20) are two.
        assert_eq!(tensor_splits(1, 8, 16, 1 << 20, 128, 132), 33);
        assert_eq!(tensor_splits(1, 8, 17, 1 << 20, 128, 132), 16);
    }

    /// The tensor rung's boundaries: the wave (two chunks while two blocks per kv head and
    /// sequence fit in one wave, one past it), the shortest chunk (two tiles), the shared
    /// memory (the split rung where the ring does not fit), the head dims (the warp rung).
    #[test]
    fn tensor_boundaries() {
        // 8 kv heads: batch 16 is 128 blocks per chunk (2 chunks in 264 places), 17 is 136.
        assert_eq!(tensor_splits(16, 8, 4, 1 << 20, 128, 132), 2);
        assert_eq!(tensor_splits(17, 8, 4, 1 << 20, 128, 132), 1);
        // A context of 128 keys is one chunk, 129 may be two.
        assert_eq!(tensor_splits(1, 8, 4, 128, 128, 132), 1);
        assert_eq!(tensor_splits(1, 8, 4, 129, 128, 132), 2);
        let s = shape(1, 1, 256, 4096);
        assert!(matches!(
            DecodePlan::choose_on(DecodeAlgorithm::Tensor, s, 132, tensor_shared_bytes(256)),
            DecodePlan::Tensor { .. }
        ));
        assert_eq!(
            DecodePlan::choose_on(DecodeAlgorithm::Tensor, s, 132, tensor_shared_bytes(256) - 1),
            DecodePlan::choose(DecodeAlgorithm::Split, s, 132)
        );
        assert_eq!(
            DecodePlan::choose(DecodeAlgorithm::Tensor, shape(1, 1, 40, 4096), 132),
            DecodePlan::Warp
        );
        let forced =
            |n, context| DecodePlan::choose(DecodeAlgorithm::TensorSplits(n), shape(1, 1, 64, context), 132);
        assert_eq!(forced(0, 10), DecodePlan::Tensor { splits: 1, chunk: 10 });
        assert_eq!(forced(6, 10), DecodePlan::Tensor { splits: 5, chunk: 2 });
        assert_eq!(forced(50, 10), DecodePlan::Tensor { splits: 10, chunk: 1 });
    }

    /// The fused tensor rung: the tensor rung's chunks (planned and forced), its fallbacks, a
    /// counter per row group of 16 rows; no counters for the other plans.
    #[test]
    fn fused_plans() {
        for (batch, q_len, d, context) in [(1, 1, 128, 8192), (8, 1, 128, 131072), (1, 5, 64, 300)] {
            let s = shape(batch, q_len, d, context);
            let DecodePlan::Tensor { splits, chunk } = DecodePlan::choose(DecodeAlgorithm::Tensor, s, 132)
            else {
                panic!("{s:?}: not the tensor rung");
            };
            assert_eq!(
                DecodePlan::choose(DecodeAlgorithm::TensorFused, s, 132),
                DecodePlan::TensorFused { splits, chunk }
            );
        }
        let forced = |n, context| {
            DecodePlan::choose(
                DecodeAlgorithm::TensorFusedSplits(n),
                shape(1, 1, 64, context),
                132,
            )
        };
        assert_eq!(forced(0, 10), DecodePlan::TensorFused { splits: 1, chunk: 10 });
        assert_eq!(forced(6, 10), DecodePlan::TensorFused { splits: 5, chunk: 2 });
        let s = shape(1, 1, 256, 4096);
        assert_eq!(
            DecodePlan::choose_on(DecodeAlgorithm::TensorFused, s, 132, tensor_shared_bytes(256) - 1),
            DecodePlan::choose(DecodeAlgorithm::Split, s, 132)
        );
        assert_eq!(
            DecodePlan::choose(DecodeAlgorithm::TensorFused, shape(1, 1, 40, 4096), 132),
            DecodePlan::Warp
        );
        // 32 heads over 8 kv heads, q_len 4: 16 rows, one group; q_len 5: 20 rows, two.
        let fused = DecodePlan::TensorFused { splits: 3, chunk: 64 };
        assert_eq!(fused.counter_words(2, 8, 16), 16);
        assert_eq!(fused.counter_words(2, 8, 20), 32);
        assert_eq!(
            DecodePlan::Tensor { splits: 3, chunk: 64 }.counter_words(2, 8, 16),
            0
        );
        assert_eq!(DecodeAlgorithm::TensorFused.name(), "tensor-fused");
        assert_eq!(DecodeAlgorithm::TensorFusedSplits(7).name(), "tensor-fused-7");
    }

    /// Where the ring does not fit in a block's shared memory, the split rung.
    #[test]
    fn tiles_fall_back_without_the_shared_memory() {
        let h200 = 227 * 1024;
        let s = shape(1, 1, 128, 4096);
        assert!(matches!(
            DecodePlan::choose_on(DecodeAlgorithm::Tiles, s, 132, h200),
            DecodePlan::Tiles { .. }
        ));
        assert_eq!(
            DecodePlan::choose_on(DecodeAlgorithm::Tiles, s, 132, 99 * 1024),
            DecodePlan::choose(DecodeAlgorithm::Split, s, 132)
        );
        assert!(matches!(
            DecodePlan::choose_on(DecodeAlgorithm::Tiles, shape(1, 1, 64, 4096), 132, 99 * 1024),
            DecodePlan::Tiles { .. }
        ));
    }

    /// Forced tile chunk counts: any chunk length (not whole tiles), clamped, none empty; head
    /// dims without an instance run the warp rung.
    #[test]
    fn forced_tile_splits() {
        let plan =
            |n, context| DecodePlan::choose(DecodeAlgorithm::TileSplits(n), shape(1, 1, 64, context), 132);
        assert_eq!(plan(0, 10), DecodePlan::Tiles { splits: 1, chunk: 10 });
        assert_eq!(plan(3, 10), DecodePlan::Tiles { splits: 3, chunk: 4 });
        assert_eq!(plan(6, 10), DecodePlan::Tiles { splits: 5, chunk: 2 });
        assert_eq!(plan(50, 10), DecodePlan::Tiles { splits: 10, chunk: 1 });
        assert_eq!(
            DecodePlan::choose(DecodeAlgorithm::Tiles, shape(1, 1, 40, 4096), 132),
            DecodePlan::Warp
        );
        assert_eq!(DecodeAlgorithm::default(), DecodeAlgorithm::Tensor);
    }

    /// The warp target's boundary: 8 kv heads of one row group want `floor(12 * sms / 8)` chunks;
    /// with enough context, exactly that; a fifth row (a second group) halves it; two chunks only
    /// while twice the warps fit in one wave.
    #[test]
    fn warps_per_sm_boundary() {
        // 8 warps per chunk at 4 rows; 5 rows are two groups: 16 warps per chunk.
        assert_eq!(decode_splits(1, 8, 4, 1 << 20, 132), 198);
        assert_eq!(decode_splits(1, 8, 5, 1 << 20, 132), 99);
        // Enough warps without splitting: one chunk.
        assert_eq!(decode_splits(198, 8, 4, 1 << 20, 132), 1);
        assert_eq!(decode_splits(197, 8, 4, 1 << 20, 132), 1);
        assert_eq!(decode_splits(100, 8, 4, 1 << 20, 132), 1);
        assert_eq!(decode_splits(99, 8, 4, 1 << 20, 132), 2);
    }

    /// The minimum chunk: a context of 32 keys is one chunk, 33 may be two; the maximum count.
    #[test]
    fn chunk_bounds() {
        assert_eq!(decode_splits(1, 1, 1, MIN_CHUNK_KEYS, 132), 1);
        assert_eq!(decode_splits(1, 1, 1, MIN_CHUNK_KEYS + 1, 132), 2);
        assert_eq!(decode_splits(1, 1, 1, 1 << 30, 132), MAX_SPLITS);
        assert_eq!(decode_splits(1, 1, 1, 1, 132), 1);
    }

    /// Head dims without a split instance fall back to the warp rung; the ones with, split.
    #[test]
    fn head_dims() {
        for d in [8, 56, 72, 120, 136, 248] {
            assert_eq!(
                DecodePlan::choose(DecodeAlgorithm::Split, shape(1, 1, d, 4096), 132),
                DecodePlan::Warp,
                "head_dim {d}"
            );
        }
        for d in [64, 128, 256] {
            assert!(matches!(
                DecodePlan::choose(DecodeAlgorithm::Split, shape(1, 1, d, 4096), 132),
                DecodePlan::Split { .. }
            ));
        }
    }

    /// Forced chunk counts: clamped to the context, and never an empty chunk.
    #[test]
    fn forced_splits() {
        let plan = |n, context| DecodePlan::choose(DecodeAlgorithm::Splits(n), shape(1, 1, 64, context), 132);
        assert_eq!(plan(0, 10), DecodePlan::Split { splits: 1, chunk: 10 });
        assert_eq!(plan(3, 10), DecodePlan::Split { splits: 3, chunk: 4 });
        assert_eq!(plan(4, 10), DecodePlan::Split { splits: 4, chunk: 3 });
        // 6 chunks of 2 keys would leave one empty: 5.
        assert_eq!(plan(6, 10), DecodePlan::Split { splits: 5, chunk: 2 });
        assert_eq!(plan(50, 10), DecodePlan::Split { splits: 10, chunk: 1 });
        assert_eq!(plan(2, 1), DecodePlan::Split { splits: 1, chunk: 1 });
        assert_eq!(
            DecodePlan::choose(DecodeAlgorithm::Warp, shape(1, 1, 64, 10), 132),
            DecodePlan::Warp
        );
    }
}
