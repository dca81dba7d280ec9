//! The tile shape of the `mma.sync` kernels ([`super::tf32`], [`super::half`]): one struct for
//! both, [`MmaTiling`], generic over the operand element, whose size and row padding set the
//! shared-memory layout.

use core::marker::PhantomData;

use super::WARP;

/// An operand element of an `mma.sync` kernel, as its shared-memory tiles hold it.
pub trait MmaOperand {
    /// Bytes per element in shared memory.
    const BYTES: usize;
    /// Elements of padding after each row of the `A` tile (rows of `BK + A_PAD`).
    const A_PAD: usize;
    /// Elements of padding after each row of the `B` tile (rows of `BN + B_PAD`).
    const B_PAD: usize;
}

/// Tile shape of one `mma.sync` kernel: the block tile `BM x BN x BK`, the warp tile, and the
/// depth of the copy pipeline, for operands `E`. The kernel takes the same numbers as const
/// generics (the warp tile in MMA tiles); this struct is what the host reads to launch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaTiling<E> {
    /// Rows of `C` one block computes (`BM`).
    pub block_rows: usize,
    /// Columns of `C` one block computes (`BN`).
    pub block_cols: usize,
    /// Step along `k`: columns of `A` and rows of `B` in one shared-memory stage (`BK`).
    pub block_k: usize,
    /// Rows of `C` one warp computes, a multiple of the MMA tile's rows.
    pub warp_rows: usize,
    /// Columns of `C` one warp computes, a multiple of the MMA tile's columns (of twice them for
    /// the half kernels: one `ldmatrix.x4.trans` loads two `B` fragments).
    pub warp_cols: usize,
    /// Shared-memory stages of the `cp.async` pipeline (at least 2).
    pub stages: usize,
    /// The operand element, which sets the shared-memory layout.
    pub element: PhantomData<E>,
}

impl<E: MmaOperand> MmaTiling<E> {
    /// Threads per block: one warp per warp tile.
    pub const fn threads(&self) -> u32 {
        ((self.block_rows / self.warp_rows) * (self.block_cols / self.warp_cols) * WARP) as u32
    }

    /// Elements of one stage: the `A` tile (`BM` rows of `BK + A_PAD`), then the `B` tile (`BK`
    /// rows of `BN + B_PAD`).
    pub const fn stage_elements(&self) -> usize {
        self.block_rows * (self.block_k + E::A_PAD) + self.block_k * (self.block_cols + E::B_PAD)
    }

    /// Dynamic shared memory a block needs: `stages` stages. Above 48 KiB, so the host must
    /// raise the kernel's `MAX_DYNAMIC_SHARED_SIZE_BYTES` attribute before launching it.
    pub const fn shared_bytes(&self) -> u32 {
        (self.stages * self.stage_elements() * E::BYTES) as u32
    }
}
