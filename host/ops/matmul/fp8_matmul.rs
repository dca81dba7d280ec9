//! The FP8 product on Hopper: `C = dequant(A) dequant(B^T)^T` of two [`Fp8Matrix`]es, `A`
//! (`m x k`) and `B^T` (`n x k`, the weight as `nn.Linear` stores it: FP8 `wgmma` reads both
//! operands K-major), the result bf16 or f32 (`kernels_gpu::matmul::fp8`). The operation checks
//! its operands once, picks the plan ([`Fp8Plan::choose`]), pads a ragged `k` (rows of the
//! copy engine start 16 bytes apart), encodes the two tensor maps (three for a staged plan:
//! `C`'s too) and launches; and its CPU reference ([`matmul_fp8_reference`]).

use std::sync::Arc;

use cudarc::driver::sys;
use gpukern_device::fp8::{E4M3, E5M2};
use half::bf16;
use kernels_gpu::matmul::fp8::{self as family, FP8_STAGED_SHARED_BYTES};
use kernels_gpu::matmul::wgmma::MAP_WORDS;
use ndarray::{Array2, ArrayBase, Data, Ix2};

use super::fp8::{FP8_SCALE_BLOCK, Fp8Matrix, Fp8Scaling};
use super::fp8_plan::{Fp8Accumulation, Fp8Plan, Fp8Tile, STAGED_COLUMNS};
use super::wgmma::{MapMatrix, check_copy_engine_dims, encode};
use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The operation's name in errors.
const OP: &str = "matmul_fp8";

/// The copy engine's element type of the FP8 maps: bytes (it moves them, it does not convert).
const FP8_MAP_TYPE: sys::CUtensorMapDataType = sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8;

/// Bytes from one row of an operand to the next must be a multiple of this (the copy engine).
const ROW_ALIGN: usize = 16;

/// Rows of a staged plan's boxes of `C`: a consumer's 64.
const STAGED_BOX_ROWS: usize = 64;

/// The launcher of an FP8 kernel: `(maps, a, b, c, a_scales, b_scales, m, n, k, lda, ldb,
/// a_step, b_step)`, `b` (`B^T`) of `B`.
type Fp8Launcher<O, B = E4M3> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, E4M3>,
    DeviceSlice<'a, B>,
    DeviceSliceMut<'a, O>,
    DeviceSlice<'a, f32>,
    DeviceSlice<'a, f32>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
) -> Result<()>;

/// A result type of [`Gpu::matmul_fp8_into`]: bf16 (rounded once) or f32. Sealed.
pub trait Fp8Output: Element + sealed::Fp8Kernels {}
impl Fp8Output for bf16 {}
impl Fp8Output for f32 {}

/// The element type of `B^T` in [`Gpu::matmul_fp8_into`] (`A` is always E4M3): E4M3, or E5M2
/// (`wgmma`'s `.e4m3.e5m2` products: a bf16 result, tensor or row scales). Sealed.
pub trait Fp8Element: Element + sealed::Fp8Operand {}
impl Fp8Element for E4M3 {}
impl Fp8Element for E5M2 {}

mod sealed {
    use super::*;

    /// The FP8 kernels writing this type.
    pub trait Fp8Kernels: Sized {
        /// The kernel of `plan` (`B^T` in E4M3), where one exists.
        fn kernel(plan: Fp8Plan) -> Option<Fp8Launcher<Self>>;
        /// The kernel of `plan` with `B^T` in E5M2, where one exists.
        fn kernel_e5m2(plan: Fp8Plan) -> Option<Fp8Launcher<Self, E5M2>>;
    }

    /// An FP8 element of `B^T`: its kernels, and its value.
    pub trait Fp8Operand: Sized + Copy {
        fn kernel<O: Fp8Output>(plan: Fp8Plan) -> Option<Fp8Launcher<O, Self>>;
        fn value(self) -> f32;
    }

    impl Fp8Operand for E4M3 {
        fn kernel<O: Fp8Output>(plan: Fp8Plan) -> Option<Fp8Launcher<O, E4M3>> {
            O::kernel(plan)
        }
        fn value(self) -> f32 {
            self.to_f32()
        }
    }

    impl Fp8Operand for E5M2 {
        fn kernel<O: Fp8Output>(plan: Fp8Plan) -> Option<Fp8Launcher<O, E5M2>> {
            O::kernel_e5m2(plan)
        }
        fn value(self) -> f32 {
            self.to_f32()
        }
    }

