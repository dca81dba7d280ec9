//! [`gpukern_device::vector`] on the GPU: every cache hint's instruction moving real data, and
//! the element-wise [`vector::map`] loop on ragged shapes.

use gpukern_device::vector::{self, Lane, LoadHint, StoreHint};
use gpukern_device::{bf16, kernel, thread};

/// The load hint with selector `h` (0 default, 1 read-only, 2 streaming, 3 evict-first, 4
/// evict-last, 5 read-only without an L1 line).
fn load_hint(h: u32) -> LoadHint {
    match h {
        0 => LoadHint::Default,
        1 => LoadHint::ReadOnly,
        2 => LoadHint::Streaming,
        3 => LoadHint::EvictFirst,
        4 => LoadHint::EvictLast,
        _ => LoadHint::NoAllocate,
    }
}

/// The store hint with selector `h` (0 default, 1 streaming, 2 evict-first, 3 evict-last).
fn store_hint(h: u32) -> StoreHint {
    match h {
        0 => StoreHint::Default,
        1 => StoreHint::Streaming,
        2 => StoreHint::EvictFirst,
        _ => StoreHint::EvictLast,
    }
}

/// One thread per whole vector of `N` lanes: `y[v N..][..N] = x[v N..][..N]` with the hints
/// selected by `load` and `store`.
///
/// # Safety
/// `x` and `y` hold `n` elements, 16-byte aligned.
#[inline(always)]
pub unsafe fn copy<T: Lane, const N: usize>(x: *const T, y: *mut T, n: usize, load: u32, store: u32) {
    let v = thread::index_1d();
    if (v + 1) * N <= n {
        // SAFETY: vector `v` lies inside both arrays, at a multiple of `N`.
        unsafe {
            let lanes: [T; N] = vector::load_hinted(x, v * N, load_hint(load));
            vector::store_hinted(y, v * N, lanes, store_hint(store));
        }
    }
}

/// [`copy`] in vectors of 8 bf16 (16 bytes).
///
/// # Safety
/// As [`copy`].
#[kernel]
pub unsafe fn copy_bf16x8(x: *const bf16, y: *mut bf16, n: usize, load: u32, store: u32) {
    // SAFETY: forwarded contract.
    unsafe { copy::<bf16, 8>(x, y, n, load, store) }
}

/// [`copy`] in vectors of 4 bytes (4 bytes: the `.b32` forms).
///
/// # Safety
/// As [`copy`].
#[kernel]
pub unsafe fn copy_u8x4(x: *const u8, y: *mut u8, n: usize, load: u32, store: u32) {
    // SAFETY: forwarded contract.
    unsafe { copy::<u8, 4>(x, y, n, load, store) }
}

/// [`copy`] in vectors of 2 floats (8 bytes: the `.v2` forms).
///
/// # Safety
/// As [`copy`].
#[kernel]
pub unsafe fn copy_f32x2(x: *const f32, y: *mut f32, n: usize, load: u32, store: u32) {
    // SAFETY: forwarded contract.
    unsafe { copy::<f32, 2>(x, y, n, load, store) }
}

/// [`copy`] in vectors of 16 floats (64 bytes: four 16-byte accesses).
///
/// # Safety
/// As [`copy`].
#[kernel]
pub unsafe fn copy_f32x16(x: *const f32, y: *mut f32, n: usize, load: u32, store: u32) {
    // SAFETY: forwarded contract.
    unsafe { copy::<f32, 16>(x, y, n, load, store) }
}

/// `y[r][c] = (x[r][c] + bias[c]) * 0.5 - 1` over a `rows x cols` matrix through
/// [`vector::map`] in chunks of 8 bf16, `y` in f32 (exact for the runner's inputs).
///
/// # Safety
/// `x` and `y` hold `rows * cols` elements, `bias` `cols`, all 16-byte aligned.
#[kernel]
pub unsafe fn map_bias_affine(x: *const bf16, bias: *const f32, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        vector::map::<bf16, f32, 8>(x, y, rows * cols, |chunk, v| {
            let b = chunk.load_columns(bias, cols);
            core::array::from_fn(|k| (v[k] + b[k]) * 0.5 - 1.0)
        })
    }
}
