//! Where a thread's entries of a row lie: the row's split into head scalars, aligned 16-byte
//! vectors and tail scalars ([`RowSplit`]), and the vectors one thread of a register-held row
//! owns, loads, reduces and writes ([`Held`]), shared by the one-pass kernels.

use super::stats::{exponent, Stats};
use crate::gpu::vector::{self, F4};
use crate::gpu::{math, mem};

/// How one row lies in memory: `head` scalars up to the first 16-byte boundary, `vecs` aligned
/// 4-float vectors, then `tail` scalars (`head, tail <= 3`).
#[derive(Clone, Copy)]
pub(crate) struct RowSplit {
    pub(crate) head: usize,
    pub(crate) vecs: usize,
    pub(crate) tail: usize,
}

impl RowSplit {
    /// The split of a row of `cols` floats starting at `row`.
    #[inline(always)]
    pub(crate) fn of(row: *const f32, cols: usize) -> RowSplit {
        let misaligned = (row as usize / 4) % 4;
        let head = ((4 - misaligned) % 4).min(cols);
        let vecs = (cols - head) / 4;
        RowSplit {
            head,
            vecs,
            tail: cols - head - 4 * vecs,
        }
    }

    /// The float offset of vector `j`.
    #[inline(always)]
    pub(crate) fn vector(self, j: usize) -> usize {
        self.head + 4 * j
    }

    /// The scalar element (head or tail) thread `tid` of the row's threads handles, if any:
    /// threads `0..head` take the head, threads `4..4 + tail` the tail (at most 7 threads).
    #[inline(always)]
    pub(crate) fn scalar(self, tid: usize) -> Option<usize> {
        if tid < self.head {
            Some(tid)
        } else if tid >= 4 && tid - 4 < self.tail {
            Some(self.head + 4 * self.vecs + tid - 4)
        } else {
            None
        }
    }
}

/// `f` applied to each of the four floats of `v`.
#[inline(always)]
pub(super) fn map4(v: F4, f: impl Fn(f32) -> f32) -> F4 {
    F4([f(v.0[0]), f(v.0[1]), f(v.0[2]), f(v.0[3])])
}

/// Most vectors per thread a register-held row may take: [`unroll_8!`] unrolls up to 8.
pub(super) const MAX_VECTORS: usize = 8;

/// Where thread `tid` of a row's `threads` finds its entries: its vector `k` is vector
/// `tid + k * threads` of the row, and it has at most one head or tail scalar
/// ([`RowSplit::scalar`]).
///
/// `FIXED` is the number of threads when it is known at compile time (32 for a warp, 8 or 16 for
/// a lane group), else 0. With `FIXED` threads vector `k` lies a constant distance past vector 0,
/// an immediate offset in the instruction. With a run-time count, the vector indices are kept in
/// 32 bits (a register-held row has at most 8 vectors per thread of a cluster of 16 blocks of
/// 1024 threads, 2^17 vectors): the offsets stay live from the
/// loads to the stores, and 64-bit ones would cost 8 registers more (72 instead of 64 for
/// `V = 8`, too many for 1024 threads).
#[derive(Clone, Copy)]
pub(super) struct Held<const FIXED: usize> {
    split: RowSplit,
    tid: usize,
    threads: usize,
}

impl<const FIXED: usize> Held<FIXED> {
    /// Thread `tid` of `threads` on a row of `cols` floats starting at `row`.
    #[inline(always)]
    pub(super) fn of(row: *const f32, cols: usize, tid: usize, threads: usize) -> Self {
        Held {
            split: RowSplit::of(row, cols),
            tid,
            threads,
        }
    }

