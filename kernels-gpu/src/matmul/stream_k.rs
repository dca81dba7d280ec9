//! Rung 3b, stream-K: the register-tiled kernel of rung 3 ([`super::fast_gemm`](fn@super::fast_gemm)'s main loop,
//! [`FAST_128`]) on a persistent grid that shares out the tail wave evenly (Osama et al.,
//! "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the
//! GPU", 2023, the "data-parallel + stream-K" hybrid).
//!
//! With `tiles` tiles of `C` and `ctas` resident blocks, a one-tile-per-block grid runs
//! `ceil(tiles / ctas)` waves, the last one part full: 4096^3 is 1,024 tiles of 128 x 128 for 264
//! resident blocks on a 132-SM GPU, so its fourth wave leaves 12% of the slots idle. Here a grid
//! of exactly `ctas` blocks (the [`StreamKSchedule`]) first runs `tiles - sk_tiles` whole tiles,
//! `dp_per_cta` per block (block `b` takes tiles `b, b + ctas, ...`, so the tiles in flight at any
//! time are neighbours, as in the one-tile-per-block grid), then the last `sk_tiles` tiles as one
//! line of `sk_tiles * iters` steps of `BK` along `k` (`iters` per tile), cut into `ctas` equal
//! ranges, one per block: every block does the same work (`tiles / ctas` tiles' worth, up to a
//! step), so they end together.
//!
//! A tile whose steps fall into several blocks' ranges is *split*: each of its blocks writes its
//! partial tile to a workspace slot of its own (two slots per block: the first and the last tile
//! of its range are the only ones that can be split), and a second launch,
//! [`matmul_stream_k_fixup`](fn@matmul_stream_k_fixup), adds the partials of each split tile in block order and writes
//! it to `C`. So no block ever waits for another or reads what another wrote in the same launch:
//! nothing assumes the grid is resident (a smaller GPU share, or another kernel beside it, only
//! makes it slower), no fences or flags, no counters to reset, and the sum's order (and so the
//! result, bit for bit) does not depend on which block ran first. The price against a fixup
//! inside the kernel: one more launch, and each split tile's partials go through memory once
//! more (written by the main kernel, read by the fixup): `4 * BM * BN` bytes written and read per
//! contributor, `4 * BM * BN` written to `C`.

use super::register_tiled::{store_c, thread_position, tile_product, FastTiling, FAST_128};
use crate::gpu::vector::{self, F4};
use crate::gpu::{hint, mem, thread};
use crate::kernel;

/// The tiling of the stream-K kernels: [`FAST_128`] (so that two blocks fit a multiprocessor).
pub const STREAM_K: FastTiling = FAST_128;

/// Workspace slots of `BM x BN` floats per block of a stream-K launch: one for the first tile of
/// its stream-K range and one for the last (every tile in between is whole, written to `C`).
pub const SLOTS_PER_CTA: usize = 2;

/// Threads per block of [`matmul_stream_k_fixup`](fn@matmul_stream_k_fixup): each sums 4 consecutive floats of a tile.
pub const FIXUP_BLOCK: u32 = 256;

/// Rows of a tile one block of [`matmul_stream_k_fixup`](fn@matmul_stream_k_fixup) sums: [`FIXUP_BLOCK`] threads of 4
/// floats cover 8 rows of 128 ([`STREAM_K`]'s `BN`).
pub const FIXUP_ROWS: usize = FIXUP_BLOCK as usize * 4 / STREAM_K.block_cols;

// `%` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
const _: () = assert!(
    STREAM_K.block_rows % FIXUP_ROWS == 0 && FIXUP_BLOCK as usize * 4 == FIXUP_ROWS * STREAM_K.block_cols,
    "the fixup's blocks cover a tile in bands of whole rows"
);

