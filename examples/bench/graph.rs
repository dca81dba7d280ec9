//! CUDA graphs and several GPUs, in wall time.
//!
//! * `graph_replay` (shape `100x1024`): a chain of 100 `increment_by_one`s on 1,024 floats,
//!   replayed as one graph (`gpukern:graph`) against 100 separate launches
//!   (`gpukern:launches`), both queued back to back with one synchronize at the end; the
//!   record's `us_per_kernel` is the wall time per kernel (target: <= 1 us per graph node).
//! * `all_reduce` (shape `67108864`: 256 MiB of f32 per GPU): `GpuGroup::all_reduce_sum` over
//!   every GPU, with NCCL's bandwidths: `algbw = bytes / time`, `busbw = algbw * 2 (n - 1) / n`
//!   (`bench/peers_multi.py` measures torch.distributed's the same way). Needs two GPUs and
//!   libnccl (`bench/run.sh` finds it with `scripts/nccl-path.sh`); else recorded as skipped.
//! * `data_parallel_matmul` (shape `16x4096x4096x4096`): 16 fast matmuls on one GPU
//!   (`gpukern:1gpu`) and split over two (`gpukern:2gpu`, one host thread per GPU, operands
//!   resident); the second record's `speedup` is the ratio (target >= 1.8).

use std::time::Instant;

use gpukern::{DeviceMatrix, Gpu, GpuGroup, MatmulAlgorithm};

use crate::Bench;
use crate::data::random_vec;
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};
use crate::timing::wall_per_call;

/// Kernels in the replayed chain, and floats each one touches.
const CHAIN: usize = 100;
const CHAIN_N: usize = 1024;
/// Floats per GPU in the all-reduce: 256 MiB.
const REDUCE_N: usize = 64 << 20;
/// The data-parallel batch: products, and their square size.
const BATCH: usize = 16;
const BATCH_N: usize = 4096;

/// Records made by [`graph_replay`].
pub const GRAPH_RECORDS: u64 = 2;
/// Records made by [`multi_gpu`].
pub const MULTI_RECORDS: u64 = 3;

/// Per-kernel wall time of a replayed chain of 100 small kernels against separate launches.
pub fn graph_replay(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    let calls = if b.quick { 100 } else { 2_000 };
    let max_s = if b.quick { 0.2 } else { 1.0 };
    let shape = format!("{CHAIN}x{CHAIN_N}");
    let x = random_vec(CHAIN_N, -1.0, 1.0);
    let plus = |times: usize| -> Vec<f32> {
        x.iter()
            .map(|&v| (0..times).fold(v, |acc, _| acc + 1.0))
            .collect()
    };
    for imp in ["gpukern:graph", "gpukern:launches"] {
        let base = Record::new("graph_replay", imp, shape.clone())
            .with("op", "increment_by_one")
            .with("kernels_per_call", CHAIN)
            .with("mode", "async");
        sink.item(base.clone(), || {
            let gpu = &b.gpu;
            let chain =
                |g: &Gpu, v: &mut gpukern::DeviceVec| (0..CHAIN).try_for_each(|_| g.increment_by_one(v));
            let mut graph = gpu.capture_with(gpu.upload(&x)?, chain)?;
            let mut direct = gpu.upload(&x)?;
            // The check: one call of each adds 100.
            let got = if imp == "gpukern:graph" {
                graph.launch()?;
                graph.buffers().to_vec()?
            } else {
                chain(gpu, &mut direct)?;
                direct.to_vec()?
            };
            let check = Check::new(&got, &plus(CHAIN), F32_TOL, "cpu_f64");
            if !check.passed() {
                return Ok(base.checked(&check));
            }
            let (ms, done) = wall_per_call(
                calls,
                10,
                max_s,
                || {
                    if imp == "gpukern:graph" {
                        graph.launch()?;
                    } else {
                        chain(gpu, &mut direct)?;
                    }
                    Ok(())
                },
                || Ok(gpu.synchronize()?),
            )?;
            let mut r = base.checked(&check);
            r.median_ms = Some(ms);
            Ok(r.with("us_per_kernel", ms * 1e3 / CHAIN as f64)
                .with("calls", done)
                .with("stat", "mean")
                .with("timer", "wall_clock"))
        })?;
    }
    Ok(())
}

