//! `gpukern_device_checks::collectives`: warp shuffles of every source, warp scans and votes, and
//! the block collectives of `Scratch`, against their formulas.

use gpukern::{LaunchConfig, Module};
use gpukern_device_checks::collectives::{RECORDS, THREADS, warp_and_block_collectives};
use libtest_mimic::Trial;
use rand::rngs::StdRng;

use crate::{Check, Sizes, Target, expect_all, trial};

pub fn trials(target: &Target) -> Vec<Trial> {
    vec![trial(target, "collectives::warp_and_block", warp_and_block)]
}

/// What thread `t` must record (see the kernel's doc).
fn expected(t: usize) -> [u64; RECORDS] {
    let lane = t % 32;
    let warp0 = t - lane;
    let block0 = t - t % THREADS as usize;
    let own_or = |l: Option<usize>| l.filter(|&l| l < 32).map_or(t, |l| warp0 + l) as u64;
    let key = lane / 5;
    [
        own_or(Some(lane + 3)),
        own_or(lane.checked_sub(5)),
        (warp0 + 9) as u64,
        ((warp0 + (lane ^ 6)) as f64 / 2.0).to_bits(),
        (warp0..=t).map(|u| u as u64 + 1).sum(),
        if lane == 0 {
            100
        } else {
            (warp0..t).map(|u| u as u64 + 1).sum()
        },
        (0..32).filter(|l| l / 5 == key).fold(0u64, |m, l| m | 1 << l),
        (warp0..t).filter(|u| u % 3 == 0).count() as u64,
        (block0..block0 + THREADS as usize).map(|u| u as u64).sum(),
        (block0..=t).map(|u| u as u64 + 1).sum(),
    ]
}

fn warp_and_block(module: &Module, _: &Sizes, _: &mut StdRng) -> Check {
    let blocks = if module.gpu().is_simulator() { 2 } else { 64 };
    let threads = blocks * THREADS as usize;
    let mut out = module.gpu().zeros_of::<u64>(RECORDS * threads)?;
    let config = LaunchConfig {
        grid: (blocks as u32, 1, 1),
        block: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: blocks of THREADS threads; `out` holds RECORDS values per thread.
    unsafe { warp_and_block_collectives::launch(module, config, &mut out) }?;
    let got = out.to_vec()?;
    let want: Vec<u64> = (0..threads).flat_map(expected).collect();
    expect_all("warp_and_block_collectives", &got, &want, |a, b| a == b)
}
