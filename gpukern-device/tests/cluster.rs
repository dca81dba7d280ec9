//! Thread-block clusters in the simulator ([`gpukern_device::cluster`], [`Launch::cluster`]):
//!
//! 1. The exchange: every block of a cluster reads every other block's shared word after a
//!    cluster barrier, for clusters of 1 to 16 blocks; ranks, sizes and cluster indices.
//! 2. Each rule, proved on a test-only kernel with one planted bug, next to its fixed version:
//!    a remote read with no cluster barrier after the write (a race across blocks, which a
//!    block barrier does not order: `Rule::ClusterPublish`), a read of a block that has exited
//!    (no second barrier: `Rule::ClusterExit`), a
//!    wait with no arrival, a thread that returns while its cluster waits, and grids that do not
//!    divide into clusters.

use gpukern_device::sim::{Dim3, Launch, LaunchConfig, Rule, SimError, Violation};
use gpukern_device::{cluster, mem, shared, thread};

/// A launch of `blocks` blocks of `threads` threads, 8 bytes of shared memory each.
fn grid(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes: 8,
    }
}

/// Runs `kernel(out)` on `blocks` blocks of `threads` in clusters of `size`; `out` has `n`
/// floats.
fn run(
    name: &'static str,
    (blocks, threads, size): (u32, u32, u32),
    n: usize,
    kernel: unsafe fn(*mut f32),
) -> (Result<(), SimError>, Vec<f32>) {
    let mut out = vec![0.0f32; n];
    let mut launch = Launch::new(name, grid(blocks, threads));
    launch.cluster(Dim3::new(size, 1, 1));
    let p = launch.output("out", &mut out);
    // SAFETY: every kernel here writes inside `out` as sized by its caller.
    let result = unsafe { launch.run(|| kernel(p)) };
    (result, out)
}

/// Thread 0 of each block stores `10 * blockIdx + 1` to its shared word; after a cluster
/// barrier thread `r < size` reads rank `r`'s word and stores it at `out[block * 16 + r]`, and
/// thread 0 stores the block's rank, the cluster's size and index at `out[block * 16 + 13..16]`;
/// a second barrier keeps the blocks alive until all have read.
///
/// # Safety
/// `out` holds 16 floats per block; blocks of at least 16 threads, clusters of at most 13.
unsafe fn exchange(out: *mut f32) {
    let (tid, block) = (thread::thread_idx_x(), thread::block_idx_x() as usize);
    let word = shared::dynamic::<f32>();
    // SAFETY: the contract; the barriers order the store before the remote reads and the reads
    // before any block exits.
    unsafe {
        if tid == 0 {
            mem::store(word, 0, 10.0 * block as f32 + 1.0);
            mem::store(out, block * 16 + 13, cluster::block_rank() as f32);
            mem::store(out, block * 16 + 14, cluster::size() as f32);
            mem::store(out, block * 16 + 15, cluster::id_x() as f32);
        }
        cluster::sync();
        if tid < cluster::size() {
            let remote = cluster::map_shared(word, tid);
            mem::store(out, block * 16 + tid as usize, cluster::load_f32(remote, 0));
        }
        cluster::sync();
    }
}

#[test]
fn every_block_reads_every_other_blocks_shared_memory() {
    for size in [1u32, 2, 3, 4, 8, 12] {
        let blocks = 2 * size;
        let (result, out) = run("exchange", (blocks, 64, size), 16 * blocks as usize, exchange);
        result.unwrap();
        for b in 0..blocks {
            let (rank, id) = (b % size, b / size);
            let row = &out[16 * b as usize..16 * (b as usize + 1)];
            for r in 0..size {
                let want = 10.0 * (id * size + r) as f32 + 1.0;
                assert_eq!(row[r as usize], want, "cluster size {size}, block {b}, rank {r}");
            }
            assert_eq!(
                (row[13], row[14], row[15]),
                (rank as f32, size as f32, id as f32),
                "cluster size {size}, block {b}"
            );
        }
    }
}

#[test]
fn a_cluster_of_16_blocks_runs() {
    /// Each block writes its rank, reads rank `(rank + 1) % 16`'s into `out[block]`.
    unsafe fn ring(out: *mut f32) {
        let word = shared::dynamic::<f32>();
        let rank = cluster::block_rank();
        // SAFETY: one float per block; barriers around the exchange.
        unsafe {
            if thread::thread_idx_x() == 0 {
                mem::store(word, 0, rank as f32);
            }
            cluster::sync();
            if thread::thread_idx_x() == 0 {
                let next = cluster::map_shared(word, (rank + 1) % cluster::size());
                mem::store(out, thread::block_idx_x() as usize, cluster::load_f32(next, 0));
            }
            cluster::sync();
        }
    }
    let (result, out) = run("ring", (32, 32, 16), 32, ring);
    result.unwrap();
    let want: Vec<f32> = (0..32).map(|b| ((b % 16 + 1) % 16) as f32).collect();
    assert_eq!(out, want);
}

/// The report's violation, after checking it names `kernel`.
fn violation(kernel: &str, result: Result<(), SimError>) -> Violation {
    let error = result.expect_err("the planted bug must be reported");
    assert_eq!(error.kernel, kernel);
    error.violation
}

