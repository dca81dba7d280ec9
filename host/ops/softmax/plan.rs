//! The plan of a softmax: which kernels run for a shape, chosen once per call from the
//! algorithm, the thresholds of [`OnePassConfig`] and the device's facts.

use kernels_gpu::softmax::{CLUSTER_MAX_BLOCKS, ROW_BLOCK_MAX, persist_block_shared_bytes};

/// What one softmax call runs: the whole choice, made once before anything is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SoftmaxPlan {
    /// The tutorial kernel: a block per row, three passes ([`SoftmaxAlgorithm::BlockReduce`],
    /// and the fallback where `x` and `y` do not agree modulo 16 bytes).
    BlockReduce,
    /// The kernels of [`SoftmaxAlgorithm::OnePass`] for this shape.
    OnePass(OnePassPlan),
}

impl SoftmaxPlan {
    /// The plan for a `rows x cols` softmax with `algorithm` (`config` picking the kernels of
    /// [`SoftmaxAlgorithm::OnePass`]) on a device whose facts `limits` gives (asked only for the
    /// one-pass kernels). `congruent`: `x` and `y` start at the same
    /// address modulo 16 bytes, which the 16-byte kernels need (they split each row of both at
    /// the same offsets); device allocations are 256-byte aligned, so only host buffers of the
    /// simulator fail it, and the tutorial kernel takes over.
    pub(crate) fn choose(
        algorithm: SoftmaxAlgorithm,
        config: &OnePassConfig,
        (rows, cols): (usize, usize),
        congruent: bool,
        limits: impl FnOnce() -> Limits,
    ) -> SoftmaxPlan {
        if algorithm == SoftmaxAlgorithm::BlockReduce || !congruent {
            return SoftmaxPlan::BlockReduce;
        }
        SoftmaxPlan::OnePass(config.plan_limited(rows, cols, &limits()))
    }
}

/// What the plan needs to know of the device.
pub(crate) struct Limits {
    /// Most threads `softmax_block_8` (or `softmax_persist_block_8` for persistent rows) runs
    /// per block (the driver's limit for its register count).
    pub(crate) block_8_max_threads: u32,
    /// Most shared memory a persistent block may use.
    pub(crate) shared_max: u32,
    /// Most threads the cluster kernel runs per block; 0 where the device has no clusters
    /// (before compute capability 9.0, where its PTX lacks the kernel).
    pub(crate) cluster_max_threads: u32,
    /// Streaming multiprocessors.
    pub(crate) multiprocessors: usize,
}

impl Limits {
    /// No limit but the kernels' own; clusters available; an H200's 132 multiprocessors.
    pub(crate) const KERNELS: Limits = Limits {
        block_8_max_threads: ROW_BLOCK_MAX,
        shared_max: u32::MAX,
        cluster_max_threads: ROW_BLOCK_MAX,
        multiprocessors: 132,
    };
}

/// Most 4-float vectors a lane of a warp-per-row kernel holds (`softmax_warp_8`).
const WARP_MAX_VECTORS: usize = 8;
/// Most vectors a thread of a block-per-row kernel holds (`softmax_block_8`).
const BLOCK_MAX_VECTORS: usize = 8;
/// Default [`OnePassConfig::block_4_max_threads`]: threads up to which a block-per-row row uses 4
/// vectors per thread; longer rows use 8. 64: every row a block takes (past the warps' 1024
/// columns) holds 8 vectors per thread, so blocks are half as large and twice as many are
/// resident per multiprocessor. Record: `bench/results/latest.jsonl` (`one-pass/block-8-from-4k`;
/// figures in `bench/targets.md`, "Plan rules and the records behind them").
pub const BLOCK_4_MAX_THREADS: usize = 64;

/// Default [`OnePassConfig::persistent_min_cols`]: none. Since the register-held kernels skip
/// `exponent`'s per-entry tests on ordinary rows, the block per row without staging
/// (`softmax_block_8`) is ahead of the persistent kernel that stages the next row in shared
/// memory. Record: `bench/results/ac69d2b.jsonl`. The persistent kernels stay selectable.
pub const PERSISTENT_MIN_COLS: usize = usize::MAX;

/// Default [`OnePassConfig::grid_row_max_rows`]: a few rows too long for a cluster run on
/// `softmax_grid_row`, each over the whole grid.
pub const GRID_ROW_MAX_ROWS: usize = 8;

