//! Decode products, `Y = X W^T` with `X` of `m <= 64` rows and a large bf16 weight `W` stored
//! `n x k` (as `nn.Linear` stores it; `torch.matmul(x, w.T)`): the plan
//! ([`DecodePlan::choose`]) and the launches of `kernels_gpu::matmul::decode`.
//!
//! Why a separate entry point and not [`Gpu::matmul`] for small `m`: gpukern's matmul takes `B`
//! row-major `k x n`, and a weight in that layout would have to be transposed (a copy of the
//! whole weight, what the product itself reads) before the decode kernel could read it as rows
//! of `k`. The weight layout that inference stacks keep, `n x k`, is the one taken here.

use half::bf16;
use kernels_gpu::matmul::SUM_BLOCK;
use kernels_gpu::matmul::decode::{
    self as family, DECODE_BLOCK, DECODE_BLOCK_ROWS, DECODE_MAX_M, DECODE_NAIVE_BLOCK, DECODE_SLICE_ALIGN,
    DECODE_SUM_BLOCK, DECODE_TILE_M,
};

use kernels_gpu::matmul::decode_rows::{
    self as rows_rung, DECODE_ROWS_BLOCK, DECODE_ROWS_MAX_M, DECODE_ROWS_WARPS,
};
use kernels_gpu::matmul::decode_stream_k as stream_k;
use kernels_gpu::matmul::decode_wgmma::{self as hopper, DECODE_64X128, DECODE_64X224, DECODE_64X256};
use kernels_gpu::matmul::wgmma_ws::WsTiling;

use crate::buffer::{DeviceMatrix, DeviceVec, Element, checked_len};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// [`DecodePlan::choose`] takes the Hopper rung, where it has it, for `m` from this on: every `m`
/// past [`ROWS_MAX_M`] (up to which the CUDA-core rung runs).
/// The Hopper rung computes 64 rows of `X` whatever `m` is, but at 64 flops per byte of weight
/// its tensor cores stay well under their rate, so its time should not depend on `m`; what
/// decides is how fast each rung streams the weight: against a 28672 x 8192 weight on the H200 it
/// streamed 3771.0, 3791.2 and 3810.7 GB/s at `m = 1`, 8 and 64 (`gpukern:wgmma-256`) where the
/// `mma.sync` rung streamed 3394.8, 3408.3 and 1217.9
/// (`bench/experiments/third-wave/a8752bd-decode-gemm.jsonl`). Raise it to 9 to keep the
/// `mma.sync` rung at `m <= 8`.
pub const WGMMA_MIN_M: usize = ROWS_MAX_M + 1;

/// [`DecodePlan::choose`] takes the CUDA-core rung ([`DecodePlan::Rows`]) for `m` up to this, on
/// every GPU: at `m = 1` against a 28672 x 8192 weight on the H200 it streamed 4010 GB/s where
/// the Hopper rung streamed 3761 and the `mma.sync` rung 3391 (3697 without L1 lines), and
/// against 8192 x 8192 3484 where the Hopper rung's choice streamed 2751
/// (`bench/experiments/third-wave/3bdb6ee-decode-gemm.jsonl`, `gpukern:rows-r1`, the rung's
/// one row per warp since; with evict-first loads 4098 GB/s, torch.matmul 3860 in the same
/// call, `048a939-decode-gemm.jsonl`).
/// At `m = 8` it streamed 1785 GB/s against the Hopper rung's 3788 (`3bdb6ee-decode-gemm.jsonl`;
/// 1267 with one row per warp, `048a939-decode-gemm.jsonl`): its multiply-adds and its loads of
/// `X` from L1 grow with `m`.
pub const ROWS_MAX_M: usize = 1;

/// Rows of `W` per block of the Hopper decode rung.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeTile {
    /// 256 rows (`matmul_decode_wgmma_*_64x256`, two consumers of `wgmma.m64n128k16`).
    Rows256,
    /// 224 rows (`matmul_decode_wgmma_*_64x224`, two consumers of `wgmma.m64n112k16`): 128
    /// blocks for a weight of 28672 rows where 256 rows give 112.
    Rows224,
    /// 128 rows (`matmul_decode_wgmma_*_64x128`, two consumers of `wgmma.m64n64k16`): twice the
    /// blocks, for weights of few rows.
    Rows128,
}

impl DecodeTile {
    /// Rows of `W` per block.
    pub const fn rows(self) -> usize {
        self.tiling().block_cols
    }

    /// The kernel's tiling.
    pub(super) const fn tiling(self) -> WsTiling {
        match self {
            DecodeTile::Rows256 => DECODE_64X256,
            DecodeTile::Rows224 => DECODE_64X224,
            DecodeTile::Rows128 => DECODE_64X128,
        }
    }
}

/// The launcher of a Hopper decode kernel `(maps, x, w, out, m, n, k, k_split)`.
pub(super) type WgmmaLauncher<O> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, bf16>,
    DeviceSlice<'a, bf16>,
    DeviceSliceMut<'a, O>,
    usize,
    usize,
    usize,
    usize,
) -> Result<()>;

/// The launcher of a stream-K Hopper decode kernel `(maps, x, w, out, slots, counters, m, n, k)`.
pub(super) type StreamKLauncher<O> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, bf16>,
    DeviceSlice<'a, bf16>,
    DeviceSliceMut<'a, O>,
    DeviceSliceMut<'a, f32>,
    DeviceSliceMut<'a, u32>,
    usize,
    usize,
    usize,
) -> Result<()>;

/// The operation's name in errors.
const OP: &str = "matmul_decode";

