//! Block-scope collectives: every thread of the block calls them, with the same arguments
//! where arguments must agree.
//!
//! * [`Scratch`]: reductions and scans over any [`crate::warp::Shuffle`] value with a closure,
//!   through warp shuffles and one slot per warp of a shared scratch the kernel declares by its
//!   type (`#[kernel(shared(scratch: block::Scratch<f32, 256>))]`).
//! * [`reduce`] (and [`reduce_sum`], [`reduce_max`], [`reduce_min`]): the tutorial's tree over a
//!   raw scratch of one f32 per thread.
//!
//! In the simulator each collective is `#[track_caller]` down to its barriers, so its barriers
//! are named by the kernel's call site: threads that diverge into two different calls of one
//! collective wait at different barriers, and are reported. (The barriers inside one call share
//! that name; the collectives are straight-line code every thread runs alike.)

mod scratch;

pub use scratch::Scratch;

use crate::{mem, thread};

/// Combines one value per thread with `op` and returns the result to every thread of the block.
///
/// A tree reduction in shared memory: each round halves the number of active threads, with a
/// barrier between rounds; `log2(blockDim.x)` rounds in all.
///
/// # Safety
/// * Called by every thread of the block (it contains barriers), in a 1-D block whose size is a
///   power of two.
/// * `scratch` points to at least `blockDim.x` floats of shared memory that no other code uses
///   during the call.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce(scratch: *mut f32, value: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let tid = thread::thread_idx_x() as usize;
    let mut active = thread::block_dim_x() as usize / 2;
    // SAFETY: `tid < blockDim.x`, and `scratch` holds `blockDim.x` floats (caller's contract).
    unsafe {
        mem::store(scratch, tid, value);
        thread::sync_threads();
        while active > 0 {
            if tid < active {
                let other = mem::load(scratch, tid + active);
                let mine = mem::load(scratch, tid);
                mem::store(scratch, tid, op(mine, other));
            }
            thread::sync_threads();
            active /= 2;
        }
        let total = mem::load(scratch, 0);
        // Without this barrier a thread could start the next use of `scratch` (its write of
        // `scratch[tid]`) while a slower thread still reads `scratch[0]`.
        thread::sync_threads();
        total
    }
}

/// The sum over the block of one value per thread (see [`reduce`] for the contract).
///
/// # Safety
/// As [`reduce`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_sum(scratch: *mut f32, value: f32) -> f32 {
    // SAFETY: forwarded contract.
    unsafe { reduce(scratch, value, |a, b| a + b) }
}

/// The maximum over the block of one value per thread; NaN if any value is NaN.
///
/// # Safety
/// As [`reduce`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_max(scratch: *mut f32, value: f32) -> f32 {
    // SAFETY: forwarded contract.
    unsafe { reduce(scratch, value, crate::math::max_nan) }
}

/// The minimum over the block of one value per thread; NaN if any value is NaN.
///
/// # Safety
/// As [`reduce`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_min(scratch: *mut f32, value: f32) -> f32 {
    // SAFETY: forwarded contract.
    unsafe { reduce(scratch, value, crate::math::min_nan) }
}
