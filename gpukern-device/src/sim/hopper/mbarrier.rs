//! The simulator's `mbarrier`s: one record per barrier of a block (by its shared-memory byte
//! offset), with the state the hardware keeps (arrivals and transaction bytes still expected in
//! the current phase, the phase) and what the checks need besides: who initialised it and when,
//! whether it is live, how many phases completed, and what the arriving threads knew (their
//! [`Clock`]s, joined per phase, handed to the threads that wait for that phase).
//!
//! Each `init` starts a new incarnation with a slot of its own, so what a thread saw of an old
//! incarnation never counts for a new one.

use std::collections::HashMap;

use super::clock::Clock;
use super::violation;
use crate::sim::{Rule, Violation};

/// Largest arrival count of one phase (the hardware's 20-bit count).
const MAX_COUNT: u32 = (1 << 20) - 1;

/// One barrier incarnation.
pub(crate) struct Barrier {
    /// Its slot in the threads' clocks.
    pub(crate) slot: usize,
    /// Arrivals per phase.
    count: u32,
    /// Arrivals the current phase still expects.
    pending: u32,
    /// Bytes the current phase still expects (negative while copies land before their
    /// `expect_tx`).
    tx: i64,
    /// Phases completed since the `init`.
    pub(crate) completed: u32,
    /// Whether it is live (initialised, not invalidated).
    live: bool,
    /// The thread that initialised it, and the block's barrier interval then.
    init_by: u32,
    init_epoch: u32,
    /// Whether that thread's `fence_init` made the init visible to the copy engine.
    init_fenced: bool,
    /// The cluster barriers the block had passed at the init (a peer may use the barrier only
    /// after one more).
    init_cluster_epoch: u32,
    /// The latest use by another block of the cluster (a remote arrival or a multicast copy):
    /// the phase it counted towards, and the block rank and thread that made it.
    remote: Option<RemoteUse>,
    /// What the threads arriving in the current phase knew.
    release: Clock,
    /// What the threads arriving in the last completed phase knew.
    last: Clock,
}

/// A use of a barrier by a thread of another block of the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RemoteUse {
    /// The phase it counted towards.
    pub(crate) phase: u32,
    /// The using block's rank, and its thread.
    pub(crate) rank: u32,
    pub(crate) thread: u32,
}

/// Whether a wait is over.
pub(crate) enum Wait {
    /// The phase waited for completed: the thread goes on, knowing `Barrier::last`.
    Done,
    /// Not yet.
    Pending,
}

impl Barrier {
    /// Arrives once and adds `tx` expected bytes (`mbarrier.arrive.expect_tx`, or `arrive` with 0)
    /// with what the arriving thread knows; returns whether the phase completed.
    pub(crate) fn arrive(&mut self, offset: usize, tx: u32, known: &Clock) -> Result<bool, Violation> {
        if self.pending == 0 {
            return Err(violation(
                Rule::MbarrierArrivals,
                format!(
                    "an arrival on {} in phase {}, whose {} arrival(s) have all arrived (it still \
                     waits for {} byte(s) of copies): more arrivals than the count in one phase",
                    name(offset),
                    self.completed,
                    self.count,
                    self.tx
                ),
            ));
        }
        self.tx += i64::from(tx);
        self.pending -= 1;
        self.release.join(known);
        self.overdelivered(offset)?;
        Ok(self.complete_if_done())
    }

    /// Counts `bytes` delivered by a copy (`complete_tx`); returns whether the phase completed.
    pub(crate) fn complete_tx(&mut self, offset: usize, bytes: u32) -> Result<bool, Violation> {
        self.tx -= i64::from(bytes);
        self.overdelivered(offset)?;
        Ok(self.complete_if_done())
    }

    /// The error when every arrival of the phase is in and its copies delivered more bytes than
    /// the arrivals' `expect_tx` announced: on a GPU the phase completes before the last bytes
    /// land, which then count towards the next phase.
    fn overdelivered(&self, offset: usize) -> Result<(), Violation> {
        if self.pending == 0 && self.tx < 0 {
            return Err(violation(
                Rule::MbarrierTransactions,
                format!(
                    "the copies completing on phase {} of {} delivered {} byte(s) more than its \
                     expect_tx announced: the phase completes before they all land",
                    self.completed,
                    name(offset),
                    -self.tx
                ),
            ));
        }
        Ok(())
    }

    fn complete_if_done(&mut self) -> bool {
        if self.pending > 0 || self.tx != 0 {
            return false;
        }
        self.completed += 1;
        self.pending = self.count;
        self.last = std::mem::take(&mut self.release);
        true
    }

