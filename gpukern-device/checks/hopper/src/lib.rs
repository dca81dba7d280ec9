//! Planted bugs of Hopper's asynchronous protocols, one rule each, every planted kernel beside
//! its correct twin (`<rule>_planted`, `<rule>_twin`): a kernel crate like a user's, compiled to
//! the `sm_90a` PTX by `checks/runner`'s `build.rs` for the GPU (its `hopper_plant` binary launches
//! one by name, for `scripts/sanitize-hopper.sh` to run under compute-sanitizer), and run in the
//! simulator by `gpukern-device/tests/sim_hopper.rs`, which includes these same files.
//!
//! One module per protocol: [`mbarrier`] (bulk copies into shared memory and their transaction
//! barriers), [`tma`] (tensor copies and tensor maps), [`wgmma`] (warpgroup products, proxy
//! fences), [`registers`] (`setmaxnreg`), [`cluster`] (distributed shared memory), [`multicast`]
//! (a ring shared by a cluster: multicast copies, remote arrivals), [`named`] (named barriers). Each kernel's
//! doc comment says what one thread does and, for a planted one, what is wrong.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod cluster;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod mbarrier;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod multicast;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod named;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod registers;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod tiles;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod tma;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod wgmma;
