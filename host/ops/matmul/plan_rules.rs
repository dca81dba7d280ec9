//! The matmul plans' rules as data: each plan's conditions in order (the first that applies
//! wins), each rule with the committed records that justified it (their figures are in
//! `bench/targets.md`, "Plan rules and the records behind them"). The plan types and their
//! `choose` functions are in `plan.rs`.

use kernels_gpu::matmul::tf32::{TF32_128X128, TF32_128X256, Tf32Tiling};
use kernels_gpu::matmul::{FAST_64, FAST_128, FastTiling};

use super::{
    FastPlan, FastTile, MatmulAlgorithm, MatmulDevice, MatmulPlan, SgemmSchedule, StreamKPlan, Tf32Tile,
    WsTile, fast_blocks,
};
use crate::error::Result;
use crate::launch_config::DeviceLimits;

/// One rule of a matmul plan with the committed records behind it (`bench/targets.md`, "Plan
/// rules and the records behind them", has their figures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulRuleSource<R> {
    /// The rule: a condition on the shape and the device, and the plan that then runs.
    pub rule: R,
    /// The committed records (under `bench/`) that justified it; none where the rule is the
    /// caller's choice, a device fact, or came from runs that were not committed
    /// (`bench/targets.md` names those as the next to re-measure).
    pub records: &'static [&'static str],
}

/// One step of a matmul call's plan, in the order of [`MATMUL_RULES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulRule {
    /// [`MatmulAlgorithm::Naive`]: `matmul_naive`.
    Naive,
    /// [`MatmulAlgorithm::Tiled`]: `matmul_tiled`.
    Tiled,
    /// [`MatmulAlgorithm::Fast`] with [`SGEMM_SCHEDULE_ENV`](super::SGEMM_SCHEDULE_ENV)`=stream-k`, `k > 0` and `k`, `n`
    /// multiples of 4 (the stream-K kernel has 16-byte accesses only; the launch checks the
    /// alignment again and falls back to [`FastPlan::choose`]'s plan): stream-K over the
    /// resident grid ([`StreamKPlan::with_ctas`]).
    StreamKForced,
    /// [`MatmulAlgorithm::Fast`] with [`SGEMM_SCHEDULE_ENV`](super::SGEMM_SCHEDULE_ENV)`=auto`, the same shape conditions,
    /// where [`FastPlan::choose`] takes the 128 x 128 tiling with `k` whole and
    /// [`StreamKPlan::choose`] takes stream-K.
    StreamKByShape,
    /// [`MatmulAlgorithm::Fast`] otherwise: data-parallel, [`FastPlan::choose`]'s plan.
    DataParallel,
    /// [`MatmulAlgorithm::Tf32`] on a CUDA device with the `sm_90a` module where
    /// [`Tf32Tile::wgmma_applies`] (the allocations are 256-byte aligned; the launch checks
    /// again): [`Tf32Tile::Wgmma`].
    Tf32Wgmma,
    /// [`MatmulAlgorithm::Tf32`] otherwise: the `mma.sync` tiling of [`Tf32Tile::choose`].
    Tf32Mma,
}

