//! Decode attention's combine inside the streaming step, for the one-launch rung
//! ([`super::tensor_fused`]): the blocks of a row group hand their chunks' partials to the last
//! of them to finish, which merges each row's chunks by their log-sum-exp and writes the output
//! and the log-sum-exp, where [`super::tiles_combine`] is a second launch.
//!
//! # The hand-off (`last_of_group`)
//! The pattern of `gpukern-device/tests/handoff.rs`, which the simulator checks: every thread
//! has stored its share of the block's partials, a barrier, then thread 0 fences at device scope
//! (the release of the block's stores) and counts the block in on its row group's counter
//! (`atomic::add`, relaxed, device scope). The thread whose count reads `splits - 1` is the
//! last: it fences again (the acquire of the other blocks' releases) and resets the counter to 0
//! (every block of the group has counted in: nothing else touches it in this launch); past a
//! second barrier its block merges. So a launch finds the counters 0 and leaves them 0: the host
//! zeroes them once, when it allocates them, and a graph replays the launch with no memset. No
//! block waits for another: nothing assumes the grid is resident. A launch that stops half way
//! (a fault) leaves counters behind, as it leaves the context unusable.
//!
//! # The merge (`merge_rows`)
//! The row group's `row_count` rows of `D` dims are `row_count * D / 4` items of 4 dims; each
//! item is the weighted sum of its `splits` chunks. All of the group's partials come from L2 into
//! one block, so the loads are issued [`MERGE_UNROLL`] chunks at a time per thread, 16 bytes of
//! output and 8 of `(max, sum)` each, and merged online (the batch's maximum rescales the sums so
//! far), one pass with no block-wide maximum first; where the items are fewer than the block's
//! threads, `ways = 128 / items` threads share an item's chunks (thread `way` takes chunks `way,
//! way + ways, ..`) and meet in shared memory.

use super::tiles::TILE_BLOCK;
use super::KvElem;
use crate::gpu::atomic::{self, Scope};
use crate::gpu::{math, mem, thread, vector};

/// Chunks whose partials a thread of the merge loads at once: 16 loads of 16 bytes and 16 of 8
/// in flight per thread, so that the 64 KiB of partials of a row group at batch 1 (4 rows, 32
/// chunks, head dim 128) arrive in two round trips to L2.
pub const MERGE_UNROLL: usize = 16;

/// Floats of shared memory [`merge_rows`] needs: an output quad and a `(max, sum)` pair per
/// thread.
pub(super) const MERGE_SCRATCH_FLOATS: usize = 6 * TILE_BLOCK as usize;

/// The hand-off of a row group's partials (the module's doc): returns, in every thread of the
/// block, whether this block is the group's last, whose partials from every chunk it may now
/// read. Two barriers.
///
/// # Safety
/// Every thread of the block, after it stored its share of the block's partials (plain stores);
/// `counters[counter]` a word of global memory that only the `splits` blocks of this row group
/// touch in this launch, each calling this once; `flag` a shared word no thread reads or writes
/// meanwhile.
#[inline(always)]
pub(super) unsafe fn last_of_group(
    counters: *mut u32,
    counter: usize,
    splits: usize,
    flag: *mut u32,
    tid: usize,
) -> bool {
    // Every thread's partial stored before thread 0's release.
    thread::sync_threads();
    if tid == 0 {
        atomic::fence(Scope::Device);
        // SAFETY: the row group's counter (the contract).
        let arrived = unsafe { atomic::add(counters, counter, 1, Scope::Device) };
        let last = arrived as usize + 1 == splits;
        if last {
            // The acquire: every other block's count this one read came after its release.
            atomic::fence(Scope::Device);
            // SAFETY: as the count; every block of the group has counted in.
            unsafe { atomic::store(counters, counter, 0, Scope::Device) };
        }
        // SAFETY: the flag (the contract), read after the barrier below.
        unsafe { mem::store(flag, 0, u32::from(last)) };
    }
    thread::sync_threads();
    // SAFETY: written by thread 0 before the barrier above.
    unsafe { mem::load(flag, 0) != 0 }
}

