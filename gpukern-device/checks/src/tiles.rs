//! [`gpukern_device::tile::warp`] on the device: a GEMM of `mma.sync` warp tiles over any `m`,
//! `n` and `k` (ragged edges zero-filled by the copies), for the runner to compare with the f64
//! product of the same 16-bit inputs.

use gpukern_device::async_copy::{commit_group, wait_all};
use gpukern_device::tile::warp::{Acc, Half, Padded};
use gpukern_device::{bf16, f16, kernel, mem, shared, thread, warp};

/// Rows of `C` per block: 4 warps of 16.
pub const BM: usize = 64;
/// Columns of `C` per block: four `n8` accumulator tiles per warp.
pub const BN: usize = 32;
/// Step along `k`.
pub const BK: usize = 32;
/// Threads per block: 4 warps.
pub const THREADS: u32 = 128;
/// Dynamic shared memory of a launch: a tile of `A` and one of `B` (or `B^T`).
pub const SHARED_BYTES: u32 = (Padded::<bf16, BM, BK>::BYTES + Padded::<bf16, BK, BN>::BYTES) as u32;

/// `C = A B` (`transposed`: `C = A Bt^T`), f32 out: block `(bx, by)` computes the `64 x 32`
/// tile of `C` at `(64 by, 32 bx)`. Per step of 32 along `k` the block's threads copy a
/// `64 x 32` tile of `A` and a `32 x 32` tile of `B` (or of `B^T`) into shared memory with
/// `cp.async` (zeros past the matrices), wait and sync; warp `w` then loads its `A` fragments of
/// rows `16 w ..` and the `B` fragments of all 32 columns with `ldmatrix` and runs 8
/// `mma.sync.m16n8k16`; a second barrier before the next copies. At the end each lane stores its
/// accumulators inside `C`. Traffic: `A` read `ceil(n / 32)` times, `B` `ceil(m / 64)` times,
/// `C` written once.
///
/// # Safety
/// `a` is `m x k`, `b` is `k x n` (`transposed`: `n x k`), row-major, `k` (and, unless
/// `transposed`, `n`) a multiple of 8, 16-byte aligned; `c` holds `m x n` floats; blocks of
/// [`THREADS`] threads, a grid of `(ceil(n / 32), ceil(m / 64))`, [`SHARED_BYTES`] of dynamic
/// shared memory; sm_80 or later.
#[kernel(instances(warp_tile_gemm_bf16 = bf16, warp_tile_gemm_f16 = f16), block(THREADS), barriers(2))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn warp_tile_gemm<T: Half>(
    a: *const T,
    b: *const T,
    c: *mut f32,
    m: usize,
    n: usize,
    k: usize,
    transposed: bool,
) {
    type TileA<T> = Padded<T, BM, BK>;
    type TileB<T> = Padded<T, BK, BN>;
    let tid = thread::thread_idx_x() as usize;
    let (w, lane) = (tid / 32, warp::lane_id() as usize);
    let (row0, col0) = (
        thread::block_idx_y() as usize * BM,
        thread::block_idx_x() as usize * BN,
    );
    let s_a = shared::dynamic::<T>();
    let s_b = s_a.wrapping_add(TileA::<T>::ELEMENTS);
    let mut acc = [Acc::ZERO; 4];
    let mut k0 = 0;
    while k0 < k {
        // SAFETY: the launch's shared memory holds both tiles (16-byte aligned, `ELEMENTS` a
        // multiple of 8); they are read only after the wait and the barrier below; the matrices
        // of the contract.
        unsafe {
            TileA::<T>::copy_async(s_a, a, (m, k), (row0, k0), tid, THREADS as usize);
            if transposed {
                TileB::<T>::copy_async(s_b, b, (n, k), (col0, k0), tid, THREADS as usize);
            } else {
                TileB::<T>::copy_async(s_b, b, (k, n), (k0, col0), tid, THREADS as usize);
            }
        }
        commit_group();
        wait_all();
        thread::sync_threads();
        for kk in [0, 16] {
            // SAFETY: the whole warp, the same arguments in every lane; blocks inside the landed
            // tiles.
            let (fa, fb) = unsafe {
                let fa = TileA::<T>::a(s_a, 16 * w, kk);
                let (lo, hi) = if transposed {
                    (TileB::<T>::b_t(s_b, 0, kk), TileB::<T>::b_t(s_b, 16, kk))
                } else {
                    (TileB::<T>::b(s_b, kk, 0), TileB::<T>::b(s_b, kk, 16))
                };
                (fa, [lo[0], lo[1], hi[0], hi[1]])
            };
            for (j, f) in fb.iter().enumerate() {
                acc[j] = acc[j].mma::<T>(fa, *f);
            }
        }
        // The next copies overwrite the tiles: every warp is done with them first.
        thread::sync_threads();
        k0 += BK;
    }
    for (j, tile) in acc.iter().enumerate() {
        for (i, &v) in tile.0.iter().enumerate() {
            let (r, cc) = Acc::position(i, lane);
            let (row, col) = (row0 + 16 * w + r, col0 + 8 * j + cc);
            if row < m && col < n {
                // SAFETY: inside `c`.
                unsafe { mem::store(c, row * n + col, v) };
            }
        }
    }
}
