//! The grid barrier in the simulator ([`gpukern_device::grid::sync`], [`Launch::cooperative`]):
//!
//! 1. The exchange: each block writes a slot, passes the grid barrier, reads its neighbour's
//!    slot; twice in one launch, the slots rewritten between (so that the middle barrier is what
//!    keeps a block's second write off a slot its neighbour still reads). Several grid and block
//!    shapes; the barrier also orders shared memory as a block barrier does.
//! 2. Each rule, proved on a kernel with one planted bug next to the fixed one: a barrier removed
//!    (a global race across blocks), a launch that is not cooperative, a thread that returns
//!    while the grid waits, a block waiting at a block barrier while the others wait at the grid
//!    barrier, a barrier word that was not zeroed, and grids the simulator does not take.

use gpukern_device::sim::{Dim3, Launch, LaunchConfig, SimError, Violation, MAX_COOPERATIVE_THREADS};
use gpukern_device::{grid, mem, shared, thread};

/// Which barriers of [`exchange`] a run keeps.
#[derive(Clone, Copy)]
struct Keep {
    first: bool,
    middle: bool,
}

const ALL: Keep = Keep {
    first: true,
    middle: true,
};

/// Round 1: thread 0 of block `b` stores `b + 1` to `slots[b]`; grid barrier; it reads
/// `slots[(b + 1) % n]` into `out[b]`. Grid barrier. Round 2: it stores `100 + b` to `slots[b]`;
/// grid barrier; it reads `slots[(b + n - 1) % n]` into `out[n + b]`.
unsafe fn exchange(slots: *mut u32, out: *mut u32, bar: *mut u32, keep: Keep) {
    let (tx, ty, tz) = (
        thread::thread_idx_x(),
        thread::thread_idx_y(),
        thread::thread_idx_z(),
    );
    let lead = tx | ty | tz == 0;
    let (gx, gy) = (thread::grid_dim_x(), thread::grid_dim_y());
    let n = (gx * gy * thread::grid_dim_z()) as usize;
    let b = (thread::block_idx_x() + gx * (thread::block_idx_y() + gy * thread::block_idx_z())) as usize;
    // SAFETY: `slots` and `out` hold `n` and `2 n` words; `bar` one zeroed word.
    unsafe {
        if lead {
            mem::store(slots, b, b as u32 + 1);
        }
        if keep.first {
            grid::sync(bar);
        } else {
            thread::sync_threads();
        }
        if lead {
            mem::store(out, b, mem::load(slots, (b + 1) % n));
        }
        if keep.middle {
            grid::sync(bar);
        } else {
            thread::sync_threads();
        }
        if lead {
            mem::store(slots, b, 100 + b as u32);
        }
        grid::sync(bar);
        if lead {
            mem::store(out, n + b, mem::load(slots, (b + n - 1) % n));
        }
    }
}

