//! Persistent kernels: the next row in flight while the current one is reduced and written.
//!
//! A register-held kernel (`softmax_warp_8`, `softmax_block_4`, `softmax_block_8`) loads its
//! row, then computes and writes it, then exits: between its last load's arrival and the next
//! block's first load the SM's share of the row pipeline is idle (the exponentials, the reduction,
//! the stores, the block's exit and the next block's start). At 32768 columns a block is 1024
//! threads of 64 registers, the whole register file: one row per SM, and that gap is all the SM's.
//! The persistent kernels keep each row's warp or block alive over rows `first, first + step, ...`
//! and start copying the next row into shared memory ([`async_copy::cp_async_16_after`]) as soon as the
//! current one has been read out of it, so its loads fly during the current row's exponentials,
//! reduction and stores. Each thread copies exactly the vectors it will hold, into its own slots,
//! and reads back only those: the staging needs no barrier.

use super::row::{identity, reference, Held, MAX_VECTORS};
use super::stats::{block_stats, warp_stats, Stats};
use super::{ROW_BLOCK_MAX, STATS_SHARED_BYTES, WARP_KERNEL_BLOCK};
use crate::gpu::vector::F4;
use crate::gpu::{async_copy, hint, mem, shared, thread, warp};
use crate::kernel;

/// Shared memory of [`softmax_persist_block`](fn@softmax_persist_block) (`softmax_persist_block_4`)
/// and [`softmax_persist_block_8`](fn@softmax_persist_block_8) for `vectors` per
/// thread of `threads`: one 16-byte slot per vector of the row, then two sets of per-warp
/// [`Stats`] (consecutive rows alternate between them, so that a warp writing the next row's
/// statistics never meets one still reading the current row's).
pub const fn persist_block_shared_bytes(vectors: u32, threads: u32) -> u32 {
    vectors * threads * core::mem::size_of::<F4>() as u32 + 2 * STATS_SHARED_BYTES
}

/// Shared memory of [`softmax_persist_warp_8`](fn@softmax_persist_warp_8): 8 16-byte slots per lane of a
/// [`WARP_KERNEL_BLOCK`]-thread block (32 KiB).
pub const PERSIST_WARP_SHARED_BYTES: u32 = 8 * WARP_KERNEL_BLOCK * core::mem::size_of::<F4>() as u32;

