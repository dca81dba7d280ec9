//! The fast element-wise and softmax kernels on the CPU simulator, against [`gpukern::cpu`]:
//!
//! * which kernels [`OnePassConfig::plan`] picks for the shapes the issue times, and for ragged
//!   ones around each threshold;
//! * every one-pass path (warp per row with 1, 2, 4, 8 vectors per lane; block per row with 4
//!   and 8; stream; split) on ragged shapes: rows whose length is not a multiple of 4 (so rows
//!   start off 16-byte boundaries), 1-element rows, rows longer than a block's share, row counts
//!   that leave the last block part empty; the stream and split paths at a small scale through
//!   lowered thresholds;
//! * the rules at the edges (infinities, all-equal rows, `t = 0`, NaN confined to its row,
//!   values near `f32::MAX`) for both [`SoftmaxAlgorithm`]s, with the special entries placed in
//!   different lanes, warps and chunks so that every merge of partial statistics sees them;
//! * the kernels on buffers that start off a 16-byte boundary (straight through the simulator);
//! * `add` with 16-byte accesses, exact, on ragged lengths, and its scalar fallback.

use gpukern::kernels::sim::{Dim3, Launch, LaunchConfig, Violation};
use gpukern::kernels::{add as kadd, softmax as ksoft};
use gpukern::ops::softmax::{OnePassConfig, OnePassPlan};
use gpukern::{AddAlgorithm, DeviceMatrix, Gpu, SoftmaxAlgorithm, cpu};
use ndarray::Array2;

/// Per element, relative to the reference (plus a floor for entries that underflow): the
/// simulator's `exp2` is the CPU's, so only f32 rounding of exponents and sums remains.
const REL_TOL: f32 = 1e-5;
const ABS_FLOOR: f32 = 1e-30;

/// Inverse temperatures every shape runs with: plain, uniform, reversed, sharp.
const TEMPERATURES: [f32; 4] = [1.0, 0.0, -2.5, 10.0];

/// `n` floats in [-1, 1) from a 64-bit LCG: the same inputs every run.
fn random(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn random_matrix(seed: u64, rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), random(seed, rows * cols)).unwrap()
}

/// Asserts `got` matches `want` element by element: NaN where `want` is NaN, else within
/// `REL_TOL` relative.
#[track_caller]
fn assert_softmax_close(what: &str, got: &Array2<f32>, want: &Array2<f32>) {
    assert_eq!(got.dim(), want.dim(), "{what}: shape");
    for ((r, c), &w) in want.indexed_iter() {
        let g = got[(r, c)];
        if w.is_nan() {
            assert!(g.is_nan(), "{what}: [{r}, {c}] = {g}, want NaN");
        } else {
            let err = (g - w).abs();
            assert!(
                err <= REL_TOL * w.abs() + ABS_FLOOR,
                "{what}: [{r}, {c}] = {g}, want {w} (error {err:e})"
            );
        }
    }
}

/// The one-pass softmax of `x` on the simulator with `config`.
fn one_pass(gpu: &Gpu, x: &Array2<f32>, t: f32, config: &OnePassConfig) -> Array2<f32> {
    let dx = gpu.upload_matrix(x).unwrap();
    let mut dy: DeviceMatrix = gpu.upload_matrix(&Array2::<f32>::zeros(x.dim())).unwrap();
    gpu.softmax_into_one_pass(&dx, &mut dy, t, config).unwrap();
    dy.to_array().unwrap()
}

/// Defaults with rows of up to `warp_max_cols` on warps and the rest as given.
fn config(
    warp_max_cols: usize,
    block_max_cols: usize,
    split_max_rows: usize,
    split_chunk: usize,
) -> OnePassConfig {
    OnePassConfig {
        warp_max_cols,
        block_max_cols,
        split_max_rows,
        split_chunk,
        ..classic()
    }
}

/// The default thresholds with neither lane groups nor persistent kernels: the register-held
/// warp and block kernels that load, reduce and write one row each.
fn classic() -> OnePassConfig {
    OnePassConfig {
        group_lanes: 0,
        persistent_min_cols: usize::MAX,
        ..OnePassConfig::default()
    }
}

/// Forces the block-per-row kernels on any row that fits them.
fn blocks_only() -> OnePassConfig {
    config(0, usize::MAX, 0, 16)
}

/// [`classic`] with rows of up to 131 columns on lane groups of `lanes`.
fn groups(lanes: usize) -> OnePassConfig {
    OnePassConfig {
        group_lanes: lanes,
        ..classic()
    }
}

/// [`classic`] with the persistent kernels for every row they hold.
fn persistent() -> OnePassConfig {
    OnePassConfig {
        persistent_min_cols: 0,
        ..classic()
    }
}

