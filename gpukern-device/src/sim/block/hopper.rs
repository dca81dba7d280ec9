//! The Hopper protocols as the running thread of a block meets them: `mbarrier` operations,
//! copies landing, proxy fences, `wgmma` products and waits, `setmaxnreg`, and the checks at a
//! thread's and a block's end. The state is `crate::sim::hopper`'s; this file applies it to the
//! running thread and turns what it finds into reports.

use std::cell::RefMut;
use std::panic::Location;

use super::{BlockState, PollOn};
use crate::sim::hopper::groups::Product;
use crate::sim::hopper::mbarrier::{self, Wait};
use crate::sim::hopper::{accumulators, violation, Hopper};
use crate::sim::shadow::Touch;
use crate::sim::{Access, Rule, SimError, Violation};

/// Threads of a warpgroup.
const WARPGROUP: u32 = 128;

/// What an asynchronous-proxy read of shared memory is, for its reports.
#[derive(Clone, Copy)]
pub(crate) enum AsyncRead {
    /// A `wgmma` operand.
    WgmmaOperand,
    /// The source of a tensor or bulk store.
    Store,
}

impl AsyncRead {
    fn what(self) -> &'static str {
        match self {
            AsyncRead::WgmmaOperand => "a wgmma operand",
            AsyncRead::Store => "the source of a bulk tensor store",
        }
    }
}

