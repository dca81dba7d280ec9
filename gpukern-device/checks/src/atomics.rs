//! Atomic read-modify-writes ([`gpukern_device::atomic`]): histograms in global and shared
//! memory, float sums, maxima, a compare-and-swap counter, and every operation at every scope.
//!
//! Traffic is given per thread. Atomics on one address serialise where they meet (in L2 for
//! global memory, in the SM for shared memory), so a kernel's cost grows with the number of
//! threads that hit the same element, not only with its bytes.

use gpukern_device::atomic::{self, AtomicAdd, AtomicBits, AtomicMinMax, Scope};
use gpukern_device::{kernel, mem, shared, thread};

/// One thread per input element: thread `i < n` adds 1 to `bins[x[i] % nbins]` with a
/// device-scope atomic (CUDA's `atomicAdd`). Reads 4 bytes of `x`, one 4-byte atomic on `bins`.
/// `bins` holds `nbins > 0` counters, zeroed by the host.
///
/// # Safety
/// `x` holds `n` elements and `bins` `nbins > 0` writable counters.
#[kernel]
pub unsafe fn histogram(x: *const u32, n: usize, bins: *mut u32, nbins: u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` elements of `x`; the bin is below `nbins` (the launcher's contract).
        unsafe {
            let bin = mem::load(x, i) % nbins;
            atomic::add(bins, bin as usize, 1u32, Scope::Device);
        }
    }
}

/// A per-block histogram in shared memory, then one global atomic per non-empty bin: thread `t`
/// zeroes shared bins `t, t + blockDim, ...`; after a barrier, thread `i < n` adds 1 to shared
/// bin `x[i] % nbins` (block scope); after a second barrier, thread `t` adds its shared bins to
/// `bins` (device scope). Reads 4 bytes of `x`; global atomics drop from one per element to at
/// most `nbins` per block. Needs `4 * nbins` bytes of shared memory; `bins` zeroed by the host.
///
/// # Safety
/// `x` holds `n` elements, `bins` `nbins > 0` writable counters, and the launch gives
/// `4 * nbins` bytes of shared memory.
#[kernel]
pub unsafe fn histogram_shared(x: *const u32, n: usize, bins: *mut u32, nbins: u32) {
    let local = shared::dynamic::<u32>();
    let (tid, threads) = (thread::thread_idx_x(), thread::block_dim_x());
    let mut b = tid;
    while b < nbins {
        // SAFETY: `b < nbins`, and shared memory holds `nbins` counters (the launcher's contract).
        unsafe { mem::store(local, b as usize, 0u32) };
        b += threads;
    }
    thread::sync_threads();
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` elements of `x`; the bin is below `nbins`.
        unsafe {
            let bin = mem::load(x, i) % nbins;
            atomic::add(local, bin as usize, 1u32, Scope::Block);
        }
    }
    thread::sync_threads();
    let mut b = tid;
    while b < nbins {
        // SAFETY: `b < nbins` counters in shared memory and in `bins`.
        unsafe {
            let count = mem::load(local, b as usize);
            if count != 0 {
                atomic::add(bins, b as usize, count, Scope::Device);
            }
        }
        b += threads;
    }
}

/// Thread `i < n` adds `x[i]` to `total[0]` (f32, device scope). Reads 4 bytes, one 4-byte
/// atomic, all on one address. The order of the additions is not fixed, so the sum is exact only
/// where every partial sum is (integers or halves below 2^24, as the tests use).
///
/// # Safety
/// `x` holds `n` elements and `total` one writable element.
#[kernel]
pub unsafe fn sum_f32(x: *const f32, n: usize, total: *mut f32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` elements of `x`; `total` holds one float.
        unsafe { atomic::add(total, 0, mem::load(x, i), Scope::Device) };
    }
}

/// Thread `i < n` adds `x[i]` to `total[0]` (f64, device scope). Reads 8 bytes, one 8-byte
/// atomic on one address; exact where every partial sum is (below 2^53).
///
/// # Safety
/// `x` holds `n` elements and `total` one writable element.
#[kernel]
pub unsafe fn sum_f64(x: *const f64, n: usize, total: *mut f64) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` elements of `x`; `total` holds one double.
        unsafe { atomic::add(total, 0, mem::load(x, i), Scope::Device) };
    }
}

