//! Row normalisations over the rows of a `rows x cols` matrix, with a per-column weight
//! (gamma) and, for LayerNorm, a per-column bias (beta):
//!
//! * RMSNorm: `y[r][j] = x[r][j] / sqrt(mean_j(x[r][j]^2) + eps) * w[j]`;
//! * LayerNorm: `y[r][j] = (x[r][j] - mu_r) / sqrt(var_r + eps) * w[j] + b[j]`, with the row's
//!   mean `mu_r` and its biased variance `var_r = mean_j((x[r][j] - mu_r)^2)` (as PyTorch).
//!
//! Elements are f32 or bf16 ([`NormElem`]); the statistics are always f32, and a bf16 output is
//! rounded once, at the store.
//!
//! # The variance: two passes over the row (shifted), not one
//! The one-pass formula `E[x^2] - E[x]^2` cancels: a row of mean 1e4 and spread 1 has
//! `E[x^2] ~ 1e8`, whose f32 rounding (about 8) is larger than the variance itself. Welford's
//! update avoids that but costs a division per element and per merge. The kernels here hold the
//! row (in registers, or re-read it from memory in the tutorial), so they take two passes:
//! the mean first, then `sum (x - mu)^2`, which has no cancellation. Both passes work on
//! `x - s` with the shift `s = x[r][0]` (the row's first entry, read by every thread): the
//! first sums `x - s` to the shifted mean `m`, the second and the store use `(x - s) - m`.
//! `x - s` is exact for entries within a factor 2 of `s`, and `m` is of the size of the spread,
//! not of the mean, so a row of mean 1e4 and spread 1 loses nothing to its mean (in f32 the
//! mean 1e4 itself could only be held to 5e-4, which `x - mu` would carry). A constant row gets
//! `x - s = 0` exactly, so `y = b`.
//!
//! The one exception: the in-register kernels on bf16 rows ([`in_registers`], `*_rows*_bf16`)
//! take the shifted moments in one pass, `sum d` and `sum d^2` of `d = x - s` in one block
//! reduction (one barrier instead of two), and the variance as `E[d^2] - E[d]^2` (clamped at 0;
//! NaN stays NaN). Shifted by an entry of the row, that cancels only as far as `(mu - s)^2`
//! exceeds the variance, at most `cols - 1` times over (the shift an outlier): a relative error
//! of at most about `cols * 2^-24` in the variance and half that in `1 / sqrt(var + eps)`, under
//! the bf16 output's half-ulp of `2^-9` for rows of up to `2^15` columns. The f32 kernels keep
//! the two passes.
//!
//! # Rules at the edges
//! * A constant row (zero variance) gives `y = b` (LayerNorm) and a zero row `y = 0` (RMSNorm),
//!   finite thanks to `eps > 0` (with `eps = 0` they are NaN: `0 * inf`).
//! * A NaN in a row makes that row's outputs NaN (LayerNorm: all of them; RMSNorm: all of them,
//!   as the mean square is NaN); an infinite entry makes a LayerNorm row all NaN, and an RMSNorm
//!   row 0 at its finite entries, NaN at its infinite ones (`x / inf`, `inf / inf`). Other rows
//!   are never affected.
//! * A row of finite entries whose f32 sums overflow (RMSNorm's squares from entries of about
//!   `1.8e19 / sqrt(cols)` on, LayerNorm's squared deviations from such a spread) is computed
//!   right: every kernel tests its statistic once per row and, where it is not finite, redoes the
//!   row from memory on its entries scaled by a power of two (`overflow`, a rare path that costs
//!   the common path one comparison).
//!
//! # The ladder, one file per rung
//! Each rung has one body for both norms (`LAYER` a const parameter, RMSNorm passing its weight
//! again for the bias it never reads) and two generic kernels with the norms' parameter lists,
//! `rms_norm_<rung>` and `layer_norm_<rung>`, generic over the element type and the rung's knobs;
//! their named instances are the entry points (`rms_norm_rows16_f32`, ...).
//!
//! * [`block_reduce`]: the tutorial, one block of [`BLOCK`] threads per row, tree reductions in
//!   shared memory ([`block::reduce_sum`](crate::gpu::block::reduce_sum)); the row read from
//!   memory once per pass (RMSNorm twice, LayerNorm three times) and written once. Any shape.
//! * [`in_registers`]: one block per row, the row held in registers as 16-byte vectors, loaded
//!   once and written once: the minimum traffic (read `x`, write `y`, and the weight and bias
//!   once per block, from L2). For rows whose length is a multiple of the vector width
//!   ([`NormElem::LANES`]) that fit in [`ROW_BLOCK_MAX`] threads. Three widths: 16, 32 or 64
//!   elements per thread (`*_rows16_*`, `*_rows_*`, `*_rows64_*`): fewer threads per row with
//!   more bytes in flight each, and so more blocks resident per multiprocessor.
//! * [`warp_rows`]: one warp per row, the row in registers (up to 32 elements per lane: 1024
//!   columns), no shared memory and no barrier; several rows per block, and optionally a
//!   persistent grid whose warps keep the weight (and bias) in registers across their rows, or
//!   (`*_warp_pipe_*`) a persistent grid whose warps load their next row before reducing the
//!   current one.
//!
//! * [`ring`] (the `sm_90a` module): a persistent grid whose blocks stream their rows through a
//!   ring of shared-memory slots filled by the copy engine (`cp.async.bulk`), the next rows always
//!   on their way while the block works on one, the weight (and bias) kept in registers.
//! * [`two_pass`]: one block per row, the row not held but re-read for each pass (the second
//!   and third reads meant to hit L2), vectorised; any row length of a multiple of the vector
//!   width. Its looped kernels (`*_norm_loop_*`, `*_norm_loop2_*`, `*_norm_loop_plain_*`) take
//!   one or two vectors per thread per step (few registers, many threads resident) with
//!   torch.compile's eviction hints (`Evict`: keep the row in L2 for the re-read).
//!
//! * [`residual`]: the residual add fused into RMSNorm (`h = x + res`, `y = rmsnorm(h) * w`),
//!   a tutorial kernel and an in-register one, reusing this family's loads, sums and rescue.
//!
//! The `*_cs_*` kernels are in-register kernels whose loads of `x` and stores of `y` carry the
//! streaming cache hint (evict first). The pipelined and streaming kernels are tuning
//! candidates, timed beside the defaults.

