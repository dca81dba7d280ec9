//! The plan of a norm: which kernel and block size a row length gets, chosen once per call.

use kernels_gpu::norm::{NormElem, RING_MAX_COLS, ROW_BLOCK_MAX, TWO_PASS_VECTORS, ring_vectors};

/// Elements per thread of a block-per-row in-register kernel (`*_rows16_*`, `*_rows_*`,
/// `*_rows64_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowsWidth {
    /// 16 elements per thread (4 f32 vectors, 2 bf16).
    W16,
    /// 32 elements per thread (8 f32 vectors, 4 bf16): the default kernel.
    W32,
    /// 64 elements per thread (16 f32 vectors, 8 bf16).
    W64,
}

impl RowsWidth {
    /// Elements a thread holds.
    pub fn elements(self) -> usize {
        match self {
            RowsWidth::W16 => 16,
            RowsWidth::W32 => 32,
            RowsWidth::W64 => 64,
        }
    }
}

/// What one norm call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormPlan {
    /// The tutorial kernel, a block of 256 threads per row.
    BlockReduce,
    /// An in-register kernel of `width` elements per thread, a block of `threads` per row.
    Rows {
        /// A multiple of 32, at most 1024.
        threads: u32,
        /// Elements per thread the kernel holds.
        width: RowsWidth,
        /// Whether the loads of `x` and the stores of `y` carry the streaming cache hint (the
        /// `*_cs_*` kernels; 16 and 32 elements per thread only).
        stream: bool,
    },
    /// The warp-per-row kernel (32 elements per lane), [`kernels_gpu::norm::WARP_BLOCK`]
    /// threads per block; `keep`: the persistent grid whose warps keep the weight in registers.
    Warp {
        /// Whether the grid is persistent and the weight kept in registers.
        keep: bool,
    },
    /// The warp-per-row kernel (`keep: false`) in blocks of one warp, one row per block.
    WarpSolo,
    /// The pipelined warp-per-row kernel (`*_norm_warp_pipe_*`: each warp loads its next row
    /// before reducing the current one), [`kernels_gpu::norm::WARP_BLOCK`] threads per block on
    /// a persistent grid.
    WarpPipe,
    /// The L2 re-read kernel (`*_norm_two_pass_*`), a block of `threads` per row.
    TwoPass {
        /// A multiple of 32, at most 1024.
        threads: u32,
    },
    /// A looped L2 re-read kernel (`*_norm_loop*_*`, torch.compile's formulation), a block of
    /// `threads` per row.
    Loop {
        /// A multiple of 32, at most 1024.
        threads: u32,
        /// Which of the looped kernels.
        kind: LoopKind,
    },
    /// The in-register kernel of 16 elements per thread with `evict_last` loads
    /// (`*_rows16_el_*`), a block of `threads` per row.
    RowsEvictLast {
        /// A multiple of 32, at most 1024.
        threads: u32,
    },
    /// The bulk-copy ring kernel (`*_norm_ring_*`) on a persistent grid, blocks of `threads`.
    Ring {
        /// A multiple of 32, at most 1024: the row's vectors at `ring_vectors` each.
        threads: u32,
    },
}

/// The looped kernels: vectors per thread per step and whether the loads carry eviction hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopKind {
    /// One vector per thread per step, `evict_last` on the re-read row's first loads and
    /// `evict_first` on its last (`*_norm_loop_*`).
    Hinted,
    /// Two vectors per thread per step, hints as [`LoopKind::Hinted`] (`*_norm_loop2_*`).
    Hinted2,
    /// One vector per thread per step, plain loads (`*_norm_loop_plain_*`).
    Plain,
}

impl LoopKind {
    /// Vectors a thread loads per step.
    pub fn vectors(self) -> usize {
        match self {
            LoopKind::Hinted | LoopKind::Plain => 1,
            LoopKind::Hinted2 => 2,
        }
    }
}