    /// Whether the wait of a thread for the phase of parity `parity` is over, the thread having
    /// seen `seen` phases complete by its own earlier waits. The phase it means is the last one
    /// it saw, if of that parity, or the next one; if the barrier has completed the phase after
    /// that too, the parity can no longer find it (on a GPU the wait returns for the wrong phase,
    /// or hangs): reported.
    pub(crate) fn poll(&self, offset: usize, parity: u32, seen: u32) -> Result<Wait, Violation> {
        let parity = i64::from(parity & 1);
        let last_seen = i64::from(seen) - 1;
        let meant = if last_seen.rem_euclid(2) == parity {
            last_seen
        } else {
            last_seen + 1
        };
        let completed = i64::from(self.completed);
        if completed >= meant + 2 {
            let saw = match last_seen {
                -1 => "no phase of it complete yet".to_string(),
                p => format!("phase {p} complete last"),
            };
            return Err(violation(
                Rule::MbarrierPhaseReuse,
                format!(
                    "a wait for parity {parity} of {} means phase {meant} (this thread saw {saw}), \
                     but phases up to {} have completed: the barrier was re-armed before this \
                     waiter saw its phase (a phase reused, or more arrivals per phase than the \
                     count), and the parity now names another phase",
                    name(offset),
                    completed - 1
                ),
            ));
        }
        Ok(match completed > meant {
            true => Wait::Done,
            false => Wait::Pending,
        })
    }

    /// Records a use of the barrier's current phase by thread `thread` of the cluster's block
    /// `rank` (call it before the arrival or the bytes that may complete the phase).
    pub(crate) fn note_remote(&mut self, rank: u32, thread: u32) {
        self.remote = Some(RemoteUse {
            phase: self.completed,
            rank,
            thread,
        });
    }

    /// What the threads arriving in the last completed phase knew.
    pub(crate) fn last_release(&self) -> &Clock {
        &self.last
    }

    /// What the current phase still waits for, for a deadlock report.
    pub(crate) fn describe_pending(&self, offset: usize, parity: u32) -> String {
        format!(
            "phase {} (parity {}) of {}, which still expects {} of its {} arrival(s) and {} \
             byte(s) of copies",
            self.completed,
            parity & 1,
            name(offset),
            self.pending,
            self.count,
            self.tx
        )
    }
}

/// How a barrier is named in reports.
pub(crate) fn name(offset: usize) -> String {
    format!("the mbarrier at shared byte {offset}")
}

/// The barriers of one block, and what each thread saw of them by its own waits.
#[derive(Default)]
pub(crate) struct Barriers {
    by_offset: HashMap<usize, Barrier>,
    /// The offset of each slot's barrier.
    offsets: Vec<usize>,
    /// Per thread, per slot: phases seen complete by the thread's own waits.
    seen: HashMap<(u32, usize), u32>,
}

impl Barriers {
    /// At the block's exit: the live barrier (lowest offset first) whose current phase holds
    /// bytes that copies delivered and no arrival's `expect_tx` announced, with the thread that
    /// initialised it and the report. Copies of more bytes than a phase expected complete it
    /// early and leave the rest to the next phase, which a ring's last walk never arms: on a GPU
    /// the excess lands in a stage its consumers may already be reading, or completes a later
    /// phase early.
    pub(crate) fn unannounced_bytes(&self) -> Option<(u32, Violation)> {
        let (offset, b) = self
            .by_offset
            .iter()
            .filter(|(_, b)| b.live && b.tx < 0)
            .min_by_key(|(offset, _)| **offset)?;
        Some((
            b.init_by,
            violation(
                Rule::MbarrierTransactions,
                format!(
                    "the block returned with {} byte(s) of copies counted on phase {} of {} that \
                     no arrival announced: a phase before it was sent more bytes than its \
                     expect_tx (or a copy completes on a barrier nothing expects it on)",
                    -b.tx,
                    b.completed,
                    name(*offset)
                ),
            ),
        ))
    }

