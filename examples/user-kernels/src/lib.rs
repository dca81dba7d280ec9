//! The host side of the user kernels: the PTX `build.rs` compiled, each kernel's launch (its
//! grid, from the shape), and the CPU references the checks and the benchmark compare with.
//!
//! * `cargo run -p user-kernels --release`: every kernel in the simulator and, where there is
//!   one, on CUDA device 0, against its reference.
//! * `cargo run -p user-kernels --release --bin bench -- OUT.jsonl`: the kernels timed on the GPU
//!   with the copy ceiling, as JSON Lines (`bench/run-user.sh` runs it beside the Python peers).

use fast_kernels::{
    BANKED_BLOCK, BINS, COLUMN_BLOCK, COLUMN_COLS, COLUMN_ROWS, GELU_BLOCK, GELU_LANES, GEMM_BK, GEMM_BM,
    GEMM_BN, GEMM_SHARED_BYTES, GEMM_THREADS, HIST_BLOCK, STENCIL_BLOCK, STENCIL_COLS, STENCIL_ROWS,
    STREAM_BLOCK, STREAM_COLS, STREAM_MIN_ROWS,
};
use gpukern::gpukern_device::launch::Instance;
use gpukern::tensor_map::Map2d;
use gpukern::{DeviceVec, LaunchConfig, Module, PtxSet, Result, bf16, gpukern_device::vector};

pub mod prefix_lm;
pub mod reference;

/// The PTX `build.rs` compiled from `kernels/`.
pub static KERNELS: PtxSet = gpukern::include_ptx!(fast_kernels);

