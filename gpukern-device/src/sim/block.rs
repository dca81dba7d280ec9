//! One block in the simulator: its threads as coroutines, its shared memory, and the scheduler
//! that runs every thread up to the next barrier, round after round.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::panic::{self, AssertUnwindSafe, Location};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::async_copy::AsyncCopies;
use super::global::{GlobalConflict, Toucher};
use super::launch::{LaunchInfo, Region};
use super::shadow::{self, ClusterTouch, Shadow, Touch};
use super::{device, Access, Dim3, SimError, Space, Violation, WARP_SIZE};

/// Why a simulated thread handed control back to the scheduler.
pub(super) enum Suspend {
    /// It reached the barrier at this source location.
    Barrier(&'static Location<'static>),
    /// It reached a cluster barrier's wait (`barrier.cluster.wait`) at this source location.
    Cluster(&'static Location<'static>),
    /// It reached the warp shuffle at this source location, depositing `value` and asking for
    /// the value of lane `src_lane` of its warp (the lane's own when `src_lane` is past the
    /// warp). The scheduler completes the exchange once every lane of the warp is there.
    Warp {
        at: &'static Location<'static>,
        value: u32,
        src_lane: u32,
    },
}

/// The yielder a simulated thread suspends itself through.
pub(super) type ThreadYielder = Yielder<(), Suspend>;

/// Unwinding payload that stops a simulated thread after it broke a rule.
struct SimAbort;

/// Stack of each simulated thread: kernel frames are small, but a panic message (and a
/// backtrace, with `RUST_BACKTRACE` set) is formatted on it.
const STACK_BYTES: usize = 256 * 1024;

/// Stacks kept between blocks, so a launch maps them once per worker, not once per thread.
#[derive(Default)]
pub(super) struct StackPool(Vec<DefaultStack>);

impl StackPool {
    fn take(&mut self) -> std::io::Result<DefaultStack> {
        match self.0.pop() {
            Some(stack) => Ok(stack),
            None => DefaultStack::new(STACK_BYTES),
        }
    }
}

/// Everything the device-side helpers of one block's threads read and update.
pub(super) struct BlockState<'l> {
    pub(super) info: &'l LaunchInfo,
    pub(super) block_idx: Dim3,
    /// The block's linear index in the grid (x fastest).
    block_linear: u64,
    /// Linear index of the thread running now.
    pub(super) current: Cell<u32>,
    /// Barrier intervals completed so far.
    epoch: Cell<u32>,
    /// Shared memory, 16-byte aligned like the GPU's.
    shared: UnsafeCell<Vec<u128>>,
    shadow: RefCell<Shadow>,
    yielders: Vec<Cell<*const ThreadYielder>>,
    /// What each thread's last warp shuffle returned.
    shuffled: Vec<Cell<u32>>,
    /// Each thread's `cp.async` copies that have not landed.
    copies: Vec<RefCell<AsyncCopies>>,
    violation: RefCell<Option<Violation>>,
    /// A whole report that overrides `violation` (a global race, named from its lower side).
    reported: RefCell<Option<SimError>>,
    /// The block's rank in its cluster (0 in a launch without clusters).
    pub(super) rank: u32,
    /// The blocks of the cluster, this one included, by rank (set once they all exist).
    peers: Cell<(*const BlockState<'l>, usize)>,
    /// Cluster barriers completed so far.
    cluster_epoch: Cell<u32>,
    /// Which threads have arrived at the cluster barrier and not yet waited.
    arrived: Vec<Cell<bool>>,
    /// Whether every thread of the block has returned (its shared memory is gone).
    exited: Cell<bool>,
}