/// The looped plan of `algorithm` (`None` for the others): its block size, but no more threads
/// than the row's `vecs` vectors fill at the kind's vectors per step (whole warps, at least one).
fn loop_plan(algorithm: NormAlgorithm, vecs: usize) -> Option<NormPlan> {
    let (threads, kind) = match algorithm {
        NormAlgorithm::Loop256 => (256, LoopKind::Hinted),
        NormAlgorithm::Loop512 => (512, LoopKind::Hinted),
        NormAlgorithm::Loop1024 => (1024, LoopKind::Hinted),
        NormAlgorithm::Loop2x256 => (256, LoopKind::Hinted2),
        NormAlgorithm::Loop2x512 => (512, LoopKind::Hinted2),
        NormAlgorithm::LoopPlain512 => (512, LoopKind::Plain),
        _ => return None,
    };
    Some(NormPlan::Loop {
        threads: warps_for(vecs, kind.vectors()).min(threads) as u32,
        kind,
    })
}

/// Threads, in whole warps and at least one, that hold a row's `vecs` vectors at `per_thread`
/// each.
fn warps_for(vecs: usize, per_thread: usize) -> usize {
    vecs.div_ceil(per_thread).next_multiple_of(32).max(32)
}

/// Vectors per thread the default plan aims for, as a fraction of what a thread can hold: half (16
/// floats, 64 bytes of f32 in flight per thread). Fewer threads per row with more vectors each
/// would leave short rows with blocks of one warp; more threads with fewer vectors, less in
/// flight per thread. Past what half fills (1024 threads), a thread takes up to all of them.
const TARGET_FRACTION: usize = 2;

/// Elements a lane of the warp-per-row kernels holds.
const WARP_ELEMENTS: usize = 32;

impl NormPlan {
    /// The plan for rows of `cols >= 1` elements of `T` with `algorithm`; `aligned`: every
    /// buffer starts on a 16-byte boundary (device allocations are 256-byte aligned; host
    /// buffers of the simulator may not be); `layer`: LayerNorm (RMSNorm otherwise; the default
    /// differs by norm and element type, [`DEFAULT_RULES`]); `max_threads`: the driver's block
    /// limit for the in-register kernel of each width.
    ///
    /// An algorithm whose own kernel does not take the row ([`NormAlgorithm::fits`]) runs the
    /// default's plan ([`NormAlgorithm::InRegisters`]): the first of [`DEFAULT_RULES`] that
    /// applies to the row and whose algorithm's kernel takes it, else the 32-element kernel at
    /// half its capacity per thread (all of it past 1024 threads), else the tutorial kernel.
    pub fn choose<T: NormElem>(
        algorithm: NormAlgorithm,
        cols: usize,
        aligned: bool,
        layer: bool,
        max_threads: impl Fn(RowsWidth) -> u32,
    ) -> NormPlan {
        if algorithm == NormAlgorithm::BlockReduce || !aligned || cols % T::LANES != 0 {
            return NormPlan::BlockReduce;
        }
        let row = Row {
            cols,
            vecs: cols / T::LANES,
            lanes: T::LANES,
            max_threads: &max_threads,
        };
        if let Some(plan) = row.own::<T>(algorithm) {
            return plan;
        }
        let f32 = core::mem::size_of::<T>() == 4;
        if let Some(plan) = DEFAULT_RULES
            .iter()
            .filter(|rule| rule.applies(layer, f32, cols))
            .find_map(|rule| row.own::<T>(rule.run))
        {
            return plan;
        }
        // Else the 32-element kernel at half its capacity per thread, all of it past 1024
        // threads.
        let limit = max_threads(RowsWidth::W32).min(ROW_BLOCK_MAX) as usize;
        let target = (T::VECTORS / TARGET_FRACTION).max(1);
        for per_thread in [target, T::VECTORS] {
            let threads = warps_for(row.vecs, per_thread);
            if threads <= limit {
                return NormPlan::Rows {
                    threads: threads as u32,
                    width: RowsWidth::W32,
                    stream: false,
                };
            }
        }
        NormPlan::BlockReduce
    }
}

/// An aligned row of a multiple of the vector width, and the block limits of the in-register
/// kernels: what an algorithm's own plan is computed from.
struct Row<'a, F: Fn(RowsWidth) -> u32> {
    /// Elements of the row.
    cols: usize,
    /// 16-byte vectors of the row.
    vecs: usize,
    /// Elements per vector.
    lanes: usize,
    /// The driver's block limit of the in-register kernel of each width.
    max_threads: &'a F,
}

