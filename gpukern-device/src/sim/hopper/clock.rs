//! What a simulated thread knows has completed, by happens-before: for each barrier (each
//! incarnation of an `mbarrier`, by slot) how many of its phases it has seen complete, for
//! each warpgroup how many of its `wgmma` groups it has seen retired, and for each thread that
//! issued bulk stores how many of its bulk groups it has seen done reading.
//!
//! A thread learns its own waits and retirements, and what other threads knew when they arrived
//! on a barrier phase it then waits for, or when they reached a block barrier it passed: the
//! clocks are joined there (vector clocks over barriers and warpgroups, not over threads, which
//! keeps them small).
//!
//! It also knows, for each thread that arrived on an `mbarrier`, how many of that thread's
//! arrivals (its releases) happen before it: an ordinary shared-memory access a thread made
//! before its `n`-th arrival is ordered before another thread's access once that thread knows `n`
//! of the first's releases (the shadow of shared memory asks, [`Clock::released`]). A
//! `mbarrier::warp_arrive` is its lane 0's arrival, a release of that lane alone.
//!
//! In a cluster each block numbers its barriers and warpgroups itself, so a thread's knowledge of
//! another block of its cluster is kept apart, by that block's rank: learned
//! through a remote `mbarrier` arrival (the arriving thread's knowledge, put in the terms of the
//! barrier's block by [`Clock::seen_from`]) or a cluster barrier.

/// Most warpgroups a block has: 1024 threads of 128.
pub(crate) const MAX_WARPGROUPS: usize = 8;

/// Counts by index that only grow (phases by barrier slot, releases by thread): dense, missing
/// entries 0, joined entry by entry by their maximum.
#[derive(Clone, Default, Debug)]
struct Counts(Vec<u32>);

impl Counts {
    /// Entry `i`.
    fn get(&self, i: usize) -> u32 {
        self.0.get(i).copied().unwrap_or(0)
    }

    /// Raises entry `i` to at least `n`.
    fn see(&mut self, i: usize, n: u32) {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = self.0[i].max(n);
    }

    /// Raises every entry to at least `other`'s.
    fn join(&mut self, other: &Counts) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = (*mine).max(*theirs);
        }
    }
}

/// One thread's knowledge (see the module documentation).
#[derive(Clone, Default, Debug)]
pub(crate) struct Clock {
    /// Phases seen complete, by barrier slot.
    phases: Counts,
    /// `wgmma` groups seen retired, by warpgroup.
    retired: [u32; MAX_WARPGROUPS],
    /// Bulk groups seen done reading, by issuing thread (few threads issue bulk stores).
    bulk_read: Vec<(u32, u32)>,
    /// `mbarrier` arrivals (releases) seen, by arriving thread (dense: a block's consumers may
    /// each arrive).
    released: Counts,
    /// What it knows of the other blocks of its cluster, by rank, in their own terms (empty
    /// outside a cluster; these clocks' own `peers` stay empty).
    peers: Vec<Clock>,
}

impl Clock {
    /// Phases of barrier `slot` this thread has seen complete.
    pub(crate) fn phases(&self, slot: usize) -> u32 {
        self.phases.get(slot)
    }

    /// Records that the first `phases` phases of barrier `slot` have completed.
    pub(crate) fn see_phases(&mut self, slot: usize, phases: u32) {
        self.phases.see(slot, phases);
    }

    /// `wgmma` groups of warpgroup `wg` this thread has seen retired.
    pub(crate) fn retired(&self, wg: usize) -> u32 {
        self.retired.get(wg).copied().unwrap_or(0)
    }

    /// Records that the first `groups` groups of warpgroup `wg` have retired.
    pub(crate) fn see_retired(&mut self, wg: usize, groups: u32) {
        if let Some(r) = self.retired.get_mut(wg) {
            *r = (*r).max(groups);
        }
    }

    /// Bulk groups of thread `tid` this thread has seen done reading their sources.
    pub(crate) fn bulk_read(&self, tid: u32) -> u32 {
        self.bulk_read
            .iter()
            .find(|(t, _)| *t == tid)
            .map_or(0, |(_, groups)| *groups)
    }

    /// Records that the first `groups` bulk groups of thread `tid` are done reading.
    pub(crate) fn see_bulk_read(&mut self, tid: u32, groups: u32) {
        match self.bulk_read.iter_mut().find(|(t, _)| *t == tid) {
            Some((_, g)) => *g = (*g).max(groups),
            None => self.bulk_read.push((tid, groups)),
        }
    }

