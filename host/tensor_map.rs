//! Tensor maps for kernels that copy with Hopper's bulk tensor copy engine
//! (`gpukern_device::tma`, `gpukern_device::pipeline`): 2-D row-major matrices, boxes of rows of
//! 128 bytes, 128-byte swizzle, zeros out of bounds; encoded with the driver's
//! `cuTensorMapEncodeTiled` and placed in device memory side by side, where a kernel reads them
//! (rustc cannot pass a `__grid_constant__` parameter). The library's `wgmma` kernels encode
//! theirs here too.
//!
//! ```no_run
//! # fn main() -> gpukern::Result<()> {
//! use gpukern::{Gpu, bf16, tensor_map::Map2d};
//! let gpu = Gpu::new(0)?;
//! let a = gpu.zeros_of::<bf16>(4096 * 4096)?;
//! // `A` (4096 x 4096) in boxes of 128 rows x 64 columns: the map a kernel's `Tensor2d` names.
//! let maps = gpu.tensor_maps_2d(&[Map2d::new(&a, 4096, 4096, 128)])?;
//! # let _ = maps; Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys;
use gpukern_device::tma::{SWIZZLE_128B, Swizzle, TiledMap};

use crate::buffer::{DeviceVec, Element};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Error, Result};

/// Words of one tensor map (128 bytes).
pub const MAP_WORDS: usize = 16;

/// An element type the copy engine knows.
pub trait MapElement: Element {
    /// The copy engine's name of the type.
    const KIND: sys::CUtensorMapDataType;
}

impl MapElement for half::bf16 {
    const KIND: sys::CUtensorMapDataType = sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}
impl MapElement for half::f16 {
    const KIND: sys::CUtensorMapDataType = sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}
impl MapElement for f32 {
    const KIND: sys::CUtensorMapDataType = sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

/// A row-major `rows x cols` matrix in `data` (rows `stride` elements apart) and the box a copy
/// moves: `box_rows` rows of 128 bytes (`128 / size_of::<T>()` columns).
#[derive(Clone, Copy)]
pub struct Map2d<'a, T> {
    /// The buffer holding the matrix from its first element.
    pub data: &'a DeviceVec<T>,
    /// Rows.
    pub rows: usize,
    /// Columns (the contiguous dimension).
    pub cols: usize,
    /// Elements from one row to the next (`stride * size_of::<T>()` a multiple of 16).
    pub stride: usize,
    /// Rows of the box (at most 256).
    pub box_rows: usize,
}

impl<'a, T> Map2d<'a, T> {
    /// A dense matrix (`stride = cols`).
    pub fn new(data: &'a DeviceVec<T>, rows: usize, cols: usize, box_rows: usize) -> Self {
        Map2d {
            data,
            rows,
            cols,
            stride: cols,
            box_rows,
        }
    }
}

