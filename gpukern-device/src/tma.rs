//! The Hopper bulk tensor copy engine (TMA, sm_90): one thread asks for a whole 2-D box of a
//! row-major matrix in global memory to be copied into shared memory, described by a tensor map
//! the host encoded (`cuTensorMapEncodeTiled`); the copy completes on an [`crate::mbarrier`].
//! Parts of the box outside the matrix are filled with zeros, so ragged edges need no code.
//!
//! rustc cannot declare a `__grid_constant__` kernel parameter, so the tensor map lives in
//! global memory (64-byte aligned, written before the launch) and the kernel gets its address:
//! `cp.async.bulk.tensor` takes a generic address of a tensor map in global memory.
//!
//! The boxes here are 128-byte swizzled ([`SWIZZLE_128B`]): box rows of exactly 128 bytes, each
//! group of 8 rows (1024 bytes) with 16-byte chunk `c` of row `r` stored at chunk `c ^ r`, the
//! layout `wgmma` reads with a 128-byte-swizzle descriptor ([`crate::wgmma`]). The destination
//! must be 1024-byte aligned in the shared window, so that the pattern the copy writes (a
//! function of the address) is the one the descriptor assumes.
//!
//! In the simulator the tensor map is not read: [`Tensor2d`] also carries the matrix's pointer,
//! shape and box, and the copy is done when issued, element by element through checked loads and
//! writes of the asynchronous proxy (bounds-checked; ordered by the barrier, which the race
//! checker does not model: see `sim::shadow`'s `Touch::Proxy`), then counted down on the barrier.

/// The 128-byte swizzle of a shared-memory byte offset from a 1024-byte aligned base: bits 4..7
/// (the 16-byte chunk within a 128-byte row) XOR bits 7..10 (the row within 8 rows).
#[inline(always)]
pub const fn swizzle_128b(offset: usize) -> usize {
    offset ^ (((offset >> 7) & 7) << 4)
}

/// Bytes of one row of a 128-byte-swizzled box.
pub const SWIZZLE_128B: usize = 128;

/// A row-major matrix in global memory as the copy engine sees it: on the GPU only `map`, the
/// address of its tensor map (box `box_rows x box_cols`, 128-byte swizzle, zeros out of
/// bounds); in the simulator the rest, which must agree with what the host encoded.
#[derive(Clone, Copy)]
pub struct Tensor2d<T> {
    /// The tensor map in global memory (64-byte aligned, 128 bytes).
    pub map: *const u64,
    /// The matrix (simulator only).
    pub data: *const T,
    /// Its rows and columns (simulator only).
    pub rows: usize,
    /// Columns (the contiguous dimension).
    pub cols: usize,
    /// Elements from one row to the next (at least `cols`; simulator only: the tensor map's row
    /// stride, in bytes a multiple of 16).
    pub stride: usize,
    /// The box: rows and columns copied per call (simulator only; `box_cols * size_of::<T>()`
    /// is [`SWIZZLE_128B`]).
    pub box_rows: usize,
    /// Columns of the box.
    pub box_cols: usize,
}

/// Hints that the tensor map at `map` will be used soon (`prefetch.tensormap`); nothing in the
/// simulator.
#[inline(always)]
pub fn prefetch_map(map: *const u64) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a prefetch of a generic address; it does not fault.
    unsafe {
        core::arch::asm!("prefetch.tensormap [{map}];", map = in(reg64) map, options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    let _ = map;
}

/// Copies the box of `tensor` whose top-left element is at row `row`, column `col` into `dst`
/// (row-major, 128-byte swizzled), completing `box_rows * box_cols * size_of::<T>()` bytes on
/// `bar` (`cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes`). Issued
/// by one thread; elements outside the matrix land as zeros.
///
/// # Safety
/// * `T` is a plain number type (zero is all-zero bits).
/// * `dst` is 1024-byte aligned in this block's shared memory, with room for the box; nothing
///   reads or writes it until a wait on `bar` for this phase.
/// * `tensor.map` is a tensor map in global memory encoded for `tensor` (same matrix, shape,
///   box, 128-byte swizzle), 64-byte aligned; `bar` an initialised barrier of this block whose
///   current phase expects these bytes ([`crate::mbarrier::arrive_expect_tx`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
// `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub unsafe fn load_2d<T: Copy>(dst: *mut T, tensor: &Tensor2d<T>, bar: *mut u64, row: u32, col: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let dst = crate::async_copy::shared_address(dst);
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract. Not `nomem`: the copy writes shared memory.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{map}, {{{col}, {row}}}], [{bar}];",
                dst = in(reg32) dst,
                map = in(reg64) tensor.map,
                col = in(reg32) col,
                row = in(reg32) row,
                bar = in(reg32) bar,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let size = core::mem::size_of::<T>();
        assert_eq!(
            tensor.box_cols * size,
            SWIZZLE_128B,
            "a 128-byte-swizzled box has rows of 128 bytes"
        );
        let offset = dst as usize - crate::sim::device::shared_base() as usize;
        assert!(
            offset % 1024 == 0,
            "TMA destination at shared offset {offset}: a 128-byte-swizzled box must be 1024-byte aligned"
        );
        let (row, col) = (row as usize, col as usize);
        let base = dst.cast::<u8>();
        for r in 0..tensor.box_rows {
            for c in 0..tensor.box_cols {
                let (gr, gc) = (row + r, col + c);
                let v = if gr < tensor.rows && gc < tensor.cols {
                    // SAFETY: inside the matrix (the caller's contract).
                    unsafe { crate::mem::load(tensor.data, gr * tensor.stride + gc) }
                } else {
                    // SAFETY: `T` is a plain number (the caller's contract), all-zero bits 0.
                    unsafe { core::mem::zeroed() }
                };
                let at = swizzle_128b((r * tensor.box_cols + c) * size);
                // A write by the asynchronous proxy: checked for bounds, ordered by the barrier.
                let host = crate::sim::device::check_proxy_write(base.wrapping_add(at) as usize, 0, size);
                // SAFETY: the simulator checked that `host` holds a whole `T` of shared memory.
                unsafe { (host as *mut T).write_unaligned(v) };
            }
        }
        let bytes = (tensor.box_rows * tensor.box_cols * size) as u32;
        // SAFETY: the caller's contract.
        unsafe { crate::mbarrier::sim::update(bar, |s| s.complete_tx(bytes)) };
    }
}
