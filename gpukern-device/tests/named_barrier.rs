//! Named barriers ([`barrier`]) in the simulator.
//!
//! 1. Two warpgroups, each reusing a staging row of its own round after round between two
//!    named barriers of its own, while a fifth warp returns at once: right sums, no race; each
//!    barrier planted away is reported as a race on the staging row.
//! 2. A hand-over by `arrive` (one warpgroup writes, arrives; the other waits, reads), and two in
//!    a chain to a warp that took part in neither's writes: ordered; a write after the arrival is
//!    a race.
//! 3. Misuse, each reported under `Rule::NamedBarrier`: id 0 and 16, a count that is no multiple
//!    of 32 or exceeds the block, two counts at one barrier, a completion by half warps, a thread
//!    counting itself in twice, and a barrier that never completes (a hang on a GPU).

use gpukern_device::sim::{Dim3, Launch, LaunchConfig, Rule, SimError, Violation};
use gpukern_device::{barrier, mem, shared, thread, warp};

/// Threads of a warpgroup.
const GROUP: u32 = 128;
/// Rounds of [`staging`].
const ROUNDS: u32 = 3;

/// Launches `body` on one block of `threads` threads with `words` shared words, `out` holding a
/// word per thread.
fn launch(threads: u32, words: u32, body: impl Fn(*mut u32) + Sync) -> (Result<(), SimError>, Vec<u32>) {
    let mut out = vec![0u32; threads as usize];
    let config = LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes: 4 * words,
    };
    let mut launch = Launch::new("named", config);
    let po = launch.output("out", &mut out);
    // SAFETY: the bodies below touch `out` at their thread's index and the shared words asked for.
    let result = unsafe { launch.run(|| body(po)) };
    (result, out)
}

/// Which barrier [`staging`] leaves out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Staging {
    Right,
    /// The barrier between the writes and the reads.
    NoFirst,
    /// The barrier between the reads and the next round's writes.
    NoSecond,
}

/// Threads `0..256` are two warpgroups; warpgroup `g` owns shared row `g` (128 words). Each
/// round, thread `l` of a warpgroup writes `1000 r + l` to its word, the warpgroup waits at named
/// barrier `1 + g`, reads its neighbour's word `(l + 1) % 128`, and waits again before the next
/// round's writes. Threads `256..288` return at once (a producer warp with nothing to do).
fn staging(out: *mut u32, variant: Staging) {
    let tid = thread::thread_idx_x();
    if tid >= 2 * GROUP {
        return;
    }
    let (g, l) = (tid / GROUP, tid % GROUP);
    let row = shared::dynamic::<u32>().wrapping_add((g * GROUP) as usize);
    let mut sum = 0;
    for r in 0..ROUNDS {
        // SAFETY: row `g` of 128 words; named barrier `1 + g` among its warpgroup's 128 threads.
        unsafe {
            mem::store(row, l as usize, 1000 * r + l);
            if variant != Staging::NoFirst {
                barrier::sync(1 + g, GROUP);
            }
            sum += mem::load(row, ((l + 1) % GROUP) as usize);
            if variant != Staging::NoSecond {
                barrier::sync(1 + g, GROUP);
            }
        }
    }
    // SAFETY: a word per thread.
    unsafe { mem::store(out, tid as usize, sum) };
}

#[test]
fn a_warpgroup_reuses_its_staging_row_between_its_own_barriers() {
    let (result, out) = launch(2 * GROUP + 32, 2 * GROUP, |o| staging(o, Staging::Right));
    result.unwrap_or_else(|e| panic!("{e}"));
    for (t, &sum) in out.iter().enumerate().take(2 * GROUP as usize) {
        let neighbour = (t as u32 % GROUP + 1) % GROUP;
        let want: u32 = (0..ROUNDS).map(|r| 1000 * r + neighbour).sum();
        assert_eq!(sum, want, "thread {t}");
    }
}

#[test]
fn a_staging_row_without_one_of_its_barriers_is_a_race() {
    for variant in [Staging::NoFirst, Staging::NoSecond] {
        let (result, _) = launch(2 * GROUP + 32, 2 * GROUP, |o| staging(o, variant));
        let error = result.expect_err("the simulator must report the missing barrier");
        // Without the first barrier the first round reads a neighbour's word before its write.
        assert!(
            matches!(error.violation, Violation::SharedRace { .. })
                || variant == Staging::NoFirst
                    && matches!(error.violation, Violation::UninitializedSharedRead { .. }),
            "{variant:?}: {error}"
        );
        assert!(error.thread.x < 2 * GROUP, "{variant:?}: {error}");
    }
}

