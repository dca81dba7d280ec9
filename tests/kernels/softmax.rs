//! The softmax family against `cpu::softmax` and `cpu::softmax_rows`. Here, per backend:
//! `softmax_vec` (`{sim,cuda}::softmax_vec::len_N`), `softmax` and `softmax_into` at every
//! temperature (`softmax::RxC::t=T`), every path of the one-pass plan (`softmax_one_pass::RxC`),
//! the edge rules (`softmax::edge_rows`), a non-finite temperature refused; on CUDA each side of
//! the default plan's boundaries (`cuda::softmax_plan::RxC`); the free function on views
//! (`global::softmax`). In the submodules, plain test functions run as `sim::softmax::<name>`
//! (they fail by panicking, as under libtest, on fixed LCG inputs): [`plans`] (which kernels the
//! one-pass plan picks), [`paths`] (each path forced on ragged shapes), [`edges`] (the edge rules
//! on every path, rows off a 16-byte boundary); and [`long_row`], one row of 2^24 on CUDA with
//! the CPU-side check that its tolerance catches an uncompensated sum.

#[path = "softmax/cluster.rs"]
mod cluster;
#[path = "softmax/edges.rs"]
mod edges;
#[path = "softmax/fixtures.rs"]
mod fixtures;
#[path = "softmax/long_row.rs"]
mod long_row;
#[path = "softmax/paths.rs"]
mod paths;
#[path = "softmax/plans.rs"]
mod plans;

use gpukern::ops::softmax::{OnePassConfig, SoftmaxAlgorithm};
use gpukern::{DeviceMatrix, Gpu, cpu};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2, Array3, ArrayView2, s};
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};
use crate::common::{random_matrix, random_vec};
use crate::sizes::{CUDA_SIZES, SIM_BLOCK_8_ROW, SIM_SIZES, Sizes};

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, &SIM_SIZES);
    // The one-pass paths on a row long enough for 8 vectors per thread (more than 2048 vectors:
    // `softmax_block_8`, `softmax_persist_block_8`), which the small simulator shapes miss.
    let shape = SIM_BLOCK_8_ROW;
    trials.push(trial(
        sim,
        &format!("softmax_one_pass::{}x{}", shape.0, shape.1),
        move |gpu, rng| softmax_one_pass_paths(gpu, rng, shape),
    ));
    trials.extend(backend_trials(cuda, &CUDA_SIZES));
    for (rows, cols) in SOFTMAX_PLAN_BOUNDARIES {
        trials.push(trial(
            cuda,
            &format!("softmax_plan::{rows}x{cols}"),
            move |gpu, rng| softmax_shape(gpu, rng, (rows, cols), 1.0),
        ));
    }
    trials.extend(long_row::trials(cuda));
    trials.push(global_trial("softmax", global_softmax));
    trials.extend(plans::trials());
    trials.extend(cluster::trials(sim, cuda));
    trials.extend(paths::trials());
    trials.extend(edges::trials());
    trials
}

/// One backend's trials.
fn backend_trials(target: &Target, sizes: &'static Sizes) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "errors::non_finite_temperature", |gpu, _| {
            non_finite_temperature(gpu)
        }),
        trial(target, "softmax::edge_rows", softmax_edge_rows),
    ];
    for &n in sizes.lengths {
        trials.push(trial(
            target,
            &format!("softmax_vec::len_{n}"),
            move |gpu, rng| softmax_vector(gpu, rng, n),
        ));
    }
    for &shape in sizes.softmax {
        let name = format!("softmax_one_pass::{}x{}", shape.0, shape.1);
        trials.push(trial(target, &name, move |gpu, rng| {
            softmax_one_pass_paths(gpu, rng, shape)
        }));
    }
    for &shape in sizes.softmax {
        for t in TEMPERATURES {
            let name = format!("softmax::{}x{}::t={t}", shape.0, shape.1);
            trials.push(trial(target, &name, move |gpu, rng| {
                softmax_shape(gpu, rng, shape, t)
            }));
        }
    }
    trials
}