    /// `mbarrier.init` of the barrier at `offset` for `count` arrivals per phase, by thread `tid`
    /// in barrier interval `epoch` and cluster-barrier interval `cluster_epoch` (a peer may use
    /// the barrier only after one more cluster barrier).
    pub(crate) fn init(
        &mut self,
        offset: usize,
        count: u32,
        tid: u32,
        (epoch, cluster_epoch): (u32, u32),
    ) -> Result<(), Violation> {
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(violation(
                Rule::MbarrierInit,
                format!(
                    "init of {} with {count} arrivals per phase (1 to {MAX_COUNT})",
                    name(offset)
                ),
            ));
        }
        if let Some(b) = self.by_offset.get(&offset).filter(|b| b.live) {
            let who = match b.init_by == tid {
                true => "this thread already initialised it".to_string(),
                false => format!("thread {} initialised it", b.init_by),
            };
            return Err(violation(
                Rule::MbarrierInit,
                format!(
                    "init of {}, which is live ({who}): init by one thread only, and inval before \
                     an init reuses the barrier",
                    name(offset)
                ),
            ));
        }
        let slot = self.offsets.len();
        self.offsets.push(offset);
        self.by_offset.insert(
            offset,
            Barrier {
                slot,
                count,
                pending: count,
                tx: 0,
                completed: 0,
                live: true,
                init_by: tid,
                init_epoch: epoch,
                init_fenced: false,
                init_cluster_epoch: cluster_epoch,
                remote: None,
                release: Clock::default(),
                last: Clock::default(),
            },
        );
        Ok(())
    }

    /// The live barrier at `offset` as a thread of another block of the cluster (or the copy
    /// engine, for `copy`) uses it, in the cluster's `cluster_epoch`-th cluster-barrier interval:
    /// its init must be fenced (`fence.mbarrier_init.release.cluster`) and published to the
    /// cluster by a cluster barrier since.
    pub(crate) fn live_remote(
        &mut self,
        offset: usize,
        cluster_epoch: u32,
    ) -> Result<&mut Barrier, Violation> {
        let b = self.live(offset, u32::MAX, u32::MAX)?;
        if !b.init_fenced || b.init_cluster_epoch == cluster_epoch {
            return Err(violation(
                Rule::MbarrierUninitialized,
                format!(
                    "another block of the cluster uses {}, whose init (by thread {}) {}: an init \
                     reaches the cluster through fence_init (fence.mbarrier_init.release.cluster) \
                     and then a cluster barrier",
                    name(offset),
                    b.init_by,
                    if b.init_fenced {
                        "no cluster barrier has published since"
                    } else {
                        "was not fenced"
                    }
                ),
            ));
        }
        Ok(b)
    }

    /// The latest use by another block of a barrier whose phase it counted towards no thread of
    /// this block saw complete (`seen`: the most phases of a slot any thread of the block saw):
    /// the barrier, and the use.
    pub(crate) fn remote_unwaited(&self, seen: impl Fn(usize) -> u32) -> Option<(usize, RemoteUse)> {
        self.by_offset
            .iter()
            .filter_map(|(&offset, b)| b.remote.map(|r| (offset, b.slot, r)))
            .filter(|&(_, slot, r)| seen(slot) <= r.phase)
            .min_by_key(|&(offset, _, _)| offset)
            .map(|(offset, _, r)| (offset, r))
    }

    /// `fence.mbarrier_init` by thread `tid`: its inits so far are visible to the copy engine.
    pub(crate) fn fence_init(&mut self, tid: u32) {
        for b in self.by_offset.values_mut().filter(|b| b.init_by == tid) {
            b.init_fenced = true;
        }
    }

    /// `mbarrier.inval` of the barrier at `offset` by thread `tid`.
    pub(crate) fn inval(&mut self, offset: usize, tid: u32, epoch: u32) -> Result<(), Violation> {
        self.live(offset, tid, epoch)?.live = false;
        Ok(())
    }

    /// The live barrier at `offset`, for an operation by thread `tid` in barrier interval `epoch`
    /// (`tid` `None`: the copy engine, which needs the init fenced).
    pub(crate) fn live(&mut self, offset: usize, tid: u32, epoch: u32) -> Result<&mut Barrier, Violation> {
        let Some(b) = self.by_offset.get_mut(&offset) else {
            return Err(violation(
                Rule::MbarrierUninitialized,
                format!("{} was never initialised (mbarrier::init)", name(offset)),
            ));
        };
        if !b.live {
            return Err(violation(
                Rule::MbarrierInvalidated,
                format!(
                    "{} was invalidated (mbarrier::inval) and not initialised again",
                    name(offset)
                ),
            ));
        }
        if b.init_by != tid && b.init_epoch == epoch {
            return Err(violation(
                Rule::MbarrierUninitialized,
                format!(
                    "thread {} initialised {} with no block barrier since: its init is not yet \
                     visible to this thread (fence_init, then sync_threads, before any other \
                     thread uses it)",
                    b.init_by,
                    name(offset)
                ),
            ));
        }
        Ok(b)
    }

    /// The live barrier at `offset` as the copy engine sees it, for a copy issued by `tid`: as
    /// [`Barriers::live`], and its init fenced (`fence_init`).
    pub(crate) fn live_for_copy(
        &mut self,
        offset: usize,
        tid: u32,
        epoch: u32,
    ) -> Result<&mut Barrier, Violation> {
        let b = self.live(offset, tid, epoch)?;
        if !b.init_fenced {
            return Err(violation(
                Rule::MbarrierUninitialized,
                format!(
                    "a copy completes on {}, whose init thread {} did not make visible to the \
                     copy engine (mbarrier::fence_init after the init)",
                    name(offset),
                    b.init_by
                ),
            ));
        }
        Ok(b)
    }

    /// The shared-memory offset of barrier `slot`'s barrier (for reports).
    pub(crate) fn offset_of(&self, slot: usize) -> Option<usize> {
        self.offsets.get(slot).copied()
    }

    /// The barrier at `offset`, live or not, if any (for reports).
    pub(crate) fn get(&self, offset: usize) -> Option<&Barrier> {
        self.by_offset.get(&offset)
    }

    /// Phases of barrier `slot` thread `tid` saw complete by its own waits.
    pub(crate) fn seen(&self, tid: u32, slot: usize) -> u32 {
        self.seen.get(&(tid, slot)).copied().unwrap_or(0)
    }

    /// Records that thread `tid`'s wait saw `phases` phases of barrier `slot` complete.
    pub(crate) fn saw(&mut self, tid: u32, slot: usize, phases: u32) {
        let seen = self.seen.entry((tid, slot)).or_insert(0);
        *seen = (*seen).max(phases);
    }
}

