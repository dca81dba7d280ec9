//! The plan of an FP8 product ([`Gpu::matmul_fp8_into`](crate::Gpu::matmul_fp8_into)): which
//! kernel of `kernels_gpu::matmul::fp8` runs, a pure function of the shape, the scales, the
//! accumulation asked for and the number of multiprocessors; and the error bound of each
//! accumulation.

use kernels_gpu::matmul::wgmma_ws::{WS_128X128, WS_128X192, WS_128X256, WsTiling};

use super::fp8::Fp8Scaling;

/// How an FP8 product accumulates along `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Accumulation {
    /// Every product of `k` into the tensor core's accumulators, which keep fewer significand
    /// bits than f32 for FP8 operands (`torch._scaled_mm(use_fast_accum=True)`).
    Fast,
    /// Each step of 128 along `k` summed by the tensor core, then added into f32 registers
    /// (DeepGEMM's promotion; about cuBLASLt's `use_fast_accum=False`).
    Promoted,
}

/// The tensor core's FP8 accumulation modelled as keeping 12 significand bits after the
/// leading one, by truncation: a unit of `2^-12` per instruction (`m64nNk32`: 32 products along
/// `k`) relative to the magnitudes summed. DeepSeek-V3's report (section 3.3.2) measured "around
/// 14 bits" kept on the H800; the model keeps one bit of margin under that, and the CUDA trials
/// check it on random data.
pub const FP8_ACCUMULATION_UNIT: f64 = 1.0 / 4096.0;

/// Products along `k` per FP8 `wgmma` instruction.
const K_PER_INSTRUCTION: usize = 32;
/// Products along `k` per promotion ([`Fp8Accumulation::Promoted`]): one stage.
const K_PER_PROMOTION: usize = 128;
/// f32's unit roundoff.
const F32_UNIT: f64 = 1.0 / 16_777_216.0;

impl Fp8Accumulation {
    /// `fast`, `promoted`: the benchmark records' `accumulation`.
    pub fn name(self) -> &'static str {
        match self {
            Fp8Accumulation::Fast => "fast",
            Fp8Accumulation::Promoted => "promoted",
        }
    }

    /// The factor `g` of the error bound of an FP8 product of inner dimension `k` before the
    /// result is rounded to its type: `|c - c_exact| <= g * sa_i sb_j sum_k |qa_ik qb_jk|` with
    /// `c_exact` the product of the dequantised operands (in f64). Each instruction adds at
    /// most [`FP8_ACCUMULATION_UNIT`] of the magnitudes summed so far: `ceil(k / 32)` of them
    /// in the accumulators for [`Fp8Accumulation::Fast`], at most four (one step of 128) for
    /// [`Fp8Accumulation::Promoted`], whose f32 sums add `ceil(k / 128)` f32 roundings; three
    /// f32 roundings of the scaling on top. The bf16 or f32 rounding of the result comes on top
    /// (`2^-8` or `2^-24` of `|c|`).
    pub fn error_factor(self, k: usize) -> f64 {
        let scaling = 3.0 * F32_UNIT;
        match self {
            Fp8Accumulation::Fast => k.div_ceil(K_PER_INSTRUCTION) as f64 * FP8_ACCUMULATION_UNIT + scaling,
            Fp8Accumulation::Promoted => {
                let steps = k
                    .div_ceil(K_PER_INSTRUCTION)
                    .min(K_PER_PROMOTION / K_PER_INSTRUCTION);
                steps as f64 * FP8_ACCUMULATION_UNIT + k.div_ceil(K_PER_PROMOTION) as f64 * F32_UNIT + scaling
            }
        }
    }
}

