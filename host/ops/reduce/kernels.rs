//! The reduction plans' kernels launched: `kernels_gpu::reduce`'s kernels through the launchers
//! `#[kernel]` generates, and the kernels whose residency the plans ask for.

use gpukern_device::launch::Kernel;
use kernels_gpu::reduce as family;

use super::plan::ArgmaxAlgorithm;
use super::plan::{AxisReduction, AxisSide, AxisSplit, Reduction, Resident, SplitSide};
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;

/// The first pass's kernel of an argmax and the vectors one of its blocks covers per sweep.
pub(crate) fn argmax_kernel(algorithm: ArgmaxAlgorithm) -> (&'static Kernel, usize) {
    match algorithm {
        ArgmaxAlgorithm::Vec4 => (&family::argmax_vec4::KERNEL, family::vec4::VEC_TILE),
        ArgmaxAlgorithm::Vec4U8 => (&family::argmax_vec4_u8::KERNEL, family::VEC_TILE_8),
        ArgmaxAlgorithm::Vec4Lanes => (&family::argmax_vec4_lanes::KERNEL, family::vec4::VEC_TILE),
        ArgmaxAlgorithm::Vec4LanesU8 => (&family::argmax_vec4_lanes_u8::KERNEL, family::VEC_TILE_8),
    }
}

/// The kernel an axis plan's residency question is about, with the block size and shared memory
/// it is launched with.
pub(crate) fn residency_of(fact: Resident) -> (&'static Kernel, u32, u32) {
    let rows = |kernel| (kernel, family::ROWS_BLOCK, 0);
    let cols = |kernel| {
        (
            kernel,
            family::COLS_BLOCK_X * family::COLS_BLOCK_Y,
            family::COLS_SHARED_BYTES,
        )
    };
    match fact {
        Resident::NarrowCols => (&family::sum_cols_narrow::KERNEL, family::NARROW_BLOCK, 0),
        Resident::Parts(AxisReduction::Sum, SplitSide::Rows) => rows(&family::sum_rows_parts::KERNEL),
        Resident::Parts(AxisReduction::Sum, SplitSide::Cols) => cols(&family::sum_cols_parts::KERNEL),
        Resident::Parts(AxisReduction::Max, SplitSide::Rows) => rows(&family::max_rows_parts::KERNEL),
        Resident::Parts(AxisReduction::Max, SplitSide::Cols) => cols(&family::max_cols_parts::KERNEL),
        Resident::Parts(AxisReduction::Argmax, SplitSide::Rows) => rows(&family::argmax_rows_parts::KERNEL),
        Resident::Parts(AxisReduction::Argmax, SplitSide::Cols) => cols(&family::argmax_cols_parts::KERNEL),
    }
}

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
        Reduction::Sum => family::sum_tree::launch,
        Reduction::Max => family::max_tree::launch,
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
        Reduction::Sum => family::sum_vec4::launch,
        Reduction::Max => family::max_vec4::launch,
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
        ArgmaxAlgorithm::Vec4 => family::argmax_vec4::launch,
        ArgmaxAlgorithm::Vec4U8 => family::argmax_vec4_u8::launch,
        ArgmaxAlgorithm::Vec4Lanes => family::argmax_vec4_lanes::launch,
        ArgmaxAlgorithm::Vec4LanesU8 => family::argmax_vec4_lanes_u8::launch,
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
    unsafe { family::argmax_pairs::launch(&gpu.library(), cfg, values, indices, out_value, out_index, n) }
}

