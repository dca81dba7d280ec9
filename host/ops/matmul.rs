//! Matrix product on device-resident matrices, with a choice of algorithm.

use kernels_gpu::matmul::{
    FAST_64, FAST_128, FAST_WIDE, FastTiling, NAIVE_BLOCK, SUM_BLOCK, TILE, TILED_SHARED_BYTES,
};
use kernels_gpu::matmul_tf32::{TF32_128X128, TF32_128X128_K16, TF32_128X256, Tf32Tiling};

use super::same_shape;
use crate::buffer::{DeviceMatrix, checked_len};
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};
use crate::launch_config::{DeviceLimits, LaunchConfig};
use crate::raw;
use crate::raw::matmul::{FastKernel, MatmulKernel, Tf32Kernel};

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
    /// per shape and device (its shared memory per block) by [`Tf32Tile::choose`]. Each element
    /// of `A` and `B` is rounded to TF32 (10 explicit significand bits, to nearest with ties
    /// away from zero, unit roundoff `u = 2^-11`); the products of the rounded values are exact and are summed in f32. So, for
    /// normal (not subnormal) operands, each element of the result obeys
    ///
    /// `|C_tf32(i,j) - C(i,j)| <= tf32_error_factor(k) * sum_l |A(i,l)| |B(l,j)|`,
    ///
    /// with [`tf32_error_factor`]`(k) = 2u + u^2 + γ_k (1 + u)^2` and `γ_k = k δ / (1 - k δ)`,
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
    /// results obey the bound of [`tf32_error_factor`], not f32 accuracy.
    pub fn uses_tf32(self) -> bool {
        matches!(self, MatmulAlgorithm::Tf32)
    }
}

/// Unit roundoff of TF32 with rounding to nearest: half of the `2^-10` spacing of its 10-bit
/// significand.
pub const TF32_UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;

/// Unit roundoff of TF32 when the tensor core truncates f32 operands (the low 13 bits dropped,
/// toward zero): the `2^-10` spacing of its 10-bit significand. The `u` of the truncating
/// kernels ([`Tf32Tile::WideTruncated`], [`Tf32Tile::SquareTruncated`]).
pub const TF32_TRUNCATION_UNIT_ROUNDOFF: f64 = 1.0 / 1024.0;

/// The factor of the per-element error bound of [`MatmulAlgorithm::Tf32`] for an inner dimension
/// `k`: `|C_tf32(i,j) - C(i,j)| <= tf32_error_factor(k) * sum_l |A(i,l)| |B(l,j)|`.
///
/// Derivation: rounding gives `a' = a (1 + α)`, `b' = b (1 + β)` with `|α|, |β| <= u`, so each
/// product is off by at most `(2u + u^2) |a| |b|`; the exact products are then summed in f32,
/// `k` additions each with a relative error of at most `δ = 2^-23`, which adds at most
/// `γ_k * sum |a' b'| <= γ_k (1 + u)^2 sum |a| |b|` (Higham, *Accuracy and Stability of
/// Numerical Algorithms*, eq. 3.5, for any order of summation). Infinite for `k δ >= 1`.
pub fn tf32_error_factor(k: usize) -> f64 {
    error_factor(k, TF32_UNIT_ROUNDOFF)
}

/// `2u + u^2 + γ_k (1 + u)^2` (see [`tf32_error_factor`]) for operands rounded with unit
/// roundoff `u`.
fn error_factor(k: usize, u: f64) -> f64 {
    let delta = f64::powi(2.0, -23);
    let kd = k as f64 * delta;
    if kd >= 1.0 {
        return f64::INFINITY;
    }
    let gamma = kd / (1.0 - kd);
    2.0 * u + u * u + gamma * (1.0 + u) * (1.0 + u)
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
    /// [`Tf32Tile::error_factor`], about twice [`tf32_error_factor`]; 256 fewer instructions
    /// per warp per tile. Never chosen by [`MatmulAlgorithm::Tf32`]; only through
    /// [`Gpu::matmul_tf32_into`].
    WideTruncated,
    /// [`Tf32Tile::Square`] without rounding the operands, as [`Tf32Tile::WideTruncated`].
    SquareTruncated,
}

