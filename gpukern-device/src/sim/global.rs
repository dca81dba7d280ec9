//! Shadow state of a launch's writable global buffers: which thread last wrote, last read and
//! last performed an atomic on each element, so that two threads touching one element without an
//! order between them are reported instead of running as undefined behaviour.
//!
//! Blocks run on several OS threads at once, so each entry is an atomic word holding a packed
//! [`Toucher`]. Two threads of one block are ordered by a barrier between their accesses (the
//! same barrier-interval rule as shared memory); threads of different blocks are ordered only by
//! a grid barrier between their accesses ([`crate::grid::sync`], cooperative launches only) or
//! by a release the later one acquired ([`super::release`]). Two atomics never race with each other
//! (that is what they are for), but an atomic races with an unordered plain read or write.
//! Only writable buffers get a shadow: an input cannot be written, so it cannot race.

use std::sync::atomic::{AtomicU64, Ordering};

use super::release::FENCE_BITS;
use super::Access;

/// Bits of a packed [`Toucher`] that hold `thread + 1` (up to 1024 threads, so 11 bits).
const THREAD_BITS: u32 = 11;
/// Bits that hold the barrier interval, modulo 2^17 (a block passing 2^17 barriers between two
/// accesses of one element could alias their intervals; no kernel here comes near). The
/// [`FENCE_BITS`] above them hold the thread's device-scope fences in the interval.
pub(super) const EPOCH_BITS: u32 = 17;

/// Bits of the high half of a packed [`Toucher`] that hold the grid-barrier interval in a
/// cooperative launch (the block's index gets the other 16: such a grid has at most
/// [`super::MAX_COOPERATIVE_THREADS`] threads, so far fewer blocks). Modulo 2^16, as the
/// barrier interval is modulo 2^21.
const GRID_EPOCH_BITS: u32 = 16;

/// One thread's access, packed into 64 bits: the block's linear index (low 32 bits of it; in a
/// cooperative launch, the low 16 bits beside the grid-barrier interval), the thread's fences in
/// its barrier interval, the interval, and `thread + 1` (so that 0 means nobody).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Toucher {
    /// Linear index of the block in the grid.
    pub(super) block: u32,
    /// Linear index of the thread in its block.
    pub(super) thread: u32,
    /// Barriers the block had passed when the access happened.
    pub(super) epoch: u32,
    /// Device-scope fences the thread had executed in that barrier interval (at most
    /// [`super::release::MAX_FENCES`]).
    pub(super) fences: u32,
    /// Grid barriers the grid had passed when the access happened (0 outside a cooperative
    /// launch).
    pub(super) grid: u32,
}

impl Toucher {
    /// `grid_bits`: bits of the high half given to the grid-barrier interval (0 outside a
    /// cooperative launch).
    fn pack(self, grid_bits: u32) -> u64 {
        let epoch = u64::from(self.epoch) & ((1 << EPOCH_BITS) - 1);
        let fences = u64::from(self.fences.min((1 << FENCE_BITS) - 1));
        let high = match grid_bits {
            0 => u64::from(self.block),
            bits => (u64::from(self.grid) & ((1 << bits) - 1)) << (32 - bits) | u64::from(self.block),
        };
        (high << 32)
            | (fences << (THREAD_BITS + EPOCH_BITS))
            | (epoch << THREAD_BITS)
            | (u64::from(self.thread) + 1)
    }

    fn unpack(word: u64, grid_bits: u32) -> Option<Toucher> {
        let thread = (word & ((1 << THREAD_BITS) - 1)) as u32;
        let high = (word >> 32) as u32;
        let (block, grid) = match grid_bits {
            0 => (high, 0),
            bits => (high & ((1 << (32 - bits)) - 1), high >> (32 - bits)),
        };
        (thread != 0).then(|| Toucher {
            block,
            thread: thread - 1,
            epoch: ((word >> THREAD_BITS) & ((1 << EPOCH_BITS) - 1)) as u32,
            fences: ((word >> (THREAD_BITS + EPOCH_BITS)) & ((1 << FENCE_BITS) - 1)) as u32,
            grid,
        })
    }

