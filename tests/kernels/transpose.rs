//! The transpose family against `cpu::transpose` (exact: a transpose moves bits): per backend on
//! ragged shapes around the 32x32 tile, with both algorithms and into a poisoned output
//! (`{sim,cuda}::transpose::RxC`), and the free function on views (`global::transpose`).

use gpukern::ops::transpose::TransposeAlgorithm;
use gpukern::{Gpu, cpu};
use libtest_mimic::Trial;
use ndarray::s;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_matrix;
use crate::common::trial::{Target, global_trial, trial};

/// Simulator shapes: one element, thinner and wider than a tile, ragged on both sides; and
/// multiples of 4 around the 64x64 tile, where `vec4_64` runs its own kernel (elsewhere it
/// falls back to `tiled_64`).
const SIM_SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 33),
    (33, 1),
    (31, 33),
    (64, 32),
    (65, 97),
    (100, 7),
    (4, 200),
    (68, 132),
    (128, 64),
    (132, 8),
];
/// CUDA shapes: ragged, tall, wide and large.
const CUDA_SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 4097),
    (4097, 1),
    (31, 33),
    (1000, 1000),
    (1025, 2047),
    (3, 100_003),
    (4096, 4096),
    (1028, 2060),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, shapes) in [(sim, SIM_SHAPES), (cuda, CUDA_SHAPES)] {
        for &(rows, cols) in shapes {
            trials.push(trial(
                target,
                &format!("transpose::{rows}x{cols}"),
                move |gpu, rng| transpose_matrix(gpu, rng, rows, cols),
            ));
        }
    }
    trials.push(global_trial("transpose", global_transpose));
    trials
}

/// `transpose`, `transpose_with` and `transpose_into_with` (into a poisoned output) against
/// `cpu::transpose`; a wrong output shape is refused.
fn transpose_matrix(gpu: &Gpu, rng: &mut StdRng, rows: usize, cols: usize) -> Check {
    let a = random_matrix(rng, rows, cols);
    let want = cpu::transpose(&a);
    let want = want.as_slice().ok_or("standard layout")?;
    let d = gpu.upload_matrix(&a)?;
    let got = gpu.transpose(&d)?;
    check_dim("transpose", got.dim(), (cols, rows))?;
    check_abs(
        &format!("transpose {rows}x{cols}"),
        &got.as_vec().to_vec()?,
        want,
        0.0,
    )?;
    for algorithm in TransposeAlgorithm::ALL {
        let what = format!("transpose_with({}) {rows}x{cols}", algorithm.name());
        let got = gpu.transpose_with(&d, algorithm)?;
        check_abs(&what, &got.as_vec().to_vec()?, want, 0.0)?;
        let mut out = poisoned_matrix(gpu, cols, rows)?;
        gpu.transpose_into_with(&d, &mut out, algorithm)?;
        check_abs(&format!("{what} into"), &out.as_vec().to_vec()?, want, 0.0)?;
    }
    if rows != cols {
        let mut wrong = poisoned_matrix(gpu, rows, cols)?;
        expect_shape_mismatch(
            "transpose_into_with",
            gpu.transpose_into_with(&d, &mut wrong, TransposeAlgorithm::Tiled),
            &[cols, rows],
            &[rows, cols],
        )?;
    }
    Ok(())
}

/// `gpukern::transpose` on a matrix, a transposed view (the result is the original) and a
/// sliced view: standard-layout results equal to `cpu::transpose`.
fn global_transpose(rng: &mut StdRng) -> Check {
    let m = random_matrix(rng, 45, 70);
    for (what, view) in [
        ("2-D", m.view()),
        ("transposed", m.t()),
        ("sliced", m.slice(s![5.., ..;3])),
    ] {
        let got = gpukern::transpose(&view)?;
        if !got.is_standard_layout() {
            return Err(format!("gpukern::transpose {what}: not standard layout").into());
        }
        let want = cpu::transpose(&view);
        check_dim(what, got.dim(), want.dim())?;
        check_abs(
            &format!("gpukern::transpose {what}"),
            got.as_slice().ok_or("layout")?,
            want.as_slice().ok_or("layout")?,
            0.0,
        )?;
    }
    Ok(())
}
