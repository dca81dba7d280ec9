//! The Hopper rung of attention's backward (sm_90a only): FlashAttention-3's backward products
//! on the warpgroup tensor cores, bf16 or f16, head dims 64 and 128, without atomics: one kernel
//! per 128-key block computing `dK` and `dV`
//! ([`attention_bwd_wgmma_dkdv`](fn@attention_bwd_wgmma_dkdv)), one per 128-query block
//! computing `dQ` ([`attention_bwd_wgmma_dq`](fn@attention_bwd_wgmma_dq)), each recomputing the
//! probabilities from `Q`, `K` and the saved log-sum-exp (`lse2`, `delta` of
//! [`attention_bwd_prep`](fn@super::attention_bwd_prep)), as the `mma.sync` rung
//! ([`super::backward_flash`]) does.
//!
//! # Design
//! * **Block** (both kernels): three warpgroups (384 threads, launch bounds `(384, 1)`). The
//!   producer warpgroup gives registers back (`setmaxnreg` to [`BWD_PRODUCER_REGISTERS`]) and
//!   its thread 0 issues every TMA copy (128-byte swizzled boxes of 64 dims, zeros past each
//!   sequence's end); the two consumer warpgroups (`setmaxnreg` to [`BWD_CONSUMER_REGISTERS`])
//!   own 64 rows each.
//! * **`dK`, `dV`** (a block per 128 keys of one key/value head): `K` and `V` (128 x `D`) copied
//!   once; the `Q` and `dO` tiles of 64 queries it visits (the group's query heads in turn, each
//!   from the first query tile that sees the block's first key) through a [`Ring`] of 6 stages
//!   at `D = 64`, 4 at 128. Per
//!   tile and consumer (64 keys): `S^T = K Q^T` and `dP^T = V dO^T` as `m64n64` products with
//!   both operands K-major in shared memory, `P^T = exp2(S^T scale_log2 - lse2)` in registers,
//!   `dV += P^T dO` with `P^T` **from registers** (the accumulators of 16 queries are the `A`
//!   fragment of one step) and `dO` N-major, then `dS^T = P^T (dP^T - delta)` and `dK += dS^T
//!   Q` the same way. The queries' `lse2` and `delta` (16 of each per thread and tile) are read
//!   from global memory (L2) before the tile's wait.
//! * **`dQ`** (a block per 128 query rows of one head): `Q` and `dO` copied once, `K` and `V`
//!   tiles of 128 keys through a 2-stage ring (3 at `D = 64`). Per tile and consumer (64 rows):
//!   `S = Q K^T` and `dP = dO V^T` (the forward's scores product, twice), `P`, `dS = P (dP -
//!   delta)` in registers, `dQ += dS K` with `dS` from registers and `K` N-major.
//! * **Overlap** (head dim 64): a consumer issues a tile's two score products before it retires
//!   the previous tile's gradient products (`dV`, `dK`; `dQ`), and releases that tile's stage
//!   then, so that its own products queue back to back. At head dim 128 each tile's products
//!   are waited for at its end: there the overlap was slower on the H200, 6% with both kernels
//!   overlapped (`bench/experiments/third-wave/4d7d508-attention-bwd-*.jsonl`), 3% with the
//!   `dK`/`dV` kernel's alone (`5006f21-attention-bwd-*.jsonl`); at head dim 64 it was faster,
//!   274.3 TFLOP/s at 8x2048x32x64 (`5006f21-attention-bwd-ab-1.jsonl`)
//!   against 251.9 without it (`5006f21-attention-bwd-ab-ce24400.jsonl`).
//! * **Causal**: the `dK`/`dV` block starts at the first query tile that sees its first key, the
//!   `dQ` block stops after the last key tile its last row sees; elements are masked only on
//!   tiles that cross the diagonal (and ragged tails).
//! * **Traffic** per `dK`/`dV` block: `2 * 128 D` elements of `K`/`V`, `2 * 64 D` of `Q`/`dO`
//!   and 512 bytes of statistics per query tile (`64 * 128 * 4 D` flops per tile: twice the
//!   `mma.sync` rung's reuse), `2 * 128 D` written; per `dQ` block `2 * 128 D` of `Q`/`dO`,
//!   `2 * 128 D` of `K`/`V` per key tile, `128 D` written. Flops: the `dK`/`dV` kernel's four
//!   products and the `dQ` kernel's three, 7 of the backward's 5 as FlashAttention counts them
//!   (`S` and `dP` are computed in both kernels: the price of summing every gradient in one
//!   thread, with no atomics).
//!
//! # Rounding and determinism
//! As [`super::backward_flash`]: `P` and `dS` rounded to the 16-bit type for the products that
//! take them, everything else f32; each output element summed by one thread in a fixed order.

use super::visible_keys;
use super::wgmma::{
    k_major_descriptor, n_major_descriptor, store_row_pieces, WgmmaElement, WgmmaHead, D128, D64,
    WGMMA_BOX_COLS,
};
use crate::gpu::pipeline::Ring;
use crate::gpu::tma::{self, Tensor4d};
use crate::gpu::{bf16, f16, math, mbarrier, mem, thread, wgmma};
use crate::kernel;

/// Threads per block of both kernels: a producer and two consumer warpgroups.
pub const BWD_WGMMA_BLOCK: u32 = 384;
/// Keys per `dK`/`dV` block, and per key tile of the `dQ` kernel.
pub const BWD_WGMMA_KEYS: usize = 128;
/// Query rows per `dQ` block.
pub const BWD_WGMMA_ROWS: usize = 128;
/// Queries per tile of the `dK`/`dV` kernel (the rows of its `Q`/`dO` boxes).
pub const BWD_WGMMA_Q_TILE: usize = 64;
/// The head dims of the Hopper backward.
pub const BWD_WGMMA_HEAD_DIMS: [usize; 2] = [64, 128];
/// Registers per thread the producer keeps.
pub const BWD_PRODUCER_REGISTERS: u32 = 24;
/// Registers per thread the consumers ask for: `128 x 24 + 256 x 240 = 384 x 168`, what the
/// block holds at its start.
pub const BWD_CONSUMER_REGISTERS: u32 = 240;

