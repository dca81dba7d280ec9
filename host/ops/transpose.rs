//! Matrix transpose: `b = a^T`, row-major in and out.

use kernels_gpu::transpose as k;

use crate::buffer::DeviceMatrix;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::{LaunchConfig, ceil_div};
use crate::raw;

/// Which transpose kernel to run. Both are exact (they move bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TransposeAlgorithm {
    /// One thread per element: coalesced reads, strided writes (`transpose_naive`).
    Naive,
    /// A 32x32 tile through padded shared memory, 4 elements per thread, coalesced reads and
    /// writes (`transpose_tiled`); the default.
    #[default]
    Tiled,
}

impl TransposeAlgorithm {
    /// Every algorithm, the tutorial's first.
    pub const ALL: [TransposeAlgorithm; 2] = [TransposeAlgorithm::Naive, TransposeAlgorithm::Tiled];

    /// A short name: `naive`, `tiled`.
    pub fn name(self) -> &'static str {
        match self {
            TransposeAlgorithm::Naive => "naive",
            TransposeAlgorithm::Tiled => "tiled",
        }
    }
}

impl Gpu {
    /// `a^T` (`cols x rows`) into a new device matrix, with the default algorithm.
    pub fn transpose(&self, a: &DeviceMatrix) -> Result<DeviceMatrix> {
        self.transpose_with(a, TransposeAlgorithm::default())
    }

    /// [`Gpu::transpose`] with the given algorithm.
    pub fn transpose_with(&self, a: &DeviceMatrix, algorithm: TransposeAlgorithm) -> Result<DeviceMatrix> {
        self.check_owner("transpose", &[&a.data])?;
        let mut b = self.alloc_matrix(a.cols, a.rows)?;
        self.launch_transpose(a, &mut b, algorithm)?;
        Ok(b)
    }

    /// `b = a^T` into an existing `cols x rows` device matrix (no allocation).
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `b` is `a.cols() x a.rows()`.
    pub fn transpose_into_with(
        &self,
        a: &DeviceMatrix,
        b: &mut DeviceMatrix,
        algorithm: TransposeAlgorithm,
    ) -> Result<()> {
        super::same_shape(
            "transpose",
            &[a.cols, a.rows],
            &[b.rows, b.cols],
            "the output must be cols x rows of the input",
        )?;
        self.check_owner("transpose", &[&a.data, &b.data])?;
        self.launch_transpose(a, b, algorithm)
    }

    /// The launch of a checked transpose: blocks of `TILE x BLOCK_ROWS` threads, one per tile
    /// (the naive kernel: one per `TILE x BLOCK_ROWS` elements).
    fn launch_transpose(
        &self,
        a: &DeviceMatrix,
        b: &mut DeviceMatrix,
        algorithm: TransposeAlgorithm,
    ) -> Result<()> {
        const OP: &str = "transpose";
        let (rows, cols) = (a.rows, a.cols);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let (rows_per_block, shared) = match algorithm {
            TransposeAlgorithm::Naive => (k::BLOCK_ROWS as usize, 0),
            TransposeAlgorithm::Tiled => (k::TILE as usize, k::TILED_SHARED_BYTES),
        };
        let extent = |n: usize, per: usize, what: &str| {
            u32::try_from(ceil_div(n, per)).map_err(|_| Error::TooLarge {
                op: OP,
                detail: format!("{n} {what} need more blocks than a grid holds"),
            })
        };
        let cfg = LaunchConfig {
            grid: (
                extent(cols, k::TILE as usize, "columns")?,
                extent(rows, rows_per_block, "rows")?,
                1,
            ),
            block: (k::TILE, k::BLOCK_ROWS, 1),
            shared_mem_bytes: shared,
        }
        .checked(OP, &self.limits())?;
        // SAFETY: `a` and `b` hold `rows * cols` floats each, distinct buffers; `cfg` is the
        // kernel's shape.
        unsafe { raw::transpose::transpose(self, algorithm, cfg, &a.data, &mut b.data, rows, cols) }
    }
}