/// An online merge's state: the running maximum (base 2), the sum and 4 dims of the output,
/// both scaled by `2^-max`.
#[derive(Clone, Copy)]
struct Merged {
    max: f32,
    sum: f32,
    out: [f32; 4],
}

impl Merged {
    const EMPTY: Merged = Merged {
        max: f32::NEG_INFINITY,
        sum: 0.0,
        out: [0.0; 4],
    };

    /// Rescaled to the maximum `top` (at least the state's own): while every maximum is -inf
    /// (no key seen yet) the exponents are taken against 0 and give 0. Returns the reference the
    /// new terms are weighed against.
    #[inline(always)]
    fn rescale(&mut self, top: f32) -> f32 {
        let reference = if top == f32::NEG_INFINITY { 0.0 } else { top };
        let alpha = math::fast::exp2(self.max - reference);
        self.sum *= alpha;
        unroll_8!(4, |e| {
            self.out[e] *= alpha;
        });
        self.max = top;
        reference
    }

    /// Adds another state.
    #[inline(always)]
    fn add(&mut self, other: Merged) {
        let reference = self.rescale(math::max_nan_fast(self.max, other.max));
        let weight = math::fast::exp2(other.max - reference);
        self.sum = math::fma(weight, other.sum, self.sum);
        unroll_8!(4, |e| {
            self.out[e] = math::fma(weight, other.out[e], self.out[e]);
        });
    }
}

/// One thread's share of an item: chunks `way, way + ways, ..` below `splits` of the partial row
/// from `first` (dims `4 d4 ..+ 4`), [`MERGE_UNROLL`] chunks' loads issued together.
///
/// # Safety
/// `ml` holds `2 (first + splits)` floats and `acc` `D (first + splits)`, released to this
/// thread; `4 d4 + 4 <= D`; `acc` 16-byte aligned.
#[inline(always)]
unsafe fn chunks_of<const D: usize>(
    (ml, acc): (*const f32, *const f32),
    first: usize,
    d4: usize,
    (way, ways, splits): (usize, usize, usize),
) -> Merged {
    let mut state = Merged::EMPTY;
    let mut c0 = way;
    while c0 < splits {
        let mut pair = [[f32::NEG_INFINITY, 0.0]; MERGE_UNROLL];
        let mut x = [[0.0f32; 4]; MERGE_UNROLL];
        unroll_8!(2, |hi| {
            unroll_8!(8, |lo| {
                let k = 8 * hi + lo;
                let c = c0 + k * ways;
                if c < splits {
                    // SAFETY: chunk `c < splits` of the row (the contract); `(max, sum)` at an
                    // even index (8-byte aligned), the dims 16-byte aligned.
                    unsafe {
                        pair[k] = vector::load(ml, 2 * (first + c));
                        x[k] = vector::load(acc, (first + c) * D + 4 * d4);
                    }
                }
            });
        });
        let mut top = state.max;
        unroll_8!(2, |hi| {
            unroll_8!(8, |lo| {
                top = math::max_nan_fast(top, pair[8 * hi + lo][0]);
            });
        });
        let reference = state.rescale(top);
        unroll_8!(2, |hi| {
            unroll_8!(8, |lo| {
                let k = 8 * hi + lo;
                // An empty chunk (`max = -inf`, `sum = 0`) weighs 0.
                let weight = math::fast::exp2(pair[k][0] - reference);
                state.sum = math::fma(weight, pair[k][1], state.sum);
                unroll_8!(4, |e| {
                    state.out[e] = math::fma(weight, x[k][e], state.out[e]);
                });
            });
        });
        c0 += MERGE_UNROLL * ways;
    }
    state
}

/// Writes a merged item: `out[row][4 d4 ..+ 4]` = output / sum, rounded once to `E`, and, for
/// `d4 = 0`, `lse[row] = ln 2 (max + log2 sum)`.
///
/// # Safety
/// `row` a row of `out` (`D` elements each, 8-byte aligned) and of `lse`; `4 d4 + 4 <= D`.
#[inline(always)]
unsafe fn write_item<E: KvElem, const D: usize>(
    (out, lse): (*mut E, *mut f32),
    row: usize,
    d4: usize,
    state: Merged,
) {
    let inv = 1.0 / state.sum;
    let mut v = [E::ZERO; 4];
    unroll_8!(4, |e| {
        v[e] = E::from_f32(state.out[e] * inv);
    });
    // SAFETY: the contract.
    unsafe {
        vector::store(out, row * D + 4 * d4, v);
        if d4 == 0 {
            mem::store(lse, row, (state.max + math::fast::log2(state.sum)) * math::LN_2);
        }
    }
}