/// Default [`OnePassConfig::cluster_min_cols`]: rows past the default `block_max_cols`.
pub const CLUSTER_MIN_COLS: usize = 32769;

/// The thresholds [`SoftmaxAlgorithm::OnePass`] picks its kernels by. `Default` is what
/// [`crate::Gpu::softmax`] uses; tests lower them to reach every path on small shapes.
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
    /// The split path's second launch reads `x` and writes `y` with the evict-first hint
    /// (`softmax_split_write_streaming`) instead of plain accesses (`softmax_split_write`).
    pub split_streaming: bool,
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
    /// Rows of at least this many columns (and more than `warp_max_cols`) that a thread-block
    /// cluster holds run on the cluster kernels (`softmax_cluster_{4,8}`, sm_90): the row held
    /// in the registers of `C` blocks, read once. `usize::MAX`: never. Where the device has no
    /// clusters (before sm_90) the block, stream and split kernels take such rows.
    pub cluster_min_cols: usize,
    /// Rows a block holds with 4 vectors per thread of at most this many threads take
    /// `softmax_block_4` (or its persistent twin); longer ones 8 vectors per thread. Fewer
    /// threads here move rows to 8-vector blocks of half the threads: the same bytes in flight
    /// per block, and more blocks (rows) per multiprocessor where registers allow.
    pub block_4_max_threads: usize,
    /// Most blocks in a cluster (2 to 16; past 8 is a non-portable size). Fewer than 2: no
    /// clusters.
    pub cluster_max_blocks: usize,
    /// Fewest blocks in a cluster (more than `cluster_max_blocks` counts as that; the default 2
    /// is the kernels' least): more blocks per row spread a row over more multiprocessors and make each block
    /// smaller (fewer threads of the same vectors), so that more rows share a multiprocessor.
    pub cluster_min_blocks: usize,
    /// Vectors per thread of the cluster kernels: 8 (`softmax_cluster_8`, the fewest blocks)
    /// or 4 (`softmax_cluster_4`, twice the blocks, each of fewer registers).
    pub cluster_vectors: usize,
    /// Rows too long for the block and cluster kernels, when there are at most this many, run
    /// on `softmax_grid_row`: one cooperative launch, each row split over the whole grid (a
    /// block per multiprocessor) and kept on chip where it fits, instead of the split path's
    /// two launches. 0: never. Default [`GRID_ROW_MAX_ROWS`].
    pub grid_row_max_rows: usize,
    /// Rows the block kernels take (`softmax_block_{4,8}`) run on their twins whose loads of
    /// the row carry `evict_last` (L1 and L2, `softmax_block_{4,8}_el`), as torch.compile's
    /// generated kernels load a row. Default true.
    pub block_evict_last: bool,
}

