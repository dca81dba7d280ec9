//! Rung 3, the register-tiled kernels: each thread computes a `TM x TN` register tile of `C` (an
//! outer product per step along `k`), 16-byte loads, two shared-memory stages so that one barrier
//! per tile suffices, and an optional split of `k` over blocks (added up by
//! [`super::matmul_sum_splits`](fn@super::matmul_sum_splits)). One generic kernel,
//! [`fast_gemm`](fn@fast_gemm), its instances the entry points, one per [`FastTiling`] and load
//! width; its main loop, [`tile_product`], and its epilogue, [`store_c`], are the stream-K
//! kernel's too.

use super::wide::WIDE_STAGES;
use super::{MAX_UNROLL, WARP};
use crate::gpu::vector::{self, F4};
use crate::gpu::{math, mem, shared, thread};
use crate::kernel;

/// Tile shape of one fast matmul kernel (the `BM x BN x BK` block tile and the `TM x TN` thread
/// tile of the SGEMM literature). [`fast_gemm`](fn@fast_gemm) takes the same numbers as const generics; this
/// struct is what the host reads to launch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FastTiling {
    /// Rows of `C` one block computes (`BM`).
    pub block_rows: usize,
    /// Columns of `C` one block computes (`BN`).
    pub block_cols: usize,
    /// Step along `k`: columns of `A` and rows of `B` staged in shared memory at a time (`BK`).
    pub block_k: usize,
    /// Rows of `C` one thread computes (`TM`), a multiple of 4.
    pub thread_rows: usize,
    /// Columns of `C` one thread computes (`TN`), a multiple of 4.
    pub thread_cols: usize,
    /// How tiles reach shared memory, which sets the shared-memory layout.
    pub pipeline: Pipeline,
}

/// How a fast kernel moves its tiles from global to shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pipeline {
    /// Through registers ([`fast_gemm`](fn@fast_gemm)): the next tile is loaded into registers while the
    /// current one is multiplied, then stored, `A` transposed; [`STAGES`] stages.
    Registers,
    /// By `cp.async` ([`wide_gemm`](fn@super::wide_gemm)): [`WIDE_STAGES`] stages, `A` stored as it is (`k`
    /// contiguous, rows of [`WIDE_A_STRIDE`](super::WIDE_A_STRIDE) floats).
    AsyncCopy,
}

impl FastTiling {
    /// Threads per block: one per `TM x TN` thread tile of the `BM x BN` block tile.
    pub const fn threads(&self) -> u32 {
        ((self.block_rows / self.thread_rows) * (self.block_cols / self.thread_cols)) as u32
    }

    /// Floats of one shared-memory stage: the `A` tile, then the `B` tile (`BK` rows of `BN`).
    /// With [`Pipeline::Registers`] `A` is stored transposed (`BK` rows of `BM + SHARED_PAD`),
    /// with [`Pipeline::AsyncCopy`] as it is (`BM` rows of `BK + 4`).
    pub const fn stage_floats(&self) -> usize {
        let a_tile = match self.pipeline {
            Pipeline::Registers => self.block_k * (self.block_rows + SHARED_PAD),
            Pipeline::AsyncCopy => self.block_rows * (self.block_k + 4),
        };
        a_tile + self.block_k * self.block_cols
    }

    /// Shared-memory stages: [`STAGES`] or [`WIDE_STAGES`].
    pub const fn stages(&self) -> usize {
        match self.pipeline {
            Pipeline::Registers => STAGES,
            Pipeline::AsyncCopy => WIDE_STAGES,
        }
    }

    /// Dynamic shared memory a block needs: all its stages.
    pub const fn shared_bytes(&self) -> u32 {
        (self.stages() * self.stage_floats() * core::mem::size_of::<f32>()) as u32
    }
}