/// Forces the persistent block-per-row kernels on any row that fits them.
fn persistent_blocks_only() -> OnePassConfig {
    OnePassConfig {
        persistent_min_cols: 0,
        ..blocks_only()
    }
}

/// Forces `softmax_stream` on every shape.
fn stream_only() -> OnePassConfig {
    config(0, 0, 0, 16)
}

/// Forces the split path on every shape, with chunks of `chunk` columns.
fn split_only(chunk: usize) -> OnePassConfig {
    config(0, 0, usize::MAX, chunk)
}

// ---------------------------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------------------------

#[test]
fn classic_plans_for_the_timed_shapes() {
    let c = classic();
    assert_eq!(c.plan(8192, 128), OnePassPlan::Warp { vectors: 1 });
    assert_eq!(c.plan(8192, 1024), OnePassPlan::Warp { vectors: 8 });
    assert_eq!(
        c.plan(8192, 4096),
        OnePassPlan::Block {
            vectors: 4,
            threads: 256
        }
    );
    assert_eq!(
        c.plan(8192, 8192),
        OnePassPlan::Block {
            vectors: 4,
            threads: 512
        }
    );
    assert_eq!(
        c.plan(8192, 32768),
        OnePassPlan::Block {
            vectors: 8,
            threads: 1024
        }
    );
    assert_eq!(
        c.plan(1, 1 << 24),
        OnePassPlan::Split {
            chunks: 1024,
            chunk_vecs: 4096
        }
    );
    assert_eq!(c.plan(8192, 65536), OnePassPlan::Stream);
}

#[test]
fn classic_plans_around_the_thresholds() {
    let c = classic();
    assert_eq!(c.plan(3, 1), OnePassPlan::Warp { vectors: 1 });
    assert_eq!(c.plan(3, 131), OnePassPlan::Warp { vectors: 1 }); // 32 vectors + 3 scalars
    assert_eq!(c.plan(3, 132), OnePassPlan::Warp { vectors: 2 });
    assert_eq!(c.plan(3, 1023), OnePassPlan::Warp { vectors: 8 });
    assert_eq!(
        c.plan(3, 1025),
        OnePassPlan::Block {
            vectors: 4,
            threads: 64
        }
    );
    assert_eq!(
        c.plan(3, 8195),
        OnePassPlan::Block {
            vectors: 4,
            threads: 512
        }
    );
    assert_eq!(
        c.plan(3, 8196),
        OnePassPlan::Block {
            vectors: 8,
            threads: 288
        }
    );
    assert_eq!(
        c.plan(3, 32768),
        OnePassPlan::Block {
            vectors: 8,
            threads: 1024
        }
    );
    assert_eq!(
        c.plan(3, 32769),
        OnePassPlan::Split {
            chunks: 2,
            chunk_vecs: 4096
        }
    );
    assert_eq!(
        c.plan(255, 40000),
        OnePassPlan::Split {
            chunks: 3,
            chunk_vecs: 4096
        }
    );
    assert_eq!(c.plan(256, 40000), OnePassPlan::Stream);
}

// ---------------------------------------------------------------------------------------------
// Every path on ragged shapes
// ---------------------------------------------------------------------------------------------

/// Runs `config` on each shape at every temperature against the reference, after checking that
/// the plan is the expected kind.
#[track_caller]
fn check_path(
    name: &str,
    config: &OnePassConfig,
    shapes: &[(usize, usize)],
    expect: impl Fn(OnePassPlan) -> bool,
) {
    let gpu = Gpu::simulator();
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        let plan = config.plan(rows, cols);
        assert!(expect(plan), "{name}: {rows} x {cols} planned as {plan:?}");
        let x = random_matrix(100 + i as u64, rows, cols);
        for t in TEMPERATURES {
            let got = one_pass(&gpu, &x, t, config);
            assert_softmax_close(
                &format!("{name} {rows}x{cols} t={t} ({plan:?})"),
                &got,
                &cpu::softmax_rows(&x, t),
            );
        }
    }
}

#[test]
fn warp_per_row_on_ragged_shapes() {
    let shapes = [
        (1, 1),
        (9, 2),
        (3, 5),
        (17, 67),
        (9, 131),
        (5, 200),
        (4, 257),
        (3, 511),
        (2, 1023),
    ];
    check_path("warp", &classic(), &shapes, |p| {
        matches!(p, OnePassPlan::Warp { .. })
    });
    // Every vector count is reached.
    let vectors: Vec<_> = shapes.iter().map(|&(r, c)| classic().plan(r, c)).collect();
    for v in [1, 2, 4, 8] {
        assert!(
            vectors.contains(&OnePassPlan::Warp { vectors: v }),
            "no shape takes {v} vectors per lane"
        );
    }
}

