//! A block/thread simulator: runs a kernel launch on the CPU, checking it as it goes.
//!
//! What it models:
//! * a grid of blocks; blocks run in parallel on the CPU's cores, in no fixed order;
//! * the threads of one block as coroutines on one OS thread: each runs until it reaches a
//!   barrier or returns, so [`crate::thread::sync_threads`] really synchronises them;
//! * warp shuffles ([`crate::warp`]) as a rendezvous of the 32 lanes of a warp: each lane
//!   suspends with its value, and the exchange completes when every lane of the warp is there;
//! * each block's own dynamic shared memory, sized by the launch;
//! * thread-block clusters ([`Launch::cluster`]): the blocks of one cluster run together, their
//!   threads scheduled as one group, so that the cluster barrier ([`crate::cluster`]) really
//!   synchronises them; a block reaches another's shared memory through `mapa` and the
//!   `shared::cluster` loads and stores, checked for bounds, uninitialised reads, races (a block
//!   barrier orders a block's own threads only: an access from another block is ordered
//!   against the memory's own threads by cluster barriers alone), and access to a block that
//!   has exited;
//! * cooperative launches ([`Launch::cooperative`]): every block of the grid runs together, its
//!   threads scheduled as one group, so that the grid barrier ([`crate::grid::sync`]) really
//!   synchronises them; it is reported (never hung) when a thread of the grid has returned or
//!   waits elsewhere, and when a launch that is not cooperative calls it. Global accesses of
//!   different blocks separated by a grid barrier are ordered (each access records the grid
//!   barriers passed before it); in one grid-barrier interval they race as always;
//! * each registered buffer at its own simulated device address, 1 TiB from any other: the
//!   pointers a kernel gets from [`Launch::input`] / [`Launch::output`] are not host addresses,
//!   and [`crate::mem`] translates every access;
//! * `cp.async` copies that land in shared memory only at the wait that retires their group;
//! * atomics ([`crate::atomic`]) as a real atomic of the host on the element (a CAS loop), so
//!   blocks running on several OS threads lose no update;
//! * [`crate::print!`], formatted on the host and printed at once (one call's text is never
//!   split), and captured per launch when asked ([`Launch::capture_output`]).
//!
//! What it checks, each report naming the kernel, block, thread and index ([`SimError`]):
//! * reads and writes out of bounds of a global buffer or of shared memory, writes to an input,
//!   and accesses through pointers into no buffer of the launch. A global access is attributed to
//!   the buffer whose simulated address is nearest its pointer, so a pointer offset past one
//!   buffer's end (by less than half a TiB) is reported against that buffer even where, on the
//!   host, the offset would land inside another registered buffer;
//! * an access through [`crate::mem`] at an address not aligned to its type (a misaligned-address
//!   fault on the GPU), reported as a panic of the kernel code;
//! * a barrier that not every thread of the block reaches, or threads waiting at different
//!   barriers (reported, never a hang). A barrier is named by the source location of the call
//!   that reaches it from the kernel: the block collectives ([`crate::block`]) and other
//!   helpers with barriers are `#[track_caller]`, so two calls of one helper are two barriers;
//! * a warp shuffle that not every lane of the warp reaches (a lane returned, or waits at a
//!   barrier or another shuffle), or one in a warp of fewer than 32 threads;
//! * shared-memory races: two threads touching the same element between two barriers, at
//!   least one of them writing, unless a named barrier ([`crate::barrier`]) orders them: the
//!   earlier thread counted itself in at it after its access (or, through a chain of named
//!   barriers, at one whose completion the later thread's warp learned of) and the later thread
//!   waited there before its own. Each word remembers two reads (as it always has); with named
//!   barriers, a third read that neither remembered one is ordered before is not remembered, so
//!   a later write racing only with that third read can go unreported. Named barriers are
//!   checked themselves (rule `named-barrier`: ids, counts, whole warps, a barrier that never
//!   completes) and do not order global memory here;
//! * global-memory races in output buffers: two threads touching the same element, at least one
//!   writing, with nothing ordering them (threads of different blocks, unless a grid barrier of a
//!   cooperative launch lies between, or a release the later thread acquired covers the earlier
//!   access; threads of one block, between two barriers). Reported from the lower of the two
//!   (block, thread) pairs. A release is a device- or system-scope [`crate::atomic::fence`]
//!   then an atomic on global memory; it covers its thread's accesses before the fence and its
//!   block's before a barrier that precedes the fence. An acquire is an atomic that reads the
//!   word the release's atomic wrote (or a later read-modify-write of it), then a fence; the
//!   acquiring thread's block learns it at its next barrier, and a release carries what its
//!   thread acquired before (`sim/release.rs`);
//! * atomics, as accesses of kind [`Access::Atomic`] in global and shared memory: checked for
//!   bounds, unknown pointers and writes to inputs as a write is; two atomics on one element
//!   never race, but an atomic races with another thread's plain read or write of the element
//!   that nothing orders (the same rules as above); an atomic on shared memory nobody wrote is an
//!   uninitialised read; an atomic on an address that is not a multiple of its size is reported
//!   ([`Violation::MisalignedAtomic`]) instead of performed;
//! * an access to a shared word a `cp.async` is still copying into (before the issuing thread's
//!   wait retires its group; a barrier does not), and a read of a landed copy by another thread
//!   before a barrier that follows the wait;
//! * reads of shared memory that no thread wrote since the launch began;
//! * Hopper's asynchronous protocols ([`Violation::Protocol`], the rule broken a [`Rule`]): each
//!   `mbarrier` is a record of its block (arrivals and bytes its phase still expects, phases
//!   completed, who initialised it), each thread knows which barrier phases and `wgmma` groups
//!   it has seen complete (joined through barrier arrivals and block barriers), each shared word
//!   written by a copy remembers the phase that copy completes on (and the tensor element it
//!   holds), each word written by an ordinary store its writer's `fence.proxy.async` count, each
//!   word a `wgmma` reads the group reading it, and a thread's in-flight accumulators are markers
//!   until the `wait_group` that retires their product: so it reports arrivals and bytes per
//!   phase, deadlocks (naming what the barrier still expects), phases reused before a waiter saw
//!   them, barriers uninitialised, invalidated or initialised twice, copies past their buffer,
//!   misaligned, or with a tensor map the driver would refuse, copies' destinations touched
//!   before their phase was waited for, ordinary stores read by the asynchronous proxy unfenced,
//!   accumulators used in flight, operands overwritten before their product retired, a bulk
//!   store's source overwritten before its issuing thread's `wait_group.read` (or the thread
//!   returning without one),
//!   descriptors that do not read a copied tile as it was written, `wgmma` instructions out of
//!   order or not executed by the whole warpgroup, `setmaxnreg` counts that do not add up, and
//!   distributed shared memory accessed before the cluster barrier that publishes it (an access
//!   between a thread's `arrive` and its `wait` is not published by that barrier) or when its
//!   block may have exited; in a cluster, multicast tensor copies ([`crate::tma::load_2d_multicast`])
//!   land in each destination block as its own copy would, and remote `mbarrier` arrivals
//!   ([`crate::mbarrier::arrive_cluster`]) count on the peer's barrier and carry the arriving
//!   thread's knowledge (as does a cluster barrier), so that a multicast write over a peer's
//!   `wgmma` operands is checked against what the issuer learned of their retirement; a peer's
//!   barrier used before a cluster barrier published its init, and a block exiting before it
//!   waited for a phase another block's arrival or copy counted towards, are reported
//!   (`gpukern-device/README.md` lists each rule and its planted test);
//! * a failed [`crate::device_assert!`] ([`Violation::Assertion`]);
//! * a panic inside kernel code.
//!
//! What it does not check or model:
//! * memory touched other than through [`crate::mem`] and the helpers built on it (a plain
//!   `*p` on a simulated address crashes or reads the wrong memory), and pointer provenance
//!   beyond addresses: a pointer computed from another buffer's address (`x + (y - x)`), or
//!   offset by half a TiB or more, is attributed to the buffer it lands nearest;
//! * global races involving reads fully: each element remembers its last writer and its last
//!   reader only, so a write is checked against the latest read, not every earlier one; input
//!   buffers have no shadow (they cannot be written); threads of one block are ordered by any
//!   barrier between them, as `__syncthreads` orders global memory too;
//! * global races with atomics fully: each element remembers its last atomic only, so a plain
//!   access is checked against the latest atomic, not every earlier one;
//! * the scope of an atomic: every atomic is performed device-wide, so a block-scope atomic on
//!   global memory that other blocks update too passes here (on the GPU it is not atomic with
//!   respect to them; block-scope fences and atomics do hand nothing between blocks here); nor
//!   the GPU's f32 atomic add on global memory flushing subnormals to zero;
//! * releases beyond the pattern above: a thread's sixteenth and later device-scope fence in one
//!   barrier interval counts as its fifteenth (its releases then cover less: races reported,
//!   none missed), a strong store ends the word's chain of releases (as a plain one does not
//!   here), and what a thread knows of another block's accesses is checked at conflicts only, so
//!   an acquire that happens to read the value of the wrong release (a counter the kernel never
//!   reset) passes where its accesses do not conflict;
//! * copies landing later than when they are issued (the Hopper checks above stand in for their
//!   timing); a multicast copy's shared-memory writes in a peer are not checked for races with
//!   the peer's ordinary accesses (the copies' ordering is the `mbarrier` protocol's, checked
//!   above, as for a block's own copies);
//! * timing, warp-synchronous execution (threads of a warp do not run in lockstep here, they
//!   meet only at shuffles), the GPU's weak memory ordering and fences, every possible order of
//!   the blocks, and fast-math differences (`exp2` is the CPU's, not `ex2.approx`);
//! * `print!` as CUDA delivers it: the GPU keeps the text in a fixed device buffer (1 MiB by
//!   default) until the next synchronisation and drops what overflows, and a failed assertion
//!   on the GPU stops every thread that fails it (here, the first one stops the launch).

mod async_copy;
mod block;
pub(crate) mod device;
mod global;
pub(crate) mod hopper;
mod launch;
mod print;
pub(crate) mod release;
mod report;
mod rule;
mod shadow;
pub(crate) mod tma;
pub(crate) mod wgmma;

pub use launch::{Dim3, Launch, LaunchConfig, MAX_CLUSTER_BLOCKS, MAX_COOPERATIVE_THREADS};
pub use print::{Output, Printed};
pub use report::{Access, Rule, SimError, Space, Violation};

/// Most threads a block may have (the CUDA limit on every current GPU).
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;

/// Threads per warp. A warp is the threads of a block whose linear index (x fastest) divided by
/// 32 is the same; warp shuffles exchange values among its lanes.
pub const WARP_SIZE: u32 = crate::warp::SIZE;
