//! The sampling family's fast rung for greedy rows and rows without filters: a row split over a
//! thread-block cluster (sm_90), read once, the blocks' partials merged through distributed
//! shared memory, and the draw walked by the one block whose share holds it
//! ([`sample_cluster`](fn@sample_cluster): `sample_cluster_f32`, `sample_cluster_bf16`).
//!
//! Why: one block per row reads a 32000-column row with a few loads in flight (the tutorial
//! rung's greedy row takes one pass of dependent strided loads); `C` blocks of a cluster read
//! their shares at once, and merge `C` partials with one cluster barrier, no second launch and no
//! global scratch.
//!
//! The draw is the tutorial rung's inverse CDF (the same uniform number, column order), so the
//! token for a seed is the same as the other rungs' up to rounding at a boundary between two
//! tokens: the share that holds it by the shares' f32 masses summed in rank order (one running
//! sum, so consecutive shares' bounds are the same number and exactly one share holds the
//! target), then the token in it by `walk`'s exact fixed point sums, relative to the share's
//! own largest logit (so a share with a mass has a positive integer total). The cluster's size
//! enters the sums' order, so the plan chooses it from the shape alone, never from the device,
//! and the simulator and every sm_90 GPU draw the same token.
//!
//! Compiled for the host (the simulator) and `sm_90` PTX only ([`crate::gpu::cluster`]).

use super::radix::{fixed_weight, for_each, uniform, walk};
use super::{order_key, RowMax, NEG_INF_KEY};
use crate::gpu::block::Scratch;
use crate::gpu::convert::Float;
use crate::gpu::shared::Array;
use crate::gpu::{bf16, cluster, math, mem, thread, warp};
use crate::kernel;

/// Threads per block of `sample_cluster_*`.
pub const SAMPLE_CLUSTER_BLOCK: u32 = 512;

/// Most blocks in a sampling cluster (the portable limit).
pub const SAMPLE_CLUSTER_MAX_BLOCKS: u32 = 8;

/// Threads of the block, as a count.
const THREADS: usize = SAMPLE_CLUSTER_BLOCK as usize;

/// Online softmax statistics over a set of logits: `m` the largest, `s` the sum of
/// `exp((x - m) / t)`; `m = -inf` and `s = 0` for the empty set.
#[inline(always)]
fn merge((m1, s1): (f32, f32), (m2, s2): (f32, f32), inv_t: f32) -> (f32, f32) {
    if m1 == f32::NEG_INFINITY {
        return (m2, s2);
    }
    if m2 == f32::NEG_INFINITY {
        return (m1, s1);
    }
    let m = m1.max(m2);
    (
        m,
        s1 * math::accurate::exp((m1 - m) * inv_t) + s2 * math::accurate::exp((m2 - m) * inv_t),
    )
}

