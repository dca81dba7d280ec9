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
/// interprets this same text (`sim::wgmma::run`), so what it checks is what the GPU executes.
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
        crate::sim::wgmma::run(MMA_BF16_M128N128K64_PTX, &named, &mut acc);
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
                crate::sim::wgmma::run($ptx, &named, &mut acc);
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
/// it warns (C7508) and ignores it. The simulator keeps the block's registers: an increase waits
/// until the others' decreases cover it, and one they never cover is reported (on the GPU the
/// warpgroup would wait forever).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
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
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::setmaxnreg(true, N);
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: the warpgroup gives registers back, keeping `N` per
/// thread (a multiple of 8, 24 to 256). As [`setmaxnreg_inc`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
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
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::setmaxnreg(false, N);
}