/// The main tiling, for products with at least about one block per multiprocessor:
/// 128 x 128 per block, 8 x 8 per thread, 256 threads, `BK = 16` (`matmul_fast_128x128_vec4`;
/// the scalar-load kernel takes [`FAST_128_SCALAR`]).
///
/// * 8 x 8 per thread: per step along `k` a thread reads 8 + 8 floats from shared memory (four
///   16-byte loads) and does 64 FMAs. The 64 accumulators, two steps' operands and 16
///   prefetched floats fit in the 128 registers per thread that leave room for two blocks (16
///   warps) per multiprocessor (ptxas: 124 registers).
/// * 128 x 128 per block: 32 flops per byte read from global memory (`2*BM*BN*BK` flops for
///   `4*(BM+BN)*BK` bytes), against 8 for the 32 x 32 tiles of [`matmul_tiled`](fn@super::matmul_tiled).
/// * `BK = 16`: each thread loads two 16-byte pieces of `A` and two of `B` per tile, and one
///   tile is 1,024 FMAs per thread between barriers; two stages take 32.5 KiB of shared memory.
///   Against `BK = 8` (one barrier per 512 FMAs) this halves the barriers and the per-tile
///   address and loop work (measured on the H200: BENCHMARKS.md, "What was tried").
pub const FAST_128: FastTiling = FastTiling {
    block_rows: 128,
    block_cols: 128,
    block_k: 16,
    thread_rows: 8,
    thread_cols: 8,
    pipeline: Pipeline::Registers,
};

/// [`FAST_128`] with `BK = 8`, for the scalar-load kernel `matmul_fast_128x128`: with
/// `BK = 16` its four scalar loads per piece need 143 registers, one block per multiprocessor,
/// and it ran slower than at `BK = 8` on 4097x4095x4093 (H200; not a committed run). It
/// launches with [`FAST_128`]'s shape: the same threads and grid, and at least the shared memory it needs.
pub const FAST_128_SCALAR: FastTiling = FastTiling {
    block_k: 8,
    ..FAST_128
};

/// The small tiling, for products too small or too skinny to fill the GPU with 128 x 128 tiles
/// (1024^3 gives 64 such blocks for 132 multiprocessors): 64 x 64 per block, 4 x 4 per thread,
/// 256 threads, `BK = 16` (again one 16-byte piece of `A` and of `B` per thread and tile),
/// 16.5 KiB of shared memory, four times the blocks of [`FAST_128`] for the same `C`.
pub const FAST_64: FastTiling = FastTiling {
    block_rows: 64,
    block_cols: 64,
    block_k: 16,
    thread_rows: 4,
    thread_cols: 4,
    pipeline: Pipeline::Registers,
};

/// Shared-memory stages of the fast kernels: the block computes on one while its threads fill
/// the other, so one barrier per tile suffices.
pub const STAGES: usize = 2;

/// Floats of padding after each `k`-row of the transposed `A` tile: keeps rows 16-byte aligned,
/// and spreads the transposing stores of a warp over the banks. With [`FAST_128_SCALAR`] a warp
/// stores 16 rows x 2 `k`-quads, and quad 1 lands 4 rows of 132 floats (16 banks) after quad 0:
/// all 32 banks, no conflict. With [`FAST_128`] and [`FAST_64`] (8 rows x 4 quads) two quads
/// share banks: a 2-way conflict on the scalar stores (4 per piece), against conflict-free
/// vector loads (16 per 4 stores).
pub const SHARED_PAD: usize = 4;

/// `B` operands is then 8 distinct 16-byte words (all 32 banks once), of `A` operands 4 distinct
/// words broadcast to 8 threads each: one shared-memory wavefront per load either way.
const WARP_COLS: usize = 8;
/// See [`WARP_COLS`].
const WARP_ROWS: usize = WARP / WARP_COLS;
/// Most 16-byte global loads per thread and operand per tile that [`fast_gemm`](fn@fast_gemm) supports (the
/// size of its prefetch arrays; only the first `BM*BK / (4 * threads)` are used).
const MAX_LOADS: usize = 4;

/// One operand's prefetched pieces of the next tile, in registers: piece `l` is `4*l..4*l + 4`.
type Prefetch = [f32; 4 * MAX_LOADS];