/// The tile of an FP8 kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Tile {
    /// 128 x 256 (`wgmma.m64n256k32`, 4 stages): fast accumulation only (the promoted sums
    /// would need 256 accumulators per thread).
    Wide,
    /// 128 x 128 (`m64n128k32`, 6 stages): every mode.
    Square,
    /// 128 x 192 (`m64n192k32`, 5 stages): the one-array promotion with tensor or row scales,
    /// bf16 result (96 `wgmma` accumulators and 96 f32 sums per consumer thread), so that a
    /// tile's fixed costs and each byte copied serve 1.5 times the products of the square tile.
    /// Chosen for promoted products where its rounds of the SMs do less work than the square
    /// tile's (`mid_takes_fewer_rounds`): on the H200 1056.4 and 1057.1 against 1142.3 and
    /// 1139.2 TFLOP/s for the square tile at 4096^3 (704 tiles, six rounds of the SMs), 1242.4
    /// and 1262.3 against 1191.6 and 1185.9 at 8192^3, in two calls
    /// (`bench/experiments/third-wave/9cde374-fp8-mid-{1,2}.jsonl`,
    /// `bench/experiments/third-wave/858a660-fp8-pair-1.jsonl`).
    Mid,
}

impl Fp8Tile {
    /// The kernels' tiling.
    pub fn tiling(self) -> WsTiling {
        match self {
            Fp8Tile::Wide => WS_128X256,
            Fp8Tile::Square => WS_128X128,
            Fp8Tile::Mid => WS_128X192,
        }
    }

    /// `128x256`, `128x128`, `128x192`.
    pub fn name(self) -> &'static str {
        match self {
            Fp8Tile::Wide => "128x256",
            Fp8Tile::Square => "128x128",
            Fp8Tile::Mid => "128x192",
        }
    }
}

/// Whether the persistent grid's rounds of 128 x 192 tiles (each 1.5 times a 128 x 128 tile's
/// work) come to less than its rounds of 128 x 128 tiles on `multiprocessors` SMs: `3 R_mid <
/// 2 R_square`, `R` a tiling's tiles over the SMs rounded up. At 8192^3 on 132 SMs, 21 rounds
/// of 2752 tiles against 32 of 4096: taken, and on the H200 it ran 1242.4 and 1262.3 TFLOP/s
/// against 1191.6 and 1185.9 for the square tile in two calls
/// (`bench/experiments/third-wave/9cde374-fp8-mid-2.jsonl`, `858a660-fp8-pair-1.jsonl`); at
/// 4096^3, 6 rounds of 704 against 8 of 1024: not taken (1056.4 and 1057.1 against 1142.3 and
/// 1139.2, `9cde374-fp8-mid-1.jsonl`, `858a660-fp8-pair-1.jsonl`).
pub(crate) fn mid_takes_fewer_rounds((m, n): (usize, usize), multiprocessors: usize) -> bool {
    let rounds = |t: Fp8Tile| t.tiling().tiles(m, n).div_ceil(multiprocessors.max(1));
    3 * rounds(Fp8Tile::Mid) < 2 * rounds(Fp8Tile::Square)
}

/// [`Fp8Plan::choose`] takes the 128 x 256 tile when its tiles are at least this percentage of
/// the multiprocessors (about one full wave of the persistent grid), as `WsTile::choose`.
const WAVE_PERCENT: usize = 90;

/// The staged epilogue's rows of `C` are whole 16 bytes (the copy engine's rule) when `n` is a
/// multiple of this (bf16).
pub const STAGED_COLUMNS: usize = 8;

/// Which FP8 kernel runs a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fp8Plan {
    /// The tile.
    pub tile: Fp8Tile,
    /// The accumulation (always [`Fp8Accumulation::Promoted`] with block scales, which change
    /// every 128 along `k`).
    pub accumulation: Fp8Accumulation,
    /// Whether the scales are per block (applied at each promotion).
    pub block_scales: bool,
    /// Whether (promoted) each promotion overlaps the next step's products (two arrays of
    /// `wgmma` accumulators in turn, `kernels_gpu::matmul::fp8::PromotedOverlap`), else waits
    /// for every step's products before adding them.
    pub overlap: bool,
    /// Whether (the 128 x 128 one-array promotion, bf16 result) the epilogue stages each
    /// consumer's results in shared memory and the copy engine stores them
    /// (`kernels_gpu::matmul::fp8::Staged`), else the threads store them from registers.
    pub staged: bool,
    /// Whether the kernel runs in clusters of two blocks on vertically adjacent tiles, which
    /// share their tile of `B^T` through the copy engine's multicast
    /// (`kernels_gpu::matmul::fp8::Pair`: each block copies `BM + BN / 2` rows per step instead
    /// of `BM + BN`): the fast 128 x 256, promoted and block-scaled 128 x 128 kernels, bf16
    /// result, `B^T` in E4M3. Not chosen (`PAIR_CLUSTERS`: level or slower where timed).
    pub pair: bool,
}

