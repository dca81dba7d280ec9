//! Transpose of a row-major `rows x cols` matrix into a row-major `cols x rows` one:
//! `b[c][r] = a[r][c]`.
//!
//! Minimum traffic: `2 * 4 rows cols` bytes (every element read once and written once).
//!
//! # The ladder, one file per rung
//! * [`naive`]: [`transpose_naive`](fn@transpose_naive), one thread per element; its reads are
//!   coalesced, its writes are not (a warp's 32 stores land in 32 rows of `b`).
//! * [`tiled`]: [`transpose_tiled`](fn@transpose_tiled), a 32x32 tile staged in shared memory
//!   (padded to 33 columns, so that reading a column hits 32 banks), each thread moving 4
//!   elements: both the reads and the writes are coalesced.
//! * [`tile64`]: tuning candidates with a 64x64 tile, 16 elements per thread:
//!   [`transpose_tiled_64`](fn@transpose_tiled_64) (4-byte accesses, any shape) and
//!   [`transpose_vec4_64`](fn@transpose_vec4_64) (16-byte global accesses through a swizzled
//!   tile, for shapes whose rows are all 16-byte aligned).
//!
//! Both take blocks of [`TILE`] x [`BLOCK_ROWS`] threads on a grid of `ceil(cols / TILE)` x
//! `ceil(rows / TILE)` blocks (the naive kernel's block covers `TILE x BLOCK_ROWS` elements, so
//! its grid has `ceil(rows / BLOCK_ROWS)` blocks along y).

pub mod naive;
pub mod tile64;
pub mod tiled;

// Every rung's items (its kernels' launcher modules among them) at the family's level.
pub use naive::*;
pub use tile64::*;
pub use tiled::*;

/// Side of the square tile of [`transpose_tiled`](fn@transpose_tiled), and the x extent of the
/// blocks of both kernels: a warp reads or writes 32 consecutive floats (128 bytes).
pub const TILE: u32 = 32;

/// The y extent of the blocks: 256 threads, each of [`transpose_tiled`](fn@transpose_tiled)'s
/// moving `TILE / BLOCK_ROWS = 4` elements.
pub const BLOCK_ROWS: u32 = 8;
