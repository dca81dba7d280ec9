//! The stream-K SGEMM (`matmul_stream_k_128x128_vec4` and its fixup, `Gpu::matmul_stream_k_into`)
//! against [`gpukern::cpu::matmul`] element by element, on grids of a few blocks so that most
//! tiles are split between blocks (ranges that cross tile boundaries, blocks with empty ranges,
//! tiles of up to seven contributors), ragged `m` and `n`, `k` below one step of 16; the
//! fallback where the 16-byte kernel cannot run; the schedule's arithmetic on its own
//! (`sim::matmul::stream_k_*`); the plan rule; and on CUDA the 4096^3 tail shape against the
//! data-parallel kernel (`cuda::matmul_stream_k::*`).

use gpukern::kernels::matmul::StreamKSchedule;
use gpukern::ops::matmul::{FastPlan, FastTile, StreamKPlan};
use gpukern::{Error, Gpu, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_matrix;
use crate::common::trial::{Target, plain_trials, trial};

/// Each element within this fraction of `sum_i |A[r][i] * B[i][c]|` of the f64 reference (as
/// `fast_plans`' check): a dropped or doubled partial tile is off by about the element itself.
const REL_TOL: f64 = 1e-5;

/// `(m, k, n, grids)`: products and the grids to run each on (`None`: the resident count, 2 in
/// the simulator). `k` and `n` multiples of 4 (the 16-byte kernel): 6 or 9 tiles of 128 x 128
/// with ragged edges, `k` of 4 steps with a partial last one, of one step (`k = 12 < 16`), and
/// of 20 steps.
const SIM_CASES: [(usize, usize, usize, &[Option<usize>]); 4] = [
    (200, 52, 260, &[None, Some(3), Some(4), Some(5), Some(16)]),
    (300, 100, 260, &[Some(4), Some(64)]),
    (130, 12, 132, &[None, Some(3)]),
    (129, 320, 256, &[Some(3), Some(7)]),
];

/// The simulator trials of this file.
pub(super) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = plain_trials!(
        "matmul",
        [
            stream_k_schedule_covers_the_line,
            stream_k_plan_rule,
            stream_k_rejects_bad_grids,
        ]
    );
    for (m, k, n, grids) in SIM_CASES {
        trials.push(trial(
            sim,
            &format!("matmul::stream_k::{m}x{k}x{n}"),
            move |gpu, rng| check_grids(gpu, rng, (m, k, n), grids),
        ));
    }
    // Not multiples of 4: the data-parallel scalar kernel computes it.
    trials.push(trial(sim, "matmul::stream_k::fallback_7x31x33", |gpu, rng| {
        check_grids(gpu, rng, (7, 31, 33), &[None, Some(3)])
    }));
    for (m, k, n, grids) in CUDA_CASES {
        trials.push(trial(
            cuda,
            &format!("matmul_stream_k::{m}x{k}x{n}"),
            move |gpu, rng| check_grids(gpu, rng, (m, k, n), grids),
        ));
    }
    trials.push(trial(
        cuda,
        "matmul_stream_k::4096x4096x4096_vs_data_parallel",
        |gpu, rng| against_data_parallel(gpu, rng, (4096, 4096, 4096)),
    ));
    trials.push(trial(
        cuda,
        "matmul_stream_k::8192x512x8192_vs_data_parallel",
        |gpu, rng| against_data_parallel(gpu, rng, (8192, 512, 8192)),
    ));
    trials
}

/// `(m, k, n, grids)` on CUDA, with the CPU reference (at most about 0.3 GFLOP each): grids of
/// 7 and 16 blocks, where almost every tile is split, and the resident grid (264 on an H200:
/// more blocks than tiles, a split-`k` in effect); long `k`; ragged edges.
const CUDA_CASES: [(usize, usize, usize, &[Option<usize>]); 3] = [
    (520, 1000, 516, &[None, Some(7), Some(16)]),
    (257, 4096, 260, &[None, Some(5), Some(16)]),
    (1000, 12, 1028, &[None, Some(7)]),
];