    /// Releases (`mbarrier` arrivals) of thread `tid` that happen before this thread's next
    /// action.
    pub(crate) fn released(&self, tid: u32) -> u32 {
        self.released.get(tid as usize)
    }

    /// Records that the first `n` releases of thread `tid` happen before this thread's next
    /// action.
    pub(crate) fn see_released(&mut self, tid: u32, n: u32) {
        self.released.see(tid as usize, n);
    }

    /// What it knows of the cluster's block of rank `rank` (not its own block's: see
    /// [`Clock::seen_from`]).
    #[cfg(test)]
    pub(crate) fn peer(&self, rank: u32) -> Option<&Clock> {
        self.peers.get(rank as usize)
    }

    /// This clock of a thread of the block of rank `mine`, in the terms of the cluster's block of
    /// rank `to`: what the thread knows of `to` becomes the result's own knowledge, what it knows
    /// of its own block the result's knowledge of `mine`.
    pub(crate) fn seen_from(&self, mine: u32, to: u32) -> Clock {
        if mine == to {
            return self.clone();
        }
        let mut out = self.peers.get(to as usize).cloned().unwrap_or_default();
        let len = self.peers.len().max(mine as usize + 1);
        out.peers = vec![Clock::default(); len];
        for (rank, known) in self.peers.iter().enumerate() {
            if rank != to as usize {
                out.peers[rank] = known.clone();
            }
        }
        out.peers[mine as usize] = self.clone_own();
        out
    }

    /// The own part of the clock (no peers).
    fn clone_own(&self) -> Clock {
        Clock {
            phases: self.phases.clone(),
            retired: self.retired,
            bulk_read: self.bulk_read.clone(),
            released: self.released.clone(),
            peers: Vec::new(),
        }
    }

    /// Adds what `other` knows.
    pub(crate) fn join(&mut self, other: &Clock) {
        if !other.peers.is_empty() {
            if self.peers.len() < other.peers.len() {
                self.peers.resize(other.peers.len(), Clock::default());
            }
            for (mine, theirs) in self.peers.iter_mut().zip(&other.peers) {
                mine.join(theirs);
            }
        }
        for &(tid, groups) in &other.bulk_read {
            self.see_bulk_read(tid, groups);
        }
        self.released.join(&other.released);
        self.phases.join(&other.phases);
        for (mine, theirs) in self.retired.iter_mut().zip(&other.retired) {
            *mine = (*mine).max(*theirs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn join_takes_the_larger_count_of_each_entry() {
        let mut a = Clock::default();
        a.see_phases(2, 5);
        a.see_retired(1, 3);
        let mut b = Clock::default();
        b.see_phases(0, 1);
        b.see_phases(2, 4);
        b.see_retired(1, 7);
        a.join(&b);
        assert_eq!((a.phases(0), a.phases(1), a.phases(2)), (1, 0, 5));
        assert_eq!(a.retired(1), 7);
        assert_eq!(a.phases(9), 0);
    }

    #[test]
    fn a_clock_seen_from_another_block_swaps_own_and_peer_knowledge() {
        // A thread of rank 0 knows its barrier slot 1 at 3 phases and rank 1's warpgroup 1 at 2
        // groups; rank 2's slot 0 at 5 phases.
        let mut of_rank1 = Clock::default();
        of_rank1.see_retired(1, 2);
        let mut of_rank2 = Clock::default();
        of_rank2.see_phases(0, 5);
        let mut a = Clock::default();
        a.see_phases(1, 3);
        let with_peers = Clock {
            peers: vec![Clock::default(), of_rank1, of_rank2],
            ..Clock::default()
        };
        a.join(&with_peers);
        let b = a.seen_from(0, 1);
        assert_eq!(b.retired(1), 2, "rank 1's own knowledge");
        assert_eq!(b.phases(1), 0);
        assert_eq!(b.peer(0).map(|c| c.phases(1)), Some(3), "rank 0's, as a peer's");
        assert_eq!(b.peer(2).map(|c| c.phases(0)), Some(5));
        assert_eq!(
            b.peer(1).map(|c| c.retired(1)),
            Some(0),
            "no knowledge of itself as a peer"
        );
        // And back: the round trip is the clock again.
        let back = b.seen_from(1, 0);
        assert_eq!(back.phases(1), 3);
        assert_eq!(back.peer(1).map(|c| c.retired(1)), Some(2));
        assert_eq!(a.seen_from(0, 0).phases(1), 3);
    }
}