/// How a decode product runs: which kernel, and over how many slices of `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodePlan {
    /// The tutorial rung (`matmul_decode_naive_*`): one thread per element of `Y`. Any shape.
    Naive,
    /// The tensor-core rung (`matmul_decode_{bf16,f32}_m{8,16,32,64}`): `k` in `slices` slices
    /// (at least 1; rounded by [`DecodePlan::k_split`]), added up by a second launch when more
    /// than one. `loads`: how the weight is read ([`DecodeLoads`]; other than `EvictFirst` only
    /// for `m <= 8`, a bf16 result and one slice: for comparing them). Needs `1 <= m <= 64`, `k`
    /// a positive multiple of 8 and 16-byte aligned matrices ([`DecodePlan::mma_applies`]).
    Mma {
        /// Slices of `k` asked for.
        slices: usize,
        /// The loads of the weight.
        loads: DecodeLoads,
    },
    /// The CUDA-core rung (`matmul_decode_rows_{bf16,f32}_m{1,2,4,8}`): each warp streams a
    /// whole row of `W` (512 contiguous bytes per load instruction) against the `m <= 8` rows of
    /// `X`, `k` in `slices` slices (rounded by [`DecodePlan::k_split`]) added up by a second
    /// launch when more than one. `loads`: [`DecodeLoads::EvictFirst`], or
    /// [`DecodeLoads::NoAllocate`] at `m = 1` with a bf16 result and one slice (for comparing
    /// them). Needs what [`DecodePlan::mma_applies`] says and `m <= 8`.
    Rows {
        /// Slices of `k` asked for.
        slices: usize,
        /// The loads of the weight.
        loads: DecodeLoads,
    },
    /// The Hopper rung (`matmul_decode_wgmma_{bf16,f32}_64x{256,128}`, `sm_90a` only): the
    /// weight streamed by TMA through a ring of shared-memory stages and multiplied by `wgmma`
    /// with the box of `X` (64 rows, zeros past `m`) as `A`, `tile` rows of `W` per block, `k` in
    /// `slices` slices (rounded by [`DecodePlan::wgmma_k_split`]) added up by a second launch when
    /// more than one. Needs what [`DecodePlan::mma_applies`] says and a compute capability 9.0
    /// GPU ([`Gpu::has_wgmma`]); [`DecodePlan::choose_wgmma`] sizes it.
    Wgmma {
        /// Rows of `W` per block.
        tile: DecodeTile,
        /// Slices of `k` asked for.
        slices: usize,
    },
    /// The Hopper rung's block on a stream-K grid (`matmul_decode_wgmma_sk_{bf16,f32}_64x*`,
    /// `sm_90a` only): `blocks` blocks (one per SM: [`DecodePlan::stream_k`]) share the
    /// product's steps of 64 along `k` equally, tile after tile, so that every SM streams the
    /// weight to the end; a tile shared by several blocks is added up by the last of them to
    /// finish its part (in block order: the same bits whichever ends last), in the same launch,
    /// through a workspace kept per stream handle (made by the first call, so call once before
    /// capturing). Needs what [`DecodePlan::Wgmma`] needs. Not chosen by [`DecodePlan::choose`]:
    /// on the H200 it was slower than the planned tile at every bench shape, 3820.5 GB/s at best
    /// (`Rows128`) against 4083.5 for `Rows224` at 1 x 28672 x 8192 and 2449.6 against 3459.1 at 64
    /// x 8192 x 8192 (`bench/experiments/third-wave/016d620-decode-gemm-stream-k.jsonl`).
    StreamK {
        /// Rows of `W` per tile.
        tile: DecodeTile,
        /// Blocks of the grid (at least 1; at most the product's steps are launched).
        blocks: usize,
    },
}

/// How the `mma.sync` decode rung ([`DecodePlan::Mma`]) loads the weight, 16 bytes per lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeLoads {
    /// Evict-first from L1 and L2 (`matmul_decode_{bf16,f32}_m*`): the default.
    EvictFirst,
    /// Through the read-only path, `ld.global.nc` (`matmul_decode_bf16_m8_nc`).
    ReadOnly,
    /// Through the read-only path with no L1 line and 256-byte L2 fetches,
    /// `ld.global.nc.L1::no_allocate.L2::256B` (`matmul_decode_bf16_m8_na`): a warp reads 256
    /// contiguous bytes of each of its 16 rows per loop iteration, one such fetch, instead of
    /// leaving L2 to fetch each 64-byte piece on its own. In the sm_80 module (for GPUs before
    /// Hopper), whose PTX ISA lacks both qualifiers, the same as `ReadOnly`.
    NoAllocate,
}

/// [`DecodePlan::choose`] splits `k` until the grid has at least this many blocks per 2
/// multiprocessors (1.5 blocks of 8 warps per SM): with 16 rows of weight per warp and one 16-byte
/// load per row and lane per step of 32 along `k`, 4 steps in flight per warp, that is about
/// 48 KiB of loads in flight per SM.
const TARGET_BLOCKS_PER_2_SMS: usize = 3;
/// Shortest slice of `k` [`DecodePlan::choose`] makes: below it a warp's loop is too short for
/// its first loads' latency to be hidden, and the partial planes (`slices * m * n` floats, written
/// and read again) grow against the weight.
const MIN_SLICE_K: usize = 1024;
/// Most slices of `k` [`DecodePlan::choose`] makes.
const MAX_SLICES: usize = 16;

impl DecodePlan {
    /// Whether the tensor-core rung can run an `m x k` times `(n x k)^T` product: `1 <= m <= 64`,
    /// `n >= 1`, `k` a positive multiple of 8 (16-byte pieces of rows), the matrices 16-byte
    /// aligned (`aligned`).
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    pub fn mma_applies(m: usize, n: usize, k: usize, aligned: bool) -> bool {
        (1..=DECODE_MAX_M).contains(&m) && n >= 1 && k > 0 && k % 8 == 0 && aligned
    }

