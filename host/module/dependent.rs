//! Programmatic dependent launches (sm_90): [`Module::dependent`], a launcher that sets the
//! dependent option of the launch pipeline (`module/launch.rs`: `cuLaunchKernelEx` with
//! `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`).

use gpukern_device::launch::{Declared, Kernel, Launcher, Scalar};

use super::args::{LaunchKind, ModuleArgs};
use super::loaded::Module;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// A [`Module`] whose launches are programmatic dependent launches:
/// `my_kernels::combine::launch(&module.dependent(), config, ..)` right after the kernel whose
/// output it reads, on the same stream. Made by [`Module::dependent`].
///
/// The launched kernel's blocks may start before the kernel before it (its prerequisite) has
/// finished: as the prerequisite's blocks exit, or as each calls
/// [`gpukern_device::dependent::launch_dependents`]. So the kernel **must** call
/// [`gpukern_device::dependent::wait`] before it reads what the prerequisite writes (or writes
/// what it reads); `wait` returns once the prerequisite has completed and its memory is visible.
/// What it gains is the launch's latency and start-up, hidden under the prerequisite's last
/// blocks: a few microseconds per launch, which count for short kernels.
///
/// On a GPU before sm_90 the launch is a plain one (and `wait` a no-op there). In a CUDA graph
/// capture the dependency becomes a programmatic edge of the graph. In the simulator launches
/// run one after another, as a plain launch would, and a thread that reads or writes a global
/// buffer before its `wait` is reported ([`gpukern_device::sim::Launch::dependent`]).
#[derive(Clone, Copy)]
pub struct Dependent<'m> {
    module: &'m Module,
}

impl Module {
    /// This module, launching each kernel as dependent on the kernel before it on the stream
    /// (programmatic dependent launch): see [`Dependent`].
    pub fn dependent(&self) -> Dependent<'_> {
        Dependent { module: self }
    }
}

impl Launcher for Dependent<'_> {
    fn begin<'a>(&'a self, kernel: &'static Kernel, config: LaunchConfig) -> ModuleArgs<'a> {
        let mut args = self.module.begin(kernel, config);
        args.kind = LaunchKind::Dependent;
        if let Some(launch) = &mut args.sim {
            launch.dependent();
        }
        args
    }

    forward_args_to_module!();
}
