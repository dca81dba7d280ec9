//! The Hopper rung of the decode products (`kernels_gpu::matmul::decode_wgmma`, sm_90a): its
//! tiles ([`DecodeTile`]), the wave-aware choice of tile and slices of `k`
//! ([`DecodePlan::choose_wgmma`], a pure function of the shape and the SM count), the two tensor
//! maps and the launches.

use half::bf16;
use kernels_gpu::matmul::decode_wgmma::{DECODE_WGMMA_BK, DECODE_WGMMA_ROWS};
use kernels_gpu::matmul::wgmma::MAP_WORDS;

use super::decode::{DecodeOutput, DecodePlan, DecodeTile, sum_planes, wgmma_launcher};
use super::wgmma::{MapMatrix, encode};
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

/// The operation's name in errors.
const OP: &str = "matmul_decode";

/// Most slices of `k` [`DecodePlan::choose_wgmma`] makes.
const WGMMA_MAX_SLICES: usize = 16;
/// Shortest slice of `k` [`DecodePlan::choose_wgmma`] makes (but for one slice): 8 steps of 64,
/// so that the ring (5, 6 or 8 stages) fills and runs before the block ends.
const WGMMA_MIN_SLICE_K: usize = 512;
/// The cost model's assumption: a multiprocessor streams the weight at most this many times its
/// fair share of the DRAM's rate (the rate over the SMs), the ring keeping up to 200 KiB of
/// copies in flight per SM. Below it, the fewer blocks of a last partial wave still keep the DRAM
/// busy; past it, the busiest SM sets the time. Measured since, it is generous: at 8 x 28672 x
/// 8192 on the H200 (ncu), 112 blocks of 256 rows kept DRAM at 79.43% of its peak and 128 blocks
/// of 224 rows at 81.74% (`bench/experiments/h200-logs/374f3a6-ncu-decode-gemm-m8.log`,
/// `7b3df33-ncu-decode-gemm-m8-224.log`), so idle SMs cost more than the model says; the
/// tie-break toward the fuller last wave is what picks the 224-row tile there.
const SM_RATE_SHARES: usize = 2;

impl DecodePlan {
    /// The elements of `k` per slice of the Hopper rung for `slices` slices: `ceil(k / slices)`
    /// rounded up to a multiple of 64 (the ring's step), at least 64.
    pub fn wgmma_k_split(k: usize, slices: usize) -> usize {
        k.div_ceil(slices.max(1)).div_ceil(DECODE_WGMMA_BK).max(1) * DECODE_WGMMA_BK
    }

    /// The slices this plan launches for `k` (none empty): 1 for the tutorial rung, else
    /// `ceil(k / k_split)` of its rung's rounding (at most the slices asked for).
    pub fn launched(self, k: usize) -> usize {
        match self {
            DecodePlan::Naive => 1,
            DecodePlan::Mma { slices, .. } | DecodePlan::Rows { slices, .. } => {
                DecodePlan::launched_slices(k, slices)
            }
            DecodePlan::Wgmma { slices, .. } => k.div_ceil(DecodePlan::wgmma_k_split(k, slices)).max(1),
            DecodePlan::StreamK { .. } => 1,
        }
    }

