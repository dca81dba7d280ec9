//! The bulk-copy ring (sm_90a module only): a persistent grid whose blocks stream their rows
//! through a ring of [`RING_SLOTS`] shared-memory slots, each row copied in by the copy engine
//! (`cp.async.bulk`, [`crate::gpu::bulk`]) while the block works on an earlier one
//! ([`rms_norm_ring`](fn@rms_norm_ring), [`layer_norm_ring`](fn@layer_norm_ring), each with an
//! f32 and a bf16 instance).
//!
//! Why: a block-per-row kernel that holds its row in registers ([`super::in_registers`]) has
//! loads in flight only until its row has arrived; while it reduces and writes, its
//! multiprocessor fetches only for the other resident blocks. Here the next rows are always on
//! their way (up to `RING_SLOTS - 1` of them per block while it works on one), with one
//! instruction per row, and the weight (and bias) stay in registers across the block's rows.

use super::overflow::{overflowed, rescue, BlockRow};
use super::{block_sum, rcp_fast, rsqrt_fast, scratch, store_y, NormElem};
use crate::gpu::{bf16, bulk, math, mbarrier, mem, shared, thread};
use crate::kernel;

/// Rows in flight per block: the slots of its ring. Three: two rows on their way while the block
/// works on the third; rows of up to 16384 f32 columns (64 KiB) fit three times in the 227 KiB a
/// block may have.
pub const RING_SLOTS: usize = 3;

/// Bytes of the ring's shared memory ahead of its slots: four areas of 32 floats for the
/// block sums (two per row, alternate rows taking alternate pairs, so that a fast warp's next row
/// never writes an area a slow warp still reads), then the [`RING_SLOTS`] barriers, then the
/// weight and bias pointers for the rare path, padded to 1 KiB.
pub const RING_HEADER_BYTES: u32 = 1024;

/// Byte offset of the slots' barriers: after the four scratch areas.
const BARRIERS_AT: usize = 4 * 32 * core::mem::size_of::<f32>();

/// Byte offset of the weight and bias pointers, kept in shared memory for the rare path (see
/// `overflow`) rather than in registers across the ring's loop, where the LayerNorm kernels have
/// none to spare (64 at 1024 threads): after the barriers.
const POINTERS_AT: usize = BARRIERS_AT + RING_SLOTS * 8;

const _: () = assert!(POINTERS_AT + 2 * 8 <= RING_HEADER_BYTES as usize);

/// Dynamic shared memory of a ring kernel for rows of `row_bytes` bytes: the header, then
/// [`RING_SLOTS`] rows.
pub const fn ring_shared_bytes(row_bytes: u32) -> u32 {
    RING_HEADER_BYTES + RING_SLOTS as u32 * row_bytes
}

/// Vectors of `lanes` elements per thread of the ring kernels (`V`): 16 elements (4 f32
/// vectors, 2 bf16), so rows of up to 16384 columns in 1024 threads.
pub const fn ring_vectors(lanes: usize) -> usize {
    16 / lanes
}

/// The longest row the ring kernels take: [`ring_vectors`] per thread in 1024 threads.
pub const RING_MAX_COLS: usize = 16 * 1024;

