//! The second tutorial's lesson: copy once, compute many times.
//!
//! Computes a chain of 20 matrix products `x <- x * B` on 1024x1024 matrices two ways: with the
//! free function `gpukern::matmul`, which uploads both operands and downloads the result on every
//! call, and with `DeviceMatrix`es uploaded once, the products chained with `Gpu::matmul_into`
//! (two device buffers taking turns as input and output, so the loop allocates nothing) and the
//! result downloaded once. Both are checked against the same chain on the CPU. Also times one
//! host-to-device upload and one device-to-host download of a matrix on their own, in GB/s, which
//! is what the free function pays twice or three times per call.
//!
//! Then the third timing, on a batch of `--chunks` independent products `A_i * B` (`--batch-size`
//! square, 2048 by default, so that a chunk's copies and its product take times of one order):
//! the copies alone (every `A_i` up and every `C_i` down through pinned memory, one stream), the
//! products alone on device-resident data, copy every call (upload, compute, download chunk by
//! chunk on one stream), and pipelined on three streams with [`Gpu::pipelined`], where one
//! chunk's upload, another's product and a third's download overlap. It prints the pipelined
//! time over max(copy time, compute time): the overlap bound is 1.
//!
//! Run: `cargo run --release --example transfer [-- --size N --count C --reps R --batch-size N
//! --chunks K]`

mod common;

use std::process::ExitCode;

use common::{Args, BoxError};
use gpukern::{Gpu, MatmulAlgorithm};
use ndarray::Array2;

/// The square size on a GPU.
const SIZE: usize = 1024;
/// The size in the CPU simulator, which runs each GPU thread on the CPU.
const SIZE_SIMULATOR: usize = 64;
/// How many products in the chain.
const COUNT: usize = 20;
/// Relative error allowed against the CPU chain; each product adds its own f32 rounding.
const TOLERANCE: f64 = 1e-5;

/// Timed repetitions on a GPU (the simulator does one).
const REPS: usize = 10;

fn main() -> ExitCode {
    common::run(transfer)
}

fn transfer() -> Result<(), BoxError> {
    let args = Args::parse(
        "transfer: many matmuls with a copy every call vs data kept on the device",
        &[
            (
                "size",
                "square size of the matrices (default 1024; 64 in the CPU simulator)",
            ),
            ("count", "products in the chain (default 20)"),
            (
                "reps",
                "timed repetitions, the median is reported (default 10; 1 in the simulator)",
            ),
            (
                "batch-size",
                "square size of each chunk of the pipelined batch (default 2048; 32 in the simulator)",
            ),
            ("chunks", "chunks of the pipelined batch (default 8)"),
        ],
    )?;
    let gpu = common::device()?;
    let n = args.size_or(gpu, "size", SIZE, SIZE_SIMULATOR, |n| format!("{n}x{n}"))?;
    let count = args.usize("count")?.unwrap_or(COUNT);
    let reps = args.reps(gpu, REPS)?;

    let mut rng = common::rng();
    let a = common::random_matrix(&mut rng, n, n);
    // Entries of variance 1/n, so that x * B keeps x's size: the chain neither overflows nor
    // fades to zero however long it is.
    let b = common::random_matrix(&mut rng, n, n) * (3.0 / n as f32).sqrt();
    let matrix_bytes = (4 * n * n) as f64;

    println!(
        "transfer: {count} chained products x <- x * B of {n}x{n} f32 matrices; {} after a warm-up",
        common::runs(reps)
    );
    let (reference, cpu_ms) = common::time_once(|| chain_cpu(&a, &b, count));
    let reference = reference?;

    // Warm-up for the copies below: the first launch and the first copies pay one-time costs.
    gpukern::matmul(&a, &b)?;
    gpu.synchronize()?;

    // Copies alone.
    let up_ms = common::time_ms(gpu, reps, || gpu.upload_matrix(&a))?;
    let dx = gpu.upload_matrix(&a)?;
    let down_ms = common::time_ms(gpu, reps, || dx.to_array())?;
    drop(dx);
    println!(
        "  upload of one matrix ({:.2} MB), host to device: {up_ms:.4} ms, {:.1} GB/s",
        matrix_bytes / 1e6,
        common::gb_per_s(matrix_bytes, up_ms)
    );
    println!(
        "  download of one matrix, device to host:       {down_ms:.4} ms, {:.1} GB/s",
        common::gb_per_s(matrix_bytes, down_ms)
    );

    // The free function: every product uploads x and B and downloads the new x. The first,
    // checked run of each chain is also its warm-up.
    let x = chain_free_function(&a, &b, count)?;
    let free_err = rel_error(&x, &reference);
    common::ensure("the chain of gpukern::matmul calls", free_err, TOLERANCE)?;
    let free_ms = common::time_ms(gpu, reps, || chain_free_function(&a, &b, count))?;

    // Device-resident: one upload of x and B, the products back to back, one download.
    let x = chain_on_device(gpu, &a, &b, count)?;
    let resident_err = rel_error(&x, &reference);
    common::ensure("the chain on DeviceMatrix", resident_err, TOLERANCE)?;
    let resident_ms = common::time_ms(gpu, reps, || chain_on_device(gpu, &a, &b, count))?;

    println!(
        "  {:<62} {:>10} {:>12} {:>10}",
        "", "total ms", "ms/product", "rel. error"
    );
    let row = |label: &str, ms: f64, err: &str| {
        println!("  {label:<62} {ms:>10.3} {:>12.3} {err:>10}", ms / count as f64);
    };
    row(
        &format!("gpukern::matmul x{count} (upload 2, download 1 per call)"),
        free_ms,
        &format!("{free_err:.1e}"),
    );
    row(
        &format!("DeviceMatrix: upload 2, Gpu::matmul_into x{count}, download 1"),
        resident_ms,
        &format!("{resident_err:.1e}"),
    );
    row(
        &format!("gpukern::cpu::matmul x{count} (f64, 1 run)"),
        cpu_ms,
        "reference",
    );
    println!(
        "  copy every call / copy once: {:.2}x the time",
        free_ms / resident_ms
    );
    pipelined(gpu, &args, reps)?;
    if gpu.is_simulator() {
        println!("  (simulator times measure the CPU running each GPU thread, not a GPU)");
    }
    Ok(())
}