impl<'l> BlockState<'l> {
    fn new(info: &'l LaunchInfo, block_linear: u64, threads: usize, rank: u32) -> Self {
        let bytes = info.config.shared_mem_bytes as usize;
        BlockState {
            info,
            block_idx: info.config.grid.unflatten(block_linear),
            block_linear,
            current: Cell::new(0),
            epoch: Cell::new(0),
            // At least one word, so that the base is a real address even with no shared memory
            // and an access through it is reported as out of bounds, not as an unknown pointer.
            shared: UnsafeCell::new(vec![0u128; bytes.div_ceil(16).max(1)]),
            shadow: RefCell::new(Shadow::new(bytes)),
            yielders: (0..threads).map(|_| Cell::new(std::ptr::null())).collect(),
            shuffled: (0..threads).map(|_| Cell::new(0)).collect(),
            copies: (0..threads).map(|_| RefCell::default()).collect(),
            violation: RefCell::new(None),
            reported: RefCell::new(None),
            rank,
            peers: Cell::new((std::ptr::null(), 0)),
            cluster_epoch: Cell::new(0),
            arrived: (0..threads).map(|_| Cell::new(false)).collect(),
            exited: Cell::new(false),
        }
    }

    /// The blocks of this block's cluster, by rank (this one alone outside a cluster launch).
    pub(super) fn peers(&self) -> &[BlockState<'l>] {
        match self.peers.get() {
            (ptr, len) if !ptr.is_null() => {
                // SAFETY: `run_cluster` set the pointer to its vector of states, which it keeps,
                // unmoved, until every thread of the cluster is dropped.
                unsafe { std::slice::from_raw_parts(ptr, len) }
            }
            _ => std::slice::from_ref(self),
        }
    }

    /// The running thread's index in the cluster: `rank * threads per block + thread`.
    fn cluster_thread(&self) -> u32 {
        self.rank * self.yielders.len() as u32 + self.current.get()
    }

    /// What a shared-memory access by the running thread records for the cluster's checks:
    /// nothing outside a launch of clusters of several blocks.
    fn cluster_touch(&self, remote: bool) -> Option<ClusterTouch> {
        (self.peers().len() > 1).then(|| ClusterTouch {
            thread: self.cluster_thread(),
            epoch: self.cluster_epoch.get(),
            remote,
        })
    }

    /// The running thread arrives at the cluster barrier (`barrier.cluster.arrive`).
    pub(super) fn cluster_arrive(&self) -> Result<(), Violation> {
        let arrived = &self.arrived[self.current.get() as usize];
        if arrived.replace(true) {
            return Err(Violation::Panic {
                message: "barrier.cluster.arrive twice with no barrier.cluster.wait between".into(),
            });
        }
        Ok(())
    }

    /// Whether the running thread may wait at the cluster barrier: it arrived first.
    pub(super) fn cluster_may_wait(&self) -> Result<(), Violation> {
        if !self.arrived[self.current.get() as usize].get() {
            return Err(Violation::Panic {
                message: "barrier.cluster.wait with no barrier.cluster.arrive before it (the \
                          cluster would hang)"
                    .into(),
            });
        }
        Ok(())
    }

    /// The address of the word at `address` (in this block's shared memory) in the shared
    /// memory of the cluster's block `rank` (`mapa`).
    pub(super) fn map_shared(&self, address: usize, rank: u32) -> Result<usize, Violation> {
        let base = self.shared_base() as usize;
        let bytes = self.info.config.shared_mem_bytes as usize;
        let peers = self.peers();
        if address < base || address > base + bytes {
            return Err(Violation::Panic {
                message: format!("mapa of {address:#x}, which is not the block's shared memory"),
            });
        }
        let Some(peer) = peers.get(rank as usize) else {
            return Err(Violation::Panic {
                message: format!("mapa to rank {rank} of a cluster of {} blocks", peers.len()),
            });
        };
        Ok(peer.shared_base() as usize + (address - base))
    }

