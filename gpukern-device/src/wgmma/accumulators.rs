//! The [`Accumulators`] trait: a thread's accumulator array of one product width, the products
//! of that width on it and the wait that retires them, so that a kernel generic over its tile
//! picks the instruction by the array it holds.

use super::products::{
    mma_bf16_m64n112k64, mma_bf16_m64n112k64_async, mma_bf16_m64n128k64, mma_bf16_m64n128k64_async,
    mma_bf16_m64n256k64, mma_bf16_m64n256k64_async, mma_bf16_m64n64k64, mma_bf16_m64n64k64_async,
    mma_e4m3_e5m2_m64n112k128_async, mma_e4m3_e5m2_m64n128k128_async, mma_e4m3_e5m2_m64n256k128_async,
    mma_e4m3_e5m2_m64n64k128_async, mma_e4m3_m64n112k128, mma_e4m3_m64n112k128_async, mma_e4m3_m64n128k128,
    mma_e4m3_m64n128k128_async, mma_e4m3_m64n256k128, mma_e4m3_m64n256k128_async, mma_e4m3_m64n64k128,
    mma_e4m3_m64n64k128_async, mma_f16_m64n112k64, mma_f16_m64n112k64_async, mma_f16_m64n128k64,
    mma_f16_m64n128k64_async, mma_f16_m64n256k64, mma_f16_m64n256k64_async, mma_f16_m64n64k64,
    mma_f16_m64n64k64_async, mma_tf32_m64n112k32, mma_tf32_m64n128k32, mma_tf32_m64n256k32,
    mma_tf32_m64n64k32,
};
use super::products::{
    mma_bf16_m64n192k64, mma_bf16_m64n192k64_async, mma_e4m3_e5m2_m64n192k128_async, mma_e4m3_m64n192k128,
    mma_e4m3_m64n192k128_async, mma_f16_m64n192k64, mma_f16_m64n192k64_async, mma_tf32_m64n192k32,
};

/// The `asm!` of `wgmma.wait_group N` with the accumulators `$i` as operands, named in a PTX
/// comment: operands of the wait, never touched.
#[cfg(target_arch = "nvptx64")]
macro_rules! wait_asm {
    ($n:ident, $acc:ident; $($i:literal)*) => {
        core::arch::asm!(
            concat!("// accumulators:", $(" {", stringify!($i), "}",)*),
            "wgmma.wait_group.sync.aligned {n};",
            $(inout(reg32) $acc[$i],)*
            n = const $n,
            options(nostack),
        )
    };
}

