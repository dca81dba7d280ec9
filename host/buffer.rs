//! Device-resident data: a vector and a row-major matrix of any [`Element`] type (`f32` by
//! default, the type of the library's own operations), uploaded once and kept on the device
//! across calls (copy once, compute many times).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DriverError, result};
use gpukern_device::DeviceCopy;
use ndarray::{Array1, Array2, ArrayBase, Data, Ix2};

use crate::device::{Backend, CudaDevice, Gpu};
use crate::error::{DriverContext, Error, Result};

/// A type a device buffer may hold: plain data the device and the host lay out alike
/// ([`DeviceCopy`]) with a `Default` (what a fresh host copy starts from).
///
/// Every `DeviceCopy + Default` type is one: `f32`, `f64`, `i8`..`i64`, `u8`..`u64`, `usize`,
/// `isize`, [`f16`](half::f16), [`bf16`](half::bf16), arrays of them, and your own `#[repr(C)]` structs with
/// `#[derive(Clone, Copy, Default, DeviceCopy)]` (`gpukern_device::DeviceCopy`, which checks the
/// struct has no padding).
pub trait Element: DeviceCopy + Default {}

impl<T: DeviceCopy + Default> Element for T {}

/// Where a buffer's elements live.
pub(crate) enum Storage<T> {
    /// Device memory of one CUDA device, used on that `Gpu`'s stream.
    Cuda(CudaSlice<T>),
    /// Host memory standing in for device memory in the simulator.
    Host(Vec<T>),
}

/// A vector of `T` (`f32` unless said otherwise) on a [`Gpu`].
pub struct DeviceVec<T = f32> {
    pub(crate) storage: Storage<T>,
    pub(crate) len: usize,
}

impl<T> crate::capture::Queued for DeviceVec<T> {
    /// The buffer's home stream: where its copies and its free are queued.
    fn queue(&self) -> Option<&Arc<cudarc::driver::CudaStream>> {
        match &self.storage {
            Storage::Cuda(s) => Some(s.stream()),
            Storage::Host(_) => None,
        }
    }
}

/// A row-major `rows x cols` matrix of `T` (`f32` unless said otherwise) on a [`Gpu`].
pub struct DeviceMatrix<T = f32> {
    pub(crate) data: DeviceVec<T>,
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
    checked_len_of::<f32>(op, dims)
}

/// [`checked_len`] for elements of type `T`: at most `isize::MAX / size_of::<T>()` of them.
pub fn checked_len_of<T>(op: &'static str, dims: &[usize]) -> Result<usize> {
    let size = std::mem::size_of::<T>().max(1);
    let max = isize::MAX as usize / size;
    let too_large = || Error::TooLarge {
        op,
        detail: format!(
            "{} {} elements: a buffer may hold at most {max} ({} bytes, the most a host Vec can \
             hold); use smaller inputs",
            dims.iter().map(usize::to_string).collect::<Vec<_>>().join(" x "),
            std::any::type_name::<T>(),
            max * size
        ),
    };
    dims.iter()
        .try_fold(1usize, |len, &d| len.checked_mul(d))
        .filter(|&len| len <= max)
        .ok_or_else(too_large)
}

/// An empty host vector with room for `len` elements, standing in for device memory in the
/// simulator: [`Error::OutOfMemory`] (not an abort, as `vec!` would) when the host cannot
/// provide it. `len` has passed [`checked_len_of`].
fn host_buffer<T>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        bytes: len * std::mem::size_of::<T>(),
    })?;
    Ok(v)
}

/// [`host_buffer`] filled with `len` copies of `value`.
fn host_vec<T: Clone>(len: usize, value: T) -> Result<Vec<T>> {
    let mut v = host_buffer(len)?;
    v.resize(len, value);
    Ok(v)
}

impl CudaDevice {
    /// `len` elements of device memory, contents unspecified (every kernel writes its whole
    /// output). `len` has passed [`checked_len_of`] (the callers in this module check it).
    pub(crate) fn alloc<T: Element>(&self, len: usize) -> Result<CudaSlice<T>> {
        if len == 0 {
            return self.stream.null().during("allocating an empty buffer");
        }
        let bytes = len * std::mem::size_of::<T>();
        // Bytes, then typed: cudarc's typed allocation needs its own trait, which a user's
        // `DeviceCopy` struct does not implement.
        // SAFETY: the caller fills the buffer (a kernel's output or a copy) before anyone reads
        // it; every bit pattern is a valid `T` (`DeviceCopy`).
        let raw = unsafe { self.stream.alloc::<u8>(bytes) }.map_err(alloc_error(bytes))?;
        // SAFETY: `raw` is a live allocation of `len * size_of::<T>()` bytes on this stream, given
        // up by `leak` and owned again (freed on drop) by the typed slice.
        Ok(unsafe { self.stream.upgrade_device_ptr::<T>(raw.leak(), len) })
    }
}

