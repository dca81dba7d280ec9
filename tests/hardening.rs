//! Hardening: property tests of every public operation against the CPU reference, softmax's
//! edge rules, edge shapes, limits, memory exhaustion and concurrency.
//!
//! Each check runs on the simulator (`sim::...`, always) and on CUDA device 0 (`cuda::...`,
//! reported as ignored where there is no GPU, failed instead with `GPUKERN_REQUIRE_GPU=1`).
//! `global::...` checks go through `Gpu::global()`, the default the free functions use.
//! Random inputs come from a seed printed at the start (`GPUKERN_TEST_SEED` reproduces it).

mod common;

use gpukern::{Error, Gpu, MatmulAlgorithm, cpu};
use libtest_mimic::{Arguments, Failed, Trial};
use ndarray::{Array2, s};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Sizes around the block (256) and tile (16, 32) edges, primes, and the empty and unit cases.
const EDGE_LENGTHS: &[usize] = &[
    0, 1, 2, 3, 5, 7, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 255, 256, 257, 1023, 1024, 1025, 4099,
];
/// Matrix sides for the simulator (kept small: it runs every thread of every block on the CPU).
const SIM_SIDES: &[usize] = &[0, 1, 2, 3, 7, 13, 16, 17, 31, 32, 33, 47];
/// Matrix sides on the GPU (the f64 CPU reference bounds them: 1025^3 takes about a second).
const GPU_SIDES: &[usize] = &[0, 1, 2, 7, 31, 32, 33, 127, 128, 129, 255, 257, 511, 1000, 1025];
/// f32 matmul against an f64 reference: the error norm of k-term f32 sums stays near 1e-7.
const MATMUL_REL_TOL: f64 = 1e-5;
/// Softmax per element: `ex2.approx` (2^-22) plus the rounding of `t * (x - m)`, which grows with
/// the exponent's size (|d| * 6e-8, up to ~1e-5 for the smallest terms that still matter).
const SOFTMAX_REL_TOL: f32 = 1e-4;
/// Below this a softmax output counts as zero for the relative check.
const SOFTMAX_ABS_TOL: f32 = 1e-7;

/// The backend of a trial.
#[derive(Clone, Copy)]
enum Backend {
    Sim,
    Cuda,
}

impl Backend {
    fn gpu(self) -> Result<Gpu, Failed> {
        match self {
            Backend::Sim => Ok(Gpu::simulator()),
            Backend::Cuda => Gpu::new(0).map_err(|e| Failed::from(format!("CUDA device 0: {e}"))),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Cuda => "cuda",
        }
    }
    fn sides(self) -> &'static [usize] {
        match self {
            Backend::Sim => SIM_SIDES,
            Backend::Cuda => GPU_SIDES,
        }
    }
    fn cases(self) -> u32 {
        match self {
            Backend::Sim => 24,
            Backend::Cuda => 40,
        }
    }
}

/// A proptest runner seeded from the run's seed and the trial name.
fn runner(seed: u64, name: &str, cases: u32) -> TestRunner {
    let mut bytes = [0u8; 32];
    let mixed = seed
        ^ name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&mixed.wrapping_add(i as u64).to_le_bytes());
    }
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Runs a property and turns its failure into a trial failure.
fn check<T: std::fmt::Debug>(
    mut runner: TestRunner,
    strategy: impl Strategy<Value = T>,
    test: impl Fn(T) -> Result<(), TestCaseError>,
) -> Result<(), Failed> {
    runner
        .run(&strategy, test)
        .map_err(|e| Failed::from(e.to_string()))
}

/// Maps a gpukern error into a test-case failure.
fn tc<T>(r: gpukern::Result<T>) -> Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(e.to_string()))
}

/// Finite values in [-8, 8].
fn values(len: usize) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(-8.0f32..8.0, len)
}

/// A `rows x cols` matrix strategy.
fn matrix(rows: usize, cols: usize) -> impl Strategy<Value = Array2<f32>> {
    values(rows * cols).prop_map(move |v| Array2::from_shape_vec((rows, cols), v).expect("len = rows * cols"))
}

