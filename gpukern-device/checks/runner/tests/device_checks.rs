//! Every kernel of `gpukern-device-checks` (the kernels that exercise each helper of
//! `gpukern-device`) launched through its generated launcher,
//! `gpukern_device_checks::<module>::<kernel>::launch(&module, config, ...)`, against exact
//! expected results:
//!
//! * `sim::...`: on the simulator (`Gpu::simulator().load(&CHECKS)`); always run, small sizes.
//! * `cuda::...`: on CUDA device 0, with the sizes the kernels' authors asked for (a million
//!   elements, 2^24 atomics on 16 bins). Ignored (reported as such, never as passed) where there
//!   is no driver or no device, unless `GPUKERN_REQUIRE_GPU=1`.
//!
//! The driver writes device `printf` output to fd 1 at synchronisation, past Rust's output
//! capture, and a failed device assertion leaves the CUDA context unusable: those trials run in
//! a child process, this same binary started again with [`CHILD_ENV`] naming what to do
//! ([`children`]). After a whole family ran, every `.entry` of the checks PTX must have been
//! launched by it (in this process or a child), or the run fails naming the kernels missed.

#[path = "../../../../tests/common/mod.rs"]
mod common;

#[path = "device_checks/atomics.rs"]
mod atomics;
#[path = "device_checks/children.rs"]
mod children;
#[path = "device_checks/collectives.rs"]
mod collectives;
#[path = "device_checks/elements.rs"]
mod elements;
#[path = "device_checks/launches.rs"]
mod launches;
#[path = "device_checks/math.rs"]
mod math;
#[path = "device_checks/tiles.rs"]
mod tiles;
#[path = "device_checks/vectors.rs"]
mod vectors;

use std::fmt::Debug;
use std::sync::Mutex;

use gpukern::{Gpu, LaunchConfig, Module};
use libtest_mimic::{Arguments, Failed, Trial};
use rand::rngs::StdRng;

use common::REQUIRE_GPU_ENV;

/// The checks crate's PTX, as a user's kernel crate would embed it.
pub static CHECKS: gpukern::PtxSet = gpukern::include_ptx!(gpukern_device_checks);

/// The variable that makes this binary a child process doing one job ([`children::run_child`]).
pub const CHILD_ENV: &str = "GPUKERN_DEVICE_CHECKS_CHILD";

/// Threads per block of the 1-D launches.
pub const BLOCK: u32 = 256;

/// What a trial body returns: `?` works on gpukern's errors, and a message is a `String`.
pub type Check = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Problem sizes of one backend's trials.
pub struct Sizes {
    /// `(n, nbins)` of the histograms.
    pub histogram: &'static [(usize, u32)],
    /// Elements of the contention histogram: every one an atomic on one of 16 bins.
    pub contention: usize,
    /// Elements of the sums and maxima.
    pub reduce: usize,
    /// Threads of the kernels with a CAS loop on one address (`cas_counter`, the `*_ops` kernels
    /// at device scope): under full contention each CAS round lets one thread through, so the
    /// work grows with the square of this.
    pub cas: usize,
    /// Threads of the `*_ops` kernels at system scope.
    pub system: usize,
    /// Lengths of the element kernels' inputs.
    pub elements: &'static [usize],
    /// Inputs per domain of each math function (`math` trials).
    pub math: usize,
}

/// The simulator's sizes: small, every code path (ragged blocks, bins above the block).
const SIM_SIZES: Sizes = Sizes {
    histogram: &[(37, 7), (3001, 300), (10_007, 16)],
    contention: 1 << 14,
    reduce: 3001,
    cas: 1000,
    system: 777,
    elements: &[1, 31, 97, 1000, 4099],
    math: 1 << 10,
};

/// The GPU's sizes, as the kernels' authors listed them.
const CUDA_SIZES: Sizes = Sizes {
    histogram: &[(37, 7), (1_000_003, 16), (1_000_003, 300)],
    contention: 1 << 24,
    reduce: 100_003,
    cas: 20_011,
    system: 4097,
    elements: &[1, 31, 97, 1000, 4099, (1 << 20) + 3],
    math: 1 << 20,
};

/// One backend's module for the trials, or why there is none.
pub struct Target {
    /// Trial name prefix: `sim` or `cuda`.
    pub prefix: &'static str,
    /// The checks module loaded on the device, or the message a trial fails with.
    pub module: Result<Module, String>,
    /// Whether every trial of this backend is marked ignored (no GPU here).
    pub ignored: bool,
    /// Its problem sizes.
    pub sizes: &'static Sizes,
}

