//! The correct call of a generated launcher compiles, and runs in the simulator.

use gpukern::kernels::add::{BLOCK, add};
use gpukern::{Gpu, LaunchConfig};

/// Launches it in the simulator and checks the result.
pub fn run() -> gpukern::Result<()> {
    let gpu = Gpu::simulator();
    let a = gpu.upload(&[1.0f32, 2.0, 3.0])?;
    let b = gpu.upload(&[10.0f32, 20.0, 30.0])?;
    let mut c = gpu.zeros(3)?;
    let config = LaunchConfig {
        grid: (1, 1, 1),
        block: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: three floats in each buffer, `n = 3`.
    unsafe { add::launch(&gpu.library(), config, &a, &b, &mut c, 3) }?;
    assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
    Ok(())
}
