//! The Hopper path of half-precision products: `kernels_gpu::matmul::wgmma` (TMA copies into a
//! ring of shared-memory stages, `wgmma` on one warpgroup, bf16) and `kernels_gpu::matmul::wgmma_ws`
//! (a producer warpgroup and two consumers, a persistent grid, bf16 and f16); their two tensor
//! maps encoded here with the driver's `cuTensorMapEncodeTiled` and placed in device memory
//! (rustc cannot pass them as `__grid_constant__` parameters). Both kernels read the same boxes:
//! `A` in `128 x 64`, `B` in `64 x 64`.

use std::sync::Arc;

use cudarc::driver::sys;
use kernels_gpu::matmul::wgmma::{MAP_WORDS, WGMMA_128X128};
use kernels_gpu::matmul::wgmma_ws::{WS_64X128, WS_128X128, WS_128X256, WsTiling};

use super::kernels::WgmmaLauncher;
use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Error, Result};
use crate::launch_config::LaunchConfig;

/// The operation's name in errors.
const OP: &str = "matmul";

// The kernels' maps are the public encoder's.
const _: () = assert!(MAP_WORDS == crate::tensor_map::MAP_WORDS);

/// Which `wgmma` kernel a launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WgmmaKernel {
    /// `kernels_gpu::matmul::wgmma`: one warpgroup per 128 x 128 tile, a block per tile.
    OneWarpgroup,
    /// `kernels_gpu::matmul::wgmma_ws`: 384 threads, tiles of this tiling, a persistent grid.
    WarpSpecialized(WsTiling),
}

// The kernels on 16-bit operands read the same boxes but for the rows of `A`'s (the tile's
// rows): `B` in boxes of `BK x 64`, `BK` one 128-byte row.
const _: () = assert!(
    WGMMA_128X128.block_k == WsTiling::block_k(2)
        && WGMMA_128X128.block_rows == WS_128X256.block_rows
        && WGMMA_128X128.block_rows == WS_128X128.block_rows
        && WS_64X128.block_rows == 64
);

/// Blocks of the persistent kernel in the simulator: at most 2, so that the simulator's blocks
/// walk several tiles and the ring wraps from one tile to the next as on the GPU (where the grid
/// is one block per multiprocessor). The kernel is correct for any grid of 1 to `tiles` blocks.
const SIMULATED_PERSISTENT_BLOCKS: usize = 2;

