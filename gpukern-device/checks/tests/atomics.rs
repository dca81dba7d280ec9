//! The atomics in the simulator: each check kernel against a CPU reference on ragged sizes and
//! under contention (`atomics/against_cpu.rs`), then planted bugs (a plain read-modify-write
//! instead of an atomic, a plain access racing an atomic, a misaligned atomic, ...) and the exact
//! report each one gets (`atomics/planted.rs`). This file holds the helpers both use.
//!
//! One test binary with a module per concern: the tests are plain `#[test]`s that share no
//! process-wide state, so separate binaries would do too, but one links once and keeps the
//! helpers in one place; `cargo test --test atomics planted::` runs one concern.

#[path = "atomics/against_cpu.rs"]
mod against_cpu;
#[path = "atomics/planted.rs"]
mod planted;

use gpukern_device::sim::{Access, Dim3, Launch, LaunchConfig, SimError, Violation};
use gpukern_device_checks::atomics::{histogram, histogram_shared};

/// Threads per block in these tests.
const BLOCK: u32 = 128;

/// A 1-D launch of `blocks` blocks of `threads` threads.
fn config(blocks: u32, threads: u32, shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes,
    }
}

/// Blocks of [`BLOCK`] threads that cover `n` elements.
fn blocks_for(n: usize) -> u32 {
    n.div_ceil(BLOCK as usize).max(1) as u32
}

/// `n` pseudo-random words (a fixed LCG, so failures reproduce).
fn words(n: usize, seed: u32) -> Vec<u32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state >> 8
        })
        .collect()
}

/// The histogram of `x` into `nbins` bins (`v % nbins`), on the CPU.
fn cpu_histogram(x: &[u32], nbins: u32) -> Vec<u32> {
    let mut bins = vec![0; nbins as usize];
    for &v in x {
        bins[(v % nbins) as usize] += 1;
    }
    bins
}

/// The report expected from `kernel` at block `block`, thread `thread` (1-D).
fn report(kernel: &str, block: u32, thread: u32, violation: Violation) -> SimError {
    SimError {
        kernel: kernel.into(),
        block: Dim3::new(block, 0, 0),
        thread: Dim3::new(thread, 0, 0),
        violation,
    }
}

/// Asserts that a launch failed with exactly `expected`; prints the report's text.
#[track_caller]
fn assert_report(result: Result<(), SimError>, expected: SimError) {
    let err = result.expect_err("the simulator should have caught the planted bug");
    println!("{err}");
    assert_eq!(err, expected, "report text: {err}");
}

/// A global-memory race on `buffer[index]` with thread `other.1` of block `other.0`.
fn global_race(
    buffer: &str,
    index: usize,
    access: Access,
    other: (u32, u32),
    other_access: Access,
) -> Violation {
    Violation::GlobalRace {
        buffer: buffer.into(),
        index,
        access,
        other_block: Dim3::new(other.0, 0, 0),
        other: Dim3::new(other.1, 0, 0),
        other_access,
    }
}

/// Runs `histogram` (or `histogram_shared` when `in_shared`) over `x` into `nbins` bins.
fn run_histogram(x: &[u32], nbins: u32, in_shared: bool) -> Result<Vec<u32>, SimError> {
    let mut bins = vec![0u32; nbins as usize];
    let n = x.len();
    let shared = if in_shared { 4 * nbins } else { 0 };
    let name = if in_shared {
        "histogram_shared"
    } else {
        "histogram"
    };
    let mut launch = Launch::new(name, config(blocks_for(n), BLOCK, shared));
    let (px, pb) = (launch.input("x", x), launch.output("bins", &mut bins));
    // SAFETY: `x` holds `n` words, `bins` `nbins`, shared memory `4 * nbins` bytes.
    unsafe {
        launch.run(|| {
            if in_shared {
                histogram_shared(px, n, pb, nbins)
            } else {
                histogram(px, n, pb, nbins)
            }
        })
    }?;
    Ok(bins)
}