impl Tf32Tile {
    /// Every tiling, rounding first, then truncating.
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
        }
    }

    /// A short name: `128x256`, `128x128`, `128x128-k16`, `128x256-trunc`, `128x128-trunc`.
    pub fn name(self) -> &'static str {
        match self {
            Tf32Tile::Wide => "128x256",
            Tf32Tile::Square => "128x128",
            Tf32Tile::SquareK16 => "128x128-k16",
            Tf32Tile::WideTruncated => "128x256-trunc",
            Tf32Tile::SquareTruncated => "128x128-trunc",
        }
    }

    /// Whether the kernels round the operands to TF32 (to nearest) rather than let the tensor
    /// core truncate them.
    pub fn rounds(self) -> bool {
        matches!(self, Tf32Tile::Wide | Tf32Tile::Square | Tf32Tile::SquareK16)
    }

    /// The factor of this tiling's per-element error bound for an inner dimension `k`:
    /// [`tf32_error_factor`] (`u = 2^-11`) when it [rounds](Tf32Tile::rounds), else the same
    /// formula with `u =` [`TF32_TRUNCATION_UNIT_ROUNDOFF`] (`2^-10`): about `2e-3 + k * 1.2e-7`.
    pub fn error_factor(self, k: usize) -> f64 {
        let u = if self.rounds() {
            TF32_UNIT_ROUNDOFF
        } else {
            TF32_TRUNCATION_UNIT_ROUNDOFF
        };
        error_factor(k, u)
    }

    /// The tiling for an `m x n` result on a GPU with `multiprocessors` SMs and these limits,
    /// the first that fits the device's opt-in shared memory per block
    /// (`max_shared_mem_per_block_optin`):
    ///
    /// | tiling | shared memory | when |
    /// |---|---|---|
    /// | [`Tf32Tile::Wide`] | 204 KiB | at least one block per SM (fewer bytes per flop) |
    /// | [`Tf32Tile::Square`] | 105 KiB | four times the blocks, two per SM |
    /// | [`Tf32Tile::SquareK16`] | 74 KiB | always (the rest) |
    ///
    /// So an H100/H200 (227 KiB) takes `Wide` or `Square` by shape, an A100 (163 KiB)
    /// `Square`, and compute capability 8.6, 8.9 and 12.0 (99 KiB) `SquareK16`. Below 74 KiB
    /// (no GPU gpukern supports) the launch is refused with [`Error::TooLarge`].
    pub fn choose(m: usize, n: usize, multiprocessors: usize, limits: &DeviceLimits) -> Tf32Tile {
        let fits = |t: Tf32Tiling| t.shared_bytes() <= limits.max_shared_mem_per_block_optin;
        let wide = TF32_128X256;
        let blocks = m.div_ceil(wide.block_rows) * n.div_ceil(wide.block_cols);
        if blocks >= multiprocessors.max(1) && fits(wide) {
            Tf32Tile::Wide
        } else if fits(TF32_128X128) {
            Tf32Tile::Square
        } else {
            Tf32Tile::SquareK16
        }
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

/// Multiprocessors the plan assumes in the simulator: an H200's (and H100 SXM's) 132, so that the
/// simulator runs the same plans as that GPU.
pub const SIMULATED_MULTIPROCESSORS: usize = 132;

/// With fewer blocks than multiprocessors, [`FastPlan::choose`] splits `k` until there are about
/// this many blocks per multiprocessor.
const SPLIT_BLOCKS_PER_MULTIPROCESSOR: usize = 2;
/// Shortest slice of `k` worth a block of its own: below it the prologue and epilogue of a block
/// (first tile load, writing the partial tile) outweigh its main loop.
const MIN_SPLIT_K: usize = 256;
/// Most slices of `k`: bounds the partial products' memory (`slices * m * n` floats).
const MAX_SLICES: usize = 16;

impl FastPlan {
    /// The plan for an `m x k` times `k x n` product on a GPU with `multiprocessors` SMs:
    ///
    /// | blocks of 128 x 128 | blocks of 64 x 64 | plan |
    /// |---|---|---|
    /// | at least one per SM | | [`FastTile::Large`], `k` whole |
    /// | fewer | at least one per SM | [`FastTile::Small`], `k` whole |
    /// | fewer | fewer | [`FastTile::Small`], `k` in slices of at least 256 (at most 16) for about two blocks per SM |
    ///
    /// The 128 x 128 tiling does the most work per shared-memory load, but only while the grid
    /// fills the GPU: 1024^3 gives 64 such blocks for 132 SMs, 256 of 64 x 64. Skinny products
    /// (`m` or `n` of 64 and less, e.g. 64x4096x4096 or a single row) fill it only by splitting
    /// `k`. On an H200: 4096^3, 8192^3, 2048^3, 4097x4095x4093 and 4096x4096x64 (k = 64) take
    /// the large tiling; 1024^3 the small one; 512^3 the small one in 2 slices; 64x4096x4096 and
    /// 1x4096x4096 the small one in 5 slices.
    pub fn choose(m: usize, n: usize, k: usize, multiprocessors: usize) -> FastPlan {
        let blocks = |t: FastTiling| m.div_ceil(t.block_rows) * n.div_ceil(t.block_cols);
        let sms = multiprocessors.max(1);
        if blocks(FAST_128) >= sms {
            return FastPlan {
                tile: FastTile::Large,
                slices: 1,
            };
        }
        let tiles = blocks(FAST_64).max(1);
        let slices = if tiles >= sms {
            1
        } else {
            (SPLIT_BLOCKS_PER_MULTIPROCESSOR * sms)
                .div_ceil(tiles)
                .min(k / MIN_SPLIT_K)
                .clamp(1, MAX_SLICES)
        };
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

impl Gpu {
    /// `A * B` with the default algorithm, into a new device matrix.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `A` is `m x k` and `B` is `k x n`;
    /// [`Error::TooLarge`] if `m` or `n` needs more blocks than the grid allows.
    pub fn matmul(&self, a: &DeviceMatrix, b: &DeviceMatrix) -> Result<DeviceMatrix> {
        self.matmul_with(a, b, MatmulAlgorithm::default())
    }

    /// `A * B` with the given algorithm, into a new device matrix.
    pub fn matmul_with(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        algorithm: MatmulAlgorithm,
    ) -> Result<DeviceMatrix> {
        check_inner(a, b)?;
        let mut c = self.alloc_matrix(a.rows, b.cols)?;
        self.matmul_into(a, b, &mut c, algorithm)?;
        Ok(c)
    }

    /// `C = A * B` into an existing `m x n` device matrix (no allocation, except the partial
    /// products of a [`MatmulAlgorithm::Fast`] plan that splits `k`).
    pub fn matmul_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        algorithm: MatmulAlgorithm,
    ) -> Result<()> {
        let Some((m, k, n)) = self.check_product(a, b, c)? else {
            return Ok(());
        };
        let limits = self.limits();
        let (kernel, cfg) = match algorithm {
            MatmulAlgorithm::Fast => {
                let plan = FastPlan::choose(m, n, k, self.multiprocessors()?);
                return self.launch_fast(a, b, c, plan, (m, k, n));
            }
            MatmulAlgorithm::Tf32 => {
                let tile = Tf32Tile::choose(m, n, self.multiprocessors()?, &limits);
                return self.launch_tf32(a, b, c, tile, (m, k, n));
            }
            MatmulAlgorithm::Naive => (
                MatmulKernel::Naive,
                LaunchConfig::tiles_2d("matmul", m, n, NAIVE_BLOCK, 0, &limits)?,
            ),
            MatmulAlgorithm::Tiled => (
                MatmulKernel::Tiled,
                LaunchConfig::tiles_2d("matmul", m, n, TILE as u32, TILED_SHARED_BYTES, &limits)?,
            ),
        };
        // SAFETY: `a`, `b`, `c` hold m*k, k*n, m*n elements (shapes checked); `cfg` is the
        // kernel's documented launch shape.
        unsafe { raw::matmul::matmul(self, kernel, cfg, &a.data, &b.data, &mut c.data, m, n, k) }
    }

    /// The one validation of a product `C = A * B`, shared by every matmul operation: `A` is
    /// `m x k` and `B` is `k x n`, `C` is `m x n`, all three belong to this `Gpu`. Returns
    /// `(m, k, n)`, or `None` when the result is empty and there is nothing to launch.
    fn check_product(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &DeviceMatrix,
    ) -> Result<Option<(usize, usize, usize)>> {
        check_inner(a, b)?;
        let (m, k, n) = (a.rows, a.cols, b.cols);
        same_shape("matmul", &[c.rows, c.cols], &[m, n], "the output must be m x n")?;
        self.check_owner("matmul", &[&a.data, &b.data, &c.data])?;
        Ok((m > 0 && n > 0).then_some((m, k, n)))
    }
}

/// Errors unless `A`'s columns equal `B`'s rows.
fn check_inner(a: &DeviceMatrix, b: &DeviceMatrix) -> Result<()> {
    if a.cols == b.rows {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op: "matmul",
            lhs: vec![a.rows, a.cols],
            rhs: vec![b.rows, b.cols],
            rule: "A's columns must equal B's rows",
        })
    }
}