impl<F: Fn(RowsWidth) -> u32> Row<'_, F> {
    /// Threads of the in-register kernel of `width` for this row, if within its block limit.
    fn threads_for(&self, width: RowsWidth) -> Option<u32> {
        let per_thread = (width.elements() / self.lanes).max(1);
        let threads = warps_for(self.vecs, per_thread);
        let limit = (self.max_threads)(width).min(ROW_BLOCK_MAX) as usize;
        (threads <= limit).then_some(threads as u32)
    }

    /// The in-register plan of `width` (streaming or not), if the row fits it.
    fn fixed(&self, width: RowsWidth, stream: bool) -> Option<NormPlan> {
        self.threads_for(width).map(|threads| NormPlan::Rows {
            threads,
            width,
            stream,
        })
    }

    /// The plan of `algorithm`'s own kernel, if it takes the row (`None` for the default and
    /// the tutorial, which are not one kernel).
    fn own<T: NormElem>(&self, algorithm: NormAlgorithm) -> Option<NormPlan> {
        let (cols, vecs) = (self.cols, self.vecs);
        match algorithm {
            NormAlgorithm::BlockReduce | NormAlgorithm::InRegisters => None,
            NormAlgorithm::Rows16 => self.fixed(RowsWidth::W16, false),
            NormAlgorithm::Rows32 => self.fixed(RowsWidth::W32, false),
            NormAlgorithm::Rows64 => self.fixed(RowsWidth::W64, false),
            NormAlgorithm::Rows16Stream => self.fixed(RowsWidth::W16, true),
            NormAlgorithm::Rows32Stream => self.fixed(RowsWidth::W32, true),
            NormAlgorithm::WarpPipe => (cols <= WARP_ELEMENTS * 32).then_some(NormPlan::WarpPipe),
            NormAlgorithm::WarpSolo => (cols <= WARP_ELEMENTS * 32).then_some(NormPlan::WarpSolo),
            NormAlgorithm::TwoPass => {
                // Any row length (the block steps over the row): TWO_PASS_VECTORS per thread
                // where that is at most 1024 threads, more past it.
                Some(NormPlan::TwoPass {
                    threads: warps_for(vecs, TWO_PASS_VECTORS).min(ROW_BLOCK_MAX as usize) as u32,
                })
            }
            NormAlgorithm::Warp | NormAlgorithm::WarpKeep => {
                (cols <= WARP_ELEMENTS * 32).then_some(NormPlan::Warp {
                    keep: algorithm == NormAlgorithm::WarpKeep,
                })
            }
            NormAlgorithm::Loop256
            | NormAlgorithm::Loop512
            | NormAlgorithm::Loop1024
            | NormAlgorithm::Loop2x256
            | NormAlgorithm::Loop2x512
            | NormAlgorithm::LoopPlain512 => loop_plan(algorithm, vecs),
            NormAlgorithm::Rows16EvictLast => self
                .threads_for(RowsWidth::W16)
                .map(|threads| NormPlan::RowsEvictLast { threads }),
            NormAlgorithm::Ring => (cols <= RING_MAX_COLS).then(|| NormPlan::Ring {
                threads: warps_for(vecs, ring_vectors(T::LANES)) as u32,
            }),
        }
    }
}

/// Which norm a rule of the default plan applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NormKind {
    /// RMSNorm only.
    Rms,
    /// LayerNorm only.
    Layer,
    /// Both.
    Any,
}

/// Which element type a rule of the default plan applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementKind {
    /// f32 only.
    F32,
    /// bf16 only.
    Bf16,
    /// Both.
    Any,
}

/// One rule of the default norm plan: for rows of `cols` columns (inclusive) of one element type
/// and norm, `run`'s own kernel, where it takes the row; `record` names the committed bench
/// record that justified it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultRule {
    /// The norm the rule applies to.
    pub norm: NormKind,
    /// The element type the rule applies to.
    pub element: ElementKind,
    /// The row lengths the rule applies to, inclusive.
    pub cols: (usize, usize),
    /// The algorithm whose own plan runs.
    pub run: NormAlgorithm,
    /// The committed record (under `bench/`) the rule was measured in.
    pub record: &'static str,
}

impl DefaultRule {
    /// Whether the rule applies to LayerNorm (`layer`) or RMSNorm rows of `cols` columns of f32
    /// (`f32`) or bf16.
    pub fn applies(&self, layer: bool, f32: bool, cols: usize) -> bool {
        let norm = match self.norm {
            NormKind::Rms => !layer,
            NormKind::Layer => layer,
            NormKind::Any => true,
        };
        let element = match self.element {
            ElementKind::F32 => f32,
            ElementKind::Bf16 => !f32,
            ElementKind::Any => true,
        };
        norm && element && (self.cols.0..=self.cols.1).contains(&cols)
    }
}

