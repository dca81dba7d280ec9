//! Launches of `kernels_gpu::matmul` (f32, TF32 and half precision), through the launchers
//! `#[kernel]` generates.

use kernels_gpu::matmul::{self as k, half as h, tf32 as t};

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::ops::matmul::{FastTile, Tf32Tile};
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The matmul kernels. All take `(a, b, c, m, n, k)`; the fast ones also `k_split`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MatmulKernel {
    /// `matmul_naive`.
    Naive,
    /// `matmul_tiled`.
    Tiled,
    /// `matmul_fast_*`: the kernel of a fast tiling, with 16-byte global accesses (`vec4`) or
    /// scalar ones, each block taking a slice of `k_split` of `k`.
    Fast {
        tile: FastTile,
        vec4: bool,
        k_split: usize,
    },
    /// `matmul_tf32_*`: the kernel of a TF32 tiling, with 16-byte copies (`vec4`) where that
    /// tiling has such a twin, else 4-byte copies.
    Tf32 { tile: Tf32Tile, vec4: bool },
}

/// The launcher of a fast kernel, `(a, b, c, m, n, k, k_split)`.
/// (One lifetime for every reference, as the generated launcher has.)
type FastLauncher = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
    usize,
    usize,
) -> Result<()>;

/// The fast kernel of `tile`, with 16-byte global accesses or not: `(a, b, c, m, n, k, k_split)`.
fn fast(tile: FastTile, vec4: bool) -> FastLauncher {
    match (tile, vec4) {
        (FastTile::Large, false) => k::matmul_fast_128x128::launch_views::<Module>,
        (FastTile::Large, true) => k::matmul_fast_128x128_vec4::launch_views::<Module>,
        (FastTile::Small, false) => k::matmul_fast_64x64::launch_views::<Module>,
        (FastTile::Small, true) => k::matmul_fast_64x64_vec4::launch_views::<Module>,
        // The `cp.async` pipeline, 4-byte or 16-byte copies.
        (FastTile::Wide, false) => k::matmul_fast_128x256::launch_views::<Module>,
        (FastTile::Wide, true) => k::matmul_fast_128x256_vec4::launch_views::<Module>,
    }
}

/// Launches `kernel(a, b, c, m, n, k)`, or `kernel(a, b, c, m, n, k, k_split)` for a fast one.
///
/// # Safety
/// See the module contract: `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` elements. A fast kernel
/// (`kernels_gpu::matmul::fast_gemm`): `c` holds `slices * m * n` for the launch's number of
/// `k` slices. A TF32 kernel (`kernels_gpu::matmul::tf32::tf32_gemm`): `m, n >= 1`, `cfg`'s
/// shared memory allowed by the kernel's attribute on a CUDA device. With `vec4`: `k` and `n`
/// multiples of 4 and 16-byte aligned buffers.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn matmul(
    gpu: &Gpu,
    kernel: MatmulKernel,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
) -> Result<()> {
    let on = &gpu.library();
    let (tile, vec4) = match kernel {
        // SAFETY (every arm): sizes, alignment and shape per the contract.
        MatmulKernel::Naive => return unsafe { k::matmul_naive::launch(on, cfg, a, b, c, m, n, kd) },
        MatmulKernel::Tiled => return unsafe { k::matmul_tiled::launch(on, cfg, a, b, c, m, n, kd) },
        MatmulKernel::Fast { tile, vec4, k_split } => {
            return unsafe { fast(tile, vec4)(on, cfg, a.view(), b.view(), c.view_mut(), m, n, kd, k_split) };
        }
        MatmulKernel::Tf32 { tile, vec4 } => (tile, vec4),
    };
    let launch = match (tile, vec4) {
        // No 16-byte twin: see `matmul_tf32_128x128`.
        (Tf32Tile::Square, _) => t::matmul_tf32_128x128::launch,
        // 4-byte copies only: the one kernel for the GPUs that need this tiling.
        (Tf32Tile::SquareK16, _) => t::matmul_tf32_128x128_k16::launch,
        (Tf32Tile::Wide, false) => t::matmul_tf32_128x256::launch,
        (Tf32Tile::Wide, true) => t::matmul_tf32_128x256_vec4::launch,
        (Tf32Tile::SquareTruncated, false) => t::matmul_tf32_128x128_trunc::launch,
        (Tf32Tile::SquareTruncated, true) => t::matmul_tf32_128x128_vec4_trunc::launch,
        (Tf32Tile::WideTruncated, false) => t::matmul_tf32_128x256_trunc::launch,
        (Tf32Tile::WideTruncated, true) => t::matmul_tf32_128x256_vec4_trunc::launch,
        (Tf32Tile::Wgmma | Tf32Tile::WgmmaTile(_), _) => {
            return Err(Error::InvalidArgument {
                op: "matmul",
                detail: "Tf32Tile::Wgmma takes tensor maps and B^T: it launches through ws_tf32".to_string(),
            });
        }
    };
    // SAFETY: sizes, alignment and shape per the contract.
    unsafe { launch(on, cfg, a, b, c, m, n, kd) }
}

