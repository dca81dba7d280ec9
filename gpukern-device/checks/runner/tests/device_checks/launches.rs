//! `write_index_1d`, `assert_non_negative` on good input (and, in the simulator, on a planted
//! negative element), and launches a GPU would refuse or crash on, through a generated launcher:
//! each must come back as an `Error`, and the module must launch fine afterwards.

use gpukern::gpukern_device::sim::{Dim3, Violation};
use gpukern::{Error, Gpu, LaunchConfig, Module};
use gpukern_device_checks::bounds::{BOUNDED_THREADS, bounded_write_index};
use gpukern_device_checks::indices::{warp_votes, write_index_1d, write_index_3d};
use gpukern_device_checks::print::assert_non_negative;
use libtest_mimic::Trial;
use rand::rngs::StdRng;

use crate::{CHECKS, Check, Sizes, Target, expect_all, expect_eq, linear, trial};

/// Runs `write_index_1d` over `n` elements of a buffer of `n + 3` on `module`; checks the
/// indices and the untouched tail.
fn write_indices(module: &Module, n: usize) -> Check {
    let gpu = module.gpu();
    let mut out = gpu.upload(&vec![u32::MAX; n + 3])?;
    // SAFETY: `out` holds more than `n` elements.
    unsafe { write_index_1d::launch(module, linear(n), &mut out, n) }?;
    let want: Vec<u32> = (0..n as u32).chain([u32::MAX; 3]).collect();
    expect_all(
        &format!("write_index_1d, n {n}"),
        &out.to_vec()?,
        &want,
        |a, b| a == b,
    )
}

