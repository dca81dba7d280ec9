//! Views of device memory: [`DeviceSlice`] (read) and [`DeviceSliceMut`] (write), a range of a
//! [`DeviceVec`] or of the rows of a [`DeviceMatrix`], usable wherever a buffer is: as a kernel's
//! launch argument, the source or destination of a copy, a fill.
//!
//! ```
//! let gpu = gpukern::Gpu::simulator();
//! let mut x = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0])?;
//! x.slice_mut(1..4)?.fill(0.0)?;
//! assert_eq!(x.to_vec()?, [1.0, 0.0, 0.0, 0.0, 5.0]);
//! assert_eq!(x.slice(3..)?.to_vec()?, [0.0, 5.0]);
//! # Ok::<(), gpukern::Error>(())
//! ```
//!
//! A view borrows its buffer: a read view shares it, a write view holds it exclusively (two
//! disjoint write views of one buffer come from [`DeviceVec::split_at_mut`]). A kernel launched
//! on a view sees its first element at index 0; in the simulator its accesses are checked against
//! the view's bounds, so an access one past the view is reported even where the buffer goes on.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use gpukern_device::launch::BufferArg;

use crate::buffer::{DeviceMatrix, DeviceVec, Element, Storage};
use crate::error::{Error, Result};

/// A read-only view of `len` consecutive elements of a device buffer (see the [module](self)).
/// Cheap to copy.
pub struct DeviceSlice<'a, T> {
    pub(crate) at: At<'a, T>,
    pub(crate) len: usize,
}

/// A writable view of `len` consecutive elements of a device buffer (see the [module](self)).
pub struct DeviceSliceMut<'a, T> {
    pub(crate) at: AtMut<'a, T>,
    pub(crate) len: usize,
}

/// Where a read view's elements are.
pub(crate) enum At<'a, T> {
    /// Elements `start..start + len` of a CUDA allocation.
    Cuda { slice: &'a CudaSlice<T>, start: usize },
    /// The simulator's host memory, exactly the view's elements.
    Host(&'a [T]),
}

/// Where a write view's elements are. On CUDA the allocation is shared by reference: the
/// exclusive borrow of the buffer (or of its disjoint parts) is what the view holds.
pub(crate) enum AtMut<'a, T> {
    /// Elements `start..start + len` of a CUDA allocation.
    Cuda { slice: &'a CudaSlice<T>, start: usize },
    /// The simulator's host memory, exactly the view's elements.
    Host(&'a mut [T]),
}

impl<T> Clone for DeviceSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DeviceSlice<'_, T> {}

impl<T> Clone for At<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for At<'_, T> {}

/// Where a view's elements are on a CUDA device: the allocation's context and home stream, and
/// the device address of the view's first element.
pub(crate) struct CudaPlace<'a> {
    pub(crate) ctx: &'a Arc<CudaContext>,
    pub(crate) stream: &'a Arc<CudaStream>,
    pub(crate) address: u64,
}

/// `slice`'s element `start`, on the device.
fn cuda_place<T>(slice: &CudaSlice<T>, start: usize) -> CudaPlace<'_> {
    // Event tracking is off for gpukern's contexts (`Gpu::new`): this records nothing.
    let (base, _record) = slice.device_ptr(slice.stream());
    CudaPlace {
        ctx: slice.context(),
        stream: slice.stream(),
        address: base + (start * std::mem::size_of::<T>()) as u64,
    }
}

/// `range` of a buffer of `len` elements as `(start, end)`, or [`Error::InvalidArgument`]
/// naming the range and the length when it is reversed or reaches past the end.
pub(crate) fn bounds(op: &'static str, range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e)),
        _ => Err(Error::InvalidArgument {
            op,
            detail: format!(
                "range {:?}..{:?} of a buffer of {len} elements: a view must lie inside the buffer \
                 (start <= end <= {len})",
                range.start_bound(),
                range.end_bound()
            ),
        }),
    }
}

impl<'a, T> At<'a, T> {
    /// `start..end` of this view (in bounds: checked by the caller).
    fn sub(self, start: usize, end: usize) -> At<'a, T> {
        match self {
            At::Cuda { slice, start: s } => At::Cuda {
                slice,
                start: s + start,
            },
            At::Host(h) => At::Host(&h[start..end]),
        }
    }

    /// The device place of a CUDA view; `None` in the simulator.
    pub(crate) fn cuda(&self) -> Option<CudaPlace<'a>> {
        match *self {
            At::Cuda { slice, start } => Some(cuda_place(slice, start)),
            At::Host(_) => None,
        }
    }
}

impl<'a, T> AtMut<'a, T> {
    /// The device place of a CUDA view; `None` in the simulator.
    pub(crate) fn cuda(&self) -> Option<CudaPlace<'a>> {
        match *self {
            AtMut::Cuda { slice, start } => Some(cuda_place(slice, start)),
            AtMut::Host(_) => None,
        }
    }
}

impl<'a, T: Element> DeviceSlice<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements `range` of this view, as a view of the same buffer.
    ///
    /// Errors: [`Error::InvalidArgument`] unless `range` lies inside the view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a, T>> {
        let (start, end) = bounds("DeviceSlice::slice", range, self.len)?;
        Ok(DeviceSlice {
            at: self.at.sub(start, end),
            len: end - start,
        })
    }
}

