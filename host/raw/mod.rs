//! Raw kernel launches, one module per kernel family: `unsafe`, arguments in the kernel's order,
//! each a call of the launcher `#[kernel]` generated for the kernel, on the `Gpu`'s library
//! [`crate::Module`] (a cudarc launch on a CUDA device, [`kernels_gpu::sim::Launch`] on the
//! CPU). The safe, shape-checked API is in [`crate::ops`].
//!
//! Safety contract of every function here: the buffers hold as many elements as the kernel's own
//! safety section asks for, given the size arguments, and `cfg` is the launch shape its doc
//! comment gives.

pub(crate) mod launch_count;
#[cfg(feature = "library")]
pub(crate) mod matmul;
