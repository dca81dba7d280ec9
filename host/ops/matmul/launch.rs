//! A matmul plan launched: its kernels, their launch shapes, the raw launches.

use kernels_gpu::matmul::{NAIVE_BLOCK, SUM_BLOCK, TILE, TILED_SHARED_BYTES};

use super::plan::{FastPlan, MatmulPlan, Tf32Tile};
use crate::buffer::{DeviceMatrix, DeviceVec, checked_len};
use crate::device::Gpu;
use crate::error::Result;
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
            crate::graph::refuse(
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
