//! The index helpers in the simulator.

use gpukern_device::sim::{Dim3, Launch, LaunchConfig};
use gpukern_device_checks::indices::write_index_1d;

#[test]
fn every_thread_writes_its_global_index_and_the_tail_is_left_alone() {
    let n = 1000;
    let mut out = vec![u32::MAX; n + 3];
    let config = LaunchConfig {
        grid: Dim3::new(4, 1, 1),
        block: Dim3::new(256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("write_index_1d", config);
    let p = launch.output("out", &mut out);
    // SAFETY: `out` holds more than `n` elements.
    let result = unsafe { launch.run(|| write_index_1d(p, n)) };
    assert_eq!(result, Ok(()));
    assert!(out[..n].iter().enumerate().all(|(i, &v)| v == i as u32));
    assert_eq!(out[n..], [u32::MAX; 3]);
}

#[test]
fn a_3d_launch_covers_every_index_once_and_nothing_outside() {
    let (nx, ny, nz) = (13, 7, 5);
    let mut out = vec![u32::MAX; nx * ny * nz + 2];
    let config = LaunchConfig {
        grid: Dim3::new(2, 2, 3),
        block: Dim3::new(8, 4, 2),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("write_index_3d", config);
    let p = launch.output("out", &mut out);
    // SAFETY: `out` holds more than `nx * ny * nz` elements.
    let result = unsafe { launch.run(|| gpukern_device_checks::indices::write_index_3d(p, nx, ny, nz)) };
    assert_eq!(result, Ok(()));
    assert!(out[..nx * ny * nz]
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u32));
    assert_eq!(out[nx * ny * nz..], [u32::MAX; 2]);
}

/// The votes of `warp_votes` for warp `w`, computed on the CPU.
pub fn expected_votes(w: usize) -> [u32; 5] {
    let ballot = (0..32u32)
        .filter(|&l| (l as usize + w).is_multiple_of(3))
        .fold(0, |b, l| b | 1 << l);
    [ballot, 1, 0, (ballot != 0) as u32, (ballot == u32::MAX) as u32]
}

#[test]
fn warp_votes_match_the_cpu_and_a_lane_that_skips_the_vote_is_reported() {
    let warps = 6;
    let mut out = vec![0u32; 5 * warps];
    let config = LaunchConfig {
        grid: Dim3::new(2, 1, 1),
        block: Dim3::new(96, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("warp_votes", config);
    let p = launch.output("out", &mut out);
    // SAFETY: 5 elements per warp.
    let result = unsafe { launch.run(|| gpukern_device_checks::indices::warp_votes(p)) };
    assert_eq!(result, Ok(()));
    for w in 0..warps {
        assert_eq!(out[5 * w..5 * w + 5], expected_votes(w), "warp {w}");
    }
    // Planted: lane 7 of each warp returns before the vote.
    unsafe fn skipping(out: *mut u32) {
        if gpukern_device::warp::lane_id() == 7 {
            return;
        }
        let bits = gpukern_device::warp::ballot(true);
        unsafe { gpukern_device::mem::store(out, 0, bits) }
    }
    let mut one = vec![0u32; 1];
    let mut launch = Launch::new(
        "skipping",
        LaunchConfig {
            grid: Dim3::new(1, 1, 1),
            ..config
        },
    );
    let p = launch.output("out", &mut one);
    let err = unsafe { launch.run(|| skipping(p)) }.expect_err("a lane skipped the vote");
    assert_eq!(err.thread, Dim3::new(7, 0, 0), "{err}");
}
