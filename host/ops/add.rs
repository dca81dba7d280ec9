//! Element-wise operations: `add`, `increment_by_one`.

use kernels_gpu::add::BLOCK;

use super::same_shape;
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::raw;

impl Gpu {
    /// `a + b`, element by element, into a new device vector.
    ///
    /// Errors: [`crate::Error::ShapeMismatch`] if the lengths differ.
    pub fn add(&self, a: &DeviceVec, b: &DeviceVec) -> Result<DeviceVec> {
        same_shape(
            "add",
            &[a.len()],
            &[b.len()],
            "operands must have the same length",
        )?;
        let mut c = self.alloc(a.len())?;
        self.add_into(a, b, &mut c)?;
        Ok(c)
    }

    /// `c = a + b`, element by element, into an existing device vector (no allocation).
    pub fn add_into(&self, a: &DeviceVec, b: &DeviceVec, c: &mut DeviceVec) -> Result<()> {
        same_shape(
            "add",
            &[a.len()],
            &[b.len()],
            "operands must have the same length",
        )?;
        same_shape(
            "add",
            &[a.len()],
            &[c.len()],
            "the output must have the operands' length",
        )?;
        self.check_owner("add", &[a, b, c])?;
        let n = a.len();
        if n == 0 {
            return Ok(());
        }
        let cfg = LaunchConfig::linear("add", n, BLOCK, &self.limits())?;
        // SAFETY: all three hold `n` elements; `cfg` is the kernel's 1-D shape.
        unsafe { raw::add::add(self, cfg, a, b, c, n) }
    }

    /// `x += 1`, element by element, in place.
    pub fn increment_by_one(&self, x: &mut DeviceVec) -> Result<()> {
        self.check_owner("increment_by_one", &[x])?;
        let n = x.len();
        if n == 0 {
            return Ok(());
        }
        let cfg = LaunchConfig::linear("increment_by_one", n, BLOCK, &self.limits())?;
        // SAFETY: `x` holds `n` elements; `cfg` is the kernel's 1-D shape.
        unsafe { raw::add::increment_by_one(self, cfg, x, n) }
    }
}
