//! The fast norms: one block per row, the row held in registers as 16-byte vectors, so that
//! each entry is read once and written once ([`rms_norm_rows`](fn@rms_norm_rows),
//! [`layer_norm_rows`](fn@layer_norm_rows), each generic over the element type, the vectors per
//! thread and the cache hints, one PTX entry per instance).

use super::overflow::{overflowed, rescue, BlockRow};
use super::{
    block_sum, block_sum2, load_words, load_x_evict, rcp_fast, rewiden_words, rsqrt_fast, scratch, store_y,
    widen_words, NormElem, ROW_BLOCK_MAX,
};
use crate::gpu::vector::{self, Evict};
use crate::gpu::{bf16, math, thread, warp};
use crate::kernel;

/// Dynamic shared memory of the in-register kernels: two areas of one float per warp of the
/// largest block, one per `block_sum` (f32 LayerNorm sums twice, and a separate area spares the
/// barrier that reusing one would need; bf16 LayerNorm's one `block_sum2` takes both).
pub const ROWS_SHARED_BYTES: u32 = 2 * ROW_BLOCK_MAX / warp::SIZE * core::mem::size_of::<f32>() as u32;

/// `norm_rows`'s cache hints: none.
const PLAIN: u8 = 0;
/// `norm_rows`'s cache hints: the streaming hint (evict first) on the loads of `x` and the stores
/// of `y`.
const STREAM: u8 = 1;
/// `norm_rows`'s cache hints: `evict_last` (L1 and L2) on the loads of `x` and of the weight and
/// bias, as torch.compile's generated kernels load them.
const LAST: u8 = 2;

/// A weight or bias vector for `norm_rows` with hints `HINT`: `evict_last` with `LAST`.
///
/// # Safety
/// As [`NormElem::load_vec`], and `p` points to global memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn load_w<E: NormElem, const HINT: u8>(p: *const E, i: usize) -> [f32; 8] {
    // SAFETY: forwarded contract.
    unsafe {
        if HINT == LAST {
            load_x_evict::<E>(p, i, Evict::last())
        } else {
            E::load_vec(p, i)
        }
    }
}

/// A row vector for `norm_rows` with hints `HINT` (`evict_last` with `LAST`, evict-first with
/// `STREAM`) as the sixteen bytes' words, not widened: what `norm_rows` holds of a bf16 row (4
/// registers a vector where widened it takes 8), widened again for each pass
/// ([`rewiden_words`]); an f32 row's words are its floats ([`widen_words`]).
///
/// # Safety
/// As [`NormElem::load_vec`], and `p` points to global memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn load_x_words<E: NormElem, const HINT: u8>(p: *const E, i: usize) -> [u32; 4] {
    // Eight bf16 (or four f32) are the bits of four f32: one 16-byte load of them.
    // SAFETY: forwarded contract.
    unsafe {
        if HINT == LAST {
            // The policy before the address, as `load_x_evict`'s callers build them: the f32
            // kernels' PTX stays the one measured.
            let evict = Evict::last();
            vector::load4_evict_words(p.wrapping_add(i).cast::<f32>(), 0, evict)
        } else if HINT == STREAM {
            vector::load4_streaming(p.wrapping_add(i).cast::<f32>(), 0)
                .0
                .map(f32::to_bits)
        } else {
            load_words(p, i)
        }
    }
}

/// An output vector for `norm_rows` with hints `HINT`: the streaming store with `STREAM`.
///
/// # Safety
/// As [`NormElem::store_vec_cs`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn store_hinted<E: NormElem, const HINT: u8>(p: *mut E, i: usize, v: [f32; 8]) {
    // SAFETY: forwarded contract.
    unsafe {
        if HINT == STREAM {
            store_y::<E, true>(p, i, v)
        } else {
            store_y::<E, false>(p, i, v)
        }
    }
}

