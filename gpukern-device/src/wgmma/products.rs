//! The products: [`mma_bf16_m128n128k64`] (a 128 x 128 tile in one `asm!` block) and the four-step
//! products `C(64 x N) (+)= A(64 x 4K) * B(4K x N)` of each width `N` and element type (bf16,
//! f16, TF32, FP8 E4M3), with
//! their `_async` twins, each beside the PTX text it runs (and the simulator interprets). The
//! operand index lists come from the parent module's `acc_list!` and `acc_indices!`.

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
/// `acc[64..128]` those of rows 64..128, each in the layout of [`wgmma`](super)'s documentation.
/// `a[h][s]` describes the `64 x 16` tile of `A` (K-major, 128-byte swizzle), `b[s]` the
/// `16 x 128` tile of `B` (N-major, 128-byte swizzle, [`desc_sw128`](super::desc_sw128)). With
/// `accumulate` false the first step's products overwrite `acc` (the first tile of `k`) and the
/// later steps add to them; with `accumulate` true every product adds to `acc`.
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

/// One `wgmma.mma_async.m64n$nk16.f32.$ty.$ty` line on the accumulators `$i`: `A` K-major, `B`
/// N-major (imm-trans-b `$tb` = 1) or K-major (`$tb` = 0: `B` sits in shared memory as rows of
/// `B^T`, `n x k` as `nn.Linear` stores a weight, read like `A`), scale-d from the predicate
/// named `$scale`.
macro_rules! nk16_line {
    ($n:literal, $ty:literal, $tb:literal, $a:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
            acc_list!($($i)*),
            ", {", $a, "}, {", $b, "}, ", $scale, ", 1, 1, 0, ", $tb, ";\n"
        )
    };
}

