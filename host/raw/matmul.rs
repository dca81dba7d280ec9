//! Launches of `kernels_gpu::matmul`.

use cudarc::driver::PushKernelArg;
use kernels_gpu::{matmul as k, matmul_tf32 as t, sim};

use super::{launch_count, mixed_backends};
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
            launch_count::cuda(name);
            Ok(())
        }
        (Backend::Simulator, Storage::Host(a), Storage::Host(b), Storage::Host(c)) => {
            let mut launch = sim::Launch::new(name, cfg.to_sim());
            let (a, b, c) = (launch.input("a", a), launch.input("b", b), launch.output("c", c));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| sim_fn(a, b, c, m, n, kd)) }?;
            launch_count::simulator(name);
            Ok(())
        }
        _ => mixed_backends("matmul"),
    }
}

/// The fast matmul kernels: three tilings, each with 16-byte or scalar global accesses. They share
/// the signature `(a, b, c, m, n, k, k_split)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FastKernel {
    /// `matmul_fast_128x128` (scalar global accesses).
    Large,
    /// `matmul_fast_128x128_vec4`.
    LargeVec4,
    /// `matmul_fast_64x64`.
    Small,
    /// `matmul_fast_64x64_vec4`.
    SmallVec4,
    /// `matmul_fast_128x256` (the `cp.async` pipeline, 4-byte copies).
    Wide,
    /// `matmul_fast_128x256_vec4`.
    WideVec4,
}

/// The signature every fast matmul kernel shares on the host: `(a, b, c, m, n, k, k_split)`.
type FastFn = unsafe fn(*const f32, *const f32, *mut f32, usize, usize, usize, usize);

/// Launches `kernel(a, b, c, m, n, k, k_split)`.
///
/// # Safety
/// See the module contract and `kernels_gpu::matmul::fast_gemm`: `a`, `b` hold `m*k`, `k*n`
/// elements, `c` holds `slices * m * n` for the launch's number of `k` slices; the `_vec4`
/// kernels need `k` and `n` multiples of 4 and 16-byte aligned buffers.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn matmul_fast(
    gpu: &Gpu,
    kernel: FastKernel,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
    k_split: usize,
) -> Result<()> {
    let (name, sim_fn): (&'static str, FastFn) = match kernel {
        FastKernel::Large => ("matmul_fast_128x128", k::matmul_fast_128x128),
        FastKernel::LargeVec4 => ("matmul_fast_128x128_vec4", k::matmul_fast_128x128_vec4),
        FastKernel::Small => ("matmul_fast_64x64", k::matmul_fast_64x64),
        FastKernel::SmallVec4 => ("matmul_fast_64x64_vec4", k::matmul_fast_64x64_vec4),
        FastKernel::Wide => ("matmul_fast_128x256", k::matmul_fast_128x256),
        FastKernel::WideVec4 => ("matmul_fast_128x256_vec4", k::matmul_fast_128x256_vec4),
    };
    match (&gpu.backend, &a.storage, &b.storage, &mut c.storage) {
        (Backend::Cuda(d), Storage::Cuda(a), Storage::Cuda(b), Storage::Cuda(c)) => {
            let func = match kernel {
                FastKernel::Large => &d.kernels.matmul_fast_128x128,
                FastKernel::LargeVec4 => &d.kernels.matmul_fast_128x128_vec4,
                FastKernel::Small => &d.kernels.matmul_fast_64x64,
                FastKernel::SmallVec4 => &d.kernels.matmul_fast_64x64_vec4,
                FastKernel::Wide => &d.kernels.matmul_fast_128x256,
                FastKernel::WideVec4 => &d.kernels.matmul_fast_128x256_vec4,
            };
            let mut launch = d.stream.launch_builder(func);
            launch.arg(a).arg(b).arg(c).arg(&m).arg(&n).arg(&kd).arg(&k_split);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching matmul")?;
            launch_count::cuda(name);
            Ok(())
        }
        (Backend::Simulator, Storage::Host(a), Storage::Host(b), Storage::Host(c)) => {
            let mut launch = sim::Launch::new(name, cfg.to_sim());
            let (a, b, c) = (launch.input("a", a), launch.input("b", b), launch.output("c", c));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| sim_fn(a, b, c, m, n, kd, k_split)) }?;
            launch_count::simulator(name);
            Ok(())
        }
        _ => mixed_backends("matmul"),
    }
}

/// Launches `matmul_sum_splits(partial, c, len, slices)`.
///
/// # Safety
/// See the module contract: `partial` holds `slices * len` elements, `c` holds `len`.
pub(crate) unsafe fn sum_splits(
    gpu: &Gpu,
    cfg: LaunchConfig,
    partial: &DeviceVec,
    c: &mut DeviceVec,
    len: usize,
    slices: usize,
) -> Result<()> {
    match (&gpu.backend, &partial.storage, &mut c.storage) {
        (Backend::Cuda(d), Storage::Cuda(p), Storage::Cuda(c)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.matmul_sum_splits);
            launch.arg(p).arg(c).arg(&len).arg(&slices);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching matmul_sum_splits")?;
            launch_count::cuda("matmul_sum_splits");
            Ok(())
        }
        (Backend::Simulator, Storage::Host(p), Storage::Host(c)) => {
            let mut launch = sim::Launch::new("matmul_sum_splits", cfg.to_sim());
            let (p, c) = (launch.input("partial", p), launch.output("c", c));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| k::matmul_sum_splits(p, c, len, slices)) }?;
            launch_count::simulator("matmul_sum_splits");
            Ok(())
        }
        _ => mixed_backends("matmul"),
    }
}