/// RMSNorm (`LAYER = false`) or LayerNorm (`LAYER = true`) of rows streamed through the ring:
/// the body of the `*_norm_ring_*` kernels.
///
/// Block `b` of `G` takes rows `b, b + G, ...` (its `i`-th row in slot `i % RING_SLOTS`).
/// Thread 0 sets up one barrier per slot and asks the copy engine for the block's first
/// [`RING_SLOTS`] rows, each one bulk copy of `cols` elements completing on its slot's barrier.
/// Thread `tid` of `T` keeps the weight (and bias) vectors `tid + k * T` (`k < V`) in registers.
/// Per row: every thread waits for the slot's phase (parity `(i / RING_SLOTS) % 2`), takes its
/// vectors from the slot into registers, and the block computes the statistics as
/// [`super::in_registers`] does (RMSNorm: the sum of squares; LayerNorm: the shifted mean, then the
/// squared deviations from the registers); once the first block sum is done (its barrier comes
/// after every thread's reads of the slot) thread 0 refills the slot with the block's row `i +
/// RING_SLOTS`; then each thread stores its outputs (16-byte stores). Where a row's statistic was
/// not finite (see `overflow`), the block's rows are all normalised again from memory once the
/// ring is done (`ring_tail`).
///
/// Global memory: `x` read once (by the copy engine), `y` written once: 8 bytes per element in
/// f32, 4 in bf16; the weight (and bias) once per block. Shared memory:
/// [`ring_shared_bytes`]`(cols * size_of::<E>())`, each element written once by the copy engine
/// and read once by its thread (LayerNorm's shift, the row's first entry, by all).
///
/// Launch: at most one block per row (a persistent grid: as many as are resident), `T` threads a
/// multiple of 32 and at most 1024 with `cols / LANES <= V * T`, that much dynamic shared memory;
/// a GPU of compute capability 9.0 (the `sm_90a` module).
///
/// # Safety
/// `x` and `y` point to `rows * cols` elements of device memory and do not overlap, `w` and `b`
/// to `cols` (`b` is not read by RMSNorm); all four 16-byte aligned; `cols >= 1` a multiple of
/// `LANES`; the launch is as above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
// Index loops over the register arrays: each index is a constant once unrolled, which is what
// keeps the arrays in registers.
#[allow(clippy::needless_range_loop)]
unsafe fn norm_ring<E: NormElem, const V: usize, const LAYER: bool>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    let lanes = E::LANES;
    let tid = thread::thread_idx_x();
    let threads = thread::block_dim_x();
    let first = thread::block_idx_x() as usize;
    let blocks = thread::grid_dim_x() as usize;
    // 32-bit vector indices: a row has at most 16 * 1024 / LANES vectors.
    let vecs = (cols / lanes) as u32;
    let row_bytes = (cols * core::mem::size_of::<E>()) as u32;
    let base = shared::dynamic::<u8>();
    let bar = |s: usize| base.wrapping_add(BARRIERS_AT + 8 * s).cast::<u64>();
    let slot = |s: usize| {
        base.wrapping_add(RING_HEADER_BYTES as usize + s * row_bytes as usize)
            .cast::<E>()
    };
    // Whether vector `tid + k * T` is in the row, with the right side uniform over the block.
    let valid = |k: usize| tid < vecs.saturating_sub(k as u32 * threads);
    let offset = |k: usize| (tid + k as u32 * threads) as usize * lanes;
    let inv_n = rcp_fast(cols as f32);

    // Thread 0 only: the block's row `i` into its slot, if the block has such a row.
    // SAFETY (of each call): the slot is free (never used, or every thread's reads of it came
    // before a block barrier that thread 0 has passed), and the barrier's phase expects it.
    let fetch = |i: usize| {
        let row = first + i * blocks;
        if row < rows {
            let s = i % RING_SLOTS;
            bulk::fence_shared();
            // SAFETY: the row lies inside `x` (16-byte aligned, `row_bytes` a multiple of 16:
            // `cols` is a multiple of `LANES`), the slot holds `row_bytes` (the launch's shared
            // memory); see above for the slot and the barrier.
            unsafe {
                mbarrier::arrive_expect_tx(bar(s), row_bytes);
                bulk::load(slot(s), x.wrapping_add(row * cols), row_bytes, bar(s));
            }
        }
    };
    let pointers = base.wrapping_add(POINTERS_AT).cast::<usize>();
    if tid == 0 {
        for s in 0..RING_SLOTS {
            // SAFETY: the barriers lie in the header, untouched by anything else yet.
            unsafe { mbarrier::init(bar(s), 1) };
        }
        mbarrier::fence_init();
        // SAFETY: two words of the header, written once here and read after the barrier below.
        unsafe {
            mem::store(pointers, 0, w as usize);
            mem::store(pointers, 1, b as usize);
        }
    }
    thread::sync_threads();
    if tid == 0 {
        for i in 0..RING_SLOTS {
            fetch(i);
        }
    }

    let mut g = [[0.0f32; 8]; V];
    let mut beta = [[0.0f32; 8]; V];
    unroll_8!(V, |k| {
        if valid(k) {
            // SAFETY: vector `tid + k * T < vecs` of the weight (and bias), 16-byte aligned.
            unsafe {
                g[k] = E::load_vec(w, offset(k));
                if LAYER {
                    beta[k] = E::load_vec(b, offset(k));
                }
            }
        }
    });

    // The ring's rows in turn; `redo` once a row's statistic was not finite (see `overflow`).
    let mut i = 0;
    let mut redo = false;
    loop {
        let row = first + i * blocks;
        if row >= rows {
            break; // uniform over the block
        }
        let s = i % RING_SLOTS;
        // SAFETY: slot `s`'s barrier, initialised; its phase `i / RING_SLOTS` is this row's copy.
        unsafe { mbarrier::wait_parity(bar(s), ((i / RING_SLOTS) % 2) as u32) };
        let src = slot(s);
        let mut v = [[0.0f32; 8]; V];
        unroll_8!(V, |k| {
            if valid(k) {
                // SAFETY: vector `tid + k * T` of the row in the slot, landed, 16-byte aligned.
                v[k] = unsafe { E::load_vec(src, offset(k)) };
            }
        });
        let area = 2 * (i % 2);
        let y_row = y.wrapping_add(row * cols);
        if LAYER {
            // SAFETY: the row's first entry, in the slot (`cols >= 1`).
            let shift = unsafe { E::load(src, 0) };
            let mut sum = 0.0f32;
            unroll_8!(V, |k| {
                if valid(k) {
                    for c in 0..lanes {
                        v[k][c] -= shift;
                        sum += v[k][c];
                    }
                }
            });
            // SAFETY: every thread of the block reaches both sums; alternate rows take
            // alternate pairs of areas (see RING_HEADER_BYTES).
            let mu = unsafe { block_sum(scratch(area), sum) } * inv_n;
            if tid == 0 {
                fetch(i + RING_SLOTS);
            }
            let mut q = 0.0f32;
            unroll_8!(V, |k| {
                if valid(k) {
                    for c in 0..lanes {
                        v[k][c] -= mu;
                        q = math::fma(v[k][c], v[k][c], q);
                    }
                }
            });
            let var = unsafe { block_sum(scratch(area + 1), q) } * inv_n;
            if overflowed(var) {
                redo = true; // uniform over the block
            }
            let rstd = rsqrt_fast(var + eps);
            unroll_8!(V, |k| {
                if valid(k) {
                    let mut out = [0.0f32; 8];
                    for c in 0..lanes {
                        out[c] = math::fma(v[k][c] * rstd, g[k][c], beta[k][c]);
                    }
                    // SAFETY: vector `tid + k * T` of the row of `y`, 16-byte aligned.
                    unsafe { store_y::<E, false>(y_row, offset(k), out) };
                }
            });
        } else {
            let mut q = 0.0f32;
            unroll_8!(V, |k| {
                if valid(k) {
                    for c in 0..lanes {
                        q = math::fma(v[k][c], v[k][c], q);
                    }
                }
            });
            // SAFETY: every thread of the block reaches the sum (see RING_HEADER_BYTES).
            let ms = unsafe { block_sum(scratch(area), q) } * inv_n;
            if tid == 0 {
                fetch(i + RING_SLOTS);
            }
            if overflowed(ms) {
                redo = true; // uniform over the block
            }
            let inv = rsqrt_fast(ms + eps);
            unroll_8!(V, |k| {
                if valid(k) {
                    let mut out = [0.0f32; 8];
                    for c in 0..lanes {
                        out[c] = v[k][c] * inv * g[k][c];
                    }
                    // SAFETY: vector `tid + k * T` of the row of `y`, 16-byte aligned.
                    unsafe { store_y::<E, false>(y_row, offset(k), out) };
                }
            });
        }
        i += 1;
    }
    if redo {
        // SAFETY: every thread of the block is here (`redo` is uniform); the kernel's
        // contract; written by thread 0 before the block's first barrier.
        unsafe {
            let (w, b) = (
                mem::load(pointers, 0) as *const E,
                mem::load(pointers, 1) as *const E,
            );
            ring_tail::<E, LAYER>(x, y, w, b, rows, cols, eps, first, blocks);
        }
    }
}

