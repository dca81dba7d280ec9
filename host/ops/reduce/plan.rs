//! The plans of the reductions, pure functions of the shape and the device's facts: the kernel
//! of a whole-vector reduction ([`VectorPlan`]), and the side, kernel, launch and split of a
//! reduction along an axis ([`AxisPlan`]), both unit-tested without a `Gpu`.

use kernels_gpu::reduce as family;

use crate::error::{Error, Result};
use crate::launch_config::{DeviceLimits, LaunchConfig, ceil_div};

/// The operation of a whole-vector reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    /// `sum`.
    Sum,
    /// `max`.
    Max,
}

/// Which kernel a whole-vector `sum` or `max` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VectorPlan {
    /// The tutorial's tree, one launch per factor of 256.
    Tree,
    /// 16-byte loads over the resident blocks, then one block on the partials.
    Vec4,
}

impl VectorPlan {
    /// The plan of `algorithm` on an input that is (`aligned`) or is not 16-byte aligned: the
    /// vector kernel needs it aligned, the tree runs otherwise.
    pub(crate) fn choose(algorithm: ReduceAlgorithm, aligned: bool) -> VectorPlan {
        match algorithm {
            ReduceAlgorithm::Vec4 if aligned => VectorPlan::Vec4,
            _ => VectorPlan::Tree,
        }
    }
}

/// The fewest entries of the reduced axis in one span of a split axis reduction: 8 rounds of
/// 4 loads per lane (a warp per row) or per thread (32 row groups per column).
pub(crate) const MIN_AXIS_SPAN: usize = 1024;

/// Spans of a split axis reduction are a multiple of this many entries: one round of 4 loads of
/// each lane or row group, so that every span starts 128-byte aligned within its row.
pub(crate) const AXIS_SPAN_ALIGN: usize = 128;

/// Which outputs an axis reduction gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AxisSide {
    /// One output per row (`Axis(1)`): the `*_rows` kernels, a warp per row.
    Rows,
    /// One output per row of at most `NARROW_MAX_COLS` columns: the `*_rows_narrow` kernels, a
    /// thread per row. Never split.
    NarrowRows,
    /// One output per row of at most `SHORT_MAX_COLS` columns: the `*_rows_short` kernels, a warp
    /// per `SHORT_ROWS` rows. Never split.
    ShortRows,
    /// One output per row of a 16-byte aligned matrix of a multiple of 4 columns, at most
    /// `VEC_MAX_COLS`: the `*_rows_vec` kernels, 16-byte loads, this many lanes per row
    /// ([`vec_group`]). Never split.
    VecRows(usize),
    /// One output per column of a wide matrix, or of one with few rows: the `*_cols_narrow`
    /// kernels, a thread per column. Never split.
    NarrowCols,
    /// One output per column (`Axis(0)`): the `*_cols` kernels, a thread per column and row
    /// group.
    Cols,
}

/// The side of a split axis reduction: only the warp-per-row (`AxisSide::Rows`) and
/// block-column (`AxisSide::Cols`) plans are split, by the `*_rows_parts` and `*_cols_parts`
/// kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SplitSide {
    /// `*_rows_parts`: a warp per span of a row.
    Rows,
    /// `*_cols_parts`: a block per span of 32 columns.
    Cols,
}

/// What an axis reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AxisReduction {
    /// Sums.
    Sum,
    /// Maxima.
    Max,
    /// Indices of the maxima.
    Argmax,
}

/// The plan of an axis reduction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisLaunch {
    /// Which outputs.
    pub(crate) side: AxisSide,
    /// The launch of the one pass, or of the split pass.
    pub(crate) cfg: LaunchConfig,
    /// `Some` when the reduced axis is cut into spans.
    pub(crate) split: Option<AxisSplit>,
}

/// A split axis reduction: the `*_parts` kernel folds each span of `span` entries of the reduced
/// axis into a `parts x outputs` matrix of partials, then `finish` (the launch of a column
/// kernel on `outputs` columns) reduces its columns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisSplit {
    /// The split kernel's side.
    pub(crate) side: SplitSide,
    /// Entries of the reduced axis per span.
    pub(crate) span: usize,
    /// Spans per output.
    pub(crate) parts: usize,
    /// The finishing column kernel's launch.
    pub(crate) finish: LaunchConfig,
}

