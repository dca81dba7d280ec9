//! The rules of Hopper's asynchronous protocols (and of named barriers) that the simulator
//! checks, each with the short name a report gives it ([`super::Violation::Protocol`]).

use core::fmt;

/// One rule of Hopper's asynchronous protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// An `mbarrier` phase received more arrivals than the barrier's count.
    MbarrierArrivals,
    /// The copies completing on a phase delivered more bytes than its `expect_tx` announced (or,
    /// reported as a deadlock, fewer).
    MbarrierTransactions,
    /// Every running thread waits (on `mbarrier` phases, or at a barrier) for something no thread
    /// or copy will do: on a GPU the kernel would hang.
    MbarrierDeadlock,
    /// A barrier completed the phase after the one a waiter waits for before that waiter saw its
    /// phase complete (a phase reused, or more arrivals than the count): the parity wait can no
    /// longer tell the phases apart.
    MbarrierPhaseReuse,
    /// An operation on a barrier no thread initialised, or whose `init` is not yet visible to the
    /// thread (no block barrier since) or to the copy engine (no `fence_init`).
    MbarrierUninitialized,
    /// An operation on a barrier after its `inval`.
    MbarrierInvalidated,
    /// `init` of a barrier that is already live: by more than one thread, or twice.
    MbarrierInit,
    /// A tensor copy whose box reaches, inside the tensor it names, past the buffer that tensor
    /// lies in (parts outside the tensor are filled with zeros or dropped, as the hardware does).
    TmaBounds,
    /// A copy's shared-memory side not aligned as the copy and its swizzle require.
    TmaAlignment,
    /// A tensor map whose sizes or strides break the encoding rules (the driver would refuse it).
    TensorMap,
    /// A copy's destination read or written before the thread waited for the barrier phase the
    /// copy completes on (or passed a block barrier after a thread that did).
    TmaEarlyAccess,
    /// An ordinary (generic-proxy) write to shared memory read by the asynchronous proxy (a
    /// tensor store, a `wgmma` operand) with no `fence.proxy.async` by the writer in between.
    ProxyFence,
    /// `wgmma` accumulators read or written while the product writing them is in flight (before
    /// the `wait_group` that retires it), or left in flight when the thread returns.
    WgmmaAccumulators,
    /// Shared memory a `wgmma` reads overwritten before the thread writing it saw the
    /// `wait_group` that retires that product.
    WgmmaOperands,
    /// Shared memory a bulk (tensor) store reads written again before the writer knows the
    /// store's reads are done (the issuing thread's `cp.async.bulk.wait_group.read` covering it,
    /// then, for another thread, a block barrier or a named barrier both took part in), or a
    /// thread returning with bulk stores still reading (uncommitted, or committed and not waited
    /// for).
    BulkStoreSource,
    /// A shared-memory matrix descriptor whose swizzle, strides or start do not read the tile the
    /// way the copy engine wrote it.
    WgmmaDescriptor,
    /// `wgmma.fence` / `commit_group` / `wait_group` out of order in a thread, or the threads of a
    /// warpgroup not executing the same sequence of them.
    WgmmaOrder,
    /// `setmaxnreg` counts that do not add up over the block's warpgroups, or that a warpgroup's
    /// threads do not agree on.
    Setmaxnreg,
    /// Distributed shared memory accessed before the cluster barrier that publishes the other
    /// side's access.
    ClusterPublish,
    /// A block's shared memory accessed by another block of its cluster when the owner may have
    /// exited: no cluster barrier after the access that the owner waits for before it exits.
    ClusterExit,
    /// A named barrier ([`crate::barrier`]) misused: an id or thread count out of range, threads
    /// of one completion naming different counts, a completion by part of a warp, a thread
    /// counting itself in twice before a completion, or a barrier that never completes.
    NamedBarrier,
}

impl Rule {
    /// The rule's short name, as a report and the comparison log give it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::MbarrierArrivals => "mbarrier-arrivals",
            Rule::MbarrierTransactions => "mbarrier-tx",
            Rule::MbarrierDeadlock => "mbarrier-deadlock",
            Rule::MbarrierPhaseReuse => "mbarrier-phase-reuse",
            Rule::MbarrierUninitialized => "mbarrier-uninitialized",
            Rule::MbarrierInvalidated => "mbarrier-invalidated",
            Rule::MbarrierInit => "mbarrier-init",
            Rule::TmaBounds => "tma-bounds",
            Rule::TmaAlignment => "tma-alignment",
            Rule::TensorMap => "tensor-map",
            Rule::TmaEarlyAccess => "tma-early-access",
            Rule::ProxyFence => "proxy-fence",
            Rule::WgmmaAccumulators => "wgmma-accumulators",
            Rule::WgmmaOperands => "wgmma-operands",
            Rule::BulkStoreSource => "bulk-store-source",
            Rule::WgmmaDescriptor => "wgmma-descriptor",
            Rule::WgmmaOrder => "wgmma-order",
            Rule::Setmaxnreg => "setmaxnreg",
            Rule::ClusterPublish => "cluster-publish",
            Rule::ClusterExit => "cluster-exit",
            Rule::NamedBarrier => "named-barrier",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
