//! What the simulator reports when a launch breaks a rule.

use core::fmt;

use super::Dim3;

pub use super::rule::Rule;

/// Whether an access reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An atomic read-modify-write ([`crate::atomic`]): it writes, but never races with another
    /// atomic.
    Atomic,
}

/// Which memory an access touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// A buffer passed to the launch.
    Global,
    /// The block's dynamic shared memory.
    Shared,
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq)]
pub enum Violation {
    /// An access past the end of a buffer. `index` and `len` count elements of the accessed type
    /// from the start of the buffer (global) or of shared memory.
    OutOfBounds {
        /// Global or shared.
        space: Space,
        /// The buffer's name (`"shared"` for shared memory).
        buffer: String,
        /// Read or write.
        access: Access,
        /// Element index that was touched.
        index: usize,
        /// Elements in the buffer.
        len: usize,
    },
    /// A write to a buffer passed as an input.
    WriteToInput {
        /// The buffer's name.
        buffer: String,
        /// Element index that was written.
        index: usize,
    },
    /// An access through a pointer into no buffer of the launch.
    UnknownPointer {
        /// Read or write.
        access: Access,
        /// The address.
        address: usize,
    },
    /// Two threads touched the same shared element between two barriers, at least one writing.
    SharedRace {
        /// Element index in shared memory.
        index: usize,
        /// What this thread did.
        access: Access,
        /// The other thread.
        other: Dim3,
        /// What the other thread did.
        other_access: Access,
    },
    /// Two threads touched the same element of a global buffer, at least one writing, with
    /// nothing ordering them: threads of different blocks (the only accesses of different
    /// blocks that may meet are two atomics), or of one block with no barrier between the
    /// accesses. The report names the lower of the two (block, thread) pairs as the thread, so
    /// that it does not depend on the order blocks ran.
    GlobalRace {
        /// The buffer's name.
        buffer: String,
        /// Element index in the buffer.
        index: usize,
        /// What this thread did.
        access: Access,
        /// The other thread's block.
        other_block: Dim3,
        /// The other thread.
        other: Dim3,
        /// What the other thread did.
        other_access: Access,
    },
    /// An atomic on an address that is not a multiple of its size (the GPU faults with
    /// "misaligned address"; the simulator reports it instead of performing it).
    MisalignedAtomic {
        /// Global or shared.
        space: Space,
        /// The buffer's name (`"shared"` for shared memory).
        buffer: String,
        /// Byte offset of the atomic from the start of the buffer (or of shared memory).
        offset: usize,
        /// Bytes of the atomic (and the alignment it needs).
        size: usize,
    },
    /// An access to shared memory that a `cp.async` is still copying into: the issuing thread
    /// has not yet waited (`wait_group` / `wait_all`) for the group holding that copy.
    AsyncCopyNotWaited {
        /// Element index in shared memory.
        index: usize,
        /// What this thread did.
        access: Access,
        /// The thread that issued the copy.
        issuer: Dim3,
    },
    /// A read of shared memory that no thread wrote since the launch began.
    UninitializedSharedRead {
        /// Element index in shared memory.
        index: usize,
    },
    /// This thread returned while others of its block wait at a barrier.
    BarrierNotReached {
        /// Where the others wait (`file:line:column`).
        barrier: String,
        /// How many threads wait there.
        waiting: usize,
    },
    /// Threads of one block wait at different barriers.
    DifferentBarriers {
        /// Where this thread waits.
        here: String,
        /// Where the other waits.
        there: String,
        /// The other thread.
        other: Dim3,
    },
    /// This lane returned while other lanes of its warp wait at a warp shuffle.
    ShuffleNotReached {
        /// Where the others wait (`file:line:column`).
        shuffle: String,
        /// How many lanes of the warp wait there.
        waiting: usize,
    },
    /// Lanes of one warp wait at different places: this one at a warp shuffle, another at a
    /// barrier or at another shuffle.
    DifferentShuffles {
        /// The shuffle where this lane waits (`file:line:column`).
        here: String,
        /// Where the other lane waits (`the barrier at ...` or `the warp shuffle at ...`).
        there: String,
        /// The other lane.
        other: Dim3,
    },
    /// A warp shuffle in a warp of fewer than 32 threads (the block's size is not a multiple of
    /// 32): a full-warp shuffle would wait for lanes that do not exist.
    PartialWarp {
        /// The shuffle (`file:line:column`).
        shuffle: String,
        /// Threads in this warp.
        lanes: u32,
    },
    /// A `device_assert!` whose condition was false (on the GPU: `CUDA_ERROR_ASSERT`).
    Assertion {
        /// The assertion's message: the text given, or the condition's source text.
        message: String,
        /// Where the assertion is (`file:line`).
        location: String,
    },
    /// Kernel code panicked.
    Panic {
        /// The panic message.
        message: String,
    },
    /// The launch configuration itself is invalid.
    InvalidLaunch {
        /// What is wrong.
        reason: String,
    },
    /// A rule of Hopper's asynchronous protocols (transaction barriers, bulk and tensor copies,
    /// proxy fences, `wgmma`, `setmaxnreg`, clusters) broken: which one, and what happened, with
    /// the barrier (by its shared-memory byte) or buffer involved.
    Protocol {
        /// The rule.
        rule: Rule,
        /// What happened.
        message: String,
    },
}

