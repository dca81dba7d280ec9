//! The state behind the checks of Hopper's asynchronous protocols, per block: its `mbarrier`s,
//! what each thread knows has completed ([`clock`]), what the copy engine wrote into shared memory
//! ([`landed`]), which `wgmma` products read it ([`operands`]) and which bulk stores read it
//! ([`bulk`]), each thread's products in flight
//! ([`groups`], [`accumulators`]), the warpgroups' collective instructions ([`aligned`]) and their
//! registers ([`registers`]). Made on a block's first Hopper instruction; the checks that read it
//! cost nothing before.
//!
//! The rules themselves are listed in [`crate::sim::Rule`]; `sim::block::hopper` applies them to
//! the running thread.

pub(crate) mod accumulators;
pub(crate) mod aligned;
pub(crate) mod bulk;
pub(crate) mod clock;
pub(crate) mod groups;
pub(crate) mod landed;
pub(crate) mod mbarrier;
pub(crate) mod operands;
pub(crate) mod registers;

use std::collections::HashMap;

use super::{Rule, Violation};
use aligned::Aligned;
use bulk::BulkStores;
use clock::Clock;
use groups::ThreadProducts;
use landed::Landed;
use mbarrier::Barriers;
use operands::Operands;
use registers::Registers;

/// The violation of `rule`, saying `message`.
pub(crate) fn violation(rule: Rule, message: String) -> Violation {
    Violation::Protocol { rule, message }
}

/// One block's Hopper state (see the module documentation).
pub(crate) struct Hopper {
    pub(crate) barriers: Barriers,
    /// Per thread.
    pub(crate) clocks: Vec<Clock>,
    pub(crate) landed: Landed,
    pub(crate) operands: Operands,
    pub(crate) bulk: BulkStores,
    /// Per thread that issued products.
    pub(crate) products: HashMap<u32, ThreadProducts>,
    /// The warpgroups' `wgmma` instruction sequences.
    pub(crate) wgmma_order: Aligned,
    pub(crate) registers: Registers,
    /// The warpgroups' `setmaxnreg` sequences, and how many each warpgroup performed.
    pub(crate) setmaxnreg_order: Aligned,
    pub(crate) setmaxnreg_done: [u32; clock::MAX_WARPGROUPS],
    /// `setmaxnreg`s each thread passed.
    pub(crate) setmaxnreg_passed: HashMap<u32, u32>,
    /// Per thread, its releases so far: its `mbarrier` arrivals ([`Clock::released`]).
    pub(crate) releases: Vec<u32>,
}

impl Hopper {
    /// The state of a block of `threads` threads and `shared_bytes` of shared memory.
    pub(crate) fn new(threads: usize, shared_bytes: usize) -> Self {
        Hopper {
            barriers: Barriers::default(),
            clocks: vec![Clock::default(); threads],
            landed: Landed::new(shared_bytes),
            operands: Operands::new(shared_bytes),
            bulk: BulkStores::new(shared_bytes),
            products: HashMap::new(),
            wgmma_order: Aligned::new("wgmma instruction", Rule::WgmmaOrder),
            registers: Registers::new(threads as u32),
            setmaxnreg_order: Aligned::new("setmaxnreg", Rule::Setmaxnreg),
            setmaxnreg_done: [0; clock::MAX_WARPGROUPS],
            setmaxnreg_passed: HashMap::new(),
            releases: vec![0; threads],
        }
    }

    /// Thread `tid`'s next release: counted, and known to the thread itself.
    pub(crate) fn release(&mut self, tid: u32) {
        let n = &mut self.releases[tid as usize];
        *n += 1;
        let n = *n;
        self.clocks[tid as usize].see_released(tid, n);
    }

    /// A block barrier: every thread knows what any thread knew.
    pub(crate) fn join_clocks(&mut self) {
        let mut all = Clock::default();
        for c in &self.clocks {
            all.join(c);
        }
        for c in &mut self.clocks {
            c.clone_from(&all);
        }
    }
}
