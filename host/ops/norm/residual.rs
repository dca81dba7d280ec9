//! The residual add fused into RMSNorm (`kernels_gpu::norm::residual`): `h = x + res` and
//! `y = rmsnorm(h) * w` in one read of `x` and `res`. The operands are checked as the norms'
//! (`eps`, one weight per column, the owner), the plan ([`ResidualNormPlan`]) is a pure choice
//! over the row's length and the buffers' alignment, and the launch is its kernel's.

use gpukern_device::launch::Kernel;
use kernels_gpu::norm as family;
use kernels_gpu::norm::{
    NormElem, RESIDUAL_BLOCK, RESIDUAL_ROWS_SHARED_BYTES, RESIDUAL_SHARED_BYTES, ROW_BLOCK_MAX,
};

use super::NormElement;
use crate::buffer::DeviceMatrix;
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::ops::same_shape;

/// The operation's name in errors.
const OP: &str = "residual_rms_norm";

/// Which kernel a residual RMSNorm runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ResidualNormAlgorithm {
    /// The tutorial (`residual_rms_norm_block_reduce_*`): a block of 256 per row, `h` re-read
    /// for the output. Any shape and alignment.
    BlockReduce,
    /// The row in registers (`residual_rms_norm_rows_*`): 16 elements per thread, rows of up to
    /// 16384 columns, a multiple of the vector width, every buffer 16-byte aligned; otherwise
    /// the tutorial runs. The default.
    #[default]
    Rows,
}

impl ResidualNormAlgorithm {
    /// Every algorithm, the tutorial first.
    pub const ALL: [ResidualNormAlgorithm; 2] =
        [ResidualNormAlgorithm::BlockReduce, ResidualNormAlgorithm::Rows];

    /// A short name: `block-reduce`, `rows`.
    pub fn name(self) -> &'static str {
        match self {
            ResidualNormAlgorithm::BlockReduce => "block-reduce",
            ResidualNormAlgorithm::Rows => "rows",
        }
    }
}

/// What one residual RMSNorm call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResidualNormPlan {
    /// The tutorial kernel, [`RESIDUAL_BLOCK`] threads per row.
    BlockReduce,
    /// The in-register kernel, a block of `threads` per row.
    Rows {
        /// A multiple of 32, at most 1024.
        threads: u32,
    },
}

/// Vectors per thread of the in-register kernel (16 elements: 4 f32 vectors, 2 bf16).
pub fn rows_vectors<T: NormElem>() -> usize {
    16 / T::LANES
}

impl ResidualNormPlan {
    /// The plan of `algorithm` for rows of `cols >= 1` elements of `T`; `aligned`: every buffer
    /// starts on a 16-byte boundary; `max_threads`: the driver's block limit of the in-register
    /// kernel. The in-register kernel takes a row of a multiple of the vector width whose
    /// vectors fit `rows_vectors` per thread in at most `min(max_threads, 1024)` threads (whole
    /// warps); anything else runs the tutorial.
    pub fn choose<T: NormElem>(
        algorithm: ResidualNormAlgorithm,
        cols: usize,
        aligned: bool,
        max_threads: u32,
    ) -> ResidualNormPlan {
        if algorithm == ResidualNormAlgorithm::BlockReduce || !aligned || cols % T::LANES != 0 {
            return ResidualNormPlan::BlockReduce;
        }
        let threads = (cols / T::LANES)
            .div_ceil(rows_vectors::<T>())
            .next_multiple_of(32)
            .max(32);
        if threads <= max_threads.min(ROW_BLOCK_MAX) as usize {
            ResidualNormPlan::Rows {
                threads: threads as u32,
            }
        } else {
            ResidualNormPlan::BlockReduce
        }
    }
}

/// The operands of one residual RMSNorm launch: `x`, `res`, the weight.
type Inputs<'a, T> = (&'a DeviceVec<T>, &'a DeviceVec<T>, &'a DeviceVec<T>);

/// An element type of the residual RMSNorm (`f32`, [`bf16`](half::bf16)): its two kernels.
pub trait ResidualNormElement: NormElement {
    /// The in-register kernel of this element type (for its block limit).
    #[doc(hidden)]
    fn residual_rows_kernel() -> &'static Kernel;

    /// Launches the tutorial (`rows = false`) or the in-register kernel.
    ///
    /// # Safety
    /// The kernel's contract (`kernels_gpu::norm::residual`) with `cfg` its launch shape.
    #[doc(hidden)]
    unsafe fn launch_residual(
        library: &Module,
        rows_kernel: bool,
        cfg: LaunchConfig,
        inputs: Inputs<'_, Self>,
        out: (&mut DeviceVec<Self>, &mut DeviceVec<Self>),
        shape: (usize, usize),
        eps: f32,
    ) -> Result<()>;
}

