//! Tensor copies (TMA) of one `32 x 32` f32 box (rows of 128 bytes, 128-byte swizzle) from a
//! row-major matrix `x` of `rows x cols` (rows `cols` floats apart), whose tensor map is at `map`:
//! thread 0 fetches the box at (0, 0), and thread `t` sums row `t` of it into `y[t]` (rows past
//! the matrix are zeros: the copy engine fills them). And a tensor store: the threads write a box
//! into shared memory and thread 0 stores it to `y`.
//!
//! The correct kernels are [`tma_rowsum_twin`](fn@tma_rowsum_twin), [`tma_store_twin`](fn@tma_store_twin) and
//! [`tma_store_reuse_twin`](fn@tma_store_reuse_twin) (the box stored, rewritten and stored again;
//! [`tma_store_named_reuse_twin`](fn@tma_store_named_reuse_twin) the same between named barriers); each
//! `*_planted` kernel is one of them with one mistake. Launch: one block of [`THREADS`] threads, [`SHARED_BYTES`] of
//! dynamic shared memory; `y` holds [`BOX`] floats (the row sums) or `rows x cols` (the store).
//! The tensor maps: f32, box `BOX x BOX`, 128-byte swizzle, zero fill, encoded for the tensor
//! each kernel describes (a `*_planted` kernel's mistake included).

use gpukern_device::tma::{self, Tensor2d};
use gpukern_device::{barrier, bulk, kernel, mbarrier, mem, thread};

use crate::tiles::aligned;

/// Threads per block: one row of the box each.
pub const THREADS: u32 = 32;
/// Rows and columns of the box (32 f32: one 128-byte swizzle row).
pub const BOX: usize = 32;
/// Bytes of the box.
const BOX_BYTES: usize = BOX * BOX * 4;
/// Dynamic shared memory: alignment slack, a 1 KiB header holding the barrier, the box.
pub const SHARED_BYTES: u32 = (1024 + 1024 + BOX_BYTES) as u32;

/// The barrier, in the header.
fn bar() -> *mut u64 {
    aligned(0).cast()
}

/// The box, after the header (1024-byte aligned).
fn box_at() -> *mut f32 {
    aligned(1024).cast()
}

/// The tensor `rows x cols` of `x` (rows `cols` floats apart) with its map at `map`.
fn tensor(map: *const u64, x: *const f32, rows: usize, cols: usize) -> Tensor2d<f32> {
    Tensor2d {
        map,
        data: x,
        rows,
        cols,
        stride: cols,
        box_rows: BOX,
        box_cols: BOX,
    }
}

/// Thread 0 sets up the barrier (one arrival per phase), fences it; the block synchronises.
fn init_barrier() {
    if thread::thread_idx_x() == 0 {
        // SAFETY: 8 bytes of the header, used by nothing else.
        unsafe { mbarrier::init(bar(), 1) };
        mbarrier::fence_init();
    }
    thread::sync_threads();
}

/// Thread 0 asks for the box at (0, 0) of `t` into `dst`, completing on the barrier.
///
/// # Safety
/// `t`'s map is encoded for it; `dst` is the box's shared memory; the barrier is fresh.
unsafe fn fetch(t: &Tensor2d<f32>, dst: *mut f32) {
    if thread::thread_idx_x() == 0 {
        // SAFETY: the caller's contract.
        unsafe {
            mbarrier::arrive_expect_tx(bar(), BOX_BYTES as u32);
            tma::load_2d(dst, t, bar(), 0, 0);
        }
    }
}

/// The sum of row `r` of the swizzled box at `b`.
///
/// # Safety
/// The box has landed and this thread knows it.
unsafe fn row_sum(b: *const f32, r: usize) -> f32 {
    (0..BOX)
        // SAFETY: the caller's contract; inside the box.
        .map(|c| unsafe {
            mem::load(
                b.cast::<u8>()
                    .wrapping_add(tma::swizzle_128b(4 * (BOX * r + c)))
                    .cast::<f32>(),
                0,
            )
        })
        .sum()
}

