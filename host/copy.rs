//! Writing device memory that already exists: [`fill`](DeviceSliceMut::fill),
//! [`copy_from_host`](DeviceSliceMut::copy_from_host), [`copy_from`](DeviceSliceMut::copy_from)
//! (device to device), and reading a view back ([`DeviceSlice::to_vec`],
//! [`DeviceSlice::copy_to_host`]), on views and on whole vectors and matrices.
//!
//! Each is queued on the home stream of the buffer it writes (the [stream contract](crate::stream)).
//! A device-to-device copy from a buffer of another stream of the same device is ordered like a
//! launch that reads it: the copy waits for the work queued on the source's stream, and that
//! stream waits for the copy before its later work (a write, the source's free).

use cudarc::driver::{result, sys};

use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::error::{DriverContext, Error, Result};
use crate::fault;
use crate::stream::CrossStream;
use crate::view::{At, AtMut, CudaPlace, DeviceSlice, DeviceSliceMut};
use gpukern_device::launch::BufferArg;

/// `value`'s bytes (an [`Element`] has no padding).
fn bytes_of<T: Element>(value: &T) -> &[u8] {
    // SAFETY: `Element`s are plain data without padding; the bytes live as long as `value`.
    unsafe { std::slice::from_raw_parts((value as *const T).cast(), std::mem::size_of::<T>()) }
}

/// The widest unit (4, 2 or 1 bytes) that divides an element of `size` bytes at `address`.
fn unit_of(size: usize, address: u64) -> usize {
    [4, 2]
        .into_iter()
        .find(|&u| size % u == 0 && address % u as u64 == 0)
        .unwrap_or(1)
}

/// The `unit`-byte value that `bytes` repeats, if it is one value repeated (`[7, 0, 7, 0]` is
/// the 2-byte `7` twice), as the unit's little-endian integer.
fn repeated(bytes: &[u8], unit: usize) -> Option<u32> {
    let first = bytes.get(..unit)?;
    bytes
        .chunks(unit)
        .all(|c| c == first)
        .then(|| first.iter().rev().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)))
}

/// Sets `count` units of `unit` bytes at `address` to `value`, on `stream`.
///
/// # Safety
/// `address` holds `count * unit` writable bytes, aligned to `unit`, queued on `stream`.
unsafe fn memset(address: u64, unit: usize, value: u32, count: usize, stream: sys::CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    let r = unsafe {
        match unit {
            4 => sys::cuMemsetD32Async(address, value, count, stream).result(),
            2 => sys::cuMemsetD16Async(address, value as u16, count, stream).result(),
            _ => result::memset_d8_async(address, value as u8, count, stream),
        }
    };
    r.during("filling device memory")
}

/// `place`'s `len` elements set to `value`: one memset when `value` is one 4-, 2- or 1-byte
/// unit repeated (zero, every primitive of those sizes), else the first element written unit by
/// unit and then doubled by device-to-device copies (`log2(len)` of them). Nothing is read from
/// host memory after the call returns.
fn fill_cuda<T: Element>(place: &CudaPlace<'_>, len: usize, value: &T) -> Result<()> {
    let size = std::mem::size_of::<T>();
    if len == 0 || size == 0 {
        return Ok(());
    }
    place.ctx.bind_to_thread().during("filling device memory")?;
    let stream = place.stream.cu_stream();
    let bytes = bytes_of(value);
    let unit = unit_of(size, place.address);
    // SAFETY (every call below): the view holds `len * size` bytes from `place.address`, on its
    // home stream `stream`; `unit` divides the element size and the address.
    if let Some(v) = repeated(bytes, unit) {
        return unsafe { memset(place.address, unit, v, len * size / unit, stream) };
    }
    for (k, chunk) in bytes.chunks(unit).enumerate() {
        let v = repeated(chunk, unit).unwrap_or_default();
        unsafe { memset(place.address + (k * unit) as u64, unit, v, 1, stream) }?;
    }
    let mut done = 1;
    while done < len {
        let n = done.min(len - done);
        let dst = place.address + (done * size) as u64;
        unsafe { result::memcpy_dtod_async(dst, place.address, n * size, stream) }
            .during("filling device memory")?;
        done += n;
    }
    Ok(())
}

