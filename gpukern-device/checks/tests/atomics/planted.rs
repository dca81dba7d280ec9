//! Planted bugs and the exact report each one gets: a plain read-modify-write instead of an
//! atomic (global and shared), a plain access racing atomics, atomics on shared memory nobody
//! zeroed, a misaligned atomic, an atomic out of bounds or on an input.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::sim::{Access, Dim3, Launch, SimError, Space, Violation};
use gpukern_device::{kernel, mem, shared, thread};

use super::{assert_report, config, global_race, report, run_histogram};

/// The histogram with a plain load and store where the atomic belongs.
#[kernel]
unsafe fn histogram_plain(x: *const u32, n: usize, bins: *mut u32, nbins: u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; the bin is below `nbins`.
        unsafe {
            let bin = (mem::load(x, i) % nbins) as usize;
            mem::store(bins, bin, mem::load(bins, bin) + 1);
        }
    }
}

#[test]
fn a_histogram_without_the_atomic_is_a_global_race() {
    // Threads 0 and 16 of one block share bin 0: thread 16's load meets thread 0's store.
    let x: Vec<u32> = (0..64).collect();
    let mut bins = vec![0u32; 16];
    let mut launch = Launch::new("histogram_plain", config(1, 64, 0));
    let (px, pb) = (launch.input("x", &x), launch.output("bins", &mut bins));
    // SAFETY: `x` holds 64 words, `bins` 16.
    let result = unsafe { launch.run(|| histogram_plain(px, 64, pb, 16)) };
    let race = global_race("bins", 0, Access::Write, (0, 16), Access::Read);
    assert_report(result, report("histogram_plain", 0, 0, race));
    // The same input through the atomic histogram passes.
    assert_eq!(run_histogram(&x, 16, false), Ok(vec![4; 16]));
}

/// Which plain access [`count_with_a_plain_access`] plants next to the atomics.
#[derive(Clone, Copy)]
enum Plain {
    /// Thread 0 of block 0 stores 0 to the counter before the others add.
    StoreFirst,
    /// The last thread of block 0 stores 0 after the others added.
    StoreLast,
    /// The last thread of block 0 reads the counter after the others added.
    ReadLast,
    /// After a barrier, thread 0 of block 0 reads the counter: ordered, no race.
    ReadAfterBarrier,
    /// Thread 0 of block 1 stores 0 while block 0's threads add.
    StoreInAnotherBlock,
    /// Every thread adds; no plain access.
    Nothing,
}

/// Every thread adds 1 to `counter[0]` atomically, except the one that `plain` says does a
/// plain access instead. (A simulator-only kernel: no `#[kernel]`, whose launcher would need
/// `Plain` to be a `Scalar`.)
unsafe fn count_with_a_plain_access(counter: *mut u32, seen: *mut u32, plain: Plain) {
    let (tid, block) = (thread::thread_idx_x(), thread::block_idx_x());
    let last = thread::block_dim_x() - 1;
    // SAFETY: `counter` and `seen` hold one word each.
    unsafe {
        match plain {
            Plain::StoreFirst if (block, tid) == (0, 0) => mem::store(counter, 0, 0),
            Plain::StoreLast if (block, tid) == (0, last) => mem::store(counter, 0, 0),
            Plain::ReadLast if (block, tid) == (0, last) => mem::store(seen, 0, mem::load(counter, 0)),
            Plain::StoreInAnotherBlock if (block, tid) == (1, 0) => mem::store(counter, 0, 0),
            Plain::StoreInAnotherBlock if block == 1 => {}
            _ => {
                atomic::add(counter, 0, 1u32, Scope::Device);
            }
        }
        thread::sync_threads();
        if matches!(plain, Plain::ReadAfterBarrier) && (block, tid) == (0, 0) {
            mem::store(seen, 0, mem::load(counter, 0));
        }
    }
}

fn run_count(blocks: u32, plain: Plain) -> Result<(u32, u32), SimError> {
    let (mut counter, mut seen) = ([0u32], [0u32]);
    let mut launch = Launch::new("count_with_a_plain_access", config(blocks, 64, 0));
    let (pc, ps) = (
        launch.output("counter", &mut counter),
        launch.output("seen", &mut seen),
    );
    // SAFETY: `counter` and `seen` hold one word each.
    unsafe { launch.run(|| count_with_a_plain_access(pc, ps, plain)) }?;
    Ok((counter[0], seen[0]))
}

