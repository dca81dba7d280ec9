//! A matmul plan launched: its kernels (`kernels_gpu::matmul`, f32, TF32 and half precision,
//! through the launchers `#[kernel]` generates), their launch shapes, and the launches.

use kernels_gpu::matmul::{self as family, half as family_half, tf32 as family_tf32};
use kernels_gpu::matmul::{
    FIXUP_BLOCK, FIXUP_ROWS, NAIVE_BLOCK, SLOTS_PER_CTA, STREAM_K, SUM_BLOCK, TILE, TILED_SHARED_BYTES,
};

use super::plan::{FastPlan, FastTile, MatmulDevice, MatmulPlan, StreamKPlan, Tf32Tile, WsTile};
use crate::buffer::{DeviceMatrix, DeviceVec, checked_len};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::{DeviceLimits, LaunchConfig};
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The operation's name in errors.
const OP: &str = "matmul";

impl MatmulDevice for Gpu {
    fn multiprocessors(&self) -> Result<usize> {
        Gpu::multiprocessors(self)
    }
    fn stream_k_resident(&self) -> Result<usize> {
        Gpu::stream_k_resident(self)
    }
    fn is_simulator(&self) -> bool {
        Gpu::is_simulator(self)
    }
    fn has_wgmma(&self) -> bool {
        Gpu::has_wgmma(self)
    }
    fn limits(&self) -> DeviceLimits {
        Gpu::limits(self)
    }
}

impl Gpu {
    /// Runs `plan` for `C = A * B`, whose shapes `(m, k, n)` and owners have been checked;
    /// nothing for an empty result.
    pub(super) fn launch_matmul(
        &self,
        plan: MatmulPlan,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        if m == 0 || n == 0 {
            return Ok(());
        }
        let limits = self.limits();
        let (kernel, cfg) = match plan {
            MatmulPlan::Fast(plan) => return self.launch_fast(a, b, c, plan, (m, k, n)),
            MatmulPlan::Tf32(tile) => return self.launch_tf32(a, b, c, tile, (m, k, n)),
            MatmulPlan::StreamK(plan) => return self.launch_stream_k(a, b, c, plan, (m, k, n)),
            MatmulPlan::Naive => (
                MatmulKernel::Naive,
                LaunchConfig::tiles_2d(OP, m, n, NAIVE_BLOCK, 0, &limits)?,
            ),
            MatmulPlan::Tiled => (
                MatmulKernel::Tiled,
                LaunchConfig::tiles_2d(OP, m, n, TILE as u32, TILED_SHARED_BYTES, &limits)?,
            ),
        };
        // SAFETY: `a`, `b`, `c` hold m*k, k*n, m*n elements (shapes checked); `cfg` is the
        // kernel's documented launch shape.
        unsafe { matmul(self, kernel, cfg, &a.data, &b.data, &mut c.data, m, n, k) }
    }

    /// The fast kernels with `plan` (at least one slice), `m, n >= 1`.
    fn launch_fast(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        plan: FastPlan,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        let limits = self.limits();
        let tiling = plan.tile.tiling();
        let (k_split, slices) = (plan.k_split(k), plan.launched_slices(k));
        let cfg = LaunchConfig::block_tiles(
            OP,
            (m, n),
            (tiling.block_rows, tiling.block_cols),
            slices,
            tiling.threads(),
            tiling.shared_bytes(),
            &limits,
        )?;

        if slices > 1 {
            crate::capture::refuse(
                self,
                OP,
                "this shape's fast plan splits k and allocates partial products (use \
                 Gpu::matmul_fast_into with a one-slice FastPlan, or another algorithm); that is \
                 an allocation",
            )?;
        }
        let mut partial = if slices > 1 {
            Some(self.alloc(checked_len("matmul (partial products)", &[slices, m, n])?)?)
        } else {
            None
        };
        let out = partial.as_mut().unwrap_or(&mut c.data);
        let kernel = MatmulKernel::Fast {
            tile: plan.tile,
            vec4: takes_vec4(k, n, &[&a.data, &b.data, &*out]),
            k_split,
        };
        // SAFETY: `a`, `b` hold m*k, k*n elements (shapes checked), `out` holds `slices * m * n`
        // (`c` when there is one slice); `k_split` is a positive multiple of the tiling's `BK`
        // with `slices = ceil(k / k_split)`, and `cfg` is the kernel's documented launch; the
        // `vec4` kernels only with `k`, `n` multiples of 4 and aligned buffers.
        unsafe { matmul(self, kernel, cfg, &a.data, &b.data, out, m, n, k) }?;
        if let Some(partial) = &partial {
            let len = m * n;
            let cfg = LaunchConfig::linear(OP, len, SUM_BLOCK, &limits)?;
            // SAFETY: `partial` holds `slices * len` elements, `c` holds `len`.
            unsafe { sum_splits(self, cfg, partial, &mut c.data, len, slices) }?;
        }
        Ok(())
    }

