//! The plan of a norm: which kernel and block size a row length gets, chosen once per call.

use kernels_gpu::norm::{NormElem, RING_MAX_COLS, ROW_BLOCK_MAX, TWO_PASS_VECTORS, ring_vectors};

use super::variant::{LoopBlock, LoopConfig};

use super::variant::{LoopKind, NormAlgorithm, RowLoads, RowsConfig, RowsWidth, WarpGrid};

/// What one norm call runs: an algorithm's kernel and its launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormPlan {
    /// The tutorial kernel, a block of 256 threads per row.
    BlockReduce,
    /// The in-register kernel of `config`, a block of `threads` per row.
    Rows {
        /// A multiple of 32, at most 1024.
        threads: u32,
        /// Which in-register kernel (one with a kernel: [`RowsConfig::kernel_stem`]).
        config: RowsConfig,
    },
    /// The warp-per-row kernels (32 elements per lane) on `grid`: blocks of
    /// [`kernels_gpu::norm::WARP_BLOCK`] threads, a persistent grid of them, or blocks of one
    /// warp.
    Warp {
        /// The grid, and with it the kernel.
        grid: WarpGrid,
    },
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
    /// The bulk-copy ring kernel (`*_norm_ring_*`) on a persistent grid, blocks of `threads`.
    Ring {
        /// A multiple of 32, at most 1024: the row's vectors at `ring_vectors` each.
        threads: u32,
    },
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
                    config: RowsConfig::new(RowsWidth::W32, RowLoads::Plain),
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

    /// The plan of `algorithm`'s own kernel, if it takes the row (`None` for the default and
    /// the tutorial, which are not one kernel, and for an in-register config without a kernel).
    fn own<T: NormElem>(&self, algorithm: NormAlgorithm) -> Option<NormPlan> {
        let (cols, vecs) = (self.cols, self.vecs);
        match algorithm {
            NormAlgorithm::BlockReduce | NormAlgorithm::InRegisters => None,
            NormAlgorithm::Rows(config) => {
                config.kernel_stem()?;
                self.threads_for(config.width)
                    .map(|threads| NormPlan::Rows { threads, config })
            }
            NormAlgorithm::Warp(grid) => (cols <= WARP_ELEMENTS * 32).then_some(NormPlan::Warp { grid }),
            NormAlgorithm::TwoPass => {
                // Any row length (the block steps over the row): TWO_PASS_VECTORS per thread
                // where that is at most 1024 threads, more past it.
                Some(NormPlan::TwoPass {
                    threads: warps_for(vecs, TWO_PASS_VECTORS).min(ROW_BLOCK_MAX as usize) as u32,
                })
            }
            // Its block size, but no more threads than the row's vectors fill at the kind's
            // vectors per step (whole warps, at least one).
            NormAlgorithm::Loop(c) => Some(NormPlan::Loop {
                threads: warps_for(vecs, c.kind.vectors()).min(c.block.threads() as usize) as u32,
                kind: c.kind,
            }),
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
    use NormKind::{Layer, Rms};
    use RowsWidth::{W16, W32};
    const fn rows(width: RowsWidth, loads: RowLoads) -> NormAlgorithm {
        NormAlgorithm::Rows(RowsConfig::new(width, loads))
    }
    const LOOP2_512: NormAlgorithm = NormAlgorithm::Loop(LoopConfig::new(LoopKind::Hinted2, LoopBlock::T512));
    [
        // bf16 rows of 1024: the warp kernel in blocks of one warp holds the row as its loaded
        // words (fewer registers).
        rule(
            NormKind::Any,
            Bf16,
            (1024, 1024),
            NormAlgorithm::Warp(WarpGrid::Solo),
            WARP_PACKED_AB,
        ),
        // torch.compile's evict_last loads, 16 elements per thread.
        rule(
            Rms,
            F32,
            (4096, 16384),
            rows(W16, RowLoads::EvictLast),
            EVICT_LAST_AB,
        ),
        rule(
            Layer,
            F32,
            (4096, 4096),
            rows(W16, RowLoads::EvictLast),
            EVICT_LAST_AB,
        ),
        // The looped L2 re-read kernel, two vectors per step, 512 threads.
        rule(Rms, ElementKind::Any, (1024, 4096), LOOP2_512, PLANS_5E7F33D),
        rule(Layer, F32, (1024, 1024), LOOP2_512, PLANS_5E7F33D),
        // f32 LayerNorm of a lane's 32 elements more than half used: the persistent warp per
        // row that keeps the weight and bias in registers.
        rule(
            Layer,
            F32,
            (WARP_ELEMENTS * 16 + 1, WARP_ELEMENTS * 32),
            NormAlgorithm::Warp(WarpGrid::Keep),
            PLANS_5E7F33D,
        ),
        // 16 elements per thread, then 32.
        rule(
            NormKind::Any,
            F32,
            (1, 16384),
            rows(W16, RowLoads::Plain),
            PLANS_5E7F33D,
        ),
        rule(Rms, Bf16, (1, 8192), rows(W16, RowLoads::Plain), PLANS_5E7F33D),
        rule(Layer, Bf16, (1, 4088), rows(W16, RowLoads::Plain), EVICT_LAST_AB),
        rule(
            NormKind::Any,
            F32,
            (16385, usize::MAX),
            rows(W32, RowLoads::Plain),
            PLANS_5E7F33D,
        ),
        rule(
            Rms,
            Bf16,
            (8193, usize::MAX),
            rows(W32, RowLoads::Plain),
            PLANS_5E7F33D,
        ),
        rule(
            Layer,
            Bf16,
            (4089, usize::MAX),
            rows(W32, RowLoads::Plain),
            EVICT_LAST_AB,
        ),
    ]
};

impl NormAlgorithm {
    /// Whether this algorithm's own kernel takes aligned rows of `cols` elements of `T` (up to
    /// the CUDA block limit; a kernel whose registers lower that limit may still fall back):
    /// where it does not, it runs the default's plan, and a benchmark need not time it.
    pub fn fits<T: NormElem>(self, cols: usize) -> bool {
        match self {
            NormAlgorithm::BlockReduce | NormAlgorithm::InRegisters => true,
            _ if cols % T::LANES != 0 => false,
            _ => {
                let max_threads = |_| ROW_BLOCK_MAX;
                let row = Row {
                    cols,
                    vecs: cols / T::LANES,
                    lanes: T::LANES,
                    max_threads: &max_threads,
                };
                row.own::<T>(self).is_some()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// The `evict_last` in-register kernel.
    const EL: RowsConfig = RowsConfig::new(RowsWidth::W16, RowLoads::EvictLast);

    /// The algorithm of this name.
    fn alg(name: &str) -> NormAlgorithm {
        NormAlgorithm::from_name(name).expect("a norm algorithm's name")
    }

    /// The default plan for `cols` columns of `T`, every width allowed 1024 threads.
    fn default_plan<T: NormElem>(cols: usize, layer: bool) -> NormPlan {
        NormPlan::choose::<T>(NormAlgorithm::InRegisters, cols, true, layer, |_| 1024)
    }

    fn width(plan: NormPlan) -> Option<RowsWidth> {
        match plan {
            NormPlan::Rows { config, .. } if config.loads != RowLoads::EvictLast => Some(config.width),
            _ => None,
        }
    }

    #[test]
    fn f32_layer_norm_of_rows_of_513_to_1020_takes_the_warp_kernel_that_keeps_its_weights() {
        assert_eq!(
            default_plan::<f32>(1020, true),
            NormPlan::Warp { grid: WarpGrid::Keep }
        );
        assert_eq!(
            default_plan::<f32>(516, true),
            NormPlan::Warp { grid: WarpGrid::Keep }
        );
        // Not shorter rows, not RMSNorm, not bf16, not longer rows (1024: the looped kernel).
        assert_eq!(width(default_plan::<f32>(512, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<f32>(1020, false)), Some(RowsWidth::W16));
        assert_eq!(
            default_plan::<bf16>(1024, true),
            NormPlan::Warp { grid: WarpGrid::Solo }
        );
        assert_eq!(width(default_plan::<bf16>(1016, true)), Some(RowsWidth::W16));
        assert_eq!(width(default_plan::<f32>(1028, true)), Some(RowsWidth::W16));
    }

    /// `warp-1` by default where it won on the H200 (DEFAULT_RULES): bf16 rows of 1024
    /// columns, a trial on each side, and not f32.
    #[test]
    fn bf16_rows_of_1024_columns_take_the_warp_kernel_in_blocks_of_one_warp() {
        for layer in [false, true] {
            assert_eq!(
                default_plan::<bf16>(1024, layer),
                NormPlan::Warp { grid: WarpGrid::Solo }
            );
            assert_ne!(
                default_plan::<bf16>(1016, layer),
                NormPlan::Warp { grid: WarpGrid::Solo }
            );
            assert_ne!(
                default_plan::<bf16>(1032, layer),
                NormPlan::Warp { grid: WarpGrid::Solo }
            );
            assert_ne!(
                default_plan::<f32>(1024, layer),
                NormPlan::Warp { grid: WarpGrid::Solo }
            );
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
        let last = |cols: usize| NormPlan::Rows {
            config: EL,
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
                    NormPlan::Rows { config: EL, .. }
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
            NormPlan::Rows { config: EL, .. }
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
            NormPlan::Rows {
                config: EL,
                threads: 1024
            }
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
        assert_eq!(choose(alg("loop-512"), 4096), looped(512, LoopKind::Hinted));
        assert_eq!(choose(alg("loop-1024"), 16384), looped(1024, LoopKind::Hinted));
        assert_eq!(choose(alg("loop-1024"), 1024), looped(256, LoopKind::Hinted));
        assert_eq!(choose(alg("loop2-512"), 1024), looped(128, LoopKind::Hinted2));
        assert_eq!(choose(alg("loop2-256"), 65536), looped(256, LoopKind::Hinted2));
        assert_eq!(choose(alg("loop-plain-512"), 8), looped(32, LoopKind::Plain));
        assert_eq!(choose(alg("loop-256"), 4100), looped(256, LoopKind::Hinted));
        assert_eq!(choose(alg("loop-256"), 4098), NormPlan::BlockReduce);
        assert_eq!(
            NormPlan::choose::<f32>(alg("loop-256"), 4096, false, true, |_| ROW_BLOCK_MAX),
            NormPlan::BlockReduce
        );
        assert_eq!(
            NormPlan::choose::<half::bf16>(alg("loop-512"), 16384, true, true, |_| ROW_BLOCK_MAX),
            looped(512, LoopKind::Hinted)
        );
    }
}
