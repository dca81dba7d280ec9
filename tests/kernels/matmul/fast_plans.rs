//! The fast matmul kernels ([`MatmulAlgorithm::Fast`]) in the CPU simulator, against
//! [`gpukern::cpu::matmul`]: every kernel (both tilings, 16-byte and scalar global accesses, with
//! and without a split of `k`) on shapes that cross every tile edge, and the plan table that
//! picks among them. Plain test functions (they fail by panicking), run as `sim::matmul::<name>`.
//!
//! Shapes are small: the simulator checks every access of every thread, and a block of the large
//! tiling is 256 threads doing 64 multiply-adds per step.

use gpukern::ops::matmul::{FastPlan, FastTile, SIMULATED_MULTIPROCESSORS};
use gpukern::{Error, Gpu, MatmulAlgorithm, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;

use crate::common::trial::plain_trials;
use crate::common::{self, random_matrix};

/// The trials of this file.
pub(super) fn trials() -> Vec<Trial> {
    plain_trials!(
        "matmul",
        [
            large_tiling_matches_cpu,
            small_tiling_matches_cpu,
            wide_tiling_matches_cpu,
            split_k_matches_cpu,
            default_is_fast_and_matches_cpu,
            empty_shapes,
            too_many_rows_is_too_large,
            plans_for_benchmark_shapes,
            k_split_covers_k,
        ]
    )
}

/// Each element within this fraction of `sum_i |A[r][i] * B[i][c]|` of the f64 reference: f32
/// fused multiply-adds over `k` terms drift like `sqrt(k) * 2^-24`, far below.
const REL_TOL: f64 = 1e-5;

/// `(m, k, n)` products for the large tiling (128 x 128, `BK` = 16; 8 for the scalar kernel), with `k` and `n` multiples of
/// 4 (16-byte kernel) or not (scalar kernel): edges of the block tile in `m` and `n`, a partial
/// last step in `k`, and the smallest cases.
const LARGE_SHAPES: [(usize, usize, usize); 5] =
    [(1, 1, 1), (7, 31, 33), (129, 20, 132), (130, 13, 129), (3, 12, 4)];

/// `(m, k, n)` products for the small tiling (64 x 64, `BK` = 16).
const SMALL_SHAPES: [(usize, usize, usize); 5] = [
    (1, 1, 1),
    (65, 36, 68),
    (129, 65, 130),
    (200, 17, 300),
    (63, 33, 1),
];

/// `A * B` through `matmul_fast_into` with `plan`, into an output poisoned with NaN, checked
/// element by element against `cpu::matmul`.
fn check_plan(gpu: &Gpu, (m, k, n): (usize, usize, usize), plan: FastPlan) {
    let what = format!("{m}x{k}x{n} with {plan:?}");
    let mut rng = common::rng_for(&what);
    let (a, b) = (random_matrix(&mut rng, m, k), random_matrix(&mut rng, k, n));
    let want = cpu::matmul(&a, &b).unwrap();
    let (da, db) = (gpu.upload_matrix(&a).unwrap(), gpu.upload_matrix(&b).unwrap());
    let mut dc = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN)).unwrap();
    gpu.matmul_fast_into(&da, &db, &mut dc, plan)
        .unwrap_or_else(|e| panic!("{what}: {e} ({})", common::seed_hint()));
    let got = dc.to_array().unwrap();
    for r in 0..m {
        for c in 0..n {
            let scale: f64 = (0..k).map(|i| f64::from(a[[r, i]] * b[[i, c]]).abs()).sum();
            let err = (f64::from(got[[r, c]]) - f64::from(want[[r, c]])).abs();
            assert!(
                err <= REL_TOL * scale + 1e-30,
                "{what}: C[{r}][{c}] = {}, want {} ({})",
                got[[r, c]],
                want[[r, c]],
                common::seed_hint()
            );
        }
    }
}

fn plan(tile: FastTile, slices: usize) -> FastPlan {
    FastPlan { tile, slices }
}

fn large_tiling_matches_cpu() {
    let gpu = Gpu::simulator();
    for shape in LARGE_SHAPES {
        check_plan(&gpu, shape, plan(FastTile::Large, 1));
    }
}

fn small_tiling_matches_cpu() {
    let gpu = Gpu::simulator();
    for shape in SMALL_SHAPES {
        check_plan(&gpu, shape, plan(FastTile::Small, 1));
    }
}

