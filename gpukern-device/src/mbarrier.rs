//! Shared-memory transaction barriers (`mbarrier`, sm_90): the completion signal of the Hopper
//! bulk tensor copies ([`crate::tma`]). A barrier is one 8-byte word of shared memory that counts
//! arrivals and expected bytes; its phase completes when every expected thread has arrived and
//! every expected byte has landed, and waiters test the phase by its parity (0, 1, 0, ...).
//!
//! The protocol of a copy pipeline: one thread [`init`]s each barrier with an arrival count
//! (then [`fence_init`] and a block barrier, so that every thread and the copy engine see it);
//! per stage, the thread that issues the copies calls [`arrive_expect_tx`] with their total
//! bytes and issues them, and the consumers [`wait_parity`] for the stage's phase.
//!
//! In the simulator the word holds the barrier's state (pending arrivals, pending bytes, the
//! phase), updated and read as an atomic (so the barrier word itself never races); the copies are
//! performed when issued and count their bytes down at once. A wait polls: the thread checks the
//! phase and, while it is incomplete, hands control to the scheduler, which resumes it in the
//! next round; a round in which every running thread polls and no barrier changed is reported as
//! a deadlock (on a GPU the waits would never return). So threads may wait at different places
//! for different barriers, as the producer and consumer warpgroups of a warp-specialized kernel
//! do.

/// Initialises the barrier at `bar` (8-byte aligned, in shared memory) for `count` arrivals per
/// phase, in phase 0.
///
/// # Safety
/// `bar` points to 8 bytes of this block's shared memory, not in use by a pending copy; no other
/// thread touches it before a block barrier after [`fence_init`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn init(bar: *mut u64, count: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "mbarrier.init.shared::cta.b64 [{bar}], {count};",
                bar = in(reg32) bar,
                count = in(reg32) count,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: the caller's contract.
        unsafe { crate::mem::store(bar, 0, sim::State::new(count).0) };
    }
}

/// Makes this thread's [`init`]s visible to the copy engine (the async proxy) and, after a block
/// barrier, to every thread: `fence.mbarrier_init.release.cluster` and
/// `fence.proxy.async.shared::cta`. Nothing in the simulator.
#[inline(always)]
pub fn fence_init() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: fences only.
    unsafe {
        core::arch::asm!(
            "fence.mbarrier_init.release.cluster;",
            "fence.proxy.async.shared::cta;",
            options(nostack),
        );
    }
}

/// Arrives at `bar` once and adds `bytes` to the bytes its current phase waits for
/// (`mbarrier.arrive.expect_tx`): what the thread issuing a stage's copies calls before issuing
/// them.
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn arrive_expect_tx(bar: *mut u64, bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{bar}], {bytes};",
                bar = in(reg32) bar,
                bytes = in(reg32) bytes,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: the caller's contract.
        unsafe { sim::update(bar, |s| s.expect(bytes).arrive()) };
    }
}

/// Arrives at `bar` once (`mbarrier.arrive`), with no bytes: what a consumer calls when it is
/// done with a stage, so that the producer may refill it.
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory whose current phase still
/// expects an arrival.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn arrive(bar: *mut u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        let bar = crate::async_copy::shared_address(bar);
        // SAFETY: the caller's contract. Not `nomem`: the arrival releases this thread's accesses.
        unsafe {
            core::arch::asm!(
                "mbarrier.arrive.shared::cta.b64 _, [{bar}];",
                bar = in(reg32) bar,
                options(nostack),
            );
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: the caller's contract.
        unsafe { sim::update(bar, |s| s.arrive()) };
    }
}

/// Whether the phase of parity `parity` (0 or 1) of `bar` has completed
/// (`mbarrier.try_wait.parity`, which may wait a little before answering no).
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn try_wait_parity(bar: *mut u64, parity: u32) -> bool {
    let bar = crate::async_copy::shared_address(bar);
    let done: u32;
    // SAFETY: the caller's contract. Not `nomem`: the wait orders the loads of the data it guards.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .pred p;",
            "mbarrier.try_wait.parity.shared::cta.b64 p, [{bar}], {parity};",
            "selp.u32 {done}, 1, 0, p;",
            "}}",
            bar = in(reg32) bar,
            parity = in(reg32) parity,
            done = out(reg32) done,
            options(nostack),
        );
    }
    done != 0
}