/// RMSNorm (`LAYER = false`) or LayerNorm (`LAYER = true`) of one row per block, the row in
/// registers: the body of the `*_rows*_*` kernels (16, 32 or 64 elements per thread). `HINT`:
/// with `STREAM` the loads of `x` and the stores of `y` carry the streaming cache hint (evict
/// first: each is touched once), the `*_rows*_cs_*` candidates; with `LAST` the loads of `x`, the
/// weight and the bias carry `evict_last` (L1 and L2), the `*_rows16_el_*` kernels.
///
/// Block `r` handles row `r`. Thread `tid` of the block's `T` threads loads the row's vectors
/// `tid + k * T` (`k < V`, each [`NormElem::LANES`] elements, 16 bytes), all `V` loads issued
/// before any use, and holds them: f32 as floats, bf16 as the loaded words (widened again for
/// each pass). RMSNorm: the block sums the squares (`block_sum`, one barrier) and each thread
/// stores `x * (1 / sqrt(ms + eps)) * w` for its vectors. LayerNorm: the block sums `x - x[r][0]`
/// (the mean, shifted: see the [family's doc](super)), then `(x - mu)^2` over the registers (the
/// variance, two passes with no second read of memory), then each thread stores
/// `(x - mu) * rstd * w + b`; a bf16 row sums `d = x - x[r][0]` and `d^2` in one pass and one
/// block reduction ([`block_sum2`]; its error bound is in the family's doc) and stores
/// `fma(d, rstd, -mu * rstd) * w + b`, rounded two entries to a `cvt.rn.bf16x2`. Weight and bias
/// vectors are read at the store, the same ones by every block (from L2 after the first blocks).
///
/// Global memory: `x` read once, `y` written once: 8 bytes per element in f32, 4 in bf16, plus
/// the weight (and bias) once per block from L2.
///
/// Launch: `rows` blocks of `T` threads, `T` a multiple of 32 and at most 1024, with
/// `cols / LANES <= V * T`; [`ROWS_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` and `b`
/// to `cols` (`b` is not read by RMSNorm); all four 16-byte aligned; `cols >= 1` a multiple of
/// `LANES`; the launch shape is as above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
// Index loops over the register arrays: each index is a constant once unrolled, which is what
// keeps the arrays in registers.
#[allow(clippy::needless_range_loop)]
unsafe fn norm_rows<E: NormElem, const V: usize, const LAYER: bool, const HINT: u8>(
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
    // 32-bit vector indices: a held row has at most 16 * 1024 vectors.
    let vecs = (cols / lanes) as u32;
    let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
    // Whether vector `tid + k * T` is in the row, with the right side uniform over the block.
    let valid = |k: usize| tid < vecs.saturating_sub(k as u32 * threads);
    let offset = |k: usize| (tid + k as u32 * threads) as usize * lanes;
    // `1 / cols` once, so that each statistic is a multiply, not an IEEE division.
    let inv_n = rcp_fast(cols as f32);

    // The row: a bf16 row stays packed in `words` (as loaded words, 4 registers a vector where
    // widened it takes 8), widened again for each pass ([`rewiden_words`]); an f32 row is held in
    // `v` as floats (and `words` is unused, as `v` is for bf16: no registers).
    let packed = E::LANES == 8;
    let mut v = [[0.0f32; 8]; V];
    let mut words = [[0u32; 4]; V];
    unroll_16!(V, |k| {
        if valid(k) {
            // SAFETY: vector `tid + k * T < vecs` lies inside the row, 16-byte aligned.
            unsafe {
                if packed {
                    words[k] = load_x_words::<E, HINT>(x_row, offset(k));
                } else {
                    v[k] = widen_words::<E>(load_x_words::<E, HINT>(x_row, offset(k)));
                }
            }
        }
    });
    // Vector `k` of the row, widened (bf16) or as held (f32).
    let held = |v: &[[f32; 8]; V], k: usize| {
        if packed {
            rewiden_words::<E>(words[k])
        } else {
            v[k]
        }
    };

    if LAYER {
        // SAFETY: `cols >= 1`.
        let shift = unsafe { E::load(x_row, 0) };
        let (mu, var) = if packed {
            // A packed bf16 row: one pass of shifted moments, `sum d` and `sum d^2` of `d = x -
            // shift`, in one block reduction (one barrier where the two passes take two); the
            // variance `E[d^2] - E[d]^2` (see the family's doc for its error, below a bf16
            // output's rounding).
            let (mut s, mut q) = (0.0f32, 0.0f32);
            unroll_16!(V, |k| {
                if valid(k) {
                    let x = held(&v, k);
                    for c in 0..lanes {
                        let d = x[c] - shift;
                        s += d;
                        q = math::fma(d, d, q);
                    }
                }
            });
            // SAFETY: every thread of the block reaches the sum.
            let (s, q) = unsafe { block_sum2(s, q) };
            let mu = s * inv_n;
            // Rounding can take the difference below zero; NaN stays NaN.
            let var = math::fma(-mu, mu, q * inv_n);
            (mu, if var < 0.0 { 0.0 } else { var })
        } else {
            // An f32 row is shifted and centred in place, so that one copy of it stays live: `x -
            // shift` kept beside `x` would double the registers (79 at 32 floats per thread, one
            // block of 512 threads per multiprocessor).
            let mut s = 0.0f32;
            unroll_16!(V, |k| {
                if valid(k) {
                    for c in 0..lanes {
                        v[k][c] -= shift;
                        s += v[k][c];
                    }
                }
            });
            // The mean of `x - shift`: deviations are `(x - shift) - mu`, where `x - shift` is
            // exact for entries near the shift, so a large mean costs no precision (see the
            // family's doc).
            // SAFETY: every thread of the block reaches both sums, each with its own scratch area.
            let mu = unsafe { block_sum(scratch(0), s) } * inv_n;
            let mut q = 0.0f32;
            unroll_16!(V, |k| {
                if valid(k) {
                    for c in 0..lanes {
                        v[k][c] -= mu;
                        q = math::fma(v[k][c], v[k][c], q);
                    }
                }
            });
            (mu, unsafe { block_sum(scratch(1), q) } * inv_n)
        };
        // The rare path of a row whose sums overflowed (see `overflow`): uniform over the block.
        // SAFETY: every thread of the block is here; the row, weight and bias as above.
        if overflowed(var) {
            unsafe { rescue::<E, _, true>(BlockRow(scratch(0)), (x_row, y_row), (w, b), cols, eps) };
            return;
        }
        let rstd = rsqrt_fast(var + eps);
        // A packed row's `((x - shift) - mu) * rstd` as one FMA on the exact `x - shift`.
        let neg_mu_rstd = -mu * rstd;
        unroll_16!(V, |k| {
            if valid(k) {
                // SAFETY: as for the loads; the weight and bias have `cols` elements, aligned.
                let (g, beta) = unsafe { (load_w::<E, HINT>(w, offset(k)), load_w::<E, HINT>(b, offset(k))) };
                let x = held(&v, k);
                let mut out = [0.0f32; 8];
                for c in 0..lanes {
                    let z = if packed {
                        math::fma(x[c] - shift, rstd, neg_mu_rstd)
                    } else {
                        v[k][c] * rstd
                    };
                    out[c] = math::fma(z, g[c], beta[c]);
                }
                // SAFETY: as for the loads; `y` has `x`'s shape and alignment.
                unsafe { store_hinted::<E, HINT>(y_row, offset(k), out) };
            }
        });
    } else {
        let mut q = 0.0f32;
        unroll_16!(V, |k| {
            if valid(k) {
                let x = held(&v, k);
                for c in 0..lanes {
                    q = math::fma(x[c], x[c], q);
                }
            }
        });
        // SAFETY: every thread of the block reaches the sum.
        let ms = unsafe { block_sum(scratch(0), q) } * inv_n;
        // The rare path of a row whose squares overflowed (see `overflow`): uniform over the
        // block.
        // SAFETY: every thread of the block is here; the row and the weight as above.
        if overflowed(ms) {
            unsafe { rescue::<E, _, false>(BlockRow(scratch(0)), (x_row, y_row), (w, w), cols, eps) };
            return;
        }
        let inv = rsqrt_fast(ms + eps);
        unroll_16!(V, |k| {
            if valid(k) {
                // SAFETY: as for the loads; the weight has `cols` elements, aligned.
                let g = unsafe { load_w::<E, HINT>(w, offset(k)) };
                let x = held(&v, k);
                let mut out = [0.0f32; 8];
                for c in 0..lanes {
                    out[c] = x[c] * inv * g[c];
                }
                // SAFETY: as for the loads; `y` has `x`'s shape and alignment.
                unsafe { store_hinted::<E, HINT>(y_row, offset(k), out) };
            }
        });
    }
}

