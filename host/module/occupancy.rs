//! Occupancy of a user's kernel: how many of its blocks fit one multiprocessor at once
//! ([`Module::occupancy`]: the driver's `cuOccupancyMaxActiveBlocksPerMultiprocessor` on CUDA, a
//! documented model of an H200 multiprocessor in the simulator), and the grid-stride launch sized
//! from it ([`Module::grid_stride`]).

use gpukern_device::launch::Kernel;

use super::launch::beyond_bounds;
use super::loaded::Module;
use crate::device::Backend;
use crate::error::{Error, Result};
use crate::launch_config::{DeviceLimits, LaunchConfig};

/// The simulator's multiprocessor, the model [`Module::occupancy`] answers from there: that of an
/// H100/H200 (compute capability 9.0). Registers are not modelled (the simulator runs Rust, not
/// the kernel's PTX), so a kernel whose registers limit its occupancy on a GPU gets a higher
/// count in the simulator than on the device.
pub mod simulated_sm {
    /// Threads resident on one multiprocessor at once.
    pub const THREADS: u32 = 2048;
    /// Blocks resident on one multiprocessor at once.
    pub const BLOCKS: u32 = 32;
    /// Shared memory of one multiprocessor, in bytes (228 KiB).
    pub const SHARED_BYTES: u32 = 228 * 1024;
    /// Shared memory the hardware reserves per resident block (1 KiB from compute capability 8.0).
    pub const RESERVED_PER_BLOCK: u32 = 1024;
    /// Threads are scheduled in warps: a block takes whole warps of threads.
    pub const WARP: u32 = 32;

    /// Blocks of `threads` threads and `shared_bytes` of shared memory each that fit the
    /// multiprocessor: the fewest of what its threads, its blocks and its shared memory allow.
    pub fn blocks(threads: u32, shared_bytes: u32) -> u32 {
        let warps = threads.div_ceil(WARP).max(1);
        let by_threads = THREADS / (warps * WARP);
        let by_shared = match shared_bytes {
            0 => BLOCKS,
            s => SHARED_BYTES / s.saturating_add(RESERVED_PER_BLOCK),
        };
        BLOCKS.min(by_threads).min(by_shared)
    }
}

impl Module {
    /// How many blocks of `kernel` (one of this module's crate: `&my_kernels::scale::KERNEL`, or
    /// `<my_kernels::scale<f32> as Instance>::KERNEL` for an instance) with `block` threads and
    /// `shared_mem_bytes` of dynamic shared memory (plus the kernel's declared shared memory,
    /// which its launcher adds) fit one multiprocessor at once. On CUDA the driver's answer
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, which counts the kernel's registers; asked
    /// once per shape); in the simulator the model of [`simulated_sm`].
    ///
    /// Errors: [`Error::InvalidArgument`] for a kernel of another crate, a block the kernel or
    /// the device cannot launch (empty, over its launch bounds or the device's limits);
    /// [`Error::TooLarge`] for more shared memory than a block may have or when not one block
    /// fits; a driver error.
    pub fn occupancy(&self, kernel: &Kernel, block: (u32, u32, u32), shared_mem_bytes: u32) -> Result<u32> {
        let op = kernel.name;
        if kernel.krate != self.krate {
            return Err(Error::InvalidArgument {
                op,
                detail: format!(
                    "the kernel is from crate `{}`, the module was loaded from `{}`",
                    kernel.krate, self.krate
                ),
            });
        }
        let shared = shared_mem_bytes.saturating_add(kernel.facts.shared_bytes);
        let config = LaunchConfig {
            grid: (1, 1, 1),
            block,
            shared_mem_bytes: shared,
        };
        if let Some(error) = beyond_bounds(kernel, &config) {
            return Err(error);
        }
        let threads = block.0.saturating_mul(block.1).saturating_mul(block.2);
        let per_sm = match &self.backend {
            Backend::Simulator => {
                config.checked(op, &DeviceLimits::SIMULATOR.opted_in())?;
                simulated_sm::blocks(threads, shared)
            }
            Backend::Cuda(device) => {
                let function = self.function(op)?.ok_or_else(|| Error::InvalidArgument {
                    op,
                    detail: format!("the loaded PTX of `{}` has no entry point `{op}`", self.krate),
                })?;
                let limits = DeviceLimits {
                    max_threads_per_block: function.max_threads.min(device.limits.max_threads_per_block),
                    max_shared_mem_per_block: device
                        .limits
                        .max_shared_mem_per_block_optin
                        .saturating_sub(function.static_shared),
                    ..device.limits
                };
                config.checked(op, &limits)?;
                function.resident_per_sm(
                    &device.ctx,
                    threads,
                    shared,
                    "asking the driver how many blocks of a kernel fit a multiprocessor",
                )?
            }
        };
        if per_sm == 0 {
            return Err(Error::TooLarge {
                op,
                detail: format!(
                    "not one block of {threads} threads and {shared} bytes of shared memory fits a \
                     multiprocessor"
                ),
            });
        }
        Ok(per_sm)
    }

    /// A 1-D launch of `block`-thread blocks for a grid-stride loop over `n` items (each thread
    /// takes items `index_1d()`, `+ grid_size_1d()`, ... below `n`): as many blocks as are
    /// resident on the whole device at once ([`Module::occupancy`] times the multiprocessors),
    /// fewer when `n` needs fewer, at least one. `shared_mem_bytes` is the launch's dynamic
    /// shared memory (the kernel's declared shared memory is added by its launcher, and counted
    /// here).
    ///
    /// Errors: as [`Module::occupancy`].
    pub fn grid_stride(
        &self,
        kernel: &Kernel,
        n: usize,
        block: u32,
        shared_mem_bytes: u32,
    ) -> Result<LaunchConfig> {
        let per_sm = self.occupancy(kernel, (block, 1, 1), shared_mem_bytes)?;
        let resident = u64::from(per_sm) * self.gpu().multiprocessors()? as u64;
        let needed = n.div_ceil(block.max(1) as usize) as u64;
        let blocks = resident.min(needed).clamp(1, u64::from(u32::MAX)) as u32;
        Ok(LaunchConfig {
            grid: (blocks, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::simulated_sm::blocks;

    #[test]
    fn the_simulated_multiprocessor_is_limited_by_threads_blocks_and_shared_memory() {
        assert_eq!(blocks(256, 0), 8); // 2048 threads
        assert_eq!(blocks(32, 0), 32); // 32 blocks
        assert_eq!(blocks(1024, 0), 2);
        assert_eq!(blocks(33, 0), 32); // two warps each: 32 by threads, 32 by blocks
        assert_eq!(blocks(100, 0), 16); // four warps each
        assert_eq!(blocks(128, 48 * 1024), 4); // 228 KiB / 49 KiB
        assert_eq!(blocks(128, 227 * 1024), 1);
        assert_eq!(blocks(128, 228 * 1024), 0);
    }
}
