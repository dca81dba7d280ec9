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

/// The norm kernels of one element type: the tutorial (`block_reduce`), the in-register rungs
/// (`rows`, 32 elements per thread; `rows16`, `rows64`) and the warp-per-row rung (`warp`,
/// `warp_keep`) of each norm, with their descriptions. The one table from an element type to its
/// kernels.
pub struct NormKernels<T: 'static> {
    pub(crate) rms_block_reduce: (&'static Kernel, RmsLauncher<T>),
    pub(crate) rms_rows: (&'static Kernel, RmsLauncher<T>),
    pub(crate) rms_rows16: (&'static Kernel, RmsLauncher<T>),
    pub(crate) rms_rows64: (&'static Kernel, RmsLauncher<T>),
    pub(crate) rms_warp: (&'static Kernel, RmsLauncher<T>),
    pub(crate) rms_warp_keep: (&'static Kernel, RmsLauncher<T>),
    pub(crate) layer_block_reduce: (&'static Kernel, LayerLauncher<T>),
    pub(crate) layer_rows: (&'static Kernel, LayerLauncher<T>),
    pub(crate) layer_rows16: (&'static Kernel, LayerLauncher<T>),
    pub(crate) layer_rows64: (&'static Kernel, LayerLauncher<T>),
    pub(crate) layer_warp: (&'static Kernel, LayerLauncher<T>),
    pub(crate) layer_warp_keep: (&'static Kernel, LayerLauncher<T>),
}

/// One table of [`NormKernels`] from the kernels' names without the element suffix.
macro_rules! norm_kernels {
    ($t:ty, $($field:ident = $kernel:ident),+ $(,)?) => {
        NormKernels::<$t> {
            $($field: (&k::$kernel::KERNEL, k::$kernel::launch)),+
        }
    };
}

/// The f32 kernels.
pub(crate) static F32: NormKernels<f32> = norm_kernels!(
    f32,
    rms_block_reduce = rms_norm_block_reduce_f32,
    rms_rows = rms_norm_rows_f32,
    rms_rows16 = rms_norm_rows16_f32,
    rms_rows64 = rms_norm_rows64_f32,
    rms_warp = rms_norm_warp_f32,
    rms_warp_keep = rms_norm_warp_keep_f32,
    layer_block_reduce = layer_norm_block_reduce_f32,
    layer_rows = layer_norm_rows_f32,
    layer_rows16 = layer_norm_rows16_f32,
    layer_rows64 = layer_norm_rows64_f32,
    layer_warp = layer_norm_warp_f32,
    layer_warp_keep = layer_norm_warp_keep_f32,
);

/// The bf16 kernels.
pub(crate) static BF16: NormKernels<half::bf16> = norm_kernels!(
    half::bf16,
    rms_block_reduce = rms_norm_block_reduce_bf16,
    rms_rows = rms_norm_rows_bf16,
    rms_rows16 = rms_norm_rows16_bf16,
    rms_rows64 = rms_norm_rows64_bf16,
    rms_warp = rms_norm_warp_bf16,
    rms_warp_keep = rms_norm_warp_keep_bf16,
    layer_block_reduce = layer_norm_block_reduce_bf16,
    layer_rows = layer_norm_rows_bf16,
    layer_rows16 = layer_norm_rows16_bf16,
    layer_rows64 = layer_norm_rows64_bf16,
    layer_warp = layer_norm_warp_bf16,
    layer_warp_keep = layer_norm_warp_keep_bf16,
);

impl<T> NormKernels<T> {
    /// The RMSNorm (`layer = false`) or LayerNorm kernel a plan launches, for the driver's facts
    /// (block limit, residency).
    pub(crate) fn kernel(&self, plan: crate::ops::norm::NormPlan, layer: bool) -> &'static Kernel {
        use crate::ops::norm::{NormPlan, RowsWidth};
        match (plan, layer) {
            (NormPlan::BlockReduce, false) => self.rms_block_reduce.0,
            (NormPlan::BlockReduce, true) => self.layer_block_reduce.0,
            (NormPlan::Rows { width, .. }, false) => match width {
                RowsWidth::W16 => self.rms_rows16.0,
                RowsWidth::W32 => self.rms_rows.0,
                RowsWidth::W64 => self.rms_rows64.0,
            },
            (NormPlan::Rows { width, .. }, true) => match width {
                RowsWidth::W16 => self.layer_rows16.0,
                RowsWidth::W32 => self.layer_rows.0,
                RowsWidth::W64 => self.layer_rows64.0,
            },
            (NormPlan::Warp { keep: false }, false) => self.rms_warp.0,
            (NormPlan::Warp { keep: true }, false) => self.rms_warp_keep.0,
            (NormPlan::Warp { keep: false }, true) => self.layer_warp.0,
            (NormPlan::Warp { keep: true }, true) => self.layer_warp_keep.0,
        }
    }

    /// The RMSNorm launcher of a plan.
    pub(crate) fn rms_launcher(&self, plan: crate::ops::norm::NormPlan) -> RmsLauncher<T> {
        use crate::ops::norm::{NormPlan, RowsWidth};
        match plan {
            NormPlan::BlockReduce => self.rms_block_reduce.1,
            NormPlan::Rows {
                width: RowsWidth::W16,
                ..
            } => self.rms_rows16.1,
            NormPlan::Rows {
                width: RowsWidth::W32,
                ..
            } => self.rms_rows.1,
            NormPlan::Rows {
                width: RowsWidth::W64,
                ..
            } => self.rms_rows64.1,
            NormPlan::Warp { keep: false } => self.rms_warp.1,
            NormPlan::Warp { keep: true } => self.rms_warp_keep.1,
        }
    }

    /// The LayerNorm launcher of a plan.
    pub(crate) fn layer_launcher(&self, plan: crate::ops::norm::NormPlan) -> LayerLauncher<T> {
        use crate::ops::norm::{NormPlan, RowsWidth};
        match plan {
            NormPlan::BlockReduce => self.layer_block_reduce.1,
            NormPlan::Rows {
                width: RowsWidth::W16,
                ..
            } => self.layer_rows16.1,
            NormPlan::Rows {
                width: RowsWidth::W32,
                ..
            } => self.layer_rows.1,
            NormPlan::Rows {
                width: RowsWidth::W64,
                ..
            } => self.layer_rows64.1,
            NormPlan::Warp { keep: false } => self.layer_warp.1,
            NormPlan::Warp { keep: true } => self.layer_warp_keep.1,
        }
    }
}

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
