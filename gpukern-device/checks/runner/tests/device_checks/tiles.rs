//! `gpukern_device_checks::tiles`: the warp tiles of `tile::warp` (`cp.async` copies, `ldmatrix`
//! fragments of `A`, `B` and `B^T`, `mma.sync`) in a GEMM of ragged shapes, against the product of
//! the same 16-bit inputs. The inputs are small integers, so every product and sum is exact in f32
//! and the check is equality: a fragment in the wrong place changes the result.

use gpukern::{DeviceVec, Element, LaunchConfig, Module, bf16, f16};
use gpukern_device_checks::tiles::{BM, BN, SHARED_BYTES, THREADS, warp_tile_gemm_bf16, warp_tile_gemm_f16};
use libtest_mimic::Trial;
use rand::Rng;
use rand::rngs::StdRng;

use crate::{Check, Target, expect_all, trial};

pub fn trials(target: &Target) -> Vec<Trial> {
    let shapes: &[(usize, usize, usize)] = if target.prefix == "sim" {
        &[(70, 40, 72), (1, 8, 8)]
    } else {
        &[(1000, 520, 1032), (64, 32, 32), (3, 8, 8), (257, 136, 4104)]
    };
    let mut trials = Vec::new();
    for &(m, n, k) in shapes {
        for transposed in [false, true] {
            let layout = if transposed { "bt" } else { "b" };
            trials.push(trial(
                target,
                &format!("tiles::warp_gemm_bf16_{layout}_{m}x{n}x{k}"),
                move |module, _, rng| run::<bf16>(module, rng, (m, n, k), transposed, launch_bf16),
            ));
            trials.push(trial(
                target,
                &format!("tiles::warp_gemm_f16_{layout}_{m}x{n}x{k}"),
                move |module, _, rng| run::<f16>(module, rng, (m, n, k), transposed, launch_f16),
            ));
        }
    }
    trials
}

/// A 16-bit element of the check: built from a small integer, read back as f64.
trait Small: Element + Copy {
    fn of(v: f32) -> Self;
    fn value(self) -> f64;
}

impl Small for bf16 {
    fn of(v: f32) -> Self {
        bf16::from_f32(v)
    }
    fn value(self) -> f64 {
        f64::from(self.to_f32())
    }
}

impl Small for f16 {
    fn of(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn value(self) -> f64 {
        f64::from(self.to_f32())
    }
}

/// Launches the instance for `T` on `(a, b, c, (m, n, k), transposed)`.
type LaunchFn<T> = fn(
    &Module,
    LaunchConfig,
    &DeviceVec<T>,
    &DeviceVec<T>,
    &mut DeviceVec<f32>,
    (usize, usize, usize),
    bool,
) -> Check;

fn run<T: Small>(
    module: &Module,
    rng: &mut StdRng,
    (m, n, k): (usize, usize, usize),
    transposed: bool,
    launch: LaunchFn<T>,
) -> Check {
    let gpu = module.gpu();
    let draw = |rng: &mut StdRng, len: usize| -> Vec<T> {
        (0..len).map(|_| T::of(rng.random_range(-4..=4) as f32)).collect()
    };
    let a = draw(rng, m * k);
    // `B` row-major `k x n`; its transpose for the `B^T` form.
    let b = draw(rng, k * n);
    let bt: Vec<T> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
    let ad = gpu.upload(&a)?;
    let bd = gpu.upload(if transposed { &bt } else { &b })?;
    let mut c = gpu.zeros_of::<f32>(m * n)?;
    let config = LaunchConfig {
        grid: (n.div_ceil(BN) as u32, m.div_ceil(BM) as u32, 1),
        block: (THREADS, 1, 1),
        shared_mem_bytes: SHARED_BYTES,
    };
    launch(module, config, &ad, &bd, &mut c, (m, n, k), transposed)?;
    let got = c.to_vec()?;
    let want: Vec<f64> = (0..m * n)
        .map(|i| {
            let (r, col) = (i / n, i % n);
            (0..k)
                .map(|p| a[r * k + p].value() * b[p * n + col].value())
                .sum()
        })
        .collect();
    expect_all("warp_tile_gemm", &got, &want, |g, w| f64::from(*g) == *w)
}

fn launch_bf16(
    module: &Module,
    config: LaunchConfig,
    a: &DeviceVec<bf16>,
    b: &DeviceVec<bf16>,
    c: &mut DeviceVec<f32>,
    (m, n, k): (usize, usize, usize),
    transposed: bool,
) -> Check {
    // SAFETY: the kernel's contract: `a` is `m x k`, `b` `k x n` (or `n x k`), `c` `m x n`, `k`
    // and `n` multiples of 8; its block, grid and shared memory.
    unsafe { warp_tile_gemm_bf16::launch(module, config, a, b, c, m, n, k, transposed) }?;
    Ok(())
}

fn launch_f16(
    module: &Module,
    config: LaunchConfig,
    a: &DeviceVec<f16>,
    b: &DeviceVec<f16>,
    c: &mut DeviceVec<f32>,
    (m, n, k): (usize, usize, usize),
    transposed: bool,
) -> Check {
    // SAFETY: as `launch_bf16`.
    unsafe { warp_tile_gemm_f16::launch(module, config, a, b, c, m, n, k, transposed) }?;
    Ok(())
}