/// The body of every fast matmul kernel: block `(bx, by)` computes the `BM x BN` tile of `C` at
/// rows `by*BM..`, columns `(bx % tiles_n)*BN..` (`tiles_n = ceil(n / BN)`), over the slice
/// `k_begin..k_end` of the inner dimension with `k_begin = (bx / tiles_n) * k_split`; with more
/// than one slice (`gridDim.x > tiles_n`), slice `s` writes its partial product to `c + s*m*n`.
///
/// What one thread does: it owns a `TM x TN` register tile of `C`, split into 4 x 4 quadrants
/// that lie `4 * BM/TM` rows and `4 * BN/TN` columns apart (so that the 16-byte shared loads of a
/// warp touch consecutive words; see `WARP_COLS`). Per tile of `BK` along `k`:
/// 1. it issues the global loads of the *next* tile into registers (one or more 16-byte pieces
///    of `A` and of `B`; with `VEC = false` four scalar loads each, for rows that are not
///    16-byte aligned),
/// 2. for each of the `BK` steps it reads its `TM` operands of `A` and `TN` of `B` from the
///    current shared stage, 16 bytes at a time, and does `TM * TN` FMAs (an outer product);
/// 3. halfway through those steps it stores the prefetched registers to the other stage (`A`
///    transposed, so that step 2 reads consecutive rows of one `k` as one vector),
/// 4. and after the last step it waits at the block's one barrier per tile.
///
/// The stage being filled was last read before the previous barrier, so one barrier per tile
/// orders everything. The prefetch runs unconditionally, also past the last tile (then every
/// load is predicated off and zeros land in the idle stage): with a branch around it, or with
/// the stores at the end, `ptxas` moves the global loads down to the stores, after the FMAs,
/// where nothing hides their latency. Stores halfway keep them at the top of the loop and the
/// kernel within 128 registers.
///
/// At the end it writes its tile of `C` (16-byte stores with `VEC`).
///
/// Edges: rows of `A` past `m` and columns of `B` past `n` are clamped to the last one (valid
/// memory; the results land in rows/columns of `C` that are never stored); `k` past `k_end` is
/// zero-filled, so ragged shapes are exact. The branches depend only on block-uniform values
/// (tile counts) or guard loads and stores; every thread reaches every barrier.
///
/// # Safety
/// * `a`, `b` hold `m*k` and `k*n` floats; `c` holds `gridDim.x / tiles_n * m * n` floats and
///   overlaps neither; `m, n >= 1`; `k_split` is a positive multiple of `BK`.
/// * The launch: 1-D blocks of `(BM/TM) * (BN/TN)` threads, grid `(tiles_n * slices,
///   ceil(m / BM))`, `STAGES * stage_floats` floats of dynamic shared memory (as
///   [`FastTiling::shared_bytes`]).
/// * With `VEC`: `k % 4 == 0`, `n % 4 == 0`, and `a`, `b`, `c` 16-byte aligned.
///
/// Instances (a [`FastTiling`]'s numbers and `VEC`), one PTX entry each:
/// * `matmul_fast_128x128_vec4` ([`FAST_128`], 16-byte global loads and stores): per tile of 16
///   along `k` a block reads 16 KiB (128 rows of `A`, 128 columns of `B`) and does 524,288
///   flops; each thread does 1,024 FMAs from 64 shared-memory vector loads between barriers.
///   Launch: 256 threads, grid `(ceil(n/128) * slices, ceil(m/128))`, `FAST_128.shared_bytes()`
///   (33,280) bytes of dynamic shared memory.
/// * `matmul_fast_128x128` ([`FAST_128_SCALAR`], `BK = 8`, scalar global loads and stores): any
///   `k`, `n` and alignment (four 4-byte loads per 16-byte piece; they hit the same L1 sectors,
///   so the traffic is the same and only the load instructions are four times as many, about
///   1% of the total; derived: instruction counts). Launch as the `_vec4` kernel; `k_split` a
///   multiple of 8.
/// * `matmul_fast_64x64_vec4` ([`FAST_64`], 16-byte loads and stores): per tile of 16 along `k`
///   a block reads 8 KiB and does 131,072 flops; each thread does 256 FMAs from 32 shared-memory
///   vector loads between barriers. Launch: 256 threads, grid `(ceil(n/64) * slices,
///   ceil(m/64))`, `FAST_64.shared_bytes()` (16,896) bytes of shared memory.
/// * `matmul_fast_64x64` ([`FAST_64`], scalar loads and stores): any `k`, `n` and alignment.
// Barriers: two, one after the first tile is stored, one per tile in the main loop (the second
// shared-memory stage makes a second barrier per tile unnecessary).
#[kernel(
    instances(
        matmul_fast_128x128_vec4 = (
            FAST_128.block_rows,
            FAST_128.block_cols,
            FAST_128.block_k,
            FAST_128.thread_rows,
            FAST_128.thread_cols,
            true,
        ),
        matmul_fast_128x128 = (
            FAST_128_SCALAR.block_rows,
            FAST_128_SCALAR.block_cols,
            FAST_128_SCALAR.block_k,
            FAST_128_SCALAR.thread_rows,
            FAST_128_SCALAR.thread_cols,
            false,
        ),
        matmul_fast_64x64_vec4 = (
            FAST_64.block_rows,
            FAST_64.block_cols,
            FAST_64.block_k,
            FAST_64.thread_rows,
            FAST_64.thread_cols,
            true,
        ),
        matmul_fast_64x64 = (
            FAST_64.block_rows,
            FAST_64.block_cols,
            FAST_64.block_k,
            FAST_64.thread_rows,
            FAST_64.thread_cols,
            false,
        ),
    ),
    block((BM / TM) * (BN / TN)),
    barriers(2)
)]
#[inline(always)]
pub unsafe fn fast_gemm<
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
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    let tid = thread::thread_idx_x() as usize;
    let (tx, ty) = thread_position::<BN, TN>(tid);

    // At least 1 (for `n >= 1` it is anyway): keeps a division-by-zero `trap` out of the code.
    let tiles_n = n.div_ceil(BN).max(1);
    let bx = thread::block_idx_x() as usize;
    let slice = bx / tiles_n;
    let col0 = (bx - slice * tiles_n) * BN;
    let row0 = thread::block_idx_y() as usize * BM;
    let k_begin = slice * k_split;
    let k_end = k.min(k_begin + k_split);
    let k_tiles = k_end.saturating_sub(k_begin).div_ceil(BK);
    let c = c.wrapping_add(slice * m * n);

    // SAFETY: the caller's contract; `row0 < m` and `col0 < n` (the grid covers `C` and no
    // more), `k_begin` a multiple of `BK` (`k_split` is), `k_end <= k`.
    let acc = unsafe {
        tile_product::<BM, BN, BK, TM, TN, VEC>(
            a,
            b,
            m,
            n,
            k,
            (tid, tx, ty),
            (row0, col0),
            (k_begin, k_end),
            k_tiles,
        )
    };
    // SAFETY: slice `slice` of `c` holds `m * n` floats (the caller's contract).
    unsafe { store_c::<BM, BN, TM, TN, VEC>(c, m, n, (row0, col0), (tx, ty), &acc) }
}

