//! Launch helpers for any shape: `LaunchConfig::grid_2d` / `grid_3d` (any block, any tile),
//! `Module::occupancy` (the driver's occupancy query on CUDA, the simulated multiprocessor's
//! model in the simulator) and `Module::grid_stride` (a grid that fills the device from the
//! kernel's own occupancy), with their errors.

use gpukern::kernels::add::add;
use gpukern::kernels::add::increment_by_one;
use gpukern::module::simulated_sm;
use gpukern::{DeviceLimits, Error, Gpu, LaunchConfig, PtxSet};
use libtest_mimic::Trial;

use crate::common::check::Check;
use crate::common::trial::{Target, plain_trial, trial};

/// Every trial of this file.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = vec![
        plain_trial("launch_shapes", "grid_2d_any_tile", grid_2d_any_tile),
        plain_trial("launch_shapes", "grid_3d_and_errors", grid_3d_and_errors),
    ];
    for target in [sim, cuda] {
        trials.extend([
            trial(target, "launch_shapes::occupancy", |gpu, _| occupancy(gpu)),
            trial(target, "launch_shapes::grid_stride", |gpu, _| grid_stride(gpu)),
            trial(target, "launch_shapes::occupancy_errors", |gpu, _| {
                occupancy_errors(gpu)
            }),
        ]);
    }
    trials
}

fn grid_2d_any_tile() {
    let limits = DeviceLimits::COMMON;
    // One thread per item, a block that is not square.
    let c = LaunchConfig::grid_2d("t", (1000, 600), (32, 8), (32, 8), 0, &limits).unwrap();
    assert_eq!((c.grid, c.block), ((32, 75, 1), (32, 8, 1)));
    // Tiles of 64 x 16 items for 32 x 8 threads: two items per thread each way.
    let c = LaunchConfig::grid_2d("t", (1000, 600), (64, 16), (32, 8), 4096, &limits).unwrap();
    assert_eq!(
        (c.grid, c.block, c.shared_mem_bytes),
        ((16, 38, 1), (32, 8, 1), 4096)
    );
    // A 1-D block over 2-D tiles (a warp-tiled GEMM's shape): 128 x 64 tiles, 256 threads.
    let c = LaunchConfig::grid_2d("t", (4097, 130), (128, 64), (256, 1), 0, &limits).unwrap();
    assert_eq!(c.grid, (33, 3, 1));
    // The old square helper is the special case tile == block.
    let square = LaunchConfig::tiles_2d("t", 600, 1000, 16, 0, &limits).unwrap();
    let general = LaunchConfig::grid_2d("t", (1000, 600), (16, 16), (16, 16), 0, &limits).unwrap();
    assert_eq!(square, general);
    // An empty extent still launches one block along it (the kernel's guard does the rest).
    let c = LaunchConfig::grid_2d("t", (0, 5), (16, 16), (16, 16), 0, &limits).unwrap();
    assert_eq!(c.grid, (1, 1, 1));
}

fn grid_3d_and_errors() {
    let limits = DeviceLimits::COMMON;
    let c = LaunchConfig::grid_3d("t", (100, 50, 7), (8, 8, 2), (8, 8, 2), 0, &limits).unwrap();
    assert_eq!((c.grid, c.block), ((13, 7, 4), (8, 8, 2)));
    let tile0 = LaunchConfig::grid_3d("t", (10, 10, 10), (8, 0, 1), (8, 1, 1), 0, &limits);
    assert!(matches!(tile0, Err(Error::InvalidArgument { ref detail, .. }) if detail.contains("along y")));
    let block0 = LaunchConfig::grid_2d("t", (10, 10), (8, 8), (8, 0), 0, &limits);
    assert!(matches!(block0, Err(Error::InvalidArgument { .. })));
    // 65536 tiles along y: past the grid's y limit of 65535.
    let tall = LaunchConfig::grid_2d("t", (1, 65536), (1, 1), (1, 1), 0, &limits);
    assert!(matches!(tall, Err(Error::TooLarge { ref detail, .. }) if detail.contains("65535")));
    let fat = LaunchConfig::grid_2d("t", (64, 64), (64, 64), (64, 32), 0, &limits);
    assert!(matches!(fat, Err(Error::TooLarge { ref detail, .. }) if detail.contains("2048 threads")));
    let shared = LaunchConfig::grid_2d("t", (64, 64), (64, 64), (32, 8), 64 * 1024, &limits);
    assert!(matches!(shared, Err(Error::TooLarge { .. })));
}

