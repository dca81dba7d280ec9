//! Every kernel and every public operation of gpukern against the CPU reference
//! ([`gpukern::cpu`]), as three families of trials:
//!
//! * `sim::...`: the methods of [`Gpu`] on the CPU simulator; always run, small shapes.
//! * `cuda::...`: the same on CUDA device 0, with large and ragged shapes. Ignored (reported as
//!   such, never as passed) where there is no driver or no device, unless `GPUKERN_REQUIRE_GPU=1`.
//! * `global::...`: the free functions (`gpukern::add`, ...) on [`Gpu::global`], with transposed
//!   and sliced views; always run, on whichever device `Gpu::global` picks.
//!
//! A custom harness (libtest-mimic) so that the CUDA trials can be ignored at run time. Inputs
//! are random in [-1, 1); the seed is printed at start and `GPUKERN_TEST_SEED` reproduces a run.

mod common;

use std::fmt::Debug;

use gpukern::ops::add::AddAlgorithm;
use gpukern::ops::matmul::{FastPlan, FastTile, SIMULATED_MULTIPROCESSORS, Tf32Tile};
use gpukern::ops::softmax::{OnePassConfig, SoftmaxAlgorithm};
use gpukern::{DeviceMatrix, DeviceVec, Error, Gpu, MatmulAlgorithm, cpu};
use libtest_mimic::{Arguments, Failed, Trial};
use ndarray::{Array1, Array2, Array3, ArrayView2, Dimension, s};
use rand::rngs::StdRng;

use common::{
    REQUIRE_GPU_ENV, TF32_ROUNDED, TF32_TRUNCATED, matmul_with_operand_bits, max_abs_diff, random_matrix,
    random_vec, tf32_statistical_violation,
};

/// `add`, `add_into` and `increment_by_one` must be exact: one IEEE f32 rounding per element, the
/// same on the device as in the reference.
const ELEMENTWISE_MAX_ABS: f64 = 0.0;
/// Matmul, relative error norm against the f64 reference: f32 fused multiply-adds over k <= 4097
/// terms drift like sqrt(k) * 2^-24 ~ 4e-6 (1.2e-6 seen on an H200 at k = 4096).
const MATMUL_REL_TOL: f64 = 1e-5;
/// Softmax, per element and relative: ex2.approx (2^-22), the rounding of t*(x-m) (|.| <= 20
/// here, ~2e-6) and f32 sums of up to 4096 terms per thread (~sqrt(4096) * 2^-24 ~ 4e-6); the
/// worst seen on an H200 was 5e-6 (a 2^20 row at t = 10).
const SOFTMAX_MAX_REL: f32 = 5e-5;
/// Chained device-resident calls (matmul -> softmax -> matmul -> add), relative error norm: the
/// stages' errors add up, to about 2e-5 at most.
const CHAIN_REL_TOL: f64 = 1e-4;

/// Inverse temperatures every softmax shape runs with: plain, flatter, uniform, reversed, sharp.
const TEMPERATURES: [f32; 5] = [1.0, 0.5, 0.0, -2.5, 10.0];

/// What a trial body returns: `?` works on gpukern's errors, and a message is a `String`.
type Check = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Shapes one backend's trials use.
struct Sizes {
    /// Vector lengths of the element-wise kernels and of `softmax_vec`.
    lengths: &'static [usize],
    /// `(m, k, n)` of the matrix products.
    matmul: &'static [(usize, usize, usize)],
    /// `(m, k, n)` of the products run with every plan of the fast kernels.
    fast: &'static [(usize, usize, usize)],
    /// `(m, k, n)` of the products run with every tiling of the TF32 kernels (16-byte copies
    /// where `k` and `n` are multiples of 4, 4-byte copies elsewhere).
    tf32: &'static [(usize, usize, usize)],
    /// `(rows, cols)` of the row-wise softmax.
    softmax: &'static [(usize, usize)],
    /// Shapes of the chained test: vector length, then `A: m x k`, `B: k x n`, `B2: n x p`.
    chain: (usize, [usize; 4]),
}

/// Small enough that the whole simulator part runs in seconds in a debug build.
const SIM_SIZES: Sizes = Sizes {
    // 1024: a multiple of 4, for element-wise kernels with 16-byte accesses.
    lengths: &[1, 7, 31, 33, 257, 1024, 1025],
    matmul: &[
        (1, 1, 1),
        (7, 31, 33),
        (33, 7, 31),
        (65, 33, 47),
        (31, 64, 2),
        (32, 32, 32),
        // Long enough k for the fast kernels' automatic split of k, with and without 16-byte
        // accesses (those need k and n multiples of 4).
        (33, 520, 17),
        (20, 516, 36),
    ],
    fast: &[(1, 1, 1), (7, 31, 33), (65, 33, 47), (20, 516, 36), (33, 520, 17)],
    // Every MMA is 32 warp shuffles in the simulator: small shapes, but past the 128-row and
    // 128/256-column block tiles and the 32-deep k tile.
    tf32: &[
        (1, 1, 1),
        (17, 33, 65),
        (129, 131, 37),
        (200, 300, 72),
        (128, 64, 256),
    ],
    softmax: &[(1, 1), (7, 31), (5, 300), (2, 1025)],
    chain: (300, [20, 33, 17, 9]),
};

/// The simulator's one row past 2048 vectors (4 per thread of 512 threads at most): the
/// block-per-row paths take 8 vectors per thread.
const SIM_BLOCK_8_ROW: (usize, usize) = (1, 8196);

/// Ragged shapes around the block sizes (256 threads, 32x32 tiles) and large ones.
const CUDA_SIZES: Sizes = Sizes {
    lengths: &[1, 7, 31, 33, 1000, 1025, 4097, 1 << 20],
    matmul: &[
        (1, 1, 1),
        (7, 31, 33),
        (33, 7, 31),
        (1000, 1000, 1000),
        (1025, 1, 1025),
        (4097, 33, 31),
        (31, 4097, 7),
        (64, 4096, 64),
        (96, 128, 160),
        (257, 65, 129),
        // Enough 128x128 blocks to fill an H200's 132 multiprocessors: the large fast tiling.
        (1537, 129, 1409),
        (2048, 256, 1152),
    ],
    fast: &[
        (1, 1, 1),
        (7, 31, 33),
        (257, 65, 129),
        (1000, 1000, 1000),
        (31, 4097, 7),
        (64, 4096, 64),
    ],
    tf32: &[
        (1, 1, 1),
        (17, 33, 65),
        (129, 131, 37),
        (200, 300, 70),
        (1000, 1000, 1000),
        (1024, 1024, 1024),
        (2048, 256, 1152),
        (1537, 1029, 1409),
        (31, 4097, 7),
    ],
    softmax: &[
        (1, 1),
        (7, 31),
        (33, 1025),
        (1000, 4097),
        // More rows than the persistent warp kernel has warps resident: each loops.
        (5000, 999),
        (3, 100_000),
        (1, 1 << 20),
    ],
    chain: (100_003, [300, 200, 150, 70]),
};

/// One backend's device for the trials, or why there is none.
struct Target {
    /// Trial name prefix: `sim` or `cuda`.
    prefix: &'static str,
    /// The device, or the message a trial fails with when there is none.
    gpu: Result<Gpu, String>,
    /// Whether every trial of this backend is marked ignored (no GPU here).
    ignored: bool,
}

/// A trial named `<prefix>::<name>` running `body` on the target's device with a generator
/// seeded from the run's seed and the trial's name; a failure names the seed.
fn trial<F>(target: &Target, name: &str, body: F) -> Trial
where
    F: FnOnce(&Gpu, &mut StdRng) -> Check + Send + 'static,
{
    let full = format!("{}::{name}", target.prefix);
    let gpu = target.gpu.clone();
    let rng_name = full.clone();
    Trial::test(full, move || {
        let gpu = gpu.map_err(Failed::from)?;
        let mut rng = common::rng_for(&rng_name);
        body(&gpu, &mut rng).map_err(|e| Failed::from(format!("{e} ({})", common::seed_hint())))
    })
    .with_ignored_flag(target.ignored)
}

/// A `global::<name>` trial: the free functions on `Gpu::global()`, always run.
fn global_trial<F>(name: &str, body: F) -> Trial
where
    F: FnOnce(&mut StdRng) -> Check + Send + 'static,
{
    let full = format!("global::{name}");
    let rng_name = full.clone();
    Trial::test(full, move || {
        let mut rng = common::rng_for(&rng_name);
        body(&mut rng).map_err(|e| Failed::from(format!("{e} ({})", common::seed_hint())))
    })
}

// ---------------------------------------------------------------------------------------------
// Comparisons

/// `error <= tol`; false for a NaN error.
fn within(error: f64, tol: f64) -> bool {
    error <= tol
}

/// Fails unless `got` has `want`'s length and every element is within `max_abs` of it (NaN never
/// is).
fn check_abs(what: &str, got: &[f32], want: &[f32], max_abs: f64) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| !within((f64::from(got[i]) - f64::from(want[i])).abs(), max_abs))
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} elements off by more than {max_abs:e}, first at index {i}: got {}, \
             expected {}; max abs error {:.3e}",
            bad.len(),
            got.len(),
            got[i],
            want[i],
            max_abs_diff(got, want)
        )
        .into()),
    }
}

/// Fails unless the relative error norm (`cpu::rel_error`) of `got` against `want` is at most
/// `tol`.
fn check_rel_error(what: &str, got: &[f32], want: &[f32], tol: f64) -> Check {
    let err = cpu::rel_error(got, want);
    if err <= tol {
        Ok(())
    } else {
        let nans: Vec<usize> = (0..got.len()).filter(|&i| got[i].is_nan()).collect();
        let nans = match nans.first() {
            // Poisoned outputs are NaN: an element no thread wrote shows up here.
            Some(first) => format!(", {} NaN elements, the first at index {first}", nans.len()),
            None => String::new(),
        };
        Err(format!(
            "{what}: relative error {err:.3e} > {tol:e} (max abs error {:.3e}, {} elements{nans})",
            max_abs_diff(got, want),
            got.len()
        )
        .into())
    }
}

