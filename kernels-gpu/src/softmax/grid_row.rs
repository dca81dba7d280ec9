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

use super::row::{map4, RowSplit};
use super::stats::{block_stats, exponent, KahanSum, Stats};
use super::stream::{range_stats, range_write, STREAM_UNROLL};
use super::two_pass::chunk_range;
use super::STATS_SHARED_BYTES;
use crate::gpu::vector::{self, F4};
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

/// Folds the vectors `v[k]` for which `valid(k)` into the running statistics `acc` and their
/// compensated sum `sum`, as `range_stats` does per group: one reference for the group, the
/// running sum rescaled to it once.
#[inline(always)]
fn fold<const N: usize>(
    acc: &mut Stats,
    sum: &mut KahanSum,
    v: &[F4; N],
    valid: impl Fn(usize) -> bool,
    t: f32,
) {
    let sign = if t >= 0.0 { 1.0f32 } else { -1.0 };
    let mut key = sign * acc.m;
    unroll_8!(N, |k| {
        if valid(k) {
            for c in 0..4 {
                key = math::max_nan(key, sign * v[k].0[c]);
            }
        }
    });
    let m = sign * key;
    sum.scale(math::exp(exponent(acc.m, m, t)));
    let mut group = 0.0f32;
    unroll_8!(N, |k| {
        if valid(k) {
            let e = map4(v[k], |x| math::exp(exponent(x, m, t)));
            group += (e.0[0] + e.0[1]) + (e.0[2] + e.0[3]);
        }
    });
    sum.add(group);
    *acc = Stats { m, s: sum.value() };
}

/// Grid-per-row softmax: each of `rows` rows split over the whole cooperative grid, read once
/// where it fits on chip.
///
/// For each row in turn: block `b` of `G = gridDim.x` takes the contiguous vectors
/// `b * ceil(vecs / G) ..` of the row (`chunk_range`), `len` of them; its local vector `L` is
/// handled by thread `L % blockDim.x`. Phase 1 (statistics): the thread loads its first
/// [`GRID_ROW_VECTORS`] vectors (`L < R = GRID_ROW_VECTORS * blockDim.x`) into registers, the
/// next ones (`R <= L < R + shared_vecs`) in groups of [`STREAM_UNROLL`] into its own 16-byte
/// slots `L - R` of shared memory, and streams the rest (`range_stats`), keeping running
/// statistics throughout; block 0's threads 0..7 add the head and tail scalars. The block merges
/// them (`block_stats`), thread 0 stores them to `partials[row * G + b]`, and the grid passes
/// the barrier ([`grid::sync`]). Phase 2 (write): every block merges the row's `G` partials the
/// same way (so all use the same `(M, S)`), writes the streamed part first (read again: the
/// last read of phase 1, mostly still in L2), then the shared and register parts, with the
/// evict-first hint on the stores.
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
/// bytes and do not overlap; `partials` to `2 * rows * G` floats; `barrier` to one `u32`, zero at
/// the launch; the launch is as above.
#[kernel(launch_bounds(512, 1))]
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
        // SAFETY: every index stays inside the row (`start + L < end <= vecs`) or the shared
        // slots (`L - R < shared_vecs`, each written and read by its own thread); `b < G`
        // indexes the row's partials; every thread of the grid reaches both reductions and the
        // grid barrier, the same number of times.
        unsafe {
            // Phase 1: the register part, the shared part, the streamed rest.
            let mut acc = Stats::empty(t);
            let mut sum = KahanSum::ZERO;
            // Unrolled, so that `v` stays in registers (a loop over it put it on the stack).
            let mut v = [F4::ZERO; V];
            unroll_8!(V, |k| {
                if tid + k * threads < len {
                    v[k] = vector::load4(x_row, split.vector(start + tid + k * threads));
                }
            });
            fold(&mut acc, &mut sum, &v, |k| tid + k * threads < len, t);
            let mut first = held + tid;
            while first < kept {
                let mut group = [F4::ZERO; STREAM_UNROLL];
                for (k, slot) in group.iter_mut().enumerate() {
                    let l = first + k * threads;
                    if l < kept {
                        *slot = vector::load4(x_row, split.vector(start + l));
                    }
                }
                for (k, vk) in group.iter().enumerate() {
                    let l = first + k * threads;
                    if l < kept {
                        vector::store4(slots, 4 * (l - held), *vk);
                    }
                }
                fold(&mut acc, &mut sum, &group, |k| first + k * threads < kept, t);
                first += STREAM_UNROLL * threads;
            }
            acc = acc.merge(range_stats(x_row, split, start + kept, end, tid, threads, t), t);
            let xs = scalar.map_or(0.0, |i| mem::load(x_row, i));
            if scalar.is_some() {
                acc = acc.merge(Stats::one(xs), t);
            }
            let block = block_stats(own, acc, t);
            if tid == 0 {
                mem::store(partials, row * blocks + b, block);
            }
            grid::sync(barrier);

            // Phase 2: the row's statistics from every block's, then the writes.
            let mut acc = Stats::empty(t);
            let mut i = tid;
            while i < blocks {
                acc = acc.merge(mem::load(partials, row * blocks + i), t);
                i += threads;
            }
            let total = block_stats(merged, acc, t);
            range_write::<true>(x_row, y_row, split, start + kept, end, tid, threads, total, t);
            let inv = 1.0 / total.s;
            let write = |e: F4| map4(e, |x| math::exp(exponent(x, total.m, t)) * inv);
            let mut l = held + tid;
            while l < kept {
                let e = vector::load4(slots, 4 * (l - held));
                vector::store4_streaming(y_row, split.vector(start + l), write(e));
                l += threads;
            }
            unroll_8!(V, |k| {
                if tid + k * threads < len {
                    vector::store4_streaming(y_row, split.vector(start + tid + k * threads), write(v[k]));
                }
            });
            if let Some(i) = scalar {
                mem::store(y_row, i, math::exp(exponent(xs, total.m, t)) / total.s);
            }
        }
    }
}
