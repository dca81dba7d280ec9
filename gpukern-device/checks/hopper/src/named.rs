//! Named barriers ([`gpukern_device::barrier`]): three warpgroups, each passing values round a
//! staging row of its own in shared memory between two named barriers of its own (id `1 + g`,
//! 128 threads), as an epilogue that stages a warpgroup's tile does.
//!
//! The correct kernel is [`named_barrier_twin`](fn@named_barrier_twin);
//! [`named_barrier_planted`](fn@named_barrier_planted) has one warpgroup wait for 256 threads
//! where 128 come. Launch: one block of [`THREADS`] threads, [`SHARED_BYTES`] of dynamic shared
//! memory; `y` holds [`THREADS`] floats.

use gpukern_device::{barrier, kernel, mem, shared, thread};

/// Threads per block: three warpgroups.
pub const THREADS: u32 = 384;
/// Dynamic shared memory: a word per thread.
pub const SHARED_BYTES: u32 = 4 * THREADS;
/// Threads of a warpgroup.
const GROUP: u32 = 128;

/// The correct kernel: thread `l` of warpgroup `g` writes its index to word `l` of row `g`,
/// waits at named barrier `1 + g` (128 threads), reads word `(l + 1) % 128`, waits again, and
/// stores what it read to `y` at that index: `y[t] = t`.
///
/// # Safety
/// `y` holds [`THREADS`] floats; one block of [`THREADS`] threads with [`SHARED_BYTES`].
#[kernel]
pub unsafe fn named_barrier_twin(y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { pass_round::<false>(y) }
}

/// [`named_barrier_twin`](fn@named_barrier_twin) whose last warpgroup names 256 threads at its
/// first barrier (`Rule::NamedBarrier`): only its own 128 come, so it waits forever.
///
/// # Safety
/// As [`named_barrier_twin`](fn@named_barrier_twin).
#[kernel]
pub unsafe fn named_barrier_planted(y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { pass_round::<true>(y) }
}

/// The body of both kernels; `WRONG_COUNT`: the last warpgroup's first barrier names 256.
///
/// # Safety
/// As [`named_barrier_twin`](fn@named_barrier_twin).
unsafe fn pass_round<const WRONG_COUNT: bool>(y: *mut f32) {
    let tid = thread::thread_idx_x();
    let (g, l) = (tid / GROUP, tid % GROUP);
    let row = shared::dynamic::<u32>().wrapping_add((g * GROUP) as usize);
    let count = if WRONG_COUNT && g == 2 { 2 * GROUP } else { GROUP };
    // SAFETY: row `g` of 128 words inside the launch's shared memory; barrier `1 + g` among the
    // warpgroup's 128 threads, every lane of each of its warps; `y` holds a float per thread.
    unsafe {
        mem::store(row, l as usize, tid);
        barrier::sync(1 + g, count);
        let next = (l + 1) % GROUP;
        let value = mem::load(row, next as usize);
        barrier::sync(1 + g, GROUP);
        mem::store(y, (g * GROUP + next) as usize, value as f32);
    }
}