/// A trial named `<prefix>::<name>` running `body` on the target's module with a generator
/// seeded from the run's seed and the trial's name; a failure names the seed.
pub fn trial<F>(target: &Target, name: &str, body: F) -> Trial
where
    F: FnOnce(&Module, &'static Sizes, &mut StdRng) -> Check + Send + 'static,
{
    let full = format!("{}::{name}", target.prefix);
    let module = target.module.clone();
    let sizes = target.sizes;
    let rng_name = full.clone();
    Trial::test(full, move || {
        let module = module.map_err(Failed::from)?;
        let mut rng = common::rng_for(&rng_name);
        body(&module, sizes, &mut rng).map_err(|e| Failed::from(format!("{e} ({})", common::seed_hint())))
    })
    .with_ignored_flag(target.ignored)
}

/// A 1-D launch of `threads` threads in blocks of [`BLOCK`], with one more block whose threads
/// all fall past the end (the kernels' tail guards must hold them back).
pub fn linear(threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid: (threads.div_ceil(BLOCK as usize) as u32 + 1, 1, 1),
        block: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Fails unless `got == want`.
pub fn expect_eq<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}").into())
    }
}

/// Fails unless `got` has `want`'s length and `same` holds element by element; names the
/// first element that differs.
pub fn expect_all<T: Debug, U: Debug>(
    what: &str,
    got: &[T],
    want: &[U],
    same: impl Fn(&T, &U) -> bool,
) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, want {}", got.len(), want.len()).into());
    }
    match got.iter().zip(want).position(|(g, w)| !same(g, w)) {
        None => Ok(()),
        Some(i) => Err(format!("{what}: element {i} is {:?}, want {:?}", got[i], want[i]).into()),
    }
}

