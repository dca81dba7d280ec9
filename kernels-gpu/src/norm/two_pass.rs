//! The L2 re-read norms: one block per row, the row not held but read once for the statistics
//! and again for the output, the second read meant to hit L2 (the formulation torch.compile's
//! kernel takes for long rows): [`rms_norm_two_pass`](fn@rms_norm_two_pass) and
//! [`layer_norm_two_pass`](fn@layer_norm_two_pass) (`*_norm_two_pass_f32`, `*_bf16`). Few
//! registers per thread, so more threads per multiprocessor than the in-register kernels at the
//! same row length.
//!
//! The looped kernels ([`rms_norm_loop`](fn@rms_norm_loop), [`layer_norm_loop`](fn@layer_norm_loop):
//! `*_norm_loop_*`, `*_norm_loop2_*`, `*_norm_loop_plain_*`, through `norm_loop`)
//! are the same formulation as torch.compile's generated reduction (`triton_red_*`): a thread
//! takes one (or two) vectors per step of each pass, so that it needs few registers and the
//! multiprocessor holds many threads; the first pass's loads ask L2 to keep the row
//! (`evict_last`), the last pass's to drop it first (`evict_first`).

use super::overflow::{overflowed, rescue, BlockRow};
use super::{
    block_sum, load_x, load_x_evict, rcp_fast, rsqrt_fast, scratch, store_y, NormElem, ROW_BLOCK_MAX,
};
use crate::gpu::vector::Evict;
use crate::gpu::{bf16, math, thread};
use crate::kernel;

/// Vectors a thread loads together per step of a pass (16 bytes each: 64 bytes in flight per
/// thread).
pub const TWO_PASS_CHUNK: usize = 4;

/// Vectors of the row per thread the host aims for (two steps of [`TWO_PASS_CHUNK`]): the block
/// is `cols / LANES / TWO_PASS_VECTORS` threads, rounded up to whole warps, 32 to 1024.
pub const TWO_PASS_VECTORS: usize = 2 * TWO_PASS_CHUNK;

