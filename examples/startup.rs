//! What a process pays before its first results: the time of `Gpu::global()` (device 0, the
//! library chosen but no kernel compiled), then of the first and the second call of each kernel
//! family through the free functions (the first call JIT-compiles that family's kernels, only
//! those; the second shows the call itself). Small shapes: the times are start-up, not work.
//!
//! On a GPU, `CUDA_CACHE_DISABLE=1` makes every run a first run (the driver keeps compiled PTX
//! in `~/.nv/ComputeCache` otherwise, and a later process finds it there):
//!
//! `CUDA_CACHE_DISABLE=1 GPUKERN_DEVICE=cuda cargo run --release --example startup`
//!
//! Prints one line per step and a JSON line per step (`{"step","first_ms","second_ms"}`).

mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::BoxError;
use gpukern::{HalfTile, bf16};
use ndarray::{Array1, Array2};

fn main() -> ExitCode {
    common::run(startup)
}

/// Milliseconds `f` takes.
fn ms<T>(f: impl FnOnce() -> gpukern::Result<T>) -> Result<f64, BoxError> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

fn report(step: &str, first: f64, second: Option<f64>) {
    match second {
        Some(s) => println!("{step:<16} first {first:>9.1} ms   second {s:>8.2} ms"),
        None => println!("{step:<16} {first:>9.1} ms"),
    }
    let second = second.map_or("null".to_string(), |s| format!("{s:.3}"));
    println!("{{\"step\":\"{step}\",\"first_ms\":{first:.3},\"second_ms\":{second}}}");
}

fn startup() -> Result<(), BoxError> {
    let process = Instant::now();
    let new = ms(|| gpukern::Gpu::global().map(|_| ()))?;
    println!("device: {}", gpukern::Gpu::global()?.describe());
    report("Gpu::global", new, None);

    let v = Array1::from_iter((0..4096).map(|i| (i % 7) as f32));
    let m = Array2::from_shape_fn((256, 256), |(i, j)| ((i * 3 + j) % 11) as f32 / 11.0);
    let labels = Array1::from_iter((0..256).map(|i| (i % 256) as i64));
    let w = Array1::from_elem(256, 1.0f32);
    let b = Array1::from_elem(256, 0.0f32);
    let mh = m.mapv(bf16::from_f32);

    type Step<'a> = (&'a str, Box<dyn Fn() -> gpukern::Result<()> + 'a>);
    let steps: Vec<Step> = vec![
        ("add", Box::new(|| gpukern::add(&v, &v).map(|_| ()))),
        ("matmul", Box::new(|| gpukern::matmul(&m, &m).map(|_| ()))),
        ("softmax", Box::new(|| gpukern::softmax(&m, 1.0).map(|_| ()))),
        ("sum", Box::new(|| gpukern::sum(&v).map(|_| ()))),
        ("argmax", Box::new(|| gpukern::argmax(&v).map(|_| ()))),
        (
            "sum_axis",
            Box::new(|| gpukern::sum_axis(&m, ndarray::Axis(1)).map(|_| ())),
        ),
        ("transpose", Box::new(|| gpukern::transpose(&m).map(|_| ()))),
        (
            "rms_norm",
            Box::new(|| gpukern::rms_norm(&m, &w, 1e-5).map(|_| ())),
        ),
        (
            "layer_norm",
            Box::new(|| gpukern::layer_norm(&m, &w, &b, 1e-5).map(|_| ())),
        ),
        (
            "cross_entropy",
            Box::new(|| gpukern::cross_entropy(&m, &labels).map(|_| ())),
        ),
        ("matmul_bf16", Box::new(|| gpukern::matmul(&mh, &mh).map(|_| ()))),
        (
            "matmul_bf16_mma",
            Box::new(|| {
                gpukern::matmul_half_with::<bf16, bf16, _, _>(&mh, &mh, HalfTile::Square).map(|_| ())
            }),
        ),
    ];
    for (step, call) in &steps {
        let first = ms(call)?;
        let second = ms(call)?;
        report(step, first, Some(second));
    }
    report("process", process.elapsed().as_secs_f64() * 1e3, None);
    Ok(())
}