use crate::gpu::convert::{bf16_to_f32, f32_to_bf16, pack_bf16x2};
use crate::gpu::vector::{self, Evict};
use crate::gpu::{bf16, mem, shared, thread, warp};

/// [`unroll_8!`] up to 16: `body` once for each `k < n` (`n <= 16` a constant), each `k` a
/// constant, so that register arrays indexed by `k` stay in registers.
macro_rules! unroll_16 {
    ($n:expr, |$k:ident| $body:block) => {{
        unroll_8!($n, |$k| $body);
        if $n > 8 {
            unroll_8!($n - 8, |j| {
                let $k: usize = j + 8;
                $body
            });
        }
    }};
}

pub mod block_reduce;
pub mod in_registers;
mod overflow;
pub mod residual;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod ring;
pub mod two_pass;
pub mod warp_rows;

// Every rung's items (its kernels' launcher modules among them) at the family's level.
pub use block_reduce::*;
pub use in_registers::*;
pub use residual::*;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub use ring::*;
pub use two_pass::*;
pub use warp_rows::*;

/// Most threads a block-per-row kernel takes (the CUDA limit).
pub const ROW_BLOCK_MAX: u32 = 1024;

/// An element type of the norms: how it is loaded into f32 and stored from f32, one at a time
/// or [`NormElem::LANES`] at a time as one 16-byte access.
pub trait NormElem: Copy + 'static {
    /// Elements per 16-byte vector: 4 f32, 8 bf16.
    const LANES: usize;
    /// Vectors of [`NormElem::LANES`] elements a thread of [`in_registers`] holds: 32 floats
    /// either way (8 f32 vectors, 4 bf16 vectors), rows of up to `32 * 1024` elements.
    const VECTORS: usize;

    /// `p[i]` widened to f32.
    ///
    /// # Safety
    /// `p.add(i)` points to an initialised element of global memory.
    unsafe fn load(p: *const Self, i: usize) -> f32;

    /// `v` rounded to the element type and stored to `p[i]`.
    ///
    /// # Safety
    /// `p.add(i)` points to a writable element of global memory.
    unsafe fn store(p: *mut Self, i: usize, v: f32);

    /// `p[i..i + LANES]` widened to f32, as one 16-byte load (the first `LANES` floats of the
    /// result; the others are 0).
    ///
    /// # Safety
    /// `p.add(i)` is 16-byte aligned and points to `LANES` initialised elements.
    unsafe fn load_vec(p: *const Self, i: usize) -> [f32; 8];

    /// The first `LANES` floats of `v` rounded and stored to `p[i..i + LANES]` as one 16-byte
    /// store.
    ///
    /// # Safety
    /// `p.add(i)` is 16-byte aligned and points to `LANES` writable elements.
    unsafe fn store_vec(p: *mut Self, i: usize, v: [f32; 8]);

    /// [`NormElem::load_vec`] with the streaming cache hint (`ld.global.cs`, evict first: the
    /// row is read once); the simulator treats it as the plain load.
    ///
    /// # Safety
    /// As [`NormElem::load_vec`], and `p` points to global memory.
    unsafe fn load_vec_cs(p: *const Self, i: usize) -> [f32; 8];

    /// [`NormElem::store_vec`] with the streaming cache hint (`st.global.cs`, evict first: no
    /// kernel of the launch reads the output); the simulator treats it as the plain store.
    ///
    /// # Safety
    /// As [`NormElem::store_vec`], and `p` points to global memory.
    unsafe fn store_vec_cs(p: *mut Self, i: usize, v: [f32; 8]);
}