impl Gpu {
    /// Streaming multiprocessors of the device ([`SIMULATED_MULTIPROCESSORS`] in the simulator):
    /// what [`FastPlan::choose`] sizes the grid against.
    /// Read once, when the `Gpu` was made.
    pub fn multiprocessors(&self) -> Result<usize> {
        match &self.backend {
            Backend::Cuda(d) => Ok(d.multiprocessors.max(1) as usize),
            Backend::Simulator => Ok(SIMULATED_MULTIPROCESSORS),
        }
    }

    /// `C = A * B` into an existing `m x n` device matrix with the fast kernels and a given
    /// plan (what [`MatmulAlgorithm::Fast`] does with [`FastPlan::choose`]'s plan): for
    /// comparing plans, and for tests that must reach every kernel.
    ///
    /// Errors as [`Gpu::matmul_into`]; [`Error::InvalidArgument`] for a plan of 0 slices.
    pub fn matmul_fast_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        plan: FastPlan,
    ) -> Result<()> {
        if plan.slices == 0 {
            return Err(Error::InvalidArgument {
                op: "matmul",
                detail: "a FastPlan needs at least one slice of k".to_string(),
            });
        }
        match self.check_product(a, b, c)? {
            Some(mkn) => self.launch_fast(a, b, c, plan, mkn),
            None => Ok(()),
        }
    }

    /// [`Gpu::matmul_fast_into`] after [`Gpu::check_product`]: `(m, k, n)` are the checked
    /// shapes, both `m` and `n` at least 1, and `plan` has at least one slice.
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
            "matmul",
            (m, n),
            (tiling.block_rows, tiling.block_cols),
            slices,
            tiling.threads(),
            tiling.shared_bytes(),
            &limits,
        )?;

        let mut partial = if slices > 1 {
            Some(self.alloc(checked_len("matmul (partial products)", &[slices, m, n])?)?)
        } else {
            None
        };
        let out = partial.as_mut().unwrap_or(&mut c.data);
        let vec4 =
            k % 4 == 0 && n % 4 == 0 && [&a.data, &b.data, &*out].iter().all(|v| v.is_16_byte_aligned());
        let kernel = match (plan.tile, vec4) {
            (FastTile::Large, false) => FastKernel::Large,
            (FastTile::Large, true) => FastKernel::LargeVec4,
            (FastTile::Small, false) => FastKernel::Small,
            (FastTile::Small, true) => FastKernel::SmallVec4,
            (FastTile::Wide, false) => FastKernel::Wide,
            (FastTile::Wide, true) => FastKernel::WideVec4,
        };
        // SAFETY: `a`, `b` hold m*k, k*n elements (shapes checked), `out` holds `slices * m * n`
        // (`c` when there is one slice); `k_split` is a positive multiple of the tiling's `BK`
        // with `slices = ceil(k / k_split)`, and `cfg` is the kernel's documented launch; the
        // `_vec4` kernels only with `k`, `n` multiples of 4 and aligned buffers.
        unsafe { raw::matmul::matmul_fast(self, kernel, cfg, &a.data, &b.data, out, m, n, k, k_split) }?;
        if let Some(partial) = &partial {
            let len = m * n;
            let cfg = LaunchConfig::linear("matmul", len, SUM_BLOCK, &limits)?;
            // SAFETY: `partial` holds `slices * len` elements, `c` holds `len`.
            unsafe { raw::matmul::sum_splits(self, cfg, partial, &mut c.data, len, slices) }?;
        }
        Ok(())
    }
}

