//! Transaction barriers (`mbarrier`) guarding bulk copies: a block of [`THREADS`] threads copies
//! [`TILES`] tiles of 64 floats from `x` into shared memory with the copy engine, one barrier per
//! tile, and every thread doubles its float of each tile into `y`.
//!
//! The correct kernel is [`bulk_twin`](fn@bulk_twin); each `mbarrier_*_planted` kernel is it with one mistake
//! (and [`bulk_inval_twin`](fn@bulk_inval_twin) the twin of the invalidation one). Launch: one block of [`THREADS`]
//! threads, [`SHARED_BYTES`] of dynamic shared memory; `x` and `y` hold `64 * TILES` floats.

use gpukern_device::{bulk, kernel, mbarrier, mem, shared, thread};

/// Threads per block: one float of each tile per thread.
pub const THREADS: u32 = 64;
/// Tiles copied.
pub const TILES: usize = 2;
/// Bytes of one tile (64 floats).
const TILE_BYTES: u32 = 256;
/// Where the tiles' slots start in shared memory (after the barriers, 16-byte aligned).
const SLOTS_AT: usize = 128;
/// Dynamic shared memory of every kernel here: the barriers, then the slots.
pub const SHARED_BYTES: u32 = SLOTS_AT as u32 + TILES as u32 * TILE_BYTES;

/// The barrier of tile `s`.
fn bar(s: usize) -> *mut u64 {
    shared::dynamic::<u8>().wrapping_add(8 * s).cast()
}

/// The slot of tile `s`.
fn slot(s: usize) -> *mut f32 {
    shared::dynamic::<u8>()
        .wrapping_add(SLOTS_AT + TILE_BYTES as usize * s)
        .cast()
}

/// Thread 0 initialises the barriers of tiles `0..tiles` for one arrival per phase (the
/// producer's) and fences the inits; then the whole block synchronises.
fn init_barriers(tiles: usize) {
    if thread::thread_idx_x() == 0 {
        for s in 0..tiles {
            // SAFETY: 8 bytes of shared memory used by nothing else; no thread touches them
            // before the block barrier below.
            unsafe { mbarrier::init(bar(s), 1) };
        }
        mbarrier::fence_init();
    }
    thread::sync_threads();
}

/// The producer (thread 0) announces tile `s`'s bytes on `barrier` (arriving once) and asks the
/// copy engine for it.
///
/// # Safety
/// `x` holds tile `s`; `barrier` is initialised and its current phase expects this arrival.
unsafe fn fetch(x: *const f32, s: usize, barrier: *mut u64) {
    // SAFETY: the caller's contract; the slot is unused until the wait for this phase.
    unsafe {
        mbarrier::arrive_expect_tx(barrier, TILE_BYTES);
        bulk::load(slot(s), x.wrapping_add(64 * s), TILE_BYTES, barrier);
    }
}

/// Every thread doubles its float of tile `s` into `y`.
///
/// # Safety
/// The tile has landed and this thread knows it (a wait for its phase); `y` holds it.
unsafe fn consume(y: *mut f32, s: usize) {
    let t = thread::thread_idx_x() as usize;
    // SAFETY: the caller's contract; `t < 64`.
    unsafe { mem::store(y, 64 * s + t, 2.0 * mem::load(slot(s), t)) }
}

/// The correct kernel: thread 0 sets up one barrier per tile and fetches both tiles; every
/// thread waits for each tile's barrier (phase 0) and doubles its float of it into `y`.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn bulk_twin(x: *const f32, y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { copy_both(x, y) }
}

