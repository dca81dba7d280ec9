//! Sampling the next token of each row of logits on the device: temperature, top-k, top-p and a
//! seeded Philox draw, or greedy. The options checked once (`plan.rs`, [`SampleOptions`]), then
//! one launch (`kernels.rs`). Kernels and every rule at the edges: `kernels_gpu::sample`.

mod kernels;
mod plan;
pub use kernels::LogitElement;
pub use plan::{SampleAlgorithm, SampleOptions};

use plan::{OP, SamplePlan};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};

impl Gpu {
    /// The next token of each row of `logits` (f32 or bf16), drawn with `options`: the logits
    /// divided by the temperature, top-k then top-p filtering, a multinomial draw from
    /// Philox4x32-10 keyed by `options.seed` with the counter `(row, options.offset)`; greedy
    /// at temperature 0. The same seed, offset and logits give the same tokens on every run, on
    /// the GPU and in the simulator. Ties, NaN and infinite logits: `kernels_gpu::sample` (a row
    /// with nothing to sample, all NaN or `-inf`, gives `-1`). No rows: an empty result.
    ///
    /// Errors: [`Error::InvalidArgument`] for a temperature that is negative or not finite, a
    /// `top_p` outside `(0, 1]`, or rows of no columns; [`Error::TooLarge`] past `i32::MAX`
    /// columns (tokens are `i32`).
    pub fn sample<T: LogitElement>(
        &self,
        logits: &DeviceMatrix<T>,
        options: &SampleOptions,
    ) -> Result<DeviceVec<i32>> {
        let mut tokens = self.zeros_of::<i32>(logits.rows)?;
        self.sample_into(logits, options, &mut tokens)?;
        Ok(tokens)
    }

    /// [`Gpu::sample`] into an existing vector of one token per row (no allocation: what a
    /// decode step captured in a CUDA graph calls).
    pub fn sample_into<T: LogitElement>(
        &self,
        logits: &DeviceMatrix<T>,
        options: &SampleOptions,
        tokens: &mut DeviceVec<i32>,
    ) -> Result<()> {
        self.sample_into_with(logits, options, tokens, SampleAlgorithm::default())
    }

    /// [`Gpu::sample_into`] with the given algorithm (the same token for a seed from each, up to
    /// f32 rounding where the draw falls on a boundary between two tokens).
    pub fn sample_into_with<T: LogitElement>(
        &self,
        logits: &DeviceMatrix<T>,
        options: &SampleOptions,
        tokens: &mut DeviceVec<i32>,
        algorithm: SampleAlgorithm,
    ) -> Result<()> {
        let (rows, cols) = (logits.rows, logits.cols);
        same_shape(OP, &[rows], &[tokens.len()], "one token per row")?;
        if !(self.owns(&logits.data) && self.owns(tokens)) {
            return Err(Error::WrongDevice { op: OP });
        }
        let plan = SamplePlan::choose(options, (rows, cols), algorithm, kernels::has_clusters(self))?;
        if rows == 0 {
            return Ok(());
        }
        if cols == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!("{rows} rows of 0 columns: no token to pick"),
            });
        }
        if cols > i32::MAX as usize {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!("{cols} columns: tokens are i32"),
            });
        }
        // SAFETY: `logits` holds rows*cols >= 1 logits, `tokens` rows (checked above).
        unsafe { kernels::sample(self, &logits.data, tokens, (rows, cols), &plan, options) }
    }
}
