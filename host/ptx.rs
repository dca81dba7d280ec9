//! The PTX of gpukern's own kernels (`kernels-gpu`), which `build.rs` compiles with
//! `gpukern-build`, and the choice among its modules.
//!
//! One module per architecture (`sm_80`, `sm_90` and `sm_90a`, or `GPUKERN_PTX_ARCHS`). The driver
//! compiles PTX for an architecture forward to any newer GPU, so the best module for a device is
//! the newest one not newer than the device ([`PtxSet::select`]).
//!
//! Below the device: any kernel crate's embedded PTX ([`PtxSet`]), split into one small module
//! per entry point (`ptx/split.rs`), each loaded when first launched (`ptx/load.rs`), the way
//! [`crate::Gpu::new`] loads gpukern's own and [`crate::Gpu::load`] a user's.

mod load;
mod split;

pub use load::{EntryModules, PtxModule, PtxSet, entry_names};
pub(crate) use load::{Function, Functions};

/// gpukern's kernels, every architecture built: the families whose features are enabled (all of
/// them with `library`, the default), none without any.
pub static KERNELS: PtxSet = crate::include_ptx!(kernels_gpu);

/// All modules of gpukern's kernels, oldest architecture first.
pub fn modules() -> &'static [PtxModule] {
    KERNELS.modules
}

/// The newest module of gpukern's kernels that runs on a device of compute capability `cc`.
pub fn select(cc: (i32, i32)) -> Option<&'static PtxModule> {
    KERNELS.select(cc)
}