/// Thread `i < n` raises `out[0]` to `x[i]` (u32 max, device scope). Reads 4 bytes, one 4-byte
/// atomic; `out[0]` starts at 0 (the host's).
///
/// # Safety
/// `x` holds `n` elements and `out` one writable element.
#[kernel]
pub unsafe fn max_u32(x: *const u32, n: usize, out: *mut u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` elements of `x`; `out` holds one value.
        unsafe { atomic::max(out, 0, mem::load(x, i), Scope::Device) };
    }
}

/// Thread `i < n` raises `out[0]` to `x[i]` and lowers `out[1]` to it (i32 max and min, device
/// scope). Reads 4 bytes, two 4-byte atomics; `out` starts at `[i32::MIN, i32::MAX]`.
///
/// # Safety
/// `x` holds `n` elements and `out` two writable elements.
#[kernel]
pub unsafe fn max_min_i32(x: *const i32, n: usize, out: *mut i32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` elements of `x`; `out` holds two values.
        unsafe {
            let v = mem::load(x, i);
            atomic::max(out, 0, v, Scope::Device);
            atomic::min(out, 1, v, Scope::Device);
        }
    }
}

/// A counter built on compare-and-swap: thread `i < n` increments `counter[0]` by a CAS loop
/// (guess, swap, retry with the value seen) and writes the value it replaced, its ticket, to
/// `tickets[i]`. The tickets are a permutation of `0..n`. One or more 4-byte CAS per thread
/// (more under contention), one 4-byte store; `counter[0]` starts at 0.
///
/// # Safety
/// `counter` holds one writable element and `tickets` `n`.
#[kernel]
pub unsafe fn cas_counter(n: usize, counter: *mut u32, tickets: *mut u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `counter` holds one value, `tickets` `n`.
        unsafe {
            // Never a plain load of the counter: it would race with the other threads' CAS.
            let mut expected = 0u32;
            loop {
                let seen = atomic::cas(counter, 0, expected, expected.wrapping_add(1), Scope::Device);
                if seen == expected {
                    break;
                }
                expected = seen;
            }
            mem::store(tickets, i, expected);
        }
    }
}

/// The scope a kernel argument names: 0 block, 1 device, anything else system.
fn scope(code: u32) -> Scope {
    match code {
        0 => Scope::Block,
        1 => Scope::Device,
        _ => Scope::System,
    }
}

/// An integer element for `int_ops`.
trait Int: AtomicAdd + AtomicMinMax + AtomicBits + PartialEq {
    const ZERO: Self;
    const ONE: Self;
    /// The value of thread `i` of `n`: `i` for unsigned types, `i - n / 2` for signed ones.
    fn value(i: usize, n: usize) -> Self;
    /// `self + 1`, wrapping.
    fn next(self) -> Self;
}

macro_rules! int {
    ($t:ty, $value:expr) => {
        impl Int for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn value(i: usize, n: usize) -> Self {
                let value: fn(usize, usize) -> $t = $value;
                value(i, n)
            }
            fn next(self) -> Self {
                self.wrapping_add(1)
            }
        }
    };
}

int!(u32, |i, _| i as u32);
int!(i32, |i, n| i as i32 - (n / 2) as i32);
int!(u64, |i, _| i as u64);
int!(i64, |i, n| i as i64 - (n / 2) as i64);

/// Every integer atomic at the scope `code` names ([`scope`]), on the 6 elements of `out`, for
/// thread `i < n` with value `v` ([`Int::value`]): `out[0] += 1`; `out[1] = max(out[1], v)`;
/// `out[2] = min(out[2], v)`; `out[3]` exchanged for `v` and the old value added to `out[4]`
/// (so `out[3] + out[4]` is the sum of every `v` plus `out[3]`'s start); `out[5]` incremented
/// by a CAS loop. Six or more atomics per thread, on six addresses. With scope 0 (block),
/// launch one block only: a block-scope atomic is not atomic with respect to other blocks.
unsafe fn int_ops<T: Int>(code: u32, n: usize, out: *mut T) {
    let i = thread::index_1d();
    if i >= n {
        return;
    }
    let v = T::value(i, n);
    // SAFETY: `out` holds 6 elements (the launcher's contract).
    unsafe {
        match scope(code) {
            // One arm per scope, each with the scope as a constant, as a kernel would write it.
            Scope::Block => int_ops_at(out, v, Scope::Block),
            Scope::Device => int_ops_at(out, v, Scope::Device),
            Scope::System => int_ops_at(out, v, Scope::System),
        }
    }
}

/// The body of `int_ops` at one scope.
#[inline(always)]
unsafe fn int_ops_at<T: Int>(out: *mut T, v: T, scope: Scope) {
    // SAFETY: `out` holds 6 elements (the caller's contract).
    unsafe {
        atomic::add(out, 0, T::ONE, scope);
        atomic::max(out, 1, v, scope);
        atomic::min(out, 2, v, scope);
        let old = atomic::exchange(out, 3, v, scope);
        atomic::add(out, 4, old, scope);
        let mut expected = T::ZERO;
        loop {
            let seen = atomic::cas(out, 5, expected, expected.next(), scope);
            if seen == expected {
                break;
            }
            expected = seen;
        }
    }
}

