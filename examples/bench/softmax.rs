//! Row softmax with an inverse temperature: `gpu.softmax_into_with(x, y, t, algorithm)`, every
//! algorithm, then (with `--plans`) each candidate plan of the one-pass algorithm that differs from its default
//! on the shape (`gpukern:one-pass/<candidate>`), so that one run times the old and the new
//! choice side by side.
//!
//! Minimum traffic: 8 bytes per element (read x once, write y once).

use gpukern::ops::softmax::{OnePassConfig, OnePassPlan};
use gpukern::{DeviceMatrix, SoftmaxAlgorithm};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for, softmax_reference};
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};

/// Inverse temperatures measured (`temperatures` of the suite's softmax family).
pub fn temperatures() -> Vec<f32> {
    crate::suite::floats("softmax", "temperatures")
        .into_iter()
        .map(|t| t as f32)
        .collect()
}
/// Inputs are uniform in `[-RANGE, RANGE)`: a spread of e^10 within a row at t = 1.
const RANGE: f32 = 5.0;

/// `(rows, cols)` of BENCHMARKING.md.
///
/// Past 8192 x 32768 the rows outgrow one block's registers: a thread-block cluster's on sm_90
/// (8192 x 65536 is 2 GiB, 1024 x 131072 512 MiB), then the single row of 2^24 split over blocks.
pub fn shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("softmax", quick)
}

/// The shapes timed: the suite's, and with `--plans` (full runs) the suite's `plans` shapes too,
/// which only the plans' rules need (rows too long for a cluster, on both sides of
/// `split_max_rows`).
fn timed_shapes(quick: bool, plans: bool) -> Vec<(usize, usize)> {
    let mut out = shapes(quick);
    if plans && !quick {
        out.extend(crate::suite::extra_shapes2("softmax", "plans"));
    }
    out
}