/// Whether [`Fp8Plan::choose`] picks the promotion that overlaps the next step's products. It
/// did while the one-array promotion waited for its stage and made its descriptors after each
/// promotion (at 4096^3 on the H200, 1091.8 TFLOP/s overlapped against 895.9 waiting with tensor
/// scales, 1026.9 against 738.7 with block scales, `bench/experiments/third-wave/cc17310-fp8.jsonl`).
/// Since the one-array loop does both while the products run (DeepGEMM's and cuBLASLt's
/// order), it is the faster at 4096^3 in both of two runs in turn: 1117.0 and 1115.6 against
/// 1105.0 and 1105.4 (tensor scales), 1054.2 and 1053.6 against 1039.6 and 1040.8 (block
/// scales); at 8192^3 the runs spread more (1084.9 and 1192.5 against 1074.9 and 1155.9; block
/// 1090.9 and 1124.9 against 1106.6 and 1043.4), `bench/experiments/third-wave/8f07132-fp8-ab-new-1.jsonl`
/// and `8f07132-fp8-ab-new-2.jsonl`.
const OVERLAP_PROMOTION: bool = false;

/// Whether [`Fp8Plan::choose`] picks the staged epilogue (a bulk tensor store of each tile from
/// shared memory) for the promoted and block-scaled products. No: timed on the H200 beside the
/// epilogue from registers in one call, it was level at 4096^3 (1138.8 against 1133.8 TFLOP/s
/// with tensor scales, 1072.7 against 1068.4 with block scales) and slower at 8192^3 (1109.4
/// against 1201.7, 1125.5 against 1137.2), `bench/experiments/third-wave/016d620-fp8-staged.jsonl`.
const STAGED_EPILOGUE: bool = false;

/// Whether [`Fp8Plan::choose`] picks the kernels of clusters of two blocks sharing `B^T`'s tile
/// by multicast ([`Fp8Plan::pair`]). No: on an H100 at 4096^3 the fast pair ran 1418.4 TFLOP/s
/// against 1425.0 for the single-block kernel and the promoted pair 1077.6 against 1131.3
/// (`bench/experiments/third-wave/3b136ec-fp8-arrive-ab-cta-1.jsonl`): the single-block kernels
/// are not bound by their copies there.
const PAIR_CLUSTERS: bool = false;