/// Launches `matmul_ws_tf32_<tile>(maps, a, bt, c, m, n, k)` (`kernels_gpu::matmul::wgmma_ws`):
/// `C = A * B` with `bt` = `B^T`, on Hopper's TF32 `wgmma`, tiles of `tile`.
///
/// # Safety
/// As the kernel's contract: `maps` holds the tensor maps of `a` (`m x k`, box `BM x 32`) and
/// `bt` (`n x k`, box `BN x 32`), `BM x BN` the tile, f32 or TF32 elements, 128-byte swizzle, zero fill; `a`, `bt`,
/// `c` hold `m*k`, `n*k`, `m*n` elements (dense: both row strides `k`), `k` a multiple of 4,
/// 16-byte aligned; `m, n >= 1`;
/// `cfg` 384 threads, a grid of 1 to `tiles` blocks, the tiling's shared memory; the `sm_90a`
/// module loaded (a compute capability 9.0 GPU) or the simulator.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ws_tf32(
    gpu: &Gpu,
    tile: crate::ops::matmul::WsTile,
    cfg: LaunchConfig,
    maps: &DeviceVec<u64>,
    a: &DeviceVec,
    bt: &DeviceVec,
    c: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
) -> Result<()> {
    use crate::ops::matmul::WsTile;
    let launch = match tile {
        WsTile::Wide => k::wgmma_ws::matmul_ws_tf32_128x256::launch,
        WsTile::Square => k::wgmma_ws::matmul_ws_tf32_128x128::launch,
        WsTile::Narrow => k::wgmma_ws::matmul_ws_tf32_64x128::launch,
    };
    // SAFETY: the contract.
    unsafe { launch(&gpu.library(), cfg, maps, a, bt, c, m, n, kd, kd, kd) }
}

/// Launches `matmul_sum_splits(partial, c, len, slices)`.
///
/// # Safety
/// See the module contract: `partial` holds `slices * len` elements, `c` holds `len`.
pub(crate) unsafe fn sum_splits(
    gpu: &Gpu,
    cfg: LaunchConfig,
    partial: &DeviceVec,
    c: &mut DeviceVec,
    len: usize,
    slices: usize,
) -> Result<()> {
    // SAFETY: sizes per the contract.
    unsafe { k::matmul_sum_splits::launch(&gpu.library(), cfg, partial, c, len, slices) }
}

/// Launches `matmul_stream_k_128x128_vec4(a, b, c, workspace, m, n, k, sk_tiles)` on a grid of
/// `cfg.grid.0` blocks (`kernels_gpu::matmul::stream_k_gemm`).
///
/// # Safety
/// As the kernel's contract: `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` elements, `m, n, k >= 1`,
/// `k` and `n` multiples of 4 and every buffer 16-byte aligned; `workspace` holds
/// `SLOTS_PER_CTA * ctas * 128 * 128` elements; `tiles - sk_tiles` a multiple of `ctas`
/// (`cfg.grid.0`); `cfg` 256 threads, `STREAM_K.shared_bytes()` of shared memory.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn stream_k(
    gpu: &Gpu,
    cfg: LaunchConfig,
    a: &DeviceVec,
    b: &DeviceVec,
    c: &mut DeviceVec,
    workspace: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
    sk_tiles: usize,
) -> Result<()> {
    // SAFETY: the contract.
    unsafe {
        k::matmul_stream_k_128x128_vec4::launch(&gpu.library(), cfg, a, b, c, workspace, m, n, kd, sk_tiles)
    }
}

/// Launches `matmul_stream_k_fixup(workspace, c, m, n, k, sk_tiles, ctas)`.
///
/// # Safety
/// As the kernel's contract: `workspace` written by [`stream_k`] with the same arguments and a
/// grid of `ctas` blocks, earlier on this stream; `c` holds `m*n` elements; `cfg` a grid of
/// `(sk_tiles, 128 / FIXUP_ROWS)` blocks of `FIXUP_BLOCK` threads.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn stream_k_fixup(
    gpu: &Gpu,
    cfg: LaunchConfig,
    workspace: &DeviceVec,
    c: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
    sk_tiles: usize,
    ctas: usize,
) -> Result<()> {
    // SAFETY: the contract.
    unsafe { k::matmul_stream_k_fixup::launch(&gpu.library(), cfg, workspace, c, m, n, kd, sk_tiles, ctas) }
}

