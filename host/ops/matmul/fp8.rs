//! FP8: the element types ([`E4M3`], [`E5M2`](gpukern_device::fp8::E5M2), from
//! `gpukern_device::fp8`), device matrices of them, and the quantisation of f32 or bf16 matrices
//! to E4M3 with a computed per-tensor or per-row scale (`kernels_gpu::matmul::fp8_quant`);
//! [`quantize_e4m3_reference`] is its CPU reference.

use gpukern_device::fp8::E4M3;
use half::bf16;
use kernels_gpu::matmul::fp8_quant::{
    self as family, AMAX_SHARED_BYTES, QUANT_BLOCK, dequant_scale, quant_scale,
};
use ndarray::{Array2, ArrayBase, Data, Ix2};

use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The operation's name in errors.
const OP: &str = "quantize_e4m3";

/// Where the scales of an FP8 matrix apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Scaling {
    /// One scale for the whole matrix (`scales` holds one float).
    Tensor,
    /// One scale per row (`scales` holds one float per row).
    Row,
    /// One scale per `1 x 128` block of each row (DeepGEMM's activation scales): `scales` is a
    /// `rows x ceil(cols / 128)` row-major matrix, element `(i, j)` scaled by
    /// `scales[i * ceil(cols / 128) + j / 128]`.
    Block1x128,
    /// One scale per `128 x 128` block (DeepGEMM's weight scales): `scales` is a
    /// `ceil(rows / 128) x ceil(cols / 128)` row-major matrix, element `(i, j)` scaled by
    /// `scales[(i / 128) * ceil(cols / 128) + j / 128]`.
    Block128x128,
}

/// Rows and columns one block scale covers ([`Fp8Scaling::Block1x128`],
/// [`Fp8Scaling::Block128x128`]).
pub const FP8_SCALE_BLOCK: usize = 128;

impl Fp8Scaling {
    /// `tensor`, `row`, `block`: the benchmark records' `scaling`.
    pub fn name(self) -> &'static str {
        match self {
            Fp8Scaling::Tensor => "tensor",
            Fp8Scaling::Row => "row",
            Fp8Scaling::Block1x128 | Fp8Scaling::Block128x128 => "block",
        }
    }

    /// How many scales a `rows x cols` matrix of this scaling has (at least one).
    pub fn scale_count(self, rows: usize, cols: usize) -> usize {
        let col_blocks = cols.div_ceil(FP8_SCALE_BLOCK).max(1);
        match self {
            Fp8Scaling::Tensor => 1,
            Fp8Scaling::Row => rows.max(1),
            Fp8Scaling::Block1x128 => rows.max(1) * col_blocks,
            Fp8Scaling::Block128x128 => rows.div_ceil(FP8_SCALE_BLOCK).max(1) * col_blocks,
        }
    }

    /// The index of the scale of element `(i, j)` of a matrix of `cols` columns.
    pub fn scale_index(self, i: usize, j: usize, cols: usize) -> usize {
        let col_blocks = cols.div_ceil(FP8_SCALE_BLOCK).max(1);
        match self {
            Fp8Scaling::Tensor => 0,
            Fp8Scaling::Row => i,
            Fp8Scaling::Block1x128 => i * col_blocks + j / FP8_SCALE_BLOCK,
            Fp8Scaling::Block128x128 => (i / FP8_SCALE_BLOCK) * col_blocks + j / FP8_SCALE_BLOCK,
        }
    }

    /// Whether the scales are per block.
    pub fn is_block(self) -> bool {
        matches!(self, Fp8Scaling::Block1x128 | Fp8Scaling::Block128x128)
    }
}

/// An FP8 matrix on the device (E4M3 by default, or E5M2) and its dequantisation scales:
/// element `(i, j)` stands for
/// `data(i, j) * scales[scaling.scale_index(i, j, cols)]` ([`Fp8Scaling::scale_index`]: `scales[0]`
/// per tensor, `scales[i]` per row, one per block).
pub struct Fp8Matrix<T = E4M3> {
    /// The FP8 values, row-major.
    pub data: DeviceMatrix<T>,
    /// The dequantisation scales, `amax / 448` each (1 for an all-zero or non-finite row).
    pub scales: DeviceVec<f32>,
    /// Where the scales apply.
    pub scaling: Fp8Scaling,
}