/// `(m, k, n)` products for the wide tiling (128 x 256, `BK` = 8, three `cp.async` stages): edges
/// of the block tile, more tiles of `k` than stages, and the smallest case.
const WIDE_SHAPES: [(usize, usize, usize); 4] = [(1, 1, 1), (130, 44, 260), (129, 37, 257), (3, 12, 4)];

fn wide_tiling_matches_cpu() {
    let gpu = Gpu::simulator();
    for shape in WIDE_SHAPES {
        check_plan(&gpu, shape, plan(FastTile::Wide, 1));
    }
}

/// Slices of `k`, with ragged last slices, on every tiling and both kinds of global access.
fn split_k_matches_cpu() {
    let gpu = Gpu::simulator();
    // k = 36 in 3 slices of 16, 16, 4 (small, 16-byte); k = 50 in 3 slices of 24, 24, 2 (large,
    // scalar); k = 300 asked in 7 slices of 48 (the last 12); more slices than tiles of k.
    check_plan(&gpu, (65, 36, 68), plan(FastTile::Small, 3));
    check_plan(&gpu, (5, 50, 9), plan(FastTile::Large, 3));
    check_plan(&gpu, (3, 300, 5), plan(FastTile::Small, 7));
    check_plan(&gpu, (2, 20, 4), plan(FastTile::Large, 16));
    check_plan(&gpu, (9, 52, 12), plan(FastTile::Wide, 3));
    check_plan(&gpu, (4, 41, 5), plan(FastTile::Wide, 2));
}

/// The default algorithm end to end, through `matmul`, `matmul_with` and the free function.
fn default_is_fast_and_matches_cpu() {
    assert_eq!(MatmulAlgorithm::default(), MatmulAlgorithm::Fast);
    // The fastest full-precision algorithm; only the opt-in TF32 one comes after it.
    let full: Vec<_> = MatmulAlgorithm::ALL
        .into_iter()
        .filter(|a| !a.uses_tf32())
        .collect();
    assert_eq!(full.last(), Some(&MatmulAlgorithm::Fast));
    assert_eq!(MatmulAlgorithm::ALL.last(), Some(&MatmulAlgorithm::Tf32));
    assert_eq!(MatmulAlgorithm::Fast.name(), "fast");
    let gpu = Gpu::simulator();
    let mut rng = common::rng_for("default_is_fast_and_matches_cpu");
    let (m, k, n) = (33, 300, 7);
    let (a, b) = (random_matrix(&mut rng, m, k), random_matrix(&mut rng, k, n));
    let want = cpu::matmul(&a, &b).unwrap();
    let (da, db) = (gpu.upload_matrix(&a).unwrap(), gpu.upload_matrix(&b).unwrap());
    let got = gpu.matmul(&da, &db).unwrap().to_array().unwrap();
    let err = cpu::rel_error(got.as_slice().unwrap(), want.as_slice().unwrap());
    assert!(
        err < REL_TOL,
        "{m}x{k}x{n}: relative error {err:e} ({})",
        common::seed_hint()
    );
}

/// An empty inner dimension gives zeros (every kernel variant still writes all of `C`); empty
/// outputs are fine; a plan of 0 slices is refused.
fn empty_shapes() {
    let gpu = Gpu::simulator();
    for p in [
        plan(FastTile::Large, 1),
        plan(FastTile::Small, 4),
        plan(FastTile::Wide, 1),
    ] {
        for (m, n) in [(5, 8), (3, 7)] {
            let a = gpu.upload_matrix(&Array2::<f32>::zeros((m, 0))).unwrap();
            let b = gpu.upload_matrix(&Array2::<f32>::zeros((0, n))).unwrap();
            let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN)).unwrap();
            gpu.matmul_fast_into(&a, &b, &mut c, p).unwrap();
            assert_eq!(
                c.to_array().unwrap(),
                Array2::<f32>::zeros((m, n)),
                "{m}x0x{n} {p:?}"
            );
        }
        for (m, k, n) in [(0, 3, 4), (4, 3, 0)] {
            let a = gpu.upload_matrix(&Array2::<f32>::ones((m, k))).unwrap();
            let b = gpu.upload_matrix(&Array2::<f32>::ones((k, n))).unwrap();
            let mut c = gpu.upload_matrix(&Array2::<f32>::zeros((m, n))).unwrap();
            gpu.matmul_fast_into(&a, &b, &mut c, p).unwrap();
        }
    }
    let a = gpu.upload_matrix(&Array2::<f32>::ones((2, 3))).unwrap();
    let b = gpu.upload_matrix(&Array2::<f32>::ones((3, 4))).unwrap();
    let mut c = gpu.upload_matrix(&Array2::<f32>::zeros((2, 4))).unwrap();
    let zero = gpu.matmul_fast_into(&a, &b, &mut c, plan(FastTile::Small, 0));
    assert!(matches!(zero, Err(Error::InvalidArgument { .. })), "{zero:?}");
    let mut wrong = gpu.upload_matrix(&Array2::<f32>::zeros((4, 2))).unwrap();
    let mismatch = gpu.matmul_fast_into(&a, &b, &mut wrong, plan(FastTile::Large, 1));
    assert!(
        matches!(mismatch, Err(Error::ShapeMismatch { .. })),
        "{mismatch:?}"
    );
}

