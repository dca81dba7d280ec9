//! Planted bugs in global memory and kernel code, each next to its fixed version where there is
//! one: an access past a buffer's end, a write to an input, a pointer into no registered buffer,
//! and a panic in kernel code.

use kernels_gpu::add;
use kernels_gpu::gpu::{mem, thread};
use kernels_gpu::sim::{Access, Launch, Space, Violation};

use super::T;
use crate::common::{assert_report, config, elementwise_config, random, report};

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
pub(crate) unsafe fn iota(y: *mut f32, n: usize) {
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
