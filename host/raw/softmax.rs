//! Launches of `kernels_gpu::softmax`.

use cudarc::driver::PushKernelArg;
use kernels_gpu::{sim, softmax as k};

use super::mixed_backends;
use crate::buffer::{DeviceVec, Storage};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Result};
use crate::launch_config::LaunchConfig;

/// Launches `softmax_rows(x, y, rows, cols, t)`.
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_rows(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &DeviceVec,
    y: &mut DeviceVec,
    rows: usize,
    cols: usize,
    t: f32,
) -> Result<()> {
    match (&gpu.backend, &x.storage, &mut y.storage) {
        (Backend::Cuda(d), Storage::Cuda(x), Storage::Cuda(y)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.softmax_rows);
            launch.arg(x).arg(y).arg(&rows).arg(&cols).arg(&t);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching softmax_rows")?;
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x), Storage::Host(y)) => {
            let mut launch = sim::Launch::new("softmax_rows", cfg.to_sim());
            let (x, y) = (launch.input("x", x), launch.output("y", y));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| k::softmax_rows(x, y, rows, cols, t)) }?;
            Ok(())
        }
        _ => mixed_backends("softmax"),
    }
}
