//! The cross-entropy family against `cpu::cross_entropy_rows`: per backend and algorithm
//! (`CrossEntropyAlgorithm::ALL`: the block split, warps per chunk, a warp per row), the
//! per-row losses and their mean on ragged and long rows (`cross_entropy::RxC`, several chunks per row past
//! 8192 columns), NaN and infinite logits (`cross_entropy::edges`), labels out of range refused
//! on the host (`errors::cross_entropy`), and a bad label passed straight to the kernel, which
//! must read nothing outside the row and give NaN (`cross_entropy::unchecked_labels`, where the
//! simulator reports any out-of-bounds read as an error); the free functions
//! (`global::cross_entropy`).

use gpukern::{CrossEntropyAlgorithm, Error, Gpu, cpu};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2};
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, global_trial, trial};

/// Simulator shapes: 1, 3, 1000 and 4097 columns (off the 4-float vectors and the 512-thread
/// block), and 20000 columns (several chunks per row).
const SIM_SHAPES: &[(usize, usize)] = &[(1, 1), (3, 3), (2, 1000), (3, 4097), (2, 20000)];

/// CUDA shapes: ragged, the bench's vocabulary sizes, and a few rows of 2^20.
const CUDA_SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (7, 33),
    (64, 4097),
    (256, 32768),
    (64, 131073),
    (512, 262144),
    (3, 1 << 20),
];

/// Losses of O(ln cols): an f32 sum of up to 2^20 exponentials (compensated), `lg2.approx`
/// (2^-22) and the rounding of `M - x`: well inside 1e-5 relative plus 1e-5.
const ABS: f32 = 1e-5;
const REL: f32 = 1e-5;

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_SHAPES);
    trials.extend(backend_trials(cuda, CUDA_SHAPES));
    trials.push(global_trial("cross_entropy", global_cross_entropy));
    trials
}

/// One backend's trials.
fn backend_trials(target: &Target, shapes: &'static [(usize, usize)]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "cross_entropy::edges", |gpu, _| edges(gpu)),
        trial(target, "cross_entropy::unchecked_labels", |gpu, _| {
            unchecked_labels(gpu)
        }),
        trial(target, "errors::cross_entropy", |gpu, _| errors(gpu)),
    ];
    for &(rows, cols) in shapes {
        trials.push(trial(
            target,
            &format!("cross_entropy::{rows}x{cols}"),
            move |gpu, rng| shape(gpu, rng, (rows, cols)),
        ));
    }
    trials
}

/// Logits in [-8, 8), labels anywhere in the row (the first, the last, the rest at random):
/// the per-row losses and their mean.
fn shape(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let x: Vec<f32> = random_vec(rng, rows * cols).iter().map(|v| 8.0 * v).collect();
    let labels: Vec<i64> = (0..rows)
        .map(|r| match r {
            0 => 0,
            1 => cols as i64 - 1,
            _ => rng.random_range(0..cols as i64),
        })
        .collect();
    let want = cpu::cross_entropy_rows(&x, cols, &labels);
    let dx = gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x).map_err(|e| e.to_string())?)?;
    let dl = gpu.upload_labels(&labels, cols)?;
    let mut failures = Vec::new();
    if let Err(e) = check_close(
        &format!("cross_entropy {rows}x{cols}"),
        &gpu.cross_entropy(&dx, &dl)?.to_vec()?,
        &want,
        ABS,
        REL,
    ) {
        failures.push(e.to_string());
    }
    let mean = want.iter().map(|&v| f64::from(v)).sum::<f64>() / rows as f64;
    for algorithm in CrossEntropyAlgorithm::ALL {
        let what = format!("cross_entropy_with({}) {rows}x{cols}", algorithm.name());
        let got = gpu.cross_entropy_with(&dx, &dl, algorithm)?.to_vec()?;
        if let Err(e) = check_close(&what, &got, &want, ABS, REL) {
            failures.push(e.to_string());
        }
        let got = gpu.cross_entropy_mean_with(&dx, &dl, algorithm)?.to_vec()?;
        if let Err(e) = check_close(&format!("{what} mean"), &got, &[mean as f32], ABS, REL) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// NaN and infinite logits between ordinary rows (on a row long enough for several chunks, and
/// a short one): a NaN row's loss is NaN, `+inf` off the label gives `+inf`, at the label NaN,
/// a row of `-inf` NaN; the ordinary rows stay exact; the mean is NaN.
fn edges(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for cols in [20000usize, 37] {
        let ordinary = crate::common::lcg_vec(11, cols);
        let mut x = ordinary.clone();
        let mut nan_row = ordinary.clone();
        nan_row[cols - 1] = f32::NAN;
        x.extend(&nan_row);
        let mut inf_off = ordinary.clone();
        inf_off[cols / 2] = f32::INFINITY;
        x.extend(&inf_off);
        let mut inf_at = ordinary.clone();
        inf_at[0] = f32::INFINITY;
        x.extend(&inf_at);
        x.extend(std::iter::repeat_n(f32::NEG_INFINITY, cols));
        x.extend(ordinary.iter().map(|v| v + 1e4));
        let rows = x.len() / cols;
        let labels: Vec<i64> = vec![3, 3, 1, 0, 2, 5];
        let want = cpu::cross_entropy_rows(&x, cols, &labels);
        let dx = gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), x).map_err(|e| e.to_string())?)?;
        let dl = gpu.upload_labels(&labels, cols)?;
        for algorithm in CrossEntropyAlgorithm::ALL {
            let name = algorithm.name();
            let got = gpu.cross_entropy_with(&dx, &dl, algorithm)?.to_vec()?;
            if let Err(e) = check_close(
                &format!("cross_entropy edges ({name}), {cols} columns"),
                &got,
                &want,
                1e-4,
                REL,
            ) {
                failures.push(e.to_string());
            }
            let expected = [false, true, false, true, true, false];
            for (r, &nan) in expected.iter().enumerate() {
                if got[r].is_nan() != nan {
                    failures.push(format!(
                        "{name}, {cols} columns, row {r}: loss {}, NaN expected: {nan}",
                        got[r]
                    ));
                }
            }
            if !got[2].is_infinite() {
                failures.push(format!("{name}: +inf off the label gave {}", got[2]));
            }
            let mean = gpu.cross_entropy_mean_with(&dx, &dl, algorithm)?.to_vec()?;
            if !mean.first().is_some_and(|m| m.is_nan()) {
                failures.push(format!("{name}: the mean over a NaN loss is {mean:?}"));
            }
        }
    }
    all_passed(failures)
}