/// The launcher of a half-precision kernel `(a, b, c, m, n, k)`: `I` operands, an `O` result.
pub(crate) type HalfLauncher<I, O> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, I>,
    DeviceSlice<'a, I>,
    DeviceSliceMut<'a, O>,
    usize,
    usize,
    usize,
) -> Result<()>;

/// The `mma.sync` half-precision kernels (`kernels_gpu::matmul::half`) of `I` operands and an
/// `O` result: bf16 or f16 into the same type or f32.
pub(crate) trait HalfKernels<O>: Sized {
    /// The 128 x 128 kernel with 16-byte copies (`vec8`) or 2-byte loads.
    fn half_128x128(vec8: bool) -> HalfLauncher<Self, O>;
    /// The Hopper `wgmma` kernel (`kernels_gpu::matmul::wgmma`), for bf16 operands only.
    fn wgmma_128x128() -> Option<WgmmaLauncher<Self, O>> {
        None
    }
    /// The warp-specialised Hopper kernel (`kernels_gpu::matmul::wgmma_ws`) of `tile`.
    fn wgmma_ws(tile: crate::ops::matmul::WsTile) -> WgmmaLauncher<Self, O>;
    /// The element type as the copy engine's tensor maps name it.
    fn tensor_map_type() -> cudarc::driver::sys::CUtensorMapDataType;
}

/// The launcher of a `wgmma` kernel: `(maps, a, b, c, m, n, k, lda, ldb)`, `maps` the two
/// tensor maps, `lda` and `ldb` the row strides of `a` and `b` in elements.
pub(crate) type WgmmaLauncher<I, O> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, I>,
    DeviceSlice<'a, I>,
    DeviceSliceMut<'a, O>,
    usize,
    usize,
    usize,
    usize,
    usize,
) -> Result<()>;

macro_rules! half_kernels {
    ($($in:ty => $out:ty: $tma:ident, $plain:ident, $vec8:ident, [$wide:ident, $square:ident, $narrow:ident] $(, $wgmma:ident)?;)*) => {$(
        impl HalfKernels<$out> for $in {
            fn half_128x128(vec8: bool) -> HalfLauncher<$in, $out> {
                if vec8 { h::$vec8::launch_views::<Module> } else { h::$plain::launch_views::<Module> }
            }
            $(
                fn wgmma_128x128() -> Option<WgmmaLauncher<$in, $out>> {
                    Some(k::wgmma::$wgmma::launch_views::<Module>)
                }
            )?
            fn wgmma_ws(tile: crate::ops::matmul::WsTile) -> WgmmaLauncher<$in, $out> {
                use crate::ops::matmul::WsTile;
                match tile {
                    WsTile::Wide => k::wgmma_ws::$wide::launch_views::<Module>,
                    WsTile::Square => k::wgmma_ws::$square::launch_views::<Module>,
                    WsTile::Narrow => k::wgmma_ws::$narrow::launch_views::<Module>,
                }
            }
            fn tensor_map_type() -> cudarc::driver::sys::CUtensorMapDataType {
                cudarc::driver::sys::CUtensorMapDataType::$tma
            }
        }
    )*};
}

half_kernels! {
    half::bf16 => half::bf16: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, matmul_bf16_128x128, matmul_bf16_128x128_vec8, [matmul_ws_bf16_128x256, matmul_ws_bf16_128x128, matmul_ws_bf16_64x128], matmul_wgmma_bf16_128x128;
    half::bf16 => f32: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, matmul_bf16_f32out_128x128, matmul_bf16_f32out_128x128_vec8, [matmul_ws_bf16_f32out_128x256, matmul_ws_bf16_f32out_128x128, matmul_ws_bf16_f32out_64x128], matmul_wgmma_bf16_f32out_128x128;
    half::f16 => half::f16: CU_TENSOR_MAP_DATA_TYPE_FLOAT16, matmul_f16_128x128, matmul_f16_128x128_vec8, [matmul_ws_f16_128x256, matmul_ws_f16_128x128, matmul_ws_f16_64x128];
    half::f16 => f32: CU_TENSOR_MAP_DATA_TYPE_FLOAT16, matmul_f16_f32out_128x128, matmul_f16_f32out_128x128_vec8, [matmul_ws_f16_f32out_128x256, matmul_ws_f16_f32out_128x128, matmul_ws_f16_f32out_64x128];
}