    /// Whether the thread's vector `k` lies inside the row: `tid + k * threads < vecs`, written
    /// as `tid < vecs - k * threads` (0 if negative), whose right side is the same for every
    /// thread of the row (a uniform register), so no per-thread value per `k` stays live.
    #[inline(always)]
    pub(super) fn valid(self, k: usize) -> bool {
        let threads = if FIXED != 0 {
            FIXED as u32
        } else {
            self.threads as u32
        };
        (self.tid as u32) < (self.split.vecs as u32).saturating_sub(k as u32 * threads)
    }

    /// The float offset of the thread's vector `k` in the row.
    #[inline(always)]
    pub(super) fn offset(self, k: usize) -> usize {
        if FIXED != 0 {
            self.split.vector(self.tid + k * FIXED)
        } else {
            self.split.head + 4 * (self.tid as u32 + k as u32 * self.threads as u32) as usize
        }
    }

    /// The thread's head or tail scalar, if any.
    #[inline(always)]
    pub(super) fn scalar(self) -> Option<usize> {
        self.split.scalar(self.tid)
    }

    /// Loads the thread's entries of `x_row`: `V` vectors (all loads issued before any use) and
    /// the scalar. A vector or scalar the thread does not hold is [`identity`]`(t)`, which leaves
    /// the reference value ([`reference`]) and, where it is finite, the sum of
    /// exponentials unchanged (its exponential is 0), so those need no test per vector.
    ///
    /// With `LAST` the vector loads carry `evict_last` (L1 and L2,
    /// [`vector::load4_evict_words`]), as torch.compile's generated kernels load a row.
    ///
    /// # Safety
    /// `x_row` is the row `self` describes, in global memory; `cols / 4 <= V * threads`.
    #[inline(always)]
    pub(super) unsafe fn load<const V: usize, const LAST: bool>(
        self,
        x_row: *const f32,
        t: f32,
    ) -> ([F4; V], f32) {
        const { assert!(V <= MAX_VECTORS, "unroll_8! unrolls up to 8 vectors") };
        let fill = identity(t);
        let mut v = [F4([fill; 4]); V];
        let evict = if LAST {
            vector::Evict::last()
        } else {
            vector::Evict::Normal
        };
        unroll_8!(V, |k| {
            if self.valid(k) {
                // SAFETY: vector `tid + k * threads < vecs` lies inside the row, 16-byte aligned.
                v[k] = unsafe {
                    if LAST {
                        F4(vector::load4_evict_words(x_row, self.offset(k), evict).map(f32::from_bits))
                    } else {
                        vector::load4(x_row, self.offset(k))
                    }
                };
            }
        });
        // SAFETY: a head or tail index is inside the row.
        let xs = self.scalar().map_or(fill, |i| unsafe { mem::load(x_row, i) });
        (v, xs)
    }

