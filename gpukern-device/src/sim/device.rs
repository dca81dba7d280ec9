//! The simulator's side of the device helpers in [`crate::gpu`]: the running thread's indices,
//! barriers, warp shuffles, shared memory and checked accesses, all through the block the OS
//! thread runs now.

use std::cell::Cell;
use std::panic::Location;

pub(crate) use super::block::AsyncRead;
use super::block::{BlockState, PollOn, Suspend};
use super::hopper::groups::Product;
use super::release::Handoff;
use super::{Access, Violation};

thread_local! {
    /// The block this OS thread is simulating, or null outside a launch.
    static BLOCK: Cell<*const BlockState<'static>> = const { Cell::new(std::ptr::null()) };
}

/// Restores the previous block when a block's run ends.
pub(super) struct Entered(*const BlockState<'static>);

impl Drop for Entered {
    fn drop(&mut self) {
        BLOCK.with(|b| b.set(self.0));
    }
}

/// Makes `state` the block that the device helpers on this OS thread act on.
pub(super) fn enter(state: &BlockState<'_>) -> Entered {
    let ptr: *const BlockState<'static> = std::ptr::from_ref(state).cast();
    Entered(BLOCK.with(|b| b.replace(ptr)))
}

/// Calls `f` with the current block.
///
/// # Panics
/// When called outside a simulated launch: kernels run only through [`super::Launch::run`].
fn with_block<R>(f: impl FnOnce(&BlockState<'_>) -> R) -> R {
    let ptr = BLOCK.with(Cell::get);
    assert!(
        !ptr.is_null(),
        "a gpukern device helper was called outside a simulated kernel launch"
    );
    // SAFETY: `enter` set the pointer, and its guard clears it before the block state is dropped.
    f(unsafe { &*ptr })
}

/// `(threadIdx.x, threadIdx.y, threadIdx.z)` of the running thread.
pub fn thread_idx() -> (u32, u32, u32) {
    with_block(|b| {
        let d = b.thread_dim(b.current.get());
        (d.x, d.y, d.z)
    })
}

/// `(blockIdx.x, blockIdx.y, blockIdx.z)`.
pub fn block_idx() -> (u32, u32, u32) {
    with_block(|b| (b.block_idx.x, b.block_idx.y, b.block_idx.z))
}

/// `(blockDim.x, blockDim.y, blockDim.z)`.
pub fn block_dim() -> (u32, u32, u32) {
    let d = with_block(|b| b.info.config.block);
    (d.x, d.y, d.z)
}

/// `(gridDim.x, gridDim.y, gridDim.z)`.
pub fn grid_dim() -> (u32, u32, u32) {
    let d = with_block(|b| b.info.config.grid);
    (d.x, d.y, d.z)
}

/// Suspends the running thread at the barrier of the caller's source location.
#[track_caller]
pub fn sync_threads() {
    let at = Location::caller();
    let yielder = with_block(|b| b.current_yielder());
    // SAFETY: the yielder lives on the running coroutine's stack, which is the one executing here.
    unsafe { &*yielder }.suspend(Suspend::Barrier(at));
}

/// [`crate::barrier::sync`] (`waits`) and [`crate::barrier::arrive`]: counts the running thread
/// in at named barrier `id` for `threads` threads; a waiting thread suspends until the barrier
/// completes.
#[track_caller]
pub fn named_barrier(id: u32, threads: u32, waits: bool) {
    let at = Location::caller();
    if let Some(wait) = checked(|b| b.named_arrive(id, threads, waits, at)) {
        let yielder = with_block(|b| b.current_yielder());
        // SAFETY: the yielder lives on the running coroutine's stack, which is the one executing
        // here.
        unsafe { &*yielder }.suspend(Suspend::Named { at, wait });
    }
}

/// A warp shuffle: deposits `value`, waits until every lane of the running thread's warp has
/// reached the shuffle at the caller's source location, and returns the value that lane
/// `src_lane` deposited (the thread's own `value` when `src_lane` is 32 or more).
#[track_caller]
pub fn warp_shuffle(value: u32, src_lane: u32) -> u32 {
    let at = Location::caller();
    let yielder = with_block(|b| b.current_yielder());
    // SAFETY: the yielder lives on the running coroutine's stack, which is the one executing here.
    unsafe { &*yielder }.suspend(Suspend::Warp { at, value, src_lane });
    with_block(|b| b.shuffled())
}

/// Waits until every lane of the running thread's warp has reached the caller's source location:
/// a shuffle that moves nothing, the check of a warp-collective call without data
/// ([`crate::mbarrier::warp_arrive`]). Its reports name it as a shuffle at that location.
#[track_caller]
pub fn warp_converge() {
    warp_shuffle(0, u32::MAX);
}

/// [`crate::dependent::wait`]: marks the running thread as having waited (a dependent launch
/// reports its global accesses before that); the launches before it have all finished.
pub fn dependent_wait() {
    with_block(|b| b.dependent_waited());
}

/// The running thread's linear index in its block (x fastest).
pub fn thread_linear() -> u32 {
    with_block(|b| b.current.get())
}

/// The running thread's lane: its linear index in the block modulo 32.
pub fn lane_id() -> u32 {
    with_block(|b| b.current.get() % super::WARP_SIZE)
}

/// The start of the current block's dynamic shared memory.
pub fn shared_base() -> *mut u8 {
    with_block(|b| b.shared_base())
}

/// Checks an access of one `size`-byte element at index `i` from pointer `base` and returns the
/// host address to access; on a violation, records it and stops the running thread.
pub fn check_access(base: usize, i: usize, size: usize, access: Access) -> usize {
    with_block(|b| match b.check(base, i, size, access) {
        Ok(address) => address,
        Err(violation) => b.fail(violation),
    })
}

/// A read-only load (`ld.global.nc`, [`crate::vector::LoadHint::ReadOnly`]) at `address`:
/// reported when it points into the block's shared memory, or into a buffer the launch may
/// write (the non-coherent path may return stale data for memory written during the kernel).
#[track_caller]
pub fn check_read_only(address: usize) {
    checked(|b| b.check_read_only(address))
}

/// An access only the global state space takes (`red.global`, [`crate::atomic::reduce_add`]) at
/// `address`, `what` naming it: reported when it points into the block's shared memory.
#[track_caller]
pub fn check_global_only(address: usize, what: &str) {
    checked(|b| b.check_global_only(address, what))
}

/// Hands control back to the scheduler while the running thread waits (at the caller's source
/// location) for what `on` names, something another thread or a copy does: it is resumed in the
/// next round. A round in which every thread polls and nothing changed is reported as a deadlock
/// (on a GPU the waits would never return).
#[track_caller]
fn poll(on: PollOn) {
    let at = Location::caller();
    let yielder = with_block(|b| b.current_yielder());
    // SAFETY: the yielder lives on the running coroutine's stack, which is the one executing here.
    unsafe { &*yielder }.suspend(Suspend::Poll { at, on });
}

/// Runs `f` on the current block; a violation it returns stops the running thread.
fn checked<R>(f: impl FnOnce(&BlockState<'_>) -> Result<R, Violation>) -> R {
    with_block(|b| match f(b) {
        Ok(r) => r,
        Err(violation) => b.fail(violation),
    })
}

/// `mbarrier.init` of the barrier at `bar` for `count` arrivals per phase.
pub fn mbarrier_init(bar: usize, count: u32) {
    checked(|b| b.mbarrier_init(bar, count))
}

/// `fence.mbarrier_init` and `fence.proxy.async` of the running thread.
pub fn mbarrier_fence_init() {
    with_block(|b| b.mbarrier_fence_init())
}

/// `mbarrier.inval` of the barrier at `bar`.
pub fn mbarrier_inval(bar: usize) {
    checked(|b| b.mbarrier_inval(bar))
}

/// An arrival on the barrier at `bar` announcing `tx` bytes of copies.
pub fn mbarrier_arrive(bar: usize, tx: u32) {
    checked(|b| b.mbarrier_arrive(bar, tx))
}

/// An arrival on the barrier at `bar`'s offset in the cluster's block `rank`.
pub fn mbarrier_arrive_remote(bar: usize, rank: u32) {
    checked(|b| b.mbarrier_arrive_remote(bar, rank))
}

/// Waits until the phase of parity `parity` of the barrier at `bar` has completed, polling.
#[track_caller]
pub fn mbarrier_wait(bar: usize, parity: u32) {
    while !checked(|b| b.mbarrier_poll(bar, parity)) {
        poll(PollOn::Mbarrier { bar, parity });
    }
}

/// The barrier slot and phase of a copy completing on the barrier at `bar`.
pub fn copy_target(bar: usize) -> (usize, u32) {
    checked(|b| b.copy_target(bar))
}

/// Counts `bytes` of a copy delivered on the barrier at `bar`.
pub fn copy_complete(bar: usize, bytes: u32) {
    checked(|b| b.copy_complete(bar, bytes))
}

/// Writes one element (`bytes`) at shared address `dst` as the copy engine, for a copy
/// completing on `target` ([`copy_target`]); `element`: its `(row, column)` in the tensor.
pub fn copy_write(dst: usize, bytes: &[u8], target: (usize, u32), element: Option<(u32, u32)>) {
    checked(|b| b.copy_write(dst, bytes, target, element))
}

/// A tensor copy's box landing in the cluster's block `rank`: the elements `(offset in the box,
/// bytes, tensor element)` at `dst`'s offset there, `bytes` counted on its barrier at `bar`'s
/// offset.
pub fn copy_box_into(rank: u32, dst: usize, bar: usize, elements: &[BoxElement], bytes: u32) {
    checked(|b| b.copy_box_into(rank, dst, bar, elements, bytes))
}

/// One element of a box a copy writes: its byte offset in the box, its bytes, and its `(row,
/// column)` in the tensor.
pub(crate) type BoxElement = (usize, ([u8; 16], usize), Option<(u32, u32)>);

/// A device- or system-scope fence of the running thread (`fence.acq_rel.gpu` / `.sys`): it
/// acquires the releases its atomics read since its last one, and its next atomics publish its
/// release ([`crate::sim::release`]).
pub fn device_fence() {
    with_block(|b| b.device_fence())
}

/// Runs `update`, the host side of a device- or system-scope atomic of the running thread on the
/// (checked) word at host address `address`, returning what it read and whether it wrote; `sync`
/// says what it publishes of the thread's releases.
pub fn atomic_sync<R>(address: usize, sync: Handoff, update: impl FnOnce() -> (R, bool)) -> R {
    with_block(|b| b.atomic_sync(address, sync, update))
}

/// `fence.proxy.async` of the running thread.
pub fn proxy_fence() {
    with_block(|b| b.proxy_fence())
}

/// The byte offset of `address` in the block's shared memory (which it must be in, with `size`
/// bytes from it); else the running thread stops with an out-of-bounds report.
pub fn shared_offset(address: usize, size: usize) -> usize {
    checked(|b| {
        let host = b.check_bounds_only(address, size)?;
        Ok(host - b.shared_base() as usize)
    })
}

/// The checks of a read of `size` shared bytes at `address` by the asynchronous proxy.
pub fn check_async_read(address: usize, size: usize, what: AsyncRead) {
    let offset = shared_offset(address, size);
    checked(|b| b.check_async_read(offset, size, what))
}

/// A bulk store of the running thread reads `size` shared bytes at `address` (checked already).
pub fn bulk_store(address: usize, size: usize) {
    let offset = shared_offset(address, size);
    with_block(|b| b.bulk_store(offset, size))
}

/// `cp.async.bulk.commit_group` of the running thread.
pub fn bulk_commit() {
    with_block(|b| b.bulk_commit())
}

/// `cp.async.bulk.wait_group[.read] pending` of the running thread.
pub fn bulk_wait(pending: u32) {
    with_block(|b| b.bulk_wait(pending))
}

/// Checks the elements of a `wgmma` operand (`size` bytes at each of `addresses`) as the product
/// that reads them is issued, and records the read; the tensor element a tensor copy wrote at
/// each.
pub fn wgmma_operand(addresses: &[usize], size: usize) -> Vec<Option<(u32, u32)>> {
    checked(|b| b.wgmma_operand(addresses, size))
}

/// The running thread executes the warpgroup instruction `text` at `at` (checked against its
/// warpgroup's sequence).
pub fn wgmma_execute(text: String, at: &'static Location<'static>) {
    checked(|b| b.wgmma_execute(text, at))
}

/// `wgmma.fence` of the running thread.
pub fn wgmma_fence() {
    with_block(|b| b.wgmma_fence())
}

/// The accumulator set a product on `acc` chains on (`acc` then holds its markers).
pub fn wgmma_set(acc: &mut [f32]) -> u32 {
    checked(|b| b.wgmma_set(acc))
}

/// The accumulator set whose in-flight markers `acc` holds, if any (changed markers are reported).
pub fn wgmma_held(acc: &[f32]) -> Option<u32> {
    checked(|b| b.wgmma_held(acc))
}

/// Issues a product of the running thread.
pub fn wgmma_issue(product: Product) {
    with_block(|b| b.wgmma_issue(product))
}

/// `wgmma.commit_group` of the running thread.
pub fn wgmma_commit() {
    with_block(|b| b.wgmma_commit())
}

/// `wgmma.wait_group keep` of the running thread: the products to apply.
pub fn wgmma_retire(keep: usize) -> Vec<Product> {
    checked(|b| b.wgmma_retire(keep))
}

/// Applies `f` to the true values of the running thread's accumulator set `set`.
pub fn wgmma_apply(set: u32, f: impl FnOnce(&mut [f32])) {
    with_block(|b| b.wgmma_apply(set, f))
}

/// Hands back `set`'s values in `acc` if none of its products is in flight.
pub fn wgmma_settle(set: u32, acc: &mut [f32]) {
    with_block(|b| b.wgmma_settle(set, acc))
}

/// The end of a `wgmma` instruction block of the running thread.
pub fn wgmma_end_block() {
    checked(|b| b.wgmma_end_block())
}

/// Stops the running thread with `violation`.
pub fn fail(violation: Violation) -> ! {
    with_block(|b| b.fail(violation))
}

/// The check of a 32-bit value about to be stored (an in-flight `wgmma` accumulator is reported).
pub fn check_stored_bits(bits: u32) {
    checked(|b| b.check_stored_bits(bits))
}

/// `setmaxnreg.{inc,dec}` to `count` by the running thread: waits while an increase cannot be
/// covered.
#[track_caller]
pub fn setmaxnreg(inc: bool, count: u32) {
    let at = Location::caller();
    let mut first = true;
    while !checked(|b| b.setmaxnreg(inc, count, at, first)) {
        first = false;
        poll(PollOn::Registers { count });
    }
}

/// The registered buffer `address` points into: its name, its bytes, and `address`'s byte offset
/// from its start (negative below it).
pub fn global_buffer(address: usize) -> Option<(&'static str, usize, isize)> {
    with_block(|b| {
        b.info
            .locate(address)
            .map(|(r, offset)| (r.name, r.bytes, offset))
    })
}

/// Issues a `cp.async` of `words` 4-byte words from global `src` to shared `dst` (`src_bytes`
/// of them read, the rest zero); on a violation, records it and stops the running thread.
pub fn async_copy(dst: usize, src: usize, words: usize, src_bytes: usize) {
    with_block(|b| {
        if let Err(violation) = b.async_copy(dst, src, words, src_bytes) {
            b.fail(violation)
        }
    })
}

/// Prints one `print!` call's text for the running thread (see [`super::print`]).
pub fn print(text: String) {
    with_block(|b| super::print::emit(b, text))
}

/// Stops the running thread with a failed `device_assert!` at `file:line`.
pub fn assert_failed(message: &str, file: &str, line: u32) -> ! {
    with_block(|b| {
        b.fail(Violation::Assertion {
            message: message.to_string(),
            location: format!("{file}:{line}"),
        })
    })
}

/// `cp.async.commit_group` of the running thread.
pub fn async_commit() {
    with_block(|b| b.async_commit())
}

/// `cp.async.wait_group in_flight` of the running thread, or `cp.async.wait_all` with `None`.
pub fn async_wait(in_flight: Option<usize>) {
    with_block(|b| b.async_wait(in_flight))
}

/// The running block's rank in its cluster, the cluster's block count, and the cluster's index
/// in the grid of clusters.
pub fn cluster_shape() -> (u32, u32, (u32, u32, u32)) {
    with_block(|b| {
        let shape = b.info.cluster;
        let id = (
            b.block_idx.x / shape.x.max(1),
            b.block_idx.y / shape.y.max(1),
            b.block_idx.z / shape.z.max(1),
        );
        (b.rank, shape.count() as u32, id)
    })
}

/// `barrier.cluster.arrive` of the running thread; on a violation (a second arrival with no wait
/// between), records it and stops the thread.
pub fn cluster_arrive() {
    with_block(|b| {
        if let Err(violation) = b.cluster_arrive() {
            b.fail(violation)
        }
    })
}

/// `barrier.cluster.wait`: suspends the running thread until every thread of the cluster waits
/// at the cluster barrier.
#[track_caller]
pub fn cluster_wait() {
    let at = Location::caller();
    let yielder = with_block(|b| match b.cluster_may_wait() {
        Ok(()) => b.current_yielder(),
        Err(violation) => b.fail(violation),
    });
    // SAFETY: the yielder lives on the running coroutine's stack, which is the one executing here.
    unsafe { &*yielder }.suspend(Suspend::Cluster(at));
}

/// `mapa`: the address of the shared word at `address` of the running block in the shared memory
/// of the cluster's block `rank`; on a violation, records it and stops the thread.
pub fn map_shared(address: usize, rank: u32) -> usize {
    with_block(|b| match b.map_shared(address, rank) {
        Ok(mapped) => mapped,
        Err(violation) => b.fail(violation),
    })
}

/// Checks a `shared::cluster` access of `size` bytes at `address` and returns the host address
/// to access; on a violation, records it and stops the running thread.
pub fn check_cluster_access(address: usize, size: usize, access: Access) -> usize {
    with_block(|b| match b.check_cluster(address, size, access) {
        Ok(host) => host,
        Err(violation) => b.fail(violation),
    })
}

/// The grid barrier ([`crate::grid::sync`]) with its word at `barrier`: suspends the running
/// thread until every thread of the grid waits at it; on a violation (a launch that is not
/// cooperative, a bad or non-zero word), records it and stops the thread.
#[track_caller]
pub fn grid_sync(barrier: usize) {
    let at = Location::caller();
    let yielder = with_block(|b| match b.grid_may_sync(barrier) {
        Ok(()) => b.current_yielder(),
        Err(violation) => b.fail(violation),
    });
    // SAFETY: the yielder lives on the running coroutine's stack, which is the one executing here.
    unsafe { &*yielder }.suspend(Suspend::Grid(at));
}