/// Thread `tid`'s column `tx` and row `ty` in the block's thread grid of `BN / TN` columns (each
/// warp a `WARP_ROWS x WARP_COLS` patch of it, so that a warp's 16-byte shared loads touch
/// consecutive words).
#[inline(always)]
pub fn thread_position<const BN: usize, const TN: usize>(tid: usize) -> (usize, usize) {
    // The thread grid of the block: `threads_x` thread columns.
    let threads_x = BN / TN;
    let (warp, lane) = (tid / WARP, tid % WARP);
    let warps_x = threads_x / WARP_COLS;
    let tx = (warp % warps_x) * WARP_COLS + lane % WARP_COLS;
    let ty = (warp / warps_x) * WARP_ROWS + lane / WARP_COLS;
    (tx, ty)
}

/// The main loop of the register-tiled kernels, for one tile of `C`: [`fast_gemm`](fn@fast_gemm)
/// runs it once for its block's tile, the stream-K kernel
/// ([`super::stream_k_gemm`](fn@super::stream_k_gemm)) once per unit of work. One function for
/// both: written out in `fast_gemm` instead, as it once was, the copy's instruction order in the
/// PTX prologue differed from the call's but ptxas made the same machine code of both on sm_80
/// and sm_90 (the commit that joined them has the figures).
///
/// Computes the product of rows `row0..row0 + BM` of `A`
/// and columns `col0..col0 + BN` of `B` over `k_begin..k_end` (`k_tiles = ceil((k_end - k_begin) /
/// BK)` tiles of `BK`, none when `k_begin >= k_end`), returned as this thread's `TM x TN` register
/// tile. What one thread does, the edges and the barriers are as [`fast_gemm`](fn@fast_gemm)
/// describes; `(tid, tx, ty)` are the thread's index and its column and row in the block's thread
/// grid ([`thread_position`]). It ends at a block barrier after its last shared-memory access, so a
/// block may call it again for another tile right away.
///
/// # Safety
/// As [`fast_gemm`](fn@fast_gemm) for `a`, `b`, `m`, `n`, `k` and the launch; `row0 < m`, `col0 < n`, `k_begin`
/// a multiple of `BK`, `k_end <= k`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
// Index loops over the register arrays: each index is a constant once unrolled, which is what
// keeps the arrays in registers.
#[allow(clippy::needless_range_loop)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn tile_product<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const TM: usize,
    const TN: usize,
    const VEC: bool,
