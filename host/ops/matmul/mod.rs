//! Matrix product on device-resident matrices, with a choice of algorithm: each public
//! operation checks its operands once (`mod.rs`), picks the plan once (`plan.rs`), and launches
//! it (`kernels.rs`); the half-precision entry points, the Hopper `wgmma` paths and the TF32
//! error bound have a file each.

mod error_bound;
mod half;
mod kernels;
mod plan;
mod wgmma;
mod wgmma_tf32;

pub use crate::device::SIMULATED_MULTIPROCESSORS;
pub use error_bound::{TF32_TRUNCATION_UNIT_ROUNDOFF, TF32_UNIT_ROUNDOFF, tf32_error_factor};
pub use half::{MatmulElement, MatmulOutput};
pub use plan::{
    FastPlan, FastTile, HALF_KERNEL_ENV, HalfTile, SGEMM_SCHEDULE_ENV, StreamKPlan, Tf32Tile, WsTile,
};

use super::same_shape;
use crate::buffer::DeviceMatrix;
use crate::device::Gpu;
use crate::error::{Error, Result};
use plan::MatmulPlan;

/// Which matmul kernel to run. `Naive`, `Tiled` and `Fast` compute in f32 with one rounding per
/// multiply-add (relative error about 1e-6); `Tf32`, which must be asked for, rounds the operands
/// to TF32 first and runs on tensor cores (relative error about 1e-3, see its bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulAlgorithm {
    /// One thread per output element, operands from global memory (the tutorial's first kernel).
    Naive,
    /// 32x32 tiles staged in shared memory (the tutorial's second kernel).
    Tiled,
    /// Register tiles of 8x8 (or 4x4) per thread, 16-byte loads, double-buffered shared memory,
    /// and a split of `k` for products too small to fill the GPU; the tiling and the split are
    /// chosen per shape by [`FastPlan::choose`]. The fastest here, so the default.
    #[default]
    Fast,
    /// Opt-in, reduced precision: TF32 tensor cores (`mma.sync` with TF32 operands, sm_80 and
    /// newer), 128 x 256 or 128 x 128 block tiles with a `cp.async` pipeline, the tiling chosen
    /// per shape and device (its shared memory per block) by [`Tf32Tile::choose`]; on a compute
    /// capability 9.0 GPU with the `sm_90a` module, where `k` is a multiple of 4, Hopper's
    /// `wgmma` instead ([`Tf32Tile::Wgmma`], whose copy engine does the rounding there, ties to
    /// even: the CUDA trial `cuda::matmul_tf32_wgmma::rounding` checks it, and the TF32 trials
    /// hold this algorithm to the bound below on every GPU). Forced by hand in the simulator,
    /// whose copies do not round, [`Tf32Tile::Wgmma`] truncates instead, so it promises only the
    /// truncation bound ([`Tf32Tile::error_factor`], `u = 2^-10`); this algorithm never picks it
    /// there. Each element of `A` and `B` is rounded to TF32 (10 explicit significand bits, to
    /// nearest, unit roundoff `u = 2^-11`); the products of the rounded values are exact and are
    /// summed in f32. So, for
    /// normal (not subnormal) operands, each element of the result obeys
    ///
    /// `|C_tf32(i,j) - C(i,j)| <= tf32_error_factor(k) * sum_l |A(i,l)| |B(l,j)|`,
    ///
    /// with [`tf32_error_factor`]`(k) = 2u + u^2 + γ_k (1 + u)^2` and `γ_k = k δ / (1 - k δ)`,
    /// `δ = 2^-23` (a relative error of `δ` per f32 addition covers either rounding mode the
    /// tensor core may use): about `1e-3 + k * 1.2e-7`. On data of one sign that is a relative
    /// error of about 1e-3; where terms cancel, the error relative to `C` can be larger.
    Tf32,
}

impl MatmulAlgorithm {
    /// Every algorithm: the f32 ones slowest first, then the opt-in TF32 one.
    pub const ALL: [MatmulAlgorithm; 4] = [
        MatmulAlgorithm::Naive,
        MatmulAlgorithm::Tiled,
        MatmulAlgorithm::Fast,
        MatmulAlgorithm::Tf32,
    ];

    /// A short name: `naive`, `tiled`, `fast`, `tf32`.
    pub fn name(self) -> &'static str {
        match self {
            MatmulAlgorithm::Naive => "naive",
            MatmulAlgorithm::Tiled => "tiled",
            MatmulAlgorithm::Fast => "fast",
            MatmulAlgorithm::Tf32 => "tf32",
        }
    }

    /// Whether the algorithm rounds its operands to TF32 ([`MatmulAlgorithm::Tf32`]): its
    /// results obey the bound of [`tf32_error_factor`], not f32 accuracy.
    pub fn uses_tf32(self) -> bool {
        matches!(self, MatmulAlgorithm::Tf32)
    }
}

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
