//! The scheduler of one cluster's blocks (one block in a launch without clusters): every thread
//! a coroutine, resumed round after round up to its next barrier, cluster barrier or warp
//! shuffle, each of which completes only once every thread that must reach it has.

use std::panic::{self, AssertUnwindSafe, Location};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult};

use super::{cluster, BlockState, NamedWait, PollOn, StackPool, Suspend, ThreadYielder, STACK_BYTES};
use crate::sim::launch::LaunchInfo;
use crate::sim::{device, SimError, Violation, WARP_SIZE};

type Thread = Coroutine<(), Suspend, (), DefaultStack>;

/// Runs the blocks `blocks` (linear indices in the grid, by rank), one cluster of a launch (a
/// single block without clusters), to completion, or to the first violation.
///
/// The threads of all the cluster's blocks are scheduled together, block after block each
/// round, so that a cluster barrier really synchronises them and one block's distributed
/// shared-memory accesses see the others' shared memory as it stands.
pub(in crate::sim) fn run_cluster(
    info: &LaunchInfo,
    blocks: &[u64],
    stacks: &mut StackPool,
    body: &(dyn Fn() + Sync),
) -> Result<(), SimError> {
    let threads = info.config.block.count() as usize;
    // A cooperative launch's group is every block of the grid, each a cluster of one.
    let clustered = info.cluster.count() > 1;
    let states: Vec<BlockState> = blocks
        .iter()
        .enumerate()
        .map(|(rank, &b)| BlockState::new(info, b, threads, if clustered { rank as u32 } else { 0 }))
        .collect();
    if clustered {
        cluster::link(&states);
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
pub(super) enum Wait {
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
    /// It polls at this location (an `mbarrier` wait, a `setmaxnreg.inc`): resumed every round.
    Poll {
        at: &'static Location<'static>,
        on: PollOn,
    },
    /// It waits at the grid barrier, at this location.
    Grid(&'static Location<'static>),
    /// It waits at this location for a named barrier's completion.
    Named {
        at: &'static Location<'static>,
        wait: NamedWait,
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
            Wait::Poll { at, .. } => format!("the wait at {at}"),
            Wait::Grid(at) => format!("the grid barrier at {at}"),
            Wait::Named { at, wait } => format!("named barrier {} at {at}", wait.id),
            Wait::Ready | Wait::Exited => "nowhere".to_string(),
        }
    }
}

/// Resumes every ready thread of every block of the cluster until it waits at a barrier, a
/// cluster barrier, a named barrier or a warp shuffle, or returns. Then makes ready the threads
/// whose named barrier completed and goes round again; when none, completes the shuffles of every warp
/// whose lanes all wait at the same one, and goes round again; when no thread waits at a
/// shuffle, opens the barrier of each block whose threads all reached the same one, and goes
/// round again; when none does, checks that every thread of the cluster waits at the cluster
/// barrier, opens it, and goes round again.
fn schedule(states: &[BlockState], threads: &mut [Vec<Thread>]) -> Result<(), SimError> {
    let mut wait: Vec<Vec<Wait>> = threads.iter().map(|b| vec![Wait::Ready; b.len()]).collect();
    loop {
        let updates = |states: &[BlockState]| states.iter().map(|s| s.progress.get()).sum::<u64>();
        let updates_before = updates(states);
        // Whether a thread ran that was not only polling again: progress by itself.
        let mut ran_ready = false;
        for ((state, block), wait) in states.iter().zip(threads.iter_mut()).zip(wait.iter_mut()) {
            let _entered = device::enter(state);
            for (tid, thread) in block.iter_mut().enumerate() {
                match wait[tid] {
                    Wait::Ready => ran_ready = true,
                    Wait::Poll { .. } => {}
                    _ => continue,
                }
                state.current.set(tid as u32);
                match panic::catch_unwind(AssertUnwindSafe(|| thread.resume(()))) {
                    Ok(CoroutineResult::Yield(Suspend::Barrier(at))) => wait[tid] = Wait::Barrier(at),
                    Ok(CoroutineResult::Yield(Suspend::Cluster(at))) => wait[tid] = Wait::Cluster(at),
                    Ok(CoroutineResult::Yield(Suspend::Warp { at, value, src_lane })) => {
                        wait[tid] = Wait::Warp { at, value, src_lane }
                    }
                    Ok(CoroutineResult::Yield(Suspend::Poll { at, on })) => wait[tid] = Wait::Poll { at, on },
                    Ok(CoroutineResult::Yield(Suspend::Grid(at))) => wait[tid] = Wait::Grid(at),
                    Ok(CoroutineResult::Yield(Suspend::Named { at, wait: w })) => {
                        wait[tid] = Wait::Named { at, wait: w }
                    }
                    Ok(CoroutineResult::Return(())) => {
                        wait[tid] = Wait::Exited;
                        state
                            .thread_exited(tid as u32)
                            .map_err(|v| state.error(tid as u32, v))?;
                    }
                    Err(payload) => return Err(state.report(tid as u32, payload)),
                }
            }
            let exited = wait.iter().all(|&w| w == Wait::Exited);
            if exited && !state.exited.replace(true) {
                if let Some(error) = state.block_exited() {
                    return Err(error);
                }
            }
        }
        // Threads whose named barrier completed run first: the thread whose arrival completed it
        // went on, maybe to a shuffle its warp's other lanes, still waiting here, reach next.
        let mut any = false;
        for (state, wait) in states.iter().zip(wait.iter_mut()) {
            any |= wake_named(state, wait);
        }
        if any {
            continue;
        }
        for (state, wait) in states.iter().zip(wait.iter_mut()) {
            any |= exchange_warps(state, wait)?;
        }
        if any {
            continue;
        }
        if let Some((state, tid, at, on)) = first_poller(states, &wait) {
            if ran_ready || updates(states) != updates_before {
                continue;
            }
            return Err(state.error(tid, state.deadlock(tid, at, on)));
        }
        let mut opened = false;
        for (state, wait) in states.iter().zip(wait.iter_mut()) {
            opened |= open_barrier(state, wait)?;
        }
        if opened || open_grid_barrier(states, &mut wait)? {
            continue;
        }
        if !cluster::open_barrier(states, &mut wait)? {
            return named_never_completes(states, &wait);
        }
    }
}

/// Makes ready the threads of `state` whose named barrier completed; returns whether any was.
fn wake_named(state: &BlockState, wait: &mut [Wait]) -> bool {
    // Every scheduler round of every block comes here: a block without named barriers has
    // nothing to wake.
    if state.named.borrow().is_none() {
        return false;
    }
    let mut any = false;
    for w in wait.iter_mut() {
        if let Wait::Named { wait: named, .. } = *w {
            if state.named_passed(named) {
                *w = Wait::Ready;
                any = true;
            }
        }
    }
    any
}

/// The end of a run, once nothing can go on: the report of the first thread still waiting at a
/// named barrier (no thread left will complete it), else `Ok`.
fn named_never_completes(states: &[BlockState], wait: &[Vec<Wait>]) -> Result<(), SimError> {
    for (state, wait) in states.iter().zip(wait) {
        for (tid, w) in wait.iter().enumerate() {
            if let Wait::Named { at, wait } = *w {
                return Err(state.error(tid as u32, state.named_deadlock(wait.id, at)));
            }
        }
    }
    Ok(())
}

/// The first thread of the cluster that polls: its block, index, location and what it waits for.
fn first_poller<'s, 'l>(
    states: &'s [BlockState<'l>],
    wait: &[Vec<Wait>],
) -> Option<(&'s BlockState<'l>, u32, &'static Location<'static>, PollOn)> {
    states.iter().zip(wait).find_map(|(state, wait)| {
        wait.iter().enumerate().find_map(|(tid, w)| match w {
            Wait::Poll { at, on } => Some((state, tid as u32, *at, *on)),
            _ => None,
        })
    })
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
            w @ (Wait::Cluster(_) | Wait::Grid(_) | Wait::Named { .. }) => w.describe(),
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
    state.barrier_passed();
    wait.fill(Wait::Ready);
    Ok(true)
}

