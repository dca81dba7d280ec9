//! Launches of `kernels_gpu::softmax`, through the launchers `#[kernel]` generates.

use gpukern_device::launch::Kernel;
use kernels_gpu::softmax as k;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The softmax kernels that take `(x, y, rows, cols, t)`: the tutorial's block per row, and the
/// one-pass kernels (warp, group of lanes or block per row, persistent or not, stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowKernel {
    BlockReduce,
    Warp1,
    Warp2,
    Warp4,
    Warp8,
    Block4,
    Block8,
    Block4EvictLast,
    Block8EvictLast,
    Stream,
    Group8x4,
    Group16x2,
    PersistWarp8,
    PersistBlock4,
    PersistBlock8,
}

/// The launcher of a kernel with the signature `(x, y, rows, cols, t)`.
/// (One lifetime for every reference, as the generated launcher has.)
type RowLauncher = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
    f32,
) -> Result<()>;

impl RowKernel {
    /// The warp-per-row kernel with `vectors` vectors per lane (1, 2, 4 or 8).
    pub(crate) fn warp(vectors: usize) -> RowKernel {
        match vectors {
            1 => RowKernel::Warp1,
            2 => RowKernel::Warp2,
            4 => RowKernel::Warp4,
            _ => RowKernel::Warp8,
        }
    }

    /// The block-per-row kernel with `vectors` vectors per thread (4 or 8).
    pub(crate) fn block(vectors: usize) -> RowKernel {
        if vectors <= 4 {
            RowKernel::Block4
        } else {
            RowKernel::Block8
        }
    }

    /// The block-per-row kernel with `vectors` vectors per thread (4 or 8) and `evict_last`
    /// loads.
    pub(crate) fn block_evict_last(vectors: usize) -> RowKernel {
        if vectors <= 4 {
            RowKernel::Block4EvictLast
        } else {
            RowKernel::Block8EvictLast
        }
    }

    /// The lane-group kernel with `lanes` lanes per row (8 or 16).
    pub(crate) fn group(lanes: usize) -> RowKernel {
        if lanes <= 8 {
            RowKernel::Group8x4
        } else {
            RowKernel::Group16x2
        }
    }

    /// The persistent block-per-row kernel with `vectors` vectors per thread (4 or 8).
    pub(crate) fn persist_block(vectors: usize) -> RowKernel {
        if vectors <= 4 {
            RowKernel::PersistBlock4
        } else {
            RowKernel::PersistBlock8
        }
    }

    /// The kernel's description (name, parameters) and its generated launcher: the one table
    /// from this enum to the kernels.
    fn entry(self) -> (&'static Kernel, RowLauncher) {
        match self {
            RowKernel::BlockReduce => (
                &k::softmax_block_reduce::KERNEL,
                k::softmax_block_reduce::launch_views::<Module>,
            ),
            RowKernel::Warp1 => (
                &k::softmax_warp_1::KERNEL,
                k::softmax_warp_1::launch_views::<Module>,
            ),
            RowKernel::Warp2 => (
                &k::softmax_warp_2::KERNEL,
                k::softmax_warp_2::launch_views::<Module>,
            ),
            RowKernel::Warp4 => (
                &k::softmax_warp_4::KERNEL,
                k::softmax_warp_4::launch_views::<Module>,
            ),
            RowKernel::Warp8 => (
                &k::softmax_warp_8::KERNEL,
                k::softmax_warp_8::launch_views::<Module>,
            ),
            RowKernel::Block4 => (
                &k::softmax_block_4::KERNEL,
                k::softmax_block_4::launch_views::<Module>,
            ),
            RowKernel::Block8 => (
                &k::softmax_block_8::KERNEL,
                k::softmax_block_8::launch_views::<Module>,
            ),
            RowKernel::Block4EvictLast => (
                &k::softmax_block_4_el::KERNEL,
                k::softmax_block_4_el::launch_views::<Module>,
            ),
            RowKernel::Block8EvictLast => (
                &k::softmax_block_8_el::KERNEL,
                k::softmax_block_8_el::launch_views::<Module>,
            ),
            RowKernel::Stream => (
                &k::softmax_stream::KERNEL,
                k::softmax_stream::launch_views::<Module>,
            ),
            RowKernel::Group8x4 => (
                &k::softmax_group_8x4::KERNEL,
                k::softmax_group_8x4::launch_views::<Module>,
            ),
            RowKernel::Group16x2 => (
                &k::softmax_group_16x2::KERNEL,
                k::softmax_group_16x2::launch_views::<Module>,
            ),
            RowKernel::PersistWarp8 => (
                &k::softmax_persist_warp_8::KERNEL,
                k::softmax_persist_warp_8::launch_views::<Module>,
            ),
            RowKernel::PersistBlock4 => (
                &k::softmax_persist_block_4::KERNEL,
                k::softmax_persist_block_4::launch_views::<Module>,
            ),
            RowKernel::PersistBlock8 => (
                &k::softmax_persist_block_8::KERNEL,
                k::softmax_persist_block_8::launch_views::<Module>,
            ),
        }
    }

