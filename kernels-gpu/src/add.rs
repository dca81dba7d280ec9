//! Element-wise kernels: the first tutorial's thread-indexed vector add and `increment_by_one`,
//! then `add_vec4` and `increment_by_one_vec4`, the same with 16-byte accesses, and their
//! `_streaming` twins, which also mark every access evict-first (`.cs`)
//! ([`add_vec4_loop`](fn@add_vec4_loop), [`increment_by_one_vec4_loop`](fn@increment_by_one_vec4_loop));
//! then the one-pass tile candidates ([`add_vec4_tile`](fn@add_vec4_tile): `add_vec4_x2` ...,
//! [`increment_by_one_vec4_tile`](fn@increment_by_one_vec4_tile): ... `increment_by_one_vec4_x4_cs_stores`):
//! `U` vectors per thread in blocks of `B` threads, every load of a full tile unchecked and
//! issued before any store, a grid that covers the array once (not persistent).
//!
//! Memory traffic: `add` reads 8 and writes 4 bytes per element, `increment_by_one` reads and
//! writes 4; both are bound by memory bandwidth.

use crate::gpu::vector::{self, F4};
use crate::gpu::{mem, thread};
use crate::kernel;

/// Threads per block of the element-wise kernels: a multiple of the warp size that keeps
/// enough blocks per multiprocessor; 256 is the usual choice for a memory-bound kernel.
pub const BLOCK: u32 = 256;

/// `c[i] = a[i] + b[i]` for `i < n`.
///
/// One thread per element: thread `i = blockIdx.x * blockDim.x + threadIdx.x` reads `a[i]` and
/// `b[i]` from global memory and writes `c[i]`; threads past `n` do nothing.
///
/// # Safety
/// `a`, `b` and `c` point to at least `n` floats of device memory; `c` does not overlap `a` or `b`.
// Barriers: none.
#[kernel(block(BLOCK), barriers(0))]
pub unsafe fn add(a: *const f32, b: *const f32, c: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and the buffers hold `n` floats.
        unsafe { mem::store(c, i, mem::load(a, i) + mem::load(b, i)) }
    }
}

/// `x[i] += 1` for `i < n`, in place.
///
/// One thread per element: thread `i` reads and writes `x[i]` in global memory.
///
/// # Safety
/// `x` points to at least `n` floats of device memory.
// Barriers: none.
#[kernel(block(BLOCK), barriers(0))]
pub unsafe fn increment_by_one(x: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and the buffer holds `n` floats.
        unsafe { mem::store(x, i, mem::load(x, i) + 1.0) }
    }
}

/// Vectors of 4 floats each thread of `add_vec4` ([`add_vec4_loop`](fn@add_vec4_loop)) loads before it adds any: 4 x (16 + 16) bytes
/// of loads in flight per thread. Little's law asks about 32 KB in flight per multiprocessor to
/// cover the H200's DRAM latency at full bandwidth; with 128 bytes per thread a multiprocessor
/// has several times that at any occupancy the registers allow.
pub const VEC_UNROLL: usize = 4;

/// Vectors of 4 floats one block of `add_vec4` ([`add_vec4_loop`](fn@add_vec4_loop)) covers per sweep of its grid-stride loop.
pub const VEC_TILE: usize = BLOCK as usize * VEC_UNROLL;

/// The grid-stride loop of the `_vec4` kernels: this thread's first vector (block `g` starts at
/// vector `g * VEC_TILE`) and the step to its next sweep (the whole grid's `gridDim.x *
/// VEC_TILE` vectors). The kernels take the launch's block size as the constant [`BLOCK`]:
/// vector `k` of a sweep then lies `16 * k * BLOCK` bytes past vector 0, an immediate offset of
/// the load, instead of one more 64-bit address per `k`.
#[inline(always)]
fn vec4_sweep() -> (usize, usize) {
    let tile = VEC_TILE;
    let stride = thread::grid_dim_x() as usize * tile;
    let start = thread::block_idx_x() as usize * tile + thread::thread_idx_x() as usize;
    (start, stride)
}

