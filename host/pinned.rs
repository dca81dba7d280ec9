//! Pinned (page-locked) host memory: [`PinnedBuffer`], the copies between it and the device,
//! and the pinned staging that large pageable copies go through.
//!
//! The device's copy engines read and write page-locked memory directly, at the speed of the
//! bus, and without holding up the host: a copy from or into a `PinnedBuffer` is queued on a
//! stream and returns at once, so it can overlap with kernels on other streams
//! ([`Gpu::pipelined`]). A copy from pageable memory (a `Vec`) goes through the driver's own
//! small staging buffers, one piece at a time, with the host copying each piece.
//!
//! # The contract
//! Every copy touching a `PinnedBuffer` records the buffer's event on the copy's stream, after
//! waiting for the copies recorded before it, so the buffer's copies happen in the order they
//! were queued and the event covers them all. The host's accesses wait for it:
//! [`PinnedBuffer::as_slice`] and [`PinnedBuffer::as_mut_slice`] return once every copy queued
//! so far has finished, and dropping the buffer waits too. Safe code cannot read a result
//! before its download has landed, nor overwrite data an upload is still reading.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr, DevicePtrMut, result, sys};

use crate::buffer::{DeviceMatrix, DeviceVec, Element, Storage, checked_len_of};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Error, Result};
use crate::fault;

mod staging;

pub use staging::{STAGING_CHUNK_BYTES, STAGING_MIN_BYTES};

/// A host buffer of `T` in page-locked memory from the driver (plain host memory in the
/// simulator): the fast way to move data to and from the device, and the one that overlaps
/// with compute. Made by [`Gpu::pinned`] or [`Gpu::pinned_from`].
///
/// Page-locked memory is taken from the operating system for good until the buffer is dropped:
/// allocate a few large buffers and reuse them, not one per copy.
pub struct PinnedBuffer<T: Element> {
    storage: Pinned<T>,
}

enum Pinned<T> {
    Cuda(PageLocked<T>),
    Host(Vec<T>),
}

/// `len` elements of page-locked memory of one context, with the event of its last copy.
pub(crate) struct PageLocked<T> {
    /// Null when `len` is 0 (the driver refuses empty allocations).
    ptr: *mut T,
    len: usize,
    ctx: Arc<CudaContext>,
    /// Recorded after every copy touching the memory, on that copy's stream.
    event: CudaEvent,
    /// Held from a copy's wait for `event` to its record of it, so that copies queued from
    /// several threads are ordered one after the other and `event` covers them all.
    order: Mutex<()>,
}

// SAFETY: the memory is owned by the buffer (like a `Vec<T>`); host access goes through `&`/
// `&mut` after waiting for the device's copies, and the copies are ordered under `order`.
unsafe impl<T: Send> Send for PageLocked<T> {}
// SAFETY: as above; shared access only reads, or queues device copies under `order`.
unsafe impl<T: Sync> Sync for PageLocked<T> {}