/// Softmax, per element and relative: ex2.approx (2^-22), the rounding of t*(x-m) (|.| <= 20
/// here, ~2e-6) and f32 sums of up to 4096 terms per thread (~sqrt(4096) * 2^-24 ~ 4e-6); the
/// worst seen on an H200 was 5e-6 (a 2^20 row at t = 10).
pub(crate) const SOFTMAX_MAX_REL: f32 = 5e-5;

/// Inverse temperatures every softmax shape runs with: plain, flatter, uniform, reversed, sharp.
const TEMPERATURES: [f32; 5] = [1.0, 0.5, 0.0, -2.5, 10.0];

/// `softmax_vec` at every temperature against `cpu::softmax`.
fn softmax_vector(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let x = random_vec(rng, n);
    let dx = gpu.upload(&x)?;
    let mut failures = Vec::new();
    for t in TEMPERATURES {
        let got = gpu.softmax_vec(&dx, t)?.to_vec()?;
        if let Err(e) = check_rel_each(
            &format!("softmax_vec, n = {n}, t = {t}"),
            &got,
            &cpu::softmax(&x, t),
            SOFTMAX_MAX_REL,
        ) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// `softmax` and `softmax_into` (into a poisoned output) at inverse temperature `t` against
/// `cpu::softmax_rows`.
fn softmax_shape(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize), t: f32) -> Check {
    let x = random_matrix(rng, rows, cols);
    let want = cpu::softmax_rows(&x, t);
    let want = want.as_slice().unwrap_or_default();
    let dx = gpu.upload_matrix(&x)?;
    let mut failures = Vec::new();
    let mut check = |variant: String, got: gpukern::Result<DeviceMatrix>| {
        let what = format!("{variant} {rows}x{cols}, t = {t}");
        let result = match got.and_then(|y| y.to_array()) {
            Ok(y) => check_dim(&what, y.dim(), (rows, cols)).and_then(|()| {
                check_rel_each(&what, y.as_slice().unwrap_or_default(), want, SOFTMAX_MAX_REL)
            }),
            Err(e) => Err(format!("{what}: {e}").into()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    check("softmax".into(), gpu.softmax(&dx, t));
    let into = |algorithm: Option<SoftmaxAlgorithm>| -> gpukern::Result<DeviceMatrix> {
        let mut y = poisoned_matrix(gpu, rows, cols)?;
        match algorithm {
            None => gpu.softmax_into(&dx, &mut y, t)?,
            Some(algorithm) => gpu.softmax_into_with(&dx, &mut y, t, algorithm)?,
        }
        Ok(y)
    };
    check("softmax_into".into(), into(None));
    for algorithm in SoftmaxAlgorithm::ALL {
        let name = algorithm.name();
        check(
            format!("softmax_with({name})"),
            gpu.softmax_with(&dx, t, algorithm),
        );
        check(format!("softmax_into_with({name})"), into(Some(algorithm)));
    }
    all_passed(failures)
}

/// One-pass thresholds that steer a `rows x cols` softmax to each of its paths where the shape
/// allows it (else the plan falls through to the next path): warp per row, block per row (plain
/// and `evict_last` loads), lane
/// groups of 8 and 16, the persistent warp and block kernels, clusters (of 8- and 4-vector
/// threads, of 16 blocks), one streaming block per row, and rows split over blocks (a few
/// chunks, plain or with evict-first writes, and 4-column chunks).
fn one_pass_configs(cols: usize) -> Vec<(&'static str, OnePassConfig)> {
    // The register-held kernels that load, reduce and write one row each; the lane-group and
    // persistent kernels have their own entries.
    let base = OnePassConfig {
        group_lanes: 0,
        persistent_min_cols: usize::MAX,
        cluster_min_cols: usize::MAX,
        ..OnePassConfig::default()
    };
    let (no_warp, no_block) = (0, 0);
    let mut configs = vec![
        (
            "warp",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                ..base
            },
        ),
        (
            "block",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: usize::MAX,
                block_evict_last: false,
                ..base
            },
        ),
        (
            "block, evict-last loads",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: usize::MAX,
                block_evict_last: true,
                ..base
            },
        ),
        (
            "group of 8",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                group_lanes: 8,
                ..base
            },
        ),
        (
            "group of 16",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                group_lanes: 16,
                ..base
            },
        ),
        (
            "persistent warp",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                persistent_min_cols: 0,
                ..base
            },
        ),
        (
            "persistent block",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: usize::MAX,
                persistent_min_cols: 0,
                ..base
            },
        ),
        (
            "cluster of 8-vector threads",
            OnePassConfig {
                warp_max_cols: no_warp,
                cluster_min_cols: 0,
                ..base
            },
        ),
        (
            "cluster of 4-vector threads",
            OnePassConfig {
                warp_max_cols: no_warp,
                cluster_min_cols: 0,
                cluster_vectors: 4,
                ..base
            },
        ),
        (
            "cluster of 16 blocks",
            OnePassConfig {
                warp_max_cols: no_warp,
                cluster_min_cols: 0,
                cluster_max_blocks: 16,
                cluster_min_blocks: 16,
                ..base
            },
        ),
        (
            "stream",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: no_block,
                split_max_rows: 0,
                ..base
            },
        ),
        (
            "split in ~3",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: no_block,
                split_max_rows: usize::MAX,
                split_chunk: (cols / 3).max(4),
                ..base
            },
        ),
        (
            "split in ~3, evict-first writes",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: no_block,
                split_max_rows: usize::MAX,
                split_chunk: (cols / 3).max(4),
                split_streaming: true,
                ..base
            },
        ),
    ];
    // One vector per block: many chunk edges, but a block per 4 columns, so short rows only.
    if cols <= SPLIT_BY_4_MAX_COLS {
        configs.push((
            "split by 4",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: no_block,
                split_max_rows: usize::MAX,
                split_chunk: 4,
                ..base
            },
        ));
    }
    configs
}

