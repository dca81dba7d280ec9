//! The element types of [`Gpu::matmul`] and [`crate::matmul`] (f32, bf16, f16), and the
//! half-precision products: bf16 or f16 operands on tensor cores with f32 accumulation, the
//! result in the operands' type (rounded once) or in f32.

use half::{bf16, f16};

use super::kernels::HalfKernels;
use super::plan::{HalfTile, MatmulPlan, WsTile};
use super::{MatmulAlgorithm, check_inner};
use crate::buffer::{DeviceMatrix, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

use super::wgmma::WgmmaKernel;

/// The operation's name in errors.
const OP: &str = "matmul";

/// Fewest flops (`m n k`) of a product whose operands the default plan copies into rows of whole
/// 16 bytes to run the `wgmma` kernel (`HalfTile::WarpSpecialized`); smaller ragged products run
/// the `mma.sync` kernel. The copies move `4 (m k + k n)` bytes, small beside the product's time
/// at this size.
const STAGED_MIN_FLOPS: f64 = (1u64 << 30) as f64;

/// `elements` rounded up to whole 16 bytes of 16-bit elements.
fn pad_16_bytes(elements: usize) -> usize {
    elements.div_ceil(8) * 8
}

/// An element type [`Gpu::matmul`] and [`crate::matmul`] multiply: `f32` (the f32 kernels of
/// [`MatmulAlgorithm::Fast`]), [`bf16`] and [`f16`](struct@f16) (tensor cores, f32
/// accumulation; the result rounded once to the element type, or kept in f32 with
/// [`Gpu::matmul_f32_out`]). Sealed: implemented for these three only.
///
/// Accuracy of the half-precision products, against the exact product of the given operands:
/// the products of two bf16 or two f16 are exact, their sums are in f32 (an error of about
/// `sqrt(k) * 2^-24` relative to `sum_l |A(i,l) B(l,j)|` on random data), and a bf16 result is
/// then rounded to 8 significant bits (relative error at most `2^-8`), an f16 one to 11
/// (`2^-11`, and f16's range: results beyond 65504 become infinite).
pub trait MatmulElement: MatmulOutput<Self> {
    /// The type's short name: `f32`, `bf16`, `f16`.
    const NAME: &'static str;
}

/// A result type of a product of `T` operands: `T` itself, or `f32` for half-precision `T`
/// ([`Gpu::matmul_to`]). Sealed.
pub trait MatmulOutput<T>: Element + sealed::Product<T> {}

mod sealed {
    use super::*;

    /// The product of `T` operands into `Self`, its shapes `(m, k, n)` checked.
    pub trait Product<T>: Sized {
        /// Runs `C = A * B`, half precision with the kernel `tile` (`None`: the plan's choice).
        fn product(
            gpu: &Gpu,
            a: &DeviceMatrix<T>,
            b: &DeviceMatrix<T>,
            c: &mut DeviceMatrix<Self>,
            mkn: (usize, usize, usize),
            tile: Option<HalfTile>,
        ) -> Result<()>;
        /// A new `rows x cols` matrix for the product to write.
        fn alloc_result(gpu: &Gpu, rows: usize, cols: usize) -> Result<DeviceMatrix<Self>>;
    }

    impl Product<f32> for f32 {
        fn product(
            gpu: &Gpu,
            a: &DeviceMatrix,
            b: &DeviceMatrix,
            c: &mut DeviceMatrix,
            mkn: (usize, usize, usize),
            _tile: Option<HalfTile>,
        ) -> Result<()> {
            let plan = MatmulPlan::choose(gpu, MatmulAlgorithm::default(), mkn)?;
            gpu.launch_matmul(plan, a, b, c, mkn)
        }
        fn alloc_result(gpu: &Gpu, rows: usize, cols: usize) -> Result<DeviceMatrix> {
            gpu.alloc_matrix(rows, cols)
        }
    }

    macro_rules! half_products {
        ($($in:ty => $out:ty),*) => {$(
            impl Product<$in> for $out {
                fn product(gpu: &Gpu, a: &DeviceMatrix<$in>, b: &DeviceMatrix<$in>, c: &mut DeviceMatrix<$out>, mkn: (usize, usize, usize), tile: Option<HalfTile>) -> Result<()> {
                    gpu.launch_half(tile, a, b, c, mkn)
                }
                fn alloc_result(gpu: &Gpu, rows: usize, cols: usize) -> Result<DeviceMatrix<$out>> {
                    gpu.zeros_matrix_of(rows, cols)
                }
            }
        )*};
    }
    half_products!(bf16 => bf16, bf16 => f32, f16 => f16, f16 => f32);
}

impl MatmulOutput<f32> for f32 {}
impl MatmulOutput<bf16> for bf16 {}
impl MatmulOutput<bf16> for f32 {}
impl MatmulOutput<f16> for f16 {}
impl MatmulOutput<f16> for f32 {}

impl MatmulElement for f32 {
    const NAME: &'static str = "f32";
}
impl MatmulElement for bf16 {
    const NAME: &'static str = "bf16";
}
impl MatmulElement for f16 {
    const NAME: &'static str = "f16";
}

impl Gpu {
    /// `A * B` into a new device matrix of the operands' type: f32 with the default algorithm
    /// ([`MatmulAlgorithm::Fast`]); bf16 and f16 on tensor cores with f32 accumulation, each
    /// element rounded once to the type (see [`MatmulElement`]).
    ///
    /// ```
    /// use gpukern::{Gpu, bf16};
    /// let gpu = Gpu::simulator();
    /// let a = gpu.upload_matrix(&ndarray::Array2::from_elem((2, 3), bf16::from_f32(0.5)))?;
    /// let b = gpu.upload_matrix(&ndarray::Array2::from_elem((3, 4), bf16::from_f32(2.0)))?;
    /// let c = gpu.matmul(&a, &b)?;
    /// assert_eq!(c.to_array()?, ndarray::Array2::from_elem((2, 4), bf16::from_f32(3.0)));
    /// # Ok::<(), gpukern::Error>(())
    /// ```
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `A` is `m x k` and `B` is `k x n`;
    /// [`Error::WrongDevice`] for a matrix of another `Gpu`; [`Error::TooLarge`] if `m` or `n`
    /// needs more blocks than the grid allows.
    pub fn matmul<T: MatmulElement>(
        &self,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
    ) -> Result<DeviceMatrix<T>> {
        self.matmul_as(a, b)
    }

    /// `A * B` into a new f32 device matrix: for bf16 and f16 operands the f32 accumulators
    /// themselves, unrounded; for f32 the same as [`Gpu::matmul`]. Errors as [`Gpu::matmul`].
    pub fn matmul_f32_out<T: MatmulElement>(
        &self,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
    ) -> Result<DeviceMatrix<f32>>
    where
        f32: MatmulOutput<T>,
    {
        self.matmul_as(a, b)
    }

    /// `C = A * B` into an existing `m x n` device matrix whose element type picks the result
    /// type: the operands' own, or f32 for bf16 and f16 operands (for f32, the same as
    /// [`Gpu::matmul_into`] with the default algorithm). No allocation.
    ///
    /// Errors as [`Gpu::matmul`]; [`Error::ShapeMismatch`] also unless `C` is `m x n`.
    pub fn matmul_to<T, O: MatmulOutput<T>>(
        &self,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
        c: &mut DeviceMatrix<O>,
    ) -> Result<()>
    where
        T: Element,
    {
        let mkn = self.check_any_operands(a, b)?;
        let (m, _, n) = mkn;
        super::same_shape(OP, &[c.rows, c.cols], &[m, n], "the output must be m x n")?;
        if !self.owns(&c.data) {
            return Err(Error::WrongDevice { op: OP });
        }
        O::product(self, a, b, c, mkn, None)
    }

    /// [`Gpu::matmul_to`] with a given half-precision kernel ([`HalfTile::Square`], the
    /// `mma.sync` kernel, or [`HalfTile::Wgmma`], Hopper's): for comparing kernels, and for
    /// tests that must reach each. For f32 operands the tile is ignored.
    ///
    /// An empty product runs no `wgmma` kernel whatever `tile` says: nothing is written for `m`
    /// or `n` of 0, and for `k = 0` the `mma.sync` kernel writes the zeros.
    ///
    /// Errors as [`Gpu::matmul_to`]; [`Error::InvalidArgument`] also for [`HalfTile::Wgmma`]
    /// on f16 operands, and for a `wgmma` tile where it does not apply to a non-empty product
    /// (`k` or `n` not a multiple of 8, a GPU without the `sm_90a` module: see
    /// [`HalfTile::wgmma_applies`]).
    pub fn matmul_to_with<T, O: MatmulOutput<T>>(
        &self,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
        c: &mut DeviceMatrix<O>,
        tile: HalfTile,
    ) -> Result<()>
    where
        T: Element,
    {
        let mkn = self.check_any_operands(a, b)?;
        let (m, _, n) = mkn;
        super::same_shape(OP, &[c.rows, c.cols], &[m, n], "the output must be m x n")?;
        if !self.owns(&c.data) {
            return Err(Error::WrongDevice { op: OP });
        }
        O::product(self, a, b, c, mkn, Some(tile))
    }

    /// `A * B` into a new `O` matrix.
    fn matmul_as<T: Element, O: MatmulOutput<T>>(
        &self,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
    ) -> Result<DeviceMatrix<O>> {
        let mkn = self.check_any_operands(a, b)?;
        let mut c = O::alloc_result(self, a.rows, b.cols)?;
        O::product(self, a, b, &mut c, mkn, None)?;
        Ok(c)
    }

    /// The checks of the operands of `A * B` of any element type: `A` is `m x k`, `B` is
    /// `k x n`, both belong to this `Gpu`. Returns `(m, k, n)`.
    fn check_any_operands<T: Element>(
        &self,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
    ) -> Result<(usize, usize, usize)> {
        check_inner((a.rows, a.cols), (b.rows, b.cols))?;
        if !(self.owns(&a.data) && self.owns(&b.data)) {
            return Err(Error::WrongDevice { op: OP });
        }
        Ok((a.rows, a.cols, b.cols))
    }

    /// The half-precision kernels of `tile` (`None`: [`HalfTile::choose`]'s) for `C = A * B`,
    /// shapes and owners checked. An empty product runs no `wgmma` kernel, whatever `tile`
    /// says (a tile's element-type rule still holds): nothing for an empty result, and for
    /// `k = 0` the `mma.sync` kernel, which then writes zeros (the copy engine cannot describe
    /// an empty operand).
    pub(crate) fn launch_half<I: HalfKernels<O> + Element, O: Element>(
        &self,
        tile: Option<HalfTile>,
        a: &DeviceMatrix<I>,
        b: &DeviceMatrix<I>,
        c: &mut DeviceMatrix<O>,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        let wgmma = I::wgmma_128x128();
        if tile == Some(HalfTile::Wgmma) && wgmma.is_none() {
            return Err(one_warpgroup_takes_bf16());
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let tile = if k == 0 { Some(HalfTile::Square) } else { tile };
        let aligned =
            a.data.is_16_byte_aligned() && b.data.is_16_byte_aligned() && c.data.is_16_byte_aligned();
        let loaded = self.has_wgmma();
        let applies = HalfTile::wgmma_applies(wgmma.is_some(), k, n, aligned, loaded);
        let ws_applies = HalfTile::wgmma_applies(true, k, n, aligned, loaded);
        // Operands whose rows are not whole 16 bytes apart (`k` or `n` not a multiple of 8):
        // the warp-specialised kernel on padded copies, where the product is large enough for
        // the copies not to matter and the operands live on this handle's stream.
        let own_stream = self.on_own_stream(&a.data) && self.on_own_stream(&b.data);
        let staged = !ws_applies
            && loaded
            && c.data.is_16_byte_aligned()
            && own_stream
            && (m as f64) * (n as f64) * (k as f64) >= STAGED_MIN_FLOPS;
        let tile =
            tile.unwrap_or_else(|| HalfTile::choose(ws_applies || staged, applies, !self.is_simulator()));
        let kind = I::tensor_map_type();
        match tile {
            HalfTile::Wgmma => {
                return match wgmma {
                    Some(launch) => self.launch_wgmma(
                        launch,
                        WgmmaKernel::OneWarpgroup,
                        kind,
                        (&a.data, k),
                        (&b.data, n),
                        c,
                        (m, k, n),
                    ),
                    None => Err(one_warpgroup_takes_bf16()),
                };
            }
            HalfTile::WarpSpecialized | HalfTile::WarpSpecializedTile(_) => {
                let ws_tile = match tile {
                    HalfTile::WarpSpecializedTile(t) => t,
                    _ => WsTile::choose(m, n, self.multiprocessors()?),
                };
                let ws = WgmmaKernel::WarpSpecialized(ws_tile.tiling());
                if ws_applies || !loaded {
                    return self.launch_wgmma(
                        I::wgmma_ws(ws_tile),
                        ws,
                        kind,
                        (&a.data, k),
                        (&b.data, n),
                        c,
                        (m, k, n),
                    );
                }
                if !own_stream {
                    return Err(Error::InvalidArgument {
                        op: OP,
                        detail: format!(
                            "k = {k} or n = {n} is not a multiple of 8: the wgmma kernel runs on \
                             padded copies of the operands, made on this handle's stream, and an \
                             operand lives on another stream: use HalfTile::Square, or this \
                             operation on the operands' stream"
                        ),
                    });
                }
                // Padded copies of the operands whose rows are not whole 16 bytes apart.
                let (a_rows, b_rows) = (pad_16_bytes(k), pad_16_bytes(n));
                let a_copy = if a_rows != k || !a.data.is_16_byte_aligned() {
                    Some(self.pitched_copy(a, a_rows)?)
                } else {
                    None
                };
                let b_copy = if b_rows != n || !b.data.is_16_byte_aligned() {
                    Some(self.pitched_copy(b, b_rows)?)
                } else {
                    None
                };
                let a_op = a_copy.as_ref().map_or((&a.data, k), |v| (v, a_rows));
                let b_op = b_copy.as_ref().map_or((&b.data, n), |v| (v, b_rows));
                return self.launch_wgmma(I::wgmma_ws(ws_tile), ws, kind, a_op, b_op, c, (m, k, n));
            }
            HalfTile::Square => {}
        }
        let tiling = tile.tiling();
        // The kernel is opted in to more than the default 48 KiB when it is loaded.
        let cfg = LaunchConfig::block_tiles(
            OP,
            (m, n),
            (tiling.block_rows, tiling.block_cols),
            1,
            tiling.threads(),
            tiling.shared_bytes(),
            &self.limits().opted_in(),
        )?;
        // 16-byte pieces: every row of `A` and `B` starts 16-byte aligned (`k`, `n` multiples
        // of 8 elements) and so does every buffer.
        let vec8 = k % 8 == 0
            && n % 8 == 0
            && a.data.is_16_byte_aligned()
            && b.data.is_16_byte_aligned()
            && c.data.is_16_byte_aligned();
        let launch = match tile {
            HalfTile::Square
            | HalfTile::Wgmma
            | HalfTile::WarpSpecialized
            | HalfTile::WarpSpecializedTile(_) => I::half_128x128(vec8),
        };
        // SAFETY: `a`, `b`, `c` hold m*k, k*n, m*n elements (shapes checked), `m, n >= 1`;
        // `cfg` is the kernel's documented launch; the `vec8` kernels only with `k`, `n`
        // multiples of 8 and 16-byte aligned buffers.
        unsafe {
            launch(
                &self.library(),
                cfg,
                a.data.view(),
                b.data.view(),
                c.data.view_mut(),
                m,
                n,
                k,
            )
        }
    }
}

/// The refusal of [`HalfTile::Wgmma`] for operands other than bf16.
fn one_warpgroup_takes_bf16() -> Error {
    Error::InvalidArgument {
        op: OP,
        detail: "the one-warpgroup wgmma kernel takes bf16 operands: use HalfTile::WarpSpecialized \
                 or HalfTile::Square"
            .to_string(),
    }
}
