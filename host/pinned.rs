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

use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, result, sys};

use crate::buffer::{DeviceVec, Element, Storage, checked_len_of};
use crate::device::{Backend, CudaDevice, Gpu};
use crate::error::{DriverContext, Error, Result};
use crate::module::faults;

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
        faults::synced(&self.ctx, "waiting for a pinned copy", self.event.synchronize())
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
        crate::graph::refuse(self, "pinned", "an allocation (pinned)")?;
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
        crate::graph::refuse(self, "upload_pinned", "an allocation (upload_pinned)")?;
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
        crate::graph::refuse_copy(self, OP)?;
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
                        .map_err(|e| faults::error(&p.ctx, "copying pinned memory to the device", e))
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
        crate::graph::refuse_copy(self, OP)?;
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
                        faults::error(src.context(), "copying from the device to pinned memory", e)
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

/// Copies of at least this many bytes between pageable host memory and the device go through
/// pinned staging ([`Gpu::upload`], [`Gpu::download`]): below it the driver's own staging is as
/// fast and a copy is dominated by its fixed cost.
pub const STAGING_MIN_BYTES: usize = 1 << 20;

/// Bytes of each of the two staging buffers: large enough that each piece's DMA runs at bus
/// speed and each piece's host copy can be split over threads, small enough to keep the
/// page-locked memory per stream handle bounded (2 x 16 MiB).
pub const STAGING_CHUNK_BYTES: usize = 16 << 20;

/// Two page-locked buffers a large pageable copy alternates between: the host fills (or drains)
/// one while the device copies the other.
pub(crate) struct Staging {
    buffers: [PageLocked<u8>; 2],
}

impl CudaDevice {
    /// Runs `f` with this handle's staging buffers (made on first use), or returns `None` if
    /// they cannot be made (the caller copies pageable memory directly instead).
    fn with_staging<R>(&self, f: impl FnOnce(&Staging) -> Result<R>) -> Option<Result<R>> {
        let mut guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let a = PageLocked::new(&self.ctx, STAGING_CHUNK_BYTES).ok()?;
            let b = PageLocked::new(&self.ctx, STAGING_CHUNK_BYTES).ok()?;
            *guard = Some(Staging { buffers: [a, b] });
        }
        guard.as_ref().map(f)
    }
}

/// Host threads a staging copy of one piece uses at most: copies into fresh (never touched) or
/// pageable memory run at the speed of one core's page faults and memcpy, far below the bus.
const COPY_THREADS: usize = 8;

/// Bytes below which a piece is copied by one thread (a thread's start costs more than it saves).
const COPY_SPLIT_MIN_BYTES: usize = 1 << 20;

/// Copies `len` bytes from `src` to `dst` with up to [`COPY_THREADS`] threads, each a contiguous
/// share.
///
/// # Safety
/// `src` is valid for reads and `dst` for writes of `len` bytes, and they do not overlap.
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(COPY_THREADS)
        .min(len / COPY_SPLIT_MIN_BYTES)
        .max(1);
    if threads == 1 {
        // SAFETY: as the caller promised.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        return;
    }
    let share = len.div_ceil(threads);
    // Addresses cross the thread boundary as integers; each thread touches its own share only.
    let (src, dst) = (src as usize, dst as usize);
    std::thread::scope(|scope| {
        for t in 1..threads {
            let start = t * share;
            let n = share.min(len.saturating_sub(start));
            scope.spawn(move || {
                // SAFETY: `start + n <= len`; the shares are disjoint.
                unsafe {
                    std::ptr::copy_nonoverlapping((src + start) as *const u8, (dst + start) as *mut u8, n)
                }
            });
        }
        // SAFETY: the first share, on this thread.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, share.min(len)) };
    });
}

/// `data`'s bytes (an [`Element`] has no padding).
fn bytes_of<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `Element`s are plain data without padding; the bytes live as long as `data`.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(data)) }
}

impl Staging {
    /// Copies `src` into `dst` (of at least `src.len()` elements, on `stream`) through the two
    /// staging buffers in turn; returns once the last piece is queued.
    fn upload<T: Element>(
        &self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        src: &[T],
        dst: &mut CudaSlice<T>,
    ) -> Result<()> {
        const DURING: &str = "copying to the device through pinned staging";
        let (base, _record) = dst.device_ptr_mut(stream);
        for (i, piece) in bytes_of(src).chunks(STAGING_CHUNK_BYTES).enumerate() {
            let buffer = &self.buffers[i % 2];
            // The device has finished copying this buffer's previous piece.
            buffer.wait()?;
            // SAFETY: `piece.len() <= STAGING_CHUNK_BYTES`, the buffer's size; no copy uses it.
            let staged = unsafe {
                copy_bytes(piece.as_ptr(), buffer.ptr, piece.len());
                std::slice::from_raw_parts(buffer.ptr, piece.len())
            };
            let address = base + (i * STAGING_CHUNK_BYTES) as u64;
            // SAFETY: the piece lies inside `dst`; the staging memory lives in `self` and is not
            // touched again before its event (recorded below) completes.
            unsafe { result::memcpy_htod_async(address, staged, stream.cu_stream()) }
                .map_err(|e| faults::error(ctx, DURING, e))?;
            buffer.event.record(stream).during(DURING)?;
        }
        Ok(())
    }

