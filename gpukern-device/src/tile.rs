//! Tiles for the tensor cores: the warpgroup's (sm_90a, below) and the warp's ([`warp`], sm_80+).
//! The warpgroup's: the shared-memory operand tiles of `wgmma`
//! in the 128-byte swizzle layout the copy engine writes, with their matrix descriptors, and the
//! register accumulator fragment with the position of each of its elements, for epilogues.
//!
//! * [`KMajor<T, ROWS>`]: `ROWS` rows of one 128-byte row along `k` (64 bf16/f16, 32 f32): `A`
//!   of a product (row-major `m x k`), or `B^T` (row-major `n x k`). One box of the copy engine.
//! * [`NMajor<T, COLS>`]: `K` rows along `k` (64 for 16-bit types) of `COLS` columns: `B` of a
//!   product read from a row-major `k x n` matrix, as `COLS / 64` boxes of `64 x 64` side by
//!   side, which the descriptor's transpose bit reads as `B`.
//! * [`descriptors`](KMajor::descriptors): the four descriptors of one 128-byte step along `k`,
//!   for the four-step products ([`crate::wgmma::Accumulators`]: `mma_bf16_async` and kin).
//! * [`position`] and [`pairs`]: the row and column of each accumulator of a thread's
//!   `64 x N` fragment, so that a fused epilogue (bias, activation, rounding) reads as a loop.
//! * [`warp`]: the warp-level tiles of `mma.sync` (sm_80 and later): a padded shared-memory tile,
//!   `ldmatrix` fragments of `A` and `B`, the `16 x 8` accumulator.
//! * [`store_rows`]: the fragment stored into a row-major matrix of an [`Output`] element
//!   (`f32`, `bf16`, `f16`) through a fused epilogue, 16 bytes per access where the rows allow;
//!   [`store_pairs`] the same with no shuffles, each thread on its own; [`stage_boxes`] the
//!   fragment into shared memory as the 128-byte-swizzled boxes a tensor store
//!   ([`crate::tma::store_2d`]) writes out, for an epilogue that ends at shared memory.
//!
//! The layouts are those of [`crate::wgmma`]'s documentation: a tile starts on a 1024-byte
//! boundary; the 8-row groups are 1024 bytes apart (`SBO`); the steps of 16 (16-bit) or 8 (f32)
//! along `k` are 32 bytes apart within a 128-byte row for a K-major tile and `K / 4` rows apart
//! for an N-major one, whose 64-column boxes are `LBO` apart.
//!
//! # Simulator
//! The simulator decodes every descriptor by its bit fields against the canonical layouts and
//! the swizzle written out afresh ([`crate::wgmma`]'s simulator section), and reports one that
//! does not read the tile the way the copy engine wrote it; the loads are [`crate::tma`] copies.

mod store;
pub mod warp;

pub use store::{stage_boxes, store_pairs, store_rows, Output, STAGED_BOX_BYTES};

use crate::pipeline::Stage;
use crate::tma::{Tensor2d, SWIZZLE_128B};
use crate::wgmma::{self, Accumulators};

/// Bytes of one 8-row swizzle atom: the distance of 8-row groups in a dense tile (`SBO`).
const ATOM: usize = 8 * SWIZZLE_128B;

/// A K-major operand tile in shared memory: `ROWS` rows (a multiple of 8) of one 128-byte row
/// of `T` along `k`, 128-byte swizzled; one box of a [`Tensor2d`] with `box_rows = ROWS`.
pub struct KMajor<T, const ROWS: usize>(core::marker::PhantomData<T>);

impl<T: Copy, const ROWS: usize> KMajor<T, ROWS> {
    /// Elements along `k` (one 128-byte row): 64 for 16-bit types, 32 for f32.
    pub const K: usize = SWIZZLE_128B / core::mem::size_of::<T>();
    /// Bytes of the tile (what its copy completes on the stage's barrier).
    pub const BYTES: usize = ROWS * SWIZZLE_128B;

    /// Copies the `ROWS x K` box of `tensor` at (`row`, `k0`) into `stage` at byte `offset`.
    ///
    /// # Safety
    /// As [`Stage::load`]; `tensor`'s box is `ROWS x K`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(stage: &Stage, offset: usize, tensor: &Tensor2d<T>, row: usize, k0: usize) {
        // SAFETY: forwarded contract.
        unsafe { stage.load(offset, tensor, row, k0) };
    }

    /// The descriptors of the four quarter steps along `k` of the 64 rows from `row0` (a
    /// multiple of 8) of the tile at shared address `tile` (1024-byte aligned): the `a` (or, for
    /// `B^T`, the `b`) of a four-step product.
    #[inline(always)]
    pub fn descriptors(tile: u32, row0: usize) -> [u64; 4] {
        k_major_descriptors(tile, row0)
    }
}

/// An N-major operand tile in shared memory: `K` rows along `k` (one 128-byte row of `T`: 64
/// for 16-bit types) of `COLS` columns (a multiple of `K`), stored as `COLS / K` boxes of
/// `K x K`, each 128-byte swizzled, side by side: `B` read from a row-major `k x n` matrix
/// through a [`Tensor2d`] with box `K x K`.
pub struct NMajor<T, const COLS: usize>(core::marker::PhantomData<T>);

