//! The transpose plan's kernel launched: `kernels_gpu::transpose`'s kernels through the
//! launchers `#[kernel]` generates.

use kernels_gpu::transpose as family;

use super::plan::TransposeAlgorithm;
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;

/// Launches `transpose_naive`, `transpose_tiled`, `transpose_tiled_64` or
/// `transpose_vec4_64(a, b, rows, cols)`.
///
/// # Safety
/// `a` and `b` hold `rows * cols` floats each; `cfg` is the kernel's launch shape; for
/// `Vec4_64` both are 16-byte aligned and `rows % 4 == 0`, `cols % 4 == 0`.
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
        TransposeAlgorithm::Naive => family::transpose_naive::launch,
        TransposeAlgorithm::Tiled => family::transpose_tiled::launch,
        TransposeAlgorithm::Tiled64 => family::transpose_tiled_64::launch,
        TransposeAlgorithm::Vec4_64 => family::transpose_vec4_64::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { launch(&gpu.library(), cfg, a, b, rows, cols) }
}
