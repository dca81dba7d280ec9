//! The cluster kernels (`softmax_cluster_4`, `softmax_cluster_8`, sm_90): launched directly in
//! clusters of 2 to 16 blocks on ragged shapes (`{sim,cuda}::softmax_cluster::launch::..`), the
//! edge rows through them, the one-pass plan around the cluster boundaries on both sides with
//! small thresholds in the simulator (`sim::softmax::cluster_plan_boundaries_on_the_simulator`),
//! and the plans for the timed long rows (`sim::softmax::cluster_plans_for_the_long_rows`).

use gpukern::kernels::softmax as ksoft;
use gpukern::ops::softmax::{OnePassConfig, OnePassPlan};
use gpukern::{Gpu, LaunchConfig, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::rngs::StdRng;

use super::SOFTMAX_MAX_REL;
use super::fixtures::*;
use crate::common::check::*;
use crate::common::trial::{Target, plain_trials, trial};
use crate::common::{lcg_matrix, random_matrix};

/// One direct launch: a cluster of `blocks` blocks of `threads` per row, `vectors` per thread.
#[derive(Clone, Copy, Debug)]
struct Case {
    vectors: usize,
    blocks: u32,
    threads: u32,
    rows: usize,
    cols: usize,
}

/// Simulator cases: every cluster size the kernels take (2, 3, 5, 8, 16), both kernels, rows
/// that start off 16-byte boundaries, rows from 1 column to the most the cluster holds (+3).
const SIM_CASES: &[Case] = &[
    Case {
        vectors: 8,
        blocks: 2,
        threads: 32,
        rows: 3,
        cols: 1,
    },
    Case {
        vectors: 8,
        blocks: 2,
        threads: 32,
        rows: 3,
        cols: 67,
    },
    Case {
        vectors: 8,
        blocks: 2,
        threads: 32,
        rows: 2,
        cols: 2051,
    },
    Case {
        vectors: 4,
        blocks: 3,
        threads: 64,
        rows: 2,
        cols: 3071,
    },
    Case {
        vectors: 4,
        blocks: 5,
        threads: 32,
        rows: 2,
        cols: 2563,
    },
    Case {
        vectors: 8,
        blocks: 8,
        threads: 32,
        rows: 1,
        cols: 8195,
    },
    Case {
        vectors: 8,
        blocks: 16,
        threads: 32,
        rows: 2,
        cols: 1001,
    },
];

/// CUDA cases: the same kinds at the kernels' real sizes, 16 blocks of 256 threads (a cluster of
/// 16 needs the non-portable size), and a row of a cluster of 8 blocks of 1024 threads full.
const CUDA_CASES: &[Case] = &[
    Case {
        vectors: 8,
        blocks: 2,
        threads: 32,
        rows: 3,
        cols: 67,
    },
    Case {
        vectors: 8,
        blocks: 2,
        threads: 1024,
        rows: 5,
        cols: 65_539,
    },
    Case {
        vectors: 4,
        blocks: 3,
        threads: 512,
        rows: 7,
        cols: 24_573,
    },
    Case {
        vectors: 4,
        blocks: 4,
        threads: 1024,
        rows: 3,
        cols: 65_536,
    },
    Case {
        vectors: 8,
        blocks: 8,
        threads: 1024,
        rows: 1,
        cols: 262_147,
    },
    Case {
        vectors: 8,
        blocks: 16,
        threads: 256,
        rows: 2,
        cols: 131_075,
    },
];

/// The trials of this file.
pub(super) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, cases) in [(sim, SIM_CASES), (cuda, CUDA_CASES)] {
        for &case in cases {
            let name = format!(
                "softmax_cluster::launch::v{}_c{}x{}::{}x{}",
                case.vectors, case.blocks, case.threads, case.rows, case.cols
            );
            trials.push(trial(target, &name, move |gpu, rng| launch_case(gpu, rng, case)));
        }
        trials.push(trial(target, "softmax_cluster::edge_rows", cluster_edge_rows));
    }
    trials.extend(plain_trials!(
        "softmax",
        [
            cluster_plans_for_the_long_rows,
            cluster_plan_boundaries_on_the_simulator,
        ]
    ));
    trials
}

