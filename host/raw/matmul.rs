//! Launches of `kernels_gpu::matmul`.

use cudarc::driver::PushKernelArg;
use kernels_gpu::{matmul as k, sim};

use super::mixed_backends;
use crate::buffer::{DeviceVec, Storage};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Result};
use crate::launch_config::LaunchConfig;

/// The matmul kernels, which share one signature `(a, b, c, m, n, k)`.
#[derive(Clone, Copy)]
pub(crate) enum MatmulKernel {
    Naive,
    Tiled,
}

/// The signature every matmul kernel shares on the host: `(a, b, c, m, n, k)`.
type MatmulFn = unsafe fn(*const f32, *const f32, *mut f32, usize, usize, usize);

/// Launches `kernel(a, b, c, m, n, k)`.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn matmul(
    gpu: &Gpu,
    kernel: MatmulKernel,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
) -> Result<()> {
    let (name, sim_fn): (&'static str, MatmulFn) = match kernel {
        MatmulKernel::Naive => ("matmul_naive", k::matmul_naive),
        MatmulKernel::Tiled => ("matmul_tiled", k::matmul_tiled),
    };
    match (&gpu.backend, &a.storage, &b.storage, &mut c.storage) {
        (Backend::Cuda(d), Storage::Cuda(a), Storage::Cuda(b), Storage::Cuda(c)) => {
            let func = match kernel {
                MatmulKernel::Naive => &d.kernels.matmul_naive,
                MatmulKernel::Tiled => &d.kernels.matmul_tiled,
            };
            let mut launch = d.stream.launch_builder(func);
            launch.arg(a).arg(b).arg(c).arg(&m).arg(&n).arg(&kd);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching matmul")?;
            Ok(())
        }
        (Backend::Simulator, Storage::Host(a), Storage::Host(b), Storage::Host(c)) => {
            let mut launch = sim::Launch::new(name, cfg.to_sim());
            let (a, b, c) = (launch.input("a", a), launch.input("b", b), launch.output("c", c));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| sim_fn(a, b, c, m, n, kd)) }?;
            Ok(())
        }
        _ => mixed_backends("matmul"),
    }
}