#[test]
fn block_per_row_with_4_vectors_on_ragged_shapes() {
    // Short rows on a 32-thread block (most threads hold nothing), 1-element rows, and rows
    // filling 4 vectors per thread of a 64-thread block exactly.
    let shapes = [(3, 1), (2, 7), (5, 130), (3, 1025), (2, 1027)];
    check_path("block-4", &blocks_only(), &shapes, |p| {
        matches!(p, OnePassPlan::Block { vectors: 4, .. })
    });
}

#[test]
fn block_per_row_with_8_vectors() {
    // 8196 columns: 2049 vectors, 8 per thread of 288 threads; the second row starts off a
    // 16-byte boundary when cols is odd.
    let shapes = [(2, 8197)];
    check_path("block-8", &classic(), &shapes, |p| {
        matches!(p, OnePassPlan::Block { vectors: 8, .. })
    });
}

#[test]
fn block_per_row_with_8_vectors_and_1024_threads() {
    // Nearly the largest row held in registers: 8191 vectors, 8 per thread of 1024, plus 3
    // scalars (the second row starts 3 floats past a 16-byte boundary).
    let gpu = Gpu::simulator();
    let (rows, cols) = (2, 32767);
    let c = classic();
    assert_eq!(
        c.plan(rows, cols),
        OnePassPlan::Block {
            vectors: 8,
            threads: 1024
        }
    );
    let x = random_matrix(7, rows, cols);
    let got = one_pass(&gpu, &x, 1.0, &c);
    assert_softmax_close("block-8 2x32767", &got, &cpu::softmax_rows(&x, 1.0));
}

#[test]
fn default_and_candidate_plans_for_the_timed_shapes() {
    let d = OnePassConfig::default();
    assert_eq!(
        d,
        OnePassConfig {
            group_lanes: 16,
            persistent_min_cols: 16385,
            ..classic()
        }
    );
    // The default plans: lane groups of 16 for short rows, the classic register-held kernels up
    // to 16384 columns, the persistent block past it.
    assert_eq!(d.plan(8192, 128), OnePassPlan::Group { lanes: 16 });
    assert_eq!(d.plan(8192, 1024), OnePassPlan::Warp { vectors: 8 });
    assert_eq!(
        d.plan(8192, 8192),
        OnePassPlan::Block {
            vectors: 4,
            threads: 512
        }
    );
    assert_eq!(
        d.plan(8192, 16384),
        OnePassPlan::Block {
            vectors: 8,
            threads: 512
        }
    );
    assert_eq!(
        d.plan(8192, 16388),
        OnePassPlan::PersistentBlock {
            vectors: 8,
            threads: 544
        }
    );
    assert_eq!(
        d.plan(8192, 32768),
        OnePassPlan::PersistentBlock {
            vectors: 8,
            threads: 1024
        }
    );
    for lanes in [8, 16] {
        assert_eq!(groups(lanes).plan(8192, 128), OnePassPlan::Group { lanes });
        // Lane groups hold the rows a warp holds with one vector per lane, no longer ones.
        assert_eq!(groups(lanes).plan(3, 131), OnePassPlan::Group { lanes });
        assert_eq!(groups(lanes).plan(3, 132), OnePassPlan::Warp { vectors: 2 });
    }
    assert_eq!(groups(4).plan(8192, 128), OnePassPlan::Warp { vectors: 1 });
    let p = persistent();
    assert_eq!(p.plan(8192, 128), OnePassPlan::Warp { vectors: 1 });
    assert_eq!(p.plan(8192, 1024), OnePassPlan::PersistentWarp);
    assert_eq!(p.plan(3, 516), OnePassPlan::PersistentWarp);
    assert_eq!(p.plan(3, 515), OnePassPlan::Warp { vectors: 4 }); // 128 vectors + 3 scalars
    assert_eq!(
        p.plan(8192, 4096),
        OnePassPlan::PersistentBlock {
            vectors: 4,
            threads: 256
        }
    );
    assert_eq!(
        p.plan(8192, 8192),
        OnePassPlan::PersistentBlock {
            vectors: 4,
            threads: 512
        }
    );
    assert_eq!(
        p.plan(8192, 32768),
        OnePassPlan::PersistentBlock {
            vectors: 8,
            threads: 1024
        }
    );
    assert_eq!(
        p.plan(1, 1 << 24),
        OnePassPlan::Split {
            chunks: 1024,
            chunk_vecs: 4096
        }
    );
}