/// Greedy rows and rows without top-k or top-p, one cluster per row.
///
/// Cluster `r` (`%clusterid.x`, `C` blocks) handles row `r`; block rank `b` takes the contiguous
/// share `b * ceil(cols / C) ..` of it. Each thread walks its columns of the share (strides of
/// the block, 8 loads in flight) keeping the largest key with its first index and, unless the
/// row is greedy (`inv_t` infinite), the online `(m, s)` of its weights; the block reduces both;
/// thread 0 publishes them in its shared memory; after a cluster barrier every warp of every
/// block reads the `C` partials (lane `l` from rank `l`) and merges them in rank order: the
/// row's largest key and first index, the largest logit `M`, each share's mass
/// `s_b * exp((m_b - M) / t)`, their running sum in rank order and total. Greedy rows, `+inf`
/// maxima and rows with nothing to sample: rank 0's thread 0 writes the token. Otherwise
/// `u * total` names the share that holds the draw, and that block walks it
/// (`super::radix::walk`, weights in fixed point relative to `m_b`) to the same fraction of
/// the share's integer total.
///
/// Global memory: the row read once (4 bytes per f32 logit), the drawing block's share a second
/// time (from L2), 4 bytes written. Shared memory: the collectives' scratch and 16 bytes of
/// partial per block; each block reads `16 * C` bytes of the others'.
///
/// Launch: `rows * C` blocks of [`SAMPLE_CLUSTER_BLOCK`] threads in clusters of `(C, 1, 1)`,
/// `1 <= C <=` [`SAMPLE_CLUSTER_MAX_BLOCKS`]; an sm_90 GPU.
///
/// # Safety
/// `x` holds `rows * cols` logits (`cols >= 1`), `tokens` `rows` integers; the launch is as
/// above.
// Barriers: the key's reduction (2) and the statistics' (2); the cluster barrier's arrive and
// wait before the partials are read, an arrive after the reads and a wait before each of the
// two exits (greedy rows, drawn rows); the walk's scan (2) and total (1) in the drawing block.
#[kernel(
    instances(sample_cluster_f32 = f32, sample_cluster_bf16 = bf16),
    block(SAMPLE_CLUSTER_BLOCK),
    barriers(12),
    shared(
        keys: Scratch<u64, THREADS>,
        stats: Scratch<(f32, f32), THREADS>,
        sums: Scratch<u64, THREADS>,
        partial: Array<f32, 4>,
        total_slot: Array<u64, 1>
    )
)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn sample_cluster<T: Float>(
    x: *const T,
    tokens: *mut i32,
    rows: usize,
    cols: usize,
    inv_t: f32,
    seed: u64,
    offset: u64,
) {
    let r = cluster::id_x() as usize;
    if r >= rows {
        return; // the whole cluster leaves together: no barrier is skipped by part of it
    }
    let rank = cluster::block_rank() as usize;
    let blocks = cluster::size() as usize;
    let tid = thread::thread_idx_x() as usize;
    let lane = tid as u32 % warp::SIZE;
    let share = cols.div_ceil(blocks);
    let (lo, hi) = ((rank * share).min(cols), ((rank + 1) * share).min(cols));
    let sampling = inv_t.is_finite();
    // SAFETY (all accesses): columns `lo..hi` of row `r < rows`; the shared items are the
    // block's own; every thread of the cluster reaches both cluster barriers' arrivals and
    // waits, and the block collectives (the walk's branch is the same in all of a block's
    // threads: it depends on merged values only); the partials are read after the barrier that
    // follows their stores, and each block stays until every thread has arrived after its reads.
    unsafe {
        let x = x.add(r * cols);
        let (mut best, mut own) = (0u64, (f32::NEG_INFINITY, 0.0f32));
        for_each(x, (lo, hi), (tid, THREADS), |i, v| {
            let key = order_key(v);
            best = best.max(RowMax::rank_key(key, i));
            if sampling && key > NEG_INF_KEY {
                own = merge(own, (v, 1.0), inv_t);
            }
        });
        let best = keys.reduce(best, u64::max);
        let own = if sampling {
            stats.reduce(own, |a, b| merge(a, b, inv_t))
        } else {
            own
        };
        if tid == 0 {
            partial.store(0, f32::from_bits(best as u32));
            partial.store(1, f32::from_bits((best >> 32) as u32));
            partial.store(2, own.0);
            partial.store(3, own.1);
        }
        cluster::sync();
        // Lane `l < C` reads rank `l`'s partial; the others hold an empty one.
        let (mut their_best, mut their) = (0u64, (f32::NEG_INFINITY, 0.0f32));
        if (lane as usize) < blocks {
            let at = cluster::map_shared(partial.ptr(), lane);
            their_best = u64::from(cluster::load_f32(at, 0).to_bits())
                | u64::from(cluster::load_f32(at, 1).to_bits()) << 32;
            their = (cluster::load_f32(at, 2), cluster::load_f32(at, 3));
        }
        cluster::arrive();
        let row_best = warp::reduce(their_best, u64::max);
        let row = RowMax::of(row_best);
        if row.greedy(sampling) {
            if rank == 0 && tid == 0 {
                mem::store(tokens, r, row.token());
            }
            cluster::wait();
            return;
        }
        let max = mem::load(x, row.first as usize).to_f32();
        let mass = if their.1 > 0.0 {
            their.1 * math::accurate::exp((their.0 - max) * inv_t)
        } else {
            0.0
        };
        // One running sum in rank order (lanes past the cluster add zeros): share `b` holds
        // `[base, next)`, and the next share's `base` is this `next`, the same number.
        let (mut total, mut base, mut next) = (0.0f32, 0.0f32, 0.0f32);
        for b in 0..SAMPLE_CLUSTER_MAX_BLOCKS {
            let before = total;
            total += warp::shfl_idx(mass, b);
            if b as usize == rank {
                (base, next) = (before, total);
            }
        }
        // `u < 1` is a multiple of 2^-24, so `u * total < total`: exactly one share holds it.
        let target = uniform(r, seed, offset) * total;
        if base <= target && target < next {
            // The share's own largest logit: its weights in fixed point relative to it (the
            // largest `2^32`), and the target at the same fraction of their integer total.
            let local_max = own.0;
            let weight = |v: f32| {
                if order_key(v) > NEG_INF_KEY {
                    fixed_weight(v, local_max, inv_t)
                } else {
                    0
                }
            };
            let fraction = f64::from(target - base) / f64::from(next - base);
            let scaled = |share_total: u64| ((fraction * share_total as f64) as u64).min(share_total - 1);
            if let Some(token) = walk(x, (lo, hi), weight, scaled, sums, total_slot) {
                mem::store(tokens, r, token);
            }
        }
        cluster::wait();
    }
}