    /// Checks an access of `size` bytes at `address` in the shared memory of any block of the
    /// cluster (`ld.shared::cluster` / `st.shared::cluster`), records it, and returns the host
    /// address to access.
    pub(super) fn check_cluster(
        &self,
        address: usize,
        size: usize,
        access: Access,
    ) -> Result<usize, Violation> {
        let peers = self.peers();
        let owner = peers.iter().find(|p| {
            let base = p.shared_base() as usize;
            address >= base && address < base + (p.info.config.shared_mem_bytes as usize).max(1)
        });
        let Some(owner) = owner else {
            return Err(Violation::Panic {
                message: format!(
                    "distributed shared-memory access at {address:#x}, in no block of the cluster's \
                     shared memory (map the address with mapa first)"
                ),
            });
        };
        if owner.rank == self.rank {
            return self.check(address, 0, size, access);
        }
        if owner.exited.get() {
            return Err(Violation::Panic {
                message: format!(
                    "distributed shared-memory access to block rank {} of the cluster, which has \
                     exited (a cluster barrier must keep it alive)",
                    owner.rank
                ),
            });
        }
        let offset = address - owner.shared_base() as usize;
        let bytes = owner.info.config.shared_mem_bytes as usize;
        if offset + size > bytes {
            return Err(Violation::OutOfBounds {
                space: Space::Shared,
                buffer: format!("shared (block rank {})", owner.rank),
                access,
                index: offset / size.max(1),
                len: bytes / size.max(1),
            });
        }
        let touch = match access {
            Access::Read => Touch::Read,
            Access::Write => Touch::Write,
            Access::Atomic => Touch::Atomic,
        };
        let cluster = self.cluster_touch(true);
        let recorded = owner
            .shadow
            .borrow_mut()
            .record(offset, size, 0, 0, touch, cluster);
        recorded.map_err(|conflict| self.cluster_violation(conflict, offset / size.max(1), access))?;
        Ok(address)
    }

    /// The violation for a conflict found by the cluster's checks (the other thread named by
    /// its index in the cluster).
    fn cluster_violation(&self, conflict: shadow::Conflict, index: usize, access: Access) -> Violation {
        let threads = self.yielders.len() as u32;
        let other = match conflict {
            shadow::Conflict::Race { other, .. } | shadow::Conflict::Pending { issuer: other } => {
                self.thread_dim(other % threads.max(1))
            }
            shadow::Conflict::Uninitialized => Dim3::default(),
        };
        shadow::violation(conflict, index, access, other)
    }

    /// The start of this block's shared memory.
    pub(super) fn shared_base(&self) -> *mut u8 {
        // SAFETY: only the pointer is taken; accesses through it are checked by `check`.
        unsafe { (*self.shared.get()).as_mut_ptr().cast() }
    }

    /// The yielder of the thread running now.
    pub(super) fn current_yielder(&self) -> *const ThreadYielder {
        self.yielders[self.current.get() as usize].get()
    }

    /// What the running thread's last warp shuffle returned.
    pub(super) fn shuffled(&self) -> u32 {
        self.shuffled[self.current.get() as usize].get()
    }

    /// The `(x, y, z)` index in the block of linear thread `tid`.
    pub(super) fn thread_dim(&self, tid: u32) -> Dim3 {
        self.info.config.block.unflatten(tid as u64)
    }

    /// Records a broken rule and unwinds the running thread back to the scheduler.
    pub(super) fn fail(&self, violation: Violation) -> ! {
        *self.violation.borrow_mut() = Some(violation);
        panic::resume_unwind(Box::new(SimAbort))
    }

    /// Checks an access of `size` bytes at element `i` from pointer `base`, records it in the
    /// shadow of shared memory or of the global buffer, and returns the host address to access.
    pub(super) fn check(
        &self,
        base: usize,
        i: usize,
        size: usize,
        access: Access,
    ) -> Result<usize, Violation> {
        let touch = match access {
            Access::Read => Touch::Read,
            Access::Write => Touch::Write,
            Access::Atomic => Touch::Atomic,
        };
        self.check_touch(base, i, size, touch)
    }