#[test]
fn lane_groups_on_ragged_shapes() {
    // Row counts that leave groups past the last row inside a warp that has live rows (35 rows:
    // a warp of 8-lane groups holds 4), whole warps past it (3 rows in a 32-row block), rows
    // that start off a 16-byte boundary, and rows of 32 vectors plus 3 scalars.
    let shapes = [(1, 1), (9, 2), (3, 5), (35, 67), (17, 100), (9, 131), (33, 128)];
    for lanes in [8, 16] {
        check_path(&format!("group-{lanes}"), &groups(lanes), &shapes, |p| {
            p == OnePassPlan::Group { lanes }
        });
    }
}

#[test]
fn persistent_warp_per_row_on_ragged_shapes() {
    // The simulator runs 2 blocks of 8 warps: 37 rows make each warp loop over 2 or 3 rows, and
    // the rows of odd widths start at every offset from a 16-byte boundary.
    let shapes = [(3, 516), (37, 1023), (20, 700), (17, 1021), (40, 1024)];
    check_path("persistent-warp", &persistent(), &shapes, |p| {
        p == OnePassPlan::PersistentWarp
    });
}

#[test]
fn persistent_block_per_row_on_ragged_shapes() {
    // 2 blocks in the simulator: 7 and 9 rows loop 3 to 5 times per block (the statistics
    // scratch alternates between its halves), short rows leave most threads without a vector.
    let shapes = [(7, 1), (2, 7), (9, 130), (7, 1025), (5, 1027)];
    check_path("persistent-block-4", &persistent_blocks_only(), &shapes, |p| {
        matches!(p, OnePassPlan::PersistentBlock { vectors: 4, .. })
    });
    check_path("persistent-block-8", &persistent(), &[(5, 8197)], |p| {
        matches!(p, OnePassPlan::PersistentBlock { vectors: 8, .. })
    });
}

#[test]
fn persistent_block_with_8_vectors_and_1024_threads() {
    // The largest row held in registers and staged in 128 KiB of shared memory: 3 rows on 2
    // blocks, the second and third starting off a 16-byte boundary.
    let gpu = Gpu::simulator();
    let (rows, cols) = (3, 32767);
    let c = persistent();
    assert_eq!(
        c.plan(rows, cols),
        OnePassPlan::PersistentBlock {
            vectors: 8,
            threads: 1024
        }
    );
    let x = random_matrix(8, rows, cols);
    let got = one_pass(&gpu, &x, -1.0, &c);
    assert_softmax_close("persistent-block-8 3x32767", &got, &cpu::softmax_rows(&x, -1.0));
}

#[test]
fn stream_on_ragged_shapes() {
    // 9000 columns: each thread of 512 streams more than one group of 4 vectors.
    let shapes = [(3, 1), (4, 3), (5, 67), (2, 2049), (2, 9001)];
    check_path("stream", &stream_only(), &shapes, |p| p == OnePassPlan::Stream);
}

#[test]
fn split_rows_over_several_blocks() {
    // Chunks of 8 columns (2 vectors): many chunks per row, some empty in the rows that start
    // off a boundary, and the head and tail scalars in chunk 0.
    let shapes = [(1, 1), (3, 3), (2, 9), (3, 67)];
    check_path("split", &split_only(8), &shapes, |p| {
        matches!(p, OnePassPlan::Split { .. })
    });
    check_path("split", &split_only(100), &[(1, 1001)], |p| {
        matches!(p, OnePassPlan::Split { chunks: 10, .. })
    });
    // Chunks longer than a block's sweep (4096 vectors, 8 per thread of 512) at the default size.
    check_path(
        "split-default-chunk",
        &OnePassConfig::default(),
        &[(1, 40003), (2, 33000)],
        |p| matches!(p, OnePassPlan::Split { chunks: 3, .. }),
    );
}

#[test]
fn the_default_algorithm_is_one_pass_and_block_reduce_stays_selectable() {
    let gpu = Gpu::simulator();
    let x = random_matrix(3, 7, 300);
    let dx = gpu.upload_matrix(&x).unwrap();
    let want = cpu::softmax_rows(&x, 1.0);
    for algorithm in SoftmaxAlgorithm::ALL {
        let got = gpu.softmax_with(&dx, 1.0, algorithm).unwrap().to_array().unwrap();
        assert_softmax_close(algorithm.name(), &got, &want);
    }
    assert_eq!(SoftmaxAlgorithm::default(), SoftmaxAlgorithm::OnePass);
    let names: Vec<_> = SoftmaxAlgorithm::ALL.iter().map(|a| a.name()).collect();
    assert_eq!(names, ["block-reduce", "one-pass"]);
    // The vector form takes the one-pass path too.
    let v = random(4, 1001);
    let got = gpu
        .softmax_vec(&gpu.upload(&v).unwrap(), 2.0)
        .unwrap()
        .to_vec()
        .unwrap();
    let want = cpu::softmax(&v, 2.0);
    let got = Array2::from_shape_vec((1, v.len()), got).unwrap();
    assert_softmax_close(
        "softmax_vec",
        &got,
        &Array2::from_shape_vec((1, v.len()), want).unwrap(),
    );
}