/// The TF32 tensor-core kernels: three tilings, with 16-byte or 4-byte copies, and with the
/// operands rounded to TF32 or truncated by the tensor core (`Trunc`); not every combination has
/// a kernel. They share the signature `(a, b, c, m, n, k)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tf32Kernel {
    /// `matmul_tf32_128x128` (4-byte copies).
    Square,
    /// `matmul_tf32_128x128_k16` (4-byte copies).
    SquareK16,
    /// `matmul_tf32_128x256` (4-byte copies).
    Wide,
    /// `matmul_tf32_128x256_vec4`.
    WideVec4,
    /// `matmul_tf32_128x128_trunc`.
    SquareTrunc,
    /// `matmul_tf32_128x128_vec4_trunc`.
    SquareVec4Trunc,
    /// `matmul_tf32_128x256_trunc`.
    WideTrunc,
    /// `matmul_tf32_128x256_vec4_trunc`.
    WideVec4Trunc,
}

/// Launches `kernel(a, b, c, m, n, k)`, a TF32 kernel.
///
/// # Safety
/// See `kernels_gpu::matmul_tf32::tf32_gemm`: `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` elements,
/// `m, n >= 1`, `cfg` is the kernel's documented launch (its shared memory allowed by the
/// kernel's attribute on a CUDA device); the `_vec4` kernels need `k` and `n` multiples of 4 and
/// 16-byte aligned buffers.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn matmul_tf32(
    gpu: &Gpu,
    kernel: Tf32Kernel,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
) -> Result<()> {
    let (name, sim_fn): (&'static str, MatmulFn) = match kernel {
        Tf32Kernel::Square => ("matmul_tf32_128x128", t::matmul_tf32_128x128),
        Tf32Kernel::SquareK16 => ("matmul_tf32_128x128_k16", t::matmul_tf32_128x128_k16),
        Tf32Kernel::Wide => ("matmul_tf32_128x256", t::matmul_tf32_128x256),
        Tf32Kernel::WideVec4 => ("matmul_tf32_128x256_vec4", t::matmul_tf32_128x256_vec4),
        Tf32Kernel::SquareTrunc => ("matmul_tf32_128x128_trunc", t::matmul_tf32_128x128_trunc),
        Tf32Kernel::SquareVec4Trunc => (
            "matmul_tf32_128x128_vec4_trunc",
            t::matmul_tf32_128x128_vec4_trunc,
        ),
        Tf32Kernel::WideTrunc => ("matmul_tf32_128x256_trunc", t::matmul_tf32_128x256_trunc),
        Tf32Kernel::WideVec4Trunc => (
            "matmul_tf32_128x256_vec4_trunc",
            t::matmul_tf32_128x256_vec4_trunc,
        ),
    };
    match (&gpu.backend, &a.storage, &b.storage, &mut c.storage) {
        (Backend::Cuda(d), Storage::Cuda(a), Storage::Cuda(b), Storage::Cuda(c)) => {
            let func = match kernel {
                Tf32Kernel::Square => &d.kernels.matmul_tf32_128x128,
                Tf32Kernel::SquareK16 => &d.kernels.matmul_tf32_128x128_k16,
                Tf32Kernel::Wide => &d.kernels.matmul_tf32_128x256,
                Tf32Kernel::WideVec4 => &d.kernels.matmul_tf32_128x256_vec4,
                Tf32Kernel::SquareTrunc => &d.kernels.matmul_tf32_128x128_trunc,
                Tf32Kernel::SquareVec4Trunc => &d.kernels.matmul_tf32_128x128_vec4_trunc,
                Tf32Kernel::WideTrunc => &d.kernels.matmul_tf32_128x256_trunc,
                Tf32Kernel::WideVec4Trunc => &d.kernels.matmul_tf32_128x256_vec4_trunc,
            };
            let mut launch = d.stream.launch_builder(func);
            launch.arg(a).arg(b).arg(c).arg(&m).arg(&n).arg(&kd);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching matmul")?;
            launch_count::cuda(name);
            Ok(())
        }
        (Backend::Simulator, Storage::Host(a), Storage::Host(b), Storage::Host(c)) => {
            let mut launch = sim::Launch::new(name, cfg.to_sim());
            let (a, b, c) = (launch.input("a", a), launch.input("b", b), launch.output("c", c));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| sim_fn(a, b, c, m, n, kd)) }?;
            launch_count::simulator(name);
            Ok(())
        }
        _ => mixed_backends("matmul"),
    }
}