impl Gpu {
    /// `C = A * B` with a `wgmma` kernel, shapes and owners checked by the caller: nothing for
    /// `m` or `n` of 0; else `k` positive (a tensor map of an empty operand cannot be encoded;
    /// [`Gpu::launch_half`] takes `k = 0` elsewhere), `k` and `n` multiples of 8, the operands
    /// 16-byte aligned, [`Gpu::has_wgmma`] (checked here again: a clear error instead of a
    /// missing entry point).
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_wgmma<I: Element, O: Element>(
        &self,
        launch: WgmmaLauncher<I, O>,
        kernel: WgmmaKernel,
        kind: sys::CUtensorMapDataType,
        (a, lda): (&DeviceVec<I>, usize),
        (b, ldb): (&DeviceVec<I>, usize),
        c: &mut DeviceMatrix<O>,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        if !self.has_wgmma() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the wgmma kernels are in the sm_90a PTX module only, which loads on a \
                         compute capability 9.0 GPU (gpukern built with sm_90 among \
                         GPUKERN_PTX_ARCHS): use the mma.sync kernel (HalfTile::Square)"
                    .to_string(),
            });
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let aligned = a.is_16_byte_aligned() && b.is_16_byte_aligned() && c.data.is_16_byte_aligned();
        if k == 0 || lda % 8 != 0 || ldb % 8 != 0 || lda < k || ldb < n || !aligned {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the wgmma kernels need k > 0, operand rows a multiple of 8 elements apart \
                     and 16-byte aligned matrices (k = {k}, n = {n}, row strides {lda} and \
                     {ldb}): use the mma.sync kernel (HalfTile::Square)"
                ),
            });
        }
        check_copy_engine_dims((m, k, n))?;
        let cfg = match kernel {
            WgmmaKernel::OneWarpgroup => {
                let t = WGMMA_128X128;
                LaunchConfig::block_tiles(
                    OP,
                    (m, n),
                    (t.block_rows, t.block_cols),
                    1,
                    t.threads(),
                    t.shared_bytes(),
                    &self.limits().opted_in(),
                )?
            }
            WgmmaKernel::WarpSpecialized(t) => self.ws_launch_config(m, n, t)?,
        };
        let a_box_rows = match kernel {
            WgmmaKernel::OneWarpgroup => WGMMA_128X128.block_rows,
            WgmmaKernel::WarpSpecialized(t) => t.block_rows,
        };
        let maps = self.tensor_maps(kind, (a, lda), (b, ldb), (m, k, n), a_box_rows)?;
        // SAFETY: `maps` holds the two tensor maps of `a` (m x k, box `BM x 64`, `BM` the
        // kernel's tile rows) and `b` (k x n, box 64 x 64) of `I`'s type `kind` (the caller's pairing), 128-byte swizzle, zero
        // fill; shapes checked, `k`, `n` multiples of 8, aligned; `cfg` the kernel's launch
        // (a persistent grid of at most the tile count for the warp-specialised one); the sm_90a
        // module is loaded (or the simulator).
        unsafe {
            launch(
                &self.library(),
                cfg,
                maps.view(),
                a.view(),
                b.view(),
                c.data.view_mut(),
                m,
                n,
                k,
                lda,
                ldb,
            )
        }
    }

    /// The tensor maps of `A` (boxes of `a_box_rows x 64`) and `B` (boxes of `64 x 64`) in
    /// device memory, [`MAP_WORDS`] words each (the
    /// allocation is 256-byte aligned, so each map is 64-byte aligned), uploaded once per set
    /// ([`Gpu::cached_maps`]). Zeros in the simulator, whose copies read the matrices directly.
    fn tensor_maps<I: Element>(
        &self,
        kind: sys::CUtensorMapDataType,
        (a, lda): (&DeviceVec<I>, usize),
        (b, ldb): (&DeviceVec<I>, usize),
        (m, k, n): (usize, usize, usize),
        a_box_rows: usize,
    ) -> Result<Arc<DeviceVec<u64>>> {
        if let Backend::Simulator = self.backend {
            return Ok(Arc::new(self.zeros_of::<u64>(2 * MAP_WORDS)?));
        }
        let t = WGMMA_128X128;
        let matrix = |address: usize, rows: usize, cols: usize, stride: usize| MapMatrix {
            kind,
            bytes: 2,
            address,
            rows,
            cols,
            stride,
        };
        let a_map = encode(matrix(a.address(), m, k, lda), a_box_rows)?;
        let b_map = encode(matrix(b.address(), k, n, ldb), t.block_k)?;
        self.cached_map_pair(&a_map, &b_map)
    }

    /// The launch of the warp-specialised kernels of tiling `t` for an `m x n` result: its block
    /// and shared memory, a persistent grid of one block per multiprocessor (at most
    /// [`SIMULATED_PERSISTENT_BLOCKS`] in the simulator), never more blocks than tiles.
    pub(super) fn ws_launch_config(&self, m: usize, n: usize, t: WsTiling) -> Result<LaunchConfig> {
        let resident = match self.backend {
            Backend::Simulator => SIMULATED_PERSISTENT_BLOCKS,
            Backend::Cuda(_) => self.multiprocessors()?,
        };
        LaunchConfig {
            grid: (t.tiles(m, n).min(resident).max(1) as u32, 1, 1),
            block: (t.threads(), 1, 1),
            shared_mem_bytes: t.shared_bytes(),
        }
        .checked(OP, &self.limits().opted_in())
    }
}

