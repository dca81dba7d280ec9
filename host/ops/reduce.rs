//! Reductions: `sum`, `max`, `argmax` of a vector; `sum_axis`, `max_axis`, `argmax_axis` of a
//! matrix.
//!
//! Rules (the kernels' module, `kernels_gpu::reduce`, says how they hold on the device):
//! * `sum` of an empty vector is `0.0`; `max` and `argmax` of one are an
//!   [`Error::InvalidArgument`] (there is no maximum to give). Along an axis the same: an empty
//!   axis sums to `0.0`, and its maximum or argmax is an error (unless there are no outputs).
//! * `max` is NaN if any element is NaN; `+-inf` are ordinary values.
//! * `argmax`: the index of the first NaN if there is one (as `torch.argmax`), else of the
//!   first occurrence of the largest value (`-0.0` and `0.0` are equal: the first wins).
//! * Deterministic: no float atomics; on one device a result is the same bit for bit every run.
//!   `max` and `argmax` are exact; the f32 `sum` rounds in an order fixed by `n` and the device
//!   (see [`Gpu::sum`] for its error).

use kernels_gpu::reduce as k;
use ndarray::Axis;

use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::{DeviceLimits, LaunchConfig, ceil_div};
use crate::raw;

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

    /// The first pass's kernel and the vectors one of its blocks covers per sweep.
    fn kernel(self) -> (&'static gpukern_device::launch::Kernel, usize) {
        match self {
            ArgmaxAlgorithm::Vec4 => (&k::argmax_vec4::KERNEL, k::vec4::VEC_TILE),
            ArgmaxAlgorithm::Vec4U8 => (&k::argmax_vec4_u8::KERNEL, k::VEC_TILE_8),
            ArgmaxAlgorithm::Vec4Lanes => (&k::argmax_vec4_lanes::KERNEL, k::vec4::VEC_TILE),
            ArgmaxAlgorithm::Vec4LanesU8 => (&k::argmax_vec4_lanes_u8::KERNEL, k::VEC_TILE_8),
        }
    }
}

/// The operation of a whole-vector reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    Sum,
    Max,
}

impl Gpu {
    /// The sum of the elements of `x` (`0.0` if empty), with the default algorithm.
    ///
    /// Accumulated in f32 in a fixed order: each thread adds its elements in four running sums,
    /// then the sums meet in a tree. The error against the exact sum is at most about
    /// `(n / threads + 16) * 2^-24 * sum |x_i|`, with `threads` the launch's threads (tens of
    /// thousands on a large GPU); the same bits every run on one device.
    pub fn sum(&self, x: &DeviceVec) -> Result<f32> {
        self.sum_with(x, ReduceAlgorithm::default())
    }

    /// [`Gpu::sum`] with the given algorithm.
    pub fn sum_with(&self, x: &DeviceVec, algorithm: ReduceAlgorithm) -> Result<f32> {
        let mut out = self.alloc(1)?;
        self.reduce_into(Reduction::Sum, x, &mut out, algorithm)?;
        first(out.to_vec()?)
    }

    /// The sum of `x` into `out[0]` on the device (no download, no synchronisation), with the
    /// given algorithm; `out` must have length 1.
    pub fn sum_into_with(
        &self,
        x: &DeviceVec,
        out: &mut DeviceVec,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        self.reduce_into(Reduction::Sum, x, out, algorithm)
    }

    /// The largest element of `x`, NaN if `x` holds a NaN, with the default algorithm.
    ///
    /// Errors: [`Error::InvalidArgument`] if `x` is empty.
    pub fn max(&self, x: &DeviceVec) -> Result<f32> {
        self.max_with(x, ReduceAlgorithm::default())
    }

    /// [`Gpu::max`] with the given algorithm.
    pub fn max_with(&self, x: &DeviceVec, algorithm: ReduceAlgorithm) -> Result<f32> {
        let mut out = self.alloc(1)?;
        self.reduce_into(Reduction::Max, x, &mut out, algorithm)?;
        first(out.to_vec()?)
    }

    /// The index of the largest element of `x`: the first NaN if there is one, else the first of
    /// the largest value (see the module for the rules).
    ///
    /// Errors: [`Error::InvalidArgument`] if `x` is empty or not 16-byte aligned;
    /// [`Error::TooLarge`] past `u32::MAX` elements (indices are 32-bit on the device).
    pub fn argmax(&self, x: &DeviceVec) -> Result<usize> {
        self.argmax_with(x, ArgmaxAlgorithm::default())
    }