    /// [`BlockState::check`] for any kind of touch.
    pub(super) fn check_touch(
        &self,
        base: usize,
        i: usize,
        size: usize,
        touch: Touch,
    ) -> Result<usize, Violation> {
        let size = size.max(1);
        let access = touch.access();
        if let Some(offset) = self.shared_offset(base, i, size, access)? {
            let address = self.shared_base() as usize + offset;
            if touch == Touch::Atomic && !address.is_multiple_of(size) {
                return Err(Violation::MisalignedAtomic {
                    space: Space::Shared,
                    buffer: "shared".into(),
                    offset,
                    size,
                });
            }
            let index = offset / size;
            let tid = self.current.get();
            let epoch = self.epoch.get();
            let cluster = self.cluster_touch(false);
            let recorded = self
                .shadow
                .borrow_mut()
                .record(offset, size, tid, epoch, touch, cluster);
            recorded.map_err(|conflict| {
                if cluster.is_some() {
                    return self.cluster_violation(conflict, index, access);
                }
                let other = match conflict {
                    shadow::Conflict::Race { other, .. } | shadow::Conflict::Pending { issuer: other } => {
                        self.thread_dim(other)
                    }
                    shadow::Conflict::Uninitialized => Dim3::default(),
                };
                shadow::violation(conflict, index, access, other)
            })?;
            return Ok(address);
        }
        if touch == Touch::AsyncCopy {
            return Err(Violation::Panic {
                message: format!("cp.async to {base:#x}, which is not the block's shared memory"),
            });
        }

        let Some((region, base_offset)) = self.info.locate(base) else {
            let address = base.wrapping_add(i.wrapping_mul(size));
            return Err(Violation::UnknownPointer { access, address });
        };
        let offset = (i as isize)
            .checked_mul(size as isize)
            .and_then(|o| o.checked_add(base_offset))
            .filter(|&o| i <= isize::MAX as usize && o >= 0)
            .map(|o| o as usize);
        let index = element_index(base_offset, i, size);
        let in_bounds = offset
            .and_then(|o| o.checked_add(size))
            .is_some_and(|end| end <= region.bytes);
        let (Some(offset), true) = (offset, in_bounds) else {
            return Err(Violation::OutOfBounds {
                space: Space::Global,
                buffer: region.name.into(),
                access,
                index,
                len: region.bytes / region.elem_size.max(1),
            });
        };
        if access != Access::Read && !region.writable {
            return Err(Violation::WriteToInput {
                buffer: region.name.into(),
                index,
            });
        }
        // The host buffer keeps the low address bits of the kernel-side address, so this is
        // the alignment the kernel's own address has, and the one the host atomic needs.
        if access == Access::Atomic && !(region.start + offset).is_multiple_of(size) {
            return Err(Violation::MisalignedAtomic {
                space: Space::Global,
                buffer: region.name.into(),
                offset,
                size,
            });
        }
        if let Some(shadow) = &region.shadow {
            let me = Toucher {
                block: self.block_linear as u32,
                thread: self.current.get(),
                epoch: self.epoch.get(),
            };
            if let Err(conflict) = shadow.record(offset, size, me, access) {
                self.fail_global_race(region, shadow.granularity(), conflict, me, access);
            }
        }
        Ok(region.start + offset)
    }

    /// The byte offset into shared memory of element `i` of `size` bytes from `base`, if `base`
    /// points into (or just past) the block's shared memory; an error if the element is not inside.
    fn shared_offset(
        &self,
        base: usize,
        i: usize,
        size: usize,
        access: Access,
    ) -> Result<Option<usize>, Violation> {
        let shared_start = self.shared_base() as usize;
        let shared_bytes = self.info.config.shared_mem_bytes as usize;
        if base < shared_start || base > shared_start + shared_bytes {
            return Ok(None);
        }
        // Byte offsets, not element indices: a 16-byte access from a base that is not a
        // multiple of 16 bytes into the buffer must not be rounded down into bounds.
        let offset = byte_offset(base - shared_start, i, size);
        match offset.filter(|&o| o.checked_add(size).is_some_and(|end| end <= shared_bytes)) {
            Some(offset) => Ok(Some(offset)),
            None => Err(Violation::OutOfBounds {
                space: Space::Shared,
                buffer: "shared".into(),
                access,
                index: element_index(base as isize - shared_start as isize, i, size),
                len: shared_bytes / size,
            }),
        }
    }

