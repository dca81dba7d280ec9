//! A `#[kernel]` parameter that is neither a pointer nor a `Scalar`: the launcher cannot copy it
//! into the launch.

use gpukern_device::kernel;

/// Two floats: plain data, but not a `Scalar` (a kernel parameter is at most 8 bytes, one value).
#[derive(Clone, Copy)]
pub struct Pair {
    pub a: f32,
    pub b: f32,
}

/// # Safety
/// `x` holds `n` floats.
#[kernel]
pub unsafe fn scale(x: *mut f32, factor: Pair, n: usize) {
    let _ = (x, factor.a, factor.b, n);
}

fn main() {}
