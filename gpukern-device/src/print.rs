//! Device `printf` ([`crate::print!`]) and device `assert` ([`crate::device_assert!`]).
//!
//! * [`crate::print!`]`("block %u: x = %f\n", b, x)` takes a C format, as CUDA's `printf`. The
//!   macro reads the format at compile time and checks each argument against its conversion
//!   through one trait per conversion class ([`Int32`], [`Int64`], [`Double`], [`Pointer`]).
//!   On the GPU it is one call of PTX's `vprintf` system call, which the driver prints on the
//!   host's stdout at the next synchronisation; in the simulator the text is formatted by
//!   [`format()`] (a C-format interpreter matching glibc for these conversions) and written to
//!   stdout at once, and to the launch's [`crate::sim::Output`] when the test asked for one
//!   ([`crate::sim::Launch::capture_output`]). One call's text is never split by another's.
//! * [`crate::device_assert!`]`(cond)` / `device_assert!(cond, "message")`: on the GPU, a false
//!   `cond` calls PTX's `__assertfail` system call (the driver prints the message with the block
//!   and thread, and the launch fails with `CUDA_ERROR_ASSERT`, 710); in the simulator it stops
//!   the launch with [`crate::sim::Violation::Assertion`].
//!
//! Neither touches memory the kernel can see: `vprintf`'s argument buffer is on the thread's
//! stack (local memory), and the format and messages are constants.

#[cfg(not(target_arch = "nvptx64"))]
mod format;

#[cfg(not(target_arch = "nvptx64"))]
pub use format::format;

#[doc(hidden)]
pub use gpukern_device_macros::print as __expand;

/// Prints from every thread that calls it, with a C format as CUDA's device `printf`.
///
/// ```
/// mod kernels {
///     use gpukern_device::{kernel, print, thread};
///
///     /// Thread 0 of each block says which block it is.
///     #[kernel]
///     pub unsafe fn hello(scale: f32) {
///         if thread::thread_idx_x() == 0 {
///             let b = thread::block_idx_x();
///             print!("block %u: %.2f (%ld bytes at %p)\n", b, b as f32 * scale, 4i64, core::ptr::null::<f32>());
///         }
///     }
/// }
/// ```
///
/// The format must be a string literal. Its conversions, and the Rust types each accepts:
///
/// | Conversions | Argument (promoted to) | Types |
/// | --- | --- | --- |
/// | `%d %i %u %x %X %o %c` (also `h`, `hh`) | 32-bit int (`u32`) | [`Int32`]: `i32 u32 i16 u16 i8 u8 bool` |
/// | `%ld %lu %lx %lX %lo` (also `ll`) | 64-bit int (`u64`) | [`Int64`]: `i64 u64 isize usize` |
/// | `%f %F %e %E %g %G %a %A` (also `%lf`) | double (`f64`) | [`Double`]: `f32 f64` |
/// | `%p` | pointer (`u64`) | [`Pointer`]: `*const T`, `*mut T` |
/// | `%%` | none | |
///
/// with flags `- + space # 0`, a width and a precision written as numbers (`*` is refused).
/// A `u64` given to `%d`, an `f32` to `%d`, an `i32` to `%f` are trait errors that name the
/// conversion class; `%s` (no device strings in gpukern) and a wrong number of arguments are
/// `compile_error!`s. Commas split the arguments except inside brackets: put a turbofish with
/// several parameters (`f::<A, B>()`) in parentheses.
///
/// On the GPU the arguments are laid out as C lays out a `va_list` buffer, each aligned to its
/// size (a `#[repr(C)]` struct of the promoted values) and `vprintf(format, &buffer)` is called;
/// CUDA keeps the text in a device buffer (1 MiB by default) and prints it at the next
/// synchronisation, dropping what overflows.
///
/// Each of the following fails to compile, each for the reason its comment gives; the last
/// example shows the same calls fixed.
///
/// A wrong number of arguments, a `compile_error!` on the format (no error code to pin: the
/// message is "print!: the format has 2 conversion(s) but 1 argument(s) were given"):
/// ```compile_fail
/// gpukern_device::print!("%d %d\n", 1i32);
/// ```
/// A `u64` to `%d`: `u64: Int32` does not hold (E0277, "`u64` cannot be printed by a 32-bit
/// integer conversion"); a 64-bit integer needs `%ld`/`%lu`:
/// ```compile_fail,E0277
/// gpukern_device::print!("%d\n", 1u64);
/// ```
/// An `f32` to `%d`: `f32: Int32` does not hold (E0277); C would print its bits as an int:
/// ```compile_fail,E0277
/// gpukern_device::print!("%d\n", 1.5f32);
/// ```
/// An `i32` to `%f`: `i32: Double` does not hold (E0277); C would read garbage:
/// ```compile_fail,E0277
/// gpukern_device::print!("%f\n", 1i32);
/// ```
/// `%s`, refused by a `compile_error!` ("print!: `%s` is not supported: ..."):
/// ```compile_fail
/// gpukern_device::print!("%s\n", 0u64);
/// ```
/// The same calls fixed, which compile (so each failure above is its planted defect alone;
/// `no_run`: `print!` prints on behalf of a simulated thread, and here no launch runs it):
/// ```no_run
/// gpukern_device::print!("%d %d\n", 1i32, 2i32);
/// gpukern_device::print!("%lu\n", 1u64);
/// gpukern_device::print!("%f\n", 1.5f32);
/// gpukern_device::print!("%d\n", 1i32);
/// gpukern_device::print!("%c\n", b'x');
/// ```
#[macro_export]
macro_rules! print {
    ($($args:tt)*) => {
        $crate::print::__expand!($crate; $($args)*)
    };
}

