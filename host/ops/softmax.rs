//! Row-wise softmax with an inverse temperature, with a choice of algorithm.

use kernels_gpu::softmax::{
    BLOCK, GROUP_KERNEL_BLOCK, PERSIST_WARP_SHARED_BYTES, ROW_BLOCK_MAX, SHARED_BYTES, STATS_SHARED_BYTES,
    STREAM_BLOCK, WARP_KERNEL_BLOCK, WARP_KERNEL_ROWS, persist_block_shared_bytes,
};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::{DeviceLimits, LaunchConfig};
use crate::raw;
use crate::raw::softmax::RowKernel;

/// Which softmax to run. Both follow the same rules at the edges (see [`Gpu::softmax`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SoftmaxAlgorithm {
    /// One block of 256 threads per row, three passes over the row (max, sum, write), tree
    /// reductions in shared memory: the tutorial kernel `softmax_block_reduce`. 16 bytes per
    /// element.
    BlockReduce,
    /// One read and one write of each element where the row fits on chip (up to 32768 columns):
    /// online (max, sum) statistics merged with warp shuffles, 16-byte accesses, a warp per row
    /// up to 1024 columns, a block per row above (by default persistent, the next row staged in
    /// shared memory while the current one is written). Longer rows are read twice (12 bytes per
    /// element), split over several blocks when there are few rows. The default; the plan for a
    /// shape is [`OnePassConfig::plan`].
    #[default]
    OnePass,
}

impl SoftmaxAlgorithm {
    /// Every algorithm, slowest first.
    pub const ALL: [SoftmaxAlgorithm; 2] = [SoftmaxAlgorithm::BlockReduce, SoftmaxAlgorithm::OnePass];

    /// A short name: `block-reduce`, `one-pass`.
    pub fn name(self) -> &'static str {
        match self {
            SoftmaxAlgorithm::BlockReduce => "block-reduce",
            SoftmaxAlgorithm::OnePass => "one-pass",
        }
    }
}

/// Most 4-float vectors a lane of a warp-per-row kernel holds (`softmax_warp_8`).
const WARP_MAX_VECTORS: usize = 8;
/// Most vectors a thread of a block-per-row kernel holds (`softmax_block_8`).
const BLOCK_MAX_VECTORS: usize = 8;
/// Threads up to which a block-per-row row uses 4 vectors per thread; longer rows use 8.
/// Up to 8192 columns that is 512 threads of about 40 registers, three blocks per SM; past it,
/// 8 vectors keep the block at 512 threads up to 16384 columns.
const BLOCK_4_MAX_THREADS: usize = 512;

/// Default [`OnePassConfig::persistent_min_cols`]: rows longer than 16384 columns, the ones that
/// take 8 vectors per thread of more than 512 threads.
pub const PERSISTENT_MIN_COLS: usize = 16385;

/// The thresholds [`SoftmaxAlgorithm::OnePass`] picks its kernels by. `Default` is what
/// [`Gpu::softmax`] uses; tests lower them to reach every path on small shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnePassConfig {
    /// Rows of up to this many columns take a warp each (the kernels hold at most 1027).
    pub warp_max_cols: usize,
    /// Longer rows of up to this many columns take a block each, held in registers (at most
    /// 32771: 8 vectors per thread of 1024 threads, plus head and tail).
    pub block_max_cols: usize,
    /// Still longer rows are read twice: with at least this many rows, by one block per row
    /// (`softmax_stream`); with fewer, each row is split over blocks of `split_chunk` columns.
    pub split_max_rows: usize,
    /// Columns per block when a row is split (at least 4).
    pub split_chunk: usize,
    /// Rows that a warp would hold with 1 vector per lane (up to 128 columns, +3) take a group
    /// of this many lanes instead, several rows per warp: 8 (`softmax_group_8x4`) or 16
    /// (`softmax_group_16x2`); 0 keeps them on a warp each. Applies where `warp_max_cols`
    /// admits the row.
    pub group_lanes: usize,
    /// Rows of at least this many columns that a warp holds with 8 vectors per lane, or a block
    /// with 4 or 8 per thread, run on the persistent kernels (`softmax_persist_warp_8`,
    /// `softmax_persist_block_{4,8}`): as many warps or blocks as are resident at once, each
    /// looping over rows with the next row staged in shared memory while it finishes the
    /// current one. 0: every such row; `usize::MAX`: none.
    pub persistent_min_cols: usize,
}