/// Named barrier 1 hands warpgroup 0's writes of row 0 to warpgroup 1 (`arrive` / `sync`, 256
/// threads), and named barrier 2 hands what warpgroup 1 knows to warp 8 (`arrive` / `sync`,
/// 160 threads): warp 8 reads row 0, which only warpgroup 0 wrote. `late_write`: warpgroup 0
/// writes its words again after its arrival.
fn chain(out: *mut u32, late_write: bool) {
    let tid = thread::thread_idx_x();
    let row = shared::dynamic::<u32>();
    // SAFETY (every access and barrier below): row 0 holds 128 words; barrier 1 counts the two
    // warpgroups (256), barrier 2 warpgroup 1 and warp 8 (160).
    unsafe {
        match tid / GROUP {
            0 => {
                mem::store(row, tid as usize, 7 * tid);
                barrier::arrive(1, 2 * GROUP);
                if late_write {
                    mem::store(row, tid as usize, 7 * tid);
                }
            }
            1 => {
                barrier::sync(1, 2 * GROUP);
                let v = mem::load(row, (tid - GROUP) as usize);
                barrier::arrive(2, GROUP + 32);
                mem::store(out, tid as usize, v);
            }
            _ => {
                barrier::sync(2, GROUP + 32);
                let l = tid - 2 * GROUP;
                mem::store(out, tid as usize, mem::load(row, (4 * l) as usize));
            }
        }
    }
}

#[test]
fn arrivals_hand_writes_over_and_the_hand_over_chains() {
    let (result, out) = launch(2 * GROUP + 32, GROUP, |o| chain(o, false));
    result.unwrap_or_else(|e| panic!("{e}"));
    for l in 0..GROUP {
        assert_eq!(out[(GROUP + l) as usize], 7 * l, "warpgroup 1, thread {l}");
    }
    for l in 0..32 {
        assert_eq!(out[(2 * GROUP + l) as usize], 28 * l, "warp 8, lane {l}");
    }
}

#[test]
fn a_write_after_the_arrival_is_a_race() {
    let (result, _) = launch(2 * GROUP + 32, GROUP, |o| chain(o, true));
    let error = result.expect_err("the write after the arrival must be reported");
    assert!(matches!(error.violation, Violation::SharedRace { .. }), "{error}");
}

