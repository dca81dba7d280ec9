//! The public paths a user reaches for, on the default device (`global::api::*`): every free
//! function's `_with` form against the same operation on device data with the same algorithm
//! (every algorithm of each family), the half-precision kernels chosen on host arrays
//! (`matmul_half_with`), the tensor-core tile types at the crate root, `zeros` as f32 without a
//! type annotation beside `zeros_of`, and a vector turned into a matrix and back without a copy.

use gpukern::{
    AddAlgorithm, ArgmaxAlgorithm, CrossEntropyAlgorithm, Error, Gpu, HalfTile, NormAlgorithm,
    ReduceAlgorithm, Tf32Tile, TransposeAlgorithm, WsTile, bf16, tf32_error_factor,
};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2};
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_matrix;
use crate::common::trial::global_trial;

/// Every trial of the module.
pub(crate) fn trials() -> Vec<Trial> {
    vec![
        global_trial("api::free_with_forms", free_with_forms),
        global_trial("api::half_tiles_on_host_arrays", half_tiles_on_host_arrays),
        global_trial("api::zeros_and_matrix_views", |_| zeros_and_matrix_views()),
    ]
}

/// Fails unless `got == want`, naming `what`.
fn same<T: PartialEq + std::fmt::Debug>(what: String, got: T, want: T, failures: &mut Vec<String>) {
    if got != want {
        failures.push(format!("{what}: {got:?} vs {want:?}"));
    }
}

/// Each free `_with` function, every algorithm of its family, gives what the `Gpu` method with
/// that algorithm gives on the same data (the same kernel: the same bits).
fn free_with_forms(rng: &mut StdRng) -> Check {
    let gpu = Gpu::global()?;
    let mut failures = Vec::new();
    let m = random_matrix(rng, 37, 68);
    let v: Array1<f32> = m.row(0).to_owned();
    let dm = gpu.upload_matrix(&m)?;
    let dv = dm.as_vec();
    for a in AddAlgorithm::ALL {
        let want = gpu.add_with(dv, dv, a)?.to_vec()?;
        same(
            format!("add_with({a:?})"),
            gpukern::add_with(&m, &m, a)?.into_raw_vec_and_offset().0,
            want,
            &mut failures,
        );
        let mut x = m.clone();
        gpukern::increment_by_one_with(&mut x, a)?;
        same(
            format!("increment_by_one_with({a:?})"),
            x,
            m.mapv(|e| e + 1.0),
            &mut failures,
        );
    }
    for a in ReduceAlgorithm::ALL {
        same(
            format!("sum_with({a:?})"),
            gpukern::sum_with(&m, a)?.to_bits(),
            gpu.sum_with(dv, a)?.to_bits(),
            &mut failures,
        );
        same(
            format!("max_with({a:?})"),
            gpukern::max_with(&m, a)?,
            gpu.max_with(dv, a)?,
            &mut failures,
        );
    }
    for a in ArgmaxAlgorithm::ALL {
        same(
            format!("argmax_with({a:?})"),
            gpukern::argmax_with(&m, a)?,
            gpu.argmax_with(dv, a)?,
            &mut failures,
        );
    }
    for a in TransposeAlgorithm::ALL {
        same(
            format!("transpose_with({a:?})"),
            gpukern::transpose_with(&m, a)?,
            m.t().to_owned(),
            &mut failures,
        );
    }
    let w = Array1::from_shape_fn(68, |j| 0.5 + j as f32 / 68.0);
    let (dw, db) = (
        gpu.upload(w.as_slice().ok_or("w")?)?,
        gpu.upload(v.as_slice().ok_or("v")?)?,
    );
    for a in NormAlgorithm::ALL {
        let want = gpu.rms_norm_with(&dm, &dw, 1e-5, a)?.to_array()?;
        same(
            format!("rms_norm_with({a:?})"),
            gpukern::rms_norm_with(&m, &w, 1e-5, a)?,
            want,
            &mut failures,
        );
        let want = gpu.layer_norm_with(&dm, &dw, &db, 1e-5, a)?.to_array()?;
        same(
            format!("layer_norm_with({a:?})"),
            gpukern::layer_norm_with(&m, &w, &v, 1e-5, a)?,
            want,
            &mut failures,
        );
    }
    let labels: Array1<i64> = (0..37).map(|_| rng.random_range(0..68)).collect();
    let dl = gpu.upload_labels(labels.as_slice().ok_or("labels")?, 68)?;
    for a in CrossEntropyAlgorithm::ALL {
        let want = gpu.cross_entropy_with(&dm, &dl, a)?.to_array()?;
        same(
            format!("cross_entropy_with({a:?})"),
            gpukern::cross_entropy_with(&m, &labels, a)?,
            want,
            &mut failures,
        );
        let want = gpu.cross_entropy_mean_with(&dm, &dl, a)?.to_vec()?;
        same(
            format!("cross_entropy_mean_with({a:?})"),
            vec![gpukern::cross_entropy_mean_with(&m, &labels, a)?],
            want,
            &mut failures,
        );
    }
    all_passed(failures)
}

