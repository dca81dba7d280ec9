//! The Hopper operations of a block's thread that reach another block of its cluster: an
//! `mbarrier` arrival on a peer's barrier ([`crate::mbarrier::arrive_cluster`]) and a multicast
//! tensor copy's box landing in a peer's shared memory ([`crate::tma::load_2d_multicast`]). The
//! peer's state is checked and updated as its own threads' operations would do it, with what the
//! issuing thread knows put in the peer's terms ([`Clock::seen_from`]); at a block's end, a use by
//! another block of a barrier phase that no thread of the block waited for is reported (on a GPU
//! the use may reach the block after it is gone).

use super::hopper::{operand_overwritten, store_source_overwritten};
use super::BlockState;
use crate::sim::device::BoxElement;
use crate::sim::hopper::clock::Clock;
use crate::sim::hopper::mbarrier::name;
use crate::sim::hopper::violation;
use crate::sim::shadow::{self, Touch};
use crate::sim::{Access, Dim3, Rule, SimError, Violation};

impl<'l> BlockState<'l> {
    /// The cluster's block of rank `rank` for a remote operation (`what`), which must exist and
    /// not have exited.
    fn live_peer(&self, rank: u32, what: &str) -> Result<&BlockState<'l>, Violation> {
        let peers = self.peers();
        let Some(peer) = peers.get(rank as usize) else {
            return Err(Violation::Panic {
                message: format!(
                    "{what} to block rank {rank} of a cluster of {} block(s)",
                    peers.len()
                ),
            });
        };
        if peer.exited.get() {
            return Err(violation(
                Rule::ClusterExit,
                format!(
                    "{what} to block rank {rank} of the cluster, which has exited: the block must \
                     wait for the phase such a use counts towards before it exits (a producer's \
                     drain of its ring)"
                ),
            ));
        }
        Ok(peer)
    }

    /// What the running thread knows, in the terms of the cluster's block of rank `to`.
    fn knowledge_for(&self, to: u32) -> Clock {
        let tid = self.current.get() as usize;
        self.hopper().clocks[tid].seen_from(self.rank, to)
    }

    /// An arrival of the running thread on the barrier at `bar`'s offset in the cluster's block
    /// `rank` (`mbarrier.arrive.shared::cluster`; this block's own for its own rank).
    pub(in crate::sim) fn mbarrier_arrive_remote(&self, bar: usize, rank: u32) -> Result<(), Violation> {
        if rank == self.rank {
            return self.mbarrier_arrive(bar, 0);
        }
        let offset = self.barrier_offset(bar)?;
        let peer = self.live_peer(rank, "an mbarrier arrival")?;
        let known = self.knowledge_for(rank);
        {
            let mut h = peer.hopper();
            let b = h.barriers.live_remote(offset, self.cluster_epoch.get())?;
            b.note_remote(self.rank, self.current.get());
            b.arrive(offset, 0, &known)?;
        }
        self.progress.set(self.progress.get() + 1);
        Ok(())
    }

    /// A tensor copy issued by the running thread lands its box (`elements`, `bytes` in all) at
    /// `dst`'s offset in the cluster's block `rank`, counting the bytes on that block's barrier
    /// at `bar`'s offset.
    pub(in crate::sim) fn copy_box_into(
        &self,
        rank: u32,
        dst: usize,
        bar: usize,
        elements: &[BoxElement],
        bytes: u32,
    ) -> Result<(), Violation> {
        if rank == self.rank {
            let target = self.copy_target(bar)?;
            for &(at, (data, n), element) in elements {
                self.copy_write(dst + at, &data[..n], target, element)?;
            }
            return self.copy_complete(bar, bytes);
        }
        let Some(offset) = self.shared_offset(dst, 0, bytes as usize, Access::Write)? else {
            return Err(Violation::Panic {
                message: format!(
                    "a multicast tensor copy to {dst:#x}, which is not the block's shared memory"
                ),
            });
        };
        let bar_offset = self.barrier_offset(bar)?;
        let what = format!("a multicast copy issued by this thread into block rank {rank}");
        let peer = self.live_peer(rank, &what)?;
        let known = self.knowledge_for(rank);
        let cluster_epoch = self.cluster_epoch.get();
        {
            let mut h = peer.hopper();
            let h = &mut *h;
            let b = h.barriers.live_remote(bar_offset, cluster_epoch)?;
            let (slot, phase) = (b.slot, b.completed);
            b.note_remote(self.rank, self.current.get());
            let base = peer.shared_base() as usize;
            for &(at, (data, n), element) in elements {
                let o = offset + at;
                peer.shadow
                    .borrow_mut()
                    .record(o, n, 0, peer.epoch.get(), Touch::Proxy, None, 0, None, None)
                    .map_err(|c| shadow::violation(c, o / n.max(1), Access::Write, Dim3::default()))?;
                if let Some(u) = h.operands.unretired(o, n, &known) {
                    return Err(operand_overwritten(&what, u));
                }
                if let Some(u) = h.bulk.unread(o, n, &known) {
                    return Err(store_source_overwritten(&what, u));
                }
                h.landed.land(o, n, slot, phase, element);
                // SAFETY: `o..o + n` lies in the peer's shared memory (the same bounds as this
                // block's, checked above), which lives while the peer has not exited.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (base + o) as *mut u8, n) };
            }
            b.complete_tx(bar_offset, bytes)?;
        }
        self.progress.set(self.progress.get() + 1);
        Ok(())
    }

    /// Once every thread of this block returned: the latest use of one of its barriers by another
    /// block (an arrival or a multicast copy's bytes) whose phase no thread of this block saw
    /// complete, reported against the thread that made it.
    pub(super) fn remote_unwaited(&self) -> Option<SimError> {
        let h = self.hopper.borrow();
        let h = h.as_deref()?;
        let seen = |slot: usize| h.clocks.iter().map(|c| c.phases(slot)).max().unwrap_or(0);
        let (offset, used) = h.barriers.remote_unwaited(seen)?;
        let user = self.peers().get(used.rank as usize)?;
        Some(user.error(
            used.thread,
            violation(
                Rule::ClusterExit,
                format!(
                    "this thread counted towards phase {} of {} of block rank {} of its cluster, \
                     which then returned with no thread having waited for that phase: on a GPU the \
                     arrival or the copy may reach the block after it is gone (the owner waits \
                     for the phase before it exits: a producer drains its ring)",
                    used.phase,
                    name(offset),
                    self.rank
                ),
            ),
        ))
    }

    /// A cluster barrier opened: every thread of each block of `states` learns what the threads
    /// of the others knew (after each block's own barrier join, one clock per block).
    pub(super) fn learn_from_peers(states: &[BlockState]) {
        let known: Vec<Option<Clock>> = states
            .iter()
            .map(|s| {
                s.hopper
                    .borrow()
                    .as_deref()
                    .and_then(|h| h.clocks.first().cloned())
            })
            .collect();
        if known.iter().filter(|k| k.is_some()).count() < 2 {
            return;
        }
        for (to, state) in states.iter().enumerate() {
            let mut h = state.hopper.borrow_mut();
            let Some(h) = h.as_deref_mut() else { continue };
            for (from, k) in known.iter().enumerate() {
                if let (true, Some(k)) = (from != to, k) {
                    let seen = k.seen_from(from as u32, to as u32);
                    h.clocks.iter_mut().for_each(|c| c.join(&seen));
                }
            }
        }
    }
}