    /// The plan for `m x k` times `(n x k)^T` on a GPU of `multiprocessors` SMs, `wgmma` telling
    /// whether the Hopper rung is there ([`Gpu::has_wgmma`]): the tutorial rung where the
    /// tensor-core rungs do not apply ([`DecodePlan::mma_applies`]); for `m` up to
    /// [`ROWS_MAX_M`] the CUDA-core rung, `k` split by the rule below with 8 rows of `W` per
    /// block; the Hopper rung sized by
    /// [`DecodePlan::choose_wgmma`] for `m` from [`WGMMA_MIN_M`] on (its copies in flight cost no
    /// registers and its rows of `X` come from shared memory, where the `mma.sync` rung reloads
    /// them per warp and runs one block per SM at `m = 64`); else the `mma.sync` rung with `k` whole when the `ceil(n / 128)` blocks of
    /// rows of `W` are at least 1.5 per SM, else `k` halved until they are (slices of at least
    /// 1024 elements, at most 16 slices). On an H200 (132 SMs, 198 blocks wanted): `n = 28672`
    /// (224 blocks) keeps `k` whole; `n = 8192, k = 8192` (64 blocks) takes 4 slices of 2048;
    /// `n = 4096, k = 4096` (32 blocks) 4 slices of 1024.
    pub fn choose(
        m: usize,
        n: usize,
        k: usize,
        multiprocessors: usize,
        aligned: bool,
        wgmma: bool,
    ) -> DecodePlan {
        if !DecodePlan::mma_applies(m, n, k, aligned) {
            return DecodePlan::Naive;
        }
        if m <= ROWS_MAX_M {
            return DecodePlan::Rows {
                slices: DecodePlan::slices_for(n.div_ceil(DECODE_ROWS_WARPS), k, multiprocessors),
                loads: DecodeLoads::EvictFirst,
            };
        }
        if wgmma && m >= WGMMA_MIN_M {
            return DecodePlan::choose_wgmma(m, n, k, multiprocessors);
        }
        DecodePlan::Mma {
            slices: DecodePlan::slices_for(n.div_ceil(DECODE_BLOCK_ROWS), k, multiprocessors),
            loads: DecodeLoads::EvictFirst,
        }
    }

    /// The slices of `k` for a grid of `blocks` blocks of rows of `W` on `multiprocessors` SMs:
    /// 1, doubled while the blocks are fewer than 1.5 per SM, the slices at most
    /// [`MAX_SLICES`] and at least [`MIN_SLICE_K`] long.
    fn slices_for(blocks: usize, k: usize, multiprocessors: usize) -> usize {
        let wanted = TARGET_BLOCKS_PER_2_SMS * multiprocessors.max(1);
        let mut slices = 1;
        while 2 * blocks * slices < wanted
            && 2 * slices <= MAX_SLICES
            && DecodePlan::k_split(k, 2 * slices) >= MIN_SLICE_K
        {
            slices *= 2;
        }
        slices
    }

    /// The elements of `k` per slice for `slices` slices: `ceil(k / slices)` rounded up to a
    /// multiple of 128 (the kernels' unrolled step), at least 128.
    pub fn k_split(k: usize, slices: usize) -> usize {
        k.div_ceil(slices.max(1)).div_ceil(DECODE_SLICE_ALIGN).max(1) * DECODE_SLICE_ALIGN
    }

    /// The slices a launch runs for `k`: `ceil(k / k_split)` (at most `slices`).
    pub fn launched_slices(k: usize, slices: usize) -> usize {
        k.div_ceil(DecodePlan::k_split(k, slices)).max(1)
    }

    /// A short name: `naive`, `mma`, `mma-s4` (4 slices), `mma-nc` (read-only loads), `mma-na`
    /// (read-only loads allocating no L1 line, 256-byte L2 fetches),
    /// `wgmma-256`, `wgmma-128-s2` (128 rows of `W` per block, 2 slices), `wgmma-224-sk132`
    /// (224 rows per tile, stream-K on 132 blocks), `rows`, `rows-s2`,
    /// `rows-na` (the CUDA-core rung without L1 lines and with 256-byte L2 fetches).
    pub fn name(self) -> String {
        match self {
            DecodePlan::Naive => "naive".to_string(),
            DecodePlan::Rows { slices, loads } => DecodePlan::loads_name("rows", slices, loads),
            DecodePlan::Wgmma { tile, slices } => {
                let mut s = format!("wgmma-{}", tile.rows());
                if slices > 1 {
                    s += &format!("-s{slices}");
                }
                s
            }
            DecodePlan::StreamK { tile, blocks } => format!("wgmma-{}-sk{blocks}", tile.rows()),
            DecodePlan::Mma { slices, loads } => DecodePlan::loads_name("mma", slices, loads),
        }
    }

    /// The name of a rung with slices and loads: `rung`, `-s{slices}` past one slice, `-nc` or
    /// `-na` for loads other than evict-first.
    fn loads_name(rung: &str, slices: usize, loads: DecodeLoads) -> String {
        let mut s = rung.to_string();
        if slices > 1 {
            s += &format!("-s{slices}");
        }
        s += match loads {
            DecodeLoads::EvictFirst => "",
            DecodeLoads::ReadOnly => "-nc",
            DecodeLoads::NoAllocate => "-na",
        };
        s
    }
}

/// The launcher of a decode kernel `(x, w, out, m, n, k, k_split)`.
type MmaLauncher<O> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, bf16>,
    DeviceSlice<'a, bf16>,
    DeviceSliceMut<'a, O>,
    usize,
    usize,
    usize,
    usize,
) -> Result<()>;

/// The launcher of the tutorial rung `(x, w, y, m, n, k)`.
type NaiveLauncher<O> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, bf16>,
    DeviceSlice<'a, bf16>,
    DeviceSliceMut<'a, O>,
    usize,
    usize,
    usize,
) -> Result<()>;

/// A result type of a decode product: [`bf16`] (each element rounded once from its f32 sum) or
/// `f32` (the sums themselves). Sealed.
pub trait DecodeOutput: Element + sealed::DecodeKernels {}

/// The Hopper rung's entry of `tile` writing `O`.
pub(super) fn wgmma_launcher<O: DecodeOutput>(tile: DecodeTile) -> WgmmaLauncher<O> {
    O::wgmma(tile)
}