impl<T: Copy, const COLS: usize> NMajor<T, COLS> {
    /// Rows along `k` and columns of one box: one 128-byte row of `T`.
    pub const K: usize = SWIZZLE_128B / core::mem::size_of::<T>();
    /// Bytes of one `K x K` box (the `LBO` of the descriptors).
    pub const BOX_BYTES: usize = Self::K * SWIZZLE_128B;
    /// Bytes of the tile.
    pub const BYTES: usize = COLS / Self::K * Self::BOX_BYTES;

    /// Copies the `K x COLS` block of `tensor` at (`k0`, `col0`) into `stage` at byte
    /// `offset`, as `COLS / K` boxes.
    ///
    /// # Safety
    /// As [`Stage::load`]; `tensor`'s box is `K x K`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(stage: &Stage, offset: usize, tensor: &Tensor2d<T>, k0: usize, col0: usize) {
        for j in 0..COLS / Self::K {
            // SAFETY: forwarded contract; box `j` lies `j` boxes into the tile.
            unsafe { stage.load(offset + j * Self::BOX_BYTES, tensor, k0, col0 + j * Self::K) };
        }
    }

    /// The descriptors of the four quarter steps along `k` of the columns from `col0` (a
    /// multiple of `K`) of the tile at shared address `tile` (1024-byte aligned): the `b` of a
    /// four-step product (transposed: the products read `B` N-major).
    #[inline(always)]
    pub fn descriptors(tile: u32, col0: usize) -> [u64; 4] {
        n_major_descriptors::<T>(tile, col0)
    }
}

/// [`KMajor::descriptors`], for any number of rows: the four descriptors of one 128-byte step
/// along `k` of the 64 rows from `row0` (a multiple of 8) of a K-major tile at shared address
/// `tile` (1024-byte aligned). For a kernel generic over its tile shape, which cannot name the
/// tile type with a shape computed from its parameters.
#[inline(always)]
pub fn k_major_descriptors(tile: u32, row0: usize) -> [u64; 4] {
    core::array::from_fn(|j| {
        let start = row0 * SWIZZLE_128B + j * (SWIZZLE_128B / 4);
        wgmma::desc_sw128(tile + start as u32, 16, ATOM as u32)
    })
}

/// [`NMajor::descriptors`], for any number of columns: the four descriptors of one 128-byte
/// step along `k` of the columns from `col0` (a multiple of `K = 128 / size_of::<T>()`) of an
/// N-major tile of `T` at shared address `tile` (1024-byte aligned).
#[inline(always)]
pub fn n_major_descriptors<T>(tile: u32, col0: usize) -> [u64; 4] {
    let k = SWIZZLE_128B / core::mem::size_of::<T>();
    let box_bytes = k * SWIZZLE_128B;
    core::array::from_fn(|j| {
        let start = (col0 / k) * box_bytes + j * (k / 4) * SWIZZLE_128B;
        wgmma::desc_sw128(tile + start as u32, box_bytes as u32, ATOM as u32)
    })
}

/// The row and column, within its warpgroup's `64 x N` result, of accumulator `i` of thread `t`
/// (its index in the warpgroup, `0..128`): row `16 w + g + 8 ((i / 2) % 2)`, column
/// `8 (i / 4) + 2 q + i % 2` for warp `w = t / 32`, `g = (t % 32) / 4`, `q = t % 4`.
#[inline(always)]
pub const fn position(i: usize, t: usize) -> (usize, usize) {
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    (16 * w + g + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * q + i % 2)
}

/// Calls `f(row, col, [v0, v1])` for each pair of accumulators of thread `t` (its index in the
/// warpgroup) of the fragment `acc`: elements (`row`, `col`) and (`row`, `col + 1`) of the
/// warpgroup's `64 x N` result ([`position`]), `col` even. Unrolled: the accumulators stay in
/// registers. The fragment must be retired first ([`crate::wgmma::wait_accumulators`]).
#[inline(always)]
pub fn pairs<A: Accumulators>(acc: &A, t: usize, mut f: impl FnMut(usize, usize, [f32; 2])) {
    // Pair `p` is accumulators `2p`, `2p + 1`; unrolled by constant tests so that every index
    // into the register array is a constant (up to 64 pairs: `N = 256`).
    macro_rules! eight {
        ($base:expr) => {
            eight!(@ $base, 0);
            eight!(@ $base, 1);
            eight!(@ $base, 2);
            eight!(@ $base, 3);
            eight!(@ $base, 4);
            eight!(@ $base, 5);
            eight!(@ $base, 6);
            eight!(@ $base, 7);
        };
        (@ $base:expr, $j:literal) => {
            let p = $base + $j;
            if p < A::N / 4 {
                let (row, col) = position(2 * p, t);
                f(row, col, [acc[2 * p], acc[2 * p + 1]]);
            }
        };
    }
    const { assert!(A::N / 4 <= 64, "at most 64 pairs (N = 256)") };
    eight!(0);
    eight!(8);
    eight!(16);
    eight!(24);
    eight!(32);
    eight!(40);
    eight!(48);
    eight!(56);
}