// ---------------------------------------------------------------------------------------------
// Rules at the edges, for both algorithms and every one-pass path
// ---------------------------------------------------------------------------------------------

/// Rows of `cols` entries, each testing one rule; the special entries sit at the first and the
/// last column and in the middle, so that on every path they fall in different lanes, warps and
/// chunks than the bulk of the row.
fn edge_rows(cols: usize) -> Array2<f32> {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let base = random(11, cols);
    let mid = cols / 2;
    let mut rows: Vec<Vec<f32>> = Vec::new();
    let with = |points: &[(usize, f32)]| {
        let mut r = base.clone();
        for &(i, v) in points {
            r[i] = v;
        }
        r
    };
    rows.push(base.clone()); // plain
    rows.push(with(&[(0, inf), (cols - 1, inf)])); // +inf entries share the mass
    rows.push(with(&[(mid, inf)])); // one +inf takes it all
    rows.push(vec![3.5; cols]); // all equal: uniform
    rows.push(vec![-inf; cols]); // all -inf: uniform
    rows.push(vec![inf; cols]); // all +inf: uniform
    rows.push(with(&[(0, -inf), (mid, -inf)])); // -inf entries get 0 (share the mass for t < 0)
    rows.push(with(&[(mid, nan)])); // NaN: the whole row NaN
    rows.push(with(&[(0, inf), (cols - 1, -inf), (mid, nan)])); // NaN wins over infinities
    rows.push(
        with(&[(0, -inf), (cols - 1, inf)])
            .iter()
            .map(|&v| if v.is_finite() { -inf } else { v })
            .collect(),
    ); // only infinities
    let big: Vec<f32> = base.iter().map(|&v| v * 3.0e38).collect();
    rows.push(big); // near f32::MAX: t * x would overflow, t * (x - m) must not
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    Array2::from_shape_vec((rows.len(), cols), flat).unwrap()
}

/// Checks the edge rows at every temperature with `run`, against the reference, and the rules
/// themselves on the reference (so that a shared mistake cannot pass).
#[track_caller]
fn check_edges(name: &str, cols: usize, run: impl Fn(&Array2<f32>, f32) -> Array2<f32>) {
    let x = edge_rows(cols);
    for t in TEMPERATURES {
        let want = cpu::softmax_rows(&x, t);
        let got = run(&x, t);
        assert_softmax_close(&format!("{name} edges cols={cols} t={t}"), &got, &want);
        // The rules, on what the kernel returned.
        let n = cols as f32;
        let row = |r: usize| got.row(r).to_vec();
        let uniform = |r: usize| row(r).iter().all(|&v| (v - 1.0 / n).abs() <= 1e-6 / n);
        assert!(
            uniform(3) && uniform(4) && uniform(5),
            "{name} t={t}: all-equal rows are uniform"
        );
        assert!(
            row(7).iter().all(|v| v.is_nan()) && row(8).iter().all(|v| v.is_nan()),
            "{name} t={t}: NaN rows"
        );
        for r in [0, 1, 2, 3, 4, 5, 6, 9, 10] {
            assert!(
                row(r).iter().all(|v| !v.is_nan()),
                "{name} t={t}: row {r} has no NaN"
            );
            let sum: f64 = row(r).iter().map(|&v| f64::from(v)).sum();
            assert!((sum - 1.0).abs() < 1e-5, "{name} t={t}: row {r} sums to {sum}");
        }
        if t == 0.0 {
            assert!(uniform(1) && uniform(2) && uniform(9), "{name}: t = 0 is uniform");
        } else if t > 0.0 && cols > 1 {
            let r1 = row(1);
            assert_eq!(
                (r1[0], r1[cols - 1]),
                (0.5, 0.5),
                "{name} t={t}: two +inf entries"
            );
            assert_eq!(row(2)[cols / 2], 1.0, "{name} t={t}: one +inf entry");
        } else if t < 0.0 && cols > 2 && cols / 2 != 0 {
            let r6 = row(6);
            assert_eq!(
                (r6[0], r6[cols / 2]),
                (0.5, 0.5),
                "{name} t={t}: two -inf entries"
            );
        }
    }
}