/// Waits until the phase of parity `parity` of `bar` has completed: a loop around
/// `try_wait.parity` on the GPU; a polling loop in the simulator (see the module documentation).
/// A fresh barrier is in phase 0, so a wait for parity 1 returns at once (the phase "before" it
/// counts as complete): how a producer waits for stages that no consumer has used yet.
///
/// # Safety
/// `bar` is an initialised barrier of this block's shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn wait_parity(bar: *mut u64, parity: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: forwarded contract.
        while !unsafe { try_wait_parity(bar, parity) } {}
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: the caller's contract.
        while unsafe { sim::read(bar) }.phase() == parity & 1 {
            crate::sim::device::poll();
        }
    }
}

/// The simulator's barrier word and its updates.
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) mod sim {
    /// The barrier's state: bits 0..32 the bytes still expected (as an `i32`: copies may land
    /// before their `expect_tx`), 32..48 the arrivals still expected, 48..63 the arrival count,
    /// 63 the parity of the current (incomplete) phase.
    #[derive(Clone, Copy)]
    pub(crate) struct State(pub(crate) u64);

    impl State {
        pub(crate) fn new(count: u32) -> State {
            assert!(
                (1..1 << 15).contains(&count),
                "mbarrier init with {count} arrivals"
            );
            State((u64::from(count) << 48) | (u64::from(count) << 32))
        }
        pub(crate) fn phase(self) -> u32 {
            (self.0 >> 63) as u32
        }
        pub(crate) fn arrivals(self) -> u32 {
            ((self.0 >> 32) & 0xffff) as u32
        }
        pub(crate) fn bytes(self) -> i32 {
            self.0 as u32 as i32
        }
        fn count(self) -> u32 {
            ((self.0 >> 48) & 0x7fff) as u32
        }
        fn with(self, arrivals: u32, bytes: i32) -> State {
            // The phase completes when nothing is pending: the next one starts afresh.
            if arrivals == 0 && bytes == 0 {
                let phase = u64::from(self.phase() ^ 1);
                State((phase << 63) | (u64::from(self.count()) << 48) | (u64::from(self.count()) << 32))
            } else {
                State((self.0 & !0xffff_ffff_ffff) | (u64::from(arrivals) << 32) | u64::from(bytes as u32))
            }
        }
        pub(crate) fn expect(self, bytes: u32) -> State {
            State((self.0 & !0xffff_ffff) | u64::from(self.bytes().wrapping_add(bytes as i32) as u32))
        }
        pub(crate) fn arrive(self) -> State {
            assert!(self.arrivals() > 0, "mbarrier arrival beyond its count");
            self.with(self.arrivals() - 1, self.bytes())
        }
        pub(crate) fn complete_tx(self, bytes: u32) -> State {
            self.with(self.arrivals(), self.bytes().wrapping_sub(bytes as i32))
        }
    }

    /// Applies `f` to the barrier word at `bar`.
    ///
    /// # Safety
    /// `bar` is an initialised barrier in shared memory.
    #[track_caller]
    pub(crate) unsafe fn update(bar: *mut u64, f: impl FnOnce(State) -> State) {
        let mut f = Some(f);
        crate::atomic::host::rmw64(bar as usize, 0, |old| f.take().map(|f| f(State(old)).0));
        crate::sim::device::mbarrier_updated();
    }

    /// The state of the barrier at `bar`, read as an atomic.
    ///
    /// # Safety
    /// `bar` is an initialised barrier in shared memory.
    #[track_caller]
    pub(crate) unsafe fn read(bar: *mut u64) -> State {
        State(crate::atomic::host::rmw64(bar as usize, 0, |_| None))
    }
}