impl Default for OnePassConfig {
    fn default() -> Self {
        OnePassConfig {
            warp_max_cols: 1024,
            block_max_cols: 32768,
            // Two blocks per multiprocessor of an H200 (132 SMs) and more: enough rows to fill
            // the GPU with one block each.
            split_max_rows: 256,
            // 64 KiB per block, 8 vectors per thread of 512: a 2^24 row is 1024 blocks, and each
            // block of step 2 reads 8 KiB of partial statistics.
            split_chunk: 16384,
            // At 8192 x 128 on an H200 groups of 16 lanes (two rows per warp) were faster than
            // groups of 8 and than a warp per row (bench `one-pass/group-*`, `--plans`; not a
            // committed run).
            group_lanes: 16,
            // The next row's loads in flight while a row is reduced and written pays where a
            // row takes a whole 1024-thread block, one per SM: the SM otherwise stops loading
            // for all of that, and for the block's exit and the next block's start. On an H200
            // that was faster at 32768 columns; at 1024 to 8192 columns, where several rows
            // share an SM anyway, the staging through shared memory cost more than it hid
            // (`--plans` run, not committed).
            persistent_min_cols: PERSISTENT_MIN_COLS,
        }
    }
}

/// The kernels [`SoftmaxAlgorithm::OnePass`] runs for one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnePassPlan {
    /// `softmax_warp_{vectors}`: a warp per row, `vectors` 4-float vectors per lane.
    Warp {
        /// 1, 2, 4 or 8.
        vectors: usize,
    },
    /// `softmax_block_{vectors}`: a block of `threads` per row, `vectors` per thread.
    Block {
        /// 4 or 8.
        vectors: usize,
        /// A multiple of 32, at most 1024.
        threads: u32,
    },
    /// `softmax_group_8x4` or `softmax_group_16x2`: a group of `lanes` lanes per row.
    Group {
        /// 8 or 16.
        lanes: usize,
    },
    /// `softmax_persist_warp_8`: a warp per row, 8 vectors per lane, persistent.
    PersistentWarp,
    /// `softmax_persist_block_{vectors}`: a block of `threads` per row, `vectors` per thread,
    /// persistent.
    PersistentBlock {
        /// 4 or 8.
        vectors: usize,
        /// A multiple of 32, at most 1024.
        threads: u32,
    },
    /// `softmax_stream`: a block per row, the row read twice.
    Stream,
    /// `softmax_split_stats` then `softmax_split_write`: `chunks` blocks per row of `chunk_vecs`
    /// vectors each.
    Split {
        /// Blocks per row.
        chunks: usize,
        /// Vectors of 4 floats per block.
        chunk_vecs: usize,
    },
}

impl OnePassConfig {
    /// The kernels for a `rows x cols` softmax.
    pub fn plan(&self, rows: usize, cols: usize) -> OnePassPlan {
        self.plan_limited(rows, cols, ROW_BLOCK_MAX, u32::MAX)
    }

