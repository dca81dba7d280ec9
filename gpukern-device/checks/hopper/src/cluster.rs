//! Distributed shared memory in a cluster of two blocks of [`THREADS`] threads: thread 0 of each
//! block writes its block's shared word, and thread 0 of rank 1 (or rank 0) reads the other
//! block's word into `y[0]`.
//!
//! The correct kernels are [`cluster_publish_twin`](fn@cluster_publish_twin) and [`cluster_exit_twin`](fn@cluster_exit_twin); each `*_planted`
//! kernel is one of them with one mistake. Launch: two blocks of [`THREADS`] threads in one
//! cluster of `(2, 1, 1)`, 4 bytes of dynamic shared memory; `y` holds one float.

use gpukern_device::{cluster, kernel, mem, shared, thread};

/// Threads per block.
pub const THREADS: u32 = 32;

/// The correct exchange: thread 0 of rank 0 writes 7 to its word; every thread arrives at the
/// cluster barrier and waits (the write comes before rank 0's arrival: the barrier publishes it);
/// then thread 0 of rank 1 reads rank 0's word into `y[0]`; a second barrier keeps rank 0 alive
/// until then.
///
/// # Safety
/// The launch of the module documentation.
#[kernel]
pub unsafe fn cluster_publish_twin(y: *mut f32) {
    let word = shared::dynamic::<f32>();
    let (rank, tid) = (cluster::block_rank(), thread::thread_idx_x());
    // SAFETY: the launch; the barriers order the write, the read and the exit.
    unsafe {
        if rank == 0 && tid == 0 {
            mem::store(word, 0, 7.0);
        }
        cluster::sync();
        if rank == 1 && tid == 0 {
            mem::store(y, 0, cluster::load_f32(cluster::map_shared(word, 0), 0));
        }
        cluster::sync();
    }
}

/// [`cluster_publish_twin`](fn@cluster_publish_twin) whose writer arrives first and writes after (`Rule::ClusterPublish`):
/// thread 0 of rank 0 splits the barrier into `arrive` and `wait` and writes between them, so the
/// barrier does not publish the write to the reader.
///
/// # Safety
/// As [`cluster_publish_twin`](fn@cluster_publish_twin).
#[kernel]
pub unsafe fn cluster_publish_planted(y: *mut f32) {
    let word = shared::dynamic::<f32>();
    let (rank, tid) = (cluster::block_rank(), thread::thread_idx_x());
    // SAFETY: none: the write after the arrival races with the read (the planted bug).
    unsafe {
        if rank == 0 && tid == 0 {
            cluster::arrive();
            mem::store(word, 0, 7.0);
            cluster::wait();
        } else {
            cluster::sync();
        }
        if rank == 1 && tid == 0 {
            mem::store(y, 0, cluster::load_f32(cluster::map_shared(word, 0), 0));
        }
        cluster::sync();
    }
}

/// The correct read of another block: thread 0 of each block writes `rank + 1` to its word, a
/// cluster barrier; thread 0 of rank 0 reads rank 1's word into `y[0]`; a second cluster barrier
/// keeps rank 1 (and its shared memory) alive until the read is done.
///
/// # Safety
/// The launch of the module documentation.
#[kernel]
pub unsafe fn cluster_exit_twin(y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { exchange::<true>(y) }
}

/// [`cluster_exit_twin`](fn@cluster_exit_twin) without the second barrier (`Rule::ClusterExit`): rank 1 may exit, and
/// its shared memory go, before rank 0 reads it.
///
/// # Safety
/// As [`cluster_exit_twin`](fn@cluster_exit_twin).
#[kernel]
pub unsafe fn cluster_exit_planted(y: *mut f32) {
    // SAFETY: forwarded contract (the missing barrier is the planted bug).
    unsafe { exchange::<false>(y) }
}

/// The body of the exit kernels: `KEEP_ALIVE` adds the second barrier.
///
/// # Safety
/// As [`cluster_exit_twin`](fn@cluster_exit_twin).
unsafe fn exchange<const KEEP_ALIVE: bool>(y: *mut f32) {
    let word = shared::dynamic::<f32>();
    let (rank, tid) = (cluster::block_rank(), thread::thread_idx_x());
    // SAFETY: the launch; the first barrier orders the writes before the read.
    unsafe {
        if tid == 0 {
            mem::store(word, 0, (rank + 1) as f32);
        }
        cluster::sync();
        if rank == 0 && tid == 0 {
            mem::store(y, 0, cluster::load_f32(cluster::map_shared(word, 1), 0));
        }
        if KEEP_ALIVE {
            cluster::sync();
        }
    }
}