    /// The launcher of the pair kernel `$name` (bf16 result): its launch in clusters of
    /// `(2, 1, 1)` ([`Module::clustered`]), as an [`Fp8Launcher`] like the others'.
    macro_rules! pair_launcher {
        ($name:ident) => {{
            let launch: Fp8Launcher<bf16> =
                |module, cfg, maps, a, b, c, sa, sb, m, n, k, lda, ldb, a_step, b_step| {
                    // SAFETY: reached only through `Fp8Launcher`, an unsafe function pointer whose
                    // callers keep the kernel's contract, a grid of whole pairs among it.
                    unsafe {
                        family::$name::launch_views(
                            &module.clustered((2, 1, 1)),
                            cfg,
                            maps,
                            a,
                            b,
                            c,
                            sa,
                            sb,
                            m,
                            n,
                            k,
                            lda,
                            ldb,
                            a_step,
                            b_step,
                        )
                    }
                };
            launch
        }};
    }

    /// `Fp8Kernels` for `$out`, the entries of each plan.
    macro_rules! fp8_kernels {
        ($out:ty: $fast_wide:ident, $fast_square:ident, $promoted:ident, $block:ident,
         $promoted_overlap:ident, $block_overlap:ident; staged: $staged:expr; mid: $mid:expr;
         pair: $pair:expr) => {
            impl Fp8Kernels for $out {
                fn kernel(plan: Fp8Plan) -> Option<Fp8Launcher<$out>> {
                    if plan.pair {
                        // The pair kernels (fast 128 x 256, promoted and block-scaled 128 x 128),
                        // where the type has them.
                        let pair: Option<[Fp8Launcher<$out>; 3]> = $pair;
                        let [fast, promoted, block] = pair?;
                        return match (plan.block_scales, plan.accumulation, plan.tile) {
                            _ if !plan.is_valid() => None,
                            (true, _, _) => Some(block),
                            (false, Fp8Accumulation::Fast, _) => Some(fast),
                            (false, Fp8Accumulation::Promoted, _) => Some(promoted),
                        };
                    }
                    if plan.staged {
                        // The staged kernels (promoted, block-scaled), where the type has them.
                        let staged: Option<(Fp8Launcher<$out>, Fp8Launcher<$out>)> = $staged;
                        return staged
                            .map(|(promoted, block)| if plan.block_scales { block } else { promoted });
                    }
                    Some(match (plan.block_scales, plan.accumulation, plan.tile) {
                        (true, _, _) if plan.overlap => family::$block_overlap::launch_views::<Module>,
                        (false, Fp8Accumulation::Promoted, _) if plan.overlap => {
                            family::$promoted_overlap::launch_views::<Module>
                        }
                        (true, _, _) => family::$block::launch_views::<Module>,
                        // The 128 x 192 tile, where the type has it.
                        (false, Fp8Accumulation::Promoted, Fp8Tile::Mid) => {
                            let mid: Option<Fp8Launcher<$out>> = $mid;
                            return mid;
                        }
                        (false, Fp8Accumulation::Promoted, _) => family::$promoted::launch_views::<Module>,
                        (false, Fp8Accumulation::Fast, Fp8Tile::Wide) => {
                            family::$fast_wide::launch_views::<Module>
                        }
                        (false, Fp8Accumulation::Fast, Fp8Tile::Square) => {
                            family::$fast_square::launch_views::<Module>
                        }
                        // No kernel: fast accumulation has no 128 x 192 tile.
                        (false, Fp8Accumulation::Fast, Fp8Tile::Mid) => return None,
                    })
                }
                fn kernel_e5m2(plan: Fp8Plan) -> Option<Fp8Launcher<$out, E5M2>> {
                    e5m2_kernel::<$out>(plan)
                }
            }
        };
    }

