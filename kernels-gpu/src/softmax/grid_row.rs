//! Rows too long for a thread-block cluster, few of them: one row split over a whole
//! cooperative grid in one launch, each block keeping what fits of its share on chip, the
//! blocks' statistics exchanged through global memory across a grid barrier
//! ([`softmax_grid_row`](fn@softmax_grid_row)).
//!
//! Why: the split path ([`two_pass`](super::two_pass)) reads a row of 2^24 twice from memory
//! (the second time partly from L2) and pays two launches. Here a grid of one block per
//! multiprocessor loads the row once: each block keeps the first part of its share in
//! registers, the next in shared memory, and only what is left past those is read a second time,
//! right after the first read of it, so mostly from L2.

use super::row::{identity, map4, reference, RowSplit};
use super::stats::{block_stats, exponent, KahanSum, Stats};
use super::two_pass::chunk_range;
use super::STATS_SHARED_BYTES;
use crate::gpu::vector::{self, Evict, F4};
use crate::gpu::{grid, math, mem, shared, thread};
use crate::kernel;

/// Vectors (4 floats) each thread of [`softmax_grid_row`](fn@softmax_grid_row) holds in
/// registers: 16 floats, 32 KiB for a block of [`GRID_ROW_BLOCK`] threads (with 8, ptxas
/// spilled at the 128 registers a thread the launch bounds allow).
pub const GRID_ROW_VECTORS: usize = 4;

/// Most threads per block of [`softmax_grid_row`](fn@softmax_grid_row) (its launch bounds,
/// `launch_bounds(512, 1)`): one block per multiprocessor may then use 128 registers a thread,
/// room for the held vectors beside the streaming loops' (at 1024 threads, 64 registers a
/// thread, ptxas spilled).
pub const GRID_ROW_BLOCK: u32 = 512;

/// Shared memory of [`softmax_grid_row`](fn@softmax_grid_row) ahead of the kept vectors: two sets
/// of per-warp [`Stats`] (one for the block's own statistics, one for the merge of the grid's),
/// so that consecutive rows never write a set a slower warp still reads.
pub const GRID_ROW_SCRATCH_BYTES: u32 = 2 * STATS_SHARED_BYTES;

/// Dynamic shared memory of [`softmax_grid_row`](fn@softmax_grid_row) keeping `shared_vecs`
/// vectors per block: the scratch, then 16 bytes per vector.
pub const fn grid_row_shared_bytes(shared_vecs: u32) -> u32 {
    GRID_ROW_SCRATCH_BYTES + shared_vecs * core::mem::size_of::<F4>() as u32
}

/// Vectors (4 floats) each thread of [`softmax_grid_row`](fn@softmax_grid_row) loads before it
/// uses any, in the shared-memory part and the streamed rest of its share: 96 bytes per thread,
/// 48 KiB per block of [`GRID_ROW_BLOCK`] threads in flight (groups of 4 would give 32 KiB),
/// for one block per multiprocessor to cover the DRAM latency at its share of the bandwidth
/// (Little's law). The most that fits: with 8 ptxas spilled at the 128 registers a thread the
/// launch bounds allow (the held vectors take 16), with 7 it used all 128.
pub const GRID_ROW_GROUP: usize = 6;

/// Where thread `tid` of a block of `threads` finds its part of the block's share of one row:
/// local vector `L` (`0 <= L < len`) is the row's vector `start + L`; the first `held` local
/// vectors are kept in registers, the next ones up to `kept` in the shared `slots` (local vector
/// `L` at slot `L - held`), the rest up to `len` read again.
#[derive(Clone, Copy)]
struct Share {
    x_row: *const f32,
    y_row: *mut f32,
    split: RowSplit,
    start: usize,
    held: usize,
    kept: usize,
    len: usize,
    tid: usize,
    threads: usize,
    slots: *mut f32,
}

/// Whether entries may take the fast exponential against the reference value `m`: `(x - m)`
/// times `t log2 e` into `ex2.approx.ftz`, with no test per entry. True when `m` and `t log2 e`
/// are finite and `t != 0`: then every exponent is `<= 0`, exactly 0 at `x = m`, and an entry the
/// thread does not hold (the identity) gives exactly 0, as in [`Held::write`](super::row::Held).
/// Else each entry goes through [`exponent`]'s tests.
#[inline(always)]
fn fast(m: f32, t: f32) -> bool {
    m.is_finite() && (t * math::LOG2_E).is_finite() && t != 0.0
}

