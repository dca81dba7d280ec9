//! The cluster side of a block: the blocks of its cluster (its peers), the cluster barrier, and
//! distributed shared memory (`mapa` and the `shared::cluster` loads and stores) with its checks.

use super::schedule::{self, Wait};
use super::BlockState;
use crate::sim::hopper::violation;
use crate::sim::shadow::{self, ClusterTouch, Touch};
use crate::sim::{Access, Dim3, Rule, SimError, Space, Violation};

impl<'l> BlockState<'l> {
    /// The blocks of this block's cluster, by rank (this one alone outside a cluster launch).
    pub(in crate::sim) fn peers(&self) -> &[BlockState<'l>] {
        match self.peers.get() {
            (ptr, len) if !ptr.is_null() => {
                // SAFETY: `run_cluster` set the pointer to its vector of states, which it keeps,
                // unmoved, until every thread of the cluster is dropped.
                unsafe { std::slice::from_raw_parts(ptr, len) }
            }
            _ => std::slice::from_ref(self),
        }
    }

    /// The running thread's index in the cluster: `rank * threads per block + thread`.
    fn cluster_thread(&self) -> u32 {
        self.rank * self.yielders.len() as u32 + self.current.get()
    }

    /// What a shared-memory access by the running thread records for the cluster's checks:
    /// nothing outside a launch of clusters of several blocks.
    #[inline]
    pub(super) fn cluster_touch(&self, remote: bool) -> Option<ClusterTouch> {
        // Outside a cluster launch (the common case, on every shared access) nothing to build.
        if self.peers.get().0.is_null() {
            return None;
        }
        (self.peers().len() > 1).then(|| {
            let after = self.cluster_epoch.get();
            let arrived = self.arrived[self.current.get() as usize].get();
            ClusterTouch {
                thread: self.cluster_thread(),
                after,
                before: after + u32::from(arrived),
                remote,
            }
        })
    }

    /// The running thread arrives at the cluster barrier (`barrier.cluster.arrive`).
    pub(in crate::sim) fn cluster_arrive(&self) -> Result<(), Violation> {
        let arrived = &self.arrived[self.current.get() as usize];
        if arrived.replace(true) {
            return Err(Violation::Panic {
                message: "barrier.cluster.arrive twice with no barrier.cluster.wait between".into(),
            });
        }
        Ok(())
    }

    /// Whether the running thread may wait at the cluster barrier: it arrived first.
    pub(in crate::sim) fn cluster_may_wait(&self) -> Result<(), Violation> {
        if !self.arrived[self.current.get() as usize].get() {
            return Err(Violation::Panic {
                message: "barrier.cluster.wait with no barrier.cluster.arrive before it (the \
                          cluster would hang)"
                    .into(),
            });
        }
        Ok(())
    }

    /// The address of the word at `address` (in this block's shared memory) in the shared
    /// memory of the cluster's block `rank` (`mapa`).
    pub(in crate::sim) fn map_shared(&self, address: usize, rank: u32) -> Result<usize, Violation> {
        let base = self.shared_base() as usize;
        let bytes = self.info.config.shared_mem_bytes as usize;
        let peers = self.peers();
        if address < base || address > base + bytes {
            return Err(Violation::Panic {
                message: format!("mapa of {address:#x}, which is not the block's shared memory"),
            });
        }
        let Some(peer) = peers.get(rank as usize) else {
            return Err(Violation::Panic {
                message: format!("mapa to rank {rank} of a cluster of {} blocks", peers.len()),
            });
        };
        Ok(peer.shared_base() as usize + (address - base))
    }

    /// Checks an access of `size` bytes at `address` in the shared memory of any block of the
    /// cluster (`ld.shared::cluster` / `st.shared::cluster`), records it, and returns the host
    /// address to access.
    pub(in crate::sim) fn check_cluster(
        &self,
        address: usize,
        size: usize,
        access: Access,
    ) -> Result<usize, Violation> {
        let peers = self.peers();
        let owner = peers.iter().find(|p| {
            let base = p.shared_base() as usize;
            address >= base && address < base + (p.info.config.shared_mem_bytes as usize).max(1)
        });
        let Some(owner) = owner else {
            return Err(Violation::Panic {
                message: format!(
                    "distributed shared-memory access at {address:#x}, in no block of the cluster's \
                     shared memory (map the address with mapa first)"
                ),
            });
        };
        if owner.rank == self.rank {
            return self.check(address, 0, size, access);
        }
        if owner.exited.get() {
            return Err(violation(
                Rule::ClusterExit,
                format!(
                    "distributed shared-memory {access} of block rank {} of the cluster, which has \
                     exited: a cluster barrier after this access, which the owner waits for \
                     before it exits, must keep it alive",
                    owner.rank
                ),
            ));
        }
        let offset = address - owner.shared_base() as usize;
        let bytes = owner.info.config.shared_mem_bytes as usize;
        if offset + size > bytes {
            return Err(Violation::OutOfBounds {
                space: Space::Shared,
                buffer: format!("shared (block rank {})", owner.rank),
                access,
                index: offset / size.max(1),
                len: bytes / size.max(1),
            });
        }
        let touch = match access {
            Access::Read => Touch::Read,
            Access::Write => Touch::Write,
            Access::Atomic => Touch::Atomic,
        };
        let cluster = self.cluster_touch(true);
        let recorded = owner
            .shadow
            .borrow_mut()
            .record(offset, size, 0, 0, touch, cluster, 0, None, None);
        recorded
            .map_err(|conflict| self.cluster_violation(conflict, owner.rank, offset / size.max(1), access))?;
        if let Some(c) = cluster {
            owner.note_remote_access(c.before, self.rank, self.current.get());
        }
        Ok(address)
    }

