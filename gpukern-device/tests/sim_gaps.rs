//! The simulator's checks added for issue 10, each proved on a test-only kernel with one planted
//! bug (the report must name the exact violation, kernel, block and thread), next to its fixed
//! version, which must pass:
//!
//! 1. an access through a pointer offset from one buffer into another (buffer provenance);
//! 2. races in global memory, within a block and between blocks;
//! 3. reads of a `cp.async` destination before the wait that lands it;
//! 4. threads diverging into two call sites of a block collective (`#[track_caller]`).

mod common;

use common::assert_report;
use gpukern_device::async_copy::{self, cp_async_16};
use gpukern_device::sim::{Access, Dim3, Launch, LaunchConfig, SimError, Space, Violation};
use gpukern_device::vector::F4;
use gpukern_device::{block, mem, shared, thread};

/// Threads per block of the planted-bug kernels.
const T: u32 = 8;

/// A 1-D launch of `blocks` blocks of `threads` threads.
fn config(blocks: u32, threads: u32, shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes,
    }
}

/// The report expected from `kernel` at block `block`, thread `thread` (1-D).
fn report(kernel: &str, block: u32, thread: u32, violation: Violation) -> SimError {
    SimError {
        kernel: kernel.to_string(),
        block: Dim3::new(block, 0, 0),
        thread: Dim3::new(thread, 0, 0),
        violation,
    }
}

/// `file:line:column` of `call` on the line of this file that ends with `marker`, as the
/// simulator names a barrier reached through it.
fn site(call: &str, marker: &str) -> String {
    common::site_in(include_str!("sim_gaps.rs"), file!(), call, marker)
}

// ---------------------------------------------------------------------------------------------
// 1. Provenance: an offset from one buffer that lands in another
// ---------------------------------------------------------------------------------------------

/// `out[tid] = x[tid + skip]`, read through `x.wrapping_add(skip)`: the planted bug when `skip`
/// takes the pointer past `x`'s end and into the buffer registered after it.
///
/// # Safety
/// `out` holds `blockDim.x` floats.
unsafe fn shifted_copy(x: *const f32, out: *mut f32, skip: usize) {
    let tid = thread::thread_idx_x() as usize;
    let shifted = x.wrapping_add(skip);
    // SAFETY: `tid < blockDim.x`; the read of `shifted` is what the simulator checks.
    unsafe { mem::store(out, tid, mem::load(shifted, 0).max(mem::load(shifted, tid))) }
}

/// Runs [`shifted_copy`] with `x` and `y` two halves of one host allocation, so that on the
/// host `x`'s end is `y`'s start; `skip` of `None` is exactly that host distance.
fn run_shifted(skip: Option<usize>) -> Result<Vec<f32>, SimError> {
    let both: Vec<f32> = (0..2 * T).map(|i| i as f32).collect();
    let (x, y) = both.split_at(T as usize);
    let host_distance = (y.as_ptr() as usize - x.as_ptr() as usize) / 4;
    let mut out = vec![0.0f32; T as usize];
    let mut launch = Launch::new("shifted_copy", config(1, T, 0));
    let (px, _py) = (launch.input("x", x), launch.input("y", y));
    let po = launch.output("out", &mut out);
    let skip = skip.unwrap_or(host_distance);
    // SAFETY: every pointer was registered; the read past `x` is caught before it happens.
    unsafe { launch.run(|| shifted_copy(px, po, skip)) }?;
    Ok(out)
}

