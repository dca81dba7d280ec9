//! Decode attention over a paged KV cache (FlashDecoding's split and log-sum-exp combine) and
//! the cache's append: the cache's layout and block table checked on the host when it is made,
//! every append's positions checked against the table, the plan (chunks of the context) chosen
//! once per call, then the launches. Kernels, layout and edge rules:
//! `kernels_gpu::decode_attention`. `mod.rs` checks the operands and holds the public methods,
//! `plan.rs` picks the kernels and the chunks (`DecodePlan`), `kernels.rs` launches them,
//! `step.rs` holds the capturable forms (a reservation made on the host, then the write and the
//! attention on preallocated buffers and the device's lengths).

mod kernels;
mod plan;
mod step;

pub use kernels::KvElement;
pub use plan::{
    DecodeAlgorithm, decode_splits, tensor_blocks_per_sm, tensor_chunks, tensor_splits, tile_blocks_per_sm,
    tile_chunks, tile_splits,
};
pub use step::DecodeWorkspace;

use kernels_gpu::decode_attention::{
    APPEND_BLOCK, ATTN_BLOCK, MAX_HEAD_DIM, MAX_Q_LEN, TENSOR_ROWS, TILE_BLOCK, TILE_ROWS, VEC,
    tensor_shared_bytes, tiles_shared_bytes,
};
use plan::{DecodePlan, DecodeShape, WARPS};

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::{Error, Result, same_shape};
use crate::launch_config::LaunchConfig;

/// The operation's name in errors.
const OP: &str = "decode_attention";
/// The append's name in errors.
const APPEND: &str = "kv_cache_append";
/// The largest block of the cache, in tokens.
pub const MAX_BLOCK_SIZE: usize = 1024;

/// The shape of a paged KV cache: pools of `num_blocks` blocks of `block_size` tokens (a power
/// of two, 16 is the usual choice) of `kv_heads` heads of `head_dim` elements, for `batch`
/// sequences of at most `max_blocks` blocks each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvCacheShape {
    /// Blocks in each pool.
    pub num_blocks: usize,
    /// Tokens per block: a power of two up to [`MAX_BLOCK_SIZE`].
    pub block_size: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Elements per head: a multiple of 8 up to 256.
    pub head_dim: usize,
    /// Sequences.
    pub batch: usize,
    /// Entries per row of the block table.
    pub max_blocks: usize,
}

impl KvCacheShape {
    /// Elements of one pool: `num_blocks * block_size * kv_heads * head_dim`.
    pub fn pool_len(&self) -> Result<usize> {
        crate::buffer::checked_len(
            OP,
            &[self.num_blocks, self.block_size, self.kv_heads, self.head_dim],
        )
    }

    /// The most tokens a sequence can hold: `max_blocks * block_size`.
    pub fn capacity(&self) -> usize {
        self.max_blocks.saturating_mul(self.block_size)
    }

    fn check(&self) -> Result<()> {
        let bad = |detail: String| Err(Error::InvalidArgument { op: OP, detail });
        let s = self;
        if s.num_blocks == 0 || s.kv_heads == 0 || s.batch == 0 || s.max_blocks == 0 {
            return bad(format!("an empty cache: {s:?}"));
        }
        if !s.block_size.is_power_of_two() || s.block_size > MAX_BLOCK_SIZE {
            return bad(format!(
                "block_size {} is not a power of two up to {MAX_BLOCK_SIZE}",
                s.block_size
            ));
        }
        if s.head_dim == 0 || s.head_dim % VEC != 0 || s.head_dim > MAX_HEAD_DIM {
            return bad(format!(
                "head_dim {} is not a multiple of {VEC} up to {MAX_HEAD_DIM}",
                s.head_dim
            ));
        }
        if s.capacity() > i32::MAX as usize || s.num_blocks > i32::MAX as usize {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!("{s:?}: positions and block ids must fit in i32"),
            });
        }
        s.pool_len()?;
        crate::buffer::checked_len(OP, &[s.batch, s.max_blocks]).map(|_| ())
    }
}

