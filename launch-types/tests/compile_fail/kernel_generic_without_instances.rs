//! A generic `#[kernel]` without its instances: a PTX entry point has one signature, so the
//! kernel must say which instances to make.

use gpukern_device::kernel;

/// # Safety
/// `x` holds `n` elements.
#[kernel]
pub unsafe fn fill<T: Copy>(x: *mut T, value: T, n: usize) {
    let _ = (x, value, n);
}

fn main() {}