/// Checks `cond` in a kernel: on the GPU a false `cond` makes the driver print the message with
/// the block and thread and fail the launch with `CUDA_ERROR_ASSERT` (710; the context is
/// unusable afterwards, as after any device-side fault); in the simulator it stops the launch
/// with [`crate::sim::Violation::Assertion`] naming the kernel, block, thread, message and
/// `file:line`.
///
/// The message is the condition's text (`device_assert!(x >= 0.0)`), or a string literal given
/// after it (`device_assert!(x >= 0.0, "x must not be negative")`). Unlike `assert!`, it stays in
/// release builds.
///
/// ```
/// mod kernels {
///     use gpukern_device::{device_assert, kernel, mem, thread};
///
///     /// Checks that the `n` elements of `x` are finite.
///     #[kernel]
///     pub unsafe fn check_finite(x: *const f32, n: usize) {
///         let i = thread::index_1d();
///         if i < n {
///             device_assert!(unsafe { mem::load(x, i) }.is_finite(), "x[i] is not finite");
///         }
///     }
/// }
/// ```
#[macro_export]
macro_rules! device_assert {
    (@message $cond:expr, $($message:tt)+) => {
        if !$cond {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: the three strings are NUL-terminated constants.
            unsafe {
                $crate::print::__assert_fail(
                    concat!($($message)+, "\0"),
                    concat!(file!(), "\0"),
                    line!(),
                    concat!(module_path!(), "\0"),
                )
            }
            #[cfg(not(target_arch = "nvptx64"))]
            $crate::print::__sim_assert_fail($($message)+, file!(), line!())
        }
    };
    ($cond:expr $(,)?) => {
        $crate::device_assert!(@message $cond, stringify!($cond))
    };
    ($cond:expr, $message:literal $(,)?) => {
        $crate::device_assert!(@message $cond, $message)
    };
}

/// Arguments of `%d %i %u %x %X %o %c`: a C `int`, passed as its 32 bits.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be printed by a 32-bit integer conversion (`%d %i %u %x %X %o %c`)",
    label = "this argument's conversion takes a 32-bit integer",
    note = "64-bit integers (`u64`, `i64`, `usize`, `isize`) take `%ld %lu %lx`; floats take `%f %e %g %a`; pointers take `%p`"
)]
pub trait Int32 {
    /// The value as C's default promotions make it an `int` (sign- or zero-extended), as bits.
    fn print_arg(self) -> u32;
}

/// Arguments of `%ld %lu %lx %lX %lo` (and `ll`): a C `long` (64 bits on the GPU).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be printed by a 64-bit integer conversion (`%ld %lu %lx %lX %lo`)",
    label = "this argument's conversion takes a 64-bit integer",
    note = "32-bit and smaller integers take `%d %u %x`; floats take `%f %e %g %a`; pointers take `%p`"
)]
pub trait Int64 {
    /// The value as 64 bits.
    fn print_arg(self) -> u64;
}

/// Arguments of `%f %F %e %E %g %G %a %A`: a C `double` (a `float` is promoted, as C does).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be printed by a floating-point conversion (`%f %e %g %a`)",
    label = "this argument's conversion takes an `f32` or `f64`",
    note = "integers take `%d %u %x` (32-bit) or `%ld %lu %lx` (64-bit); convert with `as f64` to print one as a float"
)]
pub trait Double {
    /// The value as an `f64`.
    fn print_arg(self) -> f64;
}

