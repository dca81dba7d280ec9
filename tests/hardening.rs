//! Hardening: property tests of every public operation against the CPU reference, softmax's
//! edge rules, edge shapes, limits, memory exhaustion and concurrency.
//!
//! Each check runs on the simulator (`sim::...`, always) and on CUDA device 0 (`cuda::...`,
//! reported as ignored where there is no GPU, failed instead with `GPUKERN_REQUIRE_GPU=1`).
//! `global::...` checks go through `Gpu::global()`, the default the free functions use.
//! Random inputs come from a seed printed at the start (`GPUKERN_TEST_SEED` reproduces it).
//!
//! One binary (a custom harness: the CUDA trials are ignored at run time, and the `global::...`
//! trials share `Gpu::global()`), its checks in modules by concern under `tests/hardening/`:
//! `props` (property tests against the CPU reference), `softmax_edges`, `sizes` (limits and edge
//! shapes), `global` (views and concurrency through the default device), `cuda` (what needs a
//! real device). This file keeps what they share and the trial list.

mod common;

// The crate root is `tests/hardening.rs`, so its modules in `tests/hardening/` need their paths.
#[path = "hardening/cuda.rs"]
mod cuda;
#[path = "hardening/global.rs"]
mod global;
#[path = "hardening/props.rs"]
mod props;
#[path = "hardening/sizes.rs"]
mod sizes;
#[path = "hardening/softmax_edges.rs"]
mod softmax_edges;

use gpukern::{Error, Gpu};
use libtest_mimic::{Arguments, Failed, Trial};

/// Matrix sides for the simulator (kept small: it runs every thread of every block on the CPU).
const SIM_SIDES: &[usize] = &[0, 1, 2, 3, 7, 13, 16, 17, 31, 32, 33, 47];
/// Matrix sides on the GPU (the f64 CPU reference bounds them: 1025^3 takes about a second).
const GPU_SIDES: &[usize] = &[0, 1, 2, 7, 31, 32, 33, 127, 128, 129, 255, 257, 511, 1000, 1025];
/// f32 matmul against an f64 reference: the error norm of k-term f32 sums stays near 1e-7.
const MATMUL_REL_TOL: f64 = 1e-5;
/// Softmax per element: `ex2.approx` (2^-22) plus the rounding of `t * (x - m)`, which grows with
/// the exponent's size (|d| * 6e-8, up to ~1e-5 for the smallest terms that still matter).
const SOFTMAX_REL_TOL: f32 = 1e-4;
/// Below this a softmax output counts as zero for the relative check.
const SOFTMAX_ABS_TOL: f32 = 1e-7;

/// The backend of a trial.
#[derive(Clone, Copy)]
enum Backend {
    Sim,
    Cuda,
}

impl Backend {
    fn gpu(self) -> Result<Gpu, Failed> {
        match self {
            Backend::Sim => Ok(Gpu::simulator()),
            Backend::Cuda => Gpu::new(0).map_err(|e| Failed::from(format!("CUDA device 0: {e}"))),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Cuda => "cuda",
        }
    }
    fn sides(self) -> &'static [usize] {
        match self {
            Backend::Sim => SIM_SIDES,
            Backend::Cuda => GPU_SIDES,
        }
    }
    fn cases(self) -> u32 {
        match self {
            Backend::Sim => 24,
            Backend::Cuda => 40,
        }
    }
}

/// Compares softmax output to the reference element by element; NaN must match NaN.
fn softmax_close(out: &[f32], reference: &[f32]) -> Result<(), String> {
    for (i, (&o, &r)) in out.iter().zip(reference).enumerate() {
        let ok = if r.is_nan() {
            o.is_nan()
        } else {
            (o - r).abs() <= SOFTMAX_REL_TOL * r.abs() + SOFTMAX_ABS_TOL
        };
        if !ok {
            return Err(format!("element {i}: got {o}, reference {r}"));
        }
    }
    if out.len() != reference.len() {
        return Err(format!("length {} vs reference {}", out.len(), reference.len()));
    }
    Ok(())
}

/// A gpukern error as a trial failure.
fn fail(e: Error) -> Failed {
    Failed::from(e.to_string())
}

/// A check run on one backend.
type Check = fn(Backend, u64) -> Result<(), Failed>;
/// A check with a fixed backend.
type Single = fn(u64) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let seed = std::env::var("GPUKERN_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("hardening: seed {seed} (GPUKERN_TEST_SEED={seed} reproduces this run)");
    let require_gpu = common::require_gpu();
    let opened = Gpu::new(0);
    let skip_cuda = common::cuda_trials_ignored(&opened, require_gpu);
    if let Err(e) = &opened {
        if skip_cuda {
            eprintln!("hardening: CUDA checks skipped (reported as ignored): {e}");
        } else {
            eprintln!("hardening: Gpu::new(0) failed: {e}: the CUDA checks will fail");
        }
    }

    let checks: [(&str, Check); 6] = [
        ("prop_add", props::prop_add),
        ("prop_matmul", props::prop_matmul),
        ("prop_softmax", props::prop_softmax),
        ("softmax_edges", softmax_edges::softmax_edges),
        ("shape_edges", sizes::shape_edges),
        ("impossible_sizes", sizes::impossible_sizes),
    ];
    let mut trials = Vec::new();
    for backend in [Backend::Sim, Backend::Cuda] {
        for (name, f) in checks {
            let trial = Trial::test(format!("{}::{name}", backend.name()), move || f(backend, seed));
            trials.push(if matches!(backend, Backend::Cuda) {
                trial.with_ignored_flag(skip_cuda)
            } else {
                trial
            });
        }
    }
    let cuda_only: [(&str, Single); 2] = [
        ("out_of_memory", cuda::out_of_memory),
        ("past_2_pow_31_elements", cuda::past_2_pow_31),
    ];
    for (name, f) in cuda_only {
        trials.push(Trial::test(format!("cuda::{name}"), move || f(seed)).with_ignored_flag(skip_cuda));
    }
    let global: [(&str, Single); 2] = [("views", global::views), ("concurrency", global::concurrency)];
    for (name, f) in global {
        trials.push(Trial::test(format!("global::{name}"), move || f(seed)));
    }
    libtest_mimic::run(&args, trials).exit();
}