/// The error for a barrier spanning several blocks (`barrier`, named lazily) that `waiting`
/// threads wait at while some thread of `states` has returned: the first such thread, reported
/// against its block. `Ok` when none has.
pub(super) fn no_thread_exited(
    states: &[BlockState],
    wait: &[Vec<Wait>],
    barrier: impl Fn() -> String,
    waiting: usize,
) -> Result<(), SimError> {
    for (state, block_wait) in states.iter().zip(wait.iter()) {
        if let Some(gone) = block_wait.iter().position(|&w| w == Wait::Exited) {
            return Err(state.error(
                gone as u32,
                Violation::BarrierNotReached {
                    barrier: barrier(),
                    waiting,
                },
            ));
        }
    }
    Ok(())
}

/// Opens the grid barrier ([`crate::grid::sync`], a cooperative launch: `states` are every block
/// of the grid), once no block barrier or shuffle can complete, if some thread waits at it:
/// checks that every thread of the grid does (at any of the kernel's grid barriers: on the GPU
/// they are one counter). Returns whether it opened it.
fn open_grid_barrier(states: &[BlockState], wait: &mut [Vec<Wait>]) -> Result<bool, SimError> {
    let Some((first_block, first, at)) = wait.iter().enumerate().find_map(|(b, w)| {
        w.iter().enumerate().find_map(|(t, w)| match w {
            Wait::Grid(at) => Some((b, t, *at)),
            _ => None,
        })
    }) else {
        return Ok(false);
    };
    let waiting = wait
        .iter()
        .flatten()
        .filter(|w| matches!(w, Wait::Grid(_)))
        .count();
    no_thread_exited(states, wait, || format!("{at} (the grid barrier)"), waiting)?;
    for (state, block_wait) in states.iter().zip(wait.iter()) {
        if let Some(other) = block_wait.iter().position(|w| !matches!(w, Wait::Grid(_))) {
            return Err(state.error(
                other as u32,
                Violation::DifferentBarriers {
                    here: block_wait[other].describe(),
                    there: format!(
                        "the grid barrier at {at} (block {} waits there)",
                        states[first_block].block_idx
                    ),
                    other: states[first_block].thread_dim(first as u32),
                },
            ));
        }
    }
    for state in states {
        if let Some(low) = state.grid_word_low_bits().filter(|&low| low != 0) {
            return Err(state.error(
                0,
                Violation::Panic {
                    message: format!(
                        "grid barrier at {at}: once every block arrived, the word's low 31 bits \
                         are {low:#x}, not 0: they were not 0 when the launch started (zero the \
                         word before its first launch; a launch that ends leaves them 0 for the \
                         next), or the blocks arrived on different words; on a GPU the barrier \
                         would open early or never"
                    ),
                },
            ));
        }
    }
    for (state, wait) in states.iter().zip(wait.iter_mut()) {
        state.epoch.set(state.epoch.get() + 1);
        state.grid_epoch.set(state.grid_epoch.get() + 1);
        state.barrier_passed();
        wait.fill(Wait::Ready);
    }
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