#[test]
fn edge_rules_hold_for_block_reduce() {
    let gpu = Gpu::simulator();
    for cols in [1, 2, 67, 300] {
        check_edges("block-reduce", cols, |x, t| {
            let dx = gpu.upload_matrix(x).unwrap();
            gpu.softmax_with(&dx, t, SoftmaxAlgorithm::BlockReduce)
                .unwrap()
                .to_array()
                .unwrap()
        });
    }
}

#[test]
fn edge_rules_hold_for_every_one_pass_path() {
    let gpu = Gpu::simulator();
    let paths: [(&str, OnePassConfig, &[usize]); 11] = [
        ("warp", classic(), &[1, 2, 67, 300, 1023]),
        ("group-8", groups(8), &[1, 2, 67, 131]),
        ("group-16", groups(16), &[2, 67]),
        ("persistent-warp", persistent(), &[600, 1023]),
        ("persistent-block-4", persistent_blocks_only(), &[2, 67, 1030]),
        ("persistent-block-8", persistent(), &[8199]),
        ("block-4", blocks_only(), &[2, 67, 1030]),
        ("block-8", classic(), &[8199]),
        ("stream", stream_only(), &[2, 67, 2051]),
        ("split", split_only(8), &[2, 67]),
        ("split", split_only(64), &[301]),
    ];
    for (name, config, widths) in paths {
        for &cols in widths {
            check_edges(name, cols, |x, t| one_pass(&gpu, x, t, &config));
        }
    }
}

#[test]
fn nan_stays_in_its_row_on_every_path() {
    let gpu = Gpu::simulator();
    for (name, config) in [
        ("warp", classic()),
        ("group-8", groups(8)),
        ("group-16", groups(16)),
        ("persistent-block", persistent_blocks_only()),
        ("block", blocks_only()),
        ("stream", stream_only()),
        ("split", split_only(8)),
    ] {
        let mut x = random_matrix(5, 9, 45);
        x[(4, 44)] = f32::NAN;
        let y = one_pass(&gpu, &x, 1.0, &config);
        for (r, row) in y.rows().into_iter().enumerate() {
            assert_eq!(row.iter().all(|v| v.is_nan()), r == 4, "{name}: row {r}");
            assert!(r == 4 || row.iter().all(|v| !v.is_nan()), "{name}: row {r}");
        }
    }
}

#[test]
fn a_persistent_warp_carries_nothing_from_one_row_to_the_next() {
    // 40 rows on the simulator's 16 warps: warp 4 takes rows 4, 20 and 36. Row 4 is NaN, row 20
    // has two +inf entries, row 36 is plain; each must come out as if alone.
    let gpu = Gpu::simulator();
    let mut x = random_matrix(6, 40, 600);
    x[(4, 599)] = f32::NAN;
    x[(20, 0)] = f32::INFINITY;
    x[(20, 300)] = f32::INFINITY;
    for t in [1.0, -0.5] {
        let y = one_pass(&gpu, &x, t, &persistent());
        assert_softmax_close(&format!("persistent-warp t={t}"), &y, &cpu::softmax_rows(&x, t));
        for (r, row) in y.rows().into_iter().enumerate() {
            assert_eq!(row.iter().any(|v| v.is_nan()), r == 4, "row {r}");
        }
        if t > 0.0 {
            assert_eq!((y[(20, 0)], y[(20, 300)]), (0.5, 0.5));
        }
    }
}

