//! The tutorials' matrix product `C = A * B`: the naive kernel (one thread per output element,
//! operands read from global memory) against the tiled one (32x32 tiles staged in shared
//! memory), and both against the CPU reference.
//!
//! Part 1 multiplies two random 2048x2048 matrices kept on the device with every
//! `MatmulAlgorithm`, checks each result against `gpukern::cpu::matmul` (f64 accumulation), and
//! prints the kernel times and GFLOP/s (2*m*n*k flops), with the CPU reference's time for
//! comparison. Part 2 calls the free function `gpukern::matmul(&a, &b)` on random 1000x1000
//! matrices (a size that is no multiple of the tile) and checks its relative error is below 1e-5.
//!
//! Run: `cargo run --release --example matmul [-- --size N --reps R]`

mod common;

use std::process::ExitCode;

use common::{Args, BoxError};
use gpukern::MatmulAlgorithm;

/// The square size timed on a GPU.
const SIZE: usize = 2048;
/// The size in the CPU simulator, which runs each GPU thread on the CPU.
const SIZE_SIMULATOR: usize = 128;
/// The size of the free-function check (no multiple of the 32x32 tile, so edge tiles are
/// exercised).
const CHECK_SIZE: usize = 1000;
/// ... and in the simulator: still no multiple of 32.
const CHECK_SIZE_SIMULATOR: usize = 100;
/// Relative error allowed against the f64 reference: f32 accumulation over k terms loses
/// about sqrt(k) * 2^-24, far below this.
const TOLERANCE: f64 = 1e-5;
/// The same for the opt-in TF32 algorithm: operands rounded to 11 significant bits give a
/// relative error of about 1e-3 (see `MatmulAlgorithm::Tf32` for the per-element bound).
const TF32_TOLERANCE: f64 = 1e-2;

/// Timed repetitions on a GPU (the simulator does one).
const REPS: usize = 10;

fn main() -> ExitCode {
    common::run(matmul)
}

fn matmul() -> Result<(), BoxError> {
    let args = Args::parse(
        "matmul: naive vs tiled matrix product on the GPU, checked against the CPU",
        &[
            (
                "size",
                "square size timed (default 2048; 128 in the CPU simulator)",
            ),
            (
                "reps",
                "timed repetitions, the median is reported (default 10; 1 in the simulator)",
            ),
        ],
    )?;
    let gpu = common::device()?;
    let n = args.size_or(gpu, "size", SIZE, SIZE_SIMULATOR, |n| format!("{n}x{n}"))?;
    let reps = args.reps(gpu, REPS)?;
    let mut rng = common::rng();

    // Part 1: every algorithm on device-resident matrices.
    let a = common::random_matrix(&mut rng, n, n);
    let b = common::random_matrix(&mut rng, n, n);
    let flops = 2.0 * (n as f64).powi(3);
    let (reference, cpu_ms) = common::time_once(|| gpukern::cpu::matmul(&a, &b));
    let reference = reference?;
    let reference = reference.as_slice().ok_or("the CPU reference is not row-major")?;

    println!(
        "matmul: {n}x{n} times {n}x{n} (f32); {} after a checked warm-up",
        common::runs(reps)
    );
    println!("  {:<40} {:>10} {:>10} {:>10}", "", "ms", "GFLOP/s", "rel. error");
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut dc = gpu.matmul(&da, &db)?;
    for algorithm in MatmulAlgorithm::ALL {
        gpu.matmul_into(&da, &db, &mut dc, algorithm)?;
        let err = gpukern::cpu::rel_error(&dc.as_vec().to_vec()?, reference);
        let tolerance = if algorithm.uses_tf32() {
            TF32_TOLERANCE
        } else {
            TOLERANCE
        };
        common::ensure(algorithm.name(), err, tolerance)?;
        let ms = common::time_ms(gpu, reps, || gpu.matmul_into(&da, &db, &mut dc, algorithm))?;
        println!(
            "  {:<40} {ms:>10.3} {:>10.1} {err:>10.1e}",
            format!("Gpu::matmul_into, {}", algorithm.name()),
            common::gflop_per_s(flops, ms)
        );
    }
    println!(
        "  {:<40} {cpu_ms:>10.3} {:>10.1} {:>10}",
        "gpukern::cpu::matmul (f64, 1 run)",
        common::gflop_per_s(flops, cpu_ms),
        "reference"
    );
    if gpu.is_simulator() {
        println!("  (simulator times measure the CPU running each GPU thread, not a GPU)");
    }

    // Part 2: the free function on a size that is no multiple of the tile.
    let m = if gpu.is_simulator() {
        CHECK_SIZE_SIMULATOR
    } else {
        CHECK_SIZE
    };
    if gpu.is_simulator() {
        println!("CPU simulator: using {m}x{m} instead of {CHECK_SIZE}x{CHECK_SIZE}");
    }
    let a = common::random_matrix(&mut rng, m, m);
    let b = common::random_matrix(&mut rng, m, m);
    let (c, ms) = common::time_once(|| gpukern::matmul(&a, &b));
    let c = c?;
    let reference = gpukern::cpu::matmul(&a, &b)?;
    let err = gpukern::cpu::rel_error(
        &c.iter().copied().collect::<Vec<_>>(),
        &reference.iter().copied().collect::<Vec<_>>(),
    );
    println!(
        "gpukern::matmul(&a, &b), random {m}x{m}: {ms:.3} ms (upload + kernel + download, first call), \
         relative error {err:.1e} (must be < {TOLERANCE:.0e})"
    );
    common::ensure("gpukern::matmul", err, TOLERANCE)?;
    Ok(())
}
