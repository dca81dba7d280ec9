//! The user kernels end to end: each on the CPU simulator and, where there is one, on CUDA
//! device 0, against its CPU reference. A mismatch is an error (exit status 1).
//!
//! `cargo run -p user-kernels --release`

use std::error::Error;

use gpukern::{Gpu, Module, bf16};
use user_kernels::{KERNELS, reference};

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    let mut gpus = vec![Gpu::simulator()];
    match Gpu::new(0) {
        Ok(gpu) => gpus.push(gpu),
        Err(e) if e.is_no_gpu() && std::env::var("GPUKERN_REQUIRE_GPU").as_deref() != Ok("1") => {
            println!("no GPU ({e}); running in the simulator only")
        }
        Err(e) => return Err(e.into()),
    }
    for gpu in &gpus {
        println!("== {}", gpu.describe());
        let module = gpu.load(&KERNELS)?;
        // `USER_KERNELS_SMALL=1`: small shapes on the GPU too (the sanitizer runs).
        let big = !gpu.is_simulator() && std::env::var_os("USER_KERNELS_SMALL").is_none();
        for (rows, cols) in if big {
            vec![(8192, 8192), (1001, 999)]
        } else {
            vec![(67, 136), (9, 13)]
        } {
            bias_gelu(&module, rows, cols)?;
            stencil(&module, rows, cols)?;
        }
        if gpu.is_simulator() || module.kernel_names().contains(&"gemm_bias_gelu") {
            for shape in if big {
                vec![(4096, 4096, 4096), (1001, 1000, 504)]
            } else {
                vec![(128, 256, 128), (136, 264, 136)]
            } {
                gemm_bias_gelu(&module, shape)?;
            }
        } else {
            println!("  gemm_bias_gelu: skipped (the sm_90a module is not loaded on this GPU)");
        }
        for n in if big {
            vec![1 << 28, 1_000_003]
        } else {
            vec![100_003, 17]
        } {
            histogram(&module, n)?;
        }
        prefix_lm(gpu, big)?;
    }
    Ok(())
}

/// The crate's own attention mask ([`fast_kernels::PrefixLm`]) on every rung the plan runs it on:
/// the forward's rows rung, `mma.sync` rung at head dims 64 and 128, and the plan's choice at 64,
/// 128 and 256 (the Hopper rung where the GPU has `wgmma`); the backward's rows rung and
/// `mma.sync` rung at 64 and 128, and the plan's choice at 64 and 128 (the one-kernel Hopper rung
/// where the GPU has `wgmma`, else the `mma.sync` rung): 28 kernels on an H100 or H200 (14 an
/// element type), each against gpukern's CPU reference with the mask written out apart. In the
/// simulator bf16 only, on small ragged shapes.
fn prefix_lm(gpu: &Gpu, big: bool) -> Res<()> {
    use gpukern::{AttentionAlgorithm as A, f16};
    use user_kernels::prefix_lm::{PrefixCase, Unit, prefix_lm_backward_check, prefix_lm_check};
    /// One check (`prefix_lm_check` or `prefix_lm_backward_check`), its result reported.
    type Check = fn(&Gpu, PrefixCase, A, u64) -> gpukern::Result<f64>;
    fn one(gpu: &Gpu, what: &str, run: Check, algorithm: A, (dims, prefix): ([usize; 6], usize)) -> Res<()> {
        let ratio = run(gpu, PrefixCase::new(dims, prefix), algorithm, 7 + dims[5] as u64)?;
        check(
            &format!("{what} ({}, {dims:?}, prefix {prefix})", algorithm.name()),
            ratio,
        )
    }
    fn run<T: Unit>(gpu: &Gpu, name: &str, big: bool) -> Res<()> {
        // Ragged: rows and keys no multiple of a tile, more keys than rows (the rows aligned to
        // the end of the keys), grouped-query heads; the backward's smaller on the GPU, for the
        // f64 reference.
        let forward = |d: usize| {
            if big {
                ([2, 1000, 1100, 8, 2, d], 300)
            } else {
                ([1, 130, 150, 2, 1, d], 37)
            }
        };
        let backward = |d: usize| {
            if big {
                ([1, 300, 333, 4, 2, d], 100)
            } else {
                ([1, 70, 90, 2, 1, d], 37)
            }
        };
        let what = format!("prefix-LM attention, {name}");
        for (algorithm, d) in [
            (A::Rows, 64),
            (A::Flash, 64),
            (A::Flash, 128),
            (A::Auto, 64),
            (A::Auto, 128),
            (A::Auto, 256),
        ] {
            one(gpu, &what, prefix_lm_check::<T>, algorithm, forward(d))?;
        }
        let what = format!("prefix-LM attention backward, {name}");
        for (algorithm, d) in [
            (A::Rows, 64),
            (A::Flash, 64),
            (A::Flash, 128),
            (A::Auto, 64),
            (A::Auto, 128),
        ] {
            one(gpu, &what, prefix_lm_backward_check::<T>, algorithm, backward(d))?;
        }
        Ok(())
    }
    run::<bf16>(gpu, "bf16", big)?;
    if !gpu.is_simulator() {
        run::<f16>(gpu, "f16", big)?;
    }
    Ok(())
}

