//! `Module`: one kernel crate's PTX loaded on a [`Gpu`](crate::Gpu) (or its simulator twin),
//! and the typed launches of its kernels.
//!
//! A kernel crate's `#[kernel]` functions each come with a generated launcher,
//! `my_kernels::scale::launch(&module, config, &x, &mut y, 2.0, n)`, written against
//! [`gpukern_device::launch::Launcher`]; `Module` implements that trait. On CUDA the launch goes
//! to the entry point of that name in the module's PTX; in the simulator the launcher's closure
//! runs the kernel function once per simulated thread. gpukern's own kernels take the same path
//! ([`Gpu::library`](crate::Gpu::library)).
//!
//! Before anything is launched the module checks what a GPU would refuse or crash on:
//! every buffer belongs to the module's `Gpu`, the kernel comes from the crate the module was
//! built from, and the grid, the block (against the kernel's launch bounds and its own
//! register-limited maximum) and the dynamic shared memory (opting the kernel in above 48 KiB)
//! fit the device.
//!
//! Where each part lives (this file only names them): `module/loaded.rs`, the [`Module`] and its
//! loading; `module/args.rs`, one launch's arguments being assembled ([`ModuleArgs`]);
//! `module/launch.rs`, the one launch pipeline every launch goes through (check, opt in, order,
//! launch, count);
//! `module/cooperative.rs`, `module/cluster.rs` and `module/dependent.rs`, the three launchers
//! that set an option of that pipeline ([`Cooperative`], [`Clustered`], [`Dependent`]);
//! `module/launch_count.rs`, the launches counted per kernel; `module/occupancy.rs`, a user
//! kernel's occupancy. The PTX itself is loaded by [`crate::ptx`].

#[macro_use]
mod args;
mod cluster;
mod cooperative;
mod dependent;
mod launch;
pub(crate) mod launch_count;
mod loaded;
mod occupancy;

pub use crate::ptx::{EntryModules, PtxModule, PtxSet, entry_names};
pub use args::{MAX_PARAM_BYTES, MAX_PARAMS, ModuleArgs};
pub use cluster::{Clustered, MAX_CLUSTER_BLOCKS, PORTABLE_CLUSTER_BLOCKS};
pub use cooperative::Cooperative;
pub use dependent::Dependent;
pub use loaded::Module;
pub use occupancy::simulated_sm;