impl Default for OnePassConfig {
    fn default() -> Self {
        OnePassConfig {
            // Rows of 513 to 1024 columns take a block of 4 vectors per thread (64 threads at
            // 1024) rather than a warp of 8 vectors per lane (bench `--plans`, `one-pass`
            // against `one-pass/warp-to-1k`: `WARP_ROWS_5558695`).
            warp_max_cols: 512,
            block_max_cols: 32768,
            // Two blocks per multiprocessor of an H200 (132 SMs) and more: enough rows to fill
            // the GPU with one block each.
            split_max_rows: 256,
            // 64 KiB per block, 8 vectors per thread of 512: a 2^24 row is 1024 blocks, and each
            // block of step 2 reads 8 KiB of partial statistics.
            split_chunk: 16384,
            // Plain accesses until a run shows the hint pays (bench `one-pass/split-streaming`).
            split_streaming: false,
            // Groups of 16 lanes, two rows per warp, for rows a warp would hold with one vector
            // per lane (bench `one-pass/group-*` and `classic`, `--plans`: `WARP_ROWS_5558695`).
            group_lanes: 16,
            // Staging the next row in shared memory does not pay (see `PERSISTENT_MIN_COLS`).
            persistent_min_cols: PERSISTENT_MIN_COLS,
            // Every row past the block kernels that a cluster holds: one read of the row
            // instead of the stream and split kernels' two. Whether clusters also beat the
            // block kernels below is a bench question (`--plans`).
            cluster_min_cols: CLUSTER_MIN_COLS,
            block_4_max_threads: BLOCK_4_MAX_THREADS,
            // The portable limit.
            cluster_max_blocks: 8,
            // At least 8 blocks per row, of fewer threads, rather than the fewest that hold it
            // (`one-pass` against `one-pass/cluster-2x`: level, ONE_PASS_RULES' records).
            cluster_min_blocks: CLUSTER_MIN_BLOCKS,
            cluster_vectors: 8,
            // Up to 8 rows too long for a cluster: one cooperative launch per call instead of
            // the split path's two launches (ONE_PASS_RULES' records).
            grid_row_max_rows: GRID_ROW_MAX_ROWS,
            // torch.compile's loads of a row (record: `bench/experiments/evict-last/evict-last-ab-plans.jsonl`,
            // `one-pass` against `one-pass/plain-loads`).
            block_evict_last: true,
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
    /// `softmax_block_{vectors}_el`: as [`OnePassPlan::Block`], the row's loads carrying
    /// `evict_last` ([`OnePassConfig::block_evict_last`]).
    BlockEvictLast {
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
    /// `softmax_cluster_{vectors}`: a cluster of `blocks` blocks of `threads` per row,
    /// `vectors` per thread.
    Cluster {
        /// 4 or 8.
        vectors: usize,
        /// Blocks per cluster, 2 to 16.
        blocks: u32,
        /// A multiple of 32, at most 1024.
        threads: u32,
    },
    /// `softmax_stream`: a block per row, the row read twice.
    Stream,
    /// `softmax_grid_row`: a cooperative launch, each row split over the whole grid; the grid,
    /// block and shared memory are sized at launch from the device
    /// ([`OnePassConfig::grid_row_max_rows`]).
    GridRow,
    /// `softmax_split_stats` then `softmax_split_write` (or `softmax_split_write_streaming`):
    /// `chunks` blocks per row of `chunk_vecs` vectors each.
    Split {
        /// Blocks per row.
        chunks: usize,
        /// Vectors of 4 floats per block.
        chunk_vecs: usize,
        /// The second launch with evict-first loads and stores
        /// ([`OnePassConfig::split_streaming`]).
        streaming: bool,
    },
}

impl OnePassConfig {
    /// The kernels for a `rows x cols` softmax, on a device with thread-block clusters and 132
    /// multiprocessors (an H200; what the simulator runs too).
    pub fn plan(&self, rows: usize, cols: usize) -> OnePassPlan {
        self.plan_limited(rows, cols, &Limits::KERNELS)
    }

    /// [`OnePassConfig::plan`] on a device with `limits`: the first of [`ONE_PASS_RULES`] that
    /// applies to the shape wins (each threshold a field of `self`; the boundaries are pinned by
    /// `tests/kernels/softmax/plans.rs` and `cluster.rs`, the choices by this file's tests).
    pub(crate) fn plan_limited(&self, rows: usize, cols: usize, limits: &Limits) -> OnePassPlan {
        ONE_PASS_RULES
            .iter()
            .find_map(|r| self.apply(r.rule, rows, cols, limits))
            .unwrap_or_else(|| self.split(cols))
    }

    /// The plan of `rule` for a `rows x cols` softmax on a device with `limits`, if it applies.
    fn apply(&self, rule: OnePassRule, rows: usize, cols: usize, limits: &Limits) -> Option<OnePassPlan> {
        // Aligned vectors of the row with the most: a row whose start is not 16-byte aligned
        // has one fewer, plus up to 3 head and 3 tail scalars that threads 0..7 take.
        let vecs = cols / 4;
        match rule {
            OnePassRule::Warp => {
                if cols > self.warp_max_cols {
                    return None;
                }
                warp_vectors(vecs).map(|vectors| match vectors {
                    1 if matches!(self.group_lanes, 8 | 16) => OnePassPlan::Group {
                        lanes: self.group_lanes,
                    },
                    WARP_MAX_VECTORS if cols >= self.persistent_min_cols => OnePassPlan::PersistentWarp,
                    _ => OnePassPlan::Warp { vectors },
                })
            }
            OnePassRule::Cluster => {
                if limits.cluster_max_threads >= 32 && cols >= self.cluster_min_cols {
                    self.cluster_plan(rows, vecs, limits)
                } else {
                    None
                }
            }
            OnePassRule::Block => {
                if cols > self.block_max_cols {
                    return None;
                }
                let threads_for = |vectors: usize| vecs.div_ceil(vectors).next_multiple_of(32).max(32);
                let block = |vectors: usize, threads: usize| {
                    let threads = threads as u32;
                    let staged = persist_block_shared_bytes(vectors as u32, threads) <= limits.shared_max;
                    if cols >= self.persistent_min_cols && staged {
                        OnePassPlan::PersistentBlock { vectors, threads }
                    } else if self.block_evict_last {
                        OnePassPlan::BlockEvictLast { vectors, threads }
                    } else {
                        OnePassPlan::Block { vectors, threads }
                    }
                };
                if threads_for(4) <= self.block_4_max_threads.min(ROW_BLOCK_MAX as usize) {
                    return Some(block(4, threads_for(4)));
                }
                let threads = threads_for(BLOCK_MAX_VECTORS);
                let most = limits.block_8_max_threads.min(ROW_BLOCK_MAX) as usize;
                (threads <= most).then(|| block(BLOCK_MAX_VECTORS, threads))
            }
            OnePassRule::GridRow => (rows <= self.grid_row_max_rows).then_some(OnePassPlan::GridRow),
            OnePassRule::Stream => (rows >= self.split_max_rows).then_some(OnePassPlan::Stream),
            OnePassRule::Split => Some(self.split(cols)),
        }
    }

    /// The row split over blocks of `split_chunk` columns (the last rule, which always applies).
    fn split(&self, cols: usize) -> OnePassPlan {
        let chunk_vecs = (self.split_chunk / 4).max(1);
        OnePassPlan::Split {
            chunks: (cols / 4).div_ceil(chunk_vecs).max(1),
            chunk_vecs,
            streaming: self.split_streaming,
        }
    }
}

/// One step of the one-pass plan: a condition on the shape, the config's thresholds and the
/// device, and the kernels that then run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnePassRule {
    /// Up to `warp_max_cols` columns and 8 vectors per lane: lane groups (`group_lanes`) for
    /// rows of one vector per lane, the persistent warp from `persistent_min_cols` at 8
    /// vectors, a warp per row otherwise.
    Warp,
    /// From `cluster_min_cols`, where the device has clusters: a cluster that holds the row.
    Cluster,
    /// Up to `block_max_cols`: a block per row, 4 vectors per thread up to
    /// `block_4_max_threads` threads, else 8 (within the kernel's block limit), persistent from
    /// `persistent_min_cols` where the staged row fits, `evict_last` loads if `block_evict_last`.
    Block,
    /// At most `grid_row_max_rows` rows: the cooperative grid-row kernel.
    GridRow,
    /// At least `split_max_rows` rows: the two-read stream kernel.
    Stream,
    /// The row split over blocks of `split_chunk` columns.
    Split,
}

/// One rule of the one-pass plan with the committed record behind its default thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnePassRuleSource {
    /// The rule.
    pub rule: OnePassRule,
    /// The [`OnePassConfig`] fields it reads.
    pub thresholds: &'static [&'static str],
    /// The committed records (under `bench/`) its defaults were measured in; none where they
    /// came from runs that were not committed (`bench/targets.md`, "Plan rules and the records
    /// behind them", names them as the next to re-measure).
    pub records: &'static [&'static str],
}

