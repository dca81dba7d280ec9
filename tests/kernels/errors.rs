//! Every shape check of the `Gpu` methods (`{sim,cuda}::errors::shape_mismatch`); the errors
//! of one family (a non-finite temperature, a plan of no slices, a grid too large) are with it.

use gpukern::ops::add::AddAlgorithm;
use gpukern::ops::matmul::{FastPlan, FastTile};
use gpukern::ops::softmax::SoftmaxAlgorithm;
use gpukern::{Gpu, MatmulAlgorithm};
use libtest_mimic::Trial;
use ndarray::Array2;

use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// Every trial of this file.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    [sim, cuda]
        .into_iter()
        .map(|target| trial(target, "errors::shape_mismatch", |gpu, _| shape_mismatches(gpu)))
        .collect()
}

/// Every shape check of the `Gpu` methods: the variant, both shapes, both in the message.
fn shape_mismatches(gpu: &Gpu) -> Check {
    let v = |n: usize| gpu.upload(&vec![0.0; n]);
    let mat = |r: usize, c: usize| gpu.upload_matrix(&Array2::<f32>::zeros((r, c)));
    expect_shape_mismatch("add", gpu.add(&v(3)?, &v(4)?), &[3], &[4])?;
    expect_shape_mismatch("copy_to_host", v(3)?.copy_to_host(&mut [0.0; 4]), &[3], &[4])?;
    for algorithm in AddAlgorithm::ALL {
        let what = format!("add_with({})", algorithm.name());
        expect_shape_mismatch(&what, gpu.add_with(&v(3)?, &v(4)?, algorithm), &[3], &[4])?;
        let what = format!("add_into_with({}) output", algorithm.name());
        let result = gpu.add_into_with(&v(3)?, &v(3)?, &mut v(5)?, algorithm);
        expect_shape_mismatch(&what, result, &[3], &[5])?;
    }
    for algorithm in SoftmaxAlgorithm::ALL {
        let what = format!("softmax_into_with({})", algorithm.name());
        let result = gpu.softmax_into_with(&mat(2, 3)?, &mut mat(3, 2)?, 1.0, algorithm);
        expect_shape_mismatch(&what, result, &[2, 3], &[3, 2])?;
    }
    expect_shape_mismatch(
        "add_into operands",
        gpu.add_into(&v(3)?, &v(2)?, &mut v(3)?),
        &[3],
        &[2],
    )?;
    expect_shape_mismatch(
        "add_into output",
        gpu.add_into(&v(3)?, &v(3)?, &mut v(5)?),
        &[3],
        &[5],
    )?;
    let (a, b) = (mat(2, 3)?, mat(4, 5)?);
    expect_shape_mismatch("matmul", gpu.matmul(&a, &b), &[2, 3], &[4, 5])?;
    for algorithm in MatmulAlgorithm::ALL {
        let what = format!("matmul_with({})", algorithm.name());
        expect_shape_mismatch(&what, gpu.matmul_with(&a, &b, algorithm), &[2, 3], &[4, 5])?;
        let what = format!("matmul_into({})", algorithm.name());
        expect_shape_mismatch(
            &what,
            gpu.matmul_into(&a, &b, &mut mat(2, 5)?, algorithm),
            &[2, 3],
            &[4, 5],
        )?;
        let (a, b) = (mat(2, 3)?, mat(3, 5)?);
        let what = format!("matmul_into({}) output", algorithm.name());
        expect_shape_mismatch(
            &what,
            gpu.matmul_into(&a, &b, &mut mat(5, 2)?, algorithm),
            &[5, 2],
            &[2, 5],
        )?;
    }
    let plan = FastPlan {
        tile: FastTile::Small,
        slices: 2,
    };
    expect_shape_mismatch(
        "matmul_fast_into",
        gpu.matmul_fast_into(&a, &b, &mut mat(2, 5)?, plan),
        &[2, 3],
        &[4, 5],
    )?;
    expect_shape_mismatch(
        "matmul_fast_into output",
        gpu.matmul_fast_into(&mat(2, 3)?, &mat(3, 5)?, &mut mat(5, 2)?, plan),
        &[5, 2],
        &[2, 5],
    )?;
    expect_shape_mismatch(
        "softmax_into",
        gpu.softmax_into(&mat(2, 3)?, &mut mat(3, 2)?, 1.0),
        &[2, 3],
        &[3, 2],
    )
}