    /// Whether nothing orders `self`'s access before `other`'s: in one grid-barrier interval
    /// (always, outside a cooperative launch), different blocks, or different threads of one
    /// block in the same barrier interval. (`other` was unpacked: its `grid` is reduced modulo
    /// 2^`grid_bits`.)
    fn unordered_with(self, other: Toucher, grid_bits: u32) -> bool {
        let same_epoch = (self.epoch ^ other.epoch) & ((1 << EPOCH_BITS) - 1) == 0;
        let grid_mask = (1u64 << grid_bits) - 1;
        let same_grid = (u64::from(self.grid ^ other.grid) & grid_mask) == 0;
        same_grid && (self.block != other.block || (self.thread != other.thread && same_epoch))
    }
}

/// A race found by [`GlobalShadow::record`]: the element, and the earlier access it conflicts with.
pub(super) struct GlobalConflict {
    /// Element index (in elements of the shadow's granularity) where the race is.
    pub(super) element: usize,
    /// The other thread's access.
    pub(super) other: Toucher,
    /// What the other thread did.
    pub(super) other_access: Access,
}

/// One writer, one reader and one atomic entry per element of a writable buffer.
pub(super) struct GlobalShadow {
    /// Bytes per shadow element: the buffer's element size, at most 4, so that two threads
    /// writing neighbouring floats of a buffer registered as wider elements are not confused.
    granularity: usize,
    /// The last plain writer.
    writers: Vec<AtomicU64>,
    /// The last reader only: a write is checked against the latest read, not every read.
    readers: Vec<AtomicU64>,
    /// The last thread that performed an atomic: a plain access is checked against the latest
    /// atomic only.
    atomics: Vec<AtomicU64>,
    /// Bits of a packed entry that hold the grid-barrier interval: [`GRID_EPOCH_BITS`] in a
    /// cooperative launch, else 0 (the block index then gets all 32 bits).
    grid_bits: u32,
}

impl GlobalShadow {
    /// A shadow for a buffer of `bytes` bytes of `elem_size`-byte elements, nothing touched yet.
    pub(super) fn new(bytes: usize, elem_size: usize) -> Self {
        let granularity = elem_size.clamp(1, 4);
        let entries = bytes.div_ceil(granularity);
        GlobalShadow {
            granularity,
            writers: (0..entries).map(|_| AtomicU64::new(0)).collect(),
            readers: (0..entries).map(|_| AtomicU64::new(0)).collect(),
            atomics: (0..entries).map(|_| AtomicU64::new(0)).collect(),
            grid_bits: 0,
        }
    }

    /// Orders accesses of different blocks separated by a grid barrier (a cooperative launch,
    /// whose blocks number less than 2^16); call before anything is recorded.
    pub(super) fn order_by_grid_barriers(&mut self) {
        self.grid_bits = GRID_EPOCH_BITS;
    }