    /// [`Gpu::argmax`] with the given first-pass kernel (the same index from each).
    pub fn argmax_with(&self, x: &DeviceVec, algorithm: ArgmaxAlgorithm) -> Result<usize> {
        let mut index = self.zeros_of::<u32>(1)?;
        self.argmax_into_with(x, &mut index, algorithm)?;
        let v = index.to_vec()?;
        v.first().map(|&i| i as usize).ok_or_else(|| internal("argmax"))
    }

    /// [`Gpu::argmax`] into `index[0]` on the device (no download, no synchronisation); `index`
    /// must have length 1.
    pub fn argmax_into(&self, x: &DeviceVec, index: &mut DeviceVec<u32>) -> Result<()> {
        self.argmax_into_with(x, index, ArgmaxAlgorithm::default())
    }

    /// [`Gpu::argmax_into`] with the given first-pass kernel (the same index from each).
    pub fn argmax_into_with(
        &self,
        x: &DeviceVec,
        index: &mut DeviceVec<u32>,
        algorithm: ArgmaxAlgorithm,
    ) -> Result<()> {
        const OP: &str = "argmax";
        self.check_reduce(OP, x, index.len(), self.owns(index))?;
        let n = x.len();
        if n == 0 {
            return Err(empty(OP));
        }
        if u32::try_from(n).is_err() {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!("{n} elements: argmax indexes at most u32::MAX"),
            });
        }
        if !x.is_16_byte_aligned() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the input must be 16-byte aligned (device allocations are)".into(),
            });
        }
        let (kernel, tile) = algorithm.kernel();
        let cfg = self.vec4_config_tiled(OP, kernel, tile, n)?;
        let mut value = self.alloc(1)?;
        if cfg.grid.0 == 1 {
            // SAFETY: `x` holds `n` aligned floats; one block writes one pair.
            return unsafe { raw::reduce::argmax_vec4(self, algorithm, cfg, x, &mut value, index, n) };
        }
        let g = cfg.grid.0 as usize;
        let (mut values, mut indices) = (self.alloc(g)?, self.zeros_of::<u32>(g)?);
        // SAFETY: `x` holds `n` aligned floats; the partials hold one pair per block; then one
        // block reduces the `g` pairs into `(value, index)`.
        unsafe {
            raw::reduce::argmax_vec4(self, algorithm, cfg, x, &mut values, &mut indices, n)?;
            raw::reduce::argmax_pairs(
                self,
                one_block(OP, self)?,
                (&values, &indices),
                (&mut value, index),
                g,
            )
        }
    }

    /// Sums of `m` along `axis`: `Axis(1)` sums each row (a vector of `m.rows()`), `Axis(0)`
    /// each column (a vector of `m.cols()`), as ndarray's `sum_axis`. An empty axis sums to 0.
    ///
    /// Accumulated in f32 in an order fixed by the shape and the device (per output, running
    /// sums of every 32nd entry or fewer, then a tree; when the outputs are too few to fill the
    /// device, the axis is first cut into spans summed apart, then the spans' sums are added):
    /// the same bits every run on one device, with an error of order
    /// `(length / 8) * 2^-24 * sum |x|`.
    ///
    /// Errors: [`Error::InvalidArgument`] for an axis other than 0 or 1.
    pub fn sum_axis(&self, m: &DeviceMatrix, axis: Axis) -> Result<DeviceVec> {
        self.reduce_axis("sum_axis", Reduction::Sum, m, axis)
    }

    /// Maxima of `m` along `axis`: `Axis(1)` the largest entry of each row, `Axis(0)` of each
    /// column (as `torch.amax(m, dim)` with `dim = 1 - axis`); NaN where the row or column holds
    /// one. Exact.
    ///
    /// Errors: [`Error::InvalidArgument`] for an axis other than 0 or 1, or when the axis is
    /// empty (`cols == 0` for `Axis(1)`, `rows == 0` for `Axis(0)`: no maximum to give) and an
    /// output would need one.
    pub fn max_axis(&self, m: &DeviceMatrix, axis: Axis) -> Result<DeviceVec> {
        self.reduce_axis("max_axis", Reduction::Max, m, axis)
    }

    /// [`Gpu::sum_axis`] or [`Gpu::max_axis`] as operation `op`: one launch, or the split pass
    /// into a `parts x outputs` matrix of partials and the column kernel of the same reduction
    /// on it.
    fn reduce_axis(
        &self,
        op: &'static str,
        reduction: Reduction,
        m: &DeviceMatrix,
        axis: Axis,
    ) -> Result<DeviceVec> {
        let fold = match reduction {
            Reduction::Sum => AxisReduction::Sum,
            Reduction::Max => AxisReduction::Max,
        };
        let (outputs, launch) = self.axis_launch(op, m, axis, fold)?;
        let mut out = self.alloc(outputs)?;
        let Some(launch) = launch else {
            return Ok(out);
        };
        let (rows, cols) = (m.rows, m.cols);
        let Some(split) = launch.split else {
            // SAFETY: `m` holds `rows * cols` floats, `out` one float per output of `launch`.
            unsafe {
                raw::reduce::axis(
                    self,
                    reduction,
                    launch.side,
                    launch.cfg,
                    &m.data,
                    &mut out,
                    (rows, cols),
                )?
            };
            return Ok(out);
        };
        let mut partials = self.alloc(split.parts * outputs)?;
        // SAFETY: `m` holds `rows * cols` floats, `partials` one float per span and output; then
        // the column kernel reduces the `parts x outputs` partials into `out`.
        unsafe {
            raw::reduce::axis_parts(
                self,
                reduction,
                launch.cfg,
                split,
                &m.data,
                &mut partials,
                (rows, cols),
            )?;
            raw::reduce::axis(
                self,
                reduction,
                AxisSide::Cols,
                split.finish,
                &partials,
                &mut out,
                (split.parts, outputs),
            )?;
        }
        Ok(out)
    }

    /// Indices of the maxima of `m` along `axis`: `Axis(1)` the column of each row's largest
    /// entry, `Axis(0)` the row of each column's; by the family's rule (the first NaN if there is
    /// one, else the first occurrence of the largest value; a lane of nothing but `-inf` gives
    /// 0), as `torch.argmax(m, dim)` with `dim = 1 - axis`.
    ///
    /// Errors: as [`Gpu::max_axis`]; [`Error::TooLarge`] past `u32::MAX` entries along the axis
    /// (indices are 32-bit on the device).
    pub fn argmax_axis(&self, m: &DeviceMatrix, axis: Axis) -> Result<DeviceVec<u32>> {
        let (outputs, launch) = self.axis_launch("argmax_axis", m, axis, AxisReduction::Argmax)?;
        let mut out = self.zeros_of::<u32>(outputs)?;
        let Some(launch) = launch else {
            return Ok(out);
        };
        let (rows, cols) = (m.rows, m.cols);
        let Some(split) = launch.split else {
            // SAFETY: `m` holds `rows * cols` floats, `out` one index per output of `launch`.
            unsafe {
                raw::reduce::axis_argmax(self, launch.side, launch.cfg, &m.data, &mut out, (rows, cols))?
            };
            return Ok(out);
        };
        let slots = split.parts * outputs;
        let (mut values, mut indices) = (self.alloc(slots)?, self.zeros_of::<u32>(slots)?);
        // SAFETY: `m` holds `rows * cols` floats, the partials one pair per span and output; then
        // `argmax_parts` reduces the `parts x outputs` pairs into `out`.
        unsafe {
            raw::reduce::axis_argmax_parts(
                self,
                launch.cfg,
                split,
                &m.data,
                (&mut values, &mut indices),
                (rows, cols),
            )?;
            raw::reduce::argmax_parts(
                self,
                split.finish,
                (&values, &indices),
                &mut out,
                (split.parts, outputs),
            )?;
        }
        Ok(out)
    }

    /// The one validation and plan of an axis reduction `op` of `m` by `fold`: the number of
    /// outputs and the launch (`None` when there are no outputs). A maximum or an argmax of an
    /// empty axis has no result (a sum's is 0); the argmax's indices are 32-bit on the device.
    fn axis_launch(
        &self,
        op: &'static str,
        m: &DeviceMatrix,
        axis: Axis,
        fold: AxisReduction,
    ) -> Result<(usize, Option<AxisLaunch>)> {
        self.check_owner(op, &[&m.data])?;
        let (rows, cols) = (m.rows, m.cols);
        let (outputs, reduced, side) = match axis.index() {
            1 if cols % 4 == 0 && cols > 0 && cols <= k::VEC_MAX_COLS && m.data.is_16_byte_aligned() => {
                (rows, cols, AxisSide::VecRows(vec_group(cols)))
            }
            1 if cols <= k::NARROW_MAX_COLS => (rows, cols, AxisSide::NarrowRows),
            1 if cols <= k::SHORT_MAX_COLS => (rows, cols, AxisSide::ShortRows),
            1 => (rows, cols, AxisSide::Rows),
            0 if self.narrow_cols(op, rows, cols)? => (cols, rows, AxisSide::NarrowCols),
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
                detail: format!(
                    "axis {} of a {rows}x{cols} matrix is empty: it has no maximum",
                    axis.index()
                ),
            });
        }
        if fold == AxisReduction::Argmax && u32::try_from(reduced).is_err() {
            return Err(Error::TooLarge {
                op,
                detail: format!("{reduced} entries along the axis: indices are 32-bit on the device"),
            });
        }
        if outputs == 0 {
            return Ok((0, None));
        }
        let limits = self.limits();
        // The one-pass launch over `units` outputs (or spans): outputs per block and threads.
        let one_pass = |units: usize| {
            let (per_block, threads) = match side {
                AxisSide::Rows => (k::ROWS_PER_BLOCK as usize, k::ROWS_BLOCK),
                AxisSide::ShortRows => (k::ROWS_PER_BLOCK as usize * k::SHORT_ROWS, k::ROWS_BLOCK),
                AxisSide::VecRows(group) => (k::ROWS_PER_BLOCK as usize * (32 / group), k::ROWS_BLOCK),
                AxisSide::NarrowRows | AxisSide::NarrowCols => (k::NARROW_BLOCK as usize, k::NARROW_BLOCK),
                AxisSide::Cols => return cols_config(op, units, 1, &limits),
            };
            LaunchConfig::rows_per_block(op, units, per_block, threads, 0, &limits)
        };
        let Some((split_side, span, parts)) = self.axis_spans(op, fold, side, outputs, reduced)? else {
            return Ok((
                outputs,
                Some(AxisLaunch {
                    side,
                    cfg: one_pass(outputs)?,
                    split: None,
                }),
            ));
        };
        let cfg = match split_side {
            SplitSide::Rows => one_pass(outputs * parts)?,
            SplitSide::Cols => cols_config(op, outputs, parts, &limits)?,
        };
        let split = AxisSplit {
            side: split_side,
            span,
            parts,
            finish: cols_config(op, outputs, 1, &limits)?,
        };
        Ok((
            outputs,
            Some(AxisLaunch {
                side,
                cfg,
                split: Some(split),
            }),
        ))
    }

    /// Whether a column reduction of a `rows x cols` matrix takes a thread per column (the
    /// `*_cols_narrow` kernels): with fewer than `NARROW_COLS_MAX_ROWS` rows, or at least a
    /// quarter as many columns as the device holds threads of those kernels.
    fn narrow_cols(&self, op: &'static str, rows: usize, cols: usize) -> Result<bool> {
        if rows < k::NARROW_COLS_MAX_ROWS {
            return Ok(true);
        }
        let resident = self.resident_blocks(op, &k::sum_cols_narrow::KERNEL, k::NARROW_BLOCK, 0)? as usize;
        Ok(cols >= resident * k::NARROW_BLOCK as usize / 4)
    }

    /// Whether an axis reduction of `outputs` outputs over `reduced` entries each is cut into
    /// spans, and if so `(side, span, parts)`: only the warp-per-row and block-column plans are
    /// (the others are chosen for shapes that fill the device), when one pass leaves the
    /// device short of work (a warp per row, or a block per 32 columns, against the split
    /// kernel's resident warps or blocks), as many spans as fill it, each at least
    /// [`MIN_AXIS_SPAN`] entries, rounded to a multiple of [`AXIS_SPAN_ALIGN`].
    fn axis_spans(
        &self,
        op: &'static str,
        fold: AxisReduction,
        side: AxisSide,
        outputs: usize,
        reduced: usize,
    ) -> Result<Option<(SplitSide, usize, usize)>> {
        let split_side = match side {
            AxisSide::Rows if reduced > MIN_AXIS_SPAN => SplitSide::Rows,
            AxisSide::Cols if reduced > MIN_AXIS_SPAN => SplitSide::Cols,
            _ => return Ok(None),
        };
        let kernel = fold.parts_kernel(split_side);
        let (capacity, units) = match split_side {
            SplitSide::Rows => {
                let resident = self.resident_blocks(op, kernel, k::ROWS_BLOCK, 0)? as usize;
                (resident * k::ROWS_PER_BLOCK as usize, outputs)
            }
            SplitSide::Cols => {
                let threads = k::COLS_BLOCK_X * k::COLS_BLOCK_Y;
                let resident = self.resident_blocks(op, kernel, threads, k::COLS_SHARED_BYTES)? as usize;
                (resident, outputs.div_ceil(k::COLS_BLOCK_X as usize))
            }
        };
        let parts = (capacity / units.max(1)).min(reduced.div_ceil(MIN_AXIS_SPAN));
        if parts < 2 {
            return Ok(None);
        }
        let span = reduced.div_ceil(parts).next_multiple_of(AXIS_SPAN_ALIGN);
        let parts = reduced.div_ceil(span);
        Ok((parts >= 2).then_some((split_side, span, parts)))
    }

    /// The one validation of a whole-vector reduction into an output of `out_len` elements.
    fn check_reduce(&self, op: &'static str, x: &DeviceVec, out_len: usize, out_owned: bool) -> Result<()> {
        if out_len != 1 {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("the output must have length 1, not {out_len}"),
            });
        }
        if !out_owned {
            return Err(Error::WrongDevice { op });
        }
        self.check_owner(op, &[x])
    }

    /// `reduction` of `x` into `out[0]`, `algorithm`'s way.
    pub(crate) fn reduce_into(
        &self,
        reduction: Reduction,
        x: &DeviceVec,
        out: &mut DeviceVec,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        let op = match reduction {
            Reduction::Sum => "sum",
            Reduction::Max => "max",
        };
        self.check_reduce(op, x, out.len(), self.owns(out))?;
        let n = x.len();
        if n == 0 && reduction == Reduction::Max {
            return Err(empty(op));
        }
        if algorithm == ReduceAlgorithm::Vec4 && x.is_16_byte_aligned() {
            self.reduce_vec4(op, reduction, x, out)
        } else {
            self.reduce_tree(op, reduction, x, out)
        }
    }

    /// The two launches of the fast rung: partials of the resident blocks, then one block on
    /// them (one launch when one block suffices).
    fn reduce_vec4(
        &self,
        op: &'static str,
        reduction: Reduction,
        x: &DeviceVec,
        out: &mut DeviceVec,
    ) -> Result<()> {
        let kernel = match reduction {
            Reduction::Sum => &k::sum_vec4::KERNEL,
            Reduction::Max => &k::max_vec4::KERNEL,
        };
        let n = x.len();
        let cfg = self.vec4_config(op, kernel, n)?;
        if cfg.grid.0 == 1 {
            // SAFETY: `x` holds `n` aligned floats, `out` one.
            return unsafe { raw::reduce::vec4(self, reduction, cfg, x, out, n) };
        }
        let g = cfg.grid.0 as usize;
        let mut partials = self.alloc(g)?;
        // SAFETY: `x` holds `n` aligned floats, `partials` one per block (a fresh, aligned
        // allocation), `out` one.
        unsafe {
            raw::reduce::vec4(self, reduction, cfg, x, &mut partials, n)?;
            raw::reduce::vec4(self, reduction, one_block(op, self)?, &partials, out, g)
        }
    }

    /// The tutorial: the tree kernel on `x`, then on its partials, until one value is left.
    fn reduce_tree(
        &self,
        op: &'static str,
        reduction: Reduction,
        x: &DeviceVec,
        out: &mut DeviceVec,
    ) -> Result<()> {
        let limits = self.limits();
        let block = k::TREE_BLOCK as usize;
        let mut len = x.len();
        let mut current: Option<DeviceVec> = None;
        loop {
            let blocks = ceil_div(len, block).max(1);
            let cfg = LaunchConfig::per_row(op, blocks, k::TREE_BLOCK, k::TREE_SHARED_BYTES, &limits)?;
            let src = current.as_ref().unwrap_or(x);
            if blocks == 1 {
                // SAFETY: `src` holds `len` floats, `out` one; one block.
                return unsafe { raw::reduce::tree(self, reduction, cfg, src, out, len) };
            }
            let mut partials = self.alloc(blocks)?;
            // SAFETY: `src` holds `len` floats, `partials` one per block.
            unsafe { raw::reduce::tree(self, reduction, cfg, src, &mut partials, len)? };
            current = Some(partials);
            len = blocks;
        }
    }

    /// The grid of a vector-load reduction over `n` elements: one block per `VEC_TILE` vectors,
    /// at most the blocks of `kernel` resident on the device at once, at least one.
    fn vec4_config(
        &self,
        op: &'static str,
        kernel: &'static gpukern_device::launch::Kernel,
        n: usize,
    ) -> Result<LaunchConfig> {
        self.vec4_config_tiled(op, kernel, k::vec4::VEC_TILE, n)
    }

    /// [`Gpu::vec4_config`] for a kernel whose block covers `tile` vectors per sweep.
    fn vec4_config_tiled(
        &self,
        op: &'static str,
        kernel: &'static gpukern_device::launch::Kernel,
        tile: usize,
        n: usize,
    ) -> Result<LaunchConfig> {
        let limits = self.limits();
        let resident = self.resident_blocks(op, kernel, k::VEC_BLOCK, k::VEC_SHARED_BYTES)? as usize;
        let blocks = ceil_div(n / 4, tile).clamp(1, resident.max(1));
        LaunchConfig::per_row(op, blocks, k::VEC_BLOCK, k::VEC_SHARED_BYTES, &limits)
    }
}

