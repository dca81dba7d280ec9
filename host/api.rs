//! The free functions on `ndarray` arrays: upload, compute on [`Gpu::global`], download.
//! Copies of 1 MiB or more go through the `Gpu`'s pinned staging buffers ([`crate::pinned`]).
//!
//! Any `ArrayBase` works, views included: transposed or sliced inputs are copied into row-major
//! order on the way to the device. Each call copies its inputs up and its result down; to chain
//! calls without copies in between, use [`Gpu`] with [`crate::DeviceVec`] / [`crate::DeviceMatrix`].

// Items are compiled per family feature: with only some families, the imports the others' items
// use have none (the full `library` build still checks them).
#![cfg_attr(not(feature = "library"), allow(unused_imports))]

use std::borrow::Cow;

#[cfg(feature = "add")]
use ndarray::DataMut;
use ndarray::{Array, Array2, ArrayBase, Data, Dimension, Ix2};

use crate::buffer::Element;
use crate::device::Gpu;
#[cfg(feature = "add")]
use crate::error::same_shape;
use crate::error::{Error, Result};
#[cfg(feature = "add")]
use crate::ops::add::AddAlgorithm;
#[cfg(feature = "cross_entropy")]
use crate::ops::cross_entropy::CrossEntropyAlgorithm;
#[cfg(feature = "matmul")]
use crate::ops::matmul::{HalfTile, MatmulAlgorithm, MatmulElement, MatmulOutput};
#[cfg(feature = "norm")]
use crate::ops::norm::{NormAlgorithm, NormElement};
#[cfg(feature = "reduce")]
use crate::ops::reduce::{ArgmaxAlgorithm, ReduceAlgorithm};
#[cfg(feature = "sample")]
use crate::ops::sample::{LogitElement, SampleOptions};
#[cfg(feature = "softmax")]
use crate::ops::softmax::SoftmaxAlgorithm;
#[cfg(feature = "transpose")]
use crate::ops::transpose::TransposeAlgorithm;

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

#[cfg(feature = "add")]
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
    add_with(a, b, AddAlgorithm::default())
}

#[cfg(feature = "add")]
/// [`add`] with a chosen kernel.
pub fn add_with<S1, S2, D>(
    a: &ArrayBase<S1, D>,
    b: &ArrayBase<S2, D>,
    algorithm: AddAlgorithm,
) -> Result<Array<f32, D>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = f32>,
    D: Dimension,
{
    same_shape("add", a.shape(), b.shape(), "operands must have the same shape")?;
    let gpu = Gpu::global()?;
    let c = gpu.add_with(
        &gpu.upload(&row_major(a))?,
        &gpu.upload(&row_major(b))?,
        algorithm,
    )?;
    shaped("add", a.raw_dim(), gpu.download(&c)?)
}

#[cfg(feature = "add")]
/// `x += 1`, element by element, in place, on the default device.
pub fn increment_by_one<S, D>(x: &mut ArrayBase<S, D>) -> Result<()>
where
    S: DataMut<Elem = f32>,
    D: Dimension,
{
    increment_by_one_with(x, AddAlgorithm::INCREMENT_DEFAULT)
}

#[cfg(feature = "add")]
/// [`increment_by_one`] with a chosen kernel.
pub fn increment_by_one_with<S, D>(x: &mut ArrayBase<S, D>, algorithm: AddAlgorithm) -> Result<()>
where
    S: DataMut<Elem = f32>,
    D: Dimension,
{
    let gpu = Gpu::global()?;
    let mut d = gpu.upload(&row_major(x))?;
    gpu.increment_by_one_with(&mut d, algorithm)?;
    let result = shaped("increment_by_one", x.raw_dim(), gpu.download(&d)?)?;
    x.assign(&result);
    Ok(())
}

#[cfg(feature = "matmul")]
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