/// The thread whose arrival completes a named barrier goes on at once, here to a warp shuffle
/// that its warp's other lanes, still waiting at the barrier, reach after it: the shuffle
/// completes once they do (each warpgroup sums its lanes' values across each warp).
#[test]
fn a_shuffle_right_after_a_named_barrier() {
    let (result, sums) = launch(2 * GROUP, 2 * GROUP, |out| {
        let tid = thread::thread_idx_x();
        let g = tid / GROUP;
        let row = shared::dynamic::<u32>();
        // SAFETY: a word per thread; barrier `1 + g` counts warpgroup `g`; `out` a word per thread.
        unsafe {
            mem::store(row, tid as usize, tid);
            barrier::sync(1 + g, GROUP);
            let neighbour = mem::load(row, (g * GROUP + (tid + 1) % GROUP) as usize);
            let sum = warp::reduce(neighbour, |a, b| a + b);
            mem::store(out, tid as usize, sum);
        }
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    for (t, &sum) in sums.iter().enumerate() {
        let (g, w) = (t as u32 / GROUP, t as u32 % GROUP / 32);
        let want: u32 = (0..32).map(|l| g * GROUP + (32 * w + l + 1) % GROUP).sum();
        assert_eq!(sum, want, "thread {t}");
    }
}

/// A block of 48 threads: its second warp has 16 lanes, which the hardware counts as 32, so a
/// barrier for 64 threads completes once all 48 are in.
#[test]
fn a_short_last_warp_counts_as_a_whole_one() {
    let (result, sums) = launch(48, 48, |out| {
        let tid = thread::thread_idx_x();
        let row = shared::dynamic::<u32>();
        // SAFETY: a word per thread; barrier 1 counts the block's two warps (64).
        unsafe {
            mem::store(row, tid as usize, tid);
            barrier::sync(1, 64);
            mem::store(out, tid as usize, mem::load(row, ((tid + 1) % 48) as usize));
        }
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sums, (0..48).map(|t| (t + 1) % 48).collect::<Vec<u32>>());
}

/// Two warpgroups taking turns as a ping-pong does: warpgroup 1 hands warpgroup 0 the first turn
/// (`arrive` at barrier 1) and goes straight on to wait for its own (barrier 2), so its lanes are
/// past their next arrival before barrier 1 completes. In its turn a warpgroup's first thread
/// adds one to a shared word, the warpgroup meets at a barrier of its own (3 or 4, 128 threads)
/// and reads it, and hands the turn over: every access is ordered, through the chain of turns.
#[test]
fn turns_taken_in_a_ping_pong() {
    let (result, sums) = launch(2 * GROUP, 1, |out| {
        let tid = thread::thread_idx_x();
        let g = tid / GROUP;
        let word = shared::dynamic::<u32>();
        let (mine, other) = (1 + g, 2 - g);
        // SAFETY: one shared word; barriers 1 and 2 count both warpgroups (256), 3 and 4 one
        // each (128); `out` a word per thread.
        unsafe {
            if g == 1 {
                barrier::arrive(other, 2 * GROUP);
            }
            let mut seen = 0;
            for round in 0..3 {
                barrier::sync(mine, 2 * GROUP);
                if tid.is_multiple_of(GROUP) {
                    let before = if round == 0 && g == 0 {
                        0
                    } else {
                        mem::load(word, 0)
                    };
                    mem::store(word, 0, before + 1);
                }
                barrier::sync(3 + g, GROUP);
                seen = mem::load(word, 0);
                barrier::arrive(other, 2 * GROUP);
            }
            mem::store(out, tid as usize, seen);
        }
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    for (t, &seen) in sums.iter().enumerate() {
        let want = if t < GROUP as usize { 5 } else { 6 };
        assert_eq!(seen, want, "thread {t}");
    }
}

/// The `named-barrier` report of `result`, its message.
fn misuse(result: Result<(), SimError>, what: &str) -> String {
    let error = result.expect_err(what);
    match error.violation {
        Violation::Protocol {
            rule: Rule::NamedBarrier,
            message,
        } => message,
        other => panic!("{what}: want a named-barrier report, got {other:?}"),
    }
}

#[test]
fn ids_and_counts_out_of_range_are_reported() {
    for (id, threads, says) in [
        (0, 64, "ids are 1 to 15"),
        (16, 64, "ids are 1 to 15"),
        (1, 48, "multiple of 32"),
        (1, 96, "multiple of 32"),
    ] {
        let (result, _) = launch(64, 1, |_| {
            // SAFETY: the simulator reports the misuse before any wait.
            unsafe { barrier::sync(id, threads) }
        });
        let message = misuse(result, &format!("barrier::sync({id}, {threads})"));
        assert!(message.contains(says), "{id}, {threads}: {message}");
    }
}

#[test]
fn two_counts_at_one_barrier_are_reported() {
    let (result, _) = launch(128, 1, |_| {
        let count = if thread::thread_idx_x() < 64 { 128 } else { 96 };
        // SAFETY: reported.
        unsafe { barrier::sync(3, count) }
    });
    let message = misuse(result, "two counts");
    assert!(
        message.contains("for 96 threads") && message.contains("for 128"),
        "{message}"
    );
}

#[test]
fn a_completion_by_half_warps_is_reported() {
    let (result, _) = launch(128, 1, |_| {
        if warp::lane_id() < 16 {
            // SAFETY: reported.
            unsafe { barrier::sync(2, 64) }
        }
    });
    let message = misuse(result, "half warps");
    assert!(message.contains("16 of warp 0's 32 lanes"), "{message}");
}

#[test]
fn counting_in_twice_before_a_completion_is_reported() {
    let (result, _) = launch(64, 1, |_| {
        // SAFETY: reported.
        unsafe {
            barrier::arrive(4, 64);
            if thread::thread_idx_x() < 32 {
                barrier::arrive(4, 64);
            }
        }
    });
    let message = misuse(result, "twice");
    assert!(message.contains("again"), "{message}");
}

#[test]
fn a_barrier_that_never_completes_is_reported_not_hung() {
    // Warpgroup 0 waits for 256 threads; the other 128 return.
    let (result, _) = launch(256, 1, |_| {
        if thread::thread_idx_x() < GROUP {
            // SAFETY: reported.
            unsafe { barrier::sync(5, 2 * GROUP) }
        }
    });
    let message = misuse(result, "never completes");
    assert!(
        message.contains("deadlock") && message.contains("128 of its 256 threads"),
        "{message}"
    );
    // A block barrier that some threads reach while others wait at a named one.
    let (result, _) = launch(256, 1, |_| {
        if thread::thread_idx_x() < GROUP {
            // SAFETY: reported.
            unsafe { barrier::sync(5, 2 * GROUP) }
        } else {
            thread::sync_threads();
        }
    });
    let error = result.expect_err("a named and a block barrier");
    assert!(
        matches!(&error.violation, Violation::DifferentBarriers { here, there, .. }
            if here.contains("named barrier 5") || there.contains("named barrier 5")),
        "{error}"
    );
}
