//! The two products of an attention forward on a warpgroup (FlashAttention-3's): the scores
//! `S = Q K^T` with **both** operands K-major in shared memory (`K` is stored `[key][dim]`, its
//! rows are `B`'s columns: imm-trans-b 0), and `O += P V` with `P` taken **from registers** (the
//! `A` fragment, no shared-memory round trip) and `V` N-major in shared memory (`[key][dim]`:
//! `B`'s rows along `k`, imm-trans-b 1, as [`crate::tile::NMajor`] reads). The backward adds a
//! third kind: `dQ = dS K` with **both** operands MN-major in shared memory
//! ([`mma_bf16_m64n64k128_mn_async`]: imm-trans-a 1, imm-trans-b 1), `A` read from the tile of
//! its transpose `dS^T` (`[key][query]`, 64 queries per 128-byte row) as the backward's
//! consumers hold it in registers and store it, `K` N-major as `V` above.
//!
//! # The register `A` fragment of `m64nNk16` (16-bit types)
//! Thread `t` of the warpgroup (warp `w`, `g = (t % 32) / 4`, `q = t % 4`) holds four 32-bit
//! registers per step of 16 along `k`, two elements each (the first in the low half): register
//! `r` holds row `16 w + g + 8 (r % 2)` at columns `8 (r / 2) + 2 q` and `+ 1`. That is the
//! accumulator layout of the first 16 columns of an `m64nN` f32 result (accumulators `8 j ..
//! 8 j + 8` for columns `16 j ..+ 16`), so a thread packs its score accumulators pairwise into
//! the `A` of the next product.
//!
//! # Simulator
//! The register operand is interpreted from the same PTX text: each thread's registers are read
//! when the product is issued, and (since an element of row `g` lives in the four threads of the
//! quad) the simulated wrapper first exchanges them among the quad with warp shuffles; the
//! product then reads row `g` and `g + 8` of `A` from those 16 registers by the layout above,
//! written out again in the simulator, not taken from here.

/// One `m64n$nk16` line with both operands K-major (imm-trans-a 0, imm-trans-b 0), described
/// by the descriptor tokens `$a` and `$b` (named operands or registers the text set).
macro_rules! kb_line {
    ($n:literal, $ty:literal, $a:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
            acc_list!($($i)*),
            ", ", $a, ", ", $b, ", ", $scale, ", 1, 1, 0, 0;\n"
        )
    };
}

/// The PTX of `S(64 x N) (+)= A(64 x 64) * B(N x 64)^T`, both K-major: four steps of 16
/// along `k` from the descriptors `{a}` and `{b}` of step 0, step `s` 32 bytes on in both
/// (`as`, `bs`: the descriptors plus `2 s`, the start field being `address >> 4`), so that one
/// 64-bit register holds each operand's four; only the first step takes scale-d from
/// `{scale}`; committed, not waited for.
macro_rules! kb_ptx {
    ($n:literal, $ty:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            ".reg .b64 a1, a2, a3, b1, b2, b3;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "add.s64 a1, {a}, 2;\n",
            "add.s64 a2, {a}, 4;\n",
            "add.s64 a3, {a}, 6;\n",
            "add.s64 b1, {b}, 2;\n",
            "add.s64 b2, {b}, 4;\n",
            "add.s64 b3, {b}, 6;\n",
            "wgmma.fence.sync.aligned;\n",
            kb_line!($n, $ty, "{a}", "{b}", "p"; $($i)*),
            kb_line!($n, $ty, "a1", "b1", "t"; $($i)*),
            kb_line!($n, $ty, "a2", "b2", "t"; $($i)*),
            kb_line!($n, $ty, "a3", "b3", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            "}}"
        )
    };
}

/// One `m64n$nk16` line with `A` from the registers `a$r0..a$r3` and `B` N-major, described by
/// the descriptor token `$b` (the named operand `{b}` or a register the text set).
macro_rules! rs_line {
    ($n:literal, $ty:literal, $r0:literal $r1:literal $r2:literal $r3:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
            acc_list!($($i)*),
            ", {{{a", $r0, "},{a", $r1, "},{a", $r2, "},{a", $r3, "}}}, ", $b, ", ", $scale, ", 1, 1, 1;\n"
        )
    };
}

