//! The simulator trials that run only with `GPUKERN_SLOW_TRIALS=1` ([`crate::common::trial::slow`]),
//! named in one list so that the test command's time on a machine of two cores is decided in one
//! place. Each is the costlier twin of trials that stay: every kernel it launches is launched by
//! a trial the test command runs (the launch-coverage check fails otherwise), and the behaviour
//! it checks is checked there on another shape, element type or head dim.
//! `scripts/gpu-check.sh` sets the variable, so the GPU machine runs them all.
//!
//! The seconds are each trial's CPU time alone (one test thread, `GPUKERN_SIM_THREADS=1`, the
//! test profile), from `bench/experiments/build-times/sim-trial-times-44675c1.md`.

use libtest_mimic::Trial;

use crate::common::trial::slow;

/// `(trial name, what runs in its place)`.
pub const SLOW_SIM_TRIALS: &[(&str, &str)] = &[
    // 12.04 s (sim-trial-times-44675c1.md)
    (
        "sim::attention::wgmma_persistent::bf16::walk",
        "the persistent grid on the cases of fewer tiles than multiprocessors",
    ),
    // The held-`Q` instance's walk (added with it, after the record's runs).
    (
        "sim::attention::wgmma_persistent::f16::walk_d128",
        "the held-Q ping-pong on one block per tile (1x257x129x2h1kv_d128_full), the walk at head dim 64",
    ),
    // 23 s of one core on the 2-core machine (one ptxas run per sampled entry module, in turn):
    // the test command's time went past ten minutes. No kernel launch; the split modules'
    // shape is checked by the trial that stays, and every CUDA trial loads them.
    (
        "sim::entry_modules::helpers_and_a_sample_assemble",
        "every_entry_is_whole (each entry's module holds it and declares what it calls); the CUDA trials load the modules",
    ),
    // Three consumers' walk (added with them).
    (
        "sim::attention::auto_three::f16::walk",
        "three consumers on one block per tile (1x200x130x2h1kv_d64_full), the two-consumer walk at head dim 64",
    ),
    // Three rounds of the three consumers' walk (its two `Q` buffers' second phase).
    (
        "sim::attention::auto_three::f16::walk_three_rounds",
        "three consumers on one block per tile (1x200x130x2h1kv_d64_full), the walk of two rounds among the slow trials, the CUDA walks of several rounds",
    ),
    // 1.98 s, 2.11 s and 2.15 s (sim-trial-times-44675c1.md)
    (
        "sim::attention::wgmma::f16::2x130x259x2h2kv_d128_causal",
        "the ragged causal blocks at head dims 64 and 256, head dim 128 by the mask trials",
    ),
    (
        "sim::attention::wgmma_pingpong::f16::2x130x259x2h2kv_d128_causal",
        "the ragged causal blocks at head dims 64 and 256, head dim 128 by the mask trials",
    ),
    (
        "sim::attention::wgmma_persistent::f16::2x130x259x2h2kv_d128_causal",
        "the ragged causal blocks at head dims 64 and 256, head dim 128 by the mask trials",
    ),
    // Every rung of the backward, the one-kernel rung among them, on several key blocks and
    // query tiles (added with that rung, after the record's runs).
    (
        "sim::attention_backward::bf16::1x70x260x2h1kv_d128_causal",
        "the smaller cases of every rung, and the one-kernel rung's cases of several key blocks",
    ),
    (
        "sim::attention_backward::f16::2x65x140x2h1kv_d64_full",
        "the smaller cases of every rung, and the one-kernel rung's cases of several key blocks",
    ),
    // 3.60 s (sim-trial-times-44675c1.md)
    (
        "sim::attention::mask::document::bf16_d128",
        "the document mask at bf16 d64; the bf16 d128 General instance by window37 and softcap_causal",
    ),
    // 1.73 s (sim-trial-times-44675c1.md)
    (
        "sim::attention::varlen::causal::f16_d128",
        "varlen without a mask and with a window; causal by the fixed-length trials",
    ),
    // 3.05 s and 2.31 s (sim-trial-times-44675c1.md)
    (
        "sim::matmul_decode::3x392x130",
        "3x128x232 (the same m) and the other shapes, every plan",
    ),
    (
        "sim::matmul_decode::33x72x260",
        "64x96x20 (the same kernels) and the other shapes, every plan",
    ),
    // 3.12 s (sim-trial-times-44675c1.md)
    (
        "sim::matmul_tf32_into::200x300x72",
        "129x131x37 and 128x64x256, every tiling",
    ),
    // 1.66 s and 1.67 s (sim-trial-times-44675c1.md)
    (
        "sim::matmul_wgmma_ws::bf16::130x392x264",
        "130x203x261 and 130x200x264 in both types",
    ),
    (
        "sim::matmul_wgmma_ws::f16::130x392x264",
        "130x203x261 and 130x200x264 in both types",
    ),
    // 1.23 s (sim-trial-times-44675c1.md)
    (
        "sim::matmul_wgmma_ws_64x128::f16::65x584x264",
        "the same shape in bf16 and the f16 instance's smaller shapes",
    ),
];

/// `trials` with those of [`SLOW_SIM_TRIALS`] marked slow; an error naming any listed trial that
/// no longer exists (a renamed trial would otherwise run again unnoticed).
pub fn apply(trials: Vec<Trial>) -> Result<Vec<Trial>, String> {
    let mut found = vec![false; SLOW_SIM_TRIALS.len()];
    let trials = trials
        .into_iter()
        .map(
            |t| match SLOW_SIM_TRIALS.iter().position(|(name, _)| *name == t.name()) {
                Some(i) => {
                    found[i] = true;
                    slow(t)
                }
                None => t,
            },
        )
        .collect();
    let missing: Vec<&str> = SLOW_SIM_TRIALS
        .iter()
        .zip(&found)
        .filter(|(_, f)| !**f)
        .map(|((name, _), _)| *name)
        .collect();
    match missing.is_empty() {
        true => Ok(trials),
        false => Err(format!(
            "tests/kernels/slow_trials.rs lists trials that do not exist: {}",
            missing.join(", ")
        )),
    }
}
