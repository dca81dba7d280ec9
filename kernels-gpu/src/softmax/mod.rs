//! Row-wise softmax with an inverse temperature `t`: `y[r] = softmax(t * x[r])`.
//!
//! Computed as `y[r][j] = exp(d_j) / sum_j exp(d_j)` with `d_j = t * (x[r][j] - m_r)`, where `m_r`
//! is the row's maximum for `t >= 0` and its minimum for `t < 0`, so that `t * m_r` is the
//! maximum of `t * x[r]`. Every `d_j <= 0`, so nothing overflows, and `t * x` itself is never
//! formed (it could overflow near `f32::MAX`). The rules at the edges ([`exponent`]):
//! * an entry equal to `m_r` gets `d_j = 0`: entries at `+inf` (for `t > 0`) share the row's
//!   mass equally, and a row whose entries are all equal, even all `-inf`, is uniform;
//! * `t = 0` gives the uniform distribution;
//! * a NaN anywhere in a row makes that whole row NaN, and no other row.
//!
//! A vector is a matrix of one row.
//!
//! # The ladder, one file per rung
//! * [`block_reduce`]: [`softmax_block_reduce`](fn@softmax_block_reduce), the tutorial's block
//!   reduction, three passes over the row.
//! * [`in_registers`]: one pass, the row held in registers by a warp
//!   ([`softmax_warp`](fn@softmax_warp): `softmax_warp_1` ... `softmax_warp_8`), a lane group
//!   ([`softmax_group`](fn@softmax_group): `softmax_group_8x4`, `softmax_group_16x2`) or a block
//!   ([`softmax_block`](fn@softmax_block): `softmax_block_4`, `softmax_block_8`, and their `_el`
//!   twins).
//! * [`persistent`]: the same, a warp or block kept over several rows, the next row staged in
//!   shared memory ([`softmax_persist_warp_8`](fn@softmax_persist_warp_8),
//!   [`softmax_persist_block`](fn@softmax_persist_block): `softmax_persist_block_4`, and
//!   [`softmax_persist_block_8`](fn@softmax_persist_block_8)).
//! * [`cluster`] (sm_90): rows too long for one block, held in the registers of a thread-block
//!   cluster of 2 to 16 blocks, the statistics merged through distributed shared memory
//!   ([`softmax_cluster`](fn@softmax_cluster): `softmax_cluster_4`, `softmax_cluster_8`).
//! * [`stream`]: rows too long for the chip, read twice by one block per row
//!   ([`softmax_stream`](fn@softmax_stream)).
//! * [`two_pass`]: the same with several blocks per row, in two launches
//!   ([`softmax_split_stats`](fn@softmax_split_stats) then
//!   [`softmax_split_finish`](fn@softmax_split_finish): `softmax_split_write`, or its evict-first
//!   twin `softmax_split_write_streaming`).
//! * [`grid_row`]: the same rows in one cooperative launch, the row split over the whole grid,
//!   each block keeping what fits of its share in registers and shared memory, the statistics
//!   exchanged across a grid barrier ([`softmax_grid_row`](fn@softmax_grid_row)).
//!
//! The shared pieces: [`stats`] (the exponent, Kahan sums, the online `(max, sum)` statistics and
//! their warp and block merges) and `row` (a row's split into 16-byte vectors, the entries one
//! thread holds).
//!
//! # One pass over the input: online (max, sum) statistics, 16-byte accesses
//!
//! Every kernel past the tutorial computes, per thread, the statistics [`Stats`] of the entries it
//! holds (their reference value `m` and the sum of `exp(exponent(x, m, t))`), merges them across
//! the warp with shuffles ([`warp::shfl_xor`]) and across the block through shared memory, and
//! writes `exp(exponent(x, M, t)) / S` with the row's `(M, S)`. Merging rescales each partial sum
//! to the common reference, so one barrier gives both the reference and the sum: within a warp
//! the reference first (a butterfly of maxima), then each lane's sum rescaled to it once and
//! added up (a butterfly of sums), one exponential per lane.
//!
//! Rows are read as 16-byte vectors. A row whose start is not 16-byte aligned (a row `r > 0` when
//! `cols` is not a multiple of 4) splits into up to 3 head scalars, aligned vectors, and up to 3
//! tail scalars (`row::RowSplit`); the host passes `x` and `y` at the same address modulo 16
//! bytes, so the same split holds for the output row.
//!
//! Which kernel a shape gets (gpukern's `OnePassConfig::plan`, defaults): rows of up to 128
//! columns take a group of 16 lanes (`softmax_group_16x2`; 8 lanes, `softmax_group_8x4`, on
//! request), rows of up to 512 a warp each (`softmax_warp_1` ... `softmax_warp_8`, the longer ones
//! on request); up to 32768 a block each, the row held in registers (`softmax_block_4_el`,
//! `softmax_block_8_el`); the persistent twins of `softmax_warp_8` and the block kernels
//! ([`softmax_persist_warp_8`](fn@softmax_persist_warp_8), `softmax_persist_block_4`,
//! [`softmax_persist_block_8`](fn@softmax_persist_block_8)), which stage the next row in shared
//! memory while they finish the current one, run on request. On sm_90 longer rows of up to 262144
//! columns are held by a thread-block cluster (`cluster`); past that (or before sm_90) rows
//! cannot stay on chip and are read twice, by one block per row when there are many rows
//! ([`softmax_stream`](fn@softmax_stream)), by one cooperative launch over the whole GPU when
//! there are at most 8 ([`softmax_grid_row`](fn@softmax_grid_row), which keeps what fits of each
//! block's share on chip), or by several blocks per row otherwise
//! ([`softmax_split_stats`](fn@softmax_split_stats) then `softmax_split_write`).

use crate::gpu::warp;

pub mod block_reduce;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod cluster;
pub mod grid_row;
pub mod in_registers;
pub mod persistent;
pub(crate) mod row;
pub mod stats;
pub mod stream;
pub mod two_pass;

// Every rung's items (its kernels' launcher modules among them) at the family's level.
pub use block_reduce::*;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub use cluster::*;
pub use grid_row::*;
pub use in_registers::*;
pub use persistent::*;
pub use stats::{exponent, KahanSum, Stats};
pub use stream::*;
pub use two_pass::*;

/// Threads per block of the warp-per-row kernels: 8 warps, one row each. Small blocks let the
/// multiprocessor fill up with whole blocks (8 per SM at 256 threads) and leave a partial last
/// block little to waste.
pub const WARP_KERNEL_BLOCK: u32 = 256;

/// Rows per block of the warp-per-row kernels.
pub const WARP_KERNEL_ROWS: u32 = WARP_KERNEL_BLOCK / warp::SIZE;

/// Most threads a block-per-row kernel takes (the CUDA limit).
pub const ROW_BLOCK_MAX: u32 = 1024;

/// Threads per block of the kernels that stream a row from memory twice
/// ([`softmax_stream`](fn@softmax_stream), [`softmax_split_stats`](fn@softmax_split_stats),
/// [`softmax_split_finish`](fn@softmax_split_finish)).
pub const STREAM_BLOCK: u32 = 512;

/// Dynamic shared memory of the block-per-row and streaming kernels: one [`Stats`] (8 bytes) per
/// warp of the largest block, for the cross-warp step of the reduction.
pub const STATS_SHARED_BYTES: u32 = ROW_BLOCK_MAX / warp::SIZE * core::mem::size_of::<Stats>() as u32;
