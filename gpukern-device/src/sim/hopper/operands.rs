//! Which `wgmma` products read each word of a block's shared memory: per warpgroup, the latest
//! group (by its sequence number in the warpgroup) whose products read the word. A write to the
//! word is safe only once the writer knows that group retired ([`super::clock::Clock::retired`]):
//! until then the tensor core may still be reading it.

use super::clock::{Clock, MAX_WARPGROUPS};

/// A write over a word a product may still read: the word's byte offset, the warpgroup and the
/// group.
pub(crate) struct Unretired {
    pub(crate) offset: usize,
    pub(crate) warpgroup: usize,
    pub(crate) group: u32,
}

/// Per warpgroup, per word: 1 + the sequence number of the latest group reading it (0: none).
/// A warpgroup's vector is made on its first product.
pub(crate) struct Operands {
    words: usize,
    reads: [Option<Vec<u32>>; MAX_WARPGROUPS],
}

impl Operands {
    /// No reads recorded, for `bytes` of shared memory.
    pub(crate) fn new(bytes: usize) -> Self {
        Operands {
            words: bytes.div_ceil(4),
            reads: Default::default(),
        }
    }

    /// Records that group `group` of warpgroup `wg` reads bytes `offset..offset + size`.
    pub(crate) fn read(&mut self, wg: usize, group: u32, offset: usize, size: usize) {
        let words = self.words;
        let Some(slot) = self.reads.get_mut(wg) else {
            return;
        };
        let reads = slot.get_or_insert_with(|| vec![0; words]);
        let first = offset / 4;
        let last = ((offset + size.max(1) - 1) / 4 + 1).min(words);
        for r in &mut reads[first.min(last)..last] {
            *r = (*r).max(group + 1);
        }
    }

    /// The first word of `offset..offset + size` that a group read which `known` has not seen
    /// retired.
    pub(crate) fn unretired(&self, offset: usize, size: usize, known: &Clock) -> Option<Unretired> {
        let first = offset / 4;
        let last = ((offset + size.max(1) - 1) / 4 + 1).min(self.words);
        for (wg, reads) in self.reads.iter().enumerate() {
            let Some(reads) = reads else { continue };
            let first = first.min(last);
            for (w, &latest) in reads[first..last].iter().enumerate() {
                if latest > 0 && known.retired(wg) < latest {
                    return Some(Unretired {
                        offset: 4 * (first + w),
                        warpgroup: wg,
                        group: latest - 1,
                    });
                }
            }
        }
        None
    }

    /// Whether any product was recorded (nothing to check before).
    pub(crate) fn any(&self) -> bool {
        self.reads.iter().any(Option::is_some)
    }
}

#[cfg(test)]
mod tests {
    use super::Operands;
    use crate::sim::hopper::clock::Clock;

    #[test]
    fn a_write_is_safe_once_the_reading_group_is_known_retired() {
        let mut ops = Operands::new(256);
        ops.read(1, 0, 64, 32);
        ops.read(1, 1, 64, 4);
        let mut known = Clock::default();
        let hit = ops.unretired(60, 8, &known).expect("group 1 reads byte 64");
        assert_eq!((hit.offset, hit.warpgroup, hit.group), (64, 1, 1));
        known.see_retired(1, 1);
        assert_eq!(ops.unretired(64, 4, &known).map(|u| u.group), Some(1));
        assert!(ops.unretired(68, 4, &known).is_none());
        known.see_retired(1, 2);
        assert!(ops.unretired(0, 256, &known).is_none());
    }
}
