//! The running thread's side of release and acquire between blocks ([`crate::sim::release`]):
//! its device-scope fences, what its atomics publish and acquire, and whether a release it
//! acquired orders another block's access before its own.

use super::BlockState;
use crate::sim::global::Toucher;
use crate::sim::release::{Handoff, Release, MAX_FENCES};

impl BlockState<'_> {
    /// The running thread's device-scope fences in the current barrier interval.
    pub(super) fn device_fences_now(&self) -> u32 {
        let (epoch, count) = self.device_fences[self.current.get() as usize].get();
        if epoch == self.epoch.get() {
            count
        } else {
            0
        }
    }

    /// Whether the running thread acquired a release that orders `other`'s access (of another
    /// block) before its own: one it acquired itself, or one another thread of its block
    /// acquired before a barrier it has passed since.
    pub(super) fn acquired_covers(&self, other: Toucher) -> bool {
        let epoch = self.epoch.get();
        self.syncs[self.current.get() as usize]
            .borrow()
            .known
            .covers(other)
            || self
                .acquired
                .borrow()
                .iter()
                .any(|(at, known)| *at < epoch && known.covers(other))
    }

    /// A device- or system-scope fence of the running thread: it acquires the releases its
    /// atomics read since its last fence, and what its atomics publish from now on is this
    /// fence's release with everything the thread knows.
    pub(in crate::sim) fn device_fence(&self) {
        let tid = self.current.get() as usize;
        let epoch = self.epoch.get();
        let mut sync = self.syncs[tid].borrow_mut();
        let observed = std::mem::take(&mut sync.observed);
        if !observed.is_empty() {
            sync.known.join(&observed);
            let mut acquired = self.acquired.borrow_mut();
            match acquired.last_mut() {
                Some((at, known)) if *at == epoch => known.join(&observed),
                _ => acquired.push((epoch, observed)),
            }
        }
        let fences = (self.device_fences_now() + 1).min(MAX_FENCES);
        self.device_fences[tid].set((epoch, fences));
        let mut release = sync.known.clone();
        for (_, known) in self.acquired.borrow().iter().filter(|(at, _)| *at < epoch) {
            release.join(known);
        }
        release.add(Release {
            block: self.block_linear as u32,
            thread: tid as u32,
            epoch,
            fences,
        });
        sync.release = Some(release);
    }

    /// Runs `update`, the host side of the running thread's device- or system-scope atomic on
    /// the word at host address `address` (returning what it read and whether it wrote), with
    /// the releases of a global word: `sync` says what the atomic publishes; what it reads is
    /// acquired at the thread's next fence. An atomic on shared memory hands nothing between
    /// blocks.
    pub(in crate::sim) fn atomic_sync<R>(
        &self,
        address: usize,
        sync: Handoff,
        update: impl FnOnce() -> (R, bool),
    ) -> R {
        let shared = self.shared_base() as usize;
        if (shared..shared + self.info.config.shared_mem_bytes as usize).contains(&address) {
            return update().0;
        }
        let tid = self.current.get() as usize;
        let (value, acquired) = {
            let thread = self.syncs[tid].borrow();
            self.info
                .locations
                .atomic(address, sync, thread.release.as_ref(), update)
        };
        if let Some(acquired) = acquired {
            self.syncs[tid].borrow_mut().observed.join(&acquired);
        }
        value
    }
}