    /// Records an access by `me` to bytes `offset..offset + size` of the buffer (in bounds), or
    /// returns the first earlier access it races with. `acquired(other)`: whether `me`'s thread
    /// acquired a release that orders `other`'s access (of another block) before it.
    ///
    /// Each side publishes itself before it looks at the other (a store swaps in its writer and
    /// then reads the reader and the atomic; a load swaps in its reader and then reads the writer
    /// and the atomic; an atomic swaps in its entry and then reads the writer and the reader),
    /// with sequentially consistent operations: of two racing accesses in different blocks, at
    /// least one sees the other, whatever the interleaving of the OS threads.
    pub(super) fn record(
        &self,
        offset: usize,
        size: usize,
        me: Toucher,
        access: Access,
        acquired: impl Fn(Toucher) -> bool,
    ) -> Result<(), GlobalConflict> {
        let first = offset / self.granularity;
        let last = (offset + size.max(1) - 1) / self.granularity;
        let bits = self.grid_bits;
        let packed = me.pack(bits);
        for element in first..=last.min(self.writers.len().saturating_sub(1)) {
            let conflict = |word: u64, other_access| {
                Toucher::unpack(word, bits)
                    .filter(|&other| me.unordered_with(other, bits))
                    .filter(|&other| other.block == me.block || !acquired(other))
                    .map(|other| GlobalConflict {
                        element,
                        other,
                        other_access,
                    })
            };
            let writer = || self.writers[element].load(Ordering::SeqCst);
            let reader = || self.readers[element].load(Ordering::SeqCst);
            let atomic = || self.atomics[element].load(Ordering::SeqCst);
            let found = match access {
                Access::Write => {
                    let writer = self.writers[element].swap(packed, Ordering::SeqCst);
                    conflict(writer, Access::Write)
                        .or_else(|| conflict(reader(), Access::Read))
                        .or_else(|| conflict(atomic(), Access::Atomic))
                }
                Access::Read => {
                    self.readers[element].swap(packed, Ordering::SeqCst);
                    conflict(writer(), Access::Write).or_else(|| conflict(atomic(), Access::Atomic))
                }
                Access::Atomic => {
                    self.atomics[element].swap(packed, Ordering::SeqCst);
                    conflict(writer(), Access::Write).or_else(|| conflict(reader(), Access::Read))
                }
            };
            if let Some(found) = found {
                return Err(found);
            }
        }
        Ok(())
    }

    /// Bytes per shadow element.
    pub(super) fn granularity(&self) -> usize {
        self.granularity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field survives packing (the barrier interval modulo 2^17, the fences saturated at
    /// 15), with and without the grid-barrier interval of a cooperative launch.
    #[test]
    fn a_toucher_packs_and_unpacks() {
        let me = Toucher {
            block: 12345,
            thread: 1023,
            epoch: (1 << EPOCH_BITS) + 77,
            fences: 3,
            grid: 0,
        };
        let back = Toucher::unpack(me.pack(0), 0).expect("a thread");
        assert_eq!(
            (back.block, back.thread, back.epoch, back.fences),
            (12345, 1023, 77, 3)
        );
        let saturated = Toucher { fences: 40, ..me };
        assert_eq!(Toucher::unpack(saturated.pack(0), 0).map(|t| t.fences), Some(15));
        let cooperative = Toucher {
            grid: 9,
            block: 700,
            ..me
        };
        let back = Toucher::unpack(cooperative.pack(GRID_EPOCH_BITS), GRID_EPOCH_BITS).expect("a thread");
        assert_eq!((back.block, back.grid, back.epoch), (700, 9, 77));
        assert_eq!(Toucher::unpack(0, 0), None, "0 is nobody");
    }

    /// A conflict the acquired releases order is no race; the same conflict without is one.
    #[test]
    fn acquired_releases_order_accesses_of_other_blocks() {
        let shadow = GlobalShadow::new(16, 4);
        let writer = Toucher {
            block: 1,
            thread: 0,
            epoch: 0,
            fences: 0,
            grid: 0,
        };
        assert!(shadow.record(0, 4, writer, Access::Write, |_| false).is_ok());
        let reader = Toucher { block: 2, ..writer };
        assert!(shadow.record(0, 4, reader, Access::Read, |_| true).is_ok());
        let other = Toucher { block: 3, ..writer };
        let conflict = shadow
            .record(0, 4, other, Access::Read, |_| false)
            .expect_err("a race");
        assert_eq!((conflict.other.block, conflict.other_access), (1, Access::Write));
        // Threads of one block are judged by barrier intervals alone, never by releases.
        let same_block = Toucher { thread: 5, ..writer };
        assert!(shadow.record(0, 4, same_block, Access::Write, |_| true).is_err());
    }
}