/// How a stream-K launch shares out its work, read the same way by the kernel, the fixup and the
/// host. Positions along the stream-K line count steps of `BK` from the first stream-K tile. In
/// 32 bits (the kernel's index arithmetic then takes fewer registers): the host runs stream-K
/// only where [`StreamKSchedule::fits_u32`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamKSchedule {
    /// Tiles of `C`: `ceil(m / BM) * ceil(n / BN)`, row-major (tile `t` is row `t / tiles_n`,
    /// column `t % tiles_n` of the tile grid).
    pub tiles: u32,
    /// Steps of `BK` along `k` per tile: `ceil(k / BK)`.
    pub iters: u32,
    /// The last `sk_tiles` tiles go through the stream-K line; `tiles - sk_tiles` must be a
    /// multiple of `ctas`.
    pub sk_tiles: u32,
    /// Blocks of the grid.
    pub ctas: u32,
}

impl StreamKSchedule {
    /// Whether every product the schedule's arithmetic forms fits 32 bits, for `tiles`, `iters`,
    /// `sk_tiles`, `ctas` (the largest is `(sk_iters + iters) * (ctas + 1)`).
    pub const fn fits_u32(tiles: usize, iters: usize, sk_tiles: usize, ctas: usize) -> bool {
        let line = (sk_tiles as u128 + 1) * iters as u128;
        tiles as u128 * (ctas as u128 + 1) <= u32::MAX as u128
            && line * (ctas as u128 + 1) <= u32::MAX as u128
    }

    /// Tiles run whole by the data-parallel phase, before the stream-K line.
    #[inline(always)]
    pub const fn dp_tiles(&self) -> u32 {
        self.tiles - self.sk_tiles
    }

    /// Whole tiles per block in the data-parallel phase.
    #[inline(always)]
    pub const fn dp_per_cta(&self) -> u32 {
        self.dp_tiles() / self.ctas
    }

    /// Steps on the stream-K line: `sk_tiles * iters`.
    #[inline(always)]
    pub const fn sk_iters(&self) -> u32 {
        self.sk_tiles * self.iters
    }

    /// Block `cta`'s range of the stream-K line, `begin..end`: `cta * S / ctas ..
    /// (cta + 1) * S / ctas` for `S` steps, so the lengths differ by one at most (empty when `S <
    /// ctas` for some blocks).
    #[inline(always)]
    pub const fn range(&self, cta: u32) -> (u32, u32) {
        let s = self.sk_iters();
        (cta * s / self.ctas, (cta + 1) * s / self.ctas)
    }

    /// The block whose range holds step `x` of the line (`x < sk_iters`): the last `cta` with
    /// `cta * S / ctas <= x`, that is `ceil((x + 1) * ctas / S) - 1`.
    #[inline(always)]
    pub const fn owner(&self, x: u32) -> u32 {
        ((x + 1) * self.ctas - 1) / self.sk_iters()
    }

    /// The workspace slot where block `cta`, whose range begins at `begin`, writes its partial
    /// of the stream-K tile whose steps begin at `tile_begin` on the line: its first slot if its
    /// range begins inside that tile, else its second (the tile is the last of its range).
    #[inline(always)]
    pub const fn slot(cta: u32, begin: u32, tile_begin: u32) -> u32 {
        SLOTS_PER_CTA as u32 * cta + (begin < tile_begin) as u32
    }
}

/// `x` as 32 bits, recomputed where the call stands ([`hint::recompute`]).
#[inline(always)]
fn again(x: usize) -> u32 {
    hint::recompute(x as u32)
}