/// A deterministic pseudo-random stream (xorshift), so the runs need no dependency.
fn noise(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

fn check(what: &str, ratio: f64) -> Res<()> {
    if ratio <= 1.0 {
        println!("  {what}: ok (worst error {ratio:.3} of its tolerance)");
        Ok(())
    } else {
        Err(format!("{what}: an element is {ratio:.3} times its tolerance off the CPU reference").into())
    }
}

fn bias_gelu(module: &Module, rows: usize, cols: usize) -> Res<()> {
    let mut r = noise(7);
    let x: Vec<bf16> = (0..rows * cols)
        .map(|_| bf16::from_f32((r() % 2001) as f32 / 250.0 - 4.0))
        .collect();
    let bias: Vec<f32> = (0..cols).map(|_| (r() % 1001) as f32 / 1000.0 - 0.5).collect();
    let gpu = module.gpu();
    let (xd, bd) = (gpu.upload(&x)?, gpu.upload(&bias)?);
    let want = reference::bias_gelu(&x, &bias, cols);
    let (atol, rtol) = reference::GELU_TOL;
    for (name, gelu) in user_kernels::GELUS {
        let mut yd = gpu.zeros_of::<bf16>(rows * cols)?;
        gelu(module, &xd, &bd, &mut yd, rows, cols)?;
        let got = yd.to_vec()?;
        let ratio = reference::worst_ratio(got.iter().map(|v| f64::from(v.to_f32())), &want, atol, rtol);
        check(&format!("{name}, {rows} x {cols}"), ratio)?;
    }
    Ok(())
}

fn gemm_bias_gelu(module: &Module, (m, n, k): (usize, usize, usize)) -> Res<()> {
    let mut r = noise(19);
    let (a, b, bias) = reference::gemm_inputs(&mut r, (m, n, k));
    let gpu = module.gpu();
    let (ad, bd, biasd) = (gpu.upload(&a)?, gpu.upload(&b)?, gpu.upload(&bias)?);
    let mut cd = gpu.zeros_of::<bf16>(m * n)?;
    user_kernels::gemm_bias_gelu(module, &ad, &bd, &biasd, &mut cd, (m, n, k))?;
    let c = cd.to_vec()?;
    let points = reference::gemm_check_points((m, n), 20_000);
    let want = reference::gemm_bias_gelu_at(&a, &b, &bias, (m, n, k), &points);
    let got = points.iter().map(|&(i, j)| f64::from(c[i * n + j].to_f32()));
    let (atol, rtol) = reference::GEMM_TOL;
    let ratio = reference::worst_ratio(got, &want, atol, rtol);
    check(&format!("gemm_bias_gelu, {m} x {n} x {k}"), ratio)
}

fn stencil(module: &Module, rows: usize, cols: usize) -> Res<()> {
    let mut r = noise(11);
    let x: Vec<f32> = (0..rows * cols)
        .map(|_| (r() % 10_000) as f32 / 5000.0 - 1.0)
        .collect();
    let gpu = module.gpu();
    let xd = gpu.upload(&x)?;
    let want = reference::stencil(&x, rows, cols);
    let (atol, rtol) = reference::STENCIL_TOL;
    for (name, stencil) in user_kernels::STENCILS {
        let mut out = gpu.zeros_of::<f32>(rows * cols)?;
        stencil(module, &xd, &mut out, rows, cols)?;
        let ratio = reference::worst_ratio(out.to_vec()?.iter().map(|&v| f64::from(v)), &want, atol, rtol);
        check(&format!("{name}, {rows} x {cols}"), ratio)?;
    }
    Ok(())
}

fn histogram(module: &Module, n: usize) -> Res<()> {
    let mut r = noise(13);
    let data: Vec<u8> = (0..n).map(|_| (r() >> 24) as u8).collect();
    let gpu = module.gpu();
    let dd = gpu.upload(&data)?;
    let mut counts = gpu.zeros_of::<u32>(256)?;
    let want = reference::histogram(&data);
    for (name, (histogram, _)) in user_kernels::HISTOGRAMS {
        histogram(module, &dd, &mut counts)?;
        let exact = counts.to_vec()? == want;
        check(
            &format!("{name}, {n} bytes"),
            if exact { 0.0 } else { f64::INFINITY },
        )?;
    }
    Ok(())
}
