//! The matmul family against `cpu::matmul`: every entry point and algorithm per backend
//! (`{sim,cuda}::matmul::MxKxN`), every plan of the fast kernels (`matmul_fast_into::`) and
//! every tiling of the TF32 kernels (`matmul_tf32_into::`), their errors, on CUDA the required
//! 1000^3 product and each side of the default plans' boundaries (`cuda::matmul_plan::`), the
//! free functions on views (`global::matmul`), the TF32 check against planted wrong kernels, and
//! in [`fast_plans`] each fast kernel and the plan table in the simulator (`sim::matmul::*`).

#[path = "matmul/decode.rs"]
mod decode;
#[path = "matmul/empty.rs"]
mod empty;
#[path = "matmul/fast_plans.rs"]
mod fast_plans;
#[path = "matmul/fp8.rs"]
mod fp8;
#[path = "matmul/fp8_product.rs"]
mod fp8_product;
#[path = "matmul/grouped.rs"]
mod grouped;
#[path = "matmul/half.rs"]
mod half;
#[path = "matmul/stream_k.rs"]
mod stream_k;
#[path = "matmul/wgmma.rs"]
mod wgmma;
#[path = "matmul/wgmma_tf32.rs"]
mod wgmma_tf32;

use gpukern::ops::matmul::{FastPlan, FastTile, Tf32Tile};
use gpukern::{Error, Gpu, MatmulAlgorithm, cpu};
use libtest_mimic::{Failed, Trial};
use ndarray::{Array2, ArrayView2, s};
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};
use crate::common::{
    self, TF32_ROUNDED, TF32_TRUNCATED, matmul_with_operand_bits, random_matrix, tf32_statistical_violation,
};
use crate::sizes::{CUDA_SIZES, SIM_SIZES, Sizes};

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, &SIM_SIZES);
    trials.extend(backend_trials(cuda, &CUDA_SIZES));
    trials.push(trial(cuda, "matmul", matmul_1000));
    for (m, k, n) in MATMUL_PLAN_BOUNDARIES {
        trials.push(trial(
            cuda,
            &format!("matmul_plan::{m}x{k}x{n}"),
            move |gpu, rng| matmul_shape(gpu, rng, (m, k, n)),
        ));
    }
    trials.push(global_trial("matmul", global_matmul));
    trials.push(Trial::test(
        "tf32_check::planted_kernels_fail_and_tf32_passes",
        tf32_check_planted,
    ));
    trials.extend(fast_plans::trials());
    trials.extend(stream_k::trials(sim, cuda));
    trials.extend(half::trials(sim, cuda));
    trials.extend(decode::trials(sim, cuda));
    trials.extend(fp8::trials(sim, cuda));
    trials.extend(fp8_product::trials(sim, cuda));
    trials.extend(wgmma::trials(sim, cuda));
    trials.extend(wgmma_tf32::trials(sim, cuda));
    trials.extend(grouped::trials(sim, cuda));
    trials.extend(empty::trials(sim, cuda));
    trials
}

/// One backend's trials: the errors, then every shape with every algorithm, plan and tiling.
fn backend_trials(target: &Target, sizes: &'static Sizes) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "errors::too_large_grid", |gpu, _| too_large_grid(gpu)),
        trial(target, "errors::fast_plan_without_slices", |gpu, _| {
            fast_plan_without_slices(gpu)
        }),
    ];
    for &shape in sizes.matmul {
        let (m, k, n) = shape;
        trials.push(trial(target, &format!("matmul::{m}x{k}x{n}"), move |gpu, rng| {
            matmul_shape(gpu, rng, shape)
        }));
    }
    for &shape in sizes.fast {
        let (m, k, n) = shape;
        trials.push(trial(
            target,
            &format!("matmul_fast_into::{m}x{k}x{n}"),
            move |gpu, rng| matmul_fast_plans(gpu, rng, shape),
        ));
    }
    for &shape in sizes.tf32 {
        let (m, k, n) = shape;
        trials.push(trial(
            target,
            &format!("matmul_tf32_into::{m}x{k}x{n}"),
            move |gpu, rng| matmul_tf32_tiles(gpu, rng, shape),
        ));
    }
    trials
}

/// Matmul, relative error norm against the f64 reference: f32 fused multiply-adds over k <= 4097
/// terms drift like sqrt(k) * 2^-24 ~ 4e-6 (1.2e-6 seen on an H200 at k = 4096).
const MATMUL_REL_TOL: f64 = 1e-5;