/// Runs [`exchange`] on `grid` blocks of `block` threads; returns the result and `out`.
fn run_exchange(grid: Dim3, block: Dim3, cooperative: bool, keep: Keep) -> (Result<(), SimError>, Vec<u32>) {
    let n = grid.count() as usize;
    let mut slots = vec![0u32; n];
    let mut out = vec![0u32; 2 * n];
    let mut bar = vec![0u32; 1];
    let config = LaunchConfig {
        grid,
        block,
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("exchange", config);
    if cooperative {
        launch.cooperative();
    }
    let (ps, po, pb) = (
        launch.output("slots", &mut slots),
        launch.output("out", &mut out),
        launch.output("barrier", &mut bar),
    );
    // SAFETY: the buffers are sized as `exchange` needs.
    let result = unsafe { launch.run(|| exchange(ps, po, pb, keep)) };
    (result, out)
}

#[test]
fn blocks_exchange_slots_across_two_grid_barriers() {
    let shapes = [
        (Dim3::new(1, 1, 1), Dim3::new(32, 1, 1)),
        (Dim3::new(2, 1, 1), Dim3::new(64, 1, 1)),
        (Dim3::new(5, 1, 1), Dim3::new(96, 1, 1)),
        (Dim3::new(3, 2, 2), Dim3::new(8, 4, 1)),
        (Dim3::new(16, 1, 1), Dim3::new(256, 1, 1)),
    ];
    for (grid, block) in shapes {
        let (result, out) = run_exchange(grid, block, true, ALL);
        result.unwrap_or_else(|e| panic!("grid {grid}, block {block}: {e}"));
        let n = grid.count() as usize;
        for b in 0..n {
            assert_eq!(
                out[b],
                ((b + 1) % n) as u32 + 1,
                "grid {grid}, round 1, block {b}"
            );
            assert_eq!(
                out[n + b],
                100 + ((b + n - 1) % n) as u32,
                "grid {grid}, round 2, block {b}"
            );
        }
    }
}

/// The report's violation, after checking it names `kernel`.
fn violation(kernel: &str, result: Result<(), SimError>) -> Violation {
    let error = result.expect_err("the planted bug must be reported");
    assert_eq!(error.kernel, kernel);
    error.violation
}

#[test]
fn a_missing_grid_barrier_is_a_race_across_blocks() {
    for keep in [
        Keep {
            first: false,
            middle: true,
        },
        Keep {
            first: true,
            middle: false,
        },
    ] {
        let (result, _) = run_exchange(Dim3::new(4, 1, 1), Dim3::new(32, 1, 1), true, keep);
        let v = violation("exchange", result);
        assert!(
            matches!(&v, Violation::GlobalRace { buffer, .. } if buffer == "slots"),
            "{v:?}"
        );
    }
}

#[test]
fn a_launch_that_is_not_cooperative_may_not_sync_the_grid() {
    let (result, _) = run_exchange(Dim3::new(2, 1, 1), Dim3::new(32, 1, 1), false, ALL);
    let v = violation("exchange", result);
    assert!(
        matches!(&v, Violation::InvalidLaunch { reason } if reason.contains("not cooperative")),
        "{v:?}"
    );
}

#[test]
fn the_grid_barrier_orders_shared_memory_like_a_block_barrier() {
    /// Thread 0 writes a shared word, every thread passes the grid barrier, thread 1 reads it;
    /// with `planted`, a grid barrier of the other blocks only (this block's thread 1 reads after
    /// no barrier at all, which on the GPU hangs the grid: reported).
    unsafe fn shared_then_grid(out: *mut f32, bar: *mut u32) {
        let word = shared::dynamic::<f32>();
        let tid = thread::thread_idx_x();
        // SAFETY: one shared float, one float of `out` per block.
        unsafe {
            if tid == 0 {
                mem::store(word, 0, thread::block_idx_x() as f32);
            }
            grid::sync(bar);
            if tid == 1 {
                mem::store(out, thread::block_idx_x() as usize, mem::load(word, 0) + 0.5);
            }
        }
    }
    let mut out = vec![0.0f32; 3];
    let mut bar = vec![0u32; 1];
    let config = LaunchConfig {
        grid: Dim3::new(3, 1, 1),
        block: Dim3::new(64, 1, 1),
        shared_mem_bytes: 4,
    };
    let mut launch = Launch::new("shared_then_grid", config);
    launch.cooperative();
    let (po, pb) = (launch.output("out", &mut out), launch.output("barrier", &mut bar));
    // SAFETY: sized as the kernel needs.
    unsafe { launch.run(|| shared_then_grid(po, pb)) }.unwrap();
    assert_eq!(out, vec![0.5, 1.5, 2.5]);
}

/// Runs `kernel(bar)` cooperatively on `blocks` blocks of 32 threads, the word starting at `word`.
fn run_small(
    name: &'static str,
    blocks: u32,
    word: u32,
    kernel: unsafe fn(*mut u32),
) -> Result<(), SimError> {
    let mut bar = vec![word; 1];
    let config = LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new(name, config);
    launch.cooperative();
    let pb = launch.output("barrier", &mut bar);
    // SAFETY: one word.
    unsafe { launch.run(|| kernel(pb)) }
}

#[test]
fn a_thread_that_returns_while_the_grid_waits_is_reported() {
    /// Planted bug: thread 5 of block 1 returns before the barrier.
    unsafe fn early_return(bar: *mut u32) {
        if thread::block_idx_x() == 1 && thread::thread_idx_x() == 5 {
            return;
        }
        // SAFETY: the missing thread is the point.
        unsafe { grid::sync(bar) }
    }
    let error = run_small("early_return", 3, 0, early_return).expect_err("reported");
    assert_eq!(
        (error.block, error.thread),
        (Dim3::new(1, 0, 0), Dim3::new(5, 0, 0))
    );
    assert!(
        matches!(&error.violation, Violation::BarrierNotReached { barrier, waiting: 95 } if barrier.contains("grid")),
        "{:?}",
        error.violation
    );
}

#[test]
fn a_thread_at_a_block_barrier_while_the_grid_waits_is_reported() {
    /// Planted bug: half of block 2 waits at a block barrier where everyone else syncs the grid.
    unsafe fn elsewhere(bar: *mut u32) {
        if thread::block_idx_x() == 2 && thread::thread_idx_x() < 16 {
            thread::sync_threads();
        } else {
            // SAFETY: the divergence is the point.
            unsafe { grid::sync(bar) }
        }
    }
    let error = run_small("elsewhere", 3, 0, elsewhere).expect_err("reported");
    assert_eq!(error.block, Dim3::new(2, 0, 0));
    assert!(
        matches!(&error.violation, Violation::DifferentBarriers { there, .. } if there.contains("grid barrier")),
        "{:?}",
        error.violation
    );
}

#[test]
fn a_barrier_word_not_zeroed_is_reported() {
    unsafe fn twice(bar: *mut u32) {
        // SAFETY: every thread syncs twice.
        unsafe {
            grid::sync(bar);
            grid::sync(bar);
        }
    }
    run_small("twice", 4, 0, twice).unwrap();
    // The top bit alone is a word some earlier barrier left: still valid.
    run_small("twice", 4, 1 << 31, twice).unwrap();
    let v = violation("twice", run_small("twice", 4, 3, twice));
    assert!(
        matches!(&v, Violation::Panic { message } if message.contains("low 31 bits")),
        "{v:?}"
    );
}

/// One word serves launch after launch with no zeroing in between: each barrier adds `2^31`, so
/// the low bits come back to 0 and the top bit flips once per barrier, whatever the grid; a word
/// whose low bits a launch left wrong (a planted one-off arrival) fails the next launch.
#[test]
fn a_word_is_left_ready_for_the_next_launch() {
    unsafe fn once(bar: *mut u32) {
        // SAFETY: every thread syncs once.
        unsafe { grid::sync(bar) }
    }
    let run = |blocks: u32, bar: &mut Vec<u32>| {
        let config = LaunchConfig {
            grid: Dim3::new(blocks, 1, 1),
            block: Dim3::new(32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = Launch::new("once", config);
        launch.cooperative();
        let pb = launch.output("barrier", bar);
        // SAFETY: one word.
        unsafe { launch.run(|| once(pb)) }
    };
    let mut bar = vec![0u32];
    for (blocks, want) in [(4, 1u32 << 31), (7, 0), (1, 1 << 31), (3, 0)] {
        run(blocks, &mut bar).unwrap();
        assert_eq!(bar[0], want, "after a launch of {blocks} blocks");
    }
    // What a launch that arrived one block short (or one extra) leaves: the next launch fails.
    bar[0] = (1 << 31) + 1;
    let v = violation("once", run(4, &mut bar));
    assert!(
        matches!(&v, Violation::Panic { message } if message.contains("low 31 bits")),
        "{v:?}"
    );
}

#[test]
fn grids_the_simulator_does_not_take_are_refused() {
    let blocks = (MAX_COOPERATIVE_THREADS / 32 + 1) as u32;
    let (result, _) = run_exchange(Dim3::new(blocks, 1, 1), Dim3::new(32, 1, 1), true, ALL);
    let v = violation("exchange", result);
    assert!(
        matches!(&v, Violation::InvalidLaunch { reason } if reason.contains("cooperative grid")),
        "{v:?}"
    );

    let mut bar = vec![0u32; 1];
    let config = LaunchConfig {
        grid: Dim3::new(4, 1, 1),
        block: Dim3::new(32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("clustered", config);
    launch.cooperative();
    launch.cluster(Dim3::new(2, 1, 1));
    let pb = launch.output("barrier", &mut bar);
    // SAFETY: one word; the launch is refused before it runs.
    let v = violation("clustered", unsafe { launch.run(|| grid::sync(pb)) });
    assert!(
        matches!(&v, Violation::InvalidLaunch { reason } if reason.contains("clusters")),
        "{v:?}"
    );
}
