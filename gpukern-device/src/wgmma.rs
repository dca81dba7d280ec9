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
//! The four-step products exist for `N` = 256, 128 and 64 (`mma_{bf16,f16}_m64n{N}k64`, their
//! `_async` twins, `mma_tf32_m64n{N}k32`), all from one macro: the accumulator operand lists are
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
//! out afresh (the private `sim` module), not from how the kernel meant to build them. Each thread reads the rows
//! of `A` and the columns of `B` its accumulators need (checked loads) and sums the exact
//! products in f64 before adding to its accumulators (at least as accurate as the tensor core;
//! TF32 operands are first truncated to 10 significand bits, as the tensor core reads them).
//! [`fence`], [`commit_group`], [`wait_group`] do nothing there.

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
/// the async proxy (the tensor cores' and the copy engine's reads). Nothing in the simulator.
#[inline(always)]
pub fn fence_proxy_async() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack));
    }
}

/// `wgmma.fence.sync.aligned`, warpgroup-collective: orders earlier register and shared-memory
/// accesses before the next `wgmma.mma_async`. Prefer one `asm!` block for the whole sequence
/// (module documentation). Nothing in the simulator.
#[inline(always)]
pub fn fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence, reached by the whole warpgroup (the caller's contract).
    unsafe {
        core::arch::asm!("wgmma.fence.sync.aligned;\n", options(nostack));
    }
}

/// `wgmma.commit_group.sync.aligned`: closes the warpgroup's pending `mma_async`s into a group.
/// Nothing in the simulator.
#[inline(always)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective bookkeeping.
    unsafe {
        core::arch::asm!("wgmma.commit_group.sync.aligned;\n", options(nostack));
    }
}

/// `wgmma.wait_group.sync.aligned 0`: waits until every committed group of the warpgroup has
/// completed (its accumulators written, its shared-memory reads done). Nothing in the simulator.
#[inline(always)]
pub fn wait_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective wait.
    unsafe {
        core::arch::asm!("wgmma.wait_group.sync.aligned 0;\n", options(nostack));
    }
}

/// The accumulator list `{{{a},{b},...}}` of a `wgmma` operand, from positional operand indices.
macro_rules! acc_list {
    ($first:literal $($i:literal)*) => {
        concat!("{{{", stringify!($first), "}" $(, ",{", stringify!($i), "}")*, "}}")
    };
}

/// One `wgmma.mma_async.m64n128k16.f32.bf16.bf16` line: `A` K-major (imm-trans-a 0), `B` N-major
/// (imm-trans-b 1), no negation, scale-d from the predicate named `$scale`; `lo` / `hi` pick the
/// accumulators of rows 0..64 (operands 0..64) or 64..128 (operands 64..128).
macro_rules! mma_line {
    (lo, $a:literal, $b:literal, $scale:literal) => {
        mma_line!(@ [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63], $a, $b, $scale)
    };
    (hi, $a:literal, $b:literal, $scale:literal) => {
        mma_line!(@ [64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127], $a, $b, $scale)
    };
    (@ [$($i:literal)*], $a:literal, $b:literal, $scale:literal) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 ",
            acc_list!($($i)*),
            ", {", $a, "}, {", $b, "}, ", $scale, ", 1, 1, 0, 1;\n"
        )
    };
}

/// The PTX of [`mma_bf16_m128n128k64`], as an `asm!` template (`{i}`: accumulator `i`, `{name}`:
/// a named operand, `{{` / `}}`: literal braces). Only the first step along `k` (`a00`/`a10` with
/// `b0`) takes scale-d from the caller (`p`, from `{scale}`); the three later steps always add to
/// what the earlier ones wrote (`t`, true): scale-d 0 on a later step would throw away the
/// products before it (PTX ISA, "Warpgroup MMA: wgmma.mma_async": `D = A * B + D` when scale-d is
/// true, `D = A * B` when false).
macro_rules! m128n128k64_ptx {
    () => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "wgmma.fence.sync.aligned;\n",
            mma_line!(lo, "a00", "b0", "p"),
            mma_line!(hi, "a10", "b0", "p"),
            mma_line!(lo, "a01", "b1", "t"),
            mma_line!(hi, "a11", "b1", "t"),
            mma_line!(lo, "a02", "b2", "t"),
            mma_line!(hi, "a12", "b2", "t"),
            mma_line!(lo, "a03", "b3", "t"),
            mma_line!(hi, "a13", "b3", "t"),
            "wgmma.commit_group.sync.aligned;\n",
            "wgmma.wait_group.sync.aligned 0;\n",
            "}}"
        )
    };
}

/// The PTX text [`mma_bf16_m128n128k64`] runs on the GPU (an `asm!` template: `{i}` is
/// accumulator `i`, `{scale}`, `{a00}`..`{a13}`, `{b0}`..`{b3}` the named operands). The simulator
/// interprets this same text (its `sim::run`), so what it checks is what the GPU executes.
pub const MMA_BF16_M128N128K64_PTX: &str = m128n128k64_ptx!();

