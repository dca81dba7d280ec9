//! [`Scratch`]: block-wide reductions and scans over any [`Shuffle`] value, with the shared
//! memory they need declared by their own type.

use crate::shared::Declared;
use crate::warp::{self, Shuffle};
use crate::{mem, thread};

/// The shared scratch of the block collectives over `T` in a block of `THREADS` threads: one
/// `T` per warp (`THREADS / 32` of them). A kernel declares it like any shared item, and its
/// methods are the collectives:
///
/// ```ignore
/// #[kernel(block(256), shared(scratch: block::Scratch<f32, 256>))]
/// pub unsafe fn row_sums(..) {
///     let total = unsafe { scratch.reduce(v, |a, b| a + b) };
/// }
/// ```
///
/// `THREADS` is the block's size (the product of its dimensions, a multiple of 32 up to 1024; the
/// simulator reports a launch with another); warps are runs of 32 linear thread indices (x
/// fastest). Every thread of the block calls each collective, at the same place.
#[derive(Debug)]
pub struct Scratch<T, const THREADS: usize> {
    ptr: *mut T,
}

impl<T, const THREADS: usize> Clone for Scratch<T, THREADS> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const THREADS: usize> Copy for Scratch<T, THREADS> {}

impl<T: Copy, const THREADS: usize> Declared for Scratch<T, THREADS> {
    const BYTES: usize = THREADS / 32 * core::mem::size_of::<T>();
    const ALIGN: usize = core::mem::align_of::<T>();
    unsafe fn at(at: *mut u8) -> Self {
        const {
            assert!(
                THREADS > 0 && THREADS <= 1024 && THREADS.is_multiple_of(32),
                "block::Scratch's THREADS is the block's size: a multiple of 32 up to 1024"
            )
        };
        Scratch { ptr: at.cast() }
    }
}

/// This thread's linear index in its block, `(warp, lane)`; in the simulator, a block of other
/// than `threads` threads fails here.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn place(threads: usize) -> (usize, u32) {
    let (dx, dy, dz) = (
        thread::block_dim_x(),
        thread::block_dim_y(),
        thread::block_dim_z(),
    );
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(
        (dx * dy * dz) as usize == threads,
        "block::Scratch<_, {threads}> in a block of {} threads: its THREADS must be the block's size",
        dx * dy * dz
    );
    #[cfg(target_arch = "nvptx64")]
    let _ = (threads, dz);
    let tid = thread::thread_idx_x() + dx * (thread::thread_idx_y() + dy * thread::thread_idx_z());
    ((tid / warp::SIZE) as usize, tid % warp::SIZE)
}

impl<T: Shuffle, const THREADS: usize> Scratch<T, THREADS> {
    /// Warps in the block.
    pub const WARPS: usize = THREADS / 32;

    /// `op(slot 0, op(slot 1, ..))` over the first `count` warps' slots, read by every thread
    /// (broadcast reads: no bank conflicts).
    ///
    /// # Safety
    /// `1 <= count <= WARPS`, the slots written and a barrier passed since.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn fold(self, count: usize, op: &impl Fn(T, T) -> T) -> T {
        // SAFETY: slots below `count <= WARPS` (the caller's contract).
        unsafe {
            let mut acc = mem::load(self.ptr, 0);
            for w in 1..count {
                acc = op(acc, mem::load(self.ptr, w));
            }
            acc
        }
    }

    /// Combines one value per thread with `op` and returns the result to every thread of the
    /// block, for an associative `op` (combined in thread order within each warp's butterfly,
    /// then in warp order).
    ///
    /// What one thread does: a [`warp::reduce`] (5 shuffles); lane 0 of each warp writes its
    /// warp's result to the scratch; a barrier; every thread folds the `WARPS` results; a second
    /// barrier (so that the scratch may be used again at once). Shared memory: `WARPS` writes and
    /// `WARPS` broadcast reads per thread.
    ///
    /// # Safety
    /// Every thread of the block calls it, at the same place (it has barriers); the block has
    /// `THREADS` threads; nothing else uses the scratch during the call.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn reduce(self, value: T, op: impl Fn(T, T) -> T) -> T {
        let (warp_index, lane) = place(THREADS);
        let mine = warp::reduce(value, &op);
        // SAFETY: `warp_index < WARPS` in a block of `THREADS` threads; the slots are the
        // scratch's own; every thread reaches both barriers (the caller's contract).
        unsafe {
            if lane == 0 {
                mem::store(self.ptr, warp_index, mine);
            }
            thread::sync_threads();
            let total = self.fold(Self::WARPS, &op);
            thread::sync_threads();
            total
        }
    }

    /// The inclusive scan over the block in linear thread order: thread `t` gets
    /// `op(v_0, ... v_t)`, for an associative `op`.
    ///
    /// What one thread does: a [`warp::scan_inclusive`] (5 shuffles); lane 31 of each warp
    /// writes its warp's total; a barrier; each thread folds the totals of the warps below its
    /// own and combines them with its warp's scan; a second barrier.
    ///
    /// # Safety
    /// As [`Scratch::reduce`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn scan_inclusive(self, value: T, op: impl Fn(T, T) -> T) -> T {
        let (warp_index, lane) = place(THREADS);
        let inclusive = warp::scan_inclusive(value, &op);
        // SAFETY: as in `reduce`.
        unsafe {
            if lane == warp::SIZE - 1 {
                mem::store(self.ptr, warp_index, inclusive);
            }
            thread::sync_threads();
            let out = if warp_index == 0 {
                inclusive
            } else {
                op(self.fold(warp_index, &op), inclusive)
            };
            thread::sync_threads();
            out
        }
    }

    /// The exclusive scan over the block: thread `t` gets `op(v_0, ... v_(t-1))`, thread 0
    /// `identity` (which `op` is never applied to: it need not be `op`'s identity).
    ///
    /// What one thread does: as [`Scratch::scan_inclusive`], with one more shuffle for the warp's
    /// exclusive scan.
    ///
    /// # Safety
    /// As [`Scratch::reduce`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn scan_exclusive(self, value: T, identity: T, op: impl Fn(T, T) -> T) -> T {
        let (warp_index, lane) = place(THREADS);
        let inclusive = warp::scan_inclusive(value, &op);
        let below = warp::shfl_up(inclusive, 1);
        // SAFETY: as in `reduce`.
        unsafe {
            if lane == warp::SIZE - 1 {
                mem::store(self.ptr, warp_index, inclusive);
            }
            thread::sync_threads();
            let out = match (warp_index, lane) {
                (0, 0) => identity,
                (0, _) => below,
                (_, 0) => self.fold(warp_index, &op),
                _ => op(self.fold(warp_index, &op), below),
            };
            thread::sync_threads();
            out
        }
    }
}