#[cfg(feature = "matmul")]
/// `Y = X W^T` in FP8 on Hopper: `x` (`m x k`) and `w` (`n x k`, a weight as `nn.Linear` stores
/// it) quantised to E4M3 with one scale per row ([`Gpu::quantize_e4m3`], `Fp8Scaling::Row`),
/// multiplied with promoted accumulation ([`Gpu::matmul_fp8`]), the result `m x n` in bf16: what
/// `torch._scaled_mm(xq, wq.T, scale_x, scale_w.T, out_dtype=bfloat16)` computes after the same
/// quantisation. Its error is E4M3's rounding of the inputs (relative `2^-4` each) and then
/// [`crate::Fp8Accumulation::error_factor`]; compute capability 9.0 only.
///
/// ```no_run
/// let x = ndarray::Array2::from_elem((2, 32), 0.5f32);
/// let w = ndarray::Array2::from_elem((3, 32), 2.0f32);
/// let y = gpukern::matmul_fp8(&x, &w)?;
/// assert_eq!(y[(1, 2)].to_f32(), 32.0);
/// # Ok::<(), gpukern::Error>(())
/// ```
pub fn matmul_fp8<S1, S2>(x: &ArrayBase<S1, Ix2>, w: &ArrayBase<S2, Ix2>) -> Result<Array2<half::bf16>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = f32>,
{
    use crate::ops::matmul::{Fp8Accumulation, Fp8Scaling};
    let gpu = Gpu::global()?;
    let xq = gpu.quantize_e4m3(&gpu.upload_matrix(x)?, Fp8Scaling::Row)?;
    let wq = gpu.quantize_e4m3(&gpu.upload_matrix(w)?, Fp8Scaling::Row)?;
    gpu.matmul_fp8(&xq, &wq, Fp8Accumulation::Promoted)?.to_array()
}

#[cfg(feature = "matmul")]
/// `Y = X W^T` of bf16 arrays for a decode step: `x` is `m x k`, `w` is `n x k` (a weight as
/// `nn.Linear` stores it), the result `m x n` in bf16 (f32 sums, rounded once): what
/// `torch.matmul(x, w.T)` computes, and what [`Gpu::matmul_decode`] does on device matrices (the
/// weight streamed once on tensor cores for `m` from 1 to 64).
///
/// ```no_run
/// use gpukern::bf16;
/// let x = ndarray::Array2::from_elem((1, 8), bf16::from_f32(0.5));
/// let w = ndarray::Array2::from_elem((4, 8), bf16::from_f32(2.0));
/// let y = gpukern::matmul_decode(&x, &w)?;
/// assert_eq!(y[(0, 3)], bf16::from_f32(8.0));
/// # Ok::<(), gpukern::Error>(())
/// ```
pub fn matmul_decode<S1, S2>(x: &ArrayBase<S1, Ix2>, w: &ArrayBase<S2, Ix2>) -> Result<Array2<half::bf16>>
where
    S1: Data<Elem = half::bf16>,
    S2: Data<Elem = half::bf16>,
{
    let gpu = Gpu::global()?;
    let y = gpu.matmul_decode(&gpu.upload_matrix(x)?, &gpu.upload_matrix(w)?)?;
    y.to_array()
}

#[cfg(feature = "matmul")]
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
    shaped(
        "matmul",
        ndarray::Ix2(c.rows(), c.cols()),
        gpu.download(c.as_vec())?,
    )
}

#[cfg(feature = "softmax")]
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

#[cfg(feature = "softmax")]
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
    shaped("softmax", x.raw_dim(), gpu.download(y.as_vec())?)
}

#[cfg(feature = "reduce")]
/// The sum of the elements of `x` (any shape, views included; `0.0` if empty), on the default
/// device. See [`Gpu::sum`] for the order of the additions and the error.
///
/// ```no_run
/// let x = ndarray::arr1(&[1.0f32, 2.0, 3.5]);
/// assert_eq!(gpukern::sum(&x)?, 6.5);
/// # Ok::<(), gpukern::Error>(())
/// ```
pub fn sum<S: Data<Elem = f32>, D: Dimension>(x: &ArrayBase<S, D>) -> Result<f32> {
    sum_with(x, ReduceAlgorithm::default())
}

#[cfg(feature = "reduce")]
/// [`sum`] with a chosen kernel.
pub fn sum_with<S: Data<Elem = f32>, D: Dimension>(
    x: &ArrayBase<S, D>,
    algorithm: ReduceAlgorithm,
) -> Result<f32> {
    let gpu = Gpu::global()?;
    gpu.sum_with(&gpu.upload(&row_major(x))?, algorithm)
}