/// `C(128 x 128) = A(128 x 64) * B(64 x 128) (+ C)` on a warpgroup, bf16 operands in shared
/// memory, f32 accumulators: for each step `s` of 16 along `k`, two `m64n128k16` products (rows
/// 0..64 with `a[0][s]`, rows 64..128 with `a[1][s]`, both with `b[s]`), all in one `asm!` block:
/// `wgmma.fence`, the 8 products, `commit_group`, `wait_group 0` ([`MMA_BF16_M128N128K64_PTX`]).
///
/// Returns the accumulators; `acc[0..64]` are this thread's accumulators of rows 0..64 and
/// `acc[64..128]` those of rows 64..128, each in the layout of the module documentation.
/// `a[h][s]` describes the `64 x 16` tile of `A` (K-major, 128-byte swizzle), `b[s]` the
/// `16 x 128` tile of `B` (N-major, 128-byte swizzle, [`desc_sw128`]). With `accumulate` false
/// the first step's products overwrite `acc` (the first tile of `k`) and the later steps add to
/// them; with `accumulate` true every product adds to `acc`.
///
/// # Safety
/// Every thread of a warpgroup calls it together (warps `4j .. 4j + 4`); the descriptors describe
/// shared memory holding initialised bf16 tiles in those layouts, which nothing writes until
/// this returns. Simulator: the block is one warpgroup.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn mma_bf16_m128n128k64(
    acc: [f32; 128],
    a: [[u64; 4]; 2],
    b: [u64; 4],
    accumulate: bool,
) -> [f32; 128] {
    let mut acc = acc;
    let scale = accumulate as u32;
    #[cfg(target_arch = "nvptx64")]
    {
        macro_rules! go {
            ($($i:literal)*) => {
                // SAFETY: the caller's contract: the whole warpgroup is here and the shared tiles
                // are ready; fence, products, commit and wait in one block, so no accumulator is
                // touched while a product is in flight.
                unsafe {
                    core::arch::asm!(
                        m128n128k64_ptx!(),
                        $(inout(reg32) acc[$i],)*
                        scale = in(reg32) scale,
                        a00 = in(reg64) a[0][0],
                        a01 = in(reg64) a[0][1],
                        a02 = in(reg64) a[0][2],
                        a03 = in(reg64) a[0][3],
                        a10 = in(reg64) a[1][0],
                        a11 = in(reg64) a[1][1],
                        a12 = in(reg64) a[1][2],
                        a13 = in(reg64) a[1][3],
                        b0 = in(reg64) b[0],
                        b1 = in(reg64) b[1],
                        b2 = in(reg64) b[2],
                        b3 = in(reg64) b[3],
                        options(nostack),
                    );
                }
            };
        }
        go!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127);
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let named = [
            ("scale", u64::from(scale)),
            ("a00", a[0][0]),
            ("a01", a[0][1]),
            ("a02", a[0][2]),
            ("a03", a[0][3]),
            ("a10", a[1][0]),
            ("a11", a[1][1]),
            ("a12", a[1][2]),
            ("a13", a[1][3]),
            ("b0", b[0]),
            ("b1", b[1]),
            ("b2", b[2]),
            ("b3", b[3]),
        ];
        sim::run(MMA_BF16_M128N128K64_PTX, &named, &mut acc);
    }
    acc
}

/// Calls `$mac!($args ; 0 1 ... L-1)`: the accumulator operand indices of a thread's `L`
/// accumulators of an `m64nN` product (`L = N / 2`), for the macros that spell out operand
/// lists. The three lists are the only place the indices are written.
macro_rules! acc_indices {
    (32, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
    (64, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    };
    (128, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
    };
}

/// One `wgmma.mma_async.m64n$nk16.f32.$ty.$ty` line on the accumulators `$i`: `A` K-major, `B`
/// N-major (imm-trans-b 1), scale-d from the predicate named `$scale`.
macro_rules! nk16_line {
    ($n:literal, $ty:literal, $a:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
            acc_list!($($i)*),
            ", {", $a, "}, {", $b, "}, ", $scale, ", 1, 1, 0, 1;\n"
        )
    };
}

/// The PTX of `C(64 x N) = A(64 x 64) * B(64 x N) (+ C)` in element type `$ty` (`N = $n`, the
/// accumulators `$i`): four steps of 16 along `k` (`a0`..`a3` with `b0`..`b3`), only the first
/// taking scale-d from the caller (`{scale}`), the later ones always adding (see
/// [`MMA_BF16_M128N128K64_PTX`] for why); then `$wait` (a `wait_group 0`, or nothing for the
/// asynchronous twins).
macro_rules! m64nk64_ptx {
    ($n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "wgmma.fence.sync.aligned;\n",
            nk16_line!($n, $ty, "a0", "b0", "p"; $($i)*),
            nk16_line!($n, $ty, "a1", "b1", "t"; $($i)*),
            nk16_line!($n, $ty, "a2", "b2", "t"; $($i)*),
            nk16_line!($n, $ty, "a3", "b3", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            $wait,
            "}}"
        )
    };
}

/// One `wgmma.mma_async.m64n$nk8.f32.tf32.tf32` line on the accumulators `$i`: both operands
/// K-major (the `.tf32` form takes no imm-trans operands: `d, a-desc, b-desc, scale-d,
/// imm-scale-a, imm-scale-b`), scale-d from the predicate named `$scale`.
macro_rules! tf32_line {
    ($n:literal, $a:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32 ",
            acc_list!($($i)*),
            ", {", $a, "}, {", $b, "}, ", $scale, ", 1, 1;\n"
        )
    };
}

/// The PTX of `C(64 x N) = A(64 x 32) * B(32 x N) (+ C)` with TF32 operands: four steps of 8
/// along `k` (`a0`..`a3` with `b0`..`b3`), only the first taking scale-d from the caller, as
/// [`MMA_BF16_M64N256K64_PTX`]; `$wait` as there.
macro_rules! m64nk32_tf32_ptx {
    ($n:literal, $wait:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "wgmma.fence.sync.aligned;\n",
            tf32_line!($n, "a0", "b0", "p"; $($i)*),
            tf32_line!($n, "a1", "b1", "t"; $($i)*),
            tf32_line!($n, "a2", "b2", "t"; $($i)*),
            tf32_line!($n, "a3", "b3", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            $wait,
            "}}"
        )
    };
}