/// The PTX of `O(64 x N) (+)= P(64 x K) * V(K x N)` with `K = 16 $steps` (8 steps: 128 keys,
/// 4: 64): steps of 16 along `k`, `A` from the registers `a0..` (four per step), `B` from the
/// descriptor `{b}` of step 0 and, for step `s`, that descriptor plus `128 s` (`ds`: its start
/// 16 rows of 128 bytes on, which the 14-bit start field `address >> 4` holds without carry
/// below 256 KiB), so that one 64-bit register holds them all; only the first step takes
/// scale-d from `{scale}`; committed, not waited for.
macro_rules! rs_ptx {
    (8, $n:literal, $ty:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            ".reg .b64 d1, d2, d3, d4, d5, d6, d7;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "add.s64 d1, {b}, 128;\n",
            "add.s64 d2, {b}, 256;\n",
            "add.s64 d3, {b}, 384;\n",
            "add.s64 d4, {b}, 512;\n",
            "add.s64 d5, {b}, 640;\n",
            "add.s64 d6, {b}, 768;\n",
            "add.s64 d7, {b}, 896;\n",
            "wgmma.fence.sync.aligned;\n",
            rs_line!($n, $ty, "0" "1" "2" "3", "{b}", "p"; $($i)*),
            rs_line!($n, $ty, "4" "5" "6" "7", "d1", "t"; $($i)*),
            rs_line!($n, $ty, "8" "9" "10" "11", "d2", "t"; $($i)*),
            rs_line!($n, $ty, "12" "13" "14" "15", "d3", "t"; $($i)*),
            rs_line!($n, $ty, "16" "17" "18" "19", "d4", "t"; $($i)*),
            rs_line!($n, $ty, "20" "21" "22" "23", "d5", "t"; $($i)*),
            rs_line!($n, $ty, "24" "25" "26" "27", "d6", "t"; $($i)*),
            rs_line!($n, $ty, "28" "29" "30" "31", "d7", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            "}}"
        )
    };
    (4, $n:literal, $ty:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            ".reg .b64 d1, d2, d3;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "add.s64 d1, {b}, 128;\n",
            "add.s64 d2, {b}, 256;\n",
            "add.s64 d3, {b}, 384;\n",
            "wgmma.fence.sync.aligned;\n",
            rs_line!($n, $ty, "0" "1" "2" "3", "{b}", "p"; $($i)*),
            rs_line!($n, $ty, "4" "5" "6" "7", "d1", "t"; $($i)*),
            rs_line!($n, $ty, "8" "9" "10" "11", "d2", "t"; $($i)*),
            rs_line!($n, $ty, "12" "13" "14" "15", "d3", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            "}}"
        )
    };
}

/// One `m64n$nk16` line with `A` from the registers `a$r0..a$r3` and `B` K-major (imm-trans-b
/// 0), described by the descriptor token `$b`.
macro_rules! rk_line {
    ($n:literal, $ty:literal, $r0:literal $r1:literal $r2:literal $r3:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
            acc_list!($($i)*),
            ", {{{a", $r0, "},{a", $r1, "},{a", $r2, "},{a", $r3, "}}}, ", $b, ", ", $scale, ", 1, 1, 0;\n"
        )
    };
}

/// The PTX of `S(64 x N) (+)= Q(64 x 64) K(N x 64)^T` with `Q` from the registers `a0..a15`
/// (four per step of 16 along `k`) and `K` K-major from the descriptor `{b}` of step 0, step
/// `s` 32 bytes on (`+ 2 s`); only the first step takes scale-d from `{scale}`; committed, not
/// waited for.
macro_rules! rk_ptx {
    ($n:literal, $ty:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            ".reg .b64 b1, b2, b3;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "add.s64 b1, {b}, 2;\n",
            "add.s64 b2, {b}, 4;\n",
            "add.s64 b3, {b}, 6;\n",
            "wgmma.fence.sync.aligned;\n",
            rk_line!($n, $ty, "0" "1" "2" "3", "{b}", "p"; $($i)*),
            rk_line!($n, $ty, "4" "5" "6" "7", "b1", "t"; $($i)*),
            rk_line!($n, $ty, "8" "9" "10" "11", "b2", "t"; $($i)*),
            rk_line!($n, $ty, "12" "13" "14" "15", "b3", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            "}}"
        )
    };
}

/// One `m64n$nk16` line with **both** operands MN-major in shared memory (imm-trans-a 1,
/// imm-trans-b 1), described by the descriptor tokens `$a` and `$b`.
macro_rules! mn_line {
    ($n:literal, $ty:literal, $a:literal, $b:literal, $scale:literal; $($i:literal)*) => {
        concat!(
            "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
            acc_list!($($i)*),
            ", ", $a, ", ", $b, ", ", $scale, ", 1, 1, 1, 1;\n"
        )
    };
}

