//! The tile shape of the `mma.sync` tensor-core kernels, TF32 ([`super::tf32`]) and half
//! precision ([`super::half`]): one struct for both, the padding and element size its data.

use super::WARP;

/// Tile shape of one `mma.sync` kernel: the block tile `BM x BN x BK`, the warp tile, the depth
/// of the copy pipeline, and the shared-memory rows' padding and element size. The generic
/// kernels ([`tf32_gemm`](fn@super::tf32::tf32_gemm), [`half_gemm`](fn@super::half::half_gemm))
/// take the same numbers as const generics (the warp tile in MMA tiles); this struct is what the
/// host reads to launch them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaTiling {
    /// Rows of `C` one block computes (`BM`).
    pub block_rows: usize,
    /// Columns of `C` one block computes (`BN`).
    pub block_cols: usize,
    /// Step along `k`: columns of `A` and rows of `B` in one shared-memory stage (`BK`).
    pub block_k: usize,
    /// Rows of `C` one warp computes, a multiple of the MMA's `M`.
    pub warp_rows: usize,
    /// Columns of `C` one warp computes, a multiple of the MMA's `N` (half precision: of twice
    /// it, one `ldmatrix.x4.trans` loading two `B` fragments).
    pub warp_cols: usize,
    /// Shared-memory stages of the pipeline (at least 2).
    pub stages: usize,
    /// Elements of padding after each row of the `A` tile in shared memory.
    pub a_pad: usize,
    /// Elements of padding after each row of the `B` tile in shared memory.
    pub b_pad: usize,
    /// Bytes of one element in shared memory: 4 (the TF32 kernels stage f32) or 2.
    pub element_bytes: usize,
}

impl MmaTiling {
    /// Threads per block: one warp per warp tile.
    pub const fn threads(&self) -> u32 {
        ((self.block_rows / self.warp_rows) * (self.block_cols / self.warp_cols) * WARP) as u32
    }

    /// Elements of one stage: the `A` tile (`BM` rows of `BK + a_pad`), then the `B` tile (`BK`
    /// rows of `BN + b_pad`).
    pub const fn stage_elements(&self) -> usize {
        self.block_rows * (self.block_k + self.a_pad) + self.block_k * (self.block_cols + self.b_pad)
    }

    /// Dynamic shared memory a block needs: `stages` stages. Above 48 KiB, so the host must
    /// raise the kernel's `MAX_DYNAMIC_SHARED_SIZE_BYTES` attribute before launching it.
    pub const fn shared_bytes(&self) -> u32 {
        (self.stages * self.stage_elements() * self.element_bytes) as u32
    }
}