/// The one-pass plan as data: its rules in order, the first that applies to a shape winning
/// ([`OnePassConfig::plan`]).
pub const ONE_PASS_RULES: [OnePassRuleSource; 6] = [
    OnePassRuleSource {
        rule: OnePassRule::Warp,
        thresholds: &["warp_max_cols", "group_lanes", "persistent_min_cols"],
        records: &[PERSISTENT_RECORD, WARP_ROWS_5558695],
    },
    OnePassRuleSource {
        rule: OnePassRule::Cluster,
        thresholds: &[
            "cluster_min_cols",
            "cluster_max_blocks",
            "cluster_min_blocks",
            "cluster_vectors",
        ],
        records: &[LONG_ROWS_F88A9C0, LONG_ROWS_68D5081],
    },
    OnePassRuleSource {
        rule: OnePassRule::Block,
        thresholds: &[
            "block_max_cols",
            "block_4_max_threads",
            "persistent_min_cols",
            "block_evict_last",
        ],
        records: &[BLOCK_8_RECORD, PERSISTENT_RECORD, EVICT_LAST_RECORD],
    },
    OnePassRuleSource {
        rule: OnePassRule::GridRow,
        thresholds: &["grid_row_max_rows"],
        records: &[LONG_ROWS_68D5081],
    },
    OnePassRuleSource {
        rule: OnePassRule::Stream,
        thresholds: &["split_max_rows"],
        records: &[STREAM_ROWS_C433C04],
    },
    OnePassRuleSource {
        rule: OnePassRule::Split,
        thresholds: &["split_chunk", "split_streaming"],
        records: &[LONG_ROWS_68D5081],
    },
];