#[cfg(test)]
mod tests {
    use super::{Barriers, Wait};
    use crate::sim::hopper::clock::Clock;
    use crate::sim::{Rule, Violation};

    fn rule(v: Violation) -> Rule {
        match v {
            Violation::Protocol { rule, .. } => rule,
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_phase_completes_when_arrivals_and_bytes_are_in() {
        let mut bars = Barriers::default();
        bars.init(64, 2, 0, (0, 0)).unwrap();
        bars.fence_init(0);
        let b = bars.live(64, 0, 1).unwrap();
        assert!(!b.arrive(64, 128, &Clock::default()).unwrap());
        assert!(!b.complete_tx(64, 100).unwrap());
        assert!(!b.arrive(64, 0, &Clock::default()).unwrap());
        assert!(b.complete_tx(64, 28).unwrap());
        assert_eq!(b.completed, 1);
        assert!(matches!(b.poll(64, 0, 0), Ok(Wait::Done)));
        assert!(matches!(b.poll(64, 1, 1), Ok(Wait::Pending)));
    }

    #[test]
    fn each_broken_rule_is_named() {
        let mut bars = Barriers::default();
        assert_eq!(
            rule(bars.live(8, 0, 0).err().unwrap()),
            Rule::MbarrierUninitialized
        );
        bars.init(8, 1, 0, (0, 0)).unwrap();
        assert_eq!(rule(bars.init(8, 1, 1, (0, 0)).unwrap_err()), Rule::MbarrierInit);
        assert_eq!(
            rule(bars.live(8, 1, 0).err().unwrap()),
            Rule::MbarrierUninitialized
        );
        assert_eq!(
            rule(bars.live_for_copy(8, 0, 1).err().unwrap()),
            Rule::MbarrierUninitialized
        );
        let b = bars.live(8, 1, 1).unwrap();
        b.arrive(8, 16, &Clock::default()).unwrap();
        assert_eq!(
            rule(b.arrive(8, 0, &Clock::default()).unwrap_err()),
            Rule::MbarrierArrivals
        );
        assert_eq!(
            rule(b.complete_tx(8, 32).unwrap_err()),
            Rule::MbarrierTransactions
        );
        bars.inval(8, 0, 1).unwrap();
        assert_eq!(rule(bars.live(8, 0, 1).err().unwrap()), Rule::MbarrierInvalidated);
    }

    #[test]
    fn a_wait_two_phases_behind_is_phase_reuse() {
        let mut bars = Barriers::default();
        bars.init(0, 1, 0, (0, 0)).unwrap();
        let b = bars.live(0, 0, 0).unwrap();
        // A producer's first wait for parity 1 of a fresh barrier returns at once.
        assert!(matches!(b.poll(0, 1, 0), Ok(Wait::Done)));
        b.arrive(0, 0, &Clock::default()).unwrap();
        b.arrive(0, 0, &Clock::default()).unwrap();
        // Phases 0 and 1 completed; a waiter that saw none waits for parity 0 (phase 0).
        assert_eq!(rule(b.poll(0, 0, 0).err().unwrap()), Rule::MbarrierPhaseReuse);
        // One that saw phase 0 waits for parity 1 (phase 1): done.
        assert!(matches!(b.poll(0, 1, 1), Ok(Wait::Done)));
    }
}