    /// The violation for a conflict found by the cluster's checks (the other thread named by
    /// its block rank and index in the block): a race across blocks breaks
    /// [`Rule::ClusterPublish`].
    pub(super) fn cluster_violation(
        &self,
        conflict: shadow::Conflict,
        owner: u32,
        index: usize,
        access: Access,
    ) -> Violation {
        let threads = self.yielders.len() as u32;
        match conflict {
            shadow::Conflict::Race { other, other_access } => {
                let (rank, thread) = (other / threads.max(1), self.thread_dim(other % threads.max(1)));
                violation(
                    Rule::ClusterPublish,
                    format!(
                        "distributed shared-memory race at index {index} of the shared memory of \
                         block rank {owner}: this thread's {access} and the {other_access} of thread \
                         {thread} of block rank {rank}, with no cluster barrier that the first \
                         arrived at after its access and the second waited for before its own"
                    ),
                )
            }
            shadow::Conflict::Pending { issuer } => {
                shadow::violation(conflict, index, access, self.thread_dim(issuer % threads.max(1)))
            }
            shadow::Conflict::Uninitialized => shadow::violation(conflict, index, access, Dim3::default()),
        }
    }

    /// Remembers that thread `thread` of block rank `rank` reached this block's shared memory,
    /// published to this block by the cluster barrier `before` at the earliest.
    fn note_remote_access(&self, before: u32, rank: u32, thread: u32) {
        let latest = self.remote_access.get();
        if latest.is_none_or(|(b, _, _)| before > b) {
            self.remote_access.set(Some((before, rank, thread)));
        }
    }

    /// Once every thread of this block returned: an access by another block to its shared memory
    /// that no cluster barrier the block's threads waited for orders before their exit (on a GPU
    /// the access may come after the memory is gone). Reported against the accessing thread.
    pub(in crate::sim) fn exit_unpublished(&self) -> Option<SimError> {
        let (before, rank, thread) = self.remote_access.get()?;
        if before < self.cluster_epoch.get() {
            return None;
        }
        let accessor = self.peers().get(rank as usize)?;
        Some(accessor.error(
            thread,
            violation(
                Rule::ClusterExit,
                format!(
                    "this thread reached the shared memory of block rank {} of its cluster, which \
                     then returned with no cluster barrier after the access: on a GPU the block \
                     may be gone before the access (arrive at a cluster barrier after the last \
                     remote access, and have the owner wait for it before it exits)",
                    self.rank
                ),
            ),
        ))
    }
}

/// Makes the blocks `states` of one cluster each other's peers (nothing for a lone block).
///
/// `states` must stay where it is, unmoved, until every thread of the cluster is dropped.
pub(super) fn link(states: &[BlockState]) {
    if states.len() > 1 {
        for state in states {
            state.peers.set((states.as_ptr(), states.len()));
        }
    }
}

/// Opens the cluster barrier, once no thread of the cluster is ready and no block barrier or
/// shuffle can complete: checks that no thread of the cluster has returned (then every thread
/// waits at it). Returns `false` when no thread waits at it (every thread has returned).
pub(super) fn open_barrier(states: &[BlockState], wait: &mut [Vec<Wait>]) -> Result<bool, SimError> {
    let Some(at) = wait.iter().flatten().find_map(|w| match w {
        Wait::Cluster(at) => Some(*at),
        _ => None,
    }) else {
        return Ok(false);
    };
    let waiting = wait
        .iter()
        .flatten()
        .filter(|w| matches!(w, Wait::Cluster(_)))
        .count();
    schedule::no_thread_exited(states, wait, || format!("{at} (a cluster barrier)"), waiting)?;
    for (state, wait) in states.iter().zip(wait.iter_mut()) {
        state.epoch.set(state.epoch.get() + 1);
        state.cluster_epoch.set(state.cluster_epoch.get() + 1);
        state.barrier_passed();
        state.arrived.iter().for_each(|a| a.set(false));
        wait.fill(Wait::Ready);
    }
    if states.len() > 1 {
        BlockState::learn_from_peers(states);
    }
    Ok(true)
}
