//! Blocks handing results to the last of them within one launch, in the simulator: every thread
//! stores its slot, a barrier, then the block's thread 0 fences ([`atomic::fence`]) and counts
//! the block in on a counter ([`atomic::add`]): the release. The block that arrives last fences
//! after its count (the acquire) and, past a barrier, its threads add every block's slots up; the
//! counter is reset for the next launch (stream-K's and a fused combine's hand-off).
//!
//! 1. The hand-off, with plain stores and loads ([`mem`]) and with strong ones ([`atomic::store`],
//!    [`atomic::load`]), over several grids and two launches on the same counter.
//! 2. Planted bugs, each reported as a race on the slots: no fence before the count, no fence
//!    after it, a block-scope fence, no barrier between the threads' stores and thread 0's
//!    fence, and a store between the fence and the count.
//! 3. Two hand-offs in a chain: what the first one's last block acquired reaches the second's
//!    last block through its release (and, with that block's fence before its second count
//!    planted away, is reported).

use gpukern_device::atomic::{self, Scope};
use gpukern_device::sim::{Dim3, Launch, LaunchConfig, SimError, Violation};
use gpukern_device::{mem, shared, thread};

/// Threads per block.
const THREADS: u32 = 32;

/// How [`handoff`] is written: right, or with one planted bug.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    /// Plain stores and loads of the slots.
    Plain,
    /// Strong (relaxed `.gpu`) stores and loads of the slots.
    Strong,
    /// No fence between the slots' stores and the count.
    NoReleaseFence,
    /// No fence between the last block's count and its loads.
    NoAcquireFence,
    /// A block-scope fence before the count.
    BlockFence,
    /// No barrier between the threads' stores and thread 0's fence.
    NoBarrier,
    /// Thread 0 stores its slot again between its fence and the count.
    StoreAfterFence,
}

/// Thread `t` of block `b` stores `b * THREADS + t + 1` to slot `b * THREADS + t`; the block
/// that arrives last on `counter[0]` stores, in each thread `t`, the sum of slot `t` of every
/// block to `out[t]`, and resets the counter.
unsafe fn handoff(slots: *mut u32, counter: *mut u32, out: *mut u32, variant: Variant) {
    let last = shared::dynamic::<u32>();
    let n = thread::grid_dim_x() as usize;
    let b = thread::block_idx_x() as usize;
    let tid = thread::thread_idx_x() as usize;
    let threads = THREADS as usize;
    let slot = b * threads + tid;
    // SAFETY: `slots` holds a word per thread of the grid, `counter` one word, `out` a word per
    // thread of a block, `last` one shared word.
    unsafe {
        let value = slot as u32 + 1;
        if variant == Variant::Strong {
            atomic::store(slots, slot, value, Scope::Device);
        } else {
            mem::store(slots, slot, value);
        }
        if variant != Variant::NoBarrier {
            thread::sync_threads();
        }
        if tid == 0 {
            match variant {
                Variant::NoReleaseFence => {}
                Variant::BlockFence => atomic::fence(Scope::Block),
                _ => atomic::fence(Scope::Device),
            }
            if variant == Variant::StoreAfterFence {
                mem::store(slots, slot, value);
            }
            let arrived = atomic::add(counter, 0, 1, Scope::Device);
            let is_last = arrived as usize + 1 == n;
            if is_last && variant != Variant::NoAcquireFence {
                atomic::fence(Scope::Device);
            }
            mem::store(last, 0, u32::from(is_last));
        }
        thread::sync_threads();
        if mem::load(last, 0) == 0 {
            return;
        }
        let mut sum = 0;
        for s in 0..n {
            sum += if variant == Variant::Strong {
                atomic::load(slots, s * threads + tid, Scope::Device)
            } else {
                mem::load(slots, s * threads + tid)
            };
        }
        mem::store(out, tid, sum);
        if tid == 0 {
            atomic::store(counter, 0, 0, Scope::Device);
        }
    }
}

/// One launch's result and the sums it stored.
type Run = (Result<(), SimError>, Vec<u32>);

/// Runs [`handoff`] twice on `blocks` blocks with one counter; returns each run's result and
/// sums, and the counter after them.
fn run(blocks: u32, variant: Variant) -> (Vec<Run>, u32) {
    let n = blocks as usize;
    let mut counter = vec![0u32; 1];
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut slots = vec![0u32; n * THREADS as usize];
        let mut out = vec![0u32; THREADS as usize];
        let config = LaunchConfig {
            grid: Dim3::new(blocks, 1, 1),
            block: Dim3::new(THREADS, 1, 1),
            shared_mem_bytes: 4,
        };
        let mut launch = Launch::new("handoff", config);
        let (ps, pc, po) = (
            launch.output("slots", &mut slots),
            launch.output("counter", &mut counter),
            launch.output("out", &mut out),
        );
        // SAFETY: the buffers are sized as `handoff` needs.
        let result = unsafe { launch.run(|| handoff(ps, pc, po, variant)) };
        runs.push((result, out));
    }
    (runs, counter[0])
}

