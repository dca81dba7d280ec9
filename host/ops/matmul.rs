//! Matrix product on device-resident matrices, with a choice of algorithm.

use kernels_gpu::matmul::{NAIVE_BLOCK, TILE, TILED_SHARED_BYTES};

use super::same_shape;
use crate::buffer::DeviceMatrix;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::raw;
use crate::raw::matmul::MatmulKernel;

/// Which matmul kernel to run. All compute in f32 with one rounding per multiply-add.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulAlgorithm {
    /// One thread per output element, operands from global memory (the tutorial's first kernel).
    Naive,
    /// 32x32 tiles staged in shared memory (the tutorial's second kernel); the fastest here, so
    /// the default.
    #[default]
    Tiled,
}

impl MatmulAlgorithm {
    /// Every algorithm, slowest first.
    pub const ALL: [MatmulAlgorithm; 2] = [MatmulAlgorithm::Naive, MatmulAlgorithm::Tiled];

    /// A short name: `naive`, `tiled`.
    pub fn name(self) -> &'static str {
        match self {
            MatmulAlgorithm::Naive => "naive",
            MatmulAlgorithm::Tiled => "tiled",
        }
    }
}

impl Gpu {
    /// `A * B` with the default algorithm, into a new device matrix.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `A` is `m x k` and `B` is `k x n`;
    /// [`Error::TooLarge`] if `m` or `n` needs more blocks than the grid allows.
    pub fn matmul(&self, a: &DeviceMatrix, b: &DeviceMatrix) -> Result<DeviceMatrix> {
        self.matmul_with(a, b, MatmulAlgorithm::default())
    }

    /// `A * B` with the given algorithm, into a new device matrix.
    pub fn matmul_with(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        algorithm: MatmulAlgorithm,
    ) -> Result<DeviceMatrix> {
        check_inner(a, b)?;
        let mut c = self.alloc_matrix(a.rows, b.cols)?;
        self.matmul_into(a, b, &mut c, algorithm)?;
        Ok(c)
    }

    /// `C = A * B` into an existing `m x n` device matrix (no allocation).
    pub fn matmul_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        algorithm: MatmulAlgorithm,
    ) -> Result<()> {
        check_inner(a, b)?;
        let (m, k, n) = (a.rows, a.cols, b.cols);
        same_shape("matmul", &[c.rows, c.cols], &[m, n], "the output must be m x n")?;
        self.check_owner("matmul", &[&a.data, &b.data, &c.data])?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let limits = self.limits();
        let (kernel, cfg) = match algorithm {
            MatmulAlgorithm::Naive => (
                MatmulKernel::Naive,
                LaunchConfig::tiles_2d("matmul", m, n, NAIVE_BLOCK, 0, &limits)?,
            ),
            MatmulAlgorithm::Tiled => (
                MatmulKernel::Tiled,
                LaunchConfig::tiles_2d("matmul", m, n, TILE as u32, TILED_SHARED_BYTES, &limits)?,
            ),
        };
        // SAFETY: `a`, `b`, `c` hold m*k, k*n, m*n elements (shapes checked); `cfg` is the
        // kernel's documented launch shape.
        unsafe { raw::matmul::matmul(self, kernel, cfg, &a.data, &b.data, &mut c.data, m, n, k) }
    }
}

/// Errors unless `A`'s columns equal `B`'s rows.
fn check_inner(a: &DeviceMatrix, b: &DeviceMatrix) -> Result<()> {
    if a.cols == b.rows {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op: "matmul",
            lhs: vec![a.rows, a.cols],
            rhs: vec![b.rows, b.cols],
            rule: "A's columns must equal B's rows",
        })
    }
}