#[cfg(feature = "reduce")]
/// The largest element of `x` (NaN if `x` holds one), on the default device.
///
/// Errors: [`Error::InvalidArgument`] if `x` is empty.
pub fn max<S: Data<Elem = f32>, D: Dimension>(x: &ArrayBase<S, D>) -> Result<f32> {
    max_with(x, ReduceAlgorithm::default())
}

#[cfg(feature = "reduce")]
/// [`max`] with a chosen kernel.
pub fn max_with<S: Data<Elem = f32>, D: Dimension>(
    x: &ArrayBase<S, D>,
    algorithm: ReduceAlgorithm,
) -> Result<f32> {
    let gpu = Gpu::global()?;
    gpu.max_with(&gpu.upload(&row_major(x))?, algorithm)
}

#[cfg(feature = "reduce")]
/// The index, in `x`'s logical (row-major) order, of its largest element: the first NaN if there
/// is one, else the first occurrence of the largest value (as `torch.argmax` on a flattened
/// tensor), on the default device.
///
/// ```no_run
/// let x = ndarray::arr1(&[1.0f32, 3.0, 3.0, -2.0]);
/// assert_eq!(gpukern::argmax(&x)?, 1);
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors: [`Error::InvalidArgument`] if `x` is empty.
pub fn argmax<S: Data<Elem = f32>, D: Dimension>(x: &ArrayBase<S, D>) -> Result<usize> {
    argmax_with(x, ArgmaxAlgorithm::default())
}

#[cfg(feature = "reduce")]
/// [`argmax`] with a chosen first-pass kernel (the same index from each).
pub fn argmax_with<S: Data<Elem = f32>, D: Dimension>(
    x: &ArrayBase<S, D>,
    algorithm: ArgmaxAlgorithm,
) -> Result<usize> {
    let gpu = Gpu::global()?;
    gpu.argmax_with(&gpu.upload(&row_major(x))?, algorithm)
}

#[cfg(feature = "reduce")]
/// Sums of the matrix `m` along `axis`, as ndarray's `sum_axis`: `Axis(1)` one per row,
/// `Axis(0)` one per column; on the default device.
///
/// ```no_run
/// use ndarray::{Axis, arr2};
/// let m = arr2(&[[1.0f32, 2.0], [3.0, 4.0]]);
/// assert_eq!(gpukern::sum_axis(&m, Axis(1))?, ndarray::arr1(&[3.0, 7.0]));
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors: [`Error::InvalidArgument`] for an axis other than 0 or 1.
pub fn sum_axis<S: Data<Elem = f32>>(
    m: &ArrayBase<S, Ix2>,
    axis: ndarray::Axis,
) -> Result<ndarray::Array1<f32>> {
    let gpu = Gpu::global()?;
    gpu.sum_axis(&gpu.upload_matrix(m)?, axis)?.to_array()
}

