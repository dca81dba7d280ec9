//! A warp per row, the row in registers, no shared memory and no barrier
//! ([`rms_norm_warp`](fn@rms_norm_warp), [`layer_norm_warp`](fn@layer_norm_warp) and their
//! pipelined twins [`rms_norm_warp_pipe`](fn@rms_norm_warp_pipe),
//! [`layer_norm_warp_pipe`](fn@layer_norm_warp_pipe)): for rows of up to 1024 columns, where a
//! block per row is one or two warps that wait at a barrier for a few hundred bytes each.

use super::overflow::{overflowed, rescue, WarpRow};
use super::{load_words, rcp_fast, rewiden_words, rsqrt_fast, widen_words, NormElem};
use crate::gpu::{bf16, math, thread, warp};
use crate::kernel;

/// Threads per block of the warp-per-row kernels: 8 warps, as softmax's warp kernels (8 blocks
/// of 256 threads fill a multiprocessor's 2048 threads when the registers allow).
pub const WARP_BLOCK: u32 = 256;

/// Rows a block of the warp-per-row kernels handles at a time (one per warp).
pub const WARP_ROWS: u32 = WARP_BLOCK / warp::SIZE;

/// Where a warp of a warp-per-row launch stands (`norm_warp`, `norm_warp_pipe`): which vectors
/// its lane holds ([`WarpLane`]), its first row (warps numbered across the grid) and the stride
/// to its next.
struct WarpRows {
    at: WarpLane,
    row: usize,
    stride: usize,
}

impl WarpRows {
    #[inline(always)]
    fn of<E: NormElem>(cols: usize) -> WarpRows {
        let tid = thread::thread_idx_x() as usize;
        let warps = (thread::block_dim_x() / warp::SIZE) as usize;
        // Computed in this order (lane, row, stride, vecs) so that the kernels' PTX stays the
        // one measured on the H200.
        let lane = (tid % warp::SIZE as usize) as u32;
        let row = thread::block_idx_x() as usize * warps + tid / warp::SIZE as usize;
        let stride = thread::grid_dim_x() as usize * warps;
        let vecs = (cols / E::LANES) as u32;
        WarpRows {
            at: WarpLane { lane, vecs },
            row,
            stride,
        }
    }
}

/// A lane of a warp-per-row kernel and its row's vectors of `E::LANES` elements: the lane holds
/// vectors `lane + 32 k`.
#[derive(Clone, Copy)]
struct WarpLane {
    lane: u32,
    vecs: u32,
}

impl WarpLane {
    /// Whether vector `lane + 32 k` is in the row, the right side uniform over the warp.
    #[inline(always)]
    fn valid(self, k: usize) -> bool {
        self.lane < self.vecs.saturating_sub(k as u32 * warp::SIZE)
    }

    /// The element offset of vector `lane + 32 k` in its row.
    #[inline(always)]
    fn offset<E: NormElem>(self, k: usize) -> usize {
        (self.lane + k as u32 * warp::SIZE) as usize * E::LANES
    }
}

