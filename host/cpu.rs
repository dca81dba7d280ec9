//! CPU reference implementations of every kernel, accumulating in f64: what the tests and the
//! benchmarks compare the GPU against.

use ndarray::{Array2, ArrayBase, Data, Ix2};

use crate::error::Result;

/// `a[i] + b[i]`.
///
/// Errors: [`crate::Error::ShapeMismatch`] if the lengths differ.
pub fn add(a: &[f32], b: &[f32]) -> Result<Vec<f32>> {
    crate::ops::same_shape(
        "add",
        &[a.len()],
        &[b.len()],
        "operands must have the same length",
    )?;
    Ok(a.iter().zip(b).map(|(x, y)| x + y).collect())
}

/// `x[i] + 1`.
pub fn increment_by_one(x: &[f32]) -> Vec<f32> {
    x.iter().map(|v| v + 1.0).collect()
}

/// `A * B` with f64 accumulation, rounded to f32 once at the end.
///
/// Errors: [`crate::Error::ShapeMismatch`] unless `A`'s columns equal `B`'s rows.
pub fn matmul<S1, S2>(a: &ArrayBase<S1, Ix2>, b: &ArrayBase<S2, Ix2>) -> Result<Array2<f32>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = f32>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    // The product is held in f64 (two f32 slots per element) before it is rounded: refuse a
    // result that could not exist on the host instead of letting the allocation panic.
    crate::buffer::checked_len("cpu::matmul", &[a.nrows(), b.ncols(), 2])?;
    let a64 = a.mapv(f64::from);
    let b64 = b.mapv(f64::from);
    Ok(a64.dot(&b64).mapv(|v| v as f32))
}

/// Softmax of each row of `x` scaled by the inverse temperature `t`, in f64.
pub fn softmax_rows<S: Data<Elem = f32>>(x: &ArrayBase<S, Ix2>, t: f32) -> Array2<f32> {
    let mut y = Array2::<f32>::zeros(x.raw_dim());
    for (row, mut out) in x.rows().into_iter().zip(y.rows_mut()) {
        let row: Vec<f32> = row.to_vec();
        for (o, v) in out.iter_mut().zip(softmax(&row, t)) {
            *o = v;
        }
    }
    y
}

/// Softmax of a vector scaled by the inverse temperature `t`, in f64, with the same rules at
/// the edges as the kernel (see [`crate::Gpu::softmax`]): entries equal to the reference value
/// (the max for `t >= 0`, the min for `t < 0`) get exponent 0, `t = 0` is uniform, a NaN makes
/// the whole vector NaN.
pub fn softmax(x: &[f32], t: f32) -> Vec<f32> {
    let m = if t >= 0.0 {
        x.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, nan_max)
    } else {
        x.iter().map(|&v| f64::from(v)).fold(f64::INFINITY, nan_min)
    };
    let t = f64::from(t);
    let exponent = |v: f64| {
        if m.is_nan() {
            f64::NAN
        } else if v == m || t == 0.0 {
            0.0
        } else {
            t * (v - m)
        }
    };
    let e: Vec<f64> = x.iter().map(|&v| exponent(f64::from(v)).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|v| (v / sum) as f32).collect()
}

/// `min`, NaN if either is NaN.
fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// `max`, NaN if either is NaN.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `||out - reference|| / ||reference||` in f64 (the relative error norm of BENCHMARKING.md);
/// infinite if the lengths differ, NaN if `out` holds a NaN; with an all-zero reference, the
/// absolute norm `||out||`.
pub fn rel_error(out: &[f32], reference: &[f32]) -> f64 {
    if out.len() != reference.len() {
        return f64::INFINITY;
    }
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&o, &r) in out.iter().zip(reference) {
        let d = f64::from(o) - f64::from(r);
        diff += d * d;
        norm += f64::from(r) * f64::from(r);
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// `A * B` of any element type widened exactly to f64 (f32, [`half::bf16`], [`half::f16`]),
/// in f64, unrounded: the reference of the half-precision products, whose errors are checked
/// against this with bounds of the size of the f32 sums' and the final rounding's.
///
/// Errors: [`crate::Error::ShapeMismatch`] unless `A`'s columns equal `B`'s rows.
pub fn matmul_f64<T, S1, S2>(a: &ArrayBase<S1, Ix2>, b: &ArrayBase<S2, Ix2>) -> Result<Array2<f64>>
where
    T: Copy + Into<f64>,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    crate::buffer::checked_len("cpu::matmul_f64", &[a.nrows(), b.ncols(), 2])?;
    let a64 = a.mapv(Into::into);
    let b64 = b.mapv(Into::into);
    Ok(a64.dot(&b64))
}
