//! The softmax kernels in the simulator, with their documented launch shapes, against a softmax
//! computed in f64 here; and the report when the host passes the tutorial kernel too little
//! shared memory.

mod common;

use common::softmax::{run_softmax, softmax_config};
use common::{assert_close, assert_report, config, random, report};
use kernels_gpu::sim::{Access, Space, Violation};
use kernels_gpu::softmax;

/// Row-wise softmax in f64.
fn softmax_f64(x: &[f32], cols: usize, t: f32) -> Vec<f64> {
    let t = t as f64;
    x.chunks(cols)
        .flat_map(|row| {
            let max = row
                .iter()
                .map(|&v| t * v as f64)
                .fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = row.iter().map(|&v| (t * v as f64 - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / sum)
        })
        .collect()
}

#[test]
fn softmax_block_reduce_matches_f64() {
    // (rows, cols, t, offset): the last case has inputs near 100, whose exponentials overflow
    // f32 unless the row maximum is subtracted first.
    let cases = [
        (3, 1, 1.0, 0.0),
        (5, 300, 0.5, 0.0),
        (2, 513, 2.0, 0.0),
        (3, 40, -1.5, 0.0),
        (4, 257, 1.0, 97.0),
    ];
    for (s, (rows, cols, t, offset)) in cases.into_iter().enumerate() {
        let x: Vec<f32> = random(30 + s as u64, rows * cols)
            .iter()
            .map(|v| offset + 2.0 * v)
            .collect();
        let y = run_softmax(softmax_config(rows), &x, rows, cols, t).unwrap();
        let want = softmax_f64(&x, cols, t);
        assert_close(&format!("softmax {rows}x{cols} t={t}"), &y, &want, &want, 1e-5);
    }
}

#[test]
fn softmax_block_reduce_blocks_past_the_last_row_leave_together() {
    // One block more than rows: the whole extra block returns at once, which is no barrier error.
    let (rows, cols) = (2, 70);
    let x = random(40, rows * cols);
    let y = run_softmax(softmax_config(rows + 1), &x, rows, cols, 1.0).unwrap();
    let want = softmax_f64(&x, cols, 1.0);
    assert_close("softmax with a spare block", &y, &want, &want, 1e-5);
}

#[test]
fn out_of_bounds_shared_when_the_host_passes_too_little() {
    // softmax_block_reduce with half its documented shared memory: thread 128 stores past the end.
    let x = random(59, 300);
    let cfg = config((1, 1), (softmax::BLOCK, 1), softmax::SHARED_BYTES / 2);
    let expected = report(
        "softmax_block_reduce",
        (0, 0),
        (128, 0),
        Violation::OutOfBounds {
            space: Space::Shared,
            buffer: "shared".into(),
            access: Access::Write,
            index: 128,
            len: 128,
        },
    );
    assert_report(run_softmax(cfg, &x, 1, 300, 1.0).map(drop), expected);
}
