//! Thread-block cluster launches (sm_90): [`Module::clustered`], a launcher that sets the
//! cluster option of the launch pipeline (`module/launch.rs`: the checks a cluster shape must
//! pass, the non-portable opt-in, `cuLaunchKernelEx` with the cluster-dimension attribute).

use gpukern_device::launch::{Declared, Kernel, Launcher, Scalar};
use gpukern_device::sim::Dim3;

use super::args::{LaunchKind, ModuleArgs};
use super::loaded::Module;
use crate::error::{Error, Result};
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
    fn begin<'a>(&'a self, kernel: &'static Kernel, config: LaunchConfig) -> ModuleArgs<'a> {
        let mut args = self.module.begin(kernel, config);
        args.kind = LaunchKind::Clustered(self.shape);
        if let Some(launch) = &mut args.sim {
            let (x, y, z) = self.shape;
            launch.cluster(Dim3::new(x, y, z));
        }
        args
    }

    forward_args_to_module!();
}
