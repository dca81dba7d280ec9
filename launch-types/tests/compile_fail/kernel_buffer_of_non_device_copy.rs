//! A kernel whose buffer's element is a struct that is not `DeviceCopy`: no launch could ever
//! pass it, so the error is at the kernel's definition, naming the type.

use gpukern_device::{kernel, mem, thread};

#[derive(Clone, Copy)]
#[repr(C)]
pub struct U32x4 {
    pub v: [u32; 4],
}

/// # Safety
/// `x` holds `n` elements.
#[kernel]
pub unsafe fn first_lane(x: *const U32x4, out: *mut u32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        unsafe { mem::store(out, i, mem::load(x, i).v[0]) }
    }
}

fn main() {}