    /// Blocks of the stream-K kernel resident on the whole GPU at once (the driver's occupancy
    /// count for its registers and shared memory, asked once): the grid of a [`StreamKPlan`].
    pub(super) fn stream_k_resident(&self) -> Result<usize> {
        let kernel = &kernels_gpu::matmul::matmul_stream_k_128x128_vec4::KERNEL;
        Ok(self.resident_blocks(OP, kernel, STREAM_K.threads(), STREAM_K.shared_bytes())? as usize)
    }

    /// The stream-K kernel and its fixup with `plan`, `m, n >= 1`; where the kernel cannot run
    /// (`k = 0`, `k` or `n` not a multiple of 4, an operand not 16-byte aligned, a schedule past
    /// the kernels' 32-bit index arithmetic, or inside `Gpu::capture`, where its workspace cannot
    /// be allocated) the data-parallel 128 x 128 kernels instead. [`Error::InvalidArgument`] for a plan that does
    /// not fit the shape ([`StreamKPlan::fits`]).
    fn launch_stream_k(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        plan: StreamKPlan,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        if !plan.fits(m, n) {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "{plan:?} does not fit {m}x{n} ({} tiles): it needs 1 <= sk_tiles <= tiles and \
                     the other tiles a whole number per block",
                    StreamKPlan::tiles(m, n)
                ),
            });
        }
        // Inside a graph capture the workspace cannot be allocated: the data-parallel grid
        // then, so that capturing a default matmul never fails for its shape.
        let capturing = crate::capture::refuse(self, OP, "").is_err();
        let in_u32 = plan.schedule(m, n, k).is_some();
        if k == 0 || capturing || !in_u32 || !takes_vec4(k, n, &[&a.data, &b.data, &c.data]) {
            let whole = FastPlan {
                tile: FastTile::Large,
                slices: 1,
            };
            return self.launch_fast(a, b, c, whole, (m, k, n));
        }
        let limits = self.limits();
        let tile_floats = STREAM_K.block_rows * STREAM_K.block_cols;
        let len = checked_len(
            "matmul (stream-K workspace)",
            &[SLOTS_PER_CTA, plan.ctas, tile_floats],
        )?;
        let mut workspace = self.alloc(len)?;
        let too_many = |what: &str| Error::TooLarge {
            op: OP,
            detail: format!("{what} exceeds the grid's limits"),
        };
        let ctas = u32::try_from(plan.ctas).map_err(|_| too_many("the stream-K grid"))?;
        let sk = u32::try_from(plan.sk_tiles).map_err(|_| too_many("the stream-K fixup's grid"))?;
        let main = LaunchConfig {
            grid: (ctas, 1, 1),
            block: (STREAM_K.threads(), 1, 1),
            shared_mem_bytes: STREAM_K.shared_bytes(),
        }
        .checked(OP, &limits)?;
        let fixup = LaunchConfig {
            grid: (sk, (STREAM_K.block_rows / FIXUP_ROWS) as u32, 1),
            block: (FIXUP_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
        .checked(OP, &limits)?;
        // SAFETY: shapes checked, `m, n, k >= 1`, `k` and `n` multiples of 4 and every buffer
        // 16-byte aligned (`takes_vec4`; the workspace is a fresh allocation); the workspace
        // holds `SLOTS_PER_CTA * ctas` tiles; the plan fits the shape; `main` is the kernel's
        // documented launch.
        unsafe {
            stream_k(
                self,
                main,
                &a.data,
                &b.data,
                &mut c.data,
                &mut workspace,
                m,
                n,
                k,
                plan.sk_tiles,
            )
        }?;
        // SAFETY: the workspace was written by that launch, with the same arguments and grid,
        // earlier on this stream; `fixup` is the fixup's documented launch.
        unsafe {
            stream_k_fixup(
                self,
                fixup,
                &workspace,
                &mut c.data,
                m,
                n,
                k,
                plan.sk_tiles,
                plan.ctas,
            )
        }
    }

    /// `C = A * B` into an existing `m x n` device matrix with the stream-K kernel on a grid of
    /// `ctas` blocks (`None`: the kernel's resident count, what [`MatmulAlgorithm::Fast`]
    /// takes) split as [`StreamKPlan::with_ctas`]: for comparing schedules, and for tests that
    /// must split most tiles (a small grid). Where the kernel cannot run (`k` or `n` not a
    /// multiple of 4, unaligned operands, `k = 0`) the data-parallel kernels compute it.
    ///
    /// [`MatmulAlgorithm::Fast`]: super::MatmulAlgorithm::Fast
    ///
    /// Errors as [`Gpu::matmul_into`]; [`Error::InvalidArgument`] for `Some(0)` blocks;
    /// [`Error::TooLarge`] for more blocks than a grid may have.
    pub fn matmul_stream_k_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        ctas: Option<usize>,
    ) -> Result<()> {
        let (m, k, n) = self.check_product(a, b, c)?;
        let ctas = match ctas {
            Some(0) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    detail: "a stream-K grid needs at least one block".to_string(),
                });
            }
            Some(ctas) => ctas,
            None => self.stream_k_resident()?,
        };
        let plan = StreamKPlan::with_ctas(m, n, ctas);
        self.launch_matmul(MatmulPlan::StreamK(plan), a, b, c, (m, k, n))
    }

    /// The TF32 kernels with tiling `tile`, `m, n >= 1`.
    fn launch_tf32(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        tile: Tf32Tile,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        match tile {
            Tf32Tile::Wgmma => return self.launch_tf32_wgmma(a, b, c, (m, k, n), None),
            Tf32Tile::WgmmaTile(t) => return self.launch_tf32_wgmma(a, b, c, (m, k, n), Some(t)),
            _ => {}
        }
        let tiling = tile.tiling();
        // These kernels are opted in to more than the default 48 KiB when they are loaded.
        let cfg = LaunchConfig::block_tiles(
            OP,
            (m, n),
            (tiling.block_rows, tiling.block_cols),
            1,
            tiling.threads(),
            tiling.shared_bytes(),
            &self.limits().opted_in(),
        )?;
        let kernel = MatmulKernel::Tf32 {
            tile,
            vec4: takes_vec4(k, n, &[&a.data, &b.data, &c.data]),
        };
        // SAFETY: `a`, `b`, `c` hold m*k, k*n, m*n elements (shapes checked), `m, n >= 1`; `cfg`
        // is the kernel's documented launch; the `vec4` kernels only with `k`, `n` multiples of
        // 4 and aligned buffers.
        unsafe { matmul(self, kernel, cfg, &a.data, &b.data, &mut c.data, m, n, k) }
    }
}