impl<'a, T: Element> DeviceSlice<'a, T> {
    /// Copies the view's elements back to the host (waits for the work queued on its buffer's
    /// stream before).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = Vec::new();
        out.try_reserve_exact(self.len).map_err(|_| Error::OutOfMemory {
            bytes: self.len * std::mem::size_of::<T>(),
        })?;
        out.resize(self.len, T::default());
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// Copies the view's elements into `out`, which must have exactly [`DeviceSlice::len`]
    /// elements.
    ///
    /// Errors: [`Error::ShapeMismatch`] for another length; [`Error::Capture`] inside a capture.
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<()> {
        const OP: &str = "DeviceSlice::copy_to_host";
        same_length(
            OP,
            self.len,
            out.len(),
            "the host buffer must have the view's length",
        )?;
        let place = self.at.cuda();
        crate::capture::refuse(&place.as_ref().map(|p| p.stream), OP, "a copy to the host")?;
        match (self.at, place) {
            (_, Some(_)) if self.len == 0 => Ok(()),
            (_, Some(p)) => {
                p.ctx.bind_to_thread().during("copying from the device")?;
                // SAFETY: the view holds `len` elements at `address`, `out` as many; the copy is
                // waited for below, before `out` is given back.
                let queued = unsafe { result::memcpy_dtoh_async(out, p.address, p.stream.cu_stream()) };
                fault::synced(
                    p.ctx,
                    "copying from the device",
                    queued.and_then(|()| p.stream.synchronize()),
                )
            }
            (At::Host(h), None) => {
                out.copy_from_slice(h);
                Ok(())
            }
            (At::Cuda { .. }, None) => unreachable!("a CUDA view has a device place"),
        }
    }
}

impl<'a, T: Element> DeviceSliceMut<'a, T> {
    /// Copies the view's elements back to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.as_slice().to_vec()
    }

    /// Sets every element of the view to `value`, on its buffer's stream (queued; a later
    /// download waits for it).
    ///
    /// Errors: [`Error::Capture`] inside a capture (fill before capturing).
    pub fn fill(&mut self, value: T) -> Result<()> {
        const OP: &str = "fill";
        let place = self.at.cuda();
        crate::capture::refuse(&place.as_ref().map(|p| p.stream), OP, "a fill")?;
        match (&mut self.at, place) {
            (_, Some(p)) => fill_cuda(&p, self.len, &value),
            (AtMut::Host(h), None) => {
                h.fill(value);
                Ok(())
            }
            (AtMut::Cuda { .. }, None) => unreachable!("a CUDA view has a device place"),
        }
    }

    /// Copies `data` (exactly [`DeviceSliceMut::len`] elements) into the view, on its buffer's
    /// stream after the work queued there; returns once `data` has been read, so it may be
    /// changed or dropped at once. (For large uploads, [`crate::Gpu::upload`] stages through
    /// pinned memory and [`DeviceVec::copy_from_pinned`] copies without waiting.)
    ///
    /// Errors: [`Error::ShapeMismatch`] for another length; [`Error::Capture`] inside a capture.
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        const OP: &str = "copy_from_host";
        same_length(
            OP,
            self.len,
            data.len(),
            "the host data must have the view's length",
        )?;
        let place = self.at.cuda();
        crate::capture::refuse(&place.as_ref().map(|p| p.stream), OP, "a copy from the host")?;
        match (&mut self.at, place) {
            (_, Some(_)) if self.len == 0 => Ok(()),
            (_, Some(p)) => {
                p.ctx.bind_to_thread().during("copying to the device")?;
                // SAFETY: the view holds `len` elements at `address`, `data` as many. `data` may
                // be page-locked (then the copy is truly asynchronous), so the stream is waited
                // for before `data`'s borrow ends.
                let queued = unsafe { result::memcpy_htod_async(p.address, data, p.stream.cu_stream()) };
                fault::synced(
                    p.ctx,
                    "copying to the device",
                    queued.and_then(|()| p.stream.synchronize()),
                )
            }
            (AtMut::Host(h), None) => {
                h.copy_from_slice(data);
                Ok(())
            }
            (AtMut::Cuda { .. }, None) => unreachable!("a CUDA view has a device place"),
        }
    }

    /// Copies `src` (a `&DeviceVec<T>`, `&DeviceMatrix<T>` or a view, of exactly
    /// [`DeviceSliceMut::len`] elements) into the view, device to device, queued on this view's
    /// buffer's stream. `src` may live on another stream of the same device (ordered as the
    /// [module](self) says).
    ///
    /// Errors: [`Error::ShapeMismatch`] for another length; [`Error::WrongDevice`] if `src` is
    /// of another device or context; [`Error::Capture`] inside a capture.
    pub fn copy_from<'s>(&mut self, src: impl BufferArg<DeviceSlice<'s, T>>) -> Result<()>
    where
        T: 's,
    {
        const OP: &str = "copy_from";
        let src = src.into_target();
        same_length(
            OP,
            self.len,
            src.len,
            "the source must have the destination's length",
        )?;
        let place = self.at.cuda();
        crate::capture::refuse(&place.as_ref().map(|p| p.stream), OP, "a device copy")?;
        match (&mut self.at, place, src.at, src.at.cuda()) {
            (_, Some(dst), _, Some(from)) if std::sync::Arc::ptr_eq(dst.ctx, from.ctx) => {
                if self.len == 0 {
                    return Ok(());
                }
                copy_dtod(&dst, &from, self.len * std::mem::size_of::<T>())
            }
            (AtMut::Host(h), None, At::Host(s), None) => {
                h.copy_from_slice(s);
                Ok(())
            }
            _ => Err(Error::WrongDevice { op: OP }),
        }
    }
}

