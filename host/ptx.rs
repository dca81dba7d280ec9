//! The PTX modules `build.rs` compiled from `kernels-gpu`, and the choice among them.
//!
//! One module per architecture in `GPUKERN_PTX_ARCHS` (default `sm_80,sm_90`). The driver
//! compiles PTX for an architecture forward to any newer GPU, so the best module for a device is
//! the newest one not newer than the device.

include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));

/// One embedded PTX module.
#[derive(Clone, Copy, Debug)]
pub struct PtxModule {
    /// Target architecture, e.g. `"sm_90"`.
    pub arch: &'static str,
    /// Compute capability the module was built for, `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// The PTX text.
    pub ptx: &'static str,
}

/// Every kernel entry point each module exports.
pub const KERNEL_NAMES: [&str; 36] = [
    "add",
    "increment_by_one",
    "increment_by_one_vec4",
    "matmul_naive",
    "matmul_tiled",
    "matmul_fast_128x128",
    "matmul_fast_128x128_vec4",
    "matmul_fast_64x64",
    "matmul_fast_64x64_vec4",
    "matmul_fast_128x256",
    "matmul_fast_128x256_vec4",
    "matmul_sum_splits",
    "matmul_tf32_128x128",
    "matmul_tf32_128x128_k16",
    "matmul_tf32_128x256",
    "matmul_tf32_128x256_vec4",
    "matmul_tf32_128x128_trunc",
    "matmul_tf32_128x128_vec4_trunc",
    "matmul_tf32_128x256_trunc",
    "matmul_tf32_128x256_vec4_trunc",
    "softmax_rows",
    "add_vec4",
    "softmax_warp_1",
    "softmax_warp_2",
    "softmax_warp_4",
    "softmax_warp_8",
    "softmax_block_4",
    "softmax_block_8",
    "softmax_stream",
    "softmax_split_stats",
    "softmax_split_write",
    "softmax_group_8x4",
    "softmax_group_16x2",
    "softmax_persist_warp_8",
    "softmax_persist_block_4",
    "softmax_persist_block_8",
];

/// All embedded modules, oldest architecture first.
pub fn modules() -> &'static [PtxModule] {
    PTX_MODULES
}

/// The newest module that runs on a device of compute capability `cc`, if any.
pub fn select(cc: (i32, i32)) -> Option<&'static PtxModule> {
    select_from(PTX_MODULES, cc)
}

/// [`select`] over any list of modules.
pub fn select_from(modules: &[PtxModule], cc: (i32, i32)) -> Option<&PtxModule> {
    modules
        .iter()
        .filter(|m| m.compute_capability <= cc)
        .max_by_key(|m| m.compute_capability)
}
