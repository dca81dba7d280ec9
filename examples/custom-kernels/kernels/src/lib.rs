//! The kernels of the two CUDA tutorials gpukern grew from, written as a newcomer would write
//! them in Rust: one thread per element, blocks and grids, 2-D indices, shared memory with
//! barriers, atomics, and printing from the device; then a grid-stride loop with a safe (checked)
//! launcher, and a struct of your own as buffer element and by-value parameter.
//!
//! On `nvptx64` this crate is `no_std` and each `#[kernel]` is a PTX entry point; on the host
//! each kernel is a plain `unsafe fn` the simulator runs, with a generated launcher
//! (`kernels::increment_by_one::launch`) next to it.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

use gpukern_device::atomic::{self, Scope};
use gpukern_device::convert::Float;
use gpukern_device::shared::Array;
use gpukern_device::{DeviceCopy, bf16, kernel, mem, print, thread};

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

/// `y[i] = a * x[i] + y[i]` for every `i < n`, in a grid-stride loop: each thread takes
/// `index_1d()`, then steps by the grid's size, so that any grid covers any `n` (launch it with
/// `module.grid_stride(..)`: as many blocks as the device holds at once).
///
/// Each pointer declares, with `#[len(n)]`, that the kernel touches its first `n` elements and no
/// more: the launcher is then safe (it refuses a shorter buffer), and the simulator reports any
/// access past `n`.
///
/// Launch: any 1-D grid. Traffic: 12 bytes per element.
///
/// # Safety
/// `x` and `y` hold at least `n` elements (what the `#[len(n)]`s declare).
#[kernel]
pub unsafe fn saxpy(a: f32, #[len(n)] x: *const f32, #[len(n)] y: *mut f32, n: usize) {
    let mut i = thread::index_1d();
    while i < n {
        // SAFETY: `i < n`, and both hold `n` elements.
        unsafe { mem::store(y, i, a * mem::load(x, i) + mem::load(y, i)) }
        i += thread::grid_size_1d();
    }
}

/// A particle: position and velocity, 24 bytes with no padding (`#[derive(DeviceCopy)]` checks
/// it). The host and the device lay it out alike (`#[repr(C)]`): a `DeviceVec<Particle>` holds
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct Particle {
    /// Position `(x, y, z)`.
    pub pos: [f32; 3],
    /// Velocity `(x, y, z)`.
    pub vel: [f32; 3],
}

/// One time step's parameters, passed to the kernel by value (a struct parameter: rustc passes
/// it as one `.param .align 4 .b8 step[16]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct Step {
    /// Seconds per step.
    pub dt: f32,
    /// Downward acceleration (along `-z`).
    pub gravity: f32,
    /// Height of the floor: a particle below it bounces (its `z` velocity reversed, `damping`
    /// kept).
    pub floor: f32,
    /// Fraction of the speed a bounce keeps.
    pub damping: f32,
}

impl Step {
    /// The step on the CPU, the kernel's reference: the same f32 operations in the same order.
    pub fn apply(&self, p: Particle) -> Particle {
        let mut q = p;
        q.vel[2] -= self.gravity * self.dt;
        for k in 0..3 {
            q.pos[k] += q.vel[k] * self.dt;
        }
        if q.pos[2] < self.floor {
            q.pos[2] = self.floor;
            q.vel[2] = -q.vel[2] * self.damping;
        }
        q
    }
}

/// Advances every particle `i < n` by one `step`: one thread per particle, reading and writing
/// its 24 bytes ([`Step::apply`] is the same on the CPU). A checked launch: `#[len(n)]`.
///
/// Launch: `ceil(n / BLOCK)` blocks of [`BLOCK`] threads (or more). Traffic: 48 bytes per particle.
///
/// # Safety
/// `particles` holds at least `n` elements.
#[kernel]
pub unsafe fn advance(#[len(n)] particles: *mut Particle, step: Step, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`, and `particles` holds `n`.
        unsafe { mem::store(particles, i, step.apply(mem::load(particles, i))) }
    }
}
