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

/// Launches `increment_by_one(x, n)`.
///
/// # Safety
/// See the module contract: `x` holds at least `n` elements.
pub(crate) unsafe fn increment_by_one(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    match (&gpu.backend, &mut x.storage) {
        (Backend::Cuda(d), Storage::Cuda(x)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.increment_by_one);
            launch.arg(x).arg(&n);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching increment_by_one")?;
            launch_count::cuda("increment_by_one");
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x)) => {
            let mut launch = sim::Launch::new("increment_by_one", cfg.to_sim());
            let x = launch.output("x", x);
            // SAFETY: registered buffer, size per the contract.
            unsafe { launch.run(|| k::increment_by_one(x, n)) }?;
            launch_count::simulator("increment_by_one");
            Ok(())
        }
        _ => mixed_backends("increment_by_one"),
    }
}

/// Launches `increment_by_one_vec4(x, n)`.
///
/// # Safety
/// See the module contract: `x` holds at least `n` elements and starts at a 16-byte aligned
/// address.
pub(crate) unsafe fn increment_by_one_vec4(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    match (&gpu.backend, &mut x.storage) {
        (Backend::Cuda(d), Storage::Cuda(x)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.increment_by_one_vec4);
            launch.arg(x).arg(&n);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching increment_by_one_vec4")?;
            launch_count::cuda("increment_by_one_vec4");
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x)) => {
            let mut launch = sim::Launch::new("increment_by_one_vec4", cfg.to_sim());
            let x = launch.output("x", x);
            // SAFETY: registered buffer, size and alignment per the contract.
            unsafe { launch.run(|| k::increment_by_one_vec4(x, n)) }?;
            launch_count::simulator("increment_by_one_vec4");
            Ok(())
        }
        _ => mixed_backends("increment_by_one"),
    }
}