/// [`ResidualNormElement`] for an element type from its two kernels' names.
macro_rules! residual_element {
    ($t:ty, $tutorial:ident, $rows:ident) => {
        impl ResidualNormElement for $t {
            fn residual_rows_kernel() -> &'static Kernel {
                &family::$rows::KERNEL
            }

            unsafe fn launch_residual(
                library: &Module,
                rows_kernel: bool,
                cfg: LaunchConfig,
                (x, res, w): Inputs<'_, Self>,
                (h, y): (&mut DeviceVec<Self>, &mut DeviceVec<Self>),
                (rows, cols): (usize, usize),
                eps: f32,
            ) -> Result<()> {
                // SAFETY: forwarded contract.
                unsafe {
                    if rows_kernel {
                        family::$rows::launch(library, cfg, x, res, w, h, y, rows, cols, eps)
                    } else {
                        family::$tutorial::launch(library, cfg, x, res, w, h, y, rows, cols, eps)
                    }
                }
            }
        }
    };
}

residual_element!(
    f32,
    residual_rms_norm_block_reduce_f32,
    residual_rms_norm_rows_f32
);
residual_element!(
    half::bf16,
    residual_rms_norm_block_reduce_bf16,
    residual_rms_norm_rows_bf16
);

impl Gpu {
    /// The residual add fused into RMSNorm, on the rows of `x` and `res` (both `rows x cols`):
    /// returns `(h, y)` with the new residual `h = x + res` (rounded once to `T`) and
    /// `y = h / sqrt(mean_j h^2 + eps) * weight`, the statistic taken in f32 over the rounded
    /// `h` (as PyTorch eager and vLLM's `fused_add_rms_norm`). One read of `x` and `res`, one
    /// write of `h` and `y`. The rules at the edges are [`Gpu::rms_norm`]'s, on `h`.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `res` has `x`'s shape and `weight` one element
    /// per column; [`Error::InvalidArgument`] if `eps` is negative, NaN or infinite.
    pub fn residual_rms_norm<T: ResidualNormElement>(
        &self,
        x: &DeviceMatrix<T>,
        res: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
    ) -> Result<(DeviceMatrix<T>, DeviceMatrix<T>)> {
        self.residual_rms_norm_with(x, res, weight, eps, ResidualNormAlgorithm::default())
    }

    /// [`Gpu::residual_rms_norm`] with the given algorithm.
    pub fn residual_rms_norm_with<T: ResidualNormElement>(
        &self,
        x: &DeviceMatrix<T>,
        res: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        algorithm: ResidualNormAlgorithm,
    ) -> Result<(DeviceMatrix<T>, DeviceMatrix<T>)> {
        let mut h = self.zeros_matrix_of::<T>(x.rows, x.cols)?;
        let mut y = self.zeros_matrix_of::<T>(x.rows, x.cols)?;
        self.residual_rms_norm_into_with(x, res, weight, eps, (&mut h, &mut y), algorithm)?;
        Ok((h, y))
    }

    /// [`Gpu::residual_rms_norm`] into existing matrices `(h, y)` of `x`'s shape (no
    /// allocation: a decoder ping-pongs two residual buffers, `res` of one layer being `h` of
    /// the one before).
    pub fn residual_rms_norm_into<T: ResidualNormElement>(
        &self,
        x: &DeviceMatrix<T>,
        res: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        out: (&mut DeviceMatrix<T>, &mut DeviceMatrix<T>),
    ) -> Result<()> {
        self.residual_rms_norm_into_with(x, res, weight, eps, out, ResidualNormAlgorithm::default())
    }