/// An element type [`Gpu::quantize_e4m3`] reads: f32 or bf16. Sealed.
pub trait QuantElement: Element + sealed::QuantKernels {}
impl QuantElement for f32 {}
impl QuantElement for bf16 {}

/// The launcher of `fp8_amax_*`: `(x, row_amax, tensor_amax, rows, cols)`.
type AmaxLauncher<I> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, I>,
    DeviceSliceMut<'a, f32>,
    DeviceSliceMut<'a, u32>,
    usize,
    usize,
) -> Result<()>;

/// The launcher of `fp8_quantize_*`: `(x, row_amax, tensor_amax, q, scale, rows, cols)`.
type QuantizeLauncher<I> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, I>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, u32>,
    DeviceSliceMut<'a, E4M3>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
) -> Result<()>;

mod sealed {
    use super::*;

    /// The quantisation kernels reading this type.
    pub trait QuantKernels: Sized {
        fn amax() -> AmaxLauncher<Self>;
        fn quantize(scaling: Fp8Scaling) -> QuantizeLauncher<Self>;
    }

    impl QuantKernels for f32 {
        fn amax() -> AmaxLauncher<f32> {
            family::fp8_amax_f32::launch_views::<Module>
        }
        fn quantize(scaling: Fp8Scaling) -> QuantizeLauncher<f32> {
            match scaling {
                Fp8Scaling::Tensor => family::fp8_quantize_tensor_f32::launch_views::<Module>,
                // Block scales are refused before any launch (`Gpu::quantize_e4m3`).
                Fp8Scaling::Row | Fp8Scaling::Block1x128 | Fp8Scaling::Block128x128 => {
                    family::fp8_quantize_row_f32::launch_views::<Module>
                }
            }
        }
    }

    impl QuantKernels for bf16 {
        fn amax() -> AmaxLauncher<bf16> {
            family::fp8_amax_bf16::launch_views::<Module>
        }
        fn quantize(scaling: Fp8Scaling) -> QuantizeLauncher<bf16> {
            match scaling {
                Fp8Scaling::Tensor => family::fp8_quantize_tensor_bf16::launch_views::<Module>,
                Fp8Scaling::Row | Fp8Scaling::Block1x128 | Fp8Scaling::Block128x128 => {
                    family::fp8_quantize_row_bf16::launch_views::<Module>
                }
            }
        }
    }
}