    /// The kernel's description: its name in the PTX module and in reports, what the device's
    /// facts about it are keyed by.
    pub(crate) fn kernel(self) -> &'static Kernel {
        self.entry().0
    }
}

/// Launches `kernel(x, y, rows, cols, t)`.
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements, for every kernel but
/// [`RowKernel::BlockReduce`] at the same address modulo 16 bytes; `cfg` is the launch shape
/// `kernel`'s doc comment gives for `cols`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn row_kernel(
    gpu: &Gpu,
    kernel: RowKernel,
    cfg: LaunchConfig,
    x: &DeviceVec,
    y: &mut DeviceVec,
    rows: usize,
    cols: usize,
    t: f32,
) -> Result<()> {
    // SAFETY: sizes, alignment and shape per the contract.
    unsafe { kernel.entry().1(&gpu.library(), cfg, x.view(), y.view_mut(), rows, cols, t) }
}

/// Launches `softmax_split_stats(x, partials, rows, cols, chunks, chunk_vecs, t)`, then
/// `softmax_split_write(x, partials, y, rows, cols, chunks, chunk_vecs, t)` with the same `cfg`
/// (`softmax_split_write_streaming` if `streaming`).
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements at the same address modulo
/// 16 bytes, `partials` `2 * rows * chunks`; `cfg` is `rows * chunks` blocks of the kernels'
/// shape, `chunks * chunk_vecs >= cols / 4`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_split(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &DeviceVec,
    partials: &mut DeviceVec,
    y: &mut DeviceVec,
    (rows, cols): (usize, usize),
    (chunks, chunk_vecs): (usize, usize),
    t: f32,
    streaming: bool,
) -> Result<()> {
    let library = gpu.library();
    let write = if streaming {
        k::softmax_split_write_streaming::launch
    } else {
        k::softmax_split_write::launch
    };
    // SAFETY: sizes, alignment and shape per the contract; the write reads the statistics the
    // first launch wrote (in order on the one stream).
    unsafe {
        k::softmax_split_stats::launch(
            &library,
            cfg,
            x,
            &mut *partials,
            rows,
            cols,
            chunks,
            chunk_vecs,
            t,
        )?;
        write(&library, cfg, x, partials, y, rows, cols, chunks, chunk_vecs, t)
    }
}

/// The cluster kernel with `vectors` vectors per thread (4: `softmax_cluster_4`, else
/// `softmax_cluster_8`).
pub(crate) fn cluster_kernel(vectors: usize) -> &'static Kernel {
    if vectors <= 4 {
        &k::softmax_cluster_4::KERNEL
    } else {
        &k::softmax_cluster_8::KERNEL
    }
}

/// Launches `softmax_cluster_{vectors}(x, y, rows, cols, t)` in clusters of `(blocks, 1, 1)`.
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements at the same address modulo
/// 16 bytes; `cfg` is `rows * blocks` blocks of the kernel's shape for `cols` (its doc comment).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_cluster(
    gpu: &Gpu,
    (vectors, blocks): (usize, u32),
    cfg: LaunchConfig,
    x: &DeviceVec,
    y: &mut DeviceVec,
    rows: usize,
    cols: usize,
    t: f32,
) -> Result<()> {
    let library = gpu.library();
    let on = library.clustered((blocks, 1, 1));
    // SAFETY: sizes, alignment and shape per the contract.
    unsafe {
        if vectors <= 4 {
            k::softmax_cluster_4::launch(&on, cfg, x, y, rows, cols, t)
        } else {
            k::softmax_cluster_8::launch(&on, cfg, x, y, rows, cols, t)
        }
    }
}