impl NormElem for f32 {
    const LANES: usize = 4;
    const VECTORS: usize = 8;

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load(p: *const f32, i: usize) -> f32 {
        // SAFETY: forwarded contract.
        unsafe { mem::load(p, i) }
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store(p: *mut f32, i: usize, v: f32) {
        // SAFETY: forwarded contract.
        unsafe { mem::store(p, i, v) }
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load_vec(p: *const f32, i: usize) -> [f32; 8] {
        // SAFETY: forwarded contract.
        let v = unsafe { vector::load4(p, i) }.0;
        [v[0], v[1], v[2], v[3], 0.0, 0.0, 0.0, 0.0]
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store_vec(p: *mut f32, i: usize, v: [f32; 8]) {
        // SAFETY: forwarded contract.
        unsafe { vector::store4(p, i, vector::F4([v[0], v[1], v[2], v[3]])) }
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load_vec_cs(p: *const f32, i: usize) -> [f32; 8] {
        // SAFETY: forwarded contract.
        let v = unsafe { vector::load4_streaming(p, i) }.0;
        [v[0], v[1], v[2], v[3], 0.0, 0.0, 0.0, 0.0]
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store_vec_cs(p: *mut f32, i: usize, v: [f32; 8]) {
        // SAFETY: forwarded contract.
        unsafe { vector::store4_streaming(p, i, vector::F4([v[0], v[1], v[2], v[3]])) }
    }
}

/// Sixteen bytes as four 32-bit words, 16-byte aligned so that one vector access moves them
/// (eight bf16, the element at the lower address in the low half of each word).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Words4([u32; 4]);

impl NormElem for bf16 {
    const LANES: usize = 8;
    const VECTORS: usize = 4;

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load(p: *const bf16, i: usize) -> f32 {
        // SAFETY: forwarded contract.
        bf16_to_f32(unsafe { mem::load(p, i) })
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store(p: *mut bf16, i: usize, v: f32) {
        // SAFETY: forwarded contract.
        unsafe { mem::store(p, i, f32_to_bf16(v)) }
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load_vec(p: *const bf16, i: usize) -> [f32; 8] {
        let q = p.wrapping_add(i).cast::<Words4>();
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(q.is_aligned(), "misaligned 16-byte read at {q:p}");
        // SAFETY: the caller guarantees eight bf16 at an aligned `q`.
        widen_bf16x8(unsafe { mem::load(q, 0) }.0)
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store_vec(p: *mut bf16, i: usize, v: [f32; 8]) {
        let q = p.wrapping_add(i).cast::<Words4>();
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(q.is_aligned(), "misaligned 16-byte write at {q:p}");
        // SAFETY: the caller guarantees eight writable bf16 at an aligned `q`.
        unsafe { mem::store(q, 0, Words4(pack_bf16x8(v))) }
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn load_vec_cs(p: *const bf16, i: usize) -> [f32; 8] {
        // Eight bf16 are the bits of four f32: one streaming 16-byte load of them.
        let q = p.wrapping_add(i).cast::<f32>();
        // SAFETY: the caller guarantees eight bf16 (sixteen bytes) of global memory at an
        // aligned `q`.
        let f = unsafe { vector::load4_streaming(q, 0) }.0;
        widen_bf16x8([f[0].to_bits(), f[1].to_bits(), f[2].to_bits(), f[3].to_bits()])
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store_vec_cs(p: *mut bf16, i: usize, v: [f32; 8]) {
        let q = p.wrapping_add(i).cast::<f32>();
        let w = pack_bf16x8(v);
        let f = vector::F4([
            f32::from_bits(w[0]),
            f32::from_bits(w[1]),
            f32::from_bits(w[2]),
            f32::from_bits(w[3]),
        ]);
        // SAFETY: the caller guarantees eight writable bf16 of global memory at an aligned `q`.
        unsafe { vector::store4_streaming(q, 0, f) }
    }
}

/// Eight bf16 packed in four words (the element at the lower address in the low half) widened
/// to f32: a bf16 is the f32 of its bits shifted into the upper half, so the upper half of a
/// word is already in place and the lower half moves up.
#[inline(always)]
fn widen_bf16x8(w: [u32; 4]) -> [f32; 8] {
    let lo = |w: u32| f32::from_bits(w << 16);
    let hi = |w: u32| f32::from_bits(w & 0xffff_0000);
    [
        lo(w[0]),
        hi(w[0]),
        lo(w[1]),
        hi(w[1]),
        lo(w[2]),
        hi(w[2]),
        lo(w[3]),
        hi(w[3]),
    ]
}

/// Eight floats rounded to bf16 and packed in four words, as [`widen_bf16x8`] reads them: one
/// `cvt.rn.bf16x2.f32` a word ([`pack_bf16x2`]), where two `cvt.rn.bf16.f32` and a shift and an
/// `or` would do the same rounding.
#[inline(always)]
pub(crate) fn pack_bf16x8(v: [f32; 8]) -> [u32; 4] {
    [
        pack_bf16x2([v[0], v[1]]),
        pack_bf16x2([v[2], v[3]]),
        pack_bf16x2([v[4], v[5]]),
        pack_bf16x2([v[6], v[7]]),
    ]
}

/// `E::load_vec`, or with `STREAM` [`NormElem::load_vec_cs`].
///
/// # Safety
/// As [`NormElem::load_vec_cs`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn load_x<E: NormElem, const STREAM: bool>(p: *const E, i: usize) -> [f32; 8] {
    // SAFETY: forwarded contract.
    unsafe {
        if STREAM {
            E::load_vec_cs(p, i)
        } else {
            E::load_vec(p, i)
        }
    }
}

/// `E::store_vec`, or with `STREAM` [`NormElem::store_vec_cs`].
///
/// # Safety
/// As [`NormElem::store_vec_cs`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn store_y<E: NormElem, const STREAM: bool>(p: *mut E, i: usize, v: [f32; 8]) {
    // SAFETY: forwarded contract.
    unsafe {
        if STREAM {
            E::store_vec_cs(p, i, v)
        } else {
            E::store_vec(p, i, v)
        }
    }
}

/// `E::load_vec(p, i)` with the L2 eviction hint `evict` ([`vector::load4_evict_words`], for the
/// looped norms, [`two_pass`]'s `*_norm_loop*_*`); with [`Evict::Normal`] or where
/// [`vector::EVICT_HINTS`] is false (the sm_80 module, the simulator), `E::load_vec` itself.
///
/// # Safety
/// As [`NormElem::load_vec`], and `p` points to global memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn load_x_evict<E: NormElem>(p: *const E, i: usize, evict: Evict) -> [f32; 8] {
    if !vector::EVICT_HINTS || evict == Evict::Normal {
        // SAFETY: forwarded contract.
        return unsafe { E::load_vec(p, i) };
    }
    // Eight bf16 are the bits of four f32: one 16-byte load of them either way.
    // SAFETY: the caller guarantees sixteen bytes of global memory at an aligned `p + i`.
    widen_words::<E>(unsafe { vector::load4_evict_words(p.wrapping_add(i).cast::<f32>(), 0, evict) })
}

/// `p[i..i + LANES]` as the sixteen bytes' four words, not yet widened ([`widen_words`]): what a
/// kernel keeps live across other work, at 4 registers where the widened bf16 take 8.
///
/// # Safety
/// As [`NormElem::load_vec`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn load_words<E: NormElem>(p: *const E, i: usize) -> [u32; 4] {
    // SAFETY: forwarded contract; a plain 16-byte load (`Evict::Normal`).
    unsafe { vector::load4_evict_words(p.wrapping_add(i).cast::<f32>(), 0, Evict::Normal) }
}

/// Sixteen bytes of elements `E` (as [`load_words`] returns them) widened to f32, as
/// [`NormElem::load_vec`] returns them.
#[inline(always)]
pub(crate) fn widen_words<E: NormElem>(w: [u32; 4]) -> [f32; 8] {
    if E::LANES == 4 {
        let f = |k: usize| f32::from_bits(w[k]);
        [f(0), f(1), f(2), f(3), 0.0, 0.0, 0.0, 0.0]
    } else {
        widen_bf16x8(w)
    }
}

/// [`widen_words`] for words a kernel widens more than once (a packed bf16 row, once per pass
/// over it): on the GPU each bf16 word widens through its own `shl` and `and`, which the
/// compiler may neither merge with another widening of the same word nor hoist, so that only
/// the 4 loaded words stay live between the passes, not the 8 floats. f32 words are the floats
/// themselves: [`widen_words`].
#[inline(always)]
pub(crate) fn rewiden_words<E: NormElem>(w: [u32; 4]) -> [f32; 8] {
    if E::LANES == 4 {
        return widen_words::<E>(w);
    }
    #[cfg(target_arch = "nvptx64")]
    {
        let mut out = [0.0f32; 8];
        for k in 0..4 {
            let (lo, hi): (f32, f32);
            // SAFETY: register-to-register instructions; no memory. Not `pure` on purpose: an
            // asm block with (assumed) side effects is neither merged nor moved out of a loop.
            unsafe {
                core::arch::asm!(
                    "shl.b32 {lo}, {w}, 16;",
                    "and.b32 {hi}, {w}, 0xffff0000;",
                    w = in(reg32) w[k],
                    lo = out(reg32) lo,
                    hi = out(reg32) hi,
                    options(nomem, nostack, preserves_flags),
                );
            }
            out[2 * k] = lo;
            out[2 * k + 1] = hi;
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        widen_bf16x8(w)
    }
}

/// `1 / x` to within an ulp or two: `rcp.approx.f32` on the GPU (one MUFU.RCP, where `1.0 / x`
/// is an IEEE division with a test and a slow path), `1.0 / x` on the CPU. The norms take it for
/// `1 / cols` (an integer of at most 2^24, never denormal), so a row's statistics cost a multiply
/// instead of a division.
#[inline(always)]
pub(crate) fn rcp_fast(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register instruction; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "rcp.approx.f32 {out}, {x};",
                out = out(reg32) out,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / x
    }
}

/// `1 / sqrt(x)` to within a few ulps: `rsqrt.approx.f32` on the GPU (one MUFU.RSQ, where
/// `1.0 / sqrt(x)` is a correctly rounded square root and an IEEE division, each with a test and
/// a slow path); `1.0 / x.sqrt()` on the CPU. The same edges as the exact form: `+inf` at 0, 0 at
/// `+inf`, NaN for NaN and for `x < 0` (the norms pass `var + eps >= 0`).
#[inline(always)]
pub(crate) fn rsqrt_fast(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register-to-register instruction; no memory, no side effects.
        unsafe {
            core::arch::asm!(
                "rsqrt.approx.f32 {out}, {x};",
                out = out(reg32) out,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / x.sqrt()
    }
}

/// The sum over the block of one float per thread, returned to every thread: a warp butterfly
/// ([`warp::reduce_sum`]), lane 0 of each warp stores its warp's sum in `scratch[warp]`, one
/// barrier, then every warp sums all the warps' values the same way (so every thread gets the
/// same bits, with no second barrier).
///
/// # Safety
/// Called once per `scratch` by every thread of a block whose size is a multiple of 32 (a second
/// sum in the same launch takes another `scratch`); `scratch` points to `blockDim.x / 32` floats
/// of shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn block_sum(scratch: *mut f32, value: f32) -> f32 {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let (warp_idx, lane) = (tid / warp::SIZE as usize, tid % warp::SIZE as usize);
    let mine = warp::reduce_sum(value);
    // SAFETY: `warp_idx, lane < warps`, the size of `scratch`; each slot is written by one lane
    // before the barrier and only read after it.
    unsafe {
        if lane == 0 {
            mem::store(scratch, warp_idx, mine);
        }
        thread::sync_threads();
        let other = if lane < warps {
            mem::load(scratch, lane)
        } else {
            0.0
        };
        warp::reduce_sum(other)
    }
}

/// The sums over the block of two floats per thread, returned to every thread: [`block_sum`] of a
/// pair with one barrier. The pair's warp butterflies run side by side; lane 0 of each warp stores
/// its warp's sums in `scratch(0)[warp]` and `scratch(1)[warp]`.
///
/// # Safety
/// Called once per launch by every thread of a block whose size is a multiple of 32, with no
/// other sum in the launch using [`scratch`] areas 0 and 1, which it takes.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn block_sum2(a: f32, b: f32) -> (f32, f32) {
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let (warp_idx, lane) = (tid / warp::SIZE as usize, tid % warp::SIZE as usize);
    let pair_sum = |mut a: f32, mut b: f32| {
        let mut mask = warp::SIZE / 2;
        while mask > 0 {
            a += warp::shfl_xor(a, mask);
            b += warp::shfl_xor(b, mask);
            mask /= 2;
        }
        (a, b)
    };
    let (sa, sb) = pair_sum(a, b);
    // SAFETY: `warp_idx, lane < warps <= 32`, the size of each area; each slot is written by one
    // lane before the barrier and only read after it.
    unsafe {
        if lane == 0 {
            mem::store(scratch(0), warp_idx, sa);
            mem::store(scratch(1), warp_idx, sb);
        }
        thread::sync_threads();
        let (oa, ob) = if lane < warps {
            (mem::load(scratch(0), lane), mem::load(scratch(1), lane))
        } else {
            (0.0, 0.0)
        };
        pair_sum(oa, ob)
    }
}

/// The block's dynamic shared memory as floats: `scratch(k)` is the `k`-th area of 32 floats
/// (one per warp of the largest block), for the `k`-th [`block_sum`] of a launch.
#[inline(always)]
pub(crate) fn scratch(k: usize) -> *mut f32 {
    shared::dynamic::<f32>().wrapping_add(k * warp::SIZE as usize)
}