/// The Hopper rung's stream-K entry of `tile` writing `O`.
pub(super) fn stream_k_launcher<O: DecodeOutput>(tile: DecodeTile) -> StreamKLauncher<O> {
    O::stream_k(tile)
}

/// Adds `slices` f32 planes of `len` elements into `y` in slice order (the second pass of a split
/// decode product).
///
/// # Safety
/// `partial` holds `slices * len` floats, `y` holds `len` elements.
pub(super) unsafe fn sum_planes<O: DecodeOutput>(
    gpu: &Gpu,
    partial: &DeviceVec<f32>,
    y: &mut DeviceVec<O>,
    len: usize,
    slices: usize,
) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe { O::sum(gpu, partial, y, len, slices) }
}
impl DecodeOutput for bf16 {}
impl DecodeOutput for f32 {}

mod sealed {
    use super::*;

    /// The kernels writing a result of this type.
    pub trait DecodeKernels: Sized {
        /// The tensor-core kernel for `m <= 8 m_tiles` (1, 2, 4, 8) with the weight's `loads`.
        fn mma(m_tiles: usize, loads: DecodeLoads) -> Option<MmaLauncher<Self>>;
        /// The CUDA-core kernel for `m <= rows_m` (1, 2, 4, 8) with the weight's `loads`.
        fn rows(rows_m: usize, loads: DecodeLoads) -> Option<MmaLauncher<Self>>;
        /// The tutorial rung.
        fn naive() -> NaiveLauncher<Self>;
        /// The Hopper rung of `tile`.
        fn wgmma(tile: DecodeTile) -> WgmmaLauncher<Self>;
        /// The Hopper rung of `tile` on a stream-K grid.
        fn stream_k(tile: DecodeTile) -> StreamKLauncher<Self>;
        /// Adds `slices` f32 planes of `len` elements into `y` in slice order.
        ///
        /// # Safety
        /// `partial` holds `slices * len` floats, `y` holds `len` elements.
        unsafe fn sum(
            gpu: &Gpu,
            partial: &DeviceVec<f32>,
            y: &mut DeviceVec<Self>,
            len: usize,
            slices: usize,
        ) -> Result<()>;
    }

    impl DecodeKernels for bf16 {
        fn mma(m_tiles: usize, loads: DecodeLoads) -> Option<MmaLauncher<bf16>> {
            use DecodeLoads::*;
            Some(match (m_tiles, loads) {
                (1, EvictFirst) => family::matmul_decode_bf16_m8::launch_views::<Module>,
                (2, EvictFirst) => family::matmul_decode_bf16_m16::launch_views::<Module>,
                (4, EvictFirst) => family::matmul_decode_bf16_m32::launch_views::<Module>,
                (8, EvictFirst) => family::matmul_decode_bf16_m64::launch_views::<Module>,
                (1, ReadOnly) => family::matmul_decode_bf16_m8_nc::launch_views::<Module>,
                (1, NoAllocate) => family::matmul_decode_bf16_m8_na::launch_views::<Module>,
                _ => return None,
            })
        }
        fn rows(rows_m: usize, loads: DecodeLoads) -> Option<MmaLauncher<bf16>> {
            use DecodeLoads::*;
            Some(match (rows_m, loads) {
                (1, EvictFirst) => rows_rung::matmul_decode_rows_bf16_m1::launch_views::<Module>,
                (1, NoAllocate) => rows_rung::matmul_decode_rows_bf16_m1_na::launch_views::<Module>,
                (2, EvictFirst) => rows_rung::matmul_decode_rows_bf16_m2::launch_views::<Module>,
                (4, EvictFirst) => rows_rung::matmul_decode_rows_bf16_m4::launch_views::<Module>,
                (8, EvictFirst) => rows_rung::matmul_decode_rows_bf16_m8::launch_views::<Module>,
                _ => return None,
            })
        }
        fn naive() -> NaiveLauncher<bf16> {
            family::matmul_decode_naive_bf16::launch_views::<Module>
        }
        fn wgmma(tile: DecodeTile) -> WgmmaLauncher<bf16> {
            match tile {
                DecodeTile::Rows256 => hopper::matmul_decode_wgmma_bf16_64x256::launch_views::<Module>,
                DecodeTile::Rows224 => hopper::matmul_decode_wgmma_bf16_64x224::launch_views::<Module>,
                DecodeTile::Rows128 => hopper::matmul_decode_wgmma_bf16_64x128::launch_views::<Module>,
            }
        }
        fn stream_k(tile: DecodeTile) -> StreamKLauncher<bf16> {
            match tile {
                DecodeTile::Rows256 => stream_k::matmul_decode_wgmma_sk_bf16_64x256::launch_views::<Module>,
                DecodeTile::Rows224 => stream_k::matmul_decode_wgmma_sk_bf16_64x224::launch_views::<Module>,
                DecodeTile::Rows128 => stream_k::matmul_decode_wgmma_sk_bf16_64x128::launch_views::<Module>,
            }
        }
        unsafe fn sum(
            gpu: &Gpu,
            partial: &DeviceVec<f32>,
            y: &mut DeviceVec<bf16>,
            len: usize,
            slices: usize,
        ) -> Result<()> {
            let cfg = LaunchConfig::linear(OP, len, DECODE_SUM_BLOCK, &gpu.limits())?;
            // SAFETY: sizes per the contract.
            unsafe {
                family::matmul_decode_sum_bf16::launch_views::<Module>(
                    &gpu.library(),
                    cfg,
                    partial.view(),
                    y.view_mut(),
                    len,
                    slices,
                )
            }
        }
    }

