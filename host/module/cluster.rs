//! Thread-block cluster launches (sm_90): [`Module::clustered`], the checks a cluster shape must
//! pass, and `cuLaunchKernelEx` with the cluster-dimension attribute.

use std::ffi::c_void;

use cudarc::driver::{DriverError, sys};
use gpukern_device::launch::{Declared, Kernel, Launcher, Scalar};
use gpukern_device::sim::Dim3;

use super::{Function, Module, ModuleArgs};
use crate::device::CudaDevice;
use crate::error::{DriverContext, Error, Result};
use crate::launch_config::LaunchConfig;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// Most blocks in a cluster on any sm_90 GPU without the non-portable attribute.
pub const PORTABLE_CLUSTER_BLOCKS: u32 = 8;

/// Most blocks in a cluster with the non-portable attribute (H100/H200).
pub const MAX_CLUSTER_BLOCKS: u32 = 16;

/// A [`Module`] whose launches group their blocks into thread-block clusters of one shape:
/// `my_kernels::k::launch(&module.clustered((4, 1, 1)), config, ..)`. Made by
/// [`Module::clustered`].
///
/// Each launch checks that the grid divides into clusters of the shape, that a cluster has at
/// most [`MAX_CLUSTER_BLOCKS`] blocks, and, on CUDA, that the device has compute capability 9.0
/// or newer ([`Error::InvalidArgument`], [`Error::TooLarge`]);
/// clusters of more than [`PORTABLE_CLUSTER_BLOCKS`] opt the kernel in to non-portable sizes.
/// In the simulator the blocks of a cluster run together ([`gpukern_device::sim::Launch::cluster`]).
#[derive(Clone, Copy)]
pub struct Clustered<'m> {
    module: &'m Module,
    shape: (u32, u32, u32),
}

impl Module {
    /// This module, launching in thread-block clusters of `shape` blocks (x, y, z).
    pub fn clustered(&self, shape: (u32, u32, u32)) -> Clustered<'_> {
        Clustered { module: self, shape }
    }
}

impl Launcher for Clustered<'_> {
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
        args.cluster = Some(self.shape);
        if let Some(launch) = &mut args.sim {
            let (x, y, z) = self.shape;
            launch.cluster(Dim3::new(x, y, z));
        }
        args
    }

    forward_args_to_module!();
}

/// Checks a cluster `shape` for `config`: every extent at least 1, the grid a whole number of
/// clusters, at most [`MAX_CLUSTER_BLOCKS`] blocks in one, and (on CUDA, `cc` given) a device
/// of compute capability 9.0 or newer.
pub(crate) fn check(
    op: &'static str,
    config: LaunchConfig,
    shape: (u32, u32, u32),
    cc: Option<(i32, i32)>,
) -> Result<()> {
    if let Some((major, minor)) = cc {
        if major < 9 {
            return Err(Error::InvalidArgument {
                op,
                detail: format!(
                    "thread-block clusters need a GPU of compute capability 9.0 or newer; this \
                     one is {major}.{minor}"
                ),
            });
        }
    }
    let (cx, cy, cz) = shape;
    let (gx, gy, gz) = config.grid;
    if cx == 0 || cy == 0 || cz == 0 {
        return Err(Error::InvalidArgument {
            op,
            detail: format!("cluster shape {shape:?} has an empty extent"),
        });
    }
    if gx % cx != 0 || gy % cy != 0 || gz % cz != 0 {
        return Err(Error::InvalidArgument {
            op,
            detail: format!(
                "grid {:?} does not divide into clusters of {shape:?}: each grid extent must be a \
                 multiple of the cluster's",
                config.grid
            ),
        });
    }
    let blocks = cx as u64 * cy as u64 * cz as u64;
    if blocks > MAX_CLUSTER_BLOCKS as u64 {
        return Err(Error::TooLarge {
            op,
            detail: format!(
                "clusters of {shape:?} have {blocks} blocks; at most {MAX_CLUSTER_BLOCKS} \
                 ({PORTABLE_CLUSTER_BLOCKS} portably)"
            ),
        });
    }
    Ok(())
}

impl Function {
    /// Lets the kernel launch in clusters of `shape`: above [`PORTABLE_CLUSTER_BLOCKS`] blocks
    /// the kernel must allow non-portable cluster sizes (set once; harmless to repeat).
    pub(crate) fn allow_cluster(&self, (x, y, z): (u32, u32, u32)) -> Result<()> {
        if x * y * z <= PORTABLE_CLUSTER_BLOCKS {
            return Ok(());
        }
        use sys::CUfunction_attribute::*;
        self.func
            .set_attribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            .during("allowing a kernel non-portable cluster sizes")
    }
}

/// `cuLaunchKernelEx` of `function` with `config` in clusters of `shape` on `device`'s stream.
///
/// # Safety
/// As `cuLaunchKernel`: one pointer per kernel parameter, to a value of its size; the caller
/// upholds the kernel's contract.
pub(crate) unsafe fn launch(
    function: &Function,
    config: LaunchConfig,
    (x, y, z): (u32, u32, u32),
    device: &CudaDevice,
    params: &mut [*mut c_void],
) -> std::result::Result<(), DriverError> {
    // SAFETY: an all-zero attribute is a valid value of the plain-data union, then set.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
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