impl Gpu {
    /// Copies `data` to a new device vector, on this handle's stream. From
    /// [`crate::pinned::STAGING_MIN_BYTES`] on, the copy goes through this handle's pinned
    /// staging buffers (two of [`crate::pinned::STAGING_CHUNK_BYTES`], made on first use);
    /// [`Gpu::upload_pinned`] copies straight from pinned memory.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceVec<T>> {
        crate::capture::refuse(self, "upload", "an allocation (upload)")?;
        // A host slice cannot exceed the limit; checked anyway so every allocation passes here.
        checked_len_of::<T>("upload", &[data.len()])?;
        let storage = match &self.backend {
            Backend::Cuda(d) => {
                let mut dst = d.alloc(data.len())?;
                if !data.is_empty() {
                    d.copy_htod(data, &mut dst)?;
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
    pub fn upload_matrix<T: Element, S: Data<Elem = T>>(
        &self,
        a: &ArrayBase<S, Ix2>,
    ) -> Result<DeviceMatrix<T>> {
        let (rows, cols) = a.dim();
        let standard = a.as_standard_layout();
        let data = match standard.as_slice() {
            Some(s) => self.upload(s)?,
            None => self.upload(&standard.iter().copied().collect::<Vec<_>>())?,
        };
        Ok(DeviceMatrix { data, rows, cols })
    }

    /// A new device vector of `len` f32 zeros (e.g. the output of [`Gpu::add_into`]);
    /// [`Gpu::zeros_of`] for other element types.
    ///
    /// Errors: [`Error::TooLarge`] above `isize::MAX` bytes; [`Error::OutOfMemory`].
    pub fn zeros(&self, len: usize) -> Result<DeviceVec> {
        self.zeros_of(len)
    }

    /// A new device vector of `len` zeros of `T` (`gpu.zeros_of::<u32>(n)`, or the type the use
    /// gives).
    ///
    /// Errors: [`Error::TooLarge`] above `isize::MAX` bytes; [`Error::OutOfMemory`].
    pub fn zeros_of<T: Element>(&self, len: usize) -> Result<DeviceVec<T>> {
        crate::capture::refuse(self, "zeros", "an allocation (zeros)")?;
        checked_len_of::<T>("zeros", &[len])?;
        let storage = match &self.backend {
            Backend::Cuda(d) => {
                let s = d.alloc(len)?;
                if len > 0 {
                    let (address, _record) = s.device_ptr(&d.stream);
                    // SAFETY: `s` holds `len * size_of::<T>()` bytes, on this stream; zero bits
                    // are a valid `T` (`DeviceCopy`).
                    unsafe { result::memset_d8_async(address, 0, s.num_bytes(), d.stream.cu_stream()) }
                        .during("zeroing device memory")?;
                }
                Storage::Cuda(s)
            }
            Backend::Simulator => Storage::Host(host_vec(len, T::default())?),
        };
        Ok(DeviceVec { storage, len })
    }

    /// A new `rows x cols` device matrix of f32 zeros (e.g. the output of
    /// [`Gpu::matmul_into`]); [`Gpu::zeros_matrix_of`] for other element types.
    ///
    /// Errors: [`Error::TooLarge`] when `rows * cols` overflows or exceeds `isize::MAX` bytes;
    /// [`Error::OutOfMemory`].
    pub fn zeros_matrix(&self, rows: usize, cols: usize) -> Result<DeviceMatrix> {
        self.zeros_matrix_of(rows, cols)
    }

    /// A new `rows x cols` device matrix of zeros of `T`.
    ///
    /// Errors: as [`Gpu::zeros_matrix`].
    pub fn zeros_matrix_of<T: Element>(&self, rows: usize, cols: usize) -> Result<DeviceMatrix<T>> {
        let len = checked_len_of::<T>("zeros_matrix", &[rows, cols])?;
        Ok(DeviceMatrix {
            data: self.zeros_of(len)?,
            rows,
            cols,
        })
    }

    /// A new device vector of `len` elements for a kernel to write ([`Error::TooLarge`] above
    /// [`MAX_ELEMENTS`]).
    /// NaN in the simulator (see [`Gpu::alloc_poisoned`]).
    pub(crate) fn alloc(&self, len: usize) -> Result<DeviceVec> {
        self.alloc_poisoned(len, f32::NAN)
    }

    /// A new device vector of `len` elements of `T` for a kernel to write whole, not zeroed; in
    /// the simulator every element starts as `poison` (a NaN, so that one left unwritten shows).
    pub(crate) fn alloc_poisoned<T: Element>(&self, len: usize, poison: T) -> Result<DeviceVec<T>> {
        crate::capture::refuse(
            self,
            "allocating device memory",
            "an allocation (an operation that returns a new buffer)",
        )?;
        checked_len_of::<T>("allocating device memory", &[len])?;
        let storage = match &self.backend {
            Backend::Cuda(d) => Storage::Cuda(d.alloc(len)?),
            Backend::Simulator => Storage::Host(host_vec(len, poison)?),
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

    /// Whether `buffer` belongs to this `Gpu`'s device (same backend, same context: this handle
    /// or another stream of it, [`Gpu::stream`]).
    pub(crate) fn owns<T>(&self, buffer: &DeviceVec<T>) -> bool {
        self.backend.owns(buffer)
    }

    /// Whether `buffer` lives on this handle's own stream (always in the simulator): work queued
    /// on the stream outside a kernel launch (a copy) is then ordered after whatever wrote it.
    pub(crate) fn on_own_stream<T>(&self, buffer: &DeviceVec<T>) -> bool {
        match (&self.backend, &buffer.storage) {
            (Backend::Cuda(d), Storage::Cuda(s)) => Arc::ptr_eq(s.stream(), &d.stream),
            (Backend::Simulator, Storage::Host(_)) => true,
            _ => false,
        }
    }

    /// Errors unless every buffer belongs to this `Gpu`'s device (see [`Gpu::owns`]).
    pub(crate) fn check_owner(&self, op: &'static str, buffers: &[&DeviceVec]) -> Result<()> {
        if buffers.iter().all(|b| self.owns(b)) {
            Ok(())
        } else {
            Err(Error::WrongDevice { op })
        }
    }
}

impl Backend {
    /// Whether `buffer` lives on this backend: on CUDA, in this device's context (on any of its
    /// streams; a launch orders itself against the others, [`crate::stream`]).
    pub(crate) fn owns<T>(&self, buffer: &DeviceVec<T>) -> bool {
        match (self, &buffer.storage) {
            (Backend::Cuda(d), Storage::Cuda(s)) => Arc::ptr_eq(s.context(), &d.ctx),
            (Backend::Simulator, Storage::Host(_)) => true,
            _ => false,
        }
    }
}

impl<T: Element> DeviceVec<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The vector as a row-major `rows x cols` matrix, without a copy (the same device memory).
    ///
    /// ```
    /// let gpu = gpukern::Gpu::simulator();
    /// let m = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?.into_matrix(2, 3)?;
    /// assert_eq!(m.to_array()?, ndarray::arr2(&[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]));
    /// # Ok::<(), gpukern::Error>(())
    /// ```
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `rows * cols` is the vector's length.
    pub fn into_matrix(self, rows: usize, cols: usize) -> Result<DeviceMatrix<T>> {
        if rows.checked_mul(cols) != Some(self.len) {
            return Err(Error::ShapeMismatch {
                op: "DeviceVec::into_matrix",
                lhs: vec![self.len],
                rhs: vec![rows, cols],
                rule: "rows * cols must be the vector's length",
            });
        }
        Ok(DeviceMatrix {
            data: self,
            rows,
            cols,
        })
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// In the simulator, sets every element to `value`, as [`Gpu::alloc_poisoned`] starts a new
    /// buffer (so that a kernel's missed write into a reused workspace shows); nothing on CUDA.
    pub(crate) fn poison_simulated(&mut self, value: T) {
        if let Storage::Host(v) = &mut self.storage {
            v.fill(value);
        }
    }

    /// Copies the elements back to the host, on the stream of the `Gpu` that made this vector
    /// (waits for the work queued before it; [`Gpu::download`] stages large copies through
    /// pinned memory, [`DeviceVec::copy_to_pinned`] copies into pinned memory without waiting).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        crate::capture::refuse(self, "to_vec", "a copy to the host")?;
        match &self.storage {
            Storage::Cuda(_) => self.view().to_vec(),
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
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::ShapeMismatch {
                op: "copy_to_host",
                lhs: vec![self.len],
                rhs: vec![out.len()],
                rule: "the host buffer must have the device vector's length",
            });
        }
        crate::capture::refuse(self, "copy_to_host", "a copy to the host")?;
        self.view().copy_to_host(out)
    }

    /// Copies the elements back into an `ndarray` vector.
    pub fn to_array(&self) -> Result<Array1<T>> {
        Ok(Array1::from(self.to_vec()?))
    }
}

impl<T: Element> DeviceMatrix<T> {
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

    /// The elements, row after row (what a kernel's `*const T` parameter takes).
    pub fn as_vec(&self) -> &DeviceVec<T> {
        &self.data
    }

    /// The elements, row after row, to write (what a kernel's `*mut T` parameter takes).
    pub fn as_vec_mut(&mut self) -> &mut DeviceVec<T> {
        &mut self.data
    }

    /// The elements, row after row, as a vector, without a copy ([`DeviceVec::into_matrix`]'s
    /// inverse).
    pub fn into_vec(self) -> DeviceVec<T> {
        self.data
    }

    /// Copies the matrix back to the host.
    pub fn to_array(&self) -> Result<Array2<T>> {
        let v = self.data.to_vec()?;
        Array2::from_shape_vec((self.rows, self.cols), v).map_err(|e| Error::InvalidArgument {
            op: "DeviceMatrix::to_array",
            detail: e.to_string(),
        })
    }
}
