//! Launches of `kernels_gpu::add`.

use cudarc::driver::PushKernelArg;
use kernels_gpu::{add as k, sim};

use super::{launch_count, mixed_backends};
use crate::buffer::{DeviceVec, Storage};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Result};
use crate::launch_config::LaunchConfig;

/// Launches `add(a, b, c, n)`.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold at least `n` elements.
pub(crate) unsafe fn add(
    gpu: &Gpu,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    match (&gpu.backend, &a.storage, &b.storage, &mut c.storage) {
        (Backend::Cuda(d), Storage::Cuda(a), Storage::Cuda(b), Storage::Cuda(c)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.add);
            launch.arg(a).arg(b).arg(c).arg(&n);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching add")?;
            launch_count::cuda("add");
            Ok(())
        }
        (Backend::Simulator, Storage::Host(a), Storage::Host(b), Storage::Host(c)) => {
            let mut launch = sim::Launch::new("add", cfg.to_sim());
            let (a, b, c) = (launch.input("a", a), launch.input("b", b), launch.output("c", c));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| k::add(a, b, c, n)) }?;
            launch_count::simulator("add");
            Ok(())
        }
        _ => mixed_backends("add"),
    }
}

/// Launches `add_vec4(a, b, c, n)`.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold at least `n` elements, and each starts at a
/// 16-byte aligned address ([`address`]).
pub(crate) unsafe fn add_vec4(
    gpu: &Gpu,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    match (&gpu.backend, &a.storage, &b.storage, &mut c.storage) {
        (Backend::Cuda(d), Storage::Cuda(a), Storage::Cuda(b), Storage::Cuda(c)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.add_vec4);
            launch.arg(a).arg(b).arg(c).arg(&n);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching add_vec4")?;
            launch_count::cuda("add_vec4");
            Ok(())
        }
        (Backend::Simulator, Storage::Host(a), Storage::Host(b), Storage::Host(c)) => {
            let mut launch = sim::Launch::new("add_vec4", cfg.to_sim());
            let (a, b, c) = (launch.input("a", a), launch.input("b", b), launch.output("c", c));
            // SAFETY: registered buffers, sizes and alignment per the contract.
            unsafe { launch.run(|| k::add_vec4(a, b, c, n)) }?;
            launch_count::simulator("add_vec4");
            Ok(())
        }
        _ => mixed_backends("add"),
    }
}

/// Launches `increment_by_one(x, n)`, or `increment_by_one_vec4(x, n)` with `vec4`.
///
/// # Safety
/// See the module contract: `x` holds at least `n` elements; with `vec4` it starts at a 16-byte
/// aligned address.
pub(crate) unsafe fn increment_by_one(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &mut DeviceVec,
    n: usize,
    vec4: bool,
) -> Result<()> {
    let (name, during, sim_kernel): (&'static str, &'static str, unsafe fn(*mut f32, usize)) = if vec4 {
        (
            "increment_by_one_vec4",
            "launching increment_by_one_vec4",
            k::increment_by_one_vec4,
        )
    } else {
        (
            "increment_by_one",
            "launching increment_by_one",
            k::increment_by_one,
        )
    };
    match (&gpu.backend, &mut x.storage) {
        (Backend::Cuda(d), Storage::Cuda(x)) => {
            let function = if vec4 {
                &d.kernels.increment_by_one_vec4
            } else {
                &d.kernels.increment_by_one
            };
            let mut launch = d.stream.launch_builder(function);
            launch.arg(x).arg(&n);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during(during)?;
            launch_count::cuda(name);
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x)) => {
            let mut launch = sim::Launch::new(name, cfg.to_sim());
            let x = launch.output("x", x);
            // SAFETY: registered buffer, size and alignment per the contract.
            unsafe { launch.run(|| sim_kernel(x, n)) }?;
            launch_count::simulator(name);
            Ok(())
        }
        _ => mixed_backends("increment_by_one"),
    }
}