impl MatmulRule {
    /// The plan of this rule for `algorithm` and an `m x k` times `k x n` product on `device`
    /// with the schedule `forced`, if the rule applies; the device's facts are asked only
    /// where the rule needs them.
    pub(super) fn apply(
        self,
        device: &impl MatmulDevice,
        algorithm: MatmulAlgorithm,
        (m, k, n): (usize, usize, usize),
        forced: Option<SgemmSchedule>,
    ) -> Result<Option<MatmulPlan>> {
        #[allow(clippy::manual_is_multiple_of)] // minimum Rust 1.85
        let stream_k_shape = k > 0 && k % 4 == 0 && n % 4 == 0;
        let fast = algorithm == MatmulAlgorithm::Fast;
        let tf32 = algorithm == MatmulAlgorithm::Tf32;
        Ok(match self {
            MatmulRule::Naive => (algorithm == MatmulAlgorithm::Naive).then_some(MatmulPlan::Naive),
            MatmulRule::Tiled => (algorithm == MatmulAlgorithm::Tiled).then_some(MatmulPlan::Tiled),
            MatmulRule::StreamKForced => {
                if fast && forced == Some(SgemmSchedule::StreamK) && stream_k_shape {
                    Some(MatmulPlan::StreamK(StreamKPlan::with_ctas(
                        m,
                        n,
                        device.stream_k_resident()?,
                    )))
                } else {
                    None
                }
            }
            MatmulRule::StreamKByShape => {
                if fast
                    && forced == Some(SgemmSchedule::ByShape)
                    && stream_k_shape
                    && FastPlan::choose(m, n, k, device.multiprocessors()?) == FastPlan::LARGE_WHOLE
                {
                    StreamKPlan::choose(m, n, k, device.stream_k_resident()?).map(MatmulPlan::StreamK)
                } else {
                    None
                }
            }
            MatmulRule::DataParallel => {
                if fast {
                    Some(MatmulPlan::Fast(FastPlan::choose(
                        m,
                        n,
                        k,
                        device.multiprocessors()?,
                    )))
                } else {
                    None
                }
            }
            MatmulRule::Tf32Wgmma => {
                (tf32 && !device.is_simulator() && Tf32Tile::wgmma_applies(k, true, device.has_wgmma()))
                    .then_some(MatmulPlan::Tf32(Tf32Tile::Wgmma))
            }
            MatmulRule::Tf32Mma => {
                if tf32 {
                    Some(MatmulPlan::Tf32(Tf32Tile::choose(
                        m,
                        n,
                        device.multiprocessors()?,
                        &device.limits(),
                    )))
                } else {
                    None
                }
            }
        })
    }
}

/// The `--plans` run of every f32 and TF32 plan at 2048^3, 4096^3 and 8192^3 on the H200.
const PLANS_5E7F33D: &str = "bench/experiments/plans/5e7f33d-plans.jsonl";
/// The H200 run with every warp-specialised tile forced (`gpukern:wgmma_ws_<tile>`).
const WS_TILES_F2782B2: &str = "bench/results/f2782b2.jsonl";
/// The `--plans` run of the f32 product below one wave (512^3, 1000^3, 1024^3, 4096x4096x64,
/// 64x4096x4096, 1x4096x4096) on the H200.
const PLANS_30478DC: &str = "bench/experiments/plans/30478dc-matmul-plans.jsonl";

/// The plan of a matmul call as data (what [`crate::Gpu::matmul_with`] runs): the first rule
/// that applies wins. The f32 product is data-parallel unless [`SGEMM_SCHEDULE_ENV`](super::SGEMM_SCHEDULE_ENV) asks for
/// stream-K (the data-parallel 128 x 128 grid was ahead at 4096^3 and 8192^3); TF32 takes
/// `wgmma` where it can (ahead of the `mma.sync` tilings from 2048^3 on).
pub const MATMUL_RULES: [MatmulRuleSource<MatmulRule>; 7] = [
    MatmulRuleSource {
        rule: MatmulRule::Naive,
        records: &[],
    },
    MatmulRuleSource {
        rule: MatmulRule::Tiled,
        records: &[],
    },
    MatmulRuleSource {
        rule: MatmulRule::StreamKForced,
        records: &[],
    },
    MatmulRuleSource {
        rule: MatmulRule::StreamKByShape,
        records: &[PLANS_5E7F33D],
    },
    MatmulRuleSource {
        rule: MatmulRule::DataParallel,
        records: &[PLANS_5E7F33D],
    },
    MatmulRuleSource {
        rule: MatmulRule::Tf32Wgmma,
        records: &[PLANS_5E7F33D],
    },
    MatmulRuleSource {
        rule: MatmulRule::Tf32Mma,
        records: &[],
    },
];

/// One step of [`Tf32Tile::choose`], in the order of [`TF32_RULES`]; a tiling applies only
/// where its shared memory fits the device's opt-in limit (`max_shared_mem_per_block_optin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tf32Rule {
    /// At least one 128 x 256 block per SM (fewer bytes per flop), 204 KiB: [`Tf32Tile::Wide`].
    Wide,
    /// 105 KiB, four times the blocks, two per SM: [`Tf32Tile::Square`].
    Square,
    /// Always (74 KiB): [`Tf32Tile::SquareK16`].
    SquareK16,
}

