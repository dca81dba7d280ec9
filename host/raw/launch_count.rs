//! How many times each kernel was launched in this process, per backend: one relaxed atomic
//! add per launch, indexed by the kernel's position in [`KERNEL_NAMES`]. The test harness reads
//! the counts after its CUDA trials to prove that every entry point of the PTX ran (and so ran
//! under `compute-sanitizer` when the harness does), instead of trusting a list of shapes.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ptx::KERNEL_NAMES;

/// Launches on CUDA devices, by kernel.
static CUDA: [AtomicU64; KERNEL_NAMES.len()] = [const { AtomicU64::new(0) }; KERNEL_NAMES.len()];
/// Launches in the simulator, by kernel.
static SIMULATOR: [AtomicU64; KERNEL_NAMES.len()] = [const { AtomicU64::new(0) }; KERNEL_NAMES.len()];

/// Counts one launch of the kernel `name` on a CUDA device. A name outside [`KERNEL_NAMES`] is
/// not counted: the harness then reports that kernel as never launched, and `tests/ptx.rs`
/// checks that the table matches the module's entry points.
pub(crate) fn cuda(name: &str) {
    count(&CUDA, name);
}

/// Counts one launch of the kernel `name` in the simulator (as [`cuda`]).
pub(crate) fn simulator(name: &str) {
    count(&SIMULATOR, name);
}

fn count(table: &[AtomicU64; KERNEL_NAMES.len()], name: &str) {
    // A linear search of a few dozen short names: nothing next to a kernel launch.
    if let Some(i) = KERNEL_NAMES.iter().position(|&k| k == name) {
        table[i].fetch_add(1, Ordering::Relaxed);
    }
}

fn snapshot(table: &[AtomicU64; KERNEL_NAMES.len()]) -> Vec<(&'static str, u64)> {
    KERNEL_NAMES
        .iter()
        .zip(table)
        .map(|(&name, n)| (name, n.load(Ordering::Relaxed)))
        .collect()
}

/// Every kernel of [`KERNEL_NAMES`] with the number of times it was launched on a CUDA device
/// in this process. For the test harness's coverage check; not part of the API.
#[doc(hidden)]
pub fn cuda_launch_counts() -> Vec<(&'static str, u64)> {
    snapshot(&CUDA)
}

/// [`cuda_launch_counts`] for the simulator.
#[doc(hidden)]
pub fn sim_launch_counts() -> Vec<(&'static str, u64)> {
    snapshot(&SIMULATOR)
}