/// Folds the vectors `v` (the identity, [`identity`]`(t)`, where `valid(k)` is false) into the
/// running statistics `acc` and their compensated sum `sum`: the group's reference value with
/// `max.NaN` (`min.NaN` for `t < 0`, the sign tested once per group), the running sum rescaled
/// to it once, then one exponential per entry. On the fast path ([`fast`]) 5 instructions per
/// entry and no test per vector; else [`exponent`]'s, skipping the vectors not held.
#[inline(always)]
fn fold<const N: usize>(
    acc: &mut Stats,
    sum: &mut KahanSum,
    v: &[F4; N],
    valid: impl Fn(usize) -> bool,
    t: f32,
) {
    let m = reference(v, acc.m, t);
    let mut group = 0.0f32;
    if fast(m, t) {
        let scale = t * math::LOG2_E;
        // The previous reference is at or below `m` (times the sign of `t`), so the factor is
        // at most 1; the identity's is exactly 0.
        sum.scale(math::exp2_ftz((acc.m - m) * scale));
        unroll_8!(N, |k| {
            let e = map4(v[k], |x| math::exp2_ftz((x - m) * scale));
            group += (e.0[0] + e.0[1]) + (e.0[2] + e.0[3]);
        });
    } else {
        sum.scale(math::exp(exponent(acc.m, m, t)));
        unroll_8!(N, |k| {
            if valid(k) {
                let e = map4(v[k], |x| math::exp(exponent(x, m, t)));
                group += (e.0[0] + e.0[1]) + (e.0[2] + e.0[3]);
            }
        });
    }
    sum.add(group);
    *acc = Stats { m, s: sum.value() };
}

impl Share {
    /// The float offset in the row of the thread's local vector `first + k * threads`: the
    /// step `4 k threads` in 32 bits (a block has at most 1024 threads), so that the unrolled
    /// group's offsets cost no 64-bit registers kept across the loop.
    #[inline(always)]
    fn at(self, first: usize, k: usize) -> usize {
        self.split.vector(self.start + first) + (4 * k as u32 * self.threads as u32) as usize
    }

    /// Whether the thread's local vector `first + k * threads` is below `end`.
    #[inline(always)]
    fn below(self, first: usize, k: usize, end: usize) -> bool {
        first + k * self.threads < end
    }

    /// Runs `body(first, full)` for each group of [`GRID_ROW_GROUP`] of the thread's local
    /// vectors `from, from + threads, ...` below `end`: the group of `first + k * threads`
    /// (`k < GRID_ROW_GROUP`); `full` when all of them are below `end`, which every group is
    /// but the last, so that only the last tests each vector (`body` is inlined twice, `full`
    /// a constant in each).
    #[inline(always)]
    fn groups(self, from: usize, end: usize, mut body: impl FnMut(usize, bool)) {
        let span = (GRID_ROW_GROUP - 1) * self.threads;
        let mut first = from;
        while first + span < end {
            body(first, true);
            first += GRID_ROW_GROUP * self.threads;
        }
        if first < end {
            body(first, false);
        }
    }

    /// Loads the thread's local vectors `first + k * threads` (`k < N`) below `end` (all of
    /// them if `full`), all loads before any use, the identity in place of the others;
    /// `STREAMING`: with the evict-first hint, for a last read; else with the L2 `evict_last`
    /// hint ([`Evict::last`]), for a read that phase 2 repeats.
    ///
    /// # Safety
    /// `end <= len`, and every vector below it if `full`.
    #[inline(always)]
    unsafe fn load<const N: usize, const STREAMING: bool>(
        self,
        first: usize,
        end: usize,
        full: bool,
        t: f32,
    ) -> [F4; N] {
        let mut v = [F4([identity(t); 4]); N];
        let keep = Evict::last();
        unroll_8!(N, |k| {
            if full || self.below(first, k, end) {
                let at = self.at(first, k);
                // SAFETY: the local vector is below `len`: inside the row, 16-byte aligned, in
                // global memory.
                v[k] = unsafe {
                    if STREAMING {
                        vector::load4_streaming(self.x_row, at)
                    } else {
                        F4(vector::load4_evict_words(self.x_row, at, keep).map(f32::from_bits))
                    }
                };
            }
        });
        v
    }

