//! The plan of a matmul: which kernels run for a shape, chosen once per call from the algorithm
//! and the device's facts (multiprocessors, opt-in shared memory).

use kernels_gpu::matmul::half::{HALF_128X128, HalfTiling};
use kernels_gpu::matmul::tf32::{TF32_128X128, TF32_128X128_K16, TF32_128X256, Tf32Tiling};
use kernels_gpu::matmul::wgmma_ws::{WS_64X128, WS_128X128, WS_128X256, WsTiling};
use kernels_gpu::matmul::{FAST_64, FAST_128, FAST_WIDE, FastTiling, STREAM_K, StreamKSchedule};

use super::error_bound::{TF32_TRUNCATION_UNIT_ROUNDOFF, TF32_UNIT_ROUNDOFF, error_factor};
use crate::error::Result;
use crate::launch_config::DeviceLimits;

/// What one matmul call runs: the whole choice, made once before anything is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MatmulPlan {
    /// `matmul_naive`: one thread per output element.
    Naive,
    /// `matmul_tiled`: 32x32 tiles in shared memory.
    Tiled,
    /// The fast kernels, with this tiling and split of `k`.
    Fast(FastPlan),
    /// The TF32 tensor-core kernels, with this tiling.
    Tf32(Tf32Tile),
    /// The stream-K kernel (128 x 128 tiles on a persistent grid) and its fixup.
    StreamK(StreamKPlan),
}

/// The device facts a matmul plan reads, each asked only where the choice needs it: a `Gpu`
/// ([`crate::Gpu`] implements it in `kernels.rs`), or fixed numbers in the plan's tests.
pub(crate) trait MatmulDevice {
    /// Streaming multiprocessors.
    fn multiprocessors(&self) -> Result<usize>;
    /// Blocks of the stream-K kernel resident on the whole GPU at once.
    fn stream_k_resident(&self) -> Result<usize>;
    /// Whether this is the CPU simulator.
    fn is_simulator(&self) -> bool;
    /// Whether the `sm_90a` module (`wgmma`) is loaded.
    fn has_wgmma(&self) -> bool;
    /// The device's launch limits.
    fn limits(&self) -> DeviceLimits;
}

impl MatmulPlan {
    /// The plan of `algorithm` for an `m x k` times `k x n` product on `device`, with the
    /// schedule [`SGEMM_SCHEDULE_ENV`] forces, if any.
    pub(crate) fn choose(
        device: &impl MatmulDevice,
        algorithm: MatmulAlgorithm,
        mkn: (usize, usize, usize),
    ) -> Result<Self> {
        MatmulPlan::choose_with(device, algorithm, mkn, SgemmSchedule::forced())
    }

    /// [`MatmulPlan::choose`] with the forced schedule given, a pure function of its arguments:
    /// the first of [`MATMUL_RULES`] that applies wins. Each algorithm's last rule always
    /// applies (pinned by the plan's tests), so the fallback, the naive kernel (right for every
    /// shape), is never reached.
    fn choose_with(
        device: &impl MatmulDevice,
        algorithm: MatmulAlgorithm,
        mkn: (usize, usize, usize),
        forced: Option<SgemmSchedule>,
    ) -> Result<Self> {
        for source in &MATMUL_RULES {
            if let Some(plan) = source.rule.apply(device, algorithm, mkn, forced)? {
                return Ok(plan);
            }
        }
        Ok(MatmulPlan::Naive)
    }
}

