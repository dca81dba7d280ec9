//! A multi-stage producer/consumer copy pipeline for Hopper (sm_90a): a ring of `stages` stages
//! of `stage_bytes` bytes each in the block's dynamic shared memory, filled by the bulk tensor copy
//! engine ([`crate::tma`]) and drained by the tensor cores ([`crate::wgmma`]), so that a kernel
//! writes its schedule (which tiles, in which order) and not the protocol.
//!
//! The protocol it keeps (the one of `kernels_gpu::matmul::wgmma_ws`):
//! * every stage has a `full` barrier (one arrival: the producer's, with the stage's
//!   `stage_bytes` as expected bytes; the copies complete it) and an `empty` barrier (one
//!   arrival per consumer warp, once the warp is done with the stage);
//! * [`Ring::new`], called by every thread of the block, lays the ring out at the first
//!   1024-byte boundary of the dynamic window (what the 128-byte swizzle needs), has thread 0
//!   initialise the barriers and make them visible to the copy engine
//!   ([`mbarrier::fence_init`]: `fence.mbarrier_init` and `fence.proxy.async`), then a block
//!   barrier;
//! * the [`Producer`] walks the ring: [`Producer::acquire`] waits until the next stage is empty
//!   (the phase parity it tracks; a fresh ring's stages count as empty), arrives on its `full`
//!   barrier expecting `stage_bytes` and hands the [`Stage`] back, whose [`Stage::load`] issues
//!   the copies into it;
//! * each [`Consumer`] walks the same ring: [`Consumer::wait`] waits until the next stage is
//!   full and hands it back; [`Consumer::release`] marks it empty (lane 0 of each warp arrives).
//!
//! A ring shared by the blocks of a cluster ([`Ring::new_cluster`]): each block's producer
//! copies its part of an operand tile that several blocks use into all of them at once
//! ([`Stage::load_multicast`]), so a stage of one block is also written by the others' copies;
//! its `empty` barrier then counts the consumer warps of every block that writes into it, each
//! of which releases the stage in all of them ([`Consumer::release_cluster`]), and before a block
//! exits its producer waits for the last release of every stage ([`Producer::drain`]), so that no
//! other block's arrival is still to come.
//!
//! The ring runs on across tiles: a persistent kernel's producer fills the next tile's stages
//! while the consumers finish the last. The expected bytes of a stage are `stage_bytes`, so the
//! copies the producer issues per stage must fill it exactly: declare the stage as the sum of
//! its tiles' bytes ([`crate::tile::KMajor::BYTES`], [`crate::tile::NMajor::BYTES`]). A step that
//! fills only part of a stage (a narrower tile) says how many bytes it copies
//! ([`Producer::acquire_bytes`]).
//!
//! `fence.proxy.async`: the copy engine and the tensor cores both read and write through the
//! asynchronous proxy, so a ring that only they touch needs no fence past the barriers'
//! initialisation (done here). A kernel that writes a stage with ordinary stores (an epilogue
//! staging its output for a bulk store) calls [`crate::wgmma::fence_proxy_async`] after its
//! stores and before the copy engine or a product reads them; the simulator reports the missing
//! fence.
//!
//! # Simulator
//! Every step is one of the modelled operations ([`crate::mbarrier`], [`crate::tma`]), so the
//! simulator runs the pipeline as it runs any of them, and checks what they check: a stage
//! refilled before its consumers released it (a write over a product's operands), copies of
//! more bytes than the stage expects, a wait for a phase the barrier has gone past, a
//! deadlock (a stage never released, or fewer bytes than `stage_bytes` copied) named with the
//! barrier and what it still expects.

use crate::{mbarrier, shared, thread, tma, wgmma};

/// Alignment of the ring: a 128-byte swizzle atom (8 rows of 128 bytes).
pub const RING_ALIGN: usize = 1024;

/// A swizzle atom, the type [`Ring::new_at_window`] takes the dynamic shared memory as: so the
/// module declares that memory 1024-byte aligned (`.extern .shared .align 1024`) and PTX places
/// it so.
#[repr(C, align(1024))]
struct Atom([u8; RING_ALIGN]);

