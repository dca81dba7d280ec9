//! Safe, shape-checked operations on device-resident data, one module per kernel family (a
//! folder where the family has plans: `mod.rs` the public operations, `plan.rs` the plan and its
//! choice, `launch.rs` the plan launched). Each operation checks its operands once, picks its
//! plan once, computes the launch configuration ([`crate::launch_config`]) and launches through
//! `crate::raw`; device facts come from [`crate::device`].

#[cfg(feature = "library")]
pub mod add;
#[cfg(feature = "library")]
pub mod cross_entropy;
#[cfg(feature = "library")]
pub mod matmul;
#[cfg(feature = "library")]
pub mod norm;
#[cfg(feature = "library")]
pub mod reduce;
#[cfg(feature = "library")]
pub mod softmax;
#[cfg(feature = "library")]
pub mod transpose;

#[cfg(feature = "library")]
pub(crate) use crate::error::same_shape;
