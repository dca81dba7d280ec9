//! Gated linear units (SwiGLU, GeGLU) over the rows of a `rows x 2n` matrix, gate half first:
//! `y = act(x[:, ..n]) * x[:, n..]`, f32 or bf16 (f32 arithmetic, one rounding). `mod.rs` checks
//! the operands and holds the public methods, `plan.rs` picks the kernel ([`GluPlan`]),
//! `kernels.rs` launches it. Kernels and rules: `kernels_gpu::glu`.

mod kernels;
mod plan;
pub use plan::{GluAlgorithm, GluPlan};

use kernels::{GluKernels, GluPair};
use kernels_gpu::glu::{GluElem, ROWS_BLOCK, ROWS_SPAN, SCALAR_BLOCK, VECTOR_BLOCK, VECTOR_UNROLL};

use super::same_shape;
use crate::buffer::{DeviceMatrix, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

/// The GELU of a GeGLU: PyTorch's `F.gelu(gate, approximate=...)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GeluApprox {
    /// `approximate='tanh'`: `g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))` (Gemma's GeGLU).
    #[default]
    Tanh,
    /// `approximate='none'`: `g/2 (1 + erf(g / sqrt 2))`.
    Erf,
}

/// The activation of one GLU call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Activation {
    Silu,
    Gelu(GeluApprox),
}

/// An element type the GLUs take: `f32` or [`bf16`](half::bf16).
pub trait GluElement: Element + GluElem + sealed::Sealed {
    /// Elements per 16-byte vector.
    #[doc(hidden)]
    const LANES: usize;
    /// The kernels of this element type.
    #[doc(hidden)]
    fn kernels() -> &'static GluKernels<Self>;
}

mod sealed {
    /// Only the element types with GLU kernels.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
}

impl GluElement for f32 {
    const LANES: usize = 4;
    fn kernels() -> &'static GluKernels<f32> {
        &kernels::F32
    }
}

impl GluElement for half::bf16 {
    const LANES: usize = 8;
    fn kernels() -> &'static GluKernels<half::bf16> {
        &kernels::BF16
    }
}

impl Gpu {
    /// SwiGLU of the rows of `x` (`rows x 2n`, the gate in columns `0..n`, the up projection in
    /// `n..2n`): `y[r][j] = silu(x[r][j]) * x[r][n + j]`, a new `rows x n` matrix. PyTorch's
    /// `F.silu(gate) * up` with `gate, up = x.chunk(2, -1)`, computed in f32 and rounded once.
    ///
    /// Errors: [`Error::InvalidArgument`] if `x` has an odd number of columns.
    pub fn swiglu<T: GluElement>(&self, x: &DeviceMatrix<T>) -> Result<DeviceMatrix<T>> {
        let mut y = self.zeros_matrix_of::<T>(x.rows, x.cols / 2)?;
        self.glu_into_with("swiglu", Activation::Silu, x, &mut y, GluAlgorithm::default())?;
        Ok(y)
    }

    /// [`Gpu::swiglu`] into an existing `rows x n` matrix (no allocation), with the given
    /// algorithm.
    ///
    /// Errors: as [`Gpu::swiglu`], and [`Error::ShapeMismatch`] unless `y` is `rows x n`.
    pub fn swiglu_into_with<T: GluElement>(
        &self,
        x: &DeviceMatrix<T>,
        y: &mut DeviceMatrix<T>,
        algorithm: GluAlgorithm,
    ) -> Result<()> {
        self.glu_into_with("swiglu", Activation::Silu, x, y, algorithm)
    }

    /// [`Gpu::swiglu_into_with`] with the default algorithm.
    pub fn swiglu_into<T: GluElement>(&self, x: &DeviceMatrix<T>, y: &mut DeviceMatrix<T>) -> Result<()> {
        self.swiglu_into_with(x, y, GluAlgorithm::default())
    }

