//! Matrix product `C = A * B` in f32, row-major: `A` is `m x k`, `B` is `k x n`, `C` is `m x n`.
//!
//! The ladder, from the tutorial version up:
//! 1. [`matmul_naive`]: one thread per element of `C`, operands straight from global memory.
//! 2. [`matmul_tiled`]: square tiles of `A` and `B` staged in shared memory, so each element
//!    loaded from global memory is used `TILE` times.
//! 3. The fast kernels, [`matmul_fast_128x128`] and friends: each thread computes a register tile
//!    of `C` (an outer product per step along `k`, so each element read from shared memory is used
//!    8 or 4 times), 16-byte loads, two shared-memory stages so one barrier per tile suffices, an
//!    optional split of `k` over blocks ([`matmul_sum_splits`] adds the parts). One generic body,
//!    [`fast_gemm`], instantiated per [`FastTiling`].

use crate::gpu::vector::{self, F4};
use crate::gpu::{async_copy, math, mem, shared, thread};
use crate::kernel;

/// Side of the 2-D thread block of [`matmul_naive`]: 16 x 16 = 256 threads.
pub const NAIVE_BLOCK: u32 = 16;

/// Side of the square tiles of [`matmul_tiled`], and of its thread block (32 x 32 = 1024
/// threads, the most a block may have): one thread per element of a tile.
pub const TILE: usize = 32;

/// Dynamic shared memory [`matmul_tiled`] needs: one tile of `A` and one of `B`.
pub const TILED_SHARED_BYTES: u32 = (2 * TILE * TILE * core::mem::size_of::<f32>()) as u32;

/// Naive matmul: thread `(x, y)` of the grid computes `C[y][x]`, the dot product of row `y` of `A`
/// with column `x` of `B`, reading `2k` floats from global memory and writing one.
///
/// Launch: 2-D blocks of `NAIVE_BLOCK x NAIVE_BLOCK`, enough blocks to cover `n` columns (x) and
/// `m` rows (y). Threads outside `C` do nothing.
///
/// # Safety
/// `a`, `b`, `c` point to `m*k`, `k*n` and `m*n` floats of device memory; `c` overlaps neither.
#[kernel]
pub unsafe fn matmul_naive(a: *const f32, b: *const f32, c: *mut f32, m: usize, n: usize, k: usize) {
    let (col, row) = thread::index_2d();
    if row < m && col < n {
        let mut acc = 0.0f32;
        let mut i = 0;
        while i < k {
            // SAFETY: `row < m`, `col < n`, `i < k`: both indices are inside their matrices.
            acc = unsafe { math::fma(mem::load(a, row * k + i), mem::load(b, i * n + col), acc) };
            i += 1;
        }
        // SAFETY: `row < m`, `col < n`.
        unsafe { mem::store(c, row * n + col, acc) }
    }
}