/// The lanes per row of a `*_rows_vec` kernel on rows of `cols` columns: the power of two that
/// gives each lane at most 4 of the row's 4-float vectors (16 lanes at `VEC_MAX_COLS`), at most
/// a warp.
fn vec_group(cols: usize) -> usize {
    cols.div_ceil(16).next_power_of_two().min(32)
}

/// The launch of a `*_cols` kernel on `cols` columns, with `parts` blocks along y.
fn cols_config(op: &'static str, cols: usize, parts: usize, limits: &DeviceLimits) -> Result<LaunchConfig> {
    let too_large = |what: String| Error::TooLarge {
        op,
        detail: format!("{what} need more blocks than a grid holds"),
    };
    let blocks = u32::try_from(ceil_div(cols, family::COLS_BLOCK_X as usize))
        .map_err(|_| too_large(format!("{cols} columns")))?;
    let parts = u32::try_from(parts).map_err(|_| too_large(format!("{parts} spans")))?;
    LaunchConfig {
        grid: (blocks, parts, 1),
        block: (family::COLS_BLOCK_X, family::COLS_BLOCK_Y, 1),
        shared_mem_bytes: family::COLS_SHARED_BYTES,
    }
    .checked(op, limits)
}

/// A device fact the axis plan asks for: how many blocks of a kernel are resident on the device
/// at once (at the kernel's own block size and shared memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resident {
    /// `sum_cols_narrow`, a thread per column: whether a column reduction is wide enough for it.
    NarrowCols,
    /// The split pass's kernel of a reduction on a side.
    Parts(AxisReduction, SplitSide),
}

/// The shape an axis reduction reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AxisShape {
    /// Rows of the matrix.
    pub(crate) rows: usize,
    /// Columns of the matrix.
    pub(crate) cols: usize,
    /// The axis index: 1 per row, 0 per column (others are an error).
    pub(crate) axis: usize,
    /// Whether the matrix's buffer is 16-byte aligned.
    pub(crate) aligned: bool,
}

/// What one axis reduction runs: its number of outputs and the launch (`None` when there are
/// no outputs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisPlan {
    /// Outputs: rows for axis 1, columns for axis 0.
    pub(crate) outputs: usize,
    /// The launch, `None` when there are no outputs.
    pub(crate) launch: Option<AxisLaunch>,
}