#[cfg(feature = "reduce")]
/// Maxima of the matrix `m` along `axis`: `Axis(1)` the largest entry of each row, `Axis(0)` of
/// each column, NaN where one is NaN; on the default device.
///
/// ```no_run
/// use ndarray::{Axis, arr2};
/// let m = arr2(&[[1.0f32, 5.0], [3.0, 4.0]]);
/// assert_eq!(gpukern::max_axis(&m, Axis(0))?, ndarray::arr1(&[3.0, 5.0]));
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors: [`Error::InvalidArgument`] for an axis other than 0 or 1, or an empty axis (see
/// [`Gpu::max_axis`]).
pub fn max_axis<S: Data<Elem = f32>>(
    m: &ArrayBase<S, Ix2>,
    axis: ndarray::Axis,
) -> Result<ndarray::Array1<f32>> {
    let gpu = Gpu::global()?;
    gpu.max_axis(&gpu.upload_matrix(m)?, axis)?.to_array()
}

#[cfg(feature = "reduce")]
/// Indices of the maxima of the matrix `m` along `axis` (`Axis(1)`: a column per row; `Axis(0)`:
/// a row per column), the first NaN if there is one, else the first of the largest value, as
/// `torch.argmax`; on the default device.
///
/// ```no_run
/// use ndarray::{Axis, arr2};
/// let m = arr2(&[[1.0f32, 5.0, 5.0], [3.0, 4.0, 0.0]]);
/// assert_eq!(gpukern::argmax_axis(&m, Axis(1))?, ndarray::arr1(&[1, 1]));
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors: as [`max_axis`]; [`Error::TooLarge`] past `u32::MAX` entries along the axis.
pub fn argmax_axis<S: Data<Elem = f32>>(
    m: &ArrayBase<S, Ix2>,
    axis: ndarray::Axis,
) -> Result<ndarray::Array1<usize>> {
    let gpu = Gpu::global()?;
    let indices = gpu.argmax_axis(&gpu.upload_matrix(m)?, axis)?.to_vec()?;
    Ok(indices.into_iter().map(|i| i as usize).collect())
}

#[cfg(feature = "transpose")]
/// `m^T` as a new standard-layout (row-major) array, computed on the default device: a view
/// (already transposed or sliced) is first copied into row-major order, then transposed there.
///
/// ```no_run
/// let m = ndarray::arr2(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// assert_eq!(gpukern::transpose(&m)?, m.t());
/// # Ok::<(), gpukern::Error>(())
/// ```
pub fn transpose<S: Data<Elem = f32>>(m: &ArrayBase<S, Ix2>) -> Result<Array2<f32>> {
    transpose_with(m, TransposeAlgorithm::default())
}

#[cfg(feature = "transpose")]
/// [`transpose`] with a chosen kernel.
pub fn transpose_with<S: Data<Elem = f32>>(
    m: &ArrayBase<S, Ix2>,
    algorithm: TransposeAlgorithm,
) -> Result<Array2<f32>> {
    let gpu = Gpu::global()?;
    gpu.transpose_with(&gpu.upload_matrix(m)?, algorithm)?.to_array()
}

#[cfg(feature = "matmul")]
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

#[cfg(feature = "matmul")]
/// `A * B` of half-precision arrays with a chosen tensor-core kernel ([`HalfTile`]), the result
/// of type `O`: the operands' type or f32 (what [`Gpu::matmul_to_with`] does on device matrices).
///
/// ```no_run
/// use gpukern::{HalfTile, bf16};
/// let a = ndarray::Array2::from_elem((2, 3), bf16::from_f32(0.5));
/// let b = ndarray::Array2::from_elem((3, 2), bf16::from_f32(2.0));
/// let c: ndarray::Array2<bf16> = gpukern::matmul_half_with(&a, &b, HalfTile::Square)?;
/// assert_eq!(c[(0, 0)], bf16::from_f32(3.0));
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors as [`Gpu::matmul_to_with`].
pub fn matmul_half_with<T, O, S1, S2>(
    a: &ArrayBase<S1, Ix2>,
    b: &ArrayBase<S2, Ix2>,
    tile: HalfTile,
) -> Result<Array2<O>>
where
    T: MatmulElement,
    O: MatmulOutput<T>,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    let gpu = Gpu::global()?;
    let mut c = gpu.zeros_matrix_of::<O>(a.nrows(), b.ncols())?;
    gpu.matmul_to_with(&gpu.upload_matrix(a)?, &gpu.upload_matrix(b)?, &mut c, tile)?;
    c.to_array()
}

/// The elements of a 1-D array in order, borrowed when contiguous.
fn elements<T: Element, S: Data<Elem = T>>(a: &ArrayBase<S, ndarray::Ix1>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().copied().collect()),
    }
}

#[cfg(feature = "norm")]
/// RMSNorm of each row of `x` (f32 or bf16) with the per-column `weight`, on the default
/// device: `y = x / sqrt(mean(x^2) + eps) * weight` (see [`Gpu::rms_norm`] for the rules).
///
/// Errors: [`Error::ShapeMismatch`] unless `weight` has one element per column;
/// [`Error::InvalidArgument`] if `eps` is negative or not finite.
pub fn rms_norm<T, S1, S2>(
    x: &ArrayBase<S1, Ix2>,
    weight: &ArrayBase<S2, ndarray::Ix1>,
    eps: f32,
) -> Result<Array2<T>>
where
    T: NormElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
{
    rms_norm_with(x, weight, eps, NormAlgorithm::default())
}

