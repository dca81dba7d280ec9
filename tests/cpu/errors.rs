//! Error messages that say what to do, the size check every allocation passes, and which
//! errors of `Gpu::new(0)` make the CUDA trials ignored.

use gpukern::Error;
use ndarray::Array2;

use crate::common::{self, assert_too_large};

#[test]
fn error_messages_say_what_to_do() {
    let cases: Vec<(Error, Vec<&str>)> = vec![
        (
            Error::NoDriver,
            vec![
                "libcuda",
                "NVIDIA driver",
                "Gpu::simulator()",
                "GPUKERN_DEVICE=sim",
            ],
        ),
        (
            Error::NoDevice {
                ordinal: 3,
                reason: "CUDA_ERROR_INVALID_DEVICE".into(),
            },
            vec![
                "device 3",
                "CUDA_ERROR_INVALID_DEVICE",
                "nvidia-smi",
                "Gpu::simulator()",
            ],
        ),
        (
            Error::UnsupportedDevice {
                major: 7,
                minor: 5,
                built: "sm_80, sm_90".into(),
            },
            vec!["7.5", "sm_80, sm_90", "GPUKERN_PTX_ARCHS=sm_75"],
        ),
        (
            Error::ShapeMismatch {
                op: "matmul",
                lhs: vec![2, 3],
                rhs: vec![4, 5],
                rule: "A's columns must equal B's rows",
            },
            vec!["matmul", "[2, 3]", "[4, 5]", "A's columns must equal B's rows"],
        ),
        (
            Error::TooLarge {
                op: "softmax",
                detail: "grid x extent 5, the device allows 4".into(),
            },
            vec!["softmax", "too large", "the device allows 4"],
        ),
        (
            Error::OutOfMemory { bytes: 123456 },
            vec!["123456 bytes", "free device buffers"],
        ),
        (
            Error::InvalidArgument {
                op: "softmax",
                detail: "inverse temperature NaN".into(),
            },
            vec!["softmax", "inverse temperature NaN"],
        ),
        (
            Error::WrongDevice { op: "add" },
            vec!["add", "another device", "upload it with the Gpu you compute on"],
        ),
    ];
    for (error, needles) in cases {
        let msg = error.to_string();
        for needle in needles {
            assert!(
                msg.contains(needle),
                "{error:?}: message {msg:?} lacks {needle:?}"
            );
        }
    }
}

#[test]
fn simulator_errors_name_the_kernel_and_the_thread() {
    use gpukern::kernels::sim::{Dim3, SimError, Violation};
    let sim = SimError {
        kernel: "softmax_block_reduce".into(),
        block: Dim3::new(2, 0, 0),
        thread: Dim3::new(17, 0, 0),
        violation: Violation::BarrierNotReached {
            barrier: "softmax.rs:1:1".into(),
            waiting: 255,
        },
    };
    let msg = Error::from(sim).to_string();
    for needle in [
        "simulator",
        "softmax_block_reduce",
        "(2, 0, 0)",
        "(17, 0, 0)",
        "softmax.rs:1:1",
    ] {
        assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
    }
}

