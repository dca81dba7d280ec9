//! The naive and tiled matmul kernels in the simulator, with the launches their doc comments give:
//! used by `matmul.rs` and by the planted-bug and whole-launch tests of `simulator.rs`.

use kernels_gpu::matmul;
use kernels_gpu::sim::{Launch, LaunchConfig, SimError};

use super::config;

/// A matmul kernel's signature: `(a, b, c, m, n, k)`.
pub type MatmulKernel = unsafe fn(*const f32, *const f32, *mut f32, usize, usize, usize);

/// The documented launch of [`matmul::matmul_naive`] for an `m x n` result.
pub fn naive_config(m: usize, n: usize) -> LaunchConfig {
    let side = matmul::NAIVE_BLOCK;
    let grid = ((n as u32).div_ceil(side), (m as u32).div_ceil(side));
    config(grid, (side, side), 0)
}

/// The documented launch of [`matmul::matmul_tiled`] for an `m x n` result.
pub fn tiled_config(m: usize, n: usize) -> LaunchConfig {
    let tile = matmul::TILE as u32;
    let grid = ((n as u32).div_ceil(tile), (m as u32).div_ceil(tile));
    config(grid, (tile, tile), matmul::TILED_SHARED_BYTES)
}

/// `C = A * B` (`m x k` times `k x n`) by `kernel` in the simulator.
pub fn run_matmul(
    name: &'static str,
    kernel: MatmulKernel,
    cfg: LaunchConfig,
    (a, b): (&[f32], &[f32]),
    (m, n, k): (usize, usize, usize),
) -> Result<Vec<f32>, SimError> {
    let mut c = vec![0.0f32; m * n];
    let mut launch = Launch::new(name, cfg);
    let (pa, pb, pc) = (
        launch.input("a", a),
        launch.input("b", b),
        launch.output("c", &mut c),
    );
    // SAFETY: `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` floats and are registered on the launch.
    unsafe { launch.run(|| kernel(pa, pb, pc, m, n, k)) }?;
    Ok(c)
}
