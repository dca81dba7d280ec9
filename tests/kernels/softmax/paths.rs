//! Every one-pass path (warp per row with 1, 2, 4, 8 vectors per lane; block per row with 4 and
//! 8; lane groups; persistent; stream; split) forced on ragged shapes: rows whose length is not a
//! multiple of 4 (so rows start off 16-byte boundaries), 1-element rows, rows longer than a
//! block's share, row counts that leave the last block part empty; the stream and split paths at
//! a small scale through lowered thresholds.

use gpukern::ops::softmax::{OnePassConfig, OnePassPlan};
use gpukern::{Gpu, cpu};
use libtest_mimic::Trial;

use super::fixtures::*;
use crate::common::lcg_matrix;
use crate::common::trial::plain_trials;

/// The trials of this file.
pub(super) fn trials() -> Vec<Trial> {
    plain_trials!(
        "softmax",
        [
            warp_per_row_on_ragged_shapes,
            block_per_row_with_4_vectors_on_ragged_shapes,
            block_per_row_with_8_vectors,
            block_per_row_with_8_vectors_and_1024_threads,
            lane_groups_on_ragged_shapes,
            persistent_warp_per_row_on_ragged_shapes,
            persistent_block_per_row_on_ragged_shapes,
            persistent_block_with_8_vectors_and_1024_threads,
            stream_on_ragged_shapes,
            split_rows_over_several_blocks,
        ]
    )
}

/// Runs `config` on each shape at every temperature against the reference, after checking that
/// the plan is the expected kind.
#[track_caller]
fn check_path(
    name: &str,
    config: &OnePassConfig,
    shapes: &[(usize, usize)],
    expect: impl Fn(OnePassPlan) -> bool,
) {
    let gpu = Gpu::simulator();
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        let plan = config.plan(rows, cols);
        assert!(expect(plan), "{name}: {rows} x {cols} planned as {plan:?}");
        let x = lcg_matrix(100 + i as u64, rows, cols);
        for t in TEMPERATURES {
            let got = one_pass(&gpu, &x, t, config);
            assert_softmax_close(
                &format!("{name} {rows}x{cols} t={t} ({plan:?})"),
                &got,
                &cpu::softmax_rows(&x, t),
            );
        }
    }
}

fn warp_per_row_on_ragged_shapes() {
    let shapes = [
        (1, 1),
        (9, 2),
        (3, 5),
        (17, 67),
        (9, 131),
        (5, 200),
        (4, 257),
        (3, 511),
        (2, 1023),
    ];
    check_path("warp", &classic(), &shapes, |p| {
        matches!(p, OnePassPlan::Warp { .. })
    });
    // Every vector count is reached.
    let vectors: Vec<_> = shapes.iter().map(|&(r, c)| classic().plan(r, c)).collect();
    for v in [1, 2, 4, 8] {
        assert!(
            vectors.contains(&OnePassPlan::Warp { vectors: v }),
            "no shape takes {v} vectors per lane"
        );
    }
}

fn block_per_row_with_4_vectors_on_ragged_shapes() {
    // Short rows on a 32-thread block (most threads hold nothing), 1-element rows, and rows
    // filling 4 vectors per thread of a 64-thread block exactly.
    let shapes = [(3, 1), (2, 7), (5, 130), (3, 1025), (2, 1027)];
    check_path("block-4", &blocks_only(), &shapes, |p| {
        matches!(p, OnePassPlan::BlockEvictLast { vectors: 4, .. })
    });
}

fn block_per_row_with_8_vectors() {
    // 8196 columns: 2049 vectors, 8 per thread of 288 threads; the second row starts off a
    // 16-byte boundary when cols is odd.
    let shapes = [(2, 8197)];
    check_path("block-8", &classic(), &shapes, |p| {
        matches!(p, OnePassPlan::BlockEvictLast { vectors: 8, .. })
    });
}

fn block_per_row_with_8_vectors_and_1024_threads() {
    // Nearly the largest row held in registers: 8191 vectors, 8 per thread of 1024, plus 3
    // scalars (the second row starts 3 floats past a 16-byte boundary).
    let gpu = Gpu::simulator();
    let (rows, cols) = (2, 32767);
    let c = classic();
    assert_eq!(
        c.plan(rows, cols),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 1024
        }
    );
    let x = lcg_matrix(7, rows, cols);
    let got = one_pass(&gpu, &x, 1.0, &c);
    assert_softmax_close("block-8 2x32767", &got, &cpu::softmax_rows(&x, 1.0));
}

