//! The simulator, tested two ways.
//!
//! 1. Every shipped kernel runs through [`Launch`] on small ragged shapes, with the launch shape
//!    its doc comment gives, and matches an f64 computation (the kernels of each family in
//!    `add.rs`, `matmul.rs` and `softmax.rs`; here, what spans families).
//! 2. Each check is proved on a test-only kernel with one planted bug, written with the same
//!    `gpu` helpers as the real kernels: the report must name the exact violation, kernel, block
//!    and thread. Next to each buggy kernel runs its fixed version, which must pass.
//!
//! Then the rules of a whole launch: invalid configurations, several failing blocks (the lowest
//! is reported), and `GPUKERN_SIM_THREADS` (the number of OS threads changes nothing).

mod common;

use std::collections::HashSet;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::matmul::{naive_config, run_matmul, tiled_config};
use common::softmax::{run_softmax, softmax_config};
use common::{assert_report, config, elementwise_config, random, report};
use kernels_gpu::gpu::{block, mem, shared, thread};
use kernels_gpu::sim::{Access, Dim3, Launch, SimError, Space, Violation};
use kernels_gpu::{add, matmul};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Threads per block of the planted-bug kernels: small, so that reports name small indices.
const T: u32 = 8;

/// Shared memory for one float per thread of a `T`-thread block.
const T_FLOATS: u32 = T * 4;

