//! Rung 4, the wide kernel: a 128 x 256 block tile, 8 x 16 per thread, fed by a `cp.async`
//! pipeline of [`WIDE_STAGES`] shared-memory stages ([`wide_gemm`](fn@wide_gemm)), with the split of `k` and
//! the edges of [`super::fast_gemm`](fn@super::fast_gemm).

use super::register_tiled::{FastTiling, Pipeline};
use super::WARP;
use crate::gpu::vector::{self, F4};
use crate::gpu::{async_copy, math, mem, shared, thread};
use crate::kernel;

/// The wide tiling, for products with at least one 128 x 256 block per multiprocessor (4096^3
/// and up): 128 rows x 256 columns per block, 8 x 16 per thread, 256 threads, `BK = 8`,
/// [`WIDE_STAGES`] stages filled by `cp.async` ([`wide_gemm`](fn@wide_gemm)).
///
/// * 8 x 16 per thread: per step along `k` a thread reads 8 + 16 operands and does 128 FMAs.
///   The 16 `B` operands are four 16-byte shared loads per step; the 8 `A` operands come as
///   eight 16-byte loads every four steps (`A` is stored with `k` contiguous, so one load holds
///   four steps of one row): 6 shared loads per 128 FMAs, against 4 per 64 for [`FAST_128`](super::FAST_128).
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

/// Shared-memory stages of [`wide_gemm`](fn@wide_gemm): tiles `t + 1` and `t + 2` load while tile `t` is
/// multiplied.
pub const WIDE_STAGES: usize = 3;

/// Floats per row of the `A` tile of [`wide_gemm`](fn@wide_gemm) (`BK` floats and 4 of padding): 48 bytes, so
/// the 8 rows that a warp's lanes read at one `k` start in 8 different 4-bank groups
/// (12 * r mod 32 = 0, 12, 24, 4, 16, 28, 8, 20): one shared-memory wavefront per load.
pub const WIDE_A_STRIDE: usize = FAST_WIDE.block_k + 4;

/// Floats of one stage of [`wide_gemm`](fn@wide_gemm): the `A` tile (`BM` rows of [`WIDE_A_STRIDE`]), then
/// the `B` tile (`BK` rows of `BN`).
const WIDE_STAGE_FLOATS: usize = FAST_WIDE.stage_floats();

/// Dynamic shared memory of the wide kernels: [`WIDE_STAGES`] stages, 43,008 bytes (under the
/// 48 KiB a launch may ask for without opting in).
pub const WIDE_SHARED_BYTES: u32 = FAST_WIDE.shared_bytes();

/// Steps of `k` per shared load of `A` in [`wide_gemm`](fn@wide_gemm) (1, 2 or 4): a 4-, 8- or 16-byte load
/// of one row holds that many steps, and stays in registers over them.
const WIDE_A_CHUNK: usize = 2;

/// Rows of `C` between a thread's consecutive rows in [`wide_gemm`](fn@wide_gemm): a warp's 8 row-lanes take
/// 8 consecutive rows (see [`WIDE_A_STRIDE`]), and each lane's 8 rows lie 8 apart.
const WIDE_ROW_STEP: usize = 8;

/// The body of the wide kernels (`matmul_fast_128x256`, `_vec4`): block `(bx, by)` computes the
/// 128 x 256 tile of `C` at rows `by*128..`, columns `(bx % tiles_n)*256..`, over the slice of
/// `k` that `bx / tiles_n` names (as [`fast_gemm`](fn@super::fast_gemm), including the partial products of a split).
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
///
/// Instances, one PTX entry each:
/// * `matmul_fast_128x256_vec4` (`VEC`, 16-byte copies and stores): for `k` and `n` multiples
///   of 4 and 16-byte aligned matrices. Per tile of 8 along `k` a block copies 12 KiB (128 rows
///   of `A`, 256 columns of `B`) and does 524,288 flops; each thread does 1,024 FMAs from 48
///   shared-memory vector loads between barriers. Launch: 256 threads, grid
///   `(ceil(n/256) * slices, ceil(m/128))`, [`WIDE_SHARED_BYTES`] (43,008) bytes of dynamic
///   shared memory.
/// * `matmul_fast_128x256` (4-byte copies and scalar stores): any `k`, `n` and alignment.
// Barriers: one per tile in the main loop (the `cp.async` stages are refilled after it).
#[kernel(
    instances(matmul_fast_128x256_vec4 = true, matmul_fast_128x256 = false),
    block(FAST_WIDE.threads()),
    barriers(1)
)]
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