/// Whether the kernels with 16-byte accesses may run: every row of `A` and `B` starts 16-byte
/// aligned (`k` and `n` multiples of 4) and so does every buffer.
fn takes_vec4(k: usize, n: usize, buffers: &[&DeviceVec]) -> bool {
    k % 4 == 0 && n % 4 == 0 && buffers.iter().all(|v| v.is_16_byte_aligned())
}

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
        (FastTile::Large, false) => family::matmul_fast_128x128::launch_views::<Module>,
        (FastTile::Large, true) => family::matmul_fast_128x128_vec4::launch_views::<Module>,
        (FastTile::Small, false) => family::matmul_fast_64x64::launch_views::<Module>,
        (FastTile::Small, true) => family::matmul_fast_64x64_vec4::launch_views::<Module>,
        // The `cp.async` pipeline, 4-byte or 16-byte copies.
        (FastTile::Wide, false) => family::matmul_fast_128x256::launch_views::<Module>,
        (FastTile::Wide, true) => family::matmul_fast_128x256_vec4::launch_views::<Module>,
    }
}

/// Launches `kernel(a, b, c, m, n, k)`, or `kernel(a, b, c, m, n, k, k_split)` for a fast one.
///
/// # Safety
/// `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` elements. A fast kernel
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
        MatmulKernel::Naive => return unsafe { family::matmul_naive::launch(on, cfg, a, b, c, m, n, kd) },
        MatmulKernel::Tiled => return unsafe { family::matmul_tiled::launch(on, cfg, a, b, c, m, n, kd) },
        MatmulKernel::Fast { tile, vec4, k_split } => {
            return unsafe { fast(tile, vec4)(on, cfg, a.view(), b.view(), c.view_mut(), m, n, kd, k_split) };
        }
        MatmulKernel::Tf32 { tile, vec4 } => (tile, vec4),
    };
    let launch = match (tile, vec4) {
        // No 16-byte twin: see `matmul_tf32_128x128`.
        (Tf32Tile::Square, _) => family_tf32::matmul_tf32_128x128::launch,
        // 4-byte copies only: the one kernel for the GPUs that need this tiling.
        (Tf32Tile::SquareK16, _) => family_tf32::matmul_tf32_128x128_k16::launch,
        (Tf32Tile::Wide, false) => family_tf32::matmul_tf32_128x256::launch,
        (Tf32Tile::Wide, true) => family_tf32::matmul_tf32_128x256_vec4::launch,
        (Tf32Tile::SquareTruncated, false) => family_tf32::matmul_tf32_128x128_trunc::launch,
        (Tf32Tile::SquareTruncated, true) => family_tf32::matmul_tf32_128x128_vec4_trunc::launch,
        (Tf32Tile::WideTruncated, false) => family_tf32::matmul_tf32_128x256_trunc::launch,
        (Tf32Tile::WideTruncated, true) => family_tf32::matmul_tf32_128x256_vec4_trunc::launch,
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
    tile: WsTile,
    cfg: LaunchConfig,
    maps: &DeviceVec<u64>,
    a: &DeviceVec,
    bt: &DeviceVec,
    c: &mut DeviceVec,
    m: usize,
    n: usize,
    kd: usize,
) -> Result<()> {
    let launch = match tile {
        WsTile::Wide => family::wgmma_ws::matmul_ws_tf32_128x256::launch,
        WsTile::Square => family::wgmma_ws::matmul_ws_tf32_128x128::launch,
        WsTile::Narrow => family::wgmma_ws::matmul_ws_tf32_64x128::launch,
    };
    // SAFETY: the contract.
    unsafe { launch(&gpu.library(), cfg, maps, a, bt, c, m, n, kd, kd, kd) }
}

