//! The embedding plan's kernel launched: `kernels_gpu::embedding`'s kernels through the
//! launchers `#[kernel]` generates, one pair per id type.

use half::bf16;
use kernels_gpu::embedding as family;

use super::plan::EmbeddingPlan;
use crate::buffer::{DeviceVec, Element};
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The launcher of an embedding kernel `(table, ids, y, tokens, vocab, hidden)` with ids `I`.
pub type EmbeddingLauncher<I> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, bf16>,
    DeviceSlice<'a, I>,
    DeviceSliceMut<'a, bf16>,
    usize,
    usize,
    usize,
) -> Result<()>;

/// The tutorial and the vector kernel of one id type.
pub struct EmbeddingKernels<I: 'static> {
    pub(crate) scalar: EmbeddingLauncher<I>,
    pub(crate) rows: EmbeddingLauncher<I>,
}

impl<I> EmbeddingKernels<I> {
    /// The launcher of a plan.
    pub(crate) fn of(&self, plan: EmbeddingPlan) -> EmbeddingLauncher<I> {
        match plan {
            EmbeddingPlan::Scalar => self.scalar,
            EmbeddingPlan::Rows => self.rows,
        }
    }
}

/// The kernels of i32 ids.
pub(crate) static I32: EmbeddingKernels<i32> = EmbeddingKernels {
    scalar: family::embedding_scalar_i32::launch_views::<Module>,
    rows: family::embedding_i32::launch_views::<Module>,
};

/// The kernels of i64 ids.
pub(crate) static I64: EmbeddingKernels<i64> = EmbeddingKernels {
    scalar: family::embedding_scalar_i64::launch_views::<Module>,
    rows: family::embedding_i64::launch_views::<Module>,
};

/// Launches an embedding kernel.
///
/// # Safety
/// The kernel's contract (`kernels_gpu::embedding`): `table` holds `vocab * hidden`, `ids`
/// `tokens`, `y` `tokens * hidden`; for the vector kernel aligned buffers and `hidden` a multiple
/// of 8; `cfg` the kernel's 1-D shape.
pub(crate) unsafe fn launch<I: Element>(
    library: &Module,
    launcher: EmbeddingLauncher<I>,
    cfg: LaunchConfig,
    (table, ids, y): (&DeviceVec<bf16>, &DeviceVec<I>, &mut DeviceVec<bf16>),
    (tokens, vocab, hidden): (usize, usize, usize),
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe {
        launcher(
            library,
            cfg,
            table.view(),
            ids.view(),
            y.view_mut(),
            tokens,
            vocab,
            hidden,
        )
    }
}