const _: () = assert!(
    (WARPGROUP as u32) * BWD_PRODUCER_REGISTERS + 2 * (WARPGROUP as u32) * BWD_CONSUMER_REGISTERS
        <= BWD_WGMMA_BLOCK * (65536 / BWD_WGMMA_BLOCK / 8 * 8),
    "the consumers' increases fit in what the producer gives back"
);

/// Registers per thread the `dQ` kernel's producer keeps: its walk needs more than the
/// `dK`/`dV` producer's (24 spilled there).
const DQ_PRODUCER_REGISTERS: u32 = 40;
/// Registers per thread the `dQ` kernel's consumers ask for (`128 x 40 + 256 x 232 = 384 x
/// 168`).
const DQ_CONSUMER_REGISTERS: u32 = 232;

const _: () = assert!(
    (WARPGROUP as u32) * DQ_PRODUCER_REGISTERS + 2 * (WARPGROUP as u32) * DQ_CONSUMER_REGISTERS
        <= BWD_WGMMA_BLOCK * (65536 / BWD_WGMMA_BLOCK / 8 * 8),
    "the consumers' increases fit in what the producer gives back"
);

/// Threads of a warpgroup.
pub(super) const WARPGROUP: usize = 128;
/// Rows (keys or queries) per consumer warpgroup.
pub(super) const CONSUMER_ROWS: usize = 64;
/// Bytes of a box of 128 rows of 128 bytes (`K`, `V`; `Q`, `dO` of the `dQ` kernel).
pub(super) const BOX_128: usize = 128 * 128;
/// Bytes of a box of 64 rows (`Q`, `dO` of the `dK`/`dV` kernel).
pub(super) const BOX_64: usize = 64 * 128;
/// Stages of the `dK`/`dV` kernel's ring at head dim `d`: six at 64, four at 128 (three at both
/// before; with the `dQ` kernel's four stages at 64, 1-1.5% faster at 8x2048x32x64 and level at
/// 4x4096x16x128 in an A/B of two binaries, BENCHMARKS.md's tenth round).
pub(super) const fn dkdv_stages(d: usize) -> usize {
    if d > 64 {
        4
    } else {
        6
    }
}

/// Stages of the `dQ` kernel's ring at head dim `d`: two at 128 (with `Q` and `dO` they fill
/// the 227 KiB a block may have), four at 64 (three before `3d3fc25`'s A/B).
const fn dq_stages(d: usize) -> usize {
    if d > 64 {
        2
    } else {
        4
    }
}

/// Bytes of the `dK`/`dV` kernel's ring stage: `Q` and `dO`, `d / 64` boxes of 64 rows each.
pub(super) const fn dkdv_stage_bytes(d: usize) -> usize {
    2 * (d / WGMMA_BOX_COLS) * BOX_64
}

/// Bytes of the `dQ` kernel's ring stage: `K` and `V`, `d / 64` boxes of 128 rows each.
pub(super) const fn dq_stage_bytes(d: usize) -> usize {
    2 * (d / WGMMA_BOX_COLS) * BOX_128
}

/// Dynamic shared memory of [`attention_bwd_wgmma_dkdv`](fn@attention_bwd_wgmma_dkdv) at head
/// dim `d`: the ring, a 1024-byte gap, `K` and `V`, and their barrier.
pub const fn bwd_wgmma_dkdv_shared_bytes(d: usize) -> usize {
    Ring::shared_bytes(dkdv_stages(d), dkdv_stage_bytes(d)) as usize + 1024 + dq_stage_bytes(d) + 16
}

/// Dynamic shared memory of [`attention_bwd_wgmma_dq`](fn@attention_bwd_wgmma_dq) at head dim
/// `d`: the ring, a 1024-byte gap, `Q` and `dO`, and their barrier.
pub const fn bwd_wgmma_dq_shared_bytes(d: usize) -> usize {
    Ring::shared_bytes(dq_stages(d), dq_stage_bytes(d)) as usize + 1024 + dq_stage_bytes(d) + 16
}

const _: () = assert!(
    bwd_wgmma_dkdv_shared_bytes(128) <= 232_448 && bwd_wgmma_dq_shared_bytes(128) <= 232_448,
    "within the 227 KiB a block may opt in to"
);