impl<'a, T: Element> DeviceSliceMut<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same elements, read-only, for as long as this view is borrowed.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        let at = match &self.at {
            AtMut::Cuda { slice, start } => At::Cuda { slice, start: *start },
            AtMut::Host(h) => At::Host(h),
        };
        DeviceSlice { at, len: self.len }
    }

    /// The same elements, writable, for as long as this view is borrowed (to pass the view to a
    /// launch and keep it).
    pub fn reborrow(&mut self) -> DeviceSliceMut<'_, T> {
        let at = match &mut self.at {
            AtMut::Cuda { slice, start } => AtMut::Cuda { slice, start: *start },
            AtMut::Host(h) => AtMut::Host(h),
        };
        DeviceSliceMut { at, len: self.len }
    }

    /// The elements `range` of this view, writable, for as long as this view is borrowed.
    ///
    /// Errors: [`Error::InvalidArgument`] unless `range` lies inside the view.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (start, end) = bounds("DeviceSliceMut::slice_mut", range, self.len)?;
        Ok(self.reborrow().into_sub(start, end))
    }

    /// The view cut in two at `mid`: elements `..mid` and `mid..`, each writable.
    ///
    /// Errors: [`Error::InvalidArgument`] if `mid` is past the end.
    pub fn split_at_mut(self, mid: usize) -> Result<(DeviceSliceMut<'a, T>, DeviceSliceMut<'a, T>)> {
        bounds("DeviceSliceMut::split_at_mut", ..mid, self.len)?;
        let len = self.len;
        Ok(match self.at {
            AtMut::Cuda { slice, start } => (
                DeviceSliceMut {
                    at: AtMut::Cuda { slice, start },
                    len: mid,
                },
                DeviceSliceMut {
                    at: AtMut::Cuda {
                        slice,
                        start: start + mid,
                    },
                    len: len - mid,
                },
            ),
            AtMut::Host(h) => {
                let (a, b) = h.split_at_mut(mid);
                (
                    DeviceSliceMut {
                        at: AtMut::Host(a),
                        len: mid,
                    },
                    DeviceSliceMut {
                        at: AtMut::Host(b),
                        len: len - mid,
                    },
                )
            }
        })
    }

    /// Elements `start..end` of this view (in bounds: checked by the caller).
    fn into_sub(self, start: usize, end: usize) -> DeviceSliceMut<'a, T> {
        let at = match self.at {
            AtMut::Cuda { slice, start: s } => AtMut::Cuda {
                slice,
                start: s + start,
            },
            AtMut::Host(h) => AtMut::Host(&mut h[start..end]),
        };
        DeviceSliceMut { at, len: end - start }
    }
}

impl<T: Element> DeviceVec<T> {
    /// The whole vector as a read view.
    pub fn view(&self) -> DeviceSlice<'_, T> {
        let at = match &self.storage {
            Storage::Cuda(slice) => At::Cuda { slice, start: 0 },
            Storage::Host(h) => At::Host(h),
        };
        DeviceSlice { at, len: self.len }
    }

    /// The whole vector as a write view.
    pub fn view_mut(&mut self) -> DeviceSliceMut<'_, T> {
        let at = match &mut self.storage {
            Storage::Cuda(slice) => AtMut::Cuda { slice, start: 0 },
            Storage::Host(h) => AtMut::Host(h),
        };
        DeviceSliceMut { at, len: self.len }
    }

    /// Elements `range` as a read view: pass it to a kernel (its element 0 is `range.start`),
    /// copy it, read it back.
    ///
    /// Errors: [`Error::InvalidArgument`] unless `range` lies inside the vector.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        let (start, end) = bounds("DeviceVec::slice", range, self.len)?;
        Ok(DeviceSlice {
            at: self.view().at.sub(start, end),
            len: end - start,
        })
    }

    /// Elements `range` as a write view.
    ///
    /// Errors: [`Error::InvalidArgument`] unless `range` lies inside the vector.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (start, end) = bounds("DeviceVec::slice_mut", range, self.len)?;
        Ok(self.view_mut().into_sub(start, end))
    }

    /// The vector cut in two write views at `mid`: elements `..mid` and `mid..` (one kernel may
    /// read one half while writing the other).
    ///
    /// Errors: [`Error::InvalidArgument`] if `mid` is past the end.
    pub fn split_at_mut(&mut self, mid: usize) -> Result<(DeviceSliceMut<'_, T>, DeviceSliceMut<'_, T>)> {
        bounds("DeviceVec::split_at_mut", ..mid, self.len)?;
        self.view_mut().split_at_mut(mid)
    }
}