impl AxisPlan {
    /// The plan of reduction `op` by `fold` of `shape` on a device of `limits`, asking
    /// `resident` for the residency of a kernel only where the choice depends on it. A maximum
    /// or an argmax of an empty axis has no result (a sum's is 0); the argmax's indices are
    /// 32-bit on the device.
    ///
    /// The rules, in order: axis 1 takes the 16-byte row kernel for aligned rows of a multiple
    /// of 4 columns up to `VEC_MAX_COLS`, the thread-per-row kernel up to `NARROW_MAX_COLS`,
    /// the warp-per-`SHORT_ROWS`-rows kernel up to `SHORT_MAX_COLS`, the warp-per-row kernel
    /// past it; axis 0 takes the thread-per-column kernel for few rows or wide matrices
    /// ([`narrow_cols`]), the block-column kernel otherwise. Only the warp-per-row and
    /// block-column plans are split ([`axis_spans`]).
    pub(crate) fn choose(
        op: &'static str,
        shape: AxisShape,
        fold: AxisReduction,
        limits: &DeviceLimits,
        resident: impl Fn(Resident) -> Result<usize>,
    ) -> Result<AxisPlan> {
        let AxisShape {
            rows,
            cols,
            axis,
            aligned,
        } = shape;
        let (outputs, reduced, side) = match axis {
            1 if cols % 4 == 0 && cols > 0 && cols <= family::VEC_MAX_COLS && aligned => {
                (rows, cols, AxisSide::VecRows(vec_group(cols)))
            }
            1 if cols <= family::NARROW_MAX_COLS => (rows, cols, AxisSide::NarrowRows),
            1 if cols <= family::SHORT_MAX_COLS => (rows, cols, AxisSide::ShortRows),
            1 => (rows, cols, AxisSide::Rows),
            0 if narrow_cols(rows, cols, &resident)? => (cols, rows, AxisSide::NarrowCols),
            0 => (cols, rows, AxisSide::Cols),
            a => {
                return Err(Error::InvalidArgument {
                    op,
                    detail: format!("axis {a} of a matrix: use Axis(0) (per column) or Axis(1) (per row)"),
                });
            }
        };
        if fold != AxisReduction::Sum && reduced == 0 && outputs > 0 {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("axis {axis} of a {rows}x{cols} matrix is empty: it has no maximum"),
            });
        }
        if fold == AxisReduction::Argmax && u32::try_from(reduced).is_err() {
            return Err(Error::TooLarge {
                op,
                detail: format!("{reduced} entries along the axis: indices are 32-bit on the device"),
            });
        }
        if outputs == 0 {
            return Ok(AxisPlan {
                outputs: 0,
                launch: None,
            });
        }
        // The one-pass launch over `units` outputs (or spans): outputs per block and threads.
        let one_pass = |units: usize| {
            let (per_block, threads) = match side {
                AxisSide::Rows => (family::ROWS_PER_BLOCK as usize, family::ROWS_BLOCK),
                AxisSide::ShortRows => (
                    family::ROWS_PER_BLOCK as usize * family::SHORT_ROWS,
                    family::ROWS_BLOCK,
                ),
                AxisSide::VecRows(group) => {
                    (family::ROWS_PER_BLOCK as usize * (32 / group), family::ROWS_BLOCK)
                }
                AxisSide::NarrowRows | AxisSide::NarrowCols => {
                    (family::NARROW_BLOCK as usize, family::NARROW_BLOCK)
                }
                AxisSide::Cols => return cols_config(op, units, 1, limits),
            };
            LaunchConfig::rows_per_block(op, units, per_block, threads, 0, limits)
        };
        let Some((split_side, span, parts)) = axis_spans(fold, side, outputs, reduced, &resident)? else {
            let launch = AxisLaunch {
                side,
                cfg: one_pass(outputs)?,
                split: None,
            };
            return Ok(AxisPlan {
                outputs,
                launch: Some(launch),
            });
        };
        let cfg = match split_side {
            SplitSide::Rows => one_pass(outputs * parts)?,
            SplitSide::Cols => cols_config(op, outputs, parts, limits)?,
        };
        let split = AxisSplit {
            side: split_side,
            span,
            parts,
            finish: cols_config(op, outputs, 1, limits)?,
        };
        let launch = AxisLaunch {
            side,
            cfg,
            split: Some(split),
        };
        Ok(AxisPlan {
            outputs,
            launch: Some(launch),
        })
    }
}

/// Whether a column reduction of a `rows x cols` matrix takes a thread per column (the
/// `*_cols_narrow` kernels): with fewer than `NARROW_COLS_MAX_ROWS` rows, or at least a
/// quarter as many columns as the device holds threads of those kernels.
fn narrow_cols(rows: usize, cols: usize, resident: &impl Fn(Resident) -> Result<usize>) -> Result<bool> {
    if rows < family::NARROW_COLS_MAX_ROWS {
        return Ok(true);
    }
    let resident = resident(Resident::NarrowCols)?;
    Ok(cols >= resident * family::NARROW_BLOCK as usize / 4)
}

/// Whether an axis reduction of `outputs` outputs over `reduced` entries each is cut into
/// spans, and if so `(side, span, parts)`: only the warp-per-row and block-column plans are
/// (the others are chosen for shapes that fill the device), when one pass leaves the
/// device short of work (a warp per row, or a block per 32 columns, against the split
/// kernel's resident warps or blocks), as many spans as fill it, each at least
/// [`MIN_AXIS_SPAN`] entries, rounded to a multiple of [`AXIS_SPAN_ALIGN`].
fn axis_spans(
    fold: AxisReduction,
    side: AxisSide,
    outputs: usize,
    reduced: usize,
    resident: &impl Fn(Resident) -> Result<usize>,
) -> Result<Option<(SplitSide, usize, usize)>> {
    let split_side = match side {
        AxisSide::Rows if reduced > MIN_AXIS_SPAN => SplitSide::Rows,
        AxisSide::Cols if reduced > MIN_AXIS_SPAN => SplitSide::Cols,
        _ => return Ok(None),
    };
    let blocks = resident(Resident::Parts(fold, split_side))?;
    let (capacity, units) = match split_side {
        SplitSide::Rows => (blocks * family::ROWS_PER_BLOCK as usize, outputs),
        SplitSide::Cols => (blocks, outputs.div_ceil(family::COLS_BLOCK_X as usize)),
    };
    let parts = (capacity / units.max(1)).min(reduced.div_ceil(MIN_AXIS_SPAN));
    if parts < 2 {
        return Ok(None);
    }
    let span = reduced.div_ceil(parts).next_multiple_of(AXIS_SPAN_ALIGN);
    let parts = reduced.div_ceil(span);
    Ok((parts >= 2).then_some((split_side, span, parts)))
}

