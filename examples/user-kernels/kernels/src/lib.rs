//! Kernels a user writes with gpukern-device's public vocabulary, fast without writing the
//! hardware's details by hand: bias + GELU on bf16 rows ([`bias_gelu`](fn@bias_gelu): `vector::map`
//! and `math::fast::tanh`), a 5-point Jacobi stencil with a shared tile
//! ([`stencil`](fn@stencil): `shared::Tile`, vectors, `warp` shuffles; its second rung
//! [`stencil_columns`](fn@stencil_columns): a strip of rows per thread in registers, no shared
//! tile; its third rung [`stencil_stream`](fn@stencil_stream): the same strips on a grid of the
//! blocks resident at once, each walking a long run of rows with a ring of rows in flight), a
//! 256-bin histogram of bytes ([`histogram`](fn@histogram): `shared::Array::atomic_add` into
//! per-warp bins, then one global atomic per bin and block; its second rung
//! [`histogram_lanes`](fn@histogram_lanes): each lane's own 8-bit counters in its own bank, folded
//! into 32-bit totals every few trips; its third rung [`histogram_spread`](fn@histogram_spread):
//! four copies of each warp's bins, interleaved across banks; its fourth rung
//! [`histogram_banked`](fn@histogram_banked): the block's bins once per lane index, copy `l` wholly
//! in bank `l`, so that every update is one conflict-free pass), and a bf16 GEMM with a fused
//! bias + GELU epilogue on Hopper's tensor cores ([`gemm_bias_gelu`](fn@gemm_bias_gelu):
//! `pipeline::Ring`, `tile::{KMajor, NMajor, pairs}`); and an attention mask of its own,
//! [`PrefixLm`], compiled into the library's attention kernels (`kernels-gpu` without its own
//! entries: `attention_mask_kernels!`, module [`prefix_lm`]).
//!
//! On `nvptx64` this crate is `no_std` and each `#[kernel]` is a PTX entry point; on the host each
//! kernel is a plain `unsafe fn` the simulator runs, with its launcher next to it.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

mod banked_histogram;
mod byte_histogram;
mod gelu;
// Hopper only: `wgmma` and `setmaxnreg` exist in the sm_90a module alone.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
mod gemm;
mod jacobi;
mod jacobi_columns;
mod jacobi_stream;
mod lane_histogram;
mod mask;
mod spread_histogram;

pub use banked_histogram::*;
pub use byte_histogram::*;
pub use gelu::*;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub use gemm::*;
pub use jacobi::*;
pub use jacobi_columns::*;
pub use jacobi_stream::*;
pub use lane_histogram::*;
pub use mask::*;
pub use spread_histogram::*;
