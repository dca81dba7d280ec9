//! Bulk stores reading shared memory (`tma::store_2d`): each issuing thread's bulk async-groups
//! (stores since its last commit, groups committed, groups whose reads it waited out) and, per
//! word, the latest of its groups that reads the word. A write to the word is safe only once the
//! writer knows that group's reads are done ([`super::clock::Clock::bulk_read`]): until then the
//! copy engine may still be reading it.

use std::collections::HashMap;

use super::clock::Clock;

/// A write over a word a bulk store may still read: the word's byte offset, the issuing thread
/// and the group.
pub(crate) struct Unread {
    pub(crate) offset: usize,
    pub(crate) thread: u32,
    pub(crate) group: u32,
}

/// One issuing thread's bulk groups.
struct Issuer {
    /// Groups committed (`cp.async.bulk.commit_group`).
    committed: u32,
    /// Whether stores were issued since the last commit.
    open: bool,
    /// Groups whose reads the thread waited out (`wait_group.read` or `wait_group`).
    read: u32,
    /// Per word: 1 + the latest group reading it (0: none).
    reads: Vec<u32>,
}

/// The block's bulk stores (see the module documentation).
pub(crate) struct BulkStores {
    words: usize,
    issuers: HashMap<u32, Issuer>,
}

impl BulkStores {
    /// No stores, for `bytes` of shared memory.
    pub(crate) fn new(bytes: usize) -> Self {
        BulkStores {
            words: bytes.div_ceil(4),
            issuers: HashMap::new(),
        }
    }

    fn issuer(&mut self, tid: u32) -> &mut Issuer {
        let words = self.words;
        self.issuers.entry(tid).or_insert_with(|| Issuer {
            committed: 0,
            open: false,
            read: 0,
            reads: vec![0; words],
        })
    }

    /// Records that a store issued by `tid` reads bytes `offset..offset + size`: it belongs to
    /// the thread's next group.
    pub(crate) fn store(&mut self, tid: u32, offset: usize, size: usize) {
        let words = self.words;
        let issuer = self.issuer(tid);
        issuer.open = true;
        let group = issuer.committed;
        let first = offset / 4;
        let last = ((offset + size.max(1) - 1) / 4 + 1).min(words);
        for r in &mut issuer.reads[first.min(last)..last] {
            *r = (*r).max(group + 1);
        }
    }

    /// `cp.async.bulk.commit_group` by `tid`: its open stores (none: an empty group) become a
    /// group.
    pub(crate) fn commit(&mut self, tid: u32) {
        let issuer = self.issuer(tid);
        issuer.committed += 1;
        issuer.open = false;
    }

    /// A wait by `tid` until at most `pending` of its groups are unfinished: the reads of the
    /// others are done. Returns how many groups' reads are done.
    pub(crate) fn wait(&mut self, tid: u32, pending: u32) -> u32 {
        let issuer = self.issuer(tid);
        issuer.read = issuer.read.max(issuer.committed.saturating_sub(pending));
        issuer.read
    }

    /// The first word of `offset..offset + size` that a store reads whose group `known` has not
    /// seen read.
    pub(crate) fn unread(&self, offset: usize, size: usize, known: &Clock) -> Option<Unread> {
        let first = offset / 4;
        let last = ((offset + size.max(1) - 1) / 4 + 1).min(self.words);
        for (&thread, issuer) in &self.issuers {
            let first = first.min(last);
            for (w, &latest) in issuer.reads[first..last].iter().enumerate() {
                if latest > 0 && known.bulk_read(thread) < latest {
                    return Some(Unread {
                        offset: 4 * (first + w),
                        thread,
                        group: latest - 1,
                    });
                }
            }
        }
        None
    }

    /// For a thread that returns: its groups whose reads it did not wait out, and whether stores
    /// are left uncommitted (`None`: nothing left reading).
    pub(crate) fn still_reading(&self, tid: u32) -> Option<(u32, bool)> {
        let issuer = self.issuers.get(&tid)?;
        let groups = issuer.committed - issuer.read;
        (groups > 0 || issuer.open).then_some((groups, issuer.open))
    }

    /// Whether any store was recorded (nothing to check before).
    pub(crate) fn any(&self) -> bool {
        !self.issuers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::BulkStores;
    use crate::sim::hopper::clock::Clock;

    #[test]
    fn a_write_is_safe_once_the_store_s_group_is_known_read() {
        let mut bulk = BulkStores::new(256);
        bulk.store(0, 64, 32);
        assert_eq!(bulk.still_reading(0), Some((0, true)));
        bulk.commit(0);
        bulk.store(0, 128, 4);
        bulk.commit(0);
        let mut known = Clock::default();
        let hit = bulk.unread(60, 8, &known).expect("group 0 reads byte 64");
        assert_eq!((hit.offset, hit.thread, hit.group), (64, 0, 0));
        // Waiting until one group is pending: group 0's reads are done, group 1's not.
        known.see_bulk_read(0, bulk.wait(0, 1));
        assert!(bulk.unread(64, 32, &known).is_none());
        assert_eq!(bulk.unread(128, 4, &known).map(|u| u.group), Some(1));
        assert_eq!(bulk.still_reading(0), Some((1, false)));
        known.see_bulk_read(0, bulk.wait(0, 0));
        assert!(bulk.unread(0, 256, &known).is_none());
        assert_eq!(bulk.still_reading(0), None);
    }
}