    /// The rest of the row's softmax once the thread holds its entries `v`, `xs` ([`Held::load`],
    /// the identity where it holds none) and their reference `m` ([`reference`]):
    /// replaces each entry by `e = exp(exponent(x, m, t))`, sums them, merges the statistics
    /// over the row's threads with `reduce` into `(M, S)`, and stores
    /// `e * exp(exponent(m, M, t)) / S` to `y_row`, which is `exp(exponent(x, M, t)) / S` (the
    /// factor is 1 for the thread that holds the row's reference, 0 for a thread whose entries
    /// all lie at `-inf` below a finite `M`).
    ///
    /// `TESTED`: the fast path, too, skips the vectors the thread does not hold (a test per
    /// vector), as the slow path always does. Without the tests the exponentials of those
    /// vectors are computed and add 0; with them, where registers are tight (the persistent
    /// kernels), no register holds an exponential the thread does not need.
    ///
    /// # Safety
    /// `y_row` splits like the row `self` describes; `reduce` is called by all the row's threads.
    #[inline(always)]
    pub(super) unsafe fn write<const V: usize, const TESTED: bool>(
        self,
        mut v: [F4; V],
        xs: f32,
        m: f32,
        y_row: *mut f32,
        t: f32,
        reduce: impl FnOnce(Stats) -> Stats,
    ) {
        let mut s = 0.0f32;
        let scale = t * math::LOG2_E;
        let scalar = self.scalar();
        let es;
        // Where the thread's reference value and `t log2(e)` are finite and `t` is not 0 (the
        // common case: then no entry is NaN and every one lies at or below `m`, times the sign
        // of `t`), `exponent(x, m, t)` is `t (x - m)`, exactly 0 at `x = m`: one subtraction
        // and one multiplication by `t log2(e)` before `exp2`, instead of `exponent`'s tests on
        // every entry. Every argument of `exp2` is then `<= 0` and a result below 2^-126 may
        // flush to 0 (a term off by less than 2^-126): `exp2_ftz`, no subnormal fix-up. The
        // entries the thread does not hold are the identity, `-inf` or `+inf` against a finite
        // `m`, whose term is exactly 0: summed with no test per vector. The two loops are
        // written out apart so that the test is made once per thread, not per entry.
        if m.is_finite() && scale.is_finite() && t != 0.0 {
            unroll_8!(V, |k| {
                if !TESTED || self.valid(k) {
                    v[k] = map4(v[k], |x| math::exp2_ftz((x - m) * scale));
                    s += (v[k].0[0] + v[k].0[1]) + (v[k].0[2] + v[k].0[3]);
                }
            });
            es = if scalar.is_some() {
                math::exp2_ftz((xs - m) * scale)
            } else {
                0.0
            };
        } else {
            unroll_8!(V, |k| {
                if self.valid(k) {
                    v[k] = map4(v[k], |x| math::exp(exponent(x, m, t)));
                    s += (v[k].0[0] + v[k].0[1]) + (v[k].0[2] + v[k].0[3]);
                }
            });
            es = if scalar.is_some() {
                math::exp(exponent(xs, m, t))
            } else {
                0.0
            };
        }
        s += es;

        let row = reduce(Stats { m, s });
        let factor = math::exp(exponent(m, row.m, t)) / row.s;
        unroll_8!(V, |k| {
            if self.valid(k) {
                let out = map4(v[k], |e| e * factor);
                // SAFETY: as for the loads; `y_row` splits like `x_row`.
                unsafe { vector::store4(y_row, self.offset(k), out) };
            }
        });
        if let Some(i) = scalar {
            // SAFETY: as for the scalar load.
            unsafe { mem::store(y_row, i, es * factor) };
        }
    }
}

/// The identity of a row's reference value for the inverse temperature `t`: `-inf` for
/// `t >= 0` (the reference is a maximum), `+inf` for `t < 0` (a minimum). What a thread's
/// register-held row holds in place of entries past the row's end.
#[inline(always)]
pub(super) fn identity(t: f32) -> f32 {
    if t >= 0.0 {
        f32::NEG_INFINITY
    } else {
        f32::INFINITY
    }
}

/// The thread's reference value: the largest of its entries for `t >= 0`, the smallest for
/// `t < 0` (the identity, [`identity`]`(t)`, if it holds none; NaN if one is NaN). The
/// entries the thread does not hold must be the identity ([`Held::load`]): all `4 V + 1` are
/// folded in, with no test per vector, and the sign of `t` is tested once, not per entry.
#[inline(always)]
pub(super) fn reference<const V: usize>(v: &[F4; V], xs: f32, t: f32) -> f32 {
    if t >= 0.0 {
        fold(v, xs, math::max_nan_fast)
    } else {
        fold(v, xs, math::min_nan_fast)
    }
}

/// `pick` folded over the entries of `v`, then `xs`.
#[inline(always)]
fn fold<const V: usize>(v: &[F4; V], xs: f32, pick: impl Fn(f32, f32) -> f32) -> f32 {
    let mut m = v[0].0[0];
    unroll_8!(V, |k| {
        for c in 0..4 {
            if k + c > 0 {
                m = pick(m, v[k].0[c]);
            }
        }
    });
    pick(m, xs)
}
