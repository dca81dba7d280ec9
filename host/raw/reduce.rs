//! Launches of `kernels_gpu::reduce`, through the launchers `#[kernel]` generates.

use kernels_gpu::reduce as k;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::ops::reduce::{ArgmaxAlgorithm, AxisLaunch, AxisSide, Reduction};

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

/// Launches an f32 axis reduction in one pass, `(x, out, rows, cols)`: `sum_rows` or `max_rows`
/// (`AxisSide::Rows`, one output per row), `sum_rows_vec` or `max_rows_vec` (`AxisSide::VecRows`,
/// its lanes per row the last argument), `sum_rows_narrow` or `max_rows_narrow`
/// (`AxisSide::NarrowRows`), `sum_rows_short` or `max_rows_short` (`AxisSide::ShortRows`),
/// `sum_cols` or `max_cols` (`AxisSide::Cols`, one per column; also the
/// finish of a split reduction, on its partials), `sum_cols_narrow` or `max_cols_narrow`
/// (`AxisSide::NarrowCols`).
///
/// # Safety
/// `x` holds `rows * cols` floats, `out` one float per output; `cfg` is the one-pass launch of
/// `side` for this shape.
pub(crate) unsafe fn axis(
    gpu: &Gpu,
    reduction: Reduction,
    side: AxisSide,
    cfg: LaunchConfig,
    x: &DeviceVec,
    out: &mut DeviceVec,
    (rows, cols): (usize, usize),
) -> Result<()> {
    if let AxisSide::VecRows(group) = side {
        let run = match reduction {
            Reduction::Sum => k::sum_rows_vec::launch,
            Reduction::Max => k::max_rows_vec::launch,
        };
        // SAFETY: sizes per the contract; `x` 16-byte aligned with rows of a multiple of 4
        // columns (the plan's condition for `VecRows`).
        return unsafe { run(&gpu.library(), cfg, x, out, rows, cols, group) };
    }
    let run = match (reduction, side) {
        (Reduction::Sum, AxisSide::Rows | AxisSide::VecRows(_)) => k::sum_rows::launch,
        (Reduction::Sum, AxisSide::NarrowRows) => k::sum_rows_narrow::launch,
        (Reduction::Sum, AxisSide::ShortRows) => k::sum_rows_short::launch,
        (Reduction::Sum, AxisSide::Cols) => k::sum_cols::launch,
        (Reduction::Sum, AxisSide::NarrowCols) => k::sum_cols_narrow::launch,
        (Reduction::Max, AxisSide::Rows | AxisSide::VecRows(_)) => k::max_rows::launch,
        (Reduction::Max, AxisSide::NarrowRows) => k::max_rows_narrow::launch,
        (Reduction::Max, AxisSide::ShortRows) => k::max_rows_short::launch,
        (Reduction::Max, AxisSide::Cols) => k::max_cols::launch,
        (Reduction::Max, AxisSide::NarrowCols) => k::max_cols_narrow::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), cfg, x, out, rows, cols) }
}

/// Launches the split pass of an f32 axis reduction, `(x, partials, rows, cols, span)`:
/// `sum_rows_parts`, `max_rows_parts`, `sum_cols_parts` or `max_cols_parts`.
///
/// # Safety
/// `x` holds `rows * cols` floats, `partials` one float per span and output; `launch` is the
/// split plan `axis_launch` made for this shape, `span` its span.
pub(crate) unsafe fn axis_parts(
    gpu: &Gpu,
    reduction: Reduction,
    launch: AxisLaunch,
    x: &DeviceVec,
    partials: &mut DeviceVec,
    (rows, cols): (usize, usize),
    span: usize,
) -> Result<()> {
    let run = match (reduction, launch.side) {
        // The narrow sides are never split; theirs would be the block kernels' split passes.
        (
            Reduction::Sum,
            AxisSide::Rows | AxisSide::NarrowRows | AxisSide::ShortRows | AxisSide::VecRows(_),
        ) => k::sum_rows_parts::launch,
        (Reduction::Sum, AxisSide::Cols | AxisSide::NarrowCols) => k::sum_cols_parts::launch,
        (
            Reduction::Max,
            AxisSide::Rows | AxisSide::NarrowRows | AxisSide::ShortRows | AxisSide::VecRows(_),
        ) => k::max_rows_parts::launch,
        (Reduction::Max, AxisSide::Cols | AxisSide::NarrowCols) => k::max_cols_parts::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), launch.cfg, x, partials, rows, cols, span) }
}