/// The PTX of `C(64 x N) (+)= A(64 x K) * B(K x N)` with `K = 16 $steps` (8 steps: 128, 4: 64),
/// both operands MN-major: `A` stored as rows of `A^T` (`[k][m]`, 64 `m` per 128-byte row) and
/// `B` as rows of `B` (`[k][n]`), so that step `s` of both starts 16 rows of 128 bytes (2048
/// bytes, `128` in the start field) past step 0's descriptors `{a}` and `{b}`; only the first step
/// takes scale-d from `{scale}`; committed, not waited for.
macro_rules! mn_ptx {
    (8, $n:literal, $ty:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            ".reg .b64 a1, a2, a3, a4, a5, a6, a7, b1, b2, b3, b4, b5, b6, b7;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "add.s64 a1, {a}, 128;\n",
            "add.s64 a2, {a}, 256;\n",
            "add.s64 a3, {a}, 384;\n",
            "add.s64 a4, {a}, 512;\n",
            "add.s64 a5, {a}, 640;\n",
            "add.s64 a6, {a}, 768;\n",
            "add.s64 a7, {a}, 896;\n",
            "add.s64 b1, {b}, 128;\n",
            "add.s64 b2, {b}, 256;\n",
            "add.s64 b3, {b}, 384;\n",
            "add.s64 b4, {b}, 512;\n",
            "add.s64 b5, {b}, 640;\n",
            "add.s64 b6, {b}, 768;\n",
            "add.s64 b7, {b}, 896;\n",
            "wgmma.fence.sync.aligned;\n",
            mn_line!($n, $ty, "{a}", "{b}", "p"; $($i)*),
            mn_line!($n, $ty, "a1", "b1", "t"; $($i)*),
            mn_line!($n, $ty, "a2", "b2", "t"; $($i)*),
            mn_line!($n, $ty, "a3", "b3", "t"; $($i)*),
            mn_line!($n, $ty, "a4", "b4", "t"; $($i)*),
            mn_line!($n, $ty, "a5", "b5", "t"; $($i)*),
            mn_line!($n, $ty, "a6", "b6", "t"; $($i)*),
            mn_line!($n, $ty, "a7", "b7", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            "}}"
        )
    };
    (4, $n:literal, $ty:literal; $($i:literal)*) => {
        concat!(
            "{{\n",
            ".reg .pred p, t;\n",
            ".reg .b64 a1, a2, a3, b1, b2, b3;\n",
            "setp.ne.b32 p, {scale}, 0;\n",
            "setp.ne.b32 t, 1, 0;\n",
            "add.s64 a1, {a}, 128;\n",
            "add.s64 a2, {a}, 256;\n",
            "add.s64 a3, {a}, 384;\n",
            "add.s64 b1, {b}, 128;\n",
            "add.s64 b2, {b}, 256;\n",
            "add.s64 b3, {b}, 384;\n",
            "wgmma.fence.sync.aligned;\n",
            mn_line!($n, $ty, "{a}", "{b}", "p"; $($i)*),
            mn_line!($n, $ty, "a1", "b1", "t"; $($i)*),
            mn_line!($n, $ty, "a2", "b2", "t"; $($i)*),
            mn_line!($n, $ty, "a3", "b3", "t"; $($i)*),
            "wgmma.commit_group.sync.aligned;\n",
            "}}"
        )
    };
}

/// The `asm!` of a scores product (`kb_ptx!`) on the accumulator array `$acc` (operands `$i`).
#[cfg(target_arch = "nvptx64")]
macro_rules! kb_asm {
    ($n:literal, $ty:literal, $acc:ident, $scale:ident, $a:ident, $b:ident; $($i:literal)*) => {
        core::arch::asm!(
            kb_ptx!($n, $ty; $($i)*),
            $(inout(reg32) $acc[$i],)*
            scale = in(reg32) $scale,
            a = in(reg64) $a,
            b = in(reg64) $b,
            options(nostack),
        )
    };
}

