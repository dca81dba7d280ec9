//! The backward plan's kernels launched, through the launchers `#[kernel]` generates: one table
//! per element type (bf16, f16), reached from the forward's table
//! (`AttentionKernels::backward`).

use half::{bf16, f16};
use kernels_gpu::attention as family;

use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The launcher of `attention_bwd_prep_*`: `(o, d_o, lse, lse2, delta, dq_accum, padded_rows,
/// accum_rows, q_len, q_pad, heads, head_dim, o strides (3), d_o strides (3), vectors)`.
pub type PrepLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, f32>,
    DeviceSliceMut<'a, f32>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    bool,
) -> Result<()>;

/// The launcher of `attention_bwd_rows_dq_*`: `(q, k, v, d_o, lse2, delta, dq, rows, q_len,
/// kv_len, q_pad, heads, group, head_dim, q, k, v, d_o strides (3 each), scale_log2, scale,
/// mask data, mask int, mask float)` (the shipped masks' `General`).
pub type RowsDqLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    f32,
    DeviceSlice<'a, i32>,
    usize,
    f32,
) -> Result<()>;

/// The launcher of `attention_bwd_rows_dkdv_*`: `(q, k, v, d_o, lse2, delta, dk, dv, key_rows,
/// q_len, kv_len, q_pad, kv_heads, group, head_dim, q, k, v, d_o strides (3 each), scale_log2,
/// scale, mask data, mask int, mask float)`.
pub type RowsDkdvLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    f32,
    DeviceSlice<'a, i32>,
    usize,
    f32,
) -> Result<()>;

/// The launcher of `attention_bwd_flash_dkdv_*`: `(q, k, v, d_o, lse2, delta, dk, dv, q_len,
/// kv_len, q_pad, group, q, k, v, d_o strides (3 each), scale_log2, scale, causal)`.
pub type FlashDkdvLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    f32,
    bool,
) -> Result<()>;

/// The launcher of `attention_bwd_flash_dq_*`: `(q, k, v, d_o, lse2, delta, dq, q_len, kv_len,
/// q_pad, group, q, k, v, d_o strides (3 each), scale_log2, scale, causal)`.
pub type FlashDqLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    f32,
    bool,
) -> Result<()>;

/// The launcher of `attention_bwd_wgmma_dkdv_*`: `(maps, q, k, v, d_o, lse2, delta, dk, dv,
/// q_len, kv_len, q_pad, heads, group, batch, q, k, v, d_o strides (3 each), scale_log2, scale,
/// causal)`, `maps` the four tensor maps (`Q`, `dO` of 64-row boxes, `K`, `V` of 128).
pub type WgmmaDkdvLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    f32,
    bool,
) -> Result<()>;

/// The launcher of `attention_bwd_wgmma_dq_*`: `(maps, q, k, v, d_o, lse2, delta, dq, q_len,
/// kv_len, q_pad, heads, group, batch, q, k, v, d_o strides (3 each), scale_log2, scale,
/// causal)`, `maps` the four tensor maps (`K`, `V`, `Q`, `dO`, boxes of 128 rows).
pub type WgmmaDqLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    f32,
    bool,
) -> Result<()>;

/// The launcher of `attention_bwd_wgmma_fused_*`: `(maps, q, k, v, d_o, lse2, delta, dk, dv,
/// dq_accum, q_len, kv_len, q_pad, heads, group, batch, q, k, v, d_o strides (3 each),
/// scale_log2, scale, causal)`, `maps` the `dK`/`dV` kernel's four tensor maps.
pub type WgmmaFusedLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    f32,
    bool,
) -> Result<()>;

/// The launcher of `attention_bwd_wgmma_dq_convert_*`: `(dq_accum, dq, threads, q_len, q_pad,
/// heads, head_dim, scale)`.
pub type WgmmaDqConvertLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
) -> Result<()>;

