//! Launch bounds: `#[kernel(launch_bounds(..))]` (`.maxntid` / `.minnctapersm` in the PTX).

use gpukern_device::{kernel, mem, thread};

/// Most threads per block of [`bounded_write_index`](fn@bounded_write_index): three warpgroups, the shape of a Hopper
/// producer/consumer kernel (the launch bounds `setmaxnreg` needs).
pub const BOUNDED_THREADS: u32 = 384;

/// One thread writes its global 1-D index to `out[i]` for `i < n`, like
/// [`write_index_1d`](fn@crate::indices::write_index_1d), in an entry with launch bounds
/// (384, 1): at most 384 threads per block. Traffic: 4 bytes written per element.
///
/// # Safety
/// `out` holds at least `n` elements.
#[kernel(launch_bounds(384, 1))]
pub unsafe fn bounded_write_index(out: *mut u32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and `out` holds `n` elements (the launcher's contract).
        unsafe { mem::store(out, i, i as u32) }
    }
}