/// The products of the `dK`/`dV` kernel for one element type: the register-`A` products over
/// 64 queries (its transposed scores are the forward's 64-key scores product,
/// [`WgmmaElement::scores64`]: `m64n64`, both operands K-major).
pub trait BwdWgmmaElement: WgmmaElement {
    /// [`wgmma::mma_bf16_m64n64k64_rs_async`] or its f16 twin.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n64k64_rs_async`].
    unsafe fn grad64(acc: [f32; 32], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 32];
    /// [`wgmma::mma_bf16_m64n128k64_rs_async`] or its f16 twin.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k64_rs_async`].
    unsafe fn grad128(acc: [f32; 64], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 64];
    /// [`wgmma::mma_bf16_m64n64k128_mn_async`] or its f16 twin: the fused kernel's `dQ` over a
    /// 128-key block ([`super::backward_wgmma_fused`]).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n64k128_mn_async`].
    unsafe fn dq128(acc: [f32; 32], a: u64, b: u64, accumulate: bool) -> [f32; 32];
    /// [`wgmma::mma_bf16_m64n64k64_mn_async`] or its f16 twin: the fused kernel's `dQ` over one
    /// consumer's 64 keys.
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n64k64_mn_async`].
    unsafe fn dq64(acc: [f32; 32], a: u64, b: u64, accumulate: bool) -> [f32; 32];
}

/// [`BwdWgmmaElement`] for `$t` from its four products.
macro_rules! bwd_element {
    ($t:ty: $grad64:ident, $grad128:ident, $dq128:ident, $dq64:ident) => {
        impl BwdWgmmaElement for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn grad64(acc: [f32; 32], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 32] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$grad64(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn grad128(acc: [f32; 64], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 64] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$grad128(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn dq128(acc: [f32; 32], a: u64, b: u64, accumulate: bool) -> [f32; 32] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$dq128(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn dq64(acc: [f32; 32], a: u64, b: u64, accumulate: bool) -> [f32; 32] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$dq64(acc, a, b, accumulate) }
            }
        }
    };
}

bwd_element!(bf16: mma_bf16_m64n64k64_rs_async, mma_bf16_m64n128k64_rs_async,
    mma_bf16_m64n64k128_mn_async, mma_bf16_m64n64k64_mn_async);
bwd_element!(f16: mma_f16_m64n64k64_rs_async, mma_f16_m64n128k64_rs_async,
    mma_f16_m64n64k128_mn_async, mma_f16_m64n64k64_mn_async);

/// A head dim of the Hopper backward: the forward's [`WgmmaHead`] (with its 128-key tiles' scores
/// and probabilities) and the gradient product over a 64-query tile of that width.
pub trait BwdWgmmaHead: WgmmaHead<S = [f32; 64], P = [u32; 32]> {
    /// `G += A B` of width `D` over 64 queries ([`BwdWgmmaElement::grad64`] or
    /// [`BwdWgmmaElement::grad128`]).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n128k64_rs_async`].
    unsafe fn grad<T: BwdWgmmaElement>(g: Self::O, a: [u32; 16], b: u64, accumulate: bool) -> Self::O;
}

impl BwdWgmmaHead for D64 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn grad<T: BwdWgmmaElement>(g: [f32; 32], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 32] {
        // SAFETY: forwarded contract.
        unsafe { T::grad64(g, a, b, accumulate) }
    }
}

impl BwdWgmmaHead for D128 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn grad<T: BwdWgmmaElement>(g: [f32; 64], a: [u32; 16], b: u64, accumulate: bool) -> [f32; 64] {
        // SAFETY: forwarded contract.
        unsafe { T::grad128(g, a, b, accumulate) }
    }
}

/// Retires every product group but the newest `newer` (1, 2 or 4: the groups issued after the
/// one these accumulators belong to), returning the accumulators.
///
/// # Safety
/// As [`wgmma::wait_accumulators`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) unsafe fn wait_older<A: wgmma::Accumulators>(acc: A, newer: usize) -> A {
    // SAFETY: forwarded contract.
    unsafe {
        if newer >= 4 {
            wgmma::wait_accumulators::<4, _>(acc)
        } else if newer >= 2 {
            wgmma::wait_accumulators::<2, _>(acc)
        } else {
            wgmma::wait_accumulators::<1, _>(acc)
        }
    }
}

/// Packs `N` f32 accumulators of an `m64nN` product into the register `A` fragment of the
/// products over those `N` columns: step `j` (columns `16 j ..+ 16`) is accumulators `8 j ..+
/// 8`, paired to `T` (the first in the low half).
#[inline(always)]
pub(super) fn pack_fragment<T: WgmmaElement, const N: usize, const R: usize>(s: &[f32; N]) -> [u32; R] {
    let mut p = [0u32; R];
    unroll_8!(R / 4, |j| {
        unroll_8!(4, |r| {
            p[4 * j + r] = T::pack([s[8 * j + 2 * r], s[8 * j + 2 * r + 1]]);
        });
    });
    p
}

/// A consumer thread's store of two rows of a gradient (`acc * factor`) into the contiguous
/// `[batch, len, heads, D]` output `out`: rows `rows` of head `h` of batch `b`, those below `len`,
/// in 16-byte pieces after a transpose within the quad ([`store_row_pieces`], the forward's
/// epilogue: whole 32-byte sectors per warp store, where 4-byte pairs used half of each). Every
/// lane of the warp calls it (the exchanges are shuffles).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn store_gradient<T: WgmmaElement, H: WgmmaHead>(
    out: *mut T,
    acc: &H::O,
    factor: f32,
    rows: [usize; 2],
    (b, h): (usize, usize),
    (len, heads): (usize, usize),
    qd: usize,
) {
    let d = H::D;
    let out = out.cast::<u32>();
    unroll_8!(2, |hh| {
        let i = rows[hh];
        // Pair `j` of the row: dims `8 j + 2 q` and `+ 1`, packed.
        let pair = |j: usize| T::pack([acc[4 * j + 2 * hh] * factor, acc[4 * j + 2 * hh + 1] * factor]);
        let row = ((b * len + i.min(len - 1)) * heads + h) * d / 2;
        // SAFETY: row `(b, i, h)` of the contiguous output, `D` elements from a 16-byte boundary
        // (the plan runs this rung on 16-byte aligned gradients, `D` 64 or 128), stored only
        // when `i < len`.
        unsafe { store_row_pieces(out.wrapping_add(row), H::D / 8, pair, qd, i < len) };
    });
}