/// The PTX template of a four-step product: `k64` (`$ty` a 16-bit type) or `k32` (TF32).
macro_rules! step_ptx {
    (k64, $n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        m64nk64_ptx!($n, $ty, $wait; $($i)*)
    };
    (k32, $n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        m64nk32_tf32_ptx!($n, $wait; $($i)*)
    };
}

/// The `asm!` of a four-step product (`step_ptx!`) on the accumulator array `$acc` (operands
/// `$i`), scale-d from `$scale`, descriptors `$a[0..4]`, `$b[0..4]`.
#[cfg(target_arch = "nvptx64")]
macro_rules! step_asm {
    ($k:ident, $n:literal, $ty:literal, $wait:literal, $acc:ident, $scale:ident, $a:ident, $b:ident; $($i:literal)*) => {
        core::arch::asm!(
            step_ptx!($k, $n, $ty, $wait; $($i)*),
            $(inout(reg32) $acc[$i],)*
            scale = in(reg32) $scale,
            a0 = in(reg64) $a[0],
            a1 = in(reg64) $a[1],
            a2 = in(reg64) $a[2],
            a3 = in(reg64) $a[3],
            b0 = in(reg64) $b[0],
            b1 = in(reg64) $b[1],
            b2 = in(reg64) $b[2],
            b3 = in(reg64) $b[3],
            options(nostack),
        )
    };
}