#[test]
fn offset_from_one_buffer_into_the_next_is_out_of_bounds_of_the_first() {
    // On the host `x + 8` is `y[0]`: before, the read was attributed to `y` and passed.
    let expected = report(
        "shifted_copy",
        0,
        0,
        Violation::OutOfBounds {
            space: Space::Global,
            buffer: "x".into(),
            access: Access::Read,
            index: T as usize,
            len: T as usize,
        },
    );
    assert_report(run_shifted(None).map(drop), expected.clone());
    assert_report(run_shifted(Some(T as usize)).map(drop), expected);
    let fixed = run_shifted(Some(0)).expect("reads inside `x` pass");
    assert_eq!(fixed, (0..T).map(|i| i as f32).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// 2. Races in global memory
// ---------------------------------------------------------------------------------------------

/// The planted bugs, one per `mode`, on `out` of `blockDim.x * gridDim.x` floats.
#[derive(Clone, Copy)]
enum Writes {
    /// Each thread writes its own element `index_1d()`: correct.
    Own,
    /// Every thread of a block writes element 0 of its block's part: a race within the block.
    SameInBlock,
    /// Thread `t` of every block writes element `t`: a race between blocks.
    SameAcrossBlocks,
    /// Thread 0 writes element 0, a barrier, then thread 1 writes it: ordered, correct.
    OrderedByBarrier,
    /// Thread 0 writes element 0 and thread 1 reads it with no barrier between: a race.
    ReadWithoutBarrier,
}

/// Writes `out` as `mode` says.
///
/// # Safety
/// `out` holds `blockDim.x * gridDim.x` floats.
unsafe fn write_out(out: *mut f32, mode: Writes) {
    let tid = thread::thread_idx_x() as usize;
    let base = thread::block_idx_x() as usize * thread::block_dim_x() as usize;
    // SAFETY: every index is below `blockDim.x * gridDim.x`.
    unsafe {
        match mode {
            Writes::Own => mem::store(out, base + tid, tid as f32),
            Writes::SameInBlock => mem::store(out, base, tid as f32),
            Writes::SameAcrossBlocks => mem::store(out, tid, tid as f32),
            Writes::OrderedByBarrier => {
                if tid == 0 {
                    mem::store(out, base, 1.0);
                }
                thread::sync_threads();
                if tid == 1 {
                    mem::store(out, base, mem::load(out, base) + 1.0);
                }
            }
            Writes::ReadWithoutBarrier => {
                if tid == 0 {
                    mem::store(out, base, 1.0);
                }
                if tid == 1 {
                    mem::store(out, base + 1, mem::load(out, base));
                }
            }
        }
    }
}

fn run_writes(blocks: u32, mode: Writes) -> Result<Vec<f32>, SimError> {
    let mut out = vec![0.0f32; (blocks * T) as usize];
    let mut launch = Launch::new("write_out", config(blocks, T, 0));
    let po = launch.output("out", &mut out);
    // SAFETY: `out` holds `blocks * T` floats.
    unsafe { launch.run(|| write_out(po, mode)) }?;
    Ok(out)
}

/// A race on `out[index]` between this (block, thread) and the other one.
fn global_race(index: usize, access: Access, other: (u32, u32), other_access: Access) -> Violation {
    Violation::GlobalRace {
        buffer: "out".into(),
        index,
        access,
        other_block: Dim3::new(other.0, 0, 0),
        other: Dim3::new(other.1, 0, 0),
        other_access,
    }
}

#[test]
fn global_write_write_race_in_one_block() {
    let expected = report(
        "write_out",
        0,
        0,
        global_race(0, Access::Write, (0, 1), Access::Write),
    );
    assert_report(run_writes(1, Writes::SameInBlock).map(drop), expected);
    run_writes(1, Writes::Own).expect("one writer per element passes");
}

#[test]
fn global_write_write_race_between_blocks_is_reported_the_same_whatever_ran_first() {
    // Two blocks on however many OS threads: whichever wrote second sees the other, and the
    // report names the lower pair every time.
    let expected = report(
        "write_out",
        0,
        0,
        global_race(0, Access::Write, (1, 0), Access::Write),
    );
    for _ in 0..20 {
        assert_report(
            run_writes(2, Writes::SameAcrossBlocks).map(drop),
            expected.clone(),
        );
    }
    let out = run_writes(4, Writes::Own).expect("one writer per element passes");
    assert_eq!(out, (0..4 * T).map(|i| (i % T) as f32).collect::<Vec<_>>());
}

#[test]
fn global_read_of_another_threads_write_needs_a_barrier() {
    let expected = report(
        "write_out",
        0,
        0,
        global_race(0, Access::Write, (0, 1), Access::Read),
    );
    assert_report(run_writes(1, Writes::ReadWithoutBarrier).map(drop), expected);
    let out = run_writes(2, Writes::OrderedByBarrier).expect("a barrier orders the block's accesses");
    assert_eq!(out[0], 2.0);
    assert_eq!(out[T as usize], 2.0);
}

// ---------------------------------------------------------------------------------------------
// 3. cp.async: copies land at the wait
// ---------------------------------------------------------------------------------------------

/// What [`copy_and_read`] does between issuing its copy and reading shared memory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sync {
    /// Commit, wait, barrier, read the neighbour's slot: correct.
    WaitThenBarrier,
    /// Commit, read its own slot: the wait is missing.
    NoWait,
    /// Commit, barrier, read the neighbour's slot: a barrier does not land a copy.
    BarrierOnly,
    /// Commit, wait, read the previous thread's slot (thread 0 its own): the barrier after the
    /// wait is missing.
    WaitOnly,
    /// Two groups (the second an empty commit after a second copy into the next slot), wait
    /// for all but one, read the second slot: its copy is still in flight.
    WaitGroupTooHigh,
}

/// Thread `t` copies `src[4t..4t + 4]` to shared slot `t` with one 16-byte `cp.async`, then
/// writes the slot it reads (`t`, or its neighbour's `(t + 1) % blockDim.x`) to `out[4t..]`.
///
/// # Safety
/// `src` and `out` hold `8 * blockDim.x` floats; `32 * blockDim.x` bytes of shared memory.
unsafe fn copy_and_read(src: *const f32, out: *mut f32, sync: Sync) {
    let tid = thread::thread_idx_x() as usize;
    let threads = thread::block_dim_x() as usize;
    let smem = shared::dynamic::<F4>().cast::<f32>();
    // SAFETY: per the contract; every slot index is below `2 * blockDim.x`.
    unsafe {
        cp_async_16(smem.wrapping_add(4 * tid), src.wrapping_add(4 * tid), 16);
        async_copy::commit_group();
        let slot = match sync {
            Sync::WaitThenBarrier => {
                async_copy::wait_group::<0>();
                thread::sync_threads();
                (tid + 1) % threads
            }
            Sync::NoWait => tid,
            Sync::BarrierOnly => {
                thread::sync_threads();
                (tid + 1) % threads
            }
            Sync::WaitOnly => {
                async_copy::wait_group::<0>();
                tid.saturating_sub(1)
            }
            Sync::WaitGroupTooHigh => {
                let second = threads + tid;
                cp_async_16(smem.wrapping_add(4 * second), src.wrapping_add(4 * second), 16);
                async_copy::commit_group();
                async_copy::wait_group::<1>();
                second
            }
        };
        for j in 0..4 {
            mem::store(out, 4 * tid + j, mem::load(smem, 4 * slot + j));
        }
    }
}

fn run_copy(sync: Sync) -> Result<Vec<f32>, SimError> {
    let src: Vec<F4> = (0..2 * T).map(|i| F4([i as f32, 0.5, 0.25, 0.125])).collect();
    let mut out = vec![0.0f32; 8 * T as usize];
    let mut launch = Launch::new("copy_and_read", config(1, T, 32 * T));
    let ps = launch.input("src", &src).cast::<f32>();
    let po = launch.output("out", &mut out);
    // SAFETY: `src` and `out` hold `8 T` floats; `32 T` bytes of shared memory.
    unsafe { launch.run(|| copy_and_read(ps, po, sync)) }?;
    Ok(out)
}

#[test]
fn cp_async_read_before_the_wait_is_reported() {
    let expected = report(
        "copy_and_read",
        0,
        0,
        Violation::AsyncCopyNotWaited {
            index: 0,
            access: Access::Read,
            issuer: Dim3::new(0, 0, 0),
        },
    );
    assert_report(run_copy(Sync::NoWait).map(drop), expected);
    let out = run_copy(Sync::WaitThenBarrier).expect("wait, then barrier, passes");
    assert_eq!(out[..4], [1.0, 0.5, 0.25, 0.125]);
    assert_eq!(out[4 * (T as usize - 1)], 0.0);
}

#[test]
fn cp_async_is_not_landed_by_a_barrier() {
    let expected = report(
        "copy_and_read",
        0,
        0,
        Violation::AsyncCopyNotWaited {
            index: 4,
            access: Access::Read,
            issuer: Dim3::new(1, 0, 0),
        },
    );
    assert_report(run_copy(Sync::BarrierOnly).map(drop), expected);
}

#[test]
fn cp_async_landed_by_the_wait_needs_a_barrier_for_other_threads() {
    // Thread 0's copy landed at its wait, in the first barrier interval: it is thread 0's write
    // there, and thread 1 reads it in that same interval.
    let expected = report(
        "copy_and_read",
        0,
        1,
        Violation::SharedRace {
            index: 0,
            access: Access::Read,
            other: Dim3::new(0, 0, 0),
            other_access: Access::Write,
        },
    );
    assert_report(run_copy(Sync::WaitOnly).map(drop), expected);
}

#[test]
fn cp_async_wait_group_leaves_the_newest_groups_in_flight() {
    let expected = report(
        "copy_and_read",
        0,
        0,
        Violation::AsyncCopyNotWaited {
            index: 4 * T as usize,
            access: Access::Read,
            issuer: Dim3::new(0, 0, 0),
        },
    );
    assert_report(run_copy(Sync::WaitGroupTooHigh).map(drop), expected);
}

// ---------------------------------------------------------------------------------------------
// 4. Barriers inside block collectives are named by the kernel's call site
// ---------------------------------------------------------------------------------------------

/// `out[0] = sum of x` over a block: the planted bug calls `block::reduce_sum` from two call
/// sites, the lower half of the threads from one, the upper half from the other.
///
/// # Safety
/// `x` holds `blockDim.x` floats, `out` one; `4 * blockDim.x` bytes of shared memory.
// The two identical branches are the planted bug: two call sites of one collective.
#[allow(clippy::if_same_then_else)]
unsafe fn split_reduce(x: *const f32, out: *mut f32, split: bool) {
    let tid = thread::thread_idx_x() as usize;
    let scratch = shared::dynamic::<f32>();
    // SAFETY: per the contract.
    unsafe {
        let v = mem::load(x, tid);
        let sum = if split && tid >= 4 {
            block::reduce_sum(scratch, v) // reduce: upper half
        } else {
            block::reduce_sum(scratch, v) // reduce: lower half
        };
        if tid == 0 {
            mem::store(out, 0, sum);
        }
    }
}

fn run_split_reduce(split: bool) -> Result<f32, SimError> {
    let x: Vec<f32> = (0..T).map(|i| i as f32).collect();
    let mut out = [0.0f32];
    let mut launch = Launch::new("split_reduce", config(1, T, 4 * T));
    let (px, po) = (launch.input("x", &x), launch.output("out", &mut out));
    // SAFETY: `x` holds `T` floats, `out` one; `4 T` bytes of shared memory.
    unsafe { launch.run(|| split_reduce(px, po, split)) }?;
    Ok(out[0])
}

#[test]
fn threads_in_two_calls_of_block_reduce_wait_at_different_barriers() {
    let expected = report(
        "split_reduce",
        0,
        0,
        Violation::DifferentBarriers {
            here: site("block::reduce_sum", "// reduce: lower half"),
            there: site("block::reduce_sum", "// reduce: upper half"),
            other: Dim3::new(4, 0, 0),
        },
    );
    assert_report(run_split_reduce(true).map(drop), expected);
    assert_eq!(run_split_reduce(false).expect("one call site passes"), 28.0);
}
