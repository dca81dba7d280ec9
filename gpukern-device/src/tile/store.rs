//! Storing an accumulator fragment into a row-major matrix in global memory: the element types a
//! tile is stored as ([`Output`]) and [`store_rows`], which runs a fused epilogue on each pair
//! and, where the rows allow it, writes 16 bytes per access.

use super::position;
use crate::convert::{f32_to_bf16, f32_to_f16, pack_bf16x2, pack_f16x2, store_bf16x2, store_f16x2};
use crate::wgmma::Accumulators;
use crate::{bf16, f16, mem, vector, warp};

/// An element type a tile's `f32` results are stored as: `f32`, `bf16` or `f16` (rounded to
/// nearest even).
pub trait Output: Copy {
    /// Stores `v` at `c[i]`.
    ///
    /// # Safety
    /// `c.add(i)` is writable global memory for one element.
    unsafe fn store(c: *mut Self, i: usize, v: f32);
    /// Stores `v` at `c[i..i + 2]` as one access.
    ///
    /// # Safety
    /// `c.add(i)` is writable for two elements and aligned to two of them.
    unsafe fn store_pair(c: *mut Self, i: usize, v: [f32; 2]);
    /// 32-bit words a stored pair takes: 1 for a 16-bit element, 2 for `f32`.
    const PAIR_WORDS: usize;
    /// A pair as the words it is stored as (`[packed, 0]` for a 16-bit element, `[lo, hi]` bits
    /// for `f32`).
    fn pack(v: [f32; 2]) -> [u32; 2];
    /// Stores four packed pairs (8 elements) at `c[i..i + 8]` as 16-byte accesses.
    ///
    /// # Safety
    /// `c.add(i)` is writable for 8 elements and 16-byte aligned.
    unsafe fn store_octet(c: *mut Self, i: usize, pairs: [[u32; 2]; 4]);
}