/// `write_index_3d` over a ragged 3-D box (13 x 7 x 5 in a grid of 8 x 4 x 2 blocks), and
/// `warp_votes` over 2 blocks of 96 threads against the votes computed on the CPU.
fn indices_3d_and_votes(module: &Module, _: &Sizes, _: &mut StdRng) -> Check {
    let gpu = module.gpu();
    let (nx, ny, nz) = (13, 7, 5);
    let len = nx * ny * nz;
    let mut out = gpu.upload(&vec![u32::MAX; len + 2])?;
    let config = LaunchConfig {
        grid: (2, 2, 3),
        block: (8, 4, 2),
        shared_mem_bytes: 0,
    };
    // SAFETY: `out` holds more than `nx * ny * nz` elements.
    unsafe { write_index_3d::launch(module, config, &mut out, nx, ny, nz) }?;
    let want: Vec<u32> = (0..len as u32).chain([u32::MAX; 2]).collect();
    expect_all("write_index_3d", &out.to_vec()?, &want, |a, b| a == b)?;
    let warps = 6;
    let mut votes = gpu.zeros_of::<u32>(5 * warps)?;
    let config = LaunchConfig {
        grid: (2, 1, 1),
        block: (96, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: 5 elements per warp of the launch.
    unsafe { warp_votes::launch(module, config, &mut votes) }?;
    let want: Vec<u32> = (0..warps)
        .flat_map(|w| {
            let ballot = (0..32u32)
                .filter(|&l| (l as usize + w).is_multiple_of(3))
                .fold(0u32, |b, l| b | 1 << l);
            [
                ballot,
                1,
                0,
                u32::from(ballot != 0),
                u32::from(ballot == u32::MAX),
            ]
        })
        .collect();
    expect_all("warp_votes", &votes.to_vec()?, &want, |a, b| a == b)
}

fn indices(module: &Module, sizes: &Sizes, _: &mut StdRng) -> Check {
    for &n in sizes.elements {
        write_indices(module, n)?;
    }
    Ok(())
}

/// The grid of 4 blocks of 256 threads the assertion trials use (1000 elements).
const ASSERT_GRID: LaunchConfig = LaunchConfig {
    grid: (4, 1, 1),
    block: (256, 1, 1),
    shared_mem_bytes: 0,
};

fn assert_passes(module: &Module, _: &Sizes, _: &mut StdRng) -> Check {
    let gpu = module.gpu();
    let x = gpu.upload(&(0..1000).map(|i| i as f32 * 0.5).collect::<Vec<f32>>())?;
    // SAFETY: `x` holds 1000 elements.
    unsafe { assert_non_negative::launch(module, ASSERT_GRID, &x, 1000) }?;
    Ok(gpu.synchronize()?)
}

/// The `file:line` of the checks crate's `device_assert!`.
fn assert_location() -> String {
    let source = include_str!("../../../src/print.rs");
    let line = source
        .lines()
        .position(|l| l.contains("device_assert!("))
        .map_or(0, |i| i + 1);
    format!("gpukern-device/checks/src/print.rs:{line}")
}

/// In the simulator (no context to poison: in process), x[300] = -1 stops the launch with the
/// assertion of block 1, thread 44.
fn sim_assert_fails(module: &Module, _: &Sizes, _: &mut StdRng) -> Check {
    let gpu = module.gpu();
    let mut x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    x[300] = -1.0;
    let x = gpu.upload(&x)?;
    // SAFETY: `x` holds 1000 elements.
    let result = unsafe { assert_non_negative::launch(module, ASSERT_GRID, &x, 1000) };
    let Err(Error::Simulator(report)) = result else {
        return Err(format!("x[300] = -1: {result:?}, want a simulator report").into());
    };
    let want = Violation::Assertion {
        message: "x[i] >= 0".into(),
        location: assert_location(),
    };
    expect_eq(
        "the report",
        (
            report.kernel.as_str(),
            report.block,
            report.thread,
            &report.violation,
        ),
        (
            "assert_non_negative",
            Dim3::new(1, 0, 0),
            Dim3::new(44, 0, 0),
            &want,
        ),
    )
}

/// Fails unless `result` is the error `is` accepts (`want` describes it).
fn refused(what: &str, result: gpukern::Result<()>, want: &str, is: impl Fn(&Error) -> bool) -> Check {
    match result {
        Err(e) if is(&e) => Ok(()),
        other => Err(format!("{what}: {other:?}, want {want}").into()),
    }
}

/// Launches a GPU would refuse or crash on: each an `Error` before anything runs; then a good
/// launch on the same module still works.
fn bad_launches(module: &Module, _: &Sizes, _: &mut StdRng) -> Check {
    let gpu = module.gpu();
    let n = 1000;
    let mut out = gpu.zeros_of::<u32>(n)?;
    let launch = |config: LaunchConfig, on: &Module, out: &mut gpukern::DeviceVec<u32>| {
        // SAFETY: `out` holds `n` elements (the launches under test are refused anyway).
        unsafe { write_index_1d::launch(on, config, out, n) }
    };
    let big_block = LaunchConfig {
        block: (2048, 1, 1),
        ..linear(n)
    };
    let too_large = |e: &Error| {
        matches!(
            e,
            Error::TooLarge {
                op: "write_index_1d",
                ..
            }
        )
    };
    refused(
        "a block of 2048 threads",
        launch(big_block, module, &mut out),
        "TooLarge",
        too_large,
    )?;
    let empty = LaunchConfig {
        grid: (0, 1, 1),
        ..linear(n)
    };
    let invalid = |e: &Error| {
        matches!(
            e,
            Error::InvalidArgument {
                op: "write_index_1d",
                ..
            }
        )
    };
    refused(
        "grid x = 0",
        launch(empty, module, &mut out),
        "InvalidArgument",
        invalid,
    )?;
    let shared = LaunchConfig {
        shared_mem_bytes: gpu.limits().max_shared_mem_per_block_optin + 1,
        ..linear(n)
    };
    refused(
        "shared memory above the limit",
        launch(shared, module, &mut out),
        "TooLarge",
        too_large,
    )?;

    // A module of another crate: gpukern's own kernels.
    let library = gpu.load(&gpukern::ptx::KERNELS)?;
    let other_crate =
        |e: &Error| matches!(e, Error::InvalidArgument { detail, .. } if detail.contains(CHECKS.krate));
    refused(
        "a checks kernel on kernels_gpu's module",
        launch(linear(n), &library, &mut out),
        "InvalidArgument naming the crate",
        other_crate,
    )?;

    // Buffers of another Gpu (CUDA only: every simulator buffer is the simulator's).
    let wrong = |e: &Error| matches!(e, Error::WrongDevice { op: "write_index_1d" });
    if !gpu.is_simulator() {
        let mut sim_out = Gpu::simulator().zeros_of::<u32>(n)?;
        refused(
            "a simulator buffer on CUDA",
            launch(linear(n), module, &mut sim_out),
            "WrongDevice",
            wrong,
        )?;
        let sim_module = Gpu::simulator().load(&CHECKS)?;
        refused(
            "a CUDA buffer in the simulator",
            launch(linear(n), &sim_module, &mut out),
            "WrongDevice",
            wrong,
        )?;
        // Two handles of device 0 have their own streams: a buffer of one is not the other's.
        let other = Gpu::new(0)?;
        let mut other_out = other.zeros_of::<u32>(n)?;
        refused(
            "a buffer of another Gpu::new(0)",
            launch(linear(n), module, &mut other_out),
            "WrongDevice",
            wrong,
        )?;
    }
    expect_eq("out after the refused launches", out.to_vec()?, vec![0; n])?;
    write_indices(module, n)
}

/// The launch trials of one backend.
pub fn trials(target: &Target) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "indices::write_index_1d", indices),
        trial(target, "indices::index_3d_and_warp_votes", indices_3d_and_votes),
        trial(target, "assert::passes_on_good_input", assert_passes),
        trial(target, "launches::bad_launches_are_errors", bad_launches),
        trial(target, "launches::launch_bounds", launch_bounds),
    ];
    if target.prefix == "sim" {
        trials.push(trial(
            target,
            "assert::a_negative_element_fails_in_block_1_thread_44",
            sim_assert_fails,
        ));
    }
    trials
}

