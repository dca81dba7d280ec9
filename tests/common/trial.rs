//! How the `kernels` harness names and runs a trial: per backend (`sim::`, `cuda::`), on the
//! global device (`global::`), or a plain test function that fails by panicking.

use libtest_mimic::{Failed, Trial};
use rand::rngs::StdRng;

use gpukern::Gpu;

use super::check::Check;

/// One backend's device for the trials, or why there is none.
pub struct Target {
    /// Trial name prefix: `sim` or `cuda`.
    pub prefix: &'static str,
    /// The device, or the message a trial fails with when there is none.
    pub gpu: Result<Gpu, String>,
    /// Whether every trial of this backend is marked ignored (no GPU here).
    pub ignored: bool,
}

/// A trial named `<prefix>::<name>` running `body` on the target's device with a generator
/// seeded from the run's seed and the trial's name; a failure names the seed.
pub fn trial<F>(target: &Target, name: &str, body: F) -> Trial
where
    F: FnOnce(&Gpu, &mut StdRng) -> Check + Send + 'static,
{
    let full = format!("{}::{name}", target.prefix);
    let gpu = target.gpu.clone();
    let rng_name = full.clone();
    Trial::test(full, move || {
        let gpu = gpu.map_err(Failed::from)?;
        let mut rng = super::rng_for(&rng_name);
        body(&gpu, &mut rng).map_err(|e| Failed::from(format!("{e} ({})", super::seed_hint())))
    })
    .with_ignored_flag(target.ignored)
}

/// The variable that runs the slow simulator trials (`GPUKERN_SLOW_TRIALS=1`;
/// `scripts/gpu-check.sh` sets it, and the GPU machine runs the simulator trials on many cores).
pub const SLOW_TRIALS_ENV: &str = "GPUKERN_SLOW_TRIALS";

/// Marks a simulator trial that takes many seconds (a schedule that needs more tiles than the
/// small trials have, a second rung on a large ragged case): reported as ignored unless
/// `GPUKERN_SLOW_TRIALS=1`, so that the test command stays short on a machine of two cores.
/// Only for trials whose kernels smaller trials launch too: the simulator's launch-coverage check
/// runs without them.
pub fn slow(trial: Trial) -> Trial {
    if std::env::var(SLOW_TRIALS_ENV).is_ok_and(|v| v == "1") {
        trial
    } else {
        trial.with_ignored_flag(true)
    }
}

/// A `global::<name>` trial: the free functions on `Gpu::global()`, always run.
pub fn global_trial<F>(name: &str, body: F) -> Trial
where
    F: FnOnce(&mut StdRng) -> Check + Send + 'static,
{
    let full = format!("global::{name}");
    let rng_name = full.clone();
    Trial::test(full, move || {
        let mut rng = super::rng_for(&rng_name);
        body(&mut rng).map_err(|e| Failed::from(format!("{e} ({})", super::seed_hint())))
    })
}

/// A trial named `sim::<family>::<name>` running a plain test function, which fails by panicking
/// (an `assert!`) as under libtest. These trials build their own simulator `Gpu` (or none: some
/// check a CPU-side piece of the kernels), so they run whether or not there is a GPU.
pub fn plain_trial(family: &str, name: &str, body: fn()) -> Trial {
    Trial::test(format!("sim::{family}::{name}"), move || {
        body();
        Ok(())
    })
}

/// `plain_trials!("family", [f, g, ...])`: a [`plain_trial`] per function, named after it.
#[allow(unused_macros)]
macro_rules! plain_trials {
    ($family:literal, [$($test:ident),* $(,)?]) => {
        vec![$($crate::common::trial::plain_trial($family, stringify!($test), $test)),*]
    };
}
#[allow(unused_imports)]
pub(crate) use plain_trials;
