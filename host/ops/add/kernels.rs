//! The add plan's kernel launched: `kernels_gpu::add`'s kernels through the launchers
//! `#[kernel]` generates.
//!
//! Safety contract of every function here: the buffers hold as many elements as the kernel's own
//! safety section asks for, given the size arguments, and `cfg` is the launch shape its doc
//! comment gives.

use kernels_gpu::add as family;

use super::plan::Access;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use gpukern_device::launch::Kernel;

/// The kernel `op` (`"add"` or `"increment_by_one"`) runs with `access`: what the persistent
/// plans ask the device's residency of.
pub(crate) fn kernel(op: &str, access: Access) -> &'static Kernel {
    match (op == "add", access) {
        (true, Access::Scalar) => &family::add::KERNEL,
        (true, Access::Vec4) => &family::add_vec4::KERNEL,
        (true, Access::Vec4Streaming) => &family::add_vec4_streaming::KERNEL,
        (false, Access::Scalar) => &family::increment_by_one::KERNEL,
        (false, Access::Vec4) => &family::increment_by_one_vec4::KERNEL,
        (false, Access::Vec4Streaming) => &family::increment_by_one_vec4_streaming::KERNEL,
        (true, Access::X2) => &family::add_vec4_x2::KERNEL,
        (true, Access::X4) => &family::add_vec4_x4::KERNEL,
        (true, Access::X8) => &family::add_vec4_x8::KERNEL,
        (true, Access::B512) => &family::add_vec4_b512::KERNEL,
        (true, Access::X4CsStores) => &family::add_vec4_x4_cs_stores::KERNEL,
        (false, Access::X2) => &family::increment_by_one_vec4_x2::KERNEL,
        (false, Access::X4) => &family::increment_by_one_vec4_x4::KERNEL,
        (false, Access::X8) => &family::increment_by_one_vec4_x8::KERNEL,
        (false, Access::B512) => &family::increment_by_one_vec4_b512::KERNEL,
        (false, Access::X4CsStores) => &family::increment_by_one_vec4_x4_cs_stores::KERNEL,
    }
}

/// Launches `add(a, b, c, n)`, or `add_vec4(a, b, c, n)`.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold at least `n` elements; with [`Access::Vec4`]
/// each starts at a 16-byte aligned address (every access but [`Access::Scalar`]).
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
        Access::Scalar => family::add::launch,
        Access::Vec4 => family::add_vec4::launch,
        Access::Vec4Streaming => family::add_vec4_streaming::launch,
        Access::X2 => family::add_vec4_x2::launch,
        Access::X4 => family::add_vec4_x4::launch,
        Access::X8 => family::add_vec4_x8::launch,
        Access::B512 => family::add_vec4_b512::launch,
        Access::X4CsStores => family::add_vec4_x4_cs_stores::launch,
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
        Access::Scalar => family::increment_by_one::launch,
        Access::Vec4 => family::increment_by_one_vec4::launch,
        Access::Vec4Streaming => family::increment_by_one_vec4_streaming::launch,
        Access::X2 => family::increment_by_one_vec4_x2::launch,
        Access::X4 => family::increment_by_one_vec4_x4::launch,
        Access::X8 => family::increment_by_one_vec4_x8::launch,
        Access::B512 => family::increment_by_one_vec4_b512::launch,
        Access::X4CsStores => family::increment_by_one_vec4_x4_cs_stores::launch,
    };
    // SAFETY: size and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, x, n) }
}