/// `c[i] = a[i] + b[i]` for `i < n`, with 16-byte accesses, streaming (`.cs`) with `STREAMING`.
///
/// The arrays are taken as `n / 4` vectors of four floats plus a scalar tail of `n % 4`. Block
/// `g` starts at vector `g * VEC_TILE`; thread `tid` loads vectors `start + tid + k * BLOCK`
/// for `k < VEC_UNROLL` of `a` and of `b` (all eight loads issued before the first add, each `k`
/// coalesced across the warp into 512 contiguous bytes), then stores the four sums, and moves on by
/// the whole grid (`gridDim.x * VEC_TILE` vectors): a grid-stride loop, so any grid covers any
/// `n`. The first `n % 4` threads of the grid then add the tail elements one by one.
///
/// Global memory: reads 8 and writes 4 bytes per element, each exactly once; one `ld.v4` per 4
/// elements and operand instead of four `ld`, which is what lets a memory-bound kernel reach the
/// DRAM's bandwidth with fewer instructions and more bytes in flight per thread.
///
/// Launch: 1-D blocks of exactly [`BLOCK`] threads (the kernel relies on it); the host launches
/// `ceil(n / 4 / VEC_TILE)` blocks (at least one, for the tail), so the loop runs once per thread
/// and the hardware balances the blocks across multiprocessors, or, for the persistent plans, no
/// more blocks than are resident on the device at once, each then going round the loop several
/// times; no dynamic shared memory.
///
/// Instances, one PTX entry each:
/// * `add_vec4`: plain loads and stores;
/// * `add_vec4_streaming` (`STREAMING`): every 16-byte access marked streaming (`ld.global.cs`,
///   `st.global.cs`: evict first), so that the operands, each touched once, displace less of the
///   L2; the same loop, launch and traffic. A candidate the benchmark weighs against `add_vec4`.
///
/// # Safety
/// `a`, `b` and `c` point to at least `n` floats of device memory, each 16-byte aligned (the host
/// falls back to [`add`](fn@add) otherwise); `c` does not overlap `a` or `b`.
// Barriers: none.
#[kernel(
    instances(add_vec4 = false, add_vec4_streaming = true),
    block(BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn add_vec4_loop<const STREAMING: bool>(a: *const f32, b: *const f32, c: *mut f32, n: usize) {
    let vectors = n / 4;
    let threads = BLOCK as usize;
    let (mut start, stride) = vec4_sweep();
    while start < vectors {
        let mut va = [F4::ZERO; VEC_UNROLL];
        let mut vb = [F4::ZERO; VEC_UNROLL];
        for k in 0..VEC_UNROLL {
            let v = start + k * threads;
            if v < vectors {
                // SAFETY: vector `v < n / 4` holds floats `4v..4v + 4 <= n`, 16-byte aligned
                // because the bases are.
                unsafe {
                    va[k] = load4::<STREAMING>(a, 4 * v);
                    vb[k] = load4::<STREAMING>(b, 4 * v);
                }
            }
        }
        for k in 0..VEC_UNROLL {
            let v = start + k * threads;
            if v < vectors {
                let (p, q) = (va[k].0, vb[k].0);
                let sum = F4([p[0] + q[0], p[1] + q[1], p[2] + q[2], p[3] + q[3]]);
                // SAFETY: as for the loads.
                unsafe { store4::<STREAMING>(c, 4 * v, sum) };
            }
        }
        start += stride;
    }
    let i = 4 * vectors + thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        unsafe { mem::store(c, i, mem::load(a, i) + mem::load(b, i)) }
    }
}

/// `x[i] += 1` for `i < n`, in place, with 16-byte accesses, streaming (`.cs`) with `STREAMING`:
/// [`add_vec4_loop`](fn@add_vec4_loop)'s loop with one operand.
///
/// The array is taken as `n / 4` vectors of four floats plus a scalar tail of `n % 4`. Block `g`
/// starts at vector `g * VEC_TILE`; thread `tid` loads vectors `start + tid + k * BLOCK` for
/// `k < VEC_UNROLL` (all four loads issued before the first add, each coalesced across the warp),
/// then stores the four incremented vectors back where it read them, and moves on by the whole
/// grid. The first `n % 4` threads of the grid then increment the tail elements one by one.
///
/// Global memory: reads and writes 4 bytes per element, each exactly once; each element is read
/// and written by the same thread, so no two threads touch one address.
///
/// Launch: as [`add_vec4_loop`](fn@add_vec4_loop).
///
/// Instances, one PTX entry each:
/// * `increment_by_one_vec4`: plain loads and stores;
/// * `increment_by_one_vec4_streaming` (`STREAMING`): every 16-byte access marked streaming
///   (`.cs`, evict first); the same loop, launch and traffic (reads and writes 4 bytes per
///   element).
///
/// # Safety
/// `x` points to at least `n` floats of device memory, 16-byte aligned (the host falls back to
/// [`increment_by_one`](fn@increment_by_one) otherwise).
// Barriers: none.
#[kernel(
    instances(increment_by_one_vec4 = false, increment_by_one_vec4_streaming = true),
    block(BLOCK),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn increment_by_one_vec4_loop<const STREAMING: bool>(x: *mut f32, n: usize) {
    let vectors = n / 4;
    let threads = BLOCK as usize;
    let (mut start, stride) = vec4_sweep();
    while start < vectors {
        let mut vx = [F4::ZERO; VEC_UNROLL];
        for (k, slot) in vx.iter_mut().enumerate() {
            let v = start + k * threads;
            if v < vectors {
                // SAFETY: vector `v < n / 4` holds floats `4v..4v + 4 <= n`, 16-byte aligned
                // because the base is.
                *slot = unsafe { load4::<STREAMING>(x, 4 * v) };
            }
        }
        for (k, loaded) in vx.iter().enumerate() {
            let v = start + k * threads;
            if v < vectors {
                let p = loaded.0;
                // SAFETY: as for the loads.
                unsafe {
                    store4::<STREAMING>(x, 4 * v, F4([p[0] + 1.0, p[1] + 1.0, p[2] + 1.0, p[3] + 1.0]))
                };
            }
        }
        start += stride;
    }
    let i = 4 * vectors + thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        unsafe { mem::store(x, i, mem::load(x, i) + 1.0) }
    }
}

