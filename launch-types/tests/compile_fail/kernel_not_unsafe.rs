//! A `#[kernel]` that is not `unsafe`: it receives raw device pointers.

use gpukern_device::kernel;

#[kernel]
pub fn fill(x: *mut f32, n: usize) {
    let _ = (x, n);
}

fn main() {}