/// The one-pass candidates timed beside the default: the default thresholds with one choice
/// changed each (`classic`: neither lane groups nor persistent kernels, whatever the default).
fn candidates() -> Vec<(&'static str, OnePassConfig)> {
    let base = OnePassConfig::default();
    vec![
        (
            "classic",
            OnePassConfig {
                group_lanes: 0,
                persistent_min_cols: usize::MAX,
                ..base
            },
        ),
        (
            "group-8",
            OnePassConfig {
                group_lanes: 8,
                ..base
            },
        ),
        (
            "group-16",
            OnePassConfig {
                group_lanes: 16,
                ..base
            },
        ),
        (
            "persistent",
            OnePassConfig {
                persistent_min_cols: 0,
                ..base
            },
        ),
        (
            "non-persistent",
            OnePassConfig {
                persistent_min_cols: usize::MAX,
                ..base
            },
        ),
        // The long rows without clusters: the stream or split kernels, read twice.
        (
            "no-cluster",
            OnePassConfig {
                cluster_min_cols: usize::MAX,
                ..base
            },
        ),
        // Clusters of 4-vector threads (twice the blocks, two blocks per SM at 1024 threads).
        (
            "cluster-4v",
            OnePassConfig {
                cluster_vectors: 4,
                ..base
            },
        ),
        // Clusters of up to 16 blocks (non-portable): more SMs per row when rows are few.
        (
            "cluster-16",
            OnePassConfig {
                cluster_max_blocks: 16,
                ..base
            },
        ),
        // Clusters from 16385 columns: 8192 x 32768 as 2 blocks of 512 threads per row instead
        // of one persistent 1024-thread block (one row per SM), which leaves the SM idle between
        // rows; and the same with 4-vector threads from 8193 columns (8192 x 16384 as 2 x 512).
        (
            "cluster-from-16k",
            OnePassConfig {
                cluster_min_cols: 16385,
                ..base
            },
        ),
        // 8 vectors per thread from 2048 vectors per row (8192 x 4096 as 128 threads, 8192 x
        // 8192 as 256): 64-register threads in blocks of half the size, so that registers admit
        // more rows per multiprocessor (8 x 16 KiB or 4 x 32 KiB of loads in flight, as
        // 8192 x 16384 has 2 x 64 KiB), against 4-vector blocks (3 x 32 KiB at 8192 x 8192).
        (
            "block-8-from-4k",
            OnePassConfig {
                block_4_max_threads: 64,
                ..base
            },
        ),
        // Issue 15, shapes nearer Triton's (one program per row, 4 warps at 1024 columns, 16 at
        // 4096 and 8192): 8192 x 1024 as a block of 64 threads of 4 vectors per row (the default
        // since a run showed it faster) instead of a warp of 8 vectors per lane (`warp-to-1k`,
        // the default before); 4 vectors per thread up to 512 threads,
        // so 8192 x 4096 as 256 threads and 8192 x 8192 as 512 (Triton's block there), instead
        // of 8 vectors per thread in blocks of half the threads (`block-4v-to-8k`); and up to
        // 1024 threads, 8192 x 16384 as 1024 threads of 4 vectors (`block-4v-to-16k`).
        (
            "warp-to-1k",
            OnePassConfig {
                warp_max_cols: 1024,
                ..base
            },
        ),
        (
            "block-4v-to-8k",
            OnePassConfig {
                block_4_max_threads: 512,
                ..base
            },
        ),
        // The block kernels' loads of a row without torch.compile's `evict_last` hint (L1 and
        // L2), which the default has taken since a run showed it faster.
        (
            "plain-loads",
            OnePassConfig {
                block_evict_last: false,
                ..base
            },
        ),
        (
            "block-4v-to-16k",
            OnePassConfig {
                block_4_max_threads: 1024,
                ..base
            },
        ),
        (
            "cluster-4v-from-8k",
            OnePassConfig {
                cluster_min_cols: 8193,
                cluster_vectors: 4,
                ..base
            },
        ),
        // Long rows over fewer or more blocks (issue 15): the default takes at least 8 blocks
        // per row of fewer threads (blocks of 128 to 512 threads), so that several rows share an
        // SM and one row's reduction overlaps another's loads; `cluster-2x` the fewest blocks
        // that hold the row (the default before), `cluster-16x` 16 (the non-portable size).
        (
            "cluster-2x",
            OnePassConfig {
                cluster_min_blocks: 2,
                ..base
            },
        ),
        (
            "cluster-16x",
            OnePassConfig {
                cluster_max_blocks: 16,
                cluster_min_blocks: 16,
                ..base
            },
        ),
        (
            "cluster-16x-4v",
            OnePassConfig {
                cluster_max_blocks: 16,
                cluster_min_blocks: 16,
                cluster_vectors: 4,
                ..base
            },
        ),
        // Rows past 1024 columns read twice by a block of 512 threads per row
        // (`softmax_stream`, the row's second read from L2) instead of held in registers: the
        // formulation of torch.compile's kernel at 8192 x 8192 (a looped reduction, 512
        // threads, 32-40 registers, 70-93% occupancy, ncu `ea768fa-ncu-compile-*`), against the
        // register-held block's 56 registers and 47% occupancy.
        (
            "stream-past-1k",
            OnePassConfig {
                block_max_cols: 1024,
                cluster_min_cols: usize::MAX,
                ..base
            },
        ),
        // Rows too long for a cluster: from `split_max_rows` rows a block per row reads each row
        // twice (`softmax_stream`), below it each row is split over blocks: the suite's `plans`
        // shapes 128 x 524288 and 512 x 524288 either way.
        (
            "stream-any-rows",
            OnePassConfig {
                split_max_rows: 0,
                ..base
            },
        ),
        (
            "split-any-rows",
            OnePassConfig {
                split_max_rows: usize::MAX,
                ..base
            },
        ),
        // The split path (1 x 2^24; the default before the grid-row kernel, which now takes a
        // few such rows in one cooperative launch): two launches, then the write launch with
        // evict-first loads and stores, so the chunks the stats launch left in L2 stay there
        // until read; and chunks of half and twice the default (2048 or 512 blocks for the row).
        (
            "split",
            OnePassConfig {
                grid_row_max_rows: 0,
                ..base
            },
        ),
        (
            "split-streaming",
            OnePassConfig {
                grid_row_max_rows: 0,
                split_streaming: true,
                ..base
            },
        ),
        (
            "split-8k",
            OnePassConfig {
                grid_row_max_rows: 0,
                split_chunk: 8192,
                ..base
            },
        ),
        (
            "split-32k",
            OnePassConfig {
                grid_row_max_rows: 0,
                split_chunk: 32768,
                ..base
            },
        ),
        (
            "split-32k-streaming",
            OnePassConfig {
                grid_row_max_rows: 0,
                split_chunk: 32768,
                split_streaming: true,
                ..base
            },
        ),
    ]
}