impl Fp8Plan {
    /// The plan for an `m x n` result with `A` scaled by `a_scaling` and `B^T` by `b_scaling`,
    /// `accumulation` asked for, on `multiprocessors` SMs: block scales (both operands) run the
    /// promoted block kernel; promoted accumulation the 128 x 128 tile, or the 128 x 192 one for
    /// a bf16 result of E4M3 operands (`staged_result`) where its rounds of the SMs do less work
    /// (`mid_takes_fewer_rounds`); fast accumulation the
    /// 128 x 256 tile when its tiles fill about one wave (`WAVE_PERCENT`), else 128 x 128; the
    /// staged epilogue (not chosen: `STAGED_EPILOGUE`) for a promoted product whose result type
    /// has one (`staged_result`: bf16) and whose `n` is a multiple of 8.
    /// Whether the scalings fit together is checked by the operation, not here.
    pub fn choose(
        (m, n): (usize, usize),
        (a_scaling, b_scaling): (Fp8Scaling, Fp8Scaling),
        accumulation: Fp8Accumulation,
        multiprocessors: usize,
        staged_result: bool,
    ) -> Fp8Plan {
        let staged = STAGED_EPILOGUE && !OVERLAP_PROMOTION && staged_result && n % STAGED_COLUMNS == 0;
        if a_scaling.is_block() || b_scaling.is_block() {
            return Fp8Plan {
                tile: Fp8Tile::Square,
                accumulation: Fp8Accumulation::Promoted,
                block_scales: true,
                overlap: OVERLAP_PROMOTION,
                staged,
                pair: false,
            }
            .paired_where_chosen(staged_result);
        }
        let tile = match accumulation {
            Fp8Accumulation::Promoted if staged_result && mid_takes_fewer_rounds((m, n), multiprocessors) => {
                Fp8Tile::Mid
            }
            Fp8Accumulation::Promoted => Fp8Tile::Square,
            Fp8Accumulation::Fast => {
                let wide = Fp8Tile::Wide.tiling().tiles(m, n);
                if 100 * wide >= WAVE_PERCENT * multiprocessors {
                    Fp8Tile::Wide
                } else {
                    Fp8Tile::Square
                }
            }
        };
        let promoted = accumulation == Fp8Accumulation::Promoted;
        let (overlap, staged) = (OVERLAP_PROMOTION && promoted, staged && promoted);
        Fp8Plan {
            tile,
            accumulation,
            block_scales: false,
            overlap,
            staged,
            pair: false,
        }
        .paired_where_chosen(staged_result)
    }

    /// This plan in clusters of two ([`Fp8Plan::pair`]) where `PAIR_CLUSTERS` chooses them and a
    /// pair kernel exists (`staged_result`: a bf16 result of E4M3 operands), else itself.
    fn paired_where_chosen(self, staged_result: bool) -> Fp8Plan {
        let paired = Fp8Plan { pair: true, ..self };
        if PAIR_CLUSTERS && staged_result && paired.is_valid() {
            paired
        } else {
            self
        }
    }

    /// Whether a kernel exists for the plan: the 128 x 256 tile accumulates fast only, the 128 x
    /// 192 one promotes tensor or row scales in one array only; the
    /// overlapped promotion is promoted; the staged epilogue serves the one-array promotion on
    /// the 128 x 128 tile; a pair runs fast accumulation on the 128 x 256 tile or the one-array
    /// promotion (tensor, row or block scales) on the 128 x 128 tile, its epilogue from registers.
    pub fn is_valid(self) -> bool {
        if self.pair {
            return !self.overlap
                && !self.staged
                && match self.tile {
                    Fp8Tile::Wide => self.accumulation == Fp8Accumulation::Fast && !self.block_scales,
                    Fp8Tile::Square => self.accumulation == Fp8Accumulation::Promoted,
                    Fp8Tile::Mid => false,
                };
        }
        if self.overlap && self.accumulation != Fp8Accumulation::Promoted {
            return false;
        }
        if self.staged
            && (self.overlap
                || self.accumulation != Fp8Accumulation::Promoted
                || self.tile != Fp8Tile::Square)
        {
            return false;
        }
        match self.tile {
            Fp8Tile::Wide => self.accumulation == Fp8Accumulation::Fast && !self.block_scales,
            Fp8Tile::Square => !self.block_scales || self.accumulation == Fp8Accumulation::Promoted,
            Fp8Tile::Mid => {
                self.accumulation == Fp8Accumulation::Promoted && !self.block_scales && !self.overlap
            }
        }
    }

    /// Every plan with a kernel (for tests that must reach each).
    pub const ALL: [Fp8Plan; 12] = [
        Fp8Plan {
            tile: Fp8Tile::Wide,
            accumulation: Fp8Accumulation::Fast,
            block_scales: false,
            overlap: false,
            staged: false,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Fast,
            block_scales: false,
            overlap: false,
            staged: false,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: false,
            overlap: false,
            staged: false,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: true,
            overlap: false,
            staged: false,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: false,
            overlap: true,
            staged: false,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: true,
            overlap: true,
            staged: false,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: false,
            overlap: false,
            staged: true,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: true,
            overlap: false,
            staged: true,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Mid,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: false,
            overlap: false,
            staged: false,
            pair: false,
        },
        Fp8Plan {
            tile: Fp8Tile::Wide,
            accumulation: Fp8Accumulation::Fast,
            block_scales: false,
            overlap: false,
            staged: false,
            pair: true,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: false,
            overlap: false,
            staged: false,
            pair: true,
        },
        Fp8Plan {
            tile: Fp8Tile::Square,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: true,
            overlap: false,
            staged: false,
            pair: true,
        },
    ];