/// Attention backward on Hopper's warpgroup tensor cores, `dK` and `dV` (the module
/// documentation has the design).
///
/// Block `(x, kvh, b)` computes keys `128 x ..+ 128` of key/value head `kvh` of batch `b`.
/// Thread 0 initialises the barriers. The producer warpgroup's thread 0 copies `K` and `V`
/// once, then for each step (query head `kvh group + n / per_head`, query tile `first + n %
/// per_head`, from the first tile that sees key `128 x`) waits for a free stage and copies the
/// tile's `Q` and `dO` into it. Consumer warpgroup `c` (1 or 2) computes keys `64 (c - 1) ..+ 64`
/// of the block: thread `t` of it (warp `w`, `g = (t % 32) / 4`, `q = t % 4`) holds keys `16 w +
/// g` and `+ 8`, their `P^T` and `dS^T` at queries `8 j + 2 q` and `+ 1` of each tile, and their
/// `dK`, `dV` at dims `8 j + 2 q` and `+ 1`. Per step it loads its queries' `lse2` and `delta`,
/// waits for the stage, issues `S^T` and `dP^T` (at `D = 64` then retires the previous step's
/// `dV` and `dK` and releases that step's stage), computes `P^T` once `S^T` retired, issues `dV
/// += P^T dO`, computes `dS^T` once `dP^T` retired and issues `dK += dS^T Q` (at `D = 128` then
/// retires both and releases the stage). Then it stores `scale dK` and `dV` (16-byte pieces
/// after a transpose within the quad) for its keys below `kv_len`.
///
/// Launch: grid `(ceil(kv_len / 128), kv_heads, batch)`, [`BWD_WGMMA_BLOCK`] threads,
/// [`bwd_wgmma_dkdv_shared_bytes`]`(D)` bytes of dynamic shared memory; a compute capability
/// 9.0 GPU.
///
/// # Safety
/// * `maps` holds four tensor maps (`Q`, `dO` with boxes of 64 rows, `K`, `V` with boxes of 128
///   rows) of 16 words each, 64-byte aligned, encoded as [`Tensor4d`] maps of the operands
///   (dims `D, seq, heads, batch` with the operands' element strides, box columns 64, 128-byte
///   swizzle, zero fill); `q`, `k`, `v`, `d_o` are the operands they describe (the simulator
///   copies through them), 16-byte aligned, every stride a multiple of 8 elements.
/// * As [`attention_bwd_flash_dkdv`](fn@super::attention_bwd_flash_dkdv) for the statistics
///   (`q_pad` a multiple of 64), `dk` and `dv`; `heads = kv_heads group`, `kv_len >= 1`.
///
/// Instances: `attention_bwd_wgmma_dkdv_d<D>_<T>` for `D` 64 and 128, `T` bf16 and f16.
// Launch bounds `(384, 1)` so that ptxas knows the register budget at entry (`setmaxnreg`).
// Barriers: the ring's initialisation and the `K`/`V` barrier's.
#[cfg_attr(
    feature = "attention",
    kernel(
        launch_bounds(384, 1),
        instances(
            attention_bwd_wgmma_dkdv_d64_bf16 = (bf16, D64),
            attention_bwd_wgmma_dkdv_d128_bf16 = (bf16, D128),
            attention_bwd_wgmma_dkdv_d64_f16 = (f16, D64),
            attention_bwd_wgmma_dkdv_d128_f16 = (f16, D128),
        ),
        barriers(2)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_wgmma_dkdv<T: BwdWgmmaElement, H: BwdWgmmaHead>(
    maps: *const u64,
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dk: *mut T,
    dv: *mut T,
    q_len: usize,
    kv_len: usize,
    q_pad: usize,
    heads: usize,
    group: usize,
    batch: usize,
    q_sb: usize,
    q_ss: usize,
    q_sh: usize,
    k_sb: usize,
    k_ss: usize,
    k_sh: usize,
    v_sb: usize,
    v_ss: usize,
    v_sh: usize,
    do_sb: usize,
    do_ss: usize,
    do_sh: usize,
    scale_log2: f32,
    scale: f32,
    causal: bool,
) {
    let d = H::D;
    const {
        assert!(
            H::D % WGMMA_BOX_COLS == 0 && H::D <= 128,
            "whole boxes, registers for D <= 128"
        );
    };
    let boxes = d / WGMMA_BOX_COLS;
    let tid = thread::thread_idx_x() as usize;
    let wg = tid / WARPGROUP;
    let k0 = thread::block_idx_x() as usize * BWD_WGMMA_KEYS;
    let kvh = thread::block_idx_y() as usize;
    let b = thread::block_idx_z() as usize;
    let kv_heads = heads / group;
    // The query tiles of each head: from the first row that sees key `k0` on.
    let first_row = if causal {
        (k0 + q_len).saturating_sub(kv_len)
    } else {
        0
    };
    let q_tiles = q_len.div_ceil(BWD_WGMMA_Q_TILE);
    let first_tile = (first_row / BWD_WGMMA_Q_TILE).min(q_tiles);
    let per_head = q_tiles - first_tile;
    let steps = group * per_head;

    // SAFETY: every thread, first; the launch gives `bwd_wgmma_dkdv_shared_bytes(D)`: the
    // ring's bytes, then the tail; stages of whole 1024-byte atoms.
    let ring = unsafe { Ring::new(dkdv_stages(d), dkdv_stage_bytes(d), (2 * WARPGROUP / 32) as u32) };
    let (kv_tile, kv_address) = ring.tail();
    let kv_bar = kv_tile.wrapping_add(2 * boxes * BOX_128).cast::<u64>();
    if tid == 0 {
        // SAFETY: 8 bytes past `K` and `V` inside the launch's shared memory; nothing else
        // touches them before the block barrier below.
        unsafe { mbarrier::init(kv_bar, 1) };
        mbarrier::fence_init();
    }
    thread::sync_threads();

    if wg == 0 {
        wgmma::setmaxnreg_dec::<BWD_PRODUCER_REGISTERS>();
        if tid != 0 {
            return;
        }
        let tensor =
            |map: usize, data: *const T, len: usize, heads: usize, strides: [usize; 3], rows: usize| {
                Tensor4d {
                    map: maps.wrapping_add(16 * map),
                    data,
                    dims: [batch, heads, len, d],
                    strides,
                    box_rows: rows,
                    box_cols: WGMMA_BOX_COLS,
                }
            };
        let tq = tensor(0, q, q_len, heads, [q_sb, q_sh, q_ss], BWD_WGMMA_Q_TILE);
        let t_do = tensor(1, d_o, q_len, heads, [do_sb, do_sh, do_ss], BWD_WGMMA_Q_TILE);
        let tk = tensor(2, k, kv_len, kv_heads, [k_sb, k_sh, k_ss], BWD_WGMMA_KEYS);
        let tv = tensor(3, v, kv_len, kv_heads, [v_sb, v_sh, v_ss], BWD_WGMMA_KEYS);
        // SAFETY: the one producer thread; the barrier expects the `2 boxes` boxes of `K` and
        // `V`, each 1024-byte aligned inside the tail; the maps are the kernel's (its contract).
        unsafe {
            mbarrier::arrive_expect_tx(kv_bar, (2 * boxes * BOX_128) as u32);
            for j in 0..boxes {
                let at = [b as u32, kvh as u32, k0 as u32, (j * WGMMA_BOX_COLS) as u32];
                tma::load_4d(kv_tile.wrapping_add(j * BOX_128).cast::<T>(), &tk, kv_bar, at);
                tma::load_4d(
                    kv_tile.wrapping_add((boxes + j) * BOX_128).cast::<T>(),
                    &tv,
                    kv_bar,
                    at,
                );
            }
        }
        let mut producer = ring.producer();
        for n in 0..steps {
            let h = kvh * group + n / per_head;
            let q0 = (first_tile + n % per_head) * BWD_WGMMA_Q_TILE;
            // SAFETY: the one producer thread; the stage is free and expects `Q` and `dO`'s `2
            // boxes` boxes, which these fill, each 1024-byte aligned.
            unsafe {
                let stage = producer.acquire();
                for j in 0..boxes {
                    let at = [b, h, q0, j * WGMMA_BOX_COLS];
                    stage.load_4d(j * BOX_64, &tq, at);
                    stage.load_4d((boxes + j) * BOX_64, &t_do, at);
                }
            }
        }
        return;
    }

    wgmma::setmaxnreg_inc::<BWD_CONSUMER_REGISTERS>();
    let c = wg - 1;
    let t = tid % WARPGROUP;
    let (w, g, qd) = (t / 32, (t % 32) / 4, t % 4);
    let keys = [
        k0 + CONSUMER_ROWS * c + 16 * w + g,
        k0 + CONSUMER_ROWS * c + 16 * w + g + 8,
    ];
    // This consumer's 64 keys of `K` and `V` (8 KiB into each box): the `A` operands of the
    // transposed scores, per box of 64 dims.
    let own = |tile: usize, j: usize| {
        k_major_descriptor(
            kv_address + (tile * boxes * BOX_128 + j * BOX_128 + CONSUMER_ROWS * c * 128) as u32,
        )
    };
    // The last key of this consumer: a tile none of whose queries lies before it needs no mask.
    let last_key = k0 + CONSUMER_ROWS * (c + 1) - 1;
    let mut dv_acc = <H::O as wgmma::Accumulators>::zeroed();
    let mut dk_acc = <H::O as wgmma::Accumulators>::zeroed();
    // SAFETY: `K`/`V`'s barrier, initialised; its phase 0 completes with their copies.
    unsafe { mbarrier::wait_parity(kv_bar, 0) };
    if steps == 0 {
        // No query sees these keys: zero gradients, from an array of their own (the
        // accumulators' zeros joining the products' path after the loop make ptxas serialise
        // the pipeline, C7515).
        let zeros = <H::O as wgmma::Accumulators>::zeroed();
        store_gradient::<T, H>(dk, &zeros, 1.0, keys, (b, kvh), (kv_len, kv_heads), qd);
        store_gradient::<T, H>(dv, &zeros, 1.0, keys, (b, kvh), (kv_len, kv_heads), qd);
        return;
    }
    // At `D = 64` the previous step's stage is released in this step, once its gradient
    // products retired under this step's scores; at `D = 128` each step's products are waited
    // for at its end (the overlap was 3% slower there on the H200, faster at `D = 64`: the
    // module documentation, `bench/experiments/third-wave/5006f21-attention-bwd*.jsonl`).
    let overlap = d <= 64;
    let mut consumer = ring.consumer();
    for n in 0..steps {
        let h = kvh * group + n / per_head;
        let q0 = (first_tile + n % per_head) * BWD_WGMMA_Q_TILE;
        // The tile's statistics at this thread's queries `8 j + 2 q ..+ 2`: `lse2` before the
        // wait, `delta` once `dV` is issued (not both live beside the products' registers).
        let stats = (b * heads + h) * q_pad + q0 + 2 * qd;
        let load_stats = |x: *const f32| -> [[f32; 2]; 8] {
            let mut out = [[0.0f32; 2]; 8];
            unroll_8!(8, |j| {
                unroll_8!(2, |e| {
                    // SAFETY: `q0 + 64 <= q_pad` (a multiple of 64), so inside head `(b, h)`'s
                    // padded rows of both statistics (the contract).
                    out[j][e] = unsafe { mem::load(x, stats + 8 * j + e) };
                });
            });
            out
        };
        let l2 = load_stats(lse2);
        // SAFETY: every thread of the consumer warps; released once below (in the next step,
        // or after the loop).
        let stage = unsafe { consumer.wait() };
        let mut st = [0.0f32; 32];
        let mut dpt = [0.0f32; 32];
        // SAFETY: the whole warpgroup; `K`, `V` and the stage have landed and stay until the
        // waits below (the stage is released once this step's gradient products retired).
        unsafe {
            for j in 0..boxes {
                st = T::scores64(
                    st,
                    own(0, j),
                    k_major_descriptor(stage.address(j * BOX_64)),
                    j > 0,
                );
            }
            for j in 0..boxes {
                dpt = T::scores64(
                    dpt,
                    own(1, j),
                    k_major_descriptor(stage.address((boxes + j) * BOX_64)),
                    j > 0,
                );
            }
            // The previous step's `dV` and `dK` ran under these products' issue: they retire
            // (the `2 boxes` groups just issued stay in flight), and free their stage.
            // The wait is unconditional (at the first step nothing older is in flight and it
            // returns at once): behind `n > 0` ptxas cannot tell the accumulators retired on
            // every path, and inserts a wait of its own before the next product (C7517).
            if overlap {
                dv_acc = wait_older(dv_acc, 2 * boxes);
                dk_acc = wait_older(dk_acc, 2 * boxes);
                if n > 0 {
                    consumer.release_previous();
                }
            }
            st = wait_older(st, boxes);
        }
        // P^T = exp2(S^T scale_log2 - lse2); masked where a query does not see the key (the
        // tile crosses the diagonal), 0 for queries past `q_len` (`lse2 = +inf` there).
        let masked = causal && last_key + q_len > q0 + kv_len;
        // One test in two spellings, for the registers: at `D = 64` per key the first query of
        // the tile that sees it, in 32 bits (the 64-bit test there ran 258.1 TFLOP/s at
        // 8x2048x32x64 in `80950e5-attention-bwd.jsonl`, this one 267.7 in
        // `8eb5390-attention-bwd.jsonl`); at `D = 128` the 64-bit one (the 32-bit one spilled
        // 8 bytes there).
        let first_query = if overlap {
            keys.map(|key| (key + q_len).saturating_sub(kv_len + q0).min(1 << 16) as u32)
        } else {
            [0; 2]
        };
        let hidden = |hh: usize, col: usize| {
            if overlap {
                first_query[hh] > col as u32
            } else {
                keys[hh] + q_len > q0 + col + kv_len
            }
        };
        unroll_8!(8, |j| {
            unroll_8!(2, |hh| {
                unroll_8!(2, |e| {
                    let i = 4 * j + 2 * hh + e;
                    let mut u = st[i];
                    if masked && hidden(hh, 8 * j + 2 * qd + e) {
                        u = f32::NEG_INFINITY;
                    }
                    st[i] = math::exp2_ftz(math::fma(u, scale_log2, -l2[j][e]));
                });
            });
        });
        let p = pack_fragment::<T, 32, 16>(&st);
        // SAFETY: the whole warpgroup; `dO` stays until the waits below; `p` and `dv_acc` are
        // not touched in flight.
        unsafe {
            dv_acc = H::grad::<T>(
                dv_acc,
                p,
                n_major_descriptor(stage.address(boxes * BOX_64), BOX_64),
                true,
            );
        }
        let dd = load_stats(delta);
        // SAFETY: the whole warpgroup; `dP^T`'s groups, then `dV`'s one: `dP^T` retires.
        dpt = unsafe { wgmma::wait_accumulators::<1, _>(dpt) };
        // dS^T = P^T (dP^T - delta), in place of `dP^T`.
        unroll_8!(8, |j| {
            unroll_8!(2, |hh| {
                unroll_8!(2, |e| {
                    let i = 4 * j + 2 * hh + e;
                    dpt[i] = st[i] * (dpt[i] - dd[j][e]);
                });
            });
        });
        let ds = pack_fragment::<T, 32, 16>(&dpt);
        // SAFETY: as above, for `Q`, `ds` and `dk_acc`; both products retire before the stage
        // is released (next step, or below).
        unsafe {
            dk_acc = H::grad::<T>(dk_acc, ds, n_major_descriptor(stage.address(0), BOX_64), true);
            if !overlap {
                dv_acc = wgmma::wait_accumulators::<0, _>(dv_acc);
                dk_acc = wgmma::wait_accumulators::<0, _>(dk_acc);
                consumer.release(&stage);
            }
        }
    }
    if overlap {
        // SAFETY: the whole warpgroup; the last step's products retire, then free the stage
        // (`steps >= 1`).
        unsafe {
            dv_acc = wgmma::wait_accumulators::<0, _>(dv_acc);
            dk_acc = wgmma::wait_accumulators::<0, _>(dk_acc);
            consumer.release_last();
        }
    }
    store_gradient::<T, H>(dk, &dk_acc, scale, keys, (b, kvh), (kv_len, kv_heads), qd);
    store_gradient::<T, H>(dv, &dv_acc, 1.0, keys, (b, kvh), (kv_len, kv_heads), qd);
}

/// Attention backward on Hopper's warpgroup tensor cores, `dQ` (the module documentation has
/// the design).
///
/// Block `(x, h, b)` computes query rows `128 (gridDim.x - 1 - x) ..+ 128` of head `h` of batch
/// `b` (the longest causal blocks first). The producer warpgroup's thread 0 copies `Q` and `dO`
/// once, then for each key tile the block's last row sees waits for a free stage and copies the
/// tile's `K` and `V` into it. Consumer warpgroup `c` (1 or 2) computes rows `64 (c - 1) ..+ 64`
/// of the block: thread `t` (warp `w`, `g`, `q` as in the forward) holds rows `16 w + g` and `+
/// 8` with their `lse2` and `delta`, their `P` and `dS` at keys `8 j + 2 q` and `+ 1` of each
/// tile and their `dQ` at dims `8 j + 2 q` and `+ 1`. Per key tile it waits for the stage,
/// issues `S = Q K^T` and `dP = dO V^T`, computes `P` once `S` retired and `dS` once `dP`
/// retired, issues `dQ += dS K` and releases the stage once that retired (at `D = 64` in the
/// next tile's step, under its scores). Then it stores `scale dQ` (16-byte pieces after a
/// transpose within the quad) for its rows below `q_len`.
///
/// Launch: grid `(ceil(q_len / 128), heads, batch)`, [`BWD_WGMMA_BLOCK`] threads,
/// [`bwd_wgmma_dq_shared_bytes`]`(D)` bytes of dynamic shared memory; a compute capability 9.0
/// GPU.
///
/// # Safety
/// * `maps` holds four tensor maps (`K`, `V`, `Q`, `dO`, boxes of 128 rows), as for
///   [`attention_bwd_wgmma_dkdv`](fn@attention_bwd_wgmma_dkdv).
/// * As [`attention_bwd_flash_dq`](fn@super::attention_bwd_flash_dq) for the statistics and
///   `dq`; `heads = gridDim.y`, `kv_len >= 1`.
///
/// Instances: `attention_bwd_wgmma_dq_d<D>_<T>` for `D` 64 and 128, `T` bf16 and f16.
// Barriers: the ring's initialisation and the `Q`/`dO` barrier's.
#[cfg_attr(
    feature = "attention",
    kernel(
        launch_bounds(384, 1),
        instances(
            attention_bwd_wgmma_dq_d64_bf16 = (bf16, D64),
            attention_bwd_wgmma_dq_d128_bf16 = (bf16, D128),
            attention_bwd_wgmma_dq_d64_f16 = (f16, D64),
            attention_bwd_wgmma_dq_d128_f16 = (f16, D128),
        ),
        barriers(2)
    )
)]
#[cfg_attr(not(feature = "attention"), inline(always))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn attention_bwd_wgmma_dq<T: BwdWgmmaElement, H: BwdWgmmaHead>(
    maps: *const u64,
    q: *const T,
    k: *const T,
    v: *const T,
    d_o: *const T,
    lse2: *const f32,
    delta: *const f32,
    dq: *mut T,
    q_len: usize,
    kv_len: usize,
    q_pad: usize,
    heads: usize,
    group: usize,
    batch: usize,
    q_sb: usize,
    q_ss: usize,
    q_sh: usize,
    k_sb: usize,
    k_ss: usize,
    k_sh: usize,
    v_sb: usize,
    v_ss: usize,
    v_sh: usize,
    do_sb: usize,
    do_ss: usize,
    do_sh: usize,
    scale_log2: f32,
    scale: f32,
    causal: bool,
) {
    let d = H::D;
    const {
        assert!(
            H::D % WGMMA_BOX_COLS == 0 && H::D <= 128,
            "whole boxes, registers for D <= 128"
        );
    };
    let boxes = d / WGMMA_BOX_COLS;
    let tid = thread::thread_idx_x() as usize;
    let wg = tid / WARPGROUP;
    let q_tiles = q_len.div_ceil(BWD_WGMMA_ROWS);
    let q0 = (q_tiles - 1 - thread::block_idx_x() as usize) * BWD_WGMMA_ROWS;
    let h = thread::block_idx_y() as usize;
    let b = thread::block_idx_z() as usize;
    let kv_heads = heads / group;
    let last_row = (q0 + BWD_WGMMA_ROWS).min(q_len) - 1;
    let kv_tiles = visible_keys(last_row, q_len, kv_len, causal).div_ceil(BWD_WGMMA_KEYS);

    // SAFETY: as in the `dK`/`dV` kernel.
    let ring = unsafe { Ring::new(dq_stages(d), dq_stage_bytes(d), (2 * WARPGROUP / 32) as u32) };
    let (qo_tile, qo_address) = ring.tail();
    let qo_bar = qo_tile.wrapping_add(2 * boxes * BOX_128).cast::<u64>();
    if tid == 0 {
        // SAFETY: 8 bytes past `Q` and `dO` inside the launch's shared memory; nothing else
        // touches them before the block barrier below.
        unsafe { mbarrier::init(qo_bar, 1) };
        mbarrier::fence_init();
    }
    thread::sync_threads();

    if wg == 0 {
        wgmma::setmaxnreg_dec::<DQ_PRODUCER_REGISTERS>();
        if tid != 0 {
            return;
        }
        let tensor = |map: usize, data: *const T, len: usize, heads: usize, strides: [usize; 3]| Tensor4d {
            map: maps.wrapping_add(16 * map),
            data,
            dims: [batch, heads, len, d],
            strides,
            box_rows: BWD_WGMMA_KEYS,
            box_cols: WGMMA_BOX_COLS,
        };
        let tk = tensor(0, k, kv_len, kv_heads, [k_sb, k_sh, k_ss]);
        let tv = tensor(1, v, kv_len, kv_heads, [v_sb, v_sh, v_ss]);
        let tq = tensor(2, q, q_len, heads, [q_sb, q_sh, q_ss]);
        let t_do = tensor(3, d_o, q_len, heads, [do_sb, do_sh, do_ss]);
        // SAFETY: the one producer thread; the barrier expects `Q` and `dO`'s `2 boxes` boxes,
        // each 1024-byte aligned inside the tail; the maps are the kernel's (its contract).
        unsafe {
            mbarrier::arrive_expect_tx(qo_bar, (2 * boxes * BOX_128) as u32);
            for j in 0..boxes {
                let at = [b as u32, h as u32, q0 as u32, (j * WGMMA_BOX_COLS) as u32];
                tma::load_4d(qo_tile.wrapping_add(j * BOX_128).cast::<T>(), &tq, qo_bar, at);
                tma::load_4d(
                    qo_tile.wrapping_add((boxes + j) * BOX_128).cast::<T>(),
                    &t_do,
                    qo_bar,
                    at,
                );
            }
        }
        let mut producer = ring.producer();
        for kt in 0..kv_tiles {
            // SAFETY: the one producer thread; the stage is free and expects `K` and `V`'s `2
            // boxes` boxes, which these fill, each 1024-byte aligned.
            unsafe {
                let stage = producer.acquire();
                for j in 0..boxes {
                    let at = [b, h / group, kt * BWD_WGMMA_KEYS, j * WGMMA_BOX_COLS];
                    stage.load_4d(j * BOX_128, &tk, at);
                    stage.load_4d((boxes + j) * BOX_128, &tv, at);
                }
            }
        }
        return;
    }

    wgmma::setmaxnreg_inc::<DQ_CONSUMER_REGISTERS>();
    let c = wg - 1;
    let t = tid % WARPGROUP;
    let (w, g, qd) = (t / 32, (t % 32) / 4, t % 4);
    let rows = [
        q0 + CONSUMER_ROWS * c + 16 * w + g,
        q0 + CONSUMER_ROWS * c + 16 * w + g + 8,
    ];
    // The rows' statistics (a row past `q_len`: `lse2 = +inf`, so `P = 0`), the keys each sees,
    // and the keys all this consumer's rows see (tiles below them need no mask).
    let stat = |x: *const f32, i: usize, past: f32| {
        if i < q_len {
            // SAFETY: row `i < q_len <= q_pad` of head `(b, h)` (the contract).
            unsafe { mem::load(x, (b * heads + h) * q_pad + i) }
        } else {
            past
        }
    };
    let l2 = rows.map(|i| stat(lse2, i, f32::INFINITY));
    let dd = rows.map(|i| stat(delta, i, 0.0));
    // In 32 bits (keys below 2^31, the grid's limit): a 64-bit comparison per element is two
    // instructions and two registers.
    let limits = rows.map(|i| visible_keys(i.min(q_len - 1), q_len, kv_len, causal) as u32);
    let unmasked = visible_keys((q0 + CONSUMER_ROWS * c).min(q_len - 1), q_len, kv_len, causal);
    // This consumer's 64 rows of `Q` and `dO` (8 KiB into each box), per box of 64 dims.
    let own = |tile: usize, j: usize| {
        k_major_descriptor(
            qo_address + (tile * boxes * BOX_128 + j * BOX_128 + CONSUMER_ROWS * c * 128) as u32,
        )
    };
    let mut acc = <H::O as wgmma::Accumulators>::zeroed();
    // SAFETY: `Q`/`dO`'s barrier, initialised; its phase 0 completes with their copies.
    unsafe { mbarrier::wait_parity(qo_bar, 0) };
    if kv_tiles == 0 {
        // No key for these rows: zero `dQ`, as in the `dK`/`dV` kernel.
        let zeros = <H::O as wgmma::Accumulators>::zeroed();
        store_gradient::<T, H>(dq, &zeros, 1.0, rows, (b, h), (q_len, heads), qd);
        return;
    }
    // With more than two stages (`D = 64`) the previous key tile's stage is released in this step, once
    // its `dQ` product retired under this tile's scores; with two (`D = 128`) the release so late
    // leaves the producer one stage, and each tile's `dQ` product is waited for at its end
    // (4d7d508's overlap at two stages was 6% slower at 4x4096x16x128 than ce24400's wait).
    let overlap = dq_stages(d) > 2;
    let mut consumer = ring.consumer();
    for kt in 0..kv_tiles {
        // SAFETY: every thread of the consumer warps; released once below (in the next step,
        // or after the loop).
        let stage = unsafe { consumer.wait() };
        let mut s = [0.0f32; 64];
        let mut dp = [0.0f32; 64];
        // SAFETY: the whole warpgroup; `Q`, `dO` and the stage have landed and stay until the
        // waits below.
        unsafe {
            for j in 0..boxes {
                s = T::scores(
                    s,
                    own(0, j),
                    k_major_descriptor(stage.address(j * BOX_128)),
                    j > 0,
                );
            }
            for j in 0..boxes {
                dp = T::scores(
                    dp,
                    own(1, j),
                    k_major_descriptor(stage.address((boxes + j) * BOX_128)),
                    j > 0,
                );
            }
            // The previous tile's `dQ` ran under these products' issue: it retires (the `2
            // boxes` groups just issued stay in flight), and frees its stage.
            // Unconditional, as in the `dK`/`dV` kernel (C7517 otherwise).
            if overlap {
                acc = wait_older(acc, 2 * boxes);
                if kt > 0 {
                    consumer.release_previous();
                }
            }
            s = wait_older(s, boxes);
        }
        // P = exp2(S scale_log2 - lse2), masked keys 0 (keys past `kv_len` or a row's limit).
        let key0 = kt * BWD_WGMMA_KEYS;
        let masked = key0 + BWD_WGMMA_KEYS > unmasked;
        unroll_8!(2, |hh| {
            unroll_8!(4, |hi| {
                unroll_8!(4, |lo| {
                    unroll_8!(2, |e| {
                        let j = 4 * hi + lo;
                        let i = 4 * j + 2 * hh + e;
                        let mut u = s[i];
                        if masked && (key0 + 8 * j + 2 * qd + e) as u32 >= limits[hh] {
                            u = f32::NEG_INFINITY;
                        }
                        s[i] = math::exp2_ftz(math::fma(u, scale_log2, -l2[hh]));
                    });
                });
            });
        });
        // SAFETY: the whole warpgroup; `dP`'s groups are the last in flight.
        dp = unsafe { wgmma::wait_accumulators::<0, _>(dp) };
        // dS = P (dP - delta), in place of `dP`.
        unroll_8!(2, |hh| {
            unroll_8!(4, |hi| {
                unroll_8!(4, |lo| {
                    unroll_8!(2, |e| {
                        let i = 4 * (4 * hi + lo) + 2 * hh + e;
                        dp[i] = s[i] * (dp[i] - dd[hh]);
                    });
                });
            });
        });
        let ds = pack_fragment::<T, 64, 32>(&dp);
        // SAFETY: the whole warpgroup; `K` (the stage's first boxes, N-major) stays until the
        // wait; `ds` and `acc` are not touched in flight.
        unsafe {
            acc = H::pv::<T>(acc, ds, n_major_descriptor(stage.address(0), BOX_128), true);
            if !overlap {
                acc = wgmma::wait_accumulators::<0, _>(acc);
                consumer.release_last();
            }
        }
    }
    if overlap {
        // SAFETY: the whole warpgroup; the last `dQ` product retires, then frees its stage
        // (`kv_tiles >= 1`).
        unsafe {
            acc = wgmma::wait_accumulators::<0, _>(acc);
            consumer.release_last();
        }
    }
    store_gradient::<T, H>(dq, &acc, scale, rows, (b, h), (q_len, heads), qd);
}