/// Tiled matmul: block `(bx, by)` computes the `TILE x TILE` tile of `C` at rows `by*TILE..`,
/// columns `bx*TILE..`; thread `(tx, ty)` of the block owns `C[by*TILE + ty][bx*TILE + tx]`.
///
/// For each step along `k`, every thread loads one element of the `A` tile and one of the `B`
/// tile from global into shared memory (zero where the tile hangs over the matrix edge), the
/// block waits at a barrier, each thread accumulates the dot product of its row of the `A` tile
/// with its column of the `B` tile from shared memory, and the block waits again before the
/// tiles are overwritten. Per tile step a block reads `2 * TILE^2` floats from global memory and
/// does `2 * TILE^3` flops: `TILE / 4` flops per byte, against `1 / 4` for the naive kernel.
///
/// Launch: blocks of `TILE x TILE` threads, `ceil(n / TILE) x ceil(m / TILE)` blocks,
/// `TILED_SHARED_BYTES` of dynamic shared memory.
///
/// # Safety
/// As [`matmul_naive`], plus the launch shape above.
#[kernel]
pub unsafe fn matmul_tiled(a: *const f32, b: *const f32, c: *mut f32, m: usize, n: usize, k: usize) {
    let tx = thread::thread_idx_x() as usize;
    let ty = thread::thread_idx_y() as usize;
    let row = thread::block_idx_y() as usize * TILE + ty;
    let col = thread::block_idx_x() as usize * TILE + tx;
    let tile_a = shared::dynamic::<f32>();
    let tile_b = tile_a.wrapping_add(TILE * TILE);
    let mine = ty * TILE + tx;

    let mut acc = 0.0f32;
    let mut k0 = 0;
    while k0 < k {
        // SAFETY: global indices are checked against the matrix edges; shared indices are
        // below TILE * TILE, inside each tile.
        unsafe {
            let a_col = k0 + tx;
            let a_val = if row < m && a_col < k {
                mem::load(a, row * k + a_col)
            } else {
                0.0
            };
            mem::store(tile_a, mine, a_val);
            let b_row = k0 + ty;
            let b_val = if b_row < k && col < n {
                mem::load(b, b_row * n + col)
            } else {
                0.0
            };
            mem::store(tile_b, mine, b_val);
        }
        thread::sync_threads();
        let mut i = 0;
        while i < TILE {
            // SAFETY: `ty * TILE + i` and `i * TILE + tx` are below TILE * TILE.
            acc = unsafe {
                math::fma(
                    mem::load(tile_a, ty * TILE + i),
                    mem::load(tile_b, i * TILE + tx),
                    acc,
                )
            };
            i += 1;
        }
        thread::sync_threads();
        k0 += TILE;
    }
    if row < m && col < n {
        // SAFETY: `row < m`, `col < n`.
        unsafe { mem::store(c, row * n + col, acc) }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Fast kernels: register tiles, 16-byte loads, double-buffered shared memory, split k
// ---------------------------------------------------------------------------------------------

/// Tile shape of one fast matmul kernel (the `BM x BN x BK` block tile and the `TM x TN` thread
/// tile of the SGEMM literature). [`fast_gemm`] takes the same numbers as const generics; this
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
    /// Through registers ([`fast_gemm`]): the next tile is loaded into registers while the
    /// current one is multiplied, then stored, `A` transposed; [`STAGES`] stages.
    Registers,
    /// By `cp.async` ([`wide_gemm`]): [`WIDE_STAGES`] stages, `A` stored as it is (`k`
    /// contiguous, rows of [`WIDE_A_STRIDE`] floats).
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
/// 128 x 128 per block, 8 x 8 per thread, 256 threads, `BK = 16` ([`matmul_fast_128x128_vec4`];
/// the scalar-load kernel takes [`FAST_128_SCALAR`]).
///
/// * 8 x 8 per thread: per step along `k` a thread reads 8 + 8 floats from shared memory (four
///   16-byte loads) and does 64 FMAs. The 64 accumulators, two steps' operands and 16
///   prefetched floats fit in the 128 registers per thread that leave room for two blocks (16
///   warps) per multiprocessor (ptxas: 124 registers).
/// * 128 x 128 per block: 32 flops per byte read from global memory (`2*BM*BN*BK` flops for
///   `4*(BM+BN)*BK` bytes), against 8 for the 32 x 32 tiles of [`matmul_tiled`].
/// * `BK = 16`: each thread loads two 16-byte pieces of `A` and two of `B` per tile, and one
///   tile is 1,024 FMAs per thread between barriers; two stages take 32.5 KiB of shared memory.
///   Against `BK = 8` (one barrier per 512 FMAs) this halves the barriers and the per-tile
///   address and loop work: on the H200 42.04 -> 46.13 TFLOP/s at 4096^3 (committed runs
///   `8f3a480` -> `d166213`, `bench/results/<rev>.jsonl`).
pub const FAST_128: FastTiling = FastTiling {
    block_rows: 128,
    block_cols: 128,
    block_k: 16,
    thread_rows: 8,
    thread_cols: 8,
    pipeline: Pipeline::Registers,
};

/// [`FAST_128`] with `BK = 8`, for the scalar-load kernel [`matmul_fast_128x128`]: with
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

/// The most rows of `C` one block of any matmul kernel here covers (the grid's `y` extent is the
/// rows divided by this, at most).
pub const MAX_BLOCK_ROWS: usize = FAST_128.block_rows;

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

/// Threads of a warp ([`crate::gpu::warp::SIZE`], as a `usize` for index arithmetic).
const WARP: usize = crate::gpu::warp::SIZE as usize;
/// A warp covers 8 thread columns x 4 thread rows of the block's thread grid: a shared load of
/// `B` operands is then 8 distinct 16-byte words (all 32 banks once), of `A` operands 4 distinct
/// words broadcast to 8 threads each: one shared-memory wavefront per load either way.
const WARP_COLS: usize = 8;
/// See [`WARP_COLS`].
const WARP_ROWS: usize = WARP / WARP_COLS;
/// Most 16-byte global loads per thread and operand per tile that [`fast_gemm`] supports (the
/// size of its prefetch arrays; only the first `BM*BK / (4 * threads)` are used).
const MAX_LOADS: usize = 4;
/// Most steps along `k` per tile (`BK`) that [`unrolled!`] unrolls.
const MAX_UNROLL: usize = 16;

/// `for $i in $lo..$hi $body` with the body written out once per step (steps below
/// [`MAX_UNROLL`]; `$lo` and `$hi` must be constants). Rust has no `#pragma unroll`, and LLVM keeps a loop of `BK` outer
/// products (~600 instructions) rolled; unrolled, `ptxas` can issue the shared loads of step
/// `i + 1` while the FMAs of step `i` run, instead of waiting for them at the top of each step.
///
/// `unrolled!($i in 0..$hi == N, $body)` with a literal `N` of 2, 4 or 8 (checked equal to `$hi`
/// at compile time) writes the body out exactly `N` times instead of [`MAX_UNROLL`] guarded
/// times: for the nested loops of [`wide_gemm`], whose bounds are constants, that is 96 copies
/// of the innermost body instead of 4,352, and the type checker's time on the kernel crate goes
/// with the number of copies. The code generated is the same.
macro_rules! unrolled {
    ($i:ident in 0..$hi:tt == 2, $body:block) => {
        const { assert!($hi == 2, "unrolled!: the literal count must equal the bound") };
        unrolled!(@exact $i, $body, 0 1)
    };
    ($i:ident in 0..$hi:tt == 4, $body:block) => {
        const { assert!($hi == 4, "unrolled!: the literal count must equal the bound") };
        unrolled!(@exact $i, $body, 0 1 2 3)
    };
    ($i:ident in 0..$hi:tt == 8, $body:block) => {
        const { assert!($hi == 8, "unrolled!: the literal count must equal the bound") };
        unrolled!(@exact $i, $body, 0 1 2 3 4 5 6 7)
    };
    (@exact $i:ident, $body:block, $($step:literal)*) => {
        $(
            {
                let $i: usize = $step;
                $body
            }
        )*
    };
    ($i:ident in $lo:tt..$hi:expr, $body:block) => {
        unrolled!(@steps $i, $lo, $hi, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@steps $i:ident, $lo:expr, $hi:expr, $body:block, $($step:literal)*) => {
        $(
            if $lo <= $step && $step < $hi {
                let $i: usize = $step;
                $body
            }
        )*
    };
}

/// One operand's prefetched pieces of the next tile, in registers: piece `l` is `4*l..4*l + 4`.
type Prefetch = [f32; 4 * MAX_LOADS];

/// The body of every fast matmul kernel: block `(bx, by)` computes the `BM x BN` tile of `C` at
/// rows `by*BM..`, columns `(bx % tiles_n)*BN..` (`tiles_n = ceil(n / BN)`), over the slice
/// `k_begin..k_end` of the inner dimension with `k_begin = (bx / tiles_n) * k_split`; with more
/// than one slice (`gridDim.x > tiles_n`), slice `s` writes its partial product to `c + s*m*n`.
///
/// What one thread does: it owns a `TM x TN` register tile of `C`, split into 4 x 4 quadrants
/// that lie `4 * BM/TM` rows and `4 * BN/TN` columns apart (so that the 16-byte shared loads of a
/// warp touch consecutive words; see [`WARP_COLS`]). Per tile of `BK` along `k`:
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
#[inline(always)]
#[allow(clippy::too_many_arguments)]
// Index loops over the register arrays: each index is a constant once unrolled, which is what
// keeps the arrays in registers.
#[allow(clippy::needless_range_loop)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
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

    let tid = thread::thread_idx_x() as usize;
    let (warp, lane) = (tid / WARP, tid % WARP);
    let warps_x = threads_x / WARP_COLS;
    let tx = (warp % warps_x) * WARP_COLS + lane % WARP_COLS;
    let ty = (warp / warps_x) * WARP_ROWS + lane / WARP_COLS;

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

/// [`fast_gemm`] with [`FAST_128`] and 16-byte global loads and stores: for `k` and `n`
/// multiples of 4 and 16-byte aligned matrices.
///
/// Per tile of 16 along `k` a block reads 16 KiB (128 rows of `A`, 128 columns of `B`) and does
/// 524,288 flops; each thread does 1,024 FMAs from 64 shared-memory vector loads between
/// barriers. Launch: 256 threads, grid `(ceil(n/128) * slices, ceil(m/128))`,
/// `FAST_128.shared_bytes()` (33,280) bytes of dynamic shared memory.
///
/// # Safety
/// As [`fast_gemm`] with `VEC = true`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_fast_128x128_vec4(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    const T: FastTiling = FAST_128;
    // SAFETY: forwarded contract.
    unsafe {
        fast_gemm::<
            { T.block_rows },
            { T.block_cols },
            { T.block_k },
            { T.thread_rows },
            { T.thread_cols },
            true,
        >(a, b, c, m, n, k, k_split)
    }
}

/// [`matmul_fast_128x128_vec4`] with scalar global loads and stores and [`FAST_128_SCALAR`]
/// (`BK = 8`): any `k`, `n` and alignment (four 4-byte loads per 16-byte piece; they hit the
/// same L1 sectors, so the traffic is the same and only the load instructions are four times as
/// many, about 1% of the total; derived: instruction counts). Launch as
/// [`matmul_fast_128x128_vec4`]; `k_split` a multiple of 8.
///
/// # Safety
/// As [`fast_gemm`] with `VEC = false`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_fast_128x128(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    const T: FastTiling = FAST_128_SCALAR;
    // SAFETY: forwarded contract.
    unsafe {
        fast_gemm::<
            { T.block_rows },
            { T.block_cols },
            { T.block_k },
            { T.thread_rows },
            { T.thread_cols },
            false,
        >(a, b, c, m, n, k, k_split)
    }
}

/// [`fast_gemm`] with [`FAST_64`] and 16-byte global loads and stores (`k`, `n` multiples of 4,
/// aligned matrices).
///
/// Per tile of 16 along `k` a block reads 8 KiB and does 131,072 flops; each thread does 256 FMAs
/// from 32 shared-memory vector loads between barriers. Launch: 256 threads, grid
/// `(ceil(n/64) * slices, ceil(m/64))`, `FAST_64.shared_bytes()` (16,896) bytes of shared memory.
///
/// # Safety
/// As [`fast_gemm`] with `VEC = true`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_fast_64x64_vec4(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    const T: FastTiling = FAST_64;
    // SAFETY: forwarded contract.
    unsafe {
        fast_gemm::<
            { T.block_rows },
            { T.block_cols },
            { T.block_k },
            { T.thread_rows },
            { T.thread_cols },
            true,
        >(a, b, c, m, n, k, k_split)
    }
}

