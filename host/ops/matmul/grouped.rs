//! The grouped (mixture-of-experts) product `Y_e = X_e W_e^T` of `E` experts in one launch
//! (`kernels_gpu::matmul::grouped`, sm_90a): the checks, the plan ([`GroupedPlan`]), the two
//! tensor maps and the launch. `torch._grouped_mm`'s convention: `X` packed `rows x k`, `W` the
//! experts' weights stacked `(E n) x k` (`E x n x k`, each as `nn.Linear` stores it), `offsets`
//! the `E` cumulative end rows on the device, `Y` `rows x n`.

use half::bf16;
use kernels_gpu::matmul::grouped::{self as family, GROUPED_MAX_EXPERTS, grouped_shared_bytes, w_box_rows};
use kernels_gpu::matmul::wgmma_ws::{Ws128x128, Ws128x256};

use super::grouped_plan::GroupedPlan;
use super::wgmma::{MapMatrix, check_copy_engine_dims, encode};
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::module::Module;

/// The operation's name in errors.
const OP: &str = "matmul_grouped";

/// Blocks of the persistent kernel in the simulator: 3, so that a block walks several tiles of
/// the list, across experts, and the ring wraps (as `wgmma_ws`'s host does), and a list's last
/// round of 1 tile is split into column halves while one of 2 is not (`2 r <= 3`:
/// `kernels_gpu::matmul::wgmma_ws::tail_halves`).
const SIMULATED_BLOCKS: usize = 3;

impl Gpu {
    /// `Y_e = X_e W_e^T` for every expert `e` in one launch, the experts' rows given by
    /// `offsets` **on the device** (torch's `offs`: `E` cumulative end rows, u32), so that the
    /// launch reads nothing on the host and can be captured in a CUDA graph ([`Gpu::capture`])
    /// and replayed with new offsets written into the same buffer. `X` is `rows x k` (the
    /// experts' tokens packed, expert `e`'s rows `offsets[e - 1] .. offsets[e]`), `W` is `(E n)
    /// x k` (the `E` weights `n x k` stacked, `E = offsets.len()`), `Y` is `rows x n`; bf16
    /// operands, f32 sums, each element of `Y` rounded once to bf16. What
    /// `torch._grouped_mm(x, w.transpose(-2, -1), offs=offsets)` computes for a `w` of `E x n x
    /// k`. Rows of `Y` past the last expert's end are left as they are. The tile is
    /// [`GroupedPlan::choose`]'s.
    ///
    /// Offsets are a device fact, not checked here: the kernel clamps each to `rows` and takes
    /// an end below the one before as the one before (`cpu::grouped_expert_rows`), so whatever
    /// the buffer holds it stays inside `X`, `W` and `Y` and the experts' rows never overlap;
    /// an expert whose end goes backwards gets no rows. [`Gpu::matmul_grouped_with_offsets`]
    /// takes host offsets and refuses ones that are not monotone.
    ///
    /// Inside a capture: the launch's two tensor maps are kept per stream handle and buffer
    /// address; the first call on given buffers uploads them, which a capture refuses, so call
    /// it once outside the capture first.
    ///
    /// Accuracy against the exact product of the given operands, as [`Gpu::matmul_decode`]: the
    /// products of two bf16 are exact, their sums in f32, the result rounded to bf16 (relative
    /// error at most `2^-8`).
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `X` is `rows x k`, `W` `(E n) x k` and `Y`
    /// `rows x n`; [`Error::InvalidArgument`] for no experts or more than
    /// [`GROUPED_MAX_EXPERTS`], `k` not a positive multiple of 8, buffers not 16-byte aligned,
    /// or a GPU without the `sm_90a` kernels ([`Gpu::has_wgmma`]: a compute capability 9.0 GPU);
    /// [`Error::TooLarge`] for `rows`, `E n` or `k` past the copy engine's 32-bit coordinates;
    /// [`Error::WrongDevice`] for a buffer of another `Gpu`.
    pub fn matmul_grouped(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        offsets: &DeviceVec<u32>,
        y: &mut DeviceMatrix<bf16>,
    ) -> Result<()> {
        let shape = self.check_grouped(x, w, offsets, y)?;
        let plan = GroupedPlan::choose(shape.rows, shape.n, self.multiprocessors()?);
        self.launch_grouped(plan, x, w, offsets, y, shape)
    }

