//! The sampling plan's kernel launched, through the launchers `#[kernel]` generates: one
//! instance per logit type and rung.

use half::bf16;
use kernels_gpu::sample as family;

use super::plan::{OP, SampleKernel, SampleOptions, SamplePlan};
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

    /// Launches the radix kernel's instance of this type; arguments as
    /// [`LogitElement::launch_search`]'s.
    ///
    /// # Safety
    /// As [`search`].
    #[doc(hidden)]
    unsafe fn launch_radix(
        module: &Module,
        config: LaunchConfig,
        x: &DeviceVec<Self>,
        tokens: &mut DeviceVec<i32>,
        shape: (usize, usize),
        filters: (f32, usize, f32),
        draw: (u64, u64),
    ) -> Result<()>;

    /// Launches the cluster kernel's instance of this type in clusters of `blocks` blocks, on
    /// `(rows, cols)` logits with `1 / t` and the draw's `(seed, offset)`.
    ///
    /// # Safety
    /// As [`search`]; `config` is `rows * blocks` blocks of the kernel's size.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_cluster(
        module: &Module,
        blocks: u32,
        config: LaunchConfig,
        x: &DeviceVec<Self>,
        tokens: &mut DeviceVec<i32>,
        shape: (usize, usize),
        inv_t: f32,
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
    ($t:ty, $entry:ident, $radix:ident, $cluster:ident) => {
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

            unsafe fn launch_radix(
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
                    family::$radix::launch(
                        module, config, x, tokens, rows, cols, inv_t, top_k, top_p, seed, offset,
                    )
                }
            }

            unsafe fn launch_cluster(
                module: &Module,
                blocks: u32,
                config: LaunchConfig,
                x: &DeviceVec<Self>,
                tokens: &mut DeviceVec<i32>,
                (rows, cols): (usize, usize),
                inv_t: f32,
                (seed, offset): (u64, u64),
            ) -> Result<()> {
                // SAFETY: the caller's.
                unsafe {
                    family::$cluster::launch(
                        &module.clustered((blocks, 1, 1)),
                        config,
                        x,
                        tokens,
                        rows,
                        cols,
                        inv_t,
                        seed,
                        offset,
                    )
                }
            }
        }
    };
}

logit_element!(f32, sample_search_f32, sample_radix_f32, sample_cluster_f32);
logit_element!(bf16, sample_search_bf16, sample_radix_bf16, sample_cluster_bf16);

/// Whether `gpu` runs the cluster kernels (the sm_90 PTX, loaded from compute capability 9.0 on,
/// has them; the simulator runs them).
pub(crate) fn has_clusters(gpu: &Gpu) -> bool {
    gpu.max_block_threads(&family::sample_cluster_f32::KERNEL) >= family::SAMPLE_CLUSTER_BLOCK
}

/// Launches the plan's kernel over `rows x cols` logits `x`.
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
    let limits = gpu.limits();
    let filters = (plan.inv_t, plan.top_k, plan.top_p);
    let draw = (options.seed, options.offset);
    match plan.kernel {
        // SAFETY: the caller's; one block of `SAMPLE_BLOCK` threads per row.
        SampleKernel::Search => unsafe {
            let config = LaunchConfig::rows_per_block(OP, rows, 1, family::SAMPLE_BLOCK, 0, &limits)?;
            T::launch_search(&gpu.library(), config, x, tokens, (rows, cols), filters, draw)
        },
        // SAFETY: the caller's; one block of `RADIX_BLOCK` threads per row.
        SampleKernel::Radix => unsafe {
            let config = LaunchConfig::rows_per_block(OP, rows, 1, family::RADIX_BLOCK, 0, &limits)?;
            T::launch_radix(&gpu.library(), config, x, tokens, (rows, cols), filters, draw)
        },
        SampleKernel::Cluster { blocks } => {
            let config = LaunchConfig::rows_per_block(
                OP,
                rows * blocks as usize,
                1,
                family::SAMPLE_CLUSTER_BLOCK,
                0,
                &limits,
            )?;
            // SAFETY: the caller's; `rows * blocks` blocks of the kernel's size in clusters of
            // `blocks` (at most `SAMPLE_CLUSTER_MAX_BLOCKS`, the plan's).
            unsafe {
                T::launch_cluster(
                    &gpu.library(),
                    blocks,
                    config,
                    x,
                    tokens,
                    (rows, cols),
                    plan.inv_t,
                    draw,
                )
            }
        }
    }
}
