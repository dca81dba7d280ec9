//! The element count `n` left out.

use gpukern::kernels::add::add;
use gpukern::{Gpu, LaunchConfig};

fn main() -> gpukern::Result<()> {
    let gpu = Gpu::simulator();
    let a = gpu.upload(&[1.0f32, 2.0, 3.0])?;
    let b = gpu.upload(&[1.0f32, 2.0, 3.0])?;
    let mut c = gpu.zeros(3)?;
    let config = LaunchConfig {
        grid: (1, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    unsafe { add::launch(&gpu.library(), config, &a, &b, &mut c) }
}
