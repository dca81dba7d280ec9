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
//! In the simulator a product is done directly: each thread reads the rows of `A` and the
//! columns of `B` its accumulators need from shared memory, through the layouts above (checked
//! loads), and sums the exact products in f64 before adding to its accumulators in f32 (at least
//! as accurate as the tensor core). [`fence`], [`commit_group`], [`wait_group`] do nothing there.

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
        core::arch::asm!("wgmma.fence.sync.aligned;", options(nostack));
    }
}

/// `wgmma.commit_group.sync.aligned`: closes the warpgroup's pending `mma_async`s into a group.
/// Nothing in the simulator.
#[inline(always)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective bookkeeping.
    unsafe {
        core::arch::asm!("wgmma.commit_group.sync.aligned;", options(nostack));
    }
}

/// `wgmma.wait_group.sync.aligned 0`: waits until every committed group of the warpgroup has
/// completed (its accumulators written, its shared-memory reads done). Nothing in the simulator.
#[inline(always)]
pub fn wait_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective wait.
    unsafe {
        core::arch::asm!("wgmma.wait_group.sync.aligned 0;", options(nostack));
    }
}

/// The accumulator list `{{{a},{b},...}}` of a `wgmma` operand, from positional operand indices.
#[cfg(target_arch = "nvptx64")]
macro_rules! acc_list {
    ($first:literal $($i:literal)*) => {
        concat!("{{{", stringify!($first), "}" $(, ",{", stringify!($i), "}")*, "}}")
    };
}

/// One `wgmma.mma_async.m64n128k16.f32.bf16.bf16` line: `A` K-major, `B` N-major (transpose bit),
/// scale-d from the predicate `p`.
#[cfg(target_arch = "nvptx64")]
macro_rules! mma_line {
    ([$($i:literal)*], $a:literal, $b:literal) => {
        concat!("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 ", acc_list!($($i)*), ", {", $a, "}, {", $b, "}, p, 1, 1, 0, 1;")
    };
}

/// `C(128 x 128) = A(128 x 64) * B(64 x 128) (+ C)` on a warpgroup, bf16 operands in shared
/// memory, f32 accumulators: for each step `s` of 16 along `k`, two `m64n128k16` products (rows
/// 0..64 with `a[0][s]`, rows 64..128 with `a[1][s]`, both with `b[s]`), all in one `asm!` block:
/// `wgmma.fence`, the 8 products, `commit_group`, `wait_group 0`.
///
/// Returns the accumulators; `acc[0..64]` are this thread's accumulators of rows 0..64 and `acc[64..128]` those of rows
/// 64..128, each in the layout of the module documentation. `a[h][s]` describes the `64 x 16` tile
/// of `A` (K-major, 128-byte swizzle), `b[s]` the `16 x 128` tile of `B` (N-major, 128-byte
/// swizzle, [`desc_sw128`]). With `accumulate` false the products overwrite `acc` (the first
/// tile of `k`), else they add to it.
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
    #[cfg(target_arch = "nvptx64")]
    {
        let scale = accumulate as u32;
        macro_rules! go {
            ($($i:literal)*) => {
                // SAFETY: the caller's contract: the whole warpgroup is here and the shared tiles
                // are ready; fence, products, commit and wait in one block, so no accumulator is
                // touched while a product is in flight.
                unsafe {
                    core::arch::asm!(
                        "{{",
                        ".reg .pred p;",
                        "setp.ne.b32 p, {scale}, 0;",
                        "wgmma.fence.sync.aligned;",
                        mma_line!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63], "a00", "b0"),
                        mma_line!([64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127], "a10", "b0"),
                        mma_line!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63], "a01", "b1"),
                        mma_line!([64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127], "a11", "b1"),
                        mma_line!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63], "a02", "b2"),
                        mma_line!([64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127], "a12", "b2"),
                        mma_line!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63], "a03", "b3"),
                        mma_line!([64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127], "a13", "b3"),
                        "wgmma.commit_group.sync.aligned;",
                        "wgmma.wait_group.sync.aligned 0;",
                        "}}",
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
        let (lo, hi) = acc.split_at_mut(64);
        for s in 0..4 {
            sim::m64nk16_nmajor_b(lo, a[0][s], b[s], accumulate || s > 0);
            sim::m64nk16_nmajor_b(hi, a[1][s], b[s], accumulate || s > 0);
        }
    }
    acc
}

/// The simulator's products.
#[cfg(not(target_arch = "nvptx64"))]
mod sim {
    use crate::tma::swizzle_128b;

    /// Reads the bf16 at shared-window byte address `address` (swizzled as the hardware reads
    /// it), widened to f64.
    #[track_caller]
    fn element(address: usize) -> f64 {
        let base = crate::sim::device::shared_base();
        let p = base.wrapping_add(swizzle_128b(address)).cast::<u16>();
        // SAFETY: checked by the simulator (bounds, initialisation, races).
        let bits = unsafe { crate::mem::load(p, 0) };
        f64::from(f32::from_bits(u32::from(bits) << 16))
    }

    /// The fields of a 128-byte-swizzle descriptor: start, leading and stride byte offsets.
    fn fields(desc: u64) -> (usize, usize, usize) {
        assert_eq!(
            desc >> 62,
            1,
            "wgmma descriptor {desc:#x}: the simulator reads 128-byte swizzle only"
        );
        assert_eq!(
            (desc >> 49) & 7,
            0,
            "wgmma descriptor {desc:#x}: base offset must be 0"
        );
        let f = |shift: u32| (((desc >> shift) & 0x3fff) << 4) as usize;
        (f(0), f(16), f(32))
    }

    /// One `m64nNk16` (`N = 2 acc.len()`) with `A` K-major and `B` N-major, for the running
    /// thread's accumulators.
    #[track_caller]
    pub(super) fn m64nk16_nmajor_b(acc: &mut [f32], a: u64, b: u64, accumulate: bool) {
        let t = crate::sim::device::thread_idx().0 as usize % 128;
        let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
        let (a_start, _, a_sbo) = fields(a);
        let (b_start, b_lbo, b_sbo) = fields(b);
        let n = 2 * acc.len();
        let rows: [[f64; 16]; 2] = core::array::from_fn(|h| {
            let r = 16 * w + g + 8 * h;
            core::array::from_fn(|k| element(a_start + (r / 8) * a_sbo + (r % 8) * 128 + 2 * k))
        });
        for j in 0..n / 8 {
            for e in 0..2 {
                let c = 8 * j + 2 * q + e;
                let col: [f64; 16] = core::array::from_fn(|k| {
                    element(b_start + (c / 64) * b_lbo + (k / 8) * b_sbo + (k % 8) * 128 + 2 * (c % 64))
                });
                for (h, row) in rows.iter().enumerate() {
                    let i = 4 * j + 2 * h + e;
                    let dot: f64 = row.iter().zip(&col).map(|(x, y)| x * y).sum();
                    let before = if accumulate { f64::from(acc[i]) } else { 0.0 };
                    acc[i] = (before + dot) as f32;
                }
            }
        }
    }
}
