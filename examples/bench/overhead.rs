//! Host-side costs, in wall time: the cost of one tiny call (launch overhead) through each
//! layer, and a large matmul with and without host-device copies.
//!
//! Launch-overhead modes: `async` = back-to-back calls on device-resident data, one
//! synchronize at the end (the cost of queueing a launch); `sync` = a synchronize after every
//! call (one round trip); `ndarray` = the free function on host arrays (upload, launch,
//! download).
//!
//! The generated launcher against a bare cudarc launch: `increment_by_one` on the same 1,024
//! floats, launched by cudarc's `launch_builder` on the PTX gpukern embeds, by the launcher
//! `#[kernel]` generates through `gpu.library()`, and by the same launcher through a module
//! loaded with `gpu.load(&gpukern::ptx::KERNELS)`; the three take turns over several rounds.

use cudarc::driver::{CudaSlice, LaunchConfig as CudaLaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use gpukern::{AddAlgorithm, Gpu, MatmulAlgorithm};
use ndarray::{Array1, Array2, ArrayView2};

use crate::Bench;
use crate::data::random_vec;
use crate::matmul::{Shape, reference, shape_name};
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink, catch};
use crate::timing::{Stats, wall_median, wall_per_call};

/// Elements of the tiny add.
const ADD_N: usize = 1024;
/// Side of the tiny matmul.
const MATMUL_N: usize = 32;

/// Records made by [`launcher_vs_bare`]: three launch paths, two modes.
const LAUNCHER_RECORDS: u64 = 6;
/// Records made by [`launch_overhead`].
pub const LAUNCH_RECORDS: u64 = 8 + LAUNCHER_RECORDS;
/// Rounds of [`launcher_vs_bare`] (each path measured once per round, in turn), so that a drift
/// of the clocks or of the host's load during the measurement falls on every path alike.
const LAUNCHER_ROUNDS: usize = 5;

impl Record {
    /// Adds a mean wall time per call.
    fn per_call(mut self, ms: f64, calls: usize) -> Record {
        self.median_ms = Some(ms);
        self.with("us_per_call", ms * 1e3)
            .with("calls", calls)
            .with("stat", "mean")
            .with("timer", "wall_clock")
    }
}

/// The Gpu the free functions use; an error if it is the simulator.
fn global_gpu() -> Res<&'static Gpu> {
    let gpu = Gpu::global()?;
    if gpu.is_simulator() {
        return Err("Gpu::global() is the CPU simulator (is GPUKERN_DEVICE=sim set?)".into());
    }
    Ok(gpu)
}