/// `add` at 256 threads: the simulator's model says 8 blocks (2048 threads); the GPU's answer is
/// between 1 and 32, the same as the cooperative-launch limit per multiprocessor, and shrinks
/// (never grows) with more shared memory.
fn occupancy(gpu: &Gpu) -> Check {
    let module = gpu.library();
    let per_sm = module.occupancy(&add::KERNEL, (256, 1, 1), 0)?;
    if gpu.is_simulator() {
        let want = simulated_sm::blocks(256, 0);
        if per_sm != want || want != 8 {
            return Err(format!("simulated occupancy of 256 threads: {per_sm}, expected 8").into());
        }
        let with_shared = module.occupancy(&add::KERNEL, (16, 16, 1), 100 * 1024)?;
        if with_shared != 2 {
            return Err(format!("two blocks of 100 KiB fit 228 KiB, got {with_shared}").into());
        }
    } else {
        if !(1..=32).contains(&per_sm) {
            return Err(format!("occupancy of add at 256 threads: {per_sm}").into());
        }
        let sms = gpu.multiprocessors()? as u32;
        let cooperative = module.cooperative_blocks(&add::KERNEL, 256, 0)?;
        if cooperative != per_sm * sms {
            return Err(format!("occupancy {per_sm} x {sms} SMs != cooperative limit {cooperative}").into());
        }
        let with_shared = module.occupancy(&add::KERNEL, (256, 1, 1), 100 * 1024)?;
        if with_shared > per_sm || with_shared > 2 {
            return Err(
                format!("with 100 KiB of shared memory: {with_shared} blocks (without: {per_sm})").into(),
            );
        }
    }
    Ok(())
}

/// `grid_stride` fills the device (occupancy x multiprocessors blocks) for a large problem and
/// needs no more than the work for a small one; `increment_by_one` (one element per thread) on
/// a small problem then covers it exactly.
fn grid_stride(gpu: &Gpu) -> Check {
    let module = gpu.library();
    let full = module.occupancy(&increment_by_one::KERNEL, (128, 1, 1), 0)? * gpu.multiprocessors()? as u32;
    let big = module.grid_stride(&increment_by_one::KERNEL, 1 << 30, 128, 0)?;
    if big.grid != (full, 1, 1) || big.block != (128, 1, 1) {
        return Err(format!("grid-stride launch of 2^30 items: {big:?}, expected {full} blocks").into());
    }
    let small = module.grid_stride(&increment_by_one::KERNEL, 1000, 128, 0)?;
    if small.grid != (8, 1, 1) {
        return Err(format!("1000 items in blocks of 128: {small:?}, expected 8 blocks").into());
    }
    let none = module.grid_stride(&increment_by_one::KERNEL, 0, 128, 0)?;
    if none.grid != (1, 1, 1) {
        return Err(format!("no items: {none:?}, expected one block").into());
    }
    let mut x = gpu.upload(&vec![1.0f32; 1000])?;
    // SAFETY: `x` holds 1000 elements; the launch has 1024 threads.
    unsafe { increment_by_one::launch(&module, small, &mut x, 1000) }?;
    if x.to_vec()?.iter().any(|&v| v != 2.0) {
        return Err("increment_by_one over the grid-stride launch missed elements".into());
    }
    Ok(())
}

/// A block over the device's limit, an empty block, too much shared memory, a kernel of another
/// crate: each an error naming the kernel, before anything is asked of the driver.
fn occupancy_errors(gpu: &Gpu) -> Check {
    let module = gpu.library();
    for (what, result) in [
        ("2048 threads", module.occupancy(&add::KERNEL, (2048, 1, 1), 0)),
        ("an empty block", module.occupancy(&add::KERNEL, (0, 1, 1), 0)),
        (
            "1 MiB of shared memory",
            module.occupancy(&add::KERNEL, (256, 1, 1), 1 << 20),
        ),
    ] {
        match result {
            Err(Error::TooLarge { op, .. } | Error::InvalidArgument { op, .. }) if op == "add" => {}
            other => return Err(format!("{what}: expected an error naming `add`, got {other:?}").into()),
        }
    }
    let other = gpu.load(&PtxSet::simulator_only("not_the_library"));
    if let Ok(other) = other {
        match other.occupancy(&add::KERNEL, (256, 1, 1), 0) {
            Err(Error::InvalidArgument { detail, .. }) if detail.contains("kernels_gpu") => {}
            r => {
                return Err(format!("a kernel of another crate: expected InvalidArgument, got {r:?}").into());
            }
        }
    }
    Ok(())
}
