//! The GLU plan's kernel launched: `kernels_gpu::glu`'s kernels through the launchers `#[kernel]`
//! generates, one table per element type from an activation and a plan to its kernel.

use gpukern_device::launch::Kernel;
use kernels_gpu::glu as family;

use super::plan::GluPlan;
use crate::buffer::{DeviceVec, Element};
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The launcher of a GLU kernel `(x, y, rows, n)` on elements `T`.
pub type GluLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
) -> Result<()>;

/// One activation's kernels: the tutorial, the vector kernel and the rows kernel.
pub struct GluPair<T: 'static> {
    pub(crate) scalar: (&'static Kernel, GluLauncher<T>),
    pub(crate) vectors: (&'static Kernel, GluLauncher<T>),
    pub(crate) rows: (&'static Kernel, GluLauncher<T>),
}

impl<T> GluPair<T> {
    /// The kernel a plan launches and its launcher.
    pub(crate) fn of(&self, plan: GluPlan) -> (&'static Kernel, GluLauncher<T>) {
        match plan {
            GluPlan::Scalar => self.scalar,
            GluPlan::Vectors => self.vectors,
            GluPlan::Rows => self.rows,
        }
    }
}

/// The GLU kernels of one element type, by activation.
pub struct GluKernels<T: 'static> {
    pub(crate) silu: GluPair<T>,
    pub(crate) gelu_tanh: GluPair<T>,
    pub(crate) gelu_erf: GluPair<T>,
}

/// One [`GluPair`] from its kernels' names.
macro_rules! pair {
    ($scalar:ident, $vectors:ident, $rows:ident) => {
        GluPair {
            scalar: (&family::$scalar::KERNEL, family::$scalar::launch_views::<Module>),
            vectors: (
                &family::$vectors::KERNEL,
                family::$vectors::launch_views::<Module>,
            ),
            rows: (&family::$rows::KERNEL, family::$rows::launch_views::<Module>),
        }
    };
}

/// The f32 kernels.
pub(crate) static F32: GluKernels<f32> = GluKernels {
    silu: pair!(swiglu_scalar_f32, swiglu_f32, swiglu_rows_f32),
    gelu_tanh: pair!(geglu_scalar_f32, geglu_f32, geglu_rows_f32),
    gelu_erf: pair!(geglu_erf_scalar_f32, geglu_erf_f32, geglu_erf_rows_f32),
};

/// The bf16 kernels.
pub(crate) static BF16: GluKernels<half::bf16> = GluKernels {
    silu: pair!(swiglu_scalar_bf16, swiglu_bf16, swiglu_rows_bf16),
    gelu_tanh: pair!(geglu_scalar_bf16, geglu_bf16, geglu_rows_bf16),
    gelu_erf: pair!(geglu_erf_scalar_bf16, geglu_erf_bf16, geglu_erf_rows_bf16),
};

/// Launches a GLU kernel.
///
/// # Safety
/// `x` holds `rows * 2 n` elements and `y` `rows * n`; for the vector kernel both 16-byte
/// aligned and `n` a multiple of its vector width; `cfg` the kernel's 1-D shape.
pub(crate) unsafe fn launch<T: Element>(
    library: &Module,
    launcher: GluLauncher<T>,
    cfg: LaunchConfig,
    x: &DeviceVec<T>,
    y: &mut DeviceVec<T>,
    (rows, n): (usize, usize),
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { launcher(library, cfg, x.view(), y.view_mut(), rows, n) }
}