/// `bounded_write_index` (`#[kernel(launch_bounds(384, 1))]`): its launcher states the bounds;
/// blocks of 384 threads (and fewer) run it over ragged lengths; a block of 385 or of 8 x 8 x 8
/// threads is an `InvalidArgument` naming the launch bounds, before the driver sees it (which
/// would refuse it with a bare CUDA_ERROR_INVALID_VALUE); the module launches fine afterwards.
fn launch_bounds(module: &Module, sizes: &Sizes, _: &mut StdRng) -> Check {
    expect_eq(
        "MAX_THREADS",
        bounded_write_index::MAX_THREADS,
        Some(BOUNDED_THREADS),
    )?;
    expect_eq("MIN_BLOCKS", bounded_write_index::MIN_BLOCKS, Some(1))?;
    expect_eq("write_index_1d::MAX_THREADS", write_index_1d::MAX_THREADS, None)?;
    let gpu = module.gpu();
    let run = |block: (u32, u32, u32), n: usize| -> gpukern::Result<Vec<u32>> {
        let mut out = gpu.upload(&vec![u32::MAX; n + 3])?;
        let threads = (block.0 * block.1 * block.2) as usize;
        let config = LaunchConfig {
            grid: (n.div_ceil(threads) as u32 + 1, 1, 1),
            block,
            shared_mem_bytes: 0,
        };
        // SAFETY: `out` holds more than `n` elements.
        unsafe { bounded_write_index::launch(module, config, &mut out, n) }?;
        out.to_vec()
    };
    for &n in sizes.elements {
        for block in [(BOUNDED_THREADS, 1, 1), (96, 1, 1)] {
            let want: Vec<u32> = (0..n as u32).chain([u32::MAX; 3]).collect();
            expect_all(
                &format!("bounded_write_index, n {n}, block {block:?}"),
                &run(block, n)?,
                &want,
                |a, b| a == b,
            )?;
        }
    }
    let beyond = |e: &Error| {
        matches!(e, Error::InvalidArgument { op: "bounded_write_index", detail }
            if detail.contains("launch_bounds(384, 1)") && detail.contains("at most 384 threads"))
    };
    for block in [(BOUNDED_THREADS + 1, 1, 1), (8, 8, 8), (1024, 1, 1)] {
        refused(
            &format!("a block of {block:?} threads past the launch bounds"),
            run(block, 1000).map(|_| ()),
            "InvalidArgument naming the launch bounds",
            beyond,
        )?;
    }
    let want: Vec<u32> = (0..1000).chain([u32::MAX; 3]).collect();
    expect_all(
        "bounded_write_index after the refused launches",
        &run((BOUNDED_THREADS, 1, 1), 1000)?,
        &want,
        |a, b| a == b,
    )
}
