//! Cooperative launches and the grid barrier ([`gpukern::Module::cooperative`],
//! `gpukern_device::grid::sync`) through the check kernel `grid_exchange`: every thread of the
//! grid writes a slot, passes the barrier, reads the next block's slot, passes it again, for many
//! rounds; the sums must match the host's. Per backend (`{sim,cuda}::grid::exchange_BxT_rR`),
//! with the largest grid the device keeps resident on CUDA (`cuda::grid::exchange_resident`),
//! and a grid one block past that refused with `Error::TooLarge` (`{sim,cuda}::grid::too_large`),
//! never launched to hang. The simulator's own checks of the barrier (planted bugs: a barrier
//! removed, a launch not cooperative, a thread gone) are in `gpukern-device/tests/grid.rs`.

use gpukern::kernels::grid_check::{self as kg, grid_exchange_value};
use gpukern::{Error, Gpu, LaunchConfig};
use libtest_mimic::Trial;

use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (blocks, threads, rounds) in [(1, 32, 3), (3, 64, 4), (7, 96, 2), (16, 256, 2)] {
        let name = format!("grid::exchange_{blocks}x{threads}_r{rounds}");
        trials.push(trial(sim, &name, move |gpu, _| {
            exchange(gpu, blocks, threads, rounds)
        }));
    }
    for (blocks, threads, rounds) in [(1, 32, 3), (2, 1024, 50), (132, 256, 100), (264, 128, 200)] {
        let name = format!("grid::exchange_{blocks}x{threads}_r{rounds}");
        trials.push(trial(cuda, &name, move |gpu, _| {
            exchange(gpu, blocks, threads, rounds)
        }));
    }
    trials.push(trial(cuda, "grid::exchange_resident", |gpu, _| {
        let blocks = gpu
            .library()
            .cooperative_blocks(&kg::grid_exchange::KERNEL, 256, 0)?;
        exchange(gpu, blocks, 256, 500)
    }));
    for target in [sim, cuda] {
        trials.push(trial(target, "grid::too_large", |gpu, _| too_large(gpu)));
    }
    trials
}

/// Launches `grid_exchange` on `blocks` blocks of `threads` for `rounds` rounds and compares
/// every thread's sum with the host's.
fn exchange(gpu: &Gpu, blocks: u32, threads: u32, rounds: u32) -> Check {
    let n = (blocks * threads) as usize;
    let mut slots = gpu.zeros::<u32>(n)?;
    let mut out = gpu.upload(&vec![u32::MAX; n])?;
    let mut barrier = gpu.zeros::<u32>(1)?;
    let config = LaunchConfig {
        grid: (blocks, 1, 1),
        block: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let library = gpu.library();
    // SAFETY: a cooperative launch; `slots` and `out` hold a word per thread, `barrier` one zero.
    unsafe {
        kg::grid_exchange::launch(
            &library.cooperative(),
            config,
            &mut slots,
            &mut out,
            &mut barrier,
            rounds,
        )?
    };
    let got = out.to_vec()?;
    let mut wrong = Vec::new();
    for b in 0..blocks {
        let next = (b + 1) % blocks;
        for t in 0..threads {
            let want = (0..rounds).fold(0u32, |s, r| s.wrapping_add(grid_exchange_value(r, next, t)));
            let at = (b * threads + t) as usize;
            if got[at] != want && wrong.len() < 4 {
                wrong.push(format!("block {b} thread {t}: {} (want {want})", got[at]));
            }
        }
    }
    all_passed(wrong)
}

/// A cooperative grid one block larger than the device keeps resident is refused before launch.
fn too_large(gpu: &Gpu) -> Check {
    let library = gpu.library();
    let most = library.cooperative_blocks(&kg::grid_exchange::KERNEL, 128, 0)?;
    let blocks = most + 1;
    let n = blocks as usize * 128;
    let (mut slots, mut out, mut barrier) =
        (gpu.zeros::<u32>(n)?, gpu.zeros::<u32>(n)?, gpu.zeros::<u32>(1)?);
    let config = LaunchConfig {
        grid: (blocks, 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: refused before it runs (checked below); sized as the kernel needs otherwise.
    let result = unsafe {
        kg::grid_exchange::launch(
            &library.cooperative(),
            config,
            &mut slots,
            &mut out,
            &mut barrier,
            1,
        )
    };
    match result {
        Err(Error::TooLarge { .. }) if !gpu.is_simulator() => Ok(()),
        Err(Error::Simulator(e)) if gpu.is_simulator() && e.to_string().contains("cooperative grid") => {
            Ok(())
        }
        other => {
            Err(format!("a cooperative grid of {blocks} blocks (at most {most} resident): {other:?}").into())
        }
    }
}