/// Kernels the child processes launched, by backend prefix, with their counts: the parent's
/// coverage check adds them to its own.
pub static CHILD_LAUNCHES: Mutex<Vec<(&'static str, String, u64)>> = Mutex::new(Vec::new());

fn main() {
    if let Ok(job) = std::env::var(CHILD_ENV) {
        std::process::exit(children::run_child(&job));
    }
    let args = Arguments::from_args();
    let seed = common::seed();
    let require_gpu = common::require_gpu();

    let sim = Target {
        prefix: "sim",
        module: Gpu::simulator().load(&CHECKS).map_err(|e| e.to_string()),
        ignored: false,
        sizes: &SIM_SIZES,
    };
    let mut skipped = None;
    let opened = Gpu::new(0);
    let ignored = common::cuda_trials_ignored(&opened, require_gpu);
    let module = match opened {
        Ok(gpu) => gpu
            .load(&CHECKS)
            .map_err(|e| format!("loading the checks PTX on {}: {e}", gpu.describe())),
        Err(e) if ignored => {
            skipped = Some(format!(
                "CUDA tests skipped (ignored): {e} [set {REQUIRE_GPU_ENV}=1 to make this a failure]"
            ));
            Err(format!("no CUDA device: {e}"))
        }
        Err(e) if require_gpu => Err(format!("{REQUIRE_GPU_ENV}=1, but Gpu::new(0) failed: {e}")),
        Err(e) => Err(format!("Gpu::new(0) failed: {e}")),
    };
    let cuda = Target {
        prefix: "cuda",
        module,
        ignored,
        sizes: &CUDA_SIZES,
    };
    if !args.list {
        println!(
            "gpukern device checks: seed {seed} (set {}={seed} to reproduce)",
            common::SEED_ENV
        );
        if let Some(note) = skipped {
            println!("{note}");
        }
    }

    let mut trials = Vec::new();
    for target in [&sim, &cuda] {
        trials.extend(atomics::trials(target));
        trials.extend(elements::trials(target));
        trials.extend(launches::trials(target));
        trials.extend(math::trials(target));
        trials.extend(collectives::trials(target));
        trials.extend(tiles::trials(target));
        trials.extend(vectors::trials(target));
        trials.extend(children::trials(target));
    }
    trials.extend(children::planted_trials());
    trials.push(Trial::test("coverage::planted_gaps_are_reported", || {
        coverage_planted().map_err(Failed::from)
    }));
    let cuda_ran = cuda.module.is_ok() && !cuda.ignored;
    let conclusion = libtest_mimic::run(&args, trials);

    let mut gaps = Vec::new();
    if whole_family_ran(&args, "sim::") {
        gaps.extend(launch_gaps("sim", gpukern::sim_launch_counts(CHECKS.krate)));
    }
    if cuda_ran && whole_family_ran(&args, "cuda::") {
        gaps.extend(launch_gaps("cuda", gpukern::cuda_launch_counts(CHECKS.krate)));
    }
    if !gaps.is_empty() {
        eprintln!(
            "\nkernel coverage (device checks): FAILED, {} gap(s):",
            gaps.len()
        );
        for gap in &gaps {
            eprintln!("    {gap}");
        }
        std::process::exit(101);
    }
    conclusion.exit();
}

/// Whether this run ran every trial of the family `prefix` (as in `tests/kernels/coverage.rs`): no
/// filter or one the prefix starts with, not `--exact`, not only the ignored trials, and no skip
/// pattern that drops the whole family.
fn whole_family_ran(args: &Arguments, prefix: &str) -> bool {
    let filter_admits = match &args.filter {
        None => true,
        Some(f) => !args.exact && prefix.starts_with(f.as_str()),
    };
    !args.list && !args.ignored && filter_admits && !args.skip.iter().any(|s| prefix.contains(s.as_str()))
}

/// `counts` of this process plus the children's launches on `backend`, as (entry point, count)
/// with the entry point's name borrowed from the PTX.
fn with_child_launches(backend: &str, mut counts: Vec<(&'static str, u64)>) -> Vec<(&'static str, u64)> {
    let children = CHILD_LAUNCHES.lock().unwrap_or_else(|p| p.into_inner());
    let names: Vec<&'static str> = CHECKS
        .modules
        .iter()
        .flat_map(|m| gpukern::module::entry_names(m.ptx))
        .collect();
    for (prefix, name, count) in children.iter() {
        if *prefix != backend {
            continue;
        }
        match counts.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 += count,
            None => match names.iter().find(|n| *n == name) {
                Some(&entry) => counts.push((entry, *count)),
                // A name no entry point has: reported as a launch of no entry point.
                None => counts.push((Box::leak(name.clone().into_boxed_str()), *count)),
            },
        }
    }
    counts
}

/// The coverage gaps of one backend's launches (here and in the children) against every
/// `.entry` of the checks PTX; prints the tally when there are none.
fn launch_gaps(backend: &str, counts: Vec<(&'static str, u64)>) -> Vec<String> {
    let counts = with_child_launches(backend, counts);
    let mut gaps = Vec::new();
    let mut entries = 0;
    for module in CHECKS.modules {
        let names: Vec<String> = gpukern::module::entry_names(module.ptx)
            .iter()
            .map(|s| s.to_string())
            .collect();
        entries = names.len();
        gaps.extend(
            common::coverage_gaps(&counts, &names)
                .into_iter()
                .map(|g| format!("{backend} ({}): {g}", module.arch)),
        );
    }
    if gaps.is_empty() {
        let launches: u64 = counts.iter().map(|(_, n)| n).sum();
        println!(
            "kernel coverage ({backend}, device checks): all {entries} entry points launched ({launches} launches)"
        );
    }
    gaps
}

/// The coverage check on the checks PTX, shown able to fail: a kernel left out, and a child's
/// launch of a name no entry point has, are gaps; every entry point launched once is none.
fn coverage_planted() -> Result<(), String> {
    let module = CHECKS.modules.first().ok_or("the checks PTX has no module")?;
    let names = gpukern::module::entry_names(module.ptx);
    let entries: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    if entries.len() < 20 {
        return Err(format!(
            "only {} entry points in the checks PTX: {entries:?}",
            entries.len()
        ));
    }
    let full: Vec<(&'static str, u64)> = names.iter().map(|&n| (n, 1)).collect();
    if !common::coverage_gaps(&full, &entries).is_empty() {
        return Err("every entry point launched once still reports gaps".into());
    }
    let missing: Vec<(&'static str, u64)> =
        full.iter().copied().filter(|(n, _)| *n != "print_once").collect();
    let gaps = common::coverage_gaps(&missing, &entries);
    if gaps.len() != 1 || !gaps[0].contains("print_once") {
        return Err(format!("print_once never launched gives {gaps:?}"));
    }
    CHILD_LAUNCHES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(("planted", "not_an_entry".into(), 1));
    let gaps = common::coverage_gaps(&with_child_launches("planted", missing), &entries);
    if gaps.len() != 2 || !gaps.iter().any(|g| g.contains("not_an_entry")) {
        return Err(format!("a child's launch of no entry point gives {gaps:?}"));
    }
    Ok(())
}
