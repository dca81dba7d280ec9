//! Warp-level tensor-core tiles for sm_80 and later (`mma.sync.m16n8k16`, bf16 and f16 in, f32
//! accumulated): a padded row-major tile in shared memory ([`Padded`]), filled by the block with
//! 16-byte `cp.async` copies (zeros past the matrix), the register fragments a warp loads from it
//! with `ldmatrix` ([`FragA`], [`FragB`]) and the accumulator tile they multiply into ([`Acc`]).
//!
//! A warp computes `C (16 x 8) += A (16 x 16) B (16 x 8)` per [`Acc::mma`]. `A` comes from a
//! row-major tile (`m x k`, [`Padded::a`]); `B` from a row-major `k x n` tile ([`Padded::b`],
//! `ldmatrix.trans`) or from a row-major `n x k` tile, `B^T` as `nn.Linear` stores a weight
//! ([`Padded::b_t`]); each `B` load gives the fragments of 16 columns (two `n8` tiles).
//!
//! The rows of a [`Padded`] tile are `COLS + 8` elements apart: the 8 rows of 16 bytes that one
//! phase of `ldmatrix` reads then start 16 bytes further round the 32 banks each (for `COLS` a
//! multiple of 64), so the loads have no bank conflict, without a swizzle to compute.
//!
//! # Simulator
//! The copies, `ldmatrix` and `mma.sync` run as on the GPU: every shared-memory read is checked
//! for bounds, for data not yet landed (a `cp.async` not waited for) and for races.

use core::marker::PhantomData;

use crate::async_copy::cp_async_16;
use crate::mma::{ldmatrix_x4, ldmatrix_x4_trans, mma_m16n8k16_bf16, mma_m16n8k16_f16};
use crate::{bf16, f16, warp};

/// A 16-bit element of the warp tiles: bf16 or f16, with its `mma.sync.m16n8k16`.
pub trait Half: Copy + 'static {
    /// `D = A B + C` on one warp's fragments ([`crate::mma::mma_m16n8k16_bf16`] and kin).
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

impl Half for bf16 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma_m16n8k16_bf16(a, b, c)
    }
}

impl Half for f16 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma_m16n8k16_f16(a, b, c)
    }
}

/// A warp's `A` fragment: a `16 x 16` block of `A`, four registers of two elements per lane.
#[derive(Clone, Copy, Debug)]
pub struct FragA(pub [u32; 4]);

/// A warp's `B` fragment: a `16 x 8` block of `B` (16 along `k`), two registers per lane.
#[derive(Clone, Copy, Debug)]
pub struct FragB(pub [u32; 2]);

/// A warp's `16 x 8` accumulator tile, four f32 per lane: element `i` of lane `l` is at
/// [`Acc::position`]`(i, l)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Acc(pub [f32; 4]);

impl Acc {
    /// Zeros.
    pub const ZERO: Acc = Acc([0.0; 4]);

    /// `self + A B` on the tensor cores, warp-collective (every lane calls it with its own
    /// fragments).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn mma<T: Half>(self, a: FragA, b: FragB) -> Acc {
        Acc(T::mma(a.0, b.0, self.0))
    }

    /// The row and column, in the `16 x 8` tile, of element `i` of lane `lane`: row
    /// `lane / 4 + 8 (i / 2)`, column `2 (lane % 4) + i % 2`.
    #[inline(always)]
    pub const fn position(i: usize, lane: usize) -> (usize, usize) {
        (lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2)
    }
}

/// A row-major `ROWS x COLS` tile of `T` (bf16 or f16) in shared memory, its rows
/// [`Padded::STRIDE`] = `COLS + 8` elements apart (see the module documentation). `COLS` is a
/// multiple of 8 (16-byte pieces); the tile starts 16-byte aligned.
pub struct Padded<T, const ROWS: usize, const COLS: usize>(PhantomData<T>);

impl<T: Half, const ROWS: usize, const COLS: usize> Padded<T, ROWS, COLS> {
    /// Elements from one row to the next.
    pub const STRIDE: usize = COLS + 8;
    /// Elements of shared memory the tile takes.
    pub const ELEMENTS: usize = ROWS * Self::STRIDE;
    /// Bytes of shared memory the tile takes.
    pub const BYTES: usize = Self::ELEMENTS * 2;
    /// 16-byte pieces per row.
    const PIECES: usize = COLS / 8;