/// RMSNorm (`LAYER = false`) or LayerNorm (`LAYER = true`) of one row per block, the row read
/// from memory once per pass: the body of the `*_norm_two_pass_*` kernels.
///
/// Block `r` handles row `r`; its `T` threads step over the row's vectors, thread `tid` taking
/// vectors `base + tid + k T` (`k <` [`TWO_PASS_CHUNK`], all loads of a step issued before any
/// use; `base` advancing by `T * CHUNK`). RMSNorm: pass 1 sums the squares (`block_sum`, one
/// barrier); the last pass re-reads `x` and stores `x * rsqrt(ms + eps) * w`. LayerNorm: pass 1
/// sums `x - x[r][0]` (the mean, shifted: see the [family's doc](super)), pass 2 the squared
/// deviations `((x - s) - mu)^2` (no cancellation), the last pass stores
/// `((x - s) - mu) * rstd * w + b`. The last pass's loads of `x` and stores of `y` carry the
/// streaming hint (their last use); the earlier passes' loads do not, so that the row stays in
/// L2 for the re-read.
///
/// Global memory: `x` read from memory once if the re-reads hit L2 (RMSNorm twice, LayerNorm
/// three times from the SM's side), `y` written once: the minimum traffic, 8 bytes per element
/// in f32, 4 in bf16, is what reaches memory when they do; the weight (and bias) once per block.
///
/// Launch: `rows` blocks of `T` threads, `T` a multiple of 32 and at most 1024; dynamic shared
/// memory [`ROWS_SHARED_BYTES`](super::ROWS_SHARED_BYTES).
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` and `b`
/// to `cols` (`b` is not read by RMSNorm); all four 16-byte aligned; `cols >= 1` a multiple of
/// `LANES`, `cols / LANES < 2^32`; the launch shape is as above.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn norm_two_pass<E: NormElem, const LAYER: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    const C: usize = TWO_PASS_CHUNK;
    let lanes = E::LANES;
    let tid = thread::thread_idx_x();
    let threads = thread::block_dim_x();
    let vecs = (cols / lanes) as u32;
    let step = threads * C as u32;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    let inv_n = rcp_fast(cols as f32);
    // Vector `base + tid + k T`, and whether it is in the row.
    let index = |base: u32, k: usize| base + tid + k as u32 * threads;
    // One step's vectors of `x` (zeros past the row); `STREAM` for the last pass.
    let load_step = |base: u32, last: bool| {
        let mut v = [[0.0f32; 8]; C];
        unroll_8!(C, |k| {
            let i = index(base, k);
            if i < vecs {
                // SAFETY: vector `i < vecs` lies inside the row, 16-byte aligned.
                v[k] = unsafe {
                    if last {
                        load_x::<E, true>(x_row, i as usize * lanes)
                    } else {
                        load_x::<E, false>(x_row, i as usize * lanes)
                    }
                };
            }
        });
        v
    };
    // SAFETY: `cols >= 1`.
    let shift = if LAYER { unsafe { E::load(x_row, 0) } } else { 0.0 };

    // Pass 1: the sum of squares (RMSNorm) or of `x - shift` (LayerNorm). Entries past the row
    // are zeros that add nothing to the squares; LayerNorm skips them (they would add `-shift`).
    let mut s = 0.0f32;
    let mut base = 0u32;
    while base < vecs {
        let v = load_step(base, false);
        unroll_8!(C, |k| {
            if LAYER {
                if index(base, k) < vecs {
                    for c in 0..lanes {
                        s += v[k][c] - shift;
                    }
                }
            } else {
                for c in 0..lanes {
                    s = math::fma(v[k][c], v[k][c], s);
                }
            }
        });
        base += step;
    }
    // SAFETY: every thread of the block reaches each sum, each with its own scratch area.
    let first = unsafe { block_sum(scratch(0), s) } * inv_n;
    let (mu, statistic) = if LAYER {
        // Pass 2: the squared deviations from the mean, re-read (from L2).
        let mut q = 0.0f32;
        let mut base = 0u32;
        while base < vecs {
            let v = load_step(base, false);
            unroll_8!(C, |k| {
                if index(base, k) < vecs {
                    for c in 0..lanes {
                        let d = (v[k][c] - shift) - first;
                        q = math::fma(d, d, q);
                    }
                }
            });
            base += step;
        }
        (first, unsafe { block_sum(scratch(1), q) } * inv_n)
    } else {
        (0.0, first)
    };
    // The rare path of a row whose sums overflowed (see `overflow`): uniform over the block.
    // SAFETY: every thread of the block is here; the row, weight and bias as above.
    if overflowed(statistic) {
        unsafe { rescue::<E, _, LAYER>(BlockRow(scratch(0)), (x_row, y_row), (w, b), cols, eps) };
        return;
    }
    let scale = rsqrt_fast(statistic + eps);

    // The last pass: re-read, scale, store.
    let mut base = 0u32;
    while base < vecs {
        let v = load_step(base, true);
        unroll_8!(C, |k| {
            let i = index(base, k);
            if i < vecs {
                let at = i as usize * lanes;
                // SAFETY: vector `i < vecs` of the weight, the bias and the row of `y`, aligned.
                unsafe {
                    let g = E::load_vec(w, at);
                    let mut out = [0.0f32; 8];
                    if LAYER {
                        let beta = E::load_vec(b, at);
                        for c in 0..lanes {
                            out[c] = math::fma(((v[k][c] - shift) - mu) * scale, g[c], beta[c]);
                        }
                    } else {
                        for c in 0..lanes {
                            out[c] = v[k][c] * scale * g[c];
                        }
                    }
                    store_y::<E, true>(y_row, at, out);
                }
            }
        });
        base += step;
    }
}

/// RMSNorm of one row per block, the row read twice (the second time meant to hit L2):
/// `norm_two_pass` with `LAYER = false` (`w` stands in for the bias, never read); what one thread
/// does, the traffic and the launch are its. Minimum traffic, moved when the re-read hits L2: 8
/// bytes per element in f32, 4 in bf16.
///
/// Instances: `rms_norm_two_pass_f32` (a multiple of 4 columns) and `rms_norm_two_pass_bf16`
/// (f32 statistics, a multiple of 8 columns); tuning candidates.
///
/// # Safety
/// As `norm_two_pass`.
// Block: sized to the row, up to 1024 threads. Barriers: one, the `block_sum`.
#[kernel(
    instances(rms_norm_two_pass_f32 = f32, rms_norm_two_pass_bf16 = bf16),
    block(ROW_BLOCK_MAX),
    barriers(1)
)]
#[inline(always)]
pub unsafe fn rms_norm_two_pass<E: NormElem>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_two_pass::<E, false>(x, w, w, y, rows, cols, eps) }
}

/// LayerNorm of one row per block, the row read three times (twice meant to hit L2):
/// `norm_two_pass` with `LAYER = true`; what one thread does, the traffic and the launch are its.
/// Minimum traffic, moved when the re-reads hit L2: 8 bytes per element in f32, 4 in bf16.
///
/// Instances: `layer_norm_two_pass_f32` (a multiple of 4 columns) and `layer_norm_two_pass_bf16`
/// (a multiple of 8); tuning candidates.
///
/// # Safety
/// As `norm_two_pass`.
// Block: sized to the row, up to 1024 threads. Barriers: two, one per `block_sum`.
#[kernel(
    instances(layer_norm_two_pass_f32 = f32, layer_norm_two_pass_bf16 = bf16),
    block(ROW_BLOCK_MAX),
    barriers(2)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm_two_pass<E: NormElem>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_two_pass::<E, true>(x, w, b, y, rows, cols, eps) }
}

/// RMSNorm (`LAYER = false`) or LayerNorm (`LAYER = true`) of one row per block, looped: the body
/// of the `*_norm_loop*_*` kernels, torch.compile's formulation (one vector per thread per step,
/// eviction hints).
///
/// Block `r` handles row `r`; its `T` threads step over the row's vectors, thread `tid` taking
/// vectors `base + tid + k T` (`k < V`, `V` 1 or 2, the `V` loads of a step issued before any
/// use; `base` advancing by `T V`), accumulating in one float per lane of the vector (4 f32, 8
/// bf16), summed at the end of the pass. RMSNorm: pass 1 sums the squares (`block_sum`, one
/// barrier); the last pass re-reads `x` and stores `x * rsqrt(ms + eps) * w`. LayerNorm: pass 1
/// sums `x - x[r][0]`, pass 2 the squared deviations `((x - s) - mu)^2`, the last pass stores
/// `((x - s) - mu) * rstd * w + b` (the shifted two-pass variance of the [family](super)).
///
/// With `HINTS`, the loads of `x` of every pass but the last, and those of the weight and bias,
/// carry `evict_last` (keep the row in L2 for the re-read); the last pass's loads of `x`
/// `evict_first` (as Triton's `eviction_policy`; in the sm_90 and sm_90a modules, the sm_80
/// module's PTX 7.0 has no such hint); without, every load is plain. Stores of `y` are plain (as
/// Triton's).
///
/// Global memory: `x` read from memory once if the re-reads hit L2 (RMSNorm twice, LayerNorm
/// three times from the SM's side), `y` written once: the minimum traffic, 8 bytes per element
/// in f32, 4 in bf16, is what reaches memory when they do; the weight (and bias) once per block.
///
/// Launch: `rows` blocks of `T` threads, `T` a multiple of 32 and at most 1024; dynamic shared
/// memory [`ROWS_SHARED_BYTES`](super::ROWS_SHARED_BYTES).
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` and `b`
/// to `cols` (`b` is not read by RMSNorm); all four 16-byte aligned; `cols >= 1` a multiple of
/// `LANES`, `cols / LANES < 2^31`; the launch shape is as above.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn norm_loop<E: NormElem, const LAYER: bool, const V: usize, const HINTS: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let row = thread::block_idx_x() as usize;
    if row >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let lanes = E::LANES;
    let tid = thread::thread_idx_x();
    let threads = thread::block_dim_x();
    let vecs = (cols / lanes) as u32;
    let step = threads * V as u32;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    let inv_n = rcp_fast(cols as f32);
    let (keep, drop) = if HINTS {
        (Evict::last(), Evict::first())
    } else {
        (Evict::Normal, Evict::Normal)
    };
    // One step's vectors of `x` from `base` (zeros past the row), with the hint `evict`.
    let load_step = |base: u32, evict: Evict| {
        let mut v = [[0.0f32; 8]; V];
        unroll_8!(V, |k| {
            let i = base + k as u32 * threads;
            if i < vecs {
                // SAFETY: vector `i < vecs` lies inside the row, 16-byte aligned, global.
                v[k] = unsafe { load_x_evict::<E>(x_row, i as usize * lanes, evict) };
            }
        });
        v
    };
    // The sum of a pass's per-lane accumulators.
    let total = |acc: [f32; 8]| {
        let mut s = 0.0f32;
        for c in 0..lanes {
            s += acc[c];
        }
        s
    };
    // SAFETY: `cols >= 1`.
    let shift = if LAYER { unsafe { E::load(x_row, 0) } } else { 0.0 };

    // Pass 1: the sum of squares (RMSNorm) or of `x - shift` (LayerNorm). Entries past the row
    // are zeros that add nothing to the squares; LayerNorm skips them (they would add `-shift`).
    let mut acc = [0.0f32; 8];
    let mut base = tid;
    while base < vecs {
        let v = load_step(base, keep);
        unroll_8!(V, |k| {
            if LAYER {
                if base + k as u32 * threads < vecs {
                    for c in 0..lanes {
                        acc[c] += v[k][c] - shift;
                    }
                }
            } else {
                for c in 0..lanes {
                    acc[c] = math::fma(v[k][c], v[k][c], acc[c]);
                }
            }
        });
        base += step;
    }
    // SAFETY: every thread of the block reaches each sum, each with its own scratch area.
    let first = unsafe { block_sum(scratch(0), total(acc)) } * inv_n;
    let (mu, statistic) = if LAYER {
        // Pass 2: the squared deviations from the mean, re-read (from L2).
        let mut acc = [0.0f32; 8];
        let mut base = tid;
        while base < vecs {
            let v = load_step(base, keep);
            unroll_8!(V, |k| {
                if base + k as u32 * threads < vecs {
                    for c in 0..lanes {
                        let d = (v[k][c] - shift) - first;
                        acc[c] = math::fma(d, d, acc[c]);
                    }
                }
            });
            base += step;
        }
        // SAFETY: as the first sum.
        (first, unsafe { block_sum(scratch(1), total(acc)) } * inv_n)
    } else {
        (0.0, first)
    };
    // The rare path of a row whose sums overflowed (see `overflow`): uniform over the block.
    // SAFETY: every thread of the block is here; the row, weight and bias as above.
    if overflowed(statistic) {
        unsafe { rescue::<E, _, LAYER>(BlockRow(scratch(0)), (x_row, y_row), (w, b), cols, eps) };
        return;
    }
    let scale = rsqrt_fast(statistic + eps);

    // The last pass: re-read, scale, store.
    let mut base = tid;
    while base < vecs {
        let v = load_step(base, drop);
        unroll_8!(V, |k| {
            let i = base + k as u32 * threads;
            if i < vecs {
                let at = i as usize * lanes;
                // SAFETY: vector `i < vecs` of the weight, the bias and the row of `y`, aligned,
                // global.
                unsafe {
                    let g = load_x_evict::<E>(w, at, keep);
                    let mut out = [0.0f32; 8];
                    if LAYER {
                        let beta = load_x_evict::<E>(b, at, keep);
                        for c in 0..lanes {
                            out[c] = math::fma(((v[k][c] - shift) - mu) * scale, g[c], beta[c]);
                        }
                    } else {
                        for c in 0..lanes {
                            out[c] = v[k][c] * scale * g[c];
                        }
                    }
                    store_y::<E, false>(y_row, at, out);
                }
            }
        });
        base += step;
    }
}

