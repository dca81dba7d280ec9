//! Every kernel and every public operation of gpukern against the CPU reference
//! ([`gpukern::cpu`]), as four kinds of trials:
//!
//! * `sim::...`: the methods of [`Gpu`] on the CPU simulator; always run, small shapes.
//! * `cuda::...`: the same on CUDA device 0, with large and ragged shapes. Ignored (reported as
//!   such, never as passed) where there is no driver or no device, unless `GPUKERN_REQUIRE_GPU=1`.
//! * `global::...`: the free functions (`gpukern::add`, ...) on [`Gpu::global`], with transposed
//!   and sliced views; always run, on whichever device `Gpu::global` picks.
//! * `sim::<family>::<name>`: plain test functions of one family, which fail by panicking as
//!   under libtest: kernels launched straight through the simulator, plan tables, CPU-side
//!   pieces of the kernels. They live in this harness, not in test files of their own, so that a
//!   family's CPU, simulator and CUDA trials sit together.
//!
//! One module per family (`kernels/add.rs`, `kernels/matmul.rs`, `kernels/softmax.rs`, with
//! submodules where a family is large), `kernels/device.rs` and `kernels/errors.rs` for what spans
//! every family, `kernels/sizes.rs` for the shapes, `kernels/coverage.rs` for the launch-coverage
//! check, `kernels/slow_trials.rs` for the simulator trials the test command leaves to
//! `GPUKERN_SLOW_TRIALS=1`; the comparisons and trial constructors are in `tests/common/`. One
//! binary, so that the coverage check sees every trial of a backend in one process.
//!
//! A custom harness (libtest-mimic) so that the CUDA trials can be ignored at run time. Inputs
//! are random in [-1, 1); the seed is printed at start and `GPUKERN_TEST_SEED` reproduces a run.

mod common;

// The crate root is `tests/kernels.rs`, so its modules in `tests/kernels/` need their paths.
#[path = "kernels/add.rs"]
mod add;
#[path = "kernels/api.rs"]
mod api;
#[path = "kernels/attention.rs"]
mod attention;
#[path = "kernels/attention_backward.rs"]
mod attention_backward;
#[path = "kernels/attention_backward_faults.rs"]
mod attention_backward_faults;
#[path = "kernels/attention_backward_masks.rs"]
mod attention_backward_masks;
#[path = "kernels/attention_faults.rs"]
mod attention_faults;
#[path = "kernels/attention_masks.rs"]
mod attention_masks;
#[path = "kernels/attention_varlen.rs"]
mod attention_varlen;
#[path = "kernels/coverage.rs"]
mod coverage;
#[path = "kernels/cross_entropy.rs"]
mod cross_entropy;
#[path = "kernels/decode_attention.rs"]
mod decode_attention;
#[path = "kernels/decode_step.rs"]
mod decode_step;
#[path = "kernels/device.rs"]
mod device;
#[path = "kernels/embedding.rs"]
mod embedding;
#[path = "kernels/entry_modules.rs"]
mod entry_modules;
#[path = "kernels/errors.rs"]
mod errors;
#[path = "kernels/glu.rs"]
mod glu;
#[path = "kernels/graph.rs"]
mod graph;
#[path = "kernels/grid.rs"]
mod grid;
#[path = "kernels/launch_shapes.rs"]
mod launch_shapes;
#[path = "kernels/matmul.rs"]
mod matmul;
#[path = "kernels/multi.rs"]
mod multi;
#[path = "kernels/norm.rs"]
mod norm;
#[path = "kernels/reduce.rs"]
mod reduce;
#[path = "kernels/residual_norm.rs"]
mod residual_norm;
#[path = "kernels/rotary.rs"]
mod rotary;
#[path = "kernels/sample.rs"]
mod sample;
#[path = "kernels/sizes.rs"]
mod sizes;
#[path = "kernels/slow_trials.rs"]
mod slow_trials;
#[path = "kernels/softmax.rs"]
mod softmax;
#[path = "kernels/transfer.rs"]
mod transfer;
#[path = "kernels/transpose.rs"]
mod transpose;
#[path = "kernels/views.rs"]
mod views;

