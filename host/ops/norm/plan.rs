//! The plan of a norm: which kernel and block size a row length gets, chosen once per call.

use kernels_gpu::norm::{RING_MAX_COLS, ROW_BLOCK_MAX, TWO_PASS_VECTORS, ring_vectors};

use super::{NormAlgorithm, NormElement};

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
    /// buffers of the simulator may not be); `layer`: LayerNorm (RMSNorm otherwise; the
    /// default differs at short f32 rows, and the looped range is per norm and type); `max_threads`: the driver's block limit for the
    /// in-register kernel of each width.
    ///
    /// An algorithm whose own kernel does not take the row ([`NormAlgorithm::fits`]) runs the
    /// default's plan ([`NormAlgorithm::InRegisters`]).
    pub fn choose<T: NormElement>(
        algorithm: NormAlgorithm,
        cols: usize,
        aligned: bool,
        layer: bool,
        max_threads: impl Fn(RowsWidth) -> u32,
    ) -> NormPlan {
        if algorithm == NormAlgorithm::BlockReduce || !aligned || cols % T::LANES != 0 {
            return NormPlan::BlockReduce;
        }
        let vecs = cols / T::LANES;
        let threads_for = |width: RowsWidth| {
            let per_thread = (width.elements() / T::LANES).max(1);
            let threads = warps_for(vecs, per_thread);
            let limit = max_threads(width).min(ROW_BLOCK_MAX) as usize;
            (threads <= limit).then_some(threads as u32)
        };
        let fixed_as = |width: RowsWidth, stream: bool| {
            threads_for(width).map(|threads| NormPlan::Rows {
                threads,
                width,
                stream,
            })
        };
        let fixed = |width: RowsWidth| fixed_as(width, false);
        let own = match algorithm {
            NormAlgorithm::BlockReduce | NormAlgorithm::InRegisters => None,
            NormAlgorithm::Rows16 => fixed(RowsWidth::W16),
            NormAlgorithm::Rows32 => fixed(RowsWidth::W32),
            NormAlgorithm::Rows64 => fixed(RowsWidth::W64),
            NormAlgorithm::Rows16Stream => fixed_as(RowsWidth::W16, true),
            NormAlgorithm::Rows32Stream => fixed_as(RowsWidth::W32, true),
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
            NormAlgorithm::Rows16EvictLast => {
                threads_for(RowsWidth::W16).map(|threads| NormPlan::RowsEvictLast { threads })
            }
            NormAlgorithm::Ring => (cols <= RING_MAX_COLS).then(|| NormPlan::Ring {
                threads: warps_for(vecs, ring_vectors(T::LANES)) as u32,
            }),
        };
        if let Some(plan) = own {
            return plan;
        }
        let f32 = core::mem::size_of::<T>() == 4;
        // The warp-per-row kernel in blocks of one warp where it was measured to win (see
        // DEFAULT_WARP_SOLO_COLS).
        if DEFAULT_WARP_SOLO_COLS[usize::from(layer)][usize::from(f32)]
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&cols) && cols <= WARP_ELEMENTS * 32)
        {
            return NormPlan::WarpSolo;
        }
        // The evict-last loads where they were measured to win (see DEFAULT_EVICT_LAST_COLS).
        if DEFAULT_EVICT_LAST_COLS[usize::from(layer)][usize::from(f32)]
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&cols))
        {
            if let Some(threads) = threads_for(RowsWidth::W16) {
                return NormPlan::RowsEvictLast { threads };
            }
        }
        // The looped kernel where it was measured to win (see DEFAULT_LOOP_COLS).
        if let Some(plan) = DEFAULT_LOOP_COLS[usize::from(layer)][usize::from(f32)]
            .filter(|&(lo, hi)| (lo..=hi).contains(&cols))
            .and_then(|_| loop_plan(DEFAULT_LOOP, vecs))
        {
            return plan;
        }
        // The default, from the H200 runs of every variant (`bench/results/*.jsonl`, `--plans`).
        // f32 LayerNorm of rows of 513 to 1024 (a lane's 32 elements more than half used): the
        // persistent warp-per-row kernel that keeps the weight and bias in registers
        // (`warp-keep`, 0.5-3% ahead of 16 elements per thread at 1024 columns in each of the
        // four runs that timed both; shorter rows were not timed).
        if layer && f32 && cols > WARP_ELEMENTS * 16 && cols <= WARP_ELEMENTS * 32 {
            return NormPlan::Warp { keep: true };
        }
        // Else 16 elements per thread up to `DEFAULT_W16_MAX_COLS` (f32: 16384; the fastest or
        // within 1.5% of it at 1024 to 16384 columns but for bf16 LayerNorm at 4096, 3-5% behind
        // 32: `DEFAULT_W16_MAX_COLS_BF16_LAYER`), 32 past it (bf16 at 16384 columns: 32 ahead of
        // or level with 16).
        let w16_max = if f32 {
            DEFAULT_W16_MAX_COLS_F32
        } else if layer {
            DEFAULT_W16_MAX_COLS_BF16_LAYER
        } else {
            DEFAULT_W16_MAX_COLS
        };
        let preferred = if cols <= w16_max {
            RowsWidth::W16
        } else {
            RowsWidth::W32
        };
        if let Some(plan) = fixed(preferred) {
            return plan;
        }
        // Else the 32-element kernel at half its capacity per thread, all of it past 1024
        // threads.
        let limit = max_threads(RowsWidth::W32).min(ROW_BLOCK_MAX) as usize;
        let target = (T::VECTORS / TARGET_FRACTION).max(1);
        for per_thread in [target, T::VECTORS] {
            let threads = warps_for(vecs, per_thread);
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

/// bf16 rows of up to this many columns take 16 elements per thread by default, longer ones 32.
pub const DEFAULT_W16_MAX_COLS: usize = 8192;

/// bf16 LayerNorm rows of up to this many columns take 16 elements per thread by default,
/// longer ones 32: at 8192 x 4096 32 elements per thread were ahead of 16 in both H200 sweeps
/// that timed every candidate (3608 against 3491 GB/s in `bench/results/5e7f33d-plans.jsonl`,
/// 3596 against 3453 in `evict-last-ab-plans.jsonl`), behind at 1024 (2341 against 2447 in the
/// latter). 2048 columns were not timed and keep 16.
pub const DEFAULT_W16_MAX_COLS_BF16_LAYER: usize = 4088;

/// f32 rows of up to this many columns take 16 elements per thread by default (at 16384
/// columns 16 was ahead of 32 by 2-4% for RMSNorm and by under 1% for LayerNorm in the last two
/// runs that timed both), longer ones 32.
pub const DEFAULT_W16_MAX_COLS_F32: usize = 16384;

/// Rows of `lo..=hi` columns take the looped kernel [`DEFAULT_LOOP`] by default, indexed
/// `[layer][f32]`: RMSNorm `[0]`, LayerNorm `[1]`; bf16 `[_][0]`, f32 `[_][1]`; `None`: never.
/// From the H200 run of every candidate at 8192 x {1024, 4096, 16384}
/// (`bench/results/5e7f33d-plans.jsonl`): `loop2-512` was ahead of the in-register
/// default for RMSNorm at 1024 (f32 6%, bf16 2%) and 4096 (f32 2%, bf16 3.5%) and for f32
/// LayerNorm at 1024 (3% ahead of `warp-keep`); behind it at 16384, for f32 LayerNorm at 4096 and
/// for bf16 LayerNorm. 2048 columns were not timed; rows under 1024 columns were not either.
pub const DEFAULT_LOOP_COLS: [[Option<(usize, usize)>; 2]; 2] = [
    [Some((1024, 4096)), Some((1024, 4096))],
    [None, Some((1024, 1024))],
];

/// Rows of `lo..=hi` columns take the warp-per-row kernel in blocks of one warp
/// ([`NormAlgorithm::WarpSolo`], `warp-1`) by default, indexed as [`DEFAULT_LOOP_COLS`] and taking
/// precedence over it and over [`DEFAULT_EVICT_LAST_COLS`]: bf16 rows of 1024 columns. Since that
/// kernel holds a bf16 row as its loaded words (fewer registers: 54 for RMSNorm, 72 for
/// LayerNorm, from 64 and 88), it was ahead of every other candidate at 8192 x 1024 in both H200
/// A/B calls that timed it with torch.compile beside it (`bench/results/warp-packed-ab*.jsonl`):
/// bf16 RMSNorm 2811 and 2774-2800 GB/s against 2699 and 2668-2675 for `loop2-512` (the default
/// before); bf16 LayerNorm 2618-2635 and 2596-2609 against 2462-2485 for the in-register
/// default. Only 1024 columns were timed; f32 rows keep their defaults (`warp-1` behind them).
pub const DEFAULT_WARP_SOLO_COLS: [[Option<(usize, usize)>; 2]; 2] =
    [[Some((1024, 1024)), None], [Some((1024, 1024)), None]];

/// Rows of `lo..=hi` columns take the in-register kernel of 16 elements per thread with
/// `evict_last` loads (`*_rows16_el_*`, [`NormAlgorithm::Rows16EvictLast`]) by default, indexed
/// as [`DEFAULT_LOOP_COLS`] and taking precedence over it. From the H200 run of every candidate
/// with torch.compile in the same call (`bench/results/evict-last-ab-plans.jsonl`):
/// at 4096 columns f32 RMSNorm 4026 GB/s against 4011 (in-register) and 3996 (`loop2-512`),
/// f32 LayerNorm 3969 against 3901; at 16384 f32 RMSNorm 4217 against 4078; behind at 1024
/// columns, for bf16 everywhere, and for f32 LayerNorm at 16384 (3686 against 4072: 38
/// registers, one block of 1024 threads per multiprocessor). 8192 columns were not timed.
pub const DEFAULT_EVICT_LAST_COLS: [[Option<(usize, usize)>; 2]; 2] =
    [[None, Some((4096, 16384))], [None, Some((4096, 4096))]];

/// The looped candidate the default takes in [`DEFAULT_LOOP_COLS`]: two vectors per thread per
/// step, 512 threads at most.
pub const DEFAULT_LOOP: NormAlgorithm = NormAlgorithm::Loop2x512;

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// The default plan for `cols` columns of `T`, every width allowed 1024 threads.
    fn default_plan<T: NormElement>(cols: usize, layer: bool) -> NormPlan {
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

    /// `warp-1` by default where it won on the H200 (DEFAULT_WARP_SOLO_COLS): bf16 rows of 1024
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

    /// `rows-16-el` by default where it won on the H200 (DEFAULT_EVICT_LAST_COLS), a trial on
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

    /// `loop2-512` by default where it won on the H200 (DEFAULT_LOOP_COLS), a trial on each side
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
        // DEFAULT_EVICT_LAST_COLS).
        assert_eq!(default_plan::<f32>(4092, false), looped(512));
        assert!(matches!(
            default_plan::<f32>(4096, false),
            NormPlan::RowsEvictLast { .. }
        ));
        // (bf16 at 1024: the warp kernel, DEFAULT_WARP_SOLO_COLS.)
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