#[test]
fn a_plain_store_or_read_next_to_atomics_is_a_global_race() {
    let kernel = "count_with_a_plain_access";
    // The store comes first: thread 1's atomic meets it.
    let race = global_race("counter", 0, Access::Write, (0, 1), Access::Atomic);
    assert_report(
        run_count(1, Plain::StoreFirst).map(drop),
        report(kernel, 0, 0, race),
    );
    // The store comes last: it meets thread 62's atomic (the latest one).
    let race = global_race("counter", 0, Access::Atomic, (0, 63), Access::Write);
    assert_report(
        run_count(1, Plain::StoreLast).map(drop),
        report(kernel, 0, 62, race),
    );
    let race = global_race("counter", 0, Access::Atomic, (0, 63), Access::Read);
    assert_report(
        run_count(1, Plain::ReadLast).map(drop),
        report(kernel, 0, 62, race),
    );
    // A barrier between the atomics and the read orders them.
    assert_eq!(run_count(1, Plain::ReadAfterBarrier), Ok((64, 64)));
    // Several blocks of atomics alone do not race, and lose no update.
    assert_eq!(run_count(3, Plain::Nothing), Ok((192, 0)));
}

#[test]
fn a_plain_store_in_another_block_races_with_the_atomics() {
    // Which of block 0's atomics meets block 1's store depends on the OS threads' interleaving;
    // the rest of the report does not.
    for _ in 0..10 {
        let err = run_count(2, Plain::StoreInAnotherBlock).expect_err("the race is reported");
        println!("{err}");
        assert_eq!(
            (err.kernel.as_str(), err.block),
            ("count_with_a_plain_access", Dim3::new(0, 0, 0))
        );
        let thread = err.thread;
        assert_eq!(
            err.violation,
            global_race("counter", 0, Access::Atomic, (1, 0), Access::Write)
        );
        assert!(thread.x < 64, "{thread}");
    }
}

/// The shared-memory histogram with a plain load and store where the shared atomic belongs
/// (`zero` false: also without zeroing the bins first).
#[kernel]
unsafe fn histogram_shared_planted(
    x: *const u32,
    n: usize,
    bins: *mut u32,
    nbins: u32,
    atomic: bool,
    zero: bool,
) {
    let local = shared::dynamic::<u32>();
    let tid = thread::thread_idx_x();
    // SAFETY: shared memory holds `nbins` words, `bins` `nbins`, `x` `n`.
    unsafe {
        if zero && tid < nbins {
            mem::store(local, tid as usize, 0);
        }
        thread::sync_threads();
        let i = thread::index_1d();
        if i < n {
            let bin = (mem::load(x, i) % nbins) as usize;
            if atomic {
                atomic::add(local, bin, 1u32, Scope::Block);
            } else {
                mem::store(local, bin, mem::load(local, bin) + 1);
            }
        }
        thread::sync_threads();
        if tid < nbins {
            atomic::add(bins, tid as usize, mem::load(local, tid as usize), Scope::Device);
        }
    }
}

fn run_shared_planted(atomic: bool, zero: bool) -> Result<Vec<u32>, SimError> {
    let x: Vec<u32> = (0..64).collect();
    let mut bins = vec![0u32; 16];
    let mut launch = Launch::new("histogram_shared_planted", config(1, 64, 64));
    let (px, pb) = (launch.input("x", &x), launch.output("bins", &mut bins));
    // SAFETY: `x` holds 64 words, `bins` 16, shared memory 16 words.
    unsafe { launch.run(|| histogram_shared_planted(px, 64, pb, 16, atomic, zero)) }?;
    Ok(bins)
}

#[test]
fn a_shared_histogram_without_the_atomic_is_a_shared_race() {
    // Thread 16's load of shared bin 0 meets thread 0's store.
    let race = Violation::SharedRace {
        index: 0,
        access: Access::Read,
        other: Dim3::new(0, 0, 0),
        other_access: Access::Write,
    };
    let kernel = "histogram_shared_planted";
    assert_report(
        run_shared_planted(false, true).map(drop),
        report(kernel, 0, 16, race),
    );
    assert_eq!(run_shared_planted(true, true), Ok(vec![4; 16]));
    // Atomics on bins nobody zeroed read shared memory nobody wrote.
    let uninit = Violation::UninitializedSharedRead { index: 0 };
    assert_report(
        run_shared_planted(true, false).map(drop),
        report(kernel, 0, 0, uninit),
    );
}

/// Threads add to shared word 0 atomically; thread `plain` stores to it (before or after the
/// others, by its index) instead. Then a barrier and thread 0 copies it out.
#[kernel]
unsafe fn shared_count_with_a_store(out: *mut u32, plain: u32) {
    let local = shared::dynamic::<u32>();
    let tid = thread::thread_idx_x();
    // SAFETY: shared memory holds one word, `out` one.
    unsafe {
        if tid == 0 {
            mem::store(local, 0, 0);
        }
        thread::sync_threads();
        if tid == plain {
            mem::store(local, 0, 7);
        } else {
            atomic::add(local, 0, 1u32, Scope::Block);
        }
        thread::sync_threads();
        if tid == 0 {
            mem::store(out, 0, mem::load(local, 0));
        }
    }
}