impl Gpu {
    /// The tensor maps of `maps` in one device buffer, [`MAP_WORDS`] words each in order (the
    /// allocation is 256-byte aligned, so each map is 64-byte aligned). Checks each matrix
    /// against its buffer and the driver's rules first (a clear error instead of the driver's
    /// bare `CUDA_ERROR_INVALID_VALUE`). Zeros in the simulator, whose copies read the matrices
    /// through the kernel's `Tensor2d` instead.
    pub fn tensor_maps_2d<T: MapElement>(&self, maps: &[Map2d<'_, T>]) -> Result<DeviceVec<u64>> {
        const OP: &str = "tensor_maps_2d";
        let mut words = Vec::with_capacity(maps.len() * MAP_WORDS);
        for m in maps {
            let needed = match m.rows {
                0 => 0,
                r => (r - 1) * m.stride + m.cols,
            };
            if m.data.len() < needed || m.stride < m.cols {
                return Err(Error::InvalidArgument {
                    op: OP,
                    detail: format!(
                        "a {} x {} matrix with rows {} apart in a buffer of {} elements",
                        m.rows,
                        m.cols,
                        m.stride,
                        m.data.len()
                    ),
                });
            }
            if self.is_simulator() {
                words.extend([0u64; MAP_WORDS]);
                continue;
            }
            let bytes = std::mem::size_of::<T>();
            let matrix = (m.data.address(), m.rows, m.cols, m.stride);
            words.extend(encode_2d(OP, T::KIND, bytes, matrix, m.box_rows)?);
        }
        self.upload(&words)
    }
}

/// Most sets of tensor maps a stream handle keeps in device memory.
const CACHED_MAPS: usize = 64;

/// Tensor maps already in device memory, by their words: a launch on the same operands again
/// uploads nothing. One per stream handle (the handle's cache slot, [`crate::cache`]); every
/// family whose kernels copy with the tensor copy engine (matmul's and attention's Hopper
/// kernels) shares it.
#[derive(Default)]
struct TensorMaps(HashMap<Vec<u64>, Arc<DeviceVec<u64>>>);

impl Gpu {
    /// The maps of `A` then `B` in device memory, side by side ([`Gpu::cached_maps`]).
    pub(crate) fn cached_map_pair(
        &self,
        a_map: &[u64; MAP_WORDS],
        b_map: &[u64; MAP_WORDS],
    ) -> Result<Arc<DeviceVec<u64>>> {
        let mut words = [0u64; 2 * MAP_WORDS];
        words[..MAP_WORDS].copy_from_slice(a_map);
        words[MAP_WORDS..].copy_from_slice(b_map);
        self.cached_maps(&words)
    }

    /// Whether [`Gpu::cached_maps`] has `words` in device memory already (then a call inside a
    /// capture can take them: no upload). Never in the simulator, whose maps are uploaded anew.
    pub(crate) fn maps_cached(&self, words: &[u64]) -> bool {
        let Backend::Cuda(device) = &self.backend else {
            return false;
        };
        let slot = device.cache::<TensorMaps>();
        let guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        guard.0.contains_key(words)
    }

