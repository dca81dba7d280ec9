//! Warp shuffles in the simulator ([`gpukern_device::warp`]), tested like the rest of it
//! (`tests/simulator.rs`):
//!
//! 1. The exchange itself: every lane gets its partner's value, in 1-D and 2-D blocks, and the
//!    warp reductions give every lane the same result.
//! 2. Each rule a shuffle adds, proved on a test-only kernel with one planted bug: a lane that
//!    returns before its warp's shuffle, lanes at different shuffles, a lane at a barrier while
//!    its warp shuffles, a warp of fewer than 32 threads, and a shuffle taken for a barrier (it
//!    orders no shared memory). Next to each runs its fixed version, which must pass.
//! 3. 16-byte accesses from a buffer that does not start on a 16-byte boundary, as the one-pass
//!    softmax makes them: bounds are checked in bytes.

mod common;

use common::assert_report;
use gpukern_device::sim::{Access, Dim3, Launch, LaunchConfig, SimError, Space, Violation};
use gpukern_device::vector::{self, F4};
use gpukern_device::{mem, shared, thread, warp};

/// A launch of one block of `block` threads.
fn one_block(block: (u32, u32), shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(block.0, block.1, 1),
        shared_mem_bytes,
    }
}

/// The report expected from `kernel` in block 0 at thread `(x, 0, 0)`.
fn report(kernel: &str, x: u32, violation: Violation) -> SimError {
    SimError {
        kernel: kernel.to_string(),
        block: Dim3::new(0, 0, 0),
        thread: Dim3::new(x, 0, 0),
        violation,
    }
}

/// `file:line:column` of the call `call` on the line of this file that ends with `marker`, as
/// the simulator names a shuffle or barrier.
fn site(call: &str, marker: &str) -> String {
    common::site_in(include_str!("warp.rs"), file!(), call, marker)
}

/// `n` floats, distinct and exact: `i * 0.25 - 7`.
fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.25 - 7.0).collect()
}

/// The linear index of the running thread in its block.
fn linear_tid() -> usize {
    (thread::thread_idx_y() * thread::block_dim_x() + thread::thread_idx_x()) as usize
}

// ---------------------------------------------------------------------------------------------
// 1. The exchange
// ---------------------------------------------------------------------------------------------

/// `out[tid * 32 + mask] = shfl_xor(x[tid], mask)` for every mask.
///
/// # Safety
/// `x` holds one float per thread, `out` 32 per thread.
unsafe fn all_masks(x: *const f32, out: *mut f32) {
    let tid = linear_tid();
    // SAFETY: indices below the sizes above.
    unsafe {
        let v = mem::load(x, tid);
        for mask in 0..32 {
            mem::store(out, tid * 32 + mask as usize, warp::shfl_xor(v, mask));
        }
    }
}

fn run_all_masks(block: (u32, u32)) -> (Vec<f32>, Vec<f32>) {
    let n = (block.0 * block.1) as usize;
    let x = ramp(n);
    let mut out = vec![0.0f32; n * 32];
    let mut launch = Launch::new("all_masks", one_block(block, 0));
    let (px, pout) = (launch.input("x", &x), launch.output("out", &mut out));
    // SAFETY: sizes as `all_masks` asks.
    unsafe { launch.run(|| all_masks(px, pout)) }.unwrap();
    (x, out)
}

#[test]
fn shfl_xor_returns_the_value_of_lane_xor_mask() {
    let (x, out) = run_all_masks((96, 1));
    for tid in 0..96 {
        for mask in 0..32 {
            let partner = tid / 32 * 32 + ((tid % 32) ^ mask);
            assert_eq!(out[tid * 32 + mask], x[partner], "thread {tid}, mask {mask}");
        }
    }
}

#[test]
fn warps_of_a_2d_block_are_runs_of_32_linear_indices() {
    // 16 x 4 threads: warp 0 is rows y = 0, 1; warp 1 rows 2, 3.
    let (x, out) = run_all_masks((16, 4));
    for tid in 0..64 {
        for mask in [1, 8, 16] {
            let partner = tid / 32 * 32 + ((tid % 32) ^ mask);
            assert_eq!(
                out[tid * 32 + mask],
                x[partner],
                "linear thread {tid}, mask {mask}"
            );
        }
    }
}

/// `out[3 * tid ..]` = the warp's sum, max and min of `x`.
///
/// # Safety
/// `x` holds one float per thread, `out` three per thread.
unsafe fn reductions(x: *const f32, out: *mut f32) {
    let tid = linear_tid();
    // SAFETY: indices below the sizes above.
    unsafe {
        let v = mem::load(x, tid);
        mem::store(out, 3 * tid, warp::reduce_sum(v));
        mem::store(out, 3 * tid + 1, warp::reduce_max(v));
        mem::store(out, 3 * tid + 2, warp::reduce_min(v));
    }
}

