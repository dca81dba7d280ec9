//! `Module`: one kernel crate's PTX loaded on a [`Gpu`] (or its simulator twin), and the typed
//! launches of its kernels.
//!
//! A kernel crate's `#[kernel]` functions each come with a generated launcher,
//! `my_kernels::scale::launch(&module, config, &x, &mut y, 2.0, n)`, written against
//! [`gpukern_device::launch::Launcher`]; `Module` implements that trait. On CUDA the launch goes
//! to the entry point of that name in the module's PTX; in the simulator the launcher's closure
//! runs the kernel function once per simulated thread. gpukern's own kernels take the same path
//! ([`Gpu::library`]).
//!
//! Before anything is launched the module checks what a GPU would refuse or crash on:
//! every buffer belongs to the module's `Gpu`, the kernel comes from the crate the module was
//! built from, and the grid, the block (against the kernel's launch bounds and its own
//! register-limited maximum) and the dynamic shared memory (opting the kernel in above 48 KiB)
//! fit the device.
//!
//! Where each part lives: this file, the [`Module`] and its loading; `module/args.rs`, one
//! launch's arguments being assembled ([`ModuleArgs`]); `module/launch.rs`, the one launch
//! pipeline every launch goes through (check, opt in, order, launch, count);
//! `module/cooperative.rs` and `module/cluster.rs`, the two launchers that set an option of that
//! pipeline ([`Cooperative`], [`Clustered`]); `module/launch_count.rs`, the launches counted per
//! kernel; `module/occupancy.rs`, a user kernel's occupancy. The PTX itself is loaded by
//! [`crate::ptx`].

use std::sync::Arc;

use crate::device::{Backend, Gpu};
use crate::error::Result;
use crate::ptx::{Function, Functions};

/// The argument and launch methods of a [`Launcher`] whose `Args` are [`ModuleArgs`]: those of
/// [`Module`] itself. A launcher that only changes how a launch is made ([`Clustered`],
/// [`Cooperative`]) writes its own `begin`, which marks the arguments, and this.
macro_rules! forward_args_to_module {
    () => {
        fn input<'a, T: Copy + 'static>(
            args: &mut ModuleArgs<'a>,
            buffer: DeviceSlice<'a, T>,
            declared: Option<Declared>,
        ) -> *const T
        where
            Self: 'a,
        {
            <Module as Launcher>::input(args, buffer, declared)
        }

        fn output<'a, T: Copy + 'static>(
            args: &mut ModuleArgs<'a>,
            buffer: DeviceSliceMut<'a, T>,
            declared: Option<Declared>,
        ) -> *mut T
        where
            Self: 'a,
        {
            <Module as Launcher>::output(args, buffer, declared)
        }

        fn scalar<'a, S: Scalar>(args: &mut ModuleArgs<'a>, value: S)
        where
            Self: 'a,
        {
            <Module as Launcher>::scalar(args, value)
        }

        fn add_shared_bytes(config: LaunchConfig, bytes: u32) -> LaunchConfig {
            <Module as Launcher>::add_shared_bytes(config, bytes)
        }

        unsafe fn launch<'a>(args: ModuleArgs<'a>, body: &dyn Fn()) -> Result<()>
        where
            Self: 'a,
        {
            // SAFETY: forwarded contract.
            unsafe { <Module as Launcher>::launch(args, body) }
        }
    };
}

mod args;
mod cluster;
mod cooperative;
mod launch;
pub(crate) mod launch_count;
mod occupancy;

pub use crate::ptx::{EntryModules, PtxModule, PtxSet, entry_names};
pub use args::{MAX_PARAM_BYTES, MAX_PARAMS, ModuleArgs};
pub use cluster::{Clustered, MAX_CLUSTER_BLOCKS, PORTABLE_CLUSTER_BLOCKS};
pub use cooperative::Cooperative;
pub use occupancy::simulated_sm;

/// A kernel crate loaded on a [`Gpu`]: launch its kernels with their generated launchers.
///
/// Made by [`Gpu::load`]; cheap to clone. On the simulator it holds no PTX (the simulator runs
/// the kernels' Rust code). Errors from a kernel that faults on the device surface at the next
/// synchronisation ([`Gpu::synchronize`], a download) as [`Error::KernelFailed`](crate::Error::KernelFailed), naming the
/// kernels launched since the last one.
#[derive(Clone)]
pub struct Module {
    backend: Backend,
    krate: &'static str,
    functions: Option<Arc<Functions>>,
}

impl Gpu {
    /// Loads a kernel crate's PTX (`gpukern::include_ptx!(my_kernels)`) on this device: the
    /// newest architecture in it that the device runs.
    ///
    /// Errors: [`Error::UnsupportedDevice`](crate::Error::UnsupportedDevice) if every module is for a newer GPU;
    /// [`Error::Driver`](crate::Error::Driver) if the driver refuses the PTX.
    ///
    /// A crate is loaded once per `Gpu`: loading it again returns the module loaded first.
    pub fn load(&self, ptx: &PtxSet) -> Result<Module> {
        let functions = match &self.backend {
            Backend::Cuda(d) => {
                let mut loaded = d.modules.lock().unwrap_or_else(|p| p.into_inner());
                match loaded.get(ptx.krate) {
                    Some(functions) => Some(functions.clone()),
                    None => {
                        let functions =
                            Arc::new(Functions::select(&d.ctx, d.compute_capability, &d.limits, ptx)?);
                        loaded.insert(ptx.krate, functions.clone());
                        Some(functions)
                    }
                }
            }
            Backend::Simulator => None,
        };
        Ok(Module {
            backend: self.backend.clone(),
            krate: ptx.krate,
            functions,
        })
    }

    /// gpukern's own kernels (`kernels-gpu`), loaded when the `Gpu` was made.
    pub fn library(&self) -> Module {
        match &self.backend {
            Backend::Cuda(d) => Module {
                backend: self.backend.clone(),
                krate: crate::ptx::KERNELS.krate,
                functions: Some(d.library.clone()),
            },
            Backend::Simulator => Module {
                backend: Backend::Simulator,
                krate: crate::ptx::KERNELS.krate,
                functions: None,
            },
        }
    }
}

impl Module {
    /// The `Gpu` this module is loaded on.
    pub fn gpu(&self) -> Gpu {
        Gpu {
            backend: self.backend.clone(),
        }
    }

    /// The kernel crate it was built from.
    pub fn krate(&self) -> &'static str {
        self.krate
    }

    /// The entry points of the loaded PTX, sorted (empty on the simulator, which has no PTX).
    pub fn kernel_names(&self) -> Vec<&str> {
        self.functions
            .iter()
            .flat_map(|f| f.names().iter().copied())
            .collect()
    }

    /// Whether the loaded PTX has the entry point `name` (CUDA only; nothing is loaded to answer).
    pub(crate) fn has_entry(&self, name: &str) -> bool {
        self.functions
            .as_ref()
            .is_some_and(|f| f.names().binary_search(&name).is_ok())
    }

    /// The entry point `name` (CUDA only), loaded on first use; `None` if the module lacks it.
    ///
    /// Errors: a driver error loading it.
    pub(crate) fn function(&self, name: &str) -> Result<Option<Arc<Function>>> {
        match &self.functions {
            Some(f) => f.get(name),
            None => Ok(None),
        }
    }
}
