//! Data parallelism over every GPU: a batch of independent matrix products split evenly over
//! the devices (one host thread per GPU, each queueing its share on its own `Gpu`), the results
//! gathered to the host and checked against the same batch on one GPU; then a sum all-reduce
//! of one vector per GPU through NCCL ([`gpukern::GpuGroup::all_reduce_sum`]).
//!
//! Prints the batch's time on one GPU and on all of them, and the speed-up. Operands are
//! uploaded before the clock starts and the results downloaded after it stops: the time is the
//! products' alone. Runs on one GPU (speed-up 1) and, without a GPU, on the CPU simulator with
//! a small batch.
//!
//! Run: `cargo run --release --example data_parallel [-- --size N --batch B --reps R]`
//! (the all-reduce needs libnccl: `LD_LIBRARY_PATH=$(bash scripts/nccl-path.sh)`).

mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::{Args, BoxError};
use gpukern::{DeviceMatrix, Gpu, GpuGroup, MatmulAlgorithm};
use ndarray::Array2;

/// Square size of each product on a GPU, and in the simulator.
const SIZE: usize = 4096;
const SIZE_SIMULATOR: usize = 48;
/// Products in the batch on a GPU (a multiple of 8, so that it splits evenly over 1, 2, 4 or 8
/// devices), and in the simulator.
const BATCH: usize = 16;
const BATCH_SIMULATOR: usize = 4;
/// Timed repetitions on a GPU.
const REPS: usize = 5;

fn main() -> ExitCode {
    common::run(data_parallel)
}

/// One GPU's share of the batch, on the device: its operands and its results.
struct Share {
    gpu: Gpu,
    /// Indices into the batch.
    items: Vec<usize>,
    operands: Vec<(DeviceMatrix, DeviceMatrix)>,
    results: Vec<DeviceMatrix>,
}