impl<T> Drop for PageLocked<T> {
    fn drop(&mut self) {
        // The device may still be copying from or into the memory.
        let _ = self.event.synchronize();
        if !self.ptr.is_null() {
            let _ = self.ctx.bind_to_thread();
            // SAFETY: allocated by `malloc_host` in `PageLocked::new`, freed once, after every
            // copy touching it finished.
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}

impl<T: Element> PageLocked<T> {
    /// `len` zeroed elements of page-locked memory.
    fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<PageLocked<T>> {
        const OP: &str = "allocating pinned host memory";
        checked_len_of::<T>(OP, &[len])?;
        let bytes = len * std::mem::size_of::<T>();
        let event = ctx.new_event(None).during(OP)?;
        let ptr = if bytes == 0 {
            std::ptr::null_mut()
        } else {
            ctx.bind_to_thread().during(OP)?;
            // SAFETY: a plain allocation; zeroed below before anything reads it. PORTABLE: the
            // memory is page-locked for every context, as any pinned memory of the process.
            let ptr =
                unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }.map_err(
                    |e| match e.0 {
                        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY | sys::CUresult::CUDA_ERROR_INVALID_VALUE => {
                            Error::TooLarge {
                                op: "PinnedBuffer",
                                detail: format!(
                                    "the driver could not page-lock {bytes} bytes of host memory ({:?}): \
                                 use a smaller pinned buffer and copy in pieces",
                                    e.0
                                ),
                            }
                        }
                        _ => Error::Driver {
                            during: OP,
                            source: e,
                        },
                    },
                )?;
            let ptr = ptr.cast::<T>();
            // SAFETY: `bytes` bytes were just allocated at `ptr`, which the driver aligns to at
            // least a page; every bit pattern, zero included, is a valid `T` (`Element`).
            unsafe { std::ptr::write_bytes(ptr, 0, len) };
            ptr
        };
        Ok(PageLocked {
            ptr,
            len,
            ctx: ctx.clone(),
            event,
            order: Mutex::new(()),
        })
    }

    /// The elements, once every copy queued so far has finished.
    fn as_slice(&self) -> Result<&[T]> {
        self.wait()?;
        if self.ptr.is_null() {
            return Ok(&[]);
        }
        // SAFETY: `len` initialised elements owned by `self`; no copy writes them any more, and
        // new copies into them need `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The elements to write, once every copy queued so far has finished.
    fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.wait()?;
        if self.ptr.is_null() {
            return Ok(&mut []);
        }
        // SAFETY: as in `as_slice`, and `&mut self` excludes every other access and copy.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    fn wait(&self) -> Result<()> {
        fault::synced(&self.ctx, "waiting for a pinned copy", self.event.synchronize())
    }

    /// Runs `copy` on `stream` ordered after every earlier copy touching this memory, and
    /// records it as the latest.
    fn ordered(
        &self,
        stream: &CudaStream,
        during: &'static str,
        copy: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let _order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        stream.wait(&self.event).during(during)?;
        copy()?;
        self.event.record(stream).during(during)
    }
}

impl Gpu {
    /// `len` zeros in pinned host memory of this device (plain host memory in the simulator).
    ///
    /// Errors: [`Error::TooLarge`] past `isize::MAX` bytes, or when the driver cannot
    /// page-lock that much memory; [`Error::OutOfMemory`] in the simulator.
    pub fn pinned<T: Element>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        crate::capture::refuse(self, "pinned", "an allocation (pinned)")?;
        let storage = match &self.backend {
            Backend::Cuda(d) => Pinned::Cuda(PageLocked::new(&d.ctx, len)?),
            Backend::Simulator => {
                checked_len_of::<T>("PinnedBuffer", &[len])?;
                let mut v = Vec::new();
                v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
                    bytes: len * std::mem::size_of::<T>(),
                })?;
                v.resize(len, T::default());
                Pinned::Host(v)
            }
        };
        Ok(PinnedBuffer { storage })
    }

    /// A copy of `data` in pinned host memory (see [`Gpu::pinned`]).
    pub fn pinned_from<T: Element>(&self, data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut p = self.pinned(data.len())?;
        p.as_mut_slice()?.copy_from_slice(data);
        Ok(p)
    }

    /// Copies a pinned buffer to a new device vector, on this handle's stream; returns once
    /// the copy is queued (the source stays borrowed-readable, and its next host write waits).
    ///
    /// Errors: [`Error::WrongDevice`] if `src` belongs to another device; allocation errors.
    pub fn upload_pinned<T: Element>(&self, src: &PinnedBuffer<T>) -> Result<DeviceVec<T>> {
        crate::capture::refuse(self, "upload_pinned", "an allocation (upload_pinned)")?;
        let mut v = match &self.backend {
            Backend::Cuda(d) => DeviceVec {
                storage: Storage::Cuda(d.alloc(src.len())?),
                len: src.len(),
            },
            Backend::Simulator => self.zeros_of(src.len())?,
        };
        v.copy_from_pinned(src, 0)?;
        Ok(v)
    }
}