use gpukern::Gpu;
use libtest_mimic::Arguments;

use common::REQUIRE_GPU_ENV;
use common::trial::Target;

fn main() {
    let args = Arguments::from_args();
    let seed = common::seed();
    let require_gpu = common::require_gpu();

    let sim = Target {
        prefix: "sim",
        gpu: Ok(Gpu::simulator()),
        ignored: false,
    };
    let mut skipped = None;
    let opened = Gpu::new(0);
    let ignored = common::cuda_trials_ignored(&opened, require_gpu);
    let cuda = match opened {
        Ok(gpu) => Target {
            prefix: "cuda",
            gpu: Ok(gpu),
            ignored: false,
        },
        Err(e) if ignored => {
            skipped = Some(format!(
                "CUDA tests skipped (ignored): {e} [set {REQUIRE_GPU_ENV}=1 to make this a failure]"
            ));
            Target {
                prefix: "cuda",
                gpu: Err(format!("no CUDA device: {e}")),
                ignored: true,
            }
        }
        Err(e) => Target {
            prefix: "cuda",
            gpu: Err(if require_gpu {
                format!("{REQUIRE_GPU_ENV}=1, but Gpu::new(0) failed: {e}")
            } else {
                format!("Gpu::new(0) failed: {e}")
            }),
            ignored: false,
        },
    };
    if !args.list {
        println!(
            "gpukern kernel tests: seed {seed} (set {}={seed} to reproduce)",
            common::SEED_ENV
        );
        if let Some(note) = skipped {
            println!("{note}");
        }
    }

    let mut trials = Vec::new();
    for family in [
        device::trials,
        errors::trials,
        add::trials,
        matmul::trials,
        softmax::trials,
        graph::trials,
        multi::trials,
        transfer::trials,
        reduce::trials,
        transpose::trials,
        norm::trials,
        residual_norm::trials,
        glu::trials,
        rotary::trials,
        embedding::trials,
        cross_entropy::trials,
        sample::trials,
        attention::trials,
        attention_backward::trials,
        attention_backward_masks::trials,
        attention_masks::trials,
        attention_varlen::trials,
        decode_attention::trials,
        decode_step::trials,
        grid::trials,
        views::trials,
        launch_shapes::trials,
    ] {
        trials.extend(family(&sim, &cuda));
    }
    trials.extend(coverage::self_trials());
    trials.extend(api::trials());
    trials.extend(entry_modules::trials());
    trials.extend(slow_trials::self_trials());
    let trials = match slow_trials::apply(trials) {
        Ok(trials) => trials,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(101);
        }
    };
    let cuda_ran = cuda.gpu.is_ok() && !cuda.ignored;
    let conclusion = libtest_mimic::run(&args, trials);

    // Coverage by construction: after a run of a whole family, every kernel of the registry
    // (every entry point of the PTX) must have been launched by it, or the run fails naming the
    // kernels no trial reached.
    let mut gaps = Vec::new();
    if coverage::whole_family_ran(&args, "sim::") {
        gaps.extend(coverage::launch_gaps(
            "sim",
            &gpukern::sim_launch_counts(gpukern::ptx::KERNELS.krate),
            true,
        ));
    }
    if cuda_ran && coverage::whole_family_ran(&args, "cuda::") {
        gaps.extend(coverage::launch_gaps(
            "cuda",
            &gpukern::cuda_launch_counts(gpukern::ptx::KERNELS.krate),
            cuda.gpu.as_ref().is_ok_and(|g| g.has_wgmma()),
        ));
    }
    if !gaps.is_empty() {
        eprintln!("\nkernel coverage: FAILED, {} gap(s):", gaps.len());
        for gap in &gaps {
            eprintln!("    {gap}");
        }
        std::process::exit(101);
    }
    conclusion.exit();
}