#[test]
fn warp_reductions_give_every_lane_the_same_result() {
    let mut x = ramp(96);
    x[70] = f32::NAN; // warp 2: max and min are NaN, the sum too
    let mut out = vec![0.0f32; 3 * 96];
    let mut launch = Launch::new("reductions", one_block((96, 1), 0));
    let (px, pout) = (launch.input("x", &x), launch.output("out", &mut out));
    // SAFETY: sizes as `reductions` asks.
    unsafe { launch.run(|| reductions(px, pout)) }.unwrap();
    for w in 0..3 {
        let lanes = &x[32 * w..32 * w + 32];
        let has_nan = lanes.iter().any(|v| v.is_nan());
        for lane in 0..32 {
            let tid = 32 * w + lane;
            let (sum, max, min) = (out[3 * tid], out[3 * tid + 1], out[3 * tid + 2]);
            // Every lane bit-identical to lane 0 of its warp.
            let first = 32 * w;
            for (got, lane0) in [sum, max, min].iter().zip(&out[3 * first..3 * first + 3]) {
                assert_eq!(got.to_bits(), lane0.to_bits(), "warp {w}, lane {lane}");
            }
            if has_nan {
                assert!(sum.is_nan() && max.is_nan() && min.is_nan(), "warp {w}");
            } else {
                let want: f64 = lanes.iter().map(|&v| f64::from(v)).sum();
                assert!(
                    (f64::from(sum) - want).abs() < 1e-4,
                    "warp {w}: sum {sum}, want {want}"
                );
                assert_eq!(max, lanes.iter().copied().fold(f32::NEG_INFINITY, f32::max));
                assert_eq!(min, lanes.iter().copied().fold(f32::INFINITY, f32::min));
            }
        }
    }
}

/// Warp sums around a block barrier: `out[tid] = warp_sum(warp_sum(x) * tid_in_block_order)`
/// with a shared-memory exchange of the first sums between the two.
///
/// # Safety
/// `x` and `out` hold one float per thread; one float of shared memory per thread.
unsafe fn shuffles_around_a_barrier(x: *const f32, out: *mut f32) {
    let tid = linear_tid();
    let n = (thread::block_dim_x() * thread::block_dim_y()) as usize;
    let s = shared::dynamic::<f32>();
    // SAFETY: indices below `n`, the sizes above.
    unsafe {
        let first = warp::reduce_sum(mem::load(x, tid));
        mem::store(s, tid, first);
        thread::sync_threads();
        let other = mem::load(s, (tid + 32) % n);
        mem::store(out, tid, warp::reduce_sum(other));
    }
}