/// `softmax_cluster_{vectors}` on `x` in clusters of `blocks` blocks of `threads`.
fn run_cluster(
    gpu: &Gpu,
    x: &Array2<f32>,
    t: f32,
    (vectors, blocks, threads): (usize, u32, u32),
) -> gpukern::Result<Vec<f32>> {
    let (rows, cols) = x.dim();
    let dx = gpu.upload(x.as_slice().unwrap_or_default())?;
    let mut dy = gpu.upload(&vec![f32::NAN; rows * cols])?;
    let cfg = LaunchConfig {
        grid: (rows as u32 * blocks, 1, 1),
        block: (threads, 1, 1),
        shared_mem_bytes: ksoft::CLUSTER_SHARED_BYTES,
    };
    let on = gpu.library();
    let on = on.clustered((blocks, 1, 1));
    // SAFETY: `dx` and `dy` hold rows*cols floats, both at the start of their allocations; the
    // grid is `rows` clusters of `blocks` blocks whose threads hold a row (the cases' sizes).
    unsafe {
        if vectors == 4 {
            ksoft::softmax_cluster_4::launch(&on, cfg, &dx, &mut dy, rows, cols, t)?;
        } else {
            ksoft::softmax_cluster_8::launch(&on, cfg, &dx, &mut dy, rows, cols, t)?;
        }
    }
    dy.to_vec()
}

/// One case at two temperatures against the f64 reference.
fn launch_case(gpu: &Gpu, rng: &mut StdRng, c: Case) -> Check {
    assert!(
        c.cols / 4 <= c.vectors * c.blocks as usize * c.threads as usize,
        "{c:?}: the cluster does not hold the row"
    );
    let x = random_matrix(rng, c.rows, c.cols);
    for t in [1.0, -2.5] {
        let got = run_cluster(gpu, &x, t, (c.vectors, c.blocks, c.threads))?;
        let want = cpu::softmax_rows(&x, t);
        check_rel_each(
            &format!("{c:?} t={t}"),
            &got,
            want.as_slice().unwrap_or_default(),
            SOFTMAX_MAX_REL,
        )?;
    }
    Ok(())
}

/// The edge rows (infinities, all-equal rows, NaN confined to its row) through a cluster of 4,
/// the special entries in different blocks.
fn cluster_edge_rows(gpu: &Gpu, _rng: &mut StdRng) -> Check {
    let cols = 501;
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let mut x = lcg_matrix(21, 6, cols);
    x[(1, 0)] = inf; // two +inf in rank 0 and rank 3: they share the mass
    x[(1, cols - 1)] = inf;
    x.row_mut(2).fill(-inf); // all -inf: uniform
    x[(3, 400)] = nan; // NaN in the last block: the row NaN, no other
    x[(4, 0)] = -inf;
    x[(4, 300)] = -inf;
    for t in [1.0, 0.0, -2.5] {
        let got = run_cluster(gpu, &x, t, (4, 4, 32))?;
        let want = cpu::softmax_rows(&x, t);
        for (r, (g, w)) in got.chunks(cols).zip(want.rows()).enumerate() {
            for (c, (&g, &w)) in g.iter().zip(w.iter()).enumerate() {
                let ok = if w.is_nan() {
                    g.is_nan()
                } else {
                    (g - w).abs() <= SOFTMAX_MAX_REL * w.abs() + 1e-30
                };
                if !ok {
                    return Err(format!("edge rows t={t}: [{r}, {c}] = {g}, want {w}").into());
                }
            }
        }
    }
    Ok(())
}