    /// Copies `src` (on `stream`) to `out` through the two staging buffers: the device fills
    /// one while the host drains the other. Returns once `out` holds every element.
    ///
    /// # Safety
    /// `out` is valid for writes of `src.len()` elements.
    unsafe fn download<T: Element>(
        &self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        src: &CudaSlice<T>,
        out: *mut T,
    ) -> Result<()> {
        const DURING: &str = "copying from the device through pinned staging";
        let total = src.num_bytes();
        let pieces = total.div_ceil(STAGING_CHUNK_BYTES);
        let (base, _record) = src.device_ptr(stream);
        let piece_len = |i: usize| STAGING_CHUNK_BYTES.min(total - i * STAGING_CHUNK_BYTES);
        let issue = |i: usize| -> Result<()> {
            let buffer = &self.buffers[i % 2];
            // SAFETY: the piece fits the buffer; its previous piece was drained (below) before
            // this piece is issued.
            let staged = unsafe { std::slice::from_raw_parts_mut(buffer.ptr, piece_len(i)) };
            let address = base + (i * STAGING_CHUNK_BYTES) as u64;
            // SAFETY: the piece lies inside `src`, queued on its own stream.
            unsafe { result::memcpy_dtoh_async(staged, address, stream.cu_stream()) }
                .map_err(|e| faults::error(ctx, DURING, e))?;
            buffer.event.record(stream).during(DURING)
        };
        let out = out.cast::<u8>();
        if pieces > 0 {
            issue(0)?;
        }
        for i in 0..pieces {
            if i + 1 < pieces {
                issue(i + 1)?;
            }
            let buffer = &self.buffers[i % 2];
            buffer.wait()?;
            // SAFETY: the piece lies inside `out` (`total` bytes) and the staging buffer holds
            // it (its copy finished); the two do not overlap.
            unsafe { copy_bytes(buffer.ptr, out.add(i * STAGING_CHUNK_BYTES), piece_len(i)) };
        }
        Ok(())
    }
}

impl CudaDevice {
    /// Copies `src` into `dst` on this handle's stream: through pinned staging from
    /// [`STAGING_MIN_BYTES`] on, directly below (or if staging memory cannot be had).
    pub(crate) fn copy_htod<T: Element>(&self, src: &[T], dst: &mut CudaSlice<T>) -> Result<()> {
        if std::mem::size_of_val(src) >= STAGING_MIN_BYTES {
            let stream = self.stream.clone();
            if let Some(r) = self.with_staging(|s| s.upload(&self.ctx, &stream, src, dst)) {
                return r;
            }
        }
        if src.is_empty() {
            return Ok(());
        }
        let (address, _record) = dst.device_ptr_mut(&self.stream);
        // SAFETY: `dst` holds at least `src.len()` elements (the callers allocate it so), queued
        // on this stream; from pageable memory the driver has staged `src` when this returns.
        unsafe { result::memcpy_htod_async(address, src, self.stream.cu_stream()) }
            .during("copying to the device")
    }
}

impl Gpu {
    /// Copies `v` back to the host like [`DeviceVec::to_vec`], through this handle's pinned
    /// staging buffers when it is [`STAGING_MIN_BYTES`] or more (the free functions' path).
    /// The copy runs on `v`'s own stream.
    ///
    /// Errors: [`Error::WrongDevice`] if `v` belongs to another device; a kernel's fault.
    pub fn download<T: Element>(&self, v: &DeviceVec<T>) -> Result<Vec<T>> {
        crate::graph::refuse_copy(v, "download")?;
        match (&self.backend, &v.storage) {
            (Backend::Cuda(d), Storage::Cuda(s)) if Arc::ptr_eq(&d.ctx, s.context()) => {
                if s.num_bytes() < STAGING_MIN_BYTES {
                    return v.to_vec();
                }
                let mut out: Vec<T> = Vec::new();
                out.try_reserve_exact(v.len)
                    .map_err(|_| Error::OutOfMemory { bytes: s.num_bytes() })?;
                let stream = s.stream().clone();
                // SAFETY: `out` has room for `v.len` elements.
                let staged = d.with_staging(|staging| unsafe {
                    staging.download(&d.ctx, &stream, s, out.as_mut_ptr())
                });
                match staged {
                    Some(r) => {
                        r?;
                        // SAFETY: the download wrote all `v.len` elements.
                        unsafe { out.set_len(v.len) };
                        Ok(out)
                    }
                    None => v.to_vec(),
                }
            }
            (Backend::Simulator, Storage::Host(_)) => v.to_vec(),
            _ => Err(Error::WrongDevice { op: "download" }),
        }
    }
}
