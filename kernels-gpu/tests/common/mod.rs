//! Helpers shared by the simulator's test binaries: launch shapes, reproducible inputs, checks
//! against an f64 computation, asserting a planted bug's exact report, and naming a call site the
//! way the simulator does; the documented launch of each kernel family ([`matmul`], [`softmax`]).

// Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

pub mod matmul;
pub mod softmax;

use kernels_gpu::add;
use kernels_gpu::gpu::vector::F4;
use kernels_gpu::sim::{Dim3, LaunchConfig, SimError, Violation};

/// The report expected from `kernel` at block `(x, y)`, thread `(x, y)`.
pub fn report(kernel: &str, block: (u32, u32), thread: (u32, u32), violation: Violation) -> SimError {
    SimError {
        kernel: kernel.to_string(),
        block: Dim3::new(block.0, block.1, 0),
        thread: Dim3::new(thread.0, thread.1, 0),
        violation,
    }
}

// `assert_report` and `site_in` are gpukern-device's own test helpers, shared rather than copied.
#[path = "../../../gpukern-device/tests/common/mod.rs"]
mod sim_reports;
#[allow(unused_imports)] // each test binary uses part of this module
pub use sim_reports::{assert_report, site_in};

/// A 2-D launch (`z` = 1).
pub fn config(grid: (u32, u32), block: (u32, u32), shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(grid.0, grid.1, 1),
        block: Dim3::new(block.0, block.1, 1),
        shared_mem_bytes,
    }
}

/// A 1-D launch of `add`/`increment_by_one` over `n` elements.
pub fn elementwise_config(n: usize) -> LaunchConfig {
    config(((n as u32).div_ceil(add::BLOCK), 1), (add::BLOCK, 1), 0)
}

/// `n` pseudo-random floats in [-1, 1): a 64-bit LCG (Knuth's MMIX constants), so every run sees
/// the same inputs; the top 24 bits of the state are exact in an f32.
pub fn random(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Asserts `|got[i] - want[i]| <= rel * scale[i]` for every element.
#[track_caller]
pub fn assert_close(what: &str, got: &[f32], want: &[f64], scale: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= rel * s,
            "{what}: element {i}: got {g}, want {w} (error {err:e}, allowed {:e})",
            rel * s
        );
    }
}

/// The floats of 16-byte aligned storage, in order.
pub fn floats(v: &[F4]) -> Vec<f32> {
    v.iter().flat_map(|x| x.0).collect()
}