/// The PTX of `C(64 x N) = A(64 x 64) * B(64 x N) (+ C)` in element type `$ty` (`N = $n`, the
/// accumulators `$i`): four steps of 16 along `k` (`a0`..`a3` with `b0`..`b3`), only the first
/// taking scale-d from the caller (`{scale}`), the later ones always adding (see
/// [`MMA_BF16_M128N128K64_PTX`] for why); then `$wait` (a `wait_group 0`, or nothing for the
/// asynchronous twins). `B` N-major, or K-major with `$tb` = "0" ([`nk16_line!`]).
macro_rules! m64nk64_ptx {
    ($n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        m64nk64_ptx!($n, $ty, "1", $wait; $($i)*)
    };
    ($n:literal, $ty:literal, $tb:literal, $wait:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "wgmma.fence.sync.aligned;\n",
            nk16_line!($n, $ty, $tb, "a0", "b0", "p"; $($i)*),
            nk16_line!($n, $ty, $tb, "a1", "b1", "t"; $($i)*),
            nk16_line!($n, $ty, $tb, "a2", "b2", "t"; $($i)*),
            nk16_line!($n, $ty, $tb, "a3", "b3", "t"; $($i)*),
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

/// One `wgmma.mma_async.m64n$nk32.f32.$ty` line on the accumulators `$i` (FP8, `$ty` the types
/// of `A` and `B`: `e4m3.e4m3`, `e4m3.e5m2`, ...): both operands K-major (FP8 `wgmma` takes no
/// imm-trans operands, as `.tf32`), scale-d from the predicate named `$scale`.
macro_rules! fp8_line {
    ($n:literal, $ty:literal, $a:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k32.f32.", $ty, " ",
            acc_list!($($i)*),
            ", {", $a, "}, {", $b, "}, ", $scale, ", 1, 1;\n"
        )
    };
}

/// The PTX of `C(64 x N) = A(64 x 128) * B(128 x N) (+ C)` with FP8 operands of types `$ty`: four
/// steps of 32 along `k` (one 128-byte swizzle row: `a0`..`a3` with `b0`..`b3`, 32 bytes apart),
/// only the first taking scale-d from the caller, as [`MMA_BF16_M64N256K64_PTX`]; `$wait` as
/// there.
macro_rules! m64nk128_fp8_ptx {
    ($n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "wgmma.fence.sync.aligned;\n",
            fp8_line!($n, $ty, "a0", "b0", "p"; $($i)*),
            fp8_line!($n, $ty, "a1", "b1", "t"; $($i)*),
            fp8_line!($n, $ty, "a2", "b2", "t"; $($i)*),
            fp8_line!($n, $ty, "a3", "b3", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            $wait,
            "}}"
        )
    };
}

/// The PTX template of a four-step product: `k64` (`$ty` a 16-bit type) `k32` (TF32) or `k128` (FP8).
macro_rules! step_ptx {
    (k64, $n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        m64nk64_ptx!($n, $ty, $wait; $($i)*)
    };
    (k32, $n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        m64nk32_tf32_ptx!($n, $wait; $($i)*)
    };
    (k64_kmajor, $n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        m64nk64_ptx!($n, $ty, "0", $wait; $($i)*)
    };
    (k128, $n:literal, $ty:literal, $wait:literal; $($i:literal)*) => {
        m64nk128_fp8_ptx!($n, $ty, $wait; $($i)*)
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
/// type and its PTX text: `$k` is `k64` (16-bit `$ty`, four `m64nNk16`), `k32` (TF32, four
/// `m64nNk8`) or `k128` (FP8 `$ty`, four `m64nNk32`); `$len = N / 2` accumulators per thread; `$wait` the closing `wait_group 0` or
/// nothing (an asynchronous twin).
macro_rules! step_product {
    ($(#[$doc:meta])* $name:ident, $ptx:ident, $k:ident, $n:literal, $len:tt, $ty:literal, $wait:literal) => {
        #[doc = concat!("The PTX text of [`", stringify!($name), "`] (interpreted as such by the simulator).")]
        pub const $ptx: &str = acc_indices!($len, step_ptx!($k, $n, $ty, $wait));

        $(#[$doc])*
        ///
        #[doc = concat!("`acc` is this thread's ", stringify!($len), " accumulators of the `64 x ", $n, "` tile")]
        /// (the layout of [`wgmma`](super)'s documentation); `a[s]` describes the tile of `A` for
        /// step `s` along `k` (K-major, 128-byte swizzle), `b[s]` that of `B` (16-bit types: N-major,
        /// 128-byte swizzle, 64-column chunks `LBO` apart; TF32 and FP8: K-major, as `A`). With
        /// `accumulate` false the first step overwrites `acc`. One `asm!` block: fence, 4
        /// products, commit, and (but for the `_async` twins, whose accumulators stay in flight
        /// until [`wait_accumulators`](super::wait_accumulators)) wait.
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
     $tf32:ident $tf32_ptx:ident,
     $e4m3:ident $e4m3_ptx:ident, $e4m3_async:ident $e4m3_async_ptx:ident,
     $mixed_async:ident $mixed_async_ptx:ident) => {
        step_product!(
            #[doc = concat!("`C(64 x ", $n, ") (+)= A(64 x 64) * B(64 x ", $n, ")` on a warpgroup, bf16 operands in shared memory, f32 accumulators.")]
            $bf16, $bf16_ptx, k64, $n, $len, "bf16", "wgmma.wait_group.sync.aligned 0;\n"
        );
        step_product!(
            #[doc = concat!("`C(64 x ", $n, ") (+)= A(64 x 64) * B(64 x ", $n, ")` on a warpgroup, f16 operands in shared memory, f32 accumulators.")]
            $f16, $f16_ptx, k64, $n, $len, "f16", "wgmma.wait_group.sync.aligned 0;\n"
        );
        step_product!(
            #[doc = concat!("[`", stringify!($bf16), "`] without the wait: the four products are committed as one group and left in flight; [`wait_accumulators`](super::wait_accumulators) retires it. Until then the returned accumulators must not be read or written by anything else, and the tiles must stay as they are.")]
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
        step_product!(
            #[doc = concat!("`C(64 x ", $n, ") (+)= A(64 x 128) * B(128 x ", $n, ")` on a warpgroup, FP8 E4M3 operands (one byte each in shared memory) and f32 accumulators: four `m64n", $n, "k32` products, **both operands K-major** (FP8 `wgmma` cannot transpose: `B` sits in shared memory as rows of `B^T`), the four steps' starts 32 bytes apart (one 128-byte swizzle row holds 128 values along `k`).")]
            ///
            /// Precision: the products are exact, but the tensor core adds them into the f32
            /// accumulators with fewer significand bits than f32 (about 14 kept, as DeepSeek-V3's
            /// report measured on the H800): callers that sum a long `k` add the accumulators
            /// into an f32 sum of their own every few steps ("promoted" accumulation).
            $e4m3, $e4m3_ptx, k128, $n, $len, "e4m3.e4m3", "wgmma.wait_group.sync.aligned 0;\n"
        );
        step_product!(
            #[doc = concat!("[`", stringify!($e4m3), "`] without the wait, as [`", stringify!($bf16_async), "`].")]
            $e4m3_async, $e4m3_async_ptx, k128, $n, $len, "e4m3.e4m3", ""
        );
        step_product!(
            #[doc = concat!("[`", stringify!($e4m3_async), "`] with `B` in FP8 E5M2 (`.e4m3.e5m2`: `A` E4M3, `B` E5M2, the pairing of an E4M3 activation with an E5M2 operand), left in flight as [`", stringify!($bf16_async), "`].")]
            $mixed_async, $mixed_async_ptx, k128, $n, $len, "e4m3.e5m2", ""
        );
    };
}

width_products!(256, 128:
    mma_bf16_m64n256k64 MMA_BF16_M64N256K64_PTX, mma_f16_m64n256k64 MMA_F16_M64N256K64_PTX,
    mma_bf16_m64n256k64_async MMA_BF16_M64N256K64_ASYNC_PTX,
    mma_f16_m64n256k64_async MMA_F16_M64N256K64_ASYNC_PTX,
    mma_tf32_m64n256k32 MMA_TF32_M64N256K32_PTX,
    mma_e4m3_m64n256k128 MMA_E4M3_M64N256K128_PTX,
    mma_e4m3_m64n256k128_async MMA_E4M3_M64N256K128_ASYNC_PTX,
    mma_e4m3_e5m2_m64n256k128_async MMA_E4M3_E5M2_M64N256K128_ASYNC_PTX);
width_products!(192, 96:
    mma_bf16_m64n192k64 MMA_BF16_M64N192K64_PTX, mma_f16_m64n192k64 MMA_F16_M64N192K64_PTX,
    mma_bf16_m64n192k64_async MMA_BF16_M64N192K64_ASYNC_PTX,
    mma_f16_m64n192k64_async MMA_F16_M64N192K64_ASYNC_PTX,
    mma_tf32_m64n192k32 MMA_TF32_M64N192K32_PTX,
    mma_e4m3_m64n192k128 MMA_E4M3_M64N192K128_PTX,
    mma_e4m3_m64n192k128_async MMA_E4M3_M64N192K128_ASYNC_PTX,
    mma_e4m3_e5m2_m64n192k128_async MMA_E4M3_E5M2_M64N192K128_ASYNC_PTX);
width_products!(128, 64:
    mma_bf16_m64n128k64 MMA_BF16_M64N128K64_PTX, mma_f16_m64n128k64 MMA_F16_M64N128K64_PTX,
    mma_bf16_m64n128k64_async MMA_BF16_M64N128K64_ASYNC_PTX,
    mma_f16_m64n128k64_async MMA_F16_M64N128K64_ASYNC_PTX,
    mma_tf32_m64n128k32 MMA_TF32_M64N128K32_PTX,
    mma_e4m3_m64n128k128 MMA_E4M3_M64N128K128_PTX,
    mma_e4m3_m64n128k128_async MMA_E4M3_M64N128K128_ASYNC_PTX,
    mma_e4m3_e5m2_m64n128k128_async MMA_E4M3_E5M2_M64N128K128_ASYNC_PTX);
width_products!(112, 56:
    mma_bf16_m64n112k64 MMA_BF16_M64N112K64_PTX, mma_f16_m64n112k64 MMA_F16_M64N112K64_PTX,
    mma_bf16_m64n112k64_async MMA_BF16_M64N112K64_ASYNC_PTX,
    mma_f16_m64n112k64_async MMA_F16_M64N112K64_ASYNC_PTX,
    mma_tf32_m64n112k32 MMA_TF32_M64N112K32_PTX,
    mma_e4m3_m64n112k128 MMA_E4M3_M64N112K128_PTX,
    mma_e4m3_m64n112k128_async MMA_E4M3_M64N112K128_ASYNC_PTX,
    mma_e4m3_e5m2_m64n112k128_async MMA_E4M3_E5M2_M64N112K128_ASYNC_PTX);
width_products!(64, 32:
    mma_bf16_m64n64k64 MMA_BF16_M64N64K64_PTX, mma_f16_m64n64k64 MMA_F16_M64N64K64_PTX,
    mma_bf16_m64n64k64_async MMA_BF16_M64N64K64_ASYNC_PTX,
    mma_f16_m64n64k64_async MMA_F16_M64N64K64_ASYNC_PTX,
    mma_tf32_m64n64k32 MMA_TF32_M64N64K32_PTX,
    mma_e4m3_m64n64k128 MMA_E4M3_M64N64K128_PTX,
    mma_e4m3_m64n64k128_async MMA_E4M3_M64N64K128_ASYNC_PTX,
    mma_e4m3_e5m2_m64n64k128_async MMA_E4M3_E5M2_M64N64K128_ASYNC_PTX);

/// The bf16 product of width `N` with `B` K-major, left in flight (`$len = N / 2`).
macro_rules! kmajor_product {
    ($n:literal, $len:tt: $name:ident $ptx:ident) => {
        step_product!(
            #[doc = concat!("`C(64 x ", $n, ") (+)= A(64 x 64) * B(64 x ", $n, ")` on a warpgroup, bf16 operands in shared memory, f32 accumulators, **`B` K-major** (its descriptors as `A`'s, over rows of `B^T`: [`crate::tile::k_major_descriptors`]), left in flight as [`mma_bf16_m64n256k64_async`]: [`wait_accumulators`](super::wait_accumulators) retires it. The grouped GEMM's product (`Y = X W^T`, `W` stored `n x k`).")]
            $name, $ptx, k64_kmajor, $n, $len, "bf16", ""
        );
    };
}

kmajor_product!(256, 128: mma_bf16_kmajor_m64n256k64_async MMA_BF16_KMAJOR_M64N256K64_ASYNC_PTX);
kmajor_product!(128, 64: mma_bf16_kmajor_m64n128k64_async MMA_BF16_KMAJOR_M64N128K64_ASYNC_PTX);
kmajor_product!(112, 56: mma_bf16_kmajor_m64n112k64_async MMA_BF16_KMAJOR_M64N112K64_ASYNC_PTX);
kmajor_product!(64, 32: mma_bf16_kmajor_m64n64k64_async MMA_BF16_KMAJOR_M64N64K64_ASYNC_PTX);
