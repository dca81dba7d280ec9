//! A softmax plan launched: its kernels (`kernels_gpu::softmax`, through the launchers
//! `#[kernel]` generates), their launch shapes, and the device facts the plan asks about them.

use gpukern_device::launch::Kernel;
use kernels_gpu::softmax as family;
use kernels_gpu::softmax::{
    BLOCK, CLUSTER_SHARED_BYTES, GROUP_KERNEL_BLOCK, PERSIST_WARP_SHARED_BYTES, SHARED_BYTES,
    STATS_SHARED_BYTES, STREAM_BLOCK, WARP_KERNEL_BLOCK, WARP_KERNEL_ROWS, persist_block_shared_bytes,
};

use super::plan::{Limits, OnePassConfig, OnePassPlan, SoftmaxPlan};
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The operation's name in errors.
const OP: &str = "softmax";

impl Gpu {
    /// What the plan needs to know of this device for rows of `cols` columns under `config`.
    pub(super) fn softmax_limits(&self, config: &OnePassConfig, cols: usize) -> Limits {
        // Rows that may go persistent are bounded by the persistent kernel's block limit and
        // the shared memory a staged row needs; the others by the plain kernel's limit.
        let (block_8_max_threads, shared_max) = if cols >= config.persistent_min_cols {
            let block_8 = self.max_block_threads(RowKernel::PersistBlock8.kernel());
            (block_8, self.limits().max_shared_mem_per_block_optin)
        } else {
            (self.max_block_threads(RowKernel::Block8.kernel()), u32::MAX)
        };
        Limits {
            block_8_max_threads,
            shared_max,
            // The cluster kernels are in the sm_90 PTX only, which a device loads only from
            // compute capability 9.0 on (0 threads: the loaded PTX lacks the kernel).
            cluster_max_threads: self.max_block_threads(cluster_kernel(config.cluster_vectors)),
            multiprocessors: self.multiprocessors().unwrap_or(1),
        }
    }

    /// Runs `plan` on `x` and `y`, which hold `rows x cols` (`rows, cols >= 1`) on this `Gpu`,
    /// at the same address modulo 16 bytes unless the plan is [`SoftmaxPlan::BlockReduce`].
    pub(super) fn launch_softmax(
        &self,
        plan: SoftmaxPlan,
        x: &DeviceVec,
        y: &mut DeviceVec,
        (rows, cols): (usize, usize),
        t: f32,
    ) -> Result<()> {
        let limits = self.limits();
        let warp_rows = WARP_KERNEL_ROWS as usize;
        let one_pass = match plan {
            SoftmaxPlan::BlockReduce => {
                let cfg = LaunchConfig::per_row(OP, rows, BLOCK, SHARED_BYTES, &limits)?;
                // SAFETY: `x` and `y` hold rows*cols elements; `cfg` is the kernel's per-row shape.
                return unsafe { row_kernel(self, RowKernel::BlockReduce, cfg, x, y, rows, cols, t) };
            }
            SoftmaxPlan::OnePass(plan) => plan,
        };
        let (kernel, cfg) = match one_pass {
            OnePassPlan::Warp { vectors } => {
                let cfg = LaunchConfig::rows_per_block(OP, rows, warp_rows, WARP_KERNEL_BLOCK, 0, &limits)?;
                (RowKernel::warp(vectors), cfg)
            }
            OnePassPlan::Group { lanes } => {
                let group_rows = GROUP_KERNEL_BLOCK as usize / lanes;
                let cfg = LaunchConfig::rows_per_block(OP, rows, group_rows, GROUP_KERNEL_BLOCK, 0, &limits)?;
                (RowKernel::group(lanes), cfg)
            }
            OnePassPlan::PersistentWarp => {
                let kernel = RowKernel::PersistWarp8;
                let shape = (WARP_KERNEL_BLOCK, PERSIST_WARP_SHARED_BYTES);
                (kernel, self.persistent_config(kernel, (rows, warp_rows), shape)?)
            }
            OnePassPlan::Block { vectors, threads } => {
                let cfg = LaunchConfig::per_row(OP, rows, threads, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::block(vectors), cfg)
            }
            OnePassPlan::BlockEvictLast { vectors, threads } => {
                let cfg = LaunchConfig::per_row(OP, rows, threads, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::block_evict_last(vectors), cfg)
            }
            OnePassPlan::PersistentBlock { vectors, threads } => {
                let kernel = RowKernel::persist_block(vectors);
                let shape = (threads, persist_block_shared_bytes(vectors as u32, threads));
                (kernel, self.persistent_config(kernel, (rows, 1), shape)?)
            }
            OnePassPlan::Cluster {
                vectors,
                blocks,
                threads,
            } => {
                let cfg = LaunchConfig::row_chunks(
                    OP,
                    rows,
                    blocks as usize,
                    threads,
                    CLUSTER_SHARED_BYTES,
                    &limits,
                )?;
                // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16
                // (checked by the caller); `cfg` is rows*blocks blocks of `threads`, which with
                // `vectors` per thread hold a row (the plan).
                return unsafe { softmax_cluster(self, (vectors, blocks), cfg, x, y, rows, cols, t) };
            }
            OnePassPlan::Stream => {
                let cfg = LaunchConfig::per_row(OP, rows, STREAM_BLOCK, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::Stream, cfg)
            }
            OnePassPlan::Split {
                chunks,
                chunk_vecs,
                streaming,
            } => {
                return self.softmax_split(x, y, (rows, cols), t, (chunks, chunk_vecs, streaming));
            }
            OnePassPlan::GridRow => return self.softmax_grid_row(x, y, (rows, cols), t),
        };
        // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16 (checked by
        // the caller); the plan fits `cols` to the kernel and `cfg` is its documented shape.
        unsafe { row_kernel(self, kernel, cfg, x, y, rows, cols, t) }
    }