/// Wall time per call of a 1,024-element add and a 32^3 matmul, through each layer.
pub fn launch_overhead(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    let calls = if b.quick { 1_000 } else { 10_000 };
    let max_s = if b.quick { 0.2 } else { 1.0 };
    let warmup = 100;
    let n = ADD_N;
    let add_base = |imp: &str, mode: &str| {
        Record::new("launch_overhead", imp, n.to_string())
            .with("op", "add")
            .with("mode", mode)
            .with("calls_planned", calls)
    };
    let x = random_vec(n, -1.0, 1.0);
    let y = random_vec(n, -1.0, 1.0);
    let sum = gpukern::cpu::add(&x, &y)?;
    let nan = vec![f32::NAN; n];

    for mode in ["async", "sync"] {
        let base = add_base("gpukern:scalar", mode);
        sink.item(base.clone(), || {
            let gpu = &b.gpu;
            let (dx, dy, mut dz) = (gpu.upload(&x)?, gpu.upload(&y)?, gpu.upload(&nan)?);
            gpu.add_into_with(&dx, &dy, &mut dz, AddAlgorithm::Scalar)?;
            let check = Check::new(&dz.to_vec()?, &sum, F32_TOL, "cpu_f64");
            if !check.passed() {
                return Ok(base.checked(&check));
            }
            let sync = mode == "sync";
            let (ms, done) = wall_per_call(
                calls,
                warmup,
                max_s,
                || {
                    gpu.add_into_with(&dx, &dy, &mut dz, AddAlgorithm::Scalar)?;
                    if sync {
                        gpu.synchronize()?;
                    }
                    Ok(())
                },
                || Ok(gpu.synchronize()?),
            )?;
            Ok(base.checked(&check).per_call(ms, done))
        })?;
    }

    // The same kernel launched straight through cudarc: what gpukern's checks and wrappers add.
    for mode in ["async", "sync"] {
        let base = add_base("cudarc", mode);
        sink.item(base.clone(), || {
            let (ctx, s) = (&b.ctx, &b.stream);
            let cc = ctx.compute_capability()?;
            let module = gpukern::ptx::select(cc).ok_or("no embedded PTX module runs on this device")?;
            let function = ctx.load_module(Ptx::from_src(module.ptx))?.load_function("add")?;
            let (dx, dy, mut dz) = (s.clone_htod(&x)?, s.clone_htod(&y)?, s.clone_htod(&nan)?);
            let block = gpukern::kernels::add::BLOCK;
            let cfg = CudaLaunchConfig {
                grid_dim: (n.div_ceil(block as usize) as u32, 1, 1),
                block_dim: (block, 1, 1),
                shared_mem_bytes: 0,
            };
            let sync = mode == "sync";
            let launch = |dz: &mut CudaSlice<f32>| -> Res<()> {
                let mut args = s.launch_builder(&function);
                args.arg(&dx).arg(&dy).arg(dz).arg(&n);
                // SAFETY: `add(a, b, c, n: usize)` with three buffers of `n` floats, one thread
                // per element in blocks of BLOCK.
                unsafe { args.launch(cfg) }?;
                if sync {
                    s.synchronize()?;
                }
                Ok(())
            };
            launch(&mut dz)?;
            let check = Check::new(&s.clone_dtoh(&dz)?, &sum, F32_TOL, "cpu_f64");
            if !check.passed() {
                return Ok(base.checked(&check));
            }
            let (ms, done) =
                wall_per_call(calls, warmup, max_s, || launch(&mut dz), || Ok(s.synchronize()?))?;
            Ok(base.checked(&check).per_call(ms, done))
        })?;
    }

    let base = add_base("gpukern:add", "ndarray");
    sink.item(base.clone(), || {
        let global = global_gpu()?;
        let (ax, ay) = (Array1::from(x.clone()), Array1::from(y.clone()));
        let out = gpukern::add(&ax, &ay)?;
        let check = Check::new(&out.to_vec(), &sum, F32_TOL, "cpu_f64");
        if !check.passed() {
            return Ok(base.checked(&check));
        }
        let (ms, done) = wall_per_call(
            calls,
            warmup,
            max_s,
            || {
                gpukern::add(&ax, &ay)?;
                Ok(())
            },
            || Ok(global.synchronize()?),
        )?;
        Ok(base.checked(&check).per_call(ms, done))
    })?;

    let d = MATMUL_N;
    let shape = shape_name((d, d, d));
    let mm_base = |mode: &str| {
        Record::new(
            "launch_overhead",
            format!("gpukern:{}", MatmulAlgorithm::default().name()),
            shape.clone(),
        )
        .with("op", "matmul")
        .with("mode", mode)
        .with("calls_planned", calls)
    };
    let a = random_vec(d * d, -1.0, 1.0);
    let bm = random_vec(d * d, -1.0, 1.0);
    let (product, what) = reference(b, (d, d, d), &a, &bm)?;
    for mode in ["async", "sync"] {
        let base = mm_base(mode);
        sink.item(base.clone(), || {
            let gpu = &b.gpu;
            let da = gpu.upload_matrix(&ArrayView2::from_shape((d, d), &a)?)?;
            let db = gpu.upload_matrix(&ArrayView2::from_shape((d, d), &bm)?)?;
            let mut dc = gpu.upload_matrix(&Array2::from_elem((d, d), f32::NAN))?;
            let alg = MatmulAlgorithm::default();
            gpu.matmul_into(&da, &db, &mut dc, alg)?;
            let check = Check::new(&dc.as_vec().to_vec()?, &product, F32_TOL, what);
            if !check.passed() {
                return Ok(base.checked(&check));
            }
            let sync = mode == "sync";
            let (ms, done) = wall_per_call(
                calls,
                warmup,
                max_s,
                || {
                    gpu.matmul_into(&da, &db, &mut dc, alg)?;
                    if sync {
                        gpu.synchronize()?;
                    }
                    Ok(())
                },
                || Ok(gpu.synchronize()?),
            )?;
            Ok(base.checked(&check).per_call(ms, done))
        })?;
    }
    let base = mm_base("ndarray");
    sink.item(base.clone(), || {
        let global = global_gpu()?;
        let aa = Array2::from_shape_vec((d, d), a.clone())?;
        let ab = Array2::from_shape_vec((d, d), bm.clone())?;
        let out = gpukern::matmul(&aa, &ab)?;
        let check = Check::new(&out.iter().copied().collect::<Vec<_>>(), &product, F32_TOL, what);
        if !check.passed() {
            return Ok(base.checked(&check));
        }
        let (ms, done) = wall_per_call(
            calls,
            warmup,
            max_s,
            || {
                gpukern::matmul(&aa, &ab)?;
                Ok(())
            },
            || Ok(global.synchronize()?),
        )?;
        Ok(base.checked(&check).per_call(ms, done))
    })?;
    launcher_vs_bare(b, sink, calls, warmup, max_s)
}

