//! [`DeviceCopy`]: plain old data that the host and the device lay out alike, so that it can be a
//! kernel's by-value parameter or the element of a device buffer (`*const T`, `DeviceVec<T>`).
//!
//! Implemented for the primitive numbers, [`f16`](struct@f16), [`bf16`] and arrays of them; a struct of your
//! own gets it from `#[derive(DeviceCopy)]`, which checks at the struct's definition that it is
//! `#[repr(C)]` (or `#[repr(transparent)]`), that every field is `DeviceCopy`, and that it has no
//! padding (its size is the sum of its fields'):
//!
//! ```
//! use gpukern_device::DeviceCopy;
//!
//! /// A 2-D point and its weight: 12 bytes, no padding.
//! #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
//! #[repr(C)]
//! pub struct Weighted {
//!     pub x: f32,
//!     pub y: f32,
//!     pub w: f32,
//! }
//! ```
//!
//! `bool` is not `DeviceCopy` (a buffer's bytes could be any value, and a `bool` may only hold 0
//! or 1) but is a by-value kernel parameter all the same (see `launch::Scalar`, host only).

use half::{bf16, f16};

/// Plain old data the host and the device lay out alike: a kernel's by-value parameter or the
/// element of a device buffer. Derive it (`#[derive(Clone, Copy, DeviceCopy)]` on a
/// `#[repr(C)]` struct); see the [module](self).
///
/// # Safety
/// `Self` is `#[repr(C)]` or `#[repr(transparent)]` (or a primitive), has no padding bytes, no
/// pointers or references, and every bit pattern of its size (all zeros included) is a valid
/// value: the device may write any bytes into a buffer of it, and the host copies its bytes into
/// a launch's parameters as they are.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not plain old data a kernel can take (`DeviceCopy`)",
    label = "not `DeviceCopy`",
    note = "a kernel's buffers and by-value parameters are primitive numbers (u8..u64, i8..i64, usize, isize, f32, f64, f16, bf16), arrays of them, or structs with `#[derive(Clone, Copy, DeviceCopy)]` and `#[repr(C)]` (by value, `bool` too)"
)]
pub unsafe trait DeviceCopy: Copy + Send + Sync + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive number: no padding, every bit pattern a value, zero included.
        unsafe impl DeviceCopy for $t {}
    )*};
}
device_copy!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, f16, bf16);

// SAFETY: an array of plain data has no padding between its elements (each element's size is a
// multiple of its alignment), and every bit pattern of each element is a value.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}
