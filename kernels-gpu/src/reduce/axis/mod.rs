//! Reductions along one axis of a row-major `rows x cols` matrix, one output per row (ndarray's
//! `Axis(1)`) or per column (`Axis(0)`): sums, maxima and the indices of the maxima. The three
//! reductions share each kernel, generic over its [`AxisFold`], whose instances are the entry
//! points (`sum_rows` is [`reduce_rows`](fn@reduce_rows) with [`Sum`]); the host picks the kernel
//! by shape:
//!
//! * per row: a warp per row ([`reduce_rows`](fn@reduce_rows): `sum_rows`, `max_rows`,
//!   `argmax_rows`); 16-byte loads with `group` lanes per row for rows of a multiple of 4 up to
//!   [`VEC_MAX_COLS`] columns ([`reduce_rows_vec`](fn@reduce_rows_vec): `*_rows_vec`); a thread
//!   per row up to [`NARROW_MAX_COLS`] ([`reduce_rows_narrow`](fn@reduce_rows_narrow):
//!   `*_rows_narrow`); a warp per [`SHORT_ROWS`] rows up to [`SHORT_MAX_COLS`]
//!   ([`reduce_rows_short`](fn@reduce_rows_short): `*_rows_short`);
//! * per column: a thread per column and row group, combined in shared memory
//!   ([`reduce_cols`](fn@reduce_cols): `sum_cols`, `max_cols`, `argmax_cols`); a thread per column
//!   ([`reduce_cols_narrow`](fn@reduce_cols_narrow): `*_cols_narrow`);
//! * too few outputs to fill the device: the axis cut into spans, each folded into one partial
//!   ([`reduce_rows_parts`](fn@reduce_rows_parts), [`reduce_cols_parts`](fn@reduce_cols_parts):
//!   `*_rows_parts`, `*_cols_parts`; the argmax's [`argmax_rows_parts`](fn@argmax_rows_parts),
//!   [`argmax_cols_parts`](fn@argmax_cols_parts)), then the partials' `parts x outputs` matrix
//!   reduced by its columns (`sum_cols`, `max_cols`, or [`argmax_parts`](fn@argmax_parts) on
//!   value-index pairs).
//!
//! No atomics: every output and partial is written by one thread, in an order fixed by the shape
//! and the device's residency, so the result is the same every run on one device.

use crate::gpu::warp;

use super::Best;

mod cols;
mod fold;
mod parts;
mod rows;

pub use cols::*;
pub use fold::*;
pub use parts::*;
pub use rows::*;

/// Rows one block of a `*_rows` kernel takes: one per warp.
pub const ROWS_PER_BLOCK: u32 = 8;

/// Threads per block of a `*_rows` kernel.
pub const ROWS_BLOCK: u32 = ROWS_PER_BLOCK * warp::SIZE;

/// The longest rows the `*_rows_narrow` kernels (a thread per row) take; longer rows take a warp
/// each.
pub const NARROW_MAX_COLS: usize = 24;

/// The longest rows the `*_rows_short` kernels (a warp per [`SHORT_ROWS`] rows) take: one round
/// of 4 loads per lane.
pub const SHORT_MAX_COLS: usize = warp::SIZE as usize * UNROLL;

/// The longest rows the `*_rows_vec` kernels take (16 lanes per row, 4 vectors each); longer
/// rows take a warp each with 4-byte loads, which measured faster at 8192 columns.
pub const VEC_MAX_COLS: usize = 256;

/// Rows one warp of a `*_rows_short` kernel takes, all their loads issued before any is folded.
pub const SHORT_ROWS: usize = 4;

/// Threads per block of a `*_rows_narrow` kernel: a row each.
pub const NARROW_BLOCK: u32 = 256;

/// Matrices of fewer rows than this are reduced along `Axis(0)` by the `*_cols_narrow` kernels
/// (a thread per column) whatever their width: the `*_cols` kernels' 32 row groups would each
/// hold less than one round of 4 loads. Taller matrices take them once their columns are at
/// least a quarter of the threads resident on the device (each thread keeps 4 loads in flight).
pub const NARROW_COLS_MAX_ROWS: usize = COLS_BLOCK_Y as usize * UNROLL;

/// Columns one block of a `*_cols` kernel takes (its x extent): a warp reads 32 consecutive
/// floats of a row, 128 contiguous bytes.
pub const COLS_BLOCK_X: u32 = 32;

/// Row groups of one block of a `*_cols` kernel (its y extent): thread `(tx, ty)` folds rows `ty,
/// ty + COLS_BLOCK_Y, ...`; 32 groups make blocks of 1024 threads, so that a matrix of 8192
/// columns (256 blocks) fills the multiprocessors.
pub const COLS_BLOCK_Y: u32 = 32;

/// Elements a thread loads before it folds them (in index order), so that that many loads are
/// in flight where one at a time would leave each thread waiting on each load.
const UNROLL: usize = 4;

/// Dynamic shared memory of a `*_cols` kernel: one partial per thread, 8 bytes each (the
/// largest partial, an argmax's value and index).
pub const COLS_SHARED_BYTES: u32 = COLS_BLOCK_X * COLS_BLOCK_Y * core::mem::size_of::<Best>() as u32;