/// Fails unless every element of `got` is within `max_rel` of `want`, relatively, and is NaN
/// exactly where `want` is.
fn check_rel_each(what: &str, got: &[f32], want: &[f32], max_rel: f32) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let close = |g: f32, w: f32| {
        if w.is_nan() {
            g.is_nan()
        } else {
            approx::relative_eq!(g, w, epsilon = 0.0, max_relative = max_rel)
        }
    };
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !close(got[i], want[i])).collect();
    let Some(&first) = bad.first() else {
        return Ok(());
    };
    let rel = |i: usize| (f64::from(got[i]) - f64::from(want[i])).abs() / f64::from(want[i]).abs();
    let worst = bad
        .iter()
        .copied()
        .max_by(|&i, &j| rel(i).total_cmp(&rel(j)))
        .unwrap_or(first);
    Err(format!(
        "{what}: {} of {} elements off by more than {max_rel:e} relative; first at index {first} \
         (got {}, expected {}), worst at index {worst} (got {}, expected {}, relative error {:.3e})",
        bad.len(),
        got.len(),
        got[first],
        want[first],
        got[worst],
        want[worst],
        rel(worst)
    )
    .into())
}

/// Fails unless `result` is an [`Error::ShapeMismatch`] between `lhs` and `rhs` whose message
/// names both shapes.
fn expect_shape_mismatch<T>(what: &str, result: gpukern::Result<T>, lhs: &[usize], rhs: &[usize]) -> Check {
    let Err(e) = result else {
        return Err(format!("{what}: expected a shape mismatch, got Ok").into());
    };
    let msg = e.to_string();
    let Error::ShapeMismatch { lhs: l, rhs: r, .. } = &e else {
        return Err(format!("{what}: expected a shape mismatch, got: {msg}").into());
    };
    let (ls, rs) = (format!("{lhs:?}"), format!("{rhs:?}"));
    if l != lhs || r != rhs {
        Err(format!("{what}: mismatch between {l:?} and {r:?}, expected {ls} and {rs}").into())
    } else if !msg.contains(&ls) || !msg.contains(&rs) {
        Err(format!("{what}: message {msg:?} does not name both shapes {ls} and {rs}").into())
    } else {
        Ok(())
    }
}

/// Fails unless `result` is an [`Error::InvalidArgument`] about the inverse temperature.
fn expect_bad_temperature<T>(what: &str, result: gpukern::Result<T>) -> Check {
    match result {
        Err(e @ Error::InvalidArgument { .. }) if e.to_string().contains("inverse temperature") => Ok(()),
        Err(e) => {
            Err(format!("{what}: expected InvalidArgument about the inverse temperature, got: {e}").into())
        }
        Ok(_) => Err(format!("{what}: expected InvalidArgument, got Ok").into()),
    }
}

/// Fails unless `result` is an [`Error::WrongDevice`].
fn expect_wrong_device<T>(what: &str, result: gpukern::Result<T>) -> Check {
    match result {
        Err(e @ Error::WrongDevice { .. }) if e.to_string().contains("another device") => Ok(()),
        Err(e) => Err(format!("{what}: expected WrongDevice, got: {e}").into()),
        Ok(_) => Err(format!("{what}: expected WrongDevice, got Ok").into()),
    }
}

/// Fails unless `got` has shape `want`.
fn check_dim<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: shape {got:?}, expected {want:?}").into())
    }
}