/// The block tiling of a [`MatmulAlgorithm::Tf32`] launch, and how its operands become TF32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tf32Tile {
    /// 128 x 256 per block, 8 warps of 64 x 64, 4 stages ([`TF32_128X256`]).
    Wide,
    /// 128 x 128 per block, 4 warps of 64 x 64, 3 stages, two blocks per SM ([`TF32_128X128`]).
    Square,
    /// 128 x 128 per block, 4 warps of 64 x 64, `BK = 16`, 4 stages, 74 KiB of shared memory
    /// ([`TF32_128X128_K16`]): for GPUs that cannot give a block the 105 KiB of
    /// [`Tf32Tile::Square`] (99 KiB on compute capability 8.6, 8.9 and 12.0).
    SquareK16,
    /// [`Tf32Tile::Wide`] without rounding the operands: the tensor core truncates them (unit
    /// roundoff [`TF32_TRUNCATION_UNIT_ROUNDOFF`], `2^-10`), so the error bound is
    /// [`Tf32Tile::error_factor`], about twice [`tf32_error_factor`](super::tf32_error_factor); 256 fewer instructions
    /// per warp per tile. Never chosen by [`MatmulAlgorithm::Tf32`]; only through
    /// [`crate::Gpu::matmul_tf32_into`].
    WideTruncated,
    /// [`Tf32Tile::Square`] without rounding the operands, as [`Tf32Tile::WideTruncated`].
    SquareTruncated,
    /// Hopper `wgmma.m64n256k8.tf32` with warp specialisation: the kernel of
    /// [`HalfTile::WarpSpecialized`] on f32 operands (a producer warpgroup issuing TMA copies
    /// into a 4-stage ring, two consumer warpgroups, 128 x 256 per tile, `BK = 32`, a persistent
    /// grid), after a transpose of `B` into a workspace (TF32 `wgmma` reads both operands
    /// K-major: `8 n k` more bytes of traffic, `4 n k` bytes of memory for the call). `k` a
    /// multiple of 4 (at least 4), 16-byte aligned operands, a compute capability 9.0 GPU with
    /// the `sm_90a` module ([`Tf32Tile::wgmma_applies`]). What [`MatmulAlgorithm::Tf32`] picks
    /// there. The copy engine rounds the operands to TF32 (to nearest) on the GPU, where
    /// [`MatmulAlgorithm::Tf32`]'s bound (`u = 2^-11`) holds; forced by hand, the promised bound
    /// is the truncation one ([`Tf32Tile::error_factor`], `u = 2^-10`), which also covers the
    /// simulator, whose copies leave the tensor core to truncate (and where
    /// [`MatmulAlgorithm::Tf32`] never picks it). Not in [`Tf32Tile::ALL`].
    /// The tile by shape, as [`HalfTile::WarpSpecialized`] ([`WsTile::choose`]).
    Wgmma,
    /// [`Tf32Tile::Wgmma`] with the given tile, whatever the shape (for comparing tiles, and
    /// for tests that must reach each). Not in [`Tf32Tile::ALL`].
    WgmmaTile(WsTile),
}

impl Tf32Tile {
    /// Every `mma.sync` tiling (every GPU from sm_80 on), rounding first, then truncating;
    /// [`Tf32Tile::Wgmma`] (Hopper only) is apart.
    pub const ALL: [Tf32Tile; 5] = [
        Tf32Tile::Wide,
        Tf32Tile::Square,
        Tf32Tile::SquareK16,
        Tf32Tile::WideTruncated,
        Tf32Tile::SquareTruncated,
    ];

    /// The tile shape of the kernels this runs.
    pub fn tiling(self) -> Tf32Tiling {
        match self {
            Tf32Tile::Wide | Tf32Tile::WideTruncated => TF32_128X256,
            Tf32Tile::Square | Tf32Tile::SquareTruncated => TF32_128X128,
            Tf32Tile::SquareK16 => TF32_128X128_K16,
            // The same rows and columns per tile as the `wgmma` kernel's `WS_128X256` (its
            // tiling by shape is `WsTile::tiling`'s).
            Tf32Tile::Wgmma | Tf32Tile::WgmmaTile(_) => TF32_128X256,
        }
    }

