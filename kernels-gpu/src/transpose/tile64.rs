//! Tuning candidates: a 64x64 tile per block of [`TILE`] x [`BLOCK_ROWS`] threads, 16 elements
//! per thread (four times the 32x32 tile's work per block), every global load of a thread issued
//! before its first shared-memory store.
//!
//! * [`transpose_tiled_64`](fn@transpose_tiled_64): 4-byte accesses, a tile padded to 65
//!   columns; any shape.
//! * [`transpose_vec4_64`](fn@transpose_vec4_64): 16-byte global loads and stores, a tile with
//!   no padding whose 16-byte groups are swizzled (XOR) per group of four rows, so that the
//!   16-byte stores into it and the 4-byte column reads out of it are both conflict-free; only
//!   for `rows % 4 == 0` and `cols % 4 == 0` (every row of `a` and of `b` 16-byte aligned).

use super::{BLOCK_ROWS, TILE};
use crate::gpu::vector::{self, F4};
use crate::gpu::{mem, shared, thread};
use crate::kernel;

/// Side of the square tile of both candidates.
pub const TILE_64: u32 = 64;

/// Floats per row of [`transpose_tiled_64`](fn@transpose_tiled_64)'s shared tile: one past the
/// tile, so that a warp reading 32 rows of one column (addresses `65 k` apart) hits 32 banks.
const PITCH_64: usize = TILE_64 as usize + 1;

/// Dynamic shared memory of [`transpose_tiled_64`](fn@transpose_tiled_64): one padded tile.
pub const TILED_64_SHARED_BYTES: u32 = (TILE_64 as usize * PITCH_64 * 4) as u32;

/// Dynamic shared memory of [`transpose_vec4_64`](fn@transpose_vec4_64): one unpadded tile.
pub const VEC4_64_SHARED_BYTES: u32 = TILE_64 * TILE_64 * 4;

/// Threads per block of both candidates.
const THREADS: usize = (TILE * BLOCK_ROWS) as usize;

/// Rows of the tile one thread of [`transpose_tiled_64`](fn@transpose_tiled_64) moves (two
/// columns each: `tx` and `tx + 32`).
const ROWS_PER_THREAD: usize = TILE_64 as usize / BLOCK_ROWS as usize;

/// 16-byte vectors of the tile one thread of [`transpose_vec4_64`](fn@transpose_vec4_64) moves.
const VECTORS_PER_THREAD: usize = (TILE_64 * TILE_64) as usize / 4 / THREADS;

const _: () = assert!(
    TILE == 32,
    "a warp spans one row of 32 floats of the 64-wide tile, twice"
);
const _: () = assert!(ROWS_PER_THREAD * BLOCK_ROWS as usize == TILE_64 as usize);
const _: () = assert!(VECTORS_PER_THREAD * THREADS * 4 == (TILE_64 * TILE_64) as usize);
const _: () = assert!(VECTORS_PER_THREAD == 4, "the kernel names its four vectors");