/// RMSNorm of one row per block, the row in registers: `norm_rows` with `LAYER = false` (no
/// bias: `w` stands in for it, never read). What one thread does, the traffic and the launch are
/// `norm_rows`'s: `V` vectors of [`NormElem::LANES`] elements per thread (16, 32 or 64 elements),
/// loaded once and written once (minimum traffic, moved: 8 bytes per element in f32, 4 in bf16).
///
/// Instances (`E`, `V`, hints), one PTX entry each:
/// * `rms_norm_rows_f32` (f32, 8), `rms_norm_rows_bf16` (bf16, 4): 32 elements per thread, rows
///   of up to 32768 columns (1024 threads), a multiple of the vector width;
/// * `rms_norm_rows16_f32` (f32, 4), `rms_norm_rows16_bf16` (bf16, 2): 16 elements per thread,
///   rows of up to 16384 columns; fewer registers, so more blocks share a multiprocessor;
/// * `rms_norm_rows64_f32` (f32, 16: 256 bytes in flight per thread), `rms_norm_rows64_bf16`
///   (bf16, 8): 64 elements per thread (the host takes them to 32768 columns; a 16384-column f32
///   row is a block of 256 threads);
/// * `rms_norm_rows16_cs_*`, `rms_norm_rows_cs_*` (`STREAM`): the 16- and 32-element kernels with
///   the streaming cache hint on the loads of `x` and the stores of `y`; tuning candidates;
/// * `rms_norm_rows16_el_f32` (`LAST`): `evict_last` (L1 and L2) on the loads of `x` and the
///   weight, as torch.compile's kernels load them: the default for rows of 4096 to 16384
///   columns (the host's `DEFAULT_RULES`); `rms_norm_rows16_el_bf16`: a tuning
///   candidate.
///
/// # Safety
/// As `norm_rows`.
// Block: sized to the row, up to 1024 threads; 64 held elements per thread (about 90 to 110
// registers) take at most 512 (rows of up to 32768 columns). Barriers: one, the `block_sum`.
#[kernel(
    instances(
        rms_norm_rows_f32 = (f32, 8, PLAIN),
        rms_norm_rows_bf16 = (bf16, 4, PLAIN),
        rms_norm_rows16_f32 = (f32, 4, PLAIN),
        rms_norm_rows16_bf16 = (bf16, 2, PLAIN),
        rms_norm_rows64_f32 = (f32, 16, PLAIN),
        rms_norm_rows64_bf16 = (bf16, 8, PLAIN),
        rms_norm_rows16_cs_f32 = (f32, 4, STREAM),
        rms_norm_rows16_cs_bf16 = (bf16, 2, STREAM),
        rms_norm_rows_cs_f32 = (f32, 8, STREAM),
        rms_norm_rows_cs_bf16 = (bf16, 4, STREAM),
        rms_norm_rows16_el_f32 = (f32, 4, LAST),
        rms_norm_rows16_el_bf16 = (bf16, 2, LAST),
    ),
    block(if V * E::LANES > 32 { 512 } else { ROW_BLOCK_MAX }),
    barriers(1)
)]
#[inline(always)]
pub unsafe fn rms_norm_rows<E: NormElem, const V: usize, const HINT: u8>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_rows::<E, V, false, HINT>(x, w, w, y, rows, cols, eps) }
}