#[test]
fn shuffles_and_barriers_mix() {
    let x = ramp(64);
    let mut out = vec![0.0f32; 64];
    let mut launch = Launch::new("shuffles_around_a_barrier", one_block((64, 1), 64 * 4));
    let (px, pout) = (launch.input("x", &x), launch.output("out", &mut out));
    // SAFETY: sizes as the kernel asks.
    unsafe { launch.run(|| shuffles_around_a_barrier(px, pout)) }.unwrap();
    let warp_sum = |w: usize| x[32 * w..32 * w + 32].iter().sum::<f32>();
    for (tid, &got) in out.iter().enumerate() {
        // Each lane read the other warp's sum; 32 copies of it.
        let want = 32.0 * warp_sum(1 - tid / 32);
        assert_eq!(got, want, "thread {tid}");
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Planted bugs
// ---------------------------------------------------------------------------------------------

/// `out[tid] = warp sum of x`; the planted bug: lane 5 returns first.
///
/// # Safety
/// `x` and `out` hold one float per thread.
unsafe fn early_lane(x: *const f32, out: *mut f32, bug: bool) {
    let tid = linear_tid();
    if bug && tid % 32 == 5 {
        return;
    }
    // SAFETY: `tid` is below the sizes above.
    unsafe {
        let sum = warp::shfl_xor(mem::load(x, tid), 1); // early_lane
        mem::store(out, tid, sum);
    }
}

#[test]
fn lane_returning_before_its_warps_shuffle() {
    let x = ramp(32);
    let run = |bug: bool| {
        let mut out = vec![0.0f32; 32];
        let mut launch = Launch::new("early_lane", one_block((32, 1), 0));
        let (px, pout) = (launch.input("x", &x), launch.output("out", &mut out));
        // SAFETY: sizes as the kernel asks.
        unsafe { launch.run(|| early_lane(px, pout, bug)) }.map(|()| out)
    };
    let expected = report(
        "early_lane",
        5,
        Violation::ShuffleNotReached {
            shuffle: site("warp::shfl_xor", "// early_lane"),
            waiting: 31,
        },
    );
    assert_report(run(true).map(drop), expected);
    let out = run(false).unwrap();
    assert!((0..32).all(|i| out[i] == x[i ^ 1]));
}

/// The planted bug: the two half-warps shuffle at different places in the code.
///
/// # Safety
/// `out` holds one float per thread.
#[allow(clippy::if_same_then_else)] // the same shuffle at two places in the code is the bug
unsafe fn split_shuffle(out: *mut f32, bug: bool) {
    let tid = linear_tid();
    let v = tid as f32;
    let got = if bug && tid % 32 >= 16 {
        warp::shfl_xor(v, 16) // split_shuffle: upper half
    } else {
        warp::shfl_xor(v, 16) // split_shuffle: lower half
    };
    // SAFETY: `tid` is below the size above.
    unsafe { mem::store(out, tid, got) };
}

#[test]
fn lanes_of_a_warp_at_different_shuffles() {
    let run = |bug: bool| {
        let mut out = vec![0.0f32; 32];
        let mut launch = Launch::new("split_shuffle", one_block((32, 1), 0));
        let pout = launch.output("out", &mut out);
        // SAFETY: size as the kernel asks.
        unsafe { launch.run(|| split_shuffle(pout, bug)) }.map(|()| out)
    };
    let expected = report(
        "split_shuffle",
        0,
        Violation::DifferentShuffles {
            here: site("warp::shfl_xor", "// split_shuffle: lower half"),
            there: format!(
                "the warp shuffle at {}",
                site("warp::shfl_xor", "// split_shuffle: upper half")
            ),
            other: Dim3::new(16, 0, 0),
        },
    );
    assert_report(run(true).map(drop), expected);
    let out = run(false).unwrap();
    assert!((0..32).all(|i| out[i] == (i ^ 16) as f32));
}

/// The planted bug: lane 3 goes to the block barrier first, while its warp shuffles.
///
/// # Safety
/// `out` holds one float per thread.
unsafe fn barrier_before_shuffle(out: *mut f32, bug: bool) {
    let tid = linear_tid();
    if bug && tid == 3 {
        thread::sync_threads(); // barrier_before_shuffle: early
    }
    let got = warp::shfl_xor(tid as f32, 2); // barrier_before_shuffle
    if !(bug && tid == 3) {
        thread::sync_threads(); // barrier_before_shuffle: late
    }
    // SAFETY: `tid` is below the size above.
    unsafe { mem::store(out, tid, got) };
}

#[test]
fn lane_waiting_at_a_barrier_while_its_warp_shuffles() {
    let run = |bug: bool| {
        let mut out = vec![0.0f32; 64];
        let mut launch = Launch::new("barrier_before_shuffle", one_block((64, 1), 0));
        let pout = launch.output("out", &mut out);
        // SAFETY: size as the kernel asks.
        unsafe { launch.run(|| barrier_before_shuffle(pout, bug)) }.map(|()| out)
    };
    let expected = report(
        "barrier_before_shuffle",
        0,
        Violation::DifferentShuffles {
            here: site("warp::shfl_xor", "// barrier_before_shuffle"),
            there: format!(
                "the barrier at {}",
                site("thread::sync_threads()", "// barrier_before_shuffle: early")
            ),
            other: Dim3::new(3, 0, 0),
        },
    );
    assert_report(run(true).map(drop), expected);
    let out = run(false).unwrap();
    assert!((0..64).all(|i| out[i] == (i ^ 2) as f32));
}

/// `out[tid] = shfl_xor(tid, 1)`.
///
/// # Safety
/// `out` holds one float per thread.
unsafe fn swap_pairs(out: *mut f32) {
    let tid = linear_tid();
    let got = warp::shfl_xor(tid as f32, 1); // swap_pairs
                                             // SAFETY: `tid` is below the size above.
    unsafe { mem::store(out, tid, got) };
}

#[test]
fn shuffle_in_a_warp_of_fewer_than_32_threads() {
    let run = |threads: u32| {
        let mut out = vec![0.0f32; threads as usize];
        let mut launch = Launch::new("swap_pairs", one_block((threads, 1), 0));
        let pout = launch.output("out", &mut out);
        // SAFETY: size as the kernel asks.
        unsafe { launch.run(|| swap_pairs(pout)) }.map(|()| out)
    };
    let expected = report(
        "swap_pairs",
        32,
        Violation::PartialWarp {
            shuffle: site("warp::shfl_xor", "// swap_pairs"),
            lanes: 16,
        },
    );
    assert_report(run(48).map(drop), expected);
    let out = run(64).unwrap();
    assert!((0..64).all(|i| out[i] == (i ^ 1) as f32));
}

/// Warp 1 leaves before warp 0 shuffles: a warp may leave as a whole.
///
/// # Safety
/// `out` holds one float per thread.
unsafe fn second_warp_leaves(out: *mut f32) {
    let tid = linear_tid();
    if tid >= 32 {
        return;
    }
    let got = warp::reduce_sum(1.0);
    // SAFETY: `tid` is below the size above.
    unsafe { mem::store(out, tid, got) };
}

#[test]
fn a_warp_may_leave_as_a_whole() {
    let mut out = vec![0.0f32; 64];
    let mut launch = Launch::new("second_warp_leaves", one_block((64, 1), 0));
    let pout = launch.output("out", &mut out);
    // SAFETY: size as the kernel asks.
    unsafe { launch.run(|| second_warp_leaves(pout)) }.unwrap();
    assert!(out[..32].iter().all(|&v| v == 32.0));
    assert!(out[32..].iter().all(|&v| v == 0.0));
}

/// Lane 1 reads what lane 0 wrote to shared memory. The planted bug: a shuffle, not a barrier,
/// between the write and the read; a shuffle exchanges registers and orders no memory.
///
/// # Safety
/// `out` holds one float per thread; one float of shared memory.
unsafe fn shuffle_as_barrier(out: *mut f32, bug: bool) {
    let tid = linear_tid();
    let s = shared::dynamic::<f32>();
    // SAFETY: index 0 of one float of shared memory; `tid` below the size of `out`.
    unsafe {
        if tid == 0 {
            mem::store(s, 0, 42.0);
        }
        let partner = warp::shfl_xor(tid as f32, 1);
        if !bug {
            thread::sync_threads();
        }
        let seen = if tid == 1 { mem::load(s, 0) } else { 0.0 };
        mem::store(out, tid, partner + seen);
    }
}

#[test]
fn a_shuffle_orders_no_shared_memory() {
    let run = |bug: bool| {
        let mut out = vec![0.0f32; 32];
        let mut launch = Launch::new("shuffle_as_barrier", one_block((32, 1), 4));
        let pout = launch.output("out", &mut out);
        // SAFETY: sizes as the kernel asks.
        unsafe { launch.run(|| shuffle_as_barrier(pout, bug)) }.map(|()| out)
    };
    let expected = report(
        "shuffle_as_barrier",
        1,
        Violation::SharedRace {
            index: 0,
            access: Access::Read,
            other: Dim3::new(0, 0, 0),
            other_access: Access::Write,
        },
    );
    assert_report(run(true).map(drop), expected);
    let out = run(false).unwrap();
    assert_eq!(out[1], 0.0 + 42.0);
    assert_eq!(out[0], 1.0);
}

// ---------------------------------------------------------------------------------------------
// 3. 16-byte accesses from a buffer that does not start on a 16-byte boundary
// ---------------------------------------------------------------------------------------------

/// `out[0..4]` = the 16-byte vector at float `at` of `x`.
///
/// # Safety
/// `x.add(at)` is 16-byte aligned with four floats of `x` there; `out` holds four floats.
unsafe fn vector_at(x: *const f32, out: *mut f32, at: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        let v = vector::load4(x, at);
        for (i, &f) in v.0.iter().enumerate() {
            mem::store(out, i, f);
        }
    }
}

#[test]
fn a_16_byte_read_past_a_buffer_that_starts_off_a_16_byte_boundary() {
    // Twelve floats starting 4 bytes past a 16-byte boundary: the aligned vectors in them are
    // floats 3..7 and 7..11; the next aligned vector, floats 11..15, ends 12 bytes past the end.
    let storage = [
        F4([0.0, 1.0, 2.0, 3.0]),
        F4([4.0, 5.0, 6.0, 7.0]),
        F4([8.0, 9.0, 10.0, 11.0]),
        F4([12.0, 13.0, 14.0, 15.0]),
    ];
    // SAFETY: `storage` is 16 contiguous floats.
    let floats: &[f32] = unsafe { std::slice::from_raw_parts(storage.as_ptr().cast::<f32>(), 16) };
    let x = &floats[1..13];
    let run = |at: usize| {
        let mut out = [0.0f32; 4];
        let mut launch = Launch::new("vector_at", one_block((1, 1), 0));
        let (px, pout) = (launch.input("x", x), launch.output("out", &mut out));
        // SAFETY: `x + at` is 16-byte aligned; the read past the end is the planted bug.
        unsafe { launch.run(|| vector_at(px, pout, at)) }.map(|()| out)
    };
    assert_eq!(run(3).unwrap(), [4.0, 5.0, 6.0, 7.0]);
    assert_eq!(run(7).unwrap(), [8.0, 9.0, 10.0, 11.0]);
    let expected = report(
        "vector_at",
        0,
        Violation::OutOfBounds {
            space: Space::Global,
            buffer: "x".into(),
            access: Access::Read,
            index: 2, // 44 bytes into `x`, in 16-byte units
            len: 12,
        },
    );
    assert_report(run(11).map(drop), expected);
}
