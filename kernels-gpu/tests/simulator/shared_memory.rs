//! Planted bugs in shared memory, each next to its fixed version: races between two barriers
//! (write after read, read after write, two writes), reads of words no thread wrote, accesses
//! past the launch's `shared_mem_bytes`; and the `gpu::block` reductions, whose barriers make
//! reusing their scratch memory safe.

use kernels_gpu::gpu::{block, mem, shared, thread};
use kernels_gpu::matmul;
use kernels_gpu::sim::{Access, Dim3, Launch, SimError, Space, Violation};

use super::{T, T_FLOATS};
use crate::common::matmul::run_matmul;
use crate::common::{assert_report, config, random, report};

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