/// `checked_len`, the one size check every allocation passes: the largest element count whose
/// bytes fit `isize::MAX` passes, one more does not, and products that overflow `usize` are
/// refused whatever their factors.
#[test]
fn checked_len_stops_at_what_a_host_vec_holds() {
    use gpukern::buffer::{MAX_ELEMENTS, checked_len};
    assert_eq!(MAX_ELEMENTS * 4, isize::MAX as usize - 3);
    assert_eq!(checked_len("t", &[MAX_ELEMENTS]).ok(), Some(MAX_ELEMENTS));
    assert_eq!(checked_len("t", &[MAX_ELEMENTS, 1]).ok(), Some(MAX_ELEMENTS));
    assert_eq!(checked_len("t", &[0, usize::MAX]).ok(), Some(0));
    assert_eq!(checked_len("t", &[]).ok(), Some(1));
    assert_too_large(
        checked_len("t", &[MAX_ELEMENTS + 1]),
        &["t is too large", "at most"],
    );
    // 2^62 + 2^31 floats: 2^64 + 2^33 bytes, which wraps to 8 GiB unchecked.
    assert_too_large(checked_len("zeros", &[(1 << 62) + (1 << 31)]), &["zeros"]);
    // The matmul of the issue: a 2^31 x 2^31 result is 2^62 elements, 2^64 bytes.
    assert_too_large(
        checked_len("t", &[1 << 31, 1 << 31]),
        &["2147483648 x 2147483648"],
    );
    assert_too_large(checked_len("t", &[usize::MAX, 2]), &[]);
    assert_too_large(checked_len("t", &[2, usize::MAX / 2 + 1, 0]), &[]);
}

/// The free function of the issue: a (2^31 x 0) by (0 x 2^31) matmul is refused as too large
/// (it panicked with "capacity overflow" in the simulator).
#[test]
fn matmul_whose_result_cannot_exist_is_too_large() {
    let a = Array2::<f32>::zeros((1 << 31, 0));
    let b = Array2::<f32>::zeros((0, 1 << 31));
    assert_too_large(gpukern::matmul(&a, &b), &["matrix"]);
    let sim = gpukern::Gpu::simulator();
    match (sim.upload_matrix(&a), sim.upload_matrix(&b)) {
        (Ok(da), Ok(db)) => assert_too_large(sim.matmul(&da, &db).map(|c| c.dim()), &["matrix"]),
        _ => panic!("uploading empty matrices failed"),
    }
    // The CPU reference too: its f64 product of 2^62 elements cannot exist either.
    assert_too_large(gpukern::cpu::matmul(&a, &b).map(|c| c.dim()), &["cpu::matmul"]);
}

/// Which "Gpu::new(0) failed" outcomes make the CUDA trials ignored: only no driver and no
/// device, and never with `GPUKERN_REQUIRE_GPU=1`; a failing GPU (a driver error) runs them, so
/// they fail. The rule the harnesses had (ignore on any error) is caught.
#[test]
fn only_a_missing_gpu_makes_cuda_trials_ignored() {
    use cudarc::driver::{DriverError, sys::CUresult};
    let failing = || Error::Driver {
        during: "opening the CUDA device",
        source: DriverError(CUresult::CUDA_ERROR_NOT_INITIALIZED),
    };
    let no_device = || Error::NoDevice {
        ordinal: 0,
        reason: "CUDA_ERROR_NO_DEVICE".into(),
    };
    // (name, what Gpu::new returned, GPUKERN_REQUIRE_GPU=1, ignored). Named, not printed: a
    // DriverError's text asks libcuda, which this machine may not have.
    let cases: Vec<(&str, Result<(), Error>, bool, bool)> = vec![
        ("gpu", Ok(()), false, false),
        ("gpu, required", Ok(()), true, false),
        ("no driver", Err(Error::NoDriver), false, true),
        ("no device", Err(no_device()), false, true),
        ("no driver, required", Err(Error::NoDriver), true, false),
        ("no device, required", Err(no_device()), true, false),
        ("failing gpu", Err(failing()), false, false),
        ("failing gpu, required", Err(failing()), true, false),
    ];
    let wrong = |decide: &dyn Fn(&Result<(), Error>, bool) -> bool| {
        cases
            .iter()
            .filter(|(_, opened, require, ignored)| decide(opened, *require) != *ignored)
            .map(|(name, ..)| *name)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        wrong(&|o, r| common::cuda_trials_ignored(o, r)),
        Vec::<&str>::new()
    );
    let old_rule = |o: &Result<(), Error>, r: bool| o.is_err() && !r;
    assert_eq!(
        wrong(&old_rule),
        ["failing gpu"],
        "the old rule ignores a failing GPU"
    );
}
