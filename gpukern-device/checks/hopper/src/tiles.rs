//! Tiles for one `wgmma.m64n64k64` product on one warpgroup: a `64 x 64` bf16 tile of `A`
//! (K-major) and one of `B` (N-major), each 8 KiB of 128-byte rows in the 128-byte swizzle, their
//! descriptors, and the warpgroup's `64 x 64` f32 result stored from the accumulator layout.

use gpukern_device::{bf16, mem, shared, tma, wgmma};

/// Bytes of one `64 x 64` bf16 tile.
pub const TILE_BYTES: usize = 64 * 64 * 2;
/// Alignment of a 128-byte-swizzled tile (8 rows of 128 bytes).
pub const ALIGN: usize = 1024;

/// The byte `offset` bytes past the first 1024-byte aligned byte of dynamic shared memory (the
/// launch gives [`ALIGN`] bytes of slack for the padding).
pub fn aligned(offset: usize) -> *mut u8 {
    let base = shared::dynamic::<u8>();
    let pad = (ALIGN - wgmma::shared_address(base) as usize % ALIGN) % ALIGN;
    base.wrapping_add(pad + offset)
}

/// The four descriptors of a K-major `64 x 64` tile of `A` at shared-window address `start`, one
/// per step of 16 along `k` (32 bytes apart); `sbo` the distance of 8-row groups (1024 for a
/// dense tile).
pub fn a_descriptors(start: u32, sbo: u32) -> [u64; 4] {
    core::array::from_fn(|j| wgmma::desc_sw128(start + 32 * j as u32, 16, sbo))
}

/// The four descriptors of an N-major `64 x 64` tile of `B` at `start`, one per step of 16 rows
/// along `k` (2 KiB apart); 8-row groups 1024 bytes apart.
pub fn b_descriptors(start: u32) -> [u64; 4] {
    core::array::from_fn(|j| wgmma::desc_sw128(start + 16 * 128 * j as u32, TILE_BYTES as u32, 1024))
}

/// Thread `t` of the warpgroup (`t = threadIdx.x % 128`) copies its 16 pairs of the row-major
/// `64 x 64` bf16 matrix `src` to the swizzled tile at `dst` (1024-byte aligned), one 4-byte
/// store per pair.
///
/// # Safety
/// `src` holds 4096 bf16, 4-byte aligned; `dst` is [`TILE_BYTES`] of shared memory.
pub unsafe fn fill_tile(src: *const bf16, dst: *mut u8) {
    let t = (gpukern_device::thread::thread_idx_x() % 128) as usize;
    for i in 0..16 {
        let pair = 16 * t + i;
        let (row, col) = (2 * pair / 64, 2 * pair % 64);
        // SAFETY: the caller's contract; the swizzle keeps a pair inside its 16-byte chunk.
        unsafe {
            let v: u32 = mem::load(src.cast::<u32>(), pair);
            mem::store(
                dst.wrapping_add(tma::swizzle_128b(row * 128 + 2 * col))
                    .cast::<u32>(),
                0,
                v,
            );
        }
    }
}

/// Thread `t` of the warpgroup stores its 32 accumulators of the `64 x 64` result to the
/// row-major `c`, the rows below `rows` only (the `m64nNk16` layout: `acc[i]` is row
/// `16 w + g + 8 ((i / 2) % 2)`, column `8 (i / 4) + 2 q + i % 2`).
///
/// # Safety
/// `c` holds `64 * 64` floats.
pub unsafe fn store_result(c: *mut f32, acc: &[f32; 32], rows: usize) {
    let t = (gpukern_device::thread::thread_idx_x() % 128) as usize;
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    for (i, &v) in acc.iter().enumerate() {
        let row = 16 * w + g + 8 * ((i / 2) % 2);
        let col = 8 * (i / 4) + 2 * q + i % 2;
        if row < rows {
            // SAFETY: the caller's contract; `row, col < 64`.
            unsafe { mem::store(c, 64 * row + col, v) };
        }
    }
}
