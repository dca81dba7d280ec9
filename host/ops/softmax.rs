//! Row-wise softmax with an inverse temperature.

use kernels_gpu::softmax::{BLOCK, SHARED_BYTES};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::raw;

impl Gpu {
    /// Softmax of each row of `x`, scaled by the inverse temperature `t`:
    /// `y[r][j] = exp(t*x[r][j]) / sum_j exp(t*x[r][j])`.
    ///
    /// `t = 1` is the plain softmax, `t = 0` gives the uniform distribution, large `t`
    /// approaches a one-hot argmax, negative `t` favours the smallest entries.
    ///
    /// Rules at the edges (the kernel computes `exp(t * (x - m))` with `m` the row's max, or
    /// min for `t < 0`, so nothing overflows, also for `|x|` near `f32::MAX` and large `t`):
    /// * entries at `+inf` (for `t > 0`; `-inf` for `t < 0`) share the row's mass equally,
    ///   the others get 0: the limit of the finite case;
    /// * a row whose entries are all equal is uniform, including a row of all `-inf`;
    /// * `t = 0` is uniform even with infinite entries;
    /// * a NaN anywhere in a row makes that row all NaN; other rows are unaffected.
    ///
    /// Errors: [`Error::InvalidArgument`] if `t` is NaN or infinite.
    pub fn softmax(&self, x: &DeviceMatrix, t: f32) -> Result<DeviceMatrix> {
        let mut y = self.alloc_matrix(x.rows, x.cols)?;
        self.softmax_into(x, &mut y, t)?;
        Ok(y)
    }

    /// [`Gpu::softmax`] into an existing matrix of `x`'s shape (no allocation).
    pub fn softmax_into(&self, x: &DeviceMatrix, y: &mut DeviceMatrix, t: f32) -> Result<()> {
        same_shape(
            "softmax",
            &[x.rows, x.cols],
            &[y.rows, y.cols],
            "the output must have the input's shape",
        )?;
        self.softmax_rows(&x.data, &mut y.data, x.rows, x.cols, t)
    }

    /// Softmax of a whole vector (a matrix of one row).
    pub fn softmax_vec(&self, x: &DeviceVec, t: f32) -> Result<DeviceVec> {
        let mut y = self.alloc(x.len())?;
        self.softmax_rows(x, &mut y, 1, x.len(), t)?;
        Ok(y)
    }

    fn softmax_rows(&self, x: &DeviceVec, y: &mut DeviceVec, rows: usize, cols: usize, t: f32) -> Result<()> {
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
        let cfg = LaunchConfig::per_row("softmax", rows, BLOCK, SHARED_BYTES, &self.limits())?;
        // SAFETY: `x` and `y` hold rows*cols elements; `cfg` is the kernel's per-row shape.
        unsafe { raw::softmax::softmax_rows(self, cfg, x, y, rows, cols, t) }
    }
}