    /// Stops the running thread with the report of a global race, given from the side of the
    /// lower of the two (block, thread) pairs: the OS threads' interleaving decides which of the
    /// two accesses comes second and sees the other, and the report must not depend on it.
    fn fail_global_race(
        &self,
        region: &Region,
        granularity: usize,
        conflict: GlobalConflict,
        me: Toucher,
        access: Access,
    ) -> ! {
        let index = conflict.element * granularity / region.elem_size.max(1);
        let grid = self.info.config.grid;
        let block = self.info.config.block;
        let other = conflict.other;
        let (this, this_access, that, that_access) = if (other.block, other.thread) < (me.block, me.thread) {
            (other, conflict.other_access, me, access)
        } else {
            (me, access, other, conflict.other_access)
        };
        let error = SimError {
            kernel: self.info.kernel.to_string(),
            block: grid.unflatten(u64::from(this.block)),
            thread: block.unflatten(u64::from(this.thread)),
            violation: Violation::GlobalRace {
                buffer: region.name.into(),
                index,
                access: this_access,
                other_block: grid.unflatten(u64::from(that.block)),
                other: block.unflatten(u64::from(that.thread)),
                other_access: that_access,
            },
        };
        *self.reported.borrow_mut() = Some(error);
        panic::resume_unwind(Box::new(SimAbort))
    }

    /// Issues the running thread's `cp.async` of `words` 4-byte words to shared `dst`: the first
    /// `src_bytes / 4` read from global `src` now (checked loads), the rest zeros. The words are
    /// pending until a wait retires the copy's group ([`BlockState::async_wait`]).
    pub(super) fn async_copy(
        &self,
        dst: usize,
        src: usize,
        words: usize,
        src_bytes: usize,
    ) -> Result<(), Violation> {
        let mut data = [0u32; 4];
        for (w, word) in data.iter_mut().enumerate().take(src_bytes / 4) {
            let address = self.check(src, w, 4, Access::Read)?;
            // SAFETY: `check` returned the host address of 4 readable bytes of a registered buffer.
            *word = unsafe { (address as *const u32).read_unaligned() };
        }
        let mut offset = None;
        for w in 0..words {
            let address = self.check_touch(dst, w, 4, Touch::AsyncCopy)?;
            offset.get_or_insert(address - self.shared_base() as usize);
        }
        if let Some(offset) = offset {
            let tid = self.current.get() as usize;
            self.copies[tid].borrow_mut().issue(offset, data, words);
        }
        Ok(())
    }

    /// Closes the running thread's open copies into a group (`cp.async.commit_group`).
    pub(super) fn async_commit(&self) {
        self.copies[self.current.get() as usize].borrow_mut().commit();
    }

    /// Lands the running thread's oldest groups until at most `in_flight` remain
    /// (`cp.async.wait_group`); `None` commits the open copies and lands all (`cp.async.wait_all`).
    pub(super) fn async_wait(&self, in_flight: Option<usize>) {
        let tid = self.current.get();
        let landed = self.copies[tid as usize].borrow_mut().retire(in_flight);
        let mut shadow = self.shadow.borrow_mut();
        for copy in landed {
            let bytes = 4 * copy.words;
            // SAFETY: the copy's bytes were checked to lie inside shared memory when it was
            // issued; no reference to shared memory is held across this write.
            unsafe {
                let dst = self.shared_base().add(copy.offset);
                std::ptr::copy_nonoverlapping(copy.data.as_ptr().cast::<u8>(), dst, bytes);
            }
            shadow.land(copy.offset, bytes, tid, self.epoch.get());
        }
    }