    /// The launch of a persistent kernel over `rows`, `rows_per_block` at a time, in blocks of
    /// `(threads, shared)`: as many as are resident at once (its shared memory opted in).
    fn persistent_config(
        &self,
        kernel: RowKernel,
        rows: (usize, usize),
        (threads, shared): (u32, u32),
    ) -> Result<LaunchConfig> {
        let resident = self.resident_blocks(OP, kernel.kernel(), threads, shared)?;
        LaunchConfig::persistent(OP, rows, resident, threads, shared, &self.limits().opted_in())
    }

    /// The split path: per-chunk statistics into a temporary buffer, then the writes (with the
    /// evict-first hint if `streaming`).
    fn softmax_split(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        (rows, cols): (usize, usize),
        t: f32,
        (chunks, chunk_vecs, streaming): (usize, usize, bool),
    ) -> Result<()> {
        let cfg =
            LaunchConfig::row_chunks(OP, rows, chunks, STREAM_BLOCK, STATS_SHARED_BYTES, &self.limits())?;
        crate::capture::refuse(
            self,
            OP,
            "rows this long take the split plan, which allocates per-chunk statistics (use \
             SoftmaxAlgorithm::BlockReduce); that is an allocation",
        )?;
        // Two floats, (m, s), per block: one block per chunk of a row.
        let mut partials = self.alloc(2 * cfg.grid.0 as usize)?;
        // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16, `partials`
        // 2*rows*chunks; `cfg` is rows*chunks blocks of the kernels' shape and chunks*chunk_vecs
        // covers cols/4 (the plan).
        unsafe {
            softmax_split(
                self,
                cfg,
                x,
                &mut partials,
                y,
                (rows, cols),
                (chunks, chunk_vecs),
                t,
                streaming,
            )
        }
    }

    /// The grid-row path (`softmax_grid_row`): see [`super::grid_row`].
    fn softmax_grid_row(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        shape: (usize, usize),
        t: f32,
    ) -> Result<()> {
        super::grid_row::launch(self, x, y, shape, t)
    }
}

