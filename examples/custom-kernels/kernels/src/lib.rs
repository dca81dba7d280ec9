//! The kernels of the two CUDA tutorials gpukern grew from, written as a newcomer would write
//! them in Rust: one thread per element, blocks and grids, 2-D indices, shared memory with
//! barriers, atomics, and printing from the device.
//!
//! On `nvptx64` this crate is `no_std` and each `#[kernel]` is a PTX entry point; on the host
//! each kernel is a plain `unsafe fn` the simulator runs, with a generated launcher
//! (`kernels::increment_by_one::launch`) next to it.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

use gpukern_device::atomic::{self, Scope};
use gpukern_device::convert::Float;
use gpukern_device::shared::Array;
use gpukern_device::{bf16, kernel, mem, print, thread};

/// Threads per block of the 1-D kernels (and the shared memory of [`block_sum`](fn@block_sum)).
pub const BLOCK: u32 = 256;

/// `x[i] += 1` for `i < n`: one thread per element.
///
/// Launch: `ceil(n / BLOCK)` blocks of [`BLOCK`] threads. Traffic: 8 bytes per element.
///
/// # Safety
/// `x` holds at least `n` elements.
#[kernel]
pub unsafe fn increment_by_one(x: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and `x` holds `n` elements.
        unsafe { mem::store(x, i, mem::load(x, i) + 1.0) }
    }
}

/// Grayscale of an RGB image: one thread per pixel, `gray = (77 r + 150 g + 29 b + 128) / 256`
/// (integer weights that sum to 256, so the GPU and the CPU agree exactly).
///
/// Launch: a 2-D grid of 16 x 16 blocks covering `width x height` (x walks columns). Traffic:
/// 3 bytes read and 1 written per pixel.
///
/// # Safety
/// `rgb` holds `3 * width * height` bytes (row-major, RGB interleaved), `gray` `width * height`.
#[kernel]
pub unsafe fn grayscale(rgb: *const u8, gray: *mut u8, width: usize, height: usize) {
    let (col, row) = thread::index_2d();
    if col < width && row < height {
        let pixel = row * width + col;
        // SAFETY: `pixel < width * height`, so `3 * pixel + 2 < 3 * width * height`.
        unsafe {
            let r = mem::load(rgb, 3 * pixel) as u32;
            let g = mem::load(rgb, 3 * pixel + 1) as u32;
            let b = mem::load(rgb, 3 * pixel + 2) as u32;
            mem::store(gray, pixel, ((77 * r + 150 * g + 29 * b + 128) >> 8) as u8);
        }
    }
}

/// `y[i] = x[i] * factor` for `i < n`, in the element type `T` (f32, bf16 or f16; the product
/// in f32, rounded once to `T`): one thread per element. Written once, generic over `T`: one PTX
/// entry per instance (`scale_f32`, `scale_bf16`, `scale_f16`), launched as
/// `kernels::scale::<bf16>::launch(..)`.
///
/// Launch: `ceil(n / BLOCK)` blocks of [`BLOCK`] threads. Traffic: `2 size_of::<T>()` bytes per
/// element.
///
/// # Safety
/// `x` and `y` hold at least `n` elements.
#[kernel(instances(f32, bf16, gpukern_device::f16), block(BLOCK), barriers(0))]
pub unsafe fn scale<T: Float>(x: *const T, y: *mut T, factor: f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and both hold `n` elements.
        unsafe { mem::store(y, i, T::from_f32(mem::load(x, i).to_f32() * factor)) }
    }
}

/// The sum of each block's [`BLOCK`] elements of `x`, into `partial[block]`: each thread loads
/// one element into a shared array (`sums`, declared in the attribute: the launcher adds its
/// 1 KiB to the launch), then the block halves the active threads at each step, a barrier
/// between steps, until thread 0 holds the sum.
///
/// Launch: `ceil(n / BLOCK)` blocks of [`BLOCK`] threads. Traffic: 4 bytes per element, 4 per
/// block.
///
/// # Safety
/// `x` holds `n` elements, `partial` one per block; the launch is as above.
#[kernel(shared(sums: Array<f32, { BLOCK as usize }>), block(BLOCK), barriers(2))]
pub unsafe fn block_sum(x: *const f32, partial: *mut f32, n: usize) {
    let tid = thread::thread_idx_x() as usize;
    let i = thread::index_1d();
    // SAFETY: `tid < BLOCK`, the extent of `sums`; `i < n` is checked.
    unsafe {
        sums.store(tid, if i < n { mem::load(x, i) } else { 0.0 });
        thread::sync_threads();
        let mut active = thread::block_dim_x() as usize / 2;
        while active > 0 {
            if tid < active {
                sums.store(tid, sums.load(tid) + sums.load(tid + active));
            }
            thread::sync_threads();
            active /= 2;
        }
        if tid == 0 {
            mem::store(partial, thread::block_idx_x() as usize, sums.load(0));
        }
    }
}

/// `bins[x[i] % nbins] += 1` for every `i < n`: one thread per element, an atomic add per
/// element (two threads may hit the same bin at once; a plain `+=` would lose counts).
///
/// Launch: `ceil(n / BLOCK)` blocks of [`BLOCK`] threads. Traffic: 4 bytes read per element and
/// one atomic on `bins`.
///
/// # Safety
/// `x` holds `n` elements, `bins` `nbins >= 1`.
#[kernel]
pub unsafe fn histogram(x: *const u32, bins: *mut u32, n: usize, nbins: u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; the bin index is below `nbins`.
        unsafe {
            let bin = mem::load(x, i) % nbins;
            atomic::add(bins, bin as usize, 1u32, Scope::Device);
        }
    }
}

/// Thread 0 of each block says hello, with its block index and the grid's size.
///
/// Launch: any grid and block.
///
/// # Safety
/// None beyond a launch's.
#[kernel]
pub unsafe fn hello() {
    if thread::thread_idx_x() == 0 {
        print!(
            "hello from block %u of %u\n",
            thread::block_idx_x(),
            thread::grid_dim_x()
        );
    }
}