/// RMSNorm (`LAYER = false`) or LayerNorm (`LAYER = true`) of a warp's rows, each held in
/// registers: the body of the `*_norm_warp_*` kernels.
///
/// Warp `w` of the grid's `W = gridDim.x * blockDim.x / 32` warps handles rows `w, w + W, ...`
/// (one row each when the grid covers the rows, several when the host launches a persistent
/// grid). Per row, lane `l` loads the row's vectors `l + 32 k` (`k < V`, each
/// [`NormElem::LANES`] elements, 16 bytes; all loads issued before any use), the warp sums with
/// shuffles ([`warp::reduce_sum`]: RMSNorm the squares; LayerNorm `x - x[r][0]`, then the squared
/// deviations over the registers, as the block kernels: see the [family's doc](super)), and each
/// lane stores its vectors. With `KEEP` the lane loads its weight (and bias) vectors once, before
/// its first row, and keeps them in registers across its rows; without, it loads them for each
/// row right after the row's own vectors, before the sums, so that the two latencies overlap (the
/// same 4 KiB for every warp of a multiprocessor, from L1), as Inductor's kernels do.
///
/// Global memory: `x` read once, `y` written once: 8 bytes per element in f32, 4 in bf16; the
/// weight (and bias) once per warp (`KEEP`) or once per row, from L1/L2.
///
/// Launch: blocks of a multiple of 32 threads ([`WARP_BLOCK`]), any grid (the warps stride over
/// the rows); no shared memory; `cols / LANES <= 32 * V`.
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` and `b`
/// to `cols` (`b` is not read by RMSNorm); all four 16-byte aligned; `cols >= 1` a multiple of
/// `LANES`; the launch shape is as above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
// Index loops over the register arrays: each index is a constant once unrolled.
#[allow(clippy::needless_range_loop)]
unsafe fn norm_warp<E: NormElem, const V: usize, const LAYER: bool, const KEEP: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let WarpRows { at, mut row, stride } = WarpRows::of::<E>(cols);
    // `1 / cols` once, so that each statistic is a multiply, not an IEEE division.
    let inv_n = rcp_fast(cols as f32);

    let mut g = [[0.0f32; 8]; V];
    let mut beta = [[0.0f32; 8]; V];
    if KEEP && row < rows {
        unroll_8!(V, |k| {
            if at.valid(k) {
                // SAFETY: vector `lane + 32 k < vecs` of the weight (and bias), aligned.
                unsafe {
                    g[k] = E::load_vec(w, at.offset::<E>(k));
                    if LAYER {
                        beta[k] = E::load_vec(b, at.offset::<E>(k));
                    }
                }
            }
        });
    }
    // `row` is the same for the 32 lanes: the warp leaves the loop together, and every lane
    // reaches each shuffle. `redo` once a row's statistic was not finite (see `overflow`).
    let mut redo = false;
    while row < rows {
        let x_row = x.wrapping_add(row * cols);
        let mut v = [[0u32; 4]; V];
        unroll_8!(V, |k| {
            if at.valid(k) {
                // SAFETY: vector `lane + 32 k < vecs` lies inside the row, 16-byte aligned.
                v[k] = unsafe { load_words(x_row, at.offset::<E>(k)) };
            }
        });
        // Without `KEEP`: the row's weight (and bias) vectors right behind its own, before the
        // sums, so that their latency overlaps the row's (as Inductor's kernels load them).
        let (raw_g, raw_b) = if KEEP {
            ([[0u32; 4]; V], [[0u32; 4]; V])
        } else {
            // SAFETY: `w` and `b` have `cols` elements, aligned (the caller's contract).
            unsafe { load_params_words::<E, V, LAYER>(w, b, at) }
        };
        // SAFETY: `cols >= 1`.
        let shift = if LAYER { unsafe { E::load(x_row, 0) } } else { 0.0 };
        // SAFETY: forwarded contract; `row < rows`.
        redo |= unsafe {
            finish_row::<E, V, LAYER, KEEP>(
                v,
                shift,
                (&mut g, &mut beta),
                (&raw_g, &raw_b),
                y.wrapping_add(row * cols),
                at,
                inv_n,
                eps,
            )
        };
        row += stride;
    }
    if redo {
        // SAFETY: all 32 lanes are here (`redo` is the same for them); the kernel's contract.
        unsafe { warp_tail::<E, LAYER>(x, y, w, b, rows, cols, eps) };
    }
}

/// The lane's weight (and, for LayerNorm, bias) vectors `lane + 32 k` (`k < V`) as loaded
/// words (4 registers a vector, where widened bf16 take 8), for [`finish_row`] to widen at the
/// store; zeros past the row.
///
/// # Safety
/// `w` and `b` (read only with `LAYER`) point to `cols` elements of global memory, 16-byte
/// aligned, with `at.vecs = cols / LANES`.
#[inline(always)]
unsafe fn load_params_words<E: NormElem, const V: usize, const LAYER: bool>(
    w: *const E,
    b: *const E,
    at: WarpLane,
) -> ([[u32; 4]; V], [[u32; 4]; V]) {
    let mut raw_g = [[0u32; 4]; V];
    let mut raw_b = [[0u32; 4]; V];
    unroll_8!(V, |k| {
        if at.valid(k) {
            // SAFETY: vector `lane + 32 k < vecs` of the weight (and bias), aligned.
            unsafe {
                raw_g[k] = load_words(w, at.offset::<E>(k));
                if LAYER {
                    raw_b[k] = load_words(b, at.offset::<E>(k));
                }
            }
        }
    });
    (raw_g, raw_b)
}

/// The statistics and the store of one row a warp holds: `v` the lane's vectors `lane + 32 k`
/// of the row as loaded words (0 past the row), `shift` the row's first entry (LayerNorm); the
/// warp sums with shuffles (RMSNorm the squares; LayerNorm `x - shift`, then the squared
/// deviations `(x - shift) - mu` over the registers) and each lane stores its vectors of `y_row`.
/// Each pass widens the words again ([`rewiden_words`]): a bf16 row stays packed between the
/// passes, 4 registers a vector where widened it would take 8 (as Inductor's kernels keep it);
/// an f32 row is its words. Without `KEEP` the lane widens its weight (and bias) vectors, loaded
/// as words (`raw_g`, `raw_b`), into `g` and `beta` at the store; with it, `g` and `beta` hold
/// them already. Returns whether the row's statistic was not finite (see `overflow`): then it
/// stores nothing, and the kernel redoes its rows (`warp_tail`).
///
/// # Safety
/// Called by all 32 lanes of a warp with the same row; as `norm_warp` for the pointers, with
/// `y_row` the row's output and `at.vecs = cols / LANES <= 32 V`.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn finish_row<E: NormElem, const V: usize, const LAYER: bool, const KEEP: bool>(
    v: [[u32; 4]; V],
    shift: f32,
    (g, beta): (&mut [[f32; 8]; V], &mut [[f32; 8]; V]),
    (raw_g, raw_b): (&[[u32; 4]; V], &[[u32; 4]; V]),
    y_row: *mut E,
    at: WarpLane,
    inv_n: f32,
    eps: f32,
) -> bool {
    let lanes = E::LANES;
    let (mu, statistic) = if LAYER {
        let mut s = 0.0f32;
        unroll_8!(V, |k| {
            if at.valid(k) {
                let x = rewiden_words::<E>(v[k]);
                for c in 0..lanes {
                    s += x[c] - shift;
                }
            }
        });
        let mu = warp::reduce_sum(s) * inv_n;
        let mut q = 0.0f32;
        unroll_8!(V, |k| {
            if at.valid(k) {
                let x = rewiden_words::<E>(v[k]);
                for c in 0..lanes {
                    let d = (x[c] - shift) - mu;
                    q = math::fma(d, d, q);
                }
            }
        });
        (mu, warp::reduce_sum(q) * inv_n)
    } else {
        let mut q = 0.0f32;
        unroll_8!(V, |k| {
            if at.valid(k) {
                let x = rewiden_words::<E>(v[k]);
                for c in 0..lanes {
                    q = math::fma(x[c], x[c], q);
                }
            }
        });
        (0.0, warp::reduce_sum(q) * inv_n)
    };
    // The rare path of a row whose sums overflowed (see `overflow`): uniform over the warp.
    // SAFETY: all 32 lanes are here; the row, weight and bias as for the kernel.
    if overflowed(statistic) {
        return true;
    }
    let scale = rsqrt_fast(statistic + eps);
    unroll_8!(V, |k| {
        if at.valid(k) {
            if !KEEP {
                g[k] = widen_words::<E>(raw_g[k]);
                if LAYER {
                    beta[k] = widen_words::<E>(raw_b[k]);
                }
            }
            let x = rewiden_words::<E>(v[k]);
            let mut out = [0.0f32; 8];
            for c in 0..lanes {
                out[c] = if LAYER {
                    math::fma(((x[c] - shift) - mu) * scale, g[k][c], beta[k][c])
                } else {
                    x[c] * scale * g[k][c]
                };
            }
            // SAFETY: vector `lane + 32 k < vecs` of the row; `y` has `x`'s shape and alignment.
            unsafe { E::store_vec(y_row, at.offset::<E>(k), out) };
        }
    });
    false
}

/// RMSNorm (`LAYER = false`) or LayerNorm (`LAYER = true`) as `norm_warp` without `KEEP` on a
/// persistent grid, software-pipelined: each warp issues the loads of its next row
/// (`row + W`) before the reductions of its current one, so two rows per warp are in flight
/// and the shuffles and the store of one row overlap the memory latency of the next: the body
/// of the `*_norm_warp_pipe_*` kernels, for rows of up to 1024 columns where a row is a few
/// hundred bytes per lane and a warp would otherwise wait on each row in turn.
///
/// Global memory: as `norm_warp`: `x` read once, `y` written once, the weight (and bias) per
/// row from L1.
///
/// Launch: as `norm_warp` (any grid; the host launches as many blocks as are resident).
///
/// # Safety
/// As `norm_warp`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn norm_warp_pipe<E: NormElem, const V: usize, const LAYER: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let WarpRows { at, mut row, stride } = WarpRows::of::<E>(cols);
    // `1 / cols` once, so that each statistic is a multiply, not an IEEE division.
    let inv_n = rcp_fast(cols as f32);
    // Row `r`'s vectors and first entry, all loads issued at once; zeros past the last row (the
    // test is the same for the 32 lanes).
    let load_row = |r: usize| {
        let mut v = [[0u32; 4]; V];
        let mut shift = 0.0f32;
        if r < rows {
            let x_row = x.wrapping_add(r * cols);
            unroll_8!(V, |k| {
                if at.valid(k) {
                    // SAFETY: vector `lane + 32 k < vecs` lies inside row `r < rows`, aligned.
                    v[k] = unsafe { load_words(x_row, at.offset::<E>(k)) };
                }
            });
            if LAYER {
                // SAFETY: `cols >= 1`.
                shift = unsafe { E::load(x_row, 0) };
            }
        }
        (v, shift)
    };
    let (mut g, mut beta) = ([[0.0f32; 8]; V], [[0.0f32; 8]; V]);
    let (mut cur, mut cur_shift) = load_row(row);
    // `redo` once a row's statistic was not finite (see `overflow`).
    let mut redo = false;
    while row < rows {
        let next = row + stride;
        let (nxt, nxt_shift) = load_row(next);
        // SAFETY: `w` and `b` have `cols` elements, aligned (the caller's contract).
        let (raw_g, raw_b) = unsafe { load_params_words::<E, V, LAYER>(w, b, at) };
        // SAFETY: forwarded contract; `row < rows`, the same for the 32 lanes.
        redo |= unsafe {
            finish_row::<E, V, LAYER, false>(
                cur,
                cur_shift,
                (&mut g, &mut beta),
                (&raw_g, &raw_b),
                y.wrapping_add(row * cols),
                at,
                inv_n,
                eps,
            )
        };
        (cur, cur_shift, row) = (nxt, nxt_shift, next);
    }
    if redo {
        // SAFETY: all 32 lanes are here (`redo` is the same for them); the kernel's contract.
        unsafe { warp_tail::<E, LAYER>(x, y, w, b, rows, cols, eps) };
    }
}

/// The rare path of the warp-per-row kernels (see `overflow`): once the warp's rows are done,
/// where a row's statistic was not finite (its store skipped), all of the warp's rows are
/// normalised again from memory, each right whatever its size.
///
/// Not inlined, and the row loops only note that it happened: the rescue inside the loop raised
/// the kernels' registers (the f32 RMSNorm from 80 to 95).
///
/// # Safety
/// All 32 lanes of the warp call it, after their rows, with the kernel's contract for the
/// pointers and shapes and the kernel's launch.
#[inline(never)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn warp_tail<E: NormElem, const LAYER: bool>(
    x: *const E,
    y: *mut E,
    w: *const E,
    b: *const E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let WarpRows { mut row, stride, .. } = WarpRows::of::<E>(cols);
    while row < rows {
        // SAFETY: the warp is here, the row is the same for its lanes; the kernel's contract.
        unsafe {
            rescue::<E, _, LAYER>(
                WarpRow(E::LANES),
                (x.wrapping_add(row * cols), y.wrapping_add(row * cols)),
                (w, b),
                cols,
                eps,
            )
        };
        row += stride;
    }
}

/// RMSNorm of a warp's rows, each held in registers: `norm_warp` with `LAYER = false` (`w` stands
/// in for the bias, never read); what one thread does, the traffic and the launch are its. 32
/// elements per lane (8 f32 vectors of 4, 4 bf16 vectors of 8): rows of up to 1024 columns, a
/// multiple of the vector width. Minimum traffic, moved: 8 bytes per element in f32, 4 in bf16.
///
/// Instances (`E`, `V`, `KEEP`), one PTX entry each:
/// * `rms_norm_warp_f32` (f32, 8), `rms_norm_warp_bf16` (bf16, 4): each lane reads the weight at
///   each row;
/// * `rms_norm_warp_keep_f32`, `rms_norm_warp_keep_bf16` (`KEEP`): each lane keeps the weight in
///   registers across its rows (for a persistent grid).
///
/// # Safety
/// As `norm_warp`.
// Barriers: none, the warp sums with shuffles only.
#[kernel(
    instances(
        rms_norm_warp_f32 = (f32, 8, false),
        rms_norm_warp_bf16 = (bf16, 4, false),
        rms_norm_warp_keep_f32 = (f32, 8, true),
        rms_norm_warp_keep_bf16 = (bf16, 4, true),
    ),
    block(WARP_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn rms_norm_warp<E: NormElem, const V: usize, const KEEP: bool>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_warp::<E, V, false, KEEP>(x, w, w, y, rows, cols, eps) }
}

/// LayerNorm of a warp's rows, each held in registers: `norm_warp` with `LAYER = true`; what one
/// thread does, the traffic and the launch are its. 32 elements per lane: rows of up to 1024
/// columns, a multiple of the vector width. Minimum traffic, moved: 8 bytes per element in f32,
/// 4 in bf16.
///
/// Instances (`E`, `V`, `KEEP`), one PTX entry each:
/// * `layer_norm_warp_f32` (f32, 8), `layer_norm_warp_bf16` (bf16, 4): each lane reads the weight
///   and bias at each row;
/// * `layer_norm_warp_keep_f32`, `layer_norm_warp_keep_bf16` (`KEEP`): each lane keeps the weight
///   and bias in registers across its rows (for a persistent grid).
///
/// # Safety
/// As `norm_warp`.
// Barriers: none, the warp sums with shuffles only.
#[kernel(
    instances(
        layer_norm_warp_f32 = (f32, 8, false),
        layer_norm_warp_bf16 = (bf16, 4, false),
        layer_norm_warp_keep_f32 = (f32, 8, true),
        layer_norm_warp_keep_bf16 = (bf16, 4, true),
    ),
    block(WARP_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm_warp<E: NormElem, const V: usize, const KEEP: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_warp::<E, V, true, KEEP>(x, w, b, y, rows, cols, eps) }
}

/// RMSNorm of a warp's rows, software-pipelined on a persistent grid: `norm_warp_pipe` with
/// `LAYER = false` (`w` stands in for the bias, never read), 32 elements per lane and row, two
/// rows in flight per warp; what one thread does, the traffic and the launch are its. Rows of up
/// to 1024 columns, a multiple of the vector width. Minimum traffic, moved: 8 bytes per element
/// in f32, 4 in bf16.
///
/// Instances: `rms_norm_warp_pipe_f32` (f32, 8), `rms_norm_warp_pipe_bf16` (bf16, 4); tuning
/// candidates.
///
/// # Safety
/// As `norm_warp_pipe`.
// Barriers: none, the warp sums with shuffles only.
#[kernel(
    instances(rms_norm_warp_pipe_f32 = (f32, 8), rms_norm_warp_pipe_bf16 = (bf16, 4)),
    block(WARP_BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn rms_norm_warp_pipe<E: NormElem, const V: usize>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_warp_pipe::<E, V, false>(x, w, w, y, rows, cols, eps) }
}

/// LayerNorm of a warp's rows, software-pipelined on a persistent grid: `norm_warp_pipe` with
/// `LAYER = true`, 32 elements per lane and row, two rows in flight per warp; what one thread
/// does, the traffic and the launch are its. Minimum traffic, moved: 8 bytes per element in f32,
/// 4 in bf16.
///
/// Instances: `layer_norm_warp_pipe_f32` (f32, 8), `layer_norm_warp_pipe_bf16` (bf16, 4); tuning
/// candidates.
///
/// # Safety
/// As `norm_warp_pipe`.
// Barriers: none, the warp sums with shuffles only.
#[kernel(
    instances(layer_norm_warp_pipe_f32 = (f32, 8), layer_norm_warp_pipe_bf16 = (bf16, 4)),
    block(WARP_BLOCK),
    barriers(0)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm_warp_pipe<E: NormElem, const V: usize>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_warp_pipe::<E, V, true>(x, w, b, y, rows, cols, eps) }
}
