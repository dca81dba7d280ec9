//! One block in the simulator: the state its threads' device-side helpers read and update (its
//! shared memory, the shadow that checks it, the threads' pending copies and shuffles), and the
//! checks of every access the threads make. The scheduler that runs its threads as coroutines is
//! in [`schedule`]; the cluster side (peers, cluster barrier, distributed shared memory) in
//! [`cluster`].

use std::cell::{Cell, RefCell, UnsafeCell};
use std::panic::{self, Location};
use std::sync::Mutex;

use corosensei::stack::DefaultStack;
use corosensei::Yielder;

use super::async_copy::AsyncCopies;
use super::global::{GlobalConflict, Toucher};
use super::launch::{LaunchInfo, Region};
use super::shadow::{self, Releases, Shadow, Touch};
use super::{Access, Dim3, SimError, Space, Violation};

mod cluster;
mod hopper;
mod named;
mod release;
mod remote;
mod schedule;

pub(crate) use hopper::AsyncRead;
pub(super) use named::{NamedWait, Order};
pub(super) use schedule::run_cluster;

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
    /// It polls (an `mbarrier` wait, a `setmaxnreg.inc`) at this source location and is to be
    /// resumed next round; `on` says for what.
    Poll {
        at: &'static Location<'static>,
        on: PollOn,
    },
    /// It reached the grid barrier ([`crate::grid::sync`]) at this source location.
    Grid(&'static Location<'static>),
    /// It counted itself in at a named barrier ([`crate::barrier::sync`]) at this source
    /// location, and waits for that barrier's completion.
    Named {
        at: &'static Location<'static>,
        wait: NamedWait,
    },
}

/// What a polling thread waits for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PollOn {
    /// The phase of parity `parity` of the `mbarrier` at address `bar`.
    Mbarrier { bar: usize, parity: u32 },
    /// Registers for its warpgroup's `setmaxnreg.inc` to `count`.
    Registers { count: u32 },
}

/// The yielder a simulated thread suspends itself through.
pub(super) type ThreadYielder = Yielder<(), Suspend>;

/// Unwinding payload that stops a simulated thread after it broke a rule.
struct SimAbort;

/// Stack of each simulated thread: kernel frames are small, but a panic message (and a
/// backtrace, with `RUST_BACKTRACE` set) is formatted on it.
const STACK_BYTES: usize = 256 * 1024;

/// Stacks kept between blocks, so a launch maps them once per worker, not once per thread;
/// taken from [`KEPT`] and given back there when the worker is done with its launch.
#[derive(Default)]
pub(super) struct StackPool(Vec<DefaultStack>);

/// Stacks kept between launches, at most [`KEPT_MAX`]: a process maps each once rather than
/// once per launch (mapping, guarding and unmapping a stack per simulated thread per launch cost
/// the simulator trials of the test command a quarter of their CPU time in the kernel).
static KEPT: Mutex<Vec<DefaultStack>> = Mutex::new(Vec::new());

/// Most stacks [`KEPT`] holds (each maps [`STACK_BYTES`]; only the pages a thread touched are
/// resident).
const KEPT_MAX: usize = 4096;

impl StackPool {
    fn take(&mut self) -> std::io::Result<DefaultStack> {
        if let Some(stack) = self.0.pop() {
            return Ok(stack);
        }
        let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match kept {
            Some(stack) => Ok(stack),
            None => DefaultStack::new(STACK_BYTES),
        }
    }
}