    /// [`OnePassConfig::plan`] where the block-per-row kernel with 8 vectors per thread
    /// (`softmax_block_8`, or `softmax_persist_block_8` when `persistent`) runs at most
    /// `block_8_max_threads` per block (the driver's limit for its register count), and a
    /// persistent block may use at most `shared_max` bytes of shared memory.
    fn plan_limited(
        &self,
        rows: usize,
        cols: usize,
        block_8_max_threads: u32,
        shared_max: u32,
    ) -> OnePassPlan {
        // Aligned vectors of the row with the most: a row whose start is not 16-byte aligned
        // has one fewer, plus up to 3 head and 3 tail scalars that threads 0..7 take.
        let vecs = cols / 4;
        if cols <= self.warp_max_cols {
            if let Some(vectors) = warp_vectors(vecs) {
                return match vectors {
                    1 if matches!(self.group_lanes, 8 | 16) => OnePassPlan::Group {
                        lanes: self.group_lanes,
                    },
                    WARP_MAX_VECTORS if cols >= self.persistent_min_cols => OnePassPlan::PersistentWarp,
                    _ => OnePassPlan::Warp { vectors },
                };
            }
        }
        if cols <= self.block_max_cols {
            let threads_for = |vectors: usize| vecs.div_ceil(vectors).next_multiple_of(32).max(32);
            let block = |vectors: usize, threads: usize| {
                let threads = threads as u32;
                let staged = persist_block_shared_bytes(vectors as u32, threads) <= shared_max;
                if cols >= self.persistent_min_cols && staged {
                    OnePassPlan::PersistentBlock { vectors, threads }
                } else {
                    OnePassPlan::Block { vectors, threads }
                }
            };
            if threads_for(4) <= BLOCK_4_MAX_THREADS {
                return block(4, threads_for(4));
            }
            let threads = threads_for(BLOCK_MAX_VECTORS);
            if threads <= block_8_max_threads.min(ROW_BLOCK_MAX) as usize {
                return block(BLOCK_MAX_VECTORS, threads);
            }
        }
        if rows >= self.split_max_rows {
            return OnePassPlan::Stream;
        }
        let chunk_vecs = (self.split_chunk / 4).max(1);
        OnePassPlan::Split {
            chunks: vecs.div_ceil(chunk_vecs).max(1),
            chunk_vecs,
        }
    }
}

/// The fewest vectors per lane (1, 2, 4, 8) that hold `vecs` vectors in a warp.
fn warp_vectors(vecs: usize) -> Option<usize> {
    [1, 2, 4, WARP_MAX_VECTORS]
        .into_iter()
        .find(|&v| vecs <= v * kernels_gpu::gpu::warp::SIZE as usize)
}

impl Gpu {
    /// Softmax of each row of `x`, scaled by the inverse temperature `t`:
    /// `y[r][j] = exp(t*x[r][j]) / sum_j exp(t*x[r][j])`, with the default algorithm
    /// ([`SoftmaxAlgorithm::OnePass`]).
    ///
    /// `t = 1` is the plain softmax, `t = 0` gives the uniform distribution, large `t`
    /// approaches a one-hot argmax, negative `t` favours the smallest entries.
    ///
    /// Rules at the edges (the kernels compute `exp(t * (x - m))` with `m` the row's max, or
    /// min for `t < 0`, so nothing overflows, also for `|x|` near `f32::MAX` and large `t`):
    /// * entries at `+inf` (for `t > 0`; `-inf` for `t < 0`) share the row's mass equally,
    ///   the others get 0: the limit of the finite case;
    /// * a row whose entries are all equal is uniform, including a row of all `-inf`;
    /// * `t = 0` is uniform even with infinite entries;
    /// * a NaN anywhere in a row makes that row all NaN; other rows are unaffected.
    ///
    /// Errors: [`Error::InvalidArgument`] if `t` is NaN or infinite.
    pub fn softmax(&self, x: &DeviceMatrix, t: f32) -> Result<DeviceMatrix> {
        self.softmax_with(x, t, SoftmaxAlgorithm::default())
    }

    /// [`Gpu::softmax`] with the given algorithm.
    pub fn softmax_with(
        &self,
        x: &DeviceMatrix,
        t: f32,
        algorithm: SoftmaxAlgorithm,
    ) -> Result<DeviceMatrix> {
        let mut y = self.alloc_matrix(x.rows, x.cols)?;
        self.softmax_into_with(x, &mut y, t, algorithm)?;
        Ok(y)
    }