impl Output for f32 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store(c: *mut f32, i: usize, v: f32) {
        // SAFETY: forwarded contract.
        unsafe { mem::store(c, i, v) }
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store_pair(c: *mut f32, i: usize, v: [f32; 2]) {
        // SAFETY: forwarded contract (8-byte aligned).
        unsafe { vector::store(c, i, v) }
    }
    const PAIR_WORDS: usize = 2;
    #[inline(always)]
    fn pack(v: [f32; 2]) -> [u32; 2] {
        v.map(f32::to_bits)
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store_octet(c: *mut f32, i: usize, p: [[u32; 2]; 4]) {
        // SAFETY: forwarded contract: 8 floats, 16-byte aligned, as two 16-byte accesses.
        unsafe {
            vector::store(c.cast::<u32>(), i, [p[0][0], p[0][1], p[1][0], p[1][1]]);
            vector::store(c.cast::<u32>(), i + 4, [p[2][0], p[2][1], p[3][0], p[3][1]]);
        }
    }
}

/// The 16-bit elements: a pair is one packed word, an octet one 16-byte access.
macro_rules! half_output {
    ($t:ty, $one:ident, $pack:ident, $pair:ident) => {
        impl Output for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn store(c: *mut $t, i: usize, v: f32) {
                // SAFETY: forwarded contract.
                unsafe { mem::store(c, i, $one(v)) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn store_pair(c: *mut $t, i: usize, v: [f32; 2]) {
                // SAFETY: forwarded contract (4-byte aligned).
                unsafe { $pair(c, i, v) }
            }
            const PAIR_WORDS: usize = 1;
            #[inline(always)]
            fn pack(v: [f32; 2]) -> [u32; 2] {
                [$pack(v), 0]
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn store_octet(c: *mut $t, i: usize, p: [[u32; 2]; 4]) {
                // SAFETY: forwarded contract: 8 elements (16 bytes), 16-byte aligned, so `i / 2`
                // words in (`i` is a multiple of 8).
                unsafe { vector::store(c.cast::<u32>(), i / 2, [p[0][0], p[1][0], p[2][0], p[3][0]]) }
            }
        }
    };
}
half_output!(bf16, f32_to_bf16, pack_bf16x2, store_bf16x2);
half_output!(f16, f32_to_f16, pack_f16x2, store_f16x2);

/// Runs `$body` with `$k` = each constant `0..$n` (`$n <= 8`), so that indices into register
/// arrays stay constants.
macro_rules! unrolled {
    ($n:expr, |$k:ident| $body:block) => {{
        unrolled!(@one $n, $k, 0, $body);
        unrolled!(@one $n, $k, 1, $body);
        unrolled!(@one $n, $k, 2, $body);
        unrolled!(@one $n, $k, 3, $body);
        unrolled!(@one $n, $k, 4, $body);
        unrolled!(@one $n, $k, 5, $body);
        unrolled!(@one $n, $k, 6, $body);
        unrolled!(@one $n, $k, 7, $body);
    }};
    (@one $n:expr, $k:ident, $i:literal, $body:block) => {
        if $i < $n {
            let $k: usize = $i;
            $body
        }
    };
}

/// Stores thread `t`'s part of its warpgroup's `64 x N` result (`acc`, retired) into the
/// row-major `m x n` matrix `c` at `(row0, col0)` (the fragment's first row and column in `c`),
/// each pair through the fused epilogue `f(row, col, [v0, v1]) -> [c0, c1]` (`row`, `col` in
/// `c`; called only for pairs that start inside `c`: the second element is past the row's end
/// when `n` is odd and `col = n - 1`), the elements inside `c` only.
///
/// For a 16-bit element where `n` is a multiple of 8 (every row starts 16-byte aligned) and the
/// accumulators' width `N` a multiple of 32 (the transposition's groups of columns), the four
/// threads of a quad trade their packed pairs (three shuffles per four pairs: a 4 x 4 transpose
/// within the quad), so that each holds 8 consecutive elements of one row and writes them as one
/// 16-byte access: a warp writes 32 bytes of each of 8 rows, whole 32-byte sectors, with a quarter
/// of the store instructions of pairs. Elsewhere it stores pairs (`n` even) or single elements:
/// for `f32` pairs are 8-byte stores that already fill whole sectors (4 lanes x 8 bytes of a row),
/// and the transposition's registers would push a `128 x 256` tile's consumer past its budget
/// (ptxas 13.0 spilled the FP8 kernel's f32 output).
/// Traffic: `m n` elements of `O` written once; nothing read but what `f` reads.
///
/// # Safety
/// `c` holds `m * n` elements, 16-byte aligned; every lane of the warpgroup calls it with the
/// same arguments but `t` (the shuffles); `f` is safe to call for every pair that starts inside
/// `c`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub unsafe fn store_rows<O: Output, A: Accumulators>(
    acc: &A,
    t: usize,
    c: *mut O,
    (row0, col0): (usize, usize),
    (m, n): (usize, usize),
    mut f: impl FnMut(usize, usize, [f32; 2]) -> [f32; 2],
) {
    // The transposition works on groups of 32 columns: a width that is not a multiple of 32
    // (`m64n112`) stores pairs.
    if n % 8 != 0 || O::PAIR_WORDS > 1 || A::N % 32 != 0 {
        // SAFETY: forwarded contract.
        unsafe { store_pairs(acc, t, c, (row0, col0), (m, n), f) };
        return;
    }
    let q = t % 4;
    // Element `k` of four, picked by selects (a run-time index into a register array would put
    // it in local memory).
    let pick = |[a0, a1, a2, a3]: [[u32; 2]; 4], k: usize| -> [u32; 2] {
        let (odd, upper) = (k & 1 != 0, k & 2 != 0);
        core::array::from_fn(|h| {
            let low = if odd { a1[h] } else { a0[h] };
            let high = if odd { a3[h] } else { a2[h] };
            if upper {
                high
            } else {
                low
            }
        })
    };
    let shuffle = |v: [u32; 2], mask: u32| -> [u32; 2] {
        let lo = warp::shfl_xor_u32(v[0], mask);
        let hi = if O::PAIR_WORDS > 1 {
            warp::shfl_xor_u32(v[1], mask)
        } else {
            0
        };
        [lo, hi]
    };
    unrolled!(2, |r| {
        let row = row0 + position(2 * r, t).0;
        // Groups of 32 columns (four `j` of 8).
        unrolled!(A::N / 32, |group| {
            // This thread's pairs of row `row` at columns `8 j + 2 q` for the four `j` of the
            // group, through the epilogue where they are inside `c`.
            let mine: [[u32; 2]; 4] = core::array::from_fn(|jj| {
                let i = 4 * (4 * group + jj) + 2 * r;
                let col = col0 + position(i, t).1;
                let v = [acc[i], acc[i + 1]];
                O::pack(if row < m && col < n { f(row, col, v) } else { v })
            });
            // `got[i]`: lane `q ^ i`'s pair for `j = 4 group + q` (each lane sends the pair the
            // receiving lane `q ^ i` needs).
            let got = [
                pick(mine, q),
                shuffle(pick(mine, q ^ 1), 1),
                shuffle(pick(mine, q ^ 2), 2),
                shuffle(pick(mine, q ^ 3), 3),
            ];
            // Lane `k`'s pair (columns `2k`, `2k + 1` of the 8) is `got[k ^ q]`.
            let octet: [[u32; 2]; 4] = core::array::from_fn(|k| pick(got, k ^ q));
            let col = col0 + 8 * (4 * group + q);
            if row < m && col < n {
                // SAFETY: `row < m`, `col < n` with `col` and `n` multiples of 8: the 8 elements
                // are inside the row, 16-byte aligned (`c` is).
                unsafe { O::store_octet(c, row * n + col, octet) };
            }
        });
    });
}

/// [`store_rows`] without the 16-byte path: pairs where `n` is even, else one element at a time.
/// Each thread stores its own pairs with no shuffle, so that threads of one warp may call it or
/// not on their own (an epilogue where each thread decides alone, such as a stream-K hand-off).
/// Traffic: the pairs inside `c`, written once.
///
/// # Safety
/// As [`store_rows`] but for the shuffles: `c` aligned to a pair when `n` is even; `f` safe to
/// call for every pair that starts inside `c`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub unsafe fn store_pairs<O: Output, A: Accumulators>(
    acc: &A,
    t: usize,
    c: *mut O,
    (row0, col0): (usize, usize),
    (m, n): (usize, usize),
    mut f: impl FnMut(usize, usize, [f32; 2]) -> [f32; 2],
) {
    let even = n % 2 == 0;
    super::pairs(acc, t, |r, cc, v| {
        let (row, col) = (row0 + r, col0 + cc);
        if row >= m || col >= n {
            return;
        }
        if even {
            // SAFETY: `row < m`, `col < n`, both `n` and `col` even: the pair is inside the row,
            // aligned to a pair.
            unsafe { O::store_pair(c, row * n + col, f(row, col, v)) };
        } else {
            // `col + 1` may be past the row: the epilogue sees the pair, the store keeps what is
            // inside.
            let out = f(row, col, v);
            // SAFETY: inside `c`.
            unsafe { O::store(c, row * n + col, out[0]) };
            if col + 1 < n {
                // SAFETY: inside `c`.
                unsafe { O::store(c, row * n + col + 1, out[1]) };
            }
        }
    });
}

/// Bytes of one staged box ([`stage_boxes`]): 64 rows of one 128-byte swizzle row.
pub const STAGED_BOX_BYTES: usize = 64 * crate::tma::SWIZZLE_128B;

/// Writes thread `t`'s part of its warpgroup's `64 x N` result (`acc`, retired) into shared
/// memory at `boxes` as the boxes a tensor store ([`crate::tma::store_2d`], 128-byte swizzle)
/// reads: box `b` holds the fragment's columns `b W .. (b + 1) W` (`W = 128 / size_of::<O>()`: 64
/// for a 16-bit element, 32 for `f32`), 64 rows of 128 bytes, [`STAGED_BOX_BYTES`] apart; each
/// pair through the fused epilogue `f(row, col, [v0, v1]) -> [c0, c1]` (`row`, `col` in the
/// fragment). One 4-byte (16-bit pairs) or 8-byte (`f32`) store per pair; the swizzle puts the 8
/// rows a warp writes at once in 8 different 16-byte chunks, so a warp's stores meet no bank
/// conflict. Traffic: `64 N` elements of `O` written to shared memory, nothing read.
///
/// What comes after is the kernel's: each writing thread's `fence.proxy.async`
/// ([`crate::bulk::fence_shared`]), a barrier over the writers (a named barrier of the
/// warpgroup, [`crate::barrier::sync`]), and one thread's tensor stores of the boxes; before
/// the boxes are written again, that thread's `wait_group_read` and the barrier once more.
///
/// # Safety
/// `boxes` is 1024-byte aligned in this block's shared memory with `N * size_of::<O>() / 128`
/// boxes of [`STAGED_BOX_BYTES`] free for this warpgroup (no tensor store still reading them);
/// `N * size_of::<O>()` is a multiple of 128.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn stage_boxes<O: Output, A: Accumulators>(
    acc: &A,
    t: usize,
    boxes: *mut u8,
    mut f: impl FnMut(usize, usize, [f32; 2]) -> [f32; 2],
) {
    let size = core::mem::size_of::<O>();
    super::pairs(acc, t, |r, c, v| {
        let byte = c * size;
        let (b, within) = (byte / crate::tma::SWIZZLE_128B, byte % crate::tma::SWIZZLE_128B);
        let at = b * STAGED_BOX_BYTES + crate::tma::swizzle_128b(r * crate::tma::SWIZZLE_128B + within);
        // SAFETY: inside box `b` (row `r < 64`, `within + 2 size <= 128`: `c` even), aligned to the
        // pair (`at` a multiple of `2 size`: the swizzle moves whole 16-byte chunks); the
        // caller's contract for the rest.
        unsafe { O::store_pair(boxes.wrapping_add(at).cast::<O>(), 0, f(r, c, v)) }
    });
}
