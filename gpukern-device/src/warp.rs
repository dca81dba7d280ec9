//! Warp-scope collectives: the 32 lanes of a warp exchange registers without shared memory or a
//! barrier.
//!
//! A warp is the 32 threads of a block whose linear index divided by 32 is the same. Every
//! helper here names the whole warp (`membermask` 0xffffffff), so all 32 lanes must call it, at
//! the same place in the code; the block's size must be a multiple of 32. On the GPU each
//! shuffle is one `shfl.sync.bfly.b32` (a vote, `ballot`/`all`/`any`, one `vote.sync.ballot.b32`);
//! in the simulator it is a rendezvous of the warp's lanes
//! that reports a lane that returned, waits elsewhere, or does not exist.

use crate::math;

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

/// The `value` of lane `lane_id() ^ lane_mask` (butterfly exchange; `lane_mask < 32`).
///
/// `shfl.sync.bfly.b32` with the full member mask: every lane of the warp must call it together.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_xor(value: f32, lane_mask: u32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a register exchange among the warp's lanes; every lane reaches it (caller's
        // contract, as for a barrier). Not `pure`: the compiler must neither drop nor move it.
        unsafe {
            core::arch::asm!(
                "shfl.sync.bfly.b32 {out}, {value}, {mask}, 0x1f, 0xffffffff;",
                out = out(reg32) out,
                value = in(reg32) value,
                mask = in(reg32) lane_mask,
                options(nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let src = crate::sim::device::lane_id() ^ (lane_mask & (SIZE - 1));
        f32::from_bits(crate::sim::device::warp_shuffle(value.to_bits(), src))
    }
}

/// The `value` of lane `lane_id() ^ lane_mask`, for 32-bit integers (an index travelling with a
/// value, as in an argmax): [`shfl_xor`] on the bits.
///
/// `shfl.sync.bfly.b32` with the full member mask: every lane of the warp must call it together.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_xor_u32(value: u32, lane_mask: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: as for `shfl_xor`.
        unsafe {
            core::arch::asm!(
                "shfl.sync.bfly.b32 {out}, {value}, {mask}, 0x1f, 0xffffffff;",
                out = out(reg32) out,
                value = in(reg32) value,
                mask = in(reg32) lane_mask,
                options(nomem, nostack),
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let src = crate::sim::device::lane_id() ^ (lane_mask & (SIZE - 1));
        crate::sim::device::warp_shuffle(value, src)
    }
}

/// Combines one value per lane with `op` and returns the result to every lane of the warp.
///
/// A butterfly over lane masks 16, 8, 4, 2, 1: five shuffles, after which every lane holds the
/// same value (for an `op` that is commutative bit for bit, as `+`, max and min are).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce(value: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut v = value;
    let mut mask = SIZE / 2;
    while mask > 0 {
        v = op(v, shfl_xor(v, mask));
        mask /= 2;
    }
    v
}

/// The sum over the warp of one value per lane (see [`reduce`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce_sum(value: f32) -> f32 {
    reduce(value, |a, b| a + b)
}

/// The maximum over the warp of one value per lane; NaN if any value is NaN (see [`reduce`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce_max(value: f32) -> f32 {
    reduce(value, math::max_nan)
}

/// The minimum over the warp of one value per lane; NaN if any value is NaN (see [`reduce`]).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn reduce_min(value: f32) -> f32 {
    reduce(value, math::min_nan)
}

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