/// RMSNorm of one row per block, looped (torch.compile's formulation): `norm_loop` with `LAYER =
/// false` (`w` stands in for the bias, never read), `V` vectors per thread per step, eviction
/// hints with `HINTS`; what one thread does, the traffic and the launch are its. The row read
/// twice (the second time meant to hit L2); minimum traffic: 8 bytes per element in f32, 4 in
/// bf16.
///
/// Instances (`E`, `V`, `HINTS`), one PTX entry each:
/// * `rms_norm_loop_f32`, `rms_norm_loop_bf16` (1 vector, hints): tuning candidates;
/// * `rms_norm_loop2_f32`, `rms_norm_loop2_bf16` (2 vectors, 32 bytes in flight, hints): the
///   default for rows of 1024 to 4096 columns (the host's `DEFAULT_RULES`);
/// * `rms_norm_loop_plain_f32`, `rms_norm_loop_plain_bf16` (1 vector, plain loads: what the
///   hints buy): tuning candidates.
///
/// # Safety
/// As `norm_loop`.
// Block: sized to the row, up to 1024 threads. Barriers: one, the `block_sum`.
#[kernel(
    instances(
        rms_norm_loop_f32 = (f32, 1, true),
        rms_norm_loop_bf16 = (bf16, 1, true),
        rms_norm_loop2_f32 = (f32, 2, true),
        rms_norm_loop2_bf16 = (bf16, 2, true),
        rms_norm_loop_plain_f32 = (f32, 1, false),
        rms_norm_loop_plain_bf16 = (bf16, 1, false),
    ),
    block(ROW_BLOCK_MAX),
    barriers(1)
)]
#[inline(always)]
pub unsafe fn rms_norm_loop<E: NormElem, const V: usize, const HINTS: bool>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_loop::<E, false, V, HINTS>(x, w, w, y, rows, cols, eps) }
}

