//! Shadow state of a block's shared memory: who touched each 4-byte word since the last barrier
//! (reads, writes and atomics), whether anyone ever wrote it, and whether a `cp.async` into it is
//! still in flight.

use super::{Access, Violation};

/// What a thread does to shared memory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Touch {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An atomic read-modify-write: reads the word (which must have been written) and writes
    /// it; races with another thread's plain read or write, never with another atomic.
    Atomic,
    /// The issue of a `cp.async` into the word: a write that lands later, at the wait that
    /// retires its group ([`Shadow::land`]); until then any access to the word is a bug.
    AsyncCopy,
    /// A write by the asynchronous proxy (a TMA bulk tensor copy, performed by the simulator when
    /// it is issued): the word is written by no thread. Its ordering with the threads' accesses
    /// is the program's `mbarrier` protocol, which the shadow does not model: such a write races
    /// with nothing, and a thread's access to a word it wrote races with nothing either (the
    /// numbers the kernel computes are what checks that protocol in the simulator).
    Proxy,
}

impl Touch {
    /// Whether it reads or writes, as a report says.
    pub(super) fn access(self) -> Access {
        match self {
            Touch::Read => Access::Read,
            Touch::Write | Touch::AsyncCopy | Touch::Proxy => Access::Write,
            Touch::Atomic => Access::Atomic,
        }
    }
}

/// No thread.
const NONE: u32 = u32::MAX;
/// The asynchronous proxy as a word's writer ([`Touch::Proxy`]).
const PROXY: u32 = u32::MAX - 1;

/// What happened to one word in the current barrier interval (`epoch`).
#[derive(Clone, Copy)]
struct Word {
    epoch: u32,
    writer: u32,
    /// The first two distinct readers: enough to name a reader other than any given thread.
    readers: [u32; 2],
    /// The first two distinct threads that performed an atomic on it, for the same reason.
    atomics: [u32; 2],
    written: bool,
    /// The thread whose `cp.async` into the word has not landed yet, or [`NONE`].
    pending: u32,
    /// Cluster launches only: what happened to the word since the last cluster barrier
    /// (`cluster_epoch`), by threads named by their index in the cluster.
    cluster: ClusterWord,
}

/// The touches of one word since the last cluster barrier, by cluster thread index (`rank *
/// threads per block + thread`): a block barrier orders the block's own threads, never a thread
/// of another block that reaches the word through distributed shared memory.
#[derive(Clone, Copy)]
struct ClusterWord {
    epoch: u32,
    writer: u32,
    readers: [u32; 2],
    /// Whether a thread of another block touched the word in this interval.
    remote: bool,
}

/// An access in a launch of clusters of more than one block ([`Shadow::record`]).
#[derive(Clone, Copy)]
pub(super) struct ClusterTouch {
    /// The thread's index in the cluster.
    pub(super) thread: u32,
    /// Cluster barriers completed so far.
    pub(super) epoch: u32,
    /// Whether the thread belongs to another block than the memory's.
    pub(super) remote: bool,
}

/// One entry per 4-byte word of shared memory.
pub(super) struct Shadow {
    words: Vec<Word>,
}

/// A rule broken by an access, before the simulator adds where it happened.
pub(super) enum Conflict {
    /// Another thread (linear index) touched the word; what it did.
    Race { other: u32, other_access: Access },
    /// Nobody wrote the word yet.
    Uninitialized,
    /// A `cp.async` by thread `issuer` (linear index) into the word has not been waited for.
    Pending { issuer: u32 },
}

impl Shadow {
    /// Shadow for `bytes` of shared memory, nothing written yet.
    pub(super) fn new(bytes: usize) -> Self {
        let fresh = Word {
            epoch: 0,
            writer: NONE,
            readers: [NONE; 2],
            atomics: [NONE; 2],
            written: false,
            pending: NONE,
            cluster: ClusterWord {
                epoch: 0,
                writer: NONE,
                readers: [NONE; 2],
                remote: false,
            },
        };
        Shadow {
            words: vec![fresh; bytes.div_ceil(4)],
        }
    }

