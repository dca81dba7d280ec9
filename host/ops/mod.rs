//! Safe, shape-checked operations on device-resident data, a folder per kernel family with the
//! same three files: `mod.rs` (the operands checked once, the public methods), `plan.rs` (a pure
//! `Plan::choose` over the shapes and the device's facts, unit-tested without a `Gpu`) and
//! `kernels.rs` (the plan's kernel, launched through the launchers `#[kernel]` generates). A
//! family with more to say has a file per idea beside them (`reduce/axis.rs`,
//! `softmax/grid_row.rs`, `matmul/wgmma.rs`). Launch shapes come from [`crate::launch_config`],
//! device facts from [`crate::device`].

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

use crate::error::{Error, Result};

/// Errors unless `lhs == rhs`.
pub(crate) fn same_shape(op: &'static str, lhs: &[usize], rhs: &[usize], rule: &'static str) -> Result<()> {
    if lhs == rhs {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op,
            lhs: lhs.to_vec(),
            rhs: rhs.to_vec(),
            rule,
        })
    }
}