/// One element type's attention backward kernels.
pub struct BackwardKernels<T: 'static> {
    /// `attention_bwd_prep_*`.
    pub(crate) prep: PrepLauncher<T>,
    /// `attention_bwd_rows_dq_*`.
    pub(crate) rows_dq: RowsDqLauncher<T>,
    /// `attention_bwd_rows_dkdv_*`.
    pub(crate) rows_dkdv: RowsDkdvLauncher<T>,
    /// `attention_bwd_flash_dkdv_d64_*`, `attention_bwd_flash_dkdv_d128_*`.
    pub(crate) flash_dkdv: [FlashDkdvLauncher<T>; 2],
    /// `attention_bwd_flash_dq_d64_*`, `attention_bwd_flash_dq_d128_*`.
    pub(crate) flash_dq: [FlashDqLauncher<T>; 2],
    /// `attention_bwd_wgmma_dkdv_d64_*`, `attention_bwd_wgmma_dkdv_d128_*` (sm_90a).
    pub(crate) wgmma_dkdv: [WgmmaDkdvLauncher<T>; 2],
    /// `attention_bwd_wgmma_dq_d64_*`, `attention_bwd_wgmma_dq_d128_*` (sm_90a).
    pub(crate) wgmma_dq: [WgmmaDqLauncher<T>; 2],
    /// `attention_bwd_wgmma_fused_d64_*`, `attention_bwd_wgmma_fused_d128_*` (sm_90a).
    pub(crate) wgmma_fused: [WgmmaFusedLauncher<T>; 2],
    /// `attention_bwd_wgmma_dq_convert_*` (sm_90a).
    pub(crate) wgmma_dq_convert: WgmmaDqConvertLauncher<T>,
}

/// The bf16 kernels.
pub(crate) static BF16: BackwardKernels<bf16> = BackwardKernels {
    prep: family::attention_bwd_prep_bf16::launch_views::<Module>,
    rows_dq: family::attention_bwd_rows_dq_bf16::launch_views::<Module>,
    rows_dkdv: family::attention_bwd_rows_dkdv_bf16::launch_views::<Module>,
    flash_dkdv: [
        family::attention_bwd_flash_dkdv_d64_bf16::launch_views::<Module>,
        family::attention_bwd_flash_dkdv_d128_bf16::launch_views::<Module>,
    ],
    flash_dq: [
        family::attention_bwd_flash_dq_d64_bf16::launch_views::<Module>,
        family::attention_bwd_flash_dq_d128_bf16::launch_views::<Module>,
    ],
    wgmma_dkdv: [
        family::backward_wgmma::attention_bwd_wgmma_dkdv_d64_bf16::launch_views::<Module>,
        family::backward_wgmma::attention_bwd_wgmma_dkdv_d128_bf16::launch_views::<Module>,
    ],
    wgmma_dq: [
        family::backward_wgmma::attention_bwd_wgmma_dq_d64_bf16::launch_views::<Module>,
        family::backward_wgmma::attention_bwd_wgmma_dq_d128_bf16::launch_views::<Module>,
    ],
    wgmma_fused: [
        family::backward_wgmma_fused::attention_bwd_wgmma_fused_d64_bf16::launch_views::<Module>,
        family::backward_wgmma_fused::attention_bwd_wgmma_fused_d128_bf16::launch_views::<Module>,
    ],
    wgmma_dq_convert: family::backward_wgmma_fused::attention_bwd_wgmma_dq_convert_bf16::launch_views::<Module>,
};

/// The f16 kernels.
pub(crate) static F16: BackwardKernels<f16> = BackwardKernels {
    prep: family::attention_bwd_prep_f16::launch_views::<Module>,
    rows_dq: family::attention_bwd_rows_dq_f16::launch_views::<Module>,
    rows_dkdv: family::attention_bwd_rows_dkdv_f16::launch_views::<Module>,
    flash_dkdv: [
        family::attention_bwd_flash_dkdv_d64_f16::launch_views::<Module>,
        family::attention_bwd_flash_dkdv_d128_f16::launch_views::<Module>,
    ],
    flash_dq: [
        family::attention_bwd_flash_dq_d64_f16::launch_views::<Module>,
        family::attention_bwd_flash_dq_d128_f16::launch_views::<Module>,
    ],
    wgmma_dkdv: [
        family::backward_wgmma::attention_bwd_wgmma_dkdv_d64_f16::launch_views::<Module>,
        family::backward_wgmma::attention_bwd_wgmma_dkdv_d128_f16::launch_views::<Module>,
    ],
    wgmma_dq: [
        family::backward_wgmma::attention_bwd_wgmma_dq_d64_f16::launch_views::<Module>,
        family::backward_wgmma::attention_bwd_wgmma_dq_d128_f16::launch_views::<Module>,
    ],
    wgmma_fused: [
        family::backward_wgmma_fused::attention_bwd_wgmma_fused_d64_f16::launch_views::<Module>,
        family::backward_wgmma_fused::attention_bwd_wgmma_fused_d128_f16::launch_views::<Module>,
    ],
    wgmma_dq_convert: family::backward_wgmma_fused::attention_bwd_wgmma_dq_convert_f16::launch_views::<Module>,
};