/// A thread's f32 accumulators of one `m64nN` product shape (`[f32; N / 2]`, the layout of
/// [`wgmma`](super)'s documentation): the products of that width on them, and the wait that
/// retires them. Implemented for `N` = 256, 128 and 64, so that a kernel generic over its tile
/// picks the instruction width by the accumulator array it holds.
pub trait Accumulators:
    Copy + core::ops::Index<usize, Output = f32> + core::ops::IndexMut<usize, Output = f32>
{
    /// The `N` of `m64nN`: columns of the warpgroup's tile.
    const N: usize;
    /// All zeros (one memset: all-zero bits are 0.0).
    fn zeroed() -> Self;
    /// Four bf16 steps of 16 along `k`, waited for (`mma_bf16_m64n{N}k64`).
    ///
    /// # Safety
    /// As [`mma_bf16_m64n256k64`].
    unsafe fn mma_bf16(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// Four f16 steps, waited for (`mma_f16_m64n{N}k64`).
    ///
    /// # Safety
    /// As [`mma_f16_m64n256k64`].
    unsafe fn mma_f16(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// Four bf16 steps left in flight (`mma_bf16_m64n{N}k64_async`).
    ///
    /// # Safety
    /// As [`mma_bf16_m64n256k64_async`].
    unsafe fn mma_bf16_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// Four f16 steps left in flight (`mma_f16_m64n{N}k64_async`).
    ///
    /// # Safety
    /// As [`mma_f16_m64n256k64_async`].
    unsafe fn mma_f16_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// Four TF32 steps of 8 along `k`, waited for (`mma_tf32_m64n{N}k32`).
    ///
    /// # Safety
    /// As [`mma_tf32_m64n256k32`].
    unsafe fn mma_tf32(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// Four FP8 E4M3 steps of 32 along `k`, waited for (`mma_e4m3_m64n{N}k128`).
    ///
    /// # Safety
    /// As [`mma_e4m3_m64n256k128`].
    unsafe fn mma_e4m3(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// Four FP8 E4M3 steps left in flight (`mma_e4m3_m64n{N}k128_async`).
    ///
    /// # Safety
    /// As [`mma_e4m3_m64n256k128_async`].
    unsafe fn mma_e4m3_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// Four steps of `A` in E4M3 by `B` in E5M2 left in flight
    /// (`mma_e4m3_e5m2_m64n{N}k128_async`).
    ///
    /// # Safety
    /// As [`mma_e4m3_e5m2_m64n256k128_async`].
    unsafe fn mma_e4m3_e5m2_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self;
    /// `wgmma.wait_group.sync.aligned G` with these accumulators as operands
    /// ([`wait_accumulators`]).
    ///
    /// # Safety
    /// As [`wait_accumulators`].
    unsafe fn wait<const G: u32>(self) -> Self;
}

/// [`Accumulators`] for `[f32; $len]`, the products of width `$n`.
macro_rules! accumulators {
    ($n:literal, $len:tt: $bf16:ident, $f16:ident, $bf16_async:ident, $f16_async:ident, $tf32:ident,
     $e4m3:ident, $e4m3_async:ident, $mixed_async:ident) => {
        impl Accumulators for [f32; $len] {
            const N: usize = $n;
            #[inline(always)]
            fn zeroed() -> Self {
                // SAFETY: all-zero bits are 0.0 for f32.
                unsafe { core::mem::zeroed() }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_bf16(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $bf16(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_f16(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $f16(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_bf16_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $bf16_async(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_f16_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $f16_async(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_tf32(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $tf32(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_e4m3(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $e4m3(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_e4m3_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $e4m3_async(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_e4m3_e5m2_async(self, a: [u64; 4], b: [u64; 4], accumulate: bool) -> Self {
                // SAFETY: forwarded contract.
                unsafe { $mixed_async(self, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn wait<const G: u32>(self) -> Self {
                let mut acc = self;
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the caller's contract.
                unsafe {
                    acc_indices!($len, wait_asm!(G, acc))
                };
                #[cfg(not(target_arch = "nvptx64"))]
                crate::sim::wgmma::run(
                    &format!("wgmma.wait_group.sync.aligned {G};"),
                    &[],
                    &mut acc,
                );
                acc
            }
        }
    };
}

accumulators!(256, 128: mma_bf16_m64n256k64, mma_f16_m64n256k64, mma_bf16_m64n256k64_async, mma_f16_m64n256k64_async, mma_tf32_m64n256k32, mma_e4m3_m64n256k128, mma_e4m3_m64n256k128_async, mma_e4m3_e5m2_m64n256k128_async);
accumulators!(192, 96: mma_bf16_m64n192k64, mma_f16_m64n192k64, mma_bf16_m64n192k64_async, mma_f16_m64n192k64_async, mma_tf32_m64n192k32, mma_e4m3_m64n192k128, mma_e4m3_m64n192k128_async, mma_e4m3_e5m2_m64n192k128_async);
accumulators!(128, 64: mma_bf16_m64n128k64, mma_f16_m64n128k64, mma_bf16_m64n128k64_async, mma_f16_m64n128k64_async, mma_tf32_m64n128k32, mma_e4m3_m64n128k128, mma_e4m3_m64n128k128_async, mma_e4m3_e5m2_m64n128k128_async);
accumulators!(112, 56: mma_bf16_m64n112k64, mma_f16_m64n112k64, mma_bf16_m64n112k64_async, mma_f16_m64n112k64_async, mma_tf32_m64n112k32, mma_e4m3_m64n112k128, mma_e4m3_m64n112k128_async, mma_e4m3_e5m2_m64n112k128_async);
accumulators!(64, 32: mma_bf16_m64n64k64, mma_f16_m64n64k64, mma_bf16_m64n64k64_async, mma_f16_m64n64k64_async, mma_tf32_m64n64k32, mma_e4m3_m64n64k128, mma_e4m3_m64n64k128_async, mma_e4m3_e5m2_m64n64k128_async);

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` committed groups of this
/// warpgroup's products are still in flight, and returns the accumulators they write (its
/// operands, so that the compiler keeps every use of them after the wait). With `N = 1` after
/// issuing a step's products, the previous step's are done and its stage may be released
/// while this step's run.
///
/// # Safety
/// Every thread of the warpgroup calls it together, with the accumulators of its products in
/// flight.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn wait_accumulators<const N: u32, A: Accumulators>(acc: A) -> A {
    // SAFETY: forwarded contract.
    unsafe { acc.wait::<N>() }
}