/// Longest row split into 4-column chunks (one block each) by [`one_pass_configs`].
const SPLIT_BY_4_MAX_COLS: usize = 64;

/// Inverse temperatures of the one-pass path trials: one of each sign (the edge rules, shared
/// by every path, run at every temperature in the `softmax::` trials).
const PATH_TEMPERATURES: [f32; 2] = [1.0, -2.5];

/// Every path of the one-pass softmax on one shape, at both signs of the temperature, through
/// `softmax_into_one_pass` into a poisoned output.
fn softmax_one_pass_paths(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let x = random_matrix(rng, rows, cols);
    let dx = gpu.upload_matrix(&x)?;
    let mut failures = Vec::new();
    for t in PATH_TEMPERATURES {
        let want = cpu::softmax_rows(&x, t);
        for (path, config) in one_pass_configs(cols) {
            let what = format!(
                "softmax_into_one_pass({path}: {:?}) {rows}x{cols}, t = {t}",
                config.plan(rows, cols)
            );
            let mut y = poisoned_matrix(gpu, rows, cols)?;
            let result = gpu
                .softmax_into_one_pass(&dx, &mut y, t, &config)
                .and_then(|()| y.to_array())
                .map_err(|e| format!("{what}: {e}").into())
                .and_then(|y| {
                    check_rel_each(
                        &what,
                        y.as_slice().unwrap_or_default(),
                        want.as_slice().unwrap_or_default(),
                        SOFTMAX_MAX_REL,
                    )
                });
            if let Err(e) = result {
                failures.push(e.to_string());
            }
        }
    }
    all_passed(failures)
}