    /// Phase 1 past the registers: the shared part (`held..kept`), each group loaded with the
    /// evict-first hint (read once), stored to the thread's slots and folded; then the streamed
    /// rest (`kept..len`), loaded with the `evict_last` hint so that it stays in L2 for phase 2,
    /// and folded.
    ///
    /// # Safety
    /// The share lies inside the row; `kept - held` slots of shared memory.
    #[inline(always)]
    unsafe fn stats_past_registers(self, acc: &mut Stats, sum: &mut KahanSum, t: f32) {
        const G: usize = GRID_ROW_GROUP;
        let kept = self.kept;
        self.groups(self.held + self.tid, kept, |first, full| {
            // SAFETY: below `kept <= len`; each slot `L - held < kept - held` is the thread's own.
            unsafe {
                let v = self.load::<G, true>(first, kept, full, t);
                unroll_8!(G, |k| {
                    if full || self.below(first, k, kept) {
                        let l = first + k * self.threads;
                        vector::store4(self.slots, 4 * (l - self.held), v[k]);
                    }
                });
                fold(acc, sum, &v, |k| full || self.below(first, k, kept), t);
            }
        });
        let len = self.len;
        self.groups(kept + self.tid, len, |first, full| {
            // SAFETY: below `len`.
            let v = unsafe { self.load::<G, false>(first, len, full, t) };
            fold(acc, sum, &v, |k| full || self.below(first, k, len), t);
        });
    }

    /// Phase 2 for the whole share but the registers: `out(x)` of each entry stored to `y`
    /// (evict-first), the re-read rest first (its last read, evict-first, mostly from L2),
    /// then the shared part, each [`GRID_ROW_GROUP`] vectors loaded before any is used.
    ///
    /// # Safety
    /// As [`Share::stats_past_registers`], which filled the slots.
    #[inline(always)]
    unsafe fn write_past_registers(self, out: impl Fn(f32) -> f32 + Copy, t: f32) {
        const G: usize = GRID_ROW_GROUP;
        let (kept, len) = (self.kept, self.len);
        self.groups(kept + self.tid, len, |first, full| {
            // SAFETY: below `len`, inside the row; `y_row` splits like `x_row`.
            unsafe {
                let v = self.load::<G, true>(first, len, full, t);
                unroll_8!(G, |k| {
                    if full || self.below(first, k, len) {
                        let at = self.at(first, k);
                        vector::store4_streaming(self.y_row, at, map4(v[k], out));
                    }
                });
            }
        });
        self.groups(self.held + self.tid, kept, |first, full| {
            let mut v = [F4::ZERO; G];
            // SAFETY: the thread's own slots, written in phase 1; the vectors below `kept`.
            unsafe {
                unroll_8!(G, |k| {
                    if full || self.below(first, k, kept) {
                        let l = first + k * self.threads;
                        v[k] = vector::load4(self.slots, 4 * (l - self.held));
                    }
                });
                unroll_8!(G, |k| {
                    if full || self.below(first, k, kept) {
                        let at = self.at(first, k);
                        vector::store4_streaming(self.y_row, at, map4(v[k], out));
                    }
                });
            }
        });
    }

    /// Phase 2 for the register part `v`.
    ///
    /// # Safety
    /// As [`Share::stats_past_registers`].
    #[inline(always)]
    unsafe fn write_registers<const V: usize>(self, v: &[F4; V], out: impl Fn(f32) -> f32 + Copy) {
        unroll_8!(V, |k| {
            if self.below(self.tid, k, self.len.min(self.held)) {
                let at = self.at(self.tid, k);
                // SAFETY: below `len`, inside the row; `y_row` splits like `x_row`.
                unsafe { vector::store4_streaming(self.y_row, at, map4(v[k], out)) };
            }
        });
    }
}