impl<T: Element> PinnedBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.storage {
            Pinned::Cuda(p) => p.len,
            Pinned::Host(v) => v.len(),
        }
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements, after waiting for every copy into them queued so far.
    ///
    /// Errors: a kernel's fault that surfaces while waiting ([`Error::KernelFailed`]).
    pub fn as_slice(&self) -> Result<&[T]> {
        match &self.storage {
            Pinned::Cuda(p) => p.as_slice(),
            Pinned::Host(v) => Ok(v),
        }
    }

    /// The elements to write, after waiting for every copy from or into them queued so far.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        match &mut self.storage {
            Pinned::Cuda(p) => p.as_mut_slice(),
            Pinned::Host(v) => Ok(v),
        }
    }

    /// A copy of the elements in a `Vec` (waits like [`PinnedBuffer::as_slice`]).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.as_slice()?.to_vec())
    }
}

/// Checks that `[offset, offset + len)` lies in a pinned buffer of `pinned` elements.
fn check_range(op: &'static str, pinned: usize, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= pinned => Ok(()),
        _ => Err(Error::ShapeMismatch {
            op,
            lhs: vec![offset, len],
            rhs: vec![pinned],
            rule: "offset + the device vector's length must not exceed the pinned buffer's length",
        }),
    }
}

impl<T: Element> DeviceVec<T> {
    /// Overwrites this vector with `src[offset..offset + self.len()]`, queued on the stream of
    /// the `Gpu` that made this vector; returns once queued.
    ///
    /// Errors: [`Error::ShapeMismatch`] if the range is past `src`'s end; [`Error::WrongDevice`]
    /// if `src` belongs to another device.
    pub fn copy_from_pinned(&mut self, src: &PinnedBuffer<T>, offset: usize) -> Result<()> {
        const OP: &str = "copy_from_pinned";
        crate::capture::refuse(self, OP, "a copy to the host")?;
        check_range(OP, src.len(), offset, self.len)?;
        match (&mut self.storage, &src.storage) {
            (Storage::Cuda(dst), Pinned::Cuda(p)) if Arc::ptr_eq(dst.context(), &p.ctx) => {
                if self.len == 0 {
                    return Ok(());
                }
                let stream = dst.stream().clone();
                p.ordered(&stream, "copying pinned memory to the device", || {
                    // SAFETY: `offset + len <= p.len` (checked above); the memory lives until
                    // `p`'s drop, which waits for this copy.
                    let host = unsafe { std::slice::from_raw_parts(p.ptr.add(offset), self.len) };
                    let (address, _record) = dst.device_ptr_mut(&stream);
                    // SAFETY: `address` holds `len` elements of `T`, queued on its own stream.
                    unsafe { result::memcpy_htod_async(address, host, stream.cu_stream()) }
                        .map_err(|e| fault::error(&p.ctx, "copying pinned memory to the device", e))
                })
            }
            (Storage::Host(dst), Pinned::Host(v)) => {
                dst.copy_from_slice(&v[offset..offset + self.len]);
                Ok(())
            }
            _ => Err(Error::WrongDevice { op: OP }),
        }
    }

    /// Copies this vector into `dst[offset..offset + self.len()]`, queued on the stream of the
    /// `Gpu` that made this vector after the work queued there before; returns once queued.
    /// [`PinnedBuffer::as_slice`] waits for it.
    ///
    /// Errors: [`Error::ShapeMismatch`] if the range is past `dst`'s end; [`Error::WrongDevice`]
    /// if `dst` belongs to another device.
    pub fn copy_to_pinned(&self, dst: &mut PinnedBuffer<T>, offset: usize) -> Result<()> {
        const OP: &str = "copy_to_pinned";
        crate::capture::refuse(self, OP, "a copy to the host")?;
        check_range(OP, dst.len(), offset, self.len)?;
        match (&self.storage, &mut dst.storage) {
            (Storage::Cuda(src), Pinned::Cuda(p)) if Arc::ptr_eq(src.context(), &p.ctx) => {
                if self.len == 0 {
                    return Ok(());
                }
                let stream = src.stream().clone();
                let (ptr, len) = (p.ptr, self.len);
                p.ordered(&stream, "copying from the device to pinned memory", || {
                    // SAFETY: `offset + len <= p.len` (checked above); `&mut dst` excludes other
                    // host access until the copy is queued, and later host access waits for it.
                    let host = unsafe { std::slice::from_raw_parts_mut(ptr.add(offset), len) };
                    let (address, _record) = src.device_ptr(&stream);
                    // SAFETY: `address` holds `len` elements of `T`, queued on its own stream.
                    unsafe { result::memcpy_dtoh_async(host, address, stream.cu_stream()) }.map_err(|e| {
                        fault::error(src.context(), "copying from the device to pinned memory", e)
                    })
                })
            }
            (Storage::Host(v), Pinned::Host(out)) => {
                out[offset..offset + v.len()].copy_from_slice(v);
                Ok(())
            }
            _ => Err(Error::WrongDevice { op: OP }),
        }
    }
}