/// Which reduction of a whole vector to run (`sum`, `max`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReduceAlgorithm {
    /// The tutorial's shared-memory tree, one element per thread, one launch per factor of 256
    /// (`sum_tree`, `max_tree`).
    Tree,
    /// 16-byte loads in a grid-stride loop over the device's resident blocks, warp shuffles, one
    /// partial per block, a second launch of one block on the partials (`sum_vec4`, `max_vec4`);
    /// the default. Needs the input 16-byte aligned, which device allocations are; otherwise
    /// [`ReduceAlgorithm::Tree`] runs instead.
    #[default]
    Vec4,
}

impl ReduceAlgorithm {
    /// Every algorithm, the tutorial's first.
    pub const ALL: [ReduceAlgorithm; 2] = [ReduceAlgorithm::Tree, ReduceAlgorithm::Vec4];

    /// A short name: `tree`, `vec4`.
    pub fn name(self) -> &'static str {
        match self {
            ReduceAlgorithm::Tree => "tree",
            ReduceAlgorithm::Vec4 => "vec4",
        }
    }
}

/// Which argmax kernel runs the first pass (all give the same index; the second pass is
/// `argmax_pairs` for each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ArgmaxAlgorithm {
    /// `argmax_vec4`: the exact rule on every element, 4 vectors per thread and sweep.
    Vec4,
    /// Tuning candidate `argmax_vec4_u8`: as [`ArgmaxAlgorithm::Vec4`] with 8 vectors per thread.
    Vec4U8,
    /// Tuning candidate `argmax_vec4_lanes`: a running best per lane of the vector (a compare and
    /// two selects per element; the exact rule only on vectors holding a NaN), 4 vectors per
    /// thread.
    Vec4Lanes,
    /// `argmax_vec4_lanes_u8`: [`ArgmaxAlgorithm::Vec4Lanes`] with 8 vectors per thread; the
    /// default (the fastest at every benchmarked length on the H200, `bench/results/latest.jsonl`).
    #[default]
    Vec4LanesU8,
}

impl ArgmaxAlgorithm {
    /// Every algorithm.
    pub const ALL: [ArgmaxAlgorithm; 4] = [
        ArgmaxAlgorithm::Vec4,
        ArgmaxAlgorithm::Vec4U8,
        ArgmaxAlgorithm::Vec4Lanes,
        ArgmaxAlgorithm::Vec4LanesU8,
    ];