/// One [`DefaultRule`].
const fn rule(
    norm: NormKind,
    element: ElementKind,
    cols: (usize, usize),
    run: NormAlgorithm,
    record: &'static str,
) -> DefaultRule {
    DefaultRule {
        norm,
        element,
        cols,
        run,
        record,
    }
}

/// The A/B run of `warp-1` with torch.compile beside it (bf16 rows of 1024).
const WARP_PACKED_AB: &str = "bench/experiments/norm-warp/warp-packed-ab-new.jsonl";
/// The H200 run of every candidate with torch.compile in the same call.
const EVICT_LAST_AB: &str = "bench/experiments/evict-last/evict-last-ab-plans.jsonl";
/// The H200 run of every candidate at 8192 x {1024, 4096, 16384}.
const PLANS_5E7F33D: &str = "bench/experiments/plans/5e7f33d-plans.jsonl";

/// The default plan ([`NormAlgorithm::InRegisters`]) as data: the first rule that applies to a
/// row and whose algorithm's own kernel takes it wins (what each measured is in
/// `bench/targets.md`, "Norm plan rules"). The ranges were the tables `DEFAULT_WARP_SOLO_COLS`,
/// `DEFAULT_EVICT_LAST_COLS`, `DEFAULT_LOOP_COLS` and `DEFAULT_W16_MAX_COLS*` before, their
/// precedence in comments.
pub const DEFAULT_RULES: [DefaultRule; 12] = {
    use ElementKind::{Bf16, F32};
    use NormAlgorithm as A;
    use NormKind::{Layer, Rms};
    [
        // bf16 rows of 1024: the warp kernel in blocks of one warp holds the row as its loaded
        // words (fewer registers).
        rule(NormKind::Any, Bf16, (1024, 1024), A::WarpSolo, WARP_PACKED_AB),
        // torch.compile's evict_last loads, 16 elements per thread.
        rule(Rms, F32, (4096, 16384), A::Rows16EvictLast, EVICT_LAST_AB),
        rule(Layer, F32, (4096, 4096), A::Rows16EvictLast, EVICT_LAST_AB),
        // The looped L2 re-read kernel, two vectors per step, 512 threads.
        rule(Rms, ElementKind::Any, (1024, 4096), A::Loop2x512, PLANS_5E7F33D),
        rule(Layer, F32, (1024, 1024), A::Loop2x512, PLANS_5E7F33D),
        // f32 LayerNorm of a lane's 32 elements more than half used: the persistent warp per
        // row that keeps the weight and bias in registers.
        rule(
            Layer,
            F32,
            (WARP_ELEMENTS * 16 + 1, WARP_ELEMENTS * 32),
            A::WarpKeep,
            PLANS_5E7F33D,
        ),
        // 16 elements per thread, then 32.
        rule(NormKind::Any, F32, (1, 16384), A::Rows16, PLANS_5E7F33D),
        rule(Rms, Bf16, (1, 8192), A::Rows16, PLANS_5E7F33D),
        rule(Layer, Bf16, (1, 4088), A::Rows16, EVICT_LAST_AB),
        rule(NormKind::Any, F32, (16385, usize::MAX), A::Rows32, PLANS_5E7F33D),
        rule(Rms, Bf16, (8193, usize::MAX), A::Rows32, PLANS_5E7F33D),
        rule(Layer, Bf16, (4089, usize::MAX), A::Rows32, EVICT_LAST_AB),
    ]
};