    impl DecodeKernels for f32 {
        fn mma(m_tiles: usize, loads: DecodeLoads) -> Option<MmaLauncher<f32>> {
            use DecodeLoads::*;
            Some(match (m_tiles, loads) {
                (1, EvictFirst) => family::matmul_decode_f32_m8::launch_views::<Module>,
                (2, EvictFirst) => family::matmul_decode_f32_m16::launch_views::<Module>,
                (4, EvictFirst) => family::matmul_decode_f32_m32::launch_views::<Module>,
                (8, EvictFirst) => family::matmul_decode_f32_m64::launch_views::<Module>,
                _ => return None,
            })
        }
        fn rows(rows_m: usize, loads: DecodeLoads) -> Option<MmaLauncher<f32>> {
            use DecodeLoads::*;
            Some(match (rows_m, loads) {
                (1, EvictFirst) => rows_rung::matmul_decode_rows_f32_m1::launch_views::<Module>,
                (2, EvictFirst) => rows_rung::matmul_decode_rows_f32_m2::launch_views::<Module>,
                (4, EvictFirst) => rows_rung::matmul_decode_rows_f32_m4::launch_views::<Module>,
                (8, EvictFirst) => rows_rung::matmul_decode_rows_f32_m8::launch_views::<Module>,
                _ => return None,
            })
        }
        fn naive() -> NaiveLauncher<f32> {
            family::matmul_decode_naive_f32::launch_views::<Module>
        }
        fn wgmma(tile: DecodeTile) -> WgmmaLauncher<f32> {
            match tile {
                DecodeTile::Rows256 => hopper::matmul_decode_wgmma_f32_64x256::launch_views::<Module>,
                DecodeTile::Rows224 => hopper::matmul_decode_wgmma_f32_64x224::launch_views::<Module>,
                DecodeTile::Rows128 => hopper::matmul_decode_wgmma_f32_64x128::launch_views::<Module>,
            }
        }
        fn stream_k(tile: DecodeTile) -> StreamKLauncher<f32> {
            match tile {
                DecodeTile::Rows256 => stream_k::matmul_decode_wgmma_sk_f32_64x256::launch_views::<Module>,
                DecodeTile::Rows224 => stream_k::matmul_decode_wgmma_sk_f32_64x224::launch_views::<Module>,
                DecodeTile::Rows128 => stream_k::matmul_decode_wgmma_sk_f32_64x128::launch_views::<Module>,
            }
        }
        unsafe fn sum(
            gpu: &Gpu,
            partial: &DeviceVec<f32>,
            y: &mut DeviceVec<f32>,
            len: usize,
            slices: usize,
        ) -> Result<()> {
            let cfg = LaunchConfig::linear(OP, len, SUM_BLOCK, &gpu.limits())?;
            // SAFETY: sizes per the contract.
            unsafe { super::super::kernels::sum_splits(gpu, cfg, partial, y, len, slices) }
        }
    }
}

/// The MMA tiles of 8 rows for `m` rows of `X`: 1, 2, 4 or 8.
fn m_tiles(m: usize) -> usize {
    m.div_ceil(DECODE_TILE_M).next_power_of_two()
}

impl Gpu {
    /// `Y = X W^T` for a decode step: `X` is `m x k` (the tokens' activations), `W` is `n x k`
    /// (a weight as `nn.Linear` stores it, each output's weights a row), `Y` is `m x n`; bf16
    /// operands, f32 sums, each element of `Y` rounded once to bf16. What `torch.matmul(x, w.T)`
    /// computes. For `m` from 1 to 64 the weight is streamed once by the whole GPU on tensor
    /// cores ([`DecodePlan::choose`]); other shapes (and `k` not a multiple of 8) run the
    /// tutorial rung, one thread per output, slow. Not for `W` row-major `k x n`: that is
    /// [`Gpu::matmul`]'s `B`.
    ///
    /// Accuracy against the exact product of the given operands: the products of two bf16 are
    /// exact, their sums are in f32 (an error of about `sqrt(k) 2^-24` relative to
    /// `sum_l |X(i,l) W(j,l)|` on random data), and the result is rounded to bf16 (relative error
    /// at most `2^-8`).
    ///
    /// ```
    /// use gpukern::{Gpu, bf16};
    /// let gpu = Gpu::simulator();
    /// let x = gpu.upload_matrix(&ndarray::Array2::from_elem((1, 16), bf16::from_f32(0.5)))?;
    /// let w = gpu.upload_matrix(&ndarray::Array2::from_elem((3, 16), bf16::from_f32(2.0)))?;
    /// let y = gpu.matmul_decode(&x, &w)?;
    /// assert_eq!(y.to_array()?, ndarray::Array2::from_elem((1, 3), bf16::from_f32(16.0)));
    /// # Ok::<(), gpukern::Error>(())
    /// ```
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `X` and `W` have the same columns;
    /// [`Error::WrongDevice`] for a matrix of another `Gpu`.
    pub fn matmul_decode(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
    ) -> Result<DeviceMatrix<bf16>> {
        let mut y = self.zeros_matrix_of(x.rows, w.rows)?;
        self.matmul_decode_to(x, w, &mut y)?;
        Ok(y)
    }

    /// [`Gpu::matmul_decode`] into an existing `m x n` matrix of bf16 (rounded once) or f32
    /// (the sums themselves). No allocation, except the f32 partial products of a plan that
    /// splits `k` (`slices * m * n` floats).
    ///
    /// Errors as [`Gpu::matmul_decode`]; [`Error::ShapeMismatch`] also unless `Y` is `m x n`.
    pub fn matmul_decode_to<O: DecodeOutput>(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        y: &mut DeviceMatrix<O>,
    ) -> Result<()> {
        let (m, k, n) = self.check_decode(x, w, y)?;
        let plan = self.decode_plan(x, w, (m, k, n))?;
        self.launch_decode(plan, x, w, y, (m, k, n), None)
    }

