//! RMSNorm and LayerNorm over the rows of a matrix, f32 or bf16 (f32 statistics): each public
//! operation checks its operands once, picks the plan once ([`NormPlan`], by the row's length
//! and the buffers' alignment), and launches it. The kernels and the rules at the edges are in
//! `kernels_gpu::norm`.

mod kernels;
mod plan;
mod variant;

pub use plan::{DEFAULT_RULES, DefaultRule, ElementKind, LoopKind, NormKind, NormPlan, RowsWidth};
pub use variant::{NormVariant, RowLoads, WarpGrid};

use half::bf16;

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use kernels::NormKernels;

/// Which norm kernels to run. Both follow the same rules (see [`Gpu::layer_norm`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NormAlgorithm {
    /// One block of 256 threads per row, the row re-read from memory for each pass, tree
    /// reductions in shared memory: the tutorial kernels `*_norm_block_reduce_*`.
    BlockReduce,
    /// One block per row, the row held in registers as 16-byte vectors, read once and written
    /// once (`*_norm_rows_*`), where the row's length is a multiple of the vector width (4 f32,
    /// 8 bf16), it fits (up to 32768 columns) and the buffers are 16-byte aligned; the tutorial
    /// kernel elsewhere. The default: 16 elements per thread up to 16384 f32 or 8192 bf16
    /// columns (bf16 LayerNorm: 4088), 32 past them, and where another candidate measured
    /// faster on the H200 its plan: [`NormAlgorithm::WarpSolo`] for bf16 rows of 1024
    /// ([`DEFAULT_RULES`]), [`NormAlgorithm::Rows16EvictLast`]
    /// ([`DEFAULT_RULES`]), [`NormAlgorithm::Loop2x512`] ([`DEFAULT_RULES`]), and
    /// for f32 LayerNorm of rows of 513 to 1020 [`NormAlgorithm::WarpKeep`] ([`NormPlan::choose`]).
    #[default]
    InRegisters,
    /// The in-register kernel with 16 elements per thread (`*_rows16_*`), a block of
    /// `cols / 16` threads (rounded up to whole warps) per row, where that is at most 1024;
    /// the default's plan elsewhere. A tuning candidate.
    Rows16,
    /// The in-register kernel with all of its 32 elements per thread used (`*_rows_*`, a block
    /// of `cols / 32` threads); the default's plan where the row needs more than 1024. A tuning
    /// candidate.
    Rows32,
    /// The in-register kernel with 64 elements per thread (`*_rows64_*`, a block of `cols / 64`
    /// threads); the default's plan where the row needs more than 1024. A tuning candidate.
    Rows64,
    /// A warp per row, 8 rows per block (`*_norm_warp_*`), for rows of up to 1024 columns; the
    /// default's plan for longer rows. A tuning candidate.
    Warp,
    /// As [`NormAlgorithm::Warp`] on a persistent grid (as many blocks as are resident at
    /// once), each warp keeping the weight (and bias) in registers across its rows
    /// (`*_norm_warp_keep_*`). The default's plan for f32 LayerNorm of rows of 513 to 1024.
    WarpKeep,
    /// The in-register kernel of [`NormAlgorithm::Rows16`] with the streaming cache hint on the
    /// loads of `x` and the stores of `y` (`*_rows16_cs_*`, evict first). A tuning candidate.
    Rows16Stream,
    /// The in-register kernel of [`NormAlgorithm::Rows32`] with the streaming cache hint
    /// (`*_rows_cs_*`). A tuning candidate.
    Rows32Stream,
    /// A warp per row on a persistent grid, each warp issuing the loads of its next row before
    /// the reductions of its current one (`*_norm_warp_pipe_*`), for rows of up to 1024
    /// columns; the default's plan for longer rows. A tuning candidate.
    WarpPipe,
    /// One block per row, the row read from memory for the statistics and again for the output
    /// (LayerNorm: three reads), the re-reads meant to hit L2 (`*_norm_two_pass_*`, the
    /// formulation torch.compile's kernel takes for long rows); any aligned row of a multiple
    /// of the vector width. A tuning candidate.
    TwoPass,
    /// The looped L2 re-read kernel of torch.compile's formulation (`*_norm_loop_*`): a block of
    /// 256 threads per row (fewer for short rows: whole warps, one vector each), one 16-byte
    /// vector per thread per step of each pass, the first pass's loads hinted `evict_last` (the
    /// row stays in L2 for the re-read), the last pass's `evict_first`; any aligned row of a
    /// multiple of the vector width. A tuning candidate.
    Loop256,
    /// [`NormAlgorithm::Loop256`] with blocks of 512 threads. A tuning candidate.
    Loop512,
    /// [`NormAlgorithm::Loop256`] with blocks of 1024 threads. A tuning candidate.
    Loop1024,
    /// [`NormAlgorithm::Loop256`] with two vectors per thread per step (`*_norm_loop2_*`). A
    /// tuning candidate.
    Loop2x256,
    /// [`NormAlgorithm::Loop2x256`] with blocks of 512 threads: the default's plan for RMSNorm
    /// of 1024 to 4096 columns (but bf16 at 1024, [`DEFAULT_RULES`]) and f32 LayerNorm
    /// of 1024 ([`DEFAULT_RULES`]).
    Loop2x512,
    /// [`NormAlgorithm::Loop512`] without the eviction hints (`*_norm_loop_plain_*`): what the
    /// hints buy. A tuning candidate.
    LoopPlain512,
    /// The bulk-copy ring (`*_norm_ring_*`, the `sm_90a` module): a persistent grid whose blocks
    /// stream their rows through three shared-memory slots filled by the copy engine, 16
    /// elements per thread, the weight (and bias) in registers; rows of up to 16384 columns of a
    /// multiple of the vector width, aligned, on a compute capability 9.0 GPU (elsewhere the
    /// default's plan). A tuning candidate.
    Ring,
    /// The in-register kernel of [`NormAlgorithm::Rows16`] with `evict_last` (L1 and L2) on the
    /// loads of `x`, the weight and the bias (`*_rows16_el_*`), as torch.compile's kernels load
    /// them: the default's plan for f32 RMSNorm of 4096 to 16384 columns and f32 LayerNorm of
    /// 4096 ([`DEFAULT_RULES`]).
    Rows16EvictLast,
    /// The warp-per-row kernel of [`NormAlgorithm::Warp`] in blocks of one warp (one row per
    /// block, as Inductor launches its persistent reductions of such rows), for rows of up to
    /// 1024 columns; the default's plan for longer rows. The default's plan for bf16 rows of
    /// 1024 columns ([`DEFAULT_RULES`]).
    WarpSolo,
}