/// The loop of the persistent kernels: rows `first, first + step, ...` below `rows`, each held
/// in registers by `threads` threads as in [`row_in_registers`], the next one staged.
///
/// For each row the thread waits for its copies ([`async_copy::wait_all`]) and reads its `V`
/// vectors from its slots `stage + tid + k * threads` into registers; right after each read it
/// starts the copy of its vector `k` of the next row into the same slot (issued once the value
/// read is in a register, see [`async_copy::cp_async_16_after`]) and then loads the next row's head or tail
/// scalar; then it finishes the current row ([`reference`](super::row::reference), [`Held::write`], with
/// `reduce(stats, parity)`, parity alternating between rows). So the next row's loads are in
/// flight through all of the current row's exponentials, reduction and stores.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats at the same address modulo 16 bytes; `first < rows`;
/// `cols / 4 <= V * threads`; `threads == FIXED` unless `FIXED` is 0; `stage + tid + k * threads`
/// (`k < V`) are 16-byte shared-memory slots of this thread only; `reduce` is called by all the
/// row's threads, which all take the same rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn persist_rows<const V: usize, const FIXED: usize>(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    t: f32,
    (first, step): (usize, usize),
    (tid, threads): (usize, usize),
    stage: *mut F4,
    mut reduce: impl FnMut(Stats, usize) -> Stats,
) {
    const { assert!(V <= MAX_VECTORS, "unroll_8! unrolls up to 8 vectors") };
    // The thread's index and count, recomputed where each iteration uses them, and its slots
    // and vector indices from those: hoisted ahead of the loop, the 8 slot addresses and vector
    // indices of a thread would stay live across it, some 30 registers more than the row itself
    // needs (96 instead of 64 at 1024 threads, which then cannot launch).
    let fresh = || {
        let threads = if FIXED != 0 {
            FIXED
        } else {
            hint::recompute(threads as u32) as usize
        };
        (hint::recompute(tid as u32) as usize, threads)
    };
    let held_of = |row: usize| {
        let (tid, threads) = fresh();
        Held::<FIXED>::of(x.wrapping_add(row * cols), cols, tid, threads)
    };
    let slot = |k: usize| {
        let (tid, threads) = fresh();
        stage.wrapping_add(tid + k * threads)
    };
    // Starts the copy of vector `k` of the thread in the row `held` describes, once `after` is
    // known.
    let stage_vector = |held: Held<FIXED>, x_row: *const f32, k: usize, after: f32| {
        let src = x_row.wrapping_add(held.offset(k)).cast::<F4>();
        // The slot's address from a base LLVM cannot hoist: its reassociation of
        // `stage + (tid + k * threads)` into `(stage + k * threads) + tid` would otherwise keep
        // 8 hoisted 64-bit addresses live across the loop.
        let (tid, threads) = fresh();
        let dst = hint::recompute_ptr(stage).wrapping_add(tid + k * threads);
        // SAFETY: vector `k` of the thread lies inside the row, 16-byte aligned (the caller checks
        // `valid(k)`); the slot is this thread's, and its previous contents were read before
        // `after` was known.
        unsafe { async_copy::cp_async_16_after(dst, src, after) };
    };
    // SAFETY (scalar loads): a head or tail index is inside its row.
    let scalar_of = |held: Held<FIXED>, x_row: *const f32| {
        held.scalar()
            .map_or(identity(t), |i| unsafe { mem::load(x_row, i) })
    };

    let mut row = first;
    let mut xs_next = {
        let (held, x_row) = (held_of(row), x.wrapping_add(row * cols));
        unroll_8!(V, |k| {
            if held.valid(k) {
                stage_vector(held, x_row, k, 0.0);
            }
        });
        scalar_of(held, x_row)
    };
    let mut parity = 0;
    loop {
        let held = held_of(row);
        let next = row + step;
        let (next_held, next_row) = (held_of(next), x.wrapping_add(next * cols));
        let more = next < rows;
        async_copy::wait_all();
        // Vectors the thread does not hold are the identity, as `Held::write` needs.
        let fill = identity(t);
        let mut v = [F4([fill; 4]); V];
        unroll_8!(V, |k| {
            if held.valid(k) {
                // SAFETY: the slot holds this thread's copy of vector `k`, landed (waited for).
                v[k] = unsafe { mem::load(slot(k), 0) };
            }
            // The slot's next contents go on their way as soon as its value is in a register.
            if more && next_held.valid(k) {
                stage_vector(next_held, next_row, k, v[k].0[0]);
            }
        });
        let xs = xs_next;
        if more {
            xs_next = scalar_of(next_held, next_row);
        }
        let m = reference(&v, xs, t);
        // SAFETY: the row is inside `y`; every thread of the row reaches `reduce`.
        unsafe {
            held.write::<V, true>(v, xs, m, y.wrapping_add(row * cols), t, |s| reduce(s, parity));
        }
        if !more {
            break;
        }
        row = next;
        parity ^= 1;
    }
}

/// Persistent warp-per-row softmax, the next row staged in shared memory: `softmax_warp_8`
/// over several rows per warp.
///
/// Warp `w` of block `b` handles rows `b * 8 + w + i * 8 * gridDim.x`; for each, lane `l` holds
/// vectors `l + 32 k` (`k < 8`, rows of up to 1024 columns + 3) in registers, and while the warp
/// reduces (10 shuffles) and writes that row, the lane's 8 vectors of the warp's next row are
/// on their way into its 8 slots of shared memory (`persist_rows`).
///
/// Global memory: each entry read once (`cp.async`, through L2 only) and written once, 8 bytes
/// per element, 8 KiB per 1024-column row. Shared memory: 128 bytes per lane, 32 KiB per block
/// ([`PERSIST_WARP_SHARED_BYTES`]); each value is written once and read once, by its own lane.
///
/// Launch: at most `ceil(rows / 8)` blocks of [`WARP_KERNEL_BLOCK`] threads (the host launches
/// as many as are resident at once), [`PERSIST_WARP_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; `cols / 4 <= 256`; the launch shape is as above.
// Barriers: none, the warp exchanges by shuffles only.
#[kernel(block(WARP_KERNEL_BLOCK), barriers(0))]
pub unsafe fn softmax_persist_warp_8(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    const V: usize = 8;
    let tid = thread::thread_idx_x() as usize;
    let warps = (thread::block_dim_x() / warp::SIZE) as usize;
    let (warp_idx, lane) = (tid / warp::SIZE as usize, tid % warp::SIZE as usize);
    let first = thread::block_idx_x() as usize * warps + warp_idx;
    if first >= rows {
        return; // the whole warp leaves together
    }
    let step = thread::grid_dim_x() as usize * warps;
    let stage = shared::dynamic::<F4>().wrapping_add(warp_idx * V * warp::SIZE as usize);
    // SAFETY: the caller's contract; the warp's slots are `8 * 32` of the block's `8 * 256`, lane
    // `l`'s are `l + 32 k`; every lane takes the same rows and reaches the shuffles.
    unsafe {
        persist_rows::<V, { warp::SIZE as usize }>(
            x,
            y,
            rows,
            cols,
            t,
            (first, step),
            (lane, warp::SIZE as usize),
            stage,
            |s, _| warp_stats(s, t),
        )
    }
}

