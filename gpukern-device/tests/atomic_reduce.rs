//! `atomic::reduce_add` (`red.relaxed.<scope>.global.add`) in the simulator: many blocks adding
//! into one global buffer give the sums (f32 on small integers, exact in any order, and u32), the
//! reductions of different blocks are no race with each other, and a reduction on shared memory
//! is reported (the instruction names the global state space).

use gpukern_device::atomic::{self, Scope};
use gpukern_device::sim::{Dim3, Launch, LaunchConfig, Violation};
use gpukern_device::{shared, thread};

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