/// Fails unless `got` (the `m x n` result of `a * b` by a rounding TF32 kernel) lies within the
/// worst-case TF32 bound of every element and its RMS error near what TF32 operands give
/// (`tests/common`'s `tf32_statistical_violation`).
fn check_tf32(what: &str, a: &Array2<f32>, b: &Array2<f32>, got: &[f32]) -> Check {
    let factor = gpukern::ops::matmul::tf32_error_factor(a.ncols());
    match tf32_statistical_violation(&a.view(), &b.view(), got, factor, TF32_ROUNDED) {
        None => Ok(()),
        Some(e) => Err(format!("{what}: {e}").into()),
    }
}

/// Every matmul entry point and algorithm on one `m x k` times `k x n` product against
/// `cpu::matmul`: `matmul`, `matmul_with` and `matmul_into` (into a poisoned output); the f32
/// algorithms to `MATMUL_REL_TOL`, TF32 to its per-element bound.
fn matmul_shape(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let want = cpu::matmul(&a, &b)?;
    let want = want.as_slice().unwrap_or_default();
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut failures = Vec::new();
    let mut check = |variant: String, tf32: bool, got: gpukern::Result<Array2<f32>>| {
        let what = format!("{m}x{k}x{n} {variant}");
        let result = match got {
            Ok(c) => check_dim(&what, c.dim(), (m, n)).and_then(|()| {
                let got = c.as_slice().unwrap_or_default();
                if tf32 {
                    check_tf32(&what, &a, &b, got)
                } else {
                    check_rel_error(&what, got, want, MATMUL_REL_TOL)
                }
            }),
            Err(e) => Err(format!("{what}: {e}").into()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    check(
        "matmul".into(),
        false,
        gpu.matmul(&da, &db).and_then(|c| c.to_array()),
    );
    for algorithm in MatmulAlgorithm::ALL {
        let (name, tf32) = (algorithm.name(), algorithm.uses_tf32());
        let with = gpu.matmul_with(&da, &db, algorithm);
        check(
            format!("matmul_with({name})"),
            tf32,
            with.and_then(|c| c.to_array()),
        );
        let into = poisoned_matrix(gpu, m, n).and_then(|mut c| {
            gpu.matmul_into(&da, &db, &mut c, algorithm)
                .and_then(|()| c.to_array())
        });
        check(format!("matmul_into({name})"), tf32, into);
    }
    all_passed(failures)
}

/// Every tiling of the TF32 kernels (rounding and truncating) through `matmul_tf32_into`, into
/// a poisoned output, each within its own bound (`Tf32Tile::error_factor`: `u = 2^-11` rounding,
/// `2^-10` truncating): reaches every TF32 kernel whatever tiling `Tf32Tile::choose` would pick.
fn matmul_tf32_tiles(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut failures = Vec::new();
    for tile in Tf32Tile::ALL {
        let what = format!("{m}x{k}x{n} matmul_tf32_into({})", tile.name());
        let mut c = poisoned_matrix(gpu, m, n)?;
        if tile.tiling().shared_bytes() > gpu.limits().max_shared_mem_per_block_optin {
            // A tiling this device cannot hold (e.g. 105 KiB on a 99 KiB GPU) must be refused
            // with TooLarge, never launched; `Tf32Tile::choose` never picks it there.
            match gpu.matmul_tf32_into(&da, &db, &mut c, tile) {
                Err(Error::TooLarge { .. }) => {}
                other => failures.push(format!("{what}: over the shared-memory limit, got {other:?}")),
            }
            continue;
        }
        let result: Check = gpu
            .matmul_tf32_into(&da, &db, &mut c, tile)
            .and_then(|()| c.to_array())
            .map_err(|e| format!("{what}: {e}").into())
            .and_then(|c| {
                let got = c.as_slice().unwrap_or_default();
                let rounding = if tile.rounds() {
                    TF32_ROUNDED
                } else {
                    TF32_TRUNCATED
                };
                match tf32_statistical_violation(&a.view(), &b.view(), got, tile.error_factor(k), rounding) {
                    None => Ok(()),
                    Some(e) => Err(format!("{what}: {e}").into()),
                }
            });
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// Every plan of the fast kernels (every tiling, whole `k` and `k` in slices) through
/// `matmul_fast_into`, into a poisoned output, against `cpu::matmul`: reaches every fast kernel
/// whatever plan `FastPlan::choose` would pick for the shape.
fn matmul_fast_plans(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let want = cpu::matmul(&a, &b)?;
    let want = want.as_slice().unwrap_or_default();
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut failures = Vec::new();
    for tile in FastTile::ALL {
        for slices in [1, 2, 5] {
            let plan = FastPlan { tile, slices };
            let what = format!("{m}x{k}x{n} matmul_fast_into({plan:?})");
            let mut c = poisoned_matrix(gpu, m, n)?;
            let result = gpu
                .matmul_fast_into(&da, &db, &mut c, plan)
                .and_then(|()| c.to_array())
                .map_err(|e| format!("{what}: {e}").into())
                .and_then(|c| check_rel_error(&what, c.as_slice().unwrap_or_default(), want, MATMUL_REL_TOL));
            if let Err(e) = result {
                failures.push(e.to_string());
            }
        }
    }
    all_passed(failures)
}

/// The required 1000x1000 product with the default algorithm: relative error below 1e-5.
fn matmul_1000(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (a, b) = (random_matrix(rng, 1000, 1000), random_matrix(rng, 1000, 1000));
    let want = cpu::matmul(&a, &b)?;
    let got = gpu
        .matmul(&gpu.upload_matrix(&a)?, &gpu.upload_matrix(&b)?)?
        .to_array()?;
    check_rel_error(
        "matmul 1000x1000x1000",
        got.as_slice().unwrap_or_default(),
        want.as_slice().unwrap_or_default(),
        MATMUL_REL_TOL,
    )
}

/// A fast plan of zero slices of `k` is an [`Error::InvalidArgument`], not a launch.
fn fast_plan_without_slices(gpu: &Gpu) -> Check {
    let (a, b) = (
        gpu.upload_matrix(&Array2::<f32>::ones((3, 4)))?,
        gpu.upload_matrix(&Array2::<f32>::ones((4, 5)))?,
    );
    for tile in FastTile::ALL {
        let mut c = poisoned_matrix(gpu, 3, 5)?;
        match gpu.matmul_fast_into(&a, &b, &mut c, FastPlan { tile, slices: 0 }) {
            Err(Error::InvalidArgument { .. }) => {}
            other => {
                return Err(
                    format!("{tile:?} with 0 slices: expected InvalidArgument, got {other:?}").into(),
                );
            }
        }
    }
    Ok(())
}

/// A product whose rows need more blocks than the grid's y extent allows is refused with
/// [`Error::TooLarge`] naming the limit, never run on a smaller grid.
fn too_large_grid(gpu: &Gpu) -> Check {
    let max_y = gpu.limits().max_grid_dim[1];
    // More rows than max_y blocks of the tallest block tile cover, for every algorithm; k = 0
    // keeps the operands empty.
    let m = max_y as usize * gpukern::kernels::matmul::MAX_BLOCK_ROWS + 1;
    let (a, b) = (
        gpu.upload_matrix(&Array2::<f32>::zeros((m, 0)))?,
        gpu.upload_matrix(&Array2::<f32>::zeros((0, 1)))?,
    );
    for algorithm in MatmulAlgorithm::ALL {
        match gpu.matmul_with(&a, &b, algorithm) {
            Err(e @ Error::TooLarge { .. }) if e.to_string().contains(&max_y.to_string()) => {}
            Err(e) => {
                return Err(format!(
                    "{m}x0x1 {}: expected TooLarge naming {max_y}, got: {e}",
                    algorithm.name()
                )
                .into());
            }
            Ok(_) => return Err(format!("{m}x0x1 {}: expected TooLarge, got Ok", algorithm.name()).into()),
        }
    }
    Ok(())
}

/// `(m, k, n)` on each side of the default matmul plans' boundaries on an H200 (132
/// multiprocessors), through [`matmul_shape`] (every algorithm, the default plans): 128 x 128
/// tiles filling the GPU or not, 64 x 64 tiles filling it or not (then `k` split), `k` long
/// enough for a second slice or not, and TF32's wide tiling (128 x 256 blocks for every SM) or not.
/// `k` and `n` multiples of 4 and not, for the 16-byte and 4-byte kernels.
const MATMUL_PLAN_BOUNDARIES: [(usize, usize, usize); 8] = [
    // 12 x 11 = 132 blocks of 128 x 128 (large tiling) | 11 x 11 = 121 (small tiling).
    (1536, 36, 1408),
    (1408, 37, 1408),
    // 11 x 12 = 132 blocks of 64 x 64 (k whole) | 11 x 11 = 121, k = 512 in two slices of 256.
    (704, 515, 768),
    (704, 512, 704),
    // 11 x 11 blocks of 64 x 64 with k = 511: shorter than two slices of 256, k stays whole.
    (704, 511, 701),
    // TF32: 12 x 11 = 132 blocks of 128 x 256 (wide) | 12 x 10 = 120 (square).
    (1536, 33, 2816),
    (1536, 32, 2560),
    (1535, 31, 2815),
];

/// `gpukern::matmul` and `matmul_with` (every algorithm) on contiguous, transposed and sliced
/// operands against `cpu::matmul` on the same views.
fn global_matmul(rng: &mut StdRng) -> Check {
    let a = random_matrix(rng, 13, 17);
    let a_t = random_matrix(rng, 17, 13);
    let b = random_matrix(rng, 17, 11);
    let b_wide = random_matrix(rng, 17, 22);
    let cases: [(&str, ArrayView2<f32>, ArrayView2<f32>); 4] = [
        ("contiguous", a.view(), b.view()),
        ("A transposed", a_t.t(), b.view()),
        ("B sliced ..;2", a.view(), b_wide.slice(s![.., ..;2])),
        ("A transposed, B sliced ..;2", a_t.t(), b_wide.slice(s![.., ..;2])),
    ];
    let mut failures = Vec::new();
    for (what, a, b) in cases {
        let want = cpu::matmul(&a, &b)?;
        let mut results = vec![("matmul", false, gpukern::matmul(&a, &b))];
        for algorithm in MatmulAlgorithm::ALL {
            results.push((
                algorithm.name(),
                algorithm.uses_tf32(),
                gpukern::matmul_with(&a, &b, algorithm),
            ));
        }
        for (variant, tf32, got) in results {
            let got = got?;
            let what = format!("{variant} {what} {:?} x {:?}", a.dim(), b.dim());
            let result = check_dim(&what, got.dim(), want.dim()).and_then(|()| {
                if tf32 {
                    check_tf32(&what, &a.to_owned(), &b.to_owned(), &logical(&got.view()))
                } else {
                    check_rel_error(
                        &what,
                        &logical(&got.view()),
                        &logical(&want.view()),
                        MATMUL_REL_TOL,
                    )
                }
            });
            if let Err(e) = result {
                failures.push(e.to_string());
            }
        }
    }
    expect_shape_mismatch("matmul", gpukern::matmul(&a, &a), &[13, 17], &[13, 17])?;
    expect_shape_mismatch(
        "matmul_with",
        gpukern::matmul_with(&a, &a_t.t(), MatmulAlgorithm::Naive),
        &[13, 17],
        &[13, 17],
    )?;
    all_passed(failures)
}

/// The TF32 check against planted wrong kernels (CPU functions giving their results) at
/// 31x4097x7 and at k = 1000: the exact product less its last term of `k`, operands of 4
/// significand bits, operands of bf16 precision (8 bits) must each be refused, while a CPU
/// emulation of TF32 operands (11 bits, rounded) passes.
fn tf32_check_planted() -> Result<(), Failed> {
    let mut rng = common::rng_for("tf32_check::planted");
    let mut failures = Vec::new();
    for (m, k, n) in [(31, 4097, 7), (40, 1000, 40)] {
        let (a, b) = (random_matrix(&mut rng, m, k), random_matrix(&mut rng, k, n));
        let (av, bv) = (a.view(), b.view());
        let factor = gpukern::ops::matmul::tf32_error_factor(k);
        let exact = cpu::matmul(&a, &b).map_err(|e| Failed::from(e.to_string()))?;
        let mut last_dropped = exact.clone();
        for ((i, j), c) in last_dropped.indexed_iter_mut() {
            *c -= a[(i, k - 1)] * b[(k - 1, j)];
        }
        let planted = [
            (
                "the last term of k dropped",
                last_dropped.iter().copied().collect::<Vec<f32>>(),
            ),
            (
                "operands of 4 significand bits",
                matmul_with_operand_bits(&av, &bv, 3),
            ),
            ("bf16 operands", matmul_with_operand_bits(&av, &bv, 7)),
        ];
        for (what, got) in planted {
            if tf32_statistical_violation(&av, &bv, &got, factor, TF32_ROUNDED).is_none() {
                let ratio = common::tf32_rms_ratio(&av, &bv, &got, TF32_ROUNDED);
                failures.push(format!(
                    "{m}x{k}x{n}: {what} passes the TF32 check (RMS ratio {ratio:?})"
                ));
            }
        }
        let emulated = matmul_with_operand_bits(&av, &bv, 10);
        if let Some(e) = tf32_statistical_violation(&av, &bv, &emulated, factor, TF32_ROUNDED) {
            failures.push(format!(
                "{m}x{k}x{n}: TF32 emulated on the CPU fails the check: {e}"
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}
