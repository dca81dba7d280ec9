//! Shadow state of a block's shared memory: who touched each 4-byte word since the last barrier
//! (reads, writes and atomics), whether anyone ever wrote it, and whether a `cp.async` into it is
//! still in flight. Once the block uses named barriers ([`crate::barrier`]), each remembered
//! access also keeps its thread's named-barrier arrivals then, and two accesses of one interval
//! that a named barrier orders do not race ([`Order`]). Once a thread has arrived on an
//! `mbarrier`, each remembered access also keeps its thread's releases (arrivals) then, and two
//! accesses that an `mbarrier` phase orders (the later thread knows a release the earlier one
//! made after its access) do not race either ([`Releases`]).

use super::block::Order;
use super::hopper::clock::Clock;
use super::{Access, Violation};

/// What orders the accessing thread's accesses after other threads' through `mbarrier` phases:
/// its own releases (arrivals) so far, and what it knows of every thread's
/// ([`Clock::released`]). An access another thread made before its `n + 1`-th release is
/// ordered before this one once this thread knows that release.
#[derive(Clone, Copy)]
pub(super) struct Releases<'a> {
    /// The accessing thread's releases so far.
    pub(super) own: u32,
    /// Its knowledge of the others'.
    pub(super) known: &'a Clock,
}

impl Releases<'_> {
    /// Whether an access by thread `tid` made after `at` of its releases is ordered before this
    /// thread's access.
    fn covers(&self, tid: u32, at: u32) -> bool {
        self.known.released(tid) > at
    }
}

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
    /// is the program's `mbarrier` protocol, which the copies' own checks model
    /// (`tma-early-access`), not the shadow: such a write races with nothing, and a thread's
    /// access to a word it wrote races with nothing either (the numbers the kernel computes are
    /// what checks that protocol in the simulator).
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
    /// The thread whose ordinary (generic-proxy) write the word holds, or [`NONE`] (never
    /// written, or last written by the asynchronous proxy), and how many `fence.proxy.async` that
    /// thread had executed before the write: the asynchronous proxy may read the word once the
    /// writer has executed one more ([`Shadow::unfenced`]).
    generic_writer: u32,
    writer_fences: u32,
}

/// One access remembered for the cluster's checks: the thread (its index in the cluster), the
/// first cluster barrier that orders it before later accesses ([`ClusterTouch::before`]), and
/// whether it came from another block than the memory's.
#[derive(Clone, Copy)]
struct ClusterAccess {
    thread: u32,
    before: u32,
    remote: bool,
}

/// The last write and two of the reads since it, by cluster thread index (`rank * threads per
/// block + thread`): a block barrier orders the block's own threads, never a thread of another
/// block that reaches the word through distributed shared memory.
#[derive(Clone, Copy, Default)]
struct ClusterWord {
    writer: Option<ClusterAccess>,
    readers: [Option<ClusterAccess>; 2],
}

/// An access in a launch of clusters of more than one block ([`Shadow::record`]).
#[derive(Clone, Copy)]
pub(super) struct ClusterTouch {
    /// The thread's index in the cluster.
    pub(super) thread: u32,
    /// Cluster barriers the thread has waited at: the access comes after the arrivals of all of
    /// them.
    pub(super) after: u32,
    /// The cluster barrier whose arrival comes after the access: `after`, or `after + 1` once the
    /// thread has arrived at the next barrier (`barrier.cluster.arrive`) and not yet waited (its
    /// accesses then are not published by that barrier).
    pub(super) before: u32,
    /// Whether the thread belongs to another block than the memory's.
    pub(super) remote: bool,
}

/// The named-barrier arrivals of each access a [`Word`] remembers, by slot: its thread's count
/// then ([`Order::covers`]).
#[derive(Clone, Copy, Default)]
struct Counts {
    writer: u32,
    readers: [u32; 2],
    atomics: [u32; 2],
}