/// Labels out of range passed straight to `cross_entropy_finish` (no host check): the kernel
/// must not read outside the row (the simulator would fail the launch) and writes NaN; an
/// in-range label among them is unaffected.
fn unchecked_labels(gpu: &Gpu) -> Check {
    let (rows, cols) = (5, 9);
    let x = Array2::from_shape_fn((rows, cols), |(r, c)| (r * cols + c) as f32 / 10.0);
    let dx = gpu.upload_matrix(&x)?;
    let labels = gpu.upload(&[-1i64, cols as i64, 4, i64::MAX, i64::MIN])?;
    // One chunk per row whose statistics are (m = 0, s = 1): logsumexp 0.
    let partials = gpu.upload(&[0.0f32, 1.0].repeat(rows))?;
    let loss = gpu
        .cross_entropy_finish_unchecked(&dx, &labels, &partials, 1)?
        .to_vec()?;
    let ok = loss[0].is_nan()
        && loss[1].is_nan()
        && loss[3].is_nan()
        && loss[4].is_nan()
        && (loss[2] + x[(2, 4)]).abs() < 1e-6;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "losses {loss:?}: NaN expected for every label out of range, -{} for row 2",
            x[(2, 4)]
        )
        .into())
    }
}

/// Labels out of range (negative, `>= cols`) refused at upload; labels checked against another
/// number of classes, or of another count than the rows, refused; no columns refused; no rows
/// give no losses (and no mean).
fn errors(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for bad in [[0i64, -1], [0, 4], [i64::MIN, 0]] {
        match gpu.upload_labels(&bad, 4) {
            Err(Error::InvalidArgument { .. }) => {}
            other => failures.push(format!(
                "labels {bad:?} of 4 classes: {:?}",
                other.map(|l| l.len())
            )),
        }
    }
    let x = gpu.upload_matrix(&Array2::<f32>::zeros((2, 4)))?;
    let other_classes = gpu.upload_labels(&[0, 1], 5)?;
    if let Err(e) = expect_shape_mismatch("classes", gpu.cross_entropy(&x, &other_classes), &[4], &[5]) {
        failures.push(e.to_string());
    }
    let three = gpu.upload_labels(&[0, 1, 2], 4)?;
    if let Err(e) = expect_shape_mismatch("label count", gpu.cross_entropy(&x, &three), &[2], &[3]) {
        failures.push(e.to_string());
    }
    let no_cols = gpu.upload_matrix(&Array2::<f32>::zeros((2, 0)))?;
    let labels = gpu.upload_labels(&[], 0)?;
    if gpu.cross_entropy(&no_cols, &labels).is_ok() {
        failures.push("rows of no columns were accepted (labels checked empty)".into());
    }
    let no_rows = gpu.upload_matrix(&Array2::<f32>::zeros((0, 4)))?;
    let none = gpu.upload_labels(&[], 4)?;
    if !gpu.cross_entropy(&no_rows, &none)?.is_empty() {
        failures.push("no rows gave losses".into());
    }
    if !matches!(
        gpu.cross_entropy_mean(&no_rows, &none),
        Err(Error::InvalidArgument { .. })
    ) {
        failures.push("the mean of no rows was not refused".into());
    }
    all_passed(failures)
}

/// The free functions on a sliced view.
fn global_cross_entropy(rng: &mut StdRng) -> Check {
    let (rows, cols) = (6, 300);
    let wide = Array2::from_shape_vec((rows, cols + 5), random_vec(rng, rows * (cols + 5)))
        .map_err(|e| e.to_string())?;
    let x = wide.slice(ndarray::s![.., ..cols]);
    let labels = Array1::from_iter((0..rows as i64).map(|r| r * 37 % cols as i64));
    let xs: Vec<f32> = x.iter().copied().collect();
    let want = cpu::cross_entropy_rows(&xs, cols, labels.as_slice().unwrap_or_default());
    let got = gpukern::cross_entropy(&x, &labels)?;
    check_close(
        "gpukern::cross_entropy",
        got.as_slice().unwrap_or_default(),
        &want,
        ABS,
        REL,
    )?;
    let mean = gpukern::cross_entropy_mean(&x, &labels)?;
    let want_mean = want.iter().map(|&v| f64::from(v)).sum::<f64>() / rows as f64;
    check_close(
        "gpukern::cross_entropy_mean",
        &[mean],
        &[want_mean as f32],
        ABS,
        REL,
    )?;
    if gpukern::cross_entropy(&x, &Array1::from_elem(rows, cols as i64)).is_ok() {
        return Err("a label equal to cols was accepted".into());
    }
    Ok(())
}
