//! Warpgroup-wide tensor-core products (`wgmma`, sm_90a only): four consecutive warps (a
//! warpgroup of 128 threads, starting at a warp index divisible by 4) multiply a `64 x 16` tile
//! of `A` by a `16 x N` tile of `B`, both read from shared memory through matrix descriptors
//! ([`desc_sw128`]), into f32 accumulators spread over the warpgroup's registers. The
//! instruction is asynchronous: [`fence`] before it (the accumulators were written by ordinary
//! code), [`commit_group`] after, and [`wait_group`] before the accumulators are read again.
//!
//! Keep the whole sequence in one `asm!` block with the accumulators as its operands
//! ([`mma_bf16_m128n128k64`] does): between separate blocks LLVM may move or spill an
//! accumulator while the product is in flight, and ptxas then serialises the pipeline (warnings
//! C7510, C7514, C7515).
//!
//! # Accumulator layout of `m64nNk16` (f32)
//! Thread `t` of the warpgroup (warp `w = t / 32`, `g = (t % 32) / 4`, `q = t % 4`) holds `N / 2`
//! accumulators: `d[i]` is element (row `16 w + g + 8 ((i / 2) % 2)`, column `8 (i / 4) + 2 q +
//! i % 2`) of the `64 x N` result, the `mma.m16n8` layout repeated along `N`.
//!
//! # Shared-memory layouts (128-byte swizzle)
//! Both operands sit in 1024-byte aligned atoms of 8 rows of 128 bytes, swizzled as the copy
//! engine writes them ([`crate::tma::swizzle_128b`] of the address):
//! * `A`, K-major (row-major `m x k`): rows of 64 bf16 along `k`; the element (`r`, `k`) of a
//!   descriptor with start `s` is at `s + (r / 8) SBO + (r % 8) 128 + 2 k`, so the steps of 16
//!   along `k` within the 128-byte row are starts 32 bytes apart, and `SBO` is the distance of
//!   8-row groups (1024 for a dense tile). `LBO` is unused.
//! * `B`, N-major (row-major `k x n`, the descriptor's transpose bit set): rows of 64 bf16 along
//!   `n`; the element (`k`, `c`) is at `s + (c / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (c % 64)`:
//!   `LBO` is the distance of 64-column chunks, `SBO` that of 8-row groups along `k`.
//!
//! (PTX ISA, "Shared Memory Matrix Layout", "Leading Dimension Byte Offset", "Stride Dimension
//! Byte Offset": for swizzled MN-major layouts the leading offset goes from one
//! swizzle-width of `N` to the next and the stride offset from 8 `k` to the next.)
//!
//! # Products in flight across `asm!` blocks
//! [`mma_bf16_m64n256k64_async`] issues and commits without waiting; [`wait_accumulators`]
//! waits with the 128 accumulators as its operands (named in a PTX comment), so LLVM keeps every
//! use of them after the wait and ptxas sees no ordinary instruction touch them in flight. What
//! ptxas does see as such (warning C7515, then C7517: a `wait_group` it inserts itself) is any
//! other write of an accumulator between stages, such as zeroing them on a path that skips the
//! products: keep such values in an array of their own (the warp-specialised kernel stores a
//! `k = 0` tile's zeros from one).
//!
//! # Widths: one body for several tile shapes
//! The four-step products exist for `N` = 256, 128, 112 and 64 (112 for the decode product's
//! 224-row tile, two consumers of 112 rows of a K-major `B`; `mma_{bf16,f16}_m64n{N}k64`, their
//! `_async` twins, `mma_tf32_m64n{N}k32`, `mma_e4m3_m64n{N}k128` and its `_async` twin), all
//! from one macro: the accumulator operand lists are
//! written once per width (`[f32; N / 2]` per thread) and the PTX text, the `asm!` operands and
//! the simulator's reading of them follow. The [`Accumulators`] trait ties each width to its
//! array type, so a kernel generic over its tile (`kernels_gpu::matmul::wgmma_ws::ws_gemm`, whose
//! tile type names a tiling and an accumulator array) picks the instruction by the array its
//! consumers hold: a 128 x 128 tile of two consumers uses `m64n128k16`, a 64 x 128 tile whose
//! two consumers sit side by side `m64n64k16`, with no second copy of the kernel body. A smaller
//! `N` reads the same `64 x 16` of `A` per instruction for fewer products, so it needs more
//! shared-memory bandwidth per flop; it pays where the larger tile leaves multiprocessors idle.
//!
//! # Scale-d
//! Each `wgmma.mma_async` has its own scale-d predicate: true adds the product to the
//! accumulators, false overwrites them (`D = A * B`). In a sequence of products on the same
//! accumulators only the first may overwrite: scale-d false on a later one throws away the
//! products before it. ([`mma_bf16_m128n128k64`] had exactly that bug at first: every product of
//! the first `k` tile took the caller's `accumulate = false`, so only the last step of 16 along
//! `k` of that tile survived. The H200 results matched that reading to every printed digit.)
//!
//! # Simulator
//! In the simulator the PTX text of the sequence itself ([`MMA_BF16_M128N128K64_PTX`]) is
//! interpreted: each `wgmma.mma_async` line with its own accumulator list, descriptors, scale-d
//! predicate and transpose immediates; the descriptors decoded by their bit fields and each
//! element's address computed from the ISA's canonical layouts and the 128-byte swizzle written
//! out afresh (the simulator's private `sim::wgmma` module, `src/sim/wgmma.rs`), not from how
//! the kernel meant to build them. Each thread reads the rows of `A` and the columns of `B` its
//! accumulators need (checked loads) and sums the exact products in f64 before adding to its
//! accumulators (at least as accurate as the tensor core; TF32 operands are first truncated to 10
//! significand bits, as the tensor core reads them).
//!
//! A product is applied when the `wait_group` that retires it runs; until then the accumulators
//! the kernel holds are markers (quiet NaNs naming the product), so that the simulator reports
//! ([`crate::sim::Rule`]): accumulators stored, changed, or left in flight at the thread's end
//! before their wait; a write over a product's shared operands (a ring stage refilled) before the
//! writer knew it retired; operands written by ordinary stores with no [`fence_proxy_async`] since,
//! or by copies not yet known complete; a descriptor that does not read the tile the way the copy
//! engine wrote it; products on fresh accumulators with no `wgmma.fence`, uncommitted products, and
//! the threads of a warpgroup not executing the same fence / products / commit / wait sequence;
//! [`setmaxnreg_inc`] / [`setmaxnreg_dec`] counts that do not add up over the block.