    /// [`Gpu::matmul_grouped`] with a given plan: for comparing plans, and for tests that must
    /// reach every kernel. Errors as [`Gpu::matmul_grouped`].
    pub fn matmul_grouped_with(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        offsets: &DeviceVec<u32>,
        y: &mut DeviceMatrix<bf16>,
        plan: GroupedPlan,
    ) -> Result<()> {
        let shape = self.check_grouped(x, w, offsets, y)?;
        self.launch_grouped(plan, x, w, offsets, y, shape)
    }

    /// [`Gpu::matmul_grouped`] with the offsets on the host (`E` cumulative end rows), into a
    /// new `rows x n` matrix (zeros in the rows past the last expert): the offsets are checked
    /// (monotone, the last at most `rows`), uploaded, and the product launched. An allocation
    /// and a host copy: not for a capture (use [`Gpu::matmul_grouped`] on a device buffer).
    ///
    /// ```
    /// use gpukern::{Gpu, bf16};
    /// let gpu = Gpu::simulator();
    /// // Two experts of k = 8, n = 2: rows 0..1 to expert 0, rows 1..3 to expert 1.
    /// let x = gpu.upload_matrix(&ndarray::Array2::from_elem((3, 8), bf16::ONE))?;
    /// let w = ndarray::Array2::from_shape_fn((4, 8), |(r, _)| bf16::from_f32(r as f32));
    /// let y = gpu.matmul_grouped_with_offsets(&x, &gpu.upload_matrix(&w)?, &[1, 3])?;
    /// let want = [[0.0, 8.0], [16.0, 24.0], [16.0, 24.0]].map(|r| r.map(bf16::from_f32));
    /// assert_eq!(y.to_array()?, ndarray::arr2(&want));
    /// # Ok::<(), gpukern::Error>(())
    /// ```
    ///
    /// Errors as [`Gpu::matmul_grouped`] (`n` is `W`'s rows over the experts, which must divide
    /// them); [`Error::InvalidArgument`] also for offsets that decrease or pass `rows`.
    pub fn matmul_grouped_with_offsets(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        offsets: &[u32],
    ) -> Result<DeviceMatrix<bf16>> {
        check_host_offsets(offsets, x.rows)?;
        let experts = offsets.len().max(1);
        let n = w.rows / experts;
        let mut y = self.zeros_matrix_of(x.rows, n)?;
        let device_offsets = self.upload(offsets)?;
        self.matmul_grouped(x, w, &device_offsets, &mut y)?;
        Ok(y)
    }

