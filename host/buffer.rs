//! Device-resident data: a vector and a row-major matrix of `f32`, uploaded once and kept on
//! the device across calls (copy once, compute many times).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DriverError};
use ndarray::{Array1, Array2, ArrayBase, Data, Ix2};

use crate::device::{Backend, CudaDevice, Gpu};
use crate::error::{DriverContext, Error, Result};

/// Where a buffer's elements live.
pub(crate) enum Storage {
    /// Device memory of one CUDA device, used on that `Gpu`'s stream.
    Cuda(CudaSlice<f32>),
    /// Host memory standing in for device memory in the simulator.
    Host(Vec<f32>),
}

/// A vector of `f32` on a [`Gpu`].
pub struct DeviceVec {
    pub(crate) storage: Storage,
    pub(crate) len: usize,
}

/// A row-major `rows x cols` matrix of `f32` on a [`Gpu`].
pub struct DeviceMatrix {
    pub(crate) data: DeviceVec,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
}

/// Maps an allocation failure to [`Error::OutOfMemory`].
fn alloc_error(bytes: usize) -> impl FnOnce(DriverError) -> Error {
    move |e| match e.0 {
        cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory { bytes },
        _ => Error::Driver {
            during: "allocating device memory",
            source: e,
        },
    }
}

/// The most `f32` elements one buffer may hold: those whose byte size fits `isize::MAX`, the
/// most a host `Vec<f32>` can hold (and a pointer offset can span), so that every device buffer
/// can also be copied back into one.
pub const MAX_ELEMENTS: usize = isize::MAX as usize / std::mem::size_of::<f32>();

/// The number of elements of a buffer of extents `dims` (their product; `[len]` for a vector,
/// `[rows, cols]` for a matrix), or [`Error::TooLarge`] when the product overflows `usize` or
/// exceeds [`MAX_ELEMENTS`]. Every allocation of gpukern sizes its buffer through this one check,
/// before anything is allocated, so a byte count never wraps around (`len * 4` of `2^62 + 2^31`
/// elements would be 8 GiB).
pub fn checked_len(op: &'static str, dims: &[usize]) -> Result<usize> {
    let too_large = || Error::TooLarge {
        op,
        detail: format!(
            "{} f32 elements: a buffer may hold at most {MAX_ELEMENTS} ({} bytes, the most a host \
             Vec<f32> can hold); use smaller inputs",
            dims.iter().map(usize::to_string).collect::<Vec<_>>().join(" x "),
            MAX_ELEMENTS * std::mem::size_of::<f32>()
        ),
    };
    dims.iter()
        .try_fold(1usize, |len, &d| len.checked_mul(d))
        .filter(|&len| len <= MAX_ELEMENTS)
        .ok_or_else(too_large)
}

/// An empty host vector with room for `len` floats, standing in for device memory in the
/// simulator: [`Error::OutOfMemory`] (not an abort, as `vec!` would) when the host cannot
/// provide it. `len` has passed [`checked_len`].
fn host_buffer(len: usize) -> Result<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        bytes: len * std::mem::size_of::<f32>(),
    })?;
    Ok(v)
}

/// [`host_buffer`] filled with `len` copies of `value`.
fn host_vec(len: usize, value: f32) -> Result<Vec<f32>> {
    let mut v = host_buffer(len)?;
    v.resize(len, value);
    Ok(v)
}

impl CudaDevice {
    /// `len` floats of device memory, contents unspecified (every kernel writes its whole output).
    /// `len` has passed [`checked_len`] (the callers in this module check it).
    pub(crate) fn alloc(&self, len: usize) -> Result<CudaSlice<f32>> {
        if len == 0 {
            return self.stream.null().during("allocating an empty buffer");
        }
        let bytes = len * std::mem::size_of::<f32>();
        // SAFETY: the caller fills the buffer (a kernel's output or a copy) before anyone reads it.
        unsafe { self.stream.alloc::<f32>(len) }.map_err(alloc_error(bytes))
    }
}

impl Gpu {
    /// Copies `data` to a new device vector.
    pub fn upload(&self, data: &[f32]) -> Result<DeviceVec> {
        // A host slice cannot exceed the limit; checked anyway so every allocation passes here.
        checked_len("upload", &[data.len()])?;
        let storage = match &self.backend {
            Backend::Cuda(d) => {
                let mut dst = d.alloc(data.len())?;
                if !data.is_empty() {
                    d.stream
                        .memcpy_htod(data, &mut dst)
                        .during("copying to the device")?;
                }
                Storage::Cuda(dst)
            }
            Backend::Simulator => {
                let mut v = host_buffer(data.len())?;
                v.extend_from_slice(data);
                Storage::Host(v)
            }
        };
        Ok(DeviceVec {
            storage,
            len: data.len(),
        })
    }

    /// Copies a matrix (any layout, views included) to a new row-major device matrix.
    pub fn upload_matrix<S: Data<Elem = f32>>(&self, a: &ArrayBase<S, Ix2>) -> Result<DeviceMatrix> {
        let (rows, cols) = a.dim();
        let standard = a.as_standard_layout();
        let data = match standard.as_slice() {
            Some(s) => self.upload(s)?,
            None => self.upload(&standard.iter().copied().collect::<Vec<_>>())?,
        };
        Ok(DeviceMatrix { data, rows, cols })
    }