    /// The f32 elements [`Gpu::matmul_decode_into`] needs as its workspace for an `m x k` times
    /// `(n x k)^T` product on this GPU: the partial products of the plan
    /// [`Gpu::matmul_decode_to`] chooses (`slices * m * n`; 0 when it keeps `k` whole). Assumes
    /// 16-byte aligned operands, as every allocation is.
    ///
    /// Errors: [`Error::TooLarge`] past the address space.
    pub fn matmul_decode_workspace_len(&self, m: usize, n: usize, k: usize) -> Result<usize> {
        // The Hopper rung's plan, and the `mma.sync` rung's that a capture falls back to
        // (`Gpu::decode_plan`): room for either.
        let sms = self.multiprocessors()?;
        let slices = [self.decode_wgmma_by_default(), false]
            .map(|wgmma| DecodePlan::choose(m, n, k, sms, true, wgmma).launched(k))
            .into_iter()
            .max()
            .unwrap_or(1);
        if slices > 1 {
            checked_len(OP, &[slices, m, n])
        } else {
            Ok(0)
        }
    }

    /// [`Gpu::matmul_decode_to`] with its partial products in `workspace` (at least
    /// [`Gpu::matmul_decode_workspace_len`] floats): no allocation at all, so that a decode
    /// step can be captured in a graph whatever plan its shapes get. On Hopper the plan's
    /// kernel reads two tensor maps from device memory, uploaded by the first call on given
    /// buffers and kept per stream handle; inside a capture, a call that would have to upload
    /// them runs the `mma.sync` rung instead (so call once before capturing to capture the
    /// Hopper rung).
    ///
    /// Errors as [`Gpu::matmul_decode_to`]; [`Error::InvalidArgument`] also for a workspace
    /// shorter than the plan's partial products.
    pub fn matmul_decode_into<O: DecodeOutput>(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        y: &mut DeviceMatrix<O>,
        workspace: &mut DeviceVec<f32>,
    ) -> Result<()> {
        let (m, k, n) = self.check_decode(x, w, y)?;
        if !self.owns(workspace) {
            return Err(Error::WrongDevice { op: OP });
        }
        let plan = self.decode_plan(x, w, (m, k, n))?;
        self.launch_decode(plan, x, w, y, (m, k, n), Some(workspace))
    }

    /// [`Gpu::matmul_decode_to`] with a given plan: for comparing plans, and for tests that must
    /// reach every kernel.
    ///
    /// Errors as [`Gpu::matmul_decode_to`]; [`Error::InvalidArgument`] for a plan of 0 slices,
    /// a [`DecodePlan::Mma`] where it does not apply ([`DecodePlan::mma_applies`]), or
    /// `loads` other than [`DecodeLoads::EvictFirst`] with `m > 8` or an f32 result.
    pub fn matmul_decode_with<O: DecodeOutput>(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        y: &mut DeviceMatrix<O>,
        plan: DecodePlan,
    ) -> Result<()> {
        let mkn = self.check_decode(x, w, y)?;
        self.launch_decode(plan, x, w, y, mkn, None)
    }

    /// Whether the plans of [`Gpu::matmul_decode_to`] may take the Hopper rung: on a GPU with
    /// the `sm_90a` module. Not in the simulator, which runs it only when asked
    /// ([`Gpu::matmul_decode_with`]): there its maps are uploaded on every call, which a capture
    /// refuses, so a captured call would take the other rung and differ from an uncaptured one.
    fn decode_wgmma_by_default(&self) -> bool {
        self.has_wgmma() && !self.is_simulator()
    }

    /// The plan of [`Gpu::matmul_decode_to`] and [`Gpu::matmul_decode_into`]:
    /// [`DecodePlan::choose`]'s, except inside a capture where the Hopper rung's tensor maps for
    /// these operands are not in device memory yet (uploading them is a host copy, which a
    /// capture refuses): then the `mma.sync` rung's plan, which needs none.
    fn decode_plan(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        (m, k, n): (usize, usize, usize),
    ) -> Result<DecodePlan> {
        let aligned = x.data.is_16_byte_aligned() && w.data.is_16_byte_aligned();
        let sms = self.multiprocessors()?;
        let plan = DecodePlan::choose(m, n, k, sms, aligned, self.decode_wgmma_by_default());
        if let DecodePlan::Wgmma { tile, .. } = plan {
            let capturing = crate::capture::refuse(self, OP, "").is_err();
            if capturing && !self.decode_maps_cached(x, w, (m, k, n), tile)? {
                return Ok(DecodePlan::choose(m, n, k, sms, aligned, false));
            }
        }
        Ok(plan)
    }