/// LayerNorm of one row per block, looped: `norm_loop` with `LAYER = true`, `V` vectors per
/// thread per step, eviction hints with `HINTS`; what one thread does, the traffic and the launch
/// are its. The row read three times (twice meant to hit L2); minimum traffic: 8 bytes per
/// element in f32, 4 in bf16.
///
/// Instances (`E`, `V`, `HINTS`), as [`rms_norm_loop`](fn@rms_norm_loop)'s:
/// * `layer_norm_loop_f32`, `layer_norm_loop_bf16` (1 vector, hints): tuning candidates;
/// * `layer_norm_loop2_f32` (2 vectors, hints): the default for rows of 1024 columns;
///   `layer_norm_loop2_bf16`: a tuning candidate;
/// * `layer_norm_loop_plain_f32`, `layer_norm_loop_plain_bf16` (1 vector, plain loads): tuning
///   candidates.
///
/// # Safety
/// As `norm_loop`.
// Block: sized to the row, up to 1024 threads. Barriers: two, one per `block_sum`.
#[kernel(
    instances(
        layer_norm_loop_f32 = (f32, 1, true),
        layer_norm_loop_bf16 = (bf16, 1, true),
        layer_norm_loop2_f32 = (f32, 2, true),
        layer_norm_loop2_bf16 = (bf16, 2, true),
        layer_norm_loop_plain_f32 = (f32, 1, false),
        layer_norm_loop_plain_bf16 = (bf16, 1, false),
    ),
    block(ROW_BLOCK_MAX),
    barriers(2)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm_loop<E: NormElem, const V: usize, const HINTS: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_loop::<E, true, V, HINTS>(x, w, b, y, rows, cols, eps) }
}
