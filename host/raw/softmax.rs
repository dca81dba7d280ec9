//! Launches of `kernels_gpu::softmax`, through the launchers `#[kernel]` generates.

use kernels_gpu::{sim, softmax as k};

use crate::buffer::DeviceVec;
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Result};
use crate::launch_config::LaunchConfig;

/// Launches `softmax_block_reduce(x, y, rows, cols, t)`.
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_block_reduce(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &DeviceVec,
    y: &mut DeviceVec,
    rows: usize,
    cols: usize,
    t: f32,
) -> Result<()> {
    // SAFETY: sizes per the contract.
    unsafe { k::softmax_block_reduce::launch(&gpu.library(), cfg, x, y, rows, cols, t) }
}

/// The one-pass kernels that take `(x, y, rows, cols, t)`: warp per row, block per row, stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowKernel {
    Warp1,
    Warp2,
    Warp4,
    Warp8,
    Block4,
    Block8,
    Stream,
    Group8x4,
    Group16x2,
    PersistWarp8,
    PersistBlock4,
    PersistBlock8,
}

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

    /// The kernel's name in the PTX module and in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RowKernel::Warp1 => "softmax_warp_1",
            RowKernel::Warp2 => "softmax_warp_2",
            RowKernel::Warp4 => "softmax_warp_4",
            RowKernel::Warp8 => "softmax_warp_8",
            RowKernel::Block4 => "softmax_block_4",
            RowKernel::Block8 => "softmax_block_8",
            RowKernel::Stream => "softmax_stream",
            RowKernel::Group8x4 => "softmax_group_8x4",
            RowKernel::Group16x2 => "softmax_group_16x2",
            RowKernel::PersistWarp8 => "softmax_persist_warp_8",
            RowKernel::PersistBlock4 => "softmax_persist_block_4",
            RowKernel::PersistBlock8 => "softmax_persist_block_8",
        }
    }

    /// The kernel's generated launcher.
    #[allow(clippy::type_complexity)]
    fn launcher(
        self,
    ) -> for<'a> unsafe fn(
        &'a crate::Module,
        LaunchConfig,
        &'a DeviceVec,
        &'a mut DeviceVec,
        usize,
        usize,
        f32,
    ) -> Result<()> {
        match self {
            RowKernel::Warp1 => k::softmax_warp_1::launch,
            RowKernel::Warp2 => k::softmax_warp_2::launch,
            RowKernel::Warp4 => k::softmax_warp_4::launch,
            RowKernel::Warp8 => k::softmax_warp_8::launch,
            RowKernel::Block4 => k::softmax_block_4::launch,
            RowKernel::Block8 => k::softmax_block_8::launch,
            RowKernel::Stream => k::softmax_stream::launch,
            RowKernel::Group8x4 => k::softmax_group_8x4::launch,
            RowKernel::Group16x2 => k::softmax_group_16x2::launch,
            RowKernel::PersistWarp8 => k::softmax_persist_warp_8::launch,
            RowKernel::PersistBlock4 => k::softmax_persist_block_4::launch,
            RowKernel::PersistBlock8 => k::softmax_persist_block_8::launch,
        }
    }
}

/// The most threads a block of `softmax_block_8` may have on `gpu` (read when the `Gpu` loaded
/// its kernels; the simulator's limit is the CUDA one).
pub(crate) fn block_8_max_threads(gpu: &Gpu) -> u32 {
    match &gpu.backend {
        Backend::Cuda(d) => d.softmax_block_8_max_threads,
        Backend::Simulator => sim::MAX_THREADS_PER_BLOCK,
    }
}

/// The most threads a block of `softmax_persist_block_8` may have on `gpu` (as
/// [`block_8_max_threads`]).
pub(crate) fn persist_block_8_max_threads(gpu: &Gpu) -> u32 {
    match &gpu.backend {
        Backend::Cuda(d) => d.softmax_persist_block_8_max_threads,
        Backend::Simulator => sim::MAX_THREADS_PER_BLOCK,
    }
}

/// Dynamic shared memory a block of `softmax_persist_block_8` may use on `gpu` (it opted in to
/// the device's most). The simulator allows what an H200 does, 227 KiB.
pub(crate) fn shared_opt_in(gpu: &Gpu) -> u32 {
    match &gpu.backend {
        Backend::Cuda(d) => d.shared_opt_in,
        Backend::Simulator => SIM_SHARED_OPT_IN,
    }
}

