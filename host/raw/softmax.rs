//! Launches of `kernels_gpu::softmax`.

use cudarc::driver::{CudaFunction, PushKernelArg};
use kernels_gpu::{sim, softmax as k};

use super::mixed_backends;
use crate::buffer::{DeviceVec, Storage};
use crate::device::{Backend, Gpu, Kernels};
use crate::error::{DriverContext, Result};
use crate::launch_config::LaunchConfig;

/// Launches `softmax_rows(x, y, rows, cols, t)`.
///
/// # Safety
/// See the module contract: `x` and `y` hold `rows * cols` elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn softmax_rows(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &DeviceVec,
    y: &mut DeviceVec,
    rows: usize,
    cols: usize,
    t: f32,
) -> Result<()> {
    match (&gpu.backend, &x.storage, &mut y.storage) {
        (Backend::Cuda(d), Storage::Cuda(x), Storage::Cuda(y)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.softmax_rows);
            launch.arg(x).arg(y).arg(&rows).arg(&cols).arg(&t);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching softmax_rows")?;
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x), Storage::Host(y)) => {
            let mut launch = sim::Launch::new("softmax_rows", cfg.to_sim());
            let (x, y) = (launch.input("x", x), launch.output("y", y));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| k::softmax_rows(x, y, rows, cols, t)) }?;
            Ok(())
        }
        _ => mixed_backends("softmax"),
    }
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
}

/// A kernel's simulator entry point.
type RowFn = unsafe fn(*const f32, *mut f32, usize, usize, f32);

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
        }
    }

    fn sim(self) -> RowFn {
        match self {
            RowKernel::Warp1 => k::softmax_warp_1,
            RowKernel::Warp2 => k::softmax_warp_2,
            RowKernel::Warp4 => k::softmax_warp_4,
            RowKernel::Warp8 => k::softmax_warp_8,
            RowKernel::Block4 => k::softmax_block_4,
            RowKernel::Block8 => k::softmax_block_8,
            RowKernel::Stream => k::softmax_stream,
        }
    }

    fn cuda(self, kernels: &Kernels) -> &CudaFunction {
        match self {
            RowKernel::Warp1 => &kernels.softmax_warp_1,
            RowKernel::Warp2 => &kernels.softmax_warp_2,
            RowKernel::Warp4 => &kernels.softmax_warp_4,
            RowKernel::Warp8 => &kernels.softmax_warp_8,
            RowKernel::Block4 => &kernels.softmax_block_4,
            RowKernel::Block8 => &kernels.softmax_block_8,
            RowKernel::Stream => &kernels.softmax_stream,
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
    match (&gpu.backend, &x.storage, &mut y.storage) {
        (Backend::Cuda(d), Storage::Cuda(x), Storage::Cuda(y)) => {
            let mut launch = d.stream.launch_builder(kernel.cuda(&d.kernels));
            launch.arg(x).arg(y).arg(&rows).arg(&cols).arg(&t);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching a softmax kernel")?;
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x), Storage::Host(y)) => {
            let mut launch = sim::Launch::new(kernel.name(), cfg.to_sim());
            let (x, y) = (launch.input("x", x), launch.output("y", y));
            let f = kernel.sim();
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| f(x, y, rows, cols, t)) }?;
            Ok(())
        }
        _ => mixed_backends("softmax"),
    }
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
    match (&gpu.backend, &x.storage, &mut partials.storage) {
        (Backend::Cuda(d), Storage::Cuda(x), Storage::Cuda(p)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.softmax_split_stats);
            launch
                .arg(x)
                .arg(p)
                .arg(&rows)
                .arg(&cols)
                .arg(&chunks)
                .arg(&chunk_vecs)
                .arg(&t);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching softmax_split_stats")?;
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x), Storage::Host(p)) => {
            let mut launch = sim::Launch::new("softmax_split_stats", cfg.to_sim());
            let (x, p) = (launch.input("x", x), launch.output("partials", p));
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| k::softmax_split_stats(x, p, rows, cols, chunks, chunk_vecs, t)) }?;
            Ok(())
        }
        _ => mixed_backends("softmax"),
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
    match (&gpu.backend, &x.storage, &partials.storage, &mut y.storage) {
        (Backend::Cuda(d), Storage::Cuda(x), Storage::Cuda(p), Storage::Cuda(y)) => {
            let mut launch = d.stream.launch_builder(&d.kernels.softmax_split_write);
            launch
                .arg(x)
                .arg(p)
                .arg(y)
                .arg(&rows)
                .arg(&cols)
                .arg(&chunks)
                .arg(&chunk_vecs)
                .arg(&t);
            // SAFETY: argument types and order match the kernel; sizes per the contract.
            unsafe { launch.launch(cfg.to_cuda()) }.during("launching softmax_split_write")?;
            Ok(())
        }
        (Backend::Simulator, Storage::Host(x), Storage::Host(p), Storage::Host(y)) => {
            let mut launch = sim::Launch::new("softmax_split_write", cfg.to_sim());
            let (x, p) = (launch.input("x", x), launch.input("partials", p));
            let y = launch.output("y", y);
            // SAFETY: registered buffers, sizes per the contract.
            unsafe { launch.run(|| k::softmax_split_write(x, p, y, rows, cols, chunks, chunk_vecs, t)) }?;
            Ok(())
        }
        _ => mixed_backends("softmax"),
    }
}
