//! Launches of `kernels_gpu::norm`, through the launchers `#[kernel]` generates.

use gpukern_device::launch::Kernel;
use kernels_gpu::norm as k;

use crate::buffer::{DeviceVec, Element};
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;

/// The launcher of an RMSNorm kernel `(x, w, y, rows, cols, eps)` on elements `T`.
pub type RmsLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    &'a DeviceVec<T>,
    &'a DeviceVec<T>,
    &'a mut DeviceVec<T>,
    usize,
    usize,
    f32,
) -> Result<()>;

/// The launcher of a LayerNorm kernel `(x, w, b, y, rows, cols, eps)` on elements `T`.
pub type LayerLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    &'a DeviceVec<T>,
    &'a DeviceVec<T>,
    &'a DeviceVec<T>,
    &'a mut DeviceVec<T>,
    usize,
    usize,
    f32,
) -> Result<()>;

/// The norm kernels of one element type: the tutorial (`block_reduce`) and the in-register
/// (`rows`) rung of each norm, with their descriptions. The one table from an element type to
/// its kernels.
pub struct NormKernels<T: 'static> {
    pub(crate) rms_block_reduce: (&'static Kernel, RmsLauncher<T>),
    pub(crate) rms_rows: (&'static Kernel, RmsLauncher<T>),
    pub(crate) layer_block_reduce: (&'static Kernel, LayerLauncher<T>),
    pub(crate) layer_rows: (&'static Kernel, LayerLauncher<T>),
}

/// The f32 kernels.
pub(crate) static F32: NormKernels<f32> = NormKernels {
    rms_block_reduce: (
        &k::rms_norm_block_reduce_f32::KERNEL,
        k::rms_norm_block_reduce_f32::launch,
    ),
    rms_rows: (&k::rms_norm_rows_f32::KERNEL, k::rms_norm_rows_f32::launch),
    layer_block_reduce: (
        &k::layer_norm_block_reduce_f32::KERNEL,
        k::layer_norm_block_reduce_f32::launch,
    ),
    layer_rows: (&k::layer_norm_rows_f32::KERNEL, k::layer_norm_rows_f32::launch),
};

/// The bf16 kernels.
pub(crate) static BF16: NormKernels<half::bf16> = NormKernels {
    rms_block_reduce: (
        &k::rms_norm_block_reduce_bf16::KERNEL,
        k::rms_norm_block_reduce_bf16::launch,
    ),
    rms_rows: (&k::rms_norm_rows_bf16::KERNEL, k::rms_norm_rows_bf16::launch),
    layer_block_reduce: (
        &k::layer_norm_block_reduce_bf16::KERNEL,
        k::layer_norm_block_reduce_bf16::launch,
    ),
    layer_rows: (&k::layer_norm_rows_bf16::KERNEL, k::layer_norm_rows_bf16::launch),
};

/// Launches an RMSNorm kernel.
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements, `w` `cols`; for a `rows`
/// kernel all three 16-byte aligned and `cols` a multiple of its vector width; `cfg` the
/// kernel's documented shape.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rms<T: Element>(
    library: &Module,
    launcher: RmsLauncher<T>,
    cfg: LaunchConfig,
    x: &DeviceVec<T>,
    w: &DeviceVec<T>,
    y: &mut DeviceVec<T>,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { launcher(library, cfg, x, w, y, rows, cols, eps) }
}

/// Launches a LayerNorm kernel.
///
/// # Safety
/// As [`rms`], `b` like `w`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn layer<T: Element>(
    library: &Module,
    launcher: LayerLauncher<T>,
    cfg: LaunchConfig,
    x: &DeviceVec<T>,
    (w, b): (&DeviceVec<T>, &DeviceVec<T>),
    y: &mut DeviceVec<T>,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { launcher(library, cfg, x, w, b, y, rows, cols, eps) }
}