#[test]
fn the_free_function_takes_an_algorithm() {
    // The global device is the simulator on a machine without a GPU, CUDA where there is one.
    let x = random_matrix(9, 5, 77);
    for algorithm in SoftmaxAlgorithm::ALL {
        let got = gpukern::softmax_with(&x, -1.5, algorithm).unwrap();
        assert_softmax_close(algorithm.name(), &got, &cpu::softmax_rows(&x, -1.5));
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers that start off a 16-byte boundary, straight through the simulator
// ---------------------------------------------------------------------------------------------

/// A buffer holding `values` from index `start`, where element `start` lies `4 * pad` bytes past
/// a 16-byte boundary (`pad < 4`): found in the buffer, so it holds whatever alignment the
/// allocator gave (a float buffer is 4-byte aligned, which is all this needs).
fn offset_buffer(values: &[f32], pad: usize) -> (Vec<f32>, usize) {
    let mut buffer = vec![0.0f32; values.len() + 8];
    let base = (0..4)
        .find(|&i| buffer[i..].as_ptr() as usize % 16 == 0)
        .unwrap_or_else(|| panic!("no 16-byte boundary among 4 floats"));
    let start = base + pad;
    buffer[start..start + values.len()].copy_from_slice(values);
    (buffer, start)
}

#[test]
fn row_kernels_on_buffers_that_start_off_a_16_byte_boundary() {
    type Kernel = unsafe fn(*const f32, *mut f32, usize, usize, f32);
    let (rows, cols) = (5, 70);
    let x = random(21, rows * cols);
    let want = cpu::softmax_rows(&Array2::from_shape_vec((rows, cols), x.clone()).unwrap(), 1.0);
    let kernels: [(&str, Kernel, LaunchConfig); 5] = [
        (
            "softmax_group_8x4",
            ksoft::softmax_group_8x4,
            launch((rows as u32).div_ceil(32), 256, 0),
        ),
        (
            "softmax_persist_block_4",
            ksoft::softmax_persist_block_4,
            launch(2, 32, ksoft::persist_block_shared_bytes(4, 32)),
        ),
        (
            "softmax_warp_1",
            ksoft::softmax_warp_1,
            launch((rows as u32).div_ceil(8), 256, 0),
        ),
        (
            "softmax_block_4",
            ksoft::softmax_block_4,
            launch(rows as u32, 32, ksoft::STATS_SHARED_BYTES),
        ),
        (
            "softmax_stream",
            ksoft::softmax_stream,
            launch(rows as u32, 64, ksoft::STATS_SHARED_BYTES),
        ),
    ];
    for pad in 1..4 {
        for &(name, kernel, cfg) in &kernels {
            let (xs, x_start) = offset_buffer(&x, pad);
            let (mut ys, y_start) = offset_buffer(&vec![0.0; x.len()], pad);
            let xv = &xs[x_start..x_start + x.len()];
            let yv = &mut ys[y_start..y_start + x.len()];
            assert_eq!(
                xv.as_ptr() as usize % 16,
                4 * pad,
                "the premise: x off a 16-byte boundary"
            );
            assert_eq!(
                yv.as_ptr() as usize % 16,
                4 * pad,
                "the premise: y as x modulo 16"
            );
            let mut l = Launch::new(name, cfg);
            let (px, py) = (l.input("x", xv), l.output("y", yv));
            // SAFETY: rows*cols floats each, at the same address modulo 16; launch shapes as
            // the kernels' doc comments give.
            unsafe { l.run(|| kernel(px, py, rows, cols, 1.0)) }.unwrap();
            let got = Array2::from_shape_vec((rows, cols), yv.to_vec()).unwrap();
            assert_softmax_close(&format!("{name}, base off by {pad} floats"), &got, &want);
        }
    }
}

fn launch(blocks: u32, threads: u32, shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes,
    }
}

// ---------------------------------------------------------------------------------------------
// add with 16-byte accesses
// ---------------------------------------------------------------------------------------------

#[test]
fn add_vec4_is_exact_on_ragged_lengths() {
    let gpu = Gpu::simulator();
    for n in [1, 3, 4, 5, 7, 1023, 1024, 1025, 4097, 4096 * 3 + 5] {
        let (a, b) = (random(n as u64, n), random(n as u64 + 1, n));
        let want = cpu::add(&a, &b).unwrap();
        let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        for algorithm in AddAlgorithm::ALL {
            let got = gpu.add_with(&da, &db, algorithm).unwrap().to_vec().unwrap();
            assert_eq!(got, want, "{} at n = {n}", algorithm.name());
        }
        assert_eq!(
            gpu.add(&da, &db).unwrap().to_vec().unwrap(),
            want,
            "default at n = {n}"
        );
    }
    assert_eq!(AddAlgorithm::default(), AddAlgorithm::Vec4);
}

#[test]
fn add_vec4_with_a_grid_smaller_than_the_data_loops() {
    // 2 blocks for 10 tiles of 1024 vectors: each thread goes round the grid-stride loop 5
    // times; plus a 3-element tail.
    let n = 4 * 1024 * 10 + 3;
    let (a, b) = (random(1, n), random(2, n));
    let mut c = vec![0.0f32; n];
    let mut l = Launch::new("add_vec4", launch(2, kadd::BLOCK, 0));
    let (pa, pb, pc) = (l.input("a", &a), l.input("b", &b), l.output("c", &mut c));
    // SAFETY: n floats each; glibc's allocations are 16-byte aligned, checked below.
    assert!(
        [pa as usize, pb as usize, pc as usize]
            .iter()
            .all(|p| p % 16 == 0)
    );
    unsafe { l.run(|| kadd::add_vec4(pa, pb, pc, n)) }.unwrap();
    assert_eq!(c, cpu::add(&a, &b).unwrap());
}

#[test]
fn add_vec4_on_a_misaligned_buffer_is_reported() {
    // What the host's alignment check prevents: a 16-byte access at a 4-byte aligned address.
    // A float buffer is 4-byte aligned: start the input at the first element whose address is
    // 4 bytes past a 16-byte boundary, so the premise holds by construction (this test used to
    // return early, and pass, when an allocation happened not to be 16-byte aligned).
    let n = 64;
    let mut storage = vec![0.0f32; n + 4];
    let start = (0..4)
        .find(|&i| storage[i..].as_ptr() as usize % 16 == 4)
        .unwrap_or_else(|| panic!("no element 4 bytes past a 16-byte boundary among 4 floats"));
    storage[start..start + n].copy_from_slice(&random(3, n));
    let a = &storage[start..start + n];
    assert_eq!(a.as_ptr() as usize % 16, 4, "the premise: a misaligned input");
    let b = random(4, n);
    let mut c = vec![0.0f32; n];
    let mut l = Launch::new("add_vec4", launch(1, kadd::BLOCK, 0));
    let (pa, pb, pc) = (l.input("a", a), l.input("b", &b), l.output("c", &mut c));
    // SAFETY: registered buffers of n floats; the misalignment is the planted bug, which the
    // simulator reports before dereferencing.
    let err = unsafe { l.run(|| kadd::add_vec4(pa, pb, pc, n)) }.unwrap_err();
    println!("{err}");
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.contains("misaligned")),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Long rows: the sums the kernels accumulate per thread
// ---------------------------------------------------------------------------------------------

/// The relative error of a row's sum of exponentials as the tutorial kernel (`softmax_rows`)
/// forms it: thread `tid` of `threads` adds entries `tid, tid + threads, ...` with `add`, then the
/// block adds the partial sums by a tree (in f32, as `block::reduce_sum`).
fn row_sum_error(terms: &[f32], threads: usize, add: impl Fn(&[f32], usize, usize) -> f32) -> f64 {
    let exact: f64 = terms.iter().map(|&e| f64::from(e)).sum();
    let mut partials: Vec<f32> = (0..threads).map(|tid| add(terms, tid, threads)).collect();
    while partials.len() > 1 {
        let half = partials.len() / 2;
        for i in 0..half {
            partials[i] += partials[i + half];
        }
        partials.truncate(half);
    }
    (f64::from(partials[0]) - exact).abs() / exact
}

/// A row of 2^24 at `t = 10`, the sums laid out as the tutorial kernel's 256 threads add them:
/// with the kernels' [`ksoft::KahanSum`] the sum stays at f32 rounding; with the plain running
/// sum it had (the planted defect), its error is past the long-row tolerance of the CUDA trials
/// (`tests/kernels.rs`, 5e-6 at `t = 10`): the trial would catch the old kernel.
#[test]
fn a_long_row_sums_to_f32_rounding_with_compensation_and_not_without() {
    const LONG_ROW: usize = 1 << 24;
    const T: f32 = 10.0;
    /// The CUDA trials' per-element tolerance at `t = 10` (`long_row_tolerance(10.0)`).
    const TRIAL_TOLERANCE: f64 = 5e-6;
    let x = random(41, LONG_ROW);
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let terms: Vec<f32> = x
        .iter()
        .map(|&v| (f64::from(ksoft::exponent(v, m, T))).exp() as f32)
        .collect();
    let threads = ksoft::BLOCK as usize;
    let plain = row_sum_error(&terms, threads, |e, tid, stride| {
        e.iter().skip(tid).step_by(stride).fold(0.0f32, |s, &v| s + v)
    });
    let compensated = row_sum_error(&terms, threads, |e, tid, stride| {
        let mut sum = ksoft::KahanSum::ZERO;
        e.iter().skip(tid).step_by(stride).for_each(|&v| sum.add(v));
        sum.value()
    });
    println!("2^24 terms at t = {T}: plain running sums {plain:.2e}, compensated {compensated:.2e}");
    assert!(compensated < 5e-7, "compensated sum off by {compensated:.2e}");
    assert!(
        plain > TRIAL_TOLERANCE,
        "the planted plain sum passes: {plain:.2e}"
    );
}

#[test]
fn kahan_sum_keeps_what_a_plain_sum_rounds_away() {
    // 1 + 2^24 terms of 2^-24: a plain f32 sum stays at 1 (each term is half an ulp of 1 and
    // rounds away), the compensated one reaches 2.
    let mut sum = ksoft::KahanSum::ZERO;
    sum.add(1.0);
    let tiny = f32::powi(2.0, -24);
    for _ in 0..(1 << 24) {
        sum.add(tiny);
    }
    assert_eq!(sum.value(), 2.0);
    let mut scaled = sum;
    scaled.scale(0.5);
    assert_eq!(scaled.value(), 1.0);
}
