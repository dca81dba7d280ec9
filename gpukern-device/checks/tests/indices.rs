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