    /// The report for thread `tid`, whose run ended by unwinding with `payload`.
    fn report(&self, tid: u32, payload: Box<dyn std::any::Any + Send>) -> SimError {
        if payload.is::<SimAbort>() {
            if let Some(error) = self.reported.borrow_mut().take() {
                return error;
            }
        }
        let violation = if payload.is::<SimAbort>() {
            self.violation.borrow_mut().take()
        } else {
            None
        };
        let violation = violation.unwrap_or_else(|| Violation::Panic {
            message: panic_message(&*payload),
        });
        self.error(tid, violation)
    }

    fn error(&self, tid: u32, violation: Violation) -> SimError {
        SimError {
            kernel: self.info.kernel.to_string(),
            block: self.block_idx,
            thread: self.thread_dim(tid),
            violation,
        }
    }
}

/// The byte offset of element `i` of `size` bytes from a pointer `base_offset` bytes into a
/// buffer, if it does not overflow.
fn byte_offset(base_offset: usize, i: usize, size: usize) -> Option<usize> {
    i.checked_mul(size).and_then(|o| o.checked_add(base_offset))
}

/// The index, counted in elements of `size` bytes from the buffer's start, that a report gives
/// for element `i` from a pointer `base_offset` bytes from the buffer's start (negative below
/// it: the index then wraps, as `usize` arithmetic does).
fn element_index(base_offset: isize, i: usize, size: usize) -> usize {
    (base_offset.div_euclid(size as isize) as usize).wrapping_add(i)
}

/// The text of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic with a non-text payload)".to_string()
    }
}

type Thread = Coroutine<(), Suspend, (), DefaultStack>;

/// Runs the blocks `blocks` (linear indices in the grid, by rank), one cluster of a launch (a
/// single block without clusters), to completion, or to the first violation.
///
/// The threads of all the cluster's blocks are scheduled together, block after block each
/// round, so that a cluster barrier really synchronises them and one block's distributed
/// shared-memory accesses see the others' shared memory as it stands.
pub(super) fn run_cluster(
    info: &LaunchInfo,
    blocks: &[u64],
    stacks: &mut StackPool,
    body: &(dyn Fn() + Sync),
) -> Result<(), SimError> {
    let threads = info.config.block.count() as usize;
    let states: Vec<BlockState> = blocks
        .iter()
        .enumerate()
        .map(|(rank, &b)| BlockState::new(info, b, threads, rank as u32))
        .collect();
    if states.len() > 1 {
        for state in &states {
            state.peers.set((states.as_ptr(), states.len()));
        }
    }

    let mut coroutines: Vec<Vec<Thread>> = Vec::with_capacity(states.len());
    let mut result = Ok(());
    'blocks: for state in &states {
        let mut block = Vec::with_capacity(threads);
        for tid in 0..threads {
            let stack = match stacks.take() {
                Ok(stack) => stack,
                Err(e) => {
                    let message = format!("could not map a {STACK_BYTES}-byte thread stack: {e}");
                    result = Err(state.error(tid as u32, Violation::Panic { message }));
                    coroutines.push(block);
                    break 'blocks;
                }
            };
            let slot = &state.yielders[tid];
            // SAFETY: the coroutine borrows `state` and `body`, and is dropped (below) before
            // either.
            let coroutine = unsafe {
                Coroutine::with_stack_unchecked(stack, move |yielder: &ThreadYielder, ()| {
                    slot.set(yielder);
                    body()
                })
            };
            block.push(coroutine);
        }
        coroutines.push(block);
    }
    if result.is_ok() {
        result = schedule(&states, &mut coroutines);
    }
    for (state, block) in states.iter().zip(coroutines) {
        let _entered = device::enter(state);
        for mut coroutine in block {
            coroutine.force_unwind();
            stacks.0.push(coroutine.into_stack());
        }
    }
    result
}

/// Where a simulated thread stands between two rounds of the scheduler.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// It can run (it has not started, or a barrier or shuffle it waited at has completed).
    Ready,
    /// It waits at the barrier at this location.
    Barrier(&'static Location<'static>),
    /// It waits at the cluster barrier, at this location.
    Cluster(&'static Location<'static>),
    /// It waits at the warp shuffle at this location.
    Warp {
        at: &'static Location<'static>,
        value: u32,
        src_lane: u32,
    },
    /// It returned.
    Exited,
}