    /// A short name: `128x256`, `128x128`, `128x128-k16`, `128x256-trunc`, `128x128-trunc`,
    /// `wgmma-ws` (the tile by shape), or the [`WsTile::name`] of a forced tile.
    pub fn name(self) -> &'static str {
        match self {
            Tf32Tile::Wide => "128x256",
            Tf32Tile::Square => "128x128",
            Tf32Tile::SquareK16 => "128x128-k16",
            Tf32Tile::WideTruncated => "128x256-trunc",
            Tf32Tile::SquareTruncated => "128x128-trunc",
            Tf32Tile::Wgmma => "wgmma-ws",
            Tf32Tile::WgmmaTile(t) => t.name(),
        }
    }

    /// Whether the kernels round the operands to TF32 (to nearest) rather than let the tensor
    /// core truncate them; false for [`Tf32Tile::Wgmma`], whose rounding is the copy engine's on
    /// the GPU only (its bound is the truncation one).
    pub fn rounds(self) -> bool {
        matches!(self, Tf32Tile::Wide | Tf32Tile::Square | Tf32Tile::SquareK16)
    }

    /// The factor of this tiling's per-element error bound for an inner dimension `k`:
    /// [`tf32_error_factor`](super::tf32_error_factor) (`u = 2^-11`) when it [rounds](Tf32Tile::rounds), else the same
    /// formula with `u =` [`TF32_TRUNCATION_UNIT_ROUNDOFF`] (`2^-10`): about `2e-3 + k * 1.2e-7`.
    pub fn error_factor(self, k: usize) -> f64 {
        let u = if self.rounds() {
            TF32_UNIT_ROUNDOFF
        } else {
            TF32_TRUNCATION_UNIT_ROUNDOFF
        };
        error_factor(k, u)
    }

    /// Whether [`Tf32Tile::Wgmma`] can run a product of inner dimension `k`: `k` a positive
    /// multiple of 4 (the copy engine's rows of `A` and `B^T` are whole 16 bytes), 16-byte
    /// aligned operands (`aligned`), and `wgmma_loaded`: the `sm_90a` module is loaded (a compute
    /// capability 9.0 GPU), or the simulator.
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    pub fn wgmma_applies(k: usize, aligned: bool, wgmma_loaded: bool) -> bool {
        k > 0 && k % 4 == 0 && aligned && wgmma_loaded
    }

    /// The tiling for an `m x n` result on a GPU with `multiprocessors` SMs and these limits:
    /// the first of [`TF32_RULES`] that applies. An H100/H200 (227 KiB of opt-in shared memory
    /// per block) takes `Wide` or `Square` by shape, an A100 (163 KiB) `Square`, and compute
    /// capability 8.6, 8.9 and 12.0 (99 KiB) `SquareK16`. Below 74 KiB (no GPU gpukern
    /// supports) the launch is refused with [`crate::Error::TooLarge`].
    pub fn choose(m: usize, n: usize, multiprocessors: usize, limits: &DeviceLimits) -> Tf32Tile {
        TF32_RULES
            .iter()
            .find_map(|r| r.rule.apply(m, n, multiprocessors, limits))
            .unwrap_or(Tf32Tile::SquareK16)
    }
}

/// The block tiling of a [`FastPlan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FastTile {
    /// 128 x 128 per block, 8 x 8 per thread ([`FAST_128`]).
    Large,
    /// 64 x 64 per block, 4 x 4 per thread ([`FAST_64`]).
    Small,
    /// 128 x 256 per block, 8 x 16 per thread, tiles moved by `cp.async` ([`FAST_WIDE`]).
    Wide,
}

impl FastTile {
    /// The tile shape of the kernels this runs.
    pub fn tiling(self) -> FastTiling {
        match self {
            FastTile::Large => FAST_128,
            FastTile::Small => FAST_64,
            FastTile::Wide => FAST_WIDE,
        }
    }

    /// Every tiling.
    pub const ALL: [FastTile; 3] = [FastTile::Large, FastTile::Small, FastTile::Wide];

    /// A short name: `128x128`, `64x64`, `128x256`.
    pub fn name(self) -> &'static str {
        match self {
            FastTile::Large => "128x128",
            FastTile::Small => "64x64",
            FastTile::Wide => "128x256",
        }
    }
}

/// How [`MatmulAlgorithm::Fast`] runs one `m x k` times `k x n` product: which tiling, and over
/// how many slices of `k` (each slice a block of its own, writing a partial product that
/// `matmul_sum_splits` adds up). Whether the kernel uses 16-byte global accesses is not part of
/// the plan: it follows from the shapes and alignment (`k % 4 == 0`, `n % 4 == 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FastPlan {
    /// The block tiling.
    pub tile: FastTile,
    /// Slices of `k` asked for (at least 1); [`FastPlan::k_split`] rounds them to whole tiles.
    pub slices: usize,
}

/// With fewer blocks than multiprocessors, [`FastPlan::choose`] splits `k` until there are about
/// this many blocks per multiprocessor.
const SPLIT_BLOCKS_PER_MULTIPROCESSOR: usize = 2;
/// Shortest slice of `k` worth a block of its own: below it the prologue and epilogue of a block
/// (first tile load, writing the partial tile) outweigh its main loop.
const MIN_SPLIT_K: usize = 256;
/// Most slices of `k`: bounds the partial products' memory (`slices * m * n` floats).
const MAX_SLICES: usize = 16;

