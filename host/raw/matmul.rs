//! Launches of `kernels_gpu::matmul` and `kernels_gpu::matmul_tf32`, through the launchers
//! `#[kernel]` generates.

use kernels_gpu::{matmul as k, matmul_tf32 as t};

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;

/// The matmul kernels, which share one signature `(a, b, c, m, n, k)`.
#[derive(Clone, Copy)]
pub(crate) enum MatmulKernel {
    Naive,
    Tiled,
}

/// The launcher of a kernel with the signature `(a, b, c, m, n, k)`.
/// (One lifetime for every reference, as the generated launcher has.)
type MatmulLauncher = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    &'a DeviceVec,
    &'a DeviceVec,
    &'a mut DeviceVec,
    usize,
    usize,
    usize,
) -> Result<()>;

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
    let launch: MatmulLauncher = match kernel {
        MatmulKernel::Naive => k::matmul_naive::launch,
        MatmulKernel::Tiled => k::matmul_tiled::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { launch(&gpu.library(), cfg, a, b, c, m, n, kd) }
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

/// The launcher of a kernel with the signature `(a, b, c, m, n, k, k_split)`.
type FastLauncher = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    &'a DeviceVec,
    &'a DeviceVec,
    &'a mut DeviceVec,
    usize,
    usize,
    usize,
    usize,
) -> Result<()>;

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
    let launch: FastLauncher = match kernel {
        FastKernel::Large => k::matmul_fast_128x128::launch,
        FastKernel::LargeVec4 => k::matmul_fast_128x128_vec4::launch,
        FastKernel::Small => k::matmul_fast_64x64::launch,
        FastKernel::SmallVec4 => k::matmul_fast_64x64_vec4::launch,
        FastKernel::Wide => k::matmul_fast_128x256::launch,
        FastKernel::WideVec4 => k::matmul_fast_128x256_vec4::launch,
    };
    // SAFETY: sizes and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, a, b, c, m, n, kd, k_split) }
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
    // SAFETY: sizes per the contract.
    unsafe { k::matmul_sum_splits::launch(&gpu.library(), cfg, partial, c, len, slices) }
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
    let launch: MatmulLauncher = match kernel {
        Tf32Kernel::Square => t::matmul_tf32_128x128::launch,
        Tf32Kernel::SquareK16 => t::matmul_tf32_128x128_k16::launch,
        Tf32Kernel::Wide => t::matmul_tf32_128x256::launch,
        Tf32Kernel::WideVec4 => t::matmul_tf32_128x256_vec4::launch,
        Tf32Kernel::SquareTrunc => t::matmul_tf32_128x128_trunc::launch,
        Tf32Kernel::SquareVec4Trunc => t::matmul_tf32_128x128_vec4_trunc::launch,
        Tf32Kernel::WideTrunc => t::matmul_tf32_128x256_trunc::launch,
        Tf32Kernel::WideVec4Trunc => t::matmul_tf32_128x256_vec4_trunc::launch,
    };
    // SAFETY: sizes, alignment and shape per the contract.
    unsafe { launch(&gpu.library(), cfg, a, b, c, m, n, kd) }
}