/// Launches `argmax_rows` (`AxisSide::Rows`), `argmax_rows_vec` (`AxisSide::VecRows`, with its
/// lanes per row), `argmax_rows_narrow` (`AxisSide::NarrowRows`),
/// `argmax_rows_short` (`AxisSide::ShortRows`),
/// `argmax_cols` (`AxisSide::Cols`) or `argmax_cols_narrow` (`AxisSide::NarrowCols`) `(x, out,
/// rows, cols)` in one pass.
///
/// # Safety
/// As [`axis`], `out` holding one index per output; at most `u32::MAX` entries along the axis.
pub(crate) unsafe fn axis_argmax(
    gpu: &Gpu,
    side: AxisSide,
    cfg: LaunchConfig,
    x: &DeviceVec,
    out: &mut DeviceVec<u32>,
    (rows, cols): (usize, usize),
) -> Result<()> {
    if let AxisSide::VecRows(group) = side {
        // SAFETY: as above; `x` 16-byte aligned with rows of a multiple of 4 columns.
        return unsafe { k::argmax_rows_vec::launch(&gpu.library(), cfg, x, out, rows, cols, group) };
    }
    let run = match side {
        AxisSide::Rows | AxisSide::VecRows(_) => k::argmax_rows::launch,
        AxisSide::NarrowRows => k::argmax_rows_narrow::launch,
        AxisSide::ShortRows => k::argmax_rows_short::launch,
        AxisSide::Cols => k::argmax_cols::launch,
        AxisSide::NarrowCols => k::argmax_cols_narrow::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), cfg, x, out, rows, cols) }
}

/// Launches the split pass of an argmax along an axis, `argmax_rows_parts` or
/// `argmax_cols_parts` `(x, values, indices, rows, cols, span)`.
///
/// # Safety
/// As [`axis_parts`], `values` and `indices` holding one element per span and output; at most
/// `u32::MAX` entries along the axis.
pub(crate) unsafe fn axis_argmax_parts(
    gpu: &Gpu,
    launch: AxisLaunch,
    x: &DeviceVec,
    (values, indices): (&mut DeviceVec, &mut DeviceVec<u32>),
    (rows, cols): (usize, usize),
    span: usize,
) -> Result<()> {
    let run = match launch.side {
        AxisSide::Rows | AxisSide::NarrowRows | AxisSide::ShortRows | AxisSide::VecRows(_) => {
            k::argmax_rows_parts::launch
        }
        AxisSide::Cols | AxisSide::NarrowCols => k::argmax_cols_parts::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), launch.cfg, x, values, indices, rows, cols, span) }
}

/// Launches `argmax_parts(values, indices, out, parts, outputs)`: the finish of a split argmax.
///
/// # Safety
/// `values` and `indices` hold `parts * outputs` elements, `out` `outputs`; `cfg` the one-pass
/// launch of a column kernel on `outputs` columns.
pub(crate) unsafe fn argmax_parts(
    gpu: &Gpu,
    cfg: LaunchConfig,
    (values, indices): (&DeviceVec, &DeviceVec<u32>),
    out: &mut DeviceVec<u32>,
    (parts, outputs): (usize, usize),
) -> Result<()> {
    // SAFETY: sizes per the contract.
    unsafe { k::argmax_parts::launch(&gpu.library(), cfg, values, indices, out, parts, outputs) }
}