#[cfg(feature = "norm")]
/// [`rms_norm`] with a chosen algorithm.
pub fn rms_norm_with<T, S1, S2>(
    x: &ArrayBase<S1, Ix2>,
    weight: &ArrayBase<S2, ndarray::Ix1>,
    eps: f32,
    algorithm: NormAlgorithm,
) -> Result<Array2<T>>
where
    T: NormElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
{
    let gpu = Gpu::global()?;
    let y = gpu.rms_norm_with(
        &gpu.upload_matrix(x)?,
        &gpu.upload(&elements(weight))?,
        eps,
        algorithm,
    )?;
    y.to_array()
}

#[cfg(feature = "norm")]
/// The residual add fused into RMSNorm on the default device: returns `(h, y)` with
/// `h = x + res` (rounded once to `T`) and `y = h / sqrt(mean(h^2) + eps) * weight` (see
/// [`Gpu::residual_rms_norm`]).
///
/// Errors: [`Error::ShapeMismatch`] unless `res` has `x`'s shape and `weight` one element per
/// column; [`Error::InvalidArgument`] if `eps` is negative or not finite.
pub fn residual_rms_norm<T, S1, S2, S3>(
    x: &ArrayBase<S1, Ix2>,
    res: &ArrayBase<S2, Ix2>,
    weight: &ArrayBase<S3, ndarray::Ix1>,
    eps: f32,
) -> Result<(Array2<T>, Array2<T>)>
where
    T: crate::ops::norm::ResidualNormElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
{
    let gpu = Gpu::global()?;
    let (h, y) = gpu.residual_rms_norm(
        &gpu.upload_matrix(x)?,
        &gpu.upload_matrix(res)?,
        &gpu.upload(&elements(weight))?,
        eps,
    )?;
    Ok((h.to_array()?, y.to_array()?))
}

#[cfg(feature = "norm")]
/// LayerNorm of each row of `x` (f32 or bf16) with the per-column `weight` and `bias`, on the
/// default device: `y = (x - mean) / sqrt(var + eps) * weight + bias` (see [`Gpu::layer_norm`]).
///
/// Errors: [`Error::ShapeMismatch`] unless `weight` and `bias` have one element per column;
/// [`Error::InvalidArgument`] if `eps` is negative or not finite.
pub fn layer_norm<T, S1, S2, S3>(
    x: &ArrayBase<S1, Ix2>,
    weight: &ArrayBase<S2, ndarray::Ix1>,
    bias: &ArrayBase<S3, ndarray::Ix1>,
    eps: f32,
) -> Result<Array2<T>>
where
    T: NormElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
{
    layer_norm_with(x, weight, bias, eps, NormAlgorithm::default())
}

#[cfg(feature = "norm")]
/// [`layer_norm`] with a chosen algorithm.
pub fn layer_norm_with<T, S1, S2, S3>(
    x: &ArrayBase<S1, Ix2>,
    weight: &ArrayBase<S2, ndarray::Ix1>,
    bias: &ArrayBase<S3, ndarray::Ix1>,
    eps: f32,
    algorithm: NormAlgorithm,
) -> Result<Array2<T>>
where
    T: NormElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
{
    let gpu = Gpu::global()?;
    let (w, b) = (gpu.upload(&elements(weight))?, gpu.upload(&elements(bias))?);
    let y = gpu.layer_norm_with(&gpu.upload_matrix(x)?, &w, &b, eps, algorithm)?;
    y.to_array()
}

#[cfg(feature = "cross_entropy")]
/// The cross-entropy loss of each row of `logits` with class `labels` (one per row, each in
/// `0..cols`), on the default device: `logsumexp(logits[r]) - logits[r][labels[r]]` (PyTorch's
/// `cross_entropy(reduction='none')`; see [`Gpu::cross_entropy`]).
///
/// Errors: [`Error::InvalidArgument`] for a label out of range (checked before any launch) or
/// rows of no columns; [`Error::ShapeMismatch`] unless there is one label per row.
pub fn cross_entropy<S1, S2>(
    logits: &ArrayBase<S1, Ix2>,
    labels: &ArrayBase<S2, ndarray::Ix1>,
) -> Result<ndarray::Array1<f32>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = i64>,
{
    cross_entropy_with(logits, labels, CrossEntropyAlgorithm::default())
}

