//! The rotary plan's kernel launched: `kernels_gpu::rotary`'s kernels through the launchers
//! `#[kernel]` generates, one table per position type from a layout and a plan to its kernel.

use half::bf16;
use kernels_gpu::rotary as family;

use super::plan::{RotaryLayout, RotaryPlan};
use crate::buffer::{DeviceVec, Element};
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The launcher of a rotary kernel `(q, k, positions, inv_freq, tokens, heads, kv_heads,
/// head_dim)` with positions of type `P`.
pub type RotaryLauncher<P> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSliceMut<'a, bf16>,
    DeviceSliceMut<'a, bf16>,
    DeviceSlice<'a, P>,
    DeviceSlice<'a, f32>,
    usize,
    usize,
    usize,
    usize,
) -> Result<()>;

/// The four rotary kernels of one position type: (layout, plan).
pub struct RotaryKernels<P: 'static> {
    pub(crate) half_scalar: RotaryLauncher<P>,
    pub(crate) half_rows: RotaryLauncher<P>,
    pub(crate) interleaved_scalar: RotaryLauncher<P>,
    pub(crate) interleaved_rows: RotaryLauncher<P>,
}

impl<P> RotaryKernels<P> {
    /// The launcher of a layout's plan.
    pub(crate) fn of(&self, layout: RotaryLayout, plan: RotaryPlan) -> RotaryLauncher<P> {
        match (layout, plan) {
            (RotaryLayout::HalfSplit, RotaryPlan::Scalar) => self.half_scalar,
            (RotaryLayout::HalfSplit, RotaryPlan::Rows { .. }) => self.half_rows,
            (RotaryLayout::Interleaved, RotaryPlan::Scalar) => self.interleaved_scalar,
            (RotaryLayout::Interleaved, RotaryPlan::Rows { .. }) => self.interleaved_rows,
        }
    }
}

/// The kernels of i32 positions.
pub(crate) static I32: RotaryKernels<i32> = RotaryKernels {
    half_scalar: family::rotary_half_scalar_i32::launch_views::<Module>,
    half_rows: family::rotary_half_i32::launch_views::<Module>,
    interleaved_scalar: family::rotary_interleaved_scalar_i32::launch_views::<Module>,
    interleaved_rows: family::rotary_interleaved_i32::launch_views::<Module>,
};

/// The kernels of i64 positions.
pub(crate) static I64: RotaryKernels<i64> = RotaryKernels {
    half_scalar: family::rotary_half_scalar_i64::launch_views::<Module>,
    half_rows: family::rotary_half_i64::launch_views::<Module>,
    interleaved_scalar: family::rotary_interleaved_scalar_i64::launch_views::<Module>,
    interleaved_rows: family::rotary_interleaved_i64::launch_views::<Module>,
};

/// Launches a rotary kernel.
///
/// # Safety
/// The kernel's contract (`kernels_gpu::rotary`): `q` holds `tokens * heads * head_dim`, `k`
/// `tokens * kv_heads * head_dim`, `positions` `tokens`, `inv_freq` `head_dim / 2`; for the
/// vector kernel aligned buffers and the head size it needs; `cfg` the kernel's shape.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch<P: Element>(
    library: &Module,
    launcher: RotaryLauncher<P>,
    cfg: LaunchConfig,
    (q, k): (&mut DeviceVec<bf16>, &mut DeviceVec<bf16>),
    positions: &DeviceVec<P>,
    inv_freq: &DeviceVec<f32>,
    (tokens, heads, kv_heads, head_dim): (usize, usize, usize, usize),
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe {
        launcher(
            library,
            cfg,
            q.view_mut(),
            k.view_mut(),
            positions.view(),
            inv_freq.view(),
            tokens,
            heads,
            kv_heads,
            head_dim,
        )
    }
}
