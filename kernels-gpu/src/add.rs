//! Element-wise kernels: the first tutorial's thread-indexed vector add and `increment_by_one`.
//!
//! Memory traffic: `add` reads 8 and writes 4 bytes per element, `increment_by_one` reads and
//! writes 4; both are bound by memory bandwidth.

use crate::gpu::{mem, thread};
use crate::kernel;

/// Threads per block of the element-wise kernels: a multiple of the warp size that keeps
/// enough blocks per multiprocessor; 256 is the usual choice for a memory-bound kernel.
pub const BLOCK: u32 = 256;

/// `c[i] = a[i] + b[i]` for `i < n`.
///
/// One thread per element: thread `i = blockIdx.x * blockDim.x + threadIdx.x` reads `a[i]` and
/// `b[i]` from global memory and writes `c[i]`; threads past `n` do nothing.
///
/// # Safety
/// `a`, `b` and `c` point to at least `n` floats of device memory; `c` does not overlap `a` or `b`.
#[kernel]
pub unsafe fn add(a: *const f32, b: *const f32, c: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and the buffers hold `n` floats.
        unsafe { mem::store(c, i, mem::load(a, i) + mem::load(b, i)) }
    }
}

/// `x[i] += 1` for `i < n`, in place.
///
/// One thread per element: thread `i` reads and writes `x[i]` in global memory.
///
/// # Safety
/// `x` points to at least `n` floats of device memory.
#[kernel]
pub unsafe fn increment_by_one(x: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and the buffer holds `n` floats.
        unsafe { mem::store(x, i, mem::load(x, i) + 1.0) }
    }
}
