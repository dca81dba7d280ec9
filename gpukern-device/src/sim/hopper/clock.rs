//! What a simulated thread knows has completed, by happens-before: for each barrier (each
//! incarnation of an `mbarrier`, by slot) how many of its phases it has seen complete, for
//! each warpgroup how many of its `wgmma` groups it has seen retired, and for each thread that
//! issued bulk stores how many of its bulk groups it has seen done reading.
//!
//! A thread learns its own waits and retirements, and what other threads knew when they arrived
//! on a barrier phase it then waits for, or when they reached a block barrier it passed: the
//! clocks are joined there (vector clocks over barriers and warpgroups, not over threads, which
//! keeps them small).

/// Most warpgroups a block has: 1024 threads of 128.
pub(crate) const MAX_WARPGROUPS: usize = 8;

/// One thread's knowledge (see the module documentation).
#[derive(Clone, Default, Debug)]
pub(crate) struct Clock {
    /// Phases seen complete, by barrier slot.
    phases: Vec<u32>,
    /// `wgmma` groups seen retired, by warpgroup.
    retired: [u32; MAX_WARPGROUPS],
    /// Bulk groups seen done reading, by issuing thread (few threads issue bulk stores).
    bulk_read: Vec<(u32, u32)>,
}

impl Clock {
    /// Phases of barrier `slot` this thread has seen complete.
    pub(crate) fn phases(&self, slot: usize) -> u32 {
        self.phases.get(slot).copied().unwrap_or(0)
    }

    /// Records that the first `phases` phases of barrier `slot` have completed.
    pub(crate) fn see_phases(&mut self, slot: usize, phases: u32) {
        if self.phases.len() <= slot {
            self.phases.resize(slot + 1, 0);
        }
        self.phases[slot] = self.phases[slot].max(phases);
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

    /// Adds what `other` knows.
    pub(crate) fn join(&mut self, other: &Clock) {
        for &(tid, groups) in &other.bulk_read {
            self.see_bulk_read(tid, groups);
        }
        if self.phases.len() < other.phases.len() {
            self.phases.resize(other.phases.len(), 0);
        }
        for (mine, theirs) in self.phases.iter_mut().zip(&other.phases) {
            *mine = (*mine).max(*theirs);
        }
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
}