#[test]
fn a_remote_read_needs_a_cluster_barrier_after_the_write() {
    /// Planted bug: the owner writes its word after a block barrier only; rank 1 reads rank 0's
    /// word with no cluster barrier between.
    unsafe fn unordered(out: *mut f32) {
        let word = shared::dynamic::<f32>();
        // SAFETY: in bounds; the race is the point.
        unsafe {
            cluster::sync();
            if cluster::block_rank() == 0 && thread::thread_idx_x() == 0 {
                mem::store(word, 0, 1.0);
            }
            thread::sync_threads();
            if cluster::block_rank() == 1 && thread::thread_idx_x() == 0 {
                let remote = cluster::map_shared(word, 0);
                mem::store(out, 0, cluster::load_f32(remote, 0));
            }
            cluster::sync();
        }
    }
    let (result, _) = run("unordered", (2, 32, 2), 1, unordered);
    let v = violation("unordered", result);
    assert!(
        matches!(
            v,
            Violation::Protocol {
                rule: Rule::ClusterPublish,
                ..
            } | Violation::UninitializedSharedRead { .. }
        ),
        "{v:?}"
    );

    /// Fixed: a cluster barrier between the write and the remote read.
    unsafe fn ordered(out: *mut f32) {
        let word = shared::dynamic::<f32>();
        // SAFETY: in bounds, ordered by the barriers.
        unsafe {
            if cluster::block_rank() == 0 && thread::thread_idx_x() == 0 {
                mem::store(word, 0, 1.0);
            }
            cluster::sync();
            if cluster::block_rank() == 1 && thread::thread_idx_x() == 0 {
                let remote = cluster::map_shared(word, 0);
                mem::store(out, 0, cluster::load_f32(remote, 0));
            }
            cluster::sync();
        }
    }
    let (result, out) = run("ordered", (2, 32, 2), 1, ordered);
    result.unwrap();
    assert_eq!(out, vec![1.0]);
}

#[test]
fn a_remote_write_then_the_owners_read_needs_a_cluster_barrier() {
    /// Planted bug: rank 1 writes rank 0's word; rank 0 reads it after a block barrier only.
    unsafe fn remote_write(out: *mut f32) {
        let word = shared::dynamic::<f32>();
        // SAFETY: in bounds; the race is the point.
        unsafe {
            if thread::thread_idx_x() == 0 {
                mem::store(word, 0, 0.0);
            }
            cluster::sync();
            if cluster::block_rank() == 1 && thread::thread_idx_x() == 0 {
                cluster::store_f32(cluster::map_shared(word, 0), 0, 5.0);
            }
            thread::sync_threads();
            if cluster::block_rank() == 0 && thread::thread_idx_x() == 0 {
                mem::store(out, 0, mem::load(word, 0));
            }
            cluster::sync();
        }
    }
    let (result, _) = run("remote_write", (2, 32, 2), 1, remote_write);
    assert!(matches!(
        violation("remote_write", result),
        Violation::Protocol {
            rule: Rule::ClusterPublish,
            ..
        }
    ));
}

#[test]
fn a_block_must_not_exit_while_another_reads_its_shared_memory() {
    /// Planted bug: rank 0 leaves after the first barrier; rank 1 then reads its word.
    unsafe fn early_exit(out: *mut f32) {
        let word = shared::dynamic::<f32>();
        // SAFETY: in bounds; the exit is the point.
        unsafe {
            if thread::thread_idx_x() == 0 {
                mem::store(word, 0, 2.0);
            }
            cluster::sync();
            if cluster::block_rank() == 0 {
                return;
            }
            if thread::thread_idx_x() == 0 {
                mem::store(out, 0, cluster::load_f32(cluster::map_shared(word, 0), 0));
            }
        }
    }
    let (result, _) = run("early_exit", (2, 32, 2), 1, early_exit);
    match violation("early_exit", result) {
        Violation::Protocol {
            rule: Rule::ClusterExit,
            message,
        } => assert!(message.contains("exited"), "{message}"),
        v => panic!("{v:?}"),
    }
}

#[test]
fn a_wait_needs_an_arrival_and_every_thread_of_the_cluster() {
    /// Planted bug: waits without arriving.
    unsafe fn no_arrive(_out: *mut f32) {
        // SAFETY: the missing arrival is the point.
        unsafe { cluster::wait() }
    }
    let (result, _) = run("no_arrive", (2, 32, 2), 1, no_arrive);
    assert!(matches!(violation("no_arrive", result), Violation::Panic { .. }));

    /// Planted bug: one block's threads return while the other's wait at the cluster barrier.
    unsafe fn half_cluster(_out: *mut f32) {
        if cluster::block_rank() == 1 {
            return;
        }
        // SAFETY: the missing block is the point.
        unsafe { cluster::sync() }
    }
    let (result, _) = run("half_cluster", (2, 32, 2), 1, half_cluster);
    assert!(matches!(
        violation("half_cluster", result),
        Violation::BarrierNotReached { .. }
    ));
}

#[test]
fn grids_must_divide_into_clusters_of_at_most_16() {
    unsafe fn nothing(_out: *mut f32) {}
    for (blocks, size) in [(3, 2), (34, 17)] {
        let (result, _) = run("nothing", (blocks, 32, size), 1, nothing);
        assert!(
            matches!(violation("nothing", result), Violation::InvalidLaunch { .. }),
            "{blocks} blocks in clusters of {size}"
        );
    }
}