/// Square size of each chunk of the pipelined batch on a GPU: a 2048^3 product and the copies
/// of its 16 MiB operand and result take times of one order.
const BATCH_SIZE: usize = 2048;
/// The chunk size in the CPU simulator.
const BATCH_SIZE_SIMULATOR: usize = 32;
/// Chunks of the pipelined batch.
const CHUNKS: usize = 8;
/// Streams of the pipelined run: one uploading, one computing, one downloading.
const STREAMS: usize = 3;

/// The batch `C_i = A_i * B` four ways (see the module's doc), printed with the overlap ratio.
fn pipelined(gpu: &Gpu, args: &Args, reps: usize) -> Result<(), BoxError> {
    let n = args.size_or(gpu, "batch-size", BATCH_SIZE, BATCH_SIZE_SIMULATOR, |n| {
        format!("{n}x{n}")
    })?;
    let chunks = args.usize("chunks")?.unwrap_or(CHUNKS).max(1);
    let mut rng = common::rng();
    let a = common::random_matrix(&mut rng, chunks * n, n);
    let b = common::random_matrix(&mut rng, n, n) * (3.0 / n as f32).sqrt();
    let chunk_bytes = (4 * n * n) as f64;
    let algorithm = MatmulAlgorithm::default();

    let db = gpu.upload_matrix(&b)?;
    let input = gpu.pinned_from(a.as_slice().ok_or("a standard-layout batch")?)?;
    let mut output = gpu.pinned::<f32>(chunks * n * n)?;

    // Checked first (also the warm-up): the pipelined result against the chunks on the CPU.
    let compute = |g: &Gpu, x: &gpukern::DeviceMatrix, y: &mut gpukern::DeviceMatrix| {
        g.matmul_into(x, &db, y, algorithm)
    };
    gpu.pipelined(STREAMS, &input, (n, n), &mut output, (n, n), compute)?;
    let reference = gpukern::cpu::matmul(&a.slice(ndarray::s![..n, ..]), &b)?;
    let first = Array2::from_shape_vec((n, n), output.as_slice()?[..n * n].to_vec())?;
    let err = rel_error(&first, &reference);
    common::ensure("the first chunk of the pipelined batch", err, TOLERANCE)?;

    // Copies alone: every chunk up, then every result down, one stream, pinned memory.
    let mut lanes = Vec::with_capacity(chunks);
    for _ in 0..chunks {
        lanes.push((gpu.zeros_matrix(n, n)?, gpu.zeros_matrix(n, n)?));
    }
    let copy_ms = common::time_ms(gpu, reps, || {
        for (i, (x, _)) in lanes.iter_mut().enumerate() {
            x.as_vec_mut().copy_from_pinned(&input, i * n * n)?;
        }
        for (i, (_, y)) in lanes.iter().enumerate() {
            y.as_vec().copy_to_pinned(&mut output, i * n * n)?;
        }
        output.as_slice().map(|_| ())
    })?;
    // Compute alone, on the chunks already on the device.
    let compute_ms = common::time_ms(gpu, reps, || {
        lanes.iter_mut().try_for_each(|(x, y)| compute(gpu, x, y))
    })?;
    // Copy every call: upload, compute, download chunk after chunk on one stream.
    let serial_ms = common::time_ms(gpu, reps, || {
        gpu.pipelined(1, &input, (n, n), &mut output, (n, n), compute)?;
        output.as_slice().map(|_| ())
    })?;
    let pipelined_ms = common::time_ms(gpu, reps, || {
        gpu.pipelined(STREAMS, &input, (n, n), &mut output, (n, n), compute)?;
        output.as_slice().map(|_| ())
    })?;

    println!(
        "\npipelined batch: {chunks} products A_i * B of {n}x{n} f32 ({:.1} MB up and {:.1} MB down \
         per chunk, pinned); {}",
        chunk_bytes / 1e6,
        chunk_bytes / 1e6,
        common::runs(reps)
    );
    let row = |label: &str, ms: f64| println!("  {label:<62} {ms:>10.3}");
    row("copies alone (all up, all down, one stream)", copy_ms);
    row("compute alone (data kept on the device)", compute_ms);
    row(
        "copy every call (up, compute, down per chunk, one stream)",
        serial_ms,
    );
    row(
        &format!("pipelined on {STREAMS} streams (Gpu::pipelined)"),
        pipelined_ms,
    );
    println!(
        "  pipelined / max(copy, compute) = {:.3} (overlap bound 1; target <= 1.15); \
         first chunk rel. error {err:.1e}",
        pipelined_ms / copy_ms.max(compute_ms)
    );
    Ok(())
}