    /// Where a plan of `slices` slices keeps its `slices m n` partial products: `workspace` when
    /// given (checked long enough), else a new buffer put in `owned` (refused inside a capture).
    pub(super) fn decode_partials<'a>(
        &self,
        workspace: Option<&'a mut DeviceVec<f32>>,
        owned: &'a mut Option<DeviceVec<f32>>,
        slices: usize,
        m: usize,
        n: usize,
    ) -> Result<&'a mut DeviceVec<f32>> {
        let planes = checked_len(OP, &[slices, m, n])?;
        match workspace {
            Some(workspace) if workspace.len() >= planes => Ok(workspace),
            Some(workspace) => Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the workspace holds {} floats, fewer than the plan's {planes} partial products",
                    workspace.len()
                ),
            }),
            None => {
                crate::capture::refuse(
                    self,
                    OP,
                    "this plan splits k and allocates partial products (use \
                     Gpu::matmul_decode_into with a workspace, or a DecodePlan of one slice); \
                     that is an allocation",
                )?;
                // Every element of every plane is written by the split launch before the sum
                // reads it: not zeroed (NaN in the simulator, so that one left unwritten shows).
                Ok(owned.insert(self.alloc(planes)?))
            }
        }
    }

    /// The checks of a decode product: `X` is `m x k`, `W` is `n x k`, `Y` is `m x n`, all of
    /// this `Gpu`. Returns `(m, k, n)`.
    fn check_decode<O: Element>(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        y: &DeviceMatrix<O>,
    ) -> Result<(usize, usize, usize)> {
        if x.cols != w.cols {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: vec![x.rows, x.cols],
                rhs: vec![w.rows, w.cols],
                rule: "X (m x k) and W (n x k) must have the same columns",
            });
        }
        let (m, k, n) = (x.rows, x.cols, w.rows);
        super::super::same_shape(OP, &[y.rows, y.cols], &[m, n], "the output must be m x n")?;
        if !(self.owns(&x.data) && self.owns(&w.data) && self.owns(&y.data)) {
            return Err(Error::WrongDevice { op: OP });
        }
        Ok((m, k, n))
    }

    /// Runs `plan`, shapes and owners checked; the partial products of a plan that splits `k`
    /// in `workspace` when given (checked long enough), else in a new buffer.
    fn launch_decode<O: DecodeOutput>(
        &self,
        plan: DecodePlan,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        y: &mut DeviceMatrix<O>,
        (m, k, n): (usize, usize, usize),
        workspace: Option<&mut DeviceVec<f32>>,
    ) -> Result<()> {
        let invalid = |detail: String| Err(Error::InvalidArgument { op: OP, detail });
        if let DecodePlan::Mma { slices: 0, .. }
        | DecodePlan::Wgmma { slices: 0, .. }
        | DecodePlan::Rows { slices: 0, .. } = plan
        {
            return invalid("a DecodePlan::Mma, ::Rows or ::Wgmma needs at least one slice of k".to_string());
        }
        if let DecodePlan::StreamK { blocks: 0, .. } = plan {
            return invalid("a DecodePlan::StreamK needs at least one block".to_string());
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let limits = self.limits();
        let (slices, loads, rows_rung) = match plan {
            DecodePlan::Wgmma { tile, slices } => {
                return self.launch_decode_wgmma(tile, slices, x, w, y, (m, k, n), workspace);
            }
            DecodePlan::StreamK { tile, blocks } => {
                return self.launch_decode_stream_k(tile, blocks, x, w, y, (m, k, n));
            }
            DecodePlan::Naive => {
                let cfg = LaunchConfig {
                    grid: (
                        n.div_ceil(DECODE_NAIVE_BLOCK as usize)
                            .try_into()
                            .unwrap_or(u32::MAX),
                        m.try_into().unwrap_or(u32::MAX),
                        1,
                    ),
                    block: (DECODE_NAIVE_BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                }
                .checked(OP, &limits)?;
                // SAFETY: `x`, `w`, `y` hold m*k, n*k, m*n elements (shapes checked); `cfg` is
                // the kernel's documented launch.
                return unsafe {
                    O::naive()(
                        &self.library(),
                        cfg,
                        x.data.view(),
                        w.data.view(),
                        y.data.view_mut(),
                        m,
                        n,
                        k,
                    )
                };
            }
            DecodePlan::Mma { slices, loads } => (slices, loads, false),
            DecodePlan::Rows { slices, loads } => (slices, loads, true),
        };
        let aligned = x.data.is_16_byte_aligned() && w.data.is_16_byte_aligned();
        if !DecodePlan::mma_applies(m, n, k, aligned) {
            return invalid(format!(
                "the tensor-core decode kernels need 1 <= m <= {DECODE_MAX_M}, k a positive multiple \
                 of 8 and 16-byte aligned matrices (m = {m}, k = {k}): use DecodePlan::Naive"
            ));
        }
        // The kernel writing `O`, its twin writing f32 partial planes, rows of `W` per block
        // and threads per block.
        let (launch, partial_launch, block_rows, block) = if !rows_rung {
            let Some(launch) = O::mma(m_tiles(m), loads) else {
                return invalid(format!(
                    "the decode kernels with {loads:?} loads take m <= 8 and a bf16 result"
                ));
            };
            let partial = <f32 as sealed::DecodeKernels>::mma(m_tiles(m), DecodeLoads::EvictFirst);
            (launch, partial, DECODE_BLOCK_ROWS, DECODE_BLOCK)
        } else {
            let rows_m = m.next_power_of_two();
            let launch = if m <= DECODE_ROWS_MAX_M {
                O::rows(rows_m, loads)
            } else {
                None
            };
            let Some(launch) = launch else {
                return invalid(format!(
                    "the CUDA-core decode kernels take m <= {DECODE_ROWS_MAX_M} (m = {m}) with \
                     EvictFirst loads, and NoAllocate loads at m = 1 with a bf16 result (asked: \
                     {loads:?})"
                ));
            };
            let partial = <f32 as sealed::DecodeKernels>::rows(rows_m, loads);
            (launch, partial, DECODE_ROWS_WARPS, DECODE_ROWS_BLOCK)
        };
        let (k_split, slices) = (
            DecodePlan::k_split(k, slices),
            DecodePlan::launched_slices(k, slices),
        );
        let too_many = || Error::TooLarge {
            op: OP,
            detail: format!("n = {n} or {slices} slices of k exceed the grid's limits"),
        };
        let cfg = LaunchConfig {
            grid: (
                u32::try_from(n.div_ceil(block_rows)).map_err(|_| too_many())?,
                u32::try_from(slices).map_err(|_| too_many())?,
                1,
            ),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        }
        .checked(OP, &limits)?;
        if slices == 1 {
            // SAFETY: `x`, `w` hold m*k, n*k bf16, 16-byte aligned, read only; `y` m*n elements;
            // `k % 8 == 0`, `1 <= m <= 8 m_tiles(m)`, `k_split` a positive multiple of 128 with
            // one slice; `cfg` the kernel's launch.
            return unsafe {
                launch(
                    &self.library(),
                    cfg,
                    x.data.view(),
                    w.data.view(),
                    y.data.view_mut(),
                    m,
                    n,
                    k,
                    k_split,
                )
            };
        }
        let Some(partial_launch) = partial_launch else {
            return invalid(format!(
                "{} splits k, which only the kernels with EvictFirst loads do",
                plan.name()
            ));
        };
        let len = m * n;
        let mut owned = None;
        let partial = self.decode_partials(workspace, &mut owned, slices, m, n)?;
        // SAFETY: as above, `partial` holds `slices * m * n` floats for the `slices` planes.
        unsafe {
            partial_launch(
                &self.library(),
                cfg,
                x.data.view(),
                w.data.view(),
                partial.view_mut(),
                m,
                n,
                k,
                k_split,
            )
        }?;
        // SAFETY: `partial` holds `slices * len` floats written by that launch, `y` holds `len`.
        unsafe { O::sum(self, partial, &mut y.data, len, slices) }
    }
}

#[cfg(test)]
mod tests {
    use super::DecodePlan;

    fn slices(m: usize, n: usize, k: usize, sms: usize) -> usize {
        // The `mma.sync` rung's rule (and the CUDA-core rung's at m = 1): without the Hopper rung.
        match DecodePlan::choose(m, n, k, sms, true, false) {
            DecodePlan::Mma { slices, loads } => {
                assert!(m > super::ROWS_MAX_M);
                assert_eq!(loads, super::DecodeLoads::EvictFirst);
                slices
            }
            DecodePlan::Rows { slices, loads } => {
                assert!(m <= super::ROWS_MAX_M);
                assert_eq!(loads, super::DecodeLoads::EvictFirst);
                slices
            }
            DecodePlan::Naive => 0,
            other => panic!("{other:?} without wgmma"),
        }
    }

    /// The issue's shapes on an H200 (132 SMs): the table of `DecodePlan::choose`.
    #[test]
    fn h200_shapes() {
        for m in [8, 64] {
            assert_eq!(slices(m, 28672, 8192, 132), 1);
            assert_eq!(slices(m, 8192, 8192, 132), 4);
            assert_eq!(slices(m, 4096, 4096, 132), 4);
        }
        // The CUDA-core rung's blocks of 8 rows: k whole down to n = 1584 (198 blocks, 1.5 per
        // SM); 1576 rows (197 blocks) split it in two, 792 (99) still in two, 784 (98) in four.
        for n in [28672, 8192, 4096, 1584] {
            assert_eq!(slices(1, n, 8192, 132), 1, "n {n}");
        }
        assert_eq!(slices(1, 1576, 8192, 132), 2);
        assert_eq!(slices(1, 792, 8192, 132), 2);
        assert_eq!(slices(1, 784, 8192, 132), 4);
    }

    /// The CUDA-core rung at m <= ROWS_MAX_M on every GPU, the Hopper rung from the next m on
    /// where it is there, the `mma.sync` rung elsewhere.
    #[test]
    fn rows_boundary() {
        let m = super::ROWS_MAX_M;
        for wgmma in [false, true] {
            assert!(matches!(
                DecodePlan::choose(m, 28672, 8192, 132, true, wgmma),
                DecodePlan::Rows { slices: 1, .. }
            ));
        }
        assert!(matches!(
            DecodePlan::choose(m + 1, 28672, 8192, 132, true, true),
            DecodePlan::Wgmma { .. }
        ));
        assert!(matches!(
            DecodePlan::choose(m + 1, 28672, 8192, 132, true, false),
            DecodePlan::Mma { .. }
        ));
        // Unaligned or k not a multiple of 8: the tutorial rung, also at m = 1.
        assert_eq!(
            DecodePlan::choose(1, 128, 1024, 132, false, true),
            DecodePlan::Naive
        );
        assert_eq!(
            DecodePlan::choose(1, 128, 1020, 132, true, true),
            DecodePlan::Naive
        );
    }

    /// Each side of the rule's boundaries: blocks of rows against 1.5 per SM, the shortest
    /// slice, the most slices, and where the tensor-core rung applies.
    #[test]
    fn boundaries() {
        // 132 SMs want 198 blocks: 198 blocks (n = 198 * 128) keep k whole, 197 split it in
        // two, and one row more is a block more.
        assert_eq!(slices(2, 198 * 128, 8192, 132), 1);
        assert_eq!(slices(2, 197 * 128, 8192, 132), 2);
        assert_eq!(slices(2, 197 * 128 + 1, 8192, 132), 1);
        // 99 blocks split in two (198), 98 in four (392 >= 198).
        assert_eq!(slices(2, 99 * 128, 8192, 132), 2);
        assert_eq!(slices(2, 98 * 128, 8192, 132), 4);
        // Slices of at least 1024 (`k_split` rounds up to 128): k = 1800 splits in two (900
        // rounds to 1024), k = 1792 does not (896).
        assert_eq!(slices(2, 128, 1800, 132), 2);
        assert_eq!(slices(2, 128, 1792, 132), 1);
        // At most 16 slices, however deep k is.
        assert_eq!(slices(2, 128, 1 << 20, 132), 16);
        // One SM wants 1.5 blocks: one block of rows takes two slices.
        assert_eq!(slices(2, 128, 1 << 20, 1), 2);
        // m from 1 to 64, k a positive multiple of 8, aligned.
        assert_eq!(slices(0, 128, 1024, 132), 0);
        assert!(slices(1, 128, 1024, 132) >= 1);
        assert_eq!(slices(65, 128, 1024, 132), 0);
        assert!(slices(64, 128, 1024, 132) >= 1);
        assert_eq!(slices(2, 128, 1020, 132), 0);
        assert_eq!(slices(2, 128, 0, 132), 0);
        assert_eq!(
            DecodePlan::choose(2, 128, 1024, 132, false, false),
            DecodePlan::Naive
        );
    }

    /// Slices of k: whole multiples of 128 covering k, none empty.
    #[test]
    fn k_split_covers_k() {
        for k in [8, 128, 1000, 1024, 2048, 8192, 28672, 8200] {
            for s in 1..=16 {
                let (split, launched) = (DecodePlan::k_split(k, s), DecodePlan::launched_slices(k, s));
                assert_eq!(split % 128, 0);
                assert!(launched <= s && launched >= 1, "k {k} s {s}");
                assert!(split * launched >= k && split * (launched - 1) < k, "k {k} s {s}");
            }
        }
    }
}
