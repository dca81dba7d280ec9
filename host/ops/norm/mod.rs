//! RMSNorm and LayerNorm over the rows of a matrix, f32 or bf16 (f32 statistics): each public
//! operation checks its operands once, picks the plan once ([`NormPlan`], by the row's length
//! and the buffers' alignment), and launches it. The kernels and the rules at the edges are in
//! `kernels_gpu::norm`.

mod plan;

pub use plan::NormPlan;

use half::bf16;
use kernels_gpu::norm::{BLOCK, ROWS_SHARED_BYTES, SHARED_BYTES};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::raw;
use crate::raw::norm::NormKernels;

/// Which norm kernels to run. Both follow the same rules (see [`Gpu::layer_norm`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NormAlgorithm {
    /// One block of 256 threads per row, the row re-read from memory for each pass, tree
    /// reductions in shared memory: the tutorial kernels `*_norm_block_reduce_*`.
    BlockReduce,
    /// One block per row, the row held in registers as 16-byte vectors, read once and written
    /// once (`*_norm_rows_*`), where the row's length is a multiple of the vector width (4 f32,
    /// 8 bf16), it fits (up to 32768 columns) and the buffers are 16-byte aligned; the tutorial
    /// kernel elsewhere. The default.
    #[default]
    InRegisters,
}

impl NormAlgorithm {
    /// Every algorithm, slowest first.
    pub const ALL: [NormAlgorithm; 2] = [NormAlgorithm::BlockReduce, NormAlgorithm::InRegisters];

    /// A short name: `block-reduce`, `in-registers`.
    pub fn name(self) -> &'static str {
        match self {
            NormAlgorithm::BlockReduce => "block-reduce",
            NormAlgorithm::InRegisters => "in-registers",
        }
    }
}

/// An element type the norms take: `f32` or [`bf16`] (statistics in f32 either way).
pub trait NormElement: Element + sealed::Sealed {
    /// Elements per 16-byte vector of the in-register kernels.
    #[doc(hidden)]
    const LANES: usize;
    /// Vectors per thread of the in-register kernels.
    #[doc(hidden)]
    const VECTORS: usize;
    /// The kernels of this element type.
    #[doc(hidden)]
    fn kernels() -> &'static NormKernels<Self>;
}

mod sealed {
    /// Only the element types with norm kernels.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
}

impl NormElement for f32 {
    const LANES: usize = <f32 as kernels_gpu::norm::NormElem>::LANES;
    const VECTORS: usize = <f32 as kernels_gpu::norm::NormElem>::VECTORS;
    fn kernels() -> &'static NormKernels<f32> {
        &raw::norm::F32
    }
}

impl NormElement for bf16 {
    const LANES: usize = <bf16 as kernels_gpu::norm::NormElem>::LANES;
    const VECTORS: usize = <bf16 as kernels_gpu::norm::NormElem>::VECTORS;
    fn kernels() -> &'static NormKernels<bf16> {
        &raw::norm::BF16
    }
}

/// The operands of one norm call once checked.
struct Operands<'a, T: 'static> {
    x: &'a DeviceVec<T>,
    w: &'a DeviceVec<T>,
    /// LayerNorm's bias; `None` for RMSNorm.
    b: Option<&'a DeviceVec<T>>,
    rows: usize,
    cols: usize,
    eps: f32,
}

impl Gpu {
    /// RMSNorm of each row of `x`: `y[r][j] = x[r][j] / sqrt(mean_j x[r][j]^2 + eps) * w[j]`,
    /// with the default algorithm ([`NormAlgorithm::InRegisters`]). `f32` or [`bf16`] elements
    /// (f32 statistics, the bf16 output rounded once).
    ///
    /// Rules: a zero row gives zeros (finite thanks to `eps`); a NaN in a row makes that row NaN,
    /// an infinite entry makes the row's finite entries 0 and its infinite ones NaN; other rows
    /// are never affected. An empty `x` (no rows or no columns) gives an empty result.
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
        let mut y = self.zeros_matrix::<T>(x.rows, x.cols)?;
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
    /// `f32` or [`bf16`] elements (f32 statistics, the bf16 output rounded once).
    ///
    /// The variance is computed in two passes over the row (the mean, then the squared
    /// deviations), the first shifted by the row's first entry: no cancellation for rows with a
    /// large mean (see `kernels_gpu::norm`).
    ///
    /// Rules: a constant row gives `y = b` (finite thanks to `eps`); a NaN or an infinity in a
    /// row makes that row NaN; other rows are never affected. An empty `x` gives an empty result.
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
        let mut y = self.zeros_matrix::<T>(x.rows, x.cols)?;
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
        let rows_kernel = if ops.b.is_some() {
            kernels.layer_rows.0
        } else {
            kernels.rms_rows.0
        };
        let max_threads = self.max_block_threads(rows_kernel);
        let plan = NormPlan::choose::<T>(algorithm, cols, aligned, max_threads);
        let limits = self.limits();
        let library = self.library();
        let cfg = match plan {
            NormPlan::BlockReduce => LaunchConfig::per_row(op, rows, BLOCK, SHARED_BYTES, &limits)?,
            NormPlan::Rows { threads } => {
                LaunchConfig::per_row(op, rows, threads, ROWS_SHARED_BYTES, &limits)?
            }
        };
        let shape = (rows, cols);
        // SAFETY: `x` and `y` hold rows*cols elements, `w` (and `b`) cols (checked above); the
        // plan admits the in-register kernels only for aligned buffers, `cols` a multiple of the
        // vector width and `cols / LANES <= VECTORS * threads`; `cfg` is the kernel's shape.
        unsafe {
            match (ops.b, plan) {
                (None, NormPlan::BlockReduce) => raw::norm::rms(
                    &library,
                    kernels.rms_block_reduce.1,
                    cfg,
                    ops.x,
                    ops.w,
                    &mut y.data,
                    shape,
                    ops.eps,
                ),
                (None, NormPlan::Rows { .. }) => raw::norm::rms(
                    &library,
                    kernels.rms_rows.1,
                    cfg,
                    ops.x,
                    ops.w,
                    &mut y.data,
                    shape,
                    ops.eps,
                ),
                (Some(b), NormPlan::BlockReduce) => raw::norm::layer(
                    &library,
                    kernels.layer_block_reduce.1,
                    cfg,
                    ops.x,
                    (ops.w, b),
                    &mut y.data,
                    shape,
                    ops.eps,
                ),
                (Some(b), NormPlan::Rows { .. }) => raw::norm::layer(
                    &library,
                    kernels.layer_rows.1,
                    cfg,
                    ops.x,
                    (ops.w, b),
                    &mut y.data,
                    shape,
                    ops.eps,
                ),
            }
        }
    }
}
