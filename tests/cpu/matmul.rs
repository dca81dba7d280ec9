//! The CPU matmul against an independent f64 triple loop, and the matmul plans (the fast
//! kernels' split and tiling, the TF32 tiling per device).

use gpukern::{DeviceLimits, Error, cpu};
use ndarray::{Array2, ArrayView2, s};
use rand::Rng;

use crate::common::{random_matrix, rng_for, seed_hint};

/// The CPU matmul (f64 accumulation, one rounding to f32) against an f64 triple loop, per
/// element: the one rounding, `2^-24 |C|`, plus the f64 sums' own drift, bounded by
/// `2^-40 sum |a||b|` (at most 70 terms of `2^-53` each, with a wide margin).
const TRIPLE_LOOP_ROUNDING: f64 = 1.0 / 16_777_216.0;
/// See [`TRIPLE_LOOP_ROUNDING`].
const TRIPLE_LOOP_F64_DRIFT: f64 = 1.0 / 1_099_511_627_776.0;

/// `A * B` by the textbook triple loop in f64, independent of ndarray's `dot` (which
/// `cpu::matmul` may use), and the matching `|A| |B|` for error bounds.
fn triple_loop(a: &ArrayView2<'_, f32>, b: &ArrayView2<'_, f32>) -> (Array2<f64>, Array2<f64>) {
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    let (mut c, mut scale) = (Array2::zeros((m, n)), Array2::zeros((m, n)));
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut abs) = (0.0f64, 0.0f64);
            for p in 0..k {
                let term = f64::from(a[(i, p)]) * f64::from(b[(p, j)]);
                sum += term;
                abs += term.abs();
            }
            c[(i, j)] = sum;
            scale[(i, j)] = abs;
        }
    }
    (c, scale)
}

/// `None` if every element of `got` is within one f32 rounding of the triple loop's product;
/// else the first that is not.
fn triple_loop_violation(
    a: &ArrayView2<'_, f32>,
    b: &ArrayView2<'_, f32>,
    got: &Array2<f32>,
) -> Option<String> {
    let (want, scale) = triple_loop(a, b);
    if got.dim() != want.dim() {
        return Some(format!("shape {:?}, expected {:?}", got.dim(), want.dim()));
    }
    for ((i, j), &w) in want.indexed_iter() {
        let g = f64::from(got[(i, j)]);
        let bound = TRIPLE_LOOP_ROUNDING * w.abs() + TRIPLE_LOOP_F64_DRIFT * scale[(i, j)];
        let error = (g - w).abs();
        if error.is_nan() || error > bound {
            return Some(format!(
                "C[{i}][{j}] = {g}, the triple loop gives {w}: error {error:.3e} > {bound:.3e}"
            ));
        }
    }
    None
}

#[test]
fn cpu_matmul_matches_an_f64_triple_loop() {
    let mut rng = rng_for("cpu_matmul_matches_an_f64_triple_loop");
    for _ in 0..40 {
        let (m, k, n) = (
            rng.random_range(1..70),
            rng.random_range(0..70),
            rng.random_range(1..70),
        );
        let (a, b) = (random_matrix(&mut rng, m, k), random_matrix(&mut rng, k, n));
        let got = cpu::matmul(&a, &b).unwrap();
        assert_eq!(got.dim(), (m, n));
        if let Some(e) = triple_loop_violation(&a.view(), &b.view(), &got) {
            panic!("{m}x{k}x{n}: {e} ({})", seed_hint());
        }

        // Views: a transposed A and a column-strided B give the same as their owned copies.
        let a_t = a.t().to_owned();
        let got_t = cpu::matmul(&a_t.t(), &b).unwrap();
        assert_eq!(got_t, got, "{m}x{k}x{n} with A transposed ({})", seed_hint());
        let b_wide = random_matrix(&mut rng, k, 2 * n);
        let strided = b_wide.slice(s![.., ..;2]);
        let got_s = cpu::matmul(&a, &strided).unwrap();
        if let Some(e) = triple_loop_violation(&a.view(), &strided, &got_s) {
            panic!("{m}x{k}x{n} B sliced: {e} ({})", seed_hint());
        }
    }
}

#[test]
fn the_triple_loop_check_catches_a_planted_error() {
    // A product summed in f32 (as ndarray's f32 `dot` does) with one term dropped, and one with
    // a single element off by 16 units in the last place: the check must refuse both.
    let mut rng = rng_for("the_triple_loop_check_catches_a_planted_error");
    let (a, b) = (random_matrix(&mut rng, 9, 64), random_matrix(&mut rng, 64, 5));
    let mut dropped = a.dot(&b);
    dropped[(3, 2)] -= a[(3, 63)] * b[(63, 2)];
    assert!(triple_loop_violation(&a.view(), &b.view(), &dropped).is_some());
    let mut nudged = cpu::matmul(&a, &b).unwrap();
    let v = nudged[(8, 4)];
    nudged[(8, 4)] = f32::from_bits(v.to_bits() + 16);
    assert!(triple_loop_violation(&a.view(), &b.view(), &nudged).is_some());
}