impl FastPlan {
    /// The 128 x 128 tiling with `k` whole: the plan of large products.
    pub const LARGE_WHOLE: FastPlan = FastPlan {
        tile: FastTile::Large,
        slices: 1,
    };

    /// The plan for an `m x k` times `k x n` product on a GPU with `multiprocessors` SMs: the
    /// first of [`FAST_RULES`] that applies. The 128 x 128 tiling does the most work per
    /// shared-memory load, but only while the grid fills the GPU: 1024^3 gives 64 such blocks
    /// for 132 SMs, 256 of 64 x 64. Skinny products (`m` or `n` of 64 and less, e.g.
    /// 64x4096x4096 or a single row) fill it only by splitting `k`. On an H200: 4096^3, 8192^3,
    /// 2048^3, 4097x4095x4093 and 4096x4096x64 (k = 64) take the large tiling; 1024^3 the small
    /// one; 512^3 the small one in 2 slices; 64x4096x4096 and 1x4096x4096 the small one in 5
    /// slices.
    pub fn choose(m: usize, n: usize, k: usize, multiprocessors: usize) -> FastPlan {
        FAST_RULES
            .iter()
            .find_map(|r| r.rule.apply(m, n, k, multiprocessors))
            .unwrap_or_else(|| FastPlan::split(m, n, k, multiprocessors))
    }

    /// The small tiling over slices of `k` of at least [`MIN_SPLIT_K`] (at most
    /// [`MAX_SLICES`]) for about [`SPLIT_BLOCKS_PER_MULTIPROCESSOR`] blocks per SM (one slice
    /// where `k` is shorter than two).
    fn split(m: usize, n: usize, k: usize, multiprocessors: usize) -> FastPlan {
        let tiles = fast_blocks(FAST_64, m, n).max(1);
        let slices = (SPLIT_BLOCKS_PER_MULTIPROCESSOR * multiprocessors.max(1))
            .div_ceil(tiles)
            .min(k / MIN_SPLIT_K)
            .clamp(1, MAX_SLICES);
        FastPlan {
            tile: FastTile::Small,
            slices,
        }
    }

    /// Length of each slice of `k`: `k / slices` rounded up to whole tiles of the tiling's `BK`
    /// (so that slices start 16-byte aligned), at least one tile.
    pub fn k_split(&self, k: usize) -> usize {
        let bk = self.tile.tiling().block_k;
        k.div_ceil(self.slices.max(1)).next_multiple_of(bk).max(bk)
    }

    /// Slices actually launched for this `k`: those of [`FastPlan::k_split`] that hold part of
    /// `k` (at least one).
    pub fn launched_slices(&self, k: usize) -> usize {
        k.div_ceil(self.k_split(k)).max(1)
    }
}

/// Blocks of `tiling` over an `m x n` result.
fn fast_blocks(tiling: FastTiling, m: usize, n: usize) -> usize {
    m.div_ceil(tiling.block_rows) * n.div_ceil(tiling.block_cols)
}

/// Environment variable that sets the schedule [`MatmulAlgorithm::Fast`] takes for an f32
/// product: `stream-k` ([`StreamKPlan`] wherever its kernel applies: `k`, `n` multiples of 4),
/// `auto` (stream-K where [`StreamKPlan::choose`] says) or `dp` (data-parallel, one block per
/// tile: [`FastPlan::choose`]'s plan). Read once per process; unset or anything else is `dp`,
/// the default ([`MATMUL_RULES`]).
pub const SGEMM_SCHEDULE_ENV: &str = "GPUKERN_SGEMM";

/// A schedule forced through [`SGEMM_SCHEDULE_ENV`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SgemmSchedule {
    /// `stream-k`.
    StreamK,
    /// `dp`.
    DataParallel,
    /// `auto`: [`StreamKPlan::choose`]'s rule.
    ByShape,
}

impl SgemmSchedule {
    /// The schedule [`SGEMM_SCHEDULE_ENV`] forces, if any.
    fn forced() -> Option<SgemmSchedule> {
        static FORCED: std::sync::OnceLock<Option<SgemmSchedule>> = std::sync::OnceLock::new();
        *FORCED.get_or_init(|| match std::env::var(SGEMM_SCHEDULE_ENV).ok().as_deref() {
            Some("stream-k") => Some(SgemmSchedule::StreamK),
            Some("dp") => Some(SgemmSchedule::DataParallel),
            Some("auto") => Some(SgemmSchedule::ByShape),
            _ => None,
        })
    }
}