    /// GeGLU of the rows of `x` (gate first, as [`Gpu::swiglu`]):
    /// `y[r][j] = gelu(x[r][j]) * x[r][n + j]` with the GELU `approx`, a new `rows x n` matrix.
    ///
    /// Errors: [`Error::InvalidArgument`] if `x` has an odd number of columns.
    pub fn geglu<T: GluElement>(&self, x: &DeviceMatrix<T>, approx: GeluApprox) -> Result<DeviceMatrix<T>> {
        let mut y = self.zeros_matrix_of::<T>(x.rows, x.cols / 2)?;
        self.glu_into_with(
            "geglu",
            Activation::Gelu(approx),
            x,
            &mut y,
            GluAlgorithm::default(),
        )?;
        Ok(y)
    }

    /// [`Gpu::geglu`] into an existing `rows x n` matrix, with the given algorithm.
    ///
    /// Errors: as [`Gpu::geglu`], and [`Error::ShapeMismatch`] unless `y` is `rows x n`.
    pub fn geglu_into_with<T: GluElement>(
        &self,
        x: &DeviceMatrix<T>,
        approx: GeluApprox,
        y: &mut DeviceMatrix<T>,
        algorithm: GluAlgorithm,
    ) -> Result<()> {
        self.glu_into_with("geglu", Activation::Gelu(approx), x, y, algorithm)
    }

    /// [`Gpu::geglu_into_with`] with the default algorithm.
    pub fn geglu_into<T: GluElement>(
        &self,
        x: &DeviceMatrix<T>,
        approx: GeluApprox,
        y: &mut DeviceMatrix<T>,
    ) -> Result<()> {
        self.geglu_into_with(x, approx, y, GluAlgorithm::default())
    }

    /// The checks and the launch of every GLU.
    fn glu_into_with<T: GluElement>(
        &self,
        op: &'static str,
        activation: Activation,
        x: &DeviceMatrix<T>,
        y: &mut DeviceMatrix<T>,
        algorithm: GluAlgorithm,
    ) -> Result<()> {
        if x.cols % 2 != 0 {
            return Err(Error::InvalidArgument {
                op,
                detail: format!(
                    "{} columns: the input holds the gate and the up halves, an even number",
                    x.cols
                ),
            });
        }
        let (rows, n) = (x.rows, x.cols / 2);
        same_shape(
            op,
            &[rows, n],
            &[y.rows, y.cols],
            "the output is rows x (columns / 2)",
        )?;
        if !(self.owns(&x.data) && self.owns(&y.data)) {
            return Err(Error::WrongDevice { op });
        }
        if rows == 0 || n == 0 {
            return Ok(());
        }
        let aligned = x.data.is_16_byte_aligned() && y.data.is_16_byte_aligned();
        let plan = GluPlan::choose(algorithm, rows, n, T::LANES, aligned);
        let kernels = T::kernels();
        let pair: &GluPair<T> = match activation {
            Activation::Silu => &kernels.silu,
            Activation::Gelu(GeluApprox::Tanh) => &kernels.gelu_tanh,
            Activation::Gelu(GeluApprox::Erf) => &kernels.gelu_erf,
        };
        let limits = self.limits();
        let outputs = crate::buffer::checked_len(op, &[rows, n])?;
        let cfg = match plan {
            GluPlan::Scalar => LaunchConfig::linear(op, outputs, SCALAR_BLOCK, &limits)?,
            GluPlan::Vectors => {
                let threads = (outputs / T::LANES).div_ceil(VECTOR_UNROLL);
                LaunchConfig::linear(op, threads, VECTOR_BLOCK, &limits)?
            }
            // A block per span of a row; down the rows at most the grid's y limit, the kernel
            // striding over the rest.
            GluPlan::Rows => LaunchConfig::grid_2d(
                op,
                (n / T::LANES, rows.min(limits.max_grid_dim[1] as usize)),
                (ROWS_SPAN, 1),
                (ROWS_BLOCK, 1),
                0,
                &limits,
            )?,
        };
        // SAFETY: `x` holds rows * 2n elements and `y` rows * n (checked above); the vector plan
        // is chosen only for aligned buffers and `n` a multiple of the vector width; `cfg` is the
        // kernel's 1-D shape (the vector kernel strides over any grid).
        unsafe {
            kernels::launch(
                &self.library(),
                pair.of(plan).1,
                cfg,
                &x.data,
                &mut y.data,
                (rows, n),
            )
        }
    }
}
