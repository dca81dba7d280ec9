//! Tensor parallelism, one process per GPU: an MLP `Z = (X W1) W2` split over the ranks of a
//! job the way Megatron splits it. `W1` by columns (column-parallel: each rank computes its slice
//! of the hidden activations, nothing exchanged) and `W2` by rows (row-parallel: each rank's
//! slice of activations times its rows of `W2` is a partial `Z`), then one all-reduce sums the
//! partials. bf16 operands, the partials and their sum in f32.
//!
//! Every rank checks its `Z` against the product on one GPU (rank 0 computes it whole) and rank
//! 0 prints the median time of the split product with its all-reduce, and of the whole product
//! on its GPU alone, and the speed-up.
//!
//! Run as a job: `bash scripts/torchrun.sh N target/release/examples/tensor_parallel [-- --batch B
//! --hidden H --ffn F]` (N processes, one GPU each; libnccl on the library path:
//! `LD_LIBRARY_PATH=$(bash scripts/nccl-path.sh)`). Run alone, it is a job of one; without a GPU,
//! a job of one in the simulator at small sizes.

mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::{Args, BoxError};
use gpukern::dist::{Communicator, ReduceOp, Rendezvous};
use gpukern::{DeviceMatrix, Gpu, bf16};
use ndarray::Array2;

/// Shapes on a GPU (a Llama-3-8B-sized MLP layer) and in the simulator.
const GPU_SHAPE: (usize, usize, usize) = (4096, 8192, 28672);
const SIM_SHAPE: (usize, usize, usize) = (16, 32, 64);
/// Timed repetitions on a GPU.
const REPS: usize = 5;

fn main() -> ExitCode {
    common::run(tensor_parallel)
}

/// A deterministic bf16 matrix whose entries keep the products near 1.
fn matrix(rows: usize, cols: usize, seed: usize, scale: f32) -> Array2<bf16> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        let h = (i * 7919 + j * 104_729 + seed * 15_485_863) % 1000;
        bf16::from_f32((h as f32 / 500.0 - 1.0) * scale)
    })
}

fn tensor_parallel() -> Result<(), BoxError> {
    let args = Args::parse(
        "tensor_parallel: an MLP split over the ranks of a job, one GPU each",
        &[
            ("batch", "rows of X (default 4096; 16 in the simulator)"),
            ("hidden", "columns of X and Z (default 8192; 32 in the simulator)"),
            (
                "ffn",
                "the MLP's inner width (default 28672; 64 in the simulator)",
            ),
        ],
    )?;
    // A job from torchrun's variables, or alone a job of one.
    let rendezvous = match Rendezvous::from_env() {
        Ok(r) => r,
        Err(_) if std::env::var_os("RANK").is_none() => Rendezvous::new(0, 1, ("127.0.0.1", 0u16))?,
        Err(e) => return Err(e.into()),
    };
    let gpu = match Gpu::new(rendezvous.local_rank) {
        Ok(g) => g,
        Err(e) if e.is_no_gpu() && rendezvous.world == 1 => {
            println!("no GPU ({e}): a job of one in the simulator");
            Gpu::simulator()
        }
        Err(e) => return Err(e.into()),
    };
    let (b0, h0, f0) = if gpu.is_simulator() { SIM_SHAPE } else { GPU_SHAPE };
    let (batch, hidden, ffn) = (
        args.usize("batch")?.unwrap_or(b0),
        args.usize("hidden")?.unwrap_or(h0),
        args.usize("ffn")?.unwrap_or(f0),
    );
    let comm = Communicator::new(&gpu, &rendezvous)?;
    let (rank, world) = (comm.rank(), comm.world());
    if ffn % world != 0 {
        return Err(format!("the inner width {ffn} does not split over {world} ranks").into());
    }
    let part = ffn / world;
    let (lo, hi) = (rank * part, (rank + 1) * part);
    if rank == 0 {
        println!(
            "== {} x {} ranks: Z = (X W1) W2, X {batch} x {hidden}, W1 {hidden} x {ffn}, bf16",
            gpu.describe(),
            world
        );
    }
    let x = matrix(batch, hidden, 1, 1.0);
    let w1 = matrix(hidden, ffn, 2, 1.0 / (hidden as f32).sqrt());
    let w2 = matrix(ffn, hidden, 3, 1.0 / (ffn as f32).sqrt());
    let dx = gpu.upload_matrix(&x)?;
    let dw1 = gpu.upload_matrix(&w1.slice(ndarray::s![.., lo..hi]))?;
    let dw2 = gpu.upload_matrix(&w2.slice(ndarray::s![lo..hi, ..]))?;
    let mut h = gpu.zeros_matrix_of::<bf16>(batch, part)?;
    let mut z = gpu.zeros_matrix(batch, hidden)?;
    let step = |h: &mut DeviceMatrix<bf16>, z: &mut DeviceMatrix| -> gpukern::Result<()> {
        gpu.matmul_to(&dx, &dw1, h)?; // this rank's columns of X W1
        gpu.matmul_to(h, &dw2, z)?; // times its rows of W2: a partial Z, in f32
        comm.all_reduce(z.as_vec_mut(), ReduceOp::Sum)?; // the one exchange
        comm.synchronize()
    };
    step(&mut h, &mut z)?;
    let reps = if gpu.is_simulator() { 1 } else { REPS };
    let mut split_ms = Vec::new();
    for _ in 0..reps {
        let start = Instant::now();
        step(&mut h, &mut z)?;
        split_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let got = z.to_array()?;

    // The whole product on one GPU, on every rank (each checks its own Z).
    let (dw1_all, dw2_all) = (gpu.upload_matrix(&w1)?, gpu.upload_matrix(&w2)?);
    let mut h_all = gpu.zeros_matrix_of::<bf16>(batch, ffn)?;
    let mut z_all = gpu.zeros_matrix(batch, hidden)?;
    let mut whole_ms = Vec::new();
    for _ in 0..reps + 1 {
        let start = Instant::now();
        gpu.matmul_to(&dx, &dw1_all, &mut h_all)?;
        gpu.matmul_to(&h_all, &dw2_all, &mut z_all)?;
        gpu.synchronize()?;
        whole_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    whole_ms.remove(0);
    let want = z_all.to_array()?;
    let scale = want
        .iter()
        .fold(0.0f64, |m, &v| m.max(f64::from(v).abs()))
        .max(1e-30);
    let err = got
        .iter()
        .zip(want.iter())
        .fold(0.0f64, |m, (&g, &w)| m.max((f64::from(g) - f64::from(w)).abs()));
    // The activations are rounded to bf16 on both sides, slice by slice the same way; the f32
    // partial sums add in another order: a few f32 roundings of the largest entry.
    let ok = err <= 1e-4 * scale;
    println!(
        "rank {rank}: Z against the whole product on one GPU: max error {:.2e} of max |Z| {scale:.3e}: {}",
        err,
        if ok { "ok" } else { "WRONG" }
    );
    if rank == 0 {
        let (split, whole) = (common::median(split_ms), common::median(whole_ms));
        println!(
            "split over {world}: {split:.3} ms (products and all-reduce); whole on one GPU: {whole:.3} ms; speed-up {:.2}x",
            whole / split
        );
    }
    if ok {
        Ok(())
    } else {
        Err(format!("rank {rank}: the split product is wrong").into())
    }
}
