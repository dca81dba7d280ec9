//! Host-side logic that needs no GPU: launch-configuration arithmetic against device limits,
//! the choice of PTX module, the CPU references themselves, and the error messages.

mod common;

use gpukern::launch_config::ceil_div;
use gpukern::ptx::{PtxModule, PtxSet};
use gpukern::{DeviceLimits, Error, LaunchConfig, cpu};
use ndarray::{Array2, ArrayView2, s};
use rand::Rng;

use common::{random_matrix, random_vec, rng_for, seed_hint};

/// Small limits, so that the edges of every check are cheap to reach.
const SMALL: DeviceLimits = DeviceLimits {
    max_threads_per_block: 512,
    max_block_dim: [512, 256, 8],
    max_grid_dim: [100, 20, 5],
    max_shared_mem_per_block: 4096,
    max_shared_mem_per_block_optin: 8192,
};

/// The CPU matmul (f64 accumulation, one rounding to f32) against an f64 triple loop, per
/// element: the one rounding, `2^-24 |C|`, plus the f64 sums' own drift, bounded by
/// `2^-40 sum |a||b|` (at most 70 terms of `2^-53` each, with a wide margin).
const TRIPLE_LOOP_ROUNDING: f64 = 1.0 / 16_777_216.0;
/// See [`TRIPLE_LOOP_ROUNDING`].
const TRIPLE_LOOP_F64_DRIFT: f64 = 1.0 / 1_099_511_627_776.0;

/// A softmax row's sum in f64 of its f32 outputs: each output is rounded once (2^-24 relative),
/// so the sum is within ~1e-7 of 1.
const SUM_TOL: f64 = 1e-6;

/// Asserts that `result` is [`Error::TooLarge`] and its message contains every one of `needles`.
#[track_caller]
fn assert_too_large<T: std::fmt::Debug>(result: gpukern::Result<T>, needles: &[&str]) {
    match result {
        Err(e @ Error::TooLarge { .. }) => {
            let msg = e.to_string();
            for needle in needles {
                assert!(
                    msg.contains(needle),
                    "message {msg:?} does not contain {needle:?}"
                );
            }
        }
        other => panic!("expected Error::TooLarge, got {other:?}"),
    }
}

/// A launch of `grid` blocks of `block` threads with `shared` bytes, unchecked.
fn launch(grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid,
        block,
        shared_mem_bytes: shared,
    }
}

#[test]
fn ceil_div_rounds_up() {
    for d in [1, 2, 7, 32, 256] {
        for n in 0..3 * d + 2 {
            let q = ceil_div(n, d);
            assert!(
                q * d >= n && (q == 0 || (q - 1) * d < n),
                "ceil_div({n}, {d}) = {q}"
            );
        }
    }
}

#[test]
fn linear_covers_every_element_with_the_fewest_blocks() {
    for limits in [DeviceLimits::COMMON, SMALL] {
        let block = 64;
        for (n, blocks) in [(1, 1), (63, 1), (64, 1), (65, 2), (640, 10), (641, 11)] {
            let cfg = LaunchConfig::linear("add", n, block, &limits).unwrap();
            assert_eq!(cfg, launch((blocks, 1, 1), (block, 1, 1), 0), "n = {n}");
            assert_eq!(cfg.threads(), u64::from(blocks) * u64::from(block));
        }
    }
}

#[test]
fn linear_at_the_grid_limit() {
    for (limits, block) in [(DeviceLimits::COMMON, 256u32), (SMALL, 64)] {
        let max = limits.max_grid_dim[0];
        let largest = max as usize * block as usize;
        let cfg = LaunchConfig::linear("add", largest, block, &limits).unwrap();
        assert_eq!(cfg.grid, (max, 1, 1));
        assert_too_large(
            LaunchConfig::linear("add", largest + 1, block, &limits),
            &["add", &max.to_string(), &(largest + 1).to_string()],
        );
    }
}

