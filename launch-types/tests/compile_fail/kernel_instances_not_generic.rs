//! `instances(..)` on a kernel that has no generic parameters.

use gpukern_device::kernel;

/// # Safety
/// `x` holds `n` elements.
#[kernel(instances(f32))]
pub unsafe fn fill(x: *mut f32, n: usize) {
    let _ = (x, n);
}

fn main() {}
