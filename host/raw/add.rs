//! Launches of `kernels_gpu::add`, through the launchers `#[kernel]` generates.

use kernels_gpu::add as k;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;

/// Which kernel of a pair runs: the scalar one (4-byte accesses, one thread per element) or its
/// `_vec4` twin (16-byte accesses, several vectors per thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Scalar,
    Vec4,
}

/// Launches `add(a, b, c, n)`, or `add_vec4(a, b, c, n)`.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold at least `n` elements; with [`Access::Vec4`]
/// each starts at a 16-byte aligned address.
pub(crate) unsafe fn add(
    gpu: &Gpu,
    access: Access,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    let launch = match access {
        Access::Scalar => k::add::launch,
        Access::Vec4 => k::add_vec4::launch,
    };
    // SAFETY: sizes and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, a, b, c, n) }
}

/// Launches `increment_by_one(x, n)`, or `increment_by_one_vec4(x, n)`.
///
/// # Safety
/// See the module contract: `x` holds at least `n` elements; with [`Access::Vec4`] it starts at
/// a 16-byte aligned address.
pub(crate) unsafe fn increment_by_one(
    gpu: &Gpu,
    access: Access,
    cfg: LaunchConfig,
    x: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    let launch = match access {
        Access::Scalar => k::increment_by_one::launch,
        Access::Vec4 => k::increment_by_one_vec4::launch,
    };
    // SAFETY: size and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, x, n) }
}