#[test]
fn the_last_block_reads_every_block_s_slots_and_resets_the_counter() {
    for variant in [Variant::Plain, Variant::Strong] {
        for blocks in [1u32, 2, 7, 33, 132] {
            let (runs, counter) = run(blocks, variant);
            let n = blocks;
            for (i, (result, sums)) in runs.into_iter().enumerate() {
                result.unwrap_or_else(|e| panic!("{variant:?}, {blocks} blocks, launch {i}: {e}"));
                for (t, sum) in sums.into_iter().enumerate() {
                    // Slot values b * THREADS + t + 1 over b < n.
                    let expected = THREADS * n * (n - 1) / 2 + n * (t as u32 + 1);
                    assert_eq!(
                        sum, expected,
                        "{variant:?}, {blocks} blocks, launch {i}, thread {t}"
                    );
                }
            }
            assert_eq!(
                counter, 0,
                "{variant:?}, {blocks} blocks: the counter left for the next launch"
            );
        }
    }
}

#[test]
fn a_hand_off_without_its_release_or_acquire_is_a_race() {
    for variant in [
        Variant::NoReleaseFence,
        Variant::NoAcquireFence,
        Variant::BlockFence,
        Variant::NoBarrier,
        Variant::StoreAfterFence,
    ] {
        for blocks in [2u32, 5, 33] {
            // The first launch: a reported launch stops before its last block resets the counter.
            let (mut runs, _) = run(blocks, variant);
            let (result, _) = runs.swap_remove(0);
            let error = result
                .err()
                .unwrap_or_else(|| panic!("{variant:?}, {blocks} blocks: not reported"));
            assert_eq!(error.kernel, "handoff");
            assert!(
                matches!(&error.violation, Violation::GlobalRace { buffer, .. } if buffer == "slots"),
                "{variant:?}, {blocks} blocks: {:?}",
                error.violation
            );
        }
    }
}

/// Blocks in [`chain`]: two in the first hand-off, the rest beside its last block in the second.
const CHAIN_BLOCKS: usize = 10;

/// Two hand-offs in a chain: blocks 0 and 1 store their slots and count in on `first`; the last
/// of them adds both slots into slot 2 and counts in on `second`, as every other block does after
/// storing its slot `b + 1`; the last on `second` reads every slot. Slots 0 and 1 reach it only
/// through the first hand-off's last block, whose release carries what it acquired
/// (`transitive`), or not (`!transitive`: that block skips its fence before the second count).
unsafe fn chain(slots: *mut u32, counters: *mut u32, out: *mut u32, transitive: bool) {
    let b = thread::block_idx_x() as usize;
    if thread::thread_idx_x() != 0 {
        return;
    }
    // SAFETY: `slots` holds `CHAIN_BLOCKS + 1` words, `counters` 2, `out` 1; thread 0 of each
    // block alone.
    unsafe {
        let mut fenced = true;
        if b < 2 {
            mem::store(slots, b, b as u32 + 1);
            atomic::fence(Scope::Device);
            if atomic::add(counters, 0, 1, Scope::Device) == 0 {
                return;
            }
            // The last of blocks 0 and 1: acquire, add, and hand on.
            atomic::fence(Scope::Device);
            mem::store(slots, 2, mem::load(slots, 0) + mem::load(slots, 1));
            fenced = transitive;
        } else {
            mem::store(slots, b + 1, 10 * b as u32);
        }
        if fenced {
            atomic::fence(Scope::Device);
        }
        if atomic::add(counters, 1, 1, Scope::Device) as usize == CHAIN_BLOCKS - 2 {
            atomic::fence(Scope::Device);
            let sum = (0..=CHAIN_BLOCKS).map(|s| mem::load(slots, s)).sum();
            mem::store(out, 0, sum);
        }
    }
}

/// Runs [`chain`]: the result and the sum.
fn run_chain(transitive: bool) -> (Result<(), SimError>, u32) {
    let (mut slots, mut counters, mut out) = (vec![0u32; CHAIN_BLOCKS + 1], vec![0u32; 2], vec![0u32; 1]);
    let config = LaunchConfig {
        grid: Dim3::new(CHAIN_BLOCKS as u32, 1, 1),
        block: Dim3::new(32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("chain", config);
    let (ps, pc, po) = (
        launch.output("slots", &mut slots),
        launch.output("counters", &mut counters),
        launch.output("out", &mut out),
    );
    // SAFETY: the buffers are sized as `chain` needs.
    let result = unsafe { launch.run(|| chain(ps, pc, po, transitive)) };
    (result, out[0])
}

#[test]
fn a_release_carries_what_its_thread_acquired() {
    let want: u32 = 1 + 2 + 3 + (2..CHAIN_BLOCKS as u32).map(|b| 10 * b).sum::<u32>();
    for _ in 0..50 {
        let (result, sum) = run_chain(true);
        result.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sum, want);
    }
    // Without the fence before its second count the first hand-off's last block publishes on
    // `second` neither its store to slot 2 nor what it acquired: reported whenever another block
    // ends last (where it ends last itself it reads what it knows, which is no race).
    let reported = (0..50).filter(|_| run_chain(false).0.is_err()).count();
    assert!(
        reported > 0,
        "the missing fence was never reported in 50 launches"
    );
}