/// Builds a shared-memory matrix descriptor with 128-byte swizzle: `start` is the shared-window
/// byte address of the operand (16-byte aligned, inside a 1024-byte aligned swizzle atom
/// pattern), `lbo` and `sbo` the leading and stride byte offsets (multiples of 16, below
/// 256 KiB). Bits: 0..14 `start >> 4`, 16..30 `lbo >> 4`, 32..46 `sbo >> 4`, 49..52 base offset
/// (0: atoms 1024-byte aligned), 62..64 layout (1: 128-byte swizzle).
#[inline(always)]
pub const fn desc_sw128(start: u32, lbo: u32, sbo: u32) -> u64 {
    ((start as u64 >> 4) & 0x3fff)
        | (((lbo as u64 >> 4) & 0x3fff) << 16)
        | (((sbo as u64 >> 4) & 0x3fff) << 32)
        | (1u64 << 62)
}

/// The shared-window address of `p` (a pointer into this block's shared memory): what
/// descriptors, barriers and copies take. In the simulator the offset from the block's shared
/// base (which plays the window's role: alignment is checked against it).
#[inline(always)]
pub fn shared_address<T>(p: *mut T) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::async_copy::shared_address(p)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        (p as usize - crate::sim::device::shared_base() as usize) as u32
    }
}

/// `fence.proxy.async.shared::cta`: makes this thread's ordinary shared-memory writes visible to
/// the async proxy (the tensor cores' and the copy engine's reads). The simulator counts it.
#[inline(always)]
pub fn fence_proxy_async() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::proxy_fence();
}

/// `wgmma.fence.sync.aligned`, warpgroup-collective: orders earlier register and shared-memory
/// accesses before the next `wgmma.mma_async`. Prefer one `asm!` block for the whole sequence
/// (module documentation). The simulator checks it against the warpgroup's sequence.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence, reached by the whole warpgroup (the caller's contract).
    unsafe {
        core::arch::asm!("wgmma.fence.sync.aligned;\n", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::wgmma::run("wgmma.fence.sync.aligned;", &[], &mut []);
}

/// `wgmma.commit_group.sync.aligned`: closes the warpgroup's pending `mma_async`s into a group.
/// The simulator checks it against the warpgroup's sequence.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective bookkeeping.
    unsafe {
        core::arch::asm!("wgmma.commit_group.sync.aligned;\n", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::wgmma::run("wgmma.commit_group.sync.aligned;", &[], &mut []);
}

/// `wgmma.wait_group.sync.aligned 0`: waits until every committed group of the warpgroup has
/// completed (its accumulators written, its shared-memory reads done). It names no accumulators:
/// products on accumulators still held (from an `_async` product) must be waited for with
/// [`wait_accumulators`], which hands their values back (in the simulator they stay markers
/// after this wait, and reading them is reported).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wait_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective wait.
    unsafe {
        core::arch::asm!("wgmma.wait_group.sync.aligned 0;\n", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::wgmma::run("wgmma.wait_group.sync.aligned 0;", &[], &mut []);
}

/// The accumulator list `{{{a},{b},...}}` of a `wgmma` operand, from positional operand indices.
macro_rules! acc_list {
    ($first:literal $($i:literal)*) => {
        concat!("{{{", stringify!($first), "}" $(, ",{", stringify!($i), "}")*, "}}")
    };
}

/// Calls `$mac!($args ; 0 1 ... L-1)`: the accumulator operand indices of a thread's `L`
/// accumulators of an `m64nN` product (`L = N / 2`), for the macros that spell out operand
/// lists. The three lists are the only place the indices are written.
macro_rules! acc_indices {
    (32, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
    (56, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55)
    };
    (64, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    };
    (96, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95)
    };
    (128, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
    };
}

mod accumulators;
mod attention;
mod products;
mod setmaxnreg;

pub use accumulators::{wait_accumulators, Accumulators};
pub use attention::*;
pub use products::*;
pub use setmaxnreg::{setmaxnreg_dec, setmaxnreg_inc};