/// A stream-K launch of the 128 x 128 kernel (`kernels_gpu::matmul::stream_k`): a grid of
/// `ctas` blocks that first runs `tiles - sk_tiles` whole tiles (`(tiles - sk_tiles) / ctas`
/// per block), then shares the last `sk_tiles` tiles' steps along `k` out evenly, and a fixup
/// launch that adds up the tiles split between blocks. The workspace of partial tiles,
/// `2 * ctas` tiles of 64 KiB (33 MiB for 264 blocks), is allocated per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamKPlan {
    /// Blocks of the grid: the resident count of the kernel, so that all run at once.
    pub ctas: usize,
    /// Tiles, counted from the last, that go through the stream-K line.
    pub sk_tiles: usize,
}

/// Least `k` for which [`StreamKPlan::choose`] takes stream-K: 16 steps of `BK` per tile, so that
/// a part of a tile is long against the prologue and epilogue it repeats.
const MIN_STREAM_K_K: usize = 256;
/// [`StreamKPlan::choose`] leaves a last wave alone when it is at least this full (in
/// twentieths of the grid: 19/20 = 95%): what stream-K could win is below the fixup's cost.
const MAX_TAIL_TWENTIETHS: usize = 19;

impl StreamKPlan {
    /// Tiles of 128 x 128 of an `m x n` result.
    pub fn tiles(m: usize, n: usize) -> usize {
        m.div_ceil(STREAM_K.block_rows) * n.div_ceil(STREAM_K.block_cols)
    }

    /// The stream-K rule (taken by [`MatmulAlgorithm::Fast`] only with
    /// [`SGEMM_SCHEDULE_ENV`]`=auto`) for an `m x k` times `k x n` product whose kernel
    /// has `resident` blocks resident on the GPU, or `None` for the data-parallel grid: with
    /// `tiles` tiles of 128 x 128, stream-K when the grid runs more than one wave (`tiles >
    /// resident`), the last is between empty and 95% full (`0 < tiles % resident <= 0.95 *
    /// resident`), and `k >= 256`. On an H200 (132 SMs, 2 blocks each): 4096^3 (1,024 tiles,
    /// 3.88 waves) and 8192^3 (4,096 tiles, 15.5 waves) take it; 2048^3 (256 tiles, one wave
    /// 97% full) does not. The split is [`StreamKPlan::with_ctas`]'s.
    pub fn choose(m: usize, n: usize, k: usize, resident: usize) -> Option<StreamKPlan> {
        let (tiles, ctas) = (StreamKPlan::tiles(m, n), resident.max(1));
        let tail = tiles % ctas;
        let ragged = tail != 0 && tail * 20 <= MAX_TAIL_TWENTIETHS * ctas;
        (k >= MIN_STREAM_K_K && tiles > ctas && ragged).then(|| StreamKPlan::with_ctas(m, n, ctas))
    }

    /// A grid of `ctas` blocks (at least 1) for an `m x n` result: stream-K over the last wave's
    /// `tiles % ctas` tiles, plus one whole wave more when those are fewer than half the grid
    /// (so that each block's share of the line is at least half a tile and each tile has at
    /// most about three contributors), or over all tiles when there are no more than `ctas` (or
    /// than that plus a wave); with no last wave (`tiles % ctas == 0`), over the last wave.
    pub fn with_ctas(m: usize, n: usize, ctas: usize) -> StreamKPlan {
        let (tiles, ctas) = (StreamKPlan::tiles(m, n).max(1), ctas.max(1));
        let tail = tiles % ctas;
        let sk_tiles = if tiles <= ctas {
            tiles
        } else if tail == 0 {
            ctas
        } else if 2 * tail < ctas {
            (tail + ctas).min(tiles)
        } else {
            tail
        };
        StreamKPlan { ctas, sk_tiles }
    }

