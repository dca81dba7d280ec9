//! What a vector's lanes may hold: [`Lane`], the element types of [`super::load`] and
//! [`super::store`].

use half::{bf16, f16};

mod sealed {
    /// Keeps [`super::Lane`] closed: a lane's bits must be its whole value (no padding), which
    /// the vector accesses rely on when they move lanes as 32-bit words.
    pub trait Sealed {}
}

/// An element type a vector access moves: `f32`, [`f16`](struct@f16), [`bf16`], `i8`, `u8`,
/// `i16`, `u16`, `i32`, `u32`, `i64`, `u64`, `f64`. Each is plain bits with no padding, so `N`
/// lanes are exactly `N * size_of::<T>()` bytes.
pub trait Lane: sealed::Sealed + Copy + 'static {
    /// The all-zero-bits value: what a partial [`super::Chunk`] gives for its missing lanes.
    const ZERO: Self;
    /// Whether the type is `f32` (the simulator checks each stored f32 for a `wgmma` accumulator
    /// still in flight, as [`crate::mem::store`] does).
    #[doc(hidden)]
    const IS_F32: bool = false;
}

macro_rules! lanes {
    ($($t:ty = $zero:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Lane for $t {
            const ZERO: Self = $zero;
        }
    )*};
}

lanes!(
    f16 = f16::ZERO,
    bf16 = bf16::ZERO,
    i8 = 0,
    u8 = 0,
    i16 = 0,
    u16 = 0,
    i32 = 0,
    u32 = 0,
    i64 = 0,
    u64 = 0,
    f64 = 0.0,
);

impl sealed::Sealed for f32 {}
impl Lane for f32 {
    const ZERO: Self = 0.0;
    const IS_F32: bool = true;
}
