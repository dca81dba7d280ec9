//! The comparisons and expected errors of the `kernels` harness's trials: each returns a
//! [`Check`], so a trial body reads as a list of `?`.

use std::fmt::Debug;

use gpukern::{DeviceMatrix, DeviceVec, Error, Gpu, cpu};
use ndarray::{Array2, Dimension};

use super::max_abs_diff;

/// What a trial body returns: `?` works on gpukern's errors, and a message is a `String`.
pub type Check = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// `error <= tol`; false for a NaN error.
pub fn within(error: f64, tol: f64) -> bool {
    error <= tol
}

/// Fails unless `got` has `want`'s length and every element is within `max_abs` of it (NaN never
/// is).
pub fn check_abs(what: &str, got: &[f32], want: &[f32], max_abs: f64) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| !within((f64::from(got[i]) - f64::from(want[i])).abs(), max_abs))
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} elements off by more than {max_abs:e}, first at index {i}: got {}, \
             expected {}; max abs error {:.3e}",
            bad.len(),
            got.len(),
            got[i],
            want[i],
            max_abs_diff(got, want)
        )
        .into()),
    }
}

/// Fails unless the relative error norm (`cpu::rel_error`) of `got` against `want` is at most
/// `tol`.
pub fn check_rel_error(what: &str, got: &[f32], want: &[f32], tol: f64) -> Check {
    let err = cpu::rel_error(got, want);
    if err <= tol {
        Ok(())
    } else {
        let nans: Vec<usize> = (0..got.len()).filter(|&i| got[i].is_nan()).collect();
        let nans = match nans.first() {
            // Poisoned outputs are NaN: an element no thread wrote shows up here.
            Some(first) => format!(", {} NaN elements, the first at index {first}", nans.len()),
            None => String::new(),
        };
        Err(format!(
            "{what}: relative error {err:.3e} > {tol:e} (max abs error {:.3e}, {} elements{nans})",
            max_abs_diff(got, want),
            got.len()
        )
        .into())
    }
}

/// Fails unless every element of `got` is within `max_rel` of `want`, relatively, and is NaN
/// exactly where `want` is.
pub fn check_rel_each(what: &str, got: &[f32], want: &[f32], max_rel: f32) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let close = |g: f32, w: f32| {
        if w.is_nan() {
            g.is_nan()
        } else {
            approx::relative_eq!(g, w, epsilon = 0.0, max_relative = max_rel)
        }
    };
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !close(got[i], want[i])).collect();
    let Some(&first) = bad.first() else {
        return Ok(());
    };
    let rel = |i: usize| (f64::from(got[i]) - f64::from(want[i])).abs() / f64::from(want[i]).abs();
    let worst = bad
        .iter()
        .copied()
        .max_by(|&i, &j| rel(i).total_cmp(&rel(j)))
        .unwrap_or(first);
    Err(format!(
        "{what}: {} of {} elements off by more than {max_rel:e} relative; first at index {first} \
         (got {}, expected {}), worst at index {worst} (got {}, expected {}, relative error {:.3e})",
        bad.len(),
        got.len(),
        got[first],
        want[first],
        got[worst],
        want[worst],
        rel(worst)
    )
    .into())
}

/// Fails unless `result` is an [`Error::ShapeMismatch`] between `lhs` and `rhs` whose message
/// names both shapes.
pub fn expect_shape_mismatch<T>(
    what: &str,
    result: gpukern::Result<T>,
    lhs: &[usize],
    rhs: &[usize],
) -> Check {
    let Err(e) = result else {
        return Err(format!("{what}: expected a shape mismatch, got Ok").into());
    };
    let msg = e.to_string();
    let Error::ShapeMismatch { lhs: l, rhs: r, .. } = &e else {
        return Err(format!("{what}: expected a shape mismatch, got: {msg}").into());
    };
    let (ls, rs) = (format!("{lhs:?}"), format!("{rhs:?}"));
    if l != lhs || r != rhs {
        Err(format!("{what}: mismatch between {l:?} and {r:?}, expected {ls} and {rs}").into())
    } else if !msg.contains(&ls) || !msg.contains(&rs) {
        Err(format!("{what}: message {msg:?} does not name both shapes {ls} and {rs}").into())
    } else {
        Ok(())
    }
}

/// Fails unless `result` is an [`Error::InvalidArgument`] about the inverse temperature.
pub fn expect_bad_temperature<T>(what: &str, result: gpukern::Result<T>) -> Check {
    match result {
        Err(e @ Error::InvalidArgument { .. }) if e.to_string().contains("inverse temperature") => Ok(()),
        Err(e) => {
            Err(format!("{what}: expected InvalidArgument about the inverse temperature, got: {e}").into())
        }
        Ok(_) => Err(format!("{what}: expected InvalidArgument, got Ok").into()),
    }
}

/// Fails unless `result` is an [`Error::WrongDevice`].
pub fn expect_wrong_device<T>(what: &str, result: gpukern::Result<T>) -> Check {
    match result {
        Err(e @ Error::WrongDevice { .. }) if e.to_string().contains("another device") => Ok(()),
        Err(e) => Err(format!("{what}: expected WrongDevice, got: {e}").into()),
        Ok(_) => Err(format!("{what}: expected WrongDevice, got Ok").into()),
    }
}

/// Fails unless `got` has shape `want`.
pub fn check_dim<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: shape {got:?}, expected {want:?}").into())
    }
}

/// Turns a list of failures into one error, or `Ok` if there are none.
pub fn all_passed(failures: Vec<String>) -> Check {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// A device matrix of `rows x cols` NaNs: the output of an `_into` call, so that an element the
/// kernel does not write shows up.
pub fn poisoned_matrix(gpu: &Gpu, rows: usize, cols: usize) -> gpukern::Result<DeviceMatrix> {
    gpu.upload_matrix(&Array2::from_elem((rows, cols), f32::NAN))
}

/// A device vector of `len` NaNs (see [`poisoned_matrix`]).
pub fn poisoned_vec(gpu: &Gpu, len: usize) -> gpukern::Result<DeviceVec> {
    gpu.upload(&vec![f32::NAN; len])
}

/// The elements of any array in logical (row-major) order.
pub fn logical<D: Dimension>(a: &ndarray::ArrayView<'_, f32, D>) -> Vec<f32> {
    a.iter().copied().collect()
}

/// Fails unless each `got[i]` is within `abs + rel * |want[i]|` of `want[i]`, NaN where `want`
/// is and the same infinity where `want` is infinite.
pub fn check_close(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let bad = (0..got.len()).find(|&i| {
        let (g, w) = (got[i], want[i]);
        if w.is_nan() || g.is_nan() {
            !(w.is_nan() && g.is_nan())
        } else if w.is_infinite() {
            g != w
        } else {
            (g - w).abs() > abs + rel * w.abs()
        }
    });
    match bad {
        None => Ok(()),
        Some(i) => Err(format!("{what}: element {i} got {}, expected {}", got[i], want[i]).into()),
    }
}