/// `A * B` through `matmul_stream_k_into` on each grid, into an output poisoned with NaN, each
/// element against `cpu::matmul`.
fn check_grids(
    gpu: &Gpu,
    rng: &mut StdRng,
    (m, k, n): (usize, usize, usize),
    grids: &[Option<usize>],
) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let want = cpu::matmul(&a, &b)?;
    let scale = abs_products(&a, &b);
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut failures = Vec::new();
    for &ctas in grids {
        let what = format!("{m}x{k}x{n} stream-K on {ctas:?} blocks");
        let mut dc = poisoned_matrix(gpu, m, n)?;
        let got = gpu
            .matmul_stream_k_into(&da, &db, &mut dc, ctas)
            .and_then(|()| dc.to_array());
        match got {
            Ok(got) => {
                if let Some(e) = first_bad_element(&got, &want, &scale) {
                    failures.push(format!("{what}: {e}"));
                }
            }
            Err(e) => failures.push(format!("{what}: {e}")),
        }
    }
    all_passed(failures)
}

/// `sum_i |A[r][i] * B[i][c]|` for every element: the scale of each element's rounding error.
fn abs_products(a: &Array2<f32>, b: &Array2<f32>) -> Array2<f64> {
    let (a, b) = (a.mapv(|x| f64::from(x).abs()), b.mapv(|x| f64::from(x).abs()));
    a.dot(&b)
}

/// The first element of `got` farther than `REL_TOL * scale` from `want` (NaN included).
fn first_bad_element(got: &Array2<f32>, want: &Array2<f32>, scale: &Array2<f64>) -> Option<String> {
    got.indexed_iter().find_map(|((r, c), &g)| {
        let err = (f64::from(g) - f64::from(want[[r, c]])).abs();
        // A NaN fails too.
        (err.is_nan() || err > REL_TOL * scale[[r, c]] + 1e-30)
            .then(|| format!("C[{r}][{c}] = {g}, want {}", want[[r, c]]))
    })
}

/// On CUDA, a product too large for the CPU reference: stream-K on the resident grid (the
/// tail-wave shape it is for) against the data-parallel 128 x 128 kernel on the same inputs
/// (checked against the CPU elsewhere), to the two kernels' f32 rounding: they differ only in
/// where the split tiles' sums are cut.
fn against_data_parallel(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut dp = poisoned_matrix(gpu, m, n)?;
    let whole = FastPlan {
        tile: FastTile::Large,
        slices: 1,
    };
    gpu.matmul_fast_into(&da, &db, &mut dp, whole)?;
    let mut sk = poisoned_matrix(gpu, m, n)?;
    gpu.matmul_stream_k_into(&da, &db, &mut sk, None)?;
    let (dp, sk) = (dp.to_array()?, sk.to_array()?);
    check_rel_error(
        &format!("{m}x{k}x{n} stream-K against data-parallel"),
        sk.as_slice().unwrap_or_default(),
        dp.as_slice().unwrap_or_default(),
        1e-5,
    )
}

