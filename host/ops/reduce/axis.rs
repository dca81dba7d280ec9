//! Reductions along an axis of a matrix: `sum_axis`, `max_axis`, `argmax_axis`. Each checks its
//! operands once, takes its plan from [`AxisPlan::choose`] (with the device's residency of the
//! kernels it asks about) and launches it.

use ndarray::Axis;

use super::kernels;
use super::plan::{AxisPlan, AxisReduction, AxisShape, AxisSide, Reduction};
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::Result;

impl Gpu {
    /// Sums of `m` along `axis`: `Axis(1)` sums each row (a vector of `m.rows()`), `Axis(0)`
    /// each column (a vector of `m.cols()`), as ndarray's `sum_axis`. An empty axis sums to 0.
    ///
    /// Accumulated in f32 in an order fixed by the shape and the device (per output, running
    /// sums of every 32nd entry or fewer, then a tree; when the outputs are too few to fill the
    /// device, the axis is first cut into spans summed apart, then the spans' sums are added):
    /// the same bits every run on one device, with an error of order
    /// `(length / 8) * 2^-24 * sum |x|`.
    ///
    /// Errors: [`crate::Error::InvalidArgument`] for an axis other than 0 or 1.
    pub fn sum_axis(&self, m: &DeviceMatrix, axis: Axis) -> Result<DeviceVec> {
        self.reduce_axis("sum_axis", Reduction::Sum, m, axis)
    }

    /// Maxima of `m` along `axis`: `Axis(1)` the largest entry of each row, `Axis(0)` of each
    /// column (as `torch.amax(m, dim)` with `dim = 1 - axis`); NaN where the row or column holds
    /// one. Exact.
    ///
    /// Errors: [`crate::Error::InvalidArgument`] for an axis other than 0 or 1, or when the axis is
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
        let AxisPlan { outputs, launch } = self.axis_plan(op, m, axis, fold)?;
        let mut out = self.alloc(outputs)?;
        let Some(launch) = launch else {
            return Ok(out);
        };
        let (rows, cols) = (m.rows, m.cols);
        let Some(split) = launch.split else {
            // SAFETY: `m` holds `rows * cols` floats, `out` one float per output of `launch`.
            unsafe {
                kernels::axis(
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
            kernels::axis_parts(
                self,
                reduction,
                launch.cfg,
                split,
                &m.data,
                &mut partials,
                (rows, cols),
            )?;
            kernels::axis(
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
    /// Errors: as [`Gpu::max_axis`]; [`crate::Error::TooLarge`] past `u32::MAX` entries along the axis
    /// (indices are 32-bit on the device).
    pub fn argmax_axis(&self, m: &DeviceMatrix, axis: Axis) -> Result<DeviceVec<u32>> {
        let AxisPlan { outputs, launch } = self.axis_plan("argmax_axis", m, axis, AxisReduction::Argmax)?;
        let mut out = self.zeros_of::<u32>(outputs)?;
        let Some(launch) = launch else {
            return Ok(out);
        };
        let (rows, cols) = (m.rows, m.cols);
        let Some(split) = launch.split else {
            // SAFETY: `m` holds `rows * cols` floats, `out` one index per output of `launch`.
            unsafe { kernels::axis_argmax(self, launch.side, launch.cfg, &m.data, &mut out, (rows, cols))? };
            return Ok(out);
        };
        let slots = split.parts * outputs;
        let (mut values, mut indices) = (self.alloc(slots)?, self.zeros_of::<u32>(slots)?);
        // SAFETY: `m` holds `rows * cols` floats, the partials one pair per span and output; then
        // `argmax_parts` reduces the `parts x outputs` pairs into `out`.
        unsafe {
            kernels::axis_argmax_parts(
                self,
                launch.cfg,
                split,
                &m.data,
                (&mut values, &mut indices),
                (rows, cols),
            )?;
            kernels::argmax_parts(
                self,
                split.finish,
                (&values, &indices),
                &mut out,
                (split.parts, outputs),
            )?;
        }
        Ok(out)
    }

    /// The one validation of an axis reduction `op` of `m` by `fold`, and its plan.
    fn axis_plan(
        &self,
        op: &'static str,
        m: &DeviceMatrix,
        axis: Axis,
        fold: AxisReduction,
    ) -> Result<AxisPlan> {
        self.check_owner(op, &[&m.data])?;
        let shape = AxisShape {
            rows: m.rows,
            cols: m.cols,
            axis: axis.index(),
            aligned: m.data.is_16_byte_aligned(),
        };
        let resident = |fact| {
            let (kernel, threads, shared) = kernels::residency_of(fact);
            Ok(self.resident_blocks(op, kernel, threads, shared)? as usize)
        };
        AxisPlan::choose(op, shape, fold, &self.limits(), resident)
    }
}