/// The stream-K matmul: block `b` of a grid of `ctas` blocks runs its units of work
/// of [`StreamKSchedule`] (`tiles` and `iters` from `m`, `n`, `k`; `ctas = gridDim.x`) one after
/// the other, each through [`tile_product`] (the main loop of [`super::fast_gemm`](fn@super::fast_gemm), so what one
/// thread does per step of `BK` is as there):
/// 1. `dp_per_cta` whole tiles, `b + u * ctas` for `u = 0, 1, ...`, each written to `C`;
/// 2. then the tiles its range of the stream-K line touches, each over the steps of `k` it holds:
///    a tile it holds whole goes to `C`, a part of one (the first or last of its range) to its
///    workspace slot ([`StreamKSchedule::slot`]), all `BM x BN` floats of it (16-byte stores,
///    rows of `BN`), for [`matmul_stream_k_fixup`](fn@matmul_stream_k_fixup) to add up.
///
/// The units' positions are recomputed from the unit's number, the thread and block indices and
/// the arguments, so only that number lives in a register across the main loop.
///
/// Traffic: each step of each tile's operands is read once, by the block whose unit holds it, so
/// `A` and `B` cost what they cost the one-tile-per-block kernel, and each whole tile is written
/// to `C` once; each partial tile adds `4 * BM * BN` bytes written to the workspace (read back
/// once by the fixup).
///
/// Edges: as [`super::fast_gemm`](fn@super::fast_gemm) (rows and columns clamped, `k` past `k_end` zero-filled).
///
/// # Safety
/// * `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` floats, `c` overlaps neither; `m, n, k >= 1`;
///   `workspace` holds `SLOTS_PER_CTA * ctas * BM * BN` floats and overlaps nothing else.
/// * `sk_tiles <= tiles`, and `tiles - sk_tiles` a multiple of `ctas = gridDim.x`; the schedule
///   fits 32 bits ([`StreamKSchedule::fits_u32`]).
/// * The launch: a 1-D grid of `ctas` blocks of `(BM/TM) * (BN/TN)` threads, `STAGES *
///   stage_floats` floats of dynamic shared memory (as [`FastTiling::shared_bytes`]).
/// * With `VEC`: `k % 4 == 0`, `n % 4 == 0`, and `a`, `b`, `c`, `workspace` 16-byte aligned.
///
/// Instances: `matmul_stream_k_128x128_vec4`, with [`STREAM_K`] ([`FAST_128`]) and 16-byte
/// global loads and stores: for `k` and `n` multiples of 4 and 16-byte aligned matrices. Per unit
/// of work a block does what `matmul_fast_128x128_vec4` does for its tile (or a range of its
/// steps of 16 along `k`): 16 KiB read and 524,288 flops per step; a partial tile writes 64 KiB
/// to the workspace. Launch: a grid of `ctas` blocks (the resident count) of 256 threads,
/// `STREAM_K.shared_bytes()` (33,280) bytes of dynamic shared memory.
// Launch bounds: two blocks of 256 threads per multiprocessor on Hopper, so ptxas keeps to 128
// registers (155 unbounded). The sm_80 module (GPUs before Hopper) asks for one: there even the
// data-parallel kernel takes 135 registers, and 128 would spill. Barriers: two per unit of work,
// as `fast_gemm` (the loop over units is not unrolled).
#[cfg_attr(
    any(
        not(target_arch = "nvptx64"),
        target_feature = "sm_90",
        target_feature = "sm_90a"
    ),
    kernel(
        launch_bounds(256, 2),
        instances(
            matmul_stream_k_128x128_vec4 = (
                STREAM_K.block_rows,
                STREAM_K.block_cols,
                STREAM_K.block_k,
                STREAM_K.thread_rows,
                STREAM_K.thread_cols,
                true,
            )
        ),
        barriers(2)
    )
)]
#[cfg_attr(
    not(any(
        not(target_arch = "nvptx64"),
        target_feature = "sm_90",
        target_feature = "sm_90a"
    )),
    kernel(
        launch_bounds(256, 1),
        instances(
            matmul_stream_k_128x128_vec4 = (
                STREAM_K.block_rows,
                STREAM_K.block_cols,
                STREAM_K.block_k,
                STREAM_K.thread_rows,
                STREAM_K.thread_cols,
                true,
            )
        ),
        barriers(2)
    )
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn stream_k_gemm<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const TM: usize,
    const TN: usize,
    const VEC: bool,
