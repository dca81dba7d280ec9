//! Kernels that exercise the helpers of `gpukern-device` one at a time: a kernel crate like a
//! user's, compiled to PTX by gpukern's `build.rs` and run on the GPU by gpukern's
//! `tests/device_checks.rs`; its own tests run the same kernels in the simulator.
//!
//! One module per helper family; each kernel's doc comment says what one thread does.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod atomics;
pub mod bounds;
pub mod collectives;
pub mod elements;
pub mod indices;
pub mod math;
pub mod print;
#[cfg(not(target_arch = "nvptx64"))]
pub mod tables;
pub mod tiles;
pub mod vectors;