/// The rare path of [`norm_ring`] (see `overflow`): once the ring's loop is over, where a row's
/// statistic was not finite, all of the block's rows are normalised again from memory (each
/// right, whatever its size), overwriting what the loop stored (the rescue's first barrier
/// orders those stores before these).
///
/// Not inlined, and the loop itself only notes that it happened: a branch out of the loop, this
/// work inlined, or the loop keeping the row's turn, made the f32 LayerNorm kernel (at its 64
/// registers) spill inside the loop.
///
/// # Safety
/// Every thread of the block calls it, with the kernel's contract for the pointers and shapes,
/// after the ring's loop.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn ring_tail<E: NormElem, const LAYER: bool>(
    x: *const E,
    y: *mut E,
    w: *const E,
    b: *const E,
    rows: usize,
    cols: usize,
    eps: f32,
    first: usize,
    blocks: usize,
) {
    let mut k = 0;
    while first + k * blocks < rows {
        let row = first + k * blocks;
        // SAFETY: every thread of the block is here (the loop's bounds are uniform); the row of
        // `x` and `y`, the weight and the bias of the kernel's contract; the scratch area 0,
        // each of its reductions after a barrier.
        unsafe {
            rescue::<E, _, LAYER>(
                BlockRow(scratch(0)),
                (x.wrapping_add(row * cols), y.wrapping_add(row * cols)),
                (w, b),
                cols,
                eps,
            )
        };
        k += 1;
    }
}