/// Compares softmax output to the reference element by element; NaN must match NaN.
fn softmax_close(out: &[f32], reference: &[f32]) -> Result<(), String> {
    for (i, (&o, &r)) in out.iter().zip(reference).enumerate() {
        let ok = if r.is_nan() {
            o.is_nan()
        } else {
            (o - r).abs() <= SOFTMAX_REL_TOL * r.abs() + SOFTMAX_ABS_TOL
        };
        if !ok {
            return Err(format!("element {i}: got {o}, reference {r}"));
        }
    }
    if out.len() != reference.len() {
        return Err(format!("length {} vs reference {}", out.len(), reference.len()));
    }
    Ok(())
}

fn prop_add(backend: Backend, seed: u64) -> Result<(), Failed> {
    let gpu = backend.gpu()?;
    let strategy = proptest::sample::select(EDGE_LENGTHS).prop_flat_map(|n| (values(n), values(n)));
    check(runner(seed, "add", backend.cases()), strategy, |(a, b)| {
        let reference = tc(cpu::add(&a, &b))?;
        let sum = tc(gpu.add(&tc(gpu.upload(&a))?, &tc(gpu.upload(&b))?))?;
        prop_assert_eq!(tc(sum.to_vec())?, reference.clone());
        let mut x = tc(gpu.upload(&a))?;
        tc(gpu.increment_by_one(&mut x))?;
        prop_assert_eq!(tc(x.to_vec())?, cpu::increment_by_one(&a));
        Ok(())
    })
}

fn prop_matmul(backend: Backend, seed: u64) -> Result<(), Failed> {
    let gpu = backend.gpu()?;
    let sides = backend.sides();
    let dims = (
        proptest::sample::select(sides),
        proptest::sample::select(sides),
        proptest::sample::select(sides),
    );
    let strategy = dims.prop_flat_map(|(m, k, n)| (matrix(m, k), matrix(k, n)));
    check(runner(seed, "matmul", backend.cases()), strategy, |(a, b)| {
        let reference = tc(cpu::matmul(&a, &b))?;
        let (da, db) = (tc(gpu.upload_matrix(&a))?, tc(gpu.upload_matrix(&b))?);
        for algorithm in MatmulAlgorithm::ALL {
            let c = tc(tc(gpu.matmul_with(&da, &db, algorithm))?.to_array())?;
            prop_assert_eq!(c.dim(), reference.dim());
            if algorithm.uses_tf32() {
                // Reduced precision: each element within the TF32 bound instead.
                let violation =
                    common::tf32_violation(&a.view(), &b.view(), &c.iter().copied().collect::<Vec<_>>());
                prop_assert!(
                    violation.is_none(),
                    "{:?}: {:?} x {:?}: {}",
                    algorithm,
                    a.dim(),
                    b.dim(),
                    violation.unwrap_or_default()
                );
                continue;
            }
            let err = cpu::rel_error(
                &c.iter().copied().collect::<Vec<_>>(),
                &reference.iter().copied().collect::<Vec<_>>(),
            );
            prop_assert!(
                err <= MATMUL_REL_TOL,
                "{:?}: {:?} x {:?}: rel error {err}",
                algorithm,
                a.dim(),
                b.dim()
            );
        }
        Ok(())
    })
}