/// The `--plans` run of the long rows at 8192 x 32768 and 8192 x 65536 (clusters against the
/// block per row and the stream kernel).
const LONG_ROWS_F88A9C0: &str = "bench/experiments/plans/f88a9c0-softmax-plans.jsonl";
/// The `--plans` run at 1024 x 131072 (cluster shapes) and 1 x 2^24 (grid-row against the split
/// path and its chunks).
const LONG_ROWS_68D5081: &str = "bench/experiments/plans/68d5081-softmax-plans.jsonl";

/// The `--plans` run at 8192 x 128 (lane groups of 16 and 8 against a warp per row) and 8192 x
/// 1024 (a block per row against the warp of 8 vectors per lane).
const WARP_ROWS_5558695: &str = "bench/experiments/plans/5558695-softmax-plans.jsonl";

/// The `--plans` run at 128 x 524288 and 512 x 524288 (rows too long for a cluster: the stream
/// kernel against the split path on each side of `split_max_rows`).
const STREAM_ROWS_C433C04: &str = "bench/experiments/plans/c433c04-softmax-plans.jsonl";

/// The run whose `one-pass/block-8-from-4k` rows set [`BLOCK_4_MAX_THREADS`].
const BLOCK_8_RECORD: &str = "bench/results/latest.jsonl";
/// The run in which the block per row without staging beat the persistent kernel
/// ([`PERSISTENT_MIN_COLS`]).
const PERSISTENT_RECORD: &str = "bench/results/ac69d2b.jsonl";
/// The A/B run of `one-pass` against `one-pass/plain-loads` (`block_evict_last`).
const EVICT_LAST_RECORD: &str = "bench/experiments/evict-last/evict-last-ab-plans.jsonl";

impl OnePassConfig {
    /// The cluster kernel for rows of `vecs` vectors (plus head and tail), if a cluster of at
    /// most `cluster_max_blocks` blocks of the kernel's most threads holds one.
    ///
    /// The fewest blocks (at least `cluster_min_blocks`) that hold the row, each of the fewest
    /// threads (a multiple of 32) that then suffice; with few rows (fewer clusters than twice the multiprocessors), the cluster
    /// doubles while its blocks keep at least [`CLUSTER_MIN_THREADS`], so that more
    /// multiprocessors load the row.
    fn cluster_plan(&self, rows: usize, vecs: usize, limits: &Limits) -> Option<OnePassPlan> {
        let most = self.cluster_max_blocks.min(CLUSTER_MAX_BLOCKS as usize);
        let vectors = if self.cluster_vectors <= 4 {
            4
        } else {
            BLOCK_MAX_VECTORS
        };
        if most < 2 {
            return None;
        }
        let block_max = limits.cluster_max_threads.min(ROW_BLOCK_MAX) as usize / 32 * 32;
        let per_block = vectors * block_max;
        let mut blocks = vecs
            .div_ceil(per_block)
            .max(self.cluster_min_blocks.min(most))
            .max(2);
        if blocks > most {
            return None;
        }
        let threads_for = |blocks: usize| vecs.div_ceil(vectors * blocks).next_multiple_of(32).max(32);
        while 2 * blocks <= most
            && rows.saturating_mul(blocks) < 2 * limits.multiprocessors
            && threads_for(2 * blocks) >= CLUSTER_MIN_THREADS
        {
            blocks *= 2;
        }
        Some(OnePassPlan::Cluster {
            vectors,
            blocks: blocks as u32,
            threads: threads_for(blocks) as u32,
        })
    }
}

/// Fewest blocks per cluster of the default plan (see [`OnePassConfig::cluster_min_blocks`]).
pub const CLUSTER_MIN_BLOCKS: usize = 8;

