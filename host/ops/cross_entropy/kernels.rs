//! The cross-entropy plan's kernels launched, through the launchers `#[kernel]` generates: step 1 is softmax's `softmax_split_stats` at `t = 1`
//! (`kernels_gpu::cross_entropy`'s doc says why), then `cross_entropy_finish`, and
//! `cross_entropy_mean`.

use kernels_gpu::cross_entropy as family;
use kernels_gpu::softmax::softmax_split_stats;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;

/// Launches `softmax_split_stats(x, partials, rows, cols, chunks, chunk_vecs, 1)` with `stats`,
/// then `cross_entropy_finish(x, labels, partials, loss, rows, cols, chunks)` with `finish`.
///
/// # Safety
/// `x` holds `rows * cols` floats, `labels` and `loss` `rows`,
/// `partials` `2 * rows * chunks`; `stats` is `rows * chunks` blocks of the statistics
/// kernel's shape with `chunks * chunk_vecs >= cols / 4`, `finish` the finishing kernel's shape.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn cross_entropy(
    gpu: &Gpu,
    (stats, finish): (LaunchConfig, LaunchConfig),
    x: &DeviceVec,
    labels: &DeviceVec<i64>,
    partials: &mut DeviceVec,
    loss: &mut DeviceVec,
    (rows, cols): (usize, usize),
    (chunks, chunk_vecs): (usize, usize),
) -> Result<()> {
    let library = gpu.library();
    // SAFETY: per the contract; the finish reads the statistics the first launch wrote (in
    // order on the one stream).
    unsafe {
        softmax_split_stats::launch(
            &library,
            stats,
            x,
            &mut *partials,
            rows,
            cols,
            chunks,
            chunk_vecs,
            1.0,
        )?;
        family::cross_entropy_finish::launch(&library, finish, x, labels, partials, loss, rows, cols, chunks)
    }
}

/// Launches `cross_entropy_warp(x, labels, partials, loss, rows, cols, chunks, chunk_vecs)` with
/// `stats`, then, when `chunks > 1`, `cross_entropy_finish(x, labels, partials, loss, rows, cols,
/// chunks)` with `finish`.
///
/// # Safety
/// `x` holds `rows * cols >= 1` floats, `labels` and `loss` `rows`,
/// `partials` `2 * rows * chunks` when `chunks > 1`; `stats` covers `rows * chunks` warps of the
/// warp kernel's shape with `chunks * chunk_vecs >= cols / 4`, `finish` the finishing kernel's
/// shape.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn cross_entropy_warps(
    gpu: &Gpu,
    (stats, finish): (LaunchConfig, LaunchConfig),
    x: &DeviceVec,
    labels: &DeviceVec<i64>,
    partials: &mut DeviceVec,
    loss: &mut DeviceVec,
    (rows, cols): (usize, usize),
    (chunks, chunk_vecs): (usize, usize),
) -> Result<()> {
    let library = gpu.library();
    // SAFETY: per the contract; the finish reads the statistics the first launch wrote (in
    // order on the one stream).
    unsafe {
        family::cross_entropy_warp::launch(
            &library,
            stats,
            x,
            labels,
            &mut *partials,
            &mut *loss,
            rows,
            cols,
            chunks,
            chunk_vecs,
        )?;
        if chunks > 1 {
            family::cross_entropy_finish::launch(
                &library, finish, x, labels, partials, loss, rows, cols, chunks,
            )?;
        }
        Ok(())
    }
}

/// Launches `cross_entropy_finish(x, labels, partials, loss, rows, cols, chunks)` alone (tests:
/// a bad label straight to the kernel).
///
/// # Safety
/// As [`cross_entropy`]'s second launch; `partials` holds `2 * rows * chunks` floats.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn finish(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &DeviceVec,
    labels: &DeviceVec<i64>,
    partials: &DeviceVec,
    loss: &mut DeviceVec,
    (rows, cols): (usize, usize),
    chunks: usize,
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe {
        family::cross_entropy_finish::launch(
            &gpu.library(),
            cfg,
            x,
            labels,
            partials,
            loss,
            rows,
            cols,
            chunks,
        )
    }
}

/// Launches `cross_entropy_mean(loss, out, rows)`.
///
/// # Safety
/// `loss` holds `rows >= 1` floats, `out` 1; `cfg` is one block of the kernel's shape.
pub(crate) unsafe fn mean(
    gpu: &Gpu,
    cfg: LaunchConfig,
    loss: &DeviceVec,
    out: &mut DeviceVec,
    rows: usize,
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { family::cross_entropy_mean::launch(&gpu.library(), cfg, loss, out, rows) }
}