impl NormAlgorithm {
    /// Every algorithm, slowest first.
    pub const ALL: [NormAlgorithm; 20] = [
        NormAlgorithm::BlockReduce,
        NormAlgorithm::InRegisters,
        NormAlgorithm::Rows16,
        NormAlgorithm::Rows32,
        NormAlgorithm::Rows64,
        NormAlgorithm::Warp,
        NormAlgorithm::WarpKeep,
        NormAlgorithm::Rows16Stream,
        NormAlgorithm::Rows32Stream,
        NormAlgorithm::WarpPipe,
        NormAlgorithm::TwoPass,
        NormAlgorithm::Loop256,
        NormAlgorithm::Loop512,
        NormAlgorithm::Loop1024,
        NormAlgorithm::Loop2x256,
        NormAlgorithm::Loop2x512,
        NormAlgorithm::LoopPlain512,
        NormAlgorithm::Ring,
        NormAlgorithm::Rows16EvictLast,
        NormAlgorithm::WarpSolo,
    ];

    /// A short name: `block-reduce`, `in-registers`, `rows-16`, `rows-32`, `rows-64`, `warp`,
    /// `warp-keep`, `rows-16-cs`, `rows-32-cs`, `warp-pipe`, `two-pass`, `loop-256`, `loop-512`,
    /// `loop-1024`, `loop2-256`, `loop2-512`, `loop-plain-512`, `ring`, `rows-16-el`, `warp-1`.
    pub fn name(self) -> &'static str {
        match self {
            NormAlgorithm::BlockReduce => "block-reduce",
            NormAlgorithm::InRegisters => "in-registers",
            NormAlgorithm::Rows16 => "rows-16",
            NormAlgorithm::Rows32 => "rows-32",
            NormAlgorithm::Rows64 => "rows-64",
            NormAlgorithm::Warp => "warp",
            NormAlgorithm::WarpKeep => "warp-keep",
            NormAlgorithm::Rows16Stream => "rows-16-cs",
            NormAlgorithm::Rows32Stream => "rows-32-cs",
            NormAlgorithm::WarpPipe => "warp-pipe",
            NormAlgorithm::TwoPass => "two-pass",
            NormAlgorithm::Loop256 => "loop-256",
            NormAlgorithm::Loop512 => "loop-512",
            NormAlgorithm::Loop1024 => "loop-1024",
            NormAlgorithm::Loop2x256 => "loop2-256",
            NormAlgorithm::Loop2x512 => "loop2-512",
            NormAlgorithm::LoopPlain512 => "loop-plain-512",
            NormAlgorithm::Ring => "ring",
            NormAlgorithm::Rows16EvictLast => "rows-16-el",
            NormAlgorithm::WarpSolo => "warp-1",
        }
    }

    /// Whether this algorithm's own kernel takes aligned rows of `cols` elements of `T` (up to
    /// the CUDA block limit; a kernel whose registers lower that limit may still fall back):
    /// where it does not, it runs the default's plan, and a benchmark need not time it.
    pub fn fits<T: NormElement>(self, cols: usize) -> bool {
        let plan = NormPlan::choose::<T>(self, cols, true, false, |_| kernels_gpu::norm::ROW_BLOCK_MAX);
        match self {
            NormAlgorithm::BlockReduce | NormAlgorithm::InRegisters => true,
            NormAlgorithm::Rows16 => matches!(
                plan,
                NormPlan::Rows {
                    width: RowsWidth::W16,
                    ..
                }
            ),
            NormAlgorithm::Rows32 => matches!(
                plan,
                NormPlan::Rows {
                    width: RowsWidth::W32,
                    ..
                }
            ),
            NormAlgorithm::Rows64 => matches!(
                plan,
                NormPlan::Rows {
                    width: RowsWidth::W64,
                    ..
                }
            ),
            NormAlgorithm::Warp | NormAlgorithm::WarpKeep => matches!(plan, NormPlan::Warp { .. }),
            NormAlgorithm::Rows16Stream => matches!(
                plan,
                NormPlan::Rows {
                    width: RowsWidth::W16,
                    stream: true,
                    ..
                }
            ),
            NormAlgorithm::Rows32Stream => matches!(
                plan,
                NormPlan::Rows {
                    width: RowsWidth::W32,
                    stream: true,
                    ..
                }
            ),
            NormAlgorithm::WarpPipe => plan == NormPlan::WarpPipe,
            NormAlgorithm::TwoPass => matches!(plan, NormPlan::TwoPass { .. }),
            NormAlgorithm::Loop256
            | NormAlgorithm::Loop512
            | NormAlgorithm::Loop1024
            | NormAlgorithm::Loop2x256
            | NormAlgorithm::Loop2x512
            | NormAlgorithm::LoopPlain512 => matches!(plan, NormPlan::Loop { .. }),
            NormAlgorithm::Ring => matches!(plan, NormPlan::Ring { .. }),
            NormAlgorithm::Rows16EvictLast => matches!(plan, NormPlan::RowsEvictLast { .. }),
            NormAlgorithm::WarpSolo => plan == NormPlan::WarpSolo,
        }
    }
}

