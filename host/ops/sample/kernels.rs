//! The sampling plan's kernel launched, through the launchers `#[kernel]` generates: one
//! instance per logit type.

use half::bf16;
use kernels_gpu::sample as family;

use super::plan::{OP, SampleAlgorithm, SampleOptions, SamplePlan};
use crate::buffer::{DeviceVec, Element};
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;

/// The logit types the sampling kernels read: f32 and bf16.
pub trait LogitElement: Element + sealed::Sealed {
    /// Launches the search kernel's instance of this type on `(rows, cols)` logits with the
    /// filters `(1 / t, top_k, top_p)` and the draw's `(seed, offset)`.
    ///
    /// # Safety
    /// As [`search`].
    #[doc(hidden)]
    unsafe fn launch_search(
        module: &Module,
        config: LaunchConfig,
        x: &DeviceVec<Self>,
        tokens: &mut DeviceVec<i32>,
        shape: (usize, usize),
        filters: (f32, usize, f32),
        draw: (u64, u64),
    ) -> Result<()>;
}

mod sealed {
    /// Only the logit types with sampling kernels.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
}

/// `impl LogitElement` for a type through its instance's launcher module.
macro_rules! logit_element {
    ($t:ty, $entry:ident) => {
        impl LogitElement for $t {
            unsafe fn launch_search(
                module: &Module,
                config: LaunchConfig,
                x: &DeviceVec<Self>,
                tokens: &mut DeviceVec<i32>,
                (rows, cols): (usize, usize),
                (inv_t, top_k, top_p): (f32, usize, f32),
                (seed, offset): (u64, u64),
            ) -> Result<()> {
                // SAFETY: the caller's.
                unsafe {
                    family::$entry::launch(
                        module, config, x, tokens, rows, cols, inv_t, top_k, top_p, seed, offset,
                    )
                }
            }
        }
    };
}

logit_element!(f32, sample_search_f32);
logit_element!(bf16, sample_search_bf16);

/// Launches the plan's kernel over `rows x cols` logits `x`, one block per row.
///
/// # Safety
/// `x` holds `rows * cols` logits (`rows, cols >= 1`), `tokens` `rows`.
pub(crate) unsafe fn sample<T: LogitElement>(
    gpu: &Gpu,
    x: &DeviceVec<T>,
    tokens: &mut DeviceVec<i32>,
    (rows, cols): (usize, usize),
    plan: &SamplePlan,
    options: &SampleOptions,
) -> Result<()> {
    let config = LaunchConfig::rows_per_block(OP, rows, 1, family::SAMPLE_BLOCK, 0, &gpu.limits())?;
    match plan.algorithm {
        // SAFETY: the caller's; one block of `SAMPLE_BLOCK` threads per row.
        SampleAlgorithm::Search => unsafe {
            T::launch_search(
                &gpu.library(),
                config,
                x,
                tokens,
                (rows, cols),
                (plan.inv_t, plan.top_k, plan.top_p),
                (options.seed, options.offset),
            )
        },
    }
}
