//! Coverage by construction: after a run of a whole family (`sim::` or `cuda::`), every kernel of
//! the registry (`#[kernel]` registers each entry point of the kernel crate, every instance of a
//! generic kernel) that the backend could load must have been launched by it (`main` checks the
//! launch counts after the run); and the check itself shown able to fail
//! (`coverage::planted_gaps_are_reported`).
//!
//! The registry is the list of kernels to expect: `tests/ptx.rs` checks that it and the PTX
//! modules' entry points are the same set, and the modules only say which kernels need the
//! arch-specific module.

use libtest_mimic::{Arguments, Trial};

use crate::common;

/// Whether this run ran every trial of the family `prefix` (`"sim::"`, `"cuda::"`) that its skip
/// patterns leave: no filter or a filter that the prefix starts with, not `--exact`, not only
/// the ignored trials, and no skip pattern that drops the whole family. A skip of some shapes
/// (as `scripts/sanitize.sh` does) keeps the check on: it must not remove a kernel's only trial.
pub(crate) fn whole_family_ran(args: &Arguments, prefix: &str) -> bool {
    let filter_admits = match &args.filter {
        None => true,
        Some(f) => !args.exact && prefix.starts_with(f.as_str()),
    };
    !args.list && !args.ignored && filter_admits && !args.skip.iter().any(|s| prefix.contains(s.as_str()))
}

/// The coverage gaps of one backend's launch counts against the kernels of the registry, each
/// prefixed with the backend; prints the tally when there are none.
///
/// `arch_specific_loaded`: whether the backend ran the arch-specific (`sm_90a`) module's own
/// kernels (the simulator always; CUDA on a compute capability 9.0 GPU). Where it did not, the
/// kernels that only that module has (no plain module's entry point) are not expected.
pub(crate) fn launch_gaps(
    backend: &str,
    counts: &[(&'static str, u64)],
    arch_specific_loaded: bool,
) -> Vec<String> {
    let plain: Vec<String> = gpukern::ptx::modules()
        .iter()
        .filter(|m| !m.is_arch_specific())
        .flat_map(|m| common::ptx_entry_names(m.ptx))
        .collect();
    let loaded = |name: &str| arch_specific_loaded || plain.iter().any(|e| e == name);
    let expected: Vec<String> = registered_kernels()
        .into_iter()
        .filter(|name| loaded(name))
        .collect();
    let gaps: Vec<String> = common::coverage_gaps(counts, &expected)
        .into_iter()
        .map(|g| format!("{backend}: {g}"))
        .collect();
    if gaps.is_empty() {
        let launches: u64 = counts.iter().map(|(_, n)| n).sum();
        println!(
            "kernel coverage ({backend}): all {} kernels launched ({launches} launches)",
            counts.len()
        );
    }
    gaps
}

/// The names of the registered kernels of gpukern's kernel crate.
fn registered_kernels() -> Vec<String> {
    gpukern::gpukern_device::launch::registered_in(gpukern::ptx::KERNELS.krate)
        .iter()
        .map(|k| k.name.to_string())
        .collect()
}

/// The coverage check itself, shown able to fail: a planted table with a kernel never launched,
/// one with a kernel the launch table lacks, and one with a launch of no kernel, are reported; a
/// full one is not.
pub(crate) fn self_trials() -> Vec<Trial> {
    vec![Trial::test("coverage::planted_gaps_are_reported", || {
        let registered = gpukern::gpukern_device::launch::registered_in(gpukern::ptx::KERNELS.krate);
        if registered.len() < 100 {
            return Err(format!(
                "only {} kernels registered: is the kernel crate linked?",
                registered.len()
            )
            .into());
        }
        let entries = registered_kernels();
        let full: Vec<(&'static str, u64)> = registered.iter().map(|k| (k.name, 1)).collect();
        if !common::coverage_gaps(&full, &entries).is_empty() {
            return Err("a table with every kernel launched once reports gaps".into());
        }
        let mut unlaunched = full.clone();
        unlaunched[5].1 = 0;
        let gaps = common::coverage_gaps(&unlaunched, &entries);
        if gaps.len() != 1 || !gaps[0].contains(full[5].0) {
            return Err(format!("a kernel never launched ({}) gives {gaps:?}", full[5].0).into());
        }
        let mut extra_entry = entries.clone();
        extra_entry.push("softmax_planted".to_string());
        let gaps = common::coverage_gaps(&full, &extra_entry);
        if gaps.len() != 1 || !gaps[0].contains("softmax_planted") {
            return Err(format!("a kernel no launch reached gives {gaps:?}").into());
        }
        let mut extra_launch = full.clone();
        extra_launch.push(("planted_kernel", 3));
        let gaps = common::coverage_gaps(&extra_launch, &entries);
        if gaps.len() != 1 || !gaps[0].contains("planted_kernel") {
            return Err(format!("a launch of no kernel gives {gaps:?}").into());
        }
        // The harness's parser sees each module's real entry points, as gpukern's does (a newer
        // architecture's module may have more).
        for module in gpukern::ptx::modules() {
            let parsed = common::ptx_entry_names(module.ptx);
            let expected = gpukern::ptx::entry_names(module.ptx);
            if parsed.len() != expected.len() || expected.iter().any(|e| !parsed.iter().any(|p| p == e)) {
                return Err(format!(
                    "{} module: {} entry points parsed, {} expected",
                    module.arch,
                    parsed.len(),
                    expected.len()
                )
                .into());
            }
        }
        Ok(())
    })]
}