    /// A short name: `vec4`, `vec4_u8`, `vec4_lanes`, `vec4_lanes_u8`.
    pub fn name(self) -> &'static str {
        match self {
            ArgmaxAlgorithm::Vec4 => "vec4",
            ArgmaxAlgorithm::Vec4U8 => "vec4_u8",
            ArgmaxAlgorithm::Vec4Lanes => "vec4_lanes",
            ArgmaxAlgorithm::Vec4LanesU8 => "vec4_lanes_u8",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident blocks of every kernel on a device of 132 SMs: 8 blocks of 256 threads each.
    const RESIDENT: usize = 132 * 8;

    fn plan(rows: usize, cols: usize, axis: usize, aligned: bool, fold: AxisReduction) -> Result<AxisPlan> {
        AxisPlan::choose(
            "test",
            AxisShape {
                rows,
                cols,
                axis,
                aligned,
            },
            fold,
            &DeviceLimits::COMMON,
            |_| Ok(RESIDENT),
        )
    }

    fn side(rows: usize, cols: usize, axis: usize, aligned: bool) -> AxisSide {
        let plan = plan(rows, cols, axis, aligned, AxisReduction::Sum).expect("a plan");
        plan.launch.expect("outputs").side
    }

    fn split(rows: usize, cols: usize, axis: usize) -> Option<(SplitSide, usize, usize)> {
        let plan = plan(rows, cols, axis, true, AxisReduction::Sum).expect("a plan");
        plan.launch
            .expect("outputs")
            .split
            .map(|s| (s.side, s.span, s.parts))
    }

    /// The whole-vector plan: the vector kernel only for aligned inputs.
    #[test]
    fn vector_plan_takes_the_vector_kernel_on_aligned_input_only() {
        assert_eq!(VectorPlan::choose(ReduceAlgorithm::Vec4, true), VectorPlan::Vec4);
        assert_eq!(VectorPlan::choose(ReduceAlgorithm::Vec4, false), VectorPlan::Tree);
        assert_eq!(VectorPlan::choose(ReduceAlgorithm::Tree, true), VectorPlan::Tree);
    }

    /// Axis 1: a trial on each side of every column boundary of the row kernels.
    #[test]
    fn row_kernels_by_row_length() {
        let vec = family::VEC_MAX_COLS;
        assert_eq!(side(64, vec, 1, true), AxisSide::VecRows(16));
        assert_eq!(side(64, 4, 1, true), AxisSide::VecRows(1));
        assert_eq!(side(64, 64, 1, true), AxisSide::VecRows(4));
        // Unaligned or not a multiple of 4: the scalar kernels by length.
        assert_eq!(side(64, 8, 1, false), AxisSide::NarrowRows);
        assert_eq!(side(64, family::NARROW_MAX_COLS, 1, false), AxisSide::NarrowRows);
        assert_eq!(
            side(64, family::NARROW_MAX_COLS + 1, 1, true),
            AxisSide::ShortRows
        );
        assert_eq!(side(64, family::SHORT_MAX_COLS, 1, false), AxisSide::ShortRows);
        assert_eq!(side(64, family::SHORT_MAX_COLS + 1, 1, true), AxisSide::Rows);
        assert_eq!(side(64, vec + 4, 1, true), AxisSide::Rows);
        assert_eq!(side(64, family::SHORT_MAX_COLS + 1, 1, false), AxisSide::Rows);
    }

    /// Axis 0: the thread-per-column kernel for fewer than `NARROW_COLS_MAX_ROWS` rows or for a
    /// quarter of the device's threads in columns, the block-column kernel otherwise.
    #[test]
    fn column_kernels_by_rows_and_width() {
        let rows = family::NARROW_COLS_MAX_ROWS;
        let wide = RESIDENT * family::NARROW_BLOCK as usize / 4;
        assert_eq!(side(rows - 1, 64, 0, true), AxisSide::NarrowCols);
        assert_eq!(side(rows, 64, 0, true), AxisSide::Cols);
        assert_eq!(side(rows, wide - 1, 0, true), AxisSide::Cols);
        assert_eq!(side(rows, wide, 0, true), AxisSide::NarrowCols);
    }

    /// The split: only past `MIN_AXIS_SPAN` entries and where one pass leaves the device short.
    #[test]
    fn splits_on_each_side_of_their_rules() {
        // Few long rows: split into spans of a multiple of AXIS_SPAN_ALIGN.
        assert_eq!(split(8, MIN_AXIS_SPAN, 1), None);
        assert_eq!(split(8, MIN_AXIS_SPAN + 4, 1), Some((SplitSide::Rows, 640, 2)));
        assert_eq!(split(8, 1 << 20, 1), Some((SplitSide::Rows, 1024, 1024)));
        // Enough rows to fill the device's warps: one pass.
        assert_eq!(split(RESIDENT * 8, 1 << 20, 1), None);
        assert_eq!(
            split(RESIDENT * 4, 1 << 20, 1),
            Some((SplitSide::Rows, 1 << 19, 2))
        );
        // Columns: a block per 32 columns against the resident blocks.
        assert_eq!(split(MIN_AXIS_SPAN, 256, 0), None);
        assert_eq!(split(MIN_AXIS_SPAN + 1, 256, 0), Some((SplitSide::Cols, 640, 2)));
        assert_eq!(split(1 << 20, 32 * RESIDENT, 0), None);
        // The 16-byte row kernel is never split.
        assert_eq!(split(1, 256, 1), None);
    }

    /// No outputs: no launch; an empty axis: a sum of zeros, no maximum; any other axis: an
    /// error.
    #[test]
    fn empty_shapes_and_bad_axes() {
        assert!(
            plan(0, 8, 1, true, AxisReduction::Max)
                .expect("no outputs")
                .launch
                .is_none()
        );
        assert!(
            plan(8, 0, 1, true, AxisReduction::Sum)
                .expect("zeros")
                .launch
                .is_some()
        );
        assert!(plan(8, 0, 1, true, AxisReduction::Max).is_err());
        assert!(plan(0, 8, 0, true, AxisReduction::Argmax).is_err());
        assert!(plan(8, 8, 2, true, AxisReduction::Sum).is_err());
    }
}
