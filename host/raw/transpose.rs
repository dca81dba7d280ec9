//! Launches of `kernels_gpu::transpose`, through the launchers `#[kernel]` generates.

use kernels_gpu::transpose as k;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::ops::transpose::TransposeAlgorithm;

/// Launches `transpose_naive` or `transpose_tiled(a, b, rows, cols)`.
///
/// # Safety
/// `a` and `b` hold `rows * cols` floats each; `cfg` is the kernel's launch shape.
pub(crate) unsafe fn transpose(
    gpu: &Gpu,
    algorithm: TransposeAlgorithm,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &mut DeviceVec,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let launch = match algorithm {
        TransposeAlgorithm::Naive => k::transpose_naive::launch,
        TransposeAlgorithm::Tiled => k::transpose_tiled::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { launch(&gpu.library(), cfg, a, b, rows, cols) }
}