    /// The schedule the kernels read for an `m x k` times `k x n` product, if this plan fits it
    /// ([`StreamKPlan::fits`]) and its arithmetic fits the kernels' 32 bits
    /// ([`StreamKSchedule::fits_u32`]).
    pub fn schedule(&self, m: usize, n: usize, k: usize) -> Option<StreamKSchedule> {
        let (tiles, iters) = (StreamKPlan::tiles(m, n), k.div_ceil(STREAM_K.block_k).max(1));
        if !self.fits(m, n) || !StreamKSchedule::fits_u32(tiles, iters, self.sk_tiles, self.ctas) {
            return None;
        }
        Some(StreamKSchedule {
            tiles: tiles as u32,
            iters: iters as u32,
            sk_tiles: self.sk_tiles as u32,
            ctas: self.ctas as u32,
        })
    }

    /// Whether the kernels can run this plan on `m x n`: at least one block, `1 <= sk_tiles <=
    /// tiles`, and the data-parallel tiles a whole number per block.
    pub fn fits(&self, m: usize, n: usize) -> bool {
        let tiles = StreamKPlan::tiles(m, n);
        self.ctas >= 1 && (1..=tiles).contains(&self.sk_tiles) && (tiles - self.sk_tiles) % self.ctas == 0
    }
}

/// The kernel of a half-precision (bf16, f16) product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HalfTile {
    /// `mma.sync.m16n8k16`, 128 x 128 per block, 4 warps of 64 x 64, `BK = 32`, 4 stages, 74 KiB
    /// of shared memory ([`HALF_128X128`]): every GPU from sm_80 on.
    Square,
    /// Hopper `wgmma.m64n128k16`, 128 x 128 per block, one warpgroup, `BK = 64`, a 4-stage TMA
    /// ring guarded by `mbarrier`s, 129 KiB of shared memory ([`WGMMA_128X128`](kernels_gpu::matmul::wgmma::WGMMA_128X128)): bf16 operands,
    /// `k` and `n` multiples of 8, 16-byte aligned operands, a compute capability 9.0 GPU with
    /// the `sm_90a` module loaded (and the simulator).
    Wgmma,
    /// Hopper `wgmma` with warp specialisation: a producer warpgroup issuing TMA copies into a
    /// ring of stages and two consumer warpgroups (`setmaxnreg`), a persistent grid, 193 KiB of
    /// shared memory, the tile chosen by shape ([`WsTile::choose`]: 128 x 256 with
    /// `wgmma.m64n256k16` where its tiles fill the GPU, else a smaller one): bf16 and f16
    /// operands, where [`HalfTile::Wgmma`]'s conditions on `k`, `n`, alignment and the GPU hold.
    WarpSpecialized,
    /// [`HalfTile::WarpSpecialized`] with the given tile, whatever the shape (for comparing
    /// tiles, and for tests that must reach each).
    WarpSpecializedTile(WsTile),
}

/// The tile of the warp-specialised `wgmma` kernels ([`HalfTile::WarpSpecialized`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WsTile {
    /// 128 x 256, two consumers of `64 x 256` (`wgmma.m64n256k16`), 4 stages ([`WS_128X256`]):
    /// the most flops per byte, for products with enough tiles to fill the GPU.
    Wide,
    /// 128 x 128, two consumers of `64 x 128` (`m64n128k16`), 6 stages ([`WS_128X128`]): twice
    /// the tiles of [`WsTile::Wide`].
    Square,
    /// 64 x 128, two consumers of `64 x 64` side by side (`m64n64k16`), 8 stages
    /// ([`WS_64X128`]): four times the tiles of [`WsTile::Wide`], for small products.
    Narrow,
}

/// [`WsTile::choose`] takes the largest tile whose count is at least this percentage of the
/// multiprocessors ("about one full wave": the persistent grid is one block per SM).
pub const WS_WAVE_PERCENT: usize = 90;

impl WsTile {
    /// Every tile, largest first.
    pub const ALL: [WsTile; 3] = [WsTile::Wide, WsTile::Square, WsTile::Narrow];

    /// The kernels' tiling.
    pub fn tiling(self) -> WsTiling {
        match self {
            WsTile::Wide => WS_128X256,
            WsTile::Square => WS_128X128,
            WsTile::Narrow => WS_64X128,
        }
    }