/// `matmul_half_with` takes each tensor-core kernel on host arrays, the result in the operands'
/// type or f32, as `Gpu::matmul_to_with` gives it; the tile types and the TF32 bound are at the
/// crate root.
fn half_tiles_on_host_arrays(rng: &mut StdRng) -> Check {
    let gpu = Gpu::global()?;
    let mut failures = Vec::new();
    let a = random_matrix(rng, 40, 64).mapv(bf16::from_f32);
    let b = random_matrix(rng, 64, 24).mapv(bf16::from_f32);
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    for tile in [
        HalfTile::Square,
        HalfTile::Wgmma,
        HalfTile::WarpSpecialized,
        HalfTile::WarpSpecializedTile(WsTile::Narrow),
    ] {
        if tile != HalfTile::Square && !gpu.has_wgmma() {
            continue;
        }
        let mut want = gpu.zeros_matrix(40, 24)?;
        gpu.matmul_to_with(&da, &db, &mut want, tile)?;
        let got: Array2<f32> = gpukern::matmul_half_with(&a, &b, tile)?;
        same(
            format!("matmul_half_with({tile:?}) -> f32"),
            got,
            want.to_array()?,
            &mut failures,
        );
        let mut want = gpu.zeros_matrix_of::<bf16>(40, 24)?;
        gpu.matmul_to_with(&da, &db, &mut want, tile)?;
        let got: Array2<bf16> = gpukern::matmul_half_with(&a, &b, tile)?;
        same(
            format!("matmul_half_with({tile:?}) -> bf16"),
            got,
            want.to_array()?,
            &mut failures,
        );
    }
    if !(tf32_error_factor(64) > 0.0 && Tf32Tile::Wide.error_factor(64) > 0.0) {
        failures.push("the TF32 bounds at the crate root are not positive".into());
    }
    all_passed(failures)
}

/// `zeros` is f32 without an annotation; `zeros_of` takes any element; a vector becomes a
/// matrix and back with the same contents, and a wrong shape is a `ShapeMismatch`.
fn zeros_and_matrix_views() -> Check {
    let gpu = Gpu::global()?;
    let z = gpu.zeros(6)?;
    if z.to_vec()? != vec![0.0f32; 6] {
        return Err("zeros(6) is not six f32 zeros".into());
    }
    if gpu.zeros_of::<u32>(3)?.to_vec()? != vec![0u32; 3] {
        return Err("zeros_of::<u32>(3) is not three zeros".into());
    }
    let v = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    let m = v.into_matrix(3, 2)?;
    if m.to_array()? != ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]) {
        return Err("into_matrix(3, 2) does not hold the rows in order".into());
    }
    let back = m.into_vec();
    if back.to_vec()? != vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0] {
        return Err("into_vec does not give the elements back".into());
    }
    match back.into_matrix(4, 2) {
        Err(Error::ShapeMismatch { .. }) => Ok(()),
        other => Err(format!("into_matrix(4, 2) of 6 elements: {:?}", other.map(|m| m.dim())).into()),
    }
}
