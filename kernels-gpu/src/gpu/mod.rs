//! Device-side helpers shared by the kernels: the role `cuda_std` plays in rust-cuda.
//!
//! Names follow `cuda_std` where they fit (`thread::index_1d`, `thread::sync_threads`). Each
//! helper is an inline wrapper over an NVPTX intrinsic on the GPU, and a call into the
//! simulator ([`crate::sim`]) on the host.
//!
//! * [`async_copy`]: `cp.async` copies from global to shared memory ([`async_copy::copy16`]).
//! * [`thread`]: thread, block and grid indices (1-D and 2-D), the block barrier.
//! * [`shared`]: the block's dynamic shared memory.
//! * [`mem`]: loads and stores through raw pointers; the only way kernels touch memory.
//! * [`block`]: block-scope collectives (reductions through shared memory).
//! * [`hint`]: [`hint::recompute`], a value LLVM may not hoist out of a loop.
//! * [`math`]: the few float functions `core` lacks on the GPU.
//! * [`vector`]: four floats as one 16-byte load or store ([`vector::F4`]).
//! * [`warp`]: warp-scope collectives (`shfl_xor`, `reduce_max`, `reduce_sum`) through shuffles.

pub mod async_copy;
pub mod block;
pub mod hint;
pub mod math;
pub mod mem;
pub mod shared;
pub mod thread;
pub mod vector;
pub mod warp;