/// The softmax kernels that take `(x, y, rows, cols, t)`: the tutorial's block per row, and the
/// one-pass kernels (warp, group of lanes or block per row, persistent or not, stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowKernel {
    /// `softmax_block_reduce`.
    BlockReduce,
    /// `softmax_warp_1`.
    Warp1,
    /// `softmax_warp_2`.
    Warp2,
    /// `softmax_warp_4`.
    Warp4,
    /// `softmax_warp_8`.
    Warp8,
    /// `softmax_block_4`.
    Block4,
    /// `softmax_block_8`.
    Block8,
    /// `softmax_block_4_el`.
    Block4EvictLast,
    /// `softmax_block_8_el`.
    Block8EvictLast,
    /// `softmax_stream`.
    Stream,
    /// `softmax_group_8x4`.
    Group8x4,
    /// `softmax_group_16x2`.
    Group16x2,
    /// `softmax_persist_warp_8`.
    PersistWarp8,
    /// `softmax_persist_block_4`.
    PersistBlock4,
    /// `softmax_persist_block_8`.
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
                &family::softmax_block_reduce::KERNEL,
                family::softmax_block_reduce::launch_views::<Module>,
            ),
            RowKernel::Warp1 => (
                &family::softmax_warp_1::KERNEL,
                family::softmax_warp_1::launch_views::<Module>,
            ),
            RowKernel::Warp2 => (
                &family::softmax_warp_2::KERNEL,
                family::softmax_warp_2::launch_views::<Module>,
            ),
            RowKernel::Warp4 => (
                &family::softmax_warp_4::KERNEL,
                family::softmax_warp_4::launch_views::<Module>,
            ),
            RowKernel::Warp8 => (
                &family::softmax_warp_8::KERNEL,
                family::softmax_warp_8::launch_views::<Module>,
            ),
            RowKernel::Block4 => (
                &family::softmax_block_4::KERNEL,
                family::softmax_block_4::launch_views::<Module>,
            ),
            RowKernel::Block8 => (
                &family::softmax_block_8::KERNEL,
                family::softmax_block_8::launch_views::<Module>,
            ),
            RowKernel::Block4EvictLast => (
                &family::softmax_block_4_el::KERNEL,
                family::softmax_block_4_el::launch_views::<Module>,
            ),
            RowKernel::Block8EvictLast => (
                &family::softmax_block_8_el::KERNEL,
                family::softmax_block_8_el::launch_views::<Module>,
            ),
            RowKernel::Stream => (
                &family::softmax_stream::KERNEL,
                family::softmax_stream::launch_views::<Module>,
            ),
            RowKernel::Group8x4 => (
                &family::softmax_group_8x4::KERNEL,
                family::softmax_group_8x4::launch_views::<Module>,
            ),
            RowKernel::Group16x2 => (
                &family::softmax_group_16x2::KERNEL,
                family::softmax_group_16x2::launch_views::<Module>,
            ),
            RowKernel::PersistWarp8 => (
                &family::softmax_persist_warp_8::KERNEL,
                family::softmax_persist_warp_8::launch_views::<Module>,
            ),
            RowKernel::PersistBlock4 => (
                &family::softmax_persist_block_4::KERNEL,
                family::softmax_persist_block_4::launch_views::<Module>,
            ),
            RowKernel::PersistBlock8 => (
                &family::softmax_persist_block_8::KERNEL,
                family::softmax_persist_block_8::launch_views::<Module>,
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
/// `x` and `y` hold `rows * cols` elements, for every kernel but
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
/// `x` and `y` hold `rows * cols` elements at the same address modulo
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
        family::softmax_split_write_streaming::launch
    } else {
        family::softmax_split_write::launch
    };
    // SAFETY: sizes, alignment and shape per the contract; the write reads the statistics the
    // first launch wrote (in order on the one stream).
    unsafe {
        family::softmax_split_stats::launch(
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
        &family::softmax_cluster_4::KERNEL
    } else {
        &family::softmax_cluster_8::KERNEL
    }
}

/// Launches `softmax_cluster_{vectors}(x, y, rows, cols, t)` in clusters of `(blocks, 1, 1)`.
///
/// # Safety
/// `x` and `y` hold `rows * cols` elements at the same address modulo
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
            family::softmax_cluster_4::launch(&on, cfg, x, y, rows, cols, t)
        } else {
            family::softmax_cluster_8::launch(&on, cfg, x, y, rows, cols, t)
        }
    }
}