/// `a * b^count` as a chain of free-function calls, each copying its operands up and its result
/// down.
fn chain_free_function(a: &Array2<f32>, b: &Array2<f32>, count: usize) -> gpukern::Result<Array2<f32>> {
    let mut x = a.clone();
    for _ in 0..count {
        x = gpukern::matmul(&x, b)?;
    }
    Ok(x)
}

/// `a * b^count` as a chain of products, uploading once and downloading once.
fn chain_on_device(
    gpu: &Gpu,
    a: &Array2<f32>,
    b: &Array2<f32>,
    count: usize,
) -> gpukern::Result<Array2<f32>> {
    let mut x = gpu.upload_matrix(a)?;
    let db = gpu.upload_matrix(b)?;
    if count == 0 {
        return x.to_array();
    }
    // The first product allocates the second buffer; from then on the two take turns.
    let mut y = gpu.matmul(&x, &db)?;
    for _ in 1..count {
        std::mem::swap(&mut x, &mut y);
        gpu.matmul_into(&x, &db, &mut y, MatmulAlgorithm::default())?;
    }
    y.to_array()
}

/// The same chain with the CPU reference, each product rounded to f32 like the GPU's.
fn chain_cpu(a: &Array2<f32>, b: &Array2<f32>, count: usize) -> gpukern::Result<Array2<f32>> {
    let mut x = a.clone();
    for _ in 0..count {
        x = gpukern::cpu::matmul(&x, b)?;
    }
    Ok(x)
}

/// [`gpukern::cpu::rel_error`] of two matrices of one shape.
fn rel_error(out: &Array2<f32>, reference: &Array2<f32>) -> f64 {
    if out.dim() != reference.dim() {
        return f64::INFINITY;
    }
    let out: Vec<f32> = out.iter().copied().collect();
    let reference: Vec<f32> = reference.iter().copied().collect();
    gpukern::cpu::rel_error(&out, &reference)
}
