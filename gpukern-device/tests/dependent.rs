//! Programmatic dependent launches in the simulator ([`gpukern_device::dependent`],
//! [`Launch::dependent`]): a kernel that waits first runs and computes in a dependent launch; the
//! same kernel with its first read (or write) moved before the wait is reported there, and runs
//! in a plain launch, where the wait is a no-op.

use gpukern_device::sim::{Dim3, Launch, LaunchConfig, SimError, Violation};
use gpukern_device::{dependent, mem, thread};

/// Where a thread of [`copy_twice`] calls [`dependent::wait`].
#[derive(Clone, Copy, PartialEq)]
enum Wait {
    /// Before anything.
    First,
    /// After its read of `x`.
    AfterRead,
    /// After its write of `out` (read after the wait).
    AfterWrite,
}

/// Thread `i` stores `2 x[i]` to `out[i]`, waiting where `wait` says.
unsafe fn copy_twice(x: *const f32, out: *mut f32, n: usize, wait: Wait) {
    let i = (thread::block_idx_x() * thread::block_dim_x() + thread::thread_idx_x()) as usize;
    if i >= n {
        return;
    }
    if wait == Wait::First {
        dependent::wait();
    }
    // SAFETY: `i < n`, the buffers' length.
    unsafe {
        if wait == Wait::AfterWrite {
            mem::store(out, i, 0.0);
            dependent::wait();
        }
        let v = mem::load(x, i);
        if wait == Wait::AfterRead {
            dependent::wait();
        }
        mem::store(out, i, 2.0 * v);
    }
}

/// Runs [`copy_twice`] over 100 elements in blocks of 64, dependent or not.
fn run(wait: Wait, dependent: bool) -> (Result<(), SimError>, Vec<f32>) {
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let mut out = vec![-1.0f32; 100];
    let config = LaunchConfig {
        grid: Dim3::new(2, 1, 1),
        block: Dim3::new(64, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("copy_twice", config);
    if dependent {
        launch.dependent();
    }
    let (px, po) = (launch.input("x", &x), launch.output("out", &mut out));
    // SAFETY: both buffers hold 100 elements.
    let result = unsafe { launch.run(|| copy_twice(px, po, 100, wait)) };
    (result, out)
}

fn expected() -> Vec<f32> {
    (0..100).map(|i| 2.0 * i as f32).collect()
}

#[test]
fn a_kernel_that_waits_first_runs_dependent() {
    let (result, out) = run(Wait::First, true);
    assert_eq!(result, Ok(()));
    assert_eq!(out, expected());
}

#[test]
fn a_read_before_the_wait_is_reported_in_a_dependent_launch_only() {
    let (result, _) = run(Wait::AfterRead, true);
    let err = result.expect_err("the read before the wait is reported");
    assert!(
        matches!(&err.violation, Violation::Panic { message }
            if message.contains("read of `x` before dependent::wait")),
        "{err:?}"
    );
    let (plain, out) = run(Wait::AfterRead, false);
    assert_eq!(plain, Ok(()));
    assert_eq!(out, expected());
}

#[test]
fn a_write_before_the_wait_is_reported() {
    let (result, _) = run(Wait::AfterWrite, true);
    let err = result.expect_err("the write before the wait is reported");
    assert!(
        matches!(&err.violation, Violation::Panic { message }
            if message.contains("write of `out` before dependent::wait")),
        "{err:?}"
    );
}