impl Drop for StackPool {
    fn drop(&mut self) {
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        let room = KEPT_MAX.saturating_sub(kept.len());
        let keep = self.0.len().min(room);
        kept.extend(self.0.drain(..keep));
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
    /// Grid barriers completed so far (cooperative launches; the same in every block).
    grid_epoch: Cell<u32>,
    /// The host address of the grid barrier word the block's thread 0 last arrived on (0: none).
    grid_word: Cell<usize>,
    /// Which threads have arrived at the cluster barrier and not yet waited.
    arrived: Vec<Cell<bool>>,
    /// Whether every thread of the block has returned (its shared memory is gone).
    exited: Cell<bool>,
    /// Events polling threads wait for so far (`mbarrier` updates, registers released): progress.
    pub(super) progress: Cell<u64>,
    /// The Hopper protocols' state, made on the block's first Hopper instruction.
    hopper: RefCell<Option<Box<super::hopper::Hopper>>>,
    /// The named barriers' state, made on the block's first named barrier.
    named: RefCell<Option<Box<named::NamedBarriers>>>,
    /// Each thread's `fence.proxy.async` so far.
    fences: Vec<Cell<u32>>,
    /// Each thread's device-scope fences ([`crate::atomic::fence`]): the barrier interval of
    /// its latest, and how many it executed in that interval.
    device_fences: Vec<Cell<(u32, u32)>>,
    /// Each thread's releases: observed, acquired, and to publish.
    syncs: Vec<RefCell<super::release::ThreadSync>>,
    /// Releases acquired by the block's threads, with the barrier interval of each acquiring
    /// fence: a thread past a later barrier knows them too.
    acquired: RefCell<Vec<(u32, super::release::Knowledge)>>,
    /// Which threads have called [`crate::dependent::wait`] (checked in a dependent launch).
    waited: Vec<Cell<bool>>,
    /// Whether the running thread is applying retired `wgmma` products (their operand reads were
    /// checked when the products were issued).
    in_wgmma_apply: Cell<bool>,
    /// The latest access to this block's shared memory by a thread of another block of its
    /// cluster: the cluster barrier that publishes it, and the accessing block rank and thread.
    remote_access: Cell<Option<(u32, u32, u32)>>,
}

impl<'l> BlockState<'l> {
    /// Records that the running thread has called [`crate::dependent::wait`].
    pub(super) fn dependent_waited(&self) {
        self.waited[self.current.get() as usize].set(true);
    }

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
            grid_epoch: Cell::new(0),
            grid_word: Cell::new(0),
            arrived: (0..threads).map(|_| Cell::new(false)).collect(),
            exited: Cell::new(false),
            progress: Cell::new(0),
            hopper: RefCell::new(None),
            named: RefCell::new(None),
            fences: (0..threads).map(|_| Cell::new(0)).collect(),
            device_fences: (0..threads).map(|_| Cell::new((0, 0))).collect(),
            syncs: (0..threads).map(|_| RefCell::default()).collect(),
            acquired: RefCell::default(),
            waited: (0..threads).map(|_| Cell::new(false)).collect(),
            in_wgmma_apply: Cell::new(false),
            remote_access: Cell::new(None),
        }
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
            let fences = self.fences[tid as usize].get();
            let named = self.named.borrow();
            let order = named.as_deref().map(|n| n.order(tid));
            // The block's `mbarrier` releases, once it has a Hopper state (not borrowed here
            // while a Hopper operation holds it: such an access is then ordered by barriers
            // alone, which can report a race but never hide one).
            let hopper = self.hopper.try_borrow().ok();
            let releases = hopper.as_ref().and_then(|h| h.as_deref()).map(|h| Releases {
                own: h.releases[tid as usize],
                known: &h.clocks[tid as usize],
            });
            let recorded = self
                .shadow
                .borrow_mut()
                .record(offset, size, tid, epoch, touch, cluster, fences, order, releases);
            drop(hopper);
            drop(named);
            recorded.map_err(|conflict| {
                if cluster.is_some() {
                    return self.cluster_violation(conflict, self.rank, index, access);
                }
                let other = match conflict {
                    shadow::Conflict::Race { other, .. } | shadow::Conflict::Pending { issuer: other } => {
                        self.thread_dim(other)
                    }
                    shadow::Conflict::Uninitialized => Dim3::default(),
                };
                shadow::violation(conflict, index, access, other)
            })?;
            if touch != Touch::Proxy {
                self.check_generic_against_copies(offset, size, touch)?;
            }
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
        if self.info.dependent && !self.waited[self.current.get() as usize].get() {
            return Err(Violation::Panic {
                message: format!(
                    "{access} of `{}` before dependent::wait in a dependent launch: on the GPU the \
                     kernel launched before it may still be running; call dependent::wait first",
                    region.name
                ),
            });
        }
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
                fences: self.device_fences_now(),
                grid: self.grid_epoch.get(),
            };
            if let Err(conflict) =
                shadow.record(offset, size, me, access, |other| self.acquired_covers(other))
            {
                self.fail_global_race(region, shadow.granularity(), conflict, me, access);
            }
        }
        Ok(region.start + offset)
    }

    /// A read-only (`ld.global.nc`) load at `address`: an error when it lies in shared memory or
    /// in a buffer of the launch that is writable.
    pub(super) fn check_read_only(&self, address: usize) -> Result<(), Violation> {
        let shared_start = self.shared_base() as usize;
        let shared_bytes = self.info.config.shared_mem_bytes as usize;
        if (shared_start..=shared_start + shared_bytes).contains(&address) {
            return Err(Violation::Panic {
                message: "a read-only load (ld.global.nc, LoadHint::ReadOnly) from shared memory".into(),
            });
        }
        match self.info.locate(address) {
            Some((region, _)) if region.writable => Err(Violation::Panic {
                message: format!(
                    "a read-only load (ld.global.nc, LoadHint::ReadOnly) from `{}`, a buffer the kernel \
                     may write: the non-coherent path can return stale data; use LoadHint::Default",
                    region.name
                ),
            }),
            _ => Ok(()),
        }
    }

    /// An access only the global state space takes (`what`) at `address`: an error when it
    /// points into the block's shared memory.
    pub(super) fn check_global_only(&self, address: usize, what: &str) -> Result<(), Violation> {
        let shared_start = self.shared_base() as usize;
        let shared_bytes = self.info.config.shared_mem_bytes as usize;
        if (shared_start..shared_start + shared_bytes.max(1)).contains(&address) {
            return Err(Violation::Panic {
                message: format!("{what} on shared memory: the instruction takes global addresses only"),
            });
        }
        Ok(())
    }

    /// The byte offset into shared memory of element `i` of `size` bytes from `base`, if `base`
    /// points into (or just past) the block's shared memory; an error if the element is not inside.
    #[inline]
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

    /// Whether the running thread may wait at the grid barrier whose word is at `barrier`: the
    /// launch is cooperative, and (checked by the block's thread 0, the one that updates the
    /// word on the GPU) the word is a writable, aligned `u32` of a registered buffer whose low 31
    /// bits are zero, as the host leaves it. The simulator does not update the word.
    pub(super) fn grid_may_sync(&self, barrier: usize) -> Result<(), Violation> {
        if !self.info.cooperative {
            return Err(Violation::InvalidLaunch {
                reason: "grid::sync in a launch that is not cooperative: on a GPU its blocks \
                         need not all be resident, and the grid barrier can hang; launch through \
                         Module::cooperative (sim: Launch::cooperative)"
                    .into(),
            });
        }
        if self.current.get() != 0 {
            return Ok(());
        }
        let address = self.check(barrier, 0, 4, Access::Atomic)?;
        // The GPU's arrival (`grid::sync`): block 0 adds `2^31 - (blocks - 1)`, every other
        // block 1, so that the word gains exactly `2^31` per completed barrier and a launch
        // leaves it as the next one needs it; the word's low bits are checked when the barrier
        // opens ([`BlockState::grid_word_low_bits`]).
        let blocks = self.info.config.grid.count() as u32;
        let add = match self.block_linear {
            0 => (1u32 << 31).wrapping_sub(blocks.wrapping_sub(1)),
            _ => 1,
        };
        // SAFETY: `check` returned the host address of 4 bytes of a registered writable buffer,
        // aligned to 4 (an atomic access); no simulated thread writes it but through atomics.
        unsafe {
            (*(address as *const std::sync::atomic::AtomicU32))
                .fetch_add(add, std::sync::atomic::Ordering::Relaxed);
        }
        self.grid_word.set(address);
        Ok(())
    }

    /// The low 31 bits of the grid barrier word the block's thread 0 arrived on, read once
    /// every block has arrived: 0 exactly when they were 0 at the launch (each completed
    /// barrier adds `2^31`) and every block arrived on the same word; `None` if it arrived on
    /// none.
    pub(super) fn grid_word_low_bits(&self) -> Option<u32> {
        let address = self.grid_word.get();
        // SAFETY: an address `grid_may_sync` checked, of a buffer registered for the launch.
        (address != 0).then(|| unsafe {
            (*(address as *const std::sync::atomic::AtomicU32)).load(std::sync::atomic::Ordering::Relaxed)
                & 0x7fff_ffff
        })
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
        let named = self.named.borrow();
        let count = named.as_deref().map(|n| n.order(tid).count);
        let mbarriers = self.hopper.try_borrow().map_or(true, |h| h.is_some());
        let mut shadow = self.shadow.borrow_mut();
        for copy in landed {
            let bytes = 4 * copy.words;
            // SAFETY: the copy's bytes were checked to lie inside shared memory when it was
            // issued; no reference to shared memory is held across this write.
            unsafe {
                let dst = self.shared_base().add(copy.offset);
                std::ptr::copy_nonoverlapping(copy.data.as_ptr().cast::<u8>(), dst, bytes);
            }
            shadow.land(copy.offset, bytes, tid, self.epoch.get(), count, mbarriers);
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