#[cfg(feature = "cross_entropy")]
/// [`cross_entropy`] with a chosen algorithm.
pub fn cross_entropy_with<S1, S2>(
    logits: &ArrayBase<S1, Ix2>,
    labels: &ArrayBase<S2, ndarray::Ix1>,
    algorithm: CrossEntropyAlgorithm,
) -> Result<ndarray::Array1<f32>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = i64>,
{
    let gpu = Gpu::global()?;
    let labels = gpu.upload_labels(&elements(labels), logits.ncols())?;
    gpu.cross_entropy_with(&gpu.upload_matrix(logits)?, &labels, algorithm)?
        .to_array()
}

#[cfg(feature = "cross_entropy")]
/// The mean over the rows of [`cross_entropy`] (PyTorch's `reduction='mean'`).
///
/// Errors: those of [`cross_entropy`]; [`Error::InvalidArgument`] for no rows.
pub fn cross_entropy_mean<S1, S2>(
    logits: &ArrayBase<S1, Ix2>,
    labels: &ArrayBase<S2, ndarray::Ix1>,
) -> Result<f32>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = i64>,
{
    cross_entropy_mean_with(logits, labels, CrossEntropyAlgorithm::default())
}

#[cfg(feature = "cross_entropy")]
/// [`cross_entropy_mean`] with a chosen algorithm.
pub fn cross_entropy_mean_with<S1, S2>(
    logits: &ArrayBase<S1, Ix2>,
    labels: &ArrayBase<S2, ndarray::Ix1>,
    algorithm: CrossEntropyAlgorithm,
) -> Result<f32>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = i64>,
{
    let gpu = Gpu::global()?;
    let labels = gpu.upload_labels(&elements(labels), logits.ncols())?;
    let mean = gpu
        .cross_entropy_mean_with(&gpu.upload_matrix(logits)?, &labels, algorithm)?
        .to_vec()?;
    mean.first().copied().ok_or(Error::InvalidArgument {
        op: "cross_entropy_mean",
        detail: "the mean came back empty".into(),
    })
}

#[cfg(feature = "glu")]
/// SwiGLU of the rows of `x` (`rows x 2n`, gate first) on the default device:
/// `silu(x[:, ..n]) * x[:, n..]` (see [`Gpu::swiglu`]).
///
/// Errors: [`Error::InvalidArgument`] for an odd number of columns.
pub fn swiglu<T, S>(x: &ArrayBase<S, Ix2>) -> Result<Array2<T>>
where
    T: crate::ops::glu::GluElement,
    S: Data<Elem = T>,
{
    let gpu = Gpu::global()?;
    gpu.swiglu(&gpu.upload_matrix(x)?)?.to_array()
}

#[cfg(feature = "glu")]
/// GeGLU of the rows of `x` (`rows x 2n`, gate first) on the default device:
/// `gelu(x[:, ..n]) * x[:, n..]` with the GELU `approx` (see [`Gpu::geglu`]).
///
/// Errors: [`Error::InvalidArgument`] for an odd number of columns.
pub fn geglu<T, S>(x: &ArrayBase<S, Ix2>, approx: crate::ops::glu::GeluApprox) -> Result<Array2<T>>
where
    T: crate::ops::glu::GluElement,
    S: Data<Elem = T>,
{
    let gpu = Gpu::global()?;
    gpu.geglu(&gpu.upload_matrix(x)?, approx)?.to_array()
}

#[cfg(feature = "rotary")]
/// Rotary embedding of `q` (`tokens x heads * head_dim`) and `k` (`tokens x kv_heads *
/// head_dim`), bf16, on the default device: returns the rotated `(q, k)` (see [`Gpu::rotary`]).
///
/// Errors: those of [`Gpu::upload_positions`], [`Gpu::rotary_frequencies`] and [`Gpu::rotary`].
pub fn rotary<S1, S2>(
    q: &ArrayBase<S1, Ix2>,
    k: &ArrayBase<S2, Ix2>,
    positions: &[i64],
    head_dim: usize,
    theta: f64,
    layout: crate::ops::rotary::RotaryLayout,
) -> Result<(Array2<half::bf16>, Array2<half::bf16>)>
where
    S1: Data<Elem = half::bf16>,
    S2: Data<Elem = half::bf16>,
{
    let gpu = Gpu::global()?;
    let (mut dq, mut dk) = (gpu.upload_matrix(q)?, gpu.upload_matrix(k)?);
    let positions = gpu.upload_positions(positions)?;
    let freqs = gpu.rotary_frequencies(head_dim, theta)?;
    gpu.rotary(&mut dq, &mut dk, &positions, &freqs, layout)?;
    Ok((dq.to_array()?, dk.to_array()?))
}

