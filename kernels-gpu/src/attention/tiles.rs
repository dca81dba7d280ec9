//! The shared-memory tiles of the fused attention rungs on `mma.sync` ([`super::flash`] and
//! [`super::backward_flash`]): 64 rows of `D` 16-bit elements copied by 16-byte `cp.async`,
//! each row padded to `D + 8` elements so that an `ldmatrix` phase's 8 rows fall in 8 disjoint
//! groups of 4 banks, and the `m16n8k16` fragments read from them.

use crate::gpu::async_copy::cp_async_16;
use crate::gpu::mma::{ldmatrix_x4, ldmatrix_x4_trans};

use super::AttentionElement;

/// Rows of one tile (query rows or keys).
pub const TILE_ROWS: usize = 64;
/// Elements of padding after each shared row (16 bytes).
pub const PAD: usize = 8;
/// Elements of one 16-byte copy.
const PIECE: usize = 8;

/// Copies rows `row0 ..+ 64` of a tensor (`src` at element `base`, rows `stride` elements
/// apart, `D` contiguous elements each) to the shared tile `dst` (rows of `D + 8`), zeros for
/// rows at or past `rows`. Thread `tid` of `threads` issues pieces `tid + threads l`; the
/// caller commits the group.
///
/// # Safety
/// * `dst` is a 16-byte aligned tile of 64 rows of `D + 8` elements in shared memory.
/// * `src` is 16-byte aligned, `base` and `stride` multiples of 8, and every row below `rows`
///   of the 64 holds `D` elements at `base + row * stride`.
/// * `64 D / 8` is a multiple of `threads`, and `tid < threads`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_tile<const D: usize>(
    tid: usize,
    threads: usize,
    dst: *mut u16,
    src: *const u16,
    base: usize,
    stride: usize,
    row0: usize,
    rows: usize,
) {
    let (pitch, per_row) = (D + PAD, D / PIECE);
    for l in 0..TILE_ROWS * per_row / threads {
        let p = tid + l * threads;
        let (r, c) = (p / per_row, (p % per_row) * PIECE);
        let inside = row0 + r < rows;
        let from = if inside {
            src.wrapping_add(base + (row0 + r) * stride + c)
        } else {
            src
        };
        // SAFETY: `dst` row `r < 64`, columns `c ..+ 8 <= D`: inside the tile, 16-byte aligned
        // (`pitch` and `c` multiples of 8). The source piece lies inside the tensor when
        // `inside` (row below `rows`, `c + 8 <= D`), 16-byte aligned (aligned base, strides
        // multiples of 8); else nothing is read from the aligned base.
        unsafe {
            cp_async_16(
                dst.wrapping_add(r * pitch + c).cast(),
                from.cast(),
                if inside { 16 } else { 0 },
            )
        };
    }
}

/// The `A` fragment of rows `r0 ..+ 16`, columns `c0 ..+ 16` of a shared tile with rows
/// `pitch` elements apart (`ldmatrix.x4`), warp-collective; `lane` is the caller's lane.
///
/// # Safety
/// The 16 x 16 block lies inside the tile, every row 16-byte aligned (`pitch`, `c0` multiples
/// of 8), written and visible to the warp; every lane calls it together.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn a_fragment(tile: *const u16, pitch: usize, r0: usize, c0: usize, lane: usize) -> [u32; 4] {
    // SAFETY: the caller's contract.
    unsafe { ldmatrix_x4(tile.wrapping_add((r0 + lane % 16) * pitch + c0 + 8 * (lane / 16))) }
}

/// The `B` fragments of `X Y^T` for the 16 rows `n0 ..+ 16` of `Y` (the product's columns) at
/// columns `c0 ..+ 16` (the inner dimension): the fragment of columns `n0 ..+ 8` of the
/// product, then that of `n0 + 8 ..+ 8` (`ldmatrix.x4` of `Y`'s rows), warp-collective.
///
/// # Safety
/// As [`a_fragment`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn b_pair(tile: *const u16, pitch: usize, n0: usize, c0: usize, lane: usize) -> [[u32; 2]; 2] {
    let mi = lane / 8;
    // SAFETY: the caller's contract.
    let r =
        unsafe { ldmatrix_x4(tile.wrapping_add((n0 + 8 * (mi / 2) + lane % 8) * pitch + c0 + 8 * (mi % 2))) };
    [[r[0], r[1]], [r[2], r[3]]]
}

/// The `B` fragments of `X Y` for the 16 rows `k0 ..+ 16` of `Y` (the inner dimension) at
/// columns `n0 ..+ 16` (the product's columns): the fragment of columns `n0 ..+ 8`, then that
/// of `n0 + 8 ..+ 8` (`ldmatrix.x4.trans`), warp-collective.
///
/// # Safety
/// As [`a_fragment`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn b_pair_trans(
    tile: *const u16,
    pitch: usize,
    k0: usize,
    n0: usize,
    lane: usize,
) -> [[u32; 2]; 2] {
    // SAFETY: the caller's contract.
    let r = unsafe { ldmatrix_x4_trans(tile.wrapping_add((k0 + lane % 16) * pitch + n0 + 8 * (lane / 16))) };
    [[r[0], r[1]], [r[2], r[3]]]
}

/// Two `m16n8` accumulators of a 16-row product, `lo` (columns `16 kk ..+ 8`) and `hi`
/// (`16 kk + 8 ..+ 8`), rounded to `T` and packed as the `A` fragment of a next product whose
/// inner dimension they are (how `P` feeds `P V`).
#[inline(always)]
pub fn pack_a<T: AttentionElement>(lo: [f32; 4], hi: [f32; 4]) -> [u32; 4] {
    [
        T::pack([lo[0], lo[1]]),
        T::pack([lo[2], lo[3]]),
        T::pack([hi[0], hi[1]]),
        T::pack([hi[2], hi[3]]),
    ]
}
