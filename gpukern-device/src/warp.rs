//! Warp-scope collectives: the 32 lanes of a warp exchange registers without shared memory or a
//! barrier.
//!
//! A warp is the 32 threads of a block whose linear index divided by 32 is the same. Every
//! helper here names the whole warp (`membermask` 0xffffffff), so all 32 lanes must call it, at
//! the same place in the code; the block's size must be a multiple of 32. On the GPU each
//! shuffle is one `shfl.sync.{bfly,down,up,idx}.b32` per 32-bit word (a vote, `ballot`/`all`/
//! `any`, one `vote.sync.ballot.b32`; `match_any` one `match.any.sync.b32`); in the simulator
//! it is a rendezvous of the warp's lanes, named by the caller's source location, that reports a
//! lane that returned, waits elsewhere, or does not exist.
//!
//! * Shuffles of any [`Shuffle`] value (32-bit scalars, 64-bit ones by two shuffles, tuples,
//!   arrays, your own structs): [`shfl_xor`], [`shfl_down`], [`shfl_up`], [`shfl_idx`].
//! * Reductions and scans with a closure: [`reduce`] (and [`reduce_sum`], [`reduce_max`],
//!   [`reduce_min`] on f32), [`scan_inclusive`], [`scan_exclusive`].
//! * Votes: [`ballot`], [`all`], [`any`], [`match_any`], [`match_all`], [`lanes_below`].

mod collective;
mod shuffle;
mod vote;

pub use collective::{reduce, reduce_max, reduce_min, reduce_sum, scan_exclusive, scan_inclusive};
pub use shuffle::{shfl_down, shfl_idx, shfl_up, shfl_xor, shfl_xor_u32, shuffle_word, Shuffle, Source};
pub use vote::{all, any, ballot, lanes_below, match_all, match_any};

/// Lanes per warp.
pub const SIZE: u32 = 32;

/// This thread's lane in its warp: its linear index in the block modulo 32.
#[inline(always)]
pub fn lane_id() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let lane: u32;
        // SAFETY: reads the `%laneid` special register; no memory, no side effects.
        unsafe {
            core::arch::asm!("mov.u32 {lane}, %laneid;", lane = out(reg32) lane, options(nomem, nostack, pure));
        }
        lane
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::sim::device::lane_id()
    }
}
