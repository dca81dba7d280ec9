//! Named barriers ([`crate::barrier`]) in one block: who counted themselves in at each of the
//! fifteen barriers since it last completed, and what each warp knows of the others' arrivals.
//!
//! Every thread counts its arrivals (at [`crate::barrier::sync`] or [`crate::barrier::arrive`]);
//! a shared access remembers its thread's count then. Each warp keeps a vector clock over the
//! block's warps: the arrivals of each warp it knows to have happened. A barrier's completion
//! joins what its threads knew when they arrived, their own arrival included, into the warps
//! that waited there. An access of one thread is ordered before a later access of another, in
//! one block-barrier interval, when the later thread's warp knows an arrival of the earlier
//! thread's warp past the earlier access's count ([`Order::covers`]). Clocks per warp, not per
//! thread, keep this small; they are exact because the barriers are `.aligned`: a warp's lanes
//! make the same arrivals, which each completion checks.

use std::panic::Location;

use super::super::hopper::clock::Clock;
use super::super::hopper::violation;
use super::super::{Rule, Violation, WARP_SIZE};
use super::BlockState;

/// Named barriers a block has: ids 1 to 15 (0 is the block barrier's).
const IDS: usize = 16;
/// Most warps a block has: 1024 threads of 32.
pub(super) const MAX_WARPS: usize = 32;

/// Arrivals of each warp, as a warp knows them.
pub(super) type WarpClock = [u32; MAX_WARPS];

/// One thread counted in at a barrier that has not completed yet.
struct Arrival {
    tid: u32,
    waits: bool,
    /// The thread's named-barrier arrivals, this one included (it may arrive at others before
    /// this barrier completes).
    count: u32,
    /// What its warp knew when it arrived, its own arrival included.
    known: WarpClock,
    /// What it knew of Hopper's protocols then (none before the block's first Hopper instruction).
    clock: Option<Clock>,
}

/// One named barrier.
#[derive(Default)]
struct Barrier {
    /// The threads counted in since it last completed.
    arrivals: Vec<Arrival>,
    /// The thread count they name, and where the first of them called it.
    expected: Option<(u32, &'static Location<'static>)>,
    /// Completions so far.
    completed: u32,
}

/// A block's named barriers (see the module documentation).
pub(in crate::sim) struct NamedBarriers {
    barriers: [Barrier; IDS],
    /// Per thread: its arrivals so far.
    arrivals: Vec<u32>,
    /// Per warp: what it knows of each warp's arrivals.
    known: Vec<WarpClock>,
}

/// What orders a thread's shared accesses besides block barriers, as the shadow reads it.
#[derive(Clone, Copy)]
pub(in crate::sim) struct Order<'a> {
    /// The accessing thread's arrivals at named barriers so far.
    pub(in crate::sim) count: u32,
    /// What the accessing thread's warp knows of each warp's arrivals.
    pub(in crate::sim) known: &'a WarpClock,
}

impl Order<'_> {
    /// Whether an access by thread `tid` made after `count` of its arrivals is ordered before
    /// this thread's access.
    pub(in crate::sim) fn covers(&self, tid: u32, count: u32) -> bool {
        self.known[(tid / WARP_SIZE) as usize] > count
    }
}

impl NamedBarriers {
    fn new(threads: usize) -> Self {
        NamedBarriers {
            barriers: Default::default(),
            arrivals: vec![0; threads],
            known: vec![[0; MAX_WARPS]; threads.div_ceil(WARP_SIZE as usize)],
        }
    }

    /// What orders thread `tid`'s accesses now.
    pub(in crate::sim) fn order(&self, tid: u32) -> Order<'_> {
        Order {
            count: self.arrivals[tid as usize],
            known: &self.known[(tid / WARP_SIZE) as usize],
        }
    }
}

/// Where a thread counted in at barrier `id` waits: until the barrier's completions pass
/// `generation`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::sim) struct NamedWait {
    pub(in crate::sim) id: u32,
    pub(in crate::sim) generation: u32,
}