/// The `64 x 64` tile of `a` at block `(bx, by)` (rows `64 by ..`, columns `64 bx ..`) written
/// transposed into `b`, with 4-byte accesses.
///
/// Thread `(tx, ty)` loads `a[64 by + ty + 8 j][64 bx + tx + 32 h]` for `j < 8`, `h < 2` (16
/// loads, all issued before the first store; a warp reads 128 contiguous bytes of a row per
/// load) and stores them at `tile[ty + 8 j][tx + 32 h]`; after a barrier it reads
/// `tile[tx + 32 h][ty + 8 j]` (a column: the pitch of 65 keeps the warp's 32 reads on 32 banks)
/// and writes it to `b[64 bx + ty + 8 j][64 by + tx + 32 h]` (128 contiguous bytes of a row of
/// `b` per warp). Elements outside the matrix are neither read nor written.
///
/// Global memory: reads and writes `4 rows cols` bytes each (minimum traffic `8 rows cols`).
/// Launch: 2-D blocks of exactly [`TILE`] x [`BLOCK_ROWS`] threads, `ceil(cols / 64)` x
/// `ceil(rows / 64)` blocks, [`TILED_64_SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `a` and `b` hold `rows * cols` floats of device memory each and do not overlap.
// Barriers: one, between the tile's stores and its loads (as `transpose_tiled`).
#[kernel(block(TILE * BLOCK_ROWS), barriers(1))]
pub unsafe fn transpose_tiled_64(a: *const f32, b: *mut f32, rows: usize, cols: usize) {
    let tile = shared::dynamic::<f32>();
    let (tx, ty) = (thread::thread_idx_x() as usize, thread::thread_idx_y() as usize);
    let (t, step, half) = (TILE_64 as usize, BLOCK_ROWS as usize, TILE as usize);
    let (row0, col0) = (
        thread::block_idx_y() as usize * t,
        thread::block_idx_x() as usize * t,
    );
    let mut held = [[0.0f32; 2]; ROWS_PER_THREAD];
    for (j, pair) in held.iter_mut().enumerate() {
        for (h, slot) in pair.iter_mut().enumerate() {
            let (r, c) = (row0 + ty + j * step, col0 + tx + h * half);
            if r < rows && c < cols {
                // SAFETY: `r < rows`, `c < cols`.
                *slot = unsafe { mem::load(a, r * cols + c) };
            }
        }
    }
    for (j, pair) in held.iter().enumerate() {
        for (h, &value) in pair.iter().enumerate() {
            // SAFETY: `(ty + 8 j) * 65 + tx + 32 h < 64 * 65`, inside the tile. Slots outside
            // the matrix get a 0 that no thread reads back.
            unsafe { mem::store(tile, (ty + j * step) * PITCH_64 + tx + h * half, value) }
        }
    }
    thread::sync_threads();
    for j in 0..ROWS_PER_THREAD {
        for h in 0..2 {
            // Element (row0 + tx + 32 h, col0 + ty + 8 j) of `a` goes to row `col0 + ty + 8 j`,
            // column `row0 + tx + 32 h` of `b`.
            let (r, c) = (row0 + tx + h * half, col0 + ty + j * step);
            if r < rows && c < cols {
                // SAFETY: the slot was stored before the barrier; `c * rows + r < rows * cols`.
                unsafe {
                    let value = mem::load(tile, (tx + h * half) * PITCH_64 + ty + j * step);
                    mem::store(b, c * rows + r, value)
                }
            }
        }
    }
}

/// Where float `c` of row `r` of [`transpose_vec4_64`](fn@transpose_vec4_64)'s tile lives: rows
/// of 64 floats, the 16-byte group `c / 4` XOR-ed with `(r / 4) % 8`. The XOR keeps a group's
/// four floats together (16-byte stores stay aligned), permutes the groups of a row (8 threads
/// storing 8 consecutive groups of one row still hit 32 banks), and gives the 8 groups of four
/// rows that a warp reads one column of 8 different banks.
#[inline(always)]
fn swizzled(r: usize, c: usize) -> usize {
    r * TILE_64 as usize + 4 * ((c / 4) ^ ((r / 4) % 8)) + c % 4
}

