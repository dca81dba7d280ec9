//! Launches of `kernels_gpu::add`, through the launchers `#[kernel]` generates.

use kernels_gpu::add as k;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;

/// Launches `add(a, b, c, n)`.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold at least `n` elements.
pub(crate) unsafe fn add(
    gpu: &Gpu,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    // SAFETY: sizes per the contract.
    unsafe { k::add::launch(&gpu.library(), cfg, a, b, c, n) }
}

/// Launches `add_vec4(a, b, c, n)`.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold at least `n` elements, and each starts at a
/// 16-byte aligned address ([`address`]).
pub(crate) unsafe fn add_vec4(
    gpu: &Gpu,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    n: usize,
) -> Result<()> {
    // SAFETY: sizes and alignment per the contract.
    unsafe { k::add_vec4::launch(&gpu.library(), cfg, a, b, c, n) }
}

/// Launches `increment_by_one(x, n)`, or `increment_by_one_vec4(x, n)` with `vec4`.
///
/// # Safety
/// See the module contract: `x` holds at least `n` elements; with `vec4` it starts at a 16-byte
/// aligned address.
pub(crate) unsafe fn increment_by_one(
    gpu: &Gpu,
    cfg: LaunchConfig,
    x: &mut DeviceVec,
    n: usize,
    vec4: bool,
) -> Result<()> {
    let launch = if vec4 {
        k::increment_by_one_vec4::launch
    } else {
        k::increment_by_one::launch
    };
    // SAFETY: size and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, x, n) }
}
