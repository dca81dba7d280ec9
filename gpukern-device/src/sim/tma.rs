//! The simulator's tensor copies: the tensor checked as the driver would have checked its map,
//! the box's shared-memory side checked for the swizzle's alignment and its global side against
//! the buffer, then the box copied element by element as the copy engine does (outside the tensor:
//! zeros on a load, nothing on a store), each element of a load recorded with the barrier phase
//! it completes on and its place in the tensor. The device side is [`crate::tma`]: off the GPU
//! [`crate::tma::load_2d`] and [`crate::tma::store_2d`] call [`load`] and [`store`].

use super::device::{self, AsyncRead};
use super::hopper::violation;
use super::Rule;
use crate::tma::{swizzle_128b, Swizzle, Tensor2d, TiledMap, SWIZZLE_128B};

/// Alignment of a 128-byte-swizzled box in shared memory: the pattern repeats every 8 rows.
const SWIZZLE_ATOM: usize = 1024;

/// Stops the running thread unless `tensor` would have been encoded, and its box is one the
/// simulator models.
#[track_caller]
fn check_tensor<T>(tensor: &Tensor2d<T>) {
    let size = core::mem::size_of::<T>();
    let map = TiledMap {
        address: tensor.data as u64,
        element_bytes: size as u32,
        dims: &[tensor.cols as u64, tensor.rows as u64],
        strides: &[(tensor.stride * size) as u64],
        box_dims: &[tensor.box_cols as u32, tensor.box_rows as u32],
        element_strides: &[1, 1],
        swizzle: Swizzle::B128,
    };
    if let Err(e) = map.check() {
        device::fail(violation(
            Rule::TensorMap,
            format!(
                "the tensor map of `{}` ({} x {}, rows {} elements apart, box {} x {}): {e}; the \
                 driver refuses to encode it",
                buffer_name(tensor.data as usize),
                tensor.rows,
                tensor.cols,
                tensor.stride,
                tensor.box_rows,
                tensor.box_cols
            ),
        ));
    }
    if tensor.box_cols * size != SWIZZLE_128B {
        device::fail(violation(
            Rule::TensorMap,
            format!(
                "a box of {} columns of {size} bytes: the simulator models 128-byte-swizzled boxes \
                 of rows of exactly {SWIZZLE_128B} bytes",
                tensor.box_cols
            ),
        ));
    }
}

/// The name of the buffer `address` points into, for reports.
fn buffer_name(address: usize) -> &'static str {
    device::global_buffer(address).map_or("?", |(name, _, _)| name)
}

/// The shared offset of the box at `smem` (`what`: destination or source), stopping the running
/// thread unless it is 1024-byte aligned.
#[track_caller]
fn check_alignment(smem: usize, bytes: usize, what: &str) -> usize {
    let offset = device::shared_offset(smem, bytes);
    if !offset.is_multiple_of(SWIZZLE_ATOM) {
        device::fail(violation(
            Rule::TmaAlignment,
            format!(
                "a tensor copy's {what} at shared byte {offset}: a 128-byte-swizzled box starts \
                 {SWIZZLE_ATOM}-byte aligned (the swizzle is a function of the address, and the \
                 pattern repeats every 8 rows of 128 bytes)"
            ),
        ));
    }
    offset
}

/// Stops the running thread if the part of the box at (`row`, `col`) inside the tensor reaches
/// past the buffer the tensor lies in (the map describes memory the buffer does not hold).
#[track_caller]
fn check_bounds<T>(tensor: &Tensor2d<T>, row: usize, col: usize) {
    let size = core::mem::size_of::<T>();
    let rows = (row + tensor.box_rows).min(tensor.rows);
    let cols = (col + tensor.box_cols).min(tensor.cols);
    if rows <= row || cols <= col {
        return;
    }
    let last = (rows - 1) * tensor.stride + cols - 1;
    let fits = device::global_buffer(tensor.data as usize).is_some_and(|(_, bytes, offset)| {
        offset >= 0
            && (offset as usize)
                .checked_add((last + 1) * size)
                .is_some_and(|end| end <= bytes)
    });
    if !fits {
        let (name, len) = device::global_buffer(tensor.data as usize)
            .map_or(("?", 0), |(name, bytes, _)| (name, bytes / size));
        device::fail(violation(
            Rule::TmaBounds,
            format!(
                "a tensor copy of the box at row {row}, column {col} ({} x {}) of the tensor `{name}` \
                 ({} x {}, rows {} elements apart): inside the tensor the box reaches element \
                 {last}, past the end of buffer `{name}` ({len} elements); the tensor map describes \
                 more memory than the buffer holds",
                tensor.box_rows, tensor.box_cols, tensor.rows, tensor.cols, tensor.stride
            ),
        ));
    }
}

/// The bytes of `v`.
fn bytes_of<T: Copy>(v: &T) -> ([u8; 16], usize) {
    let size = core::mem::size_of::<T>();
    let mut out = [0u8; 16];
    // SAFETY: `T` is a plain number of at most 16 bytes (the copies' element types).
    unsafe { core::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), out.as_mut_ptr(), size.min(16)) };
    (out, size)
}