impl BlockState<'_> {
    /// The running thread counts itself in at named barrier `id` for `threads` threads, at `at`
    /// ([`crate::barrier::sync`] when `waits`, else [`crate::barrier::arrive`]). Returns what a
    /// waiting thread waits for, or `None` when it need not wait (it arrived only, or its
    /// arrival completed the barrier).
    pub(in crate::sim) fn named_arrive(
        &self,
        id: u32,
        threads: u32,
        waits: bool,
        at: &'static Location<'static>,
    ) -> Result<Option<NamedWait>, Violation> {
        let tid = self.current.get();
        let block = self.yielders.len() as u32;
        let warps = block.div_ceil(WARP_SIZE);
        if id == 0 || id as usize >= IDS {
            return Err(rule(format!(
                "named barrier {id} at {at}: the ids are 1 to 15 (0 is the block barrier's, \
                 thread::sync_threads)"
            )));
        }
        if threads == 0 || !threads.is_multiple_of(WARP_SIZE) || threads > warps * WARP_SIZE {
            return Err(rule(format!(
                "named barrier {id} at {at} for {threads} threads: the count is a multiple of 32 \
                 (the barrier counts whole warps) from 32 to the block's {}",
                warps * WARP_SIZE
            )));
        }
        let clock = self
            .hopper
            .borrow()
            .as_deref()
            .map(|h| h.clocks[tid as usize].clone());
        let mut named = self.named.borrow_mut();
        let n = &mut **named.get_or_insert_with(|| Box::new(NamedBarriers::new(block as usize)));
        let warp = (tid / WARP_SIZE) as usize;
        n.arrivals[tid as usize] += 1;
        let mut known = n.known[warp];
        known[warp] = known[warp].max(n.arrivals[tid as usize]);
        let barrier = &mut n.barriers[id as usize];
        match barrier.expected {
            Some((count, first)) if count != threads => {
                return Err(rule(format!(
                    "named barrier {id}: this thread counts itself in at {at} for {threads} \
                     threads, a thread before it at {first} for {count}: every thread of one \
                     completion names the same count"
                )));
            }
            Some(_) => {}
            None => barrier.expected = Some((threads, at)),
        }
        if barrier.arrivals.iter().any(|a| a.tid == tid) {
            return Err(rule(format!(
                "named barrier {id}: this thread counts itself in again at {at} before the \
                 barrier completed ({} of its {threads} threads counted in): on a GPU its second \
                 arrival counts toward the same completion",
                barrier.arrivals.len()
            )));
        }
        barrier.arrivals.push(Arrival {
            tid,
            waits,
            count: n.arrivals[tid as usize],
            known,
            clock,
        });
        let generation = barrier.completed;
        // The hardware counts 32 for each arriving warp, so a block's last warp, when it has
        // fewer lanes, counts 32 once all of them are in.
        let mut counted = barrier.arrivals.len() as u32;
        let last_lanes = block % WARP_SIZE;
        if last_lanes != 0 {
            let last_warp = block / WARP_SIZE;
            let in_last = barrier
                .arrivals
                .iter()
                .filter(|a| a.tid / WARP_SIZE == last_warp)
                .count();
            if in_last as u32 == last_lanes {
                counted += WARP_SIZE - last_lanes;
            }
        }
        if counted < threads {
            return Ok(waits.then_some(NamedWait { id, generation }));
        }
        self.complete(n, id, block)?;
        Ok(None)
    }

    /// Completes barrier `id`, all its threads counted in: checks that they are whole warps
    /// with the same arrivals, and joins what they knew into the warps that waited.
    fn complete(&self, n: &mut NamedBarriers, id: u32, block: u32) -> Result<(), Violation> {
        let barrier = &mut n.barriers[id as usize];
        let arrivals = std::mem::take(&mut barrier.arrivals);
        // The first arrival named the count and place (a completion has arrivals).
        let Some((threads, at)) = barrier.expected.take() else {
            return Ok(());
        };
        barrier.completed += 1;
        let mut lanes = [0u32; MAX_WARPS];
        for a in &arrivals {
            lanes[(a.tid / WARP_SIZE) as usize] += 1;
        }
        for (warp, &here) in lanes.iter().enumerate() {
            let whole = block.saturating_sub(warp as u32 * WARP_SIZE).min(WARP_SIZE);
            if here != 0 && here != whole {
                return Err(rule(format!(
                    "named barrier {id} (first reached at {at}) completed its {threads} threads \
                     with {here} of warp {warp}'s {whole} lanes: the barrier is .aligned, every \
                     lane of a warp counts itself in together (on a GPU each arriving warp counts \
                     32, so it would complete with other threads than these)"
                )));
            }
            let counts = arrivals
                .iter()
                .filter(|a| (a.tid / WARP_SIZE) as usize == warp)
                .map(|a| a.count);
            if let (Some(lo), Some(hi)) = (counts.clone().min(), counts.max()) {
                if lo != hi {
                    return Err(rule(format!(
                        "named barrier {id} (first reached at {at}): the lanes of warp {warp} \
                         counted in after different numbers of named-barrier arrivals ({lo} and \
                         {hi}): they made different arrivals before, which .aligned barriers \
                         forbid"
                    )));
                }
            }
        }
        let mut joined = [0u32; MAX_WARPS];
        let mut clock = Clock::default();
        for a in &arrivals {
            for (j, k) in joined.iter_mut().zip(&a.known) {
                *j = (*j).max(*k);
            }
            if let Some(c) = &a.clock {
                clock.join(c);
            }
        }
        let mut hopper = self.hopper.borrow_mut();
        for a in arrivals.iter().filter(|a| a.waits) {
            let warp = &mut n.known[(a.tid / WARP_SIZE) as usize];
            for (mine, j) in warp.iter_mut().zip(&joined) {
                *mine = (*mine).max(*j);
            }
            if let Some(h) = hopper.as_deref_mut() {
                h.clocks[a.tid as usize].join(&clock);
            }
        }
        Ok(())
    }

    /// Whether a thread waiting for `wait` may go on: the barrier completed since it arrived.
    pub(super) fn named_passed(&self, wait: NamedWait) -> bool {
        self.named
            .borrow()
            .as_deref()
            .is_some_and(|n| n.barriers[wait.id as usize].completed > wait.generation)
    }

    /// What barrier `id` still waits for, as a report says it.
    pub(super) fn named_pending(&self, id: u32) -> String {
        let named = self.named.borrow();
        let Some(b) = named.as_deref().map(|n| &n.barriers[id as usize]) else {
            return format!("named barrier {id}");
        };
        let Some((threads, _)) = b.expected else {
            return format!("named barrier {id}");
        };
        let waiting = b.arrivals.iter().filter(|a| a.waits).count();
        format!(
            "named barrier {id}, which {} of its {threads} threads have counted themselves in at \
             ({waiting} waiting)",
            b.arrivals.len()
        )
    }

    /// The report of a thread waiting at named barrier `id` (at `at`) when no thread left can
    /// complete it.
    pub(super) fn named_deadlock(&self, id: u32, at: &'static Location<'static>) -> Violation {
        rule(format!(
            "deadlock: this thread waits at {at} for {}, and no thread left will count itself \
             in: on a GPU the kernel would never finish",
            self.named_pending(id)
        ))
    }
}

fn rule(message: String) -> Violation {
    violation(Rule::NamedBarrier, message)
}