    /// Records an access by thread `tid` to bytes `offset..offset + size` during `epoch`, or
    /// returns the first rule it breaks.
    ///
    /// In a launch of clusters (`cluster` given) the access is also checked against the touches
    /// since the last cluster barrier whenever a thread of another block is involved: a remote
    /// access (`cluster.remote`, where `tid` and `epoch` are not used) against every other
    /// thread's, a local one against those of remote threads. A conflict then names the other
    /// thread by its index in the cluster.
    pub(super) fn record(
        &mut self,
        offset: usize,
        size: usize,
        tid: u32,
        epoch: u32,
        touch: Touch,
        cluster: Option<ClusterTouch>,
    ) -> Result<(), Conflict> {
        let first = offset / 4;
        let last = (offset + size.max(1) - 1) / 4;
        for word in &mut self.words[first..=last] {
            if word.pending != NONE {
                return Err(Conflict::Pending { issuer: word.pending });
            }
            if let Some(c) = cluster {
                word.cluster.record(c, touch, word.written)?;
                if c.remote {
                    word.written |= touch != Touch::Read;
                    continue;
                }
            }
            if word.epoch != epoch {
                word.epoch = epoch;
                word.writer = NONE;
                word.readers = [NONE; 2];
                word.atomics = [NONE; 2];
            }
            // Any touch but an atomic races with another thread's atomic in this interval.
            if touch != Touch::Atomic && touch != Touch::Proxy {
                if let Some(other) = other_than(word.atomics, tid) {
                    return Err(Conflict::Race {
                        other,
                        other_access: Access::Atomic,
                    });
                }
            }
            match touch {
                Touch::Proxy => {
                    word.writer = PROXY;
                    word.readers = [NONE; 2];
                    word.atomics = [NONE; 2];
                    word.written = true;
                }
                Touch::Read => {
                    if !word.written {
                        return Err(Conflict::Uninitialized);
                    }
                    word.no_other_writer(tid)?;
                    remember(&mut word.readers, tid);
                }
                Touch::Atomic => {
                    if !word.written {
                        return Err(Conflict::Uninitialized);
                    }
                    word.no_other_writer(tid)?;
                    word.no_other_reader(tid)?;
                    remember(&mut word.atomics, tid);
                }
                Touch::Write | Touch::AsyncCopy => {
                    word.no_other_writer(tid)?;
                    word.no_other_reader(tid)?;
                    word.writer = tid;
                    if touch == Touch::AsyncCopy {
                        word.pending = tid;
                    } else {
                        word.written = true;
                    }
                }
            }
        }
        Ok(())
    }

    /// Lands thread `tid`'s `cp.async` into bytes `offset..offset + size` during `epoch`: the
    /// words are written, by `tid`, in this barrier interval (so other threads must still pass a
    /// barrier before they read them), and no longer pending.
    pub(super) fn land(&mut self, offset: usize, size: usize, tid: u32, epoch: u32) {
        let first = offset / 4;
        let last = (offset + size.max(1) - 1) / 4;
        for word in &mut self.words[first..=last] {
            if word.epoch != epoch {
                word.epoch = epoch;
                word.readers = [NONE; 2];
                word.atomics = [NONE; 2];
            }
            word.writer = tid;
            word.written = true;
            word.pending = NONE;
        }
    }
}

impl ClusterWord {
    /// Checks and remembers an access since the last cluster barrier; `written`: whether anyone
    /// ever wrote the word. Atomics count as writes here (no kernel uses remote atomics).
    fn record(&mut self, c: ClusterTouch, touch: Touch, written: bool) -> Result<(), Conflict> {
        if self.epoch != c.epoch {
            *self = ClusterWord {
                epoch: c.epoch,
                writer: NONE,
                readers: [NONE; 2],
                remote: false,
            };
        }
        let checked = c.remote || self.remote;
        let reads = matches!(touch, Touch::Read | Touch::Atomic);
        if c.remote && reads && !written {
            return Err(Conflict::Uninitialized);
        }
        if checked {
            if self.writer != NONE && self.writer != c.thread {
                return Err(Conflict::Race {
                    other: self.writer,
                    other_access: Access::Write,
                });
            }
            if touch != Touch::Read {
                if let Some(other) = other_than(self.readers, c.thread) {
                    return Err(Conflict::Race {
                        other,
                        other_access: Access::Read,
                    });
                }
            }
        }
        if touch == Touch::Read {
            remember(&mut self.readers, c.thread);
        } else {
            self.writer = c.thread;
        }
        self.remote |= c.remote;
        Ok(())
    }
}

impl Word {
    /// A race with another thread's write of this word in this barrier interval.
    fn no_other_writer(&self, tid: u32) -> Result<(), Conflict> {
        if self.writer != NONE && self.writer != PROXY && self.writer != tid {
            return Err(Conflict::Race {
                other: self.writer,
                other_access: Access::Write,
            });
        }
        Ok(())
    }

    /// A race with another thread's read of this word in this barrier interval.
    fn no_other_reader(&self, tid: u32) -> Result<(), Conflict> {
        match other_than(self.readers, tid) {
            Some(other) => Err(Conflict::Race {
                other,
                other_access: Access::Read,
            }),
            None => Ok(()),
        }
    }
}

fn other_than(threads: [u32; 2], tid: u32) -> Option<u32> {
    threads.into_iter().find(|&t| t != NONE && t != tid)
}

/// Adds `tid` to the first two distinct threads kept in `threads`.
fn remember(threads: &mut [u32; 2], tid: u32) {
    if threads[0] == NONE {
        threads[0] = tid;
    } else if threads[0] != tid && threads[1] == NONE {
        threads[1] = tid;
    }
}

/// The violation for a conflict at shared element `index`; `other` is resolved by the caller.
pub(super) fn violation(conflict: Conflict, index: usize, access: Access, other: super::Dim3) -> Violation {
    match conflict {
        Conflict::Race { other_access, .. } => Violation::SharedRace {
            index,
            access,
            other,
            other_access,
        },
        Conflict::Uninitialized => Violation::UninitializedSharedRead { index },
        Conflict::Pending { .. } => Violation::AsyncCopyNotWaited {
            index,
            access,
            issuer: other,
        },
    }
}
