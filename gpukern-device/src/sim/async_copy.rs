//! Each simulated thread's `cp.async` copies in flight: issued copies wait, in commit groups,
//! until a wait retires their group, and only then land in shared memory. So a read of a slot
//! before the wait that covers its copy sees a pending word and is reported, where an immediate
//! copy would have hidden the missing wait.

use std::collections::VecDeque;

/// One issued copy: the shared-memory bytes it writes and what it writes there.
pub(super) struct PendingCopy {
    /// Byte offset of the destination in shared memory.
    pub(super) offset: usize,
    /// The words to write: what the source held when the copy was issued (sources are inputs,
    /// which no thread writes), zeros past `src_bytes`.
    pub(super) data: [u32; 4],
    /// Words written (1 or 4).
    pub(super) words: usize,
}

/// One thread's copies: those issued since its last commit, and its committed groups, oldest first.
#[derive(Default)]
pub(super) struct AsyncCopies {
    open: Vec<PendingCopy>,
    groups: VecDeque<Vec<PendingCopy>>,
}

impl AsyncCopies {
    /// Adds an issued copy to the open group.
    pub(super) fn issue(&mut self, offset: usize, data: [u32; 4], words: usize) {
        self.open.push(PendingCopy { offset, data, words });
    }

    /// Closes the open copies into a group (possibly empty, as on the GPU).
    pub(super) fn commit(&mut self) {
        self.groups.push_back(std::mem::take(&mut self.open));
    }

    /// Takes the copies that land now: the oldest groups, until at most `in_flight` groups are
    /// left (uncommitted copies stay in flight, as `cp.async.wait_group` leaves them); with
    /// `None`, every copy, committed or not (`cp.async.wait_all`).
    pub(super) fn retire(&mut self, in_flight: Option<usize>) -> Vec<PendingCopy> {
        if in_flight.is_none() {
            self.commit();
        }
        let keep = in_flight.unwrap_or(0);
        let mut landed = Vec::new();
        while self.groups.len() > keep {
            landed.extend(self.groups.pop_front().into_iter().flatten());
        }
        landed
    }
}
