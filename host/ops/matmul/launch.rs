//! A matmul plan launched: its kernels, their launch shapes, the raw launches.

use kernels_gpu::matmul::{
    FIXUP_BLOCK, FIXUP_ROWS, NAIVE_BLOCK, SLOTS_PER_CTA, STREAM_K, SUM_BLOCK, TILE, TILED_SHARED_BYTES,
};

use super::plan::{FastPlan, FastTile, MatmulPlan, StreamKPlan, Tf32Tile};
use crate::buffer::{DeviceMatrix, DeviceVec, checked_len};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::raw;
use crate::raw::matmul::MatmulKernel;

/// The operation's name in errors.
const OP: &str = "matmul";

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
        unsafe { raw::matmul::matmul(self, kernel, cfg, &a.data, &b.data, &mut c.data, m, n, k) }
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
        unsafe { raw::matmul::matmul(self, kernel, cfg, &a.data, &b.data, out, m, n, k) }?;
        if let Some(partial) = &partial {
            let len = m * n;
            let cfg = LaunchConfig::linear(OP, len, SUM_BLOCK, &limits)?;
            // SAFETY: `partial` holds `slices * len` elements, `c` holds `len`.
            unsafe { raw::matmul::sum_splits(self, cfg, partial, &mut c.data, len, slices) }?;
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
            raw::matmul::stream_k(
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
            raw::matmul::stream_k_fixup(
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
        unsafe { raw::matmul::matmul(self, kernel, cfg, &a.data, &b.data, &mut c.data, m, n, k) }
    }
}

/// Whether the kernels with 16-byte accesses may run: every row of `A` and `B` starts 16-byte
/// aligned (`k` and `n` multiples of 4) and so does every buffer.
fn takes_vec4(k: usize, n: usize, buffers: &[&DeviceVec]) -> bool {
    k % 4 == 0 && n % 4 == 0 && buffers.iter().all(|v| v.is_16_byte_aligned())
}