#[cfg(feature = "embedding")]
/// The rows of `table` (`vocab x hidden`, bf16) that `ids` name, on the default device
/// (PyTorch's `F.embedding(ids, table)`); the ids are checked on the host.
///
/// Errors: [`Error::InvalidArgument`] naming the first id outside `0..vocab`.
pub fn embedding<S>(table: &ArrayBase<S, Ix2>, ids: &[i64]) -> Result<Array2<half::bf16>>
where
    S: Data<Elem = half::bf16>,
{
    let gpu = Gpu::global()?;
    let ids = gpu.upload_token_ids(ids, table.nrows())?;
    gpu.embedding(&gpu.upload_matrix(table)?, &ids)?.to_array()
}

#[cfg(feature = "sample")]
/// The next token of each row of the logits `m` (f32 or bf16), drawn with `options` on the
/// default device: temperature, top-k, top-p and a seeded draw, or greedy at temperature 0 (see
/// [`Gpu::sample`] for the rules; a row with nothing to sample gives `-1`).
///
/// ```no_run
/// use gpukern::SampleOptions;
/// let logits = ndarray::arr2(&[[0.0f32, 5.0, 1.0], [2.0, -1.0, 0.5]]);
/// assert_eq!(gpukern::sample(&logits, &SampleOptions::greedy())?, ndarray::arr1(&[1, 0]));
/// # Ok::<(), gpukern::Error>(())
/// ```
///
/// Errors: as [`Gpu::sample`].
pub fn sample<S, T>(m: &ArrayBase<S, Ix2>, options: &SampleOptions) -> Result<ndarray::Array1<i32>>
where
    S: Data<Elem = T>,
    T: LogitElement,
{
    let gpu = Gpu::global()?;
    let tokens = gpu.sample(&gpu.upload_matrix(m)?, options)?;
    Ok(ndarray::Array1::from(gpu.download(&tokens)?))
}

#[cfg(feature = "attention")]
/// Attention forward on host arrays `[batch, seq, heads, head_dim]` (bf16 or f16, any layout:
/// copied to the device in row-major order), on [`Gpu::global`]: `softmax(scale * q k^T) v`
/// per batch and head, the result `[batch, q_len, heads, head_dim]` in the inputs' type. See
/// [`Gpu::attention`] for the options, the rules and the errors.
pub fn attention<T, S1, S2, S3>(
    q: &ArrayBase<S1, ndarray::Ix4>,
    k: &ArrayBase<S2, ndarray::Ix4>,
    v: &ArrayBase<S3, ndarray::Ix4>,
    options: &crate::ops::attention::AttentionOptions,
) -> Result<ndarray::Array4<T>>
where
    T: crate::ops::attention::AttentionElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
{
    Ok(attention_lse(q, k, v, options)?.0)
}

