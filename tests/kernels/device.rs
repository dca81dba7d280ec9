//! What spans every family: the device's description and limits, zero-sized operands, a chain
//! of device-resident calls, buffers of one device refused by another, and the free functions
//! on zero-sized arrays.

use gpukern::ops::add::AddAlgorithm;
use gpukern::ops::matmul::{FastPlan, FastTile, SIMULATED_MULTIPROCESSORS};
use gpukern::ops::softmax::{OnePassConfig, SoftmaxAlgorithm};
use gpukern::{Gpu, MatmulAlgorithm, cpu};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2};
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};
use crate::common::{random_matrix, random_vec};
use crate::sizes::{CUDA_SIZES, SIM_SIZES, Sizes};
use crate::softmax::SOFTMAX_MAX_REL;

/// Every trial of this file.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, &SIM_SIZES);
    trials.extend(backend_trials(cuda, &CUDA_SIZES));
    trials.extend([
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
        global_trial("empty_inputs", |_| global_empty()),
    ]);
    trials
}

/// One backend's trials.
fn backend_trials(target: &Target, sizes: &'static Sizes) -> Vec<Trial> {
    let simulator = target.prefix == "sim";
    vec![
        trial(target, "device_info", move |gpu, _| device_info(gpu, simulator)),
        trial(target, "empty_inputs", |gpu, _| empty_inputs(gpu)),
        trial(target, "chained", move |gpu, rng| chained(gpu, rng, sizes.chain)),
    ]
}

/// Chained device-resident calls (matmul -> softmax -> matmul -> add), relative error norm: the
/// stages' errors add up, to about 2e-5 at most.
const CHAIN_REL_TOL: f64 = 1e-4;

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
    check_abs("zeros(5)", &gpu.zeros(5)?.to_vec()?, &[0.0; 5], 0.0)?;
    check_dim("zeros(0)", gpu.zeros(0)?.len(), 0)?;
    check_abs(
        "zeros_matrix(2, 3)",
        &gpu.zeros_matrix(2, 3)?.as_vec().to_vec()?,
        &[0.0; 6],
        0.0,
    )?;
    check_dim(
        "zeros_matrix(0, 3)",
        gpu.zeros_matrix(0, 3)?.to_array()?.dim(),
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