/// A launch of `increment_by_one` on a device-resident vector, ready to be repeated.
type Call = Box<dyn FnMut() -> Res<()>>;
/// Prepares a [`Call`]: the vector after its first launch, and the call.
type Setup<'a> = &'a dyn Fn() -> Res<(Vec<f32>, Call)>;

/// One way of launching `increment_by_one` in [`launcher_vs_bare`]: its record so far, and the
/// call with the means per call of the rounds it has been timed in (`None` once it failed).
struct LaunchPath {
    record: Record,
    call: Option<Call>,
    means_ms: Vec<f64>,
    calls: usize,
}

/// The launch shape `increment_by_one` documents: one thread per element in 1-D blocks of
/// [`gpukern::kernels::add::BLOCK`], no shared memory; returns (grid, block).
fn increment_shape(n: usize) -> Res<(u32, u32)> {
    let block = gpukern::kernels::add::BLOCK;
    let grid = u32::try_from(n.div_ceil(block as usize))?;
    Ok((grid, block))
}

/// The bare path: `increment_by_one` loaded by cudarc from the PTX gpukern embeds for this
/// device, launched with `launch_builder` on the Gpu's stream. Returns the vector after one
/// launch (from `x`) and the launch to repeat, with a synchronize after it when `sync`.
fn bare_increment(b: &Bench, x: &[f32], sync: bool) -> Res<(Vec<f32>, Call)> {
    let (ctx, s) = (b.ctx.clone(), b.stream.clone());
    let cc = ctx.compute_capability()?;
    let module = gpukern::ptx::select(cc).ok_or("no embedded PTX module runs on this device")?;
    let function = ctx
        .load_module(Ptx::from_src(module.ptx))?
        .load_function("increment_by_one")?;
    let n = x.len();
    let (grid, block) = increment_shape(n)?;
    let cfg = CudaLaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut dx = s.clone_htod(x)?;
    let stream = s.clone();
    let launch = move |dx: &mut CudaSlice<f32>| -> Res<()> {
        let mut args = stream.launch_builder(&function);
        args.arg(dx).arg(&n);
        // SAFETY: `increment_by_one(x, n: usize)` with a buffer of `n` floats, one thread per
        // element in blocks of BLOCK.
        unsafe { args.launch(cfg) }?;
        if sync {
            stream.synchronize()?;
        }
        Ok(())
    };
    launch(&mut dx)?;
    let out = s.clone_dtoh(&dx)?;
    Ok((out, Box::new(move || launch(&mut dx))))
}

