//! Which kernels [`OnePassConfig::plan`] picks for the shapes the issue times, and for ragged
//! ones around each threshold; the default algorithm.

use gpukern::ops::softmax::{OnePassConfig, OnePassPlan};
use gpukern::{Gpu, SoftmaxAlgorithm, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;

use super::fixtures::*;
use crate::common::trial::plain_trials;
use crate::common::{lcg_matrix, lcg_vec};

/// The trials of this file.
pub(super) fn trials() -> Vec<Trial> {
    plain_trials!(
        "softmax",
        [
            classic_plans_for_the_timed_shapes,
            classic_plans_around_the_thresholds,
            default_and_candidate_plans_for_the_timed_shapes,
            triton_like_candidate_plans,
            the_default_algorithm_is_one_pass_and_block_reduce_stays_selectable,
        ]
    )
}

fn classic_plans_for_the_timed_shapes() {
    let c = classic();
    assert_eq!(c.plan(8192, 128), OnePassPlan::Warp { vectors: 1 });
    assert_eq!(c.plan(8192, 1024), OnePassPlan::Warp { vectors: 8 });
    assert_eq!(
        c.plan(8192, 4096),
        OnePassPlan::BlockEvictLast {
            vectors: 4,
            threads: 256
        }
    );
    assert_eq!(
        c.plan(8192, 8192),
        OnePassPlan::BlockEvictLast {
            vectors: 4,
            threads: 512
        }
    );
    assert_eq!(
        c.plan(8192, 32768),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 1024
        }
    );
    assert_eq!(
        c.plan(1, 1 << 24),
        OnePassPlan::Split {
            chunks: 1024,
            chunk_vecs: 4096,
            streaming: false
        }
    );
    assert_eq!(c.plan(8192, 65536), OnePassPlan::Stream);
}

fn classic_plans_around_the_thresholds() {
    let c = classic();
    assert_eq!(c.plan(3, 1), OnePassPlan::Warp { vectors: 1 });
    assert_eq!(c.plan(3, 131), OnePassPlan::Warp { vectors: 1 }); // 32 vectors + 3 scalars
    assert_eq!(c.plan(3, 132), OnePassPlan::Warp { vectors: 2 });
    assert_eq!(c.plan(3, 1023), OnePassPlan::Warp { vectors: 8 });
    assert_eq!(
        c.plan(3, 1025),
        OnePassPlan::BlockEvictLast {
            vectors: 4,
            threads: 64
        }
    );
    assert_eq!(
        c.plan(3, 8195),
        OnePassPlan::BlockEvictLast {
            vectors: 4,
            threads: 512
        }
    );
    assert_eq!(
        c.plan(3, 8196),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 288
        }
    );
    assert_eq!(
        c.plan(3, 32768),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 1024
        }
    );
    assert_eq!(
        c.plan(3, 32769),
        OnePassPlan::Split {
            chunks: 2,
            chunk_vecs: 4096,
            streaming: false
        }
    );
    assert_eq!(
        c.plan(255, 40000),
        OnePassPlan::Split {
            chunks: 3,
            chunk_vecs: 4096,
            streaming: false
        }
    );
    assert_eq!(c.plan(256, 40000), OnePassPlan::Stream);
}

/// The bench's `--plans` candidates around Triton's launch shapes (`warp-to-1k`,
/// `block-4v-to-8k`, `block-4v-to-16k` in examples/bench/softmax.rs) give the plans their
/// comments name; the default takes 1024 columns as a block of 64 threads (Triton's 4 warps
/// hold such a row too).
fn triton_like_candidate_plans() {
    let d = OnePassConfig::default();
    let block = |vectors, threads| OnePassPlan::BlockEvictLast { vectors, threads };
    assert_eq!(d.plan(8192, 1024), block(4, 64));
    assert_eq!(d.plan(8192, 128), OnePassPlan::Group { lanes: 16 });
    let warp_to_1k = OnePassConfig {
        warp_max_cols: 1024,
        ..d
    };
    assert_eq!(warp_to_1k.plan(8192, 1024), OnePassPlan::Warp { vectors: 8 });
    let to_8k = OnePassConfig {
        block_4_max_threads: 512,
        ..d
    };
    assert_eq!(to_8k.plan(8192, 4096), block(4, 256));
    assert_eq!(to_8k.plan(8192, 8192), block(4, 512));
    assert_eq!(to_8k.plan(8192, 16384), block(8, 512));
    let to_16k = OnePassConfig {
        block_4_max_threads: 1024,
        ..d
    };
    assert_eq!(to_16k.plan(8192, 16384), block(4, 1024));
    assert_eq!(to_16k.plan(8192, 32768), block(8, 1024));
}