/// One entry per 4-byte word of shared memory.
pub(super) struct Shadow {
    words: Vec<Word>,
    /// Per word, once the block uses named barriers (empty until then: every access before came
    /// after no arrival, which the zeros say).
    counts: Vec<Counts>,
    /// Per word, once the block's threads use `mbarrier`s, the releases of each remembered
    /// access's thread before it ([`Releases`]; empty until then).
    released: Vec<Counts>,
    /// Cluster launches only (empty until a cluster access): per word, the accesses that a later
    /// access of another block may not be ordered after, by threads named by their index in the
    /// cluster.
    cluster: Vec<ClusterWord>,
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
            generic_writer: NONE,
            writer_fences: 0,
        };
        Shadow {
            words: vec![fresh; bytes.div_ceil(4)],
            counts: Vec::new(),
            released: Vec::new(),
            cluster: Vec::new(),
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
    /// `fences`: the `fence.proxy.async` the thread executed so far (remembered with a write).
    /// `order`: what orders the thread's accesses besides block barriers, once the block uses
    /// named barriers; `releases`: what orders them through `mbarrier` phases, once the block
    /// uses `mbarrier`s.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        offset: usize,
        size: usize,
        tid: u32,
        epoch: u32,
        touch: Touch,
        cluster: Option<ClusterTouch>,
        fences: u32,
        order: Option<Order>,
        releases: Option<Releases>,
    ) -> Result<(), Conflict> {
        let first = offset / 4;
        let last = (offset + size.max(1) - 1) / 4;
        if cluster.is_some() && self.cluster.is_empty() {
            self.cluster = vec![ClusterWord::default(); self.words.len()];
        }
        if order.is_some() {
            self.keep_counts();
        }
        // Kept once a thread that has released accesses the memory: before that every access
        // came after no release, which the missing entries (zeros) say.
        if releases.is_some_and(|r| r.own > 0) {
            self.keep_released();
        }
        // Whether an access by `t` after `count` named-barrier arrivals and `at` releases
        // conflicts with this one: another thread's, that no named barrier and no `mbarrier`
        // phase orders before it.
        let unordered = |t: u32, count: u32, at: u32| {
            t != NONE
                && t != PROXY
                && t != tid
                && !order.is_some_and(|o| o.covers(t, count))
                && !releases.is_some_and(|r| r.covers(t, at))
        };
        let other = |threads: [u32; 2], counts: [u32; 2], ats: [u32; 2]| {
            (0..2)
                .find(|&i| unordered(threads[i], counts[i], ats[i]))
                .map(|i| threads[i])
        };
        let own = releases.map_or(0, |r| r.own);
        for w in first..=last {
            let word = &mut self.words[w];
            if word.pending != NONE {
                return Err(Conflict::Pending { issuer: word.pending });
            }
            if let Some(c) = cluster {
                self.cluster[w].record(c, touch, word.written)?;
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
            // The named-barrier counts of the word's accesses (all 0 before the block's first
            // named barrier, where none is kept).
            let mut unused = Counts::default();
            let counts = self.counts.get_mut(w).unwrap_or(&mut unused);
            let mut unused_releases = Counts::default();
            let ats = self.released.get_mut(w).unwrap_or(&mut unused_releases);
            // Any touch but an atomic races with another thread's atomic in this interval.
            if touch != Touch::Atomic && touch != Touch::Proxy {
                if let Some(other) = other(word.atomics, counts.atomics, ats.atomics) {
                    return Err(Conflict::Race {
                        other,
                        other_access: Access::Atomic,
                    });
                }
            }
            let no_other_writer = || {
                if unordered(word.writer, counts.writer, ats.writer) {
                    return Err(Conflict::Race {
                        other: word.writer,
                        other_access: Access::Write,
                    });
                }
                Ok(())
            };
            let no_other_reader = || match other(word.readers, counts.readers, ats.readers) {
                Some(other) => Err(Conflict::Race {
                    other,
                    other_access: Access::Read,
                }),
                None => Ok(()),
            };
            match touch {
                Touch::Proxy => {
                    word.writer = PROXY;
                    word.readers = [NONE; 2];
                    word.atomics = [NONE; 2];
                    word.written = true;
                    word.generic_writer = NONE;
                }
                Touch::Read => {
                    if !word.written {
                        return Err(Conflict::Uninitialized);
                    }
                    no_other_writer()?;
                    remember(
                        &mut word.readers,
                        (&mut counts.readers, &mut ats.readers),
                        tid,
                        (order, releases),
                    );
                }
                Touch::Atomic => {
                    if !word.written {
                        return Err(Conflict::Uninitialized);
                    }
                    no_other_writer()?;
                    no_other_reader()?;
                    remember(
                        &mut word.atomics,
                        (&mut counts.atomics, &mut ats.atomics),
                        tid,
                        (order, releases),
                    );
                    word.generic_writer = tid;
                    word.writer_fences = fences;
                }
                Touch::Write | Touch::AsyncCopy => {
                    no_other_writer()?;
                    no_other_reader()?;
                    word.writer = tid;
                    counts.writer = order.map_or(0, |o| o.count);
                    ats.writer = own;
                    word.generic_writer = tid;
                    word.writer_fences = fences;
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

    /// Makes the per-word named-barrier counts, on the block's first access after a named
    /// barrier (zeros: no access before had come after an arrival).
    fn keep_counts(&mut self) {
        if self.counts.is_empty() {
            self.counts = vec![Counts::default(); self.words.len()];
        }
    }

    /// Makes the per-word release counts ([`Releases`]), on the first access that needs them
    /// (zeros: no access before had come after a release).
    fn keep_released(&mut self) {
        if self.released.is_empty() {
            self.released = vec![Counts::default(); self.words.len()];
        }
    }

    /// Lands thread `tid`'s `cp.async` into bytes `offset..offset + size` during `epoch`: the
    /// words are written, by `tid`, in this barrier interval (so other threads must still pass a
    /// barrier before they read them), and no longer pending. `count`: the thread's named-barrier
    /// arrivals, once the block uses named barriers; `mbarriers`: whether the block's threads may
    /// release through `mbarrier`s (it has a Hopper state).
    pub(super) fn land(
        &mut self,
        offset: usize,
        size: usize,
        tid: u32,
        epoch: u32,
        count: Option<u32>,
        mbarriers: bool,
    ) {
        let first = offset / 4;
        let last = (offset + size.max(1) - 1) / 4;
        if let Some(count) = count {
            self.keep_counts();
            for c in &mut self.counts[first..=last] {
                c.writer = count;
            }
        }
        // A `cp.async` write is ordered by barriers only, never by the issuer's releases: marked
        // so (the releases kept from here on, else a later release of the issuer would seem to
        // cover the missing entry's zero).
        if mbarriers {
            self.keep_released();
            for r in &mut self.released[first..=last] {
                r.writer = u32::MAX;
            }
        }
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

impl Shadow {
    /// The first word of bytes `offset..offset + size` whose ordinary write no later
    /// `fence.proxy.async` of its writer covers, `fences(t)` being thread `t`'s fences so far:
    /// the word's byte offset and the writer.
    pub(super) fn unfenced(
        &self,
        offset: usize,
        size: usize,
        fences: impl Fn(u32) -> u32,
    ) -> Option<(usize, u32)> {
        let first = offset / 4;
        let last = (offset + size.max(1) - 1) / 4;
        (first..=last.min(self.words.len().saturating_sub(1))).find_map(|w| {
            let word = &self.words[w];
            (word.generic_writer != NONE && fences(word.generic_writer) <= word.writer_fences)
                .then_some((4 * w, word.generic_writer))
        })
    }
}

impl ClusterWord {
    /// Checks an access against the remembered ones and remembers it; `written`: whether anyone
    /// ever wrote the word. Two accesses, one of them remote, conflict unless a cluster barrier
    /// orders them: the earlier thread arrived at it after its access, and the later one waited
    /// for it before its own. Atomics count as writes here (no kernel uses remote atomics).
    fn record(&mut self, c: ClusterTouch, touch: Touch, written: bool) -> Result<(), Conflict> {
        let reads = matches!(touch, Touch::Read | Touch::Atomic);
        if c.remote && reads && !written {
            return Err(Conflict::Uninitialized);
        }
        let unordered =
            |a: &ClusterAccess| a.thread != c.thread && (a.remote || c.remote) && a.before >= c.after;
        if let Some(w) = self.writer.filter(unordered) {
            return Err(Conflict::Race {
                other: w.thread,
                other_access: Access::Write,
            });
        }
        let me = ClusterAccess {
            thread: c.thread,
            before: c.before,
            remote: c.remote,
        };
        if touch == Touch::Read {
            // Reads that every later access is ordered after need no slot.
            for r in &mut self.readers {
                if r.is_some_and(|r| r.before < c.after || r.thread == c.thread) {
                    *r = None;
                }
            }
            if let Some(free) = self.readers.iter_mut().find(|r| r.is_none()) {
                *free = Some(me);
            }
            return Ok(());
        }
        if let Some(r) = self.readers.iter().flatten().find(|r| unordered(r)) {
            return Err(Conflict::Race {
                other: r.thread,
                other_access: Access::Read,
            });
        }
        self.writer = Some(me);
        self.readers = [None; 2];
        Ok(())
    }
}

/// Adds `tid` to the two accesses kept in `threads` (with their named-barrier `counts`). Without
/// named barriers (`order` none): the first two distinct threads, enough to name a thread other
/// than any given one. With them (after `order.count` arrivals): its own slot gets the newer
/// count; else a free slot; else a slot whose access `order` covers (one a later access is
/// ordered after whenever it is ordered after this one). When neither slot is covered the
/// access is not kept: two unordered readers are enough to report a later write by either,
/// though not every third one.
fn remember(
    threads: &mut [u32; 2],
    (counts, ats): (&mut [u32; 2], &mut [u32; 2]),
    tid: u32,
    (order, releases): (Option<Order>, Option<Releases>),
) {
    let count = order.map_or(0, |o| o.count);
    let slot = (0..2)
        .find(|&i| threads[i] == tid)
        .or_else(|| (0..2).find(|&i| threads[i] == NONE))
        .or_else(|| order.and_then(|o| (0..2).find(|&i| o.covers(threads[i], counts[i]))))
        .or_else(|| releases.and_then(|r| (0..2).find(|&i| r.covers(threads[i], ats[i]))));
    if let Some(i) = slot {
        threads[i] = tid;
        counts[i] = count;
        ats[i] = releases.map_or(0, |r| r.own);
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