/// Turns a list of failures into one error, or `Ok` if there are none.
fn all_passed(failures: Vec<String>) -> Check {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// A device matrix of `rows x cols` NaNs: the output of an `_into` call, so that an element the
/// kernel does not write shows up.
fn poisoned_matrix(gpu: &Gpu, rows: usize, cols: usize) -> gpukern::Result<DeviceMatrix> {
    gpu.upload_matrix(&Array2::from_elem((rows, cols), f32::NAN))
}

/// A device vector of `len` NaNs (see [`poisoned_matrix`]).
fn poisoned_vec(gpu: &Gpu, len: usize) -> gpukern::Result<DeviceVec> {
    gpu.upload(&vec![f32::NAN; len])
}

/// The elements of any array in logical (row-major) order.
fn logical<D: Dimension>(a: &ndarray::ArrayView<'_, f32, D>) -> Vec<f32> {
    a.iter().copied().collect()
}

// ---------------------------------------------------------------------------------------------
// Trials of the `Gpu` methods, per backend

/// `describe`, `is_simulator`, `limits`, `cuda_stream`, `synchronize` agree with the backend.
fn device_info(gpu: &Gpu, simulator: bool) -> Check {
    let mut failures = Vec::new();
    if gpu.is_simulator() != simulator {
        failures.push(format!(
            "is_simulator() = {}, expected {simulator}",
            gpu.is_simulator()
        ));
    }
    // SAFETY: only whether there is a stream is looked at; nothing is queued on it.
    if unsafe { gpu.cuda_stream() }.is_some() == simulator {
        failures.push("cuda_stream() must be Some exactly on a CUDA device".to_string());
    }
    let description = gpu.describe();
    if simulator != description.contains("simulator") || format!("{gpu:?}").is_empty() {
        failures.push(format!("describe() = {description:?}"));
    }
    let limits = gpu.limits();
    if simulator && limits != gpukern::DeviceLimits::SIMULATOR {
        failures.push(format!(
            "the simulator's limits {limits:?} are not DeviceLimits::SIMULATOR"
        ));
    }
    // Every kernel's launch needs these; a device that reports less could not run them.
    let tile = gpukern::kernels::matmul::TILE as u32;
    if limits.max_threads_per_block < tile * tile
        || limits.max_shared_mem_per_block < gpukern::kernels::matmul::TILED_SHARED_BYTES
    {
        failures.push(format!("limits {limits:?} too small for a {tile}x{tile} tile"));
    }
    match gpu.multiprocessors() {
        Ok(sms) if sms >= 1 && (!simulator || sms == SIMULATED_MULTIPROCESSORS) => {}
        other => failures.push(format!("multiprocessors() = {other:?}")),
    }
    if let Err(e) = gpu.synchronize() {
        failures.push(format!("synchronize(): {e}"));
    }
    all_passed(failures)
}

/// `add` and `add_into` (into a poisoned output) against `cpu::add`, and the length accessors.
fn add_vectors(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let (a, b) = (random_vec(rng, n), random_vec(rng, n));
    let want = cpu::add(&a, &b)?;
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    if da.len() != n || da.is_empty() != (n == 0) {
        return Err(format!(
            "upload of {n}: len() = {}, is_empty() = {}",
            da.len(),
            da.is_empty()
        )
        .into());
    }
    let mut failures = Vec::new();
    let mut check = |variant: String, got: gpukern::Result<Vec<f32>>| {
        let what = format!("{variant}, n = {n}");
        let result = match got {
            Ok(got) => check_abs(&what, &got, &want, ELEMENTWISE_MAX_ABS),
            Err(e) => Err(format!("{what}: {e}").into()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    check("add".into(), gpu.add(&da, &db).and_then(|c| c.to_vec()));
    let into = |algorithm: Option<AddAlgorithm>| -> gpukern::Result<Vec<f32>> {
        let mut c = poisoned_vec(gpu, n)?;
        match algorithm {
            None => gpu.add_into(&da, &db, &mut c)?,
            Some(algorithm) => gpu.add_into_with(&da, &db, &mut c, algorithm)?,
        }
        c.to_vec()
    };
    check("add_into".into(), into(None));
    for algorithm in AddAlgorithm::ALL {
        let name = algorithm.name();
        check(
            format!("add_with({name})"),
            gpu.add_with(&da, &db, algorithm).and_then(|c| c.to_vec()),
        );
        check(format!("add_into_with({name})"), into(Some(algorithm)));
    }
    // A download into a host buffer that already holds other values.
    let mut host = vec![f32::NAN; n];
    let copied = gpu.add(&da, &db).and_then(|c| c.copy_to_host(&mut host));
    check("add, copy_to_host".into(), copied.map(|()| host));
    all_passed(failures)
}

/// `increment_by_one` in place against `cpu::increment_by_one`: twice with the default
/// algorithm, then twice with each algorithm (the scalar tutorial kernel and the 16-byte one).
fn increment_vector(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let x = random_vec(rng, n);
    let want = cpu::increment_by_one(&cpu::increment_by_one(&x));
    let mut failures = Vec::new();
    let run = |what: String, algorithm: Option<AddAlgorithm>| -> Check {
        let mut dx = gpu.upload(&x)?;
        for _ in 0..2 {
            match algorithm {
                None => gpu.increment_by_one(&mut dx)?,
                Some(algorithm) => gpu.increment_by_one_with(&mut dx, algorithm)?,
            }
        }
        check_abs(&what, &dx.to_vec()?, &want, ELEMENTWISE_MAX_ABS)
    };
    let mut cases = vec![(format!("increment_by_one twice, n = {n}"), None)];
    for algorithm in AddAlgorithm::ALL {
        cases.push((
            format!("increment_by_one_with({}) twice, n = {n}", algorithm.name()),
            Some(algorithm),
        ));
    }
    for (what, algorithm) in cases {
        if let Err(e) = run(what, algorithm) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// `softmax_vec` at every temperature against `cpu::softmax`.
fn softmax_vector(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let x = random_vec(rng, n);
    let dx = gpu.upload(&x)?;
    let mut failures = Vec::new();
    for t in TEMPERATURES {
        let got = gpu.softmax_vec(&dx, t)?.to_vec()?;
        if let Err(e) = check_rel_each(
            &format!("softmax_vec, n = {n}, t = {t}"),
            &got,
            &cpu::softmax(&x, t),
            SOFTMAX_MAX_REL,
        ) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// Fails unless `got` (the `m x n` result of `a * b` by a rounding TF32 kernel) lies within the
/// worst-case TF32 bound of every element and its RMS error near what TF32 operands give
/// (`tests/common`'s `tf32_statistical_violation`).
fn check_tf32(what: &str, a: &Array2<f32>, b: &Array2<f32>, got: &[f32]) -> Check {
    let factor = gpukern::ops::matmul::tf32_error_factor(a.ncols());
    match tf32_statistical_violation(&a.view(), &b.view(), got, factor, TF32_ROUNDED) {
        None => Ok(()),
        Some(e) => Err(format!("{what}: {e}").into()),
    }
}

/// Every matmul entry point and algorithm on one `m x k` times `k x n` product against
/// `cpu::matmul`: `matmul`, `matmul_with` and `matmul_into` (into a poisoned output); the f32
/// algorithms to `MATMUL_REL_TOL`, TF32 to its per-element bound.
fn matmul_shape(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let want = cpu::matmul(&a, &b)?;
    let want = want.as_slice().unwrap_or_default();
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut failures = Vec::new();
    let mut check = |variant: String, tf32: bool, got: gpukern::Result<Array2<f32>>| {
        let what = format!("{m}x{k}x{n} {variant}");
        let result = match got {
            Ok(c) => check_dim(&what, c.dim(), (m, n)).and_then(|()| {
                let got = c.as_slice().unwrap_or_default();
                if tf32 {
                    check_tf32(&what, &a, &b, got)
                } else {
                    check_rel_error(&what, got, want, MATMUL_REL_TOL)
                }
            }),
            Err(e) => Err(format!("{what}: {e}").into()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    check(
        "matmul".into(),
        false,
        gpu.matmul(&da, &db).and_then(|c| c.to_array()),
    );
    for algorithm in MatmulAlgorithm::ALL {
        let (name, tf32) = (algorithm.name(), algorithm.uses_tf32());
        let with = gpu.matmul_with(&da, &db, algorithm);
        check(
            format!("matmul_with({name})"),
            tf32,
            with.and_then(|c| c.to_array()),
        );
        let into = poisoned_matrix(gpu, m, n).and_then(|mut c| {
            gpu.matmul_into(&da, &db, &mut c, algorithm)
                .and_then(|()| c.to_array())
        });
        check(format!("matmul_into({name})"), tf32, into);
    }
    all_passed(failures)
}

/// Every tiling of the TF32 kernels (rounding and truncating) through `matmul_tf32_into`, into
/// a poisoned output, each within its own bound (`Tf32Tile::error_factor`: `u = 2^-11` rounding,
/// `2^-10` truncating): reaches every TF32 kernel whatever tiling `Tf32Tile::choose` would pick.
fn matmul_tf32_tiles(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut failures = Vec::new();
    for tile in Tf32Tile::ALL {
        let what = format!("{m}x{k}x{n} matmul_tf32_into({})", tile.name());
        let mut c = poisoned_matrix(gpu, m, n)?;
        if tile.tiling().shared_bytes() > gpu.limits().max_shared_mem_per_block_optin {
            // A tiling this device cannot hold (e.g. 105 KiB on a 99 KiB GPU) must be refused
            // with TooLarge, never launched; `Tf32Tile::choose` never picks it there.
            match gpu.matmul_tf32_into(&da, &db, &mut c, tile) {
                Err(Error::TooLarge { .. }) => {}
                other => failures.push(format!("{what}: over the shared-memory limit, got {other:?}")),
            }
            continue;
        }
        let result: Check = gpu
            .matmul_tf32_into(&da, &db, &mut c, tile)
            .and_then(|()| c.to_array())
            .map_err(|e| format!("{what}: {e}").into())
            .and_then(|c| {
                let got = c.as_slice().unwrap_or_default();
                let rounding = if tile.rounds() {
                    TF32_ROUNDED
                } else {
                    TF32_TRUNCATED
                };
                match tf32_statistical_violation(&a.view(), &b.view(), got, tile.error_factor(k), rounding) {
                    None => Ok(()),
                    Some(e) => Err(format!("{what}: {e}").into()),
                }
            });
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// Every plan of the fast kernels (every tiling, whole `k` and `k` in slices) through
/// `matmul_fast_into`, into a poisoned output, against `cpu::matmul`: reaches every fast kernel
/// whatever plan `FastPlan::choose` would pick for the shape.
fn matmul_fast_plans(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let want = cpu::matmul(&a, &b)?;
    let want = want.as_slice().unwrap_or_default();
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut failures = Vec::new();
    for tile in FastTile::ALL {
        for slices in [1, 2, 5] {
            let plan = FastPlan { tile, slices };
            let what = format!("{m}x{k}x{n} matmul_fast_into({plan:?})");
            let mut c = poisoned_matrix(gpu, m, n)?;
            let result = gpu
                .matmul_fast_into(&da, &db, &mut c, plan)
                .and_then(|()| c.to_array())
                .map_err(|e| format!("{what}: {e}").into())
                .and_then(|c| check_rel_error(&what, c.as_slice().unwrap_or_default(), want, MATMUL_REL_TOL));
            if let Err(e) = result {
                failures.push(e.to_string());
            }
        }
    }
    all_passed(failures)
}

/// The required 1000x1000 product with the default algorithm: relative error below 1e-5.
fn matmul_1000(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (a, b) = (random_matrix(rng, 1000, 1000), random_matrix(rng, 1000, 1000));
    let want = cpu::matmul(&a, &b)?;
    let got = gpu
        .matmul(&gpu.upload_matrix(&a)?, &gpu.upload_matrix(&b)?)?
        .to_array()?;
    check_rel_error(
        "matmul 1000x1000x1000",
        got.as_slice().unwrap_or_default(),
        want.as_slice().unwrap_or_default(),
        MATMUL_REL_TOL,
    )
}

/// `softmax` and `softmax_into` (into a poisoned output) at inverse temperature `t` against
/// `cpu::softmax_rows`.
fn softmax_shape(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize), t: f32) -> Check {
    let x = random_matrix(rng, rows, cols);
    let want = cpu::softmax_rows(&x, t);
    let want = want.as_slice().unwrap_or_default();
    let dx = gpu.upload_matrix(&x)?;
    let mut failures = Vec::new();
    let mut check = |variant: String, got: gpukern::Result<DeviceMatrix>| {
        let what = format!("{variant} {rows}x{cols}, t = {t}");
        let result = match got.and_then(|y| y.to_array()) {
            Ok(y) => check_dim(&what, y.dim(), (rows, cols)).and_then(|()| {
                check_rel_each(&what, y.as_slice().unwrap_or_default(), want, SOFTMAX_MAX_REL)
            }),
            Err(e) => Err(format!("{what}: {e}").into()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    check("softmax".into(), gpu.softmax(&dx, t));
    let into = |algorithm: Option<SoftmaxAlgorithm>| -> gpukern::Result<DeviceMatrix> {
        let mut y = poisoned_matrix(gpu, rows, cols)?;
        match algorithm {
            None => gpu.softmax_into(&dx, &mut y, t)?,
            Some(algorithm) => gpu.softmax_into_with(&dx, &mut y, t, algorithm)?,
        }
        Ok(y)
    };
    check("softmax_into".into(), into(None));
    for algorithm in SoftmaxAlgorithm::ALL {
        let name = algorithm.name();
        check(
            format!("softmax_with({name})"),
            gpu.softmax_with(&dx, t, algorithm),
        );
        check(format!("softmax_into_with({name})"), into(Some(algorithm)));
    }
    all_passed(failures)
}

/// One-pass thresholds that steer a `rows x cols` softmax to each of its paths where the shape
/// allows it (else the plan falls through to the next path): warp per row, block per row, lane
/// groups of 8 and 16, the persistent warp and block kernels, one streaming block per row, and
/// rows split over blocks (a few chunks, and 4-column chunks).
fn one_pass_configs(cols: usize) -> Vec<(&'static str, OnePassConfig)> {
    // The register-held kernels that load, reduce and write one row each; the lane-group and
    // persistent kernels have their own entries.
    let base = OnePassConfig {
        group_lanes: 0,
        persistent_min_cols: usize::MAX,
        ..OnePassConfig::default()
    };
    let (no_warp, no_block) = (0, 0);
    let mut configs = vec![
        (
            "warp",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                ..base
            },
        ),
        (
            "block",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: usize::MAX,
                ..base
            },
        ),
        (
            "group of 8",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                group_lanes: 8,
                ..base
            },
        ),
        (
            "group of 16",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                group_lanes: 16,
                ..base
            },
        ),
        (
            "persistent warp",
            OnePassConfig {
                warp_max_cols: usize::MAX,
                persistent_min_cols: 0,
                ..base
            },
        ),
        (
            "persistent block",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: usize::MAX,
                persistent_min_cols: 0,
                ..base
            },
        ),
        (
            "stream",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: no_block,
                split_max_rows: 0,
                ..base
            },
        ),
        (
            "split in ~3",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: no_block,
                split_max_rows: usize::MAX,
                split_chunk: (cols / 3).max(4),
                ..base
            },
        ),
    ];
    // One vector per block: many chunk edges, but a block per 4 columns, so short rows only.
    if cols <= SPLIT_BY_4_MAX_COLS {
        configs.push((
            "split by 4",
            OnePassConfig {
                warp_max_cols: no_warp,
                block_max_cols: no_block,
                split_max_rows: usize::MAX,
                split_chunk: 4,
                ..base
            },
        ));
    }
    configs
}

/// Longest row split into 4-column chunks (one block each) by [`one_pass_configs`].
const SPLIT_BY_4_MAX_COLS: usize = 64;

/// Inverse temperatures of the one-pass path trials: one of each sign (the edge rules, shared
/// by every path, run at every temperature in the `softmax::` trials).
const PATH_TEMPERATURES: [f32; 2] = [1.0, -2.5];

/// Every path of the one-pass softmax on one shape, at both signs of the temperature, through
/// `softmax_into_one_pass` into a poisoned output.
fn softmax_one_pass_paths(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let x = random_matrix(rng, rows, cols);
    let dx = gpu.upload_matrix(&x)?;
    let mut failures = Vec::new();
    for t in PATH_TEMPERATURES {
        let want = cpu::softmax_rows(&x, t);
        for (path, config) in one_pass_configs(cols) {
            let what = format!(
                "softmax_into_one_pass({path}: {:?}) {rows}x{cols}, t = {t}",
                config.plan(rows, cols)
            );
            let mut y = poisoned_matrix(gpu, rows, cols)?;
            let result = gpu
                .softmax_into_one_pass(&dx, &mut y, t, &config)
                .and_then(|()| y.to_array())
                .map_err(|e| format!("{what}: {e}").into())
                .and_then(|y| {
                    check_rel_each(
                        &what,
                        y.as_slice().unwrap_or_default(),
                        want.as_slice().unwrap_or_default(),
                        SOFTMAX_MAX_REL,
                    )
                });
            if let Err(e) = result {
                failures.push(e.to_string());
            }
        }
    }
    all_passed(failures)
}

/// The edge rules of [`Gpu::softmax`] at every temperature, against `cpu::softmax_rows` (which
/// follows the same rules): `+inf` and `-inf` entries, rows of equal entries (all `-inf` too),
/// entries near `f32::MAX`, and a NaN that makes its own row NaN and no other. Every other row
/// still sums to 1.
fn softmax_edge_rows(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (inf, big, nan_row) = (f32::INFINITY, f32::MAX, 4);
    // 300 columns: more than one element per thread of a 256-thread block.
    let mut x = random_matrix(rng, 7, 300);
    // Two +inf share the row for t > 0, the one -inf takes it for t < 0.
    (x[[0, 5]], x[[0, 250]], x[[0, 17]]) = (inf, inf, -inf);
    x.row_mut(1).fill(-inf);
    x.row_mut(2).fill(0.75);
    // t * x and x - m overflow in f32 here; the result must not.
    (x[[3, 0]], x[[3, 1]], x[[3, 299]]) = (big, -big, big / 2.0);
    x[[nan_row, 123]] = f32::NAN;
    (x[[5, 3]], x[[5, 200]]) = (-inf, -inf);
    // Row 6 stays random.
    let dx = gpu.upload_matrix(&x)?;
    let mut failures = Vec::new();
    for t in TEMPERATURES {
        let got = gpu.softmax(&dx, t)?.to_array()?;
        let what = format!("softmax edge rows, t = {t}");
        let want = cpu::softmax_rows(&x, t);
        if let Err(e) = check_rel_each(
            &what,
            got.as_slice().unwrap_or_default(),
            want.as_slice().unwrap_or_default(),
            SOFTMAX_MAX_REL,
        ) {
            failures.push(e.to_string());
        }
        for (r, row) in got.rows().into_iter().enumerate() {
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            if (r == nan_row) != row.iter().all(|v| v.is_nan()) {
                failures.push(format!(
                    "{what}: row {r} must be all NaN exactly when it holds a NaN"
                ));
            } else if r != nan_row && !within((sum - 1.0).abs(), f64::from(SOFTMAX_MAX_REL)) {
                failures.push(format!("{what}: row {r} sums to {sum}"));
            }
        }
    }
    all_passed(failures)
}

/// Upload once, run every operation on device-resident data, download once.
fn chained(gpu: &Gpu, rng: &mut StdRng, (len, [m, k, n, p]): (usize, [usize; 4])) -> Check {
    // Vectors: w = (x + 1) + y + (x + 1), then its softmax.
    let (x, y) = (random_vec(rng, len), random_vec(rng, len));
    let (mut dx, dy) = (gpu.upload(&x)?, gpu.upload(&y)?);
    gpu.increment_by_one(&mut dx)?;
    let dz = gpu.add(&dx, &dy)?;
    let mut dw = gpu.add(&dy, &dy)?;
    gpu.add_into(&dz, &dx, &mut dw)?;
    let ds = gpu.softmax_vec(&dw, 0.5)?;
    let x1 = cpu::increment_by_one(&x);
    let w = cpu::add(&cpu::add(&x1, &y)?, &x1)?;
    check_rel_each(
        "chained vector ops",
        &ds.to_vec()?,
        &cpu::softmax(&w, 0.5),
        SOFTMAX_MAX_REL,
    )?;

    // Matrices: g = softmax(A B, 0.5) B2 + softmax(A B, -0.25) B2.
    let (a, b, b2) = (
        random_matrix(rng, m, k),
        random_matrix(rng, k, n),
        random_matrix(rng, n, p),
    );
    let (da, db, db2) = (
        gpu.upload_matrix(&a)?,
        gpu.upload_matrix(&b)?,
        gpu.upload_matrix(&b2)?,
    );
    let dc = gpu.matmul(&da, &db)?;
    let ds = gpu.softmax(&dc, 0.5)?;
    let mut ds2 = gpu.softmax(&dc, 1.0)?;
    gpu.softmax_into(&dc, &mut ds2, -0.25)?;
    let de = gpu.matmul_with(&ds, &db2, MatmulAlgorithm::Naive)?;
    let mut df = gpu.matmul_with(&ds, &db2, MatmulAlgorithm::Tiled)?;
    gpu.matmul_into(&ds2, &db2, &mut df, MatmulAlgorithm::Tiled)?;
    check_dim("chained matmul", (de.rows(), de.cols(), df.dim()), (m, p, (m, p)))?;
    let dg = gpu.add(de.as_vec(), df.as_vec())?;
    let got = dg.to_vec()?;

    let c = cpu::matmul(&a, &b)?;
    let e = cpu::matmul(&cpu::softmax_rows(&c, 0.5), &b2)?;
    let f = cpu::matmul(&cpu::softmax_rows(&c, -0.25), &b2)?;
    let g = cpu::add(e.as_slice().unwrap_or_default(), f.as_slice().unwrap_or_default())?;
    check_rel_error(
        &format!("chained matrix ops {m}x{k}x{n}x{p}"),
        &got,
        &g,
        CHAIN_REL_TOL,
    )
}

/// Zero-sized operands: empty results, and an all-zero product when `k = 0`.
fn empty_inputs(gpu: &Gpu) -> Check {
    // `zeros` and `zeros_matrix` are zero-filled, empty or not.
    check_abs("zeros(5)", &gpu.zeros::<f32>(5)?.to_vec()?, &[0.0; 5], 0.0)?;
    check_dim("zeros(0)", gpu.zeros::<f32>(0)?.len(), 0)?;
    check_abs(
        "zeros_matrix(2, 3)",
        &gpu.zeros_matrix::<f32>(2, 3)?.as_vec().to_vec()?,
        &[0.0; 6],
        0.0,
    )?;
    check_dim(
        "zeros_matrix(0, 3)",
        gpu.zeros_matrix::<f32>(0, 3)?.to_array()?.dim(),
        (0, 3),
    )?;
    let e = gpu.upload(&[])?;
    if !e.is_empty() || !e.to_vec()?.is_empty() {
        return Err("an empty upload must be empty".into());
    }
    check_dim("add of empty", gpu.add(&e, &e)?.to_vec()?.len(), 0)?;
    let mut out = gpu.upload(&[])?;
    gpu.add_into(&e, &e, &mut out)?;
    gpu.increment_by_one(&mut out)?;
    check_dim("increment of empty", out.to_vec()?.len(), 0)?;
    check_dim(
        "softmax_vec of empty",
        gpu.softmax_vec(&e, 1.0)?.to_array()?.len(),
        0,
    )?;

    for algorithm in MatmulAlgorithm::ALL {
        let name = algorithm.name();
        for (m, k, n) in [(0, 3, 4), (4, 3, 0), (0, 0, 0), (5, 0, 7)] {
            let what = format!("matmul_with({name}) {m}x{k}x{n}");
            let (a, b) = (Array2::<f32>::zeros((m, k)), Array2::<f32>::zeros((k, n)));
            let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
            let c = gpu.matmul_with(&da, &db, algorithm)?;
            check_dim(&what, c.dim(), (m, n))?;
            let want = cpu::matmul(&a, &b)?;
            check_abs(
                &what,
                &c.as_vec().to_vec()?,
                want.as_slice().unwrap_or_default(),
                0.0,
            )?;
            let mut c = poisoned_matrix(gpu, m, n)?;
            gpu.matmul_into(&da, &db, &mut c, algorithm)?;
            let what = format!("matmul_into({name}) {m}x{k}x{n}");
            check_abs(
                &what,
                c.to_array()?.as_slice().unwrap_or_default(),
                want.as_slice().unwrap_or_default(),
                0.0,
            )?;
        }
    }
    for (rows, cols) in [(0, 5), (5, 0), (0, 0)] {
        let dx = gpu.upload_matrix(&Array2::<f32>::zeros((rows, cols)))?;
        let y = gpu.softmax(&dx, 1.0)?;
        check_dim("softmax of empty", y.to_array()?.dim(), (rows, cols))?;
    }
    Ok(())
}

/// Every shape check of the `Gpu` methods: the variant, both shapes, both in the message.
fn shape_mismatches(gpu: &Gpu) -> Check {
    let v = |n: usize| gpu.upload(&vec![0.0; n]);
    let mat = |r: usize, c: usize| gpu.upload_matrix(&Array2::<f32>::zeros((r, c)));
    expect_shape_mismatch("add", gpu.add(&v(3)?, &v(4)?), &[3], &[4])?;
    expect_shape_mismatch("copy_to_host", v(3)?.copy_to_host(&mut [0.0; 4]), &[3], &[4])?;
    for algorithm in AddAlgorithm::ALL {
        let what = format!("add_with({})", algorithm.name());
        expect_shape_mismatch(&what, gpu.add_with(&v(3)?, &v(4)?, algorithm), &[3], &[4])?;
        let what = format!("add_into_with({}) output", algorithm.name());
        let result = gpu.add_into_with(&v(3)?, &v(3)?, &mut v(5)?, algorithm);
        expect_shape_mismatch(&what, result, &[3], &[5])?;
    }
    for algorithm in SoftmaxAlgorithm::ALL {
        let what = format!("softmax_into_with({})", algorithm.name());
        let result = gpu.softmax_into_with(&mat(2, 3)?, &mut mat(3, 2)?, 1.0, algorithm);
        expect_shape_mismatch(&what, result, &[2, 3], &[3, 2])?;
    }
    expect_shape_mismatch(
        "add_into operands",
        gpu.add_into(&v(3)?, &v(2)?, &mut v(3)?),
        &[3],
        &[2],
    )?;
    expect_shape_mismatch(
        "add_into output",
        gpu.add_into(&v(3)?, &v(3)?, &mut v(5)?),
        &[3],
        &[5],
    )?;
    let (a, b) = (mat(2, 3)?, mat(4, 5)?);
    expect_shape_mismatch("matmul", gpu.matmul(&a, &b), &[2, 3], &[4, 5])?;
    for algorithm in MatmulAlgorithm::ALL {
        let what = format!("matmul_with({})", algorithm.name());
        expect_shape_mismatch(&what, gpu.matmul_with(&a, &b, algorithm), &[2, 3], &[4, 5])?;
        let what = format!("matmul_into({})", algorithm.name());
        expect_shape_mismatch(
            &what,
            gpu.matmul_into(&a, &b, &mut mat(2, 5)?, algorithm),
            &[2, 3],
            &[4, 5],
        )?;
        let (a, b) = (mat(2, 3)?, mat(3, 5)?);
        let what = format!("matmul_into({}) output", algorithm.name());
        expect_shape_mismatch(
            &what,
            gpu.matmul_into(&a, &b, &mut mat(5, 2)?, algorithm),
            &[5, 2],
            &[2, 5],
        )?;
    }
    let plan = FastPlan {
        tile: FastTile::Small,
        slices: 2,
    };
    expect_shape_mismatch(
        "matmul_fast_into",
        gpu.matmul_fast_into(&a, &b, &mut mat(2, 5)?, plan),
        &[2, 3],
        &[4, 5],
    )?;
    expect_shape_mismatch(
        "matmul_fast_into output",
        gpu.matmul_fast_into(&mat(2, 3)?, &mat(3, 5)?, &mut mat(5, 2)?, plan),
        &[5, 2],
        &[2, 5],
    )?;
    expect_shape_mismatch(
        "softmax_into",
        gpu.softmax_into(&mat(2, 3)?, &mut mat(3, 2)?, 1.0),
        &[2, 3],
        &[3, 2],
    )
}

/// A NaN or infinite inverse temperature is an [`Error::InvalidArgument`].
fn non_finite_temperature(gpu: &Gpu) -> Check {
    let x = gpu.upload_matrix(&Array2::<f32>::zeros((2, 3)))?;
    for t in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        expect_bad_temperature(&format!("softmax, t = {t}"), gpu.softmax(&x, t))?;
        let mut y = poisoned_matrix(gpu, 2, 3)?;
        expect_bad_temperature(&format!("softmax_into, t = {t}"), gpu.softmax_into(&x, &mut y, t))?;
        expect_bad_temperature(&format!("softmax_vec, t = {t}"), gpu.softmax_vec(x.as_vec(), t))?;
        for algorithm in SoftmaxAlgorithm::ALL {
            let name = algorithm.name();
            expect_bad_temperature(
                &format!("softmax_with({name}), t = {t}"),
                gpu.softmax_with(&x, t, algorithm),
            )?;
            let result = gpu.softmax_into_with(&x, &mut y, t, algorithm);
            expect_bad_temperature(&format!("softmax_into_with({name}), t = {t}"), result)?;
        }
        let result = gpu.softmax_into_one_pass(&x, &mut y, t, &OnePassConfig::default());
        expect_bad_temperature(&format!("softmax_into_one_pass, t = {t}"), result)?;
    }
    Ok(())
}

/// A fast plan of zero slices of `k` is an [`Error::InvalidArgument`], not a launch.
fn fast_plan_without_slices(gpu: &Gpu) -> Check {
    let (a, b) = (
        gpu.upload_matrix(&Array2::<f32>::ones((3, 4)))?,
        gpu.upload_matrix(&Array2::<f32>::ones((4, 5)))?,
    );
    for tile in FastTile::ALL {
        let mut c = poisoned_matrix(gpu, 3, 5)?;
        match gpu.matmul_fast_into(&a, &b, &mut c, FastPlan { tile, slices: 0 }) {
            Err(Error::InvalidArgument { .. }) => {}
            other => {
                return Err(
                    format!("{tile:?} with 0 slices: expected InvalidArgument, got {other:?}").into(),
                );
            }
        }
    }
    Ok(())
}

/// A product whose rows need more blocks than the grid's y extent allows is refused with
/// [`Error::TooLarge`] naming the limit, never run on a smaller grid.
fn too_large_grid(gpu: &Gpu) -> Check {
    let max_y = gpu.limits().max_grid_dim[1];
    // More rows than max_y blocks of the tallest block tile cover, for every algorithm; k = 0
    // keeps the operands empty.
    let m = max_y as usize * gpukern::kernels::matmul::MAX_BLOCK_ROWS + 1;
    let (a, b) = (
        gpu.upload_matrix(&Array2::<f32>::zeros((m, 0)))?,
        gpu.upload_matrix(&Array2::<f32>::zeros((0, 1)))?,
    );
    for algorithm in MatmulAlgorithm::ALL {
        match gpu.matmul_with(&a, &b, algorithm) {
            Err(e @ Error::TooLarge { .. }) if e.to_string().contains(&max_y.to_string()) => {}
            Err(e) => {
                return Err(format!(
                    "{m}x0x1 {}: expected TooLarge naming {max_y}, got: {e}",
                    algorithm.name()
                )
                .into());
            }
            Ok(_) => return Err(format!("{m}x0x1 {}: expected TooLarge, got Ok", algorithm.name()).into()),
        }
    }
    Ok(())
}

/// Buffers of `foreign` passed to `gpu`, in every operand position of every operation, are
/// refused with [`Error::WrongDevice`].
fn wrong_device(gpu: &Gpu, foreign: &Gpu) -> Check {
    let own = |n: usize| gpu.upload(&vec![1.0; n]);
    let other = |n: usize| foreign.upload(&vec![1.0; n]);
    let own_m = |r: usize, c: usize| gpu.upload_matrix(&Array2::<f32>::ones((r, c)));
    let other_m = |r: usize, c: usize| foreign.upload_matrix(&Array2::<f32>::ones((r, c)));
    expect_wrong_device("add (a)", gpu.add(&other(4)?, &own(4)?))?;
    expect_wrong_device("add (b)", gpu.add(&own(4)?, &other(4)?))?;
    expect_wrong_device("add_into (c)", gpu.add_into(&own(4)?, &own(4)?, &mut other(4)?))?;
    expect_wrong_device(
        "add_into (empty)",
        gpu.add_into(&own(0)?, &own(0)?, &mut other(0)?),
    )?;
    expect_wrong_device("increment_by_one", gpu.increment_by_one(&mut other(4)?))?;
    expect_wrong_device("softmax_vec", gpu.softmax_vec(&other(4)?, 1.0))?;
    expect_wrong_device("softmax", gpu.softmax(&other_m(2, 3)?, 1.0))?;
    for algorithm in AddAlgorithm::ALL {
        let what = format!("add_with({}) (b)", algorithm.name());
        expect_wrong_device(&what, gpu.add_with(&own(4)?, &other(4)?, algorithm))?;
        let what = format!("add_into_with({}) (c)", algorithm.name());
        expect_wrong_device(
            &what,
            gpu.add_into_with(&own(4)?, &own(4)?, &mut other(4)?, algorithm),
        )?;
    }
    for algorithm in SoftmaxAlgorithm::ALL {
        let what = format!("softmax_with({}) (x)", algorithm.name());
        expect_wrong_device(&what, gpu.softmax_with(&other_m(2, 3)?, 1.0, algorithm))?;
        let what = format!("softmax_into_with({}) (y)", algorithm.name());
        let result = gpu.softmax_into_with(&own_m(2, 3)?, &mut other_m(2, 3)?, 1.0, algorithm);
        expect_wrong_device(&what, result)?;
    }
    let config = OnePassConfig::default();
    let result = gpu.softmax_into_one_pass(&other_m(2, 3)?, &mut own_m(2, 3)?, 1.0, &config);
    expect_wrong_device("softmax_into_one_pass (x)", result)?;
    expect_wrong_device(
        "softmax_into (y)",
        gpu.softmax_into(&own_m(2, 3)?, &mut other_m(2, 3)?, 1.0),
    )?;
    expect_wrong_device("matmul (A)", gpu.matmul(&other_m(2, 3)?, &own_m(3, 4)?))?;
    for algorithm in MatmulAlgorithm::ALL {
        let name = algorithm.name();
        expect_wrong_device(
            &format!("matmul_with({name}) (B)"),
            gpu.matmul_with(&own_m(2, 3)?, &other_m(3, 4)?, algorithm),
        )?;
        let result = gpu.matmul_into(&own_m(2, 3)?, &own_m(3, 4)?, &mut other_m(2, 4)?, algorithm);
        expect_wrong_device(&format!("matmul_into({name}) (C)"), result)?;
    }
    let plan = FastPlan {
        tile: FastTile::Small,
        slices: 2,
    };
    let result = gpu.matmul_fast_into(&other_m(2, 3)?, &own_m(3, 4)?, &mut own_m(2, 4)?, plan);
    expect_wrong_device("matmul_fast_into (A)", result)?;
    let result = gpu.matmul_fast_into(&own_m(2, 3)?, &own_m(3, 4)?, &mut other_m(2, 4)?, plan);
    expect_wrong_device("matmul_fast_into (C)", result)?;
    Ok(())
}

/// Every trial of one backend.
fn backend_trials(target: &Target, sizes: &'static Sizes) -> Vec<Trial> {
    let simulator = target.prefix == "sim";
    let mut trials = vec![
        trial(target, "device_info", move |gpu, _| device_info(gpu, simulator)),
        trial(target, "empty_inputs", |gpu, _| empty_inputs(gpu)),
        trial(target, "errors::shape_mismatch", |gpu, _| shape_mismatches(gpu)),
        trial(target, "errors::non_finite_temperature", |gpu, _| {
            non_finite_temperature(gpu)
        }),
        trial(target, "errors::too_large_grid", |gpu, _| too_large_grid(gpu)),
        trial(target, "errors::fast_plan_without_slices", |gpu, _| {
            fast_plan_without_slices(gpu)
        }),
        trial(target, "softmax::edge_rows", softmax_edge_rows),
        trial(target, "chained", move |gpu, rng| chained(gpu, rng, sizes.chain)),
    ];
    for &n in sizes.lengths {
        trials.push(trial(target, &format!("add::len_{n}"), move |gpu, rng| {
            add_vectors(gpu, rng, n)
        }));
        trials.push(trial(
            target,
            &format!("increment_by_one::len_{n}"),
            move |gpu, rng| increment_vector(gpu, rng, n),
        ));
        trials.push(trial(
            target,
            &format!("softmax_vec::len_{n}"),
            move |gpu, rng| softmax_vector(gpu, rng, n),
        ));
    }
    for &shape in sizes.matmul {
        let (m, k, n) = shape;
        trials.push(trial(target, &format!("matmul::{m}x{k}x{n}"), move |gpu, rng| {
            matmul_shape(gpu, rng, shape)
        }));
    }
    for &shape in sizes.fast {
        let (m, k, n) = shape;
        trials.push(trial(
            target,
            &format!("matmul_fast_into::{m}x{k}x{n}"),
            move |gpu, rng| matmul_fast_plans(gpu, rng, shape),
        ));
    }
    for &shape in sizes.tf32 {
        let (m, k, n) = shape;
        trials.push(trial(
            target,
            &format!("matmul_tf32_into::{m}x{k}x{n}"),
            move |gpu, rng| matmul_tf32_tiles(gpu, rng, shape),
        ));
    }
    for &shape in sizes.softmax {
        let name = format!("softmax_one_pass::{}x{}", shape.0, shape.1);
        trials.push(trial(target, &name, move |gpu, rng| {
            softmax_one_pass_paths(gpu, rng, shape)
        }));
    }
    for &shape in sizes.softmax {
        for t in TEMPERATURES {
            let name = format!("softmax::{}x{}::t={t}", shape.0, shape.1);
            trials.push(trial(target, &name, move |gpu, rng| {
                softmax_shape(gpu, rng, shape, t)
            }));
        }
    }
    trials
}

/// `(rows, cols)` on each side of every boundary of the default one-pass plan
/// (`OnePassConfig::default()` on an H200: block limits from the driver), run through
/// [`softmax_shape`]: every path the default takes, at its edges, and the kernels behind the
/// 8192 x 16384 and 8192 x 32768 benchmark figures (`softmax_block_8`, `softmax_persist_block_8`)
/// with few rows. `tests/softmax_fast.rs` checks the plans these shapes get.
const SOFTMAX_PLAN_BOUNDARIES: [(usize, usize); 16] = [
    // Lane groups of 16 (up to 32 vectors + 3) | a warp with 2 vectors per lane.
    (3, 131),
    (3, 132),
    // Warp with 2 | 4 vectors per lane.
    (3, 259),
    (3, 260),
    // Warp with 4 | 8 vectors per lane.
    (3, 515),
    (3, 516),
    // Warp with 8 vectors (warp_max_cols = 1024) | a block with 4 vectors per thread.
    (3, 1024),
    (3, 1025),
    // Block with 4 vectors per thread of up to 512 threads | 8 vectors (softmax_block_8).
    (2, 8195),
    (2, 8196),
    // softmax_block_8 | softmax_persist_block_8 (PERSISTENT_MIN_COLS).
    (2, 16_384),
    (2, 16_385),
    // softmax_persist_block_8 at 1024 threads (block_max_cols) | the split path (few rows).
    (2, 32_768),
    (2, 32_769),
    // Split (fewer than split_max_rows = 256 rows) | one streaming block per row.
    (255, 32_769),
    (256, 32_769),
];

/// The length of the long-row precision trials: 2^24, the longest row of the benchmarks.
const LONG_ROW: usize = 1 << 24;

/// Per-element relative tolerance of a softmax over one row of [`LONG_ROW`] entries in [-1, 1)
/// at inverse temperature `t`. Worst-case budget of one element: `ex2.approx` (2^-22.5, 1.7e-7
/// relative); the f32 roundings of `x - m`, of `t * (x - m)` and of its product by log2(e), each
/// up to half an ulp of a value of magnitude up to `2|t|` (about `|t| * 1.7e-7` each, relative in
/// the exponential); the row's sum (compensated: a few 1e-7, the rescaling by `exp` in the merges
/// included); the division and the output's and the reference's roundings (6e-8 each). About
/// 1e-6 at `t = 1`, 3.5e-6 at `t = 10`: the tolerance is twice the `t = 1` budget plus
/// `3e-7 * |t|`. A plain f32 running sum per thread fails it: the tutorial kernel's sums were
/// off by 5e-5 at `t = 10` (measured on the CPU with its thread layout in `tests/softmax_fast.rs`).
fn long_row_tolerance(t: f32) -> f32 {
    2e-6 + 3e-7 * t.abs()
}

/// One row of [`LONG_ROW`] through every softmax algorithm (the tutorial kernel, the default
/// one-pass plan: rows split over blocks, and one streaming block for the row) at `t`, each
/// element within [`long_row_tolerance`] of the f64 reference.
fn softmax_long_row(gpu: &Gpu, rng: &mut StdRng, t: f32) -> Check {
    let x = random_matrix(rng, 1, LONG_ROW);
    let want = cpu::softmax_rows(&x, t);
    let want = want.as_slice().unwrap_or_default();
    let dx = gpu.upload_matrix(&x)?;
    let stream = OnePassConfig {
        split_max_rows: 0,
        ..OnePassConfig::default()
    };
    let mut failures = Vec::new();
    let mut check = |what: String, got: gpukern::Result<DeviceMatrix>| {
        let what = format!("{what} 1x{LONG_ROW}, t = {t}");
        let result = got
            .and_then(|y| y.to_array())
            .map_err(|e| format!("{what}: {e}").into())
            .and_then(|y| {
                check_rel_each(
                    &what,
                    y.as_slice().unwrap_or_default(),
                    want,
                    long_row_tolerance(t),
                )
            });
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    for algorithm in SoftmaxAlgorithm::ALL {
        check(
            format!("softmax_with({})", algorithm.name()),
            gpu.softmax_with(&dx, t, algorithm),
        );
    }
    let mut y = poisoned_matrix(gpu, 1, LONG_ROW)?;
    let streamed = gpu.softmax_into_one_pass(&dx, &mut y, t, &stream).map(|()| y);
    check(
        format!("softmax_into_one_pass({:?})", stream.plan(1, LONG_ROW)),
        streamed,
    );
    all_passed(failures)
}

/// `(m, k, n)` on each side of the default matmul plans' boundaries on an H200 (132
/// multiprocessors), through [`matmul_shape`] (every algorithm, the default plans): 128 x 128
/// tiles filling the GPU or not, 64 x 64 tiles filling it or not (then `k` split), `k` long
/// enough for a second slice or not, and TF32's wide tiling (128 x 256 blocks for every SM) or not.
/// `k` and `n` multiples of 4 and not, for the 16-byte and 4-byte kernels.
const MATMUL_PLAN_BOUNDARIES: [(usize, usize, usize); 8] = [
    // 12 x 11 = 132 blocks of 128 x 128 (large tiling) | 11 x 11 = 121 (small tiling).
    (1536, 36, 1408),
    (1408, 37, 1408),
    // 11 x 12 = 132 blocks of 64 x 64 (k whole) | 11 x 11 = 121, k = 512 in two slices of 256.
    (704, 515, 768),
    (704, 512, 704),
    // 11 x 11 blocks of 64 x 64 with k = 511: shorter than two slices of 256, k stays whole.
    (704, 511, 701),
    // TF32: 12 x 11 = 132 blocks of 128 x 256 (wide) | 12 x 10 = 120 (square).
    (1536, 33, 2816),
    (1536, 32, 2560),
    (1535, 31, 2815),
];

/// The CUDA-only trials: the required 1000x1000 product, buffers of two devices mixed, the plan
/// boundaries of softmax and matmul, and the long-row precision of every softmax algorithm.
fn cuda_only_trials(cuda: &Target) -> Vec<Trial> {
    let mut trials = cuda_fixed_trials(cuda);
    for (rows, cols) in SOFTMAX_PLAN_BOUNDARIES {
        trials.push(trial(
            cuda,
            &format!("softmax_plan::{rows}x{cols}"),
            move |gpu, rng| softmax_shape(gpu, rng, (rows, cols), 1.0),
        ));
    }
    for (m, k, n) in MATMUL_PLAN_BOUNDARIES {
        trials.push(trial(
            cuda,
            &format!("matmul_plan::{m}x{k}x{n}"),
            move |gpu, rng| matmul_shape(gpu, rng, (m, k, n)),
        ));
    }
    for t in [1.0, 10.0] {
        trials.push(trial(
            cuda,
            &format!("softmax_long_row::1x{LONG_ROW}::t={t}"),
            move |gpu, rng| softmax_long_row(gpu, rng, t),
        ));
    }
    trials
}

/// The CUDA-only trials of fixed content.
fn cuda_fixed_trials(cuda: &Target) -> Vec<Trial> {
    vec![
        trial(cuda, "matmul", matmul_1000),
        trial(cuda, "wrong_device::simulator_buffers_on_cuda", |gpu, _| {
            wrong_device(gpu, &Gpu::simulator())
        }),
        trial(cuda, "wrong_device::cuda_buffers_on_simulator", |gpu, _| {
            wrong_device(&Gpu::simulator(), gpu)
        }),
        // Two `Gpu`s on the same device 0 (each its own context): what one allocated, the other
        // refuses. Not two physical GPUs.
        trial(cuda, "wrong_device::two_gpu_handles_on_device_0", |gpu, _| {
            wrong_device(gpu, &Gpu::new(0)?)
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// Trials of the free functions, on `Gpu::global()`

/// `gpukern::add` on 1-D, 2-D, transposed and sliced inputs against `cpu::add`.
fn global_add(rng: &mut StdRng) -> Check {
    let (a, b) = (
        Array1::from(random_vec(rng, 37)),
        Array1::from(random_vec(rng, 37)),
    );
    let got = gpukern::add(&a, &b)?;
    check_abs(
        "add 1-D",
        &logical(&got.view()),
        &cpu::add(&logical(&a.view()), &logical(&b.view()))?,
        ELEMENTWISE_MAX_ABS,
    )?;

    let base = random_matrix(rng, 9, 14);
    let other = random_matrix(rng, 14, 9);
    let cases: [(&str, ArrayView2<f32>, ArrayView2<f32>); 4] = [
        ("2-D", base.view(), base.view()),
        ("transposed + contiguous", other.t(), base.view()),
        (
            "sliced ..;2 + contiguous",
            base.slice(s![.., ..;2]),
            other.slice(s![..9, ..7]),
        ),
        ("transposed + sliced", other.t(), base.slice(s![.., ..])),
    ];
    for (what, a, b) in cases {
        let got = gpukern::add(&a, &b)?;
        check_dim(what, got.dim(), a.dim())?;
        let want = cpu::add(&logical(&a), &logical(&b))?;
        check_abs(
            &format!("add {what} {:?}", a.dim()),
            &logical(&got.view()),
            &want,
            ELEMENTWISE_MAX_ABS,
        )?;
    }
    expect_shape_mismatch("add", gpukern::add(&base, &other), &[9, 14], &[14, 9])
}

/// `gpukern::increment_by_one` in place on 1-D, 2-D, transposed and sliced views; elements
/// outside a slice stay as they were.
fn global_increment(rng: &mut StdRng) -> Check {
    let mut x = Array1::from(random_vec(rng, 41));
    let want = cpu::increment_by_one(&logical(&x.view()));
    gpukern::increment_by_one(&mut x)?;
    check_abs(
        "increment_by_one 1-D",
        &logical(&x.view()),
        &want,
        ELEMENTWISE_MAX_ABS,
    )?;

    let original = random_matrix(rng, 6, 10);
    let plus_one = Array2::from_shape_vec((6, 10), cpu::increment_by_one(&logical(&original.view())))?;

    let mut m = original.clone();
    gpukern::increment_by_one(&mut m)?;
    check_abs(
        "increment_by_one 2-D",
        &logical(&m.view()),
        &logical(&plus_one.view()),
        ELEMENTWISE_MAX_ABS,
    )?;

    let mut m = original.clone();
    let mut view = m.view_mut();
    view.swap_axes(0, 1);
    gpukern::increment_by_one(&mut view)?;
    check_abs(
        "increment_by_one transposed",
        &logical(&m.view()),
        &logical(&plus_one.view()),
        ELEMENTWISE_MAX_ABS,
    )?;

    let mut m = original.clone();
    gpukern::increment_by_one(&mut m.slice_mut(s![.., ..;2]))?;
    let mut want = original.clone();
    want.slice_mut(s![.., ..;2]).assign(&plus_one.slice(s![.., ..;2]));
    check_abs(
        "increment_by_one sliced ..;2",
        &logical(&m.view()),
        &logical(&want.view()),
        ELEMENTWISE_MAX_ABS,
    )
}

/// `gpukern::matmul` and `matmul_with` (every algorithm) on contiguous, transposed and sliced
/// operands against `cpu::matmul` on the same views.
fn global_matmul(rng: &mut StdRng) -> Check {
    let a = random_matrix(rng, 13, 17);
    let a_t = random_matrix(rng, 17, 13);
    let b = random_matrix(rng, 17, 11);
    let b_wide = random_matrix(rng, 17, 22);
    let cases: [(&str, ArrayView2<f32>, ArrayView2<f32>); 4] = [
        ("contiguous", a.view(), b.view()),
        ("A transposed", a_t.t(), b.view()),
        ("B sliced ..;2", a.view(), b_wide.slice(s![.., ..;2])),
        ("A transposed, B sliced ..;2", a_t.t(), b_wide.slice(s![.., ..;2])),
    ];
    let mut failures = Vec::new();
    for (what, a, b) in cases {
        let want = cpu::matmul(&a, &b)?;
        let mut results = vec![("matmul", false, gpukern::matmul(&a, &b))];
        for algorithm in MatmulAlgorithm::ALL {
            results.push((
                algorithm.name(),
                algorithm.uses_tf32(),
                gpukern::matmul_with(&a, &b, algorithm),
            ));
        }
        for (variant, tf32, got) in results {
            let got = got?;
            let what = format!("{variant} {what} {:?} x {:?}", a.dim(), b.dim());
            let result = check_dim(&what, got.dim(), want.dim()).and_then(|()| {
                if tf32 {
                    check_tf32(&what, &a.to_owned(), &b.to_owned(), &logical(&got.view()))
                } else {
                    check_rel_error(
                        &what,
                        &logical(&got.view()),
                        &logical(&want.view()),
                        MATMUL_REL_TOL,
                    )
                }
            });
            if let Err(e) = result {
                failures.push(e.to_string());
            }
        }
    }
    expect_shape_mismatch("matmul", gpukern::matmul(&a, &a), &[13, 17], &[13, 17])?;
    expect_shape_mismatch(
        "matmul_with",
        gpukern::matmul_with(&a, &a_t.t(), MatmulAlgorithm::Naive),
        &[13, 17],
        &[13, 17],
    )?;
    all_passed(failures)
}

/// `gpukern::softmax` along the last axis of 1-D, 2-D, 3-D, transposed and sliced inputs
/// against `cpu::softmax` / `cpu::softmax_rows`; non-finite temperatures refused.
fn global_softmax(rng: &mut StdRng) -> Check {
    let v = Array1::from(random_vec(rng, 50));
    let base = random_matrix(rng, 9, 40);
    let tall = random_matrix(rng, 40, 9);
    let cube = Array3::from_shape_vec((2, 3, 20), random_vec(rng, 120))?;
    for t in [1.0, 0.0, -2.5] {
        let got = gpukern::softmax(&v, t)?;
        check_rel_each(
            &format!("softmax 1-D, t = {t}"),
            &logical(&got.view()),
            &cpu::softmax(&logical(&v.view()), t),
            SOFTMAX_MAX_REL,
        )?;

        let cases: [(&str, ArrayView2<f32>); 3] = [
            ("2-D", base.view()),
            ("transposed", tall.t()),
            ("sliced ..;2", base.slice(s![.., ..;2])),
        ];
        for (what, x) in cases {
            let got = gpukern::softmax(&x, t)?;
            check_dim(what, got.dim(), x.dim())?;
            let want = cpu::softmax_rows(&x, t);
            check_rel_each(
                &format!("softmax {what} {:?}, t = {t}", x.dim()),
                &logical(&got.view()),
                &logical(&want.view()),
                SOFTMAX_MAX_REL,
            )?;
        }

        for algorithm in SoftmaxAlgorithm::ALL {
            let x = tall.t();
            let got = gpukern::softmax_with(&x, t, algorithm)?;
            let what = format!(
                "softmax_with({}) transposed {:?}, t = {t}",
                algorithm.name(),
                x.dim()
            );
            let want = cpu::softmax_rows(&x, t);
            check_rel_each(
                &what,
                &logical(&got.view()),
                &logical(&want.view()),
                SOFTMAX_MAX_REL,
            )?;
        }

        let got = gpukern::softmax(&cube, t)?;
        check_dim("softmax 3-D", got.dim(), cube.dim())?;
        let want = cpu::softmax_rows(&cube.to_shape((6, 20))?, t);
        check_rel_each(
            &format!("softmax 3-D, t = {t}"),
            &logical(&got.view()),
            &logical(&want.view()),
            SOFTMAX_MAX_REL,
        )?;
    }
    for t in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        expect_bad_temperature(&format!("softmax 1-D, t = {t}"), gpukern::softmax(&v, t))?;
        expect_bad_temperature(&format!("softmax 2-D, t = {t}"), gpukern::softmax(&base, t))?;
    }
    Ok(())
}

/// The free functions on zero-sized arrays: empty results of the right shape, zeros for `k = 0`.
fn global_empty() -> Check {
    let e = Array1::<f32>::zeros(0);
    check_dim("add of empty", gpukern::add(&e, &e)?.dim(), 0)?;
    check_dim("softmax of empty", gpukern::softmax(&e, 1.0)?.dim(), 0)?;
    let mut e2 = Array2::<f32>::zeros((0, 4));
    gpukern::increment_by_one(&mut e2)?;
    for shape in [(0, 5), (5, 0)] {
        check_dim(
            "softmax of empty 2-D",
            gpukern::softmax(&Array2::<f32>::zeros(shape), 1.0)?.dim(),
            shape,
        )?;
    }
    let c = gpukern::matmul(&Array2::<f32>::zeros((0, 3)), &Array2::<f32>::zeros((3, 4)))?;
    check_dim("matmul 0x3x4", c.dim(), (0, 4))?;
    for algorithm in MatmulAlgorithm::ALL {
        let (a, b) = (Array2::<f32>::ones((3, 0)), Array2::<f32>::ones((0, 4)));
        let c = gpukern::matmul_with(&a, &b, algorithm)?;
        let want = cpu::matmul(&a, &b)?;
        check_dim("matmul 3x0x4", c.dim(), (3, 4))?;
        check_abs(
            &format!("matmul_with({}) 3x0x4", algorithm.name()),
            &logical(&c.view()),
            &logical(&want.view()),
            0.0,
        )?;
    }
    Ok(())
}

/// The free-function trials.
fn global_trials() -> Vec<Trial> {
    vec![
        global_trial("add", global_add),
        global_trial("increment_by_one", global_increment),
        global_trial("matmul", global_matmul),
        global_trial("softmax", global_softmax),
        global_trial("empty_inputs", |_| global_empty()),
    ]
}

// ---------------------------------------------------------------------------------------------

fn main() {
    let args = Arguments::from_args();
    let seed = common::seed();
    let require_gpu = common::require_gpu();

    let sim = Target {
        prefix: "sim",
        gpu: Ok(Gpu::simulator()),
        ignored: false,
    };
    let mut skipped = None;
    let opened = Gpu::new(0);
    let ignored = common::cuda_trials_ignored(&opened, require_gpu);
    let cuda = match opened {
        Ok(gpu) => Target {
            prefix: "cuda",
            gpu: Ok(gpu),
            ignored: false,
        },
        Err(e) if ignored => {
            skipped = Some(format!(
                "CUDA tests skipped (ignored): {e} [set {REQUIRE_GPU_ENV}=1 to make this a failure]"
            ));
            Target {
                prefix: "cuda",
                gpu: Err(format!("no CUDA device: {e}")),
                ignored: true,
            }
        }
        Err(e) => Target {
            prefix: "cuda",
            gpu: Err(if require_gpu {
                format!("{REQUIRE_GPU_ENV}=1, but Gpu::new(0) failed: {e}")
            } else {
                format!("Gpu::new(0) failed: {e}")
            }),
            ignored: false,
        },
    };
    if !args.list {
        println!(
            "gpukern kernel tests: seed {seed} (set {}={seed} to reproduce)",
            common::SEED_ENV
        );
        if let Some(note) = skipped {
            println!("{note}");
        }
    }

    let mut trials = backend_trials(&sim, &SIM_SIZES);
    // The one-pass paths on a row long enough for 8 vectors per thread (more than 2048 vectors:
    // `softmax_block_8`, `softmax_persist_block_8`), which the small simulator shapes miss.
    let shape = SIM_BLOCK_8_ROW;
    trials.push(trial(
        &sim,
        &format!("softmax_one_pass::{}x{}", shape.0, shape.1),
        move |gpu, rng| softmax_one_pass_paths(gpu, rng, shape),
    ));
    trials.extend(backend_trials(&cuda, &CUDA_SIZES));
    trials.extend(cuda_only_trials(&cuda));
    trials.extend(global_trials());
    trials.extend(coverage_self_trials());
    let cuda_ran = cuda.gpu.is_ok() && !cuda.ignored;
    let conclusion = libtest_mimic::run(&args, trials);

    // Coverage by construction: after a run of a whole family, every entry point of the PTX
    // must have been launched by it, or the run fails naming the kernels no trial reached.
    let mut gaps = Vec::new();
    if whole_family_ran(&args, "sim::") {
        gaps.extend(launch_gaps(
            "sim",
            &gpukern::sim_launch_counts(gpukern::ptx::KERNELS.krate),
        ));
    }
    if cuda_ran && whole_family_ran(&args, "cuda::") {
        gaps.extend(launch_gaps(
            "cuda",
            &gpukern::cuda_launch_counts(gpukern::ptx::KERNELS.krate),
        ));
    }
    if !gaps.is_empty() {
        eprintln!("\nkernel coverage: FAILED, {} gap(s):", gaps.len());
        for gap in &gaps {
            eprintln!("    {gap}");
        }
        std::process::exit(101);
    }
    conclusion.exit();
}

// ---------------------------------------------------------------------------------------------
// Coverage: every entry point launched

/// Whether this run ran every trial of the family `prefix` (`"sim::"`, `"cuda::"`) that its skip
/// patterns leave: no filter or a filter that the prefix starts with, not `--exact`, not only
/// the ignored trials, and no skip pattern that drops the whole family. A skip of some shapes
/// (as `scripts/sanitize.sh` does) keeps the check on: it must not remove a kernel's only trial.
fn whole_family_ran(args: &Arguments, prefix: &str) -> bool {
    let filter_admits = match &args.filter {
        None => true,
        Some(f) => !args.exact && prefix.starts_with(f.as_str()),
    };
    !args.list && !args.ignored && filter_admits && !args.skip.iter().any(|s| prefix.contains(s.as_str()))
}

/// The coverage gaps of one backend's launch counts against the entry points of every embedded
/// PTX module, each prefixed with the backend; prints the tally when there are none.
fn launch_gaps(backend: &str, counts: &[(&'static str, u64)]) -> Vec<String> {
    let mut gaps = Vec::new();
    for module in gpukern::ptx::modules() {
        let entries = common::ptx_entry_names(module.ptx);
        gaps.extend(
            common::coverage_gaps(counts, &entries)
                .into_iter()
                .map(|g| format!("{backend} ({}): {g}", module.arch)),
        );
    }
    if gaps.is_empty() {
        let launches: u64 = counts.iter().map(|(_, n)| n).sum();
        println!(
            "kernel coverage ({backend}): all {} entry points launched ({launches} launches)",
            counts.len()
        );
    }
    gaps
}

/// The coverage check itself, shown able to fail: a planted table with a kernel never launched,
/// and one with an entry point the launch table lacks, are reported; a full one is not.
fn coverage_self_trials() -> Vec<Trial> {
    vec![
        Trial::test("tf32_check::planted_kernels_fail_and_tf32_passes", || {
            tf32_check_planted()
        }),
        Trial::test("coverage::planted_gaps_are_reported", || {
            let names = gpukern::ptx::entry_names(gpukern::ptx::modules()[0].ptx);
            let entries: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let full: Vec<(&'static str, u64)> = names.iter().map(|&n| (n, 1)).collect();
            if !common::coverage_gaps(&full, &entries).is_empty() {
                return Err("a table with every kernel launched once reports gaps".into());
            }
            let mut unlaunched = full.clone();
            unlaunched[5].1 = 0;
            let gaps = common::coverage_gaps(&unlaunched, &entries);
            if gaps.len() != 1 || !gaps[0].contains(full[5].0) {
                return Err(format!("a kernel never launched ({}) gives {gaps:?}", full[5].0).into());
            }
            let mut extra_entry = entries.clone();
            extra_entry.push("softmax_planted".to_string());
            let gaps = common::coverage_gaps(&full, &extra_entry);
            if gaps.len() != 1 || !gaps[0].contains("softmax_planted") {
                return Err(format!("an entry point no launch reached gives {gaps:?}").into());
            }
            let mut extra_launch = full.clone();
            extra_launch.push(("planted_kernel", 3));
            let gaps = common::coverage_gaps(&extra_launch, &entries);
            if gaps.len() != 1 || !gaps[0].contains("planted_kernel") {
                return Err(format!("a launch of no entry point gives {gaps:?}").into());
            }
            // The harness's parser sees the module's real entry points, as gpukern's does.
            for module in gpukern::ptx::modules() {
                let parsed = common::ptx_entry_names(module.ptx);
                if parsed.len() != entries.len() {
                    return Err(format!(
                        "{} module: {} entry points parsed, {} expected",
                        module.arch,
                        parsed.len(),
                        entries.len()
                    )
                    .into());
                }
            }
            Ok(())
        }),
    ]
}

/// The TF32 check against planted wrong kernels (CPU functions giving their results) at
/// 31x4097x7 and at k = 1000: the exact product less its last term of `k`, operands of 4
/// significand bits, operands of bf16 precision (8 bits) must each be refused, while a CPU
/// emulation of TF32 operands (11 bits, rounded) passes.
fn tf32_check_planted() -> Result<(), Failed> {
    let mut rng = common::rng_for("tf32_check::planted");
    let mut failures = Vec::new();
    for (m, k, n) in [(31, 4097, 7), (40, 1000, 40)] {
        let (a, b) = (random_matrix(&mut rng, m, k), random_matrix(&mut rng, k, n));
        let (av, bv) = (a.view(), b.view());
        let factor = gpukern::ops::matmul::tf32_error_factor(k);
        let exact = cpu::matmul(&a, &b).map_err(|e| Failed::from(e.to_string()))?;
        let mut last_dropped = exact.clone();
        for ((i, j), c) in last_dropped.indexed_iter_mut() {
            *c -= a[(i, k - 1)] * b[(k - 1, j)];
        }
        let planted = [
            (
                "the last term of k dropped",
                last_dropped.iter().copied().collect::<Vec<f32>>(),
            ),
            (
                "operands of 4 significand bits",
                matmul_with_operand_bits(&av, &bv, 3),
            ),
            ("bf16 operands", matmul_with_operand_bits(&av, &bv, 7)),
        ];
        for (what, got) in planted {
            if tf32_statistical_violation(&av, &bv, &got, factor, TF32_ROUNDED).is_none() {
                let ratio = common::tf32_rms_ratio(&av, &bv, &got, TF32_ROUNDED);
                failures.push(format!(
                    "{m}x{k}x{n}: {what} passes the TF32 check (RMS ratio {ratio:?})"
                ));
            }
        }
        let emulated = matmul_with_operand_bits(&av, &bv, 10);
        if let Some(e) = tf32_statistical_violation(&av, &bv, &emulated, factor, TF32_ROUNDED) {
            failures.push(format!(
                "{m}x{k}x{n}: TF32 emulated on the CPU fails the check: {e}"
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}