/// Arguments of `%p`: a raw pointer, printed as its address.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be printed by `%p`, which takes a raw pointer",
    label = "this argument's conversion takes a `*const T` or `*mut T`",
    note = "print an address held in an integer with `%lx`"
)]
pub trait Pointer {
    /// The pointer's address as 64 bits.
    fn print_arg(self) -> u64;
}

macro_rules! int32 {
    ($($t:ty),*) => {$(
        impl Int32 for $t {
            #[inline(always)]
            fn print_arg(self) -> u32 {
                // `as i32` sign-extends the signed types and zero-extends the unsigned ones.
                self as i32 as u32
            }
        }
    )*};
}
int32!(i32, u32, i16, u16, i8, u8);

impl Int32 for bool {
    #[inline(always)]
    fn print_arg(self) -> u32 {
        u32::from(self)
    }
}

macro_rules! int64 {
    ($($t:ty),*) => {$(
        impl Int64 for $t {
            #[inline(always)]
            fn print_arg(self) -> u64 {
                self as u64
            }
        }
    )*};
}
int64!(i64, u64, isize, usize);

impl Double for f64 {
    #[inline(always)]
    fn print_arg(self) -> f64 {
        self
    }
}

impl Double for f32 {
    #[inline(always)]
    fn print_arg(self) -> f64 {
        f64::from(self)
    }
}

impl<T: ?Sized> Pointer for *const T {
    #[inline(always)]
    fn print_arg(self) -> u64 {
        self.cast::<u8>().addr() as u64
    }
}

impl<T: ?Sized> Pointer for *mut T {
    #[inline(always)]
    fn print_arg(self) -> u64 {
        self.cast::<u8>().addr() as u64
    }
}

/// One promoted argument of a `print!`, for the simulator's formatter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// For `%d %i %u %x %X %o %c`: an `int`'s 32 bits.
    Int32(u32),
    /// For `%ld %lu %lx %lX %lo`: a `long`'s 64 bits.
    Int64(u64),
    /// For `%f %e %g %a`: a `double`.
    Double(f64),
    /// For `%p`: an address.
    Pointer(u64),
}

#[cfg(target_arch = "nvptx64")]
extern "C" {
    /// PTX's `vprintf` system call: `format` a NUL-terminated string, `valist` the buffer of
    /// arguments, each aligned to its size. Returns the number of arguments (negative on error).
    fn vprintf(format: *const u8, valist: *const u8) -> i32;

    /// PTX's `__assertfail` system call, as CUDA declares it (`crt/device_runtime.h`):
    /// NUL-terminated message, file and function, the line, and the size of a character.
    fn __assertfail(message: *const u8, file: *const u8, line: u32, function: *const u8, char_size: usize);
}

/// `vprintf(format, args)`, the call [`crate::print!`] makes with a format of conversions.
///
/// # Safety
/// `format` must end with a NUL, and `A` must be a `#[repr(C)]` struct whose fields are the
/// promoted arguments of `format`'s conversions in order (what the macro builds).
#[doc(hidden)]
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn __vprintf<A>(format: &'static [u8], args: &A) {
    // SAFETY: the caller's contract; `vprintf` only reads the two buffers.
    unsafe { vprintf(format.as_ptr(), (args as *const A).cast()) };
}

/// `vprintf(format, NULL)`, for a format without conversions.
///
/// # Safety
/// `format` must end with a NUL and have no conversions.
#[doc(hidden)]
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn __vprintf_no_args(format: &'static [u8]) {
    // SAFETY: the caller's contract; with no conversions `vprintf` reads no argument.
    unsafe { vprintf(format.as_ptr(), core::ptr::null()) };
}

/// `__assertfail(message, file, line, function, 1)`, then `trap`: CUDA declares `__assertfail`
/// as returning, but code after a failed assertion must not run (it may rely on the condition),
/// so the thread stops here whatever the system call does.
///
/// # Safety
/// The three strings must end with a NUL.
#[doc(hidden)]
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn __assert_fail(
    message: &'static str,
    file: &'static str,
    line: u32,
    function: &'static str,
) -> ! {
    // SAFETY: the caller's contract; the system call only reads the strings.
    unsafe {
        __assertfail(message.as_ptr(), file.as_ptr(), line, function.as_ptr(), 1);
        core::arch::nvptx::trap()
    }
}

/// The simulator's `vprintf`: formats with [`format`] and prints for the running thread.
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub fn __sim_print(format: &str, args: &[Arg]) {
    crate::sim::device::print(format::format(format, args));
}

/// The simulator's `__assertfail`: stops the running thread with
/// [`crate::sim::Violation::Assertion`].
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub fn __sim_assert_fail(message: &str, file: &str, line: u32) -> ! {
    crate::sim::device::assert_failed(message, file, line)
}