/// The checks of a load of the box at (`row`, `col`) of `tensor` into `dst` (the tensor as the
/// driver would encode it, the destination's alignment, the box's part inside the tensor inside
/// its buffer); returns the box's bytes.
#[track_caller]
fn check_load<T>(dst: *mut T, tensor: &Tensor2d<T>, row: usize, col: usize) -> usize {
    check_tensor(tensor);
    let box_bytes = tensor.box_rows * tensor.box_cols * core::mem::size_of::<T>();
    check_alignment(dst as usize, box_bytes, "destination");
    check_bounds(tensor, row, col);
    box_bytes
}

/// Calls `f(byte offset in the swizzled box, the element's bytes, its (row, column) in the
/// tensor)` for each element of the box at (`row`, `col`) of `tensor`, in order; zeros outside
/// the tensor. The box was checked ([`check_load`]).
#[track_caller]
fn each_element<T: Copy>(
    tensor: &Tensor2d<T>,
    row: usize,
    col: usize,
    mut f: impl FnMut(usize, ([u8; 16], usize), Option<(u32, u32)>),
) {
    let size = core::mem::size_of::<T>();
    for r in 0..tensor.box_rows {
        for c in 0..tensor.box_cols {
            let (gr, gc) = (row + r, col + c);
            let v = if gr < tensor.rows && gc < tensor.cols {
                // SAFETY: inside the tensor, which lies inside its buffer (checked).
                unsafe { crate::mem::load(tensor.data, gr * tensor.stride + gc) }
            } else {
                // SAFETY: `T` is a plain number (the caller's contract), all-zero bits 0.
                unsafe { core::mem::zeroed() }
            };
            let at = swizzle_128b((r * tensor.box_cols + c) * size);
            f(at, bytes_of(&v), Some((gr as u32, gc as u32)));
        }
    }
}

/// [`super::load_2d`] in the simulator.
#[track_caller]
pub(crate) fn load<T: Copy>(dst: *mut T, tensor: &Tensor2d<T>, bar: *mut u64, row: u32, col: u32) {
    let (row, col) = (row as usize, col as usize);
    let box_bytes = check_load(dst, tensor, row, col);
    let target = device::copy_target(bar as usize);
    let base = dst as usize;
    each_element(tensor, row, col, |at, (bytes, n), element| {
        device::copy_write(base + at, &bytes[..n], target, element)
    });
    device::copy_complete(bar as usize, box_bytes as u32);
}

/// [`crate::tma::load_2d_multicast`] in the simulator: the box read once, then landed in each
/// block of `mask` as that block's own copy would land.
#[track_caller]
pub(crate) fn load_multicast<T: Copy>(
    dst: *mut T,
    tensor: &Tensor2d<T>,
    bar: *mut u64,
    row: u32,
    col: u32,
    mask: u16,
) {
    let blocks = device::cluster_shape().1;
    if mask == 0 || u32::from(mask) >> blocks != 0 {
        device::fail(crate::sim::Violation::Panic {
            message: format!(
                "a multicast tensor copy to the blocks of mask {mask:#06b}: a cluster of {blocks} \
                 block(s) has ranks 0 to {} (and the mask names at least one)",
                blocks.saturating_sub(1)
            ),
        });
    }
    let (row, col) = (row as usize, col as usize);
    let box_bytes = check_load(dst, tensor, row, col);
    let mut elements = Vec::with_capacity(tensor.box_rows * tensor.box_cols);
    each_element(tensor, row, col, |at, bytes, element| {
        elements.push((at, bytes, element))
    });
    for rank in (0..blocks).filter(|r| mask >> r & 1 == 1) {
        device::copy_box_into(rank, dst as usize, bar as usize, &elements, box_bytes as u32);
    }
}

/// [`super::store_2d`] in the simulator: performed when issued.
#[track_caller]
pub(crate) fn store<T: Copy>(tensor: &Tensor2d<T>, src: *const T, row: u32, col: u32) {
    let size = core::mem::size_of::<T>();
    check_tensor(tensor);
    let box_bytes = tensor.box_rows * tensor.box_cols * size;
    check_alignment(src as usize, box_bytes, "source");
    device::check_async_read(src as usize, box_bytes, AsyncRead::Store);
    device::bulk_store(src as usize, box_bytes);
    let (row, col) = (row as usize, col as usize);
    check_bounds(tensor, row, col);
    let base = src.cast::<u8>();
    for r in 0..tensor.box_rows {
        for c in 0..tensor.box_cols {
            let (gr, gc) = (row + r, col + c);
            if gr >= tensor.rows || gc >= tensor.cols {
                continue; // the copy engine drops what lies outside the tensor
            }
            let at = swizzle_128b((r * tensor.box_cols + c) * size);
            // SAFETY: inside the box in shared memory (checked above).
            let v: T = unsafe { crate::mem::load(base.wrapping_add(at).cast::<T>(), 0) };
            // SAFETY: inside the tensor, inside its buffer (checked above).
            unsafe { crate::mem::store(tensor.data.cast_mut(), gr * tensor.stride + gc, v) };
        }
    }
}
