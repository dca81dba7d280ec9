//! The Hopper path of TF32 products ([`Tf32Tile::Wgmma`]): the warp-specialised persistent
//! `wgmma` kernel (`kernels_gpu::matmul::wgmma_ws::matmul_ws_tf32_{128x256,128x128,64x128}`, the
//! tile by shape as for half precision: [`WsTile::choose`]) on f32 operands.
//!
//! TF32 `wgmma` reads both operands K-major, so `B` (`k x n`) is first transposed into a
//! workspace `B^T` (`n x k`) by the transpose kernel: one pass, `8 n k` bytes of traffic (read
//! and written once) on top of the product's minimum `4 (m k + n k + m n)`, and `4 n k` bytes
//! of device memory for the call. Then the tensor maps of `A` (`m x k`, boxes of `BM x 32`) and
//! `B^T` (`n x k`, boxes of `BN x 32`, `BM x BN` the tile) are encoded, 128-byte swizzle, zero fill, and the kernel
//! runs on a persistent grid of one block per multiprocessor.
//!
//! # Rounding: `TFLOAT32` tensor maps
//! The tensor core reads a `.tf32` operand with the low 13 bits of the f32 ignored (PTX ISA,
//! `wgmma.mma_async`: truncation, unit roundoff `2^-10`, and a bias toward zero). The maps are
//! encoded with the copy engine's `CU_TENSOR_MAP_DATA_TYPE_TFLOAT32` ([`TF32_MAP_TYPE`]), for
//! which the copy engine rounds each f32 to TF32 on its way to shared memory (to nearest, ties
//! to even: what Triton's `TensorDescriptor(round_f32_to_tf32=True)` relies on, and its
//! interpreter emulates), so that the truncation then drops only zeros: unit roundoff `2^-11`,
//! unbiased, as the `mma.sync` kernels' `cvt.rna`. The CUDA trial
//! `cuda::matmul_tf32_wgmma::rounding` checks it on the GPU. The simulator's copies
//! move bits (they do not read the map), so there the tensor core's truncation stands:
//! [`Tf32Tile::Wgmma`] promises the truncation bound ([`Tf32Tile::error_factor`], `2^-10`),
//! which holds either way.

use cudarc::driver::sys;
use kernels_gpu::matmul::wgmma::MAP_WORDS;
use kernels_gpu::matmul::wgmma_ws::WsTiling;

use super::kernels;
use super::plan::{Tf32Tile, WsTile};
use super::wgmma::{MapMatrix, check_copy_engine_dims, encode};
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};

/// The operation's name in errors.
const OP: &str = "matmul";

/// The copy engine's element type of the TF32 kernel's tensor maps: `TFLOAT32`, which rounds
/// each f32 to TF32 (to nearest) as it is copied (module documentation). `FLOAT32` would copy
/// the bits and leave the tensor core to truncate them.
pub(crate) const TF32_MAP_TYPE: sys::CUtensorMapDataType =
    sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32;

/// Bytes of an f32.
const F32_BYTES: usize = 4;

// The kernel reads 128-byte rows of f32: 32 along `k` per step, the box width `encode` gives.
const _: () = assert!(WsTiling::block_k(F32_BYTES) == 32);

impl Gpu {
    /// `C = A * B` with the TF32 `wgmma` kernel ([`Tf32Tile::Wgmma`]) on tiles of `tile`
    /// (`None`: [`WsTile::choose`]'s), shapes and owners checked by the caller, `m, n >= 1`.
    ///
    /// Errors: [`Error::InvalidArgument`] off a compute capability 9.0 GPU with the `sm_90a`
    /// module ([`Gpu::has_wgmma`]), for `k` not a multiple of 4 (the copy engine's rows of `A`
    /// and `B^T` must be whole 16 bytes; `k = 0` is zeros, with no copy) or buffers not 16-byte
    /// aligned; [`Error::TooLarge`] for
    /// a dimension past the copy engine's 32-bit coordinates.
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    pub(super) fn launch_tf32_wgmma(
        &self,
        a: &DeviceMatrix,
        b: &DeviceMatrix,
        c: &mut DeviceMatrix,
        (m, k, n): (usize, usize, usize),
        tile: Option<WsTile>,
    ) -> Result<()> {
        if !self.has_wgmma() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the TF32 wgmma kernel is in the sm_90a PTX module only, which loads on a \
                         compute capability 9.0 GPU (gpukern built with sm_90 among \
                         GPUKERN_PTX_ARCHS): use an mma.sync tiling (Tf32Tile::Wide or \
                         Tf32Tile::Square)"
                    .to_string(),
            });
        }
        // With `k = 0` nothing of `A` or `B` is read (the result is zeros).
        let aligned = (k == 0 || a.data.is_16_byte_aligned() && b.data.is_16_byte_aligned())
            && c.data.is_16_byte_aligned();
        if k > 0 && !Tf32Tile::wgmma_applies(k, aligned, true) {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the TF32 wgmma kernel needs k a multiple of 4 and 16-byte aligned matrices \
                     (k = {k}): use an mma.sync tiling (Tf32Tile::Wide or Tf32Tile::Square)"
                ),
            });
        }
        check_copy_engine_dims((m, k, n))?;
        let tile = match tile {
            Some(t) => t,
            None => WsTile::choose(m, n, self.multiprocessors()?),
        };
        let tiling = tile.tiling();
        let cfg = self.ws_launch_config(m, n, tiling)?;
        let bt = self.transpose(b)?;
        let maps = self.tf32_tensor_maps(a, &bt, (m, k, n), tiling)?;
        // SAFETY: `maps` holds the TFLOAT32 maps of `a` (m x k, box BM x 32) and `bt` = B^T
        // (n x k, box BN x 32), `BM x BN` the tile of `tile`, 128-byte swizzle, zero fill (zeros where `k = 0`: the kernel
        // then issues no copy); `a`, `bt`, `c` hold m*k, n*k, m*n floats (shapes checked), `c`
        // distinct from both; `k` a multiple of 4, every buffer 16-byte aligned, `m, n >= 1`;
        // `cfg` the persistent launch (at most the tile count); the sm_90a module is loaded (or
        // the simulator).
        unsafe { kernels::ws_tf32(self, tile, cfg, &maps, &a.data, &bt.data, &mut c.data, m, n, k) }
    }

    /// The tensor maps of `A` (`m x k`, boxes of `BM x 32`) and `B^T` (`n x k`, boxes of
    /// `BN x 32`), `BM x BN` the tile of `t`, in device memory, [`MAP_WORDS`] words each. Zeros in the simulator (whose copies read the matrices directly) and for
    /// `k = 0` (no copy is issued; a map of an empty matrix cannot be encoded).
    fn tf32_tensor_maps(
        &self,
        a: &DeviceMatrix,
        bt: &DeviceMatrix,
        (m, k, n): (usize, usize, usize),
        t: WsTiling,
    ) -> Result<std::sync::Arc<DeviceVec<u64>>> {
        if matches!(self.backend, Backend::Simulator) || k == 0 {
            return Ok(std::sync::Arc::new(self.zeros_of::<u64>(2 * MAP_WORDS)?));
        }
        let matrix = |address: usize, rows: usize| MapMatrix {
            kind: TF32_MAP_TYPE,
            bytes: F32_BYTES,
            address,
            rows,
            cols: k,
            stride: k,
        };
        let a_map = encode(matrix(a.data.address(), m), t.block_rows)?;
        let b_map = encode(matrix(bt.data.address(), n), t.block_cols)?;
        self.cached_map_pair(&a_map, &b_map)
    }
}