/// The `asm!` of a register-`A` product (`rs_ptx!`) of `$steps` steps on the accumulator array
/// `$acc`.
#[cfg(target_arch = "nvptx64")]
macro_rules! rs_asm {
    (8, $n:literal, $ty:literal, $acc:ident, $scale:ident, $a:ident, $b:ident; $($i:literal)*) => {
        core::arch::asm!(
            rs_ptx!(8, $n, $ty; $($i)*),
            $(inout(reg32) $acc[$i],)*
            scale = in(reg32) $scale,
            a0 = in(reg32) $a[0], a1 = in(reg32) $a[1], a2 = in(reg32) $a[2],
            a3 = in(reg32) $a[3], a4 = in(reg32) $a[4], a5 = in(reg32) $a[5],
            a6 = in(reg32) $a[6], a7 = in(reg32) $a[7], a8 = in(reg32) $a[8],
            a9 = in(reg32) $a[9], a10 = in(reg32) $a[10], a11 = in(reg32) $a[11],
            a12 = in(reg32) $a[12], a13 = in(reg32) $a[13], a14 = in(reg32) $a[14],
            a15 = in(reg32) $a[15], a16 = in(reg32) $a[16], a17 = in(reg32) $a[17],
            a18 = in(reg32) $a[18], a19 = in(reg32) $a[19], a20 = in(reg32) $a[20],
            a21 = in(reg32) $a[21], a22 = in(reg32) $a[22], a23 = in(reg32) $a[23],
            a24 = in(reg32) $a[24], a25 = in(reg32) $a[25], a26 = in(reg32) $a[26],
            a27 = in(reg32) $a[27], a28 = in(reg32) $a[28], a29 = in(reg32) $a[29],
            a30 = in(reg32) $a[30], a31 = in(reg32) $a[31],
            b = in(reg64) $b,
            options(nostack),
        )
    };
    (4, $n:literal, $ty:literal, $acc:ident, $scale:ident, $a:ident, $b:ident; $($i:literal)*) => {
        core::arch::asm!(
            rs_ptx!(4, $n, $ty; $($i)*),
            $(inout(reg32) $acc[$i],)*
            scale = in(reg32) $scale,
            a0 = in(reg32) $a[0], a1 = in(reg32) $a[1], a2 = in(reg32) $a[2],
            a3 = in(reg32) $a[3], a4 = in(reg32) $a[4], a5 = in(reg32) $a[5],
            a6 = in(reg32) $a[6], a7 = in(reg32) $a[7], a8 = in(reg32) $a[8],
            a9 = in(reg32) $a[9], a10 = in(reg32) $a[10], a11 = in(reg32) $a[11],
            a12 = in(reg32) $a[12], a13 = in(reg32) $a[13], a14 = in(reg32) $a[14],
            a15 = in(reg32) $a[15],
            b = in(reg64) $b,
            options(nostack),
        )
    };
}

/// The `asm!` of a register-`Q` scores product (`rk_ptx!`) on the accumulator array `$acc`.
#[cfg(target_arch = "nvptx64")]
macro_rules! rk_asm {
    ($n:literal, $ty:literal, $acc:ident, $scale:ident, $a:ident, $b:ident; $($i:literal)*) => {
        core::arch::asm!(
            rk_ptx!($n, $ty; $($i)*),
            $(inout(reg32) $acc[$i],)*
            scale = in(reg32) $scale,
            a0 = in(reg32) $a[0], a1 = in(reg32) $a[1], a2 = in(reg32) $a[2],
            a3 = in(reg32) $a[3], a4 = in(reg32) $a[4], a5 = in(reg32) $a[5],
            a6 = in(reg32) $a[6], a7 = in(reg32) $a[7], a8 = in(reg32) $a[8],
            a9 = in(reg32) $a[9], a10 = in(reg32) $a[10], a11 = in(reg32) $a[11],
            a12 = in(reg32) $a[12], a13 = in(reg32) $a[13], a14 = in(reg32) $a[14],
            a15 = in(reg32) $a[15],
            b = in(reg64) $b,
            options(nostack),
        )
    };
}

/// The `asm!` of a both-MN-major product (`mn_ptx!`) of `$steps` steps on the accumulator
/// array `$acc`.
#[cfg(target_arch = "nvptx64")]
macro_rules! mn_asm {
    ($steps:tt, $n:literal, $ty:literal, $acc:ident, $scale:ident, $a:ident, $b:ident; $($i:literal)*) => {
        core::arch::asm!(
            mn_ptx!($steps, $n, $ty; $($i)*),
            $(inout(reg32) $acc[$i],)*
            scale = in(reg32) $scale,
            a = in(reg64) $a,
            b = in(reg64) $b,
            options(nostack),
        )
    };
}

