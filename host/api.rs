//! The free functions on `ndarray` arrays: upload, compute on [`Gpu::global`], download.
//!
//! Any `ArrayBase` works, views included: transposed or sliced inputs are copied into row-major
//! order on the way to the device. Each call copies its inputs up and its result down; to chain
//! calls without copies in between, use [`Gpu`] with [`crate::DeviceVec`] / [`crate::DeviceMatrix`].

use std::borrow::Cow;

use ndarray::{Array, Array2, ArrayBase, Data, DataMut, Dimension, Ix2};

use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::ops::matmul::{MatmulAlgorithm, MatmulElement, MatmulOutput};
use crate::ops::same_shape;
use crate::ops::softmax::SoftmaxAlgorithm;

/// The elements of `a` in row-major order, borrowed when `a` already is.
fn row_major<S: Data<Elem = f32>, D: Dimension>(a: &ArrayBase<S, D>) -> Cow<'_, [f32]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().copied().collect()),
    }
}

/// Rebuilds an array of shape `dim` from row-major elements.
fn shaped<D: Dimension>(op: &'static str, dim: D, v: Vec<f32>) -> Result<Array<f32, D>> {
    Array::from_shape_vec(dim, v).map_err(|e| Error::InvalidArgument {
        op,
        detail: e.to_string(),
    })
}

/// `a + b`, element by element, on the default device.
///
/// ```no_run
/// let a = ndarray::arr1(&[1.0f32, 2.0]);
/// let c = gpukern::add(&a, &a)?;
/// assert_eq!(c, ndarray::arr1(&[2.0, 4.0]));
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors: [`Error::ShapeMismatch`] if the shapes differ (no broadcasting).
pub fn add<S1, S2, D>(a: &ArrayBase<S1, D>, b: &ArrayBase<S2, D>) -> Result<Array<f32, D>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = f32>,
    D: Dimension,
{
    same_shape("add", a.shape(), b.shape(), "operands must have the same shape")?;
    let gpu = Gpu::global()?;
    let c = gpu.add(&gpu.upload(&row_major(a))?, &gpu.upload(&row_major(b))?)?;
    shaped("add", a.raw_dim(), c.to_vec()?)
}

/// `x += 1`, element by element, in place, on the default device.
pub fn increment_by_one<S, D>(x: &mut ArrayBase<S, D>) -> Result<()>
where
    S: DataMut<Elem = f32>,
    D: Dimension,
{
    let gpu = Gpu::global()?;
    let mut d = gpu.upload(&row_major(x))?;
    gpu.increment_by_one(&mut d)?;
    let result = shaped("increment_by_one", x.raw_dim(), d.to_vec()?)?;
    x.assign(&result);
    Ok(())
}

/// `A * B` (`m x k` times `k x n`) on the default device, with the default algorithm, for f32,
/// [`bf16`](crate::bf16) or [`f16`](crate::f16) arrays; the result has the operands' type.
/// Half-precision operands run on tensor cores with f32 accumulation, each result element
/// rounded once (see [`MatmulElement`]; [`matmul_f32_out`] keeps the f32 sums).
///
/// ```no_run
/// use ndarray::Array2;
/// let a = Array2::<f32>::ones((3, 4));
/// let b = Array2::<f32>::ones((4, 5));
/// let c = gpukern::matmul(&a, &b)?;
/// assert_eq!(c, Array2::from_elem((3, 5), 4.0));
///
/// use gpukern::bf16;
/// let a = Array2::from_elem((3, 4), bf16::from_f32(1.5));
/// let b = Array2::from_elem((4, 5), bf16::from_f32(2.0));
/// let c: Array2<bf16> = gpukern::matmul(&a, &b)?;
/// assert_eq!(c, Array2::from_elem((3, 5), bf16::from_f32(12.0)));
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors: [`Error::ShapeMismatch`] unless `A`'s columns equal `B`'s rows; the errors of
/// [`Gpu::global`] and [`Gpu::matmul`].
pub fn matmul<T, S1, S2>(a: &ArrayBase<S1, Ix2>, b: &ArrayBase<S2, Ix2>) -> Result<Array2<T>>
where
    T: MatmulElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    let gpu = Gpu::global()?;
    let c = gpu.matmul(&gpu.upload_matrix(a)?, &gpu.upload_matrix(b)?)?;
    c.to_array()
}

/// [`matmul`] with a chosen algorithm.
pub fn matmul_with<S1, S2>(
    a: &ArrayBase<S1, Ix2>,
    b: &ArrayBase<S2, Ix2>,
    algorithm: MatmulAlgorithm,
) -> Result<Array2<f32>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = f32>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    let gpu = Gpu::global()?;
    let c = gpu.matmul_with(&gpu.upload_matrix(a)?, &gpu.upload_matrix(b)?, algorithm)?;
    c.to_array()
}

/// Softmax along the last axis (a 1-D array as a whole, a 2-D array row by row), scaled by the
/// inverse temperature `t`: `softmax(t * x)`. See [`Gpu::softmax`] for what `t` does.
///
/// ```no_run
/// let x = ndarray::arr1(&[1.0f32, 2.0, 3.0]);
/// let y = gpukern::softmax(&x, 1.0)?;
/// assert!((y.sum() - 1.0).abs() < 1e-6);
/// # Ok::<(), gpukern::Error>(())
/// ```
pub fn softmax<S, D>(x: &ArrayBase<S, D>, t: f32) -> Result<Array<f32, D>>
where
    S: Data<Elem = f32>,
    D: Dimension,
{
    softmax_with(x, t, SoftmaxAlgorithm::default())
}

/// [`softmax`] with a chosen algorithm.
pub fn softmax_with<S, D>(x: &ArrayBase<S, D>, t: f32, algorithm: SoftmaxAlgorithm) -> Result<Array<f32, D>>
where
    S: Data<Elem = f32>,
    D: Dimension,
{
    let cols = x.shape().last().copied().unwrap_or(1);
    let rows = x.len().checked_div(cols).unwrap_or(0);
    let gpu = Gpu::global()?;
    let d = gpu.upload(&row_major(x))?;
    let d = crate::buffer::DeviceMatrix { data: d, rows, cols };
    let y = gpu.softmax_with(&d, t, algorithm)?;
    shaped("softmax", x.raw_dim(), y.as_vec().to_vec()?)
}

/// `A * B` of f32, [`bf16`](crate::bf16) or [`f16`](crate::f16) arrays on the default device,
/// the result in f32: for half-precision operands the tensor cores' f32 sums, unrounded.
///
/// ```no_run
/// use gpukern::f16;
/// let a = ndarray::Array2::from_elem((2, 3), f16::from_f32(0.1));
/// let b = ndarray::Array2::from_elem((3, 2), f16::from_f32(1.0));
/// let c: ndarray::Array2<f32> = gpukern::matmul_f32_out(&a, &b)?;
/// assert_eq!(c[(0, 0)], 3.0 * f16::from_f32(0.1).to_f32());
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors as [`matmul`].
pub fn matmul_f32_out<T, S1, S2>(a: &ArrayBase<S1, Ix2>, b: &ArrayBase<S2, Ix2>) -> Result<Array2<f32>>
where
    T: MatmulElement,
    f32: MatmulOutput<T>,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    let gpu = Gpu::global()?;
    let c = gpu.matmul_f32_out(&gpu.upload_matrix(a)?, &gpu.upload_matrix(b)?)?;
    c.to_array()
}