/// The all-reduce's bus bandwidth and the data-parallel matmul's scaling, on two or more GPUs.
pub fn multi_gpu(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    let gpus = gpukern::gpus()?;
    let reduce = Record::new("all_reduce", "gpukern:nccl", REDUCE_N.to_string())
        .with("op", "sum")
        .with("dtype", "f32")
        .with("gpus", gpus.len());
    let one = Record::new(
        "data_parallel_matmul",
        "gpukern:1gpu",
        format!("{BATCH}x{BATCH_N}x{BATCH_N}x{BATCH_N}"),
    );
    let two = Record::new(
        "data_parallel_matmul",
        "gpukern:2gpu",
        format!("{BATCH}x{BATCH_N}x{BATCH_N}x{BATCH_N}"),
    );
    if gpus.len() < 2 {
        let why = format!("{} GPU(s): needs 2", gpus.len());
        for r in [reduce, one, two] {
            sink.emit(r.with("skipped", why.clone()))?;
        }
        return Ok(());
    }
    let reps = if b.quick { 3 } else { 20 };
    sink.item(reduce.clone(), || {
        let group = GpuGroup::new(gpus.clone())?;
        let n = group.len();
        let mut parts = group
            .gpus()
            .iter()
            .enumerate()
            .map(|(i, g)| g.upload(&vec![(i + 1) as f32; REDUCE_N]))
            .collect::<gpukern::Result<Vec<_>>>()?;
        group.all_reduce_sum(&mut parts)?;
        let want = vec![(n * (n + 1) / 2) as f32; REDUCE_N];
        let check = Check::new(&parts[n - 1].to_vec()?, &want, F32_TOL, "exact_sum");
        if !check.passed() {
            return Ok(reduce.checked(&check));
        }
        let mut times = Vec::new();
        for rep in 0..=reps {
            group.synchronize()?;
            let start = Instant::now();
            group.all_reduce_sum(&mut parts)?;
            group.synchronize()?;
            if rep > 0 {
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        times.sort_by(f64::total_cmp);
        let ms = times[times.len() / 2];
        let algbw = (REDUCE_N * 4) as f64 / (ms * 1e-3) / 1e9;
        let busbw = algbw * 2.0 * (n - 1) as f64 / n as f64;
        let mut r = reduce.checked(&check);
        r.median_ms = Some(ms);
        Ok(r.with("algbw_gb_s", algbw)
            .with("busbw_gb_s", busbw)
            .with("stat", "median")
            .with("timer", "wall_clock"))
    })?;
    let mut one_ms = None;
    for (count, base) in [(1, one), (2, two)] {
        sink.item(base.clone(), || {
            let ms = batch_ms(&gpus[..count], reps.min(5))?;
            let flops = 2.0 * (BATCH_N as f64).powi(3) * BATCH as f64;
            let mut r = base
                .with("gflop_s", flops / (ms * 1e-3) / 1e9)
                .with("gpus", count);
            r.median_ms = Some(ms);
            match one_ms {
                None => one_ms = Some(ms),
                Some(one) => r = r.with("speedup", one / ms),
            }
            Ok(r.with("stat", "median").with("timer", "wall_clock"))
        })?;
    }
    Ok(())
}

/// One product of the batch on its GPU: `A`, `B` and the result.
type Product = (DeviceMatrix, DeviceMatrix, DeviceMatrix);

/// Median wall time of the batch split over `gpus` (item `i` on GPU `i % len`, one thread per
/// GPU, operands resident), after one untimed round.
fn batch_ms(gpus: &[Gpu], reps: usize) -> Res<f64> {
    let mut shares: Vec<(Gpu, Vec<Product>)> = Vec::new();
    for (g, gpu) in gpus.iter().enumerate() {
        let mut items = Vec::new();
        for _ in (g..BATCH).step_by(gpus.len()) {
            let random = || {
                ndarray::Array2::from_shape_vec((BATCH_N, BATCH_N), random_vec(BATCH_N * BATCH_N, -1.0, 1.0))
            };
            let (a, b) = (gpu.upload_matrix(&random()?)?, gpu.upload_matrix(&random()?)?);
            items.push((a, b, gpu.zeros_matrix(BATCH_N, BATCH_N)?));
        }
        gpu.synchronize()?;
        shares.push((gpu.clone(), items));
    }
    let mut times = Vec::new();
    for rep in 0..=reps {
        let start = Instant::now();
        std::thread::scope(|scope| -> gpukern::Result<()> {
            let handles: Vec<_> = shares
                .iter_mut()
                .map(|(gpu, items)| {
                    scope.spawn(move || -> gpukern::Result<()> {
                        for (a, b, c) in items.iter_mut() {
                            gpu.matmul_into(a, b, c, MatmulAlgorithm::Fast)?;
                        }
                        gpu.synchronize()
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| gpukern::Error::InvalidArgument {
                    op: "data_parallel_matmul",
                    detail: "a worker thread panicked".into(),
                })??;
            }
            Ok(())
        })?;
        if rep > 0 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