    /// A new device vector of `len` zeros (e.g. the output of [`Gpu::add_into`]).
    ///
    /// Errors: [`Error::TooLarge`] above [`MAX_ELEMENTS`]; [`Error::OutOfMemory`].
    pub fn zeros(&self, len: usize) -> Result<DeviceVec> {
        checked_len("zeros", &[len])?;
        let storage = match &self.backend {
            Backend::Cuda(d) => {
                let mut s = d.alloc(len)?;
                if len > 0 {
                    d.stream.memset_zeros(&mut s).during("zeroing device memory")?;
                }
                Storage::Cuda(s)
            }
            Backend::Simulator => Storage::Host(host_vec(len, 0.0)?),
        };
        Ok(DeviceVec { storage, len })
    }

    /// A new `rows x cols` device matrix of zeros (e.g. the output of [`Gpu::matmul_into`]).
    ///
    /// Errors: [`Error::TooLarge`] when `rows * cols` overflows or exceeds [`MAX_ELEMENTS`];
    /// [`Error::OutOfMemory`].
    pub fn zeros_matrix(&self, rows: usize, cols: usize) -> Result<DeviceMatrix> {
        let len = checked_len("zeros_matrix", &[rows, cols])?;
        Ok(DeviceMatrix {
            data: self.zeros(len)?,
            rows,
            cols,
        })
    }

    /// A new device vector of `len` elements for a kernel to write ([`Error::TooLarge`] above
    /// [`MAX_ELEMENTS`]).
    pub(crate) fn alloc(&self, len: usize) -> Result<DeviceVec> {
        checked_len("allocating device memory", &[len])?;
        let storage = match &self.backend {
            Backend::Cuda(d) => Storage::Cuda(d.alloc(len)?),
            Backend::Simulator => Storage::Host(host_vec(len, f32::NAN)?),
        };
        Ok(DeviceVec { storage, len })
    }

    /// A new `rows x cols` device matrix for a kernel to write (the result of an operation:
    /// [`Error::TooLarge`] when it could not exist on the host).
    pub(crate) fn alloc_matrix(&self, rows: usize, cols: usize) -> Result<DeviceMatrix> {
        let len = checked_len("allocating a result matrix", &[rows, cols])?;
        Ok(DeviceMatrix {
            data: self.alloc(len)?,
            rows,
            cols,
        })
    }

    /// Errors unless every buffer belongs to this `Gpu` (same backend, same stream).
    pub(crate) fn check_owner(&self, op: &'static str, buffers: &[&DeviceVec]) -> Result<()> {
        let ok = buffers.iter().all(|b| match (&self.backend, &b.storage) {
            (Backend::Cuda(d), Storage::Cuda(s)) => Arc::ptr_eq(s.stream(), &d.stream),
            (Backend::Simulator, Storage::Host(_)) => true,
            _ => false,
        });
        if ok {
            Ok(())
        } else {
            Err(Error::WrongDevice { op })
        }
    }
}

impl DeviceVec {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the elements back to the host (waits for the work queued before it).
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        match &self.storage {
            Storage::Cuda(s) if s.is_empty() => Ok(Vec::new()),
            Storage::Cuda(s) => s.stream().clone_dtoh(s).during("copying from the device"),
            Storage::Host(v) => Ok(v.clone()),
        }
    }

    /// The address a kernel sees for the first element: a device address on CUDA, a host
    /// address in the simulator. The 16-byte kernels need it aligned (softmax: `x` and `y` at
    /// the same address modulo 16).
    pub(crate) fn address(&self) -> usize {
        match &self.storage {
            Storage::Cuda(s) => s.device_ptr(s.stream()).0 as usize,
            Storage::Host(h) => h.as_ptr() as usize,
        }
    }

    /// Whether the first element sits on a 16-byte boundary (what the `_vec4` kernels need).
    /// Device allocations always do; the simulator's host vectors in practice.
    pub(crate) fn is_16_byte_aligned(&self) -> bool {
        self.address() % 16 == 0
    }

    /// Copies the elements into `out`, which must have exactly [`DeviceVec::len`] elements.
    ///
    /// Reusing one host buffer avoids the page faults of a fresh allocation on every download,
    /// which dominate large downloads into new memory.
    pub fn copy_to_host(&self, out: &mut [f32]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::ShapeMismatch {
                op: "copy_to_host",
                lhs: vec![self.len],
                rhs: vec![out.len()],
                rule: "the host buffer must have the device vector's length",
            });
        }
        match &self.storage {
            Storage::Cuda(s) if s.is_empty() => Ok(()),
            Storage::Cuda(s) => s.stream().memcpy_dtoh(s, out).during("copying from the device"),
            Storage::Host(v) => {
                out.copy_from_slice(v);
                Ok(())
            }
        }
    }

    /// Copies the elements back into an `ndarray` vector.
    pub fn to_array(&self) -> Result<Array1<f32>> {
        Ok(Array1::from(self.to_vec()?))
    }
}

impl DeviceMatrix {
    /// `(rows, cols)`.
    pub fn dim(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The elements, row after row.
    pub fn as_vec(&self) -> &DeviceVec {
        &self.data
    }

    /// Copies the matrix back to the host.
    pub fn to_array(&self) -> Result<Array2<f32>> {
        let v = self.data.to_vec()?;
        Array2::from_shape_vec((self.rows, self.cols), v).map_err(|e| Error::InvalidArgument {
            op: "DeviceMatrix::to_array",
            detail: e.to_string(),
        })
    }
}