impl Wait {
    /// Where it waits, as a report names it.
    fn describe(self) -> String {
        match self {
            Wait::Barrier(at) => format!("the barrier at {at}"),
            Wait::Cluster(at) => format!("the cluster barrier at {at}"),
            Wait::Warp { at, .. } => format!("the warp shuffle at {at}"),
            Wait::Ready | Wait::Exited => "nowhere".to_string(),
        }
    }
}

/// Resumes every ready thread of every block of the cluster until it waits at a barrier, a
/// cluster barrier or a warp shuffle, or returns. Then completes the shuffles of every warp
/// whose lanes all wait at the same one, and goes round again; when no thread waits at a
/// shuffle, opens the barrier of each block whose threads all reached the same one, and goes
/// round again; when none does, checks that every thread of the cluster waits at the cluster
/// barrier, opens it, and goes round again.
fn schedule(states: &[BlockState], threads: &mut [Vec<Thread>]) -> Result<(), SimError> {
    let mut wait: Vec<Vec<Wait>> = threads.iter().map(|b| vec![Wait::Ready; b.len()]).collect();
    loop {
        for ((state, block), wait) in states.iter().zip(threads.iter_mut()).zip(wait.iter_mut()) {
            let _entered = device::enter(state);
            for (tid, thread) in block.iter_mut().enumerate() {
                if wait[tid] != Wait::Ready {
                    continue;
                }
                state.current.set(tid as u32);
                match panic::catch_unwind(AssertUnwindSafe(|| thread.resume(()))) {
                    Ok(CoroutineResult::Yield(Suspend::Barrier(at))) => wait[tid] = Wait::Barrier(at),
                    Ok(CoroutineResult::Yield(Suspend::Cluster(at))) => wait[tid] = Wait::Cluster(at),
                    Ok(CoroutineResult::Yield(Suspend::Warp { at, value, src_lane })) => {
                        wait[tid] = Wait::Warp { at, value, src_lane }
                    }
                    Ok(CoroutineResult::Return(())) => wait[tid] = Wait::Exited,
                    Err(payload) => return Err(state.report(tid as u32, payload)),
                }
            }
            state.exited.set(wait.iter().all(|&w| w == Wait::Exited));
        }
        let mut any = false;
        for (state, wait) in states.iter().zip(wait.iter_mut()) {
            any |= exchange_warps(state, wait)?;
        }
        if any {
            continue;
        }
        let mut opened = false;
        for (state, wait) in states.iter().zip(wait.iter_mut()) {
            opened |= open_barrier(state, wait)?;
        }
        if opened {
            continue;
        }
        // Every thread left waits at the cluster barrier, or none is left.
        let Some(at) = wait.iter().flatten().find_map(|w| match w {
            Wait::Cluster(at) => Some(*at),
            _ => None,
        }) else {
            return Ok(());
        };
        let waiting = wait
            .iter()
            .flatten()
            .filter(|w| matches!(w, Wait::Cluster(_)))
            .count();
        for (state, block_wait) in states.iter().zip(&wait) {
            if let Some(gone) = block_wait.iter().position(|&w| w == Wait::Exited) {
                return Err(state.error(
                    gone as u32,
                    Violation::BarrierNotReached {
                        barrier: format!("{at} (a cluster barrier)"),
                        waiting,
                    },
                ));
            }
        }
        for (state, wait) in states.iter().zip(wait.iter_mut()) {
            state.epoch.set(state.epoch.get() + 1);
            state.cluster_epoch.set(state.cluster_epoch.get() + 1);
            state.arrived.iter().for_each(|a| a.set(false));
            wait.fill(Wait::Ready);
        }
    }
}

