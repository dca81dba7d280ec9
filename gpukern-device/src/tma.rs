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
//! writes of the asynchronous proxy, then counted down on the barrier. Checked there
//! ([`crate::sim::Rule`]): the tensor against the rules the driver encodes maps by
//! ([`TiledMap`], as `cuTensorMapEncodeTiled` would refuse it); the shared-memory side 1024-byte
//! aligned; the box's part inside the tensor inside the buffer the tensor lies in (parts outside
//! the tensor are zeros on a load and dropped on a store, as on the GPU); the barrier live and
//! its init fenced; and afterwards, every touch of a loaded element before the thread waited for
//! the phase it completes on, and every ordinary store a [`store_2d`] reads with no
//! `fence.proxy.async` ([`crate::bulk::fence_shared`]) since.

#[cfg(not(target_arch = "nvptx64"))]
mod map_rules;

#[cfg(not(target_arch = "nvptx64"))]
pub use map_rules::{MapError, Swizzle, TiledMap, MAP_ALIGN};

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
    crate::sim::tma::load(dst, tensor, bar, row, col);
}

/// [`load_2d`] to every block of the cluster whose rank is a bit of `mask`
/// (`cp.async.bulk.tensor.2d...multicast::cluster`): the box is read once and lands at `dst`'s
/// offset in each such block's shared memory, completing `box_rows * box_cols * size_of::<T>()`
/// bytes on the barrier at `bar`'s offset in that block. How the blocks of a cluster that share
/// an operand tile each fetch a part of it for all (cuBLAS's and CUTLASS's 2 x 1 clusters).
///
/// In the simulator each destination block's copy is checked as that block's own would be
/// (bounds, the barrier live and published to the cluster, the bytes against its phase, a write
/// over operands of products the issuing thread does not know retired: the knowledge comes
/// through the remote arrivals of [`crate::mbarrier::arrive_cluster`]), then performed.
///
/// # Safety
/// As [`load_2d`], for each block in `mask` (nonzero, ranks below the cluster's size): `dst` is
/// free there until its barrier's phase, that barrier is initialised, published to the cluster
/// (a cluster barrier after its init) and expects the bytes; compute capability 9.0.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load_2d_multicast<T: Copy>(
    dst: *mut T,
    tensor: &Tensor2d<T>,
    bar: *mut u64,
    [row, col]: [u32; 2],
    mask: u16,
) {
    #[cfg(target_arch = "nvptx64")]
    {
        let dst = crate::async_copy::shared_address(dst);
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract. Not `nomem`: the copy writes shared memory.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{dst}], [{map}, {{{col}, {row}}}], [{bar}], {mask};",
                dst = in(reg32) dst,
                map = in(reg64) tensor.map,
                col = in(reg32) col,
                row = in(reg32) row,
                bar = in(reg32) bar,
                mask = in(reg16) mask,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::tma::load_multicast(dst, tensor, bar, row, col, mask);
}

/// Copies the box at `src` (this block's shared memory, row-major, 128-byte swizzled, as
/// [`load_2d`] leaves a box) to the box of `tensor` whose top-left element is at row `row`,
/// column `col` (`cp.async.bulk.tensor.2d.global.shared::cta.bulk_group`); elements outside the
/// matrix are not written. Issued by one thread; completes in the background: commit it
/// ([`crate::bulk::commit_group`]) and wait for it ([`crate::bulk::wait_group_read`]) before
/// `src` is written again, and ([`crate::bulk::wait_group`]) before the kernel relies on the
/// global side. The simulator performs the store when it is issued.
///
/// # Safety
/// * `T` is a plain number type; `src` is 1024-byte aligned in this block's shared memory and
///   holds the box, written by this thread or by others before a block barrier, and made visible
///   to the copy engine by a `fence.proxy.async` ([`crate::bulk::fence_shared`]) after the writes
///   (by each writing thread, before that barrier).
/// * `tensor.map` is a tensor map in global memory encoded for `tensor` (as for [`load_2d`]),
///   whose matrix is writable device memory no other thread accesses until the store completes.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store_2d<T: Copy>(tensor: &Tensor2d<T>, src: *const T, row: u32, col: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let src = crate::async_copy::shared_address(src.cast_mut());
        // SAFETY: the caller's contract. Not `nomem`: the copy reads shared memory.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{map}, {{{col}, {row}}}], [{src}];",
                map = in(reg64) tensor.map,
                col = in(reg32) col,
                row = in(reg32) row,
                src = in(reg32) src,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::tma::store(tensor, src, row, col);
}