/// The body of [`bulk_twin`](fn@bulk_twin).
///
/// # Safety
/// As the module documentation says.
unsafe fn copy_both(x: *const f32, y: *mut f32) {
    init_barriers(TILES);
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: the module's launch; barrier `s` is fresh.
            unsafe { fetch(x, s, bar(s)) };
        }
    }
    for s in 0..TILES {
        // SAFETY: the barriers are initialised; the wait orders the tile before the reads.
        unsafe {
            mbarrier::wait_parity(bar(s), 0);
            consume(y, s);
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin) with one arrival too many per phase (`Rule::MbarrierArrivals`): the producer
/// arrives again with `arrive` after `arrive_expect_tx`, which already counted as its arrival;
/// the barrier's count is 1.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_arrivals_planted(x: *const f32, y: *mut f32) {
    init_barriers(TILES);
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: the module's launch (the extra arrival is the planted bug).
            unsafe {
                mbarrier::arrive_expect_tx(bar(s), TILE_BYTES);
                mbarrier::arrive(bar(s));
                bulk::load(slot(s), x.wrapping_add(64 * s), TILE_BYTES, bar(s));
            }
        }
    }
    for s in 0..TILES {
        // SAFETY: as in `bulk_twin`.
        unsafe {
            mbarrier::wait_parity(bar(s), 0);
            consume(y, s);
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin) announcing half a tile's bytes (`Rule::MbarrierTransactions`): the copy delivers
/// 256 bytes on a phase that expects 128, so the phase completes before the copy has landed.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_tx_over_planted(x: *const f32, y: *mut f32) {
    init_barriers(TILES);
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: the module's launch (the short announcement is the planted bug).
            unsafe {
                mbarrier::arrive_expect_tx(bar(s), TILE_BYTES / 2);
                bulk::load(slot(s), x.wrapping_add(64 * s), TILE_BYTES, bar(s));
            }
        }
    }
    for s in 0..TILES {
        // SAFETY: as in `bulk_twin`.
        unsafe {
            mbarrier::wait_parity(bar(s), 0);
            consume(y, s);
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin) announcing both tiles' bytes on each barrier (reported as
/// `Rule::MbarrierDeadlock`, naming the bytes still expected): each phase waits for 512 bytes and
/// gets 256, so it never completes and every thread waits forever.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_tx_under_planted(x: *const f32, y: *mut f32) {
    init_barriers(TILES);
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: the module's launch (the long announcement is the planted bug).
            unsafe {
                mbarrier::arrive_expect_tx(bar(s), TILES as u32 * TILE_BYTES);
                bulk::load(slot(s), x.wrapping_add(64 * s), TILE_BYTES, bar(s));
            }
        }
    }
    for s in 0..TILES {
        // SAFETY: as in `bulk_twin`.
        unsafe {
            mbarrier::wait_parity(bar(s), 0);
            consume(y, s);
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin) whose producer loop starts at tile 1 (`Rule::MbarrierDeadlock`): the phase of
/// tile 0's barrier that every thread waits for is never armed, so the wait never completes.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_deadlock_planted(x: *const f32, y: *mut f32) {
    init_barriers(TILES);
    if thread::thread_idx_x() == 0 {
        for s in 1..TILES {
            // SAFETY: the module's launch; barrier `s` is fresh.
            unsafe { fetch(x, s, bar(s)) };
        }
    }
    for s in 0..TILES {
        // SAFETY: as in `bulk_twin` (tile 0 never comes: the planted bug).
        unsafe {
            mbarrier::wait_parity(bar(s), 0);
            consume(y, s);
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin) with one barrier for both tiles (`Rule::MbarrierPhaseReuse`): the producer arms
/// phase 0 (tile 0) and at once phase 1 (tile 1) of the same barrier; a consumer that has not yet
/// seen phase 0 waits for parity 0 when phase 2, of parity 0 again, is the current one: on a GPU it
/// waits forever (or, by luck of timing, returns for the wrong phase).
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_phase_reuse_planted(x: *const f32, y: *mut f32) {
    init_barriers(1);
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: the module's launch (the second arming before the consumers waited for the
            // first is the planted bug).
            unsafe { fetch(x, s, bar(0)) };
        }
    }
    for s in 0..TILES {
        // SAFETY: the barrier is initialised; tile `s` is phase `s` of it.
        unsafe {
            mbarrier::wait_parity(bar(0), (s % 2) as u32);
            consume(y, s);
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin) whose init loop stops one barrier short (`Rule::MbarrierUninitialized`): tile
/// 1's barrier is never initialised, and the producer arrives on it.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_uninit_planted(x: *const f32, y: *mut f32) {
    init_barriers(TILES - 1);
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: the module's launch (barrier 1 uninitialised: the planted bug).
            unsafe { fetch(x, s, bar(s)) };
        }
    }
    for s in 0..TILES {
        // SAFETY: as in `bulk_twin`.
        unsafe {
            mbarrier::wait_parity(bar(s), 0);
            consume(y, s);
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin), then the barriers invalidated once every thread is done with them: after a
/// block barrier, thread 0 invalidates both (`mbarrier::inval`), so that their shared memory could
/// serve for something else.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn bulk_inval_twin(x: *const f32, y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { copy_both(x, y) };
    thread::sync_threads();
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: every thread has passed its waits (the block barrier above).
            unsafe { mbarrier::inval(bar(s)) };
        }
    }
}

/// [`bulk_inval_twin`](fn@bulk_inval_twin) without the block barrier before the invalidation
/// (`Rule::MbarrierInvalidated`): thread 0 invalidates the barriers as soon as it is done, while
/// other threads may still wait on them.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_inval_planted(x: *const f32, y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe { copy_both(x, y) };
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: none: other threads may still wait on the barrier (the planted bug).
            unsafe { mbarrier::inval(bar(s)) };
        }
    }
}

/// [`bulk_twin`](fn@bulk_twin) whose barriers every thread initialises (`Rule::MbarrierInit`): the
/// `tid == 0` guard around the init is missing.
///
/// # Safety
/// As the module documentation says.
#[kernel]
pub unsafe fn mbarrier_init_planted(x: *const f32, y: *mut f32) {
    for s in 0..TILES {
        // SAFETY: none: every thread initialises the same barrier (the planted bug).
        unsafe { mbarrier::init(bar(s), 1) };
    }
    mbarrier::fence_init();
    thread::sync_threads();
    if thread::thread_idx_x() == 0 {
        for s in 0..TILES {
            // SAFETY: the module's launch.
            unsafe { fetch(x, s, bar(s)) };
        }
    }
    for s in 0..TILES {
        // SAFETY: as in `bulk_twin`.
        unsafe {
            mbarrier::wait_parity(bar(s), 0);
            consume(y, s);
        }
    }
}
