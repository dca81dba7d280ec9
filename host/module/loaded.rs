//! [`Module`]: one kernel crate's PTX loaded on a [`Gpu`] ([`Gpu::load`], [`Gpu::library`]),
//! and what it answers about its entry points.

use std::sync::Arc;

use crate::device::{Backend, Gpu};
use crate::error::Result;
use crate::ptx::{Function, Functions, PtxSet};

/// A kernel crate loaded on a [`Gpu`]: launch its kernels with their generated launchers.
///
/// Made by [`Gpu::load`]; cheap to clone. On the simulator it holds no PTX (the simulator runs
/// the kernels' Rust code). Errors from a kernel that faults on the device surface at the next
/// synchronisation ([`Gpu::synchronize`], a download) as
/// [`Error::KernelFailed`](crate::Error::KernelFailed), naming the kernels launched since the
/// last one.
#[derive(Clone)]
pub struct Module {
    pub(super) backend: Backend,
    pub(super) krate: &'static str,
    pub(super) functions: Option<Arc<Functions>>,
}

impl Gpu {
    /// Loads a kernel crate's PTX (`gpukern::include_ptx!(my_kernels)`) on this device: the
    /// newest architecture in it that the device runs.
    ///
    /// Errors: [`Error::UnsupportedDevice`](crate::Error::UnsupportedDevice) if every module is
    /// for a newer GPU; [`Error::Driver`](crate::Error::Driver) if the driver refuses the PTX.
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