/// Opens the block barrier the threads of `state` wait at, if some do: checks that the whole
/// block reached that same barrier first. Returns whether it opened one.
fn open_barrier(state: &BlockState, wait: &mut [Wait]) -> Result<bool, SimError> {
    let Some(first) = wait.iter().position(|w| matches!(w, Wait::Barrier(_))) else {
        return Ok(false);
    };
    let Wait::Barrier(at) = wait[first] else {
        unreachable!("`first` waits at a barrier")
    };
    let barrier = at.to_string();
    if let Some(gone) = wait.iter().position(|&w| w == Wait::Exited) {
        let count = wait.iter().filter(|w| matches!(w, Wait::Barrier(_))).count();
        return Err(state.error(
            gone as u32,
            Violation::BarrierNotReached {
                barrier,
                waiting: count,
            },
        ));
    }
    if let Some(other) = wait.iter().position(|w| *w != wait[first]) {
        let there = match wait[other] {
            Wait::Barrier(at) => at.to_string(),
            w @ Wait::Cluster(_) => w.describe(),
            _ => unreachable!("with no thread at a shuffle or returned, all wait at barriers"),
        };
        let other = state.thread_dim(other as u32);
        return Err(state.error(
            first as u32,
            Violation::DifferentBarriers {
                here: barrier,
                there,
                other,
            },
        ));
    }
    state.epoch.set(state.epoch.get() + 1);
    wait.fill(Wait::Ready);
    Ok(true)
}

/// Completes the shuffle of every warp some lane of which waits at one; returns whether any did.
///
/// A warp is the threads whose linear index in the block divided by [`WARP_SIZE`] is the same.
/// Shuffles name the full warp (`membermask` 0xffffffff), so every lane must wait at the same
/// one: a lane that returned, or that waits at a barrier or at another shuffle, is a violation
/// (on a GPU the warp would hang or read garbage), and so is a warp with fewer than 32 lanes.
fn exchange_warps(state: &BlockState, wait: &mut [Wait]) -> Result<bool, SimError> {
    let mut any = false;
    for start in (0..wait.len()).step_by(WARP_SIZE as usize) {
        let lanes = start..wait.len().min(start + WARP_SIZE as usize);
        let Some(first) = lanes.clone().find(|&t| matches!(wait[t], Wait::Warp { .. })) else {
            continue;
        };
        let Wait::Warp { at, .. } = wait[first] else {
            unreachable!("`first` waits at a shuffle")
        };
        let shuffle = at.to_string();
        if lanes.len() < WARP_SIZE as usize {
            return Err(state.error(
                first as u32,
                Violation::PartialWarp {
                    shuffle,
                    lanes: lanes.len() as u32,
                },
            ));
        }
        if let Some(gone) = lanes.clone().find(|&t| wait[t] == Wait::Exited) {
            let waiting = lanes
                .clone()
                .filter(|&t| matches!(wait[t], Wait::Warp { .. }))
                .count();
            return Err(state.error(gone as u32, Violation::ShuffleNotReached { shuffle, waiting }));
        }
        let elsewhere = lanes
            .clone()
            .find(|&t| !matches!(wait[t], Wait::Warp { at: there, .. } if there == at));
        if let Some(other) = elsewhere {
            return Err(state.error(
                first as u32,
                Violation::DifferentShuffles {
                    here: shuffle,
                    there: wait[other].describe(),
                    other: state.thread_dim(other as u32),
                },
            ));
        }
        let values: Vec<u32> = lanes
            .clone()
            .map(|t| match wait[t] {
                Wait::Warp { value, .. } => value,
                _ => unreachable!("every lane waits at this shuffle"),
            })
            .collect();
        for (lane, t) in lanes.enumerate() {
            let Wait::Warp { src_lane, .. } = wait[t] else {
                unreachable!("every lane waits at this shuffle")
            };
            let src = if (src_lane as usize) < values.len() {
                src_lane as usize
            } else {
                lane
            };
            state.shuffled[t].set(values[src]);
            wait[t] = Wait::Ready;
        }
        any = true;
    }
    Ok(any)
}