/// FNV-1a over the bits of `values`: equal hashes mean bit-identical results.
fn hash(values: &[f32]) -> u64 {
    values.iter().fold(0xcbf2_9ce4_8422_2325, |h, v| {
        (h ^ v.to_bits() as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `file:line:column` of the barrier on the line of this file that ends with `marker`, as the
/// simulator names it (the column of the `thread::sync_threads()` call).
fn barrier_at(marker: &str) -> String {
    let source = include_str!("simulator.rs");
    let (line, text) = source
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("thread::sync_threads()") && l.ends_with(marker))
        .unwrap_or_else(|| panic!("no barrier marked {marker:?}"));
    let column = text.find("thread::sync_threads()").unwrap_or(0);
    format!("{}:{}:{}", file!(), line + 1, column + 1)
}

/// Runs `f` on another thread and returns its result, failing the test if it takes longer than
/// `seconds` (a simulator that hung at a barrier would otherwise hang the test run).
fn within<R: Send + 'static>(seconds: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(seconds))
        .expect("the launch did not return: the simulator hung")
}

// ---------------------------------------------------------------------------------------------
// 1. Shipped kernels against f64 computations, with their documented launch shapes
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// 2. Planted bugs, one per check, each next to its fixed version
// ---------------------------------------------------------------------------------------------

/// Block sum by a tree reduction in shared memory: thread `tid` stores `x[tid]` in `s[tid]`;
/// while `active` halves, threads below `active` add `s[tid + active]` into `s[tid]`; thread 0
/// writes `s[0]` to `out[0]`. The two barriers can be left out, as the planted bugs.
///
/// # Safety
/// `x` holds `blockDim.x` floats, `out` one; a power-of-two 1-D block; one float of shared
/// memory per thread.
unsafe fn block_sum(x: *const f32, out: *mut f32, barrier_after_store: bool, barrier_per_round: bool) {
    let tid = thread::thread_idx_x() as usize;
    let s = shared::dynamic::<f32>();
    // SAFETY: `tid < blockDim.x`, and `x` and `s` hold `blockDim.x` floats.
    unsafe {
        mem::store(s, tid, mem::load(x, tid));
        if barrier_after_store {
            thread::sync_threads();
        }
        let mut active = thread::block_dim_x() as usize / 2;
        while active > 0 {
            if tid < active {
                let other = mem::load(s, tid + active);
                let mine = mem::load(s, tid);
                mem::store(s, tid, mine + other);
            }
            if barrier_per_round {
                thread::sync_threads();
            }
            active /= 2;
        }
        if tid == 0 {
            mem::store(out, 0, mem::load(s, 0));
        }
    }
}

/// Runs [`block_sum`] on one block of `T` threads; returns the sum it wrote.
fn run_block_sum(x: &[f32], shared_mem_bytes: u32, barriers: (bool, bool)) -> Result<f32, SimError> {
    let mut out = [0.0f32];
    let mut launch = Launch::new("block_sum", config((1, 1), (T, 1), shared_mem_bytes));
    let (px, pout) = (launch.input("x", x), launch.output("out", &mut out));
    // SAFETY: `x` holds `T` floats, `out` one; both registered.
    unsafe { launch.run(|| block_sum(px, pout, barriers.0, barriers.1)) }?;
    Ok(out[0])
}

#[test]
fn race_missing_barrier_between_reduction_rounds() {
    // Thread 0 runs every round alone and reads s[1] in the last one; thread 1 then overwrites
    // s[1] in the first round, in the same barrier interval: a write after another thread's read.
    let x = random(50, T as usize);
    let expected = report(
        "block_sum",
        (0, 0),
        (1, 0),
        Violation::SharedRace {
            index: 1,
            access: Access::Write,
            other: Dim3::new(0, 0, 0),
            other_access: Access::Read,
        },
    );
    assert_report(run_block_sum(&x, T_FLOATS, (true, false)).map(drop), expected);

    let sum = run_block_sum(&x, T_FLOATS, (true, true)).unwrap();
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    assert!((sum as f64 - want).abs() <= 1e-5 * x.iter().map(|v| v.abs() as f64).sum::<f64>());
}

#[test]
fn missing_barrier_after_the_store_reads_unwritten_shared_memory() {
    // Without the first barrier, thread 0 reads s[4] before thread 4 (which runs later) wrote it.
    let x = random(51, T as usize);
    let expected = report(
        "block_sum",
        (0, 0),
        (0, 0),
        Violation::UninitializedSharedRead { index: 4 },
    );
    assert_report(run_block_sum(&x, T_FLOATS, (false, true)).map(drop), expected);
}

#[test]
fn shared_memory_accessed_with_no_shared_memory_launched() {
    // The host forgot `shared_mem_bytes`: the first store into shared memory is out of bounds.
    let x = random(52, T as usize);
    let expected = report(
        "block_sum",
        (0, 0),
        (0, 0),
        Violation::OutOfBounds {
            space: Space::Shared,
            buffer: "shared".into(),
            access: Access::Write,
            index: 0,
            len: 0,
        },
    );
    assert_report(run_block_sum(&x, 0, (true, true)).map(drop), expected);
}

#[test]
fn block_reduce_sum_with_its_barriers_passes() {
    /// Thread `tid` contributes `x[tid]`; thread 0 writes the block's sum, computed twice in a row
    /// over the same scratch memory (the helper's trailing barrier makes the reuse safe).
    unsafe fn twice_reduced(x: *const f32, out: *mut f32) {
        let tid = thread::thread_idx_x() as usize;
        let scratch = shared::dynamic::<f32>();
        // SAFETY: `x` holds `blockDim.x` floats, `scratch` as many, `out` two; every thread calls.
        unsafe {
            let v = mem::load(x, tid);
            let sum = block::reduce_sum(scratch, v);
            let max = block::reduce_max(scratch, v);
            if tid == 0 {
                mem::store(out, 0, sum);
                mem::store(out, 1, max);
            }
        }
    }
    let x = random(53, 64);
    let mut out = [0.0f32; 2];
    let mut launch = Launch::new("twice_reduced", config((1, 1), (64, 1), 64 * 4));
    let (px, pout) = (launch.input("x", &x), launch.output("out", &mut out));
    // SAFETY: `x` holds 64 floats, `out` two; both registered.
    unsafe { launch.run(|| twice_reduced(px, pout)) }.unwrap();
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    assert!(
        (out[0] as f64 - want).abs() < 1e-5 * 64.0,
        "sum {} vs {want}",
        out[0]
    );
    assert_eq!(out[1], x.iter().copied().fold(f32::NEG_INFINITY, f32::max));
}

/// `y[tid] = x[tid - 1]` (`y[0] = x[0]`), passed through shared memory. The barrier between the
/// store and the load can be left out, as the planted bug.
///
/// # Safety
/// `x` and `y` hold `blockDim.x` floats; one float of shared memory per thread.
unsafe fn shift_right(x: *const f32, y: *mut f32, barrier: bool) {
    let tid = thread::thread_idx_x() as usize;
    let s = shared::dynamic::<f32>();
    // SAFETY: `tid < blockDim.x`; the buffers and `s` hold `blockDim.x` floats.
    unsafe {
        mem::store(s, tid, mem::load(x, tid));
        if barrier {
            thread::sync_threads();
        }
        mem::store(y, tid, mem::load(s, tid.saturating_sub(1)));
    }
}

#[test]
fn race_read_after_another_threads_write() {
    let x = random(54, T as usize);
    let run = |barrier: bool| {
        let mut y = vec![0.0f32; T as usize];
        let mut launch = Launch::new("shift_right", config((1, 1), (T, 1), T_FLOATS));
        let (px, py) = (launch.input("x", &x), launch.output("y", &mut y));
        // SAFETY: `x` and `y` hold `T` floats; both registered.
        unsafe { launch.run(|| shift_right(px, py, barrier)) }.map(|()| y)
    };
    let expected = report(
        "shift_right",
        (0, 0),
        (1, 0),
        Violation::SharedRace {
            index: 0,
            access: Access::Read,
            other: Dim3::new(0, 0, 0),
            other_access: Access::Write,
        },
    );
    assert_report(run(false).map(drop), expected);

    let y = run(true).unwrap();
    assert_eq!(y[0], x[0]);
    assert_eq!(y[1..], x[..T as usize - 1]);
}

/// Every thread gets `x[0]` through `s[0]`. The planted bug: every thread, not only thread 0,
/// stores into `s[0]`.
///
/// # Safety
/// `x` holds `blockDim.x` floats, `y` as many; one float of shared memory.
unsafe fn broadcast(x: *const f32, y: *mut f32, only_thread_zero_writes: bool) {
    let tid = thread::thread_idx_x() as usize;
    let s = shared::dynamic::<f32>();
    // SAFETY: `tid < blockDim.x`; `s` holds one float.
    unsafe {
        if tid == 0 || !only_thread_zero_writes {
            mem::store(s, 0, mem::load(x, 0));
        }
        thread::sync_threads();
        mem::store(y, tid, mem::load(s, 0));
    }
}

#[test]
fn race_two_writes_in_one_interval() {
    let x = random(55, T as usize);
    let run = |fixed: bool| {
        let mut y = vec![0.0f32; T as usize];
        let mut launch = Launch::new("broadcast", config((1, 1), (T, 1), 4));
        let (px, py) = (launch.input("x", &x), launch.output("y", &mut y));
        // SAFETY: `x` and `y` hold `T` floats; both registered.
        unsafe { launch.run(|| broadcast(px, py, fixed)) }.map(|()| y)
    };
    let expected = report(
        "broadcast",
        (0, 0),
        (1, 0),
        Violation::SharedRace {
            index: 0,
            access: Access::Write,
            other: Dim3::new(0, 0, 0),
            other_access: Access::Write,
        },
    );
    assert_report(run(false).map(drop), expected);
    assert_eq!(run(true).unwrap(), vec![x[0]; T as usize]);
}

/// The planted bug: `y[i] = i` for `i <= n`, one element too many.
///
/// # Safety
/// `y` holds `n` floats.
unsafe fn iota_inclusive(y: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i <= n {
        // SAFETY: none: `i == n` is past the end (the bug).
        unsafe { mem::store(y, i, i as f32) }
    }
}

/// The fix: `y[i] = i` for `i < n`.
///
/// # Safety
/// `y` holds `n` floats.
unsafe fn iota(y: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        unsafe { mem::store(y, i, i as f32) }
    }
}

#[test]
fn out_of_bounds_global_write_off_by_one() {
    // n = 300 with 256-thread blocks: element 300 belongs to block 1, thread 44.
    let n = 300;
    let cfg = elementwise_config(n);
    let mut y = vec![0.0f32; n];
    let mut launch = Launch::new("iota_inclusive", cfg);
    let py = launch.output("y", &mut y);
    let expected = report(
        "iota_inclusive",
        (1, 0),
        (44, 0),
        Violation::OutOfBounds {
            space: Space::Global,
            buffer: "y".into(),
            access: Access::Write,
            index: n,
            len: n,
        },
    );
    // SAFETY: `y` is registered; the out-of-bounds store is caught before it is made.
    assert_report(unsafe { launch.run(|| iota_inclusive(py, n)) }, expected);

    let mut launch = Launch::new("iota", cfg);
    let py = launch.output("y", &mut y);
    // SAFETY: `y` holds `n` floats and is registered.
    unsafe { launch.run(|| iota(py, n)) }.unwrap();
    assert!(y.iter().enumerate().all(|(i, &v)| v == i as f32));
}

#[test]
fn out_of_bounds_global_read() {
    // `add` with `n` one more than the buffers hold: thread 7 reads `a[7]`.
    let (a, b) = (random(56, 7), random(57, 7));
    let mut c = vec![0.0f32; 8];
    let mut launch = Launch::new("add", config((1, 1), (T, 1), 0));
    let (pa, pb, pc) = (
        launch.input("a", &a),
        launch.input("b", &b),
        launch.output("c", &mut c),
    );
    let expected = report(
        "add",
        (0, 0),
        (7, 0),
        Violation::OutOfBounds {
            space: Space::Global,
            buffer: "a".into(),
            access: Access::Read,
            index: 7,
            len: 7,
        },
    );
    // SAFETY: buffers registered; the out-of-bounds load is caught before it is made.
    assert_report(unsafe { launch.run(|| add::add(pa, pb, pc, 8)) }, expected);
}

/// `y[tid] = s[tid] + s[tid + 1]` over a tile of `x` in shared memory. The planted bug: no
/// guard for the last thread, which reads one element past the tile.
///
/// # Safety
/// `x` and `y` hold `blockDim.x` floats; one float of shared memory per thread.
unsafe fn pair_sum(x: *const f32, y: *mut f32, guard: bool) {
    let tid = thread::thread_idx_x() as usize;
    let s = shared::dynamic::<f32>();
    // SAFETY: `tid < blockDim.x`; with `guard`, `tid + 1 < blockDim.x` too.
    unsafe {
        mem::store(s, tid, mem::load(x, tid));
        thread::sync_threads();
        if !guard || tid + 1 < thread::block_dim_x() as usize {
            mem::store(y, tid, mem::load(s, tid) + mem::load(s, tid + 1));
        }
    }
}

#[test]
fn out_of_bounds_shared_read_off_by_one() {
    let x = random(58, T as usize);
    let run = |guard: bool| {
        let mut y = vec![0.0f32; T as usize];
        let mut launch = Launch::new("pair_sum", config((1, 1), (T, 1), T_FLOATS));
        let (px, py) = (launch.input("x", &x), launch.output("y", &mut y));
        // SAFETY: `x` and `y` hold `T` floats; both registered.
        unsafe { launch.run(|| pair_sum(px, py, guard)) }.map(|()| y)
    };
    let expected = report(
        "pair_sum",
        (0, 0),
        (T - 1, 0),
        Violation::OutOfBounds {
            space: Space::Shared,
            buffer: "shared".into(),
            access: Access::Read,
            index: T as usize,
            len: T as usize,
        },
    );
    assert_report(run(false).map(drop), expected);

    let y = run(true).unwrap();
    for i in 0..T as usize - 1 {
        assert_eq!(y[i], x[i] + x[i + 1]);
    }
}

/// Thread 0 writes the sum of a tile of `x` staged in shared memory. Threads past `n` should
/// store a zero; the planted bug: they store nothing.
///
/// # Safety
/// `x` holds `n` floats, `out` one; one float of shared memory per thread.
unsafe fn tile_sum(x: *const f32, out: *mut f32, n: usize, pad: bool) {
    let tid = thread::thread_idx_x() as usize;
    let s = shared::dynamic::<f32>();
    // SAFETY: `tid < blockDim.x`, `x` is read below `n`, `s` holds `blockDim.x` floats.
    unsafe {
        if tid < n {
            mem::store(s, tid, mem::load(x, tid));
        } else if pad {
            mem::store(s, tid, 0.0);
        }
        thread::sync_threads();
        if tid == 0 {
            let mut acc = 0.0;
            for j in 0..thread::block_dim_x() as usize {
                acc += mem::load(s, j);
            }
            mem::store(out, 0, acc);
        }
    }
}

#[test]
fn uninitialized_shared_read_of_an_unpadded_tile() {
    let x = random(60, 5);
    let run = |pad: bool| {
        let mut out = [0.0f32];
        let mut launch = Launch::new("tile_sum", config((1, 1), (T, 1), T_FLOATS));
        let (px, pout) = (launch.input("x", &x), launch.output("out", &mut out));
        // SAFETY: `x` holds 5 floats, `out` one; both registered.
        unsafe { launch.run(|| tile_sum(px, pout, 5, pad)) }.map(|()| out[0])
    };
    let expected = report(
        "tile_sum",
        (0, 0),
        (0, 0),
        Violation::UninitializedSharedRead { index: 5 },
    );
    assert_report(run(false).map(drop), expected);
    assert_eq!(run(true).unwrap(), x.iter().sum::<f32>());
}

#[test]
fn uninitialized_shared_read_when_matmul_tiled_gets_too_small_a_block() {
    // 16 x 16 threads fill only part of each 32 x 32 tile: thread (0, 0) reads tile_a[16].
    let (m, n, k) = (20, 20, 20);
    let (a, b) = (random(61, m * k), random(62, k * n));
    let side = matmul::NAIVE_BLOCK;
    let cfg = config((1, 1), (side, side), matmul::TILED_SHARED_BYTES);
    let expected = report(
        "matmul_tiled",
        (0, 0),
        (0, 0),
        Violation::UninitializedSharedRead { index: 16 },
    );
    let result = run_matmul("matmul_tiled", matmul::matmul_tiled, cfg, (&a, &b), (m, n, k));
    assert_report(result.map(drop), expected);
}

/// Threads below `k` wait at a barrier, the others return: the planted bug whenever
/// `k < blockDim.x`.
unsafe fn barrier_below(k: u32) {
    if thread::thread_idx_x() < k {
        thread::sync_threads(); // barrier: below k
    }
}

#[test]
fn barrier_not_reached_by_every_thread() {
    let expected = report(
        "barrier_below",
        (0, 0),
        (3, 0),
        Violation::BarrierNotReached {
            barrier: barrier_at("// barrier: below k"),
            waiting: 3,
        },
    );
    let run = |k: u32| {
        within(20, move || {
            let launch = Launch::new("barrier_below", config((1, 1), (T, 1), 0));
            // SAFETY: the kernel touches no memory.
            unsafe { launch.run(|| barrier_below(k)) }
        })
    };
    assert_report(run(3), expected);
    run(T).unwrap();
}

/// Even threads wait at one barrier, odd threads at another: the planted bug.
unsafe fn barrier_per_branch() {
    if thread::thread_idx_x().is_multiple_of(2) {
        thread::sync_threads(); // barrier: even
    } else {
        thread::sync_threads(); // barrier: odd
    }
}

#[test]
fn different_barriers_in_two_branches() {
    let expected = report(
        "barrier_per_branch",
        (0, 0),
        (0, 0),
        Violation::DifferentBarriers {
            here: barrier_at("// barrier: even"),
            there: barrier_at("// barrier: odd"),
            other: Dim3::new(1, 0, 0),
        },
    );
    let result = within(20, || {
        let launch = Launch::new("barrier_per_branch", config((1, 1), (T, 1), 0));
        // SAFETY: the kernel touches no memory.
        unsafe { launch.run(|| barrier_per_branch()) }
    });
    assert_report(result, expected);
}

/// `y[i] = max(x[i], 0)`. The planted bug: the result goes back into `x`, an input.
///
/// # Safety
/// `x` and `y` hold `n` floats.
unsafe fn relu(x: *const f32, y: *mut f32, n: usize, into_input: bool) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`; writing through `x` is the planted bug.
        unsafe {
            let v = mem::load(x, i).max(0.0);
            let dst = if into_input { x.cast_mut() } else { y };
            mem::store(dst, i, v);
        }
    }
}

#[test]
fn write_to_an_input_buffer() {
    let n = 33;
    let x = random(63, n);
    let run = |into_input: bool| {
        let mut y = vec![0.0f32; n];
        let mut launch = Launch::new("relu", elementwise_config(n));
        let (px, py) = (launch.input("x", &x), launch.output("y", &mut y));
        // SAFETY: `x` and `y` hold `n` floats; both registered; the write to `x` is caught first.
        unsafe { launch.run(|| relu(px, py, n, into_input)) }.map(|()| y)
    };
    let expected = report(
        "relu",
        (0, 0),
        (0, 0),
        Violation::WriteToInput {
            buffer: "x".into(),
            index: 0,
        },
    );
    assert_report(run(true).map(drop), expected);
    assert!(run(false).unwrap().iter().zip(&x).all(|(&y, &x)| y == x.max(0.0)));
}

#[test]
fn pointer_to_a_buffer_not_registered_with_the_launch() {
    // The correct `add`, launched with `b` passed straight through instead of registered.
    let (a, b) = (random(64, 5), random(65, 5));
    let mut c = vec![0.0f32; 5];
    let mut launch = Launch::new("add", config((1, 1), (T, 1), 0));
    let (pa, pc) = (launch.input("a", &a), launch.output("c", &mut c));
    let pb = b.as_ptr();
    let expected = report(
        "add",
        (0, 0),
        (0, 0),
        Violation::UnknownPointer {
            access: Access::Read,
            address: pb as usize,
        },
    );
    // SAFETY: every pointer is valid for 5 floats; the unregistered one is caught before use.
    assert_report(unsafe { launch.run(|| add::add(pa, pb, pc, 5)) }, expected);
}

/// `y[tid] = weights[tid]` from a 4-entry table: threads from 4 on index past it, a panic.
///
/// # Safety
/// `y` holds `blockDim.x` floats.
unsafe fn table_lookup(y: *mut f32) {
    let weights = [0.5f32, 0.25, 0.125, 0.0625];
    let tid = thread::thread_idx_x() as usize;
    let w = weights[tid];
    // SAFETY: `tid < blockDim.x`.
    unsafe { mem::store(y, tid, w) }
}

#[test]
fn panic_in_kernel_code() {
    let mut y = vec![0.0f32; 6];
    let mut launch = Launch::new("table_lookup", config((1, 1), (6, 1), 0));
    let py = launch.output("y", &mut y);
    let expected = report(
        "table_lookup",
        (0, 0),
        (4, 0),
        Violation::Panic {
            message: "index out of bounds: the len is 4 but the index is 4".into(),
        },
    );
    // SAFETY: `y` holds 6 floats and is registered.
    assert_report(unsafe { launch.run(|| table_lookup(py)) }, expected);
}

// ---------------------------------------------------------------------------------------------
// 3. Whole launches
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_launches_are_refused_before_any_thread_runs() {
    let cases = [
        (config((0, 1), (32, 1), 0), "grid (0, 1, 1) has no blocks"),
        (config((4, 0), (32, 1), 0), "grid (4, 0, 1) has no blocks"),
        (config((1, 1), (0, 1), 0), "block (0, 1, 1) has no threads"),
        (
            config((1, 1), (1025, 1), 0),
            "block (1025, 1, 1) has 1025 threads, more than 1024",
        ),
        (
            config((1, 1), (33, 32), 0),
            "block (33, 32, 1) has 1056 threads, more than 1024",
        ),
    ];
    for (cfg, reason) in cases {
        let ran = Mutex::new(false);
        let launch = Launch::new("nothing", cfg);
        let expected = report(
            "nothing",
            (0, 0),
            (0, 0),
            Violation::InvalidLaunch {
                reason: reason.into(),
            },
        );
        // SAFETY: the body touches no kernel memory.
        assert_report(unsafe { launch.run(|| *ran.lock().unwrap() = true) }, expected);
        assert!(!*ran.lock().unwrap(), "a thread of an invalid launch ran");
    }
}

/// Blocks 3, 5 and 6 write past the end of `y` (`4 * gridDim.x` floats); the others write
/// `y[i] = 1`. Block 3 first waits at `slow_rounds` barriers, so blocks 5 and 6 usually fail
/// before it does.
///
/// # Safety
/// `y` holds `4 * gridDim.x` floats; blocks of 4 threads.
unsafe fn fail_in_blocks(y: *mut f32, slow_rounds: u32) {
    let b = thread::block_idx_x();
    let i = thread::index_1d();
    if b == 3 {
        for _ in 0..slow_rounds {
            thread::sync_threads();
        }
    }
    let past_end = 4 * thread::grid_dim_x() as usize;
    // SAFETY: none for blocks 3, 5, 6 (the planted bug).
    unsafe { mem::store(y, if matches!(b, 3 | 5 | 6) { past_end + i } else { i }, 1.0) }
}

/// Runs [`fail_in_blocks`] on 8 blocks of 4 threads.
fn run_fail_in_blocks() -> Result<(), SimError> {
    let mut y = vec![0.0f32; 32];
    let mut launch = Launch::new("fail_in_blocks", config((8, 1), (4, 1), 0));
    let py = launch.output("y", &mut y);
    // SAFETY: `y` holds 32 floats and is registered; the stores past it are caught.
    unsafe { launch.run(|| fail_in_blocks(py, 300)) }
}

#[test]
fn several_failing_blocks_report_the_lowest() {
    let expected = report(
        "fail_in_blocks",
        (3, 0),
        (0, 0),
        Violation::OutOfBounds {
            space: Space::Global,
            buffer: "y".into(),
            access: Access::Write,
            index: 44,
            len: 32,
        },
    );
    for _ in 0..10 {
        assert_report(run_fail_in_blocks(), expected.clone());
    }
}

/// Results of correct and failing launches on several blocks, as one line.
fn fingerprint() -> String {
    let shape @ (m, n, k) = (33, 17, 65);
    let (a, b) = (random(70, m * k), random(71, k * n));
    let naive = run_matmul(
        "matmul_naive",
        matmul::matmul_naive,
        naive_config(m, n),
        (&a, &b),
        shape,
    );
    let tiled = run_matmul(
        "matmul_tiled",
        matmul::matmul_tiled,
        tiled_config(m, n),
        (&a, &b),
        shape,
    );
    let x = random(72, 5 * 300);
    let soft = run_softmax(softmax_config(5), &x, 5, 300, 1.0);
    let err = run_fail_in_blocks().unwrap_err();
    format!(
        "{:016x} {:016x} {:016x} {err}",
        hash(&naive.unwrap()),
        hash(&tiled.unwrap()),
        hash(&soft.unwrap())
    )
}

/// How many OS threads ran the blocks of a 32-block launch whose blocks each take 2 ms.
fn os_threads_used() -> usize {
    let seen = Mutex::new(HashSet::new());
    let mut y = vec![0.0f32; 32 * 4];
    let mut launch = Launch::new("iota", config((32, 1), (4, 1), 0));
    let py = launch.output("y", &mut y);
    let body = || {
        seen.lock().unwrap().insert(std::thread::current().id());
        if thread::thread_idx_x() == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
        // SAFETY: `y` holds 128 floats and is registered.
        unsafe { iota(py, 128) }
    };
    // SAFETY: the body only launches `iota` on the registered buffer.
    unsafe { launch.run(body) }.unwrap();
    let used = seen.lock().unwrap().len();
    used
}

#[test]
#[ignore = "run by `sim_threads_env_changes_nothing`, in a subprocess with GPUKERN_SIM_THREADS set"]
fn sim_threads_child() {
    println!("\nfingerprint: {}", fingerprint());
    println!("os threads: {}", os_threads_used());
}

#[test]
fn sim_threads_env_changes_nothing() {
    let here = fingerprint();
    assert_eq!(fingerprint(), here, "two runs in one process differ");
    let exe = std::env::current_exe().unwrap();
    for workers in [1, 3] {
        let out = Command::new(&exe)
            .args([
                "sim_threads_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("GPUKERN_SIM_THREADS", workers.to_string())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let field = |name: &str| {
            stdout
                .lines()
                .find_map(|l| l.split_once(name).map(|(_, v)| v.to_string()))
                .unwrap_or_else(|| panic!("no {name:?} in the child's output:\n{stdout}"))
        };
        assert_eq!(field("fingerprint: "), here, "GPUKERN_SIM_THREADS={workers}");
        let threads: usize = field("os threads: ").parse().unwrap();
        if workers == 1 {
            assert_eq!(
                threads, 1,
                "GPUKERN_SIM_THREADS=1 ran blocks on {threads} OS threads"
            );
        } else {
            assert!(
                (2..=workers).contains(&threads),
                "{threads} OS threads for {workers} workers"
            );
        }
    }
}