#[test]
fn cpu_matmul_edges() {
    let zeros = cpu::matmul(&Array2::<f32>::ones((3, 0)), &Array2::<f32>::ones((0, 4))).unwrap();
    assert_eq!(zeros, Array2::<f32>::zeros((3, 4)));
    assert_eq!(
        cpu::matmul(&Array2::<f32>::ones((0, 3)), &Array2::<f32>::ones((3, 4)))
            .unwrap()
            .dim(),
        (0, 4)
    );
    match cpu::matmul(&Array2::<f32>::ones((2, 3)), &Array2::<f32>::ones((4, 5))) {
        Err(e @ Error::ShapeMismatch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("[2, 3]") && msg.contains("[4, 5]"), "{msg}");
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
}

#[test]
fn fast_plans_follow_their_documented_rules() {
    use gpukern::ops::matmul::{FastPlan, FastTile};
    let mut rng = rng_for("fast_plans_follow_their_documented_rules");
    let blocks = |m: usize, n: usize, side: usize| m.div_ceil(side) * n.div_ceil(side);
    for _ in 0..2000 {
        let dim = |rng: &mut rand::rngs::StdRng| {
            if rng.random_bool(0.5) {
                rng.random_range(1..300)
            } else {
                rng.random_range(1..10_000)
            }
        };
        let (m, n, k) = (dim(&mut rng), dim(&mut rng), rng.random_range(0..20_000));
        let sms = [1, 8, 132][rng.random_range(0..3)];
        let plan = FastPlan::choose(m, n, k, sms);
        let what = format!("{m}x{k}x{n} on {sms} SMs: {plan:?} ({})", seed_hint());
        assert!((1..=16).contains(&plan.slices), "{what}: slices out of 1..=16");
        match plan.tile {
            // The large tiling exactly when its blocks alone fill every multiprocessor.
            FastTile::Large => assert!(blocks(m, n, 128) >= sms && plan.slices == 1, "{what}"),
            FastTile::Small => assert!(blocks(m, n, 128) < sms, "{what}"),
            // Timed slower than the large tiling on the H200 at every benchmark shape.
            FastTile::Wide => panic!("{what}: the wide tiling is only chosen by hand"),
        }
        if plan.slices > 1 {
            // Split only when the small tiling leaves multiprocessors idle, in slices of >= 256.
            assert!(blocks(m, n, 64) < sms && k / plan.slices >= 256, "{what}");
        }
        let bk = plan.tile.tiling().block_k;
        let (split, launched) = (plan.k_split(k), plan.launched_slices(k));
        assert!(
            split > 0 && split % bk == 0,
            "{what}: k_split {split} is not whole tiles of {bk}"
        );
        assert!(
            launched >= 1 && launched <= plan.slices,
            "{what}: {launched} slices launched"
        );
        assert!(
            launched * split >= k && (launched - 1) * split < k.max(1),
            "{what}: slices of {split} do not tile k"
        );
    }
}

/// The TF32 tiling for each opt-in shared-memory limit of the GPUs gpukern supports: every
/// choice fits its device, and a device of 99 KiB gets the 74 KiB `SquareK16` rather than a
/// 105 KiB tiling it could not launch.
#[test]
fn tf32_tiling_fits_each_device() {
    use gpukern::ops::matmul::Tf32Tile;
    const KIB: u32 = 1024;
    // (compute capabilities, opt-in limit, multiprocessors)
    let devices = [
        ("9.0 (H100, H200)", 227 * KIB, 132),
        ("8.0 (A100)", 163 * KIB, 108),
        ("8.6, 8.9, 12.0", 99 * KIB, 84),
    ];
    // (m, n): too few 128 x 256 blocks for any of them, and plenty.
    let shapes = [(1, 1), (1000, 1000), (4096, 4096), (8192, 8192), (4097, 4093)];
    for (name, optin, sms) in devices {
        let limits = DeviceLimits {
            max_shared_mem_per_block_optin: optin,
            ..DeviceLimits::COMMON
        };
        for (m, n) in shapes {
            let tile = Tf32Tile::choose(m, n, sms, &limits);
            let bytes = tile.tiling().shared_bytes();
            assert!(
                bytes <= optin,
                "{name}: {m}x{n} got {tile:?}, {bytes} bytes > {optin}"
            );
            assert!(
                tile.rounds(),
                "{name}: {tile:?} must round (it is MatmulAlgorithm::Tf32)"
            );
            let want = match optin {
                o if o >= 204 * KIB => {
                    let wide = m.div_ceil(128) * n.div_ceil(256) >= sms;
                    if wide { Tf32Tile::Wide } else { Tf32Tile::Square }
                }
                o if o >= 105 * KIB => Tf32Tile::Square,
                _ => Tf32Tile::SquareK16,
            };
            assert_eq!(tile, want, "{name}: {m}x{n}");
        }
    }
    // The tilings' needs the table rests on.
    assert_eq!(Tf32Tile::Wide.tiling().shared_bytes(), 208_896);
    assert_eq!(Tf32Tile::Square.tiling().shared_bytes(), 107_520);
    assert_eq!(Tf32Tile::SquareK16.tiling().shared_bytes(), 75_776);
    assert!(Tf32Tile::Square.tiling().shared_bytes() > 99 * KIB);
    // The choice as it was (Square whenever Wide does not fit) is what this test catches.
    let old_choice = |m: usize, n: usize, sms: usize, limits: &DeviceLimits| {
        let wide = Tf32Tile::Wide.tiling();
        if m.div_ceil(128) * n.div_ceil(256) >= sms
            && wide.shared_bytes() <= limits.max_shared_mem_per_block_optin
        {
            Tf32Tile::Wide
        } else {
            Tf32Tile::Square
        }
    };
    let ada = DeviceLimits {
        max_shared_mem_per_block_optin: 99 * KIB,
        ..DeviceLimits::COMMON
    };
    assert!(old_choice(4096, 4096, 84, &ada).tiling().shared_bytes() > ada.max_shared_mem_per_block_optin);
}