    /// A short name: `wgmma-ws-128x256`, `wgmma-ws-128x128`, `wgmma-ws-64x128`.
    pub fn name(self) -> &'static str {
        match self {
            WsTile::Wide => "wgmma-ws-128x256",
            WsTile::Square => "wgmma-ws-128x128",
            WsTile::Narrow => "wgmma-ws-64x128",
        }
    }

    /// The tile for an `m x n` result on a GPU with `multiprocessors` SMs: the first of
    /// [`WS_RULES`] whose tiles give about one full wave ([`WS_WAVE_PERCENT`] of the SMs; the
    /// persistent grid is one block per SM), else the last. On an H200 (132 SMs): 2048^3 and
    /// larger take [`WsTile::Wide`] (128 tiles at 2048^3), 1536^3 [`WsTile::Square`] (144),
    /// 1024^3 [`WsTile::Narrow`] (128).
    pub fn choose(m: usize, n: usize, multiprocessors: usize) -> WsTile {
        let wave = multiprocessors.max(1) * WS_WAVE_PERCENT;
        WS_RULES
            .iter()
            .map(|r| r.rule)
            .find(|t| t.tiling().tiles(m, n) * 100 >= wave)
            .unwrap_or(WsTile::Narrow)
    }
}

/// The variable that forces the kernel of half-precision products, for benchmarks (read once,
/// at the first half-precision product): `mma` (the `mma.sync` kernel, [`HalfTile::Square`]),
/// `wgmma` ([`HalfTile::Wgmma`], for bf16 where it applies), `ws`
/// ([`HalfTile::WarpSpecialized`], where it applies) or `ws-128x256`, `ws-128x128`, `ws-64x128`
/// (the same with that [`WsTile`]); elsewhere the default.
pub const HALF_KERNEL_ENV: &str = "GPUKERN_HALF_KERNEL";

impl HalfTile {
    /// Every half-precision kernel.
    pub const ALL: [HalfTile; 3] = [HalfTile::Square, HalfTile::Wgmma, HalfTile::WarpSpecialized];

    /// The tile shape of the `mma.sync` kernels ([`HalfTile::Wgmma`]'s is
    /// `WGMMA_128X128`; its rows and columns are the same).
    pub fn tiling(self) -> HalfTiling {
        HALF_128X128
    }

    /// A short name: `128x128`, `wgmma-128x128`, `wgmma-ws` (the tile by shape), or the
    /// [`WsTile::name`] of a forced tile.
    pub fn name(self) -> &'static str {
        match self {
            HalfTile::Square => "128x128",
            HalfTile::Wgmma => "wgmma-128x128",
            HalfTile::WarpSpecialized => "wgmma-ws",
            HalfTile::WarpSpecializedTile(t) => t.name(),
        }
    }

    /// Whether a `wgmma` kernel can run this product: it exists for the operands' type
    /// (`bf16`: bf16 for [`HalfTile::Wgmma`], always for [`HalfTile::WarpSpecialized`]), `k`
    /// positive (the copy engine cannot describe an empty operand) and `k` and `n` multiples of
    /// 8 (its row strides are whole 16 bytes), 16-byte aligned operands (`aligned`), and
    /// `wgmma_loaded`: the `sm_90a` module is loaded (a compute capability 9.0 GPU), or the
    /// simulator.
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    pub fn wgmma_applies(bf16: bool, k: usize, n: usize, aligned: bool, wgmma_loaded: bool) -> bool {
        bf16 && k > 0 && k % 8 == 0 && n % 8 == 0 && aligned && wgmma_loaded
    }

    /// The kernel for a half-precision product: [`HalfTile::WarpSpecialized`] where it applies
    /// (`ws` from [`HalfTile::wgmma_applies`]) on a CUDA device, else [`HalfTile::Square`]
    /// (`mma.sync`); [`HALF_KERNEL_ENV`] can force `mma`, `wgmma` (where `wgmma`, the
    /// one-warpgroup kernel, applies) or `ws` (which the simulator then takes too).
    pub fn choose(ws: bool, wgmma: bool, on_cuda: bool) -> HalfTile {
        // Read once per process, not on every product.
        static FORCED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        match FORCED
            .get_or_init(|| std::env::var(HALF_KERNEL_ENV).ok())
            .as_deref()
        {
            Some("mma") => HalfTile::Square,
            Some("wgmma") if wgmma => HalfTile::Wgmma,
            Some("ws") if ws => HalfTile::WarpSpecialized,
            Some("ws-128x256") if ws => HalfTile::WarpSpecializedTile(WsTile::Wide),
            Some("ws-128x128") if ws => HalfTile::WarpSpecializedTile(WsTile::Square),
            Some("ws-64x128") if ws => HalfTile::WarpSpecializedTile(WsTile::Narrow),
            _ if ws && on_cuda => HalfTile::WarpSpecialized,
            _ => HalfTile::Square,
        }
    }
}

