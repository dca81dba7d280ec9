//! The simulator trials that run only with `GPUKERN_SLOW_TRIALS=1` ([`crate::common::trial::slow`]),
//! named in one list so that the test command's time on a machine of two cores is decided in one
//! place. Each is the costlier twin of trials that stay: every kernel it launches is launched by
//! a trial the test command runs (the launch-coverage check fails otherwise), and the behaviour
//! it checks is checked there on another shape, element type or head dim.
//! `scripts/gpu-check.sh` sets the variable, so the GPU machine runs them all.
//!
//! The seconds are each trial's CPU time alone (one test thread, `GPUKERN_SIM_THREADS=1`, the
//! test profile), from `bench/experiments/build-times/sim-trial-times-44675c1.md` and, for the
//! entries added at `9caa5bd`, `sim-trial-times-9caa5bd.md`.

use libtest_mimic::Trial;

use crate::common::trial::{plain_trial, slow};

/// `(trial name, what runs in its place)`; a `*` in a name stands for any run of characters
/// (a trial set of one family at one shape).
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
    // 0.58-0.69 s each, 22 trials (sim-trial-times-9caa5bd.md): the FP8 products' per-tensor
    // scales at the shape of two persistent blocks.
    (
        "sim::matmul_fp8::*::tensor-tensor::130x272x136",
        "the per-row scales at this shape and the per-tensor ones at 1x16x1 and 33x100x40, every plan",
    ),
    (
        "sim::matmul_fp8_e5m2::*::tensor-tensor::130x272x136",
        "the per-row scales at this shape and the per-tensor ones at 1x16x1 and 33x100x40, every plan",
    ),
    // 0.47 s (sim-trial-times-9caa5bd.md)
    (
        "sim::matmul_fp8::promoted-128x192::bf16::tensor-tensor::70x136x392",
        "the per-row scales at this shape",
    ),
    // 2.08 s, 1.16 s and 2.32 s (sim-trial-times-9caa5bd.md): each mask's second instance.
    (
        "sim::attention::mask::window37::bf16_d128",
        "the window at bf16 d64 and at d256; the bf16 d128 General instance by softcap_causal",
    ),
    (
        "sim::attention::mask::alibi::f16_d64",
        "ALiBi at f16 d128; the f16 d64 General instance by softcap",
    ),
    (
        "sim::attention::mask::softcap::f16_d128",
        "the soft cap at f16 d64 and softcap_causal at bf16; the f16 d128 General instance by alibi",
    ),
    // 3.59 s (sim-trial-times-9caa5bd.md)
    (
        "sim::norm::overflow::bf16",
        "the same rows in f32 through every kernel; the bf16 instances by the other norm trials",
    ),
];

/// Whether `name` matches `pattern`, whose `*`s stand for any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// `trials` with those of [`SLOW_SIM_TRIALS`] marked slow; an error naming any listed name that
/// matches no trial (a renamed trial would otherwise run again unnoticed).
pub fn apply(trials: Vec<Trial>) -> Result<Vec<Trial>, String> {
    let mut found = vec![false; SLOW_SIM_TRIALS.len()];
    let trials = trials
        .into_iter()
        .map(|t| {
            match SLOW_SIM_TRIALS
                .iter()
                .position(|(name, _)| matches(name, t.name()))
            {
                Some(i) => {
                    found[i] = true;
                    slow(t)
                }
                None => t,
            }
        })
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

/// `sim::slow_trials::patterns_match`: the names' `*` as [`SLOW_SIM_TRIALS`] says.
pub fn self_trials() -> Vec<Trial> {
    vec![plain_trial("slow_trials", "patterns_match", patterns_match)]
}

fn patterns_match() {
    let name = "sim::matmul_fp8::fast-128x128::bf16::tensor-tensor::130x272x136";
    for (pattern, want) in [
        (name, true),
        ("sim::matmul_fp8::*::tensor-tensor::130x272x136", true),
        ("sim::matmul_fp8::*::row-row::130x272x136", false),
        ("sim::matmul_fp8::*::tensor-tensor::130x272x13", false),
        ("sim::matmul_fp8_e5m2::*::tensor-tensor::130x272x136", false),
        ("sim::*::bf16::*", true),
        ("*136", true),
        ("*", true),
        ("sim::matmul_fp8::fast-128x128", false),
        (
            "sim::matmul_fp8::fast-128x128::bf16::tensor-tensor::130x272x136x",
            false,
        ),
    ] {
        assert_eq!(matches(pattern, name), want, "{pattern}");
    }
    // A pattern's last part overlapping its middle one is not counted twice.
    assert!(!matches("a*bc*cd", "abcd"));
    assert!(matches("a*bc*cd", "abccd"));
}