fn cluster_plans_for_the_long_rows() {
    // The default: at least 8 blocks per row.
    let default = OnePassConfig::default();
    let cluster = |vectors, blocks, threads| OnePassPlan::Cluster {
        vectors,
        blocks,
        threads,
    };
    assert_eq!(default.plan(8192, 65_536), cluster(8, 8, 256));
    assert_eq!(default.plan(1024, 131_072), cluster(8, 8, 512));
    assert_eq!(default.plan(8192, 32_769), cluster(8, 8, 128));
    // From here on the plan with clusters of the fewest blocks that hold the row.
    let d = OnePassConfig {
        cluster_min_blocks: 2,
        ..default
    };
    // The block kernels keep every row up to 32768 columns.
    assert!(matches!(
        d.plan(8192, 32_768),
        OnePassPlan::BlockEvictLast {
            vectors: 8,
            threads: 1024
        }
    ));
    // Past it, a cluster: 2 blocks of 512 threads, then of 1024 at 65536 columns, 4 at 131072.
    assert_eq!(d.plan(8192, 32_769), cluster(8, 2, 512));
    assert_eq!(d.plan(8192, 65_536), cluster(8, 2, 1024));
    assert_eq!(d.plan(8192, 65_540), cluster(8, 3, 704));
    assert_eq!(d.plan(1024, 131_072), cluster(8, 4, 1024));
    // Few rows: the cluster doubles while its blocks keep 256 threads or more.
    assert_eq!(d.plan(1, 131_072), cluster(8, 8, 512));
    assert_eq!(d.plan(1, 65_536), cluster(8, 8, 256));
    // The most a cluster of 8 (the portable limit) holds, 8 * 1024 threads of 8 vectors, and
    // past it the split path (few rows) or the stream (many).
    assert_eq!(d.plan(1, 262_147), cluster(8, 8, 1024));
    // Up to GRID_ROW_MAX_ROWS such rows run over a cooperative grid, more on the split path.
    assert_eq!(d.plan(1, 262_148), OnePassPlan::GridRow);
    assert_eq!(d.plan(1, 1 << 24), OnePassPlan::GridRow);
    assert_eq!(d.plan(8, 1 << 20), OnePassPlan::GridRow);
    assert!(matches!(d.plan(9, 1 << 20), OnePassPlan::Split { .. }));
    assert_eq!(d.plan(256, 262_148), OnePassPlan::Stream);
    // Clusters of 16 where allowed; 4-vector threads take twice the blocks.
    let wide = OnePassConfig {
        cluster_max_blocks: 16,
        ..d
    };
    assert_eq!(wide.plan(1, 524_288), cluster(8, 16, 1024));
    let four = OnePassConfig {
        cluster_vectors: 4,
        ..d
    };
    assert_eq!(four.plan(8192, 65_536), cluster(4, 4, 1024));
    // The bench's long-row candidates: at least 8 or 16 blocks per row, of fewer threads
    // (`cluster_min_blocks` past `cluster_max_blocks` counts as the latter).
    let eight = OnePassConfig {
        cluster_min_blocks: 8,
        ..d
    };
    assert_eq!(eight.plan(8192, 65_536), cluster(8, 8, 256));
    assert_eq!(eight.plan(1024, 131_072), cluster(8, 8, 512));
    assert_eq!(eight.plan(1, 262_147), cluster(8, 8, 1024));
    let sixteen = OnePassConfig {
        cluster_max_blocks: 16,
        cluster_min_blocks: 16,
        ..d
    };
    assert_eq!(sixteen.plan(8192, 65_536), cluster(8, 16, 128));
    assert_eq!(sixteen.plan(1024, 131_072), cluster(8, 16, 256));
    let sixteen_4v = OnePassConfig {
        cluster_vectors: 4,
        ..sixteen
    };
    assert_eq!(sixteen_4v.plan(8192, 65_536), cluster(4, 16, 256));
    assert_eq!(sixteen_4v.plan(1024, 131_072), cluster(4, 16, 512));
    let capped = OnePassConfig {
        cluster_min_blocks: 16,
        ..d
    };
    assert_eq!(capped.plan(8192, 65_536), cluster(8, 8, 256));
    // No clusters at all.
    let none = OnePassConfig {
        cluster_max_blocks: 1,
        grid_row_max_rows: 0,
        ..d
    };
    assert!(matches!(none.plan(2, 65_536), OnePassPlan::Split { .. }));
}

/// One side of a plan boundary: its name, the config, the shape, and what the plan must be.
type Side = (
    &'static str,
    OnePassConfig,
    (usize, usize),
    fn(OnePassPlan) -> bool,
);

fn cluster_plan_boundaries_on_the_simulator() {
    // Each side of `cluster_min_cols` (the block kernel below, a cluster from it) and of what a
    // cluster of 2 holds (the stream past it), at a small scale: with `block_max_cols = 0` the
    // block kernels take nothing, and a cluster of at most 2 blocks of 1024 threads of 8
    // vectors holds 65536 columns (+3).
    let gpu = Gpu::simulator();
    let small = OnePassConfig {
        warp_max_cols: 0,
        cluster_min_cols: 100,
        cluster_min_blocks: 2,
        split_max_rows: 0,
        ..classic()
    };
    let pair = OnePassConfig {
        warp_max_cols: 0,
        block_max_cols: 0,
        cluster_min_cols: 0,
        cluster_max_blocks: 2,
        split_max_rows: 0,
        ..classic()
    };
    let sides: [Side; 4] = [
        ("below cluster_min_cols", small, (3, 99), |p| {
            matches!(p, OnePassPlan::BlockEvictLast { .. })
        }),
        ("at cluster_min_cols", small, (3, 100), |p| {
            matches!(p, OnePassPlan::Cluster { blocks: 2, .. })
        }),
        ("a full cluster of 2", pair, (1, 65_539), |p| {
            p == OnePassPlan::Cluster {
                vectors: 8,
                blocks: 2,
                threads: 1024,
            }
        }),
        ("past a cluster of 2", pair, (1, 65_540), |p| {
            p == OnePassPlan::Stream
        }),
    ];
    for (name, config, (rows, cols), expect) in sides {
        let plan = config.plan(rows, cols);
        assert!(expect(plan), "{name}: {rows} x {cols} planned as {plan:?}");
        let x = lcg_matrix(31, rows, cols);
        let got = one_pass(&gpu, &x, 1.0, &config);
        assert_softmax_close(&format!("{name} ({plan:?})"), &got, &cpu::softmax_rows(&x, 1.0));
    }
}
