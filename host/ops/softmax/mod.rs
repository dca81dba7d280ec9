//! Row-wise softmax with an inverse temperature, with a choice of algorithm: each public
//! operation checks its operands once (`mod.rs`), picks the plan once (`plan.rs`, pure), and
//! launches it (`kernels.rs`; the cooperative grid-row kernel and its workspace in
//! `grid_row.rs`).

mod grid_row;
mod kernels;
mod plan;
pub use plan::SoftmaxAlgorithm;

pub use plan::{
    BLOCK_4_MAX_THREADS, CLUSTER_MIN_COLS, GRID_ROW_MAX_ROWS, ONE_PASS_RULES, OnePassConfig, OnePassPlan,
    OnePassRule, OnePassRuleSource, PERSISTENT_MIN_COLS,
};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};
use plan::SoftmaxPlan;

impl Gpu {
    /// Softmax of each row of `x`, scaled by the inverse temperature `t`:
    /// `y[r][j] = exp(t*x[r][j]) / sum_j exp(t*x[r][j])`, with the default algorithm
    /// ([`SoftmaxAlgorithm::OnePass`]).
    ///
    /// `t = 1` is the plain softmax, `t = 0` gives the uniform distribution, large `t`
    /// approaches a one-hot argmax, negative `t` favours the smallest entries.
    ///
    /// Rules at the edges (the kernels compute `exp(t * (x - m))` with `m` the row's max, or
    /// min for `t < 0`, so nothing overflows, also for `|x|` near `f32::MAX` and large `t`):
    /// * entries at `+inf` (for `t > 0`; `-inf` for `t < 0`) share the row's mass equally,
    ///   the others get 0: the limit of the finite case;
    /// * a row whose entries are all equal is uniform, including a row of all `-inf`;
    /// * `t = 0` is uniform even with infinite entries;
    /// * a NaN anywhere in a row makes that row all NaN; other rows are unaffected.
    ///
    /// Errors: [`Error::InvalidArgument`] if `t` is NaN or infinite.
    pub fn softmax(&self, x: &DeviceMatrix, t: f32) -> Result<DeviceMatrix> {
        self.softmax_with(x, t, SoftmaxAlgorithm::default())
    }

    /// [`Gpu::softmax`] with the given algorithm.
    pub fn softmax_with(
        &self,
        x: &DeviceMatrix,
        t: f32,
        algorithm: SoftmaxAlgorithm,
    ) -> Result<DeviceMatrix> {
        let mut y = self.alloc_matrix(x.rows, x.cols)?;
        let shape = (x.rows, x.cols);
        self.softmax_checked(
            &x.data,
            &mut y.data,
            shape,
            t,
            algorithm,
            &OnePassConfig::default(),
        )?;
        Ok(y)
    }

    /// [`Gpu::softmax`] into an existing matrix of `x`'s shape (no allocation).
    pub fn softmax_into(&self, x: &DeviceMatrix, y: &mut DeviceMatrix, t: f32) -> Result<()> {
        self.softmax_into_with(x, y, t, SoftmaxAlgorithm::default())
    }

    /// [`Gpu::softmax_into`] with the given algorithm.
    pub fn softmax_into_with(
        &self,
        x: &DeviceMatrix,
        y: &mut DeviceMatrix,
        t: f32,
        algorithm: SoftmaxAlgorithm,
    ) -> Result<()> {
        self.softmax_into_planned(x, y, t, algorithm, &OnePassConfig::default())
    }

    /// [`SoftmaxAlgorithm::OnePass`] with its kernels picked by `config` instead of the default
    /// thresholds: for tuning, and for tests that reach every path on small shapes.
    pub fn softmax_into_one_pass(
        &self,
        x: &DeviceMatrix,
        y: &mut DeviceMatrix,
        t: f32,
        config: &OnePassConfig,
    ) -> Result<()> {
        self.softmax_into_planned(x, y, t, SoftmaxAlgorithm::OnePass, config)
    }

    /// Softmax of a whole vector (a matrix of one row), with the default algorithm.
    pub fn softmax_vec(&self, x: &DeviceVec, t: f32) -> Result<DeviceVec> {
        let mut y = self.alloc(x.len())?;
        let (algorithm, config) = (SoftmaxAlgorithm::default(), OnePassConfig::default());
        self.softmax_checked(x, &mut y, (1, x.len()), t, algorithm, &config)?;
        Ok(y)
    }

    /// The matrix operations into `y`: `y` must have `x`'s shape.
    fn softmax_into_planned(
        &self,
        x: &DeviceMatrix,
        y: &mut DeviceMatrix,
        t: f32,
        algorithm: SoftmaxAlgorithm,
        config: &OnePassConfig,
    ) -> Result<()> {
        same_shape(
            "softmax",
            &[x.rows, x.cols],
            &[y.rows, y.cols],
            "the output must have the input's shape",
        )?;
        self.softmax_checked(&x.data, &mut y.data, (x.rows, x.cols), t, algorithm, config)
    }

    /// The one path of every softmax: the checks left once the shapes are known (`x` and `y`
    /// hold `rows x cols`), the plan, the launch.
    fn softmax_checked(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        (rows, cols): (usize, usize),
        t: f32,
        algorithm: SoftmaxAlgorithm,
        config: &OnePassConfig,
    ) -> Result<()> {
        if !t.is_finite() {
            return Err(Error::InvalidArgument {
                op: "softmax",
                detail: format!("inverse temperature {t}: it must be finite"),
            });
        }
        self.check_owner("softmax", &[x, y])?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let congruent = x.address() % 16 == y.address() % 16;
        let limits = || self.softmax_limits(config, cols);
        let plan = SoftmaxPlan::choose(algorithm, config, (rows, cols), congruent, limits);
        self.launch_softmax(plan, x, y, (rows, cols), t)
    }
}