#[test]
fn linear_refuses_zero_elements_and_oversized_blocks() {
    assert!(matches!(
        LaunchConfig::linear("add", 0, 256, &DeviceLimits::COMMON),
        Err(Error::InvalidArgument { .. })
    ));
    assert_too_large(
        LaunchConfig::linear("add", 10, 1025, &DeviceLimits::COMMON),
        &["1025", "1024"],
    );
}

#[test]
fn zero_sized_blocks_are_refused_not_divided_by() {
    let limits = DeviceLimits::COMMON;
    for result in [
        LaunchConfig::linear("add", 100, 0, &limits),
        LaunchConfig::tiles_2d("matmul", 10, 10, 0, 0, &limits),
    ] {
        match result {
            Err(Error::InvalidArgument { detail, .. }) => assert!(detail.contains("0 threads"), "{detail}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn tiles_2d_covers_rows_and_columns() {
    let tile = 16;
    for (rows, cols, gy, gx) in [
        (1, 1, 1, 1),
        (16, 16, 1, 1),
        (17, 16, 2, 1),
        (16, 33, 1, 3),
        (100, 1, 7, 1),
    ] {
        let cfg = LaunchConfig::tiles_2d("matmul", rows, cols, tile, 128, &SMALL).unwrap();
        assert_eq!(cfg, launch((gx, gy, 1), (tile, tile, 1), 128), "{rows} x {cols}");
    }
}

#[test]
fn tiles_2d_at_the_grid_limits() {
    for limits in [DeviceLimits::COMMON, SMALL] {
        let tile = 16u32;
        let [max_x, max_y, _] = limits.max_grid_dim;
        let (rows, cols) = (max_y as usize * tile as usize, max_x as usize * tile as usize);
        let cfg = LaunchConfig::tiles_2d("matmul", rows, cols, tile, 0, &limits).unwrap();
        assert_eq!(cfg.grid, (max_x, max_y, 1));
        assert_too_large(
            LaunchConfig::tiles_2d("matmul", rows + 1, cols, tile, 0, &limits),
            &["rows", &max_y.to_string()],
        );
        assert_too_large(
            LaunchConfig::tiles_2d("matmul", rows, cols + 1, tile, 0, &limits),
            &["columns", &max_x.to_string()],
        );
    }
}

#[test]
fn block_tiles_cover_the_output_and_repeat_x() {
    // (rows, cols, repeat_x) -> (grid x, grid y) for 128 x 64 tiles.
    for (rows, cols, repeat, gx, gy) in [
        (1, 1, 1, 1, 1),
        (128, 64, 1, 1, 1),
        (129, 64, 1, 1, 2),
        (128, 65, 1, 2, 1),
        (300, 200, 3, 12, 3),
    ] {
        let cfg =
            LaunchConfig::block_tiles("matmul", (rows, cols), (128, 64), repeat, 256, 1024, &SMALL).unwrap();
        assert_eq!(
            cfg,
            launch((gx, gy, 1), (256, 1, 1), 1024),
            "{rows} x {cols} x {repeat}"
        );
    }
}

#[test]
fn block_tiles_at_the_grid_limits() {
    for limits in [DeviceLimits::COMMON, SMALL] {
        let [max_x, max_y, _] = limits.max_grid_dim;
        let (rows, cols) = (max_y as usize * 2, max_x as usize * 4);
        let cfg = LaunchConfig::block_tiles("matmul", (rows, cols), (2, 4), 1, 32, 0, &limits).unwrap();
        assert_eq!(cfg.grid, (max_x, max_y, 1));
        assert_too_large(
            LaunchConfig::block_tiles("matmul", (rows + 1, cols), (2, 4), 1, 32, 0, &limits),
            &["row tiles", &max_y.to_string()],
        );
        assert_too_large(
            LaunchConfig::block_tiles("matmul", (rows, cols + 1), (2, 4), 1, 32, 0, &limits),
            &["column tiles", &max_x.to_string()],
        );
        // The slices of a split `k` multiply the column tiles.
        assert_too_large(
            LaunchConfig::block_tiles("matmul", (rows, cols), (2, 4), 2, 32, 0, &limits),
            &["column tiles", &max_x.to_string()],
        );
    }
}

#[test]
fn tiles_2d_checks_the_block_and_shared_memory() {
    // 32 x 32 = 1024 threads: too many for SMALL's 512.
    assert_too_large(
        LaunchConfig::tiles_2d("matmul", 64, 64, 32, 0, &SMALL),
        &["1024", "512"],
    );
    assert_too_large(
        LaunchConfig::tiles_2d("matmul", 64, 64, 16, SMALL.max_shared_mem_per_block + 1, &SMALL),
        &["shared memory", &SMALL.max_shared_mem_per_block.to_string()],
    );
    assert!(matches!(
        LaunchConfig::tiles_2d("matmul", 0, 5, 16, 0, &SMALL),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn per_row_is_one_block_per_row() {
    for rows in [1, 2, 99, 100] {
        let cfg = LaunchConfig::per_row("softmax", rows, 128, 512, &SMALL).unwrap();
        assert_eq!(cfg, launch((rows as u32, 1, 1), (128, 1, 1), 512));
    }
    let max = DeviceLimits::COMMON.max_grid_dim[0];
    let cfg = LaunchConfig::per_row("softmax", max as usize, 256, 1024, &DeviceLimits::COMMON).unwrap();
    assert_eq!(cfg.grid, (max, 1, 1));
    assert_too_large(
        LaunchConfig::per_row("softmax", max as usize + 1, 256, 1024, &DeviceLimits::COMMON),
        &["softmax", "rows", &max.to_string()],
    );
    assert_too_large(LaunchConfig::per_row("softmax", 101, 128, 0, &SMALL), &["100"]);
}

#[test]
fn checked_accepts_exactly_the_limits() {
    let at_limits = [
        launch((100, 20, 5), (512, 1, 1), 4096),
        launch((1, 1, 1), (2, 256, 1), 0),
        launch((1, 1, 1), (1, 64, 8), 0),
    ];
    for cfg in at_limits {
        assert_eq!(cfg.checked("op", &SMALL).unwrap(), cfg);
    }
}

#[test]
fn checked_refuses_each_limit_with_a_message_naming_it() {
    let cases: [(LaunchConfig, &[&str]); 8] = [
        (
            launch((1, 1, 1), (513, 1, 1), 0),
            &["513 threads per block", "512"],
        ),
        // Each extent fits, the product does not.
        (
            launch((1, 1, 1), (32, 32, 1), 0),
            &["1024 threads per block", "512"],
        ),
        (launch((1, 1, 1), (1, 257, 1), 0), &["block y extent 257", "256"]),
        (launch((1, 1, 1), (1, 1, 9), 0), &["block z extent 9", "8"]),
        (launch((101, 1, 1), (1, 1, 1), 0), &["grid x extent 101", "100"]),
        (launch((1, 21, 1), (1, 1, 1), 0), &["grid y extent 21", "20"]),
        (launch((1, 1, 6), (1, 1, 1), 0), &["grid z extent 6", "5"]),
        (
            launch((1, 1, 1), (1, 1, 1), 4097),
            &["4097 bytes of shared memory", "4096"],
        ),
    ];
    for (cfg, needles) in cases {
        assert_too_large(cfg.checked("op", &SMALL), needles);
    }
    // The x extent of a block alone over its limit, with the thread limit raised out of the way.
    let wide = DeviceLimits {
        max_threads_per_block: 4096,
        ..SMALL
    };
    assert_too_large(
        launch((1, 1, 1), (513, 1, 1), 0).checked("op", &wide),
        &["block x extent 513", "512"],
    );
}

#[test]
fn checked_refuses_zero_extents() {
    let one = (1, 1, 1);
    for extent in [(0, 1, 1), (1, 0, 1), (1, 1, 0)] {
        for cfg in [launch(extent, one, 0), launch(one, extent, 0)] {
            match cfg.checked("op", &SMALL) {
                Err(e @ Error::InvalidArgument { .. }) => assert!(e.to_string().contains("empty launch")),
                other => panic!("{cfg:?}: expected InvalidArgument, got {other:?}"),
            }
        }
    }
}

#[test]
fn conversions_keep_the_launch_shape() {
    let cfg = launch((3, 4, 5), (6, 7, 8), 96);
    assert_eq!(cfg.threads(), 3 * 4 * 5 * 6 * 7 * 8);
    let sim = cfg.to_sim();
    assert_eq!((sim.grid.x, sim.grid.y, sim.grid.z), cfg.grid);
    assert_eq!((sim.block.x, sim.block.y, sim.block.z), cfg.block);
    assert_eq!(sim.shared_mem_bytes, cfg.shared_mem_bytes);
    let cuda = cfg.to_cuda();
    assert_eq!(
        (cuda.grid_dim, cuda.block_dim, cuda.shared_mem_bytes),
        (cfg.grid, cfg.block, 96)
    );
}

/// [`PtxSet::select`] over `modules` (leaked: a `PtxSet` holds `'static` modules, as the
/// generated ones are).
fn select_from(modules: &[PtxModule], cc: (i32, i32)) -> Option<&'static PtxModule> {
    let modules: &'static [PtxModule] = Box::leak(modules.to_vec().into_boxed_slice());
    PtxSet {
        krate: "fake",
        modules,
    }
    .select(cc)
}

/// Fake modules for `select_from`, in the order `build.rs` emits them (oldest first).
fn fake_modules() -> Vec<PtxModule> {
    [
        ("sm_70", (7, 0)),
        ("sm_80", (8, 0)),
        ("sm_86", (8, 6)),
        ("sm_90", (9, 0)),
    ]
    .into_iter()
    .map(|(arch, cc)| PtxModule {
        arch,
        compute_capability: cc,
        ptx: "",
    })
    .collect()
}

#[test]
fn select_from_picks_the_newest_module_not_newer_than_the_device() {
    let mut modules = fake_modules();
    for _ in 0..2 {
        for (device, want) in [
            ((7, 0), "sm_70"),
            ((7, 5), "sm_70"),
            ((8, 0), "sm_80"),
            ((8, 6), "sm_86"),
            ((8, 9), "sm_86"),
            ((9, 0), "sm_90"),
            ((10, 0), "sm_90"),
            ((12, 1), "sm_90"),
        ] {
            let got = select_from(&modules, device).map(|m| m.arch);
            assert_eq!(got, Some(want), "device {device:?}");
        }
        // The choice must not depend on the order of the list.
        modules.reverse();
    }
}

#[test]
fn select_from_finds_nothing_for_an_older_device() {
    let modules = fake_modules();
    assert!(select_from(&modules, (6, 1)).is_none());
    assert!(select_from(&modules[1..], (7, 5)).is_none());
    assert!(select_from(&[], (9, 0)).is_none());
}

#[test]
fn select_uses_the_embedded_modules() {
    let modules = gpukern::ptx::modules();
    assert!(!modules.is_empty(), "gpukern was built with no PTX module");
    for m in modules {
        let chosen = gpukern::ptx::select(m.compute_capability).expect("a module for its own architecture");
        assert_eq!(chosen.arch, m.arch);
    }
    let oldest = modules.iter().map(|m| m.compute_capability).min().unwrap();
    assert!(gpukern::ptx::select((oldest.0 - 1, 0)).is_none());
}

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
fn cpu_add_and_increment() {
    let mut rng = rng_for("cpu_add_and_increment");
    let (a, b) = (random_vec(&mut rng, 100), random_vec(&mut rng, 100));
    let sum = cpu::add(&a, &b).unwrap();
    let inc = cpu::increment_by_one(&a);
    for i in 0..100 {
        assert_eq!(sum[i], a[i] + b[i]);
        assert_eq!(inc[i], a[i] + 1.0);
    }
    match cpu::add(&a, &b[..99]) {
        Err(e @ Error::ShapeMismatch { .. }) => assert!(e.to_string().contains("[100] and [99]")),
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
}

#[test]
fn cpu_softmax_rows_are_distributions() {
    let mut rng = rng_for("cpu_softmax_rows_are_distributions");
    for _ in 0..30 {
        let (rows, cols) = (rng.random_range(1..8), rng.random_range(1..300));
        let x = random_matrix(&mut rng, rows, cols);
        for t in [1.0f32, 0.5, 0.0, -2.5, 10.0] {
            let y = cpu::softmax_rows(&x, t);
            assert_eq!(y.dim(), x.dim());
            for (r, (xr, yr)) in x.rows().into_iter().zip(y.rows()).enumerate() {
                let what = format!("{rows}x{cols}, t = {t}, row {r} ({})", seed_hint());
                assert_eq!(
                    yr.to_vec(),
                    cpu::softmax(&xr.to_vec(), t),
                    "{what}: rows differ from softmax"
                );
                let sum: f64 = yr.iter().map(|&v| f64::from(v)).sum();
                assert!((sum - 1.0).abs() <= SUM_TOL, "{what}: sums to {sum}");
                assert!(yr.iter().all(|&v| v > 0.0 && v <= 1.0), "{what}: {yr}");
                // The largest output sits at the largest t * x.
                let argmax = |v: &[f64]| (0..v.len()).max_by(|&i, &j| v[i].total_cmp(&v[j])).unwrap();
                let tx: Vec<f64> = xr.iter().map(|&v| f64::from(t) * f64::from(v)).collect();
                let yv: Vec<f64> = yr.iter().map(|&v| f64::from(v)).collect();
                if t != 0.0 {
                    assert_eq!(argmax(&yv), argmax(&tx), "{what}: argmax moved");
                } else {
                    let uniform = (1.0 / cols as f64) as f32;
                    assert!(yr.iter().all(|&v| v == uniform), "{what}: t = 0 is not uniform");
                }
            }
        }
    }
}

#[test]
fn cpu_softmax_is_shift_invariant() {
    let mut rng = rng_for("cpu_softmax_is_shift_invariant");
    let x = random_vec(&mut rng, 200);
    // 0.5 is a power of two, so x + 0.5 is exact for x in [-1, 1).
    let shifted: Vec<f32> = x.iter().map(|v| v + 0.5).collect();
    for t in [1.0f32, -3.0, 10.0] {
        let err = cpu::rel_error(&cpu::softmax(&shifted, t), &cpu::softmax(&x, t));
        assert!(
            err < 1e-6,
            "t = {t}: shifting the input changed the softmax by {err:e}"
        );
    }
    assert!(cpu::softmax(&[], 1.0).is_empty());
}

#[test]
fn rel_error_basics() {
    let mut rng = rng_for("rel_error_basics");
    let r = random_vec(&mut rng, 50);
    assert_eq!(cpu::rel_error(&r, &r), 0.0);
    assert_eq!(cpu::rel_error(&[], &[]), 0.0);
    assert_eq!(cpu::rel_error(&r[..49], &r), f64::INFINITY);
    // ||(0, 0.5)|| / ||(3, 4)|| = 0.5 / 5.
    assert!((cpu::rel_error(&[3.0, 4.5], &[3.0, 4.0]) - 0.1).abs() < 1e-12);
    // Scaling both by the same factor leaves it unchanged (a power of two keeps it exact).
    let o: Vec<f32> = r.iter().map(|v| v * 1.001).collect();
    let scale = |v: &[f32]| v.iter().map(|x| x * 1024.0).collect::<Vec<_>>();
    assert_eq!(cpu::rel_error(&scale(&o), &scale(&r)), cpu::rel_error(&o, &r));
    // A zero reference: the absolute norm.
    assert_eq!(cpu::rel_error(&[3.0, 4.0], &[0.0, 0.0]), 5.0);
    let mut with_nan = r.clone();
    with_nan[7] = f32::NAN;
    assert!(cpu::rel_error(&with_nan, &r).is_nan());
}

#[test]
fn error_messages_say_what_to_do() {
    let cases: Vec<(Error, Vec<&str>)> = vec![
        (
            Error::NoDriver,
            vec![
                "libcuda",
                "NVIDIA driver",
                "Gpu::simulator()",
                "GPUKERN_DEVICE=sim",
            ],
        ),
        (
            Error::NoDevice {
                ordinal: 3,
                reason: "CUDA_ERROR_INVALID_DEVICE".into(),
            },
            vec![
                "device 3",
                "CUDA_ERROR_INVALID_DEVICE",
                "nvidia-smi",
                "Gpu::simulator()",
            ],
        ),
        (
            Error::UnsupportedDevice {
                major: 7,
                minor: 5,
                built: "sm_80, sm_90".into(),
            },
            vec!["7.5", "sm_80, sm_90", "GPUKERN_PTX_ARCHS=sm_75"],
        ),
        (
            Error::ShapeMismatch {
                op: "matmul",
                lhs: vec![2, 3],
                rhs: vec![4, 5],
                rule: "A's columns must equal B's rows",
            },
            vec!["matmul", "[2, 3]", "[4, 5]", "A's columns must equal B's rows"],
        ),
        (
            Error::TooLarge {
                op: "softmax",
                detail: "grid x extent 5, the device allows 4".into(),
            },
            vec!["softmax", "too large", "the device allows 4"],
        ),
        (
            Error::OutOfMemory { bytes: 123456 },
            vec!["123456 bytes", "free device buffers"],
        ),
        (
            Error::InvalidArgument {
                op: "softmax",
                detail: "inverse temperature NaN".into(),
            },
            vec!["softmax", "inverse temperature NaN"],
        ),
        (
            Error::WrongDevice { op: "add" },
            vec!["add", "another device", "upload it with the Gpu you compute on"],
        ),
    ];
    for (error, needles) in cases {
        let msg = error.to_string();
        for needle in needles {
            assert!(
                msg.contains(needle),
                "{error:?}: message {msg:?} lacks {needle:?}"
            );
        }
    }
}

#[test]
fn simulator_errors_name_the_kernel_and_the_thread() {
    use gpukern::kernels::sim::{Dim3, SimError, Violation};
    let sim = SimError {
        kernel: "softmax_block_reduce".into(),
        block: Dim3::new(2, 0, 0),
        thread: Dim3::new(17, 0, 0),
        violation: Violation::BarrierNotReached {
            barrier: "softmax.rs:1:1".into(),
            waiting: 255,
        },
    };
    let msg = Error::from(sim).to_string();
    for needle in [
        "simulator",
        "softmax_block_reduce",
        "(2, 0, 0)",
        "(17, 0, 0)",
        "softmax.rs:1:1",
    ] {
        assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
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

/// `checked_len`, the one size check every allocation passes: the largest element count whose
/// bytes fit `isize::MAX` passes, one more does not, and products that overflow `usize` are
/// refused whatever their factors.
#[test]
fn checked_len_stops_at_what_a_host_vec_holds() {
    use gpukern::buffer::{MAX_ELEMENTS, checked_len};
    assert_eq!(MAX_ELEMENTS * 4, isize::MAX as usize - 3);
    assert_eq!(checked_len("t", &[MAX_ELEMENTS]).ok(), Some(MAX_ELEMENTS));
    assert_eq!(checked_len("t", &[MAX_ELEMENTS, 1]).ok(), Some(MAX_ELEMENTS));
    assert_eq!(checked_len("t", &[0, usize::MAX]).ok(), Some(0));
    assert_eq!(checked_len("t", &[]).ok(), Some(1));
    assert_too_large(
        checked_len("t", &[MAX_ELEMENTS + 1]),
        &["t is too large", "at most"],
    );
    // 2^62 + 2^31 floats: 2^64 + 2^33 bytes, which wraps to 8 GiB unchecked.
    assert_too_large(checked_len("zeros", &[(1 << 62) + (1 << 31)]), &["zeros"]);
    // The matmul of the issue: a 2^31 x 2^31 result is 2^62 elements, 2^64 bytes.
    assert_too_large(
        checked_len("t", &[1 << 31, 1 << 31]),
        &["2147483648 x 2147483648"],
    );
    assert_too_large(checked_len("t", &[usize::MAX, 2]), &[]);
    assert_too_large(checked_len("t", &[2, usize::MAX / 2 + 1, 0]), &[]);
}

/// The free function of the issue: a (2^31 x 0) by (0 x 2^31) matmul is refused as too large
/// (it panicked with "capacity overflow" in the simulator).
#[test]
fn matmul_whose_result_cannot_exist_is_too_large() {
    let a = Array2::<f32>::zeros((1 << 31, 0));
    let b = Array2::<f32>::zeros((0, 1 << 31));
    assert_too_large(gpukern::matmul(&a, &b), &["matrix"]);
    let sim = gpukern::Gpu::simulator();
    match (sim.upload_matrix(&a), sim.upload_matrix(&b)) {
        (Ok(da), Ok(db)) => assert_too_large(sim.matmul(&da, &db).map(|c| c.dim()), &["matrix"]),
        _ => panic!("uploading empty matrices failed"),
    }
    // The CPU reference too: its f64 product of 2^62 elements cannot exist either.
    assert_too_large(gpukern::cpu::matmul(&a, &b).map(|c| c.dim()), &["cpu::matmul"]);
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

/// Which "Gpu::new(0) failed" outcomes make the CUDA trials ignored: only no driver and no
/// device, and never with `GPUKERN_REQUIRE_GPU=1`; a failing GPU (a driver error) runs them, so
/// they fail. The rule the harnesses had (ignore on any error) is caught.
#[test]
fn only_a_missing_gpu_makes_cuda_trials_ignored() {
    use cudarc::driver::{DriverError, sys::CUresult};
    let failing = || Error::Driver {
        during: "opening the CUDA device",
        source: DriverError(CUresult::CUDA_ERROR_NOT_INITIALIZED),
    };
    let no_device = || Error::NoDevice {
        ordinal: 0,
        reason: "CUDA_ERROR_NO_DEVICE".into(),
    };
    // (name, what Gpu::new returned, GPUKERN_REQUIRE_GPU=1, ignored). Named, not printed: a
    // DriverError's text asks libcuda, which this machine may not have.
    let cases: Vec<(&str, Result<(), Error>, bool, bool)> = vec![
        ("gpu", Ok(()), false, false),
        ("gpu, required", Ok(()), true, false),
        ("no driver", Err(Error::NoDriver), false, true),
        ("no device", Err(no_device()), false, true),
        ("no driver, required", Err(Error::NoDriver), true, false),
        ("no device, required", Err(no_device()), true, false),
        ("failing gpu", Err(failing()), false, false),
        ("failing gpu, required", Err(failing()), true, false),
    ];
    let wrong = |decide: &dyn Fn(&Result<(), Error>, bool) -> bool| {
        cases
            .iter()
            .filter(|(_, opened, require, ignored)| decide(opened, *require) != *ignored)
            .map(|(name, ..)| *name)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        wrong(&|o, r| common::cuda_trials_ignored(o, r)),
        Vec::<&str>::new()
    );
    let old_rule = |o: &Result<(), Error>, r: bool| o.is_err() && !r;
    assert_eq!(
        wrong(&old_rule),
        ["failing gpu"],
        "the old rule ignores a failing GPU"
    );
}
