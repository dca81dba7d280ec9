//! Warp votes: which lanes hold a predicate ([`ballot`], [`all`], [`any`]) or the same value
//! ([`match_any`], [`match_all`]), and the lanes below this one ([`lanes_below`]).

#[cfg(not(target_arch = "nvptx64"))]
use super::shuffle::{shfl_idx, shuffle_word, Source};
#[cfg(not(target_arch = "nvptx64"))]
use super::SIZE;

/// One bit per lane of the warp, set where `predicate` holds: bit `l` is lane `l`'s
/// (`__ballot_sync(0xffffffff, predicate)`). Every lane of the warp must call it together.
///
/// On the GPU one `vote.sync.ballot.b32`; in the simulator five exchanges of the lanes' bits.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ballot(predicate: bool) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let bits: u32;
        // SAFETY: a vote among the warp's lanes; every lane reaches it (caller's contract, as for
        // a barrier). Not `pure`: the compiler must neither drop nor move it.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; setp.ne.u32 p, {predicate}, 0; vote.sync.ballot.b32 {bits}, p, 0xffffffff; }}",
                bits = out(reg32) bits,
                predicate = in(reg32) predicate as u32,
                options(nomem, nostack),
            );
        }
        bits
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let lane = crate::sim::device::lane_id();
        let mut bits = u32::from(predicate) << lane;
        for mask in [16, 8, 4, 2, 1] {
            bits |= crate::sim::device::warp_shuffle(bits, lane ^ mask);
        }
        bits
    }
}

/// Whether `predicate` holds on every lane of the warp (`__all_sync(0xffffffff, predicate)`).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn all(predicate: bool) -> bool {
    ballot(predicate) == u32::MAX
}

/// Whether `predicate` holds on some lane of the warp (`__any_sync(0xffffffff, predicate)`).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn any(predicate: bool) -> bool {
    ballot(predicate) != 0
}

/// The lanes of the warp whose `value` equals this lane's, as a mask (bit `l` for lane `l`;
/// this lane's own bit is always set): `__match_any_sync(0xffffffff, value)`, one
/// `match.any.sync.b32` (sm_70 and newer). Every lane of the warp calls it together.
///
/// In the simulator, 32 broadcasts of the lanes' values.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn match_any(value: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let mask: u32;
        // SAFETY: a vote among the warp's lanes; every lane reaches it (the caller's contract).
        unsafe {
            core::arch::asm!(
                "match.any.sync.b32 {m}, {v}, 0xffffffff;",
                m = out(reg32) mask,
                v = in(reg32) value,
                options(nomem, nostack),
            );
        }
        mask
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let mut mask = 0;
        for l in 0..SIZE {
            if shuffle_word(value, Source::Index(l)) == value {
                mask |= 1 << l;
            }
        }
        mask
    }
}

/// Whether every lane of the warp holds the same `value`: `__match_all_sync`, one
/// `match.all.sync.b32` (sm_70 and newer). Every lane of the warp calls it together.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn match_all(value: u32) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let all: u32;
        // SAFETY: as for `match_any`.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; .reg .b32 m; match.all.sync.b32 m|p, {v}, 0xffffffff; selp.u32 {all}, 1, 0, p; }}",
                all = out(reg32) all,
                v = in(reg32) value,
                options(nomem, nostack),
            );
        }
        all != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let first: u32 = shfl_idx(value, 0);
        super::all(first == value)
    }
}

/// The lanes below this one, as a mask (`%lanemask_lt`: bits `0..lane_id()`): with
/// [`ballot`], `(ballot(p) & lanes_below()).count_ones()` is this lane's rank among the lanes
/// where `p` holds (a warp's stream compaction).
#[inline(always)]
pub fn lanes_below() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let mask: u32;
        // SAFETY: reads a special register; no memory, no side effects.
        unsafe {
            core::arch::asm!("mov.u32 {m}, %lanemask_lt;", m = out(reg32) mask, options(pure, nomem, nostack));
        }
        mask
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        (1u32 << super::lane_id()) - 1
    }
}