>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    workspace: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    sk_tiles: usize,
) {
    let mut unit = 0u32;
    while let Some(work) = unit_of::<BM, BN, BK>(unit, m, n, k, sk_tiles) {
        let tid = hint::recompute(thread::thread_idx_x()) as usize;
        let (tx, ty) = thread_position::<BN, TN>(tid);
        // SAFETY: `work` is a tile of `C` (it starts inside it) and steps of it below `k`
        // (`k_begin` a multiple of `BK`); the rest is the caller's contract.
        let acc = unsafe {
            tile_product::<BM, BN, BK, TM, TN, VEC>(
                a,
                b,
                m,
                n,
                k,
                (tid, tx, ty),
                (work.row0, work.col0),
                (work.step_begin * BK, k.min(work.step_end * BK)),
                work.step_end - work.step_begin,
            )
        };
        // The same unit, described again rather than kept in registers across the main loop.
        if let Some(work) = unit_of::<BM, BN, BK>(unit, m, n, k, sk_tiles) {
            let tid = hint::recompute(thread::thread_idx_x()) as usize;
            let (tx, ty) = thread_position::<BN, TN>(tid);
            // Whole tiles to `C`, parts to the unit's workspace slot (`BM x BN`, rows of `BN`).
            let (dst, rows, cols, origin) = match work.slot {
                None => (c, m, n, (work.row0, work.col0)),
                Some(slot) => (workspace.wrapping_add(slot * BM * BN), BM, BN, (0, 0)),
            };
            // SAFETY: `c` holds `m * n` floats (the caller's contract); a slot is below
            // `SLOTS_PER_CTA * ctas`, `BM * BN` floats, 16-byte aligned (`BN` and the slot size
            // are multiples of 4 floats).
            unsafe { store_c::<BM, BN, TM, TN, VEC>(dst, rows, cols, origin, (tx, ty), &acc) }
        }
        unit += 1;
    }
}

/// One unit of work of a block of [`stream_k_gemm`]: a tile of `C` and a range of its steps.
#[derive(Clone, Copy)]
struct Unit {
    /// First row of the tile in `C`.
    row0: usize,
    /// First column of the tile in `C`.
    col0: usize,
    /// The unit's steps of `BK` along `k`, `step_begin..step_end`, of the tile's `iters`.
    step_begin: usize,
    /// See `step_begin`.
    step_end: usize,
    /// `None` for a whole tile (written to `C`), else the workspace slot of the part.
    slot: Option<usize>,
}

/// Unit number `unit` of this block in [`stream_k_gemm`]'s order (its data-parallel tiles, then
/// the tiles its stream-K range touches), or `None` past its last.
///
/// Derived afresh from values the compiler must recompute where it is called (`hint`): with the
/// thread's and the schedule's index arithmetic hoisted ahead of the block's loop over units,
/// those values stayed live across the main loop, 167 registers (ptxas) instead of at most 128
/// for two blocks per multiprocessor. A unit is at least one step of `BK` (16 x 128 x 128 FMAs);
/// this is a few dozen integer instructions.
#[inline(always)]
fn unit_of<const BM: usize, const BN: usize, const BK: usize>(
    unit: u32,
    m: usize,
    n: usize,
    k: usize,
    sk_tiles: usize,
) -> Option<Unit> {
    let (m, n, k) = (again(m), again(n), again(k));
    // At least 1: keeps division-by-zero `trap`s out of the code.
    let tiles_n = n.div_ceil(BN as u32).max(1);
    let iters = k.div_ceil(BK as u32).max(1);
    let cta = hint::recompute(thread::block_idx_x());
    let s = StreamKSchedule {
        tiles: m.div_ceil(BM as u32) * tiles_n,
        iters,
        sk_tiles: again(sk_tiles),
        ctas: hint::recompute(thread::grid_dim_x()).max(1),
    };
    let dp = s.dp_per_cta();
    let (tile, step_begin, step_end, slot) = if unit < dp {
        (cta + unit * s.ctas, 0, iters, 0)
    } else {
        let (begin, end) = s.range(cta);
        // The `j`-th stream-K tile, the `(unit - dp)`-th of this block's range.
        let j = begin / iters + (unit - dp);
        let tile_begin = j * iters;
        let (from, to) = (begin.max(tile_begin), end.min(tile_begin + iters));
        if from >= to {
            return None;
        }
        let slot = StreamKSchedule::slot(cta, begin, tile_begin);
        (s.dp_tiles() + j, from - tile_begin, to - tile_begin, slot)
    };
    Some(Unit {
        row0: (tile / tiles_n) as usize * BM,
        col0: (tile % tiles_n) as usize * BN,
        step_begin: step_begin as usize,
        step_end: step_end as usize,
        slot: (step_begin != 0 || step_end != iters).then_some(slot as usize),
    })
}

