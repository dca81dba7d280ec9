//! Element-wise operations: `add`, `increment_by_one`.

use kernels_gpu::add::{BLOCK, VEC_UNROLL};

use super::same_shape;
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::raw;

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
        same_shape(
            "add",
            &[a.len()],
            &[b.len()],
            "operands must have the same length",
        )?;
        let mut c = self.alloc(a.len())?;
        self.add_into_with(a, b, &mut c, algorithm)?;
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
        let aligned = [a, b, &*c].iter().all(|v| v.is_16_byte_aligned());
        if algorithm == AddAlgorithm::Vec4 && aligned {
            // One thread per VEC_UNROLL vectors, at least one thread for an n < 4 tail.
            let threads = (n / 4).div_ceil(VEC_UNROLL).max(1);
            let cfg = LaunchConfig::linear("add", threads, BLOCK, &self.limits())?;
            // SAFETY: all three hold `n` elements at 16-byte aligned addresses; `cfg` is the
            // kernel's 1-D shape, blocks of exactly BLOCK threads.
            unsafe { raw::add::add_vec4(self, cfg, a, b, c, n) }
        } else {
            let cfg = LaunchConfig::linear("add", n, BLOCK, &self.limits())?;
            // SAFETY: all three hold `n` elements; `cfg` is the kernel's 1-D shape.
            unsafe { raw::add::add(self, cfg, a, b, c, n) }
        }
    }

    /// `x += 1`, element by element, in place, with the default algorithm.
    pub fn increment_by_one(&self, x: &mut DeviceVec) -> Result<()> {
        self.increment_by_one_with(x, AddAlgorithm::default())
    }

    /// [`Gpu::increment_by_one`] with the given algorithm: [`AddAlgorithm::Scalar`] is the second
    /// tutorial's kernel (`increment_by_one`), [`AddAlgorithm::Vec4`] the same with 16-byte
    /// accesses (`increment_by_one_vec4`; the scalar kernel runs if `x` is not 16-byte aligned).
    pub fn increment_by_one_with(&self, x: &mut DeviceVec, algorithm: AddAlgorithm) -> Result<()> {
        self.check_owner("increment_by_one", &[x])?;
        let n = x.len();
        if n == 0 {
            return Ok(());
        }
        if algorithm == AddAlgorithm::Vec4 && x.is_16_byte_aligned() {
            let threads = (n / 4).div_ceil(VEC_UNROLL).max(1);
            let cfg = LaunchConfig::linear("increment_by_one", threads, BLOCK, &self.limits())?;
            // SAFETY: `x` holds `n` elements at a 16-byte aligned address; `cfg` is the kernel's
            // 1-D shape, blocks of exactly BLOCK threads.
            unsafe { raw::add::increment_by_one(self, cfg, x, n, true) }
        } else {
            let cfg = LaunchConfig::linear("increment_by_one", n, BLOCK, &self.limits())?;
            // SAFETY: `x` holds `n` elements; `cfg` is the kernel's 1-D shape.
            unsafe { raw::add::increment_by_one(self, cfg, x, n, false) }
        }
    }
}