fn lane_groups_on_ragged_shapes() {
    // Row counts that leave groups past the last row inside a warp that has live rows (35 rows:
    // a warp of 8-lane groups holds 4), whole warps past it (3 rows in a 32-row block), rows
    // that start off a 16-byte boundary, and rows of 32 vectors plus 3 scalars.
    let shapes = [(1, 1), (9, 2), (3, 5), (35, 67), (17, 100), (9, 131), (33, 128)];
    for lanes in [8, 16] {
        check_path(&format!("group-{lanes}"), &groups(lanes), &shapes, |p| {
            p == OnePassPlan::Group { lanes }
        });
    }
}

fn persistent_warp_per_row_on_ragged_shapes() {
    // The simulator runs 2 blocks of 8 warps: 37 rows make each warp loop over 2 or 3 rows, and
    // the rows of odd widths start at every offset from a 16-byte boundary.
    let shapes = [(3, 516), (37, 1023), (20, 700), (17, 1021), (40, 1024)];
    check_path("persistent-warp", &persistent(), &shapes, |p| {
        p == OnePassPlan::PersistentWarp
    });
}

fn persistent_block_per_row_on_ragged_shapes() {
    // 2 blocks in the simulator: 7 and 9 rows loop 3 to 5 times per block (the statistics
    // scratch alternates between its halves), short rows leave most threads without a vector.
    let shapes = [(7, 1), (2, 7), (9, 130), (7, 1025), (5, 1027)];
    check_path("persistent-block-4", &persistent_blocks_only(), &shapes, |p| {
        matches!(p, OnePassPlan::PersistentBlock { vectors: 4, .. })
    });
    check_path("persistent-block-8", &persistent(), &[(5, 8197)], |p| {
        matches!(p, OnePassPlan::PersistentBlock { vectors: 8, .. })
    });
}

fn persistent_block_with_8_vectors_and_1024_threads() {
    // The largest row held in registers and staged in 128 KiB of shared memory: 3 rows on 2
    // blocks, the second and third starting off a 16-byte boundary.
    let gpu = Gpu::simulator();
    let (rows, cols) = (3, 32767);
    let c = persistent();
    assert_eq!(
        c.plan(rows, cols),
        OnePassPlan::PersistentBlock {
            vectors: 8,
            threads: 1024
        }
    );
    let x = lcg_matrix(8, rows, cols);
    let got = one_pass(&gpu, &x, -1.0, &c);
    assert_softmax_close("persistent-block-8 3x32767", &got, &cpu::softmax_rows(&x, -1.0));
}

fn stream_on_ragged_shapes() {
    // 9000 columns: each thread of 512 streams more than one group of 4 vectors.
    let shapes = [(3, 1), (4, 3), (5, 67), (2, 2049), (2, 9001)];
    check_path("stream", &stream_only(), &shapes, |p| p == OnePassPlan::Stream);
}

fn split_rows_over_several_blocks() {
    // Chunks of 8 columns (2 vectors): many chunks per row, some empty in the rows that start
    // off a boundary, and the head and tail scalars in chunk 0.
    let shapes = [(1, 1), (3, 3), (2, 9), (3, 67)];
    check_path("split", &split_only(8), &shapes, |p| {
        matches!(p, OnePassPlan::Split { .. })
    });
    check_path("split", &split_only(100), &[(1, 1001)], |p| {
        matches!(p, OnePassPlan::Split { chunks: 10, .. })
    });
    // The evict-first write launch: the same chunks, the same values.
    let streaming = OnePassConfig {
        split_streaming: true,
        ..split_only(8)
    };
    check_path("split-streaming", &streaming, &shapes, |p| {
        matches!(p, OnePassPlan::Split { streaming: true, .. })
    });
    // Chunks longer than a block's sweep (4096 vectors, 8 per thread of 512) at the default size
    // (clusters and the grid-row kernel off: they would take these rows).
    check_path(
        "split-default-chunk",
        &OnePassConfig {
            cluster_min_cols: usize::MAX,
            grid_row_max_rows: 0,
            ..OnePassConfig::default()
        },
        &[(1, 40003), (2, 33000)],
        |p| matches!(p, OnePassPlan::Split { chunks: 3, .. }),
    );
}