impl Tf32Rule {
    /// The tiling of this rule for an `m x n` result on a GPU with `multiprocessors` SMs and
    /// these limits, if it applies.
    pub(super) fn apply(
        self,
        m: usize,
        n: usize,
        multiprocessors: usize,
        limits: &DeviceLimits,
    ) -> Option<Tf32Tile> {
        let fits = |t: Tf32Tiling| t.shared_bytes() <= limits.max_shared_mem_per_block_optin;
        match self {
            Tf32Rule::Wide => {
                let wide = TF32_128X256;
                let blocks = m.div_ceil(wide.block_rows) * n.div_ceil(wide.block_cols);
                (blocks >= multiprocessors.max(1) && fits(wide)).then_some(Tf32Tile::Wide)
            }
            Tf32Rule::Square => fits(TF32_128X128).then_some(Tf32Tile::Square),
            Tf32Rule::SquareK16 => Some(Tf32Tile::SquareK16),
        }
    }
}

/// [`Tf32Tile::choose`] as data: the first rule that applies wins. The wide tiling was ahead
/// of the square one at 2048^3 to 8192^3; the rest is what the device's shared memory allows.
pub const TF32_RULES: [MatmulRuleSource<Tf32Rule>; 3] = [
    MatmulRuleSource {
        rule: Tf32Rule::Wide,
        records: &[PLANS_5E7F33D],
    },
    MatmulRuleSource {
        rule: Tf32Rule::Square,
        records: &[],
    },
    MatmulRuleSource {
        rule: Tf32Rule::SquareK16,
        records: &[],
    },
];

/// One step of [`FastPlan::choose`], in the order of [`FAST_RULES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FastRule {
    /// At least one 128 x 128 block per SM: [`FastTile::Large`], `k` whole.
    Large,
    /// At least one 64 x 64 block per SM: [`FastTile::Small`], `k` whole.
    Small,
    /// Always: [`FastTile::Small`], `k` in slices of at least 256 (at most 16) for about two
    /// blocks per SM.
    SmallSplit,
}

impl FastRule {
    /// The plan of this rule for an `m x k` times `k x n` product on a GPU with
    /// `multiprocessors` SMs, if it applies.
    pub(super) fn apply(self, m: usize, n: usize, k: usize, multiprocessors: usize) -> Option<FastPlan> {
        let fills = |t: FastTiling| fast_blocks(t, m, n).max(1) >= multiprocessors.max(1);
        match self {
            FastRule::Large => fills(FAST_128).then_some(FastPlan::LARGE_WHOLE),
            FastRule::Small => fills(FAST_64).then_some(FastPlan {
                tile: FastTile::Small,
                slices: 1,
            }),
            FastRule::SmallSplit => Some(FastPlan::split(m, n, k, multiprocessors)),
        }
    }
}

/// [`FastPlan::choose`] as data: the first rule that applies wins. The 128 x 128 tiling was
/// ahead of 64 x 64 and 128 x 256 at 2048^3 to 8192^3; below its wave the 64 x 64 tiling with
/// `k` whole was ahead of 128 x 128 at 1000^3 and 1024^3, and the split of `k` ahead of it
/// unsplit at 512^3, 64x4096x4096 and 1x4096x4096.
pub const FAST_RULES: [MatmulRuleSource<FastRule>; 3] = [
    MatmulRuleSource {
        rule: FastRule::Large,
        records: &[PLANS_5E7F33D],
    },
    MatmulRuleSource {
        rule: FastRule::Small,
        records: &[PLANS_30478DC],
    },
    MatmulRuleSource {
        rule: FastRule::SmallSplit,
        records: &[PLANS_30478DC],
    },
];

/// [`WsTile::choose`] as data, largest tile first: the first whose tiles fill about one wave
/// wins, the last (the smallest) where none does. 64 x 128 was ahead of the larger tiles at
/// 1024^3, 128 x 256 from 2048^3 up.
pub const WS_RULES: [MatmulRuleSource<WsTile>; 3] = [
    MatmulRuleSource {
        rule: WsTile::Wide,
        records: &[WS_TILES_F2782B2],
    },
    MatmulRuleSource {
        rule: WsTile::Square,
        records: &[WS_TILES_F2782B2],
    },
    MatmulRuleSource {
        rule: WsTile::Narrow,
        records: &[WS_TILES_F2782B2],
    },
];