/// Fewest threads per block the cluster plan splits a row down to when there are few rows.
const CLUSTER_MIN_THREADS: usize = 256;

/// The fewest vectors per lane (1, 2, 4, 8) that hold `vecs` vectors in a warp.
fn warp_vectors(vecs: usize) -> Option<usize> {
    [1, 2, 4, WARP_MAX_VECTORS]
        .into_iter()
        .find(|&v| vecs <= v * gpukern_device::warp::SIZE as usize)
}

/// Which softmax to run. Both follow the same rules at the edges (see [`Gpu::softmax`](crate::Gpu::softmax)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SoftmaxAlgorithm {
    /// One block of 256 threads per row, three passes over the row (max, sum, write), tree
    /// reductions in shared memory: the tutorial kernel `softmax_block_reduce`. 16 bytes per element.
    BlockReduce,
    /// One read and one write of each element where the row fits on chip (up to 32768 columns
    /// in one block; on sm_90 up to 262144 in a thread-block cluster of 8): online (max, sum)
    /// statistics merged with warp shuffles, 16-byte accesses, lane groups or a warp per row up
    /// to 512 columns, a block per row above, a cluster of blocks past 32768 columns on sm_90
    /// (the blocks' statistics merged through distributed shared memory). Longer rows, and rows
    /// past 32768 columns before sm_90, are read twice (12 bytes per element): by a block per
    /// row when there are many, over one cooperative grid when there are at most 8 (what fits
    /// on chip read once), else split over several blocks. The default; the plan for a shape is
    /// [`OnePassConfig::plan`].
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The plans chosen, pinned: an FNV-1a digest of the default config's and a lowered
    /// config's plan for rows of 1 to 300000 columns (every column to 40000, then every 97th),
    /// 1 to 300 rows and 8192, on three sets of device limits (an H200's, a device without
    /// clusters, a tight register and shared-memory budget). The digest was taken with the plan
    /// written as code, before its rules became [`ONE_PASS_RULES`] (checked then shape by shape
    /// against the old function, a throwaway copy).
    #[test]
    fn the_plans_stay_as_pinned() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let lowered = OnePassConfig {
            warp_max_cols: 128,
            block_max_cols: 4096,
            split_max_rows: 4,
            split_chunk: 1024,
            split_streaming: true,
            group_lanes: 8,
            persistent_min_cols: 64,
            cluster_min_cols: 2048,
            block_4_max_threads: 256,
            cluster_max_blocks: 4,
            cluster_min_blocks: 2,
            cluster_vectors: 4,
            grid_row_max_rows: 2,
            block_evict_last: false,
        };
        let limits = [
            Limits::KERNELS,
            Limits {
                cluster_max_threads: 0,
                ..Limits::KERNELS
            },
            Limits {
                block_8_max_threads: 512,
                shared_max: 48 * 1024,
                cluster_max_threads: 640,
                multiprocessors: 16,
            },
        ];
        let cols = (1..=40000).chain((40001..=300000).step_by(97));
        for cols in cols {
            for rows in [1, 2, 3, 8, 9, 100, 255, 256, 300, 8192] {
                for (l, limits) in limits.iter().enumerate() {
                    for (c, config) in [OnePassConfig::default(), lowered].iter().enumerate() {
                        let plan = config.plan_limited(rows, cols, limits);
                        for b in format!("{cols} {rows} {l} {c}: {plan:?}\n").bytes() {
                            hash ^= b as u64;
                            hash = hash.wrapping_mul(0x0100_0000_01b3);
                        }
                    }
                }
            }
        }
        assert_eq!(
            format!("{hash:016x}"),
            "8c719c263130676a",
            "a softmax plan changed"
        );
    }

    /// Every record a rule cites is a committed file; the last rule always applies.
    #[test]
    fn the_rules_cite_committed_records_and_end_with_the_split() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for source in ONE_PASS_RULES {
            for record in source.records {
                assert!(root.join(record).is_file(), "{:?} cites {record}", source.rule);
            }
        }
        assert_eq!(ONE_PASS_RULES.last().map(|r| r.rule), Some(OnePassRule::Split));
        let c = OnePassConfig::default();
        assert!(c.apply(OnePassRule::Split, 1, 1, &Limits::KERNELS).is_some());
    }
}