fn default_and_candidate_plans_for_the_timed_shapes() {
    let d = OnePassConfig::default();
    assert_eq!(
        d,
        OnePassConfig {
            group_lanes: 16,
            persistent_min_cols: usize::MAX,
            cluster_min_cols: 32769,
            block_4_max_threads: 64,
            warp_max_cols: 512,
            grid_row_max_rows: 8,
            ..classic()
        }
    );
    // The default plans: lane groups of 16 for short rows, warps up to 512 columns, blocks of 4
    // vectors per thread while 64 threads hold the row (from 513 columns: 32 threads), of 8
    // vectors past it up to 32768 columns (no persistent kernel by default).
    assert_eq!(d.plan(8192, 128), OnePassPlan::Group { lanes: 16 });
    assert_eq!(d.plan(8192, 512), OnePassPlan::Warp { vectors: 4 });
    assert_eq!(
        d.plan(8192, 513),
        OnePassPlan::BlockEvictLast {
            vectors: 4,
            threads: 32
        }
    );
    assert_eq!(
        d.plan(8192, 1024),
        OnePassPlan::BlockEvictLast {
            vectors: 4,
            threads: 64
        }
    );
    assert_eq!(
        d.plan(8192, 1027),
        OnePassPlan::BlockEvictLast {
            vectors: 4,
            threads: 64
        }
    );
    assert_eq!(
        d.plan(8192, 1028),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 64
        }
    );
    assert_eq!(
        d.plan(8192, 4096),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 128
        }
    );
    assert_eq!(
        d.plan(8192, 8192),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 256
        }
    );
    assert_eq!(
        d.plan(8192, 16384),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 512
        }
    );
    assert_eq!(
        d.plan(8192, 16388),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 544
        }
    );
    assert_eq!(
        d.plan(8192, 32768),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 1024
        }
    );
    for lanes in [8, 16] {
        assert_eq!(groups(lanes).plan(8192, 128), OnePassPlan::Group { lanes });
        // Lane groups hold the rows a warp holds with one vector per lane, no longer ones.
        assert_eq!(groups(lanes).plan(3, 131), OnePassPlan::Group { lanes });
        assert_eq!(groups(lanes).plan(3, 132), OnePassPlan::Warp { vectors: 2 });
    }
    assert_eq!(groups(4).plan(8192, 128), OnePassPlan::Warp { vectors: 1 });
    let p = persistent();
    assert_eq!(p.plan(8192, 128), OnePassPlan::Warp { vectors: 1 });
    assert_eq!(p.plan(8192, 1024), OnePassPlan::PersistentWarp);
    assert_eq!(p.plan(3, 516), OnePassPlan::PersistentWarp);
    assert_eq!(p.plan(3, 515), OnePassPlan::Warp { vectors: 4 }); // 128 vectors + 3 scalars
    assert_eq!(
        p.plan(8192, 4096),
        OnePassPlan::PersistentBlock {
            vectors: 4,
            threads: 256
        }
    );
    assert_eq!(
        p.plan(8192, 8192),
        OnePassPlan::PersistentBlock {
            vectors: 4,
            threads: 512
        }
    );
    assert_eq!(
        p.plan(8192, 32768),
        OnePassPlan::PersistentBlock {
            vectors: 8,
            threads: 1024
        }
    );
    assert_eq!(
        p.plan(1, 1 << 24),
        OnePassPlan::Split {
            chunks: 1024,
            chunk_vecs: 4096,
            streaming: false
        }
    );
}

fn the_default_algorithm_is_one_pass_and_block_reduce_stays_selectable() {
    let gpu = Gpu::simulator();
    let x = lcg_matrix(3, 7, 300);
    let dx = gpu.upload_matrix(&x).unwrap();
    let want = cpu::softmax_rows(&x, 1.0);
    for algorithm in SoftmaxAlgorithm::ALL {
        let got = gpu.softmax_with(&dx, 1.0, algorithm).unwrap().to_array().unwrap();
        assert_softmax_close(algorithm.name(), &got, &want);
    }
    assert_eq!(SoftmaxAlgorithm::default(), SoftmaxAlgorithm::OnePass);
    let names: Vec<_> = SoftmaxAlgorithm::ALL.iter().map(|a| a.name()).collect();
    assert_eq!(names, ["block-reduce", "one-pass"]);
    // The vector form takes the one-pass path too.
    let v = lcg_vec(4, 1001);
    let got = gpu
        .softmax_vec(&gpu.upload(&v).unwrap(), 2.0)
        .unwrap()
        .to_vec()
        .unwrap();
    let want = cpu::softmax(&v, 2.0);
    let got = Array2::from_shape_vec((1, v.len()), got).unwrap();
    assert_softmax_close(
        "softmax_vec",
        &got,
        &Array2::from_shape_vec((1, v.len()), want).unwrap(),
    );
}