/// One 16-byte load, streaming (`.cs`) when `STREAMING`.
///
/// # Safety
/// As [`vector::load4`], in global memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn load4<const STREAMING: bool>(p: *const f32, i: usize) -> F4 {
    // SAFETY: forwarded contract.
    unsafe {
        if STREAMING {
            vector::load4_streaming(p, i)
        } else {
            vector::load4(p, i)
        }
    }
}

/// One 16-byte store, streaming (`.cs`) when `STREAMING`.
///
/// # Safety
/// As [`vector::store4`], in global memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn store4<const STREAMING: bool>(p: *mut f32, i: usize, v: F4) {
    // SAFETY: forwarded contract.
    unsafe {
        if STREAMING {
            vector::store4_streaming(p, i, v)
        } else {
            vector::store4(p, i, v)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The one-pass tile candidates: the benchmark weighs them against `_vec4` side by side.

/// Threads per block of the 512-thread candidates (`add_vec4_b512`, `increment_by_one_vec4_b512`).
pub const BLOCK_512: u32 = 512;

/// `(threads per block, vectors per thread)` of each tile candidate, by its suffix: what the host
/// sizes the grid with (`ceil(n / 4 / (threads * vectors))` blocks).
pub const TILE_X2: (u32, usize) = (BLOCK, 2);
/// See [`TILE_X2`].
pub const TILE_X4: (u32, usize) = (BLOCK, 4);
/// See [`TILE_X2`].
pub const TILE_X8: (u32, usize) = (BLOCK, 8);
/// See [`TILE_X2`].
pub const TILE_B512: (u32, usize) = (BLOCK_512, 4);

/// The tile of the one-pass candidates: this thread's first vector, `B * U` vectors per block,
/// and the grid's stride (any grid covers any `n`; the host launches one pass).
#[inline(always)]
fn tile_sweep<const B: usize, const U: usize>() -> (usize, usize) {
    let tile = B * U;
    let stride = thread::grid_dim_x() as usize * tile;
    let start = thread::block_idx_x() as usize * tile + thread::thread_idx_x() as usize;
    (start, stride)
}

/// `c = a + b` with 16-byte accesses, `U` vectors per thread in blocks of `B` threads, one pass:
/// thread `tid` of block `g` takes vectors `g * B * U + tid + k * B`, `k < U`; where the whole
/// tile lies inside the array (all but the last block) the `2 U` loads are issued with no bounds
/// check, all before the first store; the last tile checks each vector. Stores are evict-first
/// (`.cs`) when `CS_STORES`. Then the scalar tail of `n % 4` elements, one per thread of the
/// grid's first threads, as [`add_vec4_loop`](fn@add_vec4_loop).
///
/// Global memory: reads 8 and writes 4 bytes per element, each once (minimum traffic `12 n`
/// bytes). Launch: `ceil(n / 4 / (B * U))` blocks of exactly `B` threads, no shared memory.
///
/// Instances (`B`, `U`, `CS_STORES`), the one-pass tile candidates, one PTX entry each:
/// * `add_vec4_x2` ([`TILE_X2`]: 256 threads, 2 vectors: 4 loads), `add_vec4_x4` ([`TILE_X4`]),
///   `add_vec4_x8` ([`TILE_X8`]: 16 loads, 256 bytes in flight per thread);
/// * `add_vec4_b512` ([`TILE_B512`]: 4 vectors in blocks of [`BLOCK_512`] threads);
/// * `add_vec4_x4_cs_stores`: `add_vec4_x4` with evict-first (`.cs`) stores and ordinary loads.
///
/// # Safety
/// As [`add_vec4_loop`](fn@add_vec4_loop), with 1-D blocks of exactly `B` threads.
// Barriers: none.
#[kernel(
    instances(
        add_vec4_x2 = (B256, 2, false),
        add_vec4_x4 = (B256, 4, false),
        add_vec4_x8 = (B256, 8, false),
        add_vec4_b512 = (B512, 4, false),
        add_vec4_x4_cs_stores = (B256, 4, true),
    ),
    block(B),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn add_vec4_tile<const B: usize, const U: usize, const CS_STORES: bool>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    n: usize,
) {
    let vectors = n / 4;
    let (mut start, stride) = tile_sweep::<B, U>();
    while start < vectors {
        let mut va = [F4::ZERO; U];
        let mut vb = [F4::ZERO; U];
        let full = start + (U - 1) * B < vectors;
        for k in 0..U {
            let v = start + k * B;
            if full || v < vectors {
                // SAFETY: vector `v < n / 4` holds floats `4v..4v + 4 <= n`, 16-byte aligned
                // because the bases are.
                unsafe {
                    va[k] = load4::<false>(a, 4 * v);
                    vb[k] = load4::<false>(b, 4 * v);
                }
            }
        }
        for k in 0..U {
            let v = start + k * B;
            if full || v < vectors {
                let (p, q) = (va[k].0, vb[k].0);
                let sum = F4([p[0] + q[0], p[1] + q[1], p[2] + q[2], p[3] + q[3]]);
                // SAFETY: as for the loads.
                unsafe { store4::<CS_STORES>(c, 4 * v, sum) };
            }
        }
        start += stride;
    }
    let i = 4 * vectors + thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        unsafe { mem::store(c, i, mem::load(a, i) + mem::load(b, i)) }
    }
}