/// Launches an f32 axis reduction in one pass, `(x, out, rows, cols)`, by `side`: `sum_rows` or
/// `max_rows` (`Rows`, one output per row), `sum_rows_vec` or `max_rows_vec` (`VecRows`, its
/// lanes per row the last argument), `sum_rows_narrow` or `max_rows_narrow` (`NarrowRows`),
/// `sum_rows_short` or `max_rows_short` (`ShortRows`), `sum_cols` or `max_cols` (`Cols`, one per
/// column; also the finish of a split reduction, on its partials), `sum_cols_narrow` or
/// `max_cols_narrow` (`NarrowCols`).
///
/// # Safety
/// `x` holds `rows * cols` floats, `out` one float per output; `cfg` is the one-pass launch of
/// `side` for this shape (for `VecRows`: `x` 16-byte aligned, rows of a multiple of 4 columns).
pub(crate) unsafe fn axis(
    gpu: &Gpu,
    reduction: Reduction,
    side: AxisSide,
    cfg: LaunchConfig,
    x: &DeviceVec,
    out: &mut DeviceVec,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let lib = gpu.library();
    // SAFETY (every arm): sizes and alignment per the contract.
    unsafe {
        match (reduction, side) {
            (Reduction::Sum, AxisSide::Rows) => family::sum_rows::launch(&lib, cfg, x, out, rows, cols),
            (Reduction::Sum, AxisSide::VecRows(g)) => {
                family::sum_rows_vec::launch(&lib, cfg, x, out, rows, cols, g)
            }
            (Reduction::Sum, AxisSide::NarrowRows) => {
                family::sum_rows_narrow::launch(&lib, cfg, x, out, rows, cols)
            }
            (Reduction::Sum, AxisSide::ShortRows) => {
                family::sum_rows_short::launch(&lib, cfg, x, out, rows, cols)
            }
            (Reduction::Sum, AxisSide::Cols) => family::sum_cols::launch(&lib, cfg, x, out, rows, cols),
            (Reduction::Sum, AxisSide::NarrowCols) => {
                family::sum_cols_narrow::launch(&lib, cfg, x, out, rows, cols)
            }
            (Reduction::Max, AxisSide::Rows) => family::max_rows::launch(&lib, cfg, x, out, rows, cols),
            (Reduction::Max, AxisSide::VecRows(g)) => {
                family::max_rows_vec::launch(&lib, cfg, x, out, rows, cols, g)
            }
            (Reduction::Max, AxisSide::NarrowRows) => {
                family::max_rows_narrow::launch(&lib, cfg, x, out, rows, cols)
            }
            (Reduction::Max, AxisSide::ShortRows) => {
                family::max_rows_short::launch(&lib, cfg, x, out, rows, cols)
            }
            (Reduction::Max, AxisSide::Cols) => family::max_cols::launch(&lib, cfg, x, out, rows, cols),
            (Reduction::Max, AxisSide::NarrowCols) => {
                family::max_cols_narrow::launch(&lib, cfg, x, out, rows, cols)
            }
        }
    }
}

/// Launches the split pass of an f32 axis reduction, `(x, partials, rows, cols, span)`:
/// `sum_rows_parts`, `max_rows_parts`, `sum_cols_parts` or `max_cols_parts`, by `split.side`.
///
/// # Safety
/// `x` holds `rows * cols` floats, `partials` one float per span and output; `cfg` and `split`
/// are the split plan [`super::plan::AxisPlan::choose`] made for this shape.
pub(crate) unsafe fn axis_parts(
    gpu: &Gpu,
    reduction: Reduction,
    cfg: LaunchConfig,
    split: AxisSplit,
    x: &DeviceVec,
    partials: &mut DeviceVec,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let run = match (reduction, split.side) {
        (Reduction::Sum, SplitSide::Rows) => family::sum_rows_parts::launch,
        (Reduction::Sum, SplitSide::Cols) => family::sum_cols_parts::launch,
        (Reduction::Max, SplitSide::Rows) => family::max_rows_parts::launch,
        (Reduction::Max, SplitSide::Cols) => family::max_cols_parts::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), cfg, x, partials, rows, cols, split.span) }
}

/// Launches an argmax along an axis in one pass, `(x, out, rows, cols)`, by `side`:
/// `argmax_rows`, `argmax_rows_vec` (with its lanes per row), `argmax_rows_narrow`,
/// `argmax_rows_short`, `argmax_cols` or `argmax_cols_narrow`.
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
    let lib = gpu.library();
    // SAFETY (every arm): sizes and alignment per the contract.
    unsafe {
        match side {
            AxisSide::Rows => family::argmax_rows::launch(&lib, cfg, x, out, rows, cols),
            AxisSide::VecRows(g) => family::argmax_rows_vec::launch(&lib, cfg, x, out, rows, cols, g),
            AxisSide::NarrowRows => family::argmax_rows_narrow::launch(&lib, cfg, x, out, rows, cols),
            AxisSide::ShortRows => family::argmax_rows_short::launch(&lib, cfg, x, out, rows, cols),
            AxisSide::Cols => family::argmax_cols::launch(&lib, cfg, x, out, rows, cols),
            AxisSide::NarrowCols => family::argmax_cols_narrow::launch(&lib, cfg, x, out, rows, cols),
        }
    }
}

/// Launches the split pass of an argmax along an axis, `argmax_rows_parts` or
/// `argmax_cols_parts` `(x, values, indices, rows, cols, span)`, by `split.side`.
///
/// # Safety
/// As [`axis_parts`], `values` and `indices` holding one element per span and output; at most
/// `u32::MAX` entries along the axis.
pub(crate) unsafe fn axis_argmax_parts(
    gpu: &Gpu,
    cfg: LaunchConfig,
    split: AxisSplit,
    x: &DeviceVec,
    (values, indices): (&mut DeviceVec, &mut DeviceVec<u32>),
    (rows, cols): (usize, usize),
) -> Result<()> {
    let run = match split.side {
        SplitSide::Rows => family::argmax_rows_parts::launch,
        SplitSide::Cols => family::argmax_cols_parts::launch,
    };
    // SAFETY: sizes per the contract.
    unsafe { run(&gpu.library(), cfg, x, values, indices, rows, cols, split.span) }
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
    unsafe { family::argmax_parts::launch(&gpu.library(), cfg, values, indices, out, parts, outputs) }
}
