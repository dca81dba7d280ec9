//! RMSNorm and LayerNorm over the rows of a matrix, f32 or bf16 (f32 statistics): each public
//! operation checks its operands once, picks the plan once ([`NormPlan`], by the row's length
//! and the buffers' alignment), and launches it. The kernels and the rules at the edges are in
//! `kernels_gpu::norm`. The residual add fused into RMSNorm ([`Gpu::residual_rms_norm`]) is in
//! `residual.rs`, its plan beside it.

mod kernels;
mod plan;
mod residual;
mod variant;
pub use kernels::NormElement;
pub(crate) use kernels::Operands;
pub use plan::{DEFAULT_RULES, DefaultRule, ElementKind, NormKind, NormPlan};
pub use residual::{ResidualNormAlgorithm, ResidualNormElement, ResidualNormPlan};
pub use variant::{
    LoopBlock, LoopConfig, LoopKind, NormAlgorithm, RowLoads, RowsConfig, RowsWidth, WarpGrid,
};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};

impl Gpu {
    /// RMSNorm of each row of `x`: `y[r][j] = x[r][j] / sqrt(mean_j x[r][j]^2 + eps) * w[j]`,
    /// with the default algorithm ([`NormAlgorithm::InRegisters`]). `f32` or [`bf16`](half::bf16) elements
    /// (f32 statistics, the bf16 output rounded once).
    ///
    /// Rules: a zero row gives zeros (finite thanks to `eps`); a NaN in a row makes that row NaN,
    /// an infinite entry makes the row's finite entries 0 and its infinite ones NaN; other rows
    /// are never affected. A row of finite entries whose sum of squares overflows f32 (entries
    /// from about `1.8e19 / sqrt(cols)` on) is computed right on its entries scaled by a power of
    /// two, a rare path every algorithm takes (`kernels_gpu::norm`'s `overflow`). An empty `x`
    /// (no rows or no columns) gives an empty result.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `weight.len() == x.cols()`;
    /// [`Error::InvalidArgument`] if `eps` is negative, NaN or infinite.
    pub fn rms_norm<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
    ) -> Result<DeviceMatrix<T>> {
        self.rms_norm_with(x, weight, eps, NormAlgorithm::default())
    }

    /// [`Gpu::rms_norm`] with the given algorithm.
    pub fn rms_norm_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        algorithm: NormAlgorithm,
    ) -> Result<DeviceMatrix<T>> {
        let mut y = self.zeros_matrix_of::<T>(x.rows, x.cols)?;
        self.rms_norm_into_with(x, weight, eps, &mut y, algorithm)?;
        Ok(y)
    }

    /// [`Gpu::rms_norm`] into an existing matrix of `x`'s shape (no allocation).
    pub fn rms_norm_into<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
    ) -> Result<()> {
        self.rms_norm_into_with(x, weight, eps, y, NormAlgorithm::default())
    }

    /// [`Gpu::rms_norm_into`] with the given algorithm.
    pub fn rms_norm_into_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
        algorithm: NormAlgorithm,
    ) -> Result<()> {
        let ops = self.norm_operands("rms_norm", x, weight, None, eps, y)?;
        self.launch_norm("rms_norm", ops, y, algorithm)
    }

    /// LayerNorm of each row of `x`:
    /// `y[r][j] = (x[r][j] - mean_r) / sqrt(var_r + eps) * w[j] + b[j]` with the row's mean and
    /// biased variance (as PyTorch), with the default algorithm ([`NormAlgorithm::InRegisters`]).
    /// `f32` or [`bf16`](half::bf16) elements (f32 statistics, the bf16 output rounded once).
    ///
    /// The variance is computed in two passes over the row (the mean, then the squared
    /// deviations), the first shifted by the row's first entry: no cancellation for rows with a
    /// large mean (see `kernels_gpu::norm`).
    ///
    /// Rules: a constant row gives `y = b` (finite thanks to `eps`); a NaN or an infinity in a
    /// row makes that row NaN; other rows are never affected. A row of finite entries whose
    /// sums overflow f32 (a spread from about `1.8e19 / sqrt(cols)` on) is computed right on its
    /// entries scaled by a power of two, a rare path every algorithm takes. An empty `x` gives an
    /// empty result.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `weight.len() == bias.len() == x.cols()`;
    /// [`Error::InvalidArgument`] if `eps` is negative, NaN or infinite.
    pub fn layer_norm<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
    ) -> Result<DeviceMatrix<T>> {
        self.layer_norm_with(x, weight, bias, eps, NormAlgorithm::default())
    }

    /// [`Gpu::layer_norm`] with the given algorithm.
    pub fn layer_norm_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
        algorithm: NormAlgorithm,
    ) -> Result<DeviceMatrix<T>> {
        let mut y = self.zeros_matrix_of::<T>(x.rows, x.cols)?;
        self.layer_norm_into_with(x, weight, bias, eps, &mut y, algorithm)?;
        Ok(y)
    }

    /// [`Gpu::layer_norm`] into an existing matrix of `x`'s shape (no allocation).
    pub fn layer_norm_into<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
    ) -> Result<()> {
        self.layer_norm_into_with(x, weight, bias, eps, y, NormAlgorithm::default())
    }

    /// [`Gpu::layer_norm_into`] with the given algorithm.
    pub fn layer_norm_into_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
        algorithm: NormAlgorithm,
    ) -> Result<()> {
        let ops = self.norm_operands("layer_norm", x, weight, Some(bias), eps, y)?;
        self.launch_norm("layer_norm", ops, y, algorithm)
    }

    /// The checks of every norm: `eps`, the shapes, the owner.
    fn norm_operands<'a, T: NormElement>(
        &self,
        op: &'static str,
        x: &'a DeviceMatrix<T>,
        w: &'a DeviceVec<T>,
        b: Option<&'a DeviceVec<T>>,
        eps: f32,
        y: &DeviceMatrix<T>,
    ) -> Result<Operands<'a, T>> {
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("eps {eps}: it must be finite and >= 0"),
            });
        }
        same_shape(
            op,
            &[x.cols],
            &[w.len()],
            "the weight must have one element per column",
        )?;
        if let Some(b) = b {
            same_shape(
                op,
                &[x.cols],
                &[b.len()],
                "the bias must have one element per column",
            )?;
        }
        same_shape(
            op,
            &[x.rows, x.cols],
            &[y.rows, y.cols],
            "the output must have the input's shape",
        )?;
        let owned =
            self.owns(&x.data) && self.owns(w) && b.is_none_or(|b| self.owns(b)) && self.owns(&y.data);
        if !owned {
            return Err(Error::WrongDevice { op });
        }
        Ok(Operands {
            x: &x.data,
            w,
            b,
            rows: x.rows,
            cols: x.cols,
            eps,
        })
    }

    /// Chooses the plan and launches it.
    fn launch_norm<T: NormElement>(
        &self,
        op: &'static str,
        ops: Operands<'_, T>,
        y: &mut DeviceMatrix<T>,
        algorithm: NormAlgorithm,
    ) -> Result<()> {
        let (rows, cols) = (ops.rows, ops.cols);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let aligned = ops.x.is_16_byte_aligned()
            && ops.w.is_16_byte_aligned()
            && ops.b.is_none_or(|b| b.is_16_byte_aligned())
            && y.data.is_16_byte_aligned();
        let kernels = T::kernels();
        let layer = ops.b.is_some();
        // The block limit of the kernel the plan would launch at each width (the streaming
        // candidates have their own kernels at 16 and 32 elements per thread; a streaming config
        // without a kernel runs the default's plan, on the plain kernels).
        let stream = matches!(
            algorithm,
            NormAlgorithm::Rows(c) if c.loads == RowLoads::Streaming && c.kernel_stem().is_some()
        );
        let max_threads = |width: RowsWidth| {
            let loads = match stream && width != RowsWidth::W64 {
                true => RowLoads::Streaming,
                false => RowLoads::Plain,
            };
            let probe = NormPlan::Rows {
                threads: 32,
                config: RowsConfig::new(width, loads),
            };
            self.max_block_threads(kernels.kernel(probe, layer))
        };
        let mut plan = NormPlan::choose::<T>(algorithm, cols, aligned, layer, max_threads);
        if matches!(plan, NormPlan::Ring { .. }) && !self.has_norm_kernel(kernels.kernel(plan, layer)) {
            // The ring kernels are in the sm_90a module only (probed by their own entry, not by
            // matmul's wgmma one: matmul may be compiled out).
            plan = NormPlan::choose::<T>(NormAlgorithm::InRegisters, cols, aligned, layer, max_threads);
        }
        self.launch_norm_plan(op, plan, ops, y)
    }
}
