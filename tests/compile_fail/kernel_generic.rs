//! A generic `#[kernel]`: a PTX entry point has one signature.

use gpukern_device::kernel;

/// # Safety
/// `x` holds `n` elements.
#[kernel]
pub unsafe fn fill<T: Copy>(x: *mut T, value: T, n: usize) {
    let _ = (x, value, n);
}

fn main() {}
