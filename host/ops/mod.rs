//! Safe, shape-checked operations on device-resident data, one module per kernel family: check
//! shapes and owners, compute the launch configuration, launch through [`crate::raw`].

pub mod add;
pub mod matmul;
pub mod softmax;

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