impl Gpu {
    /// `x` quantised to E4M3 with a computed scale per tensor or per row (the `amax`, the
    /// largest magnitude, maps to 448): `q = satfinite_rn(x * (448 / amax))`, and the
    /// dequantisation scale `amax / 448`, so that `x ~ q * scale` with a relative error of at
    /// most `2^-4` per element (E4M3's unit roundoff) for elements down to `amax * 2^-15` (E4M3's
    /// smallest normal times `amax / 448`), an absolute error of at most `2^-10 amax / 448`
    /// below. A row (or a tensor) of zeros, or one holding an infinity or a NaN, gets the scale
    /// 1 (its NaN stays NaN, an infinity saturates to 448). Exactly
    /// [`quantize_e4m3_reference`]'s result.
    ///
    /// ```
    /// use gpukern::{Fp8Scaling, Gpu};
    /// let gpu = Gpu::simulator();
    /// let x = gpu.upload_matrix(&ndarray::array![[1.0f32, -2.0], [0.5, 0.25]])?;
    /// let q = gpu.quantize_e4m3(&x, Fp8Scaling::Row)?;
    /// assert_eq!(q.scales.to_vec()?, vec![2.0 / 448.0, 0.5 / 448.0]);
    /// assert_eq!(q.data.to_array()?[(0, 1)].to_f32(), -448.0);
    /// # Ok::<(), gpukern::Error>(())
    /// ```
    ///
    /// Errors: [`Error::WrongDevice`] for a matrix of another `Gpu`; [`Error::TooLarge`] for more
    /// rows than a grid may have; [`Error::InvalidArgument`] for block scales (quantise those on
    /// the host with [`quantize_e4m3_reference`] and upload them with [`Gpu::upload_fp8`]).
    pub fn quantize_e4m3<I: QuantElement>(
        &self,
        x: &DeviceMatrix<I>,
        scaling: Fp8Scaling,
    ) -> Result<Fp8Matrix> {
        if !self.owns(&x.data) {
            return Err(Error::WrongDevice { op: OP });
        }
        if scaling.is_block() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the quantisation kernels compute per-tensor and per-row scales; for block \
                         scales quantise with quantize_e4m3_reference and upload with Gpu::upload_fp8"
                    .to_string(),
            });
        }
        let (rows, cols) = (x.rows, x.cols);
        let mut data = self.zeros_matrix_of::<E4M3>(rows, cols)?;
        let n_scales = scaling.scale_count(rows, cols);
        let mut scales = self.upload(&vec![1.0f32; n_scales])?;
        if rows == 0 || cols == 0 {
            return Ok(Fp8Matrix {
                data,
                scales,
                scaling,
            });
        }
        let limits = self.limits();
        let rows32 = u32::try_from(rows).map_err(|_| Error::TooLarge {
            op: OP,
            detail: format!("{rows} rows exceed the grid's limits"),
        })?;
        let mut row_amax = self.zeros_of::<f32>(rows)?;
        let mut tensor_amax = self.zeros_of::<u32>(1)?;
        let amax_cfg = LaunchConfig {
            grid: (rows32, 1, 1),
            block: (QUANT_BLOCK, 1, 1),
            shared_mem_bytes: AMAX_SHARED_BYTES,
        }
        .checked(OP, &limits)?;
        // SAFETY: `x` holds rows * cols elements, `row_amax` rows floats, `tensor_amax` one u32
        // holding 0; the kernel's documented launch.
        unsafe {
            I::amax()(
                &self.library(),
                amax_cfg,
                x.data.view(),
                row_amax.view_mut(),
                tensor_amax.view_mut(),
                rows,
                cols,
            )
        }?;
        let per_block = 2 * QUANT_BLOCK as usize;
        let quant_cfg = LaunchConfig {
            grid: (
                u32::try_from(cols.div_ceil(per_block)).map_err(|_| Error::TooLarge {
                    op: OP,
                    detail: format!("{cols} columns exceed the grid's limits"),
                })?,
                rows32,
                1,
            ),
            block: (QUANT_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
        .checked(OP, &limits)?;
        // SAFETY: `x` and `data` hold rows * cols elements, the amax buffers were written by the
        // launch above on the same `x`, `scales` holds rows floats (per row) or one; the
        // kernel's documented launch.
        unsafe {
            I::quantize(scaling)(
                &self.library(),
                quant_cfg,
                x.data.view(),
                row_amax.view(),
                tensor_amax.view(),
                data.data.view_mut(),
                scales.view_mut(),
                rows,
                cols,
            )
        }?;
        Ok(Fp8Matrix {
            data,
            scales,
            scaling,
        })
    }
}

/// The CPU reference of [`Gpu::quantize_e4m3`] on f32 values (bf16 ones widened exactly): the
/// same f32 operations, so the same bits. Returns the E4M3 values and the dequantisation scales
/// (one, one per row, or one per block: [`Fp8Scaling::scale_count`], in
/// [`Fp8Scaling::scale_index`]'s order). Block scales (which the kernels do not compute) follow
/// the same rule with the block's `amax`.
pub fn quantize_e4m3_reference<S: Data<Elem = f32>>(
    x: &ArrayBase<S, Ix2>,
    scaling: Fp8Scaling,
) -> (Array2<E4M3>, Vec<f32>) {
    let magnitude = |v: f32| f32::from_bits(v.to_bits() & 0x7fff_ffff);
    // NaN wins, as the kernels' maximum of the bits.
    let fold = |acc: f32, v: f32| {
        if acc.is_nan() || v.is_nan() {
            f32::NAN
        } else {
            acc.max(v)
        }
    };
    let (rows, cols) = x.dim();
    // The `amax` of each scale's elements (0 for a scale that covers none).
    let mut amax = vec![0.0f32; scaling.scale_count(rows, cols)];
    for ((i, j), &v) in x.indexed_iter() {
        let s = scaling.scale_index(i, j, cols);
        amax[s] = fold(amax[s], magnitude(v));
    }
    let q = Array2::from_shape_fn(x.dim(), |(i, j)| {
        E4M3::from_f32_saturating(x[(i, j)] * quant_scale(amax[scaling.scale_index(i, j, cols)]))
    });
    let scales = amax
        .iter()
        .map(|&a| {
            if rows == 0 || cols == 0 {
                1.0
            } else {
                dequant_scale(a)
            }
        })
        .collect();
    (q, scales)
}