#[cfg(feature = "attention")]
/// Attention backward on host arrays (bf16 or f16, any layout), on [`Gpu::global`]: the
/// gradients `(dq, dk, dv)` of `q`, `k`, `v` (`dq` of `q`'s shape, `dk` and `dv` of `k`'s: with
/// grouped-query attention, summed over each key/value head's query heads) given the gradient
/// `d_out` of the output `out` and the forward's row log-sum-exp `lse` `[batch, heads, q_len]`
/// (as [`attention_lse`] returns them), with the forward's options. Deterministic but for the
/// one-kernel Hopper rung asked for by name (`AttentionAlgorithm::WgmmaFused`). See
/// [`Gpu::attention_backward`] for the rules and the errors.
#[allow(clippy::type_complexity)]
pub fn attention_backward<T, S0, S1, S2, S3, S4, S5>(
    d_out: &ArrayBase<S0, ndarray::Ix4>,
    q: &ArrayBase<S1, ndarray::Ix4>,
    k: &ArrayBase<S2, ndarray::Ix4>,
    v: &ArrayBase<S3, ndarray::Ix4>,
    out: &ArrayBase<S4, ndarray::Ix4>,
    lse: &ArrayBase<S5, ndarray::Ix3>,
    options: &crate::ops::attention::AttentionOptions,
) -> Result<(ndarray::Array4<T>, ndarray::Array4<T>, ndarray::Array4<T>)>
where
    T: crate::ops::attention::AttentionElement,
    S0: Data<Elem = T>,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
    S4: Data<Elem = T>,
    S5: Data<Elem = f32>,
{
    use crate::ops::attention::{AttentionTensor, attention_shape};
    fn dims_of<T, S: Data<Elem = T>>(a: &ArrayBase<S, ndarray::Ix4>) -> [usize; 4] {
        let (b, s, h, d) = a.dim();
        [b, s, h, d]
    }
    let (qd, kd, vd) = (dims_of(q), dims_of(k), dims_of(v));
    attention_shape(qd, kd, vd)?;
    let gpu = Gpu::global()?;
    let up = |a: Vec<T>| gpu.upload(&a);
    let (dob, qb, kb, vb, ob) = (
        up(d_out.iter().copied().collect())?,
        up(q.iter().copied().collect())?,
        up(k.iter().copied().collect())?,
        up(v.iter().copied().collect())?,
        up(out.iter().copied().collect())?,
    );
    let lb = gpu.upload(&lse.iter().copied().collect::<Vec<f32>>())?;
    let grads = gpu.attention_backward(
        &AttentionTensor::contiguous(&dob, dims_of(d_out))?,
        &AttentionTensor::contiguous(&qb, qd)?,
        &AttentionTensor::contiguous(&kb, kd)?,
        &AttentionTensor::contiguous(&vb, vd)?,
        &AttentionTensor::contiguous(&ob, dims_of(out))?,
        &lb,
        options,
    )?;
    let array = |dims: [usize; 4], x: Vec<T>| {
        ndarray::Array4::from_shape_vec(dims, x).map_err(|e| Error::InvalidArgument {
            op: "attention",
            detail: format!("gradient of the wrong length: {e}"),
        })
    };
    Ok((
        array(qd, grads.dq.to_vec()?)?,
        array(kd, grads.dk.to_vec()?)?,
        array(vd, grads.dv.to_vec()?)?,
    ))
}

#[cfg(feature = "attention")]
/// [`attention`] with the row log-sum-exp, `[batch, heads, q_len]` in f32 (`-inf` for a row that
/// sees no key).
#[allow(clippy::type_complexity)]
pub fn attention_lse<T, S1, S2, S3>(
    q: &ArrayBase<S1, ndarray::Ix4>,
    k: &ArrayBase<S2, ndarray::Ix4>,
    v: &ArrayBase<S3, ndarray::Ix4>,
    options: &crate::ops::attention::AttentionOptions,
) -> Result<(ndarray::Array4<T>, ndarray::Array3<f32>)>
where
    T: crate::ops::attention::AttentionElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
{
    use crate::ops::attention::{AttentionTensor, attention_shape};
    fn dims_of<T, S: Data<Elem = T>>(a: &ArrayBase<S, ndarray::Ix4>) -> [usize; 4] {
        let (b, s, h, d) = a.dim();
        [b, s, h, d]
    }
    let (qd, kd, vd) = (dims_of(q), dims_of(k), dims_of(v));
    let shape = attention_shape(qd, kd, vd)?;
    let gpu = Gpu::global()?;
    let up = |a: Vec<T>| gpu.upload(&a);
    let (qb, kb, vb) = (
        up(q.iter().copied().collect())?,
        up(k.iter().copied().collect())?,
        up(v.iter().copied().collect())?,
    );
    let out = gpu.attention(
        &AttentionTensor::contiguous(&qb, qd)?,
        &AttentionTensor::contiguous(&kb, kd)?,
        &AttentionTensor::contiguous(&vb, vd)?,
        options,
    )?;
    let o = ndarray::Array4::from_shape_vec(qd, out.out.to_vec()?).map_err(|e| Error::InvalidArgument {
        op: "attention",
        detail: format!("output of the wrong length: {e}"),
    })?;
    let lse = ndarray::Array3::from_shape_vec([shape.batch, shape.heads, shape.q_len], out.lse.to_vec()?)
        .map_err(|e| Error::InvalidArgument {
            op: "attention",
            detail: format!("log-sum-exp of the wrong length: {e}"),
        })?;
    Ok((o, lse))
}