/// An element type the norms take: `f32` or [`bf16`] (statistics in f32 either way).
pub trait NormElement: Element + sealed::Sealed {
    /// Elements per 16-byte vector of the in-register kernels.
    #[doc(hidden)]
    const LANES: usize;
    /// Vectors per thread of the in-register kernels.
    #[doc(hidden)]
    const VECTORS: usize;
    /// The kernels of this element type.
    #[doc(hidden)]
    fn kernels() -> &'static NormKernels<Self>;
}

mod sealed {
    /// Only the element types with norm kernels.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
}

impl NormElement for f32 {
    const LANES: usize = <f32 as kernels_gpu::norm::NormElem>::LANES;
    const VECTORS: usize = <f32 as kernels_gpu::norm::NormElem>::VECTORS;
    fn kernels() -> &'static NormKernels<f32> {
        &kernels::F32
    }
}

impl NormElement for bf16 {
    const LANES: usize = <bf16 as kernels_gpu::norm::NormElem>::LANES;
    const VECTORS: usize = <bf16 as kernels_gpu::norm::NormElem>::VECTORS;
    fn kernels() -> &'static NormKernels<bf16> {
        &kernels::BF16
    }
}

/// The operands of one norm call once checked.
pub(crate) struct Operands<'a, T: 'static> {
    /// The input, `rows x cols`.
    x: &'a DeviceVec<T>,
    /// The weight, `cols`.
    w: &'a DeviceVec<T>,
    /// LayerNorm's bias; `None` for RMSNorm.
    b: Option<&'a DeviceVec<T>>,
    /// Rows of `x`.
    rows: usize,
    /// Columns of `x`.
    cols: usize,
    /// The epsilon under the square root.
    eps: f32,
}

