//! A block/thread simulator: runs a kernel launch on the CPU, checking it as it goes.
//!
//! What it models:
//! * a grid of blocks; blocks run in parallel on the CPU's cores, in no fixed order;
//! * the threads of one block as coroutines on one OS thread: each runs until it reaches a
//!   barrier or returns, so [`crate::gpu::thread::sync_threads`] really synchronises them;
//! * warp shuffles ([`crate::gpu::warp`]) as a rendezvous of the 32 lanes of a warp: each lane
//!   suspends with its value, and the exchange completes when every lane of the warp is there;
//! * each block's own dynamic shared memory, sized by the launch.
//!
//! What it checks, each report naming the kernel, block, thread and index ([`SimError`]):
//! * reads and writes out of bounds of a global buffer or of shared memory, writes to an input,
//!   and accesses through pointers into no buffer of the launch;
//! * a barrier that not every thread of the block reaches, or threads waiting at different
//!   barriers (reported, never a hang);
//! * a warp shuffle that not every lane of the warp reaches (a lane returned, or waits at a
//!   barrier or another shuffle), or one in a warp of fewer than 32 threads;
//! * shared-memory races: two threads touching the same element between two barriers, at
//!   least one of them writing;
//! * reads of shared memory that no thread wrote since the launch began;
//! * a panic inside kernel code.
//!
//! What it does not model: timing, warp-synchronous execution (threads of a warp do not run in
//! lockstep here, they meet only at shuffles), the GPU's weak memory ordering, races in global memory between blocks, and
//! fast-math differences (`exp2` is the CPU's, not `ex2.approx`).

mod async_copy;
mod block;
pub(crate) mod device;
mod global;
mod launch;
mod report;
mod shadow;

pub use launch::{Dim3, Launch, LaunchConfig};
pub use report::{Access, SimError, Space, Violation};

/// Most threads a block may have (the CUDA limit on every current GPU).
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;

/// Threads per warp. A warp is the threads of a block whose linear index (x fastest) divided by
/// 32 is the same; warp shuffles exchange values among its lanes.
pub const WARP_SIZE: u32 = 32;
