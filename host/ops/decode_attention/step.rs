//! The capturable decode step: what a CUDA graph of a decode step needs from the cache and its
//! attention. [`Gpu::kv_cache_append`] and [`Gpu::decode_attention`] copy the lengths from the
//! host and allocate their outputs and partials, so neither can be captured; here the host part
//! and the device part are split:
//! * [`Gpu::kv_cache_reserve`] (on the host, between replays): checks that every sequence has
//!   room for `new` more tokens, and writes the old lengths (where the tokens go) and the new
//!   ones to the device ([`Gpu::kv_cache_reserve_as`]: the same reservation on another cache
//!   of the same lengths, copied on the device);
//! * [`Gpu::kv_cache_write`] (capturable): writes the reserved tokens' K and V rows at the
//!   positions on the device;
//! * [`Gpu::decode_attention_into`] (capturable): the attention on the device's lengths, into
//!   preallocated outputs, its partials (and, for the one-launch plan, its hand-off counters) in
//!   a [`DecodeWorkspace`] whose plan was chosen once for the cache's whole capacity.
//!
//! Why a replay stays inside the pools although its sizes were fixed at capture: the lengths
//! on the device only change through the checked appends and reservations, and a reservation
//! checks room for the most tokens any reservation of the cache ever held, so a write captured
//! for an earlier reservation never passes a block of the table.

use super::kernels::KvElement;
use super::plan::{DecodeAlgorithm, DecodePlan};
use super::{APPEND, DecodeQuery, KvCacheShape, OP, PagedKvCache, check_query, decode_shape, same_len};
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::graph::GraphBuffers;
use crate::launch_config::LaunchConfig;
use kernels_gpu::decode_attention::{APPEND_BLOCK, VEC};

/// The partial results of [`Gpu::decode_attention_into`] for one cache shape and query, with
/// the plan chosen once for the cache's whole capacity ([`Gpu::decode_workspace`]): no
/// allocation per call, and the same launches whatever the lengths, as a graph needs. For the
/// one-launch plan ([`DecodeAlgorithm::TensorFused`]) it also holds the hand-off counters, a
/// word per row group, zeroed when it is made and left zero by every launch, so that a replayed
/// graph needs no memset (a launch that faults half way may leave them otherwise: make a new
/// workspace, as the context needs anyway).
pub struct DecodeWorkspace {
    shape: KvCacheShape,
    query: DecodeQuery,
    plan: DecodePlan,
    ml: DeviceVec<f32>,
    acc: DeviceVec<f32>,
    counters: DeviceVec<u32>,
}

impl DecodeWorkspace {
    /// The cache shape it was made for.
    pub fn shape(&self) -> KvCacheShape {
        self.shape
    }

    /// The query it was made for.
    pub fn query(&self) -> DecodeQuery {
        self.query
    }

    /// The hand-off counters of the one-launch plan (empty for the others): every word is zero
    /// between launches.
    pub fn counters(&self) -> &DeviceVec<u32> {
        &self.counters
    }
}

impl GraphBuffers for DecodeWorkspace {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        self.ml.addresses(out);
        self.acc.addresses(out);
        self.counters.addresses(out);
    }
}

impl<E: KvElement> GraphBuffers for PagedKvCache<E> {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        for buffer in [&self.table, &self.lens, &self.starts] {
            buffer.addresses(out);
        }
        self.k.addresses(out);
        self.v.addresses(out);
    }
}

impl Gpu {
    /// The workspace of [`Gpu::decode_attention_into`] for `query` on caches of `cache`'s shape:
    /// the default plan ([`DecodeAlgorithm::Tensor`]) for a context of the cache's whole
    /// capacity, and its partials (`(head_dim + 2) * 4` bytes per query row and chunk).
    ///
    /// Errors: those of [`Gpu::decode_attention`]'s query checks (heads, `q_len`, scale).
    pub fn decode_workspace<E: KvElement>(
        &self,
        cache: &PagedKvCache<E>,
        query: DecodeQuery,
    ) -> Result<DecodeWorkspace> {
        self.decode_workspace_with(cache, query, DecodeAlgorithm::default())
    }