impl Gpu {
    /// `C = A * B` into an existing `m x n` device matrix with the TF32 tensor-core kernels and
    /// a given tiling (what [`MatmulAlgorithm::Tf32`] does with [`Tf32Tile::choose`]'s tiling):
    /// for comparing tilings, and for tests that must reach every kernel. Error bound:
    /// [`Tf32Tile::error_factor`] (that of [`MatmulAlgorithm::Tf32`] for a rounding tiling).
    ///
    /// Errors as [`Gpu::matmul_into`]; [`Error::TooLarge`] also when the tiling needs more
    /// shared memory than the device allows a block.
    pub fn matmul_tf32_into(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        tile: Tf32Tile,
    ) -> Result<()> {
        match self.check_product(a, b, c)? {
            Some(mkn) => self.launch_tf32(a, b, c, tile, mkn),
            None => Ok(()),
        }
    }

    /// [`Gpu::matmul_tf32_into`] after [`Gpu::check_product`]: `(m, k, n)` are the checked
    /// shapes, both `m` and `n` at least 1.
    fn launch_tf32(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        tile: Tf32Tile,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        let limits = self.limits();
        let tiling = tile.tiling();
        // These kernels are opted in to more than the default 48 KiB when they are loaded.
        let optin = DeviceLimits {
            max_shared_mem_per_block: limits.max_shared_mem_per_block_optin,
            ..limits
        };
        let cfg = LaunchConfig::block_tiles(
            "matmul",
            (m, n),
            (tiling.block_rows, tiling.block_cols),
            1,
            tiling.threads(),
            tiling.shared_bytes(),
            &optin,
        )?;
        let vec4 =
            k % 4 == 0 && n % 4 == 0 && [&a.data, &b.data, &c.data].iter().all(|v| v.is_16_byte_aligned());
        let kernel = match (tile, vec4) {
            // No 16-byte twin: see `matmul_tf32_128x128`.
            (Tf32Tile::Square, _) => Tf32Kernel::Square,
            // 4-byte copies only: the one kernel for the GPUs that need this tiling.
            (Tf32Tile::SquareK16, _) => Tf32Kernel::SquareK16,
            (Tf32Tile::Wide, false) => Tf32Kernel::Wide,
            (Tf32Tile::Wide, true) => Tf32Kernel::WideVec4,
            (Tf32Tile::SquareTruncated, false) => Tf32Kernel::SquareTrunc,
            (Tf32Tile::SquareTruncated, true) => Tf32Kernel::SquareVec4Trunc,
            (Tf32Tile::WideTruncated, false) => Tf32Kernel::WideTrunc,
            (Tf32Tile::WideTruncated, true) => Tf32Kernel::WideVec4Trunc,
        };
        // SAFETY: `a`, `b`, `c` hold m*k, k*n, m*n elements (shapes checked), `m, n >= 1`; `cfg`
        // is the kernel's documented launch; the `_vec4` kernels only with `k`, `n` multiples of
        // 4 and aligned buffers.
        unsafe { raw::matmul::matmul_tf32(self, kernel, cfg, &a.data, &b.data, &mut c.data, m, n, k) }
    }
}
