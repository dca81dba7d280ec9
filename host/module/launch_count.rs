//! How many times each kernel was launched in this process, per backend: one relaxed atomic add
//! per launch, in the kernel's own description (`Kernel::launches`, a static the `#[kernel]`
//! macro emits), and the kernel noted in a list at its first launch. The test harness reads the
//! counts after its CUDA trials to prove that every entry point of the PTX ran (and so ran under
//! `compute-sanitizer` when the harness does), instead of trusting a list of shapes.

use std::sync::Mutex;

use gpukern_device::launch::Kernel;

/// Every kernel launched at least once, in order of first launch.
static LAUNCHED: Mutex<Vec<&'static Kernel>> = Mutex::new(Vec::new());

fn note_first(kernel: &'static Kernel) {
    let mut launched = LAUNCHED.lock().unwrap_or_else(|p| p.into_inner());
    if !launched.iter().any(|k| std::ptr::eq(*k, kernel)) {
        launched.push(kernel);
    }
}

/// Counts one launch of `kernel` on a CUDA device.
pub(crate) fn cuda(kernel: &'static Kernel) {
    if kernel.launches.count_cuda() == 0 {
        note_first(kernel);
    }
}

/// Counts one launch of `kernel` in the simulator.
pub(crate) fn simulator(kernel: &'static Kernel) {
    if kernel.launches.count_simulator() == 0 {
        note_first(kernel);
    }
}

fn counts(krate: &str, backend: fn(&Kernel) -> u64) -> Vec<(&'static str, u64)> {
    let launched = LAUNCHED.lock().unwrap_or_else(|p| p.into_inner());
    let mut counts: Vec<(&'static str, u64)> = launched
        .iter()
        .filter(|k| k.krate == krate)
        .map(|k| (k.name, backend(k)))
        .filter(|(_, n)| *n > 0)
        .collect();
    counts.sort_unstable();
    counts
}

/// The kernels of crate `krate` launched on a CUDA device in this process, with their launch
/// counts, by name. For the test harness's coverage check; not part of the API.
#[doc(hidden)]
pub fn cuda_launch_counts(krate: &str) -> Vec<(&'static str, u64)> {
    counts(krate, |k| k.launches.get().0)
}

/// [`cuda_launch_counts`] for the simulator.
#[doc(hidden)]
pub fn sim_launch_counts(krate: &str) -> Vec<(&'static str, u64)> {
    counts(krate, |k| k.launches.get().1)
}