    /// [`Gpu::decode_workspace`] with the plan of `algorithm` (for the cache's whole capacity):
    /// its partials and, for [`DecodeAlgorithm::TensorFused`], its hand-off counters (a word per
    /// row group of 16 query rows of a kv head and sequence, zeroed here, once).
    ///
    /// Errors: those of [`Gpu::decode_workspace`].
    pub fn decode_workspace_with<E: KvElement>(
        &self,
        cache: &PagedKvCache<E>,
        query: DecodeQuery,
        algorithm: DecodeAlgorithm,
    ) -> Result<DecodeWorkspace> {
        let s = cache.shape;
        check_query(s, query)?;
        let plan = DecodePlan::choose_on(
            algorithm,
            decode_shape(s, query, s.capacity()),
            self.multiprocessors()?,
            self.limits().max_shared_mem_per_block_optin as usize,
        );
        let rows = s.batch * query.q_len * query.heads;
        let (ml, acc) = self.split_partials(plan, rows, s.head_dim)?;
        let counters = self.plan_counters(plan, s, query)?;
        Ok(DecodeWorkspace {
            shape: s,
            query,
            plan,
            ml,
            acc,
            counters,
        })
    }

    /// [`Gpu::decode_attention`] into `out` (`[batch, q_len, heads, head_dim]`) and `lse`
    /// (`[batch, q_len, heads]`) with the workspace's plan: no allocation and no copy, the
    /// lengths read on the device, so that it can be captured in a graph (the query and the
    /// cache's shape are those the workspace was made for).
    ///
    /// Errors: those of [`Gpu::decode_attention`]; [`Error::ShapeMismatch`] for outputs of other
    /// sizes; [`Error::InvalidArgument`] for a workspace made for another cache shape or query.
    pub fn decode_attention_into<E: KvElement>(
        &self,
        q: &DeviceVec<E>,
        cache: &PagedKvCache<E>,
        workspace: &mut DecodeWorkspace,
        out: &mut DeviceVec<E>,
        lse: &mut DeviceVec<f32>,
    ) -> Result<()> {
        if workspace.shape != cache.shape {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the workspace was made for a cache of {:?}, not {:?}",
                    workspace.shape, cache.shape
                ),
            });
        }
        let query = workspace.query;
        let scale = self.check_decode_attention(q, cache, query)?;
        let w = workspace;
        self.launch_decode_attention(
            q,
            cache,
            query,
            scale,
            w.plan,
            (&mut w.ml, &mut w.acc, &mut w.counters),
            (out, lse),
        )
    }

    /// Reserves `new` more tokens for every sequence of `cache` (on the host, between replays
    /// of a captured step): checks the room, then writes the old lengths (where
    /// [`Gpu::kv_cache_write`] puts the tokens) and the new ones to the device, after which the
    /// lengths are `new` larger. A sequence must have room for the most tokens any reservation
    /// of this cache held: a write captured in a graph for an earlier, larger reservation then
    /// still lands in blocks of the table when it is replayed.
    ///
    /// Errors: [`Error::InvalidArgument`] where a sequence would pass its capacity or a position
    /// has no block (nothing is changed); [`Error::Capture`] inside a capture.
    pub fn kv_cache_reserve<E: KvElement>(&self, cache: &mut PagedKvCache<E>, new: usize) -> Result<()> {
        let room = new.max(cache.reserved_max);
        let mut lens = cache.host_lens.clone();
        for (b, len) in lens.iter_mut().enumerate() {
            cache.check_room(b, *len as usize, *len as usize + room)?;
            *len += new as i32;
        }
        // The starts are the lengths the device holds now (a copy on the device, queued before
        // the new lengths on the same stream): one copy from the host, not two.
        cache.starts.copy_from(&cache.lens)?;
        cache.lens.copy_from_host(&lens)?;
        cache.host_starts = std::mem::replace(&mut cache.host_lens, lens);
        cache.reserved = new;
        cache.reserved_max = room;
        Ok(())
    }

    /// [`Gpu::kv_cache_reserve`] on `cache` as `like`'s last reservation made it on `like`, the
    /// lengths copied from `like` on the device (no copy from the host, no wait): for the
    /// caches of a model's blocks, which hold the same lengths. `cache` must hold what `like`
    /// held before that reservation, and `like` nothing appended since.
    ///
    /// Errors: [`Error::InvalidArgument`] for caches of other lengths or batch, or where a
    /// sequence of `cache` lacks the room (its own table's blocks; nothing is changed);
    /// [`Error::Capture`] inside a capture.
    pub fn kv_cache_reserve_as<E: KvElement>(
        &self,
        cache: &mut PagedKvCache<E>,
        like: &PagedKvCache<E>,
    ) -> Result<()> {
        let new = like.reserved;
        let consistent = like
            .host_starts
            .iter()
            .zip(&like.host_lens)
            .all(|(&s, &l)| l as usize == s as usize + new);
        if cache.host_lens != like.host_starts || !consistent {
            return Err(Error::InvalidArgument {
                op: APPEND,
                detail: format!(
                    "the cache holds {:?} tokens, the reservation to copy was made at {:?} for {new} \
                     more and its cache now holds {:?}",
                    cache.host_lens, like.host_starts, like.host_lens
                ),
            });
        }
        let room = new.max(cache.reserved_max);
        for (b, &len) in cache.host_lens.iter().enumerate() {
            cache.check_room(b, len as usize, len as usize + room)?;
        }
        cache.starts.copy_from(&like.starts)?;
        cache.lens.copy_from(&like.lens)?;
        cache.host_starts = std::mem::replace(&mut cache.host_lens, like.host_lens.clone());
        cache.reserved = new;
        cache.reserved_max = room;
        Ok(())
    }

    /// Writes the tokens of the last [`Gpu::kv_cache_reserve`] (`k_new` and `v_new` are
    /// `[batch, reserved, kv_heads, head_dim]`) at their reserved positions, read on the device:
    /// no copy and no allocation, so that it can be captured in a graph.
    ///
    /// Errors: [`Error::ShapeMismatch`] for rows of another size than the reservation's;
    /// [`Error::WrongDevice`].
    pub fn kv_cache_write<E: KvElement>(
        &self,
        cache: &mut PagedKvCache<E>,
        k_new: &DeviceVec<E>,
        v_new: &DeviceVec<E>,
    ) -> Result<()> {
        let s = cache.shape;
        let new = cache.reserved;
        let want = [s.batch, new, s.kv_heads, s.head_dim];
        let rule = "the rows are [batch, reserved, kv_heads, head_dim]";
        same_len(APPEND, &want, k_new.len(), rule)?;
        same_len(APPEND, &want, v_new.len(), rule)?;
        if !(self.owns(k_new) && self.owns(v_new) && self.owns(&cache.k)) {
            return Err(Error::WrongDevice { op: APPEND });
        }
        if new == 0 {
            return Ok(());
        }
        let threads = s.batch * new * s.kv_heads * s.head_dim / VEC;
        let cfg = LaunchConfig::linear(APPEND, threads, APPEND_BLOCK, &self.limits())?;
        let shift = cache.shift();
        let library = self.library();
        // SAFETY (the vector kernel: head_dim is a multiple of 8): the rows hold batch*new*kv_heads*head_dim elements (checked above); the
        // starts on the device were written by the reservation, which checked that every
        // sequence has blocks for `reserved_max >= new` positions from its start (and a later
        // reservation checks the same, so this launch captured in a graph stays inside the
        // pools on every replay); head_dim is a multiple of 8, the buffers are allocations.
        unsafe {
            E::append(
                &library,
                cfg,
                true,
                (k_new, v_new),
                (&mut cache.k, &mut cache.v),
                (cache.table.view(), cache.starts.view()),
                (s.batch, new, s.kv_heads, s.head_dim, shift, s.max_blocks),
            )
        }
    }
}
