//! Release and acquire between blocks: how one block hands global memory to another within a
//! launch, through a device-scope fence ([`crate::atomic::fence`]) and an atomic.
//!
//! The PTX memory model's pattern, as CUDA's `__threadfence()` hand-offs and CUTLASS's
//! semaphores use it: a writer's accesses, then its fence, then an atomic (the release); a
//! reader's atomic that reads the value the release wrote (or a later one of the same
//! read-modify-write chain), then its fence (the acquire). The reader's accesses after its fence
//! are ordered after the writer's before its fence; a block barrier carries both sides across a
//! block's threads (a thread's accesses before a barrier are in a release its block's thread
//! makes after it; an acquire by one thread reaches the others after the next barrier).
//!
//! The simulator follows it so: a release is a [`Release`] point (block, thread, barrier
//! interval, the thread's fences in that interval); each thread knows the releases it acquired
//! ([`Knowledge`]); each global word an atomic touched remembers the releases its atomics
//! published, the read-modify-writes joining them and a strong store replacing them
//! ([`Locations`]). A conflict between two blocks that the global shadow finds is no race when
//! the later thread knows a release that covers the earlier access ([`Knowledge::covers`]).

use std::collections::HashMap;
use std::sync::Mutex;

use super::global::{Toucher, EPOCH_BITS};

/// Bits of a packed [`Toucher`] that hold a thread's device-scope fences in its barrier interval.
pub(super) const FENCE_BITS: u32 = 4;

/// Most fences counted in one barrier interval: from the sixteenth on, a thread's accesses after
/// a fence look as if before it to a release of the next (a later release covers fewer of them
/// than it should: reported races, never missed ones).
pub(super) const MAX_FENCES: u32 = (1 << FENCE_BITS) - 1;

/// One release: thread `thread` of block `block` executed its `fences`-th device-scope fence of
/// barrier interval `epoch`, then an atomic that published it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Release {
    /// Linear index of the releasing block.
    pub(super) block: u32,
    /// Linear index of the releasing thread in its block.
    pub(super) thread: u32,
    /// Barriers its block had passed at the fence.
    pub(super) epoch: u32,
    /// Device-scope fences the thread had executed in that barrier interval, this one included.
    pub(super) fences: u32,
}

impl Release {
    /// Whether the release orders `access` before the accesses of whoever acquires it: an
    /// access of the releasing block in an earlier barrier interval (any thread: the barrier
    /// orders it before the fence), or of the releasing thread itself before its fence.
    /// `access.epoch` is modulo 2^[`EPOCH_BITS`], as the shadow keeps it.
    fn covers(&self, access: Toucher) -> bool {
        if access.block != self.block {
            return false;
        }
        let mask = (1u32 << EPOCH_BITS) - 1;
        let behind = self.epoch.wrapping_sub(access.epoch) & mask;
        let earlier_interval = behind != 0 && behind < 1 << (EPOCH_BITS - 1);
        earlier_interval || (behind == 0 && access.thread == self.thread && access.fences < self.fences)
    }

    /// The later of two releases of one thread.
    fn later(self, other: Release) -> Release {
        if (other.epoch, other.fences) > (self.epoch, self.fences) {
            other
        } else {
            self
        }
    }
}

/// The releases a thread has acquired (or a word's atomics have published): per block, the
/// latest release of each of its threads.
#[derive(Clone, Default, Debug)]
pub(super) struct Knowledge(HashMap<u32, Vec<Release>>);

impl Knowledge {
    /// Adds one release (replacing an earlier one of its thread).
    pub(super) fn add(&mut self, release: Release) {
        let threads = self.0.entry(release.block).or_default();
        match threads.iter_mut().find(|r| r.thread == release.thread) {
            Some(r) => *r = r.later(release),
            None => threads.push(release),
        }
    }

    /// Adds every release of `other`.
    pub(super) fn join(&mut self, other: &Knowledge) {
        for release in other.0.values().flatten() {
            self.add(*release);
        }
    }

    /// Whether a release known here orders `access` before the knower's next accesses.
    pub(super) fn covers(&self, access: Toucher) -> bool {
        self.0
            .get(&access.block)
            .is_some_and(|threads| threads.iter().any(|r| r.covers(access)))
    }