/// The edge rules of [`Gpu::softmax`] at every temperature, against `cpu::softmax_rows` (which
/// follows the same rules): `+inf` and `-inf` entries, rows of equal entries (all `-inf` too),
/// entries near `f32::MAX`, and a NaN that makes its own row NaN and no other. Every other row
/// still sums to 1.
fn softmax_edge_rows(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (inf, big, nan_row) = (f32::INFINITY, f32::MAX, 4);
    // 300 columns: more than one element per thread of a 256-thread block.
    let mut x = random_matrix(rng, 7, 300);
    // Two +inf share the row for t > 0, the one -inf takes it for t < 0.
    (x[[0, 5]], x[[0, 250]], x[[0, 17]]) = (inf, inf, -inf);
    x.row_mut(1).fill(-inf);
    x.row_mut(2).fill(0.75);
    // t * x and x - m overflow in f32 here; the result must not.
    (x[[3, 0]], x[[3, 1]], x[[3, 299]]) = (big, -big, big / 2.0);
    x[[nan_row, 123]] = f32::NAN;
    (x[[5, 3]], x[[5, 200]]) = (-inf, -inf);
    // Row 6 stays random.
    let dx = gpu.upload_matrix(&x)?;
    let mut failures = Vec::new();
    for t in TEMPERATURES {
        let got = gpu.softmax(&dx, t)?.to_array()?;
        let what = format!("softmax edge rows, t = {t}");
        let want = cpu::softmax_rows(&x, t);
        if let Err(e) = check_rel_each(
            &what,
            got.as_slice().unwrap_or_default(),
            want.as_slice().unwrap_or_default(),
            SOFTMAX_MAX_REL,
        ) {
            failures.push(e.to_string());
        }
        for (r, row) in got.rows().into_iter().enumerate() {
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            if (r == nan_row) != row.iter().all(|v| v.is_nan()) {
                failures.push(format!(
                    "{what}: row {r} must be all NaN exactly when it holds a NaN"
                ));
            } else if r != nan_row && !within((sum - 1.0).abs(), f64::from(SOFTMAX_MAX_REL)) {
                failures.push(format!("{what}: row {r} sums to {sum}"));
            }
        }
    }
    all_passed(failures)
}

/// A NaN or infinite inverse temperature is an [`Error::InvalidArgument`].
fn non_finite_temperature(gpu: &Gpu) -> Check {
    let x = gpu.upload_matrix(&Array2::<f32>::zeros((2, 3)))?;
    for t in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        expect_bad_temperature(&format!("softmax, t = {t}"), gpu.softmax(&x, t))?;
        let mut y = poisoned_matrix(gpu, 2, 3)?;
        expect_bad_temperature(&format!("softmax_into, t = {t}"), gpu.softmax_into(&x, &mut y, t))?;
        expect_bad_temperature(&format!("softmax_vec, t = {t}"), gpu.softmax_vec(x.as_vec(), t))?;
        for algorithm in SoftmaxAlgorithm::ALL {
            let name = algorithm.name();
            expect_bad_temperature(
                &format!("softmax_with({name}), t = {t}"),
                gpu.softmax_with(&x, t, algorithm),
            )?;
            let result = gpu.softmax_into_with(&x, &mut y, t, algorithm);
            expect_bad_temperature(&format!("softmax_into_with({name}), t = {t}"), result)?;
        }
        let result = gpu.softmax_into_one_pass(&x, &mut y, t, &OnePassConfig::default());
        expect_bad_temperature(&format!("softmax_into_one_pass, t = {t}"), result)?;
    }
    Ok(())
}