    /// The Hopper rung's tile and slices of `k` for `m x k` times `(n x k)^T` on
    /// `multiprocessors` SMs (one block per SM), a wave-aware choice by a cost model in bytes:
    /// for each tile (256, 224 or 128 rows of `W`) and each number of slices (1 to 16, slices of
    /// at least 512 elements but for one), the cost is
    /// `max(W / SMs, busiest / SM_RATE_SHARES) + partials / SMs`, where `busiest` is the weight
    /// the most loaded SM streams (`ceil(blocks / SMs)` blocks of `rows 2 k_split` bytes each),
    /// and `partials` the f32 partial products a split writes and reads again (`8 slices m n`
    /// bytes; none for one slice). The cheapest wins; ties go to fewer slices, then to the tile
    /// with more blocks in its last wave (more SMs streaming), then to the wider tile. On an H200
    /// (132 SMs): `n = 28672, k = 8192` keeps `k` whole on 128 blocks of 224 rows at every `m`
    /// (tied in cost with 112 blocks of 256 rows, which leave 20 SMs idle); `n = 8192, k = 8192`
    /// takes 64 blocks of 128 rows, `k` whole (the unit tests list more). The bench's
    /// `gpukern:wgmma-*` rows time the other tiles and splits beside it.
    pub fn choose_wgmma(m: usize, n: usize, k: usize, multiprocessors: usize) -> DecodePlan {
        let sm_count = multiprocessors.max(1);
        let sms = sm_count as f64;
        let weight = 2.0 * n as f64 * k as f64;
        // The cheapest (cost, slices, blocks in the last wave, plan) so far.
        let mut best: Option<(f64, usize, usize, DecodePlan)> = None;
        for slices in 1..=WGMMA_MAX_SLICES {
            let split = DecodePlan::wgmma_k_split(k, slices);
            if slices > 1 && split < WGMMA_MIN_SLICE_K {
                break;
            }
            let launched = k.div_ceil(split).max(1);
            if launched < slices {
                // The same launch as a smaller count already priced.
                continue;
            }
            for tile in [DecodeTile::Rows256, DecodeTile::Rows224, DecodeTile::Rows128] {
                let blocks = n.div_ceil(tile.rows()) * launched;
                let waves = blocks.div_ceil(sm_count);
                let last_wave = blocks - (waves - 1) * sm_count;
                let busiest = waves as f64 * 2.0 * (tile.rows() * split) as f64;
                let partials = if launched > 1 {
                    8.0 * (launched * m * n) as f64
                } else {
                    0.0
                };
                let cost = (weight / sms).max(busiest / SM_RATE_SHARES as f64) + partials / sms;
                let plan = DecodePlan::Wgmma { tile, slices };
                // Strictly cheaper; or as cheap, as many slices and more SMs busy in the last
                // wave. Otherwise the earlier candidate (fewer slices, wider tile) keeps a tie.
                let better = best.is_none_or(|(c, s, last, _)| {
                    cost < c * (1.0 - 1e-9) || (cost <= c * (1.0 + 1e-9) && slices == s && last_wave > last)
                });
                if better {
                    best = Some((cost, slices, last_wave, plan));
                }
            }
        }
        best.map_or(
            DecodePlan::Wgmma {
                tile: DecodeTile::Rows256,
                slices: 1,
            },
            |(_, _, _, plan)| plan,
        )
    }
}

