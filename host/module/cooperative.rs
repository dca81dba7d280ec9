//! Cooperative launches: [`Module::cooperative`], the check that the whole grid can be resident
//! at once, and `cuLaunchKernelEx` with the cooperative attribute. What lets a kernel call the
//! grid-wide barrier [`gpukern_device::grid::sync`].

use std::ffi::c_void;

use cudarc::driver::{DriverError, sys};
use gpukern_device::launch::{Declared, Kernel, Launcher, Scalar};

use super::{Function, Module, ModuleArgs};
use crate::device::CudaDevice;
use crate::error::{DriverContext, Error, Result};
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
/// combined with it. In the simulator the launch is marked cooperative
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
            crate::device::Backend::Simulator => {
                let most = gpukern_device::sim::MAX_COOPERATIVE_THREADS / u64::from(threads.max(1));
                Ok(most.min(u64::from(u32::MAX)) as u32)
            }
            crate::device::Backend::Cuda(device) => {
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
    type Config = LaunchConfig;
    type Input<'a, T: 'a>
        = DeviceSlice<'a, T>
    where
        Self: 'a;
    type Output<'a, T: 'a>
        = DeviceSliceMut<'a, T>
    where
        Self: 'a;
    type Error = Error;
    type Args<'a>
        = ModuleArgs<'a>
    where
        Self: 'a;

    fn begin<'a>(&'a self, kernel: &'static Kernel, config: LaunchConfig) -> ModuleArgs<'a> {
        let mut args = self.module.begin(kernel, config);
        args.cooperative = true;
        if let Some(launch) = &mut args.sim {
            launch.cooperative();
        }
        args
    }

    forward_args_to_module!();
}

/// Blocks of `function` of `threads` threads and `shared_mem_bytes` each resident on the whole
/// device at once; [`Error::InvalidArgument`] where the device cannot launch cooperatively.
fn resident(
    op: &'static str,
    function: &Function,
    device: &CudaDevice,
    threads: u32,
    shared_mem_bytes: u32,
) -> Result<u32> {
    // (The device attribute needs no current context; `resident_per_sm` makes it current for
    // the occupancy query.)
    let supported = device
        .ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)
        .during("asking the device whether it launches cooperatively")?;
    if supported != 1 {
        return Err(Error::InvalidArgument {
            op,
            detail: "the device does not support cooperative launches \
                     (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)"
                .into(),
        });
    }
    let per_sm = function.resident_per_sm(
        &device.ctx,
        threads,
        shared_mem_bytes,
        "asking the driver how many blocks of a cooperative launch fit a multiprocessor",
    )?;
    Ok(per_sm.saturating_mul(device.multiprocessors))
}

/// Checks that `config`'s grid can be resident at once for a cooperative launch of `function`
/// on `device` (and that the device launches cooperatively, with no clusters asked).
pub(crate) fn check(
    op: &'static str,
    config: LaunchConfig,
    cluster: Option<(u32, u32, u32)>,
    function: &Function,
    device: &CudaDevice,
) -> Result<()> {
    if cluster.is_some() {
        return Err(Error::InvalidArgument {
            op,
            detail: "a cooperative launch in thread-block clusters: gpukern launches one or the other".into(),
        });
    }
    let threads = config.block.0 * config.block.1 * config.block.2;
    let most = resident(op, function, device, threads, config.shared_mem_bytes)?;
    let (x, y, z) = config.grid;
    let blocks = u64::from(x) * u64::from(y) * u64::from(z);
    if blocks > u64::from(most) {
        return Err(Error::TooLarge {
            op,
            detail: format!(
                "a cooperative grid of {blocks} blocks {:?}: at most {most} blocks of {threads} \
                 threads and {} bytes of dynamic shared memory are resident at once on this \
                 device ({} multiprocessors); a grid barrier in a larger grid would hang",
                config.grid, config.shared_mem_bytes, device.multiprocessors
            ),
        });
    }
    Ok(())
}

/// `cuLaunchKernelEx` of `function` with `config` as a cooperative launch on `device`'s stream.
///
/// # Safety
/// As `cuLaunchKernel`: one pointer per kernel parameter, to a value of its size; the caller
/// upholds the kernel's contract.
pub(crate) unsafe fn launch(
    function: &Function,
    config: LaunchConfig,
    device: &CudaDevice,
    params: &mut [*mut c_void],
) -> std::result::Result<(), DriverError> {
    // SAFETY: an all-zero attribute is a valid value of the plain-data union, then set.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attribute.value.cooperative = 1;
    let cu = sys::CUlaunchConfig {
        gridDimX: config.grid.0,
        gridDimY: config.grid.1,
        gridDimZ: config.grid.2,
        blockDimX: config.block.0,
        blockDimY: config.block.1,
        blockDimZ: config.block.2,
        sharedMemBytes: config.shared_mem_bytes,
        hStream: device.stream.cu_stream(),
        attrs: &mut attribute,
        numAttrs: 1,
    };
    // SAFETY: the caller's contract; `cu` and `attribute` live through the call.
    unsafe {
        sys::cuLaunchKernelEx(
            &cu,
            function.func.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
        .result()
    }
}
