//! Element-wise operations: `add`, `increment_by_one`.

use kernels_gpu::add::{BLOCK, VEC_UNROLL};

use super::same_shape;
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::raw;
use crate::raw::add::Access;

/// Which element-wise kernel to run (for `add` and `increment_by_one` alike). Both are exact (one
/// f32 rounding per element).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AddAlgorithm {
    /// One thread per element, 4-byte accesses (the first tutorial's kernel, `add`).
    Scalar,
    /// 16-byte accesses, four vectors of 4 floats per thread, a grid-stride loop and a scalar
    /// tail (`add_vec4`); the default. Needs all three buffers 16-byte aligned, which device
    /// allocations are; otherwise [`AddAlgorithm::Scalar`] runs instead.
    #[default]
    Vec4,
}

impl AddAlgorithm {
    /// Every algorithm, slowest first.
    pub const ALL: [AddAlgorithm; 2] = [AddAlgorithm::Scalar, AddAlgorithm::Vec4];

    /// A short name: `scalar`, `vec4`.
    pub fn name(self) -> &'static str {
        match self {
            AddAlgorithm::Scalar => "scalar",
            AddAlgorithm::Vec4 => "vec4",
        }
    }
}

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
        self.increment_by_one_with(x, AddAlgorithm::default())
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
        let access = access(algorithm, &[&*x]);
        let cfg = self.elementwise_config(OP, access, n)?;
        // SAFETY: `x` holds `n` elements, 16-byte aligned for `Access::Vec4`; `cfg` is the
        // kernel's 1-D shape.
        unsafe { raw::add::increment_by_one(self, access, cfg, x, n) }
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
        let access = access(algorithm, &[a, b, &*c]);
        let cfg = self.elementwise_config("add", access, n)?;
        // SAFETY: all three hold `n` elements, 16-byte aligned for `Access::Vec4`; `cfg` is the
        // kernel's 1-D shape.
        unsafe { raw::add::add(self, access, cfg, a, b, c, n) }
    }

    /// The launch of an element-wise kernel over `n` elements: one thread per element, or for
    /// the `_vec4` kernels one per `VEC_UNROLL` vectors, in blocks of exactly `BLOCK` threads.
    fn elementwise_config(&self, op: &'static str, access: Access, n: usize) -> Result<LaunchConfig> {
        match access {
            Access::Scalar => LaunchConfig::linear(op, n, BLOCK, &self.limits()),
            Access::Vec4 => LaunchConfig::vectors(op, n, VEC_UNROLL, BLOCK, &self.limits()),
        }
    }
}

/// The kernel `algorithm` runs on `buffers`: [`AddAlgorithm::Vec4`] needs them all 16-byte
/// aligned, which device allocations are; otherwise the scalar kernel runs.
fn access(algorithm: AddAlgorithm, buffers: &[&DeviceVec]) -> Access {
    if algorithm == AddAlgorithm::Vec4 && buffers.iter().all(|v| v.is_16_byte_aligned()) {
        Access::Vec4
    } else {
        Access::Scalar
    }
}