    fp8_kernels!(bf16: matmul_fp8_fast_128x256, matmul_fp8_fast_128x128, matmul_fp8_promoted_128x128,
    matmul_fp8_block_128x128, matmul_fp8_promoted_overlap_128x128, matmul_fp8_block_overlap_128x128;
    staged: Some((
        family::matmul_fp8_promoted_staged_128x128::launch_views::<Module>,
        family::matmul_fp8_block_staged_128x128::launch_views::<Module>,
    ));
    mid: Some(family::matmul_fp8_promoted_128x192::launch_views::<Module>);
    pair: Some([
        pair_launcher!(matmul_fp8_fast_pair_128x256),
        pair_launcher!(matmul_fp8_promoted_pair_128x128),
        pair_launcher!(matmul_fp8_block_pair_128x128),
    ]));
    fp8_kernels!(f32: matmul_fp8_fast_f32out_128x256, matmul_fp8_fast_f32out_128x128,
        matmul_fp8_promoted_f32out_128x128, matmul_fp8_block_f32out_128x128,
        matmul_fp8_promoted_overlap_f32out_128x128, matmul_fp8_block_overlap_f32out_128x128;
        staged: None; mid: None; pair: None);

    /// The E5M2 kernels: a bf16 result, no block scales.
    trait E5m2Kernels: Sized {
        fn e5m2(plan: Fp8Plan) -> Option<Fp8Launcher<Self, E5M2>>;
    }
    impl E5m2Kernels for bf16 {
        fn e5m2(plan: Fp8Plan) -> Option<Fp8Launcher<bf16, E5M2>> {
            Some(match (plan.block_scales, plan.accumulation, plan.tile) {
                (true, _, _) | (_, _, Fp8Tile::Mid) => return None,
                _ if plan.staged || plan.pair => return None,
                (false, Fp8Accumulation::Promoted, _) if plan.overlap => {
                    family::matmul_fp8_e5m2_promoted_overlap_128x128::launch_views::<Module>
                }
                (false, Fp8Accumulation::Promoted, _) => {
                    family::matmul_fp8_e5m2_promoted_128x128::launch_views::<Module>
                }
                (false, Fp8Accumulation::Fast, Fp8Tile::Wide) => {
                    family::matmul_fp8_e5m2_fast_128x256::launch_views::<Module>
                }
                (false, Fp8Accumulation::Fast, Fp8Tile::Square) => {
                    family::matmul_fp8_e5m2_fast_128x128::launch_views::<Module>
                }
            })
        }
    }
    impl E5m2Kernels for f32 {
        fn e5m2(_: Fp8Plan) -> Option<Fp8Launcher<f32, E5M2>> {
            None
        }
    }
    fn e5m2_kernel<O: E5m2Kernels>(plan: Fp8Plan) -> Option<Fp8Launcher<O, E5M2>> {
        O::e5m2(plan)
    }
}