/// Which matmul kernel to run. `Naive`, `Tiled` and `Fast` compute in f32 with one rounding per
/// multiply-add (relative error about 1e-6); `Tf32`, which must be asked for, rounds the operands
/// to TF32 first and runs on tensor cores (relative error about 1e-3, see its bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulAlgorithm {
    /// One thread per output element, operands from global memory (the tutorial's first kernel).
    Naive,
    /// 32x32 tiles staged in shared memory (the tutorial's second kernel).
    Tiled,
    /// Register tiles of 8x8 (or 4x4) per thread, 16-byte loads, double-buffered shared memory,
    /// and a split of `k` for products too small to fill the GPU; the tiling and the split are
    /// chosen per shape by [`FastPlan::choose`]. The fastest here, so the default.
    #[default]
    Fast,
    /// Opt-in, reduced precision: TF32 tensor cores (`mma.sync` with TF32 operands, sm_80 and
    /// newer), 128 x 256 or 128 x 128 block tiles with a `cp.async` pipeline, the tiling chosen
    /// per shape and device (its shared memory per block) by [`Tf32Tile::choose`]; on a compute
    /// capability 9.0 GPU with the `sm_90a` module, where `k` is a multiple of 4, Hopper's
    /// `wgmma` instead ([`Tf32Tile::Wgmma`], whose copy engine does the rounding there, ties to
    /// even: the CUDA trial `cuda::matmul_tf32_wgmma::rounding` checks it, and the TF32 trials
    /// hold this algorithm to the bound below on every GPU). Forced by hand in the simulator,
    /// whose copies do not round, [`Tf32Tile::Wgmma`] truncates instead, so it promises only the
    /// truncation bound ([`Tf32Tile::error_factor`], `u = 2^-10`); this algorithm never picks it
    /// there. Each element of `A` and `B` is rounded to TF32 (10 explicit significand bits, to
    /// nearest, unit roundoff `u = 2^-11`); the products of the rounded values are exact and are
    /// summed in f32. So, for
    /// normal (not subnormal) operands, each element of the result obeys
    ///
    /// `|C_tf32(i,j) - C(i,j)| <= tf32_error_factor(k) * sum_l |A(i,l)| |B(l,j)|`,
    ///
    /// with [`tf32_error_factor`](super::tf32_error_factor)`(k) = 2u + u^2 + γ_k (1 + u)^2` and `γ_k = k δ / (1 - k δ)`,
    /// `δ = 2^-23` (a relative error of `δ` per f32 addition covers either rounding mode the
    /// tensor core may use): about `1e-3 + k * 1.2e-7`. On data of one sign that is a relative
    /// error of about 1e-3; where terms cancel, the error relative to `C` can be larger.
    Tf32,
}

impl MatmulAlgorithm {
    /// Every algorithm: the f32 ones slowest first, then the opt-in TF32 one.
    pub const ALL: [MatmulAlgorithm; 4] = [
        MatmulAlgorithm::Naive,
        MatmulAlgorithm::Tiled,
        MatmulAlgorithm::Fast,
        MatmulAlgorithm::Tf32,
    ];

    /// A short name: `naive`, `tiled`, `fast`, `tf32`.
    pub fn name(self) -> &'static str {
        match self {
            MatmulAlgorithm::Naive => "naive",
            MatmulAlgorithm::Tiled => "tiled",
            MatmulAlgorithm::Fast => "fast",
            MatmulAlgorithm::Tf32 => "tf32",
        }
    }

    /// Whether the algorithm rounds its operands to TF32 ([`MatmulAlgorithm::Tf32`]): its
    /// results obey the bound of [`tf32_error_factor`](super::tf32_error_factor), not f32 accuracy.
    pub fn uses_tf32(self) -> bool {
        matches!(self, MatmulAlgorithm::Tf32)
    }
}

#[path = "plan_rules.rs"]
mod rules;
pub use rules::{
    FAST_RULES, FastRule, MATMUL_RULES, MatmulRule, MatmulRuleSource, TF32_RULES, Tf32Rule, WS_RULES,
};

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