>(
    a: *const f32,
    b: *const f32,
    m: usize,
    n: usize,
    k: usize,
    (tid, tx, ty): (usize, usize, usize),
    (row0, col0): (usize, usize),
    (k_begin, k_end): (usize, usize),
    k_tiles: usize,
) -> [[f32; TN]; TM] {
    // The thread grid of the block: `threads_x` thread columns by `threads_y` thread rows.
    let threads_x = BN / TN;
    let threads_y = BM / TM;
    let threads = threads_x * threads_y;
    // Per tile and operand, each thread loads `a_loads` (`b_loads`) 16-byte pieces; piece `l` of
    // a thread is `l * threads` pieces after its first.
    let a_loads = BM * BK / 4 / threads;
    let b_loads = BK * BN / 4 / threads;
    const {
        let threads = (BM / TM) * (BN / TN);
        assert!(TM % 4 == 0 && TN % 4 == 0, "operands in 16-byte pieces");
        assert!(BK % 4 == 0, "tiles of k in 16-byte pieces");
        assert!(BM % TM == 0 && BN % TN == 0, "thread tiles cover the block");
        assert!((BN / TN) % WARP_COLS == 0, "warps tile the thread columns");
        assert!((BM / TM) % WARP_ROWS == 0, "warps tile the thread rows");
        assert!((BM * BK) % (4 * threads) == 0, "each thread loads as much A");
        assert!((BK * BN) % (4 * threads) == 0, "each thread loads as much B");
        assert!(BM * BK / 4 / threads <= MAX_LOADS && BK * BN / 4 / threads <= MAX_LOADS);
        assert!(threads % (BK / 4) == 0, "a thread's A pieces share a column");
        assert!(threads % (BN / 4) == 0, "a thread's B pieces share columns");
        assert!(BK <= MAX_UNROLL, "the step loop is unrolled up to MAX_UNROLL");
    }
    // Shared memory, per stage: `A` transposed (`BK` rows of `a_stride` floats), then `B`.
    let a_stride = BM + SHARED_PAD;
    let stage_floats = BK * a_stride + BK * BN;

    // This thread's pieces of each tile: `A` rows `a_row + l * a_row_step` (clamped to `m`), at
    // column `a_quad * 4` of the tile; `B` rows `b_row + l * b_row_step`, columns `b_col..` (with
    // `VEC` from `b_col_vec`, clamped so that the piece stays in the row). `a_src` and `b_src`
    // point at the pieces of tile 0; the main loop moves them on by a tile before each prefetch.
    let (a_row, a_quad, a_row_step) = (tid / (BK / 4), tid % (BK / 4), threads / (BK / 4));
    let (b_row, b_quad, b_row_step) = (tid / (BN / 4), tid % (BN / 4), threads / (BN / 4));
    let mut a_src = [a; MAX_LOADS];
    for l in 0..a_loads {
        let row = (row0 + a_row + l * a_row_step).min(m - 1);
        a_src[l] = a.wrapping_add(row * k + k_begin + a_quad * 4);
    }
    let b_col = col0 + b_quad * 4;
    let b_col_vec = b_col.min(n.wrapping_sub(4));
    let mut b_src = b.wrapping_add((k_begin + b_row) * n);

    // Global -> registers: the pieces of the tile at `a_src`, `b_src`, of which the first
    // `k_left <= BK` steps along `k` lie before `k_end` (the rest reads as zeros), as plain floats
    // (piece `l` in elements `4*l..4*l + 4`), so that they stay in registers.
    let load_tile = |a_src: &[*const f32; MAX_LOADS],
                     b_src: *const f32,
                     k_left: u32,
                     a_next: &mut Prefetch,
                     b_next: &mut Prefetch| {
        let a_k = (a_quad * 4) as u32;
        for l in 0..a_loads {
            // SAFETY: `a_src[l]` is column `a_k` of the tile in a row below `m` (clamped), and
            // only columns before `k_end <= k` are read; with `VEC`, `k % 4 == 0` and tiles
            // starting at multiples of 4 keep the whole piece in the row and 16-byte aligned.
            unsafe {
                if VEC {
                    let v = if a_k < k_left {
                        vector::load4(a_src[l], 0)
                    } else {
                        F4::ZERO
                    };
                    for j in 0..4 {
                        a_next[4 * l + j] = v.0[j];
                    }
                } else {
                    for j in 0..4 {
                        a_next[4 * l + j] = if a_k + (j as u32) < k_left {
                            mem::load(a_src[l], j)
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
        for l in 0..b_loads {
            let inside = ((b_row + l * b_row_step) as u32) < k_left;
            let row = b_src.wrapping_add(l * b_row_step * n);
            // SAFETY: `row` is a row of `B` before `k_end <= k` when `inside`; columns are
            // clamped below `n`; with `VEC`, `n % 4 == 0` keeps the clamped piece (`n - 4..n`, or
            // any `b_col < n`) inside the row and 16-byte aligned.
            unsafe {
                if VEC {
                    let v = if inside {
                        vector::load4(row, b_col_vec)
                    } else {
                        F4::ZERO
                    };
                    for j in 0..4 {
                        b_next[4 * l + j] = v.0[j];
                    }
                } else {
                    for j in 0..4 {
                        b_next[4 * l + j] = if inside {
                            mem::load(row, (b_col + j).min(n - 1))
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
    };
    // Steps of tile `t` before `k_end`: `BK`, fewer in the last tile, 0 past it.
    let last_left = (k_end.saturating_sub(k_begin) - k_tiles.saturating_sub(1) * BK) as u32;
    let k_left = |t: usize| -> u32 {
        if t + 1 < k_tiles {
            BK as u32
        } else if t < k_tiles {
            last_left
        } else {
            0
        }
    };

    // Registers -> shared stage `stage`: `A` transposed, `B` as is. Shared memory taken as `F4`
    // so that the module declares it 16-byte aligned, as the vector accesses need.
    let smem = shared::dynamic::<F4>().cast::<f32>();
    let store_tile = |stage: usize, a_next: &Prefetch, b_next: &Prefetch| {
        let s_a = smem.wrapping_add(stage * stage_floats);
        let s_b = s_a.wrapping_add(BK * a_stride);
        for l in 0..a_loads {
            for j in 0..4 {
                let at = (a_quad * 4 + j) * a_stride + a_row + l * a_row_step;
                // SAFETY: row `a_quad*4 + j < BK` of `a_stride` floats, column below `BM`.
                unsafe { mem::store(s_a, at, a_next[4 * l + j]) };
            }
        }
        for l in 0..b_loads {
            let v = F4([
                b_next[4 * l],
                b_next[4 * l + 1],
                b_next[4 * l + 2],
                b_next[4 * l + 3],
            ]);
            // SAFETY: row below `BK`, columns `b_quad*4..+4` below `BN`, 16-byte aligned (`BN`
            // and the stage and `A`-tile sizes are multiples of 4 floats).
            unsafe { vector::store4(s_b, (b_row + l * b_row_step) * BN + b_quad * 4, v) };
        }
    };

    let mut acc = [[0.0f32; TN]; TM];
    let mut a_next: Prefetch = [0.0; 4 * MAX_LOADS];
    let mut b_next: Prefetch = [0.0; 4 * MAX_LOADS];
    if k_tiles > 0 {
        load_tile(&a_src, b_src, k_left(0), &mut a_next, &mut b_next);
        store_tile(0, &a_next, &b_next);
    }
    thread::sync_threads();

    for t in 0..k_tiles {
        // Prefetch tile `t + 1` (unconditionally: see the doc comment).
        for src in a_src.iter_mut().take(a_loads) {
            *src = src.wrapping_add(BK);
        }
        b_src = b_src.wrapping_add(BK * n);
        load_tile(&a_src, b_src, k_left(t + 1), &mut a_next, &mut b_next);
        // This thread's operands in the current stage: `A` columns `ty*4 + q*4*threads_y`
        // (quadrant `q`), `B` columns `tx*4 + q*4*threads_x`.
        let s_a = smem.wrapping_add((t % STAGES) * stage_floats + ty * 4);
        let s_b = smem.wrapping_add((t % STAGES) * stage_floats + BK * a_stride + tx * 4);
        let step = |kk: usize, acc: &mut [[f32; TN]; TM]| {
            let mut a_op = [0.0f32; TM];
            for q in 0..TM / 4 {
                // SAFETY: row `kk < BK` of the `A` tile, columns below `BM`, 16-byte aligned.
                let v = unsafe { vector::load4(s_a, kk * a_stride + q * 4 * threads_y) };
                for j in 0..4 {
                    a_op[q * 4 + j] = v.0[j];
                }
            }
            let mut b_op = [0.0f32; TN];
            for q in 0..TN / 4 {
                // SAFETY: row `kk < BK` of the `B` tile, columns below `BN`, 16-byte aligned.
                let v = unsafe { vector::load4(s_b, kk * BN + q * 4 * threads_x) };
                for j in 0..4 {
                    b_op[q * 4 + j] = v.0[j];
                }
            }
            for i in 0..TM {
                for j in 0..TN {
                    acc[i][j] = math::fma(a_op[i], b_op[j], acc[i][j]);
                }
            }
        };
        unrolled!(kk in 0..(BK / 2), {
            step(kk, &mut acc);
        });
        // Halfway through the steps (see the doc comment).
        store_tile((t + 1) % STAGES, &a_next, &b_next);
        unrolled!(kk in (BK / 2)..BK, {
            step(kk, &mut acc);
        });
        thread::sync_threads();
    }
    acc
}

/// Writes a thread's `TM x TN` register tile `acc` of the `BM x BN` tile at `(row0, col0)` of the
/// `m x n` row-major matrix `c` (16-byte stores with `VEC`), the rows and columns past `m` and `n`
/// left out; `(tx, ty)` as [`tile_product`].
///
/// # Safety
/// `c` holds `m * n` floats; with `VEC`, `n % 4 == 0` and `c` 16-byte aligned.
#[inline(always)]
// Index loops over the register tile, as in `tile_product`.
#[allow(clippy::needless_range_loop)]
pub unsafe fn store_c<const BM: usize, const BN: usize, const TM: usize, const TN: usize, const VEC: bool>(
    c: *mut f32,
    m: usize,
    n: usize,
    (row0, col0): (usize, usize),
    (tx, ty): (usize, usize),
    acc: &[[f32; TN]; TM],
) {
    let threads_x = BN / TN;
    let threads_y = BM / TM;
    for i in 0..TM {
        let row = row0 + (i / 4) * 4 * threads_y + ty * 4 + i % 4;
        if row >= m {
            continue;
        }
        for q in 0..TN / 4 {
            let col = col0 + q * 4 * threads_x + tx * 4;
            let v = F4([
                acc[i][q * 4],
                acc[i][q * 4 + 1],
                acc[i][q * 4 + 2],
                acc[i][q * 4 + 3],
            ]);
            // SAFETY: `row < m`, and every stored column is below `n`; with `VEC`, `n % 4 == 0`
            // and `col % 4 == 0` keep the piece in the row and 16-byte aligned.
            unsafe {
                if VEC {
                    if col < n {
                        vector::store4(c, row * n + col, v);
                    }
                } else {
                    for j in 0..4 {
                        if col + j < n {
                            mem::store(c, row * n + col + j, v.0[j]);
                        }
                    }
                }
            }
        }
    }
}