impl BlockState<'_> {
    /// The block's Hopper state, made on first use.
    pub(super) fn hopper(&self) -> RefMut<'_, Hopper> {
        RefMut::map(self.hopper.borrow_mut(), |h| {
            &mut **h.get_or_insert_with(|| {
                Box::new(Hopper::new(
                    self.yielders.len(),
                    self.info.config.shared_mem_bytes as usize,
                ))
            })
        })
    }

    /// The byte offset in shared memory of the 8-byte barrier at `bar`.
    pub(super) fn barrier_offset(&self, bar: usize) -> Result<usize, Violation> {
        match self.shared_offset(bar, 0, 8, Access::Atomic)? {
            Some(offset) if offset % 8 == 0 => Ok(offset),
            Some(offset) => Err(violation(
                Rule::MbarrierUninitialized,
                format!("an mbarrier at shared byte {offset}, not 8-byte aligned"),
            )),
            None => Err(violation(
                Rule::MbarrierUninitialized,
                format!("an mbarrier at {bar:#x}, which is not the block's shared memory"),
            )),
        }
    }

    /// The running thread's index in the block, and its warpgroup's size.
    fn me(&self) -> (u32, u32) {
        let tid = self.current.get();
        let first = tid / WARPGROUP * WARPGROUP;
        (tid, (self.yielders.len() as u32 - first).min(WARPGROUP))
    }

    /// The host address of `size` bytes at `address` in the block's shared memory, checked for
    /// bounds only.
    pub(in crate::sim) fn check_bounds_only(&self, address: usize, size: usize) -> Result<usize, Violation> {
        match self.shared_offset(address, 0, size, Access::Read)? {
            Some(offset) => Ok(self.shared_base() as usize + offset),
            None => Err(Violation::Panic {
                message: format!("{address:#x} is not the block's shared memory"),
            }),
        }
    }

    /// `mbarrier.init` of the barrier at `bar` for `count` arrivals per phase.
    pub(in crate::sim) fn mbarrier_init(&self, bar: usize, count: u32) -> Result<(), Violation> {
        let offset = self.barrier_offset(bar)?;
        let (tid, _) = self.me();
        let epochs = (self.epoch.get(), self.cluster_epoch.get());
        self.hopper().barriers.init(offset, count, tid, epochs)?;
        let host = self.check(bar, 0, 8, Access::Write)?;
        // SAFETY: `check` returned the host address of 8 writable bytes of shared memory.
        unsafe { (host as *mut u64).write_unaligned(0) };
        Ok(())
    }

    /// `fence.mbarrier_init` and `fence.proxy.async` (`mbarrier::fence_init`).
    pub(in crate::sim) fn mbarrier_fence_init(&self) {
        let (tid, _) = self.me();
        self.hopper().barriers.fence_init(tid);
        self.proxy_fence();
    }

    /// `mbarrier.inval` of the barrier at `bar`.
    pub(in crate::sim) fn mbarrier_inval(&self, bar: usize) -> Result<(), Violation> {
        let offset = self.barrier_offset(bar)?;
        let (tid, _) = self.me();
        self.hopper().barriers.inval(offset, tid, self.epoch.get())?;
        self.check(bar, 0, 8, Access::Write)?;
        Ok(())
    }

    /// An arrival on the barrier at `bar` announcing `tx` bytes (`arrive` or `arrive_expect_tx`).
    pub(in crate::sim) fn mbarrier_arrive(&self, bar: usize, tx: u32) -> Result<(), Violation> {
        let offset = self.barrier_offset(bar)?;
        let (tid, _) = self.me();
        {
            let mut h = self.hopper();
            // The arrival releases this thread's accesses so far (its own only: a warp's
            // `warp_arrive` is lane 0's arrival, which orders no other lane's accesses).
            h.release(tid);
            let known = h.clocks[tid as usize].clone();
            let b = h.barriers.live(offset, tid, self.epoch.get())?;
            b.arrive(offset, tx, &known)?;
        }
        self.check(bar, 0, 8, Access::Atomic)?;
        self.progress.set(self.progress.get() + 1);
        Ok(())
    }

    /// One poll of the running thread's wait for the phase of parity `parity` of the barrier at
    /// `bar`: whether it is over (the thread then knows what the phase's arrivals knew).
    pub(in crate::sim) fn mbarrier_poll(&self, bar: usize, parity: u32) -> Result<bool, Violation> {
        let offset = self.barrier_offset(bar)?;
        let (tid, _) = self.me();
        let done = {
            let mut h = self.hopper();
            let h = &mut *h;
            let b = h.barriers.live(offset, tid, self.epoch.get())?;
            let (slot, completed) = (b.slot, b.completed);
            let seen = h.barriers.seen(tid, slot);
            let b = h.barriers.live(offset, tid, self.epoch.get())?;
            match b.poll(offset, parity, seen)? {
                Wait::Pending => false,
                Wait::Done => {
                    let last = b.last_release().clone();
                    h.barriers.saw(tid, slot, completed);
                    let clock = &mut h.clocks[tid as usize];
                    clock.join(&last);
                    clock.see_phases(slot, completed);
                    true
                }
            }
        };
        self.check(bar, 0, 8, Access::Atomic)?;
        Ok(done)
    }

    /// The barrier slot and phase a copy completing on the barrier at `bar` lands in.
    pub(in crate::sim) fn copy_target(&self, bar: usize) -> Result<(usize, u32), Violation> {
        let offset = self.barrier_offset(bar)?;
        let (tid, _) = self.me();
        let mut h = self.hopper();
        let b = h.barriers.live_for_copy(offset, tid, self.epoch.get())?;
        Ok((b.slot, b.completed))
    }

    /// Counts `bytes` of a copy delivered on the barrier at `bar` (`complete_tx`).
    pub(in crate::sim) fn copy_complete(&self, bar: usize, bytes: u32) -> Result<(), Violation> {
        let offset = self.barrier_offset(bar)?;
        let (tid, _) = self.me();
        self.hopper()
            .barriers
            .live_for_copy(offset, tid, self.epoch.get())?
            .complete_tx(offset, bytes)?;
        self.progress.set(self.progress.get() + 1);
        Ok(())
    }

    /// Writes `bytes` (one element) at shared address `dst` as the copy engine, for a copy
    /// completing on phase `phase` of barrier `slot`; `element`: the tensor element it is.
    pub(in crate::sim) fn copy_write(
        &self,
        dst: usize,
        bytes: &[u8],
        (slot, phase): (usize, u32),
        element: Option<(u32, u32)>,
    ) -> Result<(), Violation> {
        let host = self.check_touch(dst, 0, bytes.len(), Touch::Proxy)?;
        let offset = host - self.shared_base() as usize;
        let (tid, _) = self.me();
        {
            let mut h = self.hopper();
            let h = &mut *h;
            if let Some(u) = h.operands.unretired(offset, bytes.len(), &h.clocks[tid as usize]) {
                return Err(operand_overwritten("a copy issued by this thread", u));
            }
            if let Some(u) = h.bulk.unread(offset, bytes.len(), &h.clocks[tid as usize]) {
                return Err(store_source_overwritten("a copy issued by this thread", u));
            }
            h.landed.land(offset, bytes.len(), slot, phase, element);
        }
        // SAFETY: `check_touch` returned the host address of `bytes.len()` bytes of shared memory.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), host as *mut u8, bytes.len()) };
        Ok(())
    }

    /// The checks of an ordinary access (`touch`) of shared bytes `offset..offset + size` against
    /// the Hopper state: a copy's destination touched before its phase is known complete; a write
    /// over a `wgmma` operand before its product is known retired.
    #[inline]
    pub(super) fn check_generic_against_copies(
        &self,
        offset: usize,
        size: usize,
        touch: Touch,
    ) -> Result<(), Violation> {
        // A retired product's operand reads were checked when it was issued.
        if touch == Touch::Read && self.in_wgmma_apply.get() {
            return Ok(());
        }
        let mut h = self.hopper.borrow_mut();
        let Some(h) = h.as_deref_mut() else {
            return Ok(());
        };
        let tid = self.current.get() as usize;
        if !self.in_wgmma_apply.get() {
            if let Some(e) = h.landed.early(offset, size, &h.clocks[tid]) {
                return Err(violation(
                    Rule::TmaEarlyAccess,
                    format!(
                        "{} of shared byte {}, which a copy completing on phase {} of {} writes, \
                         before this thread waited for that phase (or passed a block barrier after \
                         a thread that did)",
                        touch.access(),
                        e.offset,
                        e.phase,
                        slot_name(h, e.slot)
                    ),
                ));
            }
        }
        if touch != Touch::Read {
            if h.operands.any() {
                if let Some(u) = h.operands.unretired(offset, size, &h.clocks[tid]) {
                    return Err(operand_overwritten("this thread's write", u));
                }
            }
            if h.bulk.any() {
                if let Some(u) = h.bulk.unread(offset, size, &h.clocks[tid]) {
                    return Err(store_source_overwritten("this thread's write", u));
                }
            }
            h.landed.forget(offset, size);
        }
        Ok(())
    }

    /// A bulk store issued by the running thread reads shared bytes `offset..offset + size`
    /// (checked by [`BlockState::check_async_read`]): they belong to its next bulk group.
    pub(in crate::sim) fn bulk_store(&self, offset: usize, size: usize) {
        let tid = self.current.get();
        self.hopper().bulk.store(tid, offset, size);
    }

    /// `cp.async.bulk.commit_group` by the running thread.
    pub(in crate::sim) fn bulk_commit(&self) {
        let tid = self.current.get();
        self.hopper().bulk.commit(tid);
    }

    /// `cp.async.bulk.wait_group[.read] pending` by the running thread: it knows the reads of
    /// all but its last `pending` groups are done.
    pub(in crate::sim) fn bulk_wait(&self, pending: u32) {
        let tid = self.current.get();
        let mut h = self.hopper();
        let read = h.bulk.wait(tid, pending);
        h.clocks[tid as usize].see_bulk_read(tid, read);
    }

    /// `fence.proxy.async` by the running thread.
    pub(in crate::sim) fn proxy_fence(&self) {
        let fences = &self.fences[self.current.get() as usize];
        fences.set(fences.get() + 1);
    }

    /// The checks of a read of shared bytes `offset..offset + size` by the asynchronous proxy on
    /// the running thread's behalf (`what` it is): an ordinary write no proxy fence covers, a
    /// copy's destination not known landed.
    pub(in crate::sim) fn check_async_read(
        &self,
        offset: usize,
        size: usize,
        what: AsyncRead,
    ) -> Result<(), Violation> {
        let unfenced = self
            .shadow
            .borrow()
            .unfenced(offset, size, |t| self.fences[t as usize].get());
        if let Some((word, writer)) = unfenced {
            let who = match writer == self.current.get() {
                true => "this thread".to_string(),
                false => format!("thread {}", self.thread_dim(writer)),
            };
            return Err(violation(
                Rule::ProxyFence,
                format!(
                    "shared byte {word} is read as {} (the asynchronous proxy) after an ordinary \
                     store to it by {who}, with no fence.proxy.async by that thread between the \
                     store and the read",
                    what.what()
                ),
            ));
        }
        let h = self.hopper.borrow();
        if let Some(h) = h.as_deref() {
            if let Some(e) = h
                .landed
                .early(offset, size, &h.clocks[self.current.get() as usize])
            {
                return Err(violation(
                    Rule::TmaEarlyAccess,
                    format!(
                        "shared byte {} is read as {} before this thread waited for phase {} of {}, \
                         which the copy writing it completes on",
                        e.offset,
                        what.what(),
                        e.phase,
                        slot_name(h, e.slot)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The checks of a `wgmma` operand's elements (`size` bytes at each of `addresses`) when its
    /// product is issued, as [`BlockState::check_async_read`] checks them, and the record that the
    /// running thread's warpgroup's next group reads them; returns the tensor element a tensor
    /// copy wrote at each (for the descriptor's check).
    pub(in crate::sim) fn wgmma_operand(
        &self,
        addresses: &[usize],
        size: usize,
    ) -> Result<Vec<Option<(u32, u32)>>, Violation> {
        let base = self.shared_base() as usize;
        let mut offsets = Vec::with_capacity(addresses.len());
        for &address in addresses {
            let host = self.check_bounds_only(address, size)?;
            let offset = host - base;
            self.check_async_read(offset, size, AsyncRead::WgmmaOperand)?;
            offsets.push(offset);
        }
        let (tid, _) = self.me();
        let mut h = self.hopper();
        let h = &mut *h;
        let group = h.products.entry(tid).or_default().committed;
        let wg = (tid / WARPGROUP) as usize;
        Ok(offsets
            .into_iter()
            .map(|offset| {
                h.operands.read(wg, group, offset, size);
                h.landed.element_at(offset, size)
            })
            .collect())
    }

    /// The running thread executes the warpgroup instruction `text` at `at`: checked against its
    /// warpgroup's sequence.
    pub(in crate::sim) fn wgmma_execute(
        &self,
        text: String,
        at: &'static Location<'static>,
    ) -> Result<(), Violation> {
        let (tid, members) = self.me();
        self.hopper().wgmma_order.execute(tid, members, text, at)
    }

    /// `wgmma.fence`.
    pub(in crate::sim) fn wgmma_fence(&self) {
        let (tid, _) = self.me();
        self.hopper().products.entry(tid).or_default().fenced = true;
    }

    /// The accumulator set a product on `acc` chains on: `acc`'s own if it holds an untouched set
    /// of the running thread, else a new one holding `acc`'s values (which needs a `wgmma.fence`
    /// since they were written); `acc` then holds the set's markers.
    pub(in crate::sim) fn wgmma_set(&self, acc: &mut [f32]) -> Result<u32, Violation> {
        let (tid, _) = self.me();
        let mut h = self.hopper();
        let t = h.products.entry(tid).or_default();
        let set = match accumulators::held(acc) {
            accumulators::Held::InFlight(set) if t.has_set(set) => set,
            accumulators::Held::InFlight(set) => {
                return Err(violation(
                    Rule::WgmmaAccumulators,
                    format!(
                        "accumulators given to a wgmma hold the in-flight markers of set {set}, \
                         which is no set of this thread's products"
                    ),
                ))
            }
            accumulators::Held::Touched { set, slot } => return Err(touched(set, slot, "a wgmma product")),
            accumulators::Held::Values => {
                if !t.fenced {
                    return Err(violation(
                        Rule::WgmmaOrder,
                        "a wgmma.mma_async on accumulators written by ordinary code with no \
                         wgmma.fence since"
                            .into(),
                    ));
                }
                t.new_set(acc).ok_or_else(|| {
                    violation(
                        Rule::WgmmaAccumulators,
                        format!(
                            "more than {} accumulator arrays of this thread have products in flight",
                            accumulators::MAX_SETS
                        ),
                    )
                })?
            }
        };
        for (i, a) in acc.iter_mut().enumerate() {
            *a = accumulators::marker(set, i);
        }
        Ok(set)
    }

    /// The running thread's set whose untouched markers `acc` holds, if it holds markers.
    pub(in crate::sim) fn wgmma_held(&self, acc: &[f32]) -> Result<Option<u32>, Violation> {
        match accumulators::held(acc) {
            accumulators::Held::Values => Ok(None),
            accumulators::Held::InFlight(set) => Ok(Some(set)),
            accumulators::Held::Touched { set, slot } => Err(touched(set, slot, "a wgmma wait")),
        }
    }

    /// Issues a product (uncommitted).
    pub(in crate::sim) fn wgmma_issue(&self, product: Product) {
        let (tid, _) = self.me();
        self.hopper().products.entry(tid).or_default().issue(product);
    }

    /// `wgmma.commit_group`.
    pub(in crate::sim) fn wgmma_commit(&self) {
        let (tid, _) = self.me();
        self.hopper().products.entry(tid).or_default().commit();
    }

    /// `wgmma.wait_group keep`: the products of the groups it retires, to apply; the thread then
    /// knows them retired. An error if products were issued and not committed (the wait does not
    /// wait for them).
    pub(in crate::sim) fn wgmma_retire(&self, keep: usize) -> Result<Vec<Product>, Violation> {
        let (tid, _) = self.me();
        let mut h = self.hopper();
        let h = &mut *h;
        let t = h.products.entry(tid).or_default();
        if t.uncommitted() > 0 {
            return Err(violation(
                Rule::WgmmaOrder,
                format!(
                    "wgmma.wait_group with {} product(s) issued and not committed \
                     (wgmma.commit_group): the wait does not cover them",
                    t.uncommitted()
                ),
            ));
        }
        let done = t.retire(keep);
        let retired = t.retired;
        h.clocks[tid as usize].see_retired((tid / WARPGROUP) as usize, retired);
        Ok(done)
    }

    /// Applies `f` to the true values of the running thread's set `set` (one retired product).
    pub(in crate::sim) fn wgmma_apply(&self, set: u32, f: impl FnOnce(&mut [f32])) {
        let (tid, _) = self.me();
        let mut values = self.hopper().products.entry(tid).or_default().take_values(set);
        self.in_wgmma_apply.set(true);
        f(&mut values);
        self.in_wgmma_apply.set(false);
        self.hopper()
            .products
            .entry(tid)
            .or_default()
            .applied(set, values);
    }

    /// Hands back `set`'s true values in `acc` if none of its products is in flight any more.
    pub(in crate::sim) fn wgmma_settle(&self, set: u32, acc: &mut [f32]) {
        let (tid, _) = self.me();
        if let Some(values) = self.hopper().products.entry(tid).or_default().settle(set) {
            acc.copy_from_slice(&values);
        }
    }

    /// The end of a `wgmma` instruction block: products left uncommitted are an error; the next
    /// block on new accumulators needs its own fence.
    pub(in crate::sim) fn wgmma_end_block(&self) -> Result<(), Violation> {
        let (tid, _) = self.me();
        let mut h = self.hopper();
        let t = h.products.entry(tid).or_default();
        t.fenced = false;
        match t.uncommitted() {
            0 => Ok(()),
            n => Err(violation(
                Rule::WgmmaOrder,
                format!("{n} wgmma product(s) left uncommitted at the end of their instruction block"),
            )),
        }
    }

    /// The check of a 32-bit value about to be stored: an in-flight accumulator's marker means a
    /// read before the `wait_group` that retires its product.
    ///
    /// Only a thread that has issued `wgmma` products can hold a marker: other data with the
    /// marker's bits (one random 32-bit word in 2^17) is not one.
    pub(in crate::sim) fn check_stored_bits(&self, bits: u32) -> Result<(), Violation> {
        let Some((set, slot)) = accumulators::decode(bits) else {
            return Ok(());
        };
        let (tid, _) = self.me();
        let issued = self
            .hopper
            .borrow()
            .as_ref()
            .is_some_and(|h| h.products.contains_key(&tid));
        if !issued {
            return Ok(());
        }
        Err(violation(
            Rule::WgmmaAccumulators,
            format!(
                "a store of accumulator {slot} of a wgmma product still in flight (set {set}): \
                 the accumulators are read before the wait_group that retires the product \
                 (wgmma::wait_accumulators)"
            ),
        ))
    }

    /// `setmaxnreg.{inc,dec}` to `count` by the running thread (`at` the call): whether it is
    /// done (an increase the block's released registers cannot cover yet waits).
    pub(in crate::sim) fn setmaxnreg(
        &self,
        inc: bool,
        count: u32,
        at: &'static Location<'static>,
        first_try: bool,
    ) -> Result<bool, Violation> {
        let (tid, members) = self.me();
        let wg = (tid / WARPGROUP) as usize;
        let mut h = self.hopper();
        let h = &mut *h;
        let position = *h.setmaxnreg_passed.get(&tid).unwrap_or(&0);
        if first_try {
            let text = format!(
                "setmaxnreg.{}.sync.aligned.u32 {count}",
                if inc { "inc" } else { "dec" }
            );
            h.setmaxnreg_order.execute(tid, members, text, at)?;
        }
        let done = if position < h.setmaxnreg_done[wg] {
            true
        } else {
            match h.registers.request(wg, inc, count)? {
                crate::sim::hopper::registers::Grant::Done => {
                    h.setmaxnreg_done[wg] += 1;
                    self.progress.set(self.progress.get() + 1);
                    true
                }
                crate::sim::hopper::registers::Grant::Wait => false,
            }
        };
        if done {
            h.setmaxnreg_passed.insert(tid, position + 1);
        }
        Ok(done)
    }

    /// A block barrier (or a cluster or grid barrier) opened: every thread knows what any knew.
    pub(super) fn barrier_passed(&self) {
        if let Some(h) = self.hopper.borrow_mut().as_deref_mut() {
            h.join_clocks();
        }
    }

    /// The checks when thread `tid` returns: no `wgmma` product of it in flight, no bulk store of
    /// it still reading shared memory.
    pub(super) fn thread_exited(&self, tid: u32) -> Result<(), Violation> {
        let h = self.hopper.borrow();
        if let Some((groups, open)) = h.as_deref().and_then(|h| h.bulk.still_reading(tid)) {
            return Err(violation(
                Rule::BulkStoreSource,
                format!(
                    "this thread returned with {groups} bulk group(s) not waited for \
                     (cp.async.bulk.wait_group.read){}: the copy engine may still read their \
                     sources in shared memory, which the block's end frees",
                    if open {
                        " and bulk stores never committed"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let Some(t) = h.as_deref().and_then(|h| h.products.get(&tid)) else {
            return Ok(());
        };
        let (groups, open) = (t.in_flight(), t.uncommitted());
        if groups + open > 0 {
            return Err(violation(
                Rule::WgmmaAccumulators,
                format!(
                    "this thread returned with {groups} wgmma group(s) in flight and {open} \
                     product(s) uncommitted: no wait_group retired them, so their accumulators \
                     were never read (or were read before the products finished)"
                ),
            ));
        }
        Ok(())
    }

    /// The checks once every thread of the block returned: warpgroup instructions some thread
    /// skipped; copies' bytes that no `expect_tx` announced; another block's access to this
    /// block's shared memory, or use of its barriers, that nothing kept alive.
    pub(super) fn block_exited(&self) -> Option<SimError> {
        let threads = self.yielders.len() as u32;
        if let Some(h) = self.hopper.borrow().as_deref() {
            for order in [&h.wgmma_order, &h.setmaxnreg_order] {
                if let Some((tid, v)) = order.leftover(threads) {
                    return Some(self.error(tid, v));
                }
            }
            if let Some((tid, v)) = h.barriers.unannounced_bytes() {
                return Some(self.error(tid, v));
            }
        }
        self.exit_unpublished().or_else(|| self.remote_unwaited())
    }

    /// The report of a deadlock: every running thread waits, the first one polling at `at` for
    /// `on`, and nothing changed in a whole round.
    pub(super) fn deadlock(&self, tid: u32, at: &'static Location<'static>, on: PollOn) -> Violation {
        let tail = "no thread or copy left will do it: on a GPU the kernel would never finish";
        match on {
            PollOn::Mbarrier { bar, parity } => {
                let pending = self
                    .barrier_offset(bar)
                    .ok()
                    .and_then(|offset| {
                        let h = self.hopper.borrow();
                        let b = h.as_deref()?.barriers.get(offset)?;
                        Some(b.describe_pending(offset, parity))
                    })
                    .unwrap_or_else(|| format!("the mbarrier at {bar:#x}"));
                violation(
                    Rule::MbarrierDeadlock,
                    format!(
                        "deadlock: this thread (and every other thread still running) waits, this \
                         one at {at} for {pending}; {tail}"
                    ),
                )
            }
            PollOn::Registers { count } => {
                let wg = (tid / WARPGROUP) as usize;
                let why = self
                    .hopper
                    .borrow()
                    .as_deref()
                    .map(|h| h.registers.describe_wait(wg, count))
                    .unwrap_or_default();
                violation(Rule::Setmaxnreg, format!("deadlock at {at}: {why}; {tail}"))
            }
        }
    }
}

/// How barrier `slot` is named in reports.
fn slot_name(h: &Hopper, slot: usize) -> String {
    match h.barriers.offset_of(slot) {
        Some(offset) => mbarrier::name(offset),
        None => format!("mbarrier slot {slot}"),
    }
}

/// The violation of a write over an operand of a product not known retired.
pub(super) fn operand_overwritten(writer: &str, u: crate::sim::hopper::operands::Unretired) -> Violation {
    violation(
        Rule::WgmmaOperands,
        format!(
            "{writer} overwrites shared byte {}, which group {} of warpgroup {}'s wgmma products \
             reads, before this thread saw the wait_group that retires that group (the stage was \
             released before its products were waited for)",
            u.offset, u.group, u.warpgroup
        ),
    )
}

/// The violation of a write over the source of a bulk store whose reads are not known done.
pub(super) fn store_source_overwritten(writer: &str, u: crate::sim::hopper::bulk::Unread) -> Violation {
    violation(
        Rule::BulkStoreSource,
        format!(
            "{writer} overwrites shared byte {}, which bulk group {} of thread {}'s stores reads, \
             before this thread knew that group's reads done (that thread's \
             cp.async.bulk.wait_group.read, then, for another thread, a block barrier or a named \
             barrier both took part in)",
            u.offset, u.group, u.thread
        ),
    )
}

/// The violation for accumulators whose slot `slot` of in-flight set `set` was changed.
fn touched(set: u32, slot: usize, given_to: &str) -> Violation {
    violation(
        Rule::WgmmaAccumulators,
        format!(
            "accumulator {slot} given to {given_to} was changed while the product writing it was \
             in flight (set {set}): accumulators are the tensor core's until the wait_group that \
             retires their product"
        ),
    )
}