/// Which norm kernels to run. Both follow the same rules (see [`Gpu::layer_norm`](crate::Gpu::layer_norm)).
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
    pub fn fits<T: NormElem>(self, cols: usize) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// The default plan for `cols` columns of `T`, every width allowed 1024 threads.
    fn default_plan<T: NormElem>(cols: usize, layer: bool) -> NormPlan {
        NormPlan::choose::<T>(NormAlgorithm::InRegisters, cols, true, layer, |_| 1024)
    }

    fn width(plan: NormPlan) -> Option<RowsWidth> {
        match plan {
            NormPlan::Rows { width, .. } => Some(width),
            _ => None,
        }
    }

    #[test]
    fn f32_layer_norm_of_rows_of_513_to_1020_takes_the_warp_kernel_that_keeps_its_weights() {
        assert_eq!(default_plan::<f32>(1020, true), NormPlan::Warp { keep: true });
        assert_eq!(default_plan::<f32>(516, true), NormPlan::Warp { keep: true });
        // Not shorter rows, not RMSNorm, not bf16, not longer rows (1024: the looped kernel).
        assert_eq!(width(default_plan::<f32>(512, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<f32>(1020, false)), Some(RowsWidth::W16));
        assert_eq!(default_plan::<bf16>(1024, true), NormPlan::WarpSolo);
        assert_eq!(width(default_plan::<bf16>(1016, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<f32>(1028, true)), Some(RowsWidth::W16));
    }

    /// `warp-1` by default where it won on the H200 (DEFAULT_RULES): bf16 rows of 1024
    /// columns, a trial on each side, and not f32.
    #[test]
    fn bf16_rows_of_1024_columns_take_the_warp_kernel_in_blocks_of_one_warp() {
        for layer in [false, true] {
            assert_eq!(default_plan::<bf16>(1024, layer), NormPlan::WarpSolo);
            assert_ne!(default_plan::<bf16>(1016, layer), NormPlan::WarpSolo);
            assert_ne!(default_plan::<bf16>(1032, layer), NormPlan::WarpSolo);
            assert_ne!(default_plan::<f32>(1024, layer), NormPlan::WarpSolo);
        }
        // Below and above: what they took before (16 elements per thread; RMSNorm past 1024 the
        // looped kernel, LayerNorm 16 elements per thread).
        assert_eq!(width(default_plan::<bf16>(1016, false)), Some(RowsWidth::W16));
        assert!(matches!(default_plan::<bf16>(1032, false), NormPlan::Loop { .. }));
        assert_eq!(width(default_plan::<bf16>(1032, true)), Some(RowsWidth::W16));
        // A row the kernel cannot take (unaligned) still gets the tutorial kernel.
        assert_eq!(
            NormPlan::choose::<bf16>(NormAlgorithm::InRegisters, 1024, false, true, |_| 1024),
            NormPlan::BlockReduce
        );
    }

    /// `rows-16-el` by default where it won on the H200 (DEFAULT_RULES), a trial on
    /// each side of every range boundary.
    #[test]
    fn the_evict_last_kernel_by_default_in_its_measured_ranges() {
        let last = |cols: usize| NormPlan::RowsEvictLast {
            threads: (cols / 16).next_multiple_of(32) as u32,
        };
        // RMSNorm f32: 4096..=16384; below it the looped kernel, past it 32 elements per thread.
        assert_eq!(default_plan::<f32>(4096, false), last(4096));
        assert_eq!(default_plan::<f32>(8192, false), last(8192));
        assert_eq!(default_plan::<f32>(16384, false), last(16384));
        assert!(matches!(default_plan::<f32>(4092, false), NormPlan::Loop { .. }));
        assert_eq!(width(default_plan::<f32>(16388, false)), Some(RowsWidth::W32));
        // LayerNorm f32: 4096 only.
        assert_eq!(default_plan::<f32>(4096, true), last(4096));
        assert_eq!(width(default_plan::<f32>(4092, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<f32>(4100, true)), Some(RowsWidth::W16));
        // Never bf16.
        for layer in [false, true] {
            for cols in [4096, 16384] {
                assert!(!matches!(
                    default_plan::<bf16>(cols, layer),
                    NormPlan::RowsEvictLast { .. }
                ));
            }
        }
    }

    /// `loop2-512` by default where it won on the H200 (DEFAULT_RULES), a trial on each side
    /// of every range boundary.
    #[test]
    fn the_looped_kernel_by_default_in_its_measured_ranges() {
        let looped = |threads| NormPlan::Loop {
            threads,
            kind: LoopKind::Hinted2,
        };
        for layer in [false, true] {
            assert_eq!(default_plan::<f32>(1024, layer), looped(128));
            assert!(!matches!(default_plan::<f32>(1020, layer), NormPlan::Loop { .. }));
        }
        // RMSNorm, f32 and bf16: 1024 to 4096 columns (f32 from 4096 on: the evict-last kernel,
        // DEFAULT_RULES).
        assert_eq!(default_plan::<f32>(4092, false), looped(512));
        assert!(matches!(
            default_plan::<f32>(4096, false),
            NormPlan::RowsEvictLast { .. }
        ));
        // (bf16 at 1024: the warp kernel, DEFAULT_RULES.)
        assert_eq!(default_plan::<bf16>(1032, false), looped(96));
        assert_eq!(default_plan::<bf16>(4096, false), looped(256));
        assert_eq!(width(default_plan::<bf16>(1016, false)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<bf16>(4104, false)), Some(RowsWidth::W16));
        // f32 LayerNorm: 1024 only; bf16 LayerNorm: never.
        assert_eq!(width(default_plan::<f32>(1028, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<f32>(4100, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<bf16>(2048, true)), Some(RowsWidth::W16));
    }

    /// bf16 LayerNorm: 32 elements per thread from 4096 columns (a trial on each side).
    #[test]
    fn bf16_layer_norm_takes_32_elements_per_thread_from_4096_columns() {
        assert_eq!(width(default_plan::<bf16>(4088, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<bf16>(4096, true)), Some(RowsWidth::W32));
        assert_eq!(width(default_plan::<bf16>(8192, true)), Some(RowsWidth::W32));
        // Not RMSNorm (the looped kernel to 4096, then 16 elements to 8192).
        assert_eq!(width(default_plan::<bf16>(8192, false)), Some(RowsWidth::W16));
    }

    #[test]
    fn sixteen_elements_per_thread_to_16384_f32_columns_and_8192_bf16() {
        // (f32 RMSNorm at 16384: 16 elements per thread with evict-last loads.)
        assert!(matches!(
            default_plan::<f32>(16384, false),
            NormPlan::RowsEvictLast { threads: 1024 }
        ));
        assert_eq!(width(default_plan::<f32>(16384, true)), Some(RowsWidth::W16));
        for layer in [false, true] {
            assert_eq!(width(default_plan::<f32>(16388, layer)), Some(RowsWidth::W32));
            if !layer {
                assert_eq!(width(default_plan::<bf16>(8192, layer)), Some(RowsWidth::W16));
            }
            assert_eq!(width(default_plan::<bf16>(8200, layer)), Some(RowsWidth::W32));
        }
    }

    /// The looped plans: their block size where the row fills it, whole warps of the row's
    /// vectors (at least one) where it does not; any aligned row of a multiple of the vector
    /// width; the tutorial where the row is not.
    #[test]
    fn looped_plans_size_their_blocks_to_the_row() {
        let choose =
            |algorithm, cols| NormPlan::choose::<f32>(algorithm, cols, true, false, |_| ROW_BLOCK_MAX);
        let looped = |threads, kind| NormPlan::Loop { threads, kind };
        assert_eq!(
            choose(NormAlgorithm::Loop512, 4096),
            looped(512, LoopKind::Hinted)
        );
        assert_eq!(
            choose(NormAlgorithm::Loop1024, 16384),
            looped(1024, LoopKind::Hinted)
        );
        assert_eq!(
            choose(NormAlgorithm::Loop1024, 1024),
            looped(256, LoopKind::Hinted)
        );
        assert_eq!(
            choose(NormAlgorithm::Loop2x512, 1024),
            looped(128, LoopKind::Hinted2)
        );
        assert_eq!(
            choose(NormAlgorithm::Loop2x256, 65536),
            looped(256, LoopKind::Hinted2)
        );
        assert_eq!(
            choose(NormAlgorithm::LoopPlain512, 8),
            looped(32, LoopKind::Plain)
        );
        assert_eq!(
            choose(NormAlgorithm::Loop256, 4100),
            looped(256, LoopKind::Hinted)
        );
        assert_eq!(choose(NormAlgorithm::Loop256, 4098), NormPlan::BlockReduce);
        assert_eq!(
            NormPlan::choose::<f32>(NormAlgorithm::Loop256, 4096, false, true, |_| ROW_BLOCK_MAX),
            NormPlan::BlockReduce
        );
        assert_eq!(
            NormPlan::choose::<half::bf16>(NormAlgorithm::Loop512, 16384, true, true, |_| ROW_BLOCK_MAX),
            looped(512, LoopKind::Hinted)
        );
    }
}
