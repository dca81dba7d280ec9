//! Device `printf` and `assert` ([`gpukern_device::print!`], [`gpukern_device::device_assert!`]).

use gpukern_device::{device_assert, kernel, mem, print, thread};

/// Thread 0 of each block prints one line: its block index, then a value of each conversion
/// class derived from it (32-bit ints, a 64-bit int, doubles from an `f32` and an `f64`, a
/// pointer, a character and `%%`). Block `b` prints
/// `block <b>: int -<7b+7> hex 0x<b+250> long <b*10^10> float <b/4+0.5> exp <1.5*10^b> g <b/8> ptr 0x<4096+16b> char <'A'+b> 100%`
/// with the formats below; the other threads print nothing.
///
/// # Safety
/// None beyond a kernel's: it touches no memory (the argument buffer is the thread's own).
#[kernel]
pub unsafe fn print_values() {
    if thread::thread_idx_x() == 0 && thread::thread_idx_y() == 0 {
        let b = thread::block_idx_x();
        let int = -7 * (b as i32 + 1);
        let long = b as i64 * 10_000_000_000;
        let float = b as f32 * 0.25 + 0.5;
        let exp = 1.5 * pow10(b);
        let g = b as f64 / 8.0;
        let ptr = core::ptr::without_provenance::<u8>(0x1000 + 16 * b as usize);
        print!(
            "block %u: int %d hex %#x long %ld float %.3f exp %e g %g ptr %p char %c 100%%\n",
            b,
            int,
            b + 250,
            long,
            float,
            exp,
            g,
            ptr,
            b'A' + b as u8
        );
    }
}

/// `10^b` by repeated multiplication (exact up to `10^22`; `core` has no `powi` on the GPU).
#[inline(always)]
fn pow10(b: u32) -> f64 {
    let mut p = 1.0;
    for _ in 0..b {
        p *= 10.0;
    }
    p
}

/// One thread asserts that `x[i] >= 0` for its element `i < n` (a NaN fails too). A negative
/// element stops the launch: `CUDA_ERROR_ASSERT` on the GPU, `Violation::Assertion` in the
/// simulator.
///
/// # Safety
/// `x` must hold `n` readable `f32`s.
#[kernel]
pub unsafe fn assert_non_negative(x: *const f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and `x` holds `n` elements (the launcher's contract).
        let v = unsafe { mem::load(x, i) };
        device_assert!(v >= 0.0, "x[i] >= 0");
    }
}

/// Thread 0 of block 0 prints `print_once: no conversions` (a format without conversions:
/// `vprintf` with a null argument buffer); the other threads print nothing.
///
/// # Safety
/// None beyond a kernel's: it touches no memory.
#[kernel]
pub unsafe fn print_once() {
    if thread::index_1d() == 0 && thread::block_idx_y() == 0 && thread::thread_idx_y() == 0 {
        print!("print_once: no conversions\n");
    }
}