/// A ring of `stages` stages of `stage_bytes` bytes each in the dynamic shared memory, with
/// their `full` and `empty` barriers after them. The counts are values, not types, so that a
/// kernel generic over its tile shape passes its own constants; inlined, they fold as constants
/// (`step % stages` of a power of two is a mask).
#[derive(Clone, Copy)]
pub struct Ring {
    base: *mut u8,
    address: u32,
    bars: *mut u64,
    stages: usize,
    stage_bytes: usize,
}

impl Ring {
    /// Dynamic shared memory a ring of `stages` stages of `stage_bytes` bytes needs: alignment
    /// slack, the stages, two barriers each.
    pub const fn shared_bytes(stages: usize, stage_bytes: usize) -> u32 {
        (RING_ALIGN + stages * stage_bytes + 2 * stages * 8) as u32
    }

    /// Lays a ring of `stages` stages of `stage_bytes` bytes out at the first 1024-byte
    /// boundary of the dynamic shared window and initialises its barriers (thread 0): `full` for
    /// one arrival, `empty` for `consumer_warps` arrivals (the warps that [`Consumer::release`]
    /// each stage). Ends with a block barrier ([`thread::sync_threads`]: count it in the
    /// kernel's `barriers`).
    ///
    /// # Safety
    /// Every thread of the block (1-D) calls it, once, before anything else uses the dynamic
    /// shared memory; the launch gives at least [`Ring::shared_bytes`] of it; `stages >= 1` and
    /// `stage_bytes` a multiple of 1024 (every stage starts on a swizzle atom; the simulator
    /// checks both).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn new(stages: usize, stage_bytes: usize, consumer_warps: u32) -> Self {
        let window = shared::dynamic::<u64>().cast::<u8>();
        let window_address = wgmma::shared_address(window) as usize;
        let pad = (RING_ALIGN - window_address % RING_ALIGN) % RING_ALIGN;
        // SAFETY: forwarded contract.
        unsafe {
            Ring::at(
                window.wrapping_add(pad),
                (window_address + pad) as u32,
                stages,
                stage_bytes,
            )
            .init(consumer_warps)
        }
    }

    /// [`Ring::new`] at the start of the dynamic shared window itself, which it declares
    /// 1024-byte aligned (the type `Atom`; the simulator checks it): no padding computed at run
    /// time. For a kernel at its register limit whose warpgroups change their register counts
    /// (`setmaxnreg`) after it: ptxas spilled the padding kept across the change (the one-kernel
    /// attention backward with ALiBi at head dim 128). Other kernels keep [`Ring::new`]: in its
    /// place this made the unmasked one-kernel backward at 8x2048x32x64 run 348.0 and 348.1
    /// TFLOP/s against 358.3 and 356.9 on an H100, in one call
    /// (`bench/experiments/third-wave/bc34902-ring-ab-{bc34902,0589db3}-{1,2}.jsonl`).
    ///
    /// # Safety
    /// As [`Ring::new`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    pub unsafe fn new_at_window(stages: usize, stage_bytes: usize, consumer_warps: u32) -> Self {
        let base = shared::dynamic::<Atom>().cast::<u8>();
        let address = wgmma::shared_address(base);
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            address as usize % RING_ALIGN == 0,
            "the dynamic shared window at {address:#x}: not 1024-byte aligned"
        );
        // SAFETY: forwarded contract.
        unsafe { Ring::at(base, address, stages, stage_bytes).init(consumer_warps) }
    }

    /// The ring at `base` (shared address `address`), its barriers not yet initialised; the
    /// simulator checks `stages` and `stage_bytes` ([`Ring::new`]'s contract).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    fn at(base: *mut u8, address: u32, stages: usize, stage_bytes: usize) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        assert!(
            stages >= 1 && stage_bytes % RING_ALIGN == 0,
            "a ring of {stages} stages of {stage_bytes} bytes: stages of whole 1024-byte atoms"
        );
        Ring {
            base,
            address,
            bars: base.wrapping_add(stages * stage_bytes).cast::<u64>(),
            stages,
            stage_bytes,
        }
    }

    /// Initialises the ring's barriers (thread 0) and meets the block's threads, as
    /// [`Ring::new`] says.
    ///
    /// # Safety
    /// As [`Ring::new`].
    #[inline(always)]
    unsafe fn init(self, consumer_warps: u32) -> Self {
        let ring = self;
        if thread::thread_idx_x() == 0 {
            for s in 0..ring.stages {
                // SAFETY: 16 bytes past the stages per stage (the caller's launch), touched by
                // nothing else before the block barrier below.
                unsafe {
                    mbarrier::init(ring.full(s), 1);
                    mbarrier::init(ring.empty(s), consumer_warps);
                }
            }
            mbarrier::fence_init();
        }
        thread::sync_threads();
        ring
    }

    /// [`Ring::new`] for a ring whose stages the blocks `0..blocks` of the cluster fill
    /// together by multicast copies: each stage's `empty` barrier counts `consumer_warps` warps
    /// of each of those blocks, and after the block barrier every thread of the cluster meets at
    /// a cluster barrier ([`crate::cluster::sync`]), so that every block's barriers are
    /// initialised before another block's copy or arrival reaches them. Count both barriers in
    /// the kernel's `barriers`.
    ///
    /// # Safety
    /// As [`Ring::new`], called by every thread of every block of the cluster; `blocks` at most
    /// the cluster's size, every block of the cluster making the same ring; compute capability
    /// 9.0.
    #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn new_cluster(stages: usize, stage_bytes: usize, consumer_warps: u32, blocks: u32) -> Self {
        // SAFETY: forwarded contract; then every thread of the cluster at the cluster barrier.
        unsafe {
            let ring = Ring::new(stages, stage_bytes, consumer_warps * blocks);
            crate::cluster::sync();
            ring
        }
    }

    /// The first 1024-byte boundary past the ring's barriers, as a pointer and a shared-window
    /// address: where a kernel may keep tiles of its own (attention's `Q`), after asking the
    /// launch for [`Ring::shared_bytes`] plus [`RING_ALIGN`] plus their bytes.
    #[inline(always)]
    pub fn tail(&self) -> (*mut u8, u32) {
        let offset = self.stages * self.stage_bytes + RING_ALIGN;
        (self.base.wrapping_add(offset), self.address + offset as u32)
    }

    /// Bytes of one stage.
    #[inline(always)]
    pub fn stage_bytes(&self) -> usize {
        self.stage_bytes
    }

    /// The stage and phase parity of step `step` of a walk over the ring.
    #[inline(always)]
    fn place(&self, step: usize) -> (usize, u32) {
        (step % self.stages, ((step / self.stages) & 1) as u32)
    }

    #[inline(always)]
    fn full(&self, s: usize) -> *mut u64 {
        self.bars.wrapping_add(s)
    }

    #[inline(always)]
    fn empty(&self, s: usize) -> *mut u64 {
        self.bars.wrapping_add(self.stages + s)
    }

    #[inline(always)]
    fn stage(&self, s: usize) -> Stage {
        Stage {
            base: self.base.wrapping_add(s * self.stage_bytes),
            address: self.address + (s * self.stage_bytes) as u32,
            full: self.full(s),
            empty: self.empty(s),
        }
    }

    /// The producer's walk over the ring, from stage 0 (one thread issues the copies).
    #[inline(always)]
    pub fn producer(&self) -> Producer {
        Producer { ring: *self, step: 0 }
    }

    /// A consumer's walk over the ring, from stage 0 (every thread of the consuming warps).
    #[inline(always)]
    pub fn consumer(&self) -> Consumer {
        Consumer { ring: *self, step: 0 }
    }
}