/// [`matmul_fast_64x64_vec4`] with scalar global loads and stores: any `k`, `n` and alignment.
///
/// # Safety
/// As [`fast_gemm`] with `VEC = false`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_fast_64x64(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    const T: FastTiling = FAST_64;
    // SAFETY: forwarded contract.
    unsafe {
        fast_gemm::<
            { T.block_rows },
            { T.block_cols },
            { T.block_k },
            { T.thread_rows },
            { T.thread_cols },
            false,
        >(a, b, c, m, n, k, k_split)
    }
}

/// Threads per block of [`matmul_sum_splits`].
pub const SUM_BLOCK: u32 = 256;

/// Adds the partial products of a split-`k` launch: thread `i` writes
/// `c[i] = partial[i] + partial[len + i] + ...` over `slices` parts (in that order, so the
/// result does not depend on the launch), reading `4 * slices` bytes and writing 4.
///
/// Launch: 1-D blocks of [`SUM_BLOCK`] threads, `ceil(len / SUM_BLOCK)` blocks.
///
/// # Safety
/// `partial` holds `slices * len` floats, `c` holds `len` and does not overlap it.
#[kernel]
pub unsafe fn matmul_sum_splits(partial: *const f32, c: *mut f32, len: usize, slices: usize) {
    let i = thread::index_1d();
    if i < len {
        let mut sum = 0.0f32;
        for s in 0..slices {
            // SAFETY: `s < slices`, `i < len`.
            sum += unsafe { mem::load(partial, s * len + i) };
        }
        // SAFETY: `i < len`.
        unsafe { mem::store(c, i, sum) }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. The wide kernel: 128 x 256 block tile, 8 x 16 per thread, a cp.async pipeline
// ---------------------------------------------------------------------------------------------

/// The wide tiling, for products with at least one 128 x 256 block per multiprocessor (4096^3
/// and up): 128 rows x 256 columns per block, 8 x 16 per thread, 256 threads, `BK = 8`,
/// [`WIDE_STAGES`] stages filled by `cp.async` ([`wide_gemm`]).
///
/// * 8 x 16 per thread: per step along `k` a thread reads 8 + 16 operands and does 128 FMAs.
///   The 16 `B` operands are four 16-byte shared loads per step; the 8 `A` operands come as
///   eight 16-byte loads every four steps (`A` is stored with `k` contiguous, so one load holds
///   four steps of one row): 6 shared loads per 128 FMAs, against 4 per 64 for [`FAST_128`].
///   The 128 accumulators need more than 128 registers, so one block (8 warps) runs per SM.
/// * `cp.async` moves the tiles from global to shared memory without passing through registers:
///   no prefetch registers, no transposing stores, and [`WIDE_STAGES`] tiles in flight to cover
///   the memory latency that 8 warps alone cannot.
/// * 128 x 256 per block: 43 flops per byte read from global memory.
pub const FAST_WIDE: FastTiling = FastTiling {
    block_rows: 128,
    block_cols: 256,
    block_k: 8,
    thread_rows: 8,
    thread_cols: 16,
    pipeline: Pipeline::AsyncCopy,
};

/// Shared-memory stages of [`wide_gemm`]: tiles `t + 1` and `t + 2` load while tile `t` is
/// multiplied.
pub const WIDE_STAGES: usize = 3;

/// Floats per row of the `A` tile of [`wide_gemm`] (`BK` floats and 4 of padding): 48 bytes, so
/// the 8 rows that a warp's lanes read at one `k` start in 8 different 4-bank groups
/// (12 * r mod 32 = 0, 12, 24, 4, 16, 28, 8, 20): one shared-memory wavefront per load.
pub const WIDE_A_STRIDE: usize = FAST_WIDE.block_k + 4;

/// Floats of one stage of [`wide_gemm`]: the `A` tile (`BM` rows of [`WIDE_A_STRIDE`]), then
/// the `B` tile (`BK` rows of `BN`).
const WIDE_STAGE_FLOATS: usize = FAST_WIDE.stage_floats();

/// Dynamic shared memory of the wide kernels: [`WIDE_STAGES`] stages, 43,008 bytes (under the
/// 48 KiB a launch may ask for without opting in).
pub const WIDE_SHARED_BYTES: u32 = FAST_WIDE.shared_bytes();

/// Steps of `k` per shared load of `A` in [`wide_gemm`] (1, 2 or 4): a 4-, 8- or 16-byte load
/// of one row holds that many steps, and stays in registers over them.
const WIDE_A_CHUNK: usize = 2;

/// Rows of `C` between a thread's consecutive rows in [`wide_gemm`]: a warp's 8 row-lanes take
/// 8 consecutive rows (see [`WIDE_A_STRIDE`]), and each lane's 8 rows lie 8 apart.
const WIDE_ROW_STEP: usize = 8;

/// The body of the wide kernels (`matmul_fast_128x256`, `_vec4`): block `(bx, by)` computes the
/// 128 x 256 tile of `C` at rows `by*128..`, columns `(bx % tiles_n)*256..`, over the slice of
/// `k` that `bx / tiles_n` names (as [`fast_gemm`], including the partial products of a split).
///
/// What one thread does: warp `w` (of 8) owns a 64 x 64 sub-tile (`w / 4` picks the rows, `w % 4`
/// the columns); lane `l` owns 8 rows `l % 8 + 8 i` and 16 columns in four 16-byte quads
/// `4 (l / 8) + 16 q` of it, an 8 x 16 register tile. Per tile of `BK = 8`:
/// 1. it waits for its own copies of this tile (`cp.async.wait_group 1`) and at the block's one
///    barrier (after which every thread's copies have landed, and every thread has finished
///    reading the stage that the next copies overwrite),
/// 2. it starts the copies of tile `t + 2` into the stage of tile `t - 1`: one 16-byte piece of
///    `A` (row `tid / 2`, half `tid % 2` of the 8 `k`) and two of `B` (rows `tid / 64` and
///    `tid / 64 + 4`, columns `4 (tid % 64)..`); with `VEC = false` four 4-byte copies each,
/// 3. for each 4 steps along `k` it loads its 8 rows' `A` quads, and for each step its 16 `B`
///    operands, and does 128 FMAs (an outer product).
///
/// Edges: copies past `m` rows, `n` columns or the slice's end of `k` fill zeros (the source
/// pointer is clamped into the matrix, so no copy reads outside it); the epilogue stores only
/// rows below `m` and columns below `n`. All branches around barriers are block-uniform.
///
/// # Safety
/// * `a`, `b` hold `m*k` and `k*n` floats; `c` holds `gridDim.x / tiles_n * m * n` floats and
///   overlaps neither; `m, n >= 1`; `k_split` is a positive multiple of 8.
/// * The launch: 256 threads, grid `(ceil(n / 256) * slices, ceil(m / 128))`,
///   [`WIDE_SHARED_BYTES`] of dynamic shared memory.
/// * With `VEC`: `k % 4 == 0`, `n % 4 == 0`, and `a`, `b`, `c` 16-byte aligned.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::needless_range_loop)]
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn wide_gemm<const VEC: bool>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    const BM: usize = FAST_WIDE.block_rows;
    const BN: usize = FAST_WIDE.block_cols;
    const BK: usize = FAST_WIDE.block_k;
    const TM: usize = FAST_WIDE.thread_rows;
    const TN: usize = FAST_WIDE.thread_cols;
    const THREADS: usize = FAST_WIDE.threads() as usize;
    const {
        assert!(THREADS == 256, "8 warps of 64 x 64");
        assert!(
            BM * BK / 4 == THREADS,
            "one 16-byte piece of A per thread and tile"
        );
        assert!(
            BK * BN / 4 == 2 * THREADS,
            "two 16-byte pieces of B per thread and tile"
        );
        assert!(BK % 4 == 0 && TN % 4 == 0);
        assert!(WIDE_STAGES >= 2);
    }

    let tid = thread::thread_idx_x() as usize;
    let (warp, lane) = (tid / WARP, tid % WARP);
    // This thread's first row and column inside the block tile.
    let row_in = (warp / 4) * 64 + lane % WIDE_ROW_STEP;
    let col_in = (warp % 4) * 64 + (lane / WIDE_ROW_STEP) * 4;

    let tiles_n = n.div_ceil(BN).max(1);
    let bx = thread::block_idx_x() as usize;
    let slice = bx / tiles_n;
    let col0 = (bx - slice * tiles_n) * BN;
    let row0 = thread::block_idx_y() as usize * BM;
    let k_begin = slice * k_split;
    let k_end = k.min(k_begin + k_split);
    let k_tiles = k_end.saturating_sub(k_begin).div_ceil(BK);
    let c = c.wrapping_add(slice * m * n);

    // This thread's copies: `A` row `a_row` (clamped into the matrix; zeros past `m`), `k`
    // offset `a_k` in the tile; `B` rows `b_row` and `b_row + 4`, column `b_col`.
    let a_row = row0 + tid / 2;
    let a_k = (tid % 2) * 4;
    let a_src = a.wrapping_add(a_row.min(m - 1) * k);
    let a_rows_ok = a_row < m;
    let b_row = tid / (BN / 4);
    let b_col = col0 + (tid % (BN / 4)) * 4;
    let smem = shared::dynamic::<F4>().cast::<f32>();

    // Starts the copies of tile `t` into stage `t % WIDE_STAGES`.
    let issue = |t: usize| {
        let stage = smem.wrapping_add((t % WIDE_STAGES) * WIDE_STAGE_FLOATS);
        let kt = k_begin + t * BK;
        // `A`: 4 floats of row `a_row` from column `kt + a_k`.
        let a_dst = stage.wrapping_add((tid / 2) * WIDE_A_STRIDE + a_k);
        let a_col = kt + a_k;
        // SAFETY (all copies): destinations are inside this stage (rows below `BM` / `BK`,
        // columns below the row stride), 16-byte aligned for the 16-byte copies; a source is
        // read only where the copy's byte count is non-zero, which is only inside the matrix
        // and before `k_end`; otherwise the (clamped, valid) pointer is not read.
        unsafe {
            if VEC {
                // `k % 4 == 0`: the piece lies wholly before or after `k_end`.
                let bytes = if a_rows_ok && a_col < k_end { 16 } else { 0 };
                async_copy::cp_async_16(a_dst, a_src.wrapping_add(a_col.min(k - 4)), bytes);
            } else {
                for j in 0..4 {
                    let ok = a_rows_ok && a_col + j < k_end;
                    let src = a_src.wrapping_add((a_col + j).min(k - 1));
                    async_copy::cp_async_4(a_dst.wrapping_add(j), src, if ok { 4 } else { 0 });
                }
            }
            // `B`: rows `kt + b_row + 4 l`, 4 floats from column `b_col`.
            let b_stage = stage.wrapping_add(BM * WIDE_A_STRIDE);
            for l in 0..2 {
                let r = b_row + 4 * l;
                let b_dst = b_stage.wrapping_add(r * BN + (tid % (BN / 4)) * 4);
                let row_ok = kt + r < k_end;
                let src_row = b.wrapping_add((kt + r).min(k - 1) * n);
                if VEC {
                    let bytes = if row_ok && b_col < n { 16 } else { 0 };
                    async_copy::cp_async_16(b_dst, src_row.wrapping_add(b_col.min(n - 4)), bytes);
                } else {
                    for j in 0..4 {
                        let ok = row_ok && b_col + j < n;
                        let src = src_row.wrapping_add((b_col + j).min(n - 1));
                        async_copy::cp_async_4(b_dst.wrapping_add(j), src, if ok { 4 } else { 0 });
                    }
                }
            }
        }
    };

    // Prologue: the first `WIDE_STAGES - 1` tiles in flight, one group each (empty past the end).
    for t in 0..WIDE_STAGES - 1 {
        if t < k_tiles {
            issue(t);
        }
        async_copy::commit_group();
    }

    let mut acc = [[0.0f32; TN]; TM];
    for t in 0..k_tiles {
        async_copy::wait_group::<{ (WIDE_STAGES - 2) as u32 }>();
        thread::sync_threads();
        if t + WIDE_STAGES - 1 < k_tiles {
            issue(t + WIDE_STAGES - 1);
        }
        async_copy::commit_group();

        let stage = smem.wrapping_add((t % WIDE_STAGES) * WIDE_STAGE_FLOATS);
        let s_a = stage.wrapping_add(row_in * WIDE_A_STRIDE);
        let s_b = stage.wrapping_add(BM * WIDE_A_STRIDE + col_in);
        unrolled!(kc in 0..(BK / WIDE_A_CHUNK) == 4, {
            // This thread's 8 rows, `WIDE_A_CHUNK` steps of `k` each.
            let mut a_ops = [[0.0f32; WIDE_A_CHUNK]; TM];
            unrolled!(i in 0..TM == 8, {
                let at = i * WIDE_ROW_STEP * WIDE_A_STRIDE + kc * WIDE_A_CHUNK;
                // SAFETY: row `row_in + 8 i < BM`, columns `at..at + WIDE_A_CHUNK` below `BK`,
                // aligned to the chunk (rows of 48 bytes).
                unsafe {
                    match WIDE_A_CHUNK {
                        4 => {
                            let v = vector::load4(s_a, at);
                            for j in 0..WIDE_A_CHUNK {
                                a_ops[i][j] = v.0[j];
                            }
                        }
                        2 => {
                            let v = vector::load2(s_a, at);
                            for j in 0..WIDE_A_CHUNK {
                                a_ops[i][j] = v.0[j];
                            }
                        }
                        _ => a_ops[i][0] = mem::load(s_a, at),
                    }
                }
            });
            unrolled!(kk in 0..WIDE_A_CHUNK == 2, {
                let mut b_op = [0.0f32; TN];
                for q in 0..TN / 4 {
                    // SAFETY: row `kc * WIDE_A_CHUNK + kk < BK` of the `B` tile, columns below
                    // `BN`, aligned.
                    let v = unsafe { vector::load4(s_b, (kc * WIDE_A_CHUNK + kk) * BN + q * 16) };
                    for j in 0..4 {
                        b_op[q * 4 + j] = v.0[j];
                    }
                }
                unrolled!(i in 0..TM == 8, {
                    let a_op = a_ops[i][kk];
                    for j in 0..TN {
                        acc[i][j] = math::fma(a_op, b_op[j], acc[i][j]);
                    }
                });
            });
        });
    }

    unrolled!(i in 0..TM == 8, {
        let row = row0 + row_in + i * WIDE_ROW_STEP;
        for q in 0..TN / 4 {
            let col = col0 + col_in + q * 16;
            let v = F4([acc[i][q * 4], acc[i][q * 4 + 1], acc[i][q * 4 + 2], acc[i][q * 4 + 3]]);
            // SAFETY: `row < m`, every stored column below `n`; with `VEC`, `n % 4 == 0` and
            // `col % 4 == 0` keep the piece in the row and 16-byte aligned.
            unsafe {
                if row < m {
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
    });
}

/// [`wide_gemm`] with 16-byte copies and stores: for `k` and `n` multiples of 4 and 16-byte
/// aligned matrices.
///
/// Per tile of 8 along `k` a block copies 12 KiB (128 rows of `A`, 256 columns of `B`) and does
/// 524,288 flops; each thread does 1,024 FMAs from 48 shared-memory vector loads between
/// barriers. Launch: 256 threads, grid `(ceil(n/256) * slices, ceil(m/128))`,
/// [`WIDE_SHARED_BYTES`] (43,008) bytes of dynamic shared memory.
///
/// # Safety
/// As [`wide_gemm`] with `VEC = true`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_fast_128x256_vec4(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    // SAFETY: forwarded contract.
    unsafe { wide_gemm::<true>(a, b, c, m, n, k, k_split) }
}

/// [`matmul_fast_128x256_vec4`] with 4-byte copies and scalar stores: any `k`, `n` and alignment.
///
/// # Safety
/// As [`wide_gemm`] with `VEC = false`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_fast_128x256(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    k_split: usize,
) {
    // SAFETY: forwarded contract.
    unsafe { wide_gemm::<false>(a, b, c, m, n, k, k_split) }
}