/// Launches `matmul_sum_splits(partial, c, len, slices)`.
///
/// # Safety
/// `partial` holds `slices * len` elements, `c` holds `len`.
pub(crate) unsafe fn sum_splits(
    gpu: &Gpu,
    cfg: LaunchConfig,
    partial: &DeviceVec,
    c: &mut DeviceVec,
    len: usize,
    slices: usize,
) -> Result<()> {
    // SAFETY: sizes per the contract.
    unsafe { family::matmul_sum_splits::launch(&gpu.library(), cfg, partial, c, len, slices) }
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
        family::matmul_stream_k_128x128_vec4::launch(
            &gpu.library(),
            cfg,
            a,
            b,
            c,
            workspace,
            m,
            n,
            kd,
            sk_tiles,
        )
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
    unsafe {
        family::matmul_stream_k_fixup::launch(&gpu.library(), cfg, workspace, c, m, n, kd, sk_tiles, ctas)
    }
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
    fn wgmma_ws(tile: WsTile) -> WgmmaLauncher<Self, O>;
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
                if vec8 { family_half::$vec8::launch_views::<Module> } else { family_half::$plain::launch_views::<Module> }
            }
            $(
                fn wgmma_128x128() -> Option<WgmmaLauncher<$in, $out>> {
                    Some(family::wgmma::$wgmma::launch_views::<Module>)
                }
            )?
            fn wgmma_ws(tile: WsTile) -> WgmmaLauncher<$in, $out> {
                            match tile {
                    WsTile::Wide => family::wgmma_ws::$wide::launch_views::<Module>,
                    WsTile::Square => family::wgmma_ws::$square::launch_views::<Module>,
                    WsTile::Narrow => family::wgmma_ws::$narrow::launch_views::<Module>,
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