/// One block of the vector-load kernels: their second pass.
fn one_block(op: &'static str, gpu: &Gpu) -> Result<LaunchConfig> {
    LaunchConfig::per_row(op, 1, k::VEC_BLOCK, k::VEC_SHARED_BYTES, &gpu.limits())
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
    Rows,
    Cols,
}

/// What an axis reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AxisReduction {
    Sum,
    Max,
    Argmax,
}

impl AxisReduction {
    /// The split pass's kernel on `side`.
    fn parts_kernel(self, side: SplitSide) -> &'static gpukern_device::launch::Kernel {
        match (self, side) {
            (AxisReduction::Sum, SplitSide::Rows) => &k::sum_rows_parts::KERNEL,
            (AxisReduction::Sum, SplitSide::Cols) => &k::sum_cols_parts::KERNEL,
            (AxisReduction::Max, SplitSide::Rows) => &k::max_rows_parts::KERNEL,
            (AxisReduction::Max, SplitSide::Cols) => &k::max_cols_parts::KERNEL,
            (AxisReduction::Argmax, SplitSide::Rows) => &k::argmax_rows_parts::KERNEL,
            (AxisReduction::Argmax, SplitSide::Cols) => &k::argmax_cols_parts::KERNEL,
        }
    }
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
    pub(crate) side: SplitSide,
    pub(crate) span: usize,
    pub(crate) parts: usize,
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
    let blocks = u32::try_from(ceil_div(cols, k::COLS_BLOCK_X as usize))
        .map_err(|_| too_large(format!("{cols} columns")))?;
    let parts = u32::try_from(parts).map_err(|_| too_large(format!("{parts} spans")))?;
    LaunchConfig {
        grid: (blocks, parts, 1),
        block: (k::COLS_BLOCK_X, k::COLS_BLOCK_Y, 1),
        shared_mem_bytes: k::COLS_SHARED_BYTES,
    }
    .checked(op, limits)
}

/// The error of a maximum of nothing.
fn empty(op: &'static str) -> Error {
    Error::InvalidArgument {
        op,
        detail: "the input is empty: it has no maximum".into(),
    }
}

/// The one element of a downloaded result.
fn first(v: Vec<f32>) -> Result<f32> {
    v.first().copied().ok_or_else(|| internal("reduction"))
}

/// A result buffer that came back empty: a bug of gpukern, reported rather than a panic.
fn internal(op: &'static str) -> Error {
    Error::InvalidArgument {
        op,
        detail: "internal: the one-element result came back empty".into(),
    }
}