    /// [`Gpu::residual_rms_norm_into`] with the given algorithm.
    pub fn residual_rms_norm_into_with<T: ResidualNormElement>(
        &self,
        x: &DeviceMatrix<T>,
        res: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        (h, y): (&mut DeviceMatrix<T>, &mut DeviceMatrix<T>),
        algorithm: ResidualNormAlgorithm,
    ) -> Result<()> {
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!("eps {eps}: it must be finite and >= 0"),
            });
        }
        let shape = [x.rows, x.cols];
        same_shape(
            OP,
            &shape,
            &[res.rows, res.cols],
            "the residual must have the input's shape",
        )?;
        same_shape(
            OP,
            &[x.cols],
            &[weight.len()],
            "the weight must have one element per column",
        )?;
        same_shape(
            OP,
            &shape,
            &[h.rows, h.cols],
            "the new residual must have the input's shape",
        )?;
        same_shape(
            OP,
            &shape,
            &[y.rows, y.cols],
            "the output must have the input's shape",
        )?;
        let owned = self.owns(&x.data)
            && self.owns(&res.data)
            && self.owns(weight)
            && self.owns(&h.data)
            && self.owns(&y.data);
        if !owned {
            return Err(Error::WrongDevice { op: OP });
        }
        let (rows, cols) = (x.rows, x.cols);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let aligned = x.data.is_16_byte_aligned()
            && res.data.is_16_byte_aligned()
            && weight.is_16_byte_aligned()
            && h.data.is_16_byte_aligned()
            && y.data.is_16_byte_aligned();
        let max_threads = self.max_block_threads(T::residual_rows_kernel());
        let plan = ResidualNormPlan::choose::<T>(algorithm, cols, aligned, max_threads);
        let limits = self.limits();
        let library = self.library();
        let inputs = (&x.data, &res.data, weight);
        let out = (&mut h.data, &mut y.data);
        // SAFETY: `x`, `res`, `h`, `y` hold rows*cols elements and `weight` cols (checked
        // above), `h` and `y` distinct buffers (two `&mut`); the in-register plan is chosen
        // only for aligned buffers and `cols` a multiple of the vector width that the block
        // holds; each configuration is its kernel's shape.
        unsafe {
            match plan {
                ResidualNormPlan::BlockReduce => {
                    let cfg =
                        LaunchConfig::per_row(OP, rows, RESIDUAL_BLOCK, RESIDUAL_SHARED_BYTES, &limits)?;
                    T::launch_residual(&library, false, cfg, inputs, out, (rows, cols), eps)
                }
                ResidualNormPlan::Rows { threads } => {
                    let cfg = LaunchConfig::per_row(OP, rows, threads, RESIDUAL_ROWS_SHARED_BYTES, &limits)?;
                    T::launch_residual(&library, true, cfg, inputs, out, (rows, cols), eps)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// Each side of every boundary of the plan: the tutorial when asked, unaligned, or off the
    /// vector width; the in-register kernel up to 16384 columns (1024 threads of 16), the
    /// tutorial one vector past it or past the driver's limit.
    #[test]
    fn residual_plan_boundaries() {
        use ResidualNormAlgorithm::{BlockReduce, Rows};
        let plan = |a, cols, aligned, max| ResidualNormPlan::choose::<bf16>(a, cols, aligned, max);
        assert_eq!(plan(BlockReduce, 4096, true, 1024), ResidualNormPlan::BlockReduce);
        assert_eq!(plan(Rows, 4096, false, 1024), ResidualNormPlan::BlockReduce);
        assert_eq!(plan(Rows, 4100, true, 1024), ResidualNormPlan::BlockReduce);
        assert_eq!(plan(Rows, 8, true, 1024), ResidualNormPlan::Rows { threads: 32 });
        assert_eq!(
            plan(Rows, 512, true, 1024),
            ResidualNormPlan::Rows { threads: 32 }
        );
        assert_eq!(
            plan(Rows, 520, true, 1024),
            ResidualNormPlan::Rows { threads: 64 }
        );
        assert_eq!(
            plan(Rows, 4096, true, 1024),
            ResidualNormPlan::Rows { threads: 256 }
        );
        assert_eq!(
            plan(Rows, 16384, true, 1024),
            ResidualNormPlan::Rows { threads: 1024 }
        );
        assert_eq!(plan(Rows, 16392, true, 1024), ResidualNormPlan::BlockReduce);
        assert_eq!(plan(Rows, 16384, true, 512), ResidualNormPlan::BlockReduce);
        assert_eq!(
            plan(Rows, 8192, true, 512),
            ResidualNormPlan::Rows { threads: 512 }
        );
        // f32: 4 lanes a vector, 4 vectors a thread.
        let plan32 = |cols| ResidualNormPlan::choose::<f32>(Rows, cols, true, 1024);
        assert_eq!(plan32(4), ResidualNormPlan::Rows { threads: 32 });
        assert_eq!(plan32(6), ResidualNormPlan::BlockReduce);
        assert_eq!(plan32(4096), ResidualNormPlan::Rows { threads: 256 });
        assert_eq!(plan32(16388), ResidualNormPlan::BlockReduce);
    }
}
