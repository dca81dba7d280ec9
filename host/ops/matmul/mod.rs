//! Matrix product on device-resident matrices, with a choice of algorithm: each public
//! operation checks its operands once (`mod.rs`), picks the plan once (`plan.rs`, its rules as
//! data in `plan_rules.rs`, its tests in `plan_tests.rs`), and launches it (`kernels.rs`); the half-precision entry points, the Hopper `wgmma` paths, the TF32
//! error bound, the decode products (`Y = X W^T`, `decode.rs`, its Hopper rung and the plan of
//! its tile and slices in `decode_wgmma.rs`, its stream-K form in `decode_stream_k.rs`) and the FP8 product
//! (`fp8_matmul.rs`, its plan in `fp8_plan.rs`) have a file each.

mod decode;
mod decode_stream_k;
mod decode_wgmma;
mod error_bound;
mod fp8;
mod fp8_matmul;
mod fp8_plan;
mod grouped;
mod grouped_plan;
mod half;
mod kernels;
mod plan;
mod wgmma;
mod wgmma_tf32;
pub use plan::MatmulAlgorithm;

pub use crate::device::SIMULATED_MULTIPROCESSORS;
pub use decode::{DecodeLoads, DecodeOutput, DecodePlan, DecodeTile, ROWS_MAX_M, WGMMA_MIN_M};
pub use error_bound::{TF32_TRUNCATION_UNIT_ROUNDOFF, TF32_UNIT_ROUNDOFF, tf32_error_factor};
pub use fp8::{FP8_SCALE_BLOCK, Fp8Matrix, Fp8Scaling, QuantElement, quantize_e4m3_reference};
pub use fp8_matmul::{Fp8Element, Fp8Output, fp8_dequantize, matmul_fp8_reference};
pub use fp8_plan::{FP8_ACCUMULATION_UNIT, Fp8Accumulation, Fp8Plan, Fp8Tile};
pub use grouped_plan::{GROUPED_WIDE_TILES_PER_SM, GroupedPlan};
pub use half::{MatmulElement, MatmulOutput};
pub use plan::{
    FAST_RULES, FastPlan, FastRule, FastTile, HALF_KERNEL_ENV, HalfTile, MATMUL_RULES, MatmulRule,
    MatmulRuleSource, SGEMM_SCHEDULE_ENV, StreamKPlan, TF32_RULES, Tf32Rule, Tf32Tile, WS_RULES,
    WS_WAVE_PERCENT, WsTile,
};

use super::same_shape;
use crate::buffer::DeviceMatrix;
use crate::device::Gpu;
use crate::error::{Error, Result};
use plan::MatmulPlan;

impl Gpu {
    /// `A * B` with the given algorithm, into a new device matrix.
    pub fn matmul_with(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        algorithm: MatmulAlgorithm,
    ) -> Result<DeviceMatrix> {
        let mkn = self.check_operands(a, b)?;
        let mut c = self.alloc_matrix(a.rows, b.cols)?;
        let plan = MatmulPlan::choose(self, algorithm, mkn)?;
        self.launch_matmul(plan, a, b, &mut c, mkn)?;
        Ok(c)
    }

    /// `C = A * B` into an existing `m x n` device matrix (no allocation, except the partial
    /// products of a [`MatmulAlgorithm::Fast`] plan that splits `k` or runs stream-K
    /// ([`StreamKPlan`]; inside `Gpu::capture` the data-parallel grid instead).
    pub fn matmul_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        algorithm: MatmulAlgorithm,
    ) -> Result<()> {
        let mkn = self.check_product(a, b, c)?;
        let plan = MatmulPlan::choose(self, algorithm, mkn)?;
        self.launch_matmul(plan, a, b, c, mkn)
    }

    /// `C = A * B` into an existing `m x n` device matrix with the fast kernels and a given
    /// plan (what [`MatmulAlgorithm::Fast`] does with [`FastPlan::choose`]'s plan): for
    /// comparing plans, and for tests that must reach every kernel.
    ///
    /// Errors as [`Gpu::matmul_into`]; [`Error::InvalidArgument`] for a plan of 0 slices.
    pub fn matmul_fast_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        plan: FastPlan,
    ) -> Result<()> {
        if plan.slices == 0 {
            return Err(Error::InvalidArgument {
                op: "matmul",
                detail: "a FastPlan needs at least one slice of k".to_string(),
            });
        }
        let mkn = self.check_product(a, b, c)?;
        self.launch_matmul(MatmulPlan::Fast(plan), a, b, c, mkn)
    }

    /// `C = A * B` into an existing `m x n` device matrix with the TF32 tensor-core kernels and
    /// a given tiling (what [`MatmulAlgorithm::Tf32`] does with [`Tf32Tile::choose`]'s tiling):
    /// for comparing tilings, and for tests that must reach every kernel. Error bound:
    /// [`Tf32Tile::error_factor`] (that of [`MatmulAlgorithm::Tf32`] for a rounding tiling).
    ///
    /// Errors as [`Gpu::matmul_into`]; [`Error::TooLarge`] also when the tiling needs more
    /// shared memory than the device allows a block.
    pub fn matmul_tf32_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        tile: Tf32Tile,
    ) -> Result<()> {
        let mkn = self.check_product(a, b, c)?;
        self.launch_matmul(MatmulPlan::Tf32(tile), a, b, c, mkn)
    }

    /// The checks of the operands of `A * B`: `A` is `m x k` and `B` is `k x n`, both belong to
    /// this `Gpu`. Returns `(m, k, n)`.
    fn check_operands(&self, a: &DeviceMatrix, b: &DeviceMatrix) -> Result<(usize, usize, usize)> {
        check_inner((a.rows, a.cols), (b.rows, b.cols))?;
        self.check_owner("matmul", &[&a.data, &b.data])?;
        Ok((a.rows, a.cols, b.cols))
    }

    /// The one validation of a product `C = A * B` into `C`: the operands' checks, `C` is
    /// `m x n` and belongs to this `Gpu`. Returns `(m, k, n)`.
    fn check_product(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<(usize, usize, usize)> {
        check_inner((a.rows, a.cols), (b.rows, b.cols))?;
        let (m, k, n) = (a.rows, a.cols, b.cols);
        same_shape("matmul", &[c.rows, c.cols], &[m, n], "the output must be m x n")?;
        self.check_owner("matmul", &[&a.data, &b.data, &c.data])?;
        Ok((m, k, n))
    }
}

/// Errors unless `A`'s columns equal `B`'s rows (`A` is `a_rows x a_cols`, `B` `b_rows x
/// b_cols`): the inner-dimension rule of every matmul, on the device, in [`crate::api`] and in
/// [`crate::cpu`].
pub(crate) fn check_inner(a: (usize, usize), b: (usize, usize)) -> Result<()> {
    if a.1 == b.0 {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op: "matmul",
            lhs: vec![a.0, a.1],
            rhs: vec![b.0, b.1],
            rule: "A's columns must equal B's rows",
        })
    }
}