/// Declares a scores product (`kb_ptx!`) of element type `$ty`.
macro_rules! kb_product {
    ($(#[$doc:meta])* $name:ident, $ptx:ident, $n:literal, $len:tt, $ty:literal) => {
        #[doc = concat!("The PTX text of [`", stringify!($name), "`] (interpreted as such by the simulator).")]
        pub const $ptx: &str = acc_indices!($len, kb_ptx!($n, $ty));

        $(#[$doc])*
        ///
        #[doc = concat!("`acc` is this thread's ", stringify!($len), " accumulators of the `64 x ", $n, "` scores (the layout of")]
        /// [`wgmma`](super)'s documentation); `a` describes the `64 x 16` tile of `A` (`Q`) of
        #[doc = concat!("the first step along `k`, `b` the `", $n, " x 16` tile of `B^T` (`K`, `[key][dim]`), both")]
        /// K-major, 128-byte swizzle (the first of [`crate::tile::k_major_descriptors`]); the
        /// later steps' tiles start 32 bytes on in both. With `accumulate`
        /// false the first step overwrites `acc`. Fence, four products and commit in one `asm!`
        /// block; retire them with [`wait_accumulators`](super::wait_accumulators).
        ///
        /// # Safety
        /// Every thread of one warpgroup calls it together; the descriptors describe shared
        /// memory holding initialised tiles, which nothing writes until the products are
        /// retired; the returned accumulators are not touched before that wait.
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub unsafe fn $name(acc: [f32; $len], a: u64, b: u64, accumulate: bool) -> [f32; $len] {
            let mut acc = acc;
            let scale = accumulate as u32;
            #[cfg(target_arch = "nvptx64")]
            {
                // SAFETY: the caller's contract; one block, so no accumulator is touched while a
                // product is in flight.
                unsafe { acc_indices!($len, kb_asm!($n, $ty, acc, scale, a, b)) };
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let named = [("scale", u64::from(scale)), ("a", a), ("b", b)];
                crate::sim::wgmma::run($ptx, &named, &mut acc);
            }
            acc
        }
    };
}

kb_product!(
    /// `S(64 x 128) (+)= Q(64 x 64) K(128 x 64)^T` on a warpgroup, bf16, both operands K-major.
    mma_bf16_m64n128k64_kb_async, MMA_BF16_M64N128K64_KB_ASYNC_PTX, 128, 64, "bf16"
);
kb_product!(
    /// `S(64 x 128) (+)= Q(64 x 64) K(128 x 64)^T` on a warpgroup, f16, both operands K-major.
    mma_f16_m64n128k64_kb_async, MMA_F16_M64N128K64_KB_ASYNC_PTX, 128, 64, "f16"
);
kb_product!(
    /// `S^T(64 x 64) (+)= K(64 x 64) Q(64 x 64)^T` on a warpgroup, bf16, both operands K-major:
    /// the backward's transposed scores (64 keys of a consumer against a 64-query tile).
    mma_bf16_m64n64k64_kb_async, MMA_BF16_M64N64K64_KB_ASYNC_PTX, 64, 32, "bf16"
);
kb_product!(
    /// `S^T(64 x 64) (+)= K(64 x 64) Q(64 x 64)^T` on a warpgroup, f16, both operands K-major.
    mma_f16_m64n64k64_kb_async, MMA_F16_M64N64K64_KB_ASYNC_PTX, 64, 32, "f16"
);

/// Declares a both-MN-major product (`mn_ptx!`) of width `$n` (`$len = N / 2` accumulators),
/// `$steps` steps of 16 along `k` and element type `$ty`.
macro_rules! mn_product {
    ($(#[$doc:meta])* $name:ident, $ptx:ident, $n:literal, $len:tt, $steps:tt, $ty:literal) => {
        #[doc = concat!("The PTX text of [`", stringify!($name), "`] (interpreted as such by the simulator).")]
        pub const $ptx: &str = acc_indices!($len, mn_ptx!($steps, $n, $ty));

        $(#[$doc])*
        ///
        #[doc = concat!("`acc` is this thread's ", stringify!($len), " accumulators of the `64 x ", $n, "` result (the layout of")]
        /// [`wgmma`](super)'s documentation). **Both operands MN-major**, 128-byte swizzle: `a`
        /// describes step 0 of `A` stored transposed, rows of `A^T` (`[k][m]`: 16 rows of 64
        /// `m`, 128 bytes each, from the start; 8-row groups `SBO` apart), `b` step 0 of `B`
        /// stored `[k][n]` the same way (64-column chunks `LBO` apart); step `s` of both starts
        /// `16 s` rows (2048 bytes) on. With `accumulate` false the first step overwrites `acc`.
        #[doc = concat!("Fence, ", stringify!($steps), " products and commit in one `asm!` block; retire them with")]
        /// [`wait_accumulators`](super::wait_accumulators).
        ///
        /// # Safety
        /// Every thread of one warpgroup calls it together; the descriptors describe shared
        /// memory holding initialised tiles, made visible to the tensor cores (copies waited for,
        /// ordinary stores fenced by [`fence_proxy_async`](super::fence_proxy_async) before a
        /// barrier), which nothing writes until the products are retired; the returned
        /// accumulators are not touched before that wait.
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub unsafe fn $name(acc: [f32; $len], a: u64, b: u64, accumulate: bool) -> [f32; $len] {
            let mut acc = acc;
            let scale = accumulate as u32;
            #[cfg(target_arch = "nvptx64")]
            {
                // SAFETY: the caller's contract; one block, so no accumulator is touched while a
                // product is in flight.
                unsafe { acc_indices!($len, mn_asm!($steps, $n, $ty, acc, scale, a, b)) };
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let named = [("scale", u64::from(scale)), ("a", a), ("b", b)];
                crate::sim::wgmma::run($ptx, &named, &mut acc);
            }
            acc
        }
    };
}

mn_product!(
    /// `dQ(64 x 64) (+)= dS(64 x 128) K(128 x 64)` on a warpgroup, bf16, `dS` read from its
    /// transpose `dS^T` (`[key][query]`, as the backward's consumers hold it) and `K` N-major:
    /// the fused backward's `dQ` product over a 128-key block.
    mma_bf16_m64n64k128_mn_async, MMA_BF16_M64N64K128_MN_ASYNC_PTX, 64, 32, 8, "bf16"
);
mn_product!(
    /// `dQ(64 x 64) (+)= dS(64 x 128) K(128 x 64)` on a warpgroup, f16, both operands MN-major.
    mma_f16_m64n64k128_mn_async, MMA_F16_M64N64K128_MN_ASYNC_PTX, 64, 32, 8, "f16"
);
mn_product!(
    /// `dQ(64 x 64) (+)= dS(64 x 64) K(64 x 64)` on a warpgroup, bf16, both operands MN-major:
    /// the fused backward's `dQ` product over one consumer's 64 keys.
    mma_bf16_m64n64k64_mn_async, MMA_BF16_M64N64K64_MN_ASYNC_PTX, 64, 32, 4, "bf16"
);
mn_product!(
    /// `dQ(64 x 64) (+)= dS(64 x 64) K(64 x 64)` on a warpgroup, f16, both operands MN-major.
    mma_f16_m64n64k64_mn_async, MMA_F16_M64N64K64_MN_ASYNC_PTX, 64, 32, 4, "f16"
);

/// The simulator's side of a register-`A` product (`rs_ptx!`, `rk_ptx!`): the text's named
/// operands (`scale`, `b`, `a0..`) from this thread's values, and the quad's registers gathered
/// by warp shuffles (element (row, k) of `A` lives in lane `4 g + k % 8 / 2`), then the
/// product interpreted from `ptx`. Every lane of the warp calls it together (the shuffles).
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn simulate_register_a(ptx: &str, scale: u32, b: u64, a: &[u32], acc: &mut [f32]) {
    const A_NAMES: [&str; 32] = [
        "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10", "a11", "a12", "a13", "a14", "a15",
        "a16", "a17", "a18", "a19", "a20", "a21", "a22", "a23", "a24", "a25", "a26", "a27", "a28", "a29",
        "a30", "a31",
    ];
    let mut named = vec![("scale", u64::from(scale)), ("b", b)];
    named.extend(A_NAMES.iter().zip(a).map(|(n, v)| (*n, u64::from(*v))));
    let lane = crate::sim::device::thread_linear() % 32;
    let mut quad = [[0u32; 32]; 4];
    for (r, &value) in a.iter().enumerate() {
        for x in 0..4u32 {
            let v = if x == 0 {
                value
            } else {
                crate::warp::shfl_xor_u32(value, x)
            };
            quad[((lane % 4) ^ x) as usize][r] = v;
        }
    }
    crate::sim::wgmma::run_register_a(ptx, &named, &quad, acc);
}

/// Declares a register-`A` product (`rs_ptx!`) of width `$n` (`$len = N / 2` accumulators),
/// `$steps` steps of 16 along `k` (`$regs = 4 $steps` registers of `A`) and element type `$ty`.
macro_rules! rs_product {
    ($(#[$doc:meta])* $name:ident, $ptx:ident, $n:literal, $len:tt, $steps:tt, $regs:literal, $ty:literal) => {
        #[doc = concat!("The PTX text of [`", stringify!($name), "`] (interpreted as such by the simulator).")]
        pub const $ptx: &str = acc_indices!($len, rs_ptx!($steps, $n, $ty));

        $(#[$doc])*
        ///
        #[doc = concat!("`acc` is this thread's ", stringify!($len), " accumulators of the `64 x ", $n, "` output;")]
        /// `a[4 s .. 4 s + 4]` are this thread's registers of the `A` fragment of step `s` (keys
        /// `16 s ..+ 16`; the module documentation's layout); `b` describes the `16 x N` tile of
        /// `V` for step 0 (N-major, 128-byte swizzle), the later steps' tiles 16 rows of 128
        /// bytes apart (2048 bytes). With `accumulate` false the first step
        #[doc = concat!("overwrites `acc`. Fence, ", stringify!($steps), " products and commit in one `asm!` block; retire them")]
        /// with [`wait_accumulators`](super::wait_accumulators).
        ///
        /// # Safety
        /// Every thread of one warpgroup calls it together; the descriptors describe shared
        /// memory holding an initialised tile, which nothing writes until the products are
        /// retired; the returned accumulators are not touched before that wait.
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub unsafe fn $name(acc: [f32; $len], a: [u32; $regs], b: u64, accumulate: bool) -> [f32; $len] {
            let mut acc = acc;
            let scale = accumulate as u32;
            #[cfg(target_arch = "nvptx64")]
            {
                // SAFETY: the caller's contract; one block, so no accumulator is touched while a
                // product is in flight.
                unsafe { acc_indices!($len, rs_asm!($steps, $n, $ty, acc, scale, a, b)) };
            }
            #[cfg(not(target_arch = "nvptx64"))]
            simulate_register_a($ptx, scale, b, &a, &mut acc);
            acc
        }
    };
}

rs_product!(
    /// `O(64 x 128) (+)= P(64 x 128) V(128 x 128)` on a warpgroup, bf16, `P` from registers.
    mma_bf16_m64n128k128_rs_async, MMA_BF16_M64N128K128_RS_ASYNC_PTX, 128, 64, 8, 32, "bf16"
);
rs_product!(
    /// `O(64 x 128) (+)= P(64 x 128) V(128 x 128)` on a warpgroup, f16, `P` from registers.
    mma_f16_m64n128k128_rs_async, MMA_F16_M64N128K128_RS_ASYNC_PTX, 128, 64, 8, 32, "f16"
);
rs_product!(
    /// `O(64 x 64) (+)= P(64 x 128) V(128 x 64)` on a warpgroup, bf16, `P` from registers.
    mma_bf16_m64n64k128_rs_async, MMA_BF16_M64N64K128_RS_ASYNC_PTX, 64, 32, 8, 32, "bf16"
);
rs_product!(
    /// `O(64 x 64) (+)= P(64 x 128) V(128 x 64)` on a warpgroup, f16, `P` from registers.
    mma_f16_m64n64k128_rs_async, MMA_F16_M64N64K128_RS_ASYNC_PTX, 64, 32, 8, 32, "f16"
);
rs_product!(
    /// `dV(64 x 128) (+)= P^T(64 x 64) dO(64 x 128)` on a warpgroup, bf16, `P^T` from registers:
    /// the backward's products over a 64-query tile.
    mma_bf16_m64n128k64_rs_async, MMA_BF16_M64N128K64_RS_ASYNC_PTX, 128, 64, 4, 16, "bf16"
);
rs_product!(
    /// `dV(64 x 128) (+)= P^T(64 x 64) dO(64 x 128)` on a warpgroup, f16, `P^T` from registers.
    mma_f16_m64n128k64_rs_async, MMA_F16_M64N128K64_RS_ASYNC_PTX, 128, 64, 4, 16, "f16"
);
rs_product!(
    /// `dV(64 x 64) (+)= P^T(64 x 64) dO(64 x 64)` on a warpgroup, bf16, `P^T` from registers.
    mma_bf16_m64n64k64_rs_async, MMA_BF16_M64N64K64_RS_ASYNC_PTX, 64, 32, 4, 16, "bf16"
);
rs_product!(
    /// `dV(64 x 64) (+)= P^T(64 x 64) dO(64 x 64)` on a warpgroup, f16, `P^T` from registers.
    mma_f16_m64n64k64_rs_async, MMA_F16_M64N64K64_RS_ASYNC_PTX, 64, 32, 4, 16, "f16"
);
rs_product!(
    /// `O(64 x 256) (+)= P(64 x 64) V(64 x 256)` on a warpgroup, bf16, `P` from registers: the
    /// forward's `P V` at head dim 256 (64-key tiles).
    mma_bf16_m64n256k64_rs_async, MMA_BF16_M64N256K64_RS_ASYNC_PTX, 256, 128, 4, 16, "bf16"
);
rs_product!(
    /// `O(64 x 256) (+)= P(64 x 64) V(64 x 256)` on a warpgroup, f16, `P` from registers.
    mma_f16_m64n256k64_rs_async, MMA_F16_M64N256K64_RS_ASYNC_PTX, 256, 128, 4, 16, "f16"
);

/// Declares a register-`Q` scores product (`rk_ptx!`) of element type `$ty`.
macro_rules! rk_product {
    ($(#[$doc:meta])* $name:ident, $ptx:ident, $n:literal, $len:tt, $ty:literal) => {
        #[doc = concat!("The PTX text of [`", stringify!($name), "`] (interpreted as such by the simulator).")]
        pub const $ptx: &str = acc_indices!($len, rk_ptx!($n, $ty));

        $(#[$doc])*
        ///
        #[doc = concat!("`acc` is this thread's ", stringify!($len), " accumulators of the `64 x ", $n, "` scores;")]
        /// `a[4 s .. 4 s + 4]` are this thread's registers of the `A` fragment (`Q`) of step `s`
        /// (dims `16 s ..+ 16` of the 64-dim box; the module documentation's layout, as
        /// [`crate::mma::ldmatrix_x4`] loads a 16 x 16 tile); `b` describes the
        #[doc = concat!("`", $n, " x 16` tile of `B^T` (`K`, `[key][dim]`) of step 0, K-major, 128-byte swizzle, the")]
        /// later steps' tiles 32 bytes on. With `accumulate` false the first step overwrites
        /// `acc`. Fence, four products and commit in one `asm!` block; retire them with
        /// [`wait_accumulators`](super::wait_accumulators).
        ///
        /// # Safety
        /// Every thread of one warpgroup calls it together; the descriptor describes shared
        /// memory holding an initialised tile, which nothing writes until the products are
        /// retired; the returned accumulators are not touched before that wait.
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub unsafe fn $name(acc: [f32; $len], a: [u32; 16], b: u64, accumulate: bool) -> [f32; $len] {
            let mut acc = acc;
            let scale = accumulate as u32;
            #[cfg(target_arch = "nvptx64")]
            {
                // SAFETY: the caller's contract; one block, so no accumulator is touched while a
                // product is in flight.
                unsafe { acc_indices!($len, rk_asm!($n, $ty, acc, scale, a, b)) };
            }
            #[cfg(not(target_arch = "nvptx64"))]
            simulate_register_a($ptx, scale, b, &a, &mut acc);
            acc
        }
    };
}

rk_product!(
    /// `S(64 x 128) (+)= Q(64 x 64) K(128 x 64)^T` on a warpgroup, bf16, `Q` from registers and
    /// `K` K-major in shared memory: the forward's scores with `Q` held by the consumer.
    mma_bf16_m64n128k64_rk_async, MMA_BF16_M64N128K64_RK_ASYNC_PTX, 128, 64, "bf16"
);
rk_product!(
    /// `S(64 x 128) (+)= Q(64 x 64) K(128 x 64)^T` on a warpgroup, f16, `Q` from registers.
    mma_f16_m64n128k64_rk_async, MMA_F16_M64N128K64_RK_ASYNC_PTX, 128, 64, "f16"
);
rk_product!(
    /// `S(64 x 64) (+)= Q(64 x 64) K(64 x 64)^T` on a warpgroup, bf16, `Q` from registers: the
    /// 64-key tiles' scores.
    mma_bf16_m64n64k64_rk_async, MMA_BF16_M64N64K64_RK_ASYNC_PTX, 64, 32, "bf16"
);
rk_product!(
    /// `S(64 x 64) (+)= Q(64 x 64) K(64 x 64)^T` on a warpgroup, f16, `Q` from registers.
    mma_f16_m64n64k64_rk_async, MMA_F16_M64N64K64_RK_ASYNC_PTX, 64, 32, "f16"
);