    /// Starts the copy of rows `row0 .. row0 + ROWS`, columns `col0 .. col0 + COLS` of the
    /// row-major `rows x cols` matrix `src` into `tile`, zeros past its edges: thread `thread` of
    /// `threads` (the block's threads that share the work) copies pieces `thread, thread +
    /// threads, ...` of 8 elements with `cp.async` (16 bytes each; nothing read past the
    /// matrix). The caller commits the group ([`crate::async_copy::commit_group`]), waits for it
    /// and syncs the block before any warp reads the tile.
    ///
    /// # Safety
    /// `tile` points to [`Padded::ELEMENTS`] elements of the block's shared memory, 16-byte
    /// aligned, that nothing reads or writes until that wait and barrier; `src` holds `rows *
    /// cols` elements of global memory, 16-byte aligned, `cols` a multiple of 8; `thread <
    /// threads`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    pub unsafe fn copy_async(
        tile: *mut T,
        src: *const T,
        (rows, cols): (usize, usize),
        (row0, col0): (usize, usize),
        thread: usize,
        threads: usize,
    ) {
        const { assert!(COLS % 8 == 0, "whole 16-byte pieces per row") };
        let mut p = thread;
        while p < ROWS * Self::PIECES {
            let (r, c) = (p / Self::PIECES, 8 * (p % Self::PIECES));
            let (row, col) = (row0 + r, col0 + c);
            let inside = row < rows && col < cols;
            let from = if inside {
                src.wrapping_add(row * cols + col)
            } else {
                src
            };
            // SAFETY: the piece is inside the tile (16-byte aligned: `STRIDE` and `c` are
            // multiples of 8); inside the matrix the 8 elements are inside row `row` (`cols % 8
            // == 0`), 16-byte aligned; past it nothing is read (`src` itself is valid).
            unsafe {
                cp_async_16(
                    tile.wrapping_add(r * Self::STRIDE + c).cast(),
                    from.cast(),
                    if inside { 16 } else { 0 },
                )
            };
            p += threads;
        }
    }

    /// The `A` fragment of the `16 x 16` block at (`row`, `col`) of the tile (`ldmatrix.x4`),
    /// warp-collective.
    ///
    /// # Safety
    /// `tile` is a landed [`Padded`] tile; `row + 16 <= ROWS`, `col + 16 <= COLS`, `col` a
    /// multiple of 8; every lane of the warp calls it with the same arguments.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn a(tile: *const T, row: usize, col: usize) -> FragA {
        let l = warp::lane_id() as usize;
        // Lane `l` points at row `l % 16`, column `8 (l / 16)`: matrices (rows 0-7, cols 0-7),
        // (8-15, 0-7), (0-7, 8-15), (8-15, 8-15), the registers of the `A` fragment in order.
        let at = tile.wrapping_add((row + l % 16) * Self::STRIDE + col + 8 * (l / 16));
        // SAFETY: the caller's contract: 8 landed elements, 16-byte aligned.
        FragA(unsafe { ldmatrix_x4(at.cast()) })
    }

    /// The two `B` fragments (columns `n .. n + 8` and `n + 8 .. n + 16`) of the `16 x 16` block
    /// at row `k`, column `n` of a tile that holds `B` row-major (`k x n`): `ldmatrix.x4.trans`,
    /// warp-collective.
    ///
    /// # Safety
    /// As [`Padded::a`], with `k + 16 <= ROWS`, `n + 16 <= COLS`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn b(tile: *const T, k: usize, n: usize) -> [FragB; 2] {
        let l = warp::lane_id() as usize;
        let at = tile.wrapping_add((k + l % 16) * Self::STRIDE + n + 8 * (l / 16));
        // SAFETY: as `a`.
        let r = unsafe { ldmatrix_x4_trans(at.cast()) };
        [FragB([r[0], r[1]]), FragB([r[2], r[3]])]
    }

    /// The two `B` fragments (columns `n .. n + 8` and `n + 8 .. n + 16` of `B`) of a tile that
    /// holds `B^T` row-major (`n x k`, as `nn.Linear` stores a weight), its `16 x 16` block at
    /// row `n`, column `k`: `ldmatrix.x4`, warp-collective.
    ///
    /// # Safety
    /// As [`Padded::a`], with `n + 16 <= ROWS`, `k + 16 <= COLS`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn b_t(tile: *const T, n: usize, k: usize) -> [FragB; 2] {
        let l = warp::lane_id() as usize;
        // Lane `l` points at matrix `i = l / 8`, row `l % 8`: matrix `i` is rows `n + 8 (i / 2)`,
        // columns `k + 8 (i % 2)` of `B^T`, so registers 0, 1 are the fragment of columns `n ..
        // n + 8` of `B` (its `k` and `k + 8` halves), registers 2, 3 that of `n + 8 .. n + 16`.
        let i = l / 8;
        let at = tile.wrapping_add((n + 8 * (i / 2) + l % 8) * Self::STRIDE + k + 8 * (i % 2));
        // SAFETY: as `a`.
        let r = unsafe { ldmatrix_x4(at.cast()) };
        [FragB([r[0], r[1]]), FragB([r[2], r[3]])]
    }
}
