//! Matrix transpose: `b = a^T`, row-major in and out. `mod.rs` checks the operands and holds the
//! public methods, `plan.rs` picks the kernel and its tile (`TransposePlan`), `kernels.rs`
//! launches it.

mod kernels;
mod plan;
pub use plan::TransposeAlgorithm;

use plan::TransposePlan;

use crate::buffer::DeviceMatrix;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::{LaunchConfig, ceil_div};

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
    /// (32x32 or 64x64; the naive kernel: one per `TILE x BLOCK_ROWS` elements).
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
        let aligned = a.data.is_16_byte_aligned() && b.data.is_16_byte_aligned();
        let plan = TransposePlan::choose(algorithm, rows, cols, aligned);
        let (cols_per_block, rows_per_block) = plan.tile;
        let extent = |n: usize, per: usize, what: &str| {
            u32::try_from(ceil_div(n, per)).map_err(|_| Error::TooLarge {
                op: OP,
                detail: format!("{n} {what} need more blocks than a grid holds"),
            })
        };
        let cfg = LaunchConfig {
            grid: (
                extent(cols, cols_per_block, "columns")?,
                extent(rows, rows_per_block, "rows")?,
                1,
            ),
            block: plan.block,
            shared_mem_bytes: plan.shared_bytes,
        }
        .checked(OP, &self.limits())?;
        // SAFETY: `a` and `b` hold `rows * cols` floats each, distinct buffers; `cfg` is the
        // kernel's shape.
        unsafe { kernels::transpose(self, plan.algorithm, cfg, &a.data, &mut b.data, rows, cols) }
    }
}