/// Persistent block-per-row softmax, the next row staged in shared memory, `V` vectors per
/// thread.
///
/// Block `b` handles rows `b, b + gridDim.x, ...`; for each, thread `tid` holds vectors
/// `tid + k * blockDim.x` (`k < V`) in registers and at most one head or tail scalar, the block
/// merges the statistics with shuffles and one barrier (`block_stats`, into the half of the
/// scratch this row's parity picks), and while it does so and writes the row, each thread's
/// vectors of the block's next row are on their way into its `V` slots of shared memory
/// (`persist_rows`).
///
/// Global memory: each entry read once (`cp.async`, through L2 only) and written once, 8 bytes
/// per element. Shared memory: `16 * V` bytes per thread (a whole row: 128 KiB at 32768
/// columns), each value written once and read once by its own thread, plus 512 bytes of
/// statistics ([`persist_block_shared_bytes`]).
///
/// Launch: at most `rows` blocks of a multiple of 32 threads, at most 1024, with
/// `cols / 4 <= V * blockDim.x` (the host launches as many as are resident at once);
/// `persist_block_shared_bytes(V, blockDim.x)` of dynamic shared memory.
///
/// Instances: `softmax_persist_block_4` (`V = 4`, 16 floats per thread): rows of up to
/// `16 * blockDim.x` columns, the same blocks as `softmax_block_4` (256 threads at 4096 columns,
/// 512 at 8192), with 64 bytes of shared memory per thread. Its 8-vector twin is
/// [`softmax_persist_block_8`](fn@softmax_persist_block_8).
///
/// # Safety
/// `x` and `y` point to `rows * cols` floats of device memory at the same address modulo 16
/// bytes and do not overlap; the launch shape is as above.
// Block: sized to the row like the block-per-row kernels, up to 1024 threads. Barriers: one,
// the loop's `block_stats` (the loop over rows is not unrolled).
#[kernel(instances(softmax_persist_block_4 = 4), block(ROW_BLOCK_MAX), barriers(1))]
#[inline(always)]
pub unsafe fn softmax_persist_block<const V: usize>(
    x: *const f32,
    y: *mut f32,
    rows: usize,
    cols: usize,
    t: f32,
) {
    let first = thread::block_idx_x() as usize;
    if first >= rows {
        return; // the whole block leaves together: no barrier is skipped by part of it
    }
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let step = thread::grid_dim_x() as usize;
    let stage = shared::dynamic::<F4>();
    let scratch = stage.wrapping_add(V * threads).cast::<Stats>();
    const SCRATCH_SLOTS: usize = (ROW_BLOCK_MAX / warp::SIZE) as usize;
    // SAFETY: the caller's contract; thread `tid`'s slots are `tid + k * threads`; the scratch
    // halves hold one `Stats` per warp each; every thread takes the same rows and reaches the
    // barrier of each row's reduction.
    unsafe {
        persist_rows::<V, 0>(
            x,
            y,
            rows,
            cols,
            t,
            (first, step),
            (tid, threads),
            stage,
            |s, parity| block_stats(scratch.wrapping_add(parity * SCRATCH_SLOTS), s, t),
        )
    }
}

/// [`softmax_persist_block`](fn@softmax_persist_block) with 8 vectors (32 floats) per thread: rows of up to
/// `32 * blockDim.x` columns, the same blocks as `softmax_block_8`; at 32768 columns one block
/// of 1024 threads per SM holds a row in registers and stages the next in 128 KiB of shared
/// memory (the over-48 KiB opt-in). Launch bounds of 1024 threads keep ptxas at the 64
/// registers such a block needs (left alone it took 72 once the register-held row's loops lost
/// their per-vector tests).
///
/// A kernel of its own rather than an instance of `softmax_persist_block`: launch bounds are a
/// kernel's, for all its instances, and would add a `.maxntid` to `softmax_persist_block_4`,
/// whose PTX is the one measured without.
///
/// # Safety
/// As [`softmax_persist_block`](fn@softmax_persist_block).
// Barriers: one, as `softmax_persist_block`.
#[kernel(launch_bounds(1024), barriers(1))]
pub unsafe fn softmax_persist_block_8(x: *const f32, y: *mut f32, rows: usize, cols: usize, t: f32) {
    // SAFETY: forwarded contract.
    unsafe { softmax_persist_block::<8>(x, y, rows, cols, t) }
}