/// Declares a four-step warpgroup product `C(64 x N) (+)= A(64 x 4K) * B(4K x N)` of one element
/// type and its PTX text: `$k` is `k64` (16-bit `$ty`, four `m64nNk16`) or `k32` (TF32, four
/// `m64nNk8`); `$len = N / 2` accumulators per thread; `$wait` the closing `wait_group 0` or
/// nothing (an asynchronous twin).
macro_rules! step_product {
    ($(#[$doc:meta])* $name:ident, $ptx:ident, $k:ident, $n:literal, $len:tt, $ty:literal, $wait:literal) => {
        #[doc = concat!("The PTX text of [`", stringify!($name), "`] (interpreted as such by the simulator).")]
        pub const $ptx: &str = acc_indices!($len, step_ptx!($k, $n, $ty, $wait));

        $(#[$doc])*
        ///
        #[doc = concat!("`acc` is this thread's ", stringify!($len), " accumulators of the `64 x ", $n, "` tile")]
        /// (the layout of the module documentation); `a[s]` describes the tile of `A` for step
        /// `s` along `k` (K-major, 128-byte swizzle), `b[s]` that of `B` (16-bit types: N-major,
        /// 128-byte swizzle, 64-column chunks `LBO` apart; TF32: K-major, as `A`). With
        /// `accumulate` false the first step overwrites `acc`. One `asm!` block: fence, 4
        /// products, commit, and (but for the `_async` twins, whose accumulators stay in flight
        /// until [`wait_accumulators`]) wait.
        ///
        /// # Safety
        /// Every thread of one warpgroup calls it together; the descriptors describe shared
        /// memory holding initialised tiles of the element type, which nothing writes until the
        /// products are retired.
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub unsafe fn $name(acc: [f32; $len], a: [u64; 4], b: [u64; 4], accumulate: bool) -> [f32; $len] {
            let mut acc = acc;
            let scale = accumulate as u32;
            #[cfg(target_arch = "nvptx64")]
            {
                // SAFETY: the caller's contract: the whole warpgroup is here and the tiles are
                // ready; one block, so no accumulator is touched in flight.
                unsafe { acc_indices!($len, step_asm!($k, $n, $ty, $wait, acc, scale, a, b)) };
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let named = [
                    ("scale", u64::from(scale)),
                    ("a0", a[0]),
                    ("a1", a[1]),
                    ("a2", a[2]),
                    ("a3", a[3]),
                    ("b0", b[0]),
                    ("b1", b[1]),
                    ("b2", b[2]),
                    ("b3", b[3]),
                ];
                sim::run($ptx, &named, &mut acc);
            }
            acc
        }
    };
}

/// The products of one instruction width `N` (`$len = N / 2` accumulators per thread): bf16 and
/// f16 (`k64`, waited and asynchronous) and TF32 (`k32`, waited).
macro_rules! width_products {
    ($n:literal, $len:tt:
     $bf16:ident $bf16_ptx:ident, $f16:ident $f16_ptx:ident,
     $bf16_async:ident $bf16_async_ptx:ident, $f16_async:ident $f16_async_ptx:ident,
     $tf32:ident $tf32_ptx:ident) => {
        step_product!(
            #[doc = concat!("`C(64 x ", $n, ") (+)= A(64 x 64) * B(64 x ", $n, ")` on a warpgroup, bf16 operands in shared memory, f32 accumulators.")]
            $bf16, $bf16_ptx, k64, $n, $len, "bf16", "wgmma.wait_group.sync.aligned 0;\n"
        );
        step_product!(
            #[doc = concat!("`C(64 x ", $n, ") (+)= A(64 x 64) * B(64 x ", $n, ")` on a warpgroup, f16 operands in shared memory, f32 accumulators.")]
            $f16, $f16_ptx, k64, $n, $len, "f16", "wgmma.wait_group.sync.aligned 0;\n"
        );
        step_product!(
            #[doc = concat!("[`", stringify!($bf16), "`] without the wait: the four products are committed as one group and left in flight; [`wait_accumulators`] retires it. Until then the returned accumulators must not be read or written by anything else, and the tiles must stay as they are.")]
            $bf16_async, $bf16_async_ptx, k64, $n, $len, "bf16", ""
        );
        step_product!(
            #[doc = concat!("[`", stringify!($f16), "`] without the wait, as [`", stringify!($bf16_async), "`].")]
            $f16_async, $f16_async_ptx, k64, $n, $len, "f16", ""
        );
        step_product!(
            #[doc = concat!("`C(64 x ", $n, ") (+)= A(64 x 32) * B(32 x ", $n, ")` on a warpgroup, TF32 operands (f32 in shared memory) and f32 accumulators: four `m64n", $n, "k8` products, **both operands K-major** (TF32 `wgmma` cannot transpose: `B` sits in shared memory as rows of `B^T`), the four steps' starts 32 bytes apart.")]
            ///
            /// The tensor core reads the f32 bits with the low 13 ignored (PTX ISA: `.tf32`
            /// `wgmma` truncates the 32-bit input to TF32 before multiplying): operands not
            /// already TF32 are truncated toward zero (unit roundoff `2^-10`). Round them
            /// beforehand (e.g. the copy engine's `TFLOAT32` tensor maps) for `2^-11`.
            $tf32, $tf32_ptx, k32, $n, $len, "tf32", "wgmma.wait_group.sync.aligned 0;\n"
        );
    };
}

width_products!(256, 128:
    mma_bf16_m64n256k64 MMA_BF16_M64N256K64_PTX, mma_f16_m64n256k64 MMA_F16_M64N256K64_PTX,
    mma_bf16_m64n256k64_async MMA_BF16_M64N256K64_ASYNC_PTX,
    mma_f16_m64n256k64_async MMA_F16_M64N256K64_ASYNC_PTX,
    mma_tf32_m64n256k32 MMA_TF32_M64N256K32_PTX);
width_products!(128, 64:
    mma_bf16_m64n128k64 MMA_BF16_M64N128K64_PTX, mma_f16_m64n128k64 MMA_F16_M64N128K64_PTX,
    mma_bf16_m64n128k64_async MMA_BF16_M64N128K64_ASYNC_PTX,
    mma_f16_m64n128k64_async MMA_F16_M64N128K64_ASYNC_PTX,
    mma_tf32_m64n128k32 MMA_TF32_M64N128K32_PTX);
width_products!(64, 32:
    mma_bf16_m64n64k64 MMA_BF16_M64N64K64_PTX, mma_f16_m64n64k64 MMA_F16_M64N64K64_PTX,
    mma_bf16_m64n64k64_async MMA_BF16_M64N64K64_ASYNC_PTX,
    mma_f16_m64n64k64_async MMA_F16_M64N64K64_ASYNC_PTX,
    mma_tf32_m64n64k32 MMA_TF32_M64N64K32_PTX);

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

/// A thread's f32 accumulators of one `m64nN` product shape (`[f32; N / 2]`, the layout of the
/// module documentation): the products of that width on them, and the wait that retires them.
/// Implemented for `N` = 256, 128 and 64, so that a kernel generic over its tile picks the
/// instruction width by the accumulator array it holds.
pub trait Accumulators: Copy + core::ops::Index<usize, Output = f32> {
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
    /// `wgmma.wait_group.sync.aligned G` with these accumulators as operands
    /// ([`wait_accumulators`]).
    ///
    /// # Safety
    /// As [`wait_accumulators`].
    unsafe fn wait<const G: u32>(self) -> Self;
}

/// [`Accumulators`] for `[f32; $len]`, the products of width `$n`.
macro_rules! accumulators {
    ($n:literal, $len:tt: $bf16:ident, $f16:ident, $bf16_async:ident, $f16_async:ident, $tf32:ident) => {
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
            unsafe fn wait<const G: u32>(self) -> Self {
                let mut acc = self;
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the caller's contract.
                unsafe {
                    acc_indices!($len, wait_asm!(G, acc))
                };
                #[cfg(not(target_arch = "nvptx64"))]
                sim::run(
                    &format!("wgmma.wait_group.sync.aligned {G};"),
                    &[],
                    &mut acc,
                );
                acc
            }
        }
    };
}

accumulators!(256, 128: mma_bf16_m64n256k64, mma_f16_m64n256k64, mma_bf16_m64n256k64_async, mma_f16_m64n256k64_async, mma_tf32_m64n256k32);
accumulators!(128, 64: mma_bf16_m64n128k64, mma_f16_m64n128k64, mma_bf16_m64n128k64_async, mma_f16_m64n128k64_async, mma_tf32_m64n128k32);
accumulators!(64, 32: mma_bf16_m64n64k64, mma_f16_m64n64k64, mma_bf16_m64n64k64_async, mma_f16_m64n64k64_async, mma_tf32_m64n64k32);

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

/// `setmaxnreg.inc.sync.aligned.u32 N`: the warpgroup asks for `N` registers per thread (a
/// multiple of 8, 24 to 256), taken from those other warpgroups released. Warpgroup-collective;
/// ptxas honours it only in an entry with launch bounds (`#[kernel(launch_bounds(..))]`), else
/// it warns (C7508) and ignores it. Nothing in the simulator.
#[inline(always)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub fn setmaxnreg_inc<const N: u32>() {
    const {
        assert!(
            N % 8 == 0 && N >= 24 && N <= 256,
            "setmaxnreg takes 24..=256, a multiple of 8"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a register-allocation hint, reached by the whole warpgroup (the caller's design).
    unsafe {
        core::arch::asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack));
    }
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: the warpgroup gives registers back, keeping `N` per
/// thread (a multiple of 8, 24 to 256). As [`setmaxnreg_inc`].
#[inline(always)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub fn setmaxnreg_dec<const N: u32>() {
    const {
        assert!(
            N % 8 == 0 && N >= 24 && N <= 256,
            "setmaxnreg takes 24..=256, a multiple of 8"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `setmaxnreg_inc`.
    unsafe {
        core::arch::asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack));
    }
}

/// The simulator's `wgmma`: an interpreter of the PTX text the GPU runs, with the operand
/// layouts decoded from the descriptors as the PTX ISA defines them, independently of how the
/// kernels build them.
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) mod sim {
    /// The operand types the simulator models.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(crate) enum Operand {
        /// `.bf16`.
        Bf16,
        /// `.f16`.
        F16,
        /// `.tf32`: f32 in shared memory, read with the low 13 bits of the significand ignored.
        Tf32,
    }

    impl Operand {
        /// Bytes per element in shared memory.
        pub(crate) fn bytes(self) -> usize {
            match self {
                Operand::Bf16 | Operand::F16 => 2,
                Operand::Tf32 => 4,
            }
        }

        /// Elements along `k` per instruction: 32 bytes of each row (`k16` of 16-bit types,
        /// `k8` of TF32).
        fn k(self) -> usize {
            32 / self.bytes()
        }
    }

    /// TF32 as `.tf32` `wgmma` reads an f32: the low 13 bits of the significand dropped (PTX ISA,
    /// "wgmma.mma_async": "will truncate lower 13 bits of the 32-bit input data before
    /// multiplication is issued"), so toward zero, unit roundoff `2^-10`.
    pub(crate) fn tf32_truncate(x: f32) -> f32 {
        f32::from_bits(x.to_bits() & !0x1fff)
    }

    /// Reads the element of type `ty` at shared-window byte address `address` (already
    /// swizzled), widened to f64.
    #[track_caller]
    fn element(address: usize, ty: Operand) -> f64 {
        let base = crate::sim::device::shared_base();
        if ty == Operand::Tf32 {
            let p = base.wrapping_add(address).cast::<u32>();
            // SAFETY: checked by the simulator (bounds, alignment, initialisation, races).
            let bits = unsafe { crate::mem::load(p, 0) };
            return f64::from(tf32_truncate(f32::from_bits(bits)));
        }
        let p = base.wrapping_add(address).cast::<u16>();
        // SAFETY: checked by the simulator (bounds, alignment, initialisation, races).
        let bits = unsafe { crate::mem::load(p, 0) };
        match ty {
            Operand::Bf16 => f64::from(f32::from_bits(u32::from(bits) << 16)),
            Operand::F16 => f64::from(half::f16::from_bits(bits).to_f32()),
            Operand::Tf32 => unreachable!("read as 32 bits above"),
        }
    }

    /// A shared-memory matrix descriptor, decoded (PTX ISA, "Asynchronous Warpgroup Level Matrix
    /// Shared Memory Layout", "Matrix Descriptor Format"): bits 0..14 start address >> 4, 16..30
    /// leading dimension byte offset >> 4, 32..46 stride dimension byte offset >> 4, 49..52 base
    /// offset, 62..64 swizzle mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct Descriptor {
        /// Start address in the shared window, bytes.
        pub start: usize,
        /// Leading dimension byte offset.
        pub lbo: usize,
        /// Stride dimension byte offset.
        pub sbo: usize,
        /// Base offset (bits 49..52).
        pub base_offset: u64,
        /// Swizzle mode (bits 62..64).
        pub swizzle: u64,
    }

    impl Descriptor {
        /// Decodes `desc`.
        pub(crate) fn decode(desc: u64) -> Self {
            let bytes = |shift: u32| (((desc >> shift) & 0x3fff) << 4) as usize;
            Self {
                start: bytes(0),
                lbo: bytes(16),
                sbo: bytes(32),
                base_offset: (desc >> 49) & 7,
                swizzle: desc >> 62,
            }
        }

        /// The shared-window byte address of element (`mn`, `k`) of the operand this descriptor
        /// describes (`mn` the row of `A` or the column of `B`, `k` in `0..16`) of 16-bit
        /// elements, `mn_major` when the instruction's imm-trans bit of the operand is 1. The
        /// canonical layouts with 128-byte swizzle, in 16-bit elements (`T = 8` per 16 bytes):
        /// * K-major: `((8, m), (T, 2)) : ((8T, SBO), (1, T))`: row `mn % 8` of an 8-row group
        ///   128 bytes on, groups `SBO` apart, the 16 `k` contiguous (LBO unused);
        /// * MN-major: `((T, 8, m), (8, 2)) : ((1, T, LBO), (8T, SBO))`: 64 contiguous `mn`
        ///   (128 bytes), 64-element chunks `LBO` apart, row `k % 8` 128 bytes on, 8-`k` groups
        ///   `SBO` apart;
        ///
        /// then the 128-byte swizzle of the address: bits 4..7 (the 16-byte chunk) XOR bits
        /// 7..10 (the row within 8 rows of 128 bytes).
        ///
        /// Elements of `bytes` bytes: 2, or 4 for TF32, whose K-major layout is the same in
        /// bytes (`T = 4`, 32 elements per 128-byte row, `k` in `0..8`): element (`mn`, `k`) at
        /// `start + (mn % 8) 128 + (mn / 8) SBO + 4 k`, then the swizzle. TF32 has no MN-major
        /// form (`wgmma` cannot transpose 32-bit operands).
        #[track_caller]
        pub(crate) fn address_of(&self, mn: usize, k: usize, mn_major: bool, bytes: usize) -> usize {
            assert!(
                bytes == 2 || !mn_major,
                "wgmma descriptor {self:?}: an MN-major operand of {bytes}-byte elements (only 16-bit types transpose)"
            );
            assert_eq!(
                self.swizzle, 1,
                "wgmma descriptor {self:?}: the simulator models the 128-byte swizzle only"
            );
            assert_eq!(
                self.base_offset, 0,
                "wgmma descriptor {self:?}: the simulator models base offset 0 only (atoms 1024-byte aligned)"
            );
            let linear = if mn_major {
                self.start + 2 * (mn % 64) + (mn / 64) * self.lbo + (k % 8) * 128 + (k / 8) * self.sbo
            } else {
                self.start + (mn % 8) * 128 + (mn / 8) * self.sbo + bytes * k
            };
            swizzle_128b(linear)
        }
    }

    /// The 128-byte swizzle of a shared-window byte address (CUTLASS's `Swizzle<3, 4, 3>`):
    /// written here again rather than shared with [`crate::tma::swizzle_128b`], so that a
    /// mistake in one is not hidden by the other.
    fn swizzle_128b(address: usize) -> usize {
        let row = (address >> 7) & 7;
        let chunk = (address >> 4) & 7;
        (address & !0x70) | ((chunk ^ row) << 4)
    }

    /// The value of an operand token: `{name}` (a named `asm!` operand) or an integer immediate.
    #[track_caller]
    fn value(token: &str, named: &[(&str, u64)]) -> u64 {
        let token = token.trim();
        if let Some(name) = token.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            return named
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("wgmma PTX: no operand named {name:?}"))
                .1;
        }
        token
            .parse::<i64>()
            .unwrap_or_else(|e| panic!("wgmma PTX: {token:?} is not an operand or an immediate: {e}"))
            as u64
    }

    /// Runs the `asm!` template `ptx` of a warpgroup `wgmma` sequence for the running thread:
    /// `named` the named operands, `acc` the positional ones (`{i}` is `acc[i]`). Understands
    /// `.reg .pred`, `setp.ne.b32`, `wgmma.fence` / `commit_group` / `wait_group 0` (checked: a
    /// product before the fence, or accumulators left in flight at the end, are reported) and
    /// `wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}` and `m64nNk8.f32.tf32.tf32` (TF32
    /// operands truncated as the tensor core reads them) with shared-memory descriptors for
    /// both operands; anything else is reported. The products are exact (f64 sums, added to the
    /// accumulator in f64, rounded once to f32): at least as accurate as the tensor core.
    /// One product issued and not yet applied: the instruction, its operands and the values of
    /// its predicates when it was issued.
    struct Pending {
        op: String,
        args: String,
        named: Vec<(String, u64)>,
        predicates: Vec<(String, Option<bool>)>,
    }

    /// A simulated thread: its block index and thread index.
    type ThreadKey = ((u32, u32, u32), (u32, u32, u32));
    /// Committed groups of products, oldest first.
    type Groups = std::collections::VecDeque<Vec<Pending>>;

    std::thread_local! {
        /// The committed groups of products of each simulated thread (by block and thread
        /// index), oldest first, not yet waited for: their operands are read from shared memory
        /// when a `wait_group` retires them, as late as the tensor core may read them.
        static GROUPS: std::cell::RefCell<std::collections::HashMap<ThreadKey, Groups>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }

    /// Applies the products of `group` to `acc`.
    #[track_caller]
    fn apply(group: Vec<Pending>, acc: &mut [f32]) {
        for p in group {
            let named: Vec<(&str, u64)> = p.named.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            let predicates: Vec<(&str, Option<bool>)> =
                p.predicates.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            mma_async(&p.op, &p.args, &named, &predicates, acc);
        }
    }

    /// Runs the `asm!` template `ptx` of a warpgroup `wgmma` sequence for the running thread:
    /// `named` the named operands, `acc` the positional ones (`{i}` is `acc[i]`). Understands
    /// `.reg .pred`, `setp.ne.b32`, `wgmma.fence`, `wgmma.mma_async.sync.aligned` (`m64nNk16`
    /// in bf16 or f16, `m64nNk8` in TF32, operands truncated as the tensor core reads them;
    /// shared-memory descriptors for both operands), `commit_group` and `wait_group N`; anything
    /// else is reported. A product is recorded when issued and computed when a `wait_group`
    /// retires its group (so its operands are read from shared memory then: a stage released
    /// before the wait that covers it is caught by the numbers), into the accumulators of the
    /// block doing the wait; a product before the block's fence, or one left uncommitted at the
    /// end of the block, is reported. The products are exact (f64 sums, added to the
    /// accumulator in f64, rounded once to f32): at least as accurate as the tensor core.
    #[track_caller]
    pub(crate) fn run(ptx: &str, named: &[(&str, u64)], acc: &mut [f32]) {
        let mut predicates: Vec<(&str, Option<bool>)> = Vec::new();
        let mut fenced = false;
        let mut open: Vec<Pending> = Vec::new();
        let me = (crate::sim::device::block_idx(), crate::sim::device::thread_idx());
        for statement in ptx.split(';') {
            let statement = statement.trim();
            let statement = statement.strip_prefix("{{").unwrap_or(statement).trim();
            if statement.is_empty() || statement == "}}" {
                continue;
            }
            let (op, args) = statement.split_once(' ').unwrap_or((statement, ""));
            match op {
                ".reg" => {
                    let names = args
                        .strip_prefix(".pred ")
                        .unwrap_or_else(|| panic!("wgmma PTX: only predicates are declared: {statement:?}"));
                    predicates.extend(names.split(',').map(|n| (n.trim(), None)));
                }
                "setp.ne.b32" => {
                    let parts: Vec<&str> = args.split(',').map(str::trim).collect();
                    let [p, x, y] = parts[..] else {
                        panic!("wgmma PTX: {statement:?}: setp takes three operands")
                    };
                    let slot = predicates
                        .iter_mut()
                        .find(|(n, _)| *n == p)
                        .unwrap_or_else(|| panic!("wgmma PTX: predicate {p:?} is not declared"));
                    slot.1 = Some(value(x, named) as u32 != value(y, named) as u32);
                }
                "wgmma.fence.sync.aligned" => fenced = true,
                "wgmma.commit_group.sync.aligned" => {
                    let group = std::mem::take(&mut open);
                    GROUPS.with(|g| g.borrow_mut().entry(me).or_default().push_back(group));
                }
                "wgmma.wait_group.sync.aligned" => {
                    let keep: usize = args
                        .trim()
                        .parse()
                        .unwrap_or_else(|e| panic!("wgmma PTX: wait_group {args:?}: {e}"));
                    loop {
                        let oldest = GROUPS.with(|g| {
                            let mut g = g.borrow_mut();
                            let queue = g.entry(me).or_default();
                            if queue.len() > keep {
                                queue.pop_front()
                            } else {
                                None
                            }
                        });
                        match oldest {
                            Some(group) => apply(group, acc),
                            None => break,
                        }
                    }
                }
                _ if op.starts_with("wgmma.mma_async.") => {
                    assert!(
                        fenced,
                        "wgmma PTX: a wgmma.mma_async before any wgmma.fence (the accumulators were written by ordinary code)"
                    );
                    // The operands as they are now; the scale-d predicate's value now.
                    let resolved: Vec<(String, u64)> =
                        named.iter().map(|(n, v)| (n.to_string(), *v)).collect();
                    open.push(Pending {
                        op: op.to_string(),
                        args: args.to_string(),
                        named: resolved,
                        predicates: predicates.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
                    });
                }
                _ => panic!("wgmma PTX: the simulator does not model {statement:?}"),
            }
        }
        assert!(
            open.is_empty(),
            "wgmma PTX: a wgmma.mma_async left uncommitted at the end of its asm block (no wgmma.commit_group)"
        );
    }

    /// One `wgmma.mma_async` (`op` the opcode with its modifiers, `args` its operands) for the
    /// running thread of the warpgroup.
    // `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
    #[allow(clippy::manual_is_multiple_of)]
    #[track_caller]
    fn mma_async(
        op: &str,
        args: &str,
        named: &[(&str, u64)],
        predicates: &[(&str, Option<bool>)],
        acc: &mut [f32],
    ) {
        let shape = op.strip_prefix("wgmma.mma_async.sync.aligned.m64n");
        let typed = |suffix: &str, ty: Operand| {
            shape
                .and_then(|rest| rest.strip_suffix(suffix))
                .and_then(|n| n.parse::<usize>().ok())
                .map(|n| (n, ty))
        };
        let (n, ty) = typed("k16.f32.bf16.bf16", Operand::Bf16)
            .or_else(|| typed("k16.f32.f16.f16", Operand::F16))
            .or_else(|| typed("k8.f32.tf32.tf32", Operand::Tf32))
            .unwrap_or_else(|| {
                panic!(
                    "wgmma PTX: the simulator models m64nNk16.f32.{{bf16,f16}} and m64nNk8.f32.tf32.tf32 only, not {op:?}"
                )
            });
        assert!(n % 8 == 0 && (8..=256).contains(&n), "wgmma PTX: N = {n}");
        // The accumulator list `{{{i},{j},...}}` (its last operand's `}` then the literal `}}`),
        // then the seven scalar operands.
        let list_end = args
            .find("}}}")
            .unwrap_or_else(|| panic!("wgmma PTX: no accumulator list in {args:?}"))
            + 1;
        let list: Vec<usize> = args[..list_end]
            .trim()
            .trim_start_matches("{{")
            .split(',')
            .map(|t| {
                t.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .parse()
                    .unwrap_or_else(|e| panic!("wgmma PTX: accumulator {t:?}: {e}"))
            })
            .collect();
        assert_eq!(
            list.len(),
            n / 2,
            "wgmma PTX: m64n{n} has {} accumulators per thread",
            n / 2
        );
        let rest: Vec<&str> = args[list_end + 2..]
            .trim_start_matches(',')
            .split(',')
            .map(str::trim)
            .collect();
        // `.tf32` takes no imm-trans operands (both operands K-major); the 16-bit types do.
        let (a_desc, b_desc, scale_d, scale_a, scale_b, trans) = match (ty, &rest[..]) {
            (Operand::Tf32, &[a, b, d, sa, sb]) => (a, b, d, sa, sb, None),
            (Operand::Bf16 | Operand::F16, &[a, b, d, sa, sb, ta, tb]) => (a, b, d, sa, sb, Some((ta, tb))),
            (Operand::Tf32, _) => {
                panic!("wgmma PTX: {args:?}: .tf32 wants a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b")
            }
            _ => panic!(
                "wgmma PTX: {args:?}: want a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b"
            ),
        };
        let scale_d = match predicates.iter().find(|(p, _)| *p == scale_d) {
            Some((_, Some(v))) => *v,
            Some((p, None)) => panic!("wgmma PTX: predicate {p:?} read before it is set"),
            None => value(scale_d, named) != 0,
        };
        let sign = |t: &str| match value(t, named) as i64 {
            1 => 1.0,
            -1 => -1.0,
            v => panic!("wgmma PTX: imm-scale {v}: must be 1 or -1"),
        };
        let flag = |t: &str| match value(t, named) {
            0 => false,
            1 => true,
            v => panic!("wgmma PTX: imm-trans {v}: must be 0 or 1"),
        };
        let sign = sign(scale_a) * sign(scale_b);
        let (a_mn_major, b_mn_major) = trans.map_or((false, false), |(ta, tb)| (flag(ta), flag(tb)));
        let (bytes, kk) = (ty.bytes(), ty.k());
        let a = Descriptor::decode(value(a_desc, named));
        let b = Descriptor::decode(value(b_desc, named));

        // The accumulator layout of m64nNk16 f32 (PTX ISA, "Register Fragments and Shared Memory
        // Matrix Layouts", "Matrix D"): d[i] is (row 16 w + g + 8 ((i / 2) % 2), column
        // 8 (i / 4) + 2 q + i % 2).
        let t = crate::sim::device::thread_idx().0 as usize % 128;
        let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
        let rows: [[f64; 16]; 2] = core::array::from_fn(|h| {
            let r = 16 * w + g + 8 * h;
            core::array::from_fn(|k| {
                if k < kk {
                    element(a.address_of(r, k, a_mn_major, bytes), ty)
                } else {
                    0.0
                }
            })
        });
        for (i, &slot) in list.iter().enumerate() {
            let (h, c) = ((i / 2) % 2, 8 * (i / 4) + 2 * q + i % 2);
            let dot: f64 = (0..kk)
                .map(|k| rows[h][k] * element(b.address_of(c, k, b_mn_major, bytes), ty))
                .sum();
            let before = if scale_d { f64::from(acc[slot]) } else { 0.0 };
            acc[slot] = (before + sign * dot) as f32;
        }
    }

    #[cfg(test)]
    mod tests {
        use super::{swizzle_128b, Descriptor};

        #[test]
        fn descriptor_fields_decode() {
            let d = Descriptor::decode(crate::wgmma::desc_sw128(0x2020, 8192, 1024));
            assert_eq!(
                d,
                Descriptor {
                    start: 0x2020,
                    lbo: 8192,
                    sbo: 1024,
                    base_offset: 0,
                    swizzle: 1
                }
            );
        }

        #[test]
        fn canonical_addresses_by_hand() {
            // K-major, SBO 1024: (1, 0) is row 1 chunk 0, swizzled to chunk 1; (9, 8) is group 1,
            // row 1, chunk 1, swizzled to chunk 0.
            let a = Descriptor::decode(crate::wgmma::desc_sw128(0, 16, 1024));
            assert_eq!(a.address_of(1, 0, false, 2), 128 + 16);
            assert_eq!(a.address_of(9, 8, false, 2), 1024 + 128);
            // MN-major, LBO 8192 (64-column chunks), SBO 1024 (8-row groups): (65, 9) is chunk 1,
            // group 1, row 1, byte 2: 9346, whose 16-byte chunk 0 swaps with row 1.
            let b = Descriptor::decode(crate::wgmma::desc_sw128(0, 8192, 1024));
            assert_eq!(b.address_of(65, 9, true, 2), 9346 + 16);
        }

        #[test]
        fn tf32_k_major_addresses_by_hand() {
            // 4-byte elements, 32 per 128-byte row, SBO 1024: (1, 0) is row 1 chunk 0, swizzled
            // to chunk 1; (9, 5) is group 1, row 1, byte 20 (chunk 1), swizzled to chunk 0;
            // (2, 31) is row 2, byte 124 (chunk 7), swizzled to chunk 5.
            let a = Descriptor::decode(crate::wgmma::desc_sw128(0, 16, 1024));
            assert_eq!(a.address_of(1, 0, false, 4), 128 + 16);
            assert_eq!(a.address_of(9, 5, false, 4), 1024 + 128 + 4);
            assert_eq!(a.address_of(2, 31, false, 4), 256 + 5 * 16 + 12);
            // The second step of 8 along k starts 32 bytes on: its k = 0 is the first's k = 8.
            let step = Descriptor::decode(crate::wgmma::desc_sw128(32, 16, 1024));
            for mn in 0..16 {
                for k in 0..8 {
                    assert_eq!(
                        step.address_of(mn, k, false, 4),
                        a.address_of(mn, k + 8, false, 4)
                    );
                }
            }
        }

        #[test]
        #[should_panic(expected = "only 16-bit types transpose")]
        fn tf32_has_no_mn_major_layout() {
            let a = Descriptor::decode(crate::wgmma::desc_sw128(0, 16, 1024));
            let _ = a.address_of(0, 0, true, 4);
        }

        #[test]
        fn tf32_truncation_drops_the_low_13_bits() {
            use super::tf32_truncate;
            // 1 + 2^-11 + 2^-12 truncates to 1 (rounding would give 1 + 2^-10).
            let x = 1.0 + f32::powi(2.0, -11) + f32::powi(2.0, -12);
            assert_eq!(tf32_truncate(x), 1.0);
            assert_eq!(tf32_truncate(-x), -1.0);
            let y = 1.0 + f32::powi(2.0, -10);
            assert_eq!(tf32_truncate(y), y);
            assert_eq!(tf32_truncate(f32::INFINITY), f32::INFINITY);
        }

        #[test]
        fn tf32_ptx_has_four_k8_products_without_transpose_operands() {
            let ptx = crate::wgmma::MMA_TF32_M64N256K32_PTX;
            let lines: Vec<&str> = ptx.lines().filter(|l| l.starts_with("wgmma.mma_async")).collect();
            assert_eq!(lines.len(), 4);
            for (s, line) in lines.iter().enumerate() {
                assert!(line.starts_with("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "));
                let tail = format!(
                    "}}}}, {{a{s}}}, {{b{s}}}, {}, 1, 1;",
                    if s == 0 { "p" } else { "t" }
                );
                assert!(line.ends_with(&tail), "{line:?} should end {tail:?}");
            }
        }

        #[test]
        fn swizzle_agrees_with_the_copy_engine_model() {
            for address in (0..8192).step_by(2) {
                assert_eq!(
                    swizzle_128b(address),
                    crate::tma::swizzle_128b(address),
                    "{address}"
                );
            }
        }
    }
}