    /// Whether nothing is known.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a device-scope atomic does to the releases of its word.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Handoff {
    /// A read-modify-write, or a strong load ([`crate::atomic::load`]): acquires the word's
    /// releases (with a fence after it) and, where it wrote, adds the thread's own (with a fence
    /// before it) to them.
    Update,
    /// A strong store ([`crate::atomic::store`]): the word's releases become the thread's own,
    /// or none.
    Store,
}

/// Shards of [`Locations`]: atomics on different words rarely wait for one another.
const SHARDS: usize = 64;

/// Per global word touched by device-scope atomics, the releases they published; each shard's
/// lock is held across the word's update, so that the releases a read-modify-write acquires are
/// exactly those of the updates before it.
pub(super) struct Locations(Vec<Mutex<HashMap<usize, Knowledge>>>);

impl Default for Locations {
    fn default() -> Self {
        Locations((0..SHARDS).map(|_| Mutex::default()).collect())
    }
}

impl Locations {
    /// Runs `update` (the host atomic on the word at host address `address`, which returns what
    /// it read and whether it wrote) under the word's lock; returns what it read, and the
    /// releases the access acquires (`None` for none). `release`: the thread's releases to
    /// publish (its latest fence's), if it fenced.
    pub(super) fn atomic<R>(
        &self,
        address: usize,
        sync: Handoff,
        release: Option<&Knowledge>,
        update: impl FnOnce() -> (R, bool),
    ) -> (R, Option<Knowledge>) {
        let shard = &self.0[(address >> 2) % SHARDS];
        // A poisoned shard only means another block's thread unwound while holding it (a
        // violation reported there); the map is still consistent (updates are single inserts).
        let mut words = shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (value, wrote) = update();
        let acquired = match sync {
            Handoff::Store => None,
            Handoff::Update => words.get(&address).filter(|k| !k.is_empty()).cloned(),
        };
        match (sync, release) {
            (Handoff::Update, Some(release)) if wrote => words.entry(address).or_default().join(release),
            (Handoff::Store, Some(release)) => {
                words.insert(address, release.clone());
            }
            (Handoff::Store, None) => {
                words.remove(&address);
            }
            (Handoff::Update, _) => {}
        }
        (value, acquired)
    }
}

/// One thread's side of the releases: what it observed and acquired, and what it would publish.
#[derive(Default)]
pub(super) struct ThreadSync {
    /// Releases its atomics read since its last fence (acquired at the next one).
    pub(super) observed: Knowledge,
    /// Releases it acquired.
    pub(super) known: Knowledge,
    /// What its atomics publish since its latest device-scope fence: that fence's release and
    /// everything the thread knew then.
    pub(super) release: Option<Knowledge>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(block: u32, thread: u32, epoch: u32, fences: u32) -> Toucher {
        Toucher {
            block,
            thread,
            epoch,
            fences,
            grid: 0,
        }
    }

    #[test]
    fn a_release_covers_its_block_s_earlier_intervals_and_its_thread_before_the_fence() {
        let release = Release {
            block: 3,
            thread: 0,
            epoch: 5,
            fences: 1,
        };
        let bits = EPOCH_BITS;
        // Another thread before the barrier that precedes the fence: covered.
        assert!(release.covers(access(3, 7, 4, 0)));
        // Another thread in the fence's interval: not covered (no barrier between).
        assert!(!release.covers(access(3, 7, 5, 0)));
        // The releasing thread before its fence, and after it.
        assert!(release.covers(access(3, 0, 5, 0)));
        assert!(!release.covers(access(3, 0, 5, 1)));
        // A later interval, and another block.
        assert!(!release.covers(access(3, 0, 6, 0)));
        assert!(!release.covers(access(4, 0, 4, 0)));
        // Epochs wrap modulo 2^bits.
        let wrapped = Release {
            epoch: (1 << bits) + 2,
            ..release
        };
        assert!(wrapped.covers(access(3, 7, 1, 0)));
        assert!(!wrapped.covers(access(3, 7, 3, 0)));
    }

    #[test]
    fn knowledge_keeps_each_thread_s_latest_release() {
        let mut known = Knowledge::default();
        let early = Release {
            block: 1,
            thread: 2,
            epoch: 1,
            fences: 1,
        };
        known.add(Release { epoch: 3, ..early });
        known.add(early);
        assert!(known.covers(access(1, 9, 2, 0)));
        let mut other = Knowledge::default();
        other.join(&known);
        assert!(other.covers(access(1, 9, 2, 0)));
        assert!(!other.covers(access(2, 9, 2, 0)));
    }
}