/// Every schedule of up to 40 tiles, 12 steps per tile and 70 blocks, as `StreamKPlan` makes
/// them: the data-parallel tiles a whole number per block; the blocks' ranges tile the stream-K
/// line; `owner` names the block whose range holds each step; the slots of the partial tiles
/// that the kernel writes (first and last tile of a range) are distinct and exactly those the
/// fixup reads for each split tile.
fn stream_k_schedule_covers_the_line() {
    for tiles in 1..=40usize {
        for iters in 1..=12usize {
            for ctas in 1..=70usize {
                // An `m x n` of `tiles` tiles: one row of tiles.
                let plan = StreamKPlan::with_ctas(128, 128 * tiles, ctas);
                assert!(plan.fits(128, 128 * tiles), "{plan:?} for {tiles} tiles");
                let s = plan.schedule(128, 128 * tiles, 16 * iters).expect("fits 32 bits");
                assert_eq!(
                    (s.tiles, s.iters, s.ctas),
                    (tiles as u32, iters as u32, ctas as u32)
                );
                let (iters, ctas) = (iters as u32, ctas as u32);
                assert_eq!(s.dp_per_cta() * ctas, s.dp_tiles());
                let mut next = 0;
                // The slots each split tile's partials are in, as the kernel writes them.
                let mut written = vec![Vec::new(); s.sk_tiles as usize];
                for cta in 0..ctas {
                    let (begin, end) = s.range(cta);
                    assert_eq!(begin, next, "ranges are contiguous");
                    next = end;
                    for x in begin..end {
                        assert_eq!(s.owner(x), cta, "owner of step {x} ({s:?})");
                    }
                    // The kernel's walk: tiles `begin / iters ..` while they meet the range.
                    let mut j = begin / iters.max(1);
                    while begin < end && j * iters < end {
                        let tile_begin = j * iters;
                        let (from, to) = (begin.max(tile_begin), end.min(tile_begin + iters));
                        if from - tile_begin != 0 || to - tile_begin != iters {
                            written[j as usize].push(StreamKSchedule::slot(cta, begin, tile_begin));
                        }
                        j += 1;
                    }
                }
                assert_eq!(next, s.sk_iters(), "the ranges end at the line's end");
                let all: Vec<u32> = written.iter().flatten().copied().collect();
                let mut unique = all.clone();
                unique.sort_unstable();
                unique.dedup();
                assert_eq!(unique.len(), all.len(), "a slot written twice ({s:?})");
                // What the fixup reads.
                for (j, slots) in written.iter().enumerate() {
                    let tile_begin = j as u32 * iters;
                    let (first, last) = (s.owner(tile_begin), s.owner(tile_begin + iters - 1));
                    let read: Vec<u32> = if first == last {
                        Vec::new()
                    } else {
                        (first..=last)
                            .filter(|&c| s.range(c).0 < s.range(c).1)
                            .map(|c| StreamKSchedule::slot(c, s.range(c).0, tile_begin))
                            .collect()
                    };
                    assert_eq!(&read, slots, "tile {j} of {s:?}");
                }
            }
        }
    }
}

/// The rule of `StreamKPlan::choose` on an H200's resident count (264) and the shapes of the
/// SGEMM target, and `with_ctas`'s split.
fn stream_k_plan_rule() {
    let h200 = 264;
    // 1,024 tiles: 3 whole waves and 232 tiles.
    assert_eq!(
        StreamKPlan::choose(4096, 4096, 4096, h200),
        Some(StreamKPlan {
            ctas: 264,
            sk_tiles: 232
        })
    );
    // 4,096 tiles: 15 waves and 136 tiles (over half the grid: one wave of stream-K).
    assert_eq!(
        StreamKPlan::choose(8192, 8192, 8192, h200),
        Some(StreamKPlan {
            ctas: 264,
            sk_tiles: 136
        })
    );
    // 256 tiles: one wave, 97% full.
    assert_eq!(StreamKPlan::choose(2048, 2048, 2048, h200), None);
    // Short k, or whole waves.
    assert_eq!(StreamKPlan::choose(4096, 4096, 64, h200), None);
    assert_eq!(StreamKPlan::choose(128 * 264, 256, 4096, h200), None);
    // A small last wave (10 tiles) takes one whole wave more onto the line.
    assert_eq!(
        StreamKPlan::with_ctas(128, 128 * 274, h200),
        StreamKPlan {
            ctas: 264,
            sk_tiles: 274
        }
    );
    assert_eq!(
        StreamKPlan::with_ctas(128, 128 * 538, h200),
        StreamKPlan {
            ctas: 264,
            sk_tiles: 274
        }
    );
    // Fewer tiles than blocks: all on the line.
    assert_eq!(
        StreamKPlan::with_ctas(130, 260, 16),
        StreamKPlan {
            ctas: 16,
            sk_tiles: 6
        }
    );
}

/// A grid of 0 blocks is an [`Error::InvalidArgument`], not a launch.
fn stream_k_rejects_bad_grids() {
    let gpu = Gpu::simulator();
    let a = gpu.upload_matrix(&Array2::<f32>::ones((3, 4))).unwrap();
    let b = gpu.upload_matrix(&Array2::<f32>::ones((4, 8))).unwrap();
    let mut c = poisoned_matrix(&gpu, 3, 8).unwrap();
    match gpu.matmul_stream_k_into(&a, &b, &mut c, Some(0)) {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!("0 blocks: expected InvalidArgument, got {other:?}"),
    }
}