    /// [`Gpu::softmax`] into an existing matrix of `x`'s shape (no allocation).
    pub fn softmax_into(&self, x: &DeviceMatrix, y: &mut DeviceMatrix, t: f32) -> Result<()> {
        self.softmax_into_with(x, y, t, SoftmaxAlgorithm::default())
    }

    /// [`Gpu::softmax_into`] with the given algorithm.
    pub fn softmax_into_with(
        &self,
        x: &DeviceMatrix,
        y: &mut DeviceMatrix,
        t: f32,
        algorithm: SoftmaxAlgorithm,
    ) -> Result<()> {
        let config = match algorithm {
            SoftmaxAlgorithm::BlockReduce => None,
            SoftmaxAlgorithm::OnePass => Some(OnePassConfig::default()),
        };
        self.softmax_matrix(x, y, t, config)
    }

    /// [`SoftmaxAlgorithm::OnePass`] with its kernels picked by `config` instead of the default
    /// thresholds: for tuning, and for tests that reach every path on small shapes.
    pub fn softmax_into_one_pass(
        &self,
        x: &DeviceMatrix,
        y: &mut DeviceMatrix,
        t: f32,
        config: &OnePassConfig,
    ) -> Result<()> {
        self.softmax_matrix(x, y, t, Some(*config))
    }

    /// Softmax of a whole vector (a matrix of one row), with the default algorithm.
    pub fn softmax_vec(&self, x: &DeviceVec, t: f32) -> Result<DeviceVec> {
        let mut y = self.alloc(x.len())?;
        self.softmax_rows(x, &mut y, 1, x.len(), t, Some(OnePassConfig::default()))?;
        Ok(y)
    }

    fn softmax_matrix(
        &self,
        x: &DeviceMatrix,
        y: &mut DeviceMatrix,
        t: f32,
        config: Option<OnePassConfig>,
    ) -> Result<()> {
        same_shape(
            "softmax",
            &[x.rows, x.cols],
            &[y.rows, y.cols],
            "the output must have the input's shape",
        )?;
        self.softmax_rows(&x.data, &mut y.data, x.rows, x.cols, t, config)
    }

    /// The softmax of `rows x cols` in `x` into `y`: [`SoftmaxAlgorithm::BlockReduce`] with
    /// `config = None`, else [`SoftmaxAlgorithm::OnePass`] planned by `config`.
    fn softmax_rows(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        rows: usize,
        cols: usize,
        t: f32,
        config: Option<OnePassConfig>,
    ) -> Result<()> {
        if !t.is_finite() {
            return Err(Error::InvalidArgument {
                op: "softmax",
                detail: format!("inverse temperature {t}: it must be finite"),
            });
        }
        self.check_owner("softmax", &[x, y])?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        // The 16-byte kernels split each row of `x` and of `y` at the same offsets, so the two
        // must agree modulo 16 bytes; device allocations are 256-byte aligned, so this holds
        // except for host buffers of the simulator, where the tutorial kernel takes over.
        let congruent = x.address() % 16 == y.address() % 16;
        match config {
            Some(config) if congruent => self.softmax_one_pass(x, y, rows, cols, t, &config),
            _ => {
                let cfg = LaunchConfig::per_row("softmax", rows, BLOCK, SHARED_BYTES, &self.limits())?;
                // SAFETY: `x` and `y` hold rows*cols elements; `cfg` is the kernel's per-row shape.
                unsafe { raw::softmax::softmax_block_reduce(self, cfg, x, y, rows, cols, t) }
            }
        }
    }