/// A violation, where it happened.
#[derive(Clone, Debug, PartialEq)]
pub struct SimError {
    /// The kernel's name, as given to [`super::Launch::new`].
    pub kernel: String,
    /// The block's index in the grid.
    pub block: Dim3,
    /// The thread's index in its block.
    pub thread: Dim3,
    /// What went wrong.
    pub violation: Violation,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic => "atomic",
        })
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::OutOfBounds {
                space,
                buffer,
                access,
                index,
                len,
            } => {
                let space = match space {
                    Space::Global => "global buffer",
                    Space::Shared => "shared memory",
                };
                write!(
                    f,
                    "out-of-bounds {access} of {space} `{buffer}` at index {index} (length {len})"
                )
            }
            Violation::WriteToInput { buffer, index } => {
                write!(f, "write to input buffer `{buffer}` at index {index}")
            }
            Violation::UnknownPointer { access, address } => {
                write!(
                    f,
                    "{access} through pointer {address:#x}, which is in no buffer of the launch"
                )
            }
            Violation::SharedRace {
                index,
                access,
                other,
                other_access,
            } => write!(
                f,
                "shared-memory race at index {index}: this thread's {access} and thread {other}'s \
                 {other_access} with no barrier between them"
            ),
            Violation::GlobalRace {
                buffer,
                index,
                access,
                other_block,
                other,
                other_access,
            } => write!(
                f,
                "global-memory race on `{buffer}` at index {index}: this thread's {access} and the \
                 {other_access} of thread {other} of block {other_block}, with nothing ordering them"
            ),
            Violation::MisalignedAtomic {
                space,
                buffer,
                offset,
                size,
            } => {
                let space = match space {
                    Space::Global => "global buffer",
                    Space::Shared => "shared memory",
                };
                write!(
                    f,
                    "{size}-byte atomic on {space} `{buffer}` at byte offset {offset}: its address is \
                     not a multiple of {size}"
                )
            }
            Violation::AsyncCopyNotWaited {
                index,
                access,
                issuer,
            } => write!(
                f,
                "{access} of shared memory at index {index} while the cp.async into it issued by \
                 thread {issuer} is still in flight (wait for its group first, then a barrier for \
                 other threads)"
            ),
            Violation::UninitializedSharedRead { index } => {
                write!(
                    f,
                    "read of shared memory at index {index}, which no thread has written"
                )
            }
            Violation::BarrierNotReached { barrier, waiting } => write!(
                f,
                "this thread returned without reaching the barrier at {barrier}, where {waiting} \
                 thread(s) of its block wait"
            ),
            Violation::DifferentBarriers { here, there, other } => write!(
                f,
                "this thread waits at the barrier at {here}, thread {other} at a different one at {there}"
            ),
            Violation::ShuffleNotReached { shuffle, waiting } => write!(
                f,
                "this lane returned without reaching the warp shuffle at {shuffle}, where {waiting} \
                 lane(s) of its warp wait"
            ),
            Violation::DifferentShuffles { here, there, other } => write!(
                f,
                "this lane waits at the warp shuffle at {here}, lane {other} of its warp at {there}"
            ),
            Violation::PartialWarp { shuffle, lanes } => write!(
                f,
                "warp shuffle at {shuffle} in a warp of {lanes} thread(s): a full-warp shuffle \
                 needs 32 (make the block's size a multiple of 32)"
            ),
            Violation::Assertion { message, location } => {
                write!(f, "device assertion `{message}` failed at {location}")
            }
            Violation::Panic { message } => write!(f, "kernel code panicked: {message}"),
            Violation::InvalidLaunch { reason } => write!(f, "invalid launch: {reason}"),
            Violation::Protocol { rule, message } => write!(f, "[{rule}] {message}"),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel `{}`, block {}, thread {}: {}",
            self.kernel, self.block, self.thread, self.violation
        )
    }
}

impl std::error::Error for SimError {}