/// Copies `bytes` from `from` to `dst` (one context) on `dst`'s stream, ordered against
/// `from`'s stream when it is another one.
fn copy_dtod(dst: &CudaPlace<'_>, from: &CudaPlace<'_>, bytes: usize) -> Result<()> {
    dst.ctx.bind_to_thread().during("copying on the device")?;
    let mut cross = CrossStream::default();
    let foreign = !std::sync::Arc::ptr_eq(dst.stream, from.stream);
    if foreign {
        cross.note(from.stream);
    }
    let joined = match foreign {
        true => Some(cross.before(dst.ctx, dst.stream)?),
        false => None,
    };
    // SAFETY: both places hold `bytes` bytes in one context; they do not overlap (the
    // destination is borrowed exclusively, the source shared); the copy is queued on the
    // destination's home stream, after the source's stream's work when that differs.
    unsafe { result::memcpy_dtod_async(dst.address, from.address, bytes, dst.stream.cu_stream()) }
        .map_err(|e| fault::error(dst.ctx, "copying on the device", e))?;
    if let Some(event) = joined {
        cross.after(event, dst.stream)?;
    }
    Ok(())
}

/// [`Error::ShapeMismatch`] unless `expected == got`.
fn same_length(op: &'static str, expected: usize, got: usize, rule: &'static str) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op,
            lhs: vec![expected],
            rhs: vec![got],
            rule,
        })
    }
}

impl<T: Element> DeviceVec<T> {
    /// Sets every element to `value` ([`DeviceSliceMut::fill`]; `v.slice_mut(range)?.fill(x)`
    /// for part of it).
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.view_mut().fill(value)
    }

    /// Copies `data`, of exactly [`DeviceVec::len`] elements, into the vector
    /// ([`DeviceSliceMut::copy_from_host`]).
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        self.view_mut().copy_from_host(data)
    }

    /// Copies `src` (a buffer or view of the same length) into the vector, device to device
    /// ([`DeviceSliceMut::copy_from`]).
    pub fn copy_from<'s>(&mut self, src: impl BufferArg<DeviceSlice<'s, T>>) -> Result<()>
    where
        T: 's,
    {
        self.view_mut().copy_from(src)
    }
}

impl<T: Element> DeviceMatrix<T> {
    /// Sets every element to `value` (`m.row_mut(i)?.fill(x)` for one row).
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.data.fill(value)
    }

    /// Copies row-major `data` of `rows * cols` elements into the matrix.
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        self.data.copy_from_host(data)
    }

    /// Copies `src`, a matrix of the same shape, into this one, device to device.
    ///
    /// Errors: [`Error::ShapeMismatch`] for another shape; as [`DeviceSliceMut::copy_from`].
    pub fn copy_from(&mut self, src: &DeviceMatrix<T>) -> Result<()> {
        if src.dim() != self.dim() {
            return Err(Error::ShapeMismatch {
                op: "DeviceMatrix::copy_from",
                lhs: vec![self.rows, self.cols],
                rhs: vec![src.rows, src.cols],
                rule: "the source must have the destination's shape",
            });
        }
        self.data.copy_from(&src.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_a_repeated_unit_only_when_every_unit_is_the_same() {
        assert_eq!(repeated(&0f32.to_le_bytes(), 4), Some(0));
        assert_eq!(repeated(&1.5f32.to_le_bytes(), 4), Some(1.5f32.to_bits()));
        assert_eq!(repeated(&0x0007_0007u32.to_le_bytes(), 2), Some(7));
        assert_eq!(repeated(&1.5f64.to_le_bytes(), 4), None);
        assert_eq!(repeated(&0u64.to_le_bytes(), 4), Some(0));
        assert_eq!(repeated(&[3, 3, 3], 1), Some(3));
        assert_eq!(repeated(&[3, 4, 3], 1), None);
    }

    #[test]
    fn the_unit_divides_the_size_and_the_address() {
        assert_eq!(unit_of(8, 256), 4);
        assert_eq!(unit_of(6, 256), 2);
        assert_eq!(unit_of(4, 258), 2);
        assert_eq!(unit_of(3, 256), 1);
        assert_eq!(unit_of(4, 257), 1);
    }
}
