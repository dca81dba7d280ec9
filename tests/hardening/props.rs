//! Property tests of `add`, `matmul` (every algorithm) and `softmax` against the CPU
//! reference, on random inputs from a proptest runner seeded by the run's seed and the trial name.

use gpukern::{MatmulAlgorithm, cpu};
use libtest_mimic::Failed;
use ndarray::Array2;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::{Backend, MATMUL_REL_TOL, common, softmax_close};

/// Sizes around the block (256) and tile (16, 32) edges, primes, and the empty and unit cases.
const EDGE_LENGTHS: &[usize] = &[
    0, 1, 2, 3, 5, 7, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 255, 256, 257, 1023, 1024, 1025, 4099,
];

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

/// `add` and `increment_by_one` against the CPU reference, at lengths around the block edges.
pub(crate) fn prop_add(backend: Backend, seed: u64) -> Result<(), Failed> {
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

/// Every matmul algorithm against the CPU reference on random shapes of the backend's sides
/// (TF32 algorithms within the TF32 bound, the others within [`MATMUL_REL_TOL`]).
pub(crate) fn prop_matmul(backend: Backend, seed: u64) -> Result<(), Failed> {
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

/// Softmax against the CPU reference over row counts, edge lengths, inverse temperatures and
/// input scales up to near `f32::MAX`.
pub(crate) fn prop_softmax(backend: Backend, seed: u64) -> Result<(), Failed> {
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
