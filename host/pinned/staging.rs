//! Pinned staging: large copies between pageable host memory and the device go through two
//! page-locked buffers of the stream handle (its cache slot, [`crate::cache`]), the host filling
//! (or draining) one while the device copies the other ([`Gpu::upload`], [`Gpu::download`]).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, result};

use super::PageLocked;
use crate::buffer::{DeviceVec, Element, Storage};
use crate::device::{Backend, CudaDevice, Gpu};
use crate::error::{DriverContext, Error, Result};
use crate::fault;

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
        let slot = self.cache::<Option<Staging>>();
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
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
                .map_err(|e| fault::error(ctx, DURING, e))?;
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
                .map_err(|e| fault::error(ctx, DURING, e))?;
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
        crate::capture::refuse(v, "download", "a copy to the host")?;
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