    /// [`SoftmaxAlgorithm::OnePass`]: the kernels of `config.plan(rows, cols)`.
    fn softmax_one_pass(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        rows: usize,
        cols: usize,
        t: f32,
        config: &OnePassConfig,
    ) -> Result<()> {
        let limits = self.limits();
        let (block_8_max, shared_max) = if cols >= config.persistent_min_cols {
            (
                raw::softmax::persist_block_8_max_threads(self),
                raw::softmax::shared_opt_in(self),
            )
        } else {
            (raw::softmax::block_8_max_threads(self), u32::MAX)
        };
        // A persistent kernel's grid: as many blocks as are resident at once, no more than
        // there is work for.
        let persistent = |kernel, needed: usize, threads: u32, shared: u32| -> Result<LaunchConfig> {
            let resident = raw::softmax::resident_blocks(self, kernel, threads, shared)? as usize;
            let opted_in = DeviceLimits {
                max_shared_mem_per_block: raw::softmax::shared_opt_in(self)
                    .max(limits.max_shared_mem_per_block),
                ..limits
            };
            LaunchConfig::per_row("softmax", needed.min(resident), threads, shared, &opted_in)
        };
        let (kernel, cfg) = match config.plan_limited(rows, cols, block_8_max, shared_max) {
            OnePassPlan::Warp { vectors } => {
                let blocks = rows.div_ceil(WARP_KERNEL_ROWS as usize);
                let cfg = LaunchConfig::per_row("softmax", blocks, WARP_KERNEL_BLOCK, 0, &limits)?;
                (RowKernel::warp(vectors), cfg)
            }
            OnePassPlan::Group { lanes } => {
                let blocks = rows.div_ceil(GROUP_KERNEL_BLOCK as usize / lanes);
                let cfg = LaunchConfig::per_row("softmax", blocks, GROUP_KERNEL_BLOCK, 0, &limits)?;
                (RowKernel::group(lanes), cfg)
            }
            OnePassPlan::PersistentWarp => {
                let kernel = RowKernel::PersistWarp8;
                let blocks = rows.div_ceil(WARP_KERNEL_ROWS as usize);
                let shared = PERSIST_WARP_SHARED_BYTES;
                (kernel, persistent(kernel, blocks, WARP_KERNEL_BLOCK, shared)?)
            }
            OnePassPlan::Block { vectors, threads } => {
                let cfg = LaunchConfig::per_row("softmax", rows, threads, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::block(vectors), cfg)
            }
            OnePassPlan::PersistentBlock { vectors, threads } => {
                let kernel = RowKernel::persist_block(vectors);
                let shared = persist_block_shared_bytes(vectors as u32, threads);
                (kernel, persistent(kernel, rows, threads, shared)?)
            }
            OnePassPlan::Stream => {
                let cfg = LaunchConfig::per_row("softmax", rows, STREAM_BLOCK, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::Stream, cfg)
            }
            OnePassPlan::Split { chunks, chunk_vecs } => {
                return self.softmax_split(x, y, rows, cols, t, (chunks, chunk_vecs));
            }
        };
        // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16 (checked by
        // the caller); the plan fits `cols` to the kernel and `cfg` is its documented shape.
        unsafe { raw::softmax::softmax_row_kernel(self, kernel, cfg, x, y, rows, cols, t) }
    }

    /// The split path: per-chunk statistics into a temporary buffer, then the writes.
    fn softmax_split(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        rows: usize,
        cols: usize,
        t: f32,
        (chunks, chunk_vecs): (usize, usize),
    ) -> Result<()> {
        let blocks = rows.checked_mul(chunks).ok_or_else(|| Error::TooLarge {
            op: "softmax",
            detail: format!("{rows} rows x {chunks} chunks overflow usize"),
        })?;
        let cfg = LaunchConfig::per_row(
            "softmax",
            blocks,
            STREAM_BLOCK,
            STATS_SHARED_BYTES,
            &self.limits(),
        )?;
        // Two floats, (m, s), per block.
        let mut partials = self.alloc(2 * blocks)?;
        // SAFETY: `x` holds rows*cols elements, `partials` 2*rows*chunks; `cfg` is rows*chunks
        // blocks of the kernels' shape and chunks*chunk_vecs covers cols/4 (the plan).
        unsafe {
            raw::softmax::softmax_split_stats(
                self,
                cfg,
                x,
                &mut partials,
                rows,
                cols,
                (chunks, chunk_vecs),
                t,
            )?;
            raw::softmax::softmax_split_write(self, cfg, x, &partials, y, rows, cols, (chunks, chunk_vecs), t)
        }
    }
}
