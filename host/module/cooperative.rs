//! Cooperative launches: [`Module::cooperative`], a launcher that sets the cooperative option of
//! the launch pipeline (`module/launch.rs`: the check that the whole grid can be resident at
//! once, `cuLaunchKernelEx` with the cooperative attribute), and [`Module::cooperative_blocks`].
//! What lets a kernel call the grid-wide barrier [`gpukern_device::grid::sync`].

use gpukern_device::launch::{Declared, Kernel, Launcher, Scalar};

use super::args::{LaunchKind, ModuleArgs};
use super::launch::resident;
use super::loaded::Module;
use crate::device::Backend;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// A [`Module`] whose launches are cooperative: `my_kernels::k::launch(&module.cooperative(),
/// config, ..)`. Made by [`Module::cooperative`].
///
/// A cooperative launch runs every block of its grid at once, so that the kernel may pass a
/// grid-wide barrier ([`gpukern_device::grid::sync`]); the barrier's word is a `u32` of a buffer
/// the launch writes, zeroed before its first launch (`Gpu::zeros`): a launch that ends leaves
/// it ready for the next one queued after it on the same stream, with no zeroing in between.
///
/// Each launch on CUDA first checks that the device supports cooperative launches
/// (`CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`) and that the grid can be resident: at most the
/// blocks of this size and dynamic shared memory that fit one multiprocessor
/// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, asked once per block shape and kernel)
/// times the multiprocessors
/// ([`Error::TooLarge`] with the numbers otherwise: a grid barrier in a grid that is not all
/// resident would hang). Size the grid with [`Module::cooperative_blocks`]. Clusters are not
/// combined with it (a launch is one kind or the other). In the simulator the launch is marked cooperative
/// ([`gpukern_device::sim::Launch::cooperative`]), whose grid may have at most
/// [`gpukern_device::sim::MAX_COOPERATIVE_THREADS`] threads.
#[derive(Clone, Copy)]
pub struct Cooperative<'m> {
    module: &'m Module,
}

impl Module {
    /// This module, launching cooperatively (every block of the grid resident at once).
    pub fn cooperative(&self) -> Cooperative<'_> {
        Cooperative { module: self }
    }

    /// The most blocks of `kernel` with `threads` threads and `shared_mem_bytes` of dynamic
    /// shared memory each that a cooperative launch may have on this module's device: the
    /// blocks resident per multiprocessor times the multiprocessors. In the simulator, the
    /// blocks of `threads` that fit [`gpukern_device::sim::MAX_COOPERATIVE_THREADS`].
    ///
    /// Errors: [`Error::InvalidArgument`] if the kernel is not in the module's PTX or the device
    /// cannot launch cooperatively; a driver error.
    pub fn cooperative_blocks(
        &self,
        kernel: &'static Kernel,
        threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        match &self.backend {
            Backend::Simulator => {
                let most = gpukern_device::sim::MAX_COOPERATIVE_THREADS / u64::from(threads.max(1));
                Ok(most.min(u64::from(u32::MAX)) as u32)
            }
            Backend::Cuda(device) => {
                let function = self
                    .function(kernel.name)?
                    .ok_or_else(|| Error::InvalidArgument {
                        op: kernel.name,
                        detail: format!(
                            "the loaded PTX of `{}` has no entry point `{}`",
                            self.krate, kernel.name
                        ),
                    })?;
                resident(kernel.name, &function, device, threads, shared_mem_bytes)
            }
        }
    }
}

impl Launcher for Cooperative<'_> {
    fn begin<'a>(&'a self, kernel: &'static Kernel, config: LaunchConfig) -> ModuleArgs<'a> {
        let mut args = self.module.begin(kernel, config);
        args.kind = LaunchKind::Cooperative;
        if let Some(launch) = &mut args.sim {
            launch.cooperative();
        }
        args
    }

    forward_args_to_module!();
}