    /// The one validation of a grouped product: shapes, experts, owners. Returns the shape.
    fn check_grouped(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        offsets: &DeviceVec<u32>,
        y: &DeviceMatrix<bf16>,
    ) -> Result<GroupedShape> {
        let experts = offsets.len();
        if experts == 0 || experts > GROUPED_MAX_EXPERTS {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "{experts} experts (offsets): a grouped product takes 1 to {GROUPED_MAX_EXPERTS}"
                ),
            });
        }
        let (rows, k, n) = (x.rows, x.cols, y.cols);
        if w.cols != k || Some(w.rows) != experts.checked_mul(n) || y.rows != rows {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: vec![rows, k, experts],
                rhs: vec![w.rows, w.cols, y.rows, y.cols],
                rule: "X is rows x k, W is (E n) x k with E = offsets.len(), Y is rows x n",
            });
        }
        if !(self.owns(&x.data) && self.owns(&w.data) && self.owns(&y.data) && self.owns(offsets)) {
            return Err(Error::WrongDevice { op: OP });
        }
        Ok(GroupedShape { experts, rows, k, n })
    }

    /// Runs `plan` on checked operands: nothing for an empty `Y`.
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    fn launch_grouped(
        &self,
        plan: GroupedPlan,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        offsets: &DeviceVec<u32>,
        y: &mut DeviceMatrix<bf16>,
        GroupedShape { experts, rows, k, n }: GroupedShape,
    ) -> Result<()> {
        if !self.has_wgmma() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the grouped product's kernels are in the sm_90a PTX module only, which \
                         loads on a compute capability 9.0 GPU (gpukern built with sm_90 among \
                         GPUKERN_PTX_ARCHS)"
                    .to_string(),
            });
        }
        if rows == 0 || n == 0 {
            return Ok(());
        }
        let aligned =
            x.data.is_16_byte_aligned() && w.data.is_16_byte_aligned() && y.data.is_16_byte_aligned();
        if k == 0 || k % 8 != 0 || !aligned {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the grouped kernels need k a positive multiple of 8 (rows of whole 16 bytes \
                     for the copy engine) and 16-byte aligned matrices (k = {k})"
                ),
            });
        }
        check_copy_engine_dims((rows, k, experts * n))?;
        if u32::try_from(rows).is_err() {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!("{rows} rows: the offsets are u32"),
            });
        }
        let t = plan.tiling();
        let resident = match self.backend {
            Backend::Simulator => SIMULATED_BLOCKS,
            Backend::Cuda(_) => self.multiprocessors()?,
        };
        let cfg = LaunchConfig {
            grid: (plan.grid(rows, n, experts, resident) as u32, 1, 1),
            block: (t.threads(), 1, 1),
            shared_mem_bytes: grouped_shared_bytes(t),
        }
        .checked(OP, &self.limits().opted_in())?;
        // `W`'s box: half a tile's columns where the kernel splits its tail (a whole tile copies
        // two, a half tile one: `kernels_gpu::matmul::wgmma_ws::tail_halves`), else a tile's.
        let w_box = match plan {
            GroupedPlan::Wide => w_box_rows::<Ws128x256>(),
            GroupedPlan::Square => w_box_rows::<Ws128x128>(),
        };
        let launch = match plan {
            GroupedPlan::Wide => family::matmul_grouped_bf16_128x256::launch_views::<Module>,
            GroupedPlan::Square => family::matmul_grouped_bf16_128x128::launch_views::<Module>,
        };
        let maps = self.grouped_maps(x, w, (rows, k, experts * n), t.block_rows, w_box)?;
        // SAFETY: `maps` holds the maps of `x` (rows x k, box BM x 64) and `w` ((E n) x k, box
        // w_box x 64), bf16, 128-byte swizzle, zero fill, `BM`/`BN` the plan's tiling; shapes checked
        // (`x` rows x k, `w` E n x k, `y` rows x n, `offsets` E u32 with 1 <= E <= the most),
        // `k` a positive multiple of 8, `n >= 1`, the matrices 16-byte aligned; `cfg` is the
        // kernel's launch (384 threads, a grid of at least one block, its shared memory); the
        // sm_90a module is loaded (or the simulator).
        unsafe {
            launch(
                &self.library(),
                cfg,
                maps.view(),
                x.data.view(),
                w.data.view(),
                y.data.view_mut(),
                offsets.view(),
                experts,
                rows,
                n,
                k,
            )
        }
    }

    /// The tensor maps of `X` (`rows x k`, boxes of `bm x 64`) and of `W` as one `(E n) x k`
    /// matrix (boxes of `bn x 64`, the caller's `bn` half the tile's columns), in device memory,
    /// cached per stream handle ([`Gpu::cached_map_pair`]; uploaded in the simulator too, whose
    /// copies read the matrices directly).
    fn grouped_maps(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        (rows, k, wrows): (usize, usize, usize),
        bm: usize,
        bn: usize,
    ) -> Result<std::sync::Arc<DeviceVec<u64>>> {
        use cudarc::driver::sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 as BF16;
        if let Backend::Simulator = self.backend {
            let zeros = [0u64; kernels_gpu::matmul::wgmma::MAP_WORDS];
            return self.cached_map_pair(&zeros, &zeros);
        }
        let matrix = |address: usize, rows: usize| MapMatrix {
            kind: BF16,
            bytes: 2,
            address,
            rows,
            cols: k,
            stride: k,
        };
        let x_map = encode(matrix(x.data.address(), rows), bm)?;
        let w_map = encode(matrix(w.data.address(), wrows), bn)?;
        self.cached_map_pair(&x_map, &w_map)
    }
}

/// The checked shape of a grouped product.
#[derive(Clone, Copy, Debug)]
struct GroupedShape {
    experts: usize,
    rows: usize,
    k: usize,
    n: usize,
}

/// Errors unless `offsets` are monotone and the last at most `rows`.
fn check_host_offsets(offsets: &[u32], rows: usize) -> Result<()> {
    let mut last = 0u32;
    for (e, &o) in offsets.iter().enumerate() {
        if o < last || o as usize > rows {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "offsets[{e}] = {o}: the offsets are cumulative end rows, non-decreasing and at \
                     most the rows of X ({rows}); offsets[{}] = {last}",
                    e.saturating_sub(1)
                ),
            });
        }
        last = o;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_host_offsets;

    /// Monotone offsets within the rows pass (empty experts too); a decrease or an end past the
    /// rows is refused.
    #[test]
    fn host_offsets() {
        assert!(check_host_offsets(&[0, 3, 3, 7], 7).is_ok());
        assert!(check_host_offsets(&[], 7).is_ok());
        assert!(check_host_offsets(&[3, 2], 7).is_err());
        assert!(check_host_offsets(&[3, 8], 7).is_err());
    }
}
