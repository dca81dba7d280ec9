//! What the copy engine wrote into a block's shared memory: for each 4-byte word written by a
//! bulk or tensor copy, the barrier phase that copy completes on (a thread may touch the word only
//! once it knows that phase complete) and, for a tensor copy, which element of the tensor the
//! word's first byte holds (so that a `wgmma` descriptor can be checked against how the tile was
//! written).

use super::clock::Clock;

/// No barrier / no coordinate.
const NONE: u32 = u32::MAX;

/// One word's record.
#[derive(Clone, Copy)]
struct Word {
    /// The barrier slot the copy completes on, or [`NONE`].
    slot: u32,
    /// The phase of that barrier the copy completes on.
    phase: u32,
    /// Row and column of the tensor element at the word's first byte, or [`NONE`].
    row: u32,
    col: u32,
}

const FRESH: Word = Word {
    slot: NONE,
    phase: 0,
    row: NONE,
    col: NONE,
};

/// A copy whose destination was touched too early: the word's byte offset, and the barrier slot
/// and phase the copy completes on.
pub(crate) struct Early {
    pub(crate) offset: usize,
    pub(crate) slot: usize,
    pub(crate) phase: u32,
}

/// The records of one block's shared memory (see the module documentation).
pub(crate) struct Landed {
    words: Vec<Word>,
}

impl Landed {
    /// Records for `bytes` of shared memory, none written by a copy.
    pub(crate) fn new(bytes: usize) -> Self {
        Landed {
            words: vec![FRESH; bytes.div_ceil(4)],
        }
    }

    /// Records a copy's element of `size` bytes at `offset`, completing on phase `phase` of barrier
    /// `slot`; `element`: its `(row, column)` in the tensor, for a tensor copy.
    pub(crate) fn land(
        &mut self,
        offset: usize,
        size: usize,
        slot: usize,
        phase: u32,
        element: Option<(u32, u32)>,
    ) {
        let (row, col) = match element {
            // The word's first byte holds the element `offset % 4 / size` places before this one
            // (a 16-byte swizzle chunk keeps a row's neighbouring elements together).
            Some((row, col)) => (row, col.wrapping_sub((offset % 4 / size.max(1)) as u32)),
            None => (NONE, NONE),
        };
        for word in self.range(offset, size) {
            *word = Word {
                slot: slot as u32,
                phase,
                row,
                col,
            };
        }
    }

    /// Forgets the copies' records of bytes `offset..offset + size` (an ordinary write replaced
    /// them).
    pub(crate) fn forget(&mut self, offset: usize, size: usize) {
        for word in self.range(offset, size) {
            *word = FRESH;
        }
    }

    /// The first word of `offset..offset + size` written by a copy whose phase `known` has not
    /// seen complete.
    pub(crate) fn early(&self, offset: usize, size: usize, known: &Clock) -> Option<Early> {
        let first = offset / 4;
        let last = (offset + size.max(1) - 1) / 4;
        (first..=last.min(self.words.len().saturating_sub(1))).find_map(|w| {
            let word = self.words[w];
            (word.slot != NONE && known.phases(word.slot as usize) <= word.phase).then_some(Early {
                offset: 4 * w,
                slot: word.slot as usize,
                phase: word.phase,
            })
        })
    }

    /// The tensor element held at shared byte `offset` by a tensor copy of `size`-byte elements,
    /// if a tensor copy wrote it.
    pub(crate) fn element_at(&self, offset: usize, size: usize) -> Option<(u32, u32)> {
        let word = self.words.get(offset / 4)?;
        (word.row != NONE).then(|| (word.row, word.col + (offset % 4 / size.max(1)) as u32))
    }

    fn range(&mut self, offset: usize, size: usize) -> impl Iterator<Item = &mut Word> {
        let first = offset / 4;
        let last = ((offset + size.max(1) - 1) / 4 + 1).min(self.words.len());
        self.words[first.min(last)..last].iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::Landed;
    use crate::sim::hopper::clock::Clock;

    #[test]
    fn a_copy_is_early_until_its_phase_is_known() {
        let mut l = Landed::new(64);
        l.land(16, 2, 3, 0, Some((5, 8)));
        l.land(18, 2, 3, 0, Some((5, 9)));
        let mut known = Clock::default();
        assert_eq!(l.early(16, 4, &known).map(|e| (e.offset, e.slot)), Some((16, 3)));
        assert!(l.early(0, 16, &known).is_none());
        known.see_phases(3, 1);
        assert!(l.early(16, 4, &known).is_none());
        assert_eq!(l.element_at(16, 2), Some((5, 8)));
        assert_eq!(l.element_at(18, 2), Some((5, 9)));
        l.forget(16, 4);
        assert_eq!(l.element_at(18, 2), None);
    }
}
