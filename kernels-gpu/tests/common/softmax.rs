//! The documented launch of the tutorial softmax kernel, shared by the softmax tests and the
//! simulator's whole-launch tests.

use kernels_gpu::sim::{Launch, LaunchConfig, SimError};
use kernels_gpu::softmax;

use super::config;

/// The documented launch of [`softmax::softmax_block_reduce`]: one block per row.
pub fn softmax_config(rows: usize) -> LaunchConfig {
    config((rows as u32, 1), (softmax::BLOCK, 1), softmax::SHARED_BYTES)
}

/// Row-wise softmax of `x` (`rows x cols`) with inverse temperature `t` in the simulator.
pub fn run_softmax(
    cfg: LaunchConfig,
    x: &[f32],
    rows: usize,
    cols: usize,
    t: f32,
) -> Result<Vec<f32>, SimError> {
    let mut y = vec![0.0f32; rows * cols];
    let mut launch = Launch::new("softmax_block_reduce", cfg);
    let (px, py) = (launch.input("x", x), launch.output("y", &mut y));
    // SAFETY: `x` and `y` hold `rows * cols` floats and are registered on the launch.
    unsafe { launch.run(|| softmax::softmax_block_reduce(px, py, rows, cols, t)) }?;
    Ok(y)
}