impl Gpu {
    /// Runs the Hopper rung on checked operands (`1 <= m`, `1 <= n`): the applicability checks
    /// again, the maps, one launch writing `Y` (one slice) or the partial planes and their sum.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_decode_wgmma<O: DecodeOutput>(
        &self,
        tile: DecodeTile,
        slices: usize,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        y: &mut DeviceMatrix<O>,
        (m, k, n): (usize, usize, usize),
        workspace: Option<&mut DeviceVec<f32>>,
    ) -> Result<()> {
        self.check_decode_wgmma(x, w, (m, k, n))?;
        let plan = DecodePlan::Wgmma { tile, slices };
        let (k_split, launched) = (DecodePlan::wgmma_k_split(k, slices), plan.launched(k));
        let t = tile.tiling();
        let too_many = || Error::TooLarge {
            op: OP,
            detail: format!("n = {n} or {launched} slices of k exceed the grid's limits"),
        };
        let cfg = self.decode_launch(
            tile,
            (
                u32::try_from(n.div_ceil(t.block_cols)).map_err(|_| too_many())?,
                u32::try_from(launched).map_err(|_| too_many())?,
            ),
        )?;
        let maps = self.decode_maps(x, w, (m, k, n), t.block_cols)?;
        if launched == 1 {
            // SAFETY: `maps` holds the maps of `x` (m x k, box 64 x 64) and `w` (n x k, box
            // BN x 64), bf16, 128-byte swizzle, zero fill, BN the tile's; `x`, `w` hold m*k, n*k
            // bf16, 16-byte aligned, read only; `y` m*n elements (one plane); `1 <= m <= 64`,
            // `k % 8 == 0`, `k_split` a positive multiple of 64 with one slice; `cfg` is the
            // kernel's launch (384 threads, its grid and shared memory) on the sm_90a module (or
            // the simulator).
            return unsafe {
                wgmma_launcher::<O>(tile)(
                    &self.library(),
                    cfg,
                    maps.view(),
                    x.data.view(),
                    w.data.view(),
                    y.data.view_mut(),
                    m,
                    n,
                    k,
                    k_split,
                )
            };
        }
        let mut owned = None;
        let partial = self.decode_partials(workspace, &mut owned, launched, m, n)?;
        // SAFETY: as above, `partial` holds `launched * m * n` floats for the planes.
        unsafe {
            wgmma_launcher::<f32>(tile)(
                &self.library(),
                cfg,
                maps.view(),
                x.data.view(),
                w.data.view(),
                partial.view_mut(),
                m,
                n,
                k,
                k_split,
            )
        }?;
        // SAFETY: `partial` holds `launched * m * n` floats written by that launch, `y` m*n.
        unsafe { sum_planes(self, partial, &mut y.data, m * n, launched) }
    }

    /// The launch of a Hopper decode kernel of `tile` (either form) on a grid of `(x, y)` blocks:
    /// its 384 threads and shared memory, checked against the device's opted-in limits.
    pub(super) fn decode_launch(&self, tile: DecodeTile, (x, y): (u32, u32)) -> Result<LaunchConfig> {
        let t = tile.tiling();
        LaunchConfig {
            grid: (x, y, 1),
            block: (t.threads(), 1, 1),
            shared_mem_bytes: t.shared_bytes(),
        }
        .checked(OP, &self.limits().opted_in())
    }

    /// The tensor maps of `X` (`m x k`, boxes of `64 x 64`) and `W` (`n x k`, boxes of `bn x 64`)
    /// in device memory, cached per stream handle (zeros in the simulator, whose copies read
    /// the matrices directly).
    pub(super) fn decode_maps(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        mkn: (usize, usize, usize),
        bn: usize,
    ) -> Result<std::sync::Arc<DeviceVec<u64>>> {
        let words = self.decode_map_words(x, w, mkn, bn)?;
        self.cached_maps(&words)
    }

    /// Whether [`Gpu::launch_decode_wgmma`] of `tile` would find its maps in device memory
    /// already (so that it uploads nothing, as a capture needs).
    pub(super) fn decode_maps_cached(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        mkn: (usize, usize, usize),
        tile: DecodeTile,
    ) -> Result<bool> {
        let words = self.decode_map_words(x, w, mkn, tile.rows())?;
        Ok(self.maps_cached(&words))
    }

    /// The words of the two maps, side by side (zeros in the simulator).
    fn decode_map_words(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        (m, k, n): (usize, usize, usize),
        bn: usize,
    ) -> Result<Vec<u64>> {
        use cudarc::driver::sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 as BF16;
        if let Backend::Simulator = self.backend {
            return Ok(vec![0u64; 2 * MAP_WORDS]);
        }
        let matrix = |address: usize, rows: usize| MapMatrix {
            kind: BF16,
            bytes: 2,
            address,
            rows,
            cols: k,
            stride: k,
        };
        let mut words = encode(matrix(x.data.address(), m), DECODE_WGMMA_ROWS)?.to_vec();
        words.extend(encode(matrix(w.data.address(), n), bn)?);
        Ok(words)
    }
}

#[cfg(test)]
mod tests {
    use super::super::decode::{DecodePlan, DecodeTile, WGMMA_MIN_M};

    fn plan(m: usize, n: usize, k: usize, sms: usize) -> (usize, usize) {
        match DecodePlan::choose_wgmma(m, n, k, sms) {
            DecodePlan::Wgmma { tile, slices } => (tile.rows(), slices),
            other => panic!("choose_wgmma gave {other:?}"),
        }
    }