fn prop_softmax(backend: Backend, seed: u64) -> Result<(), Failed> {
    let gpu = backend.gpu()?;
    let rows = proptest::sample::select(&[0usize, 1, 2, 3, 7, 33][..]);
    let cols = proptest::sample::select(EDGE_LENGTHS);
    let t = proptest::sample::select(&[0.0f32, 1.0, 0.5, -1.0, 2.5, 1e4, -1e4, 1e-3][..]);
    let scale = proptest::sample::select(&[1.0f32, 1e3, 1e30, 3e38][..]);
    let strategy = (rows, cols, t, scale).prop_flat_map(|(r, c, t, scale)| {
        (
            proptest::collection::vec(-1.0f32..1.0, r * c),
            Just((r, c, t, scale)),
        )
    });
    check(
        runner(seed, "softmax", backend.cases()),
        strategy,
        |(v, (rows, cols, t, scale))| {
            let x =
                Array2::from_shape_vec((rows, cols), v.iter().map(|e| e * scale).collect()).expect("shape");
            let reference = cpu::softmax_rows(&x, t);
            let y = tc(tc(gpu.softmax(&tc(gpu.upload_matrix(&x))?, t))?.to_array())?;
            let (y, r): (Vec<f32>, Vec<f32>) =
                (y.iter().copied().collect(), reference.iter().copied().collect());
            softmax_close(&y, &r)
                .map_err(|e| TestCaseError::fail(format!("{rows}x{cols}, t={t}, scale={scale}: {e}")))
        },
    )
}

