//! A block/thread simulator: runs a kernel launch on the CPU, checking it as it goes.
//!
//! What it models:
//! * a grid of blocks; blocks run in parallel on the CPU's cores, in no fixed order;
//! * the threads of one block as coroutines on one OS thread: each runs until it reaches a
//!   barrier or returns, so [`crate::gpu::thread::sync_threads`] really synchronises them;
//! * each block's own dynamic shared memory, sized by the launch.
//!
//! What it checks, each report naming the kernel, block, thread and index ([`SimError`]):
//! * reads and writes out of bounds of a global buffer or of shared memory, writes to an input,
//!   and accesses through pointers into no buffer of the launch;
//! * a barrier that not every thread of the block reaches, or threads waiting at different
//!   barriers (reported, never a hang);
//! * shared-memory races: two threads touching the same element between two barriers, at
//!   least one of them writing;
//! * reads of shared memory that no thread wrote since the launch began;
//! * a panic inside kernel code.
//!
//! What it does not model: timing, warp-synchronous execution (threads of a warp do not run in
//! lockstep here), the GPU's weak memory ordering, races in global memory between blocks, and
//! fast-math differences (`exp2` is the CPU's, not `ex2.approx`).

mod block;
pub(crate) mod device;
mod launch;
mod report;
mod shadow;

pub use launch::{Dim3, Launch, LaunchConfig};
pub use report::{Access, SimError, Space, Violation};

/// Most threads a block may have (the CUDA limit on every current GPU).
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
