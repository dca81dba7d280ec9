//! Launches of `kernels_gpu::reduce`, through the launchers `#[kernel]` generates.

use kernels_gpu::reduce as k;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::ops::reduce::{ArgmaxAlgorithm, AxisLaunch, Reduction};

/// Launches `sum_tree` or `max_tree(x, partials, n)`.
///
/// # Safety
/// `x` holds `n` floats, `partials` one per block of `cfg`.
pub(crate) unsafe fn tree(
    gpu: &Gpu,
    reduction: Reduction,
    cfg: LaunchConfig,
    x: &DeviceVec,
    partials: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    let launch = match reduction {
        Reduction::Sum => k::sum_tree::launch,
        Reduction::Max => k::max_tree::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { launch(&gpu.library(), cfg, x, partials, n) }
}

/// Launches `sum_vec4` or `max_vec4(x, partials, n)`.
///
/// # Safety
/// `x` holds `n` floats, 16-byte aligned; `partials` one per block of `cfg`.
pub(crate) unsafe fn vec4(
    gpu: &Gpu,
    reduction: Reduction,
    cfg: LaunchConfig,
    x: &DeviceVec,
    partials: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    let launch = match reduction {
        Reduction::Sum => k::sum_vec4::launch,
        Reduction::Max => k::max_vec4::launch,
    };
    // SAFETY: sizes and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, x, partials, n) }
}

/// Launches `argmax_vec4(x, values, indices, n)` or the candidate `algorithm` names.
///
/// # Safety
/// `x` holds `n <= u32::MAX` floats, 16-byte aligned; `values` and `indices` one per block.
pub(crate) unsafe fn argmax_vec4(
    gpu: &Gpu,
    algorithm: ArgmaxAlgorithm,
    cfg: LaunchConfig,
    x: &DeviceVec,
    values: &mut DeviceVec,
    indices: &mut DeviceVec<u32>,
    n: usize,
) -> Result<()> {
    let launch = match algorithm {
        ArgmaxAlgorithm::Vec4 => k::argmax_vec4::launch,
        ArgmaxAlgorithm::Vec4U8 => k::argmax_vec4_u8::launch,
        ArgmaxAlgorithm::Vec4Lanes => k::argmax_vec4_lanes::launch,
        ArgmaxAlgorithm::Vec4LanesU8 => k::argmax_vec4_lanes_u8::launch,
    };
    // SAFETY: sizes and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, x, values, indices, n) }
}

/// Launches `argmax_pairs(values, indices, out_value, out_index, n)`.
///
/// # Safety
/// `values` and `indices` hold `n` elements each, the outputs one per block.
pub(crate) unsafe fn argmax_pairs(
    gpu: &Gpu,
    cfg: LaunchConfig,
    (values, indices): (&DeviceVec, &DeviceVec<u32>),
    (out_value, out_index): (&mut DeviceVec, &mut DeviceVec<u32>),
    n: usize,
) -> Result<()> {
    // SAFETY: sizes per the contract.
    unsafe { k::argmax_pairs::launch(&gpu.library(), cfg, values, indices, out_value, out_index, n) }
}

/// Launches an f32 axis reduction: `sum_rows` or `max_rows` (`AxisLaunch::Rows`, one output per
/// row), `sum_cols` or `max_cols` (`AxisLaunch::Cols`, one per column), `(x, out, rows, cols)`.
///
/// # Safety
/// `x` holds `rows * cols` floats, `out` one float per output; the launch is the one
/// `axis_launch` planned for this shape.
pub(crate) unsafe fn axis(
    gpu: &Gpu,
    reduction: Reduction,
    launch: AxisLaunch,
    x: &DeviceVec,
    out: &mut DeviceVec,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let (cfg, per_row) = launch.parts();
    let run = match (reduction, per_row) {
        (Reduction::Sum, true) => k::sum_rows::launch,
        (Reduction::Sum, false) => k::sum_cols::launch,
        (Reduction::Max, true) => k::max_rows::launch,
        (Reduction::Max, false) => k::max_cols::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), cfg, x, out, rows, cols) }
}

/// Launches `argmax_rows` (`AxisLaunch::Rows`) or `argmax_cols` (`AxisLaunch::Cols`) `(x, out,
/// rows, cols)`.
///
/// # Safety
/// As [`axis`], `out` holding one index per output; at most `u32::MAX` entries along the axis.
pub(crate) unsafe fn axis_argmax(
    gpu: &Gpu,
    launch: AxisLaunch,
    x: &DeviceVec,
    out: &mut DeviceVec<u32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let (cfg, per_row) = launch.parts();
    let run = if per_row {
        k::argmax_rows::launch
    } else {
        k::argmax_cols::launch
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), cfg, x, out, rows, cols) }
}
