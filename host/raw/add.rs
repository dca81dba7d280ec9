//! Launches of `kernels_gpu::add`, through the launchers `#[kernel]` generates.

use kernels_gpu::add as k;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use gpukern_device::launch::Kernel;

/// Which kernel of a pair runs: the scalar one (4-byte accesses, one thread per element) or its
/// `_vec4` twin (16-byte accesses, several vectors per thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Scalar,
    Vec4,
    /// The `_vec4_streaming` twin (evict-first accesses).
    Vec4Streaming,
    /// The one-pass tile candidates: `_vec4_x2`, `_vec4_x4`, `_vec4_x8`, `_vec4_b512`,
    /// `_vec4_x4_cs_stores`.
    X2,
    X4,
    X8,
    B512,
    X4CsStores,
}

impl Access {
    /// `(threads per block, vectors per thread)` of the kernel (`None` for the scalar one).
    pub(crate) fn tile(self) -> Option<(u32, usize)> {
        Some(match self {
            Access::Scalar => return None,
            Access::Vec4 | Access::Vec4Streaming => (k::BLOCK, k::VEC_UNROLL),
            Access::X2 => k::TILE_X2,
            Access::X4 | Access::X4CsStores => k::TILE_X4,
            Access::X8 => k::TILE_X8,
            Access::B512 => k::TILE_B512,
        })
    }
}

/// The kernel `op` (`"add"` or `"increment_by_one"`) runs with `access`: what the persistent
/// plans ask the device's residency of.
pub(crate) fn kernel(op: &str, access: Access) -> &'static Kernel {
    match (op == "add", access) {
        (true, Access::Scalar) => &k::add::KERNEL,
        (true, Access::Vec4) => &k::add_vec4::KERNEL,
        (true, Access::Vec4Streaming) => &k::add_vec4_streaming::KERNEL,
        (false, Access::Scalar) => &k::increment_by_one::KERNEL,
        (false, Access::Vec4) => &k::increment_by_one_vec4::KERNEL,
        (false, Access::Vec4Streaming) => &k::increment_by_one_vec4_streaming::KERNEL,
        (true, Access::X2) => &k::add_vec4_x2::KERNEL,
        (true, Access::X4) => &k::add_vec4_x4::KERNEL,
        (true, Access::X8) => &k::add_vec4_x8::KERNEL,
        (true, Access::B512) => &k::add_vec4_b512::KERNEL,
        (true, Access::X4CsStores) => &k::add_vec4_x4_cs_stores::KERNEL,
        (false, Access::X2) => &k::increment_by_one_vec4_x2::KERNEL,
        (false, Access::X4) => &k::increment_by_one_vec4_x4::KERNEL,
        (false, Access::X8) => &k::increment_by_one_vec4_x8::KERNEL,
        (false, Access::B512) => &k::increment_by_one_vec4_b512::KERNEL,
        (false, Access::X4CsStores) => &k::increment_by_one_vec4_x4_cs_stores::KERNEL,
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
        Access::Scalar => k::add::launch,
        Access::Vec4 => k::add_vec4::launch,
        Access::Vec4Streaming => k::add_vec4_streaming::launch,
        Access::X2 => k::add_vec4_x2::launch,
        Access::X4 => k::add_vec4_x4::launch,
        Access::X8 => k::add_vec4_x8::launch,
        Access::B512 => k::add_vec4_b512::launch,
        Access::X4CsStores => k::add_vec4_x4_cs_stores::launch,
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
        Access::Vec4Streaming => k::increment_by_one_vec4_streaming::launch,
        Access::X2 => k::increment_by_one_vec4_x2::launch,
        Access::X4 => k::increment_by_one_vec4_x4::launch,
        Access::X8 => k::increment_by_one_vec4_x8::launch,
        Access::B512 => k::increment_by_one_vec4_b512::launch,
        Access::X4CsStores => k::increment_by_one_vec4_x4_cs_stores::launch,
    };
    // SAFETY: size and alignment per the contract.
    unsafe { launch(&gpu.library(), cfg, x, n) }
}