/// The merge of the last block of a row group (the module's doc): the output and log-sum-exp
/// of the group's `row_count` rows (row `r` is row `q_row(r)` of `out`, `lse` and, times
/// `splits`, of the partials) from their `splits` chunks' partials. Item `i` (row `i / (D /
/// 4)`, dims `4 (i % (D / 4)) ..+ 4`) is thread `i`'s (and `i + 128`'s, ..) where there are at
/// least 128 items; else threads `i + items way` (`way < 128 / items`) each merge chunks `way,
/// way + ways, ..` of it, store their state in `scratch`, and after a barrier thread `i` adds
/// them up. One barrier.
///
/// Global memory: `(D + 2) * 4` bytes of partial per row and chunk read (from L2: written by the
/// group's blocks just before), the rows' output and log-sum-exp written.
///
/// # Safety
/// Every thread of the block, after [`last_of_group`] said it is the last; `ml` holds `2
/// splits` floats and `acc` `splits D` per row from `q_row(r) splits` on, every chunk's
/// partial of each row stored and released to this block (chunk 0 of every row holding a key it
/// sees, so that a row's maximum is finite); `out` holds rows of `D` elements (8-byte aligned),
/// `lse` a float per row; `acc` 16-byte aligned; `scratch` [`MERGE_SCRATCH_FLOATS`] floats of
/// shared memory, 16-byte aligned, that nothing else uses; `1 <= row_count`, `D` a multiple of 4
/// up to 256.
#[inline(always)]
pub(super) unsafe fn merge_rows<E: KvElem, const D: usize>(
    (ml, acc): (*const f32, *const f32),
    (out, lse): (*mut E, *mut f32),
    (splits, row_count): (usize, usize),
    tid: usize,
    scratch: *mut f32,
    q_row: impl Fn(usize) -> usize,
) {
    let threads = TILE_BLOCK as usize;
    let quads = D / 4;
    let items = row_count * quads;
    let ways = (threads / items).max(1);
    let pairs = scratch.wrapping_add(4 * threads);
    let mut u = tid;
    while u < items * ways {
        let (item, way) = (u % items, u / items);
        let (r, d4) = (item / quads, item % quads);
        let row = q_row(r);
        // SAFETY: row `row`'s chunks (the contract).
        let state = unsafe { chunks_of::<D>((ml, acc), row * splits, d4, (way, ways, splits)) };
        if ways == 1 {
            // SAFETY: row `row` of the outputs, dims `4 d4 ..+ 4 <= D`.
            unsafe { write_item::<E, D>((out, lse), row, d4, state) };
        } else {
            // SAFETY: slot `u < 128` of the scratch (`items * ways <= 128`): its quad (16-byte
            // aligned) and pair; read after the barrier below.
            unsafe {
                vector::store(scratch, 4 * u, state.out);
                vector::store(pairs, 2 * u, [state.max, state.sum]);
            }
        }
        u += threads;
    }
    thread::sync_threads();
    if ways > 1 && tid < items {
        let mut state = Merged::EMPTY;
        for way in 0..ways {
            let slot = tid + way * items;
            // SAFETY: slots below `items * ways`, written before the barrier above.
            let (x, pair): ([f32; 4], [f32; 2]) =
                unsafe { (vector::load(scratch, 4 * slot), vector::load(pairs, 2 * slot)) };
            state.add(Merged {
                max: pair[0],
                sum: pair[1],
                out: x,
            });
        }
        let (r, d4) = (tid / quads, tid % quads);
        // SAFETY: as above.
        unsafe { write_item::<E, D>((out, lse), q_row(r), d4, state) };
    }
}