/// One stage of a [`Ring`]: where it is, and its barriers.
#[derive(Clone, Copy)]
pub struct Stage {
    base: *mut u8,
    address: u32,
    full: *mut u64,
    empty: *mut u64,
}

impl Stage {
    /// The stage's bytes from `offset` on, as a pointer into shared memory.
    #[inline(always)]
    pub fn ptr<T>(&self, offset: usize) -> *mut T {
        self.base.wrapping_add(offset).cast::<T>()
    }

    /// The shared-window address of the stage's byte `offset` (what descriptors take).
    #[inline(always)]
    pub fn address(&self, offset: usize) -> u32 {
        self.address + offset as u32
    }

    /// Copies the box of `tensor` at (`row`, `col`) into the stage at `offset`, completing on
    /// the stage's `full` barrier ([`tma::load_2d`]).
    ///
    /// # Safety
    /// The stage was handed out by [`Producer::acquire`] and is not yet waited for by the
    /// consumers; `offset` is a multiple of 1024 with room for the box inside the stage; the
    /// contract of [`tma::load_2d`] for `tensor`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load<T: Copy>(&self, offset: usize, tensor: &tma::Tensor2d<T>, row: usize, col: usize) {
        // SAFETY: forwarded contract.
        unsafe { tma::load_2d(self.ptr::<T>(offset), tensor, self.full, row as u32, col as u32) };
    }

    /// Copies the box of `tensor` at (`row`, `col`) into the stage at `offset` of every block
    /// of the cluster whose rank is a bit of `mask`, completing on each one's `full` barrier
    /// ([`tma::load_2d_multicast`]): this block's part of a tile the blocks share.
    ///
    /// # Safety
    /// As [`Stage::load`], on a ring from [`Ring::new_cluster`] whose blocks include `mask`'s;
    /// the stage is free in each of them (its `empty` barrier counts their consumers, and this
    /// producer waited for it).
    #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load_multicast<T: Copy>(
        &self,
        offset: usize,
        tensor: &tma::Tensor2d<T>,
        row: usize,
        col: usize,
        mask: u16,
    ) {
        // SAFETY: forwarded contract.
        unsafe {
            tma::load_2d_multicast(
                self.ptr::<T>(offset),
                tensor,
                self.full,
                [row as u32, col as u32],
                mask,
            )
        };
    }

    /// Copies the box of the 4-D `tensor` at (`outer`, `plane`, `row`, `col`) into the stage at
    /// `offset`, completing on the stage's `full` barrier ([`tma::load_4d`]).
    ///
    /// # Safety
    /// As [`Stage::load`], with the contract of [`tma::load_4d`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load_4d<T: Copy>(&self, offset: usize, tensor: &tma::Tensor4d<T>, at: [usize; 4]) {
        let at = at.map(|x| x as u32);
        // SAFETY: forwarded contract.
        unsafe { tma::load_4d(self.ptr::<T>(offset), tensor, self.full, at) };
    }
}

