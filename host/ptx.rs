//! The PTX of gpukern's own kernels (`kernels-gpu`), which `build.rs` compiles with
//! `gpukern-build`, and the choice among its modules.
//!
//! One module per architecture (`sm_80`, `sm_90` and `sm_90a`, or `GPUKERN_PTX_ARCHS`). The driver
//! compiles PTX for an architecture forward to any newer GPU, so the best module for a device is
//! the newest one not newer than the device ([`PtxSet::select`]).

pub use crate::module::{EntryModules, PtxModule, PtxSet, entry_names};

/// gpukern's kernels, every architecture built.
pub static KERNELS: PtxSet = crate::include_ptx!(kernels_gpu);

/// All modules of gpukern's kernels, oldest architecture first.
pub fn modules() -> &'static [PtxModule] {
    KERNELS.modules
}

/// The newest module of gpukern's kernels that runs on a device of compute capability `cc`.
pub fn select(cc: (i32, i32)) -> Option<&'static PtxModule> {
    KERNELS.select(cc)
}