/// The fixup of a stream-K launch: block `(j, band)` takes the `j`-th stream-K tile of the
/// [`StreamKSchedule`] of `(m, n, k, sk_tiles, ctas)` (the main launch's arguments and grid) and,
/// if it is split, rows `band * FIXUP_ROWS..` of it: each thread adds its 4 consecutive floats of
/// every contributing block's workspace slot, in block order (so in order along `k`), and writes
/// the sum to `C` (scalar stores, rows and columns past `m`, `n` left out). A tile that one block
/// held whole was written by the main kernel: its blocks return at once.
///
/// Traffic per split tile: `4 * BM * BN` bytes read per contributor, `4 * BM * BN` written.
///
/// Launch: a grid of `(sk_tiles, BM / FIXUP_ROWS)` blocks of [`FIXUP_BLOCK`] threads, after the
/// main launch on the same stream.
///
/// # Safety
/// The schedule fits 32 bits ([`StreamKSchedule::fits_u32`]); `workspace` holds what
/// `matmul_stream_k_128x128_vec4` ([`stream_k_gemm`](fn@stream_k_gemm)) with these arguments and `ctas`
/// blocks wrote (16-byte aligned, `SLOTS_PER_CTA * ctas * BM * BN` floats); `c` holds `m * n`
/// floats; `m, n, k >= 1`, `1 <= sk_tiles <= tiles`.
// Barriers: none.
#[kernel(block(FIXUP_BLOCK), barriers(0))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_stream_k_fixup(
    workspace: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    sk_tiles: usize,
    ctas: usize,
) {
    const BM: usize = STREAM_K.block_rows;
    const BN: usize = STREAM_K.block_cols;
    let tiles_n = (n as u32).div_ceil(BN as u32).max(1);
    let iters = (k as u32).div_ceil(STREAM_K.block_k as u32).max(1);
    let s = StreamKSchedule {
        tiles: (m as u32).div_ceil(BM as u32) * tiles_n,
        iters,
        sk_tiles: (sk_tiles as u32).max(1),
        ctas: (ctas as u32).max(1),
    };
    let j = thread::block_idx_x();
    let tile_begin = j * iters;
    let (first, last) = (s.owner(tile_begin), s.owner(tile_begin + iters - 1));
    if first == last {
        return;
    }
    let tid = thread::thread_idx_x() as usize;
    let r = thread::block_idx_y() as usize * FIXUP_ROWS + tid / (BN / 4);
    let q = (tid % (BN / 4)) * 4;
    let mut sum = F4::ZERO;
    for cta in first..=last {
        let (begin, end) = s.range(cta);
        if begin >= end {
            continue;
        }
        let slot = StreamKSchedule::slot(cta, begin, tile_begin) as usize;
        // SAFETY: `slot < SLOTS_PER_CTA * ctas`, row `r < BM`, columns `q..q + 4 <= BN`; the
        // slot's base and `q` are multiples of 4 floats, so the load is 16-byte aligned.
        let v = unsafe { vector::load4(workspace, (slot * BM + r) * BN + q) };
        for i in 0..4 {
            sum.0[i] += v.0[i];
        }
    }
    let tile = s.dp_tiles() + j;
    let row = (tile / tiles_n) as usize * BM + r;
    let col = (tile % tiles_n) as usize * BN + q;
    if row < m {
        for i in 0..4 {
            if col + i < n {
                // SAFETY: `row < m`, `col + i < n`.
                unsafe { mem::store(c, row * n + col + i, sum.0[i]) }
            }
        }
    }
}