/// The documented rules at softmax's edges, row by row in one matrix.
fn softmax_edges(backend: Backend, _seed: u64) -> Result<(), Failed> {
    let gpu = backend.gpu()?;
    let (inf, nan, max) = (f32::INFINITY, f32::NAN, f32::MAX);
    // One launch per inverse temperature: `(name, row, expected)`. The NaN row shares its launch
    // with a clean row to show that the NaN stays in its own row.
    type Row = (&'static str, Vec<f32>, Vec<f32>);
    let one = |name, x, expected| vec![(name, x, expected)];
    let launches: Vec<(f32, Vec<Row>)> = vec![
        (
            0.0,
            one("t = 0 is uniform", vec![1.0, -5.0, 3.0, 9.0], vec![0.25; 4]),
        ),
        (
            0.0,
            one(
                "t = 0 is uniform with infinities",
                vec![inf, -inf, 1.0, 2.0],
                vec![0.25; 4],
            ),
        ),
        (
            1.0,
            one(
                "+inf entries share the mass",
                vec![inf, 1.0, inf, -3.0],
                vec![0.5, 0.0, 0.5, 0.0],
            ),
        ),
        (
            1.0,
            one(
                "-inf entries get nothing",
                vec![-inf, 0.0, -inf, 0.0],
                vec![0.0, 0.5, 0.0, 0.5],
            ),
        ),
        (1.0, one("all -inf is uniform", vec![-inf; 4], vec![0.25; 4])),
        (
            -1e4,
            one(
                "negative t favours the smallest",
                vec![1.0, 0.0, 2.0, 3.0],
                vec![0.0, 1.0, 0.0, 0.0],
            ),
        ),
        (
            -1.0,
            one(
                "negative t with -inf",
                vec![-inf, 0.0, 5.0, -inf],
                vec![0.5, 0.0, 0.0, 0.5],
            ),
        ),
        (
            1e4,
            one(
                "large t is one-hot",
                vec![0.1, 0.3, 0.2, 0.0],
                vec![0.0, 1.0, 0.0, 0.0],
            ),
        ),
        (
            2.0,
            one(
                "near f32::MAX, t = 2",
                vec![max, -max, max, 0.0],
                vec![0.5, 0.0, 0.5, 0.0],
            ),
        ),
        (
            1.0,
            one(
                "near f32::MAX, t = 1",
                vec![max, max * 0.5, -max, max],
                vec![0.5, 0.0, 0.0, 0.5],
            ),
        ),
        (
            1.0,
            vec![
                ("NaN poisons its row", vec![1.0, nan, 2.0, 3.0], vec![nan; 4]),
                ("the row after a NaN row is fine", vec![0.0; 4], vec![0.25; 4]),
            ],
        ),
    ];
    for (t, rows) in launches {
        let x = Array2::from_shape_vec((rows.len(), 4), rows.iter().flat_map(|r| r.1.clone()).collect())
            .map_err(|e| Failed::from(e.to_string()))?;
        let y = gpu
            .softmax(&gpu.upload_matrix(&x).map_err(fail)?, t)
            .map_err(fail)?
            .to_array()
            .map_err(fail)?;
        let reference = cpu::softmax_rows(&x, t);
        for ((name, _, expected), (row, cpu_row)) in
            rows.iter().zip(y.rows().into_iter().zip(reference.rows()))
        {
            let got: Vec<f32> = row.to_vec();
            softmax_close(&got, expected).map_err(|e| format!("{name}: kernel {got:?}: {e}"))?;
            softmax_close(&cpu_row.to_vec(), expected).map_err(|e| format!("{name}: CPU reference: {e}"))?;
        }
    }
    for t in [f32::NAN, f32::INFINITY, -f32::INFINITY] {
        let x = gpu.upload_matrix(&Array2::<f32>::ones((2, 3))).map_err(fail)?;
        match gpu.softmax(&x, t) {
            Err(Error::InvalidArgument { .. }) => {}
            other => {
                return Err(format!("t = {t}: expected InvalidArgument, got {:?}", other.map(|_| ())).into());
            }
        }
    }
    Ok(())
}

/// Sizes whose bytes overflow, or that no host `Vec<f32>` could hold, are `TooLarge` before
/// anything is allocated, on every allocation path; one element less gets past the size check
/// (and fails as out of memory instead). The device keeps working after each.
fn impossible_sizes(backend: Backend, _seed: u64) -> Result<(), Failed> {
    use gpukern::buffer::MAX_ELEMENTS;
    let gpu = backend.gpu()?;
    let mut failures = Vec::new();
    let mut expect = |what: &str, result: Result<(), Error>, too_large: bool| match (result, too_large) {
        (Err(Error::TooLarge { .. }), true) => {}
        // The other side of the boundary: past the size check, refused by the allocator.
        (Err(e), false) if !matches!(e, Error::TooLarge { .. }) => {}
        (other, _) => failures.push(format!(
            "{what}: expected {}, got {other:?}",
            if too_large {
                "TooLarge"
            } else {
                "an allocation failure other than TooLarge"
            }
        )),
    };
    // The cases: 2^62 + 2^31 floats are 2^64 + 2^33 bytes, 8 GiB once wrapped.
    expect(
        "zeros(2^62 + 2^31)",
        gpu.zeros::<f32>((1 << 62) + (1 << 31)).map(drop),
        true,
    );
    expect(
        "zeros(MAX_ELEMENTS + 1)",
        gpu.zeros::<f32>(MAX_ELEMENTS + 1).map(drop),
        true,
    );
    expect("zeros(usize::MAX)", gpu.zeros::<f32>(usize::MAX).map(drop), true);
    expect(
        "zeros(MAX_ELEMENTS)",
        gpu.zeros::<f32>(MAX_ELEMENTS).map(drop),
        false,
    );
    expect(
        "zeros_matrix(2^31, 2^31)",
        gpu.zeros_matrix::<f32>(1 << 31, 1 << 31).map(drop),
        true,
    );
    expect(
        "zeros_matrix(usize::MAX, 2)",
        gpu.zeros_matrix::<f32>(usize::MAX, 2).map(drop),
        true,
    );
    expect(
        "zeros_matrix(MAX_ELEMENTS, 1)",
        gpu.zeros_matrix::<f32>(MAX_ELEMENTS, 1).map(drop),
        false,
    );
    // A (2^31 x 0) by (0 x 2^31) product: empty operands, a 2^62-element result.
    let a = gpu
        .upload_matrix(&Array2::<f32>::zeros((1 << 31, 0)))
        .map_err(fail)?;
    let b = gpu
        .upload_matrix(&Array2::<f32>::zeros((0, 1 << 31)))
        .map_err(fail)?;
    for algorithm in MatmulAlgorithm::ALL {
        expect(
            &format!("matmul_with(2^31 x 0, 0 x 2^31, {})", algorithm.name()),
            gpu.matmul_with(&a, &b, algorithm).map(drop),
            true,
        );
    }
    let x = gpu.upload(&[1.0, 2.0]).map_err(fail)?;
    let sum = gpu.add(&x, &x).and_then(|s| s.to_vec()).map_err(fail)?;
    if sum != [2.0, 4.0] {
        failures.push(format!("add after the refused allocations gave {sum:?}"));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// Empty, 1xN, Nx1, k = 0, and a launch past the grid's limit.
fn shape_edges(backend: Backend, _seed: u64) -> Result<(), Failed> {
    let gpu = backend.gpu()?;
    for (m, k, n) in [
        (0, 5, 3),
        (3, 5, 0),
        (4, 0, 6),
        (1, 9, 1),
        (1, 1, 9),
        (9, 1, 1),
        (0, 0, 0),
    ] {
        let a = Array2::from_shape_fn((m, k), |(i, j)| (i * 3 + j) as f32 * 0.25 - 1.0);
        let b = Array2::from_shape_fn((k, n), |(i, j)| (i + 2 * j) as f32 * 0.5 - 2.0);
        let reference = cpu::matmul(&a, &b).map_err(fail)?;
        for algorithm in MatmulAlgorithm::ALL {
            let c = gpu.matmul_with(
                &gpu.upload_matrix(&a).map_err(fail)?,
                &gpu.upload_matrix(&b).map_err(fail)?,
                algorithm,
            );
            let c = c.and_then(|c| c.to_array()).map_err(fail)?;
            if c != reference {
                return Err(format!("{m}x{k}x{n} {algorithm:?}: {c:?} != {reference:?}").into());
            }
        }
    }
    // More rows than the tiled kernel's grid can cover (65535 blocks of 32 rows in y): refused
    // before any work, with the limit in the message.
    let rows = 65_535 * 32 + 1;
    let a = gpu
        .upload_matrix(&Array2::<f32>::zeros((rows, 0)))
        .map_err(fail)?;
    let b = gpu.upload_matrix(&Array2::<f32>::zeros((0, 1))).map_err(fail)?;
    match gpu.matmul_with(&a, &b, MatmulAlgorithm::Tiled) {
        Err(Error::TooLarge { detail, .. }) if detail.contains("65535") => Ok(()),
        other => Err(format!(
            "{rows} rows: expected TooLarge naming 65535, got {:?}",
            other.map(|_| ())
        )
        .into()),
    }
}

/// Free functions on transposed and sliced views, through the global default.
fn global_views(_seed: u64) -> Result<(), Failed> {
    let a = Array2::from_shape_fn((13, 21), |(i, j)| ((i * 7 + j * 5) % 11) as f32 - 5.0);
    let b = Array2::from_shape_fn((13, 17), |(i, j)| ((i * 3 + j) % 7) as f32 * 0.5);
    let at = a.t(); // 21 x 13, not contiguous
    let c = gpukern::matmul(&at, &b).map_err(fail)?;
    let close = |x: &Array2<f32>, y: &Array2<f32>| {
        cpu::rel_error(
            &x.iter().copied().collect::<Vec<_>>(),
            &y.iter().copied().collect::<Vec<_>>(),
        )
    };
    let err = close(&c, &cpu::matmul(&at, &b).map_err(fail)?);
    if err > MATMUL_REL_TOL {
        return Err(format!("transposed view: rel error {err}").into());
    }
    let sliced = a.slice(s![1..12;2, ..;3]); // 6 x 7, strided
    let y = gpukern::softmax(&sliced, 0.7).map_err(fail)?;
    softmax_close(
        &y.iter().copied().collect::<Vec<_>>(),
        &cpu::softmax_rows(&sliced, 0.7)
            .iter()
            .copied()
            .collect::<Vec<_>>(),
    )?;
    let sum = gpukern::add(&sliced, &sliced).map_err(fail)?;
    if sum != sliced.mapv(|v| v + v) {
        return Err("add on a sliced view".into());
    }
    let mut m = a.clone();
    gpukern::increment_by_one(&mut m.slice_mut(s![.., ..;2])).map_err(fail)?;
    let expected = Array2::from_shape_fn(a.dim(), |(i, j)| a[(i, j)] + if j % 2 == 0 { 1.0 } else { 0.0 });
    if m != expected {
        return Err("increment_by_one on a strided mutable view".into());
    }
    match gpukern::add(&a, &b) {
        Err(Error::ShapeMismatch { lhs, rhs, .. }) if lhs == vec![13, 21] && rhs == vec![13, 17] => Ok(()),
        other => Err(format!("add of 13x21 and 13x17: {:?}", other.map(|_| ())).into()),
    }
}

/// Many threads calling matmul, softmax and add through the shared default, every result checked.
fn global_concurrency(_seed: u64) -> Result<(), Failed> {
    let gpu = Gpu::global().map_err(fail)?;
    let (threads, calls) = if gpu.is_simulator() { (8, 6) } else { (8, 400) };
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<(), String> {
                    for call in 0..calls {
                        // Every call gets inputs that differ per thread and call, so a result
                        // crossing over from another thread would not match.
                        let tag = (t * 1000 + call) as f32;
                        let (m, k, n) = (5 + t, 7 + call % 5, 3 + t % 4);
                        let a = Array2::from_shape_fn((m, k), |(i, j)| tag * 1e-3 + (i + j) as f32 * 0.1);
                        let b =
                            Array2::from_shape_fn((k, n), |(i, j)| (i * n + j) as f32 * 0.01 - tag * 1e-4);
                        let c = gpukern::matmul(&a, &b).map_err(|e| e.to_string())?;
                        let r = cpu::matmul(&a, &b).map_err(|e| e.to_string())?;
                        let err = cpu::rel_error(
                            &c.iter().copied().collect::<Vec<_>>(),
                            &r.iter().copied().collect::<Vec<_>>(),
                        );
                        if err > MATMUL_REL_TOL {
                            return Err(format!("thread {t} call {call}: matmul rel error {err}"));
                        }
                        let y = gpukern::softmax(&a, 0.5).map_err(|e| e.to_string())?;
                        softmax_close(
                            &y.iter().copied().collect::<Vec<_>>(),
                            &cpu::softmax_rows(&a, 0.5).iter().copied().collect::<Vec<_>>(),
                        )
                        .map_err(|e| format!("thread {t} call {call}: softmax {e}"))?;
                        let s = gpukern::add(&a, &a).map_err(|e| e.to_string())?;
                        if s != a.mapv(|v| v + v) {
                            return Err(format!("thread {t} call {call}: add"));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())).err())
            .collect()
    });
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// Allocating past the device's memory fails with OutOfMemory, leaks nothing, and the device
/// keeps working.
fn cuda_out_of_memory(_seed: u64) -> Result<(), Failed> {
    let gpu = Backend::Cuda.gpu()?;
    // SAFETY: only the context's memory counters are read; nothing is queued or allocated.
    let Some((ctx, _)) = (unsafe { gpu.cuda_stream() }) else {
        return Err("not a CUDA Gpu".into());
    };
    let (free_before, total) = ctx.mem_get_info().map_err(|e| e.to_string())?;
    // k = 0: the operands are empty, only the m x n output (well past the device) is allocated.
    let side = ((total as f64 / 4.0).sqrt() * 1.5) as usize;
    let a = gpu
        .upload_matrix(&Array2::<f32>::zeros((side, 0)))
        .map_err(fail)?;
    let b = gpu
        .upload_matrix(&Array2::<f32>::zeros((0, side)))
        .map_err(fail)?;
    match gpu.matmul(&a, &b) {
        Err(Error::OutOfMemory { bytes }) if bytes == side * side * 4 => {}
        other => {
            return Err(format!(
                "{side}x{side} output: expected OutOfMemory, got {:?}",
                other.map(|_| ())
            )
            .into());
        }
    }
    gpu.synchronize().map_err(fail)?;
    let x = Array2::from_shape_fn((64, 48), |(i, j)| (i as f32 - j as f32) * 0.01);
    let c = gpukern::cpu::matmul(&x, &x.t()).map_err(fail)?;
    let g = gpu
        .matmul(
            &gpu.upload_matrix(&x).map_err(fail)?,
            &gpu.upload_matrix(&x.t()).map_err(fail)?,
        )
        .map_err(fail)?;
    let g = g.to_array().map_err(fail)?;
    if cpu::rel_error(
        &g.iter().copied().collect::<Vec<_>>(),
        &c.iter().copied().collect::<Vec<_>>(),
    ) > MATMUL_REL_TOL
    {
        return Err("matmul wrong after an out-of-memory error".into());
    }
    drop((a, b));
    gpu.synchronize().map_err(fail)?;
    let (free_after, _) = ctx.mem_get_info().map_err(|e| e.to_string())?;
    // The stream-ordered pool may keep a little; anything near the failed allocation would show.
    let leaked = free_before.saturating_sub(free_after);
    if leaked > 64 << 20 {
        return Err(format!("{leaked} bytes of device memory gone after the failed allocation").into());
    }
    Ok(())
}

/// More than 2^31 elements in one launch: computed in full, the last elements included.
fn cuda_past_2_pow_31(_seed: u64) -> Result<(), Failed> {
    let gpu = Backend::Cuda.gpu()?;
    let n = (1usize << 31) + 3;
    let a: Vec<f32> = (0..n).map(|i| (i % 1021) as f32).collect();
    let mut x = gpu.upload(&a).map_err(fail)?;
    gpu.increment_by_one(&mut x).map_err(fail)?;
    let sum = gpu.add(&x, &x).map_err(fail)?;
    let out = sum.to_vec().map_err(fail)?;
    for i in [0, 1, (1 << 31) - 1, 1 << 31, n - 1] {
        let expected = 2.0 * ((i % 1021) as f32 + 1.0);
        if out[i] != expected {
            return Err(format!("element {i}: {} != {expected}", out[i]).into());
        }
    }
    if out
        .iter()
        .enumerate()
        .any(|(i, &v)| v != 2.0 * ((i % 1021) as f32 + 1.0))
    {
        return Err("some element of the 2^31 + 3 add is wrong".into());
    }
    Ok(())
}

fn fail(e: Error) -> Failed {
    Failed::from(e.to_string())
}

/// A check run on one backend.
type Check = fn(Backend, u64) -> Result<(), Failed>;
/// A check with a fixed backend.
type Single = fn(u64) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let seed = std::env::var("GPUKERN_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("hardening: seed {seed} (GPUKERN_TEST_SEED={seed} reproduces this run)");
    let require_gpu = common::require_gpu();
    let opened = Gpu::new(0);
    let skip_cuda = common::cuda_trials_ignored(&opened, require_gpu);
    if let Err(e) = &opened {
        if skip_cuda {
            eprintln!("hardening: CUDA checks skipped (reported as ignored): {e}");
        } else {
            eprintln!("hardening: Gpu::new(0) failed: {e}: the CUDA checks will fail");
        }
    }

    let checks: [(&str, Check); 6] = [
        ("prop_add", prop_add),
        ("prop_matmul", prop_matmul),
        ("prop_softmax", prop_softmax),
        ("softmax_edges", softmax_edges),
        ("shape_edges", shape_edges),
        ("impossible_sizes", impossible_sizes),
    ];
    let mut trials = Vec::new();
    for backend in [Backend::Sim, Backend::Cuda] {
        for (name, f) in checks {
            let trial = Trial::test(format!("{}::{name}", backend.name()), move || f(backend, seed));
            trials.push(if matches!(backend, Backend::Cuda) {
                trial.with_ignored_flag(skip_cuda)
            } else {
                trial
            });
        }
    }
    let cuda_only: [(&str, Single); 2] = [
        ("out_of_memory", cuda_out_of_memory),
        ("past_2_pow_31_elements", cuda_past_2_pow_31),
    ];
    for (name, f) in cuda_only {
        trials.push(Trial::test(format!("cuda::{name}"), move || f(seed)).with_ignored_flag(skip_cuda));
    }
    let global: [(&str, Single); 2] = [("views", global_views), ("concurrency", global_concurrency)];
    for (name, f) in global {
        trials.push(Trial::test(format!("global::{name}"), move || f(seed)));
    }
    libtest_mimic::run(&args, trials).exit();
}