/// The generated launcher, `kernels::add::increment_by_one::launch`, on `x` uploaded to the
/// bench's Gpu: through `gpu.library()` (gpukern's own kernels, as gpukern's operations launch
/// them) when `module` is `None`, else through `module`. Returns as [`bare_increment`] does.
fn launcher_increment(
    b: &Bench,
    module: Option<gpukern::Module>,
    x: &[f32],
    sync: bool,
) -> Res<(Vec<f32>, Call)> {
    let gpu = b.gpu.clone();
    let n = x.len();
    let (grid, block) = increment_shape(n)?;
    let cfg = gpukern::LaunchConfig {
        grid: (grid, 1, 1),
        block: (block, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut dx = gpu.upload(x)?;
    let launch = move |dx: &mut gpukern::DeviceVec<f32>| -> Res<()> {
        // SAFETY: `increment_by_one(x, n)` with a buffer of `n` floats, one thread per element
        // in blocks of BLOCK.
        match &module {
            Some(m) => unsafe { gpukern::kernels::add::increment_by_one::launch(m, cfg, dx, n) }?,
            None => unsafe { gpukern::kernels::add::increment_by_one::launch(&gpu.library(), cfg, dx, n) }?,
        }
        if sync {
            gpu.synchronize()?;
        }
        Ok(())
    };
    launch(&mut dx)?;
    let out = dx.to_vec()?;
    Ok((out, Box::new(move || launch(&mut dx))))
}

/// Wall time per call of one kernel, `increment_by_one` on 1,024 floats, launched by a bare
/// cudarc `launch_builder` (`impl: cudarc`), by its generated launcher through `gpu.library()`
/// (`gpukern:launcher`) and through a module loaded with `gpu.load` (`gpukern:module`), in
/// `async` and `sync` mode. Each path is checked (its first launch must give `x + 1`), then the
/// three take turns for [`LAUNCHER_ROUNDS`] rounds; `median_ms` is the median over the rounds of
/// the mean per call, and the launcher rows carry `launcher_vs_bare`, their `median_ms` over the
/// bare path's.
pub fn launcher_vs_bare(b: &mut Bench, sink: &mut Sink, calls: usize, warmup: usize, max_s: f64) -> Res<()> {
    let b: &Bench = b;
    let n = ADD_N;
    let rounds = if b.quick { 3 } else { LAUNCHER_ROUNDS };
    let per_round = calls.div_ceil(rounds);
    let x = random_vec(n, -1.0, 1.0);
    let want = gpukern::cpu::increment_by_one(&x);
    let (grid, block) = increment_shape(n)?;
    for mode in ["async", "sync"] {
        let sync = mode == "sync";
        let base = |imp: &str, via: &str| {
            Record::new("launch_overhead", imp, n.to_string())
                .with("op", "increment_by_one")
                .with("mode", mode)
                .with("via", via)
                .with("grid", grid)
                .with("block", block)
                .with("calls_planned", per_round * rounds)
                .with("rounds", rounds)
        };
        let setups: [(Record, Setup); 3] = [
            (base("cudarc", "launch_builder"), &|| bare_increment(b, &x, sync)),
            (base("gpukern:launcher", "gpu.library()"), &|| {
                launcher_increment(b, None, &x, sync)
            }),
            (
                base("gpukern:module", "gpu.load(&gpukern::ptx::KERNELS)"),
                &|| {
                    let module = b.gpu.load(&gpukern::ptx::KERNELS)?;
                    launcher_increment(b, Some(module), &x, sync)
                },
            ),
        ];
        if sink.expired() {
            for (record, _) in setups {
                sink.item(record, || Err("time budget spent".into()))?;
            }
            continue;
        }
        let mut paths: Vec<LaunchPath> = setups
            .into_iter()
            .map(|(record, setup)| match catch(setup) {
                Ok((out, call)) => {
                    let check = Check::new(&out, &want, F32_TOL, "cpu_f64");
                    let passed = check.passed();
                    LaunchPath {
                        record: record.checked(&check),
                        call: passed.then_some(call),
                        means_ms: Vec::new(),
                        calls: 0,
                    }
                }
                Err(e) => LaunchPath {
                    record: record.failed(e),
                    call: None,
                    means_ms: Vec::new(),
                    calls: 0,
                },
            })
            .collect();
        for round in 0..rounds {
            // Each round starts with another path, so no path always follows the same one.
            for k in 0..paths.len() {
                let count = paths.len();
                let path = &mut paths[(round + k) % count];
                let Some(call) = path.call.as_mut() else {
                    continue;
                };
                let finish = || -> Res<()> { Ok(b.stream.synchronize()?) };
                match catch(|| wall_per_call(per_round, warmup, max_s / rounds as f64, call, finish)) {
                    Ok((ms, done)) => {
                        path.means_ms.push(ms);
                        path.calls += done;
                    }
                    Err(e) => {
                        path.record = path.record.clone().failed(e);
                        path.call = None;
                    }
                }
            }
        }
        let mut records = Vec::with_capacity(paths.len());
        for path in paths {
            let stats = Stats::of(path.means_ms, per_round, warmup, "wall_clock");
            let record = match (path.call, stats) {
                (Some(_), Ok(stats)) => path
                    .record
                    .timed(&stats, None, None)
                    .with("us_per_call", stats.median_ms * 1e3)
                    .with("calls", path.calls)
                    .with("stat", "median_of_round_means"),
                (Some(_), Err(e)) => path.record.failed(e),
                (None, _) => path.record,
            };
            records.push(record);
        }
        let bare_ms = records[0].median_ms;
        for record in &mut records[1..] {
            if let (Some(ms), Some(bare)) = (record.median_ms, bare_ms) {
                *record = record
                    .clone()
                    .with("launcher_vs_bare", ms / bare)
                    .with("bare_us_per_call", bare * 1e3);
            }
        }
        for record in records {
            sink.emit(record)?;
        }
    }
    Ok(())
}

/// Shapes of the copies-vs-resident comparison.
pub fn copies_shapes(quick: bool) -> Vec<Shape> {
    crate::suite::shapes3("matmul_with_copies", quick)
}

/// Wall time of `gpukern::matmul` on host arrays (upload, multiply, download) against the same
/// product on data kept on the device (`matmul_into` + synchronize).
pub fn matmul_with_copies(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    let (reps, max_s) = if b.quick { (5, 0.3) } else { (20, 1.5) };
    let alg = MatmulAlgorithm::default();
    for shape in copies_shapes(b.quick) {
        let (m, n, k) = shape;
        let (bytes, flops) = crate::matmul::counts("matmul_with_copies", shape);
        let base = |mode: &str| {
            Record::new(
                "matmul_with_copies",
                format!("gpukern:{}", alg.name()),
                shape_name(shape),
            )
            .with("m", m)
            .with("n", n)
            .with("k", k)
            .with("mode", mode)
        };
        if sink.expired() {
            for mode in ["copies", "resident"] {
                sink.item(base(mode), || Err("time budget spent".into()))?;
            }
            continue;
        }
        let a = Array2::from_shape_vec((m, k), random_vec(m * k, -1.0, 1.0))?;
        let bm = Array2::from_shape_vec((k, n), random_vec(k * n, -1.0, 1.0))?;
        let product = crate::record::catch(|| {
            let (sa, sb) = (a.as_slice(), bm.as_slice());
            reference(b, shape, sa.ok_or("not contiguous")?, sb.ok_or("not contiguous")?)
        })
        .map_err(|e| e.to_string());

        let rec = base("copies");
        sink.item(rec.clone(), || {
            global_gpu()?;
            let (r, what) = product.as_ref().map_err(Clone::clone)?;
            let out = gpukern::matmul(&a, &bm)?;
            let check = Check::new(&out.iter().copied().collect::<Vec<_>>(), r, F32_TOL, what);
            if !check.passed() {
                return Ok(rec.checked(&check));
            }
            let stats = wall_median(reps, max_s, || {
                gpukern::matmul(&a, &bm)?;
                Ok(())
            })?;
            Ok(rec.checked(&check).timed(&stats, Some(bytes), Some(flops)))
        })?;

        let rec = base("resident");
        sink.item(rec.clone(), || {
            let (r, what) = product.as_ref().map_err(Clone::clone)?;
            let gpu = &b.gpu;
            let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&bm)?);
            let mut dc = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN))?;
            gpu.matmul_into(&da, &db, &mut dc, alg)?;
            let check = Check::new(&dc.as_vec().to_vec()?, r, F32_TOL, what);
            if !check.passed() {
                return Ok(rec.checked(&check));
            }
            let stats = wall_median(reps, max_s, || {
                gpu.matmul_into(&da, &db, &mut dc, alg)?;
                Ok(gpu.synchronize()?)
            })?;
            Ok(rec.checked(&check).timed(&stats, Some(bytes), Some(flops)))
        })?;
    }
    Ok(())
}
