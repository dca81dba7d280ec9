//! Ordinary shared-memory accesses ordered by `mbarrier` phases, in the simulator: a value one
//! thread stores and hands to a warp by an arrival (release) that the warp waits for (acquire) is
//! no race, nor is the writer's next store once the readers' warp has arrived on another barrier
//! it waits for (each lane arriving itself: `mbarrier::warp_arrive` is its lane 0's arrival and
//! releases no other lane's reads, on the GPU as here); the same accesses without the wait, with
//! a lane reading after its arrival, or released by `warp_arrive`, are reported as races (the
//! simulator's race check knows each thread's releases and what its waits taught it of the
//! others').
//!
//! The pattern is a persistent kernel's hand-off of per-item values (a tile scheduler's item
//! through shared memory): one producer thread writes the item, the consumers read it; the
//! producer rewrites the slot only once the consumers have released it.

use gpukern_device::sim::{Dim3, Launch, LaunchConfig, SimError, Violation};
use gpukern_device::{mbarrier, mem, shared, thread};

/// One block of 64 threads (two warps) with 256 bytes of shared memory: two barriers at bytes 0
/// and 8, 32 words of data from byte 64.
fn config() -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(64, 1, 1),
        shared_mem_bytes: 256,
    }
}

/// How [`handoff`] is written: right, or with one planted bug.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Plant {
    /// None: thread 0 stores round 1, arrives on `full`; warp 1 waits, reads, and each lane
    /// arrives on `empty` (a count of 32); thread 0 waits for `empty`, stores round 2, arrives;
    /// warp 1 waits and reads again.
    None,
    /// Warp 1 reads round 1 without waiting for `full`.
    ReadBeforeWait,
    /// Thread 0 stores round 2 before its wait for `empty`.
    WriteBeforeRelease,
    /// Warp 1's lanes read round 1 again after their arrivals on `empty`.
    ReadAfterRelease,
    /// Warp 1 releases `empty` by `warp_arrive` (lane 0 alone, a count of 1).
    WarpArrive,
}

/// Runs the hand-off; `out` gets warp 1's two reads (`2 * 32` floats).
fn handoff(plant: Plant) -> (Result<(), SimError>, Vec<f32>) {
    let mut out = vec![0.0f32; 64];
    let mut launch = Launch::new("mbarrier_handoff", config());
    let po = launch.output("out", &mut out);
    // SAFETY: 256 bytes of shared memory hold the two barriers and 32 floats from byte 64; `out`
    // holds 64 floats, each lane of warp 1 writing two.
    let result = unsafe {
        launch.run(|| {
            let t = thread::thread_idx_x() as usize;
            let base = shared::dynamic::<u64>();
            let (full, empty) = (base, base.wrapping_add(1));
            let data = base.wrapping_add(8).cast::<f32>();
            if t == 0 {
                mbarrier::init(full, 1);
                mbarrier::init(empty, if plant == Plant::WarpArrive { 1 } else { 32 });
                mbarrier::fence_init();
            }
            thread::sync_threads();
            if t == 0 {
                for i in 0..32 {
                    mem::store(data, i, i as f32);
                }
                mbarrier::arrive(full);
                let round_2 = || {
                    for i in 0..32 {
                        mem::store(data, i, 100.0 + i as f32);
                    }
                };
                if plant == Plant::WriteBeforeRelease {
                    round_2();
                    mbarrier::wait_parity(empty, 0);
                } else {
                    mbarrier::wait_parity(empty, 0);
                    round_2();
                }
                mbarrier::arrive(full);
            } else if t >= 32 {
                let lane = t - 32;
                if plant != Plant::ReadBeforeWait {
                    mbarrier::wait_parity(full, 0);
                }
                mem::store(po, lane, mem::load(data, lane));
                if plant == Plant::WarpArrive {
                    mbarrier::warp_arrive(empty);
                } else {
                    mbarrier::arrive(empty);
                }
                if plant == Plant::ReadAfterRelease {
                    mem::store(po, lane, mem::load(data, lane));
                }
                mbarrier::wait_parity(full, 1);
                mem::store(po, 32 + lane, mem::load(data, lane));
            }
        })
    };
    (result, out)
}

#[test]
fn a_handoff_ordered_by_mbarrier_phases_is_no_race() {
    let (result, out) = handoff(Plant::None);
    result.unwrap();
    for i in 0..32 {
        assert_eq!(out[i], i as f32, "round 1, word {i}");
        assert_eq!(out[32 + i], 100.0 + i as f32, "round 2, word {i}");
    }
}

#[test]
fn handoffs_without_their_phases_are_reported() {
    for plant in [
        Plant::ReadBeforeWait,
        Plant::WriteBeforeRelease,
        Plant::ReadAfterRelease,
        Plant::WarpArrive,
    ] {
        let (result, _) = handoff(plant);
        let error = result.expect_err("the simulator must report the planted bug");
        println!("{plant:?}: {error}");
        assert!(
            matches!(
                error.violation,
                Violation::SharedRace { .. } | Violation::UninitializedSharedRead { .. }
            ),
            "{plant:?}: want a shared-memory race, got: {error}"
        );
    }
}