    /// `words` (tensor maps) in device memory: from this stream handle's cache when the same
    /// words were uploaded before, else uploaded and kept (at most [`CACHED_MAPS`] sets; a full
    /// cache is emptied first). A map describes only an address, a shape and a box, so a cached
    /// one stays right whatever the memory at that address holds now.
    pub(crate) fn cached_maps(&self, words: &[u64]) -> Result<Arc<DeviceVec<u64>>> {
        let Backend::Cuda(device) = &self.backend else {
            return Ok(Arc::new(self.upload(words)?));
        };
        let slot = device.cache::<TensorMaps>();
        let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        let cache = &mut guard.0;
        if let Some(maps) = cache.get(words) {
            return Ok(maps.clone());
        }
        if cache.len() >= CACHED_MAPS {
            cache.clear();
        }
        let maps = Arc::new(self.upload(words)?);
        cache.insert(words.to_vec(), maps.clone());
        Ok(maps)
    }
}

/// The tensor map of the row-major `rows x cols` matrix of `bytes`-byte elements of type `kind`
/// at device address `address`, rows `stride` elements apart: boxes of `box_rows` rows of 128
/// bytes, 128-byte swizzle, zeros out of bounds. Errors (naming `op`) where the driver would
/// refuse it.
pub(crate) fn encode_2d(
    op: &'static str,
    kind: sys::CUtensorMapDataType,
    bytes: usize,
    (address, rows, cols, stride): (usize, usize, usize, usize),
    box_rows: usize,
) -> Result<[u64; MAP_WORDS]> {
    let dims = [cols as u64, rows as u64];
    let strides = [(stride * bytes) as u64];
    let boxes = [(SWIZZLE_128B / bytes) as u32, box_rows as u32];
    let element_strides = [1u32, 1];
    // The driver's rules, checked first: its refusal is a bare CUDA_ERROR_INVALID_VALUE.
    let tiled = TiledMap {
        address: address as u64,
        element_bytes: bytes as u32,
        dims: &dims,
        strides: &strides,
        box_dims: &boxes,
        element_strides: &element_strides,
        swizzle: Swizzle::B128,
    };
    tiled.check().map_err(|e| Error::InvalidArgument {
        op,
        detail: format!("a tensor map of {rows} x {cols} elements, rows {stride} apart: {e}"),
    })?;
    encode_tiled(kind, address, &dims, &strides, &boxes, &element_strides)
}

/// The driver's encoding of a tiled map whose rules the caller has checked: `dims.len()`
/// dimensions (strides one fewer), 128-byte swizzle, L2 promotion of 256 bytes, zeros out of
/// bounds.
fn encode_tiled(
    kind: sys::CUtensorMapDataType,
    address: usize,
    dims: &[u64],
    strides: &[u64],
    boxes: &[u32],
    element_strides: &[u32],
) -> Result<[u64; MAP_WORDS]> {
    debug_assert!(strides.len() + 1 == dims.len() && boxes.len() == dims.len());
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer is to a live slice of the rank's length (strides: rank - 1); the
    // call only encodes (no device access).
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            kind,
            dims.len() as u32,
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

/// The tensor map of the 4-D tensor `[outer, planes, rows, cols]` of `bytes`-byte elements of
/// type `kind` at device address `address`, element strides `strides` along outer, planes and
/// rows (`cols` contiguous), read in boxes of `box_rows` rows of 128 bytes of one plane
/// (`gpukern_device::tma::Tensor4d`; the map's dimensions in the order `cols, planes, rows,
/// outer`): 128-byte swizzle, zeros out of bounds. Errors (naming `op`) where the driver would
/// refuse it ([`tiled_4d`]'s rules).
pub(crate) fn encode_4d(
    op: &'static str,
    kind: sys::CUtensorMapDataType,
    bytes: usize,
    (address, [outer, planes, rows, cols], [s_outer, s_plane, s_row]): (usize, [usize; 4], [usize; 3]),
    box_rows: usize,
) -> Result<[u64; MAP_WORDS]> {
    let (dims, strides, boxes) = map_4d(
        bytes,
        [outer, planes, rows, cols],
        [s_outer, s_plane, s_row],
        box_rows,
    );
    let element_strides = [1u32; 4];
    check_4d(
        address,
        bytes,
        [outer, planes, rows, cols],
        [s_outer, s_plane, s_row],
        box_rows,
    )
    .map_err(|e| Error::InvalidArgument {
        op,
        detail: format!(
            "a tensor map of [{outer}, {planes}, {rows}, {cols}] elements, strides \
             [{s_outer}, {s_plane}, {s_row}]: {e}"
        ),
    })?;
    encode_tiled(kind, address, &dims, &strides, &boxes, &element_strides)
}

/// The dims, byte strides and box of a 4-D map (`encode_4d`'s order: `cols, planes, rows, outer`).
fn map_4d(
    bytes: usize,
    [outer, planes, rows, cols]: [usize; 4],
    [s_outer, s_plane, s_row]: [usize; 3],
    box_rows: usize,
) -> ([u64; 4], [u64; 3], [u32; 4]) {
    (
        [cols as u64, planes as u64, rows as u64, outer as u64],
        [
            (s_plane * bytes) as u64,
            (s_row * bytes) as u64,
            (s_outer * bytes) as u64,
        ],
        [(SWIZZLE_128B / bytes) as u32, 1, box_rows as u32, 1],
    )
}

/// Whether the driver would encode the 4-D map of [`encode_4d`] (the rules of
/// `gpukern_device::tma::TiledMap`): a pure check, so that a plan can choose a kernel that
/// copies through such maps, or another, before anything is launched.
pub(crate) fn check_4d(
    address: usize,
    bytes: usize,
    dims: [usize; 4],
    strides: [usize; 3],
    box_rows: usize,
) -> std::result::Result<(), gpukern_device::tma::MapError> {
    let (dims, strides, boxes) = map_4d(bytes, dims, strides, box_rows);
    TiledMap {
        address: address as u64,
        element_bytes: bytes as u32,
        dims: &dims,
        strides: &strides,
        box_dims: &boxes,
        element_strides: &[1; 4],
        swizzle: Swizzle::B128,
    }
    .check()
}
