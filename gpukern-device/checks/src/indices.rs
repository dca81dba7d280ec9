//! Thread, block and grid indices.

use gpukern_device::{kernel, mem, thread, warp};

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

/// One thread of a 3-D launch writes `x + nx * (y + ny * z)` of its global `(x, y, z)` index
/// to that same element of `out`, for the indices inside `nx x ny x nz`.
///
/// # Safety
/// `out` holds at least `nx * ny * nz` elements.
#[kernel]
pub unsafe fn write_index_3d(out: *mut u32, nx: usize, ny: usize, nz: usize) {
    let (x, y, z) = thread::index_3d();
    if x < nx && y < ny && z < nz {
        let i = x + nx * (y + ny * z);
        // SAFETY: `i < nx * ny * nz`.
        unsafe { mem::store(out, i, i as u32) }
    }
}

/// Each warp votes on `predicate(lane) = (lane + warp) % 3 == 0`, on "every lane" (`lane < 32`)
/// and on "no lane" (`lane > 32`); lane 0 writes `[ballot, all(true), any(false), any(p), all(p)]`
/// (booleans as 0/1) to `out[5 * warp..]`, `warp` counting the launch's warps in order.
///
/// Launch: 1-D blocks whose size is a multiple of 32.
///
/// # Safety
/// `out` holds 5 elements per warp of the launch.
#[kernel]
pub unsafe fn warp_votes(out: *mut u32) {
    let lane = warp::lane_id();
    let warp = thread::index_1d() / warp::SIZE as usize;
    let predicate = (lane as usize + warp).is_multiple_of(3);
    let ballot = warp::ballot(predicate);
    let every = warp::all(lane < 32);
    let none = warp::any(lane > 32);
    let some = warp::any(predicate);
    let each = warp::all(predicate);
    if lane == 0 {
        let values = [ballot, every as u32, none as u32, some as u32, each as u32];
        for (k, v) in values.into_iter().enumerate() {
            // SAFETY: `out` holds 5 elements per warp.
            unsafe { mem::store(out, 5 * warp + k, v) }
        }
    }
}
