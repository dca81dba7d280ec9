//! The first tutorial's kernel: the thread-indexed vector add `c[i] = a[i] + b[i]`, one GPU
//! thread per element.
//!
//! Adds two random vectors of 2^24 elements three ways: with the free function `gpukern::add` on
//! `ndarray` vectors (upload, kernel and download on every call), with `Gpu::add` on vectors
//! already on the device (the kernel and a fresh output), and with `Gpu::add_into` into an
//! output allocated once (the kernel alone). Each result is checked against the CPU reference
//! before it is timed; the rate counts 12 bytes per element (two reads, one write).
//!
//! Run: `cargo run --release --example vecadd [-- --n ELEMENTS --reps R]`

mod common;

use std::process::ExitCode;

use common::{Args, BoxError};
use ndarray::ArrayView1;

/// The default problem size: 2^24 elements, 64 MiB per vector.
const N: usize = 1 << 24;
/// The size in the CPU simulator, which runs each GPU thread on the CPU.
const N_SIMULATOR: usize = 1 << 20;
/// f32 adds give the same bits on the GPU and the CPU: any difference is a bug.
const TOLERANCE: f64 = 0.0;

/// Timed repetitions on a GPU (the simulator does one).
const REPS: usize = 20;

fn main() -> ExitCode {
    common::run(vecadd)
}

fn vecadd() -> Result<(), BoxError> {
    let args = Args::parse(
        "vecadd: c = a + b on the GPU, checked against the CPU",
        &[
            (
                "n",
                "number of elements (default 2^24; 2^20 in the CPU simulator)",
            ),
            (
                "reps",
                "timed repetitions, the median is reported (default 20; 1 in the simulator)",
            ),
        ],
    )?;
    let gpu = common::device()?;
    let n = args.size_or(gpu, "n", N, N_SIMULATOR, |n| format!("{n} elements"))?;
    let reps = args.reps(gpu, REPS)?;

    let mut rng = common::rng();
    let a = common::random_vec(&mut rng, n);
    let b = common::random_vec(&mut rng, n);
    let reference = gpukern::cpu::add(&a, &b)?;
    let (a_view, b_view) = (ArrayView1::from(&a[..]), ArrayView1::from(&b[..]));
    let bytes = 3.0 * 4.0 * n as f64;

    println!(
        "vecadd: c = a + b, {n} f32 elements; {} after a checked warm-up",
        common::runs(reps)
    );
    println!("  {:<48} {:>10} {:>10} {:>10}", "", "ms", "GB/s", "rel. error");
    let row = |label: &str, ms: f64, err: f64| {
        println!(
            "  {label:<48} {ms:>10.3} {:>10.1} {err:>10.1e}",
            common::gb_per_s(bytes, ms)
        );
    };

    // The free function: each call uploads a and b, runs the kernel, downloads c.
    let c = gpukern::add(&a_view, &b_view)?;
    let err = gpukern::cpu::rel_error(&c.to_vec(), &reference);
    common::ensure("gpukern::add", err, TOLERANCE)?;
    let ms = common::time_ms(gpu, reps, || gpukern::add(&a_view, &b_view))?;
    row("gpukern::add (upload + kernel + download)", ms, err);

    // Device-resident: upload once, then only the kernel runs.
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut dc = gpu.add(&da, &db)?;
    let err = gpukern::cpu::rel_error(&dc.to_vec()?, &reference);
    common::ensure("Gpu::add", err, TOLERANCE)?;
    let ms = common::time_ms(gpu, reps, || gpu.add(&da, &db))?;
    row("Gpu::add (device-resident, new output)", ms, err);

    gpu.add_into(&da, &db, &mut dc)?;
    let err = gpukern::cpu::rel_error(&dc.to_vec()?, &reference);
    common::ensure("Gpu::add_into", err, TOLERANCE)?;
    let ms = common::time_ms(gpu, reps, || gpu.add_into(&da, &db, &mut dc))?;
    row("Gpu::add_into (device-resident, output reused)", ms, err);

    if gpu.is_simulator() {
        println!("(simulator times measure the CPU running each GPU thread, not a GPU)");
    }
    Ok(())
}