/// The `64 x 64` tile of `a` at block `(bx, by)` written transposed into `b`, with 16-byte global
/// loads and stores.
///
/// With `t = 32 ty + tx`: the thread loads the vectors `v = t + 256 k`, `k < 4` (row `v / 16` of
/// the tile, floats `4 (v % 16) ..` of it: a warp reads two rows of 256 contiguous bytes), all
/// four before the first store, and stores each whole into the swizzled tile (see `swizzled`).
/// After a barrier, warp `w`, pass `k` (`u = w + 8 k`) takes the 4 columns `4 (u % 16) ..` and
/// 32 rows `32 (u / 16) ..` of the tile: lane `l` reads rows `4 q .. 4 q + 4` (`q` the 8 row
/// groups of the pass, `l % 8`) of column `l / 8` of them (four 4-byte reads, 32 banks per read),
/// and writes them as one vector to `b`: a warp writes 128 contiguous bytes of each of 4 rows of
/// `b`. Vectors outside the matrix are neither read nor written (with `rows` and `cols`
/// multiples of 4, a vector is wholly inside or wholly outside).
///
/// Global memory: reads and writes `4 rows cols` bytes each (minimum traffic `8 rows cols`),
/// every access 16 bytes. Launch: 2-D blocks of exactly [`TILE`] x [`BLOCK_ROWS`] threads,
/// `ceil(cols / 64)` x `ceil(rows / 64)` blocks, [`VEC4_64_SHARED_BYTES`] of dynamic shared
/// memory.
///
/// # Safety
/// `a` and `b` hold `rows * cols` floats of device memory each, 16-byte aligned, and do not
/// overlap; `rows % 4 == 0` and `cols % 4 == 0` (the host runs
/// [`transpose_tiled_64`](fn@transpose_tiled_64) otherwise).
// Barriers: one, between the tile's stores and its loads (as `transpose_tiled`).
#[kernel(block(TILE * BLOCK_ROWS), barriers(1))]
pub unsafe fn transpose_vec4_64(a: *const f32, b: *mut f32, rows: usize, cols: usize) {
    let tile = shared::dynamic::<f32>();
    let t = thread::thread_idx_y() as usize * TILE as usize + thread::thread_idx_x() as usize;
    let side = TILE_64 as usize;
    let groups = side / 4;
    let (row0, col0) = (
        thread::block_idx_y() as usize * side,
        thread::block_idx_x() as usize * side,
    );
    // Vector `k` of this thread: row `v / 16` of the tile, floats `4 (v % 16) ..`.
    let place = |k: usize| {
        let v = t + k * THREADS;
        (v / groups, 4 * (v % groups))
    };
    let fetch = |k: usize| {
        let (r, c) = place(k);
        let (r, c) = (row0 + r, col0 + c);
        if r < rows && c < cols {
            // SAFETY: `r < rows`, `c + 3 < cols` (`cols % 4 == 0`); `r * cols + c` is a multiple
            // of 4 and the base 16-byte aligned.
            unsafe { vector::load4(a, r * cols + c) }
        } else {
            F4::ZERO
        }
    };
    // Four named values rather than an array, which LLVM kept in local memory here.
    let held = (fetch(0), fetch(1), fetch(2), fetch(3));
    let keep = |k: usize, vec: F4| {
        let (r, c) = place(k);
        // Rebuilt from its floats: a vector passed through whole is copied as two 8-byte halves
        // by way of local memory.
        let [x0, x1, x2, x3] = vec.0;
        let vec = F4([f32::from_bits(x0.to_bits()), x1, x2, x3]);
        // SAFETY: a whole group of row `r < 64`, 16-byte aligned in the 16-byte aligned tile.
        // Slots outside the matrix get zeros that no thread reads back.
        unsafe { vector::store4(tile, swizzled(r, c), vec) };
    };
    keep(0, held.0);
    keep(1, held.1);
    keep(2, held.2);
    keep(3, held.3);
    thread::sync_threads();
    let (warp, lane) = (t / TILE as usize, t % TILE as usize);
    let warps = THREADS / TILE as usize;
    for k in 0..VECTORS_PER_THREAD {
        let u = warp + k * warps;
        // Column `c` of the tile (a row of `b`), rows `r .. r + 4` (4 floats of that row of `b`).
        let c = 4 * (u % groups) + lane / 8;
        let r = 32 * (u / groups) + 4 * (lane % 8);
        if col0 + c < cols && row0 + r < rows {
            // SAFETY: the four slots were stored before the barrier; `(col0 + c) * rows + row0 +
            // r + 3 < rows * cols` (`rows % 4 == 0`), a multiple of 4, so 16-byte aligned.
            unsafe {
                let out = F4([
                    mem::load(tile, swizzled(r, c)),
                    mem::load(tile, swizzled(r + 1, c)),
                    mem::load(tile, swizzled(r + 2, c)),
                    mem::load(tile, swizzled(r + 3, c)),
                ]);
                vector::store4(b, (col0 + c) * rows + row0 + r, out);
            }
        }
    }
}