impl<T: Element> DeviceMatrix<T> {
    /// Row `row` as a read view of `cols` elements.
    ///
    /// Errors: [`Error::InvalidArgument`] if `row >= rows`.
    pub fn row(&self, row: usize) -> Result<DeviceSlice<'_, T>> {
        self.row_range(row..row.saturating_add(1))
            .map_err(|_| self.no_row("DeviceMatrix::row", row))
    }

    /// Row `row` as a write view of `cols` elements.
    ///
    /// Errors: [`Error::InvalidArgument`] if `row >= rows`.
    pub fn row_mut(&mut self, row: usize) -> Result<DeviceSliceMut<'_, T>> {
        let error = self.no_row("DeviceMatrix::row_mut", row);
        self.row_range_mut(row..row.saturating_add(1)).map_err(|_| error)
    }

    /// Rows `range` (row-major, `range.len() * cols` elements) as a read view.
    ///
    /// Errors: [`Error::InvalidArgument`] unless `range` lies inside the rows.
    pub fn row_range(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        let (start, end) = bounds("DeviceMatrix::row_range", range, self.rows)?;
        self.data.slice(start * self.cols..end * self.cols)
    }

    /// Rows `range` (row-major, `range.len() * cols` elements) as a write view.
    ///
    /// Errors: [`Error::InvalidArgument`] unless `range` lies inside the rows.
    pub fn row_range_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (start, end) = bounds("DeviceMatrix::row_range_mut", range, self.rows)?;
        let cols = self.cols;
        self.data.slice_mut(start * cols..end * cols)
    }

    fn no_row(&self, op: &'static str, row: usize) -> Error {
        Error::InvalidArgument {
            op,
            detail: format!("row {row} of a matrix of {} rows", self.rows),
        }
    }
}

// What a launch (and a copy) takes for a buffer argument: the buffers and their views.

#[diagnostic::do_not_recommend]
impl<'a, T> BufferArg<DeviceSlice<'a, T>> for &'a DeviceVec<T>
where
    T: Element,
{
    fn into_target(self) -> DeviceSlice<'a, T> {
        self.view()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, T> BufferArg<DeviceSlice<'a, T>> for &'a mut DeviceVec<T>
where
    T: Element,
{
    fn into_target(self) -> DeviceSlice<'a, T> {
        self.view()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, T> BufferArg<DeviceSliceMut<'a, T>> for &'a mut DeviceVec<T>
where
    T: Element,
{
    fn into_target(self) -> DeviceSliceMut<'a, T> {
        self.view_mut()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, T> BufferArg<DeviceSlice<'a, T>> for &'a DeviceMatrix<T>
where
    T: Element,
{
    fn into_target(self) -> DeviceSlice<'a, T> {
        self.data.view()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, T> BufferArg<DeviceSlice<'a, T>> for &'a mut DeviceMatrix<T>
where
    T: Element,
{
    fn into_target(self) -> DeviceSlice<'a, T> {
        self.data.view()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, T> BufferArg<DeviceSliceMut<'a, T>> for &'a mut DeviceMatrix<T>
where
    T: Element,
{
    fn into_target(self) -> DeviceSliceMut<'a, T> {
        self.data.view_mut()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, 'b: 'a, T> BufferArg<DeviceSlice<'a, T>> for DeviceSlice<'b, T> {
    fn into_target(self) -> DeviceSlice<'a, T> {
        self
    }
}

#[diagnostic::do_not_recommend]
impl<'a, 'b: 'a, T> BufferArg<DeviceSlice<'a, T>> for &DeviceSlice<'b, T> {
    fn into_target(self) -> DeviceSlice<'a, T> {
        *self
    }
}

#[diagnostic::do_not_recommend]
impl<'a, 'b: 'a, T> BufferArg<DeviceSliceMut<'a, T>> for DeviceSliceMut<'b, T> {
    fn into_target(self) -> DeviceSliceMut<'a, T> {
        self
    }
}

#[diagnostic::do_not_recommend]
impl<'a, 'b: 'a, T: Element> BufferArg<DeviceSliceMut<'a, T>> for &'a mut DeviceSliceMut<'b, T> {
    fn into_target(self) -> DeviceSliceMut<'a, T> {
        self.reborrow()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, 'b: 'a, T: Element> BufferArg<DeviceSlice<'a, T>> for &'a DeviceSliceMut<'b, T> {
    fn into_target(self) -> DeviceSlice<'a, T> {
        self.as_slice()
    }
}

#[diagnostic::do_not_recommend]
impl<'a, 'b: 'a, T: Element> BufferArg<DeviceSlice<'a, T>> for &'a mut DeviceSliceMut<'b, T> {
    fn into_target(self) -> DeviceSlice<'a, T> {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_against_the_length() {
        assert_eq!(bounds("t", 2..5, 5).ok(), Some((2, 5)));
        assert_eq!(bounds("t", .., 0).ok(), Some((0, 0)));
        assert_eq!(bounds("t", 5.., 5).ok(), Some((5, 5)));
        assert_eq!(bounds("t", ..=2, 5).ok(), Some((0, 3)));
        assert!(bounds("t", 2..6, 5).is_err());
        assert!(bounds("t", 6.., 5).is_err());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = bounds("t", 3..2, 5);
        assert!(reversed.is_err());
        assert!(bounds("t", ..=usize::MAX, 5).is_err());
        assert!(bounds("t", (Bound::Excluded(usize::MAX), Bound::Unbounded), 5).is_err());
    }
}