/// The correct kernel: thread 0 fetches the box at (0, 0) of the `rows x cols` tensor; thread `t`
/// waits for it and stores the sum of its row `t` to `y[t]`.
///
/// # Safety
/// As the module documentation says (`x` holds `rows x cols` floats, the map encodes them).
#[kernel]
pub unsafe fn tma_rowsum_twin(map: *const u64, x: *const f32, rows: usize, cols: usize, y: *mut f32) {
    init_barrier();
    let t = thread::thread_idx_x() as usize;
    // SAFETY: the module's launch; the wait orders the box before the reads.
    unsafe {
        fetch(&tensor(map, x, rows, cols), box_at());
        mbarrier::wait_parity(bar(), 0);
        mem::store(y, t, row_sum(box_at(), t));
    }
}

/// [`tma_rowsum_twin`](fn@tma_rowsum_twin) describing the tensor with its dimensions swapped (`Rule::TmaBounds`):
/// `cols` rows of `rows` columns, still `cols` floats apart. For a matrix wider than tall the
/// described tensor is longer than the buffer, and the box's rows inside it reach past the end of
/// `x` (the copy engine zero-fills only outside the tensor the map describes).
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn tma_bounds_planted(map: *const u64, x: *const f32, rows: usize, cols: usize, y: *mut f32) {
    init_barrier();
    let t = thread::thread_idx_x() as usize;
    let swapped = Tensor2d {
        rows: cols,
        cols: rows,
        ..tensor(map, x, rows, cols)
    };
    // SAFETY: none: the tensor reaches past `x` (the planted bug).
    unsafe {
        fetch(&swapped, box_at());
        mbarrier::wait_parity(bar(), 0);
        mem::store(y, t, row_sum(box_at(), t));
    }
}

/// [`tma_rowsum_twin`](fn@tma_rowsum_twin) with the box right after the barrier, 16 bytes into the header
/// (`Rule::TmaAlignment`): a 128-byte-swizzled box must start 1024-byte aligned.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn tma_alignment_planted(map: *const u64, x: *const f32, rows: usize, cols: usize, y: *mut f32) {
    init_barrier();
    let t = thread::thread_idx_x() as usize;
    let misplaced = aligned(16).cast::<f32>();
    // SAFETY: none: the destination is misaligned (the planted bug).
    unsafe {
        fetch(&tensor(map, x, rows, cols), misplaced);
        mbarrier::wait_parity(bar(), 0);
        mem::store(y, t, row_sum(misplaced, t));
    }
}

/// [`tma_rowsum_twin`](fn@tma_rowsum_twin) reading its row before the wait (`Rule::TmaEarlyAccess`): each thread sums
/// its row, then waits for the barrier, then stores the sum.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn tma_early_planted(map: *const u64, x: *const f32, rows: usize, cols: usize, y: *mut f32) {
    init_barrier();
    let t = thread::thread_idx_x() as usize;
    // SAFETY: none: the row is read before the copy is known to have landed (the planted bug).
    unsafe {
        fetch(&tensor(map, x, rows, cols), box_at());
        let sum = row_sum(box_at(), t);
        mbarrier::wait_parity(bar(), 0);
        mem::store(y, t, sum);
    }
}

/// The correct store: thread `t` writes `1000 t + c` at column `c` of row `t` of the swizzled box
/// in shared memory and fences its writes for the copy engine (`bulk::fence_shared`); after a
/// block barrier thread 0 stores the box to (0, 0) of the `rows x cols` tensor `y` (the parts past
/// the tensor are dropped), commits and waits for the store.
///
/// # Safety
/// As the module documentation says (`y` holds `rows x cols` floats, the map encodes them).
#[kernel]
pub unsafe fn tma_store_twin(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { store_box::<true>(map, y, rows, cols) }
}

/// [`tma_store_twin`](fn@tma_store_twin) without the fence (`Rule::ProxyFence`): the threads' ordinary stores to the
/// box are read by the copy engine (the asynchronous proxy) with no `fence.proxy.async` between.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn tma_store_unfenced_planted(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { store_box::<false>(map, y, rows, cols) }
}