/// A paged KV cache on the device (see `kernels_gpu::decode_attention` for the layout): K and V
/// pools, the block table and the sequences' lengths, with the table and the lengths mirrored on
/// the host, where every append is checked against them.
pub struct PagedKvCache<E: KvElement> {
    shape: KvCacheShape,
    k: DeviceVec<E>,
    v: DeviceVec<E>,
    table: DeviceVec<i32>,
    lens: DeviceVec<i32>,
    host_table: Vec<i32>,
    host_lens: Vec<i32>,
    /// Where the tokens of the last reservation go (`[batch]`, [`Gpu::kv_cache_reserve`]).
    starts: DeviceVec<i32>,
    /// The starts on the host.
    host_starts: Vec<i32>,
    /// Tokens per sequence of the last reservation: what [`Gpu::kv_cache_write`] writes.
    reserved: usize,
    /// The most tokens any reservation held: every sequence has blocks for that many from its
    /// start, so that a captured write of an earlier reservation stays inside the pools.
    reserved_max: usize,
}

impl<E: KvElement> PagedKvCache<E> {
    /// The cache's shape.
    pub fn shape(&self) -> KvCacheShape {
        self.shape
    }

    /// Tokens held per sequence.
    pub fn lens(&self) -> &[i32] {
        &self.host_lens
    }

    /// The block table, `[batch, max_blocks]` row-major (`-1`: no block).
    pub fn table(&self) -> &[i32] {
        &self.host_table
    }

    /// The K pool, `[num_blocks, block_size, kv_heads, head_dim]`.
    pub fn k_pool(&self) -> &DeviceVec<E> {
        &self.k
    }

    /// The V pool, as the K pool.
    pub fn v_pool(&self) -> &DeviceVec<E> {
        &self.v
    }

    /// The device's copy of the lengths, `[batch]` `i32`.
    pub fn lens_on_device(&self) -> &DeviceVec<i32> {
        &self.lens
    }

    /// The device's copy of the block table.
    pub fn table_on_device(&self) -> &DeviceVec<i32> {
        &self.table
    }

    /// `log2(block_size)`, as the kernels take it.
    fn shift(&self) -> u32 {
        self.shape.block_size.trailing_zeros()
    }