    /// The shapes on an H200 (132 SMs): the weight of 28672 rows in 128 blocks of 224
    /// rows, `k` whole at every `m` (one wave as 112 blocks of 256 rows are, but on 128 SMs
    /// rather than 112: the tie-break; a split would only add partial products); 8192 rows in
    /// 64 blocks of 128, `k` whole at `m = 64` and in 2 slices at `m = 1` (where the partial
    /// products are small); 4096 x 4096 in 2 slices at `m = 64`, 3 at `m = 1`.
    #[test]
    fn h200_shapes() {
        for m in [1, 8, 9, 64] {
            assert_eq!(plan(m, 28672, 8192, 132), (224, 1), "m {m}");
        }
        assert_eq!(plan(64, 8192, 8192, 132), (128, 1));
        assert_eq!(plan(1, 8192, 8192, 132), (128, 2));
        assert_eq!(plan(64, 4096, 4096, 132), (128, 2));
        assert_eq!(plan(1, 4096, 4096, 132), (128, 3));
    }

    /// Splits where the rows give few blocks, stops at 16 slices and at slices of 512, and
    /// weighs the partial products against `m`.
    #[test]
    fn splits() {
        // One block of rows on 132 SMs: as many slices as the 512-element floor allows.
        assert_eq!(plan(1, 128, 8192, 132), (128, 16));
        assert_eq!(plan(1, 128, 4096, 132), (128, 8));
        // k too short to split: half of it is under 512.
        assert_eq!(plan(1, 128, 1000, 132), (128, 2));
        assert_eq!(plan(1, 128, 960, 132), (128, 2));
        assert_eq!(plan(1, 128, 512, 132), (128, 1));
        // One SM: nothing to balance, k whole.
        assert_eq!(plan(64, 28672, 8192, 1), (256, 1));
        // More rows of X make the partial products dearer: fewer slices at m = 64 than at 1.
        assert_eq!(plan(1, 1024, 8192, 132), (128, 9));
        assert_eq!(plan(64, 1024, 8192, 132), (128, 8));
    }

    /// Ties in cost go to the tile that keeps more SMs busy in its last wave: on 112 SMs the 112
    /// blocks of 256 rows fill one wave, where 224 rows would leave 16 blocks to a second.
    #[test]
    fn ties_go_to_the_fuller_last_wave() {
        assert_eq!(plan(8, 28672, 8192, 112), (256, 1));
        assert_eq!(plan(8, 28672, 8192, 128), (224, 1));
    }

    /// The slices cover `k` in multiples of 64, none empty, at most those asked for.
    #[test]
    fn k_split_covers_k() {
        for k in [8, 64, 100, 1000, 4096, 8192, 28672, 8200] {
            for s in 1..=16 {
                let p = DecodePlan::Wgmma {
                    tile: DecodeTile::Rows256,
                    slices: s,
                };
                let (split, launched) = (DecodePlan::wgmma_k_split(k, s), p.launched(k));
                assert_eq!(split % 64, 0);
                assert!(launched >= 1 && launched <= s, "k {k} s {s}");
                assert!(split * launched >= k && split * (launched - 1) < k, "k {k} s {s}");
            }
        }
    }

    /// `DecodePlan::choose` takes the Hopper rung from `WGMMA_MIN_M` on where it has it, the
    /// `mma.sync` rung below it or without it, the tutorial rung where neither applies.
    #[test]
    fn choose_takes_the_hopper_rung_from_wgmma_min_m() {
        let is_wgmma = |m, wgmma| {
            matches!(
                DecodePlan::choose(m, 28672, 8192, 132, true, wgmma),
                DecodePlan::Wgmma { .. }
            )
        };
        assert!(is_wgmma(WGMMA_MIN_M, true));
        assert!(!is_wgmma(WGMMA_MIN_M - 1, true));
        assert!(is_wgmma(64, true));
        assert!(!is_wgmma(2, false));
        assert!(!is_wgmma(64, false));
        assert_eq!(
            DecodePlan::choose(64, 128, 1020, 132, true, true),
            DecodePlan::Naive
        );
        assert_eq!(
            DecodePlan::choose(65, 128, 1024, 132, true, true),
            DecodePlan::Naive
        );
    }
}