/// `int_ops` on u32 (`v = i`).
///
/// # Safety
/// `out` holds 6 writable elements; with scope 0 the grid has one block.
#[kernel]
pub unsafe fn int_ops_u32(scope: u32, n: usize, out: *mut u32) {
    // SAFETY: the launcher's contract is `int_ops`'s.
    unsafe { int_ops(scope, n, out) }
}

/// `int_ops` on i32 (`v = i - n / 2`).
///
/// # Safety
/// `out` holds 6 writable elements; with scope 0 the grid has one block.
#[kernel]
pub unsafe fn int_ops_i32(scope: u32, n: usize, out: *mut i32) {
    // SAFETY: the launcher's contract is `int_ops`'s.
    unsafe { int_ops(scope, n, out) }
}

/// `int_ops` on u64 (`v = i`).
///
/// # Safety
/// `out` holds 6 writable elements; with scope 0 the grid has one block.
#[kernel]
pub unsafe fn int_ops_u64(scope: u32, n: usize, out: *mut u64) {
    // SAFETY: the launcher's contract is `int_ops`'s.
    unsafe { int_ops(scope, n, out) }
}

/// `int_ops` on i64 (`v = i - n / 2`).
///
/// # Safety
/// `out` holds 6 writable elements; with scope 0 the grid has one block.
#[kernel]
pub unsafe fn int_ops_i64(scope: u32, n: usize, out: *mut i64) {
    // SAFETY: the launcher's contract is `int_ops`'s.
    unsafe { int_ops(scope, n, out) }
}

/// A float element for `float_ops`.
trait Float: AtomicAdd + AtomicBits + PartialOrd {
    const NEG_INFINITY: Self;
    /// `i / 2`, exact.
    fn half(i: usize) -> Self;
}

impl Float for f32 {
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    fn half(i: usize) -> Self {
        i as f32 * 0.5
    }
}

impl Float for f64 {
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    fn half(i: usize) -> Self {
        i as f64 * 0.5
    }
}

/// Every float atomic at the scope `code` names, on the 4 elements of `out`, for thread `i < n`
/// with `v = i / 2`: `out[0] += v`; `out[1]` exchanged for `v` and the old value added to
/// `out[2]`; `out[3]` raised to `v` by a CAS loop on its bits (a float max, which PTX lacks).
/// `out` starts at `[0, 0, 0, -inf]`; sums are exact below 2^24 (f32). With scope 0, one block.
unsafe fn float_ops<T: Float>(code: u32, n: usize, out: *mut T) {
    let i = thread::index_1d();
    if i >= n {
        return;
    }
    let v = T::half(i);
    // SAFETY: `out` holds 4 elements (the launcher's contract).
    unsafe {
        match scope(code) {
            Scope::Block => float_ops_at(out, v, Scope::Block),
            Scope::Device => float_ops_at(out, v, Scope::Device),
            Scope::System => float_ops_at(out, v, Scope::System),
        }
    }
}

/// The body of `float_ops` at one scope.
#[inline(always)]
unsafe fn float_ops_at<T: Float>(out: *mut T, v: T, scope: Scope) {
    // SAFETY: `out` holds 4 elements (the caller's contract).
    unsafe {
        atomic::add(out, 0, v, scope);
        let old = atomic::exchange(out, 1, v, scope);
        atomic::add(out, 2, old, scope);
        let mut expected = T::NEG_INFINITY;
        while expected < v {
            let seen = atomic::cas(out, 3, expected, v, scope);
            // The CAS compared bits; `==` is the same test here, where no value is NaN or -0.0.
            if seen == expected {
                break;
            }
            expected = seen;
        }
    }
}

/// `float_ops` on f32.
///
/// # Safety
/// `out` holds 4 writable elements; with scope 0 the grid has one block.
#[kernel]
pub unsafe fn float_ops_f32(scope: u32, n: usize, out: *mut f32) {
    // SAFETY: the launcher's contract is `float_ops`'s.
    unsafe { float_ops(scope, n, out) }
}

/// `float_ops` on f64.
///
/// # Safety
/// `out` holds 4 writable elements; with scope 0 the grid has one block.
#[kernel]
pub unsafe fn float_ops_f64(scope: u32, n: usize, out: *mut f64) {
    // SAFETY: the launcher's contract is `float_ops`'s.
    unsafe { float_ops(scope, n, out) }
}
