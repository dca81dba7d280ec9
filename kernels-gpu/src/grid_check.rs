//! A check of the grid-wide barrier ([`crate::gpu::grid::sync`]) on the GPU: every thread of a
//! cooperative grid writes a slot, passes the barrier, reads the slot of the same thread of the
//! next block, passes the barrier again (so that the next round's write cannot overtake the
//! neighbour's read), for several rounds. A barrier that lets any block through early leaves a
//! wrong sum (or, in the simulator, a reported race).

use crate::gpu::{grid, mem, thread};
use crate::kernel;

/// The value thread `t` of block `b` writes in round `r`: distinct across rounds, blocks and
/// threads (modulo 2^32), so that a read of a stale or early slot changes the sum.
#[inline(always)]
pub fn grid_exchange_value(round: u32, block: u32, t: u32) -> u32 {
    round
        .wrapping_mul(7919)
        .wrapping_add(block.wrapping_mul(131))
        .wrapping_add(t)
}

/// For `round` in `0..rounds`: thread `t` of block `b` (1-D grid and block) writes
/// [`grid_exchange_value`]`(round, b, t)` to `slots[b * blockDim + t]`, passes the grid barrier,
/// adds `slots[((b + 1) % gridDim) * blockDim + t]` to its sum (wrapping), passes the barrier
/// again; at the end it stores the sum to `out[b * blockDim + t]`.
///
/// Memory: one 4-byte store and one 4-byte load of `slots` per thread and round (L2-resident),
/// one store of `out`; two grid barriers per round.
///
/// # Safety
/// A cooperative launch; `slots` and `out` hold `gridDim.x * blockDim.x` words; `barrier` one
/// word, zero at the launch.
// Block: any block size works; the CUDA trials' largest. Barriers: four a round, two grid
// barriers of two block barriers each (the loop over rounds is not unrolled).
#[kernel(block(1024), barriers(4))]
pub unsafe fn grid_exchange(slots: *mut u32, out: *mut u32, barrier: *mut u32, rounds: u32) {
    let t = thread::thread_idx_x();
    let threads = thread::block_dim_x() as usize;
    let b = thread::block_idx_x();
    let next = (b as usize + 1) % thread::grid_dim_x() as usize;
    let mine = b as usize * threads + t as usize;
    let mut sum = 0u32;
    for round in 0..rounds {
        // SAFETY: the caller's contract: the slots exist, the launch is cooperative.
        unsafe {
            mem::store(slots, mine, grid_exchange_value(round, b, t));
            grid::sync(barrier);
            sum = sum.wrapping_add(mem::load(slots, next * threads + t as usize));
            grid::sync(barrier);
        }
    }
    // SAFETY: as above.
    unsafe { mem::store(out, mine, sum) }
}