    /// `fast-128x256`, `fast-128x128`, `promoted-128x128`, `block-128x128`,
    /// `promoted-overlap-128x128`, `block-overlap-128x128`, `promoted-staged-128x128`,
    /// `block-staged-128x128`, `promoted-128x192`, `fast-pair-128x256`, `promoted-pair-128x128`,
    /// `block-pair-128x128`: the kernel's name without the `matmul_fp8_` prefix and the output.
    pub fn name(self) -> &'static str {
        if self.pair {
            return match (self.block_scales, self.accumulation, self.tile) {
                (true, _, _) => "block-pair-128x128",
                (false, Fp8Accumulation::Fast, Fp8Tile::Wide) => "fast-pair-128x256",
                (false, Fp8Accumulation::Promoted, Fp8Tile::Square) => "promoted-pair-128x128",
                // No kernel (`is_valid` is false): named for the error that refuses it.
                (false, Fp8Accumulation::Fast, _) => "fast-pair-128x128",
                (false, Fp8Accumulation::Promoted, _) => "promoted-pair-128x192",
            };
        }
        match (self.block_scales, self.accumulation, self.tile) {
            (true, _, _) if self.staged => "block-staged-128x128",
            (false, _, _) if self.staged => "promoted-staged-128x128",
            (true, _, _) if self.overlap => "block-overlap-128x128",
            (false, Fp8Accumulation::Promoted, _) if self.overlap => "promoted-overlap-128x128",
            (true, _, _) => "block-128x128",
            (false, Fp8Accumulation::Fast, Fp8Tile::Wide) => "fast-128x256",
            (false, Fp8Accumulation::Fast, Fp8Tile::Square) => "fast-128x128",
            // No kernel (`is_valid` is false): named for the error that refuses it.
            (false, Fp8Accumulation::Fast, Fp8Tile::Mid) => "fast-128x192",
            (false, Fp8Accumulation::Promoted, Fp8Tile::Mid) => "promoted-128x192",
            (false, Fp8Accumulation::Promoted, _) => "promoted-128x128",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMS: usize = 132;

    #[test]
    fn fast_takes_the_wide_tile_where_it_fills_a_wave() {
        let t = (Fp8Scaling::Tensor, Fp8Scaling::Tensor);
        // 4096^2: 512 tiles of 128 x 256.
        let p = Fp8Plan::choose((4096, 4096), t, Fp8Accumulation::Fast, SMS, true);
        assert_eq!(
            (p.tile, p.accumulation, p.block_scales),
            (Fp8Tile::Wide, Fp8Accumulation::Fast, false)
        );
        // 1024^2: 32 tiles of 128 x 256, 64 of 128 x 128.
        let p = Fp8Plan::choose((1024, 1024), t, Fp8Accumulation::Fast, SMS, true);
        assert_eq!(p.tile, Fp8Tile::Square);
        // The threshold: 119 tiles of 132 SMs is 90.2%.
        let p = Fp8Plan::choose((128 * 119, 256), t, Fp8Accumulation::Fast, SMS, true);
        assert_eq!(p.tile, Fp8Tile::Wide);
        let p = Fp8Plan::choose((128 * 118, 256), t, Fp8Accumulation::Fast, SMS, true);
        assert_eq!(p.tile, Fp8Tile::Square);
    }

    #[test]
    fn promoted_takes_the_mid_tile_where_its_rounds_do_less_work() {
        let rows = (Fp8Scaling::Row, Fp8Scaling::Row);
        let promoted = Fp8Accumulation::Promoted;
        // 8192^2: 21 rounds of 2752 tiles against 32 of 4096 (63 < 64).
        assert!(mid_takes_fewer_rounds((8192, 8192), SMS));
        let p = Fp8Plan::choose((8192, 8192), rows, promoted, SMS, true);
        assert_eq!((p.tile, p.name()), (Fp8Tile::Mid, "promoted-128x192"));
        assert!(p.is_valid());
        // Not for an f32 result or E5M2 operands (no such kernel).
        assert_eq!(
            Fp8Plan::choose((8192, 8192), rows, promoted, SMS, false).tile,
            Fp8Tile::Square
        );
        // 4096^2: 6 rounds of 704 against 8 of 1024 (18 > 16).
        assert!(!mid_takes_fewer_rounds((4096, 4096), SMS));
        assert_eq!(
            Fp8Plan::choose((4096, 4096), rows, promoted, SMS, true).tile,
            Fp8Tile::Square
        );
        // The boundary along one row of tiles: n = 132 * 192 is one round of mid tiles (132)
        // against two of square ones (198): 3 < 4, taken; n = 264 * 192, two mid rounds against
        // three square ones (396 tiles): 6 = 6, not taken; n = 132 * 128, one round of each
        // (88 mid tiles): 3 > 2, not taken.
        assert!(!mid_takes_fewer_rounds((128, 264 * 192), SMS));
        assert!(mid_takes_fewer_rounds((128, 132 * 192), SMS));
        assert!(!mid_takes_fewer_rounds((128, 132 * 128), SMS));
        // Block scales and fast accumulation never take it.
        let blocks = (Fp8Scaling::Block1x128, Fp8Scaling::Block128x128);
        assert_eq!(
            Fp8Plan::choose((8192, 8192), blocks, promoted, SMS, true).tile,
            Fp8Tile::Square
        );
        assert_ne!(
            Fp8Plan::choose((8192, 8192), rows, Fp8Accumulation::Fast, SMS, true).tile,
            Fp8Tile::Mid
        );
    }

    #[test]
    fn promoted_and_block_take_the_square_tile() {
        let rows = (Fp8Scaling::Row, Fp8Scaling::Row);
        let p = Fp8Plan::choose((4096, 4096), rows, Fp8Accumulation::Promoted, SMS, true);
        assert_eq!(
            (p.tile, p.accumulation),
            (Fp8Tile::Square, Fp8Accumulation::Promoted)
        );
        let blocks = (Fp8Scaling::Block1x128, Fp8Scaling::Block128x128);
        // Block scales promote whatever was asked.
        let p = Fp8Plan::choose((8192, 8192), blocks, Fp8Accumulation::Fast, SMS, true);
        assert_eq!(
            (p.tile, p.accumulation, p.block_scales),
            (Fp8Tile::Square, Fp8Accumulation::Promoted, true)
        );
        // The promotion waits for each step's products (`OVERLAP_PROMOTION` false), for block
        // scales and for promoted tensor or row scales; fast accumulation never promotes.
        assert_eq!(p.name(), "block-128x128");
        let p = Fp8Plan::choose((4096, 4096), rows, Fp8Accumulation::Promoted, SMS, true);
        assert_eq!(p.name(), "promoted-128x128");
        let p = Fp8Plan::choose((8192, 8192), rows, Fp8Accumulation::Fast, SMS, true);
        assert!(!p.overlap);
    }

    #[test]
    fn every_listed_plan_is_valid_and_named_once() {
        let names: std::collections::HashSet<_> = Fp8Plan::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), Fp8Plan::ALL.len());
        assert!(Fp8Plan::ALL.iter().all(|p| p.is_valid()));
        let wide_promoted = Fp8Plan {
            tile: Fp8Tile::Wide,
            accumulation: Fp8Accumulation::Promoted,
            block_scales: false,
            overlap: false,
            staged: false,
            pair: false,
        };
        assert!(!wide_promoted.is_valid());
        let fast_overlap = Fp8Plan {
            overlap: true,
            ..Fp8Plan::ALL[1]
        };
        assert!(!fast_overlap.is_valid());
        // The 128 x 192 tile: the one-array promotion of tensor or row scales only.
        let mid = Fp8Plan::ALL[8];
        assert_eq!((mid.tile, mid.name()), (Fp8Tile::Mid, "promoted-128x192"));
        for bad in [
            Fp8Plan {
                accumulation: Fp8Accumulation::Fast,
                ..mid
            },
            Fp8Plan {
                block_scales: true,
                ..mid
            },
            Fp8Plan { overlap: true, ..mid },
        ] {
            assert!(
                !bad.is_valid(),
                "{bad:?}: the 128 x 192 tile promotes in one array only"
            );
        }
        for bad in [
            Fp8Plan {
                staged: true,
                ..Fp8Plan::ALL[0]
            },
            Fp8Plan {
                staged: true,
                ..Fp8Plan::ALL[1]
            },
            Fp8Plan {
                staged: true,
                ..Fp8Plan::ALL[4]
            },
            Fp8Plan {
                staged: true,
                ..Fp8Plan::ALL[8]
            },
        ] {
            assert!(
                !bad.is_valid(),
                "{bad:?}: staged runs the one-array promotion only"
            );
        }
    }

    #[test]
    fn pairs_run_the_wide_fast_and_the_square_one_array_kernels_only() {
        let pairs: Vec<&str> = Fp8Plan::ALL.iter().filter(|p| p.pair).map(|p| p.name()).collect();
        assert_eq!(
            pairs,
            ["fast-pair-128x256", "promoted-pair-128x128", "block-pair-128x128"]
        );
        for (i, plan) in Fp8Plan::ALL.iter().enumerate() {
            let paired = Fp8Plan { pair: true, ..*plan };
            // The fast 128 x 256, promoted and block 128 x 128 plans, and the pairs themselves.
            let has_pair = matches!(i, 0 | 2 | 3) || plan.pair;
            assert_eq!(paired.is_valid(), has_pair, "{}", plan.name());
        }
        // Not chosen until timed.
        let rows = (Fp8Scaling::Row, Fp8Scaling::Row);
        for acc in [Fp8Accumulation::Fast, Fp8Accumulation::Promoted] {
            let p = Fp8Plan::choose((8192, 8192), rows, acc, SMS, true);
            assert_eq!(p.pair, PAIR_CLUSTERS && p.is_valid());
            assert!(!Fp8Plan::choose((8192, 8192), rows, acc, SMS, false).pair);
        }
    }

    #[test]
    fn the_staged_epilogue_is_not_chosen_until_timed() {
        let rows = (Fp8Scaling::Row, Fp8Scaling::Row);
        let blocks = (Fp8Scaling::Block1x128, Fp8Scaling::Block128x128);
        for (scales, acc) in [
            (rows, Fp8Accumulation::Promoted),
            (rows, Fp8Accumulation::Fast),
            (blocks, Fp8Accumulation::Promoted),
        ] {
            for n in [4096, 4092, 8] {
                for staged_result in [true, false] {
                    let p = Fp8Plan::choose((4096, n), scales, acc, SMS, staged_result);
                    let promoted = p.accumulation == Fp8Accumulation::Promoted;
                    let want = STAGED_EPILOGUE && staged_result && n % STAGED_COLUMNS == 0 && promoted;
                    assert_eq!(p.staged, want, "{n}, {acc:?}, {staged_result}");
                    assert!(p.is_valid());
                }
            }
        }
    }

    #[test]
    fn promoted_bound_stops_growing_with_k_but_fast_does_not() {
        let (f, p) = (Fp8Accumulation::Fast, Fp8Accumulation::Promoted);
        assert!(f.error_factor(8192) > 60.0 * p.error_factor(8192));
        assert!(p.error_factor(8192) < 4.5 * FP8_ACCUMULATION_UNIT);
        assert!((f.error_factor(32) - p.error_factor(32)).abs() < 1e-6);
    }
}
