//! The Hopper path of bf16 products: `kernels_gpu::matmul::wgmma` (TMA copies into a ring of
//! shared-memory stages, `wgmma` on one warpgroup), its two tensor maps encoded here with the
//! driver's `cuTensorMapEncodeTiled` and placed in device memory (rustc cannot pass them as
//! `__grid_constant__` parameters).

use cudarc::driver::sys;
use kernels_gpu::matmul::wgmma::{MAP_WORDS, SWIZZLE_COLS, WGMMA_128X128};

use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Error, Result};
use crate::launch_config::LaunchConfig;
use crate::raw::matmul::WgmmaLauncher;

/// The operation's name in errors.
const OP: &str = "matmul";

/// An entry point only the `sm_90a` module has: whether it is loaded says whether the `wgmma`
/// kernels can run.
const PROBE: &str = "matmul_wgmma_bf16_128x128";

impl Gpu {
    /// Whether this `Gpu` runs the `wgmma` kernels: always in the simulator; on CUDA when the
    /// `sm_90a` module was loaded (a compute capability 9.0 GPU, and gpukern built with it).
    pub fn has_wgmma(&self) -> bool {
        match &self.backend {
            Backend::Simulator => true,
            Backend::Cuda(_) => self.library().function(PROBE).is_some(),
        }
    }

    /// `C = A * B` with a `wgmma` kernel, shapes and owners checked by the caller; `k` and `n`
    /// multiples of 8, the operands 16-byte aligned, [`Gpu::has_wgmma`] (checked here again:
    /// a clear error instead of a missing entry point).
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    pub(crate) fn launch_wgmma<I: Element, O: Element>(
        &self,
        launch: WgmmaLauncher<I, O>,
        a: &DeviceMatrix<I>,
        b: &DeviceMatrix<I>,
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
        let aligned =
            a.data.is_16_byte_aligned() && b.data.is_16_byte_aligned() && c.data.is_16_byte_aligned();
        if k % 8 != 0 || n % 8 != 0 || !aligned {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the wgmma kernels need k and n multiples of 8 and 16-byte aligned matrices \
                     (k = {k}, n = {n}): use the mma.sync kernel (HalfTile::Square)"
                ),
            });
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        for (what, dim) in [("m", m), ("k", k), ("n", n)] {
            if dim > i32::MAX as usize {
                return Err(Error::TooLarge {
                    op: OP,
                    detail: format!("{what} = {dim}: the copy engine's coordinates are 32-bit"),
                });
            }
        }
        let t = WGMMA_128X128;
        let cfg = LaunchConfig::block_tiles(
            OP,
            (m, n),
            (t.block_rows, t.block_cols),
            1,
            t.threads(),
            t.shared_bytes(),
            &self.limits().opted_in(),
        )?;
        let maps = self.tensor_maps(a, b, (m, k, n))?;
        // SAFETY: `maps` holds the two tensor maps of `a` (m x k, box 128 x 64) and `b` (k x n,
        // box 64 x 64), bf16 (the only `I` with a wgmma launcher), 128-byte swizzle, zero fill;
        // shapes checked, `k`, `n` multiples of 8, aligned; `cfg` the kernel's launch; the
        // sm_90a module is loaded (or the simulator).
        unsafe {
            launch(
                &self.library(),
                cfg,
                &maps,
                &a.data,
                &b.data,
                &mut c.data,
                m,
                n,
                k,
            )
        }
    }

    /// The tensor maps of `A` and `B` in device memory, [`MAP_WORDS`] words each (the
    /// allocation is 256-byte aligned, so each map is 64-byte aligned). Zeros in the simulator,
    /// whose copies read the matrices directly.
    fn tensor_maps<I: Element>(
        &self,
        a: &DeviceMatrix<I>,
        b: &DeviceMatrix<I>,
        (m, k, n): (usize, usize, usize),
    ) -> Result<DeviceVec<u64>> {
        if let Backend::Simulator = self.backend {
            return self.zeros::<u64>(2 * MAP_WORDS);
        }
        let t = WGMMA_128X128;
        let mut words = [0u64; 2 * MAP_WORDS];
        let a_map = encode_bf16(a.data.address(), m, k, t.block_rows)?;
        let b_map = encode_bf16(b.data.address(), k, n, t.block_k)?;
        words[..MAP_WORDS].copy_from_slice(&a_map);
        words[MAP_WORDS..].copy_from_slice(&b_map);
        self.upload(&words)
    }
}

/// The tensor map of a row-major bf16 `rows x cols` matrix at device address `address`, boxes
/// of `box_rows x` [`SWIZZLE_COLS`], 128-byte swizzle, zeros out of bounds.
fn encode_bf16(address: usize, rows: usize, cols: usize, box_rows: usize) -> Result<[u64; MAP_WORDS]> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let dims = [cols as u64, rows as u64];
    let strides = [(cols * 2) as u64];
    let boxes = [SWIZZLE_COLS as u32, box_rows as u32];
    let element_strides = [1u32, 1];
    // SAFETY: every pointer is to a live local array of the rank's length (strides: rank - 1);
    // the call only encodes (no device access).
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            2,
            address as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .during("encoding a TMA tensor map (cuTensorMapEncodeTiled)")?;
    Ok(map.opaque)
}