/// Grid-per-row softmax: each of `rows` rows split over the whole cooperative grid, read once
/// where it fits on chip.
///
/// For each row in turn: block `b` of `G = gridDim.x` takes the contiguous vectors
/// `b * ceil(vecs / G) ..` of the row (`chunk_range`), `len` of them; its local vector `L` is
/// handled by thread `L % blockDim.x`. Phase 1 (statistics): the thread loads its first
/// [`GRID_ROW_VECTORS`] vectors (`L < R = GRID_ROW_VECTORS * blockDim.x`) into registers, the
/// next ones (`R <= L < R + shared_vecs`, read once: evict-first loads) in groups of
/// [`GRID_ROW_GROUP`], all of a group's loads issued before any use, into its own 16-byte slots
/// `L - R` of shared memory (consecutive threads, consecutive slots: no bank conflict), and
/// streams the rest the same way (`evict_last` loads, so that it stays in L2 for phase 2), keeping
/// running statistics throughout (one exponential per entry and one per group, base 2 with `t
/// log2 e` folded in, the sign of `t` tested once per group; `fold`); block 0's threads 0..7
/// add the head and tail scalars. The block merges them (`block_stats`), thread 0 stores them to
/// `partials[(row % 2) * G + b]` (two sets, used by alternate rows: a block stores row `r + 2`'s
/// only after the barrier of row `r + 1`, which every block passes after reading row `r`'s),
/// and the grid passes the barrier ([`grid::sync`]). Phase 2 (write):
/// every block merges the row's `G` partials the same way (so all use the same `(M, S)`), writes
/// the streamed part first (read again: the last read of phase 1, mostly still in L2), then the
/// shared and register parts, with the evict-first hint on the stores; where `M` is finite
/// (`fast`) each entry costs a subtraction, two multiplications and an `ex2.approx.ftz`.
///
/// Global memory: per element, one read and one write (8 bytes), plus a second read of the part
/// past `R + shared_vecs` of each block's share (from L2 where it stayed); 8 bytes per block of
/// partials written, `8 * G` read. Shared memory: [`grid_row_shared_bytes`]`(shared_vecs)`.
///
/// Launch: cooperative (`Module::cooperative`), `G` blocks all resident, of a multiple of 32
/// threads (at most [`GRID_ROW_BLOCK`]), [`grid_row_shared_bytes`]`(shared_vecs)` of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; `partials` to `4 * G` floats (whatever `rows`); `barrier` to one `u32` whose
/// low 31 bits are 0 at the launch and that no other launch uses meanwhile (the launch leaves
/// them 0, so a word zeroed once serves every later launch queued after it: see
/// [`grid::sync`]); the launch is as above.
// Block: sized to the row, up to its launch bounds. Barriers: four, two block reductions and the
// grid barrier's two block barriers around its arrival.
#[kernel(launch_bounds(512, 1), barriers(4))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn softmax_grid_row(
    x: *const f32,
    y: *mut f32,
    partials: *mut f32,
    barrier: *mut u32,
    rows: usize,
    cols: usize,
    shared_vecs: usize,
    t: f32,
) {
    const V: usize = GRID_ROW_VECTORS;
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let b = thread::block_idx_x() as usize;
    let blocks = thread::grid_dim_x() as usize;
    let own = shared::dynamic::<Stats>();
    let merged = own.wrapping_add(STATS_SHARED_BYTES as usize / core::mem::size_of::<Stats>());
    let slots = shared::dynamic::<u8>()
        .wrapping_add(GRID_ROW_SCRATCH_BYTES as usize)
        .cast::<f32>();
    let held = V * threads;
    let partials = partials.cast::<Stats>();
    for row in 0..rows {
        let (x_row, y_row) = (x.wrapping_add(row * cols), y.wrapping_add(row * cols));
        let split = RowSplit::of(x_row, cols);
        let (start, end) = chunk_range(split, b, split.vecs.div_ceil(blocks));
        let len = end - start;
        let kept = (held + shared_vecs).min(len);
        let scalar = if b == 0 { split.scalar(tid) } else { None };
        let share = Share {
            x_row,
            y_row,
            split,
            start,
            held,
            kept,
            len,
            tid,
            threads,
            slots,
        };
        // SAFETY: every index stays inside the row (`start + L < end <= vecs`) or the shared
        // slots (`L - R < shared_vecs`, each written and read by its own thread); `b < G`
        // indexes the row's set of partials; every thread of the grid reaches both reductions and the
        // grid barrier, the same number of times.
        unsafe {
            // Phase 1: the register part, the shared part, the streamed rest.
            let mut acc = Stats::empty(t);
            let mut sum = KahanSum::ZERO;
            // Unrolled, so that `v` stays in registers (a loop over it put it on the stack).
            let v = share.load::<V, true>(tid, len.min(held), false, t);
            fold(&mut acc, &mut sum, &v, |k| share.below(tid, k, len), t);
            share.stats_past_registers(&mut acc, &mut sum, t);
            let xs = scalar.map_or(0.0, |i| mem::load(x_row, i));
            if scalar.is_some() {
                acc = acc.merge(Stats::one(xs), t);
            }
            let block = block_stats(own, acc, t);
            if tid == 0 {
                mem::store(partials, (row % 2) * blocks + b, block);
            }
            grid::sync(barrier);

            // Phase 2: the row's statistics from every block's, then the writes.
            let mut acc = Stats::empty(t);
            let mut i = tid;
            while i < blocks {
                acc = acc.merge(mem::load(partials, (row % 2) * blocks + i), t);
                i += threads;
            }
            let total = block_stats(merged, acc, t);
            let (m, inv) = (total.m, 1.0 / total.s);
            if fast(m, t) {
                let scale = t * math::LOG2_E;
                let out = move |x: f32| math::exp2_ftz((x - m) * scale) * inv;
                share.write_past_registers(out, t);
                share.write_registers(&v, out);
            } else {
                let out = move |x: f32| math::exp(exponent(x, m, t)) * inv;
                share.write_past_registers(out, t);
                share.write_registers(&v, out);
            }
            if let Some(i) = scalar {
                mem::store(y_row, i, math::exp(exponent(xs, total.m, t)) / total.s);
            }
        }
    }
}