impl Gpu {
    /// An [`Fp8Matrix`] from E4M3 (or E5M2) values and their dequantisation scales on the host (for
    /// example from [`quantize_e4m3_reference`](super::quantize_e4m3_reference), or a
    /// checkpoint's): `scales` holds [`Fp8Scaling::scale_count`] floats in
    /// [`Fp8Scaling::scale_index`]'s order.
    ///
    /// Errors: [`Error::InvalidArgument`] for the wrong number of scales.
    pub fn upload_fp8<T: Fp8Element, S: Data<Elem = T>>(
        &self,
        q: &ArrayBase<S, Ix2>,
        scales: &[f32],
        scaling: Fp8Scaling,
    ) -> Result<Fp8Matrix<T>> {
        let (rows, cols) = q.dim();
        let want = scaling.scale_count(rows, cols);
        if scales.len() != want {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "a {rows} x {cols} matrix with {} scales has {want} scales, not {}",
                    scaling.name(),
                    scales.len()
                ),
            });
        }
        Ok(Fp8Matrix {
            data: self.upload_matrix(q)?,
            scales: self.upload(scales)?,
            scaling,
        })
    }

    /// `C = dequant(A) dequant(B^T)^T` in bf16, a new `m x n` matrix: `a` is `m x k`, `bt` is
    /// `B^T`, `n x k` (the weight as `nn.Linear` stores it; cuBLASLt's `_scaled_mm` TN layout),
    /// both E4M3 with their scales; f32 accumulation, fast or promoted ([`Fp8Accumulation`]),
    /// the result rounded once. See [`Gpu::matmul_fp8_into`].
    ///
    /// ```no_run
    /// use gpukern::{Fp8Accumulation, Fp8Scaling, Gpu};
    /// let gpu = Gpu::new(0)?;
    /// let x = gpu.upload_matrix(&ndarray::Array2::<f32>::ones((256, 512)))?;
    /// let w = gpu.upload_matrix(&ndarray::Array2::<f32>::ones((128, 512)))?;
    /// let (xq, wq) = (gpu.quantize_e4m3(&x, Fp8Scaling::Row)?, gpu.quantize_e4m3(&w, Fp8Scaling::Row)?);
    /// let y = gpu.matmul_fp8(&xq, &wq, Fp8Accumulation::Promoted)?; // 256 x 128, bf16: x w^T
    /// assert_eq!(y.to_array()?[(0, 0)].to_f32(), 512.0);
    /// # Ok::<(), gpukern::Error>(())
    /// ```
    pub fn matmul_fp8(
        &self,
        a: &Fp8Matrix,
        bt: &Fp8Matrix,
        accumulation: Fp8Accumulation,
    ) -> Result<DeviceMatrix<bf16>> {
        let mut c = self.zeros_matrix_of::<bf16>(a.data.rows, bt.data.rows)?;
        self.matmul_fp8_into(a, bt, &mut c, accumulation)?;
        Ok(c)
    }

    /// `C = dequant(A) dequant(B^T)^T` into an existing `m x n` matrix of bf16 or f32, the plan
    /// by shape ([`Fp8Plan::choose`]). Element `(i, j)` is
    /// `sum_k (qa_ik sa(i, k)) (qb_jk sb(j, k))` with the scales of each operand's
    /// [`Fp8Scaling`]: per tensor or per row (of `A`, of `B^T`: per column of `C`), in any pairing;
    /// or per block, `A` [`Fp8Scaling::Block1x128`] with `B^T` [`Fp8Scaling::Block128x128`]
    /// (DeepGEMM's layout; always promoted). Error bound: [`Fp8Accumulation::error_factor`] of
    /// `sum_k |qa_ik sa qb_jk sb|`, then the rounding of the result.
    ///
    /// A `k` that is not a multiple of 16 is handled exactly: the operands are first copied into
    /// rows of whole 16 bytes (the copy engine's rule; `m k + n k` bytes more traffic), the
    /// columns past `k` read as zeros.
    ///
    /// Errors: [`Error::InvalidArgument`] off a compute capability 9.0 GPU with the `sm_90a`
    /// module (the kernels are `wgmma`), for block scales on one operand only, or scales of the
    /// wrong count; [`Error::ShapeMismatch`] unless `A` and `B^T` share `k` and `C` is `m x n`;
    /// [`Error::WrongDevice`] for a matrix of another `Gpu`; [`Error::TooLarge`] for a dimension
    /// past the copy engine's 32-bit coordinates.
    pub fn matmul_fp8_into<O: Fp8Output, B: Fp8Element>(
        &self,
        a: &Fp8Matrix,
        bt: &Fp8Matrix<B>,
        c: &mut DeviceMatrix<O>,
        accumulation: Fp8Accumulation,
    ) -> Result<()> {
        let (m, k, n) = self.check_fp8(a, bt, c)?;
        let plan = Fp8Plan::choose(
            (m, n),
            (a.scaling, bt.scaling),
            accumulation,
            self.multiprocessors()?,
            // Whether the result and operand types have staged kernels (bf16 from E4M3).
            Fp8Plan::ALL
                .iter()
                .any(|&p| p.staged && B::kernel::<O>(p).is_some()),
        );
        self.launch_fp8(a, bt, c, (m, k, n), plan)
    }

    /// [`Gpu::matmul_fp8_into`] with a given plan (one of [`Fp8Plan::ALL`]), whatever the shape:
    /// for comparing plans and for tests that must reach every kernel.
    ///
    /// Errors as [`Gpu::matmul_fp8_into`]; [`Error::InvalidArgument`] also for a plan without a
    /// kernel ([`Fp8Plan::is_valid`]) or whose block scaling does not match the operands'.
    pub fn matmul_fp8_plan_into<O: Fp8Output, B: Fp8Element>(
        &self,
        a: &Fp8Matrix,
        bt: &Fp8Matrix<B>,
        c: &mut DeviceMatrix<O>,
        plan: Fp8Plan,
    ) -> Result<()> {
        let mkn = self.check_fp8(a, bt, c)?;
        if !plan.is_valid() || plan.block_scales != a.scaling.is_block() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the plan {} does not run {} x {} scales (block scales take the block plan, \
                     others a plan without)",
                    plan.name(),
                    a.scaling.name(),
                    bt.scaling.name()
                ),
            });
        }
        self.launch_fp8(a, bt, c, mkn, plan)
    }

    /// The one validation of an FP8 product: owners, shapes, scalings and scale counts, and the
    /// GPU. Returns `(m, k, n)`.
    fn check_fp8<O: Element, B: Element>(
        &self,
        a: &Fp8Matrix,
        bt: &Fp8Matrix<B>,
        c: &DeviceMatrix<O>,
    ) -> Result<(usize, usize, usize)> {
        let owned = self.owns(&a.data.data)
            && self.owns(&a.scales)
            && self.owns(&bt.data.data)
            && self.owns(&bt.scales)
            && self.owns(&c.data);
        if !owned {
            return Err(Error::WrongDevice { op: OP });
        }
        let (m, k, n) = (a.data.rows, a.data.cols, bt.data.rows);
        if bt.data.cols != k {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: vec![m, k],
                rhs: vec![bt.data.rows, bt.data.cols],
                rule: "A is m x k and B^T is n x k: their columns must be equal",
            });
        }
        super::super::same_shape(OP, &[c.rows, c.cols], &[m, n], "the output must be m x n")?;
        let (sa, sb) = (a.scaling, bt.scaling);
        let paired = matches!(
            (sa, sb),
            (
                Fp8Scaling::Tensor | Fp8Scaling::Row,
                Fp8Scaling::Tensor | Fp8Scaling::Row
            ) | (Fp8Scaling::Block1x128, Fp8Scaling::Block128x128)
        );
        if !paired {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "scales {sa:?} for A with {sb:?} for B^T: per tensor or per row in any pairing, \
                     or blocks as DeepGEMM has them (A Block1x128, B^T Block128x128)"
                ),
            });
        }
        for (what, scaling, have, rows) in [
            ("A", a.scaling, a.scales.len, m),
            ("B^T", bt.scaling, bt.scales.len, n),
        ] {
            let want = scaling.scale_count(rows, k);
            if have != want {
                return Err(Error::InvalidArgument {
                    op: OP,
                    detail: format!(
                        "{what} ({rows} x {k}, {scaling:?} scales) needs {want} scales, has {have}"
                    ),
                });
            }
        }
        if !self.has_wgmma() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the FP8 kernels are wgmma kernels, in the sm_90a PTX module only, which \
                         loads on a compute capability 9.0 GPU (gpukern built with sm_90 among \
                         GPUKERN_PTX_ARCHS); this GPU has no FP8 product in gpukern"
                    .to_string(),
            });
        }
        check_copy_engine_dims((m, k, n))?;
        Ok((m, k, n))
    }

    /// Runs `plan` on checked operands: nothing for an empty result; a ragged `k` padded.
    fn launch_fp8<O: Fp8Output, B: Fp8Element>(
        &self,
        a: &Fp8Matrix,
        bt: &Fp8Matrix<B>,
        c: &mut DeviceMatrix<O>,
        (m, k, n): (usize, usize, usize),
        plan: Fp8Plan,
    ) -> Result<()> {
        if m == 0 || n == 0 {
            return Ok(());
        }
        let tiling = plan.tile.tiling();
        let mut cfg = self.ws_launch_config(m, n, tiling)?;
        if plan.pair {
            cfg.grid.0 = 2 * self.fp8_pairs(plan, (m, n), cfg)?;
        }
        if plan.staged {
            cfg = LaunchConfig {
                shared_mem_bytes: FP8_STAGED_SHARED_BYTES,
                ..cfg
            }
            .checked(OP, &self.limits().opted_in())?;
        }
        // Rows of whole 16 bytes for the copy engine (a copy where `k` is ragged; none for
        // `k = 0`, where no copy is issued).
        let ld = if k == 0 { 0 } else { k.next_multiple_of(ROW_ALIGN) };
        let Some(launch) = B::kernel::<O>(plan) else {
            // The staged plans, the pairs and the 128 x 192 tile have bf16 kernels of E4M3
            // operands only.
            let detail = if plan.staged || plan.pair || plan.tile == Fp8Tile::Mid {
                format!(
                    "the plan {} writes a bf16 result from E4M3 operands only, not {} with B^T \
                     in {}",
                    plan.name(),
                    std::any::type_name::<O>(),
                    std::any::type_name::<B>()
                )
            } else {
                format!(
                    "B^T in E5M2 has kernels for a bf16 result with tensor or row scales only, \
                     not the plan {} into {}",
                    plan.name(),
                    std::any::type_name::<O>()
                )
            };
            return Err(Error::InvalidArgument { op: OP, detail });
        };
        if plan.staged && n % STAGED_COLUMNS != 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the staged plan {} stores C with the copy engine, whose rows must be whole 16 \
                     bytes apart: n a multiple of {STAGED_COLUMNS}, not {n}",
                    plan.name()
                ),
            });
        }
        let a_pad = if ld == k {
            None
        } else {
            Some(self.pitched_copy(&a.data, ld)?)
        };
        let b_pad = if ld == k {
            None
        } else {
            Some(self.pitched_copy(&bt.data, ld)?)
        };
        let a_data = a_pad.as_ref().unwrap_or(&a.data.data);
        let b_data = b_pad.as_ref().unwrap_or(&bt.data.data);
        if !(a_data.is_16_byte_aligned() && b_data.is_16_byte_aligned() && c.data.is_16_byte_aligned()) {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the FP8 kernels need 16-byte aligned matrices (a view into a buffer at \
                         an odd offset is not): copy it first"
                    .to_string(),
            });
        }
        let staged_c = plan.staged.then(|| (c.data.address(), m, n));
        let maps = self.fp8_tensor_maps((a_data, m), (b_data, n), (k, ld), plan, staged_c)?;
        let k_blocks = k.div_ceil(FP8_SCALE_BLOCK);
        let step = |s: Fp8Scaling| match s {
            Fp8Scaling::Tensor => 0,
            Fp8Scaling::Row => 1,
            Fp8Scaling::Block1x128 | Fp8Scaling::Block128x128 => k_blocks,
        };
        // SAFETY: `maps` holds the maps of `a_data` (m rows of `ld` bytes, `k` used, box BM x
        // 128) and `b_data` (n rows, box BN x 128, BN / 2 x 128 for a pair, whose grid is whole
        // pairs all resident at once: `fp8_pairs`), `BM x BN` the plan's tile, bytes, 128-byte
        // swizzle, zero fill (zeros for `k = 0`: no copy is issued then), and for a staged plan
        // `c`'s third (bf16, the staged kernels' only result; m x n, `n` a multiple of 8, box
        // 64 x 64) with the staged kernels' shared memory in `cfg`; `ld` a multiple of 16,
        // the buffers 16-byte aligned, `c` m x n (checked) and distinct from the operands (a
        // mutable borrow); the scales' counts checked against their scalings and the steps
        // follow them; `m, n >= 1`; `cfg` the persistent launch of the tiling; the sm_90a
        // module is loaded (checked) or the simulator.
        unsafe {
            launch(
                &self.library(),
                cfg,
                maps.view(),
                a_data.view(),
                b_data.view(),
                c.data.view_mut(),
                a.scales.view(),
                bt.scales.view(),
                m,
                n,
                k,
                ld,
                ld,
                step(a.scaling),
                step(bt.scaling),
            )
        }
    }

    /// The pairs (clusters of two blocks) of a pair plan's persistent grid for an `m x n`
    /// result: one per unit of two vertically adjacent tiles, at most as many as the device runs
    /// at once (`cuOccupancyMaxActiveClusters` for the kernel's block, `cfg`): the two blocks of
    /// a pair wait for each other, so a pair that had to wait for another to finish would hang
    /// the product.
    fn fp8_pairs(&self, plan: Fp8Plan, (m, n): (usize, usize), cfg: LaunchConfig) -> Result<u32> {
        let t = plan.tile.tiling();
        let units = m.div_ceil(2 * t.block_rows) * n.div_ceil(t.block_cols);
        let kernel = match (plan.block_scales, plan.accumulation) {
            (true, _) => &family::matmul_fp8_block_pair_128x128::KERNEL,
            (false, Fp8Accumulation::Fast) => &family::matmul_fp8_fast_pair_128x256::KERNEL,
            (false, Fp8Accumulation::Promoted) => &family::matmul_fp8_promoted_pair_128x128::KERNEL,
        };
        let resident = self.resident_clusters(OP, kernel, cfg.block.0, cfg.shared_mem_bytes, 2)?;
        Ok(units.min(resident as usize).max(1) as u32)
    }

    /// The tensor maps of `A` (`m x k` bytes, rows `ld` apart, boxes of `BM x 128`) and `B^T`
    /// (`n x k`, boxes of `BN x 128`, or `BN / 2 x 128` for a pair, whose blocks each copy half)
    /// in device memory, and for a staged plan (`c`: its address, `m`, `n`) that of `C` (bf16,
    /// boxes of `64 x 64`); zeros in the simulator (whose copies read the matrices directly) and
    /// for `k = 0` (no copy is issued).
    fn fp8_tensor_maps<B: Element>(
        &self,
        (a, m): (&DeviceVec<E4M3>, usize),
        (b, n): (&DeviceVec<B>, usize),
        (k, ld): (usize, usize),
        plan: Fp8Plan,
        c: Option<(usize, usize, usize)>,
    ) -> Result<Arc<DeviceVec<u64>>> {
        let count = if c.is_some() { 3 } else { 2 };
        if matches!(self.backend, Backend::Simulator) || k == 0 {
            return Ok(Arc::new(self.zeros_of::<u64>(count * MAP_WORDS)?));
        }
        let t = plan.tile.tiling();
        let matrix = |address: usize, rows: usize| MapMatrix {
            kind: FP8_MAP_TYPE,
            bytes: 1,
            address,
            rows,
            cols: k,
            stride: ld,
        };
        let a_map = encode(matrix(a.address(), m), t.block_rows)?;
        let b_map = encode(
            matrix(b.address(), n),
            t.block_cols / if plan.pair { 2 } else { 1 },
        )?;
        let Some((address, rows, cols)) = c else {
            return self.cached_map_pair(&a_map, &b_map);
        };
        let c_matrix = MapMatrix {
            kind: sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            bytes: 2,
            address,
            rows,
            cols,
            stride: cols,
        };
        let c_map = encode(c_matrix, STAGED_BOX_ROWS)?;
        self.cached_maps(&[a_map, b_map, c_map].concat())
    }
}

