//! [`map`]: an element-wise kernel's whole loop, so that a user writes the per-element function
//! and gets the library's access pattern: a grid-stride loop over vectors of `N` lanes, each
//! thread loading [`MAP_UNROLL`] vectors before it computes and stores any, the ragged end
//! handled lane by lane.

use super::access::{load_hinted, store_hinted};
use super::chunk::Chunk;
use super::hint::{LoadHint, StoreHint};
use super::lane::Lane;
use crate::convert::Float;
use crate::thread;

/// Vectors each thread of a [`map`] loads before it computes any: with 16-byte vectors, 64 bytes
/// of loads in flight per thread, which at any usual occupancy is more than the DRAM's latency
/// asks for (Little's law: about 32 KB in flight per multiprocessor on an H200).
pub const MAP_UNROLL: usize = 4;
const _: () = assert!(
    MAP_UNROLL == 4,
    "map_hinted's whole sweep is written out for four vectors"
);

/// The blocks that let one sweep of a [`map`] over `n` elements in vectors of `lanes`, with
/// blocks of `block` threads, cover the array once (at least 1): `ceil(n / (lanes * block *
/// MAP_UNROLL))`. Any other grid is correct too (the loop strides over the grid); fewer blocks
/// make each thread go round the loop more often.
pub const fn map_blocks(n: usize, lanes: usize, block: u32) -> u32 {
    let per_block = lanes * block as usize * MAP_UNROLL;
    let blocks = n.div_ceil(per_block);
    if blocks == 0 {
        1
    } else if blocks > u32::MAX as usize {
        u32::MAX
    } else {
        blocks as u32
    }
}

/// `y[i] = f(x[i])` for `i < n`, `N` elements at a time: each thread calls `f(chunk, lanes)`
/// with a [`Chunk`] (where the lanes are: `chunk.start`, `chunk.column(cols)`, and
/// [`Chunk::load_columns`] for an operand broadcast down the rows) and the chunk's elements of
/// `x` widened to f32, and stores what it returns rounded to `U` (lanes past `n` are 0 going in
/// and dropped coming out).
///
/// What one thread does: in a grid-stride loop over the `ceil(n / N)` chunks, thread `t` of block
/// `b` takes chunks `(b * MAP_UNROLL + k) * blockDim.x + t` for `k < MAP_UNROLL` (each `k`
/// coalesced across the warp), loads all of them (one vector access per 16 bytes, unchecked
/// where the whole sweep lies inside the array), then computes and stores each. Global memory:
/// `size_of::<T>()` bytes read and `size_of::<U>()` written per element, each once.
///
/// Launch: 1-D blocks of any size, any grid ([`map_blocks`] covers the array in one sweep).
///
/// # Safety
/// `x` and `y` hold at least `n` elements of global memory, each 16-byte aligned (every buffer
/// gpukern allocates is); `y` does not overlap `x`; `N * size_of::<T>()` and
/// `N * size_of::<U>()` are each 4, 8, 16, 32 or 64 (a compile error otherwise).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn map<T, U, const N: usize>(
    x: *const T,
    y: *mut U,
    n: usize,
    f: impl Fn(Chunk<N>, [f32; N]) -> [f32; N],
) where
    T: Lane + Float,
    U: Lane + Float,
{
    // SAFETY: forwarded contract.
    unsafe { map_hinted(x, y, n, LoadHint::Default, StoreHint::Default, f) }
}

/// [`map`] with cache hints on `x`'s loads and `y`'s stores (e.g. [`LoadHint::Streaming`] for
/// an input read once); the same loop, values and traffic.
///
/// # Safety
/// As [`map`], and the contract of `load` ([`LoadHint::ReadOnly`]: nothing writes `x` during the
/// kernel).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn map_hinted<T, U, const N: usize>(
    x: *const T,
    y: *mut U,
    n: usize,
    load: LoadHint,
    store: StoreHint,
    f: impl Fn(Chunk<N>, [f32; N]) -> [f32; N],
) where
    T: Lane + Float,
    U: Lane + Float,
{
    let chunks = n.div_ceil(N);
    let threads = thread::block_dim_x() as usize;
    let stride = thread::grid_dim_x() as usize * threads * MAP_UNROLL;
    let mut first = thread::block_idx_x() as usize * threads * MAP_UNROLL + thread::thread_idx_x() as usize;
    while first < chunks {
        let last = first + (MAP_UNROLL - 1) * threads;
        if (last + 1) * N <= n {
            // The whole sweep inside the array: every chunk whole, all loads before any store,
            // no checks.
            let at = |k: usize| (first + k * threads) * N;
            // SAFETY (the four loads): chunk `first + k * threads <= last` lies inside the array.
            let [v0, v1, v2, v3]: [[T; N]; MAP_UNROLL] =
                core::array::from_fn(|k| unsafe { load_hinted(x, at(k), load) });
            // Written out, not a loop: LLVM leaves a loop with a large body rolled, and the four
            // vectors would then go through local memory.
            // SAFETY (the four stores): as for the loads.
            unsafe {
                finish(at(0), v0, &f, y, store);
                finish(at(1), v1, &f, y, store);
                finish(at(2), v2, &f, y, store);
                finish(at(3), v3, &f, y, store);
            }
        } else {
            // The last sweep: chunk by chunk, the ragged one lane by lane.
            for k in 0..MAP_UNROLL {
                let c = first + k * threads;
                if c < chunks {
                    let chunk = Chunk::<N>::of(c, n);
                    // SAFETY: chunk `c` lies in (or, the last one, ends) the array.
                    let lanes = unsafe { chunk.load(x, load) };
                    let out = f(chunk, lanes.map(Float::to_f32)).map(U::from_f32);
                    // SAFETY: as for the load.
                    unsafe { chunk.store(y, out, store) };
                }
            }
        }
        first += stride;
    }
}

/// Computes and stores the whole chunk at `start`: `y[start..start + N] = f(x's lanes)`.
///
/// # Safety
/// `y` holds `start + N` elements of global memory, aligned for the vector.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn finish<T, U, const N: usize>(
    start: usize,
    lanes: [T; N],
    f: &impl Fn(Chunk<N>, [f32; N]) -> [f32; N],
    y: *mut U,
    store: StoreHint,
) where
    T: Lane + Float,
    U: Lane + Float,
{
    let out = f(Chunk { start, len: N }, lanes.map(Float::to_f32)).map(U::from_f32);
    // SAFETY: the caller's contract.
    unsafe { store_hinted(y, start, out, store) };
}
