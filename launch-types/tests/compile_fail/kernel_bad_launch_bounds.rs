//! `#[kernel(launch_bounds(..))]` with bounds a GPU cannot have, or not written as integer
//! literals: each a compile error saying which.

use gpukern_device::kernel;

const THREADS: u32 = 384;

/// # Safety
/// `x` holds `n` elements.
#[kernel(launch_bounds(2048, 1))]
pub unsafe fn too_many_threads(x: *mut f32, n: usize) {
    let _ = (x, n);
}

/// # Safety
/// `x` holds `n` elements.
#[kernel(launch_bounds(384, 0))]
pub unsafe fn no_blocks(x: *mut f32, n: usize) {
    let _ = (x, n);
}

/// # Safety
/// `x` holds `n` elements.
#[kernel(launch_bounds(THREADS))]
pub unsafe fn not_a_literal(x: *mut f32, n: usize) {
    let _ = (x, n);
}

/// # Safety
/// `x` holds `n` elements.
#[kernel(max_threads = 384)]
pub unsafe fn unknown_argument(x: *mut f32, n: usize) {
    let _ = (x, n);
}

fn main() {}