    /// Errors unless sequence `b` can hold positions `from .. end`: within its capacity, a
    /// block in the table for each.
    fn check_room(&self, b: usize, from: usize, end: usize) -> Result<()> {
        let s = self.shape;
        if end > s.capacity() {
            return Err(Error::InvalidArgument {
                op: APPEND,
                detail: format!(
                    "sequence {b} would hold {end} tokens, past its {} ({} blocks of {})",
                    s.capacity(),
                    s.max_blocks,
                    s.block_size
                ),
            });
        }
        for block in from / s.block_size..end.div_ceil(s.block_size) {
            if self.host_table[b * s.max_blocks + block] < 0 {
                return Err(Error::InvalidArgument {
                    op: APPEND,
                    detail: format!(
                        "sequence {b} has no block at table entry {block}, needed for positions up to {end}"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// How `kv_cache_append` writes the new rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvAppendAlgorithm {
    /// One thread per element (`kv_cache_append_*`): the tutorial rung.
    Elements,
    /// One thread per 16-byte vector of 8 elements (`kv_cache_append_vec_*`).
    #[default]
    Vectors,
}

impl KvAppendAlgorithm {
    /// Both algorithms.
    pub const ALL: [KvAppendAlgorithm; 2] = [KvAppendAlgorithm::Elements, KvAppendAlgorithm::Vectors];

    /// `elements` or `vectors`.
    pub fn name(self) -> &'static str {
        match self {
            KvAppendAlgorithm::Elements => "elements",
            KvAppendAlgorithm::Vectors => "vectors",
        }
    }
}

/// The output of decode attention: `out` `[batch, q_len, heads, head_dim]` and each row's
/// log-sum-exp `lse` `[batch, q_len, heads]` (natural log, of the scaled scores).
pub struct DecodeAttentionOutput<E> {
    /// The attention output.
    pub out: DeviceVec<E>,
    /// The rows' log-sum-exp.
    pub lse: DeviceVec<f32>,
}

/// The query side of a decode-attention call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeQuery {
    /// Query heads: a multiple of the cache's kv heads.
    pub heads: usize,
    /// New queries per sequence, 1 to 16: the last `q_len` tokens of each sequence (already
    /// appended), causal among themselves.
    pub q_len: usize,
    /// The scores' scale; `None`: `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
}

/// Errors unless a buffer of `len` elements holds the product of `dims`.
fn same_len(op: &'static str, dims: &[usize], len: usize, rule: &'static str) -> Result<()> {
    same_shape(op, &[crate::buffer::checked_len(op, dims)?], &[len], rule)
}

impl Gpu {
    /// A paged KV cache of `shape` with the block table `table` (`[batch, max_blocks]`
    /// row-major; `-1` for no block), zeroed pools and every sequence empty.
    ///
    /// Errors: [`Error::InvalidArgument`] for an empty or malformed shape (block size not a power
    /// of two up to [`MAX_BLOCK_SIZE`], head dim not a multiple of 8 up to 256) or a table entry
    /// outside `-1 .. num_blocks`; [`Error::ShapeMismatch`] for a table of another length;
    /// [`Error::TooLarge`] past `i32` positions or the allocation limit.
    pub fn paged_kv_cache<E: KvElement>(
        &self,
        shape: KvCacheShape,
        table: &[i32],
    ) -> Result<PagedKvCache<E>> {
        shape.check()?;
        same_len(
            OP,
            &[shape.batch, shape.max_blocks],
            table.len(),
            "the block table is [batch, max_blocks]",
        )?;
        if let Some((i, &id)) = table
            .iter()
            .enumerate()
            .find(|&(_, &id)| id < -1 || id as i64 >= shape.num_blocks as i64)
        {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "block table entry {id} (sequence {}, block {}) is outside -1..{}",
                    i / shape.max_blocks,
                    i % shape.max_blocks,
                    shape.num_blocks
                ),
            });
        }
        let pool = shape.pool_len()?;
        Ok(PagedKvCache {
            shape,
            k: self.zeros_of(pool)?,
            v: self.zeros_of(pool)?,
            table: self.upload(table)?,
            lens: self.zeros_of(shape.batch)?,
            host_table: table.to_vec(),
            host_lens: vec![0; shape.batch],
            starts: self.zeros_of(shape.batch)?,
            host_starts: vec![0; shape.batch],
            reserved: 0,
            reserved_max: 0,
        })
    }

    /// Appends `new` tokens to every sequence of `cache`: `k_new` and `v_new` are
    /// `[batch, new, kv_heads, head_dim]`, written at positions `lens[b] .. lens[b] + new`
    /// through the block table, after which the lengths are `new` larger (on the host and the
    /// device: the lengths are copied up, which waits for the stream).
    ///
    /// Errors: [`Error::ShapeMismatch`] for rows of another size; [`Error::InvalidArgument`]
    /// where a sequence would pass its `max_blocks * block_size` tokens or a position written
    /// has no block (`-1`) in the table.
    pub fn kv_cache_append<E: KvElement>(
        &self,
        cache: &mut PagedKvCache<E>,
        k_new: &DeviceVec<E>,
        v_new: &DeviceVec<E>,
        new: usize,
    ) -> Result<()> {
        self.kv_cache_append_with(cache, k_new, v_new, new, KvAppendAlgorithm::default())
    }

    /// [`Gpu::kv_cache_append`] with the given algorithm.
    pub fn kv_cache_append_with<E: KvElement>(
        &self,
        cache: &mut PagedKvCache<E>,
        k_new: &DeviceVec<E>,
        v_new: &DeviceVec<E>,
        new: usize,
        algorithm: KvAppendAlgorithm,
    ) -> Result<()> {
        let batch = cache.shape.batch;
        self.append_rows(cache, 0..batch, (k_new, v_new), new, algorithm)
    }

    /// Appends `new` tokens to sequence `seq` of `cache` alone (`k_new` and `v_new` are `[new,
    /// kv_heads, head_dim]`): how sequences of different lengths are filled, a prompt each.
    ///
    /// Errors: those of [`Gpu::kv_cache_append`]; [`Error::InvalidArgument`] for `seq >= batch`.
    pub fn kv_cache_append_to<E: KvElement>(
        &self,
        cache: &mut PagedKvCache<E>,
        seq: usize,
        k_new: &DeviceVec<E>,
        v_new: &DeviceVec<E>,
        new: usize,
    ) -> Result<()> {
        if seq >= cache.shape.batch {
            return Err(Error::InvalidArgument {
                op: APPEND,
                detail: format!("sequence {seq} of a batch of {}", cache.shape.batch),
            });
        }
        self.append_rows(
            cache,
            seq..seq + 1,
            (k_new, v_new),
            new,
            KvAppendAlgorithm::default(),
        )
    }

    /// The append of `new` tokens to the sequences `seqs`, checked.
    fn append_rows<E: KvElement>(
        &self,
        cache: &mut PagedKvCache<E>,
        seqs: std::ops::Range<usize>,
        (k_new, v_new): (&DeviceVec<E>, &DeviceVec<E>),
        new: usize,
        algorithm: KvAppendAlgorithm,
    ) -> Result<()> {
        let s = cache.shape;
        let batch = seqs.len();
        let want = [batch, new, s.kv_heads, s.head_dim];
        same_len(
            APPEND,
            &want,
            k_new.len(),
            "k_new is [batch, new, kv_heads, head_dim]",
        )?;
        same_len(
            APPEND,
            &want,
            v_new.len(),
            "v_new is [batch, new, kv_heads, head_dim]",
        )?;
        if !(self.owns(k_new) && self.owns(v_new) && self.owns(&cache.k)) {
            return Err(Error::WrongDevice { op: APPEND });
        }
        if new == 0 {
            return Ok(());
        }
        let mut lens = cache.host_lens.clone();
        for b in seqs.clone() {
            let end = lens[b] as usize + new;
            cache.check_room(b, lens[b] as usize, end)?;
            lens[b] = end as i32;
        }
        let shift = cache.shift();
        let vectorised = algorithm == KvAppendAlgorithm::Vectors;
        let threads = batch * new * s.kv_heads * s.head_dim / if vectorised { VEC } else { 1 };
        let cfg = LaunchConfig::linear(APPEND, threads, APPEND_BLOCK, &self.limits())?;
        let library = self.library();
        let table = cache
            .table
            .slice(seqs.start * s.max_blocks..seqs.end * s.max_blocks)?;
        let old_lens = cache.lens.slice(seqs.clone())?;
        // SAFETY: the rows hold batch*new*kv_heads*head_dim elements (checked above), the
        // views the sequences' lengths and table rows; every position written has a block id of
        // the pools (checked above, ids checked when the table was made); head_dim is a
        // multiple of 8 and the buffers are allocations (aligned).
        unsafe {
            E::append(
                &library,
                cfg,
                vectorised,
                (k_new, v_new),
                (&mut cache.k, &mut cache.v),
                (table, old_lens),
                (batch, new, s.kv_heads, s.head_dim, shift, s.max_blocks),
            )?;
        }
        cache.lens.copy_from_host(&lens)?;
        cache.host_lens = lens;
        Ok(())
    }

    /// Decode attention of `q` (`[batch, q_len, heads, head_dim]`) over `cache`, with the
    /// default algorithm ([`DecodeAlgorithm::Tensor`]): see [`Gpu::decode_attention_with`].
    pub fn decode_attention<E: KvElement>(
        &self,
        q: &DeviceVec<E>,
        cache: &PagedKvCache<E>,
        query: DecodeQuery,
    ) -> Result<DecodeAttentionOutput<E>> {
        self.decode_attention_with(q, cache, query, DecodeAlgorithm::default())
    }

    /// Decode attention: for each sequence `b`, query `i` of `q` (`[batch, q_len, heads,
    /// head_dim]`, the last `q_len` tokens of the sequence, already appended to the cache) and
    /// head `h`, `softmax(scale q K^T) V` over the keys `0 ..= lens[b] - q_len + i` of kv head
    /// `h / (heads / kv_heads)`; the output rounded once to `E`, and each row's log-sum-exp.
    ///
    /// Errors: [`Error::ShapeMismatch`] for a `q` of another size; [`Error::InvalidArgument`]
    /// for heads that are not a multiple of the kv heads, `q_len` outside `1..=16`, a sequence
    /// holding fewer than `q_len` tokens, a scale that is not finite.
    pub fn decode_attention_with<E: KvElement>(
        &self,
        q: &DeviceVec<E>,
        cache: &PagedKvCache<E>,
        query: DecodeQuery,
        algorithm: DecodeAlgorithm,
    ) -> Result<DecodeAttentionOutput<E>> {
        let scale = self.check_decode_attention(q, cache, query)?;
        let s = cache.shape;
        let rows = s.batch * query.q_len * query.heads;
        // Both written whole by the last kernel (every row, every dim): no zeroing (the
        // simulator starts them as NaN, so that an element left unwritten shows in the trials).
        let mut out = self.alloc_poisoned(q.len(), E::NAN)?;
        let mut lse = self.alloc(rows)?;
        let context = cache.host_lens.iter().map(|&l| l as usize).max().unwrap_or(1);
        let plan = DecodePlan::choose_on(
            algorithm,
            decode_shape(s, query, context),
            self.multiprocessors()?,
            self.limits().max_shared_mem_per_block_optin as usize,
        );
        let (mut ml, mut acc) = self.split_partials(plan, rows, s.head_dim)?;
        let mut counters = self.plan_counters(plan, s, query)?;
        self.launch_decode_attention(
            q,
            cache,
            query,
            scale,
            plan,
            (&mut ml, &mut acc, &mut counters),
            (&mut out, &mut lse),
        )?;
        Ok(DecodeAttentionOutput { out, lse })
    }

    /// The checks of a decode-attention call (see [`Gpu::decode_attention_with`]'s errors):
    /// returns the scale.
    fn check_decode_attention<E: KvElement>(
        &self,
        q: &DeviceVec<E>,
        cache: &PagedKvCache<E>,
        query: DecodeQuery,
    ) -> Result<f32> {
        let s = cache.shape;
        let DecodeQuery { heads, q_len, scale } = query;
        let bad = |detail: String| Err(Error::InvalidArgument { op: OP, detail });
        check_query(s, query)?;
        if let Some((b, len)) = cache
            .host_lens
            .iter()
            .enumerate()
            .find(|&(_, &l)| (l as usize) < q_len)
        {
            return bad(format!(
                "sequence {b} holds {len} tokens, fewer than its {q_len} queries (append them first)"
            ));
        }
        let scale = scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt());
        same_len(
            OP,
            &[s.batch, q_len, heads, s.head_dim],
            q.len(),
            "q is [batch, q_len, heads, head_dim]",
        )?;
        if !(self.owns(q) && self.owns(&cache.k)) {
            return Err(Error::WrongDevice { op: OP });
        }
        Ok(scale)
    }