/// How one row of the table runs: an algorithm, or the one-pass path with a config.
#[derive(Clone, Copy)]
enum Variant {
    Algorithm(SoftmaxAlgorithm),
    OnePass(OnePassConfig),
}

impl Variant {
    fn run(self, gpu: &gpukern::Gpu, x: &DeviceMatrix, y: &mut DeviceMatrix, t: f32) -> gpukern::Result<()> {
        match self {
            Variant::Algorithm(a) => gpu.softmax_into_with(x, y, t, a),
            Variant::OnePass(c) => gpu.softmax_into_one_pass(x, y, t, &c),
        }
    }
}

/// The rows timed for one shape: every algorithm, then (with `--plans`) each candidate whose plan
/// differs from the default's and from every earlier candidate's.
fn variants(rows: usize, cols: usize, plans: bool) -> Vec<(String, Variant, Option<OnePassPlan>)> {
    let mut out: Vec<(String, Variant, Option<OnePassPlan>)> = SoftmaxAlgorithm::ALL
        .iter()
        .map(|&a| {
            let plan = (a == SoftmaxAlgorithm::OnePass).then(|| OnePassConfig::default().plan(rows, cols));
            (a.name().to_string(), Variant::Algorithm(a), plan)
        })
        .collect();
    for (name, config) in candidates().into_iter().filter(|_| plans) {
        let plan = config.plan(rows, cols);
        if out.iter().all(|(_, _, p)| *p != Some(plan)) {
            out.push((format!("one-pass/{name}"), Variant::OnePass(config), Some(plan)));
        }
    }
    out
}

/// Measurements [`softmax`] makes: every variant of every shape at every temperature.
pub fn planned(quick: bool, plans: bool) -> usize {
    let per_t: usize = timed_shapes(quick, plans)
        .iter()
        .map(|&(r, c)| variants(r, c, plans).len())
        .sum();
    per_t * temperatures().len()
}

/// Every shape at every temperature.
pub fn softmax(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in timed_shapes(b.quick, b.plans) {
        if !b.wants(&format!("{rows}x{cols}")) {
            continue;
        }
        for t in temperatures() {
            for (name, variant, plan) in variants(rows, cols, b.plans) {
                let n = rows * cols;
                let mut base = Record::new("softmax", format!("gpukern:{name}"), format!("{rows}x{cols}"))
                    .with("rows", rows)
                    .with("cols", cols)
                    .with("t", f64::from(t));
                if let Some(plan) = plan {
                    base = base.with("plan", format!("{plan:?}"));
                }
                sink.item(base.clone(), || {
                    let x = random_vec(n, -RANGE, RANGE);
                    let reference = softmax_reference(&x, cols, t);
                    let nan = vec![f32::NAN; n];
                    let sets = sets_for(8 * n);
                    let gpu = &b.gpu;
                    let mut bufs = Vec::with_capacity(sets);
                    for _ in 0..sets {
                        bufs.push((
                            gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &x)?)?,
                            gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &nan)?)?,
                        ));
                    }
                    let (dx, dy) = &mut bufs[0];
                    variant.run(gpu, dx, dy, t)?;
                    let check = Check::new(&dy.as_vec().to_vec()?, &reference, F32_TOL, "cpu_f64");
                    let record = base.checked(&check).with("sets", sets);
                    if !check.passed() {
                        return Ok(record);
                    }
                    let stats = b.timer.measure(|i| {
                        let (dx, dy) = &mut bufs[i % sets];
                        Ok(variant.run(gpu, dx, dy, t)?)
                    })?;
                    Ok(record.timed(
                        &stats,
                        Some(crate::suite::bytes("softmax", &[("rows", rows), ("cols", cols)])),
                        None,
                    ))
                })?;
            }
        }
    }
    Ok(())
}
