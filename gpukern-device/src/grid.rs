//! The grid-wide barrier of a cooperative launch (CUDA's cooperative groups `grid.sync()`):
//! [`sync`] returns in no thread until every thread of the grid has reached it, and every
//! memory write before it (global and shared, by any thread of the grid) is visible to every
//! thread after it.
//!
//! The barrier is one `u32` word in global memory, a scratch word of the launch (not used by
//! another launch in flight), whose low 31 bits are 0 when the launch starts. Each block's
//! thread 0 adds to it once per barrier: 1 for every block but block 0, which adds
//! `2^31 - (blocks - 1)`; the word's top bit flips exactly when the last block has arrived
//! (before that the low 31 bits, which start at 0, keep the sum below or at the bit), and the low
//! bits return to 0, so the same word serves every barrier of the launch. A block that arrives
//! at the next barrier early cannot flip the bit again before every block has arrived there too.
//!
//! **Reuse across launches.** Each completed barrier adds exactly `2^31` (mod `2^32`) to the
//! word, so a launch that ends (every thread past its last barrier) leaves the low 31 bits 0
//! again, whatever the grid size and the number of barriers; only the top bit is left at either
//! value, and a waiting block compares the top bit with the one its own arrival saw, so the
//! next launch works from either. A word zeroed once (when it was allocated) therefore serves
//! every later cooperative launch queued after the previous one on the same stream, with no
//! memset in between (gpukern's softmax grid-row path keeps one per stream handle). What breaks
//! that: two launches in flight on one word at once (different streams), or a launch that never
//! finished (a fault, after which the context is unusable anyway).
//!
//! The launch **must be cooperative** (gpukern's `Module::cooperative`, `cuLaunchKernelEx` with
//! `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): every block of the grid resident at once. In a plain
//! launch with more blocks than fit, the resident ones spin forever waiting for blocks that
//! cannot start: the GPU hangs. The simulator reports a call from a launch that is not
//! cooperative ([`crate::sim::Launch::cooperative`]), a thread that returns or waits at another
//! barrier while others wait at this one, and a word whose low 31 bits were not 0 when the launch
//! started (it adds to the word as the GPU does, so the word one launch leaves is the next one's
//! start, and a launch that left it wrong fails the next).

/// Waits until every thread of the grid has called `sync` (as many times as this thread): the
/// block's threads meet at a block barrier, thread 0 arrives on the word `*barrier` with a
/// release atomic at GPU scope (`atom.add.release.gpu`, which carries the block's writes that
/// the block barrier ordered before it) and spins with acquire loads (`ld.acquire.gpu`) until
/// the word's top bit flips, and a second block barrier lets the block go on.
///
/// # Safety
/// The launch is cooperative (every block resident at once), and every thread of the grid calls
/// `sync` the same number of times; `barrier` points to a `u32` in global memory, aligned, whose
/// low 31 bits were 0 when the launch started (zeroed, or left so by an earlier launch that
/// ended: see the module's doc) and that nothing else touches during it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn sync(barrier: *mut u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::thread::sync_threads();
        let (tx, ty, tz) = (
            crate::thread::thread_idx_x(),
            crate::thread::thread_idx_y(),
            crate::thread::thread_idx_z(),
        );
        if tx | ty | tz == 0 {
            let blocks =
                crate::thread::grid_dim_x() * crate::thread::grid_dim_y() * crate::thread::grid_dim_z();
            let first =
                crate::thread::block_idx_x() | crate::thread::block_idx_y() | crate::thread::block_idx_z()
                    == 0;
            let add = if first {
                TOP_BIT.wrapping_sub(blocks - 1)
            } else {
                1
            };
            let old: u32;
            // SAFETY: the caller's contract: `barrier` is an aligned global u32.
            unsafe {
                core::arch::asm!(
                    "atom.add.release.gpu.global.u32 {old}, [{p}], {add};",
                    old = out(reg32) old,
                    p = in(reg64) barrier,
                    add = in(reg32) add,
                    options(nostack),
                );
            }
            loop {
                let now: u32;
                // SAFETY: as above.
                unsafe {
                    core::arch::asm!(
                        "ld.acquire.gpu.global.u32 {now}, [{p}];",
                        now = out(reg32) now,
                        p = in(reg64) barrier,
                        options(nostack),
                    );
                }
                if (old ^ now) & TOP_BIT != 0 {
                    break;
                }
            }
        }
        crate::thread::sync_threads();
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::device::grid_sync(barrier as usize);
}

/// The bit of the barrier word that flips at each completed barrier.
#[cfg(target_arch = "nvptx64")]
const TOP_BIT: u32 = 1 << 31;
