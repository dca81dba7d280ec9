//! One block in the simulator: its threads as coroutines, its shared memory, and the scheduler
//! that runs every thread up to the next barrier, round after round.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::panic::{self, AssertUnwindSafe, Location};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::launch::LaunchInfo;
use super::shadow::{self, Shadow};
use super::{device, Access, Dim3, SimError, Space, Violation};

/// Why a simulated thread handed control back to the scheduler.
pub(super) enum Suspend {
    /// It reached the barrier at this source location.
    Barrier(&'static Location<'static>),
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
    /// Linear index of the thread running now.
    pub(super) current: Cell<u32>,
    /// Barrier intervals completed so far.
    epoch: Cell<u32>,
    /// Shared memory, 16-byte aligned like the GPU's.
    shared: UnsafeCell<Vec<u128>>,
    shadow: RefCell<Shadow>,
    yielders: Vec<Cell<*const ThreadYielder>>,
    violation: RefCell<Option<Violation>>,
}

impl<'l> BlockState<'l> {
    fn new(info: &'l LaunchInfo, block_idx: Dim3, threads: usize) -> Self {
        let bytes = info.config.shared_mem_bytes as usize;
        BlockState {
            info,
            block_idx,
            current: Cell::new(0),
            epoch: Cell::new(0),
            // At least one word, so that the base is a real address even with no shared memory
            // and an access through it is reported as out of bounds, not as an unknown pointer.
            shared: UnsafeCell::new(vec![0u128; bytes.div_ceil(16).max(1)]),
            shadow: RefCell::new(Shadow::new(bytes)),
            yielders: (0..threads).map(|_| Cell::new(std::ptr::null())).collect(),
            violation: RefCell::new(None),
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

    /// The `(x, y, z)` index in the block of linear thread `tid`.
    pub(super) fn thread_dim(&self, tid: u32) -> Dim3 {
        self.info.config.block.unflatten(tid as u64)
    }

    /// Records a broken rule and unwinds the running thread back to the scheduler.
    pub(super) fn fail(&self, violation: Violation) -> ! {
        *self.violation.borrow_mut() = Some(violation);
        panic::resume_unwind(Box::new(SimAbort))
    }

    /// Checks an access of `size` bytes at element `i` from pointer `base`, and records it in the
    /// shared-memory shadow.
    pub(super) fn check(&self, base: usize, i: usize, size: usize, access: Access) -> Result<(), Violation> {
        let size = size.max(1);
        let shared_start = self.shared_base() as usize;
        let shared_bytes = self.info.config.shared_mem_bytes as usize;
        if base >= shared_start && base <= shared_start + shared_bytes {
            let index = (base - shared_start) / size + i;
            let offset = index.checked_mul(size).filter(|&o| o + size <= shared_bytes);
            let Some(offset) = offset else {
                return Err(Violation::OutOfBounds {
                    space: Space::Shared,
                    buffer: "shared".into(),
                    access,
                    index,
                    len: shared_bytes / size,
                });
            };
            let tid = self.current.get();
            let recorded = self
                .shadow
                .borrow_mut()
                .record(offset, size, tid, self.epoch.get(), access);
            return recorded.map_err(|conflict| {
                let other = match conflict {
                    shadow::Conflict::Race { other, .. } => self.thread_dim(other),
                    shadow::Conflict::Uninitialized => Dim3::default(),
                };
                shadow::violation(conflict, index, access, other)
            });
        }

        let regions = &self.info.regions;
        let region = regions
            .iter()
            .find(|r| base >= r.start && base < r.start + r.bytes)
            .or_else(|| regions.iter().find(|r| base == r.start + r.bytes));
        let Some(region) = region else {
            let address = base.wrapping_add(i.wrapping_mul(size));
            return Err(Violation::UnknownPointer { access, address });
        };
        let index = (base - region.start) / size + i;
        let in_bounds = index.checked_mul(size).is_some_and(|o| o + size <= region.bytes);
        if !in_bounds {
            return Err(Violation::OutOfBounds {
                space: Space::Global,
                buffer: region.name.into(),
                access,
                index,
                len: region.bytes / region.elem_size.max(1),
            });
        }
        if access == Access::Write && !region.writable {
            return Err(Violation::WriteToInput {
                buffer: region.name.into(),
                index,
            });
        }
        Ok(())
    }

    /// The report for thread `tid`, whose run ended by unwinding with `payload`.
    fn report(&self, tid: u32, payload: Box<dyn std::any::Any + Send>) -> SimError {
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

/// Runs block `block_idx` of a launch to completion, or to its first violation.
pub(super) fn run_block(
    info: &LaunchInfo,
    block_idx: Dim3,
    stacks: &mut StackPool,
    body: &(dyn Fn() + Sync),
) -> Result<(), SimError> {
    let threads = info.config.block.count() as usize;
    let state = BlockState::new(info, block_idx, threads);
    let _entered = device::enter(&state);

    let mut coroutines: Vec<Thread> = Vec::with_capacity(threads);
    let mut result = Ok(());
    for tid in 0..threads {
        let stack = match stacks.take() {
            Ok(stack) => stack,
            Err(e) => {
                let message = format!("could not map a {STACK_BYTES}-byte thread stack: {e}");
                result = Err(state.error(tid as u32, Violation::Panic { message }));
                break;
            }
        };
        let slot = &state.yielders[tid];
        // SAFETY: the coroutine borrows `state` and `body`, and is dropped (below) before either.
        let coroutine = unsafe {
            Coroutine::with_stack_unchecked(stack, move |yielder: &ThreadYielder, ()| {
                slot.set(yielder);
                body()
            })
        };
        coroutines.push(coroutine);
    }
    if result.is_ok() {
        result = schedule(&state, &mut coroutines);
    }
    for mut coroutine in coroutines {
        coroutine.force_unwind();
        stacks.0.push(coroutine.into_stack());
    }
    result
}

/// Resumes every live thread until it waits at a barrier or returns; then checks that the
/// barrier is one that the whole block reached, opens it, and goes round again.
fn schedule(state: &BlockState, threads: &mut [Thread]) -> Result<(), SimError> {
    let n = threads.len();
    let mut waiting: Vec<Option<&'static Location<'static>>> = vec![None; n];
    let mut exited = vec![false; n];
    loop {
        for (tid, thread) in threads.iter_mut().enumerate() {
            if exited[tid] {
                continue;
            }
            state.current.set(tid as u32);
            match panic::catch_unwind(AssertUnwindSafe(|| thread.resume(()))) {
                Ok(CoroutineResult::Yield(Suspend::Barrier(at))) => waiting[tid] = Some(at),
                Ok(CoroutineResult::Return(())) => exited[tid] = true,
                Err(payload) => return Err(state.report(tid as u32, payload)),
            }
        }
        let Some(first) = waiting.iter().position(Option::is_some) else {
            return Ok(());
        };
        let barrier = waiting[first].map(ToString::to_string).unwrap_or_default();
        if let Some(gone) = exited.iter().position(|&e| e) {
            let count = waiting.iter().flatten().count();
            return Err(state.error(
                gone as u32,
                Violation::BarrierNotReached {
                    barrier,
                    waiting: count,
                },
            ));
        }
        if let Some(other) = waiting.iter().position(|w| *w != waiting[first]) {
            let there = waiting[other].map(ToString::to_string).unwrap_or_default();
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
        waiting.fill(None);
    }
}