/// LayerNorm of one row per block, the row in registers: `norm_rows` with `LAYER = true`. What
/// one thread does, the traffic and the launch are `norm_rows`'s (minimum traffic, moved: 8 bytes
/// per element in f32, 4 in bf16; the weight and bias once per block from L2).
///
/// Instances (`E`, `V`, hints), one PTX entry each, as [`rms_norm_rows`](fn@rms_norm_rows)'s:
/// * `layer_norm_rows_f32` (f32, 8), `layer_norm_rows_bf16` (bf16, 4): 32 elements per thread;
/// * `layer_norm_rows16_f32` (f32, 4), `layer_norm_rows16_bf16` (bf16, 2): 16 elements;
/// * `layer_norm_rows64_f32` (f32, 16), `layer_norm_rows64_bf16` (bf16, 8): 64 elements;
/// * `layer_norm_rows16_cs_*`, `layer_norm_rows_cs_*` (`STREAM`): tuning candidates;
/// * `layer_norm_rows16_el_f32` (`LAST`, on the loads of `x`, the weight and the bias): the
///   default for rows of 4096 columns (the host's `DEFAULT_RULES`);
///   `layer_norm_rows16_el_bf16`: a tuning candidate.
///
/// # Safety
/// As `norm_rows`.
// Block: as `rms_norm_rows`. (LayerNorm centres the held f32 row in place, so it keeps one copy
// of it: 62 registers on sm_90, down from 79 when `x - shift` was kept beside `x`.) Barriers: one
// per `block_sum`, two in f32; a bf16 row takes its two sums in one `block_sum2`, one barrier.
#[kernel(
    instances(
        layer_norm_rows_f32 = (f32, 8, PLAIN),
        layer_norm_rows_bf16 = (bf16, 4, PLAIN),
        layer_norm_rows16_f32 = (f32, 4, PLAIN),
        layer_norm_rows16_bf16 = (bf16, 2, PLAIN),
        layer_norm_rows64_f32 = (f32, 16, PLAIN),
        layer_norm_rows64_bf16 = (bf16, 8, PLAIN),
        layer_norm_rows16_cs_f32 = (f32, 4, STREAM),
        layer_norm_rows16_cs_bf16 = (bf16, 2, STREAM),
        layer_norm_rows_cs_f32 = (f32, 8, STREAM),
        layer_norm_rows_cs_bf16 = (bf16, 4, STREAM),
        layer_norm_rows16_el_f32 = (f32, 4, LAST),
        layer_norm_rows16_el_bf16 = (bf16, 2, LAST),
    ),
    block(if V * E::LANES > 32 { 512 } else { ROW_BLOCK_MAX }),
    barriers(if E::LANES == 8 { 1 } else { 2 })
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm_rows<E: NormElem, const V: usize, const HINT: u8>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_rows::<E, V, true, HINT>(x, w, b, y, rows, cols, eps) }
}