impl Gpu {
    /// `src` (`rows x cols`) copied, on this handle's stream, into a new buffer whose rows are
    /// `stride` elements apart (`stride >= cols`; the elements past `cols` in each row are left
    /// unspecified: the kernels' tensor maps stop at `cols` and read zeros beyond). What the
    /// `wgmma` kernels take for an operand whose rows are not whole 16 bytes apart: the copy
    /// engine cannot address such rows. `cuMemcpy2DAsync` on CUDA; on the host in the simulator.
    pub(super) fn pitched_copy<T: Element>(
        &self,
        src: &DeviceMatrix<T>,
        stride: usize,
    ) -> Result<DeviceVec<T>> {
        let (rows, cols) = (src.rows, src.cols);
        let len = crate::buffer::checked_len_of::<T>(OP, &[rows, stride])?;
        let size = std::mem::size_of::<T>();
        match &self.backend {
            Backend::Simulator => {
                let host = src.data.to_vec()?;
                let mut out = vec![T::default(); len];
                for r in 0..rows {
                    out[r * stride..r * stride + cols].copy_from_slice(&host[r * cols..(r + 1) * cols]);
                }
                self.upload(&out)
            }
            Backend::Cuda(device) => {
                crate::capture::refuse(self, OP, "an allocation (the padded copy of a matmul operand)")?;
                let dst = DeviceVec {
                    storage: crate::buffer::Storage::Cuda(device.alloc::<T>(len)?),
                    len,
                };
                if rows > 0 && cols > 0 {
                    let copy = sys::CUDA_MEMCPY2D {
                        srcXInBytes: 0,
                        srcY: 0,
                        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                        srcHost: std::ptr::null(),
                        srcDevice: src.data.address() as sys::CUdeviceptr,
                        srcArray: std::ptr::null_mut(),
                        srcPitch: cols * size,
                        dstXInBytes: 0,
                        dstY: 0,
                        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                        dstHost: std::ptr::null_mut(),
                        dstDevice: dst.address() as sys::CUdeviceptr,
                        dstArray: std::ptr::null_mut(),
                        dstPitch: stride * size,
                        WidthInBytes: cols * size,
                        Height: rows,
                    };
                    // SAFETY: both regions are live device allocations of this context holding
                    // `rows` rows of the given pitches; the copy is ordered on this handle's
                    // stream, where `src` lives (the caller checked) and `dst` was allocated.
                    unsafe { sys::cuMemcpy2DAsync_v2(&copy, device.stream.cu_stream()) }
                        .result()
                        .during("copying a matmul operand into rows of whole 16 bytes (cuMemcpy2DAsync)")?;
                }
                Ok(dst)
            }
        }
    }
}

/// Errors unless every dimension of an `(m, k, n)` product fits the copy engine's 32-bit
/// coordinates.
pub(super) fn check_copy_engine_dims((m, k, n): (usize, usize, usize)) -> Result<()> {
    for (what, dim) in [("m", m), ("k", k), ("n", n)] {
        if dim > i32::MAX as usize {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!("{what} = {dim}: the copy engine's coordinates are 32-bit"),
            });
        }
    }
    Ok(())
}

/// A row-major matrix as a tensor map describes it: `rows x cols` elements of `bytes` bytes at
/// device address `address`, rows `stride` elements apart (at least `cols`, `stride * bytes` a
/// multiple of 16).
#[derive(Clone, Copy, Debug)]
pub(super) struct MapMatrix {
    /// The copy engine's name of the element type.
    pub kind: sys::CUtensorMapDataType,
    /// Bytes per element.
    pub bytes: usize,
    /// Device address of element (0, 0).
    pub address: usize,
    /// Rows.
    pub rows: usize,
    /// Columns (the contiguous dimension).
    pub cols: usize,
    /// Elements from one row to the next.
    pub stride: usize,
}

/// The tensor map of `matrix`, boxes of `box_rows` rows of 128 bytes, 128-byte swizzle, zeros
/// out of bounds.
pub(super) fn encode(matrix: MapMatrix, box_rows: usize) -> Result<[u64; MAP_WORDS]> {
    let MapMatrix {
        kind,
        bytes,
        address,
        rows,
        cols,
        stride,
    } = matrix;
    crate::tensor_map::encode_2d(OP, kind, bytes, (address, rows, cols, stride), box_rows)
}

#[cfg(test)]
mod tests {
    use super::{MapMatrix, encode};
    use crate::error::Error;
    use cudarc::driver::sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;

    /// A map the driver would refuse is refused before the driver is asked (so this runs without
    /// one), naming the rule: rows 12 bf16 (24 bytes) apart are not a multiple of 16 bytes.
    #[test]
    fn a_map_the_driver_would_refuse_is_refused_first() {
        let matrix = MapMatrix {
            kind: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            bytes: 2,
            address: 0x7f00_0000_0000,
            rows: 64,
            cols: 12,
            stride: 12,
        };
        match encode(matrix, 64) {
            Err(Error::InvalidArgument { detail, .. }) => {
                assert!(detail.contains("multiple of 16 bytes"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }
}