/// A 4-D tensor `[outer, planes, rows, cols]` in global memory (element strides `strides` along
/// outer, planes and rows; `cols` contiguous) as the copy engine sees it, read in 2-D boxes of
/// `box_rows x box_cols` (one plane of one outer index): on the GPU only `map`, the address of
/// its 4-D tensor map (box `box_cols, 1, box_rows, 1`, 128-byte swizzle, zeros out of bounds);
/// in the simulator the rest. Attention's `[batch, seq, heads, head_dim]` operands with any
/// 16-byte strides are such tensors (`outer` = batch, `planes` = heads, `rows` = seq; the
/// dimension order of the map is `cols, planes, rows, outer`, so that the strides grow with the
/// dimension as the driver's rules want for `[batch, seq, heads, head_dim]` layouts), so that a
/// box stops at the end of its own sequence (zeros past it) wherever the next one lies.
#[derive(Clone, Copy)]
pub struct Tensor4d<T> {
    /// The tensor map in global memory (64-byte aligned, 128 bytes).
    pub map: *const u64,
    /// The tensor's element `[0, 0, 0, 0]` (simulator only).
    pub data: *const T,
    /// Extents: outer, planes, rows, cols (simulator only).
    pub dims: [usize; 4],
    /// Element strides along outer, planes, rows (each a multiple of 16 bytes; simulator only).
    pub strides: [usize; 3],
    /// Rows of the box (simulator only).
    pub box_rows: usize,
    /// Columns of the box (`box_cols * size_of::<T>()` is [`SWIZZLE_128B`]; simulator only).
    pub box_cols: usize,
}

impl<T> Tensor4d<T> {
    /// The plane (`outer`, `plane`) as a 2-D matrix (what one box of this tensor reads; the
    /// simulator copies through it).
    #[cfg(not(target_arch = "nvptx64"))]
    fn plane(&self, outer: usize, plane: usize) -> Tensor2d<T> {
        Tensor2d {
            map: self.map,
            data: self
                .data
                .wrapping_add(outer * self.strides[0] + plane * self.strides[1]),
            rows: self.dims[2],
            cols: self.dims[3],
            stride: self.strides[2],
            box_rows: self.box_rows,
            box_cols: self.box_cols,
        }
    }
}

/// Copies the box of `tensor` at row `row`, column `col` of plane (`outer`, `plane`) into `dst`
/// (`cp.async.bulk.tensor.4d...mbarrier::complete_tx::bytes`), as [`load_2d`]: one thread issues
/// it, `box_rows * box_cols * size_of::<T>()` bytes complete on `bar`, elements outside the
/// tensor (rows past its `rows`) land as zeros. The simulator copies from the plane's 2-D view.
///
/// # Safety
/// As [`load_2d`], with `tensor.map` a 4-D map encoded for `tensor` (dims `cols, planes, rows,
/// outer`, box `box_cols, 1, box_rows, 1`), `outer` and `plane` inside it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load_4d<T: Copy>(
    dst: *mut T,
    tensor: &Tensor4d<T>,
    bar: *mut u64,
    [outer, plane, row, col]: [u32; 4],
) {
    #[cfg(target_arch = "nvptx64")]
    {
        let dst = crate::async_copy::shared_address(dst);
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract. Not `nomem`: the copy writes shared memory.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{map}, {{{col}, {plane}, {row}, {outer}}}], [{bar}];",
                dst = in(reg32) dst,
                map = in(reg64) tensor.map,
                col = in(reg32) col,
                row = in(reg32) row,
                plane = in(reg32) plane,
                outer = in(reg32) outer,
                bar = in(reg32) bar,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::tma::load(dst, &tensor.plane(outer as usize, plane as usize), bar, row, col);
}