fn data_parallel() -> Result<(), BoxError> {
    let args = Args::parse(
        "data_parallel: a batch of matmuls split over every GPU, timed on one and on all",
        &[
            (
                "size",
                "square size of each product (default 4096; 48 in the simulator)",
            ),
            ("batch", "products in the batch (default 16; 4 in the simulator)"),
            ("reps", "timed repetitions, the median is reported (default 5)"),
        ],
    )?;
    let gpus = match gpukern::gpus() {
        Ok(gpus) => gpus,
        Err(e) if e.is_no_gpu() => {
            println!("{e}\nrunning on the CPU simulator");
            vec![Gpu::simulator()]
        }
        Err(e) => return Err(e.into()),
    };
    for (i, gpu) in gpus.iter().enumerate() {
        println!("device {i}: {}", gpu.describe());
    }
    let n = args.size_or(&gpus[0], "size", SIZE, SIZE_SIMULATOR, |n| format!("{n}x{n}"))?;
    let sim = gpus[0].is_simulator();
    let batch = args
        .usize("batch")?
        .unwrap_or(if sim { BATCH_SIMULATOR } else { BATCH });
    let reps = args.reps(&gpus[0], REPS)?;
    let mut rng = common::rng();
    let inputs: Vec<(Array2<f32>, Array2<f32>)> = (0..batch)
        .map(|_| {
            (
                common::random_matrix(&mut rng, n, n),
                common::random_matrix(&mut rng, n, n),
            )
        })
        .collect();

    let (one_ms, reference) = run_batch(&gpus[..1], &inputs, reps)?;
    let (all_ms, gathered) = run_batch(&gpus, &inputs, reps)?;
    let mut worst = 0.0f64;
    for (got, want) in gathered.iter().zip(&reference) {
        let scale = want
            .iter()
            .fold(0.0f64, |m, v| m.max(f64::from(v.abs())))
            .max(1e-30);
        let err = got
            .iter()
            .zip(want)
            .fold(0.0f64, |m, (g, w)| m.max(f64::from((g - w).abs())));
        worst = worst.max(err / scale);
    }
    // The same kernel and plan on the same kind of device: equal up to rounding order (which
    // the plans keep fixed per shape), so any difference is a bug.
    common::ensure("results on all GPUs against one GPU's", worst, 1e-6)?;

    let flops = 2.0 * (n as f64).powi(3) * batch as f64;
    println!(
        "\n{batch} products of {n}x{n} ({}), operands resident, results checked:",
        common::runs(reps)
    );
    println!(
        "  1 GPU : {one_ms:9.3} ms  {:8.1} GFLOP/s",
        common::gflop_per_s(flops, one_ms)
    );
    println!(
        "  {} GPU{}: {all_ms:9.3} ms  {:8.1} GFLOP/s  speed-up {:.2}x",
        gpus.len(),
        if gpus.len() == 1 { " " } else { "s" },
        common::gflop_per_s(flops, all_ms),
        one_ms / all_ms
    );

    // The gradient-averaging step of data-parallel training: one vector per GPU, summed.
    let group = GpuGroup::new(gpus)?;
    let len = if sim { 1000 } else { 1 << 24 };
    let mut parts = group
        .gpus()
        .iter()
        .enumerate()
        .map(|(i, gpu)| gpu.upload(&vec![(i + 1) as f32; len]))
        .collect::<gpukern::Result<Vec<_>>>()?;
    match group.all_reduce_sum(&mut parts) {
        Ok(()) => {
            let want = (group.len() * (group.len() + 1) / 2) as f32;
            let ok = parts.iter().try_fold(true, |ok, p| {
                Ok::<_, gpukern::Error>(ok && p.to_vec()?.iter().all(|&v| v == want))
            })?;
            println!(
                "all-reduce (sum) of {len} floats over {} GPU(s): {}",
                group.len(),
                if ok { "correct" } else { "WRONG" }
            );
            if !ok {
                return Err("the all-reduce gave a wrong sum".into());
            }
        }
        Err(e @ gpukern::Error::NoNccl) => println!("all-reduce skipped: {e}"),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The batch split over `gpus` (item `i` on GPU `i % gpus.len()`): operands uploaded, then the
/// median over `reps` of the time for every GPU to run its share (one host thread each), then
/// the results gathered in batch order.
fn run_batch(
    gpus: &[Gpu],
    inputs: &[(Array2<f32>, Array2<f32>)],
    reps: usize,
) -> Result<(f64, Vec<Vec<f32>>), BoxError> {
    let mut shares = Vec::new();
    for (g, gpu) in gpus.iter().enumerate() {
        let items: Vec<usize> = (g..inputs.len()).step_by(gpus.len()).collect();
        let mut operands = Vec::new();
        let mut results = Vec::new();
        for &i in &items {
            let (a, b) = &inputs[i];
            operands.push((gpu.upload_matrix(a)?, gpu.upload_matrix(b)?));
            results.push(gpu.zeros_matrix(a.nrows(), b.ncols())?);
        }
        gpu.synchronize()?;
        shares.push(Share {
            gpu: gpu.clone(),
            items,
            operands,
            results,
        });
    }
    // One untimed round (plans, first launches), then the timed ones.
    let mut times = Vec::new();
    for rep in 0..=reps {
        let start = Instant::now();
        std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .iter_mut()
                .map(|share| scope.spawn(move || compute_share(share)))
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join().map_err(|_| gpukern::Error::InvalidArgument {
                    op: "data_parallel",
                    detail: "a worker thread panicked".into(),
                })?
            })
        })?;
        if rep > 0 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let mut gathered = vec![Vec::new(); inputs.len()];
    for share in &shares {
        for (&i, c) in share.items.iter().zip(&share.results) {
            gathered[i] = c.as_vec().to_vec()?;
        }
    }
    Ok((common::median(times), gathered))
}

/// One GPU's share: its products queued, then waited for.
fn compute_share(share: &mut Share) -> gpukern::Result<()> {
    for ((a, b), c) in share.operands.iter().zip(share.results.iter_mut()) {
        share.gpu.matmul_into(a, b, c, MatmulAlgorithm::Fast)?;
    }
    share.gpu.synchronize()
}
