//! `setmaxnreg`: a warp-specialised block of three warpgroups (384 threads, launch bounds
//! `(384, 1)`: 168 registers per thread at entry), the first (the producer) giving registers back
//! and the other two (the consumers) taking them; then each thread writes its index to `y`.
//!
//! The correct kernel is [`registers_twin`](fn@registers_twin); [`registers_planted`](fn@registers_planted) asks for more than the
//! producer gave back. Launch: one block of [`THREADS`] threads; `y` holds [`THREADS`] floats.

use gpukern_device::{kernel, mem, thread, wgmma};

/// Threads per block: three warpgroups.
pub const THREADS: u32 = 384;

/// The correct kernel: the producer warpgroup keeps 40 registers per thread, the consumers raise
/// theirs to 232 (`128 x (168 - 40) = 256 x (232 - 168)`); each thread stores its index to
/// `y[tid]`.
///
/// # Safety
/// `y` holds [`THREADS`] floats; one block of [`THREADS`] threads.
#[kernel(launch_bounds(384, 1))]
pub unsafe fn registers_twin(y: *mut f32) {
    let tid = thread::thread_idx_x();
    if tid < 128 {
        wgmma::setmaxnreg_dec::<40>();
    } else {
        wgmma::setmaxnreg_inc::<232>();
    }
    // SAFETY: the contract.
    unsafe { mem::store(y, tid as usize, tid as f32) };
}

/// [`registers_twin`](fn@registers_twin) whose consumers ask for 240 registers per thread (`Rule::Setmaxnreg`):
/// `256 x (240 - 168)` more than the `128 x (168 - 40)` the producer releases, so the second
/// consumer's increase waits forever.
///
/// # Safety
/// As [`registers_twin`](fn@registers_twin).
#[kernel(launch_bounds(384, 1))]
pub unsafe fn registers_planted(y: *mut f32) {
    let tid = thread::thread_idx_x();
    if tid < 128 {
        wgmma::setmaxnreg_dec::<40>();
    } else {
        wgmma::setmaxnreg_inc::<240>();
    }
    // SAFETY: the contract.
    unsafe { mem::store(y, tid as usize, tid as f32) };
}