impl Gpu {
    /// Runs `compute` on a batch in chunks, overlapping the copies of one chunk with the compute
    /// of another: chunk `i` is uploaded from `input`, computed and downloaded into `output` on
    /// stream `i % streams` (each stream with its own device buffers, allocated once), so while
    /// one stream computes, another uploads the next chunk and a third downloads the previous
    /// one. With `streams = 1` it is the same work without overlap.
    ///
    /// `input` holds the chunks one after another, each a row-major `in_shape` matrix; `output`
    /// receives the results the same way, each `out_shape`. `compute(gpu, x, y)` must queue the
    /// chunk's work on `gpu` (the chunk's stream) writing `y`, e.g.
    /// `|g, x, y| g.matmul_into(x, &b, y, MatmulAlgorithm::default())` with `b` a matrix of `self` shared by every chunk.
    /// Returns once everything is queued; [`PinnedBuffer::as_slice`] on `output` (or
    /// [`Gpu::synchronize`] on the stream handles) waits for the results.
    ///
    /// Errors: [`Error::InvalidArgument`] for no streams, an empty chunk shape, or an input that
    /// is not a whole number of chunks; [`Error::ShapeMismatch`] if `output` does not hold as
    /// many `out_shape` chunks; [`Error::WrongDevice`] if a pinned buffer is of another device;
    /// `compute`'s errors.
    pub fn pipelined<T, U, F>(
        &self,
        streams: usize,
        input: &PinnedBuffer<T>,
        in_shape: (usize, usize),
        output: &mut PinnedBuffer<U>,
        out_shape: (usize, usize),
        mut compute: F,
    ) -> Result<()>
    where
        T: Element,
        U: Element,
        F: FnMut(&Gpu, &DeviceMatrix<T>, &mut DeviceMatrix<U>) -> Result<()>,
    {
        const OP: &str = "pipelined";
        let in_len = checked_len_of::<T>(OP, &[in_shape.0, in_shape.1])?;
        let out_len = checked_len_of::<U>(OP, &[out_shape.0, out_shape.1])?;
        if streams == 0 || in_len == 0 || out_len == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "{streams} streams, chunks of {in_shape:?} in and {out_shape:?} out: needs at \
                     least one stream and non-empty chunks"
                ),
            });
        }
        if input.len() % in_len != 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the input's {} elements are not a whole number of {in_shape:?} chunks",
                    input.len()
                ),
            });
        }
        let chunks = input.len() / in_len;
        if output.len() != chunks * out_len {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: vec![chunks, out_shape.0, out_shape.1],
                rhs: vec![output.len()],
                rule: "the output must hold one out_shape chunk per input chunk",
            });
        }
        let streams = streams.min(chunks.max(1));
        let mut lanes = Vec::with_capacity(streams);
        for _ in 0..streams {
            let gpu = self.stream()?;
            let x = gpu.zeros_matrix_of::<T>(in_shape.0, in_shape.1)?;
            let y = gpu.zeros_matrix_of::<U>(out_shape.0, out_shape.1)?;
            lanes.push((gpu, x, y));
        }
        for i in 0..chunks {
            let (gpu, x, y) = &mut lanes[i % streams];
            x.as_vec_mut().copy_from_pinned(input, i * in_len)?;
            compute(gpu, x, y)?;
            y.as_vec().copy_to_pinned(output, i * out_len)?;
        }
        Ok(())
    }
}