/// `x += 1` in place with 16-byte accesses, `U` vectors per thread in blocks of `B` threads, one
/// pass: [`add_vec4_tile`](fn@add_vec4_tile) with one operand (`U` loads of a full tile
/// unchecked, all before the first store, the incremented vectors stored back where they were
/// read), then the scalar tail as [`increment_by_one_vec4_loop`](fn@increment_by_one_vec4_loop).
///
/// Global memory: reads and writes 4 bytes per element, each once (minimum traffic `8 n`
/// bytes). Launch: `ceil(n / 4 / (B * U))` blocks of exactly `B` threads, no shared memory.
///
/// Instances (`B`, `U`, `CS_STORES`), one PTX entry each:
/// * `increment_by_one_vec4_x2` ([`TILE_X2`]), `increment_by_one_vec4_x4` ([`TILE_X4`]),
///   `increment_by_one_vec4_x8` ([`TILE_X8`]: 128 bytes of loads in flight per thread);
/// * `increment_by_one_vec4_b512` ([`TILE_B512`]: blocks of [`BLOCK_512`] threads);
/// * `increment_by_one_vec4_x4_cs_stores`: the `_x4` kernel with evict-first (`.cs`) stores.
///
/// # Safety
/// As [`increment_by_one_vec4_loop`](fn@increment_by_one_vec4_loop), with 1-D blocks of exactly
/// `B` threads.
// Barriers: none.
#[kernel(
    instances(
        increment_by_one_vec4_x2 = (B256, 2, false),
        increment_by_one_vec4_x4 = (B256, 4, false),
        increment_by_one_vec4_x8 = (B256, 8, false),
        increment_by_one_vec4_b512 = (B512, 4, false),
        increment_by_one_vec4_x4_cs_stores = (B256, 4, true),
    ),
    block(B),
    barriers(0)
)]
#[inline(always)]
pub unsafe fn increment_by_one_vec4_tile<const B: usize, const U: usize, const CS_STORES: bool>(
    x: *mut f32,
    n: usize,
) {
    let vectors = n / 4;
    let (mut start, stride) = tile_sweep::<B, U>();
    while start < vectors {
        let mut vx = [F4::ZERO; U];
        let full = start + (U - 1) * B < vectors;
        for (k, slot) in vx.iter_mut().enumerate() {
            let v = start + k * B;
            if full || v < vectors {
                // SAFETY: vector `v < n / 4` holds floats `4v..4v + 4 <= n`, 16-byte aligned
                // because the base is.
                *slot = unsafe { load4::<false>(x, 4 * v) };
            }
        }
        for (k, loaded) in vx.iter().enumerate() {
            let v = start + k * B;
            if full || v < vectors {
                let p = loaded.0;
                let plus = F4([p[0] + 1.0, p[1] + 1.0, p[2] + 1.0, p[3] + 1.0]);
                // SAFETY: as for the loads.
                unsafe { store4::<CS_STORES>(x, 4 * v, plus) };
            }
        }
        start += stride;
    }
    let i = 4 * vectors + thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        unsafe { mem::store(x, i, mem::load(x, i) + 1.0) }
    }
}

/// Threads per block of [`BLOCK`]-thread candidates, as a `usize` for the const generics.
const B256: usize = BLOCK as usize;
/// Threads per block of the 512-thread candidates, as a `usize`.
const B512: usize = BLOCK_512 as usize;
