//! Planted barrier bugs: a barrier some threads of the block never reach, and threads waiting
//! at two different barriers. The reports name each barrier by its `file:line:column` in this
//! file, found from the marker comment that ends its line.

use kernels_gpu::gpu::thread;
use kernels_gpu::sim::{Dim3, Launch, Violation};

use super::{within, T};
use crate::common::{assert_report, config, report, site_in};

/// `file:line:column` of the barrier on the line of this file that ends with `marker`, as the
/// simulator names it (the column of the `thread::sync_threads()` call).
fn barrier_at(marker: &str) -> String {
    site_in(
        include_str!("barriers.rs"),
        file!(),
        "thread::sync_threads()",
        marker,
    )
}

/// Threads below `k` wait at a barrier, the others return: the planted bug whenever
/// `k < blockDim.x`.
unsafe fn barrier_below(k: u32) {
    if thread::thread_idx_x() < k {
        thread::sync_threads(); // barrier: below k
    }
}

#[test]
fn barrier_not_reached_by_every_thread() {
    let expected = report(
        "barrier_below",
        (0, 0),
        (3, 0),
        Violation::BarrierNotReached {
            barrier: barrier_at("// barrier: below k"),
            waiting: 3,
        },
    );
    let run = |k: u32| {
        within(20, move || {
            let launch = Launch::new("barrier_below", config((1, 1), (T, 1), 0));
            // SAFETY: the kernel touches no memory.
            unsafe { launch.run(|| barrier_below(k)) }
        })
    };
    assert_report(run(3), expected);
    run(T).unwrap();
}

/// Even threads wait at one barrier, odd threads at another: the planted bug.
unsafe fn barrier_per_branch() {
    if thread::thread_idx_x().is_multiple_of(2) {
        thread::sync_threads(); // barrier: even
    } else {
        thread::sync_threads(); // barrier: odd
    }
}

#[test]
fn different_barriers_in_two_branches() {
    let expected = report(
        "barrier_per_branch",
        (0, 0),
        (0, 0),
        Violation::DifferentBarriers {
            here: barrier_at("// barrier: even"),
            there: barrier_at("// barrier: odd"),
            other: Dim3::new(1, 0, 0),
        },
    );
    let result = within(20, || {
        let launch = Launch::new("barrier_per_branch", config((1, 1), (T, 1), 0));
        // SAFETY: the kernel touches no memory.
        unsafe { launch.run(|| barrier_per_branch()) }
    });
    assert_report(result, expected);
}