/// The producer's walk over a [`Ring`]: the stage and the phase parity of its next step.
pub struct Producer {
    ring: Ring,
    step: usize,
}

impl Producer {
    /// Waits until the next stage is empty (its consumers released it; at first every stage
    /// is), arrives on its `full` barrier expecting `stage_bytes` and returns it: issue its
    /// copies ([`Stage::load`]) next, exactly `stage_bytes` of them.
    ///
    /// # Safety
    /// Called by one thread of the block only (the producer), on a ring from [`Ring::new`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn acquire(&mut self) -> Stage {
        // SAFETY: forwarded contract; `stage_bytes` is the whole stage.
        unsafe { self.acquire_bytes(self.ring.stage_bytes) }
    }

    /// [`Producer::acquire`] for a stage this walk fills only in part: its `full` barrier
    /// expects `bytes` (at most `stage_bytes`), so the copies issued next must be exactly
    /// `bytes` (a persistent kernel's narrower tile, say, whose boxes fill the start of the
    /// stage). The consumers read only what those copies wrote.
    ///
    /// # Safety
    /// As [`Producer::acquire`]; `bytes <= stage_bytes`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn acquire_bytes(&mut self, bytes: usize) -> Stage {
        let (s, parity) = self.ring.place(self.step);
        self.step += 1;
        let stage = self.ring.stage(s);
        // SAFETY: initialised barriers (the caller's ring); the previous phase of `empty` (that
        // of the stage's last use, or the one before a fresh barrier's first) is complete.
        unsafe {
            mbarrier::wait_parity(stage.empty, parity ^ 1);
            mbarrier::arrive_expect_tx(stage.full, bytes as u32);
        }
        stage
    }

    /// Waits until the consumers have released every stage of the ring for the last time this
    /// producer filled it (a stage never filled counts as released): the tail of a producer of
    /// a ring from [`Ring::new_cluster`], after its last [`Producer::acquire`], so that the
    /// block does not exit while another block's consumers may still arrive on its barriers.
    /// The walk cannot go on after it.
    ///
    /// # Safety
    /// As [`Producer::acquire`]; the consumers release every stage they wait for.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn drain(&mut self) {
        for _ in 0..self.ring.stages {
            let (s, parity) = self.ring.place(self.step);
            self.step += 1;
            // SAFETY: an initialised barrier (the caller's ring): the phase of the stage's last
            // release (or the one before a fresh barrier's first).
            unsafe { mbarrier::wait_parity(self.ring.empty(s), parity ^ 1) };
        }
    }
}