/// The simulator's stand-in for the device's opt-in shared memory per block (an H200's).
const SIM_SHARED_OPT_IN: u32 = 227 * 1024;

/// Blocks the simulator runs a persistent kernel with (at most): few, so that every block loops
/// over several rows on small test shapes.
const SIM_RESIDENT_BLOCKS: u32 = 2;

/// How many blocks of `kernel`, with `threads` threads and `shared_mem_bytes` of dynamic shared
/// memory each, are resident on the whole of `gpu` at once: the grid of a persistent launch,
/// which then never waits for a block to finish before another starts. Asked of the driver
/// once per kernel and block size. In the simulator, [`SIM_RESIDENT_BLOCKS`].
///
/// Errors: a driver error, or [`crate::Error::TooLarge`] if not one such block fits.
pub(crate) fn resident_blocks(
    gpu: &Gpu,
    kernel: RowKernel,
    threads: u32,
    shared_mem_bytes: u32,
) -> Result<u32> {
    let Backend::Cuda(d) = &gpu.backend else {
        return Ok(SIM_RESIDENT_BLOCKS);
    };
    let key = (kernel.name(), threads);
    let cached = d.residency.lock().ok().and_then(|m| m.get(&key).copied());
    let per_sm = match cached {
        Some(n) => n,
        None => {
            let function =
                d.library
                    .by_name
                    .get(kernel.name())
                    .ok_or(crate::error::Error::InvalidArgument {
                        op: "softmax",
                        detail: format!("the PTX has no kernel {}", kernel.name()),
                    })?;
            // The count asked for must be one the kernel may launch with.
            function.opt_in(shared_mem_bytes)?;
            let n = function
                .func
                .occupancy_max_active_blocks_per_multiprocessor(threads, shared_mem_bytes as usize, None)
                .during("asking the driver how many softmax blocks fit a multiprocessor")?;
            if let Ok(mut m) = d.residency.lock() {
                m.insert(key, n);
            }
            n
        }
    };
    if per_sm == 0 {
        return Err(crate::error::Error::TooLarge {
            op: "softmax",
            detail: format!(
                "{}: not one block of {threads} threads and {shared_mem_bytes} bytes of shared memory fits a multiprocessor",
                kernel.name()
            ),
        });
    }
    Ok(per_sm * d.multiprocessors)
}

/// Launches one of the one-pass row kernels, `kernel(x, y, rows, cols, t)`.
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements, at the same address
/// modulo 16 bytes; `cfg` is the launch shape `kernel`'s doc comment gives for `cols`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_row_kernel(
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
    unsafe { kernel.launcher()(&gpu.library(), cfg, x, y, rows, cols, t) }
}

/// Launches `softmax_split_stats(x, partials, rows, cols, chunks, chunk_vecs, t)`.
///
/// # Safety
/// See the module contract: `x` holds `rows * cols` elements, `partials` `2 * rows * chunks`;
/// `cfg` is `rows * chunks` blocks of the kernel's shape, `chunks * chunk_vecs >= cols / 4`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_split_stats(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &DeviceVec,
    partials: &mut DeviceVec,
    rows: usize,
    cols: usize,
    (chunks, chunk_vecs): (usize, usize),
    t: f32,
) -> Result<()> {
    // SAFETY: sizes and shape per the contract.
    unsafe {
        k::softmax_split_stats::launch(
            &gpu.library(),
            cfg,
            x,
            partials,
            rows,
            cols,
            chunks,
            chunk_vecs,
            t,
        )
    }
}

/// Launches `softmax_split_write(x, partials, y, rows, cols, chunks, chunk_vecs, t)`.
///
/// # Safety
/// As [`softmax_split_stats`], with `partials` written by it and `y` holding `rows * cols`
/// elements at the same address as `x` modulo 16 bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_split_write(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &DeviceVec,
    partials: &DeviceVec,
    y: &mut DeviceVec,
    rows: usize,
    cols: usize,
    (chunks, chunk_vecs): (usize, usize),
    t: f32,
) -> Result<()> {
    // SAFETY: sizes, alignment and shape per the contract.
    unsafe {
        k::softmax_split_write::launch(
            &gpu.library(),
            cfg,
            x,
            partials,
            y,
            rows,
            cols,
            chunks,
            chunk_vecs,
            t,
        )
    }
}