/// The CPU reference of an FP8 product: `C = dequant(A) dequant(B^T)^T` in f64
/// ([`fp8_dequantize`]: each element its E4M3 value times its scale, exact), the reference of
/// [`Gpu::matmul_fp8_into`]; and beside it `sum_k |a_ik b_jk|` of the dequantised values, what
/// [`Fp8Accumulation::error_factor`] multiplies. `a` is `m x k` with `a_scales` of `a_scaling`,
/// `bt` `n x k` with `b_scales` of `b_scaling`.
///
/// Panics when a scale count does not match its scaling or `k` differs (a test's mistake).
pub fn matmul_fp8_reference<T: Fp8Element, S1: Data<Elem = E4M3>, S2: Data<Elem = T>>(
    (a, a_scales, a_scaling): (&ArrayBase<S1, Ix2>, &[f32], Fp8Scaling),
    (bt, b_scales, b_scaling): (&ArrayBase<S2, Ix2>, &[f32], Fp8Scaling),
) -> (Array2<f64>, Array2<f64>) {
    assert_eq!(bt.ncols(), a.ncols(), "A is m x k and B^T n x k");
    let da = fp8_dequantize(a, a_scales, a_scaling);
    let db = fp8_dequantize(bt, b_scales, b_scaling);
    let c = da.dot(&db.t());
    let mag = da.mapv(f64::abs).dot(&db.mapv(f64::abs).t());
    (c, mag)
}

/// The values an FP8 matrix (E4M3 or E5M2) stands for, in f64 (exact): element `(i, j)` is `q(i, j)` times its
/// scale ([`Fp8Scaling::scale_index`]).
///
/// Panics when the scale count does not match the scaling (a test's mistake).
pub fn fp8_dequantize<T: Fp8Element, S: Data<Elem = T>>(
    q: &ArrayBase<S, Ix2>,
    scales: &[f32],
    scaling: Fp8Scaling,
) -> Array2<f64> {
    let (rows, cols) = q.dim();
    assert_eq!(
        scales.len(),
        scaling.scale_count(rows, cols),
        "the scale count of the scaling"
    );
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        f64::from(q[(i, j)].value()) * f64::from(scales[scaling.scale_index(i, j, cols)])
    })
}
