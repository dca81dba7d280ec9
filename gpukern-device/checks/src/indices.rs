//! Thread, block and grid indices.

use gpukern_device::{kernel, mem, thread};

/// One thread writes its global 1-D index to `out[i]` for `i < n`.
///
/// # Safety
/// `out` holds at least `n` elements.
#[kernel]
pub unsafe fn write_index_1d(out: *mut u32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and `out` holds `n` elements (the launcher's contract).
        unsafe { mem::store(out, i, i as u32) }
    }
}