#[test]
fn a_plain_store_next_to_shared_atomics_is_a_shared_race() {
    let run = |plain: u32| {
        let mut out = [0u32];
        let mut launch = Launch::new("shared_count_with_a_store", config(1, 64, 4));
        let po = launch.output("out", &mut out);
        // SAFETY: `out` holds one word; shared memory one.
        unsafe { launch.run(|| shared_count_with_a_store(po, plain)) }.map(|()| out[0])
    };
    let race = |access, other, other_access| Violation::SharedRace {
        index: 0,
        access,
        other: Dim3::new(other, 0, 0),
        other_access,
    };
    let kernel = "shared_count_with_a_store";
    // Thread 5 stores after threads 0..4 added: it meets thread 0's atomic.
    let expected = report(kernel, 0, 5, race(Access::Write, 0, Access::Atomic));
    assert_report(run(5).map(drop), expected);
    // Thread 0 stores first: thread 1's atomic meets it.
    let expected = report(kernel, 0, 1, race(Access::Atomic, 0, Access::Write));
    assert_report(run(0).map(drop), expected);
    // No plain store: 64 atomics, no race.
    assert_eq!(run(64), Ok(64));
}

/// One atomic at byte `offset` of `out` (global) or of shared memory, of 4 or 8 bytes.
#[kernel]
unsafe fn atomic_at(out: *mut u64, offset: usize, wide: bool, in_shared: bool) {
    let base: *mut u8 = if in_shared {
        shared::dynamic::<u8>()
    } else {
        out.cast()
    };
    let p = base.wrapping_add(offset);
    // SAFETY: the planted bug: `offset` may be misaligned; the simulator reports it.
    unsafe {
        if wide {
            atomic::add(p.cast::<u64>(), 0, 1u64, Scope::Device);
        } else {
            atomic::add(p.cast::<u32>(), 0, 1u32, Scope::Device);
        }
    }
}

fn run_atomic_at(offset: usize, wide: bool, in_shared: bool) -> Result<(), SimError> {
    let mut out = [0u64; 4];
    let mut launch = Launch::new("atomic_at", config(1, 1, 32));
    let po = launch.output("out", &mut out);
    // SAFETY: `out` holds 32 bytes, and so does shared memory.
    unsafe { launch.run(|| atomic_at(po, offset, wide, in_shared)) }
}

#[test]
fn a_misaligned_atomic_is_reported_in_global_and_shared_memory() {
    let misaligned = |space, buffer: &str, offset, size| {
        report(
            "atomic_at",
            0,
            0,
            Violation::MisalignedAtomic {
                space,
                buffer: buffer.into(),
                offset,
                size,
            },
        )
    };
    assert_report(
        run_atomic_at(2, false, false),
        misaligned(Space::Global, "out", 2, 4),
    );
    assert_report(
        run_atomic_at(12, true, false),
        misaligned(Space::Global, "out", 12, 8),
    );
    // Shared memory is never read uninitialised here: alignment is checked first.
    assert_report(
        run_atomic_at(6, false, true),
        misaligned(Space::Shared, "shared", 6, 4),
    );
    assert_report(
        run_atomic_at(4, true, true),
        misaligned(Space::Shared, "shared", 4, 8),
    );
    // Aligned: fine in global memory.
    assert_eq!(run_atomic_at(4, false, false), Ok(()));
    assert_eq!(run_atomic_at(24, true, false), Ok(()));
}

/// Thread 0 adds 1 to `p[i]`.
#[kernel]
unsafe fn add_one_at(p: *mut u32, i: usize) {
    if thread::index_1d() == 0 {
        // SAFETY: the planted bug: `i` may be out of bounds or `p` an input.
        unsafe { atomic::add(p, i, 1u32, Scope::Device) };
    }
}

#[test]
fn an_atomic_out_of_bounds_or_on_an_input_is_reported_as_a_write_would_be() {
    let mut out = [0u32; 4];
    let mut launch = Launch::new("add_one_at", config(1, 32, 0));
    let po = launch.output("out", &mut out);
    // SAFETY: the planted bug: index 4 of 4 words.
    let result = unsafe { launch.run(|| add_one_at(po, 4)) };
    let oob = Violation::OutOfBounds {
        space: Space::Global,
        buffer: "out".into(),
        access: Access::Atomic,
        index: 4,
        len: 4,
    };
    assert_report(result, report("add_one_at", 0, 0, oob));

    let input = [0u32; 4];
    let mut launch = Launch::new("add_one_at", config(1, 32, 0));
    let pi = launch.input("x", &input).cast_mut();
    // SAFETY: the planted bug: `x` is an input.
    let result = unsafe { launch.run(|| add_one_at(pi, 1)) };
    let to_input = Violation::WriteToInput {
        buffer: "x".into(),
        index: 1,
    };
    assert_report(result, report("add_one_at", 0, 0, to_input));
}