/// `y = gelu(x + bias)` on a `rows x cols` bf16 matrix: [`fast_kernels::bias_gelu`](fn@fast_kernels::bias_gelu), a grid that
/// covers it in one sweep.
pub fn bias_gelu(
    module: &Module,
    x: &DeviceVec<bf16>,
    bias: &DeviceVec<f32>,
    y: &mut DeviceVec<bf16>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    check_len("bias_gelu", x.len().min(y.len()), rows * cols)?;
    check_len("bias_gelu", bias.len(), cols)?;
    let config = LaunchConfig {
        grid: (vector::map_blocks(rows * cols, GELU_LANES, GELU_BLOCK), 1, 1),
        block: (GELU_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `x` and `y` hold `rows * cols` elements, `bias` `cols` (checked above).
    unsafe { fast_kernels::bias_gelu::launch(module, config, x, bias, y, rows, cols) }
}

/// [`bias_gelu`] on a resident grid: as many blocks as fit the device at once
/// ([`Module::grid_stride`]), each thread going round `vector::map`'s loop several times,
/// instead of one sweep of `ceil(n / 8192)` blocks.
pub fn bias_gelu_resident(
    module: &Module,
    x: &DeviceVec<bf16>,
    bias: &DeviceVec<f32>,
    y: &mut DeviceVec<bf16>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    check_len("bias_gelu", x.len().min(y.len()), rows * cols)?;
    check_len("bias_gelu", bias.len(), cols)?;
    // One item: a thread's sweep of `MAP_UNROLL` vectors.
    let sweeps = (rows * cols).div_ceil(GELU_LANES * vector::MAP_UNROLL).max(1);
    let config = module.grid_stride(&fast_kernels::bias_gelu::KERNEL, sweeps, GELU_BLOCK, 0)?;
    // SAFETY: `x` and `y` hold `rows * cols` elements, `bias` `cols` (checked above).
    unsafe { fast_kernels::bias_gelu::launch(module, config, x, bias, y, rows, cols) }
}

/// A bias + GELU's host function: [`bias_gelu`] or [`bias_gelu_resident`].
pub type GeluFn =
    fn(&Module, &DeviceVec<bf16>, &DeviceVec<f32>, &mut DeviceVec<bf16>, usize, usize) -> Result<()>;

/// The bias + GELU's launches, by name: one sweep, then the resident grid.
pub const GELUS: [(&str, GeluFn); 2] = [
    ("bias_gelu", bias_gelu),
    ("bias_gelu_resident", bias_gelu_resident),
];

/// One Jacobi step of the `rows x cols` grid `x` into `out`: [`fast_kernels::stencil`](fn@fast_kernels::stencil), one block per
/// 32 x 128 tile.
pub fn stencil(
    module: &Module,
    x: &DeviceVec<f32>,
    out: &mut DeviceVec<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    check_len("stencil", x.len().min(out.len()), rows * cols)?;
    let config = LaunchConfig {
        grid: (
            cols.div_ceil(STENCIL_COLS).max(1) as u32,
            rows.div_ceil(STENCIL_ROWS).max(1) as u32,
            1,
        ),
        block: (STENCIL_BLOCK.0, STENCIL_BLOCK.1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: both hold `rows * cols` floats; the launch is the kernel's.
    unsafe { fast_kernels::stencil::launch(module, config, x, out, rows, cols) }
}

/// The same Jacobi step with [`fast_kernels::stencil_columns`](fn@fast_kernels::stencil_columns):
/// one block per 32 x 1024 outputs, each thread a strip of 4 columns down 32 rows.
pub fn stencil_columns(
    module: &Module,
    x: &DeviceVec<f32>,
    out: &mut DeviceVec<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    check_len("stencil_columns", x.len().min(out.len()), rows * cols)?;
    let config = LaunchConfig {
        grid: (
            cols.div_ceil(COLUMN_COLS).max(1) as u32,
            rows.div_ceil(COLUMN_ROWS).max(1) as u32,
            1,
        ),
        block: (COLUMN_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: both hold `rows * cols` floats (separate buffers); the launch is the kernel's.
    unsafe { fast_kernels::stencil_columns::launch(module, config, x, out, rows, cols) }
}

/// The same Jacobi step with [`fast_kernels::stencil_stream`](fn@fast_kernels::stencil_stream)
/// (a ring of 2 rows a thread, plain stores) on [`stream_grid`]'s grid.
pub fn stencil_stream(
    module: &Module,
    x: &DeviceVec<f32>,
    out: &mut DeviceVec<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    stream::<false>(module, x, out, rows, cols)
}

/// [`stencil_stream`] with evict-first stores of the outputs.
pub fn stencil_stream_evict(
    module: &Module,
    x: &DeviceVec<f32>,
    out: &mut DeviceVec<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    stream::<true>(module, x, out, rows, cols)
}

/// [`fast_kernels::stencil_stream`](fn@fast_kernels::stencil_stream)`::<2, EVICT_FIRST>` on
/// [`stream_grid`]'s grid.
fn stream<const EVICT_FIRST: bool>(
    module: &Module,
    x: &DeviceVec<f32>,
    out: &mut DeviceVec<f32>,
    rows: usize,
    cols: usize,
) -> Result<()>
where
    fast_kernels::stencil_stream<2, EVICT_FIRST>: Instance,
{
    check_len("stencil_stream", x.len().min(out.len()), rows * cols)?;
    // The kernel's indices are 32-bit.
    if rows + 16 > u32::MAX as usize || cols + 2048 > u32::MAX as usize {
        return Err(gpukern::Error::InvalidArgument {
            op: "stencil_stream",
            detail: format!("a grid of {rows} x {cols}: each side must be below 2^32 - 2048"),
        });
    }
    let kernel = <fast_kernels::stencil_stream<2, EVICT_FIRST> as Instance>::KERNEL;
    let config = stream_grid(
        module.occupancy(kernel, (STREAM_BLOCK, 1, 1), 0)?,
        module,
        rows,
        cols,
    )?;
    // SAFETY: both hold `rows * cols` floats (separate buffers), the sides fit 32 bits as the
    // kernel needs; any grid of 1-D blocks of `STREAM_BLOCK` threads is the kernel's.
    unsafe { fast_kernels::stencil_stream::<2, EVICT_FIRST>::launch(module, config, x, out, rows, cols) }
}

/// The grid of [`fast_kernels::stencil_stream`](fn@fast_kernels::stencil_stream): the blocks
/// resident at once (`per_sm` on each multiprocessor), so that no wave runs part full, but no
/// more than give every block [`STREAM_MIN_ROWS`] rows of a strip.
pub fn stream_grid(per_sm: u32, module: &Module, rows: usize, cols: usize) -> Result<LaunchConfig> {
    let resident = per_sm as usize * module.gpu().multiprocessors()?;
    let most = (cols.div_ceil(STREAM_COLS) * rows / STREAM_MIN_ROWS).max(1);
    Ok(LaunchConfig {
        grid: (resident.min(most).clamp(1, u32::MAX as usize) as u32, 1, 1),
        block: (STREAM_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// A Jacobi step's host function: [`stencil`], [`stencil_columns`], [`stencil_stream`] or
/// [`stencil_stream_evict`].
pub type StencilFn = fn(&Module, &DeviceVec<f32>, &mut DeviceVec<f32>, usize, usize) -> Result<()>;

/// The stencil's rungs, by name: the shared tile, the register strips, the strips on a resident
/// grid (plain and evict-first stores).
pub const STENCILS: [(&str, StencilFn); 4] = [
    ("stencil", stencil),
    ("stencil_columns", stencil_columns),
    ("stencil_stream", stencil_stream),
    ("stencil_stream_evict", stencil_stream_evict),
];

/// Blocks of the histogram per multiprocessor: enough resident threads to keep loads in flight
/// (8 blocks of 256 threads fill a multiprocessor's 2048), few enough final flushes.
const HIST_BLOCKS_PER_SM: usize = 8;

/// `counts` (256 bins, zeroed here) = the histogram of the bytes of `data`: [`fast_kernels::histogram`](fn@fast_kernels::histogram)
/// on a grid of a few blocks per multiprocessor.
pub fn histogram(module: &Module, data: &DeviceVec<u8>, counts: &mut DeviceVec<u32>) -> Result<()> {
    *counts = module.gpu().zeros_of::<u32>(BINS)?;
    histogram_add(module, data, counts)
}

/// Adds the histogram of `data` to `counts` (what [`histogram`] launches after zeroing them; the
/// benchmark times it alone).
pub fn histogram_add(module: &Module, data: &DeviceVec<u8>, counts: &mut DeviceVec<u32>) -> Result<()> {
    check_len("histogram", counts.len(), BINS)?;
    let most = module.gpu().multiprocessors()? * HIST_BLOCKS_PER_SM;
    let needed = data.len().div_ceil(16 * 2 * HIST_BLOCK as usize).max(1);
    let config = LaunchConfig {
        grid: (needed.min(most) as u32, 1, 1),
        block: (HIST_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `data` holds `data.len()` bytes, `counts` 256 counters.
    unsafe { fast_kernels::histogram::launch(module, config, data, data.len(), counts) }
}

/// `counts` (256 bins, zeroed here) = the histogram of the bytes of `data` by the second rung,
/// [`fast_kernels::histogram_lanes`](fn@fast_kernels::histogram_lanes): every lane counts into
/// 8-bit bins of its own, so that a warp's shared-memory updates never share a bank.
pub fn histogram_lanes(module: &Module, data: &DeviceVec<u8>, counts: &mut DeviceVec<u32>) -> Result<()> {
    *counts = module.gpu().zeros_of::<u32>(BINS)?;
    histogram_lanes_add(module, data, counts)
}

/// Adds the histogram of `data` to `counts` with [`fast_kernels::histogram_lanes`](fn@fast_kernels::histogram_lanes),
/// on as many blocks as are resident at once (its 65 KB of shared memory a block decide how
/// many), fewer for short data.
pub fn histogram_lanes_add(module: &Module, data: &DeviceVec<u8>, counts: &mut DeviceVec<u32>) -> Result<()> {
    check_len("histogram_lanes", counts.len(), BINS)?;
    // One item: the two 16-byte vectors a thread loads per trip.
    let pairs = data.len().div_ceil(32).max(1);
    let config = module.grid_stride(&fast_kernels::histogram_lanes::KERNEL, pairs, HIST_BLOCK, 0)?;
    // SAFETY: `data` holds `data.len()` bytes, `counts` 256 counters.
    unsafe { fast_kernels::histogram_lanes::launch(module, config, data, data.len(), counts) }
}

/// `counts` (256 bins, zeroed here) = the histogram of the bytes of `data` by the third rung,
/// [`fast_kernels::histogram_spread`](fn@fast_kernels::histogram_spread): four copies of each
/// warp's bins, interleaved across the banks.
pub fn histogram_spread(module: &Module, data: &DeviceVec<u8>, counts: &mut DeviceVec<u32>) -> Result<()> {
    *counts = module.gpu().zeros_of::<u32>(BINS)?;
    histogram_spread_add(module, data, counts)
}

/// Adds the histogram of `data` to `counts` with
/// [`fast_kernels::histogram_spread`](fn@fast_kernels::histogram_spread), on as many blocks as
/// are resident at once (32 KB of shared memory a block), fewer for short data.
pub fn histogram_spread_add(
    module: &Module,
    data: &DeviceVec<u8>,
    counts: &mut DeviceVec<u32>,
) -> Result<()> {
    check_len("histogram_spread", counts.len(), BINS)?;
    let pairs = data.len().div_ceil(32).max(1);
    let config = module.grid_stride(&fast_kernels::histogram_spread::KERNEL, pairs, HIST_BLOCK, 0)?;
    // SAFETY: `data` holds `data.len()` bytes, `counts` 256 counters.
    unsafe { fast_kernels::histogram_spread::launch(module, config, data, data.len(), counts) }
}

/// `counts` (256 bins, zeroed here) = the histogram of the bytes of `data` by the fourth rung,
/// [`fast_kernels::histogram_banked`](fn@fast_kernels::histogram_banked): the block's bins once
/// per lane index, each copy in its own bank; 4 vectors in flight a thread.
pub fn histogram_banked(module: &Module, data: &DeviceVec<u8>, counts: &mut DeviceVec<u32>) -> Result<()> {
    *counts = module.gpu().zeros_of::<u32>(BINS)?;
    histogram_banked_add(module, data, counts)
}

/// Adds the histogram of `data` to `counts` with
/// [`fast_kernels::histogram_banked`](fn@fast_kernels::histogram_banked) (4 vectors in flight),
/// on as many blocks as are resident at once (32 KB of shared memory a block), fewer for short
/// data.
pub fn histogram_banked_add(
    module: &Module,
    data: &DeviceVec<u8>,
    counts: &mut DeviceVec<u32>,
) -> Result<()> {
    banked::<4>(module, data, counts)
}

/// [`histogram_banked`] with 2 vectors in flight a thread (fewer registers).
pub fn histogram_banked_x2(module: &Module, data: &DeviceVec<u8>, counts: &mut DeviceVec<u32>) -> Result<()> {
    *counts = module.gpu().zeros_of::<u32>(BINS)?;
    histogram_banked_x2_add(module, data, counts)
}

/// [`histogram_banked_add`] with 2 vectors in flight a thread.
pub fn histogram_banked_x2_add(
    module: &Module,
    data: &DeviceVec<u8>,
    counts: &mut DeviceVec<u32>,
) -> Result<()> {
    banked::<2>(module, data, counts)
}

/// [`fast_kernels::histogram_banked`](fn@fast_kernels::histogram_banked)`::<UNROLL>` on the
/// blocks resident at once, fewer for short data (one item: a thread's `UNROLL` vectors).
fn banked<const UNROLL: usize>(
    module: &Module,
    data: &DeviceVec<u8>,
    counts: &mut DeviceVec<u32>,
) -> Result<()>
where
    fast_kernels::histogram_banked<UNROLL>: Instance,
{
    check_len("histogram_banked", counts.len(), BINS)?;
    let kernel = <fast_kernels::histogram_banked<UNROLL> as Instance>::KERNEL;
    let items = data.len().div_ceil(16 * UNROLL).max(1);
    let config = module.grid_stride(kernel, items, BANKED_BLOCK, 0)?;
    // SAFETY: `data` holds `data.len()` bytes (gpukern allocates 16-byte aligned) and nothing
    // writes it during the launch; `counts` holds 256 counters.
    unsafe { fast_kernels::histogram_banked::<UNROLL>::launch(module, config, data, data.len(), counts) }
}

/// A histogram's host functions: the whole (zeroing `counts`), then the added launch alone.
pub type HistogramFns = (
    fn(&Module, &DeviceVec<u8>, &mut DeviceVec<u32>) -> Result<()>,
    fn(&Module, &DeviceVec<u8>, &mut DeviceVec<u32>) -> Result<()>,
);

/// The histogram's rungs, by name: per-warp bins, lane-private byte counters, spread copies,
/// banked copies (4 and 2 vectors in flight).
pub const HISTOGRAMS: [(&str, HistogramFns); 5] = [
    ("histogram", (histogram, histogram_add)),
    ("histogram_lanes", (histogram_lanes, histogram_lanes_add)),
    ("histogram_spread", (histogram_spread, histogram_spread_add)),
    ("histogram_banked", (histogram_banked, histogram_banked_add)),
    (
        "histogram_banked_x2",
        (histogram_banked_x2, histogram_banked_x2_add),
    ),
];
/// Blocks of [`gemm_bias_gelu`]'s persistent grid in the simulator: two, so that each block walks
/// several tiles and the ring wraps from one tile to the next as on the GPU.
const SIMULATED_GEMM_BLOCKS: usize = 2;

/// `C = gelu(A B + bias)`: `A` `m x k`, `B` `k x n`, `C` `m x n` (row-major bf16), `bias` `n`
/// f32; [`fast_kernels::gemm_bias_gelu`](fn@fast_kernels::gemm_bias_gelu) on a persistent grid
/// of one block per multiprocessor (at most one per `128 x 256` tile of `C`).
///
/// `m`, `n`, `k` need not be multiples of the tile, but the copy engine needs rows of whole 16
/// bytes: `k` and `n` multiples of 8. Errors: an empty shape, `k` or `n` not a multiple of 8,
/// buffers too short, a dimension past the copy engine's 32-bit coordinates, and a module
/// without the kernel (it is in the sm_90a module only: a compute capability 9.0 GPU).
pub fn gemm_bias_gelu(
    module: &Module,
    a: &DeviceVec<bf16>,
    b: &DeviceVec<bf16>,
    bias: &DeviceVec<f32>,
    c: &mut DeviceVec<bf16>,
    shape: (usize, usize, usize),
) -> Result<()> {
    let operands = GemmOperands::new(module, a, b, shape)?;
    operands.gemm_bias_gelu(module, bias, c)
}

/// The operands of [`gemm_bias_gelu`] with their tensor maps in device memory, checked and
/// encoded once: what a caller that multiplies the same matrices again keeps (the benchmark
/// times [`GemmOperands::gemm_bias_gelu`] alone, as the library's cached maps do). It borrows
/// `a` and `b`, so the maps cannot outlive them or see them change.
pub struct GemmOperands<'a> {
    a: &'a DeviceVec<bf16>,
    b: &'a DeviceVec<bf16>,
    shape: (usize, usize, usize),
    maps: DeviceVec<u64>,
}

impl<'a> GemmOperands<'a> {
    /// Checks the shape (errors as [`gemm_bias_gelu`]'s) and encodes the maps of `a` (`m x k`,
    /// boxes of 128 x 64) and `b` (`k x n`, boxes of 64 x 64).
    #[allow(clippy::manual_is_multiple_of)] // the minimum Rust (1.85) lacks is_multiple_of
    pub fn new(
        module: &Module,
        a: &'a DeviceVec<bf16>,
        b: &'a DeviceVec<bf16>,
        (m, n, k): (usize, usize, usize),
    ) -> Result<Self> {
        let invalid = |detail: String| Err(gpukern::Error::InvalidArgument { op: GEMM_OP, detail });
        if m == 0 || n == 0 || k == 0 {
            return invalid(format!("an empty product ({m} x {k} times {k} x {n})"));
        }
        if k % 8 != 0 || n % 8 != 0 {
            return invalid(format!(
                "k = {k} and n = {n} must be multiples of 8 (the copy engine reads rows of whole 16 bytes)"
            ));
        }
        if [m, n, k].iter().any(|&d| d > i32::MAX as usize) {
            return invalid(format!(
                "{m} x {n} x {k}: the copy engine's coordinates are 32-bit"
            ));
        }
        check_len(GEMM_OP, a.len(), m * k)?;
        check_len(GEMM_OP, b.len(), k * n)?;
        if !module.gpu().is_simulator() && !module.kernel_names().contains(&"gemm_bias_gelu") {
            return invalid(
                "the kernel is in the sm_90a PTX module only (a compute capability 9.0 GPU)".into(),
            );
        }
        let maps = module
            .gpu()
            .tensor_maps_2d(&[Map2d::new(a, m, k, GEMM_BM), Map2d::new(b, k, n, GEMM_BK)])?;
        Ok(GemmOperands {
            a,
            b,
            shape: (m, n, k),
            maps,
        })
    }

    /// `c = gelu(a b + bias)` on these operands: one launch.
    pub fn gemm_bias_gelu(
        &self,
        module: &Module,
        bias: &DeviceVec<f32>,
        c: &mut DeviceVec<bf16>,
    ) -> Result<()> {
        let (m, n, k) = self.shape;
        check_len(GEMM_OP, bias.len(), n)?;
        check_len(GEMM_OP, c.len(), m * n)?;
        let gpu = module.gpu();
        let blocks = if gpu.is_simulator() {
            SIMULATED_GEMM_BLOCKS
        } else {
            gpu.multiprocessors()?
        };
        let tiles = m.div_ceil(GEMM_BM) * n.div_ceil(GEMM_BN);
        let config = LaunchConfig {
            grid: (tiles.min(blocks) as u32, 1, 1),
            block: (GEMM_THREADS, 1, 1),
            shared_mem_bytes: GEMM_SHARED_BYTES,
        };
        let (a, b) = (self.a, self.b);
        // SAFETY: the maps of `a` (box 128 x 64) and `b` (box 64 x 64), bf16, 128-byte swizzle,
        // zero fill, encoded for these borrowed buffers; shapes and lengths checked (gpukern
        // allocates 16-byte aligned); `c` is borrowed mutably, so it overlaps no input; the
        // launch is the kernel's.
        unsafe { fast_kernels::gemm_bias_gelu::launch(module, config, &self.maps, a, b, bias, c, m, n, k) }
    }
}

/// The GEMM's name in errors.
const GEMM_OP: &str = "gemm_bias_gelu";

/// An error unless a buffer of `len` elements holds the `needed` the shape asks for.
fn check_len(op: &'static str, len: usize, needed: usize) -> Result<()> {
    if len >= needed {
        Ok(())
    } else {
        Err(gpukern::Error::InvalidArgument {
            op,
            detail: format!("a buffer of {len} elements for a shape of {needed}"),
        })
    }
}
