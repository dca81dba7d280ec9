//! Element types other than f32 through [`mem::load`] / [`mem::store`] (f64, i32, u32, u64, u8,
//! f16, bf16: one `ld`/`st` of the type's size each), the f16/bf16 conversions of
//! [`gpukern_device::convert`], packed f16 pairs, and the f64 -> f32 cast.
//!
//! Every kernel is one thread per element (per pair for the packed one) over a 1-D grid with a
//! tail guard, and every result is exact: integer arithmetic wraps or saturates as stated, float
//! arithmetic is exact before the final rounding or one fused `fma`, so the GPU's output must
//! equal the CPU reference bit for bit.

use gpukern_device::convert::{
    bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, load_bf16x2, load_f16x2, store_bf16x2, store_f16x2,
};
use gpukern_device::{bf16, f16, kernel, math, mem, thread};

/// One thread: `y[i] = 2 * x[i]` in f64 (exact, up to overflow to infinity) for `i < n`.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn scale_f64(x: *const f64, y: *mut f64, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements (the launcher's contract).
        unsafe { mem::store(y, i, mem::load(x, i) * 2.0) }
    }
}

/// One thread: `y[i] = x[i] * 2` in i32, wrapping on overflow, for `i < n`.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn scale_i32(x: *const i32, y: *mut i32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements.
        unsafe { mem::store(y, i, mem::load(x, i).wrapping_mul(2)) }
    }
}

/// One thread: `y[i] = x[i] * 2` in u32, wrapping on overflow, for `i < n`.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn scale_u32(x: *const u32, y: *mut u32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements.
        unsafe { mem::store(y, i, mem::load(x, i).wrapping_mul(2)) }
    }
}

/// One thread: `y[i] = x[i] * 2` in u64, wrapping on overflow, for `i < n`.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn scale_u64(x: *const u64, y: *mut u64, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements.
        unsafe { mem::store(y, i, mem::load(x, i).wrapping_mul(2)) }
    }
}

/// One thread: `y[i] = x[i] * 2` in u8, saturating at 255 (so inputs 128..=255 give 255), for
/// `i < n`. Byte accesses: neighbouring threads share a 32-bit word, which must not race.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn scale_u8(x: *const u8, y: *mut u8, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements.
        unsafe { mem::store(y, i, mem::load(x, i).saturating_mul(2)) }
    }
}

/// One thread: `y[i] = 2 * x[i]` in f16 through f32 (widen, double exactly, round back: values
/// above 32752 become infinity), for `i < n`.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn scale_f16(x: *const f16, y: *mut f16, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements.
        unsafe { mem::store(y, i, f32_to_f16(f16_to_f32(mem::load(x, i)) * 2.0)) }
    }
}

/// One thread: `y[i] = 2 * x[i]` in bf16 through f32 (exact, up to overflow to infinity), for
/// `i < n`.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn scale_bf16(x: *const bf16, y: *mut bf16, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements.
        unsafe { mem::store(y, i, f32_to_bf16(bf16_to_f32(mem::load(x, i)) * 2.0)) }
    }
}

/// One thread: `h[i] = f16(x[i])` (rounded to nearest even) and `y[i] = f32(h[i])`, for `i < n`.
/// `h` shows the rounding bit for bit, `y` the value it stands for.
///
/// # Safety
/// `x`, `h` and `y` point to at least `n` elements each in global memory, `h` and `y` writable
/// and overlapping nothing else.
#[kernel]
pub unsafe fn round_trip_f16(x: *const f32, h: *mut f16, y: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x`, `h` and `y` hold `n` elements.
        unsafe {
            let half = f32_to_f16(mem::load(x, i));
            mem::store(h, i, half);
            mem::store(y, i, f16_to_f32(half));
        }
    }
}

/// One thread: `h[i] = bf16(x[i])` (rounded to nearest even) and `y[i] = f32(h[i])`, for `i < n`.
///
/// # Safety
/// `x`, `h` and `y` point to at least `n` elements each in global memory, `h` and `y` writable
/// and overlapping nothing else.
#[kernel]
pub unsafe fn round_trip_bf16(x: *const f32, h: *mut bf16, y: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x`, `h` and `y` hold `n` elements.
        unsafe {
            let b = f32_to_bf16(mem::load(x, i));
            mem::store(h, i, b);
            mem::store(y, i, bf16_to_f32(b));
        }
    }
}

/// One thread, pair `j` (elements `2j` and `2j + 1`): `y = f16(fma(a, x, y))` on both, with the
/// pair read from `x` and `y` and written to `y` as one 4-byte access each; for an odd `n` the
/// last thread does the lone last element with 2-byte accesses. Threads: `n.div_ceil(2)`.
///
/// # Safety
/// `x` and `y` point to at least `n` f16 each in global memory, both 4-byte aligned, `y`
/// writable and not overlapping `x`.
#[kernel]
pub unsafe fn axpy_f16x2(a: f32, x: *const f16, y: *mut f16, n: usize) {
    let i = 2 * thread::index_1d();
    if i + 1 < n {
        // SAFETY: `i + 1 < n` and `i` is even: a whole, aligned pair inside both buffers.
        unsafe {
            let [x0, x1] = load_f16x2(x, i);
            let [y0, y1] = load_f16x2(y, i);
            store_f16x2(y, i, [math::fma(a, x0, y0), math::fma(a, x1, y1)]);
        }
    } else if i < n {
        // SAFETY: `i < n`.
        unsafe {
            let v = math::fma(a, f16_to_f32(mem::load(x, i)), f16_to_f32(mem::load(y, i)));
            mem::store(y, i, f32_to_f16(v));
        }
    }
}

/// [`axpy_f16x2`](fn@axpy_f16x2) in bf16: pair `j` (elements `2j`, `2j + 1`) gets `y = bf16(fma(a, x, y))`
/// through one 4-byte load of each input and one `cvt.rn.bf16x2.f32` + 4-byte store; the lone
/// last element of an odd `n` with 2-byte accesses. Threads: `n.div_ceil(2)`.
///
/// # Safety
/// `x` and `y` point to at least `n` bf16 each in global memory, both 4-byte aligned, `y`
/// writable and not overlapping `x`.
#[kernel]
pub unsafe fn axpy_bf16x2(a: f32, x: *const bf16, y: *mut bf16, n: usize) {
    let i = 2 * thread::index_1d();
    if i + 1 < n {
        // SAFETY: `i + 1 < n` and `i` is even: a whole, aligned pair inside both buffers.
        unsafe {
            let [x0, x1] = load_bf16x2(x, i);
            let [y0, y1] = load_bf16x2(y, i);
            store_bf16x2(y, i, [math::fma(a, x0, y0), math::fma(a, x1, y1)]);
        }
    } else if i < n {
        // SAFETY: `i < n`.
        unsafe {
            let v = math::fma(a, bf16_to_f32(mem::load(x, i)), bf16_to_f32(mem::load(y, i)));
            mem::store(y, i, f32_to_bf16(v));
        }
    }
}

/// One thread: `y[i] = x[i] as f32` (`cvt.rn.f32.f64`: to nearest even, overflow to infinity,
/// subnormal results kept), for `i < n`.
///
/// # Safety
/// `x` and `y` point to at least `n` elements each in global memory, `y` writable and not
/// overlapping `x`.
#[kernel]
pub unsafe fn cast_f64_to_f32(x: *const f64, y: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; `x` and `y` hold `n` elements.
        unsafe { mem::store(y, i, mem::load(x, i) as f32) }
    }
}
