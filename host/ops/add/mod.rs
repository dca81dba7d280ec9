//! Element-wise operations: `add`, `increment_by_one`. `mod.rs` checks the operands and holds
//! the public methods, `plan.rs` picks the kernel (`AddPlan`), `kernels.rs` launches it.

mod kernels;
mod plan;
pub use plan::AddAlgorithm;

use kernels_gpu::add::BLOCK;

use super::same_shape;
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use plan::AddPlan;

impl Gpu {
    /// `a + b`, element by element, into a new device vector, with the default algorithm.
    ///
    /// Errors: [`crate::Error::ShapeMismatch`] if the lengths differ.
    pub fn add(&self, a: &DeviceVec, b: &DeviceVec) -> Result<DeviceVec> {
        self.add_with(a, b, AddAlgorithm::default())
    }

    /// `a + b` with the given algorithm, into a new device vector.
    pub fn add_with(&self, a: &DeviceVec, b: &DeviceVec, algorithm: AddAlgorithm) -> Result<DeviceVec> {
        self.check_add(a, b, None)?;
        let mut c = self.alloc(a.len())?;
        self.launch_add(algorithm, (a, b), &mut c)?;
        Ok(c)
    }

    /// `c = a + b`, element by element, into an existing device vector (no allocation).
    pub fn add_into(&self, a: &DeviceVec, b: &DeviceVec, c: &mut DeviceVec) -> Result<()> {
        self.add_into_with(a, b, c, AddAlgorithm::default())
    }

    /// [`Gpu::add_into`] with the given algorithm.
    pub fn add_into_with(
        &self,
        a: &DeviceVec,
        b: &DeviceVec,
        c: &mut DeviceVec,
        algorithm: AddAlgorithm,
    ) -> Result<()> {
        self.check_add(a, b, Some(&*c))?;
        self.launch_add(algorithm, (a, b), c)
    }

    /// `x += 1`, element by element, in place, with the default algorithm.
    pub fn increment_by_one(&self, x: &mut DeviceVec) -> Result<()> {
        self.increment_by_one_with(x, AddAlgorithm::INCREMENT_DEFAULT)
    }

    /// [`Gpu::increment_by_one`] with the given algorithm: [`AddAlgorithm::Scalar`] is the second
    /// tutorial's kernel (`increment_by_one`), [`AddAlgorithm::Vec4`] the same with 16-byte
    /// accesses (`increment_by_one_vec4`; the scalar kernel runs if `x` is not 16-byte aligned).
    pub fn increment_by_one_with(&self, x: &mut DeviceVec, algorithm: AddAlgorithm) -> Result<()> {
        const OP: &str = "increment_by_one";
        self.check_owner(OP, &[x])?;
        let n = x.len();
        if n == 0 {
            return Ok(());
        }
        let plan = plan(algorithm, &[&*x]);
        let cfg = self.elementwise_config(OP, plan, n)?;
        // SAFETY: `x` holds `n` elements, 16-byte aligned for `Access::Vec4`; `cfg` is the
        // kernel's 1-D shape.
        unsafe { kernels::increment_by_one(self, plan.access, cfg, x, n) }
    }

    /// The one validation of `c = a + b`: equal lengths, every buffer on this `Gpu`; `c` is
    /// `None` when the operation allocates it.
    fn check_add(&self, a: &DeviceVec, b: &DeviceVec, c: Option<&DeviceVec>) -> Result<()> {
        same_shape(
            "add",
            &[a.len()],
            &[b.len()],
            "operands must have the same length",
        )?;
        let Some(c) = c else {
            return self.check_owner("add", &[a, b]);
        };
        same_shape(
            "add",
            &[a.len()],
            &[c.len()],
            "the output must have the operands' length",
        )?;
        self.check_owner("add", &[a, b, c])
    }

    /// `c = a + b` for checked operands.
    fn launch_add(
        &self,
        algorithm: AddAlgorithm,
        (a, b): (&DeviceVec, &DeviceVec),
        c: &mut DeviceVec,
    ) -> Result<()> {
        let n = a.len();
        if n == 0 {
            return Ok(());
        }
        let plan = plan(algorithm, &[a, b, &*c]);
        let cfg = self.elementwise_config("add", plan, n)?;
        // SAFETY: all three hold `n` elements, 16-byte aligned for `Access::Vec4`; `cfg` is the
        // kernel's 1-D shape.
        unsafe { kernels::add(self, plan.access, cfg, a, b, c, n) }
    }

    /// The launch of an element-wise kernel over `n` elements: one thread per element, or for
    /// the `_vec4` kernels one per `VEC_UNROLL` vectors (the tile candidates: their own vectors
    /// per thread), in blocks of exactly the kernel's threads (`BLOCK`, or 512 for `_b512`);
    /// for a persistent algorithm no more blocks than are resident on the device at once.
    fn elementwise_config(&self, op: &'static str, plan: AddPlan, n: usize) -> Result<LaunchConfig> {
        let limits = self.limits();
        match plan.access.tile() {
            None => LaunchConfig::linear(op, n, BLOCK, &limits),
            Some((block, unroll)) => {
                let mut cfg = LaunchConfig::vectors(op, n, unroll, block, &limits)?;
                if plan.persistent {
                    // Residency is a property of the kernel's registers, the same for `add` and
                    // `increment_by_one` within a rung; asked once per kernel.
                    let kernel = kernels::kernel(op, plan.access);
                    let resident = self.resident_blocks(op, kernel, block, 0)?;
                    cfg.grid.0 = cfg.grid.0.min(resident.max(1));
                }
                Ok(cfg)
            }
        }
    }
}

/// The plan of `algorithm` on `buffers`: the `Vec4*` algorithms need them all 16-byte aligned.
fn plan(algorithm: AddAlgorithm, buffers: &[&DeviceVec]) -> AddPlan {
    AddPlan::choose(algorithm, buffers.iter().all(|v| v.is_16_byte_aligned()))
}