/// A consumer's walk over a [`Ring`]: the stage and the phase parity of its next step.
pub struct Consumer {
    ring: Ring,
    step: usize,
}

impl Consumer {
    /// Waits until the next stage's copies have landed and returns it.
    ///
    /// # Safety
    /// Called by every thread of the consuming warps, on a ring from [`Ring::new`], each stage
    /// released ([`Consumer::release`]) once after its wait.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn wait(&mut self) -> Stage {
        let (s, parity) = self.ring.place(self.step);
        self.step += 1;
        // SAFETY: the caller's contract; `s` and `parity` are this step's.
        unsafe { self.wait_at(s, parity) }
    }

    /// [`Consumer::wait`] for a consumer that keeps its own place in the ring: stage `s` with
    /// phase parity `parity`, which the caller advances after each wait (`s + 1`, back to 0 past
    /// the last stage with `parity` flipped), so that no step divides by the stage count. Leaves
    /// the walk of [`Consumer::wait`] where it was: a consumer uses one of the two.
    ///
    /// # Safety
    /// As [`Consumer::wait`]; `s < stages` and `parity` that of the caller's step `t`
    /// (`s = t % stages`, `parity = (t / stages) % 2`), the steps taken in order from 0.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn wait_at(&self, s: usize, parity: u32) -> Stage {
        let stage = self.ring.stage(s);
        // SAFETY: an initialised barrier (the caller's ring).
        unsafe { mbarrier::wait_parity(stage.full, parity) };
        stage
    }

    /// Marks `stage` empty for this warp ([`mbarrier::warp_arrive`] on its `empty` barrier), so that the
    /// producer may refill it once every consumer warp has: call it when the warp's reads of
    /// the stage are done (for `wgmma`, after the wait that retires the products reading it).
    ///
    /// # Safety
    /// Every lane of the warp calls it, once per stage it waited for; the ring was made with
    /// `consumer_warps` counting this warp.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn release(&self, stage: &Stage) {
        // SAFETY: every lane of the warp calls it (the caller's contract); an initialised
        // barrier whose phase expects this warp's arrival.
        unsafe { mbarrier::warp_arrive(stage.empty) };
    }

    /// [`Consumer::release`] on a ring from [`Ring::new_cluster`]: marks `stage` empty for this
    /// warp in each of the cluster's blocks `0..blocks` (lane `r` arrives on block `r`'s `empty`
    /// barrier, [`mbarrier::warp_arrive_cluster`]), since each of their producers copies into
    /// this block's stage.
    ///
    /// # Safety
    /// As [`Consumer::release`]; `blocks` is the ring's.
    #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn release_cluster(&self, stage: &Stage, blocks: u32) {
        // SAFETY: every lane of the warp calls it (the caller's contract); each block's barrier
        // was published by the ring's cluster barrier and expects this warp's arrival.
        unsafe { mbarrier::warp_arrive_cluster(stage.empty, blocks) };
    }

    /// [`Consumer::release`] of the stage waited for before the last [`Consumer::wait`]: what a
    /// consumer that keeps products on the previous stage in flight across its next wait calls
    /// once they retired, without holding that stage's handle (registers) across the step.
    ///
    /// # Safety
    /// As [`Consumer::release`], for that stage: at least two waits so far, the stage not yet
    /// released.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn release_previous(&self) {
        let stages = self.ring.stages;
        let stage = self.ring.stage((self.step + 2 * stages - 2) % stages);
        // SAFETY: forwarded contract.
        unsafe { self.release(&stage) };
    }

    /// [`Consumer::release`] of the stage of the last [`Consumer::wait`].
    ///
    /// # Safety
    /// As [`Consumer::release`], for that stage: at least one wait so far, the stage not yet
    /// released.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn release_last(&self) {
        let stages = self.ring.stages;
        let stage = self.ring.stage((self.step + stages - 1) % stages);
        // SAFETY: forwarded contract.
        unsafe { self.release(&stage) };
    }
}