/// `(rows, cols)` on each side of every boundary of the default one-pass plan
/// (`OnePassConfig::default()` on an H200: block limits from the driver), run through
/// [`softmax_shape`]: every path the default takes, at its edges, and the kernels behind the
/// 8192 x 16384 and 8192 x 32768 benchmark figures (`softmax_block_8`, `softmax_persist_block_8`)
/// with few rows. [`plans`] checks the plans these shapes get.
const SOFTMAX_PLAN_BOUNDARIES: [(usize, usize); 18] = [
    // Lane groups of 16 (up to 32 vectors + 3) | a warp with 2 vectors per lane.
    (3, 131),
    (3, 132),
    // Warp with 2 | 4 vectors per lane.
    (3, 259),
    (3, 260),
    // Warp with 4 vectors per lane (warp_max_cols = 512) | a block with 4 vectors per thread.
    (3, 512),
    (3, 513),
    // Up to 8 rows too long for a cluster on the grid-row kernel (GRID_ROW_MAX_ROWS) | the
    // split path.
    (8, 262_148),
    (9, 262_148),
    // Block with 4 vectors per thread of up to 64 threads (BLOCK_4_MAX_THREADS) | 8 vectors
    // (softmax_block_8).
    (2, 1027),
    (2, 1028),
    // softmax_block_8 on both sides of where the persistent kernels once began (the default
    // PERSISTENT_MIN_COLS is now none).
    (2, 16_384),
    (2, 16_385),
    // softmax_block_8 at 1024 threads (block_max_cols) | a cluster of 8 blocks
    // (CLUSTER_MIN_COLS; before sm_90, the split path).
    (2, 32_768),
    (2, 32_769),
    // The most a cluster of 8 blocks (the portable limit) holds | the grid-row kernel (few rows).
    (1, 262_147),
    (1, 262_148),
    // Split (fewer than split_max_rows = 256 rows) | one streaming block per row.
    (255, 262_148),
    (256, 262_148),
];

/// `gpukern::softmax` along the last axis of 1-D, 2-D, 3-D, transposed and sliced inputs
/// against `cpu::softmax` / `cpu::softmax_rows`; non-finite temperatures refused.
fn global_softmax(rng: &mut StdRng) -> Check {
    let v = Array1::from(random_vec(rng, 50));
    let base = random_matrix(rng, 9, 40);
    let tall = random_matrix(rng, 40, 9);
    let cube = Array3::from_shape_vec((2, 3, 20), random_vec(rng, 120))?;
    for t in [1.0, 0.0, -2.5] {
        let got = gpukern::softmax(&v, t)?;
        check_rel_each(
            &format!("softmax 1-D, t = {t}"),
            &logical(&got.view()),
            &cpu::softmax(&logical(&v.view()), t),
            SOFTMAX_MAX_REL,
        )?;

        let cases: [(&str, ArrayView2<f32>); 3] = [
            ("2-D", base.view()),
            ("transposed", tall.t()),
            ("sliced ..;2", base.slice(s![.., ..;2])),
        ];
        for (what, x) in cases {
            let got = gpukern::softmax(&x, t)?;
            check_dim(what, got.dim(), x.dim())?;
            let want = cpu::softmax_rows(&x, t);
            check_rel_each(
                &format!("softmax {what} {:?}, t = {t}", x.dim()),
                &logical(&got.view()),
                &logical(&want.view()),
                SOFTMAX_MAX_REL,
            )?;
        }

        for algorithm in SoftmaxAlgorithm::ALL {
            let x = tall.t();
            let got = gpukern::softmax_with(&x, t, algorithm)?;
            let what = format!(
                "softmax_with({}) transposed {:?}, t = {t}",
                algorithm.name(),
                x.dim()
            );
            let want = cpu::softmax_rows(&x, t);
            check_rel_each(
                &what,
                &logical(&got.view()),
                &logical(&want.view()),
                SOFTMAX_MAX_REL,
            )?;
        }

        let got = gpukern::softmax(&cube, t)?;
        check_dim("softmax 3-D", got.dim(), cube.dim())?;
        let want = cpu::softmax_rows(&cube.to_shape((6, 20))?, t);
        check_rel_each(
            &format!("softmax 3-D, t = {t}"),
            &logical(&got.view()),
            &logical(&want.view()),
            SOFTMAX_MAX_REL,
        )?;
    }
    for t in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        expect_bad_temperature(&format!("softmax 1-D, t = {t}"), gpukern::softmax(&v, t))?;
        expect_bad_temperature(&format!("softmax 2-D, t = {t}"), gpukern::softmax(&base, t))?;
    }
    Ok(())
}