/// RMSNorm of rows streamed through the ring: `norm_ring` with `LAYER = false` (no bias: `w`
/// stands in for it, never read), `V` vectors per thread; what one thread does, the traffic and
/// the launch are its. Rows of up to 16384 columns in blocks of up to 1024 threads (launch bounds:
/// 64 registers a thread). Minimum traffic, moved: 8 bytes per element in f32, 4 in bf16.
///
/// Instances: `rms_norm_ring_f32` (f32, 4 vectors of 4: a multiple of 4 columns) and
/// `rms_norm_ring_bf16` (bf16 with f32 statistics, 2 vectors of 8: a multiple of 8).
///
/// # Safety
/// As `norm_ring`.
// Barriers: two, the one after the slots' set-up and the row's `block_sum`.
#[kernel(
    launch_bounds(1024, 1),
    instances(rms_norm_ring_f32 = (f32, 4), rms_norm_ring_bf16 = (bf16, 2)),
    barriers(2)
)]
#[inline(always)]
pub unsafe fn rms_norm_ring<E: NormElem, const V: usize>(
    x: *const E,
    w: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_ring::<E, V, false>(x, w, w, y, rows, cols, eps) }
}

/// LayerNorm of rows streamed through the ring: `norm_ring` with `LAYER = true`, `V` vectors per
/// thread; what one thread does, the traffic and the launch are its. Rows of up to 16384 columns
/// in blocks of up to 1024 threads. Minimum traffic, moved: 8 bytes per element in f32, 4 in
/// bf16.
///
/// Instances: `layer_norm_ring_f32` (f32, 4 vectors of 4: a multiple of 4 columns) and
/// `layer_norm_ring_bf16` (bf16 with f32 statistics, 2 vectors of 8: a multiple of 8).
///
/// # Safety
/// As `norm_ring`.
// Barriers: three, the one after the slots' set-up and the row's two block sums.
#[kernel(
    launch_bounds(1024, 1),
    instances(layer_norm_ring_f32 = (f32, 4), layer_norm_ring_bf16 = (bf16, 2)),
    barriers(3)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm_ring<E: NormElem, const V: usize>(
    x: *const E,
    w: *const E,
    b: *const E,
    y: *mut E,
    rows: usize,
    cols: usize,
    eps: f32,
) {
    // SAFETY: forwarded contract.
    unsafe { norm_ring::<E, V, true>(x, w, b, y, rows, cols, eps) }
}
