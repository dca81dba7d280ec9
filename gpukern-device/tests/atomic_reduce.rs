//! `atomic::reduce_add` (`red.relaxed.<scope>.global.add`) in the simulator: many blocks adding
//! into one global buffer give the sums (f32 on small integers, exact in any order, and u32), the
//! reductions of different blocks are no race with each other, and a reduction on shared memory
//! is reported (the instruction names the global state space). And its bulk form
//! (`bulk::reduce_add_f32`, `cp.reduce.async.bulk ... add.f32`): blocks adding a staged tile
//! each give the sums, and a source not fenced, rewritten before its reads were waited for, or
//! left unread when its thread returns is reported.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::sim::{Dim3, Launch, LaunchConfig, Rule, SimError, Violation};
use gpukern_device::{bulk, mem, shared, thread};

/// `blocks` blocks of 64 threads; `shared` bytes of dynamic shared memory.
fn config(blocks: u32, shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(64, 1, 1),
        shared_mem_bytes: shared,
    }
}

#[test]
fn blocks_reduce_into_one_buffer() {
    let blocks = 7u32;
    let mut sums = vec![0.5f32; 64];
    let mut counts = vec![3u32; 64];
    let mut launch = Launch::new("reduce_add_blocks", config(blocks, 0));
    let (ps, pc) = (
        launch.output("sums", &mut sums),
        launch.output("counts", &mut counts),
    );
    // SAFETY: both hold 64 elements, one per thread of a block.
    let result = unsafe {
        launch.run(|| {
            let (t, b) = (thread::thread_idx_x() as usize, thread::block_idx_x());
            atomic::reduce_add(ps, t, (b + 1) as f32 * (t + 1) as f32, Scope::Device);
            atomic::reduce_add(pc, t, 1u32, Scope::Device);
        })
    };
    result.unwrap();
    let per_thread: f32 = (1..=blocks).sum::<u32>() as f32;
    for t in 0..64 {
        assert_eq!(sums[t], 0.5 + per_thread * (t + 1) as f32, "thread {t}");
        assert_eq!(counts[t], 3 + blocks, "thread {t}");
    }
}

#[test]
fn a_reduction_on_shared_memory_is_reported() {
    let mut out = vec![0.0f32; 64];
    let mut launch = Launch::new("reduce_add_shared", config(1, 256));
    let po = launch.output("out", &mut out);
    // SAFETY: 256 bytes of shared memory, 64 floats; `out` holds 64.
    let result = unsafe {
        launch.run(|| {
            let t = thread::thread_idx_x() as usize;
            let s = shared::dynamic::<f32>();
            gpukern_device::mem::store(s, t, 0.0);
            thread::sync_threads();
            atomic::reduce_add(s, t, 1.0, Scope::Block);
            gpukern_device::mem::store(po, t, 1.0);
        })
    };
    let error = result.expect_err("a red.global on shared memory must be reported");
    match &error.violation {
        Violation::Panic { message } => {
            assert!(message.contains("atomic::reduce_add"), "{error}");
            assert!(message.contains("shared memory"), "{error}");
        }
        other => panic!("want a panic report, got {other:?}"),
    }
}

/// How [`bulk_reduce`] misuses its staged tile, if at all.
#[derive(Clone, Copy, PartialEq)]
enum Plant {
    /// None: each writer fences, thread 0 reduces, waits for the reads, and the block rewrites
    /// the tile and reduces again, then waits for completion.
    None,
    /// The writers skip `bulk::fence_shared`.
    Unfenced,
    /// The tile is rewritten with no `wait_group_read` before the barrier.
    Rewritten,
    /// Thread 0 returns without waiting for its reductions.
    Unwaited,
}

/// Each of a block's 64 threads stages `(block + 1) (t + 1)` in shared memory (16-byte aligned
/// at the window's start); thread 0 adds the 64 floats into `sums` by one bulk reduction, then
/// the block stages `1` and adds again.
unsafe fn bulk_reduce(sums: *mut f32, plant: Plant) {
    let (t, b) = (thread::thread_idx_x() as usize, thread::block_idx_x());
    let tile = shared::dynamic::<f32>();
    for (round, value) in [((b + 1) * (t as u32 + 1)) as f32, 1.0].into_iter().enumerate() {
        // SAFETY: 256 bytes of shared memory, 64 floats; the last reduction's reads were waited
        // for before the barrier that ended the previous round (but in the plant).
        unsafe { mem::store(tile, t, value) };
        if plant != Plant::Unfenced {
            bulk::fence_shared();
        }
        thread::sync_threads();
        if t == 0 {
            // SAFETY: the tile is written and fenced by every thread before the barrier; `sums`
            // holds 64 floats, touched only by these reductions.
            unsafe { bulk::reduce_add_f32(sums, tile, 256) };
            bulk::commit_group();
            if round == 0 && plant != Plant::Rewritten {
                bulk::wait_group_read::<0>();
            }
        }
        thread::sync_threads();
    }
    if t == 0 && plant != Plant::Unwaited {
        bulk::wait_group::<0>();
    }
}

/// Runs [`bulk_reduce`] on `blocks` blocks; the result and the sums (starting at 0.5).
fn run_bulk(name: &'static str, blocks: u32, plant: Plant) -> (Result<(), SimError>, Vec<f32>) {
    let mut sums = vec![0.5f32; 64];
    let mut launch = Launch::new(name, config(blocks, 256));
    let ps = launch.output("sums", &mut sums);
    // SAFETY: `sums` holds 64 floats.
    let result = unsafe { launch.run(|| bulk_reduce(ps, plant)) };
    (result, sums)
}

#[test]
fn blocks_add_a_staged_tile_by_bulk_reductions() {
    let blocks = 5u32;
    let (result, sums) = run_bulk("bulk_reduce", blocks, Plant::None);
    result.unwrap();
    let per_thread: f32 = (1..=blocks).sum::<u32>() as f32;
    for (t, sum) in sums.iter().enumerate() {
        assert_eq!(
            *sum,
            0.5 + per_thread * (t + 1) as f32 + blocks as f32,
            "float {t}"
        );
    }
    for (name, plant, rule, says) in [
        (
            "bulk_reduce_unfenced",
            Plant::Unfenced,
            Rule::ProxyFence,
            "the source of a bulk",
        ),
        (
            "bulk_reduce_rewritten",
            Plant::Rewritten,
            Rule::BulkStoreSource,
            "bulk group 0 of thread 0",
        ),
        (
            "bulk_reduce_unwaited",
            Plant::Unwaited,
            Rule::BulkStoreSource,
            "not waited for",
        ),
    ] {
        let (result, _) = run_bulk(name, 2, plant);
        let error = result.expect_err("the simulator must report the planted bug");
        match &error.violation {
            Violation::Protocol { rule: got, message } => {
                assert_eq!(*got, rule, "{error}");
                assert!(message.contains(says), "{error}");
            }
            _ => panic!("want a {rule} report, got: {error}"),
        }
    }
}