impl Gpu {
    /// RMSNorm of each row of `x`: `y[r][j] = x[r][j] / sqrt(mean_j x[r][j]^2 + eps) * w[j]`,
    /// with the default algorithm ([`NormAlgorithm::InRegisters`]). `f32` or [`bf16`] elements
    /// (f32 statistics, the bf16 output rounded once).
    ///
    /// Rules: a zero row gives zeros (finite thanks to `eps`); a NaN in a row makes that row NaN,
    /// an infinite entry makes the row's finite entries 0 and its infinite ones NaN; other rows
    /// are never affected. A row of finite entries whose sum of squares overflows f32 (entries
    /// from about `1.8e19 / sqrt(cols)` on) is computed right on its entries scaled by a power of
    /// two, a rare path every algorithm takes (`kernels_gpu::norm`'s `overflow`). An empty `x`
    /// (no rows or no columns) gives an empty result.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `weight.len() == x.cols()`;
    /// [`Error::InvalidArgument`] if `eps` is negative, NaN or infinite.
    pub fn rms_norm<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
    ) -> Result<DeviceMatrix<T>> {
        self.rms_norm_with(x, weight, eps, NormAlgorithm::default())
    }

    /// [`Gpu::rms_norm`] with the given algorithm.
    pub fn rms_norm_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        algorithm: NormAlgorithm,
    ) -> Result<DeviceMatrix<T>> {
        let mut y = self.zeros_matrix_of::<T>(x.rows, x.cols)?;
        self.rms_norm_into_with(x, weight, eps, &mut y, algorithm)?;
        Ok(y)
    }

    /// [`Gpu::rms_norm`] into an existing matrix of `x`'s shape (no allocation).
    pub fn rms_norm_into<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
    ) -> Result<()> {
        self.rms_norm_into_with(x, weight, eps, y, NormAlgorithm::default())
    }

    /// [`Gpu::rms_norm_into`] with the given algorithm.
    pub fn rms_norm_into_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
        algorithm: NormAlgorithm,
    ) -> Result<()> {
        let ops = self.norm_operands("rms_norm", x, weight, None, eps, y)?;
        self.launch_norm("rms_norm", ops, y, algorithm)
    }

    /// LayerNorm of each row of `x`:
    /// `y[r][j] = (x[r][j] - mean_r) / sqrt(var_r + eps) * w[j] + b[j]` with the row's mean and
    /// biased variance (as PyTorch), with the default algorithm ([`NormAlgorithm::InRegisters`]).
    /// `f32` or [`bf16`] elements (f32 statistics, the bf16 output rounded once).
    ///
    /// The variance is computed in two passes over the row (the mean, then the squared
    /// deviations), the first shifted by the row's first entry: no cancellation for rows with a
    /// large mean (see `kernels_gpu::norm`).
    ///
    /// Rules: a constant row gives `y = b` (finite thanks to `eps`); a NaN or an infinity in a
    /// row makes that row NaN; other rows are never affected. A row of finite entries whose
    /// sums overflow f32 (a spread from about `1.8e19 / sqrt(cols)` on) is computed right on its
    /// entries scaled by a power of two, a rare path every algorithm takes. An empty `x` gives an
    /// empty result.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `weight.len() == bias.len() == x.cols()`;
    /// [`Error::InvalidArgument`] if `eps` is negative, NaN or infinite.
    pub fn layer_norm<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
    ) -> Result<DeviceMatrix<T>> {
        self.layer_norm_with(x, weight, bias, eps, NormAlgorithm::default())
    }

    /// [`Gpu::layer_norm`] with the given algorithm.
    pub fn layer_norm_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
        algorithm: NormAlgorithm,
    ) -> Result<DeviceMatrix<T>> {
        let mut y = self.zeros_matrix_of::<T>(x.rows, x.cols)?;
        self.layer_norm_into_with(x, weight, bias, eps, &mut y, algorithm)?;
        Ok(y)
    }

    /// [`Gpu::layer_norm`] into an existing matrix of `x`'s shape (no allocation).
    pub fn layer_norm_into<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
    ) -> Result<()> {
        self.layer_norm_into_with(x, weight, bias, eps, y, NormAlgorithm::default())
    }

    /// [`Gpu::layer_norm_into`] with the given algorithm.
    pub fn layer_norm_into_with<T: NormElement>(
        &self,
        x: &DeviceMatrix<T>,
        weight: &DeviceVec<T>,
        bias: &DeviceVec<T>,
        eps: f32,
        y: &mut DeviceMatrix<T>,
        algorithm: NormAlgorithm,
    ) -> Result<()> {
        let ops = self.norm_operands("layer_norm", x, weight, Some(bias), eps, y)?;
        self.launch_norm("layer_norm", ops, y, algorithm)
    }

    /// The checks of every norm: `eps`, the shapes, the owner.
    fn norm_operands<'a, T: NormElement>(
        &self,
        op: &'static str,
        x: &'a DeviceMatrix<T>,
        w: &'a DeviceVec<T>,
        b: Option<&'a DeviceVec<T>>,
        eps: f32,
        y: &DeviceMatrix<T>,
    ) -> Result<Operands<'a, T>> {
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("eps {eps}: it must be finite and >= 0"),
            });
        }
        same_shape(
            op,
            &[x.cols],
            &[w.len()],
            "the weight must have one element per column",
        )?;
        if let Some(b) = b {
            same_shape(
                op,
                &[x.cols],
                &[b.len()],
                "the bias must have one element per column",
            )?;
        }
        same_shape(
            op,
            &[x.rows, x.cols],
            &[y.rows, y.cols],
            "the output must have the input's shape",
        )?;
        let owned =
            self.owns(&x.data) && self.owns(w) && b.is_none_or(|b| self.owns(b)) && self.owns(&y.data);
        if !owned {
            return Err(Error::WrongDevice { op });
        }
        Ok(Operands {
            x: &x.data,
            w,
            b,
            rows: x.rows,
            cols: x.cols,
            eps,
        })
    }

    /// Chooses the plan and launches it.
    fn launch_norm<T: NormElement>(
        &self,
        op: &'static str,
        ops: Operands<'_, T>,
        y: &mut DeviceMatrix<T>,
        algorithm: NormAlgorithm,
    ) -> Result<()> {
        let (rows, cols) = (ops.rows, ops.cols);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let aligned = ops.x.is_16_byte_aligned()
            && ops.w.is_16_byte_aligned()
            && ops.b.is_none_or(|b| b.is_16_byte_aligned())
            && y.data.is_16_byte_aligned();
        let kernels = T::kernels();
        let layer = ops.b.is_some();
        // The block limit of the kernel the plan would launch at each width (the streaming
        // candidates have their own kernels at 16 and 32 elements per thread).
        let stream = matches!(
            algorithm,
            NormAlgorithm::Rows16Stream | NormAlgorithm::Rows32Stream
        );
        let max_threads = |width: RowsWidth| {
            let probe = NormPlan::Rows {
                threads: 32,
                width,
                stream: stream && width != RowsWidth::W64,
            };
            self.max_block_threads(kernels.kernel(probe, layer))
        };
        let mut plan = NormPlan::choose::<T>(algorithm, cols, aligned, layer, max_threads);
        if matches!(plan, NormPlan::Ring { .. }) && !self.has_wgmma() {
            // The ring kernels are in the sm_90a module only.
            plan = NormPlan::choose::<T>(NormAlgorithm::InRegisters, cols, aligned, layer, max_threads);
        }
        self.launch_norm_plan(op, plan, ops, y)
    }
}