    /// The partial results of `plan` (`(max, sum)` pairs and accumulators of every row's chunks;
    /// empty for the warp plan), not zeroed: the first step writes every partial before the
    /// combine reads it (in the simulator they start as NaN, so that one left unwritten shows).
    fn split_partials(
        &self,
        plan: DecodePlan,
        rows: usize,
        head_dim: usize,
    ) -> Result<(DeviceVec<f32>, DeviceVec<f32>)> {
        let splits = plan.splits();
        let pairs = crate::buffer::checked_len(OP, &[2, rows, splits])?;
        let partials = crate::buffer::checked_len(OP, &[rows, splits, head_dim])?;
        Ok((self.alloc(pairs)?, self.alloc(partials)?))
    }

    /// The hand-off counters of `plan` for the cache's shape and `query`, zeroed (once: every
    /// launch of the fused plan leaves them zero): a word per row group of the fused tensor
    /// plan ([`DecodePlan::counter_words`]), none for the others.
    fn plan_counters(&self, plan: DecodePlan, s: KvCacheShape, query: DecodeQuery) -> Result<DeviceVec<u32>> {
        let rows = query.heads / s.kv_heads * query.q_len;
        self.zeros_of(plan.counter_words(s.batch, s.kv_heads, rows))
    }

    /// Launches `plan` on checked operands: `out` and `lse` hold the output's rows, `ml` and `acc`
    /// at least the plan's partials ([`Gpu::split_partials`]) and `counters` the plan's words
    /// ([`Gpu::plan_counters`], zero and used by no other launch in flight), every length of the
    /// cache is at most the context the plan was chosen for.
    #[allow(clippy::too_many_arguments)]
    fn launch_decode_attention<E: KvElement>(
        &self,
        q: &DeviceVec<E>,
        cache: &PagedKvCache<E>,
        query: DecodeQuery,
        scale: f32,
        plan: DecodePlan,
        (ml, acc, counters): (&mut DeviceVec<f32>, &mut DeviceVec<f32>, &mut DeviceVec<u32>),
        (out, lse): (&mut DeviceVec<E>, &mut DeviceVec<f32>),
    ) -> Result<()> {
        let s = cache.shape;
        let DecodeQuery { heads, q_len, .. } = query;
        let rows = s.batch * q_len * heads;
        same_len(
            OP,
            &[rows, s.head_dim],
            out.len(),
            "out is [batch, q_len, heads, head_dim]",
        )?;
        same_len(OP, &[rows], lse.len(), "lse is [batch, q_len, heads]")?;
        if !(self.owns(out) && self.owns(lse) && self.owns(ml) && self.owns(acc) && self.owns(counters)) {
            return Err(Error::WrongDevice { op: OP });
        }
        let scalars = (
            s.batch,
            q_len,
            heads,
            s.kv_heads,
            s.head_dim,
            cache.shift(),
            s.max_blocks,
            scale,
        );
        let limits = self.limits();
        let library = self.library();
        let pools = (&cache.k, &cache.v);
        let table = (&cache.table, &cache.lens);
        let splits = plan.splits();
        let partials = crate::buffer::checked_len(OP, &[rows, splits, s.head_dim])?;
        if ml.len() < 2 * rows * splits || acc.len() < partials {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the partials hold {} and {} floats, fewer than the plan's {} and {partials}",
                    ml.len(),
                    acc.len(),
                    2 * rows * splits
                ),
            });
        }
        let words = plan.counter_words(s.batch, s.kv_heads, heads / s.kv_heads * q_len);
        if counters.len() < words {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the hand-off counters hold {} words, fewer than the plan's {words}",
                    counters.len()
                ),
            });
        }
        match plan {
            DecodePlan::Warp => {
                let cfg = LaunchConfig::rows_per_block(OP, rows, WARPS, ATTN_BLOCK, 0, &limits)?;
                // SAFETY: `q` and `out` hold rows*head_dim elements, `lse` rows (checked by the
                // caller and above); every length is at least q_len and at most the capacity,
                // and every position below it has a block id (both kept so by the checked
                // appends and reservations); `cfg` covers the rows, a warp each.
                unsafe { E::warp(&library, cfg, q, pools, table, (out, lse), scalars) }
            }
            DecodePlan::Split { splits, chunk } => {
                let groups =
                    (heads / s.kv_heads * q_len).div_ceil(kernels_gpu::decode_attention::ROWS_PER_WARP);
                let split = LaunchConfig {
                    grid: (
                        u32::try_from((groups * splits).div_ceil(WARPS)).unwrap_or(u32::MAX),
                        u32::try_from(s.batch * s.kv_heads).unwrap_or(u32::MAX),
                        1,
                    ),
                    block: (ATTN_BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                }
                .checked(OP, &limits)?;
                let combine = LaunchConfig::rows_per_block(OP, rows, WARPS, ATTN_BLOCK, 0, &limits)?;
                // SAFETY: as for the warp plan; `ml` and `acc` hold each row's `splits`
                // partials (checked above), `splits * chunk` covers every length (the caller's
                // contract); head_dim is 64, 128 or 256 (the plan splits no other); the grid
                // covers groups*splits warps per (sequence, kv head).
                unsafe {
                    E::split(
                        &library,
                        (split, combine),
                        q,
                        pools,
                        table,
                        (ml, acc),
                        (out, lse),
                        scalars,
                        (splits, chunk),
                    )
                }
            }
            DecodePlan::Tiles { splits, chunk } => {
                let groups = (heads / s.kv_heads * q_len).div_ceil(TILE_ROWS);
                let tiles = LaunchConfig::grid_3d(
                    OP,
                    (splits * groups * s.kv_heads, s.batch, 1),
                    (1, 1, 1),
                    (TILE_BLOCK, 1, 1),
                    tiles_shared_bytes(s.head_dim) as u32,
                    &limits.opted_in(),
                )?;
                let combine =
                    LaunchConfig::grid_3d(OP, (rows, 1, 1), (1, 1, 1), (TILE_BLOCK, 1, 1), 0, &limits)?;
                // SAFETY: as for the split plan; the grid is a block per (chunk, row group, kv
                // head) and sequence with the kernel's shared memory, the combine a block per
                // row.
                unsafe {
                    E::tiles(
                        &library,
                        (tiles, combine),
                        q,
                        pools,
                        table,
                        (ml, acc),
                        (out, lse),
                        scalars,
                        (splits, chunk),
                    )
                }
            }
            DecodePlan::Tensor { splits, chunk } => {
                let groups = (heads / s.kv_heads * q_len).div_ceil(TENSOR_ROWS);
                let tensor = LaunchConfig::grid_3d(
                    OP,
                    (splits * groups * s.kv_heads, s.batch, 1),
                    (1, 1, 1),
                    (TILE_BLOCK, 1, 1),
                    tensor_shared_bytes(s.head_dim) as u32,
                    &limits.opted_in(),
                )?;
                let combine =
                    LaunchConfig::grid_3d(OP, (rows, 1, 1), (1, 1, 1), (TILE_BLOCK, 1, 1), 0, &limits)?;
                // SAFETY: as for the tiles plan, with the tensor kernel's groups of 16 rows and
                // its shared memory.
                unsafe {
                    E::tensor(
                        &library,
                        (tensor, combine),
                        q,
                        pools,
                        table,
                        (ml, acc),
                        (out, lse),
                        scalars,
                        (splits, chunk),
                    )
                }
            }
            DecodePlan::TensorFused { splits, chunk } => {
                let groups = (heads / s.kv_heads * q_len).div_ceil(TENSOR_ROWS);
                let fused = LaunchConfig::grid_3d(
                    OP,
                    (splits * groups * s.kv_heads, s.batch, 1),
                    (1, 1, 1),
                    (TILE_BLOCK, 1, 1),
                    tensor_shared_bytes(s.head_dim) as u32,
                    &limits.opted_in(),
                )?;
                // SAFETY: as for the tensor plan; `counters` holds a word per row group
                // (checked above), zero (made so, and every launch of this kernel leaves them
                // so), used by this launch alone (the caller's buffer, borrowed mutably, on the
                // one stream).
                unsafe {
                    E::tensor_fused(
                        &library,
                        fused,
                        q,
                        pools,
                        table,
                        (ml, acc),
                        counters,
                        (out, lse),
                        scalars,
                        (splits, chunk),
                    )
                }
            }
        }
    }
}

/// The query's own checks: heads a multiple of the kv heads, `q_len` in `1..=16`, a finite
/// scale.
fn check_query(s: KvCacheShape, query: DecodeQuery) -> Result<()> {
    let bad = |detail: String| Err(Error::InvalidArgument { op: OP, detail });
    let DecodeQuery { heads, q_len, scale } = query;
    if heads == 0 || heads % s.kv_heads != 0 {
        return bad(format!(
            "{heads} heads are not a multiple of {} kv heads",
            s.kv_heads
        ));
    }
    if !(1..=MAX_Q_LEN).contains(&q_len) {
        return bad(format!("q_len {q_len} is outside 1..={MAX_Q_LEN}"));
    }
    let scale = scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt());
    if !scale.is_finite() {
        return bad(format!("scale {scale} is not finite"));
    }
    Ok(())
}

/// The plan's view of a call: the cache's and the query's sizes, and the longest context.
fn decode_shape(s: KvCacheShape, query: DecodeQuery, context: usize) -> DecodeShape {
    DecodeShape {
        batch: s.batch,
        heads: query.heads,
        kv_heads: s.kv_heads,
        q_len: query.q_len,
        head_dim: s.head_dim,
        context: context.max(1),
    }
}
