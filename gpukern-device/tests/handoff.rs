//! Blocks handing results to the last of them within one launch, in the simulator: strong
//! stores ([`atomic::store`]), a fence ([`atomic::fence`]) and a counter ([`atomic::add`]) on
//! the writers' side, a fence and strong loads ([`atomic::load`]) on the last block's, the
//! counter reset for the next launch (decode attention's fused combine does this).
//!
//! 1. The hand-off: every block stores its slot, the last to arrive adds the slots up, over
//!    several grids and two launches on the same counter (the second finds it reset).
//! 2. The planted bug: the slots written by plain stores, which the last block's strong loads
//!    race with (a plain access and an atomic one of two blocks, unordered): reported.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::sim::{Dim3, Launch, LaunchConfig, SimError, Violation};
use gpukern_device::{mem, shared, thread};

/// Thread 0 of block `b` stores `b + 1` to `slots[b]` (strong, or plain if `plain`), fences and
/// counts the block in on `counter[0]`; the block that arrives last fences, resets the counter
/// and stores the sum of every slot (strong loads) to `out[0]`.
unsafe fn handoff(slots: *mut u32, counter: *mut u32, out: *mut u32, plain: bool) {
    let last = shared::dynamic::<u32>();
    let n = thread::grid_dim_x() as usize;
    let b = thread::block_idx_x() as usize;
    let tid = thread::thread_idx_x();
    // SAFETY: `slots` holds a word per block, `counter` and `out` one word, `last` one shared
    // word; thread 0 alone touches global memory.
    unsafe {
        if tid == 0 {
            if plain {
                mem::store(slots, b, b as u32 + 1);
            } else {
                atomic::store(slots, b, b as u32 + 1, Scope::Device);
            }
            atomic::fence(Scope::Device);
            let arrived = atomic::add(counter, 0, 1, Scope::Device);
            mem::store(last, 0, u32::from(arrived as usize + 1 == n));
        }
        thread::sync_threads();
        if mem::load(last, 0) == 0 {
            return;
        }
        if tid == 0 {
            atomic::fence(Scope::Device);
            atomic::store(counter, 0, 0, Scope::Device);
            let mut sum = 0;
            for s in 0..n {
                sum += atomic::load(slots, s, Scope::Device);
            }
            mem::store(out, 0, sum);
        }
    }
}

/// One launch's result and the sum it stored.
type Run = (Result<(), SimError>, u32);

/// Runs [`handoff`] twice on `blocks` blocks of 64 threads with one counter; returns each run's
/// result and sum, and the counter after them.
fn run(blocks: u32, plain: bool) -> (Vec<Run>, u32) {
    let n = blocks as usize;
    let mut counter = vec![0u32; 1];
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut slots = vec![0u32; n];
        let mut out = vec![0u32; 1];
        let config = LaunchConfig {
            grid: Dim3::new(blocks, 1, 1),
            block: Dim3::new(64, 1, 1),
            shared_mem_bytes: 4,
        };
        let mut launch = Launch::new("handoff", config);
        let (ps, pc, po) = (
            launch.output("slots", &mut slots),
            launch.output("counter", &mut counter),
            launch.output("out", &mut out),
        );
        // SAFETY: the buffers are sized as `handoff` needs.
        let result = unsafe { launch.run(|| handoff(ps, pc, po, plain)) };
        runs.push((result, out[0]));
    }
    (runs, counter[0])
}

#[test]
fn the_last_block_reads_every_block_s_slot_and_resets_the_counter() {
    for blocks in [1u32, 2, 7, 33, 132] {
        let (runs, counter) = run(blocks, false);
        let n = blocks;
        for (i, (result, sum)) in runs.into_iter().enumerate() {
            result.unwrap_or_else(|e| panic!("{blocks} blocks, launch {i}: {e}"));
            assert_eq!(sum, n * (n + 1) / 2, "{blocks} blocks, launch {i}");
        }
        assert_eq!(
            counter, 0,
            "{blocks} blocks: the counter left for the next launch"
        );
    }
}

#[test]
fn plain_stores_read_by_another_block_are_a_race() {
    let (runs, _) = run(4, true);
    let error = runs
        .into_iter()
        .find_map(|(result, _)| result.err())
        .expect("the planted plain stores must be reported");
    assert_eq!(error.kernel, "handoff");
    assert!(
        matches!(&error.violation, Violation::GlobalRace { buffer, .. } if buffer == "slots"),
        "{:?}",
        error.violation
    );
}
