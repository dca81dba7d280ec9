//! Rows too long for one block's registers, still read once: a row split over a thread-block
//! cluster (sm_90), each block holding its share in registers, the blocks' statistics exchanged
//! through distributed shared memory ([`softmax_cluster`](fn@softmax_cluster): `softmax_cluster_4`,
//! `softmax_cluster_8`).
//!
//! Why: past 32768 columns a row no longer fits the 1024 threads of one block with 8 vectors
//! each, and the block-per-row kernels give way to the streaming ones, which read the row twice
//! (12 bytes per element instead of 8). A cluster of `C` blocks holds `C` times more: every
//! block loads its share once, reduces it to one [`Stats`], and the cluster merges the `C`
//! statistics through each other's shared memory, with two cluster barriers and no second
//! launch or global scratch. 8 bytes per element, as for short rows.
//!
//! Compiled for the host (the simulator) and `sm_90` PTX only ([`crate::gpu::cluster`]).

use super::in_registers::row_in_registers;
use super::stats::{block_stats, warp_stats, Stats};
use super::{ROW_BLOCK_MAX, STATS_SHARED_BYTES};
use crate::gpu::{cluster, mem, shared, thread, warp};
use crate::kernel;

/// Where a block keeps its merged statistics for the other blocks of the cluster to read: the
/// slot after the per-warp scratch of [`block_stats`].
const PARTIAL_SLOT: usize = (ROW_BLOCK_MAX / warp::SIZE) as usize;

/// Dynamic shared memory of the cluster kernels: the per-warp scratch of the block reduction
/// ([`STATS_SHARED_BYTES`]) and the block's partial [`Stats`] (8 bytes).
pub const CLUSTER_SHARED_BYTES: u32 = STATS_SHARED_BYTES + core::mem::size_of::<Stats>() as u32;

/// Most blocks in a cluster the kernels take (16, the non-portable limit of sm_90; 8 is the
/// portable one).
pub const CLUSTER_MAX_BLOCKS: u32 = 16;

/// The statistics over the whole cluster of one [`Stats`] per thread, returned to every thread
/// of every block: the block's merge ([`block_stats`]), its result stored in the block's
/// `PARTIAL_SLOT` by thread 0, a cluster barrier, then every warp reads the cluster's `C`
/// partials (lane `l < C` from block rank `l`, through [`cluster::map_shared`]) and merges them
/// with shuffles. Every warp of every block merges the same values in the same order, so all get
/// the same `(M, S)`.
///
/// Ends with the thread's arrival at the cluster barrier that keeps the blocks' shared memory
/// alive until the others have read it: the caller waits ([`cluster::wait`]) before it exits.
///
/// # Safety
/// Called once per launch by every thread of every block of the cluster (blocks of a multiple
/// of 32 threads); `scratch` points to [`CLUSTER_SHARED_BYTES`] of shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn cluster_stats(scratch: *mut Stats, stats: Stats, t: f32) -> Stats {
    let tid = thread::thread_idx_x() as usize;
    let lane = (tid % warp::SIZE as usize) as u32;
    let slot = scratch.wrapping_add(PARTIAL_SLOT);
    // SAFETY: the caller's contract: every thread of the cluster arrives here; the slot lies in
    // `scratch`; the partials are read after the barrier that follows their stores, and the
    // blocks stay until the second barrier, which each thread arrives at after its last read.
    unsafe {
        let block = block_stats(scratch, stats, t);
        if tid == 0 {
            mem::store(slot, 0, block);
        }
        cluster::sync();
        let other = if lane < cluster::size() {
            let partial = cluster::map_shared(slot.cast::<f32>(), lane);
            Stats {
                m: cluster::load_f32(partial, 0),
                s: cluster::load_f32(partial, 1),
            }
        } else {
            Stats::empty(t)
        };
        let total = warp_stats(other, t);
        cluster::arrive();
        total
    }
}

/// Cluster-per-row softmax, the row in registers, `V` vectors per thread.
///
/// Cluster `r` (`%clusterid.x`, `C` blocks of `blockDim.x` threads) handles row `r`: thread `tid`
/// of block rank `k` is thread `g = k * blockDim.x + tid` of the row's `C * blockDim.x`, and holds
/// vectors `g + i * C * blockDim.x` (`i < V`) of the row and at most one head or tail scalar (block
/// rank 0's threads 0..7), as the block kernels do for one block; the statistics are merged over
/// the cluster (`cluster_stats`), then every thread writes its entries and waits at the cluster
/// barrier before it exits.
///
/// Global memory: each entry read once and written once, 8 bytes per element; a warp's access is
/// 512 contiguous bytes. Shared memory: [`CLUSTER_SHARED_BYTES`]; each block reads `8 * C` bytes
/// of the others'.
///
/// Launch: `rows * C` blocks in clusters of `(C, 1, 1)` (`2 <= C <=` [`CLUSTER_MAX_BLOCKS`]) of
/// a multiple of 32 threads, at most 1024, with `cols / 4 <= V * C * blockDim.x`;
/// [`CLUSTER_SHARED_BYTES`] of dynamic shared memory; an sm_90 GPU.
///
/// Instances, one PTX entry each (in the sm_90 and sm_90a modules):
/// * `softmax_cluster_4` (`V = 4`, 16 floats per thread): rows of up to `16 * C * blockDim.x`
///   columns, about 40 registers a thread, so two 1024-thread blocks can share a
///   multiprocessor;
/// * `softmax_cluster_8` (`V = 8`, 32 floats per thread): rows of up to `32 * C * blockDim.x`
///   columns (131072 columns in a cluster of 4 blocks of 1024 threads, 524288 in 16).
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
// Block: each block of a cluster sized to its share of the row, up to 1024 threads. Barriers:
// five, one `block_stats`, then the cluster barrier's arrive and wait before the partials are
// read, an arrive after the reads and a wait before the exit.
#[kernel(
    instances(softmax_cluster_4 = 4, softmax_cluster_8 = 8),
    block(ROW_BLOCK_MAX),
    barriers(5)
)]
#[inline(always)]
pub unsafe fn softmax_cluster<const V: usize>(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    let row = cluster::id_x() as usize;
    if row >= rows {
        return; // the whole cluster leaves together: no barrier is skipped by part of it
    }
    let rank = cluster::block_rank() as usize;
    let blocks = cluster::size() as usize;
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let scratch = shared::dynamic::<Stats>();
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // SAFETY: the row is inside the buffers; the caller's shape gives
    // `cols / 4 <= V * blocks * threads` and the shared memory; every thread of the cluster
    // reaches the reduction, and the wait matching its arrival there.
    unsafe {
        row_in_registers::<V, 0, false>(
            x_row,
            y_row,
            cols,
            t,
            rank * threads + tid,
            blocks * threads,
            |s| cluster_stats(scratch, s, t),
        );
        cluster::wait();
    }
}