/// Rows past the grid's `y` extent are refused with `TooLarge` naming the limit.
fn too_many_rows_is_too_large() {
    let gpu = Gpu::simulator();
    let max_y = gpu.limits().max_grid_dim[1] as usize;
    for p in [
        plan(FastTile::Large, 1),
        plan(FastTile::Small, 1),
        plan(FastTile::Wide, 1),
    ] {
        let m = max_y * p.tile.tiling().block_rows + 1;
        let a = gpu.upload_matrix(&Array2::<f32>::zeros((m, 0))).unwrap();
        let b = gpu.upload_matrix(&Array2::<f32>::zeros((0, 1))).unwrap();
        let mut c = gpu.upload_matrix(&Array2::<f32>::zeros((m, 1))).unwrap();
        match gpu.matmul_fast_into(&a, &b, &mut c, p) {
            Err(e @ Error::TooLarge { .. }) => assert!(e.to_string().contains(&max_y.to_string()), "{e}"),
            other => panic!("{m}x0x1 {p:?}: expected TooLarge, got {other:?}"),
        }
    }
}

/// The plan table of `FastPlan::choose` on the benchmark shapes `(m, n, k)` of an H200 (132
/// SMs), which the simulator also assumes.
fn plans_for_benchmark_shapes() {
    assert_eq!(SIMULATED_MULTIPROCESSORS, 132);
    let large = plan(FastTile::Large, 1);
    let cases = [
        ((8192, 8192, 8192), large),
        ((4096, 4096, 4096), large),
        ((2048, 2048, 2048), large),
        ((4097, 4095, 4093), large),
        ((4096, 4096, 64), large),
        ((1024, 1024, 1024), plan(FastTile::Small, 1)),
        ((1000, 1000, 1000), plan(FastTile::Small, 1)),
        ((512, 512, 512), plan(FastTile::Small, 2)),
        ((64, 4096, 4096), plan(FastTile::Small, 5)),
        ((1, 4096, 4096), plan(FastTile::Small, 5)),
        ((4096, 1, 4096), plan(FastTile::Small, 5)),
        ((7, 31, 33), plan(FastTile::Small, 1)),
        ((1, 1, 100_000), plan(FastTile::Small, 16)),
    ];
    for ((m, n, k), want) in cases {
        assert_eq!(FastPlan::choose(m, n, k, 132), want, "{m}x{n}x{k}");
    }
}

/// `k_split` covers `k` with whole tiles of `BK` and no empty slice.
fn k_split_covers_k() {
    for tile in FastTile::ALL {
        let bk = tile.tiling().block_k;
        for k in [0, 1, 7, 8, 15, 16, 17, 100, 4093, 4096] {
            for slices in 1..=17 {
                let p = plan(tile, slices);
                let (split, launched) = (p.k_split(k), p.launched_slices(k));
                assert!(split >= bk && split % bk == 0, "{p:?} k={k}: split {split}");
                assert!(
                    launched >= 1 && launched <= slices,
                    "{p:?} k={k}: {launched} slices"
                );
                assert!(
                    split * launched >= k,
                    "{p:?} k={k}: {launched} x {split} misses k"
                );
                assert!(k == 0 || split * (launched - 1) < k, "{p:?} k={k}: empty slice");
            }
        }
    }
}
