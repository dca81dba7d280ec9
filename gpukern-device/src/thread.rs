//! Thread, block and grid indices, and the block barrier.
//!
//! `x` is the fastest-varying dimension: in the 2-D kernels it walks columns, `y` walks rows;
//! `z` is the slowest (planes of a 3-D launch).

#[cfg(target_arch = "nvptx64")]
mod backend {
    use core::arch::nvptx;

    // SAFETY (all below): reading a special register has no precondition inside a kernel.
    #[inline(always)]
    pub fn thread_idx() -> (u32, u32, u32) {
        unsafe {
            (
                nvptx::_thread_idx_x(),
                nvptx::_thread_idx_y(),
                nvptx::_thread_idx_z(),
            )
        }
    }
    #[inline(always)]
    pub fn block_idx() -> (u32, u32, u32) {
        unsafe {
            (
                nvptx::_block_idx_x(),
                nvptx::_block_idx_y(),
                nvptx::_block_idx_z(),
            )
        }
    }
    #[inline(always)]
    pub fn block_dim() -> (u32, u32, u32) {
        unsafe {
            (
                nvptx::_block_dim_x(),
                nvptx::_block_dim_y(),
                nvptx::_block_dim_z(),
            )
        }
    }
    #[inline(always)]
    pub fn grid_dim() -> (u32, u32, u32) {
        unsafe { (nvptx::_grid_dim_x(), nvptx::_grid_dim_y(), nvptx::_grid_dim_z()) }
    }
    #[inline(always)]
    pub fn sync_threads() {
        // SAFETY: every kernel that calls this reaches it from all threads of the block
        // (checked in the simulator and by the PTX review in the tests).
        unsafe { nvptx::_syncthreads() }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod backend {
    pub use crate::sim::device::{block_dim, block_idx, grid_dim, sync_threads, thread_idx};
}

/// `threadIdx.x`: this thread's index in its block, x dimension.
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    backend::thread_idx().0
}
/// `threadIdx.y`: this thread's index in its block, y dimension.
#[inline(always)]
pub fn thread_idx_y() -> u32 {
    backend::thread_idx().1
}
/// `blockIdx.x`: this block's index in the grid, x dimension.
#[inline(always)]
pub fn block_idx_x() -> u32 {
    backend::block_idx().0
}
/// `blockIdx.y`: this block's index in the grid, y dimension.
#[inline(always)]
pub fn block_idx_y() -> u32 {
    backend::block_idx().1
}
/// `blockDim.x`: threads per block, x dimension.
#[inline(always)]
pub fn block_dim_x() -> u32 {
    backend::block_dim().0
}
/// `blockDim.y`: threads per block, y dimension.
#[inline(always)]
pub fn block_dim_y() -> u32 {
    backend::block_dim().1
}
/// `gridDim.x`: blocks in the grid, x dimension.
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    backend::grid_dim().0
}
/// `gridDim.y`: blocks in the grid, y dimension.
#[inline(always)]
pub fn grid_dim_y() -> u32 {
    backend::grid_dim().1
}
/// `threadIdx.z`: this thread's index in its block, z dimension.
#[inline(always)]
pub fn thread_idx_z() -> u32 {
    backend::thread_idx().2
}
/// `blockIdx.z`: this block's index in the grid, z dimension.
#[inline(always)]
pub fn block_idx_z() -> u32 {
    backend::block_idx().2
}
/// `blockDim.z`: threads per block, z dimension.
#[inline(always)]
pub fn block_dim_z() -> u32 {
    backend::block_dim().2
}
/// `gridDim.z`: blocks in the grid, z dimension.
#[inline(always)]
pub fn grid_dim_z() -> u32 {
    backend::grid_dim().2
}

/// This thread's global index in a 1-D launch: `blockIdx.x * blockDim.x + threadIdx.x`.
#[inline(always)]
pub fn index_1d() -> usize {
    block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
}

/// This thread's global `(x, y)` index in a 2-D launch.
#[inline(always)]
pub fn index_2d() -> (usize, usize) {
    let x = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let y = block_idx_y() as usize * block_dim_y() as usize + thread_idx_y() as usize;
    (x, y)
}

/// This thread's global `(x, y, z)` index in a 3-D launch.
#[inline(always)]
pub fn index_3d() -> (usize, usize, usize) {
    let (x, y) = index_2d();
    let z = block_idx_z() as usize * block_dim_z() as usize + thread_idx_z() as usize;
    (x, y, z)
}

/// Total threads of a 1-D launch: `gridDim.x * blockDim.x` (the stride of a grid-stride loop).
#[inline(always)]
pub fn grid_size_1d() -> usize {
    grid_dim_x() as usize * block_dim_x() as usize
}

/// `__syncthreads()`: waits until every thread of the block reaches this barrier, and makes
/// their shared-memory writes before it visible to all of them after it.
///
/// Every thread of the block must reach the same barrier: the simulator reports a barrier that
/// some threads skip instead of hanging.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn sync_threads() {
    backend::sync_threads()
}
