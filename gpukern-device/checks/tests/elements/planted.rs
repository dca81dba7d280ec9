//! Planted bugs: a misaligned f16x2 pair, an f32 and an f64 read at a misaligned address, and a
//! u8 store one past the end, each reported with kernel, block, thread and index.

use gpukern_device::convert::{load_f16x2, store_f16x2};
use gpukern_device::sim::{Access, Dim3, Launch, SimError, Space, Violation};
use gpukern_device::{f16, mem, thread};

use super::{aligned, config_for, elements, elements_mut};

/// The report of `violation` in thread `thread` of block 0 of `kernel`.
fn report(kernel: &str, thread: u32, violation: Violation) -> SimError {
    SimError {
        kernel: kernel.into(),
        block: Dim3::new(0, 0, 0),
        thread: Dim3::new(thread, 0, 0),
        violation,
    }
}

/// Asserts that `result` is a panic report of thread 0 of block 0 of `kernel` whose message
/// starts with `prefix` (the rest is an address).
fn assert_panic_report(result: Result<(), SimError>, kernel: &str, prefix: &str) {
    let err = result.expect_err("the simulator should have caught the planted bug");
    println!("{err}");
    assert_eq!(
        (err.kernel.as_str(), err.block, err.thread),
        (kernel, Dim3::new(0, 0, 0), Dim3::new(0, 0, 0))
    );
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.starts_with(prefix)),
        "report text: {err}"
    );
}

/// `axpy_f16x2`'s pair copy with a planted bug when `bug`: pair `j` starts at element `2j + 1`,
/// so every pair straddles two 4-byte words (a misaligned-address fault on the GPU).
unsafe fn copy_pairs(x: *const f16, y: *mut f16, n: usize, bug: bool) {
    let i = 2 * thread::index_1d() + usize::from(bug);
    if i + 1 < n {
        // SAFETY: `i + 1 < n`; aligned unless `bug`.
        unsafe { store_f16x2(y, i, load_f16x2(x, i)) }
    }
}

#[test]
fn a_misaligned_f16x2_pair_is_reported() {
    let n = 64;
    let xs = aligned(&vec![f16::ONE; n], f16::ZERO, 0);
    for bug in [false, true] {
        let mut ys = aligned(&vec![f16::ZERO; n], f16::ZERO, 0);
        let y = elements_mut(&mut ys, n);
        let mut launch = Launch::new("copy_pairs", config_for(n / 2));
        let px = launch.input("x", elements(&xs, n));
        let py = launch.output("y", y);
        // SAFETY: `x` and `y` hold `n` f16; the planted misalignment is what is under test.
        let result = unsafe { launch.run(|| copy_pairs(px, py, n, bug)) };
        if bug {
            assert_panic_report(result, "copy_pairs", "misaligned 4-byte pair read at ");
        } else {
            assert_eq!(result, Ok(()));
            assert!(elements(&ys, n).iter().all(|v| *v == f16::ONE));
        }
    }
}

/// Reads `x[i]` as an f32 and an f64 from `offset` bytes into `x` (aligned when the offset is
/// a multiple of 8) and writes their sum to `y[i]`.
unsafe fn read_at_offset(x: *const u64, y: *mut f64, n: usize, offset: usize) {
    let i = thread::index_1d();
    if i < n {
        let base = x.cast::<u8>().wrapping_add(offset);
        // SAFETY: `i < n`; `x` holds `n + 1` words, so both reads stay inside; aligned unless
        // `offset` is not a multiple of the type's size (the planted bug).
        unsafe {
            let a = mem::load(base.cast::<f32>(), 2 * i);
            let b = mem::load(base.cast::<f64>(), i);
            mem::store(y, i, f64::from(a) + b);
        }
    }
}

#[test]
fn misaligned_scalar_reads_are_reported() {
    let n = 40;
    let x = vec![0u64; n + 1];
    for (offset, expected) in [
        (0, None),
        (2, Some("misaligned 4-byte read at ")),
        (4, Some("misaligned 8-byte read at ")),
    ] {
        let mut y = vec![1.0f64; n];
        let mut launch = Launch::new("read_at_offset", config_for(n));
        let px = launch.input("x", &x);
        let py = launch.output("y", &mut y);
        // SAFETY: `x` holds `n + 1` words; the planted misalignment is what is under test.
        let result = unsafe { launch.run(|| read_at_offset(px, py, n, offset)) };
        match expected {
            None => {
                assert_eq!(result, Ok(()));
                assert_eq!(y, vec![0.0; n]);
            }
            Some(prefix) => assert_panic_report(result, "read_at_offset", prefix),
        }
    }
}

/// `scale_u8`'s store with a planted bug when `bug`: the tail guard is `i <= n`, so thread `n`
/// stores one byte past the end of `y`.
unsafe fn store_bytes(y: *mut u8, n: usize, bug: bool) {
    let i = thread::index_1d();
    if i < n || (bug && i == n) {
        // SAFETY: `i < n`, unless `bug` (the planted out-of-bounds store).
        unsafe { mem::store(y, i, i as u8) }
    }
}

#[test]
fn a_u8_store_past_the_end_is_reported_with_its_index() {
    let n = 70;
    for bug in [false, true] {
        let mut y = vec![0u8; n];
        let mut launch = Launch::new("store_bytes", config_for(n));
        let py = launch.output("y", &mut y);
        // SAFETY: `y` holds `n` bytes; the planted store past the end is what is under test.
        let result = unsafe { launch.run(|| store_bytes(py, n, bug)) };
        if bug {
            let err = result.expect_err("the simulator should have caught the planted bug");
            println!("{err}");
            let expected = Violation::OutOfBounds {
                space: Space::Global,
                buffer: "y".into(),
                access: Access::Write,
                index: n,
                len: n,
            };
            assert_eq!(
                err,
                report("store_bytes", n as u32, expected),
                "report text: {err}"
            );
        } else {
            assert_eq!(result, Ok(()));
            assert!(y.iter().enumerate().all(|(i, &v)| v == i as u8));
        }
    }
}