/// The box used twice: thread `t` writes `-1 - (1000 t + c)` at column `c` of row `t`, fences,
/// and after a block barrier thread 0 stores the box to `y`, commits and waits until the store
/// has read the box (`bulk::wait_group_read::<0>`); after a second barrier the threads write
/// `1000 t + c` over the box and it is stored again as [`tma_store_twin`](fn@tma_store_twin)
/// stores it: `y` ends as that twin leaves it.
///
/// # Safety
/// As the module documentation says (`y` holds `rows x cols` floats, the map encodes them).
#[kernel]
pub unsafe fn tma_store_reuse_twin(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { store_twice::<true, false>(map, y, rows, cols) }
}

/// [`tma_store_reuse_twin`](fn@tma_store_reuse_twin) without thread 0's
/// `wait_group_read` before the second barrier (`Rule::BulkStoreSource`): the threads write the
/// box again while the copy engine may still be reading it for the first store.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn tma_store_reuse_planted(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { store_twice::<false, false>(map, y, rows, cols) }
}

/// [`tma_store_reuse_twin`](fn@tma_store_reuse_twin) with named barrier 1 of the block's 32
/// threads ([`barrier::sync`]) where that twin has its first two block barriers: a warpgroup's
/// own barrier around a staging tile it stores, as a TMA-store epilogue has it.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn tma_store_named_reuse_twin(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { store_twice::<true, true>(map, y, rows, cols) }
}

/// [`tma_store_named_reuse_twin`](fn@tma_store_named_reuse_twin) without thread 0's
/// `wait_group_read` before the named barrier (`Rule::BulkStoreSource`).
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn tma_store_named_reuse_planted(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe { store_twice::<false, true>(map, y, rows, cols) }
}

/// The body of the reuse kernels, with or without the wait for the first store's reads, with
/// block barriers or named barrier 1 of all [`THREADS`].
///
/// # Safety
/// As the module documentation says.
unsafe fn store_twice<const WAIT: bool, const NAMED: bool>(
    map: *const u64,
    y: *mut f32,
    rows: usize,
    cols: usize,
) {
    let sync = || {
        if NAMED {
            // SAFETY: every thread of the block (its one warp), with the same id and count.
            unsafe { barrier::sync(1, THREADS) }
        } else {
            thread::sync_threads()
        }
    };
    let t = thread::thread_idx_x() as usize;
    fill_box(t, |c| -1.0 - (1000 * t + c) as f32);
    bulk::fence_shared();
    sync();
    if t == 0 {
        let out = tensor(map, y, rows, cols);
        // SAFETY: the box is written and fenced before the barrier.
        unsafe { tma::store_2d(&out, box_at(), 0, 0) };
        bulk::commit_group();
        if WAIT {
            bulk::wait_group_read::<0>();
        }
    }
    sync();
    // SAFETY: forwarded contract; the second store waits for itself.
    unsafe { store_box::<true>(map, y, rows, cols) };
    if t == 0 {
        // The first group, where the planted kernel did not wait for it above.
        bulk::wait_group::<0>();
    }
}

/// Thread `t` writes `value(c)` at column `c` of row `t` of the swizzled box.
fn fill_box(t: usize, value: impl Fn(usize) -> f32) {
    let b = box_at();
    for c in 0..BOX {
        let at = tma::swizzle_128b(4 * (BOX * t + c));
        // SAFETY: inside the box.
        unsafe { mem::store(b.cast::<u8>().wrapping_add(at).cast::<f32>(), 0, value(c)) };
    }
}

/// The body of the store kernels, with or without the fence.
///
/// # Safety
/// As the module documentation says.
unsafe fn store_box<const FENCED: bool>(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    let t = thread::thread_idx_x() as usize;
    let b = box_at();
    fill_box(t, |c| (1000 * t + c) as f32);
    if FENCED {
        bulk::fence_shared();
    }
    thread::sync_threads();
    if t == 0 {
        let out = tensor(map, y, rows, cols);
        // SAFETY: the box is written (and, in the twin, fenced) before the block barrier.
        unsafe { tma::store_2d(&out, b, 0, 0) };
        bulk::commit_group();
        bulk::wait_group::<0>();
    }
}
