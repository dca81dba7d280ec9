//! The first tutorial's in-place kernel: `x[i] += 1`, one GPU thread per element.
//!
//! First on an `ndarray` vector with the free function `gpukern::increment_by_one` (upload,
//! kernel, download on each call), also on a strided view (every other element). Then on a
//! `DeviceVec`: uploaded once, incremented ten times on the device, downloaded once, and
//! checked against x + 10 computed on the CPU. Prints the times of both ways of doing the ten
//! increments; the rate counts 8 bytes per element and increment (one read, one write).
//!
//! Run: `cargo run --release --example increment_by_one [-- --n ELEMENTS --times T --reps R]`

mod common;

use std::process::ExitCode;

use common::{Args, BoxError};
use std::time::Instant;

use ndarray::{Array1, ArrayView1, s};

/// The default problem size: 2^24 elements.
const N: usize = 1 << 24;
/// The size in the CPU simulator, which runs each GPU thread on the CPU.
const N_SIMULATOR: usize = 1 << 18;
/// How many increments by default.
const TIMES: usize = 10;
/// Adding 1.0 rounds the same way on the GPU and the CPU: any difference is a bug.
const TOLERANCE: f64 = 0.0;

/// Timed repetitions on a GPU (the simulator does one).
const REPS: usize = 5;

fn main() -> ExitCode {
    common::run(increment_by_one)
}

fn increment_by_one() -> Result<(), BoxError> {
    let args = Args::parse(
        "increment_by_one: x += 1 in place on the GPU, on an ndarray and on a DeviceVec",
        &[
            (
                "n",
                "number of elements (default 2^24; 2^18 in the CPU simulator)",
            ),
            ("times", "how many increments (default 10)"),
            (
                "reps",
                "timed repetitions, the median is reported (default 5; 1 in the simulator)",
            ),
        ],
    )?;
    let gpu = common::device()?;
    let n = args.size_or(gpu, "n", N, N_SIMULATOR, |n| format!("{n} elements"))?;
    let times = args.usize("times")?.unwrap_or(TIMES);
    let reps = args.reps(gpu, REPS)?;
    let mut rng = common::rng();
    let x0 = common::random_vec(&mut rng, n);
    let plus_one = gpukern::cpu::increment_by_one(&x0);

    // The free function on an ndarray vector, then on a strided view of one.
    println!("increment_by_one: x += 1 on {n} f32 elements");
    let mut x = Array1::from(x0.clone());
    gpukern::increment_by_one(&mut x)?;
    let err = gpukern::cpu::rel_error(&x.to_vec(), &plus_one);
    println!("  gpukern::increment_by_one(&mut x): relative error {err:.1e}");
    common::ensure("gpukern::increment_by_one", err, TOLERANCE)?;

    let mut x = Array1::from(x0.clone());
    gpukern::increment_by_one(&mut x.slice_mut(s![..;2]))?;
    let expected: Vec<f32> = (0..n)
        .map(|i| if i % 2 == 0 { plus_one[i] } else { x0[i] })
        .collect();
    let err = gpukern::cpu::rel_error(&x.to_vec(), &expected);
    println!(
        "  gpukern::increment_by_one(&mut x.slice_mut(s![..;2])), every other element: relative error {err:.1e}"
    );
    common::ensure("gpukern::increment_by_one on a strided view", err, TOLERANCE)?;

    // The reference for `times` increments: the CPU adds 1.0 `times` times, rounding each time
    // like the GPU does.
    let mut expected = x0.clone();
    for _ in 0..times {
        expected = gpukern::cpu::increment_by_one(&expected);
    }
    let bytes = 2.0 * 4.0 * n as f64 * times as f64;

    // A warm-up launch on a buffer of its own, so that the timed runs below start warm.
    let mut warm = gpu.upload(&x0)?;
    gpu.increment_by_one(&mut warm)?;
    gpu.synchronize()?;
    drop(warm);

    println!("x += 1, {times} times; {} after a warm-up:", common::runs(reps));
    println!("  {:<58} {:>10} {:>10} {:>10}", "", "ms", "GB/s", "rel. error");
    let row = |label: &str, ms: f64, err: f64| {
        println!(
            "  {label:<58} {ms:>10.3} {:>10.1} {err:>10.1e}",
            common::gb_per_s(bytes, ms)
        );
    };

    // The free function each time: every call copies x up and back.
    let mut times_ms = Vec::with_capacity(reps);
    let mut x = Array1::from(x0.clone());
    for _ in 0..reps {
        x.assign(&ArrayView1::from(&x0[..]));
        let start = Instant::now();
        for _ in 0..times {
            gpukern::increment_by_one(&mut x)?;
        }
        gpu.synchronize()?;
        times_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let err = gpukern::cpu::rel_error(&x.to_vec(), &expected);
    common::ensure("gpukern::increment_by_one repeated", err, TOLERANCE)?;
    row(
        &format!("gpukern::increment_by_one x{times} (copies every call)"),
        common::median(times_ms),
        err,
    );

    // Device-resident: one upload (not timed), the kernels back to back, one download (timed).
    let mut times_ms = Vec::with_capacity(reps);
    let mut x = Vec::new();
    for _ in 0..reps {
        let mut dx = gpu.upload(&x0)?;
        gpu.synchronize()?;
        let start = Instant::now();
        for _ in 0..times {
            gpu.increment_by_one(&mut dx)?;
        }
        x = dx.to_vec()?;
        times_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let err = gpukern::cpu::rel_error(&x, &expected);
    common::ensure("Gpu::increment_by_one on a DeviceVec", err, TOLERANCE)?;
    row(
        &format!("Gpu::increment_by_one x{times} on a DeviceVec + 1 download"),
        common::median(times_ms),
        err,
    );
    println!("  (check: x + {times} computed on the CPU)");
    if gpu.is_simulator() {
        println!("  (simulator times measure the CPU running each GPU thread, not a GPU)");
    }
    Ok(())
}
