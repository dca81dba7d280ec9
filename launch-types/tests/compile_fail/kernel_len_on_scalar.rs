//! `#[len(..)]` on a by-value parameter: it says how many elements a kernel touches through a
//! pointer, so on anything else it is refused.

use gpukern_device::kernel;

/// # Safety
/// `x` holds `n` elements.
#[kernel]
pub unsafe fn scale(#[len(n)] x: *mut f32, #[len(1)] factor: f32, n: usize) {
    let _ = (x, factor, n);
}

fn main() {}
