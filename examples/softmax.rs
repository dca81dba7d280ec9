//! Softmax with an inverse temperature `t`: `softmax(t * x)`, one GPU block per row.
//!
//! First a small vector of 8 logits, printed as probabilities for t = 0, 0.5, 1, 2 and 10: t = 0
//! gives the uniform distribution, t = 1 the plain softmax, and a large t approaches the one-hot
//! argmax. Each is computed with `gpukern::softmax` and checked against the CPU reference. Then
//! the row-wise softmax of a random 8192x1024 matrix kept on the device, checked and timed
//! (8 bytes per element: one read, one write).
//!
//! Run: `cargo run --release --example softmax [-- --rows R --cols C --reps N]`

mod common;

use std::process::ExitCode;

use common::{Args, BoxError};
use ndarray::arr1;

/// The logits of the small demonstration; the largest is the fourth.
const LOGITS: [f32; 8] = [1.0, -0.5, 2.0, 3.0, 0.0, 2.5, -2.0, 1.5];
/// The inverse temperatures shown.
const TEMPERATURES: [f32; 5] = [0.0, 0.5, 1.0, 2.0, 10.0];
/// The matrix timed on a GPU.
const ROWS: usize = 8192;
const COLS: usize = 1024;
/// The rows in the CPU simulator, which runs each GPU thread on the CPU.
const ROWS_SIMULATOR: usize = 512;
/// Relative error allowed against the f64 reference: the GPU's `exp` is `ex2.approx`.
const TOLERANCE: f64 = 1e-5;

/// Timed repetitions on a GPU (the simulator does one).
const REPS: usize = 20;

fn main() -> ExitCode {
    common::run(softmax)
}

fn softmax() -> Result<(), BoxError> {
    let args = Args::parse(
        "softmax: softmax(t * x) on the GPU for several inverse temperatures t, checked against the CPU",
        &[
            (
                "rows",
                "rows of the timed matrix (default 8192; 512 in the CPU simulator)",
            ),
            ("cols", "columns of the timed matrix (default 1024)"),
            (
                "reps",
                "timed repetitions, the median is reported (default 20; 1 in the simulator)",
            ),
        ],
    )?;
    let gpu = common::device()?;

    // The effect of the inverse temperature on 8 logits.
    let logits = arr1(&LOGITS);
    println!("softmax(t * x) of the logits x = {LOGITS:?}");
    print!("  {:>5} ", "t");
    for j in 0..LOGITS.len() {
        print!(" {:>7}", format!("p{j}"));
    }
    println!(" {:>10}", "rel. error");
    for t in TEMPERATURES {
        let p = gpukern::softmax(&logits, t)?;
        let reference = gpukern::cpu::softmax(&LOGITS, t);
        let err = gpukern::cpu::rel_error(&p.to_vec(), &reference);
        print!("  {t:>5} ");
        for v in &p {
            print!(" {v:>7.4}");
        }
        println!(" {err:>10.1e}");
        common::ensure(&format!("softmax with t = {t}"), err, TOLERANCE)?;
    }
    println!("  (t = 0: uniform; t = 1: the plain softmax; t = 10: almost all mass on the largest logit)");

    // A larger matrix, row by row, on the device.
    let cols = args.usize("cols")?.unwrap_or(COLS);
    let rows = args.size_or(gpu, "rows", ROWS, ROWS_SIMULATOR, |r| format!("{r}x{cols}"))?;
    let reps = args.reps(gpu, REPS)?;
    let t = 1.0;
    let x = common::random_matrix(&mut common::rng(), rows, cols);
    let reference = gpukern::cpu::softmax_rows(&x, t);
    let dx = gpu.upload_matrix(&x)?;
    let mut dy = gpu.softmax(&dx, t)?;
    let y = dy.to_array()?;
    let err = gpukern::cpu::rel_error(
        &y.iter().copied().collect::<Vec<_>>(),
        &reference.iter().copied().collect::<Vec<_>>(),
    );
    common::ensure("softmax of the matrix", err, TOLERANCE)?;
    let ms = common::time_ms(gpu, reps, || gpu.softmax_into(&dx, &mut dy, t))?;
    let bytes = 2.0 * 4.0 * (rows * cols) as f64;
    println!(
        "row softmax of a random {rows}x{cols} matrix on the device, t = {t}; {} after a checked warm-up:",
        common::runs(reps)
    );
    println!(
        "  Gpu::softmax_into: {ms:.3} ms, {:.1} GB/s, relative error {err:.1e}",
        common::gb_per_s(bytes, ms)
    );
    if gpu.is_simulator() {
        println!("  (simulator times measure the CPU running each GPU thread, not a GPU)");
    }
    Ok(())
}
