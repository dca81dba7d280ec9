//! Device-side helpers shared by the kernels: the role `cuda_std` plays in rust-cuda.
//!
//! Names follow `cuda_std` where they fit (`thread::index_1d`, `thread::sync_threads`). Each
//! helper is an inline wrapper over an NVPTX intrinsic on the GPU, and a call into the
//! simulator ([`crate::sim`]) on the host.
//!
//! * [`thread`]: thread, block and grid indices (1-D and 2-D), the block barrier.
//! * [`shared`]: the block's dynamic shared memory.
//! * [`mem`]: loads and stores through raw pointers; the only way kernels touch memory.
//! * [`block`]: block-scope collectives (reductions through shared memory).
//! * [`hint`]: [`hint::recompute`], a value LLVM may not hoist out of a loop.
//! * [`math`]: the few float functions `core` lacks on the GPU.
//! * [`vector`]: four floats as one 16-byte load or store ([`vector::F4`]).
//! * [`warp`]: warp-scope collectives (`shfl_xor`, `reduce_max`, `reduce_sum`) through shuffles.
//! * [`mma`]: the warp's TF32 tensor-core multiply-accumulate (`mma_m16n8k8_tf32`, `to_tf32`).
//! * [`async_copy`]: global-to-shared copies in the background (`cp_async_16`, `commit_group`,
//!   `wait_group`; `cp_async_16_after` and `wait_all` for threads that reuse their own slots).

pub mod async_copy;
pub mod block;
pub mod hint;
pub mod math;
pub mod mem;
pub mod mma;
pub mod shared;
pub mod thread;
pub mod vector;
pub mod warp;
