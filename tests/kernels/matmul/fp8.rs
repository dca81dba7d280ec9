//! FP8 quantisation (`Gpu::quantize_e4m3`, f32 and bf16 inputs, per-tensor and per-row scales)
//! against its CPU reference (`quantize_e4m3_reference`), bit for bit:
//! `{sim,cuda}::quantize_e4m3::RxC` on random data spread over 2^-12 .. 2^4 (subnormal E4M3
//! results, ties of the rounding), a row of zeros, a row with an infinity and one with a NaN; and
//! the dequantised values within E4M3's rounding of the input.

use gpukern::{E4M3, Fp8Scaling, Gpu, bf16, quantize_e4m3_reference};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// Shapes `(rows, cols)`: one element, odd columns (the last element alone), several blocks of
/// columns, many rows.
const SIM_SHAPES: &[(usize, usize)] = &[(1, 1), (3, 517), (17, 64)];
const CUDA_SHAPES: &[(usize, usize)] = &[(1, 1), (3, 517), (17, 64), (4096, 1031), (1, 100_000)];

pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, shapes) in [(sim, SIM_SHAPES), (cuda, CUDA_SHAPES)] {
        for &(rows, cols) in shapes {
            trials.push(trial(
                target,
                &format!("quantize_e4m3::{rows}x{cols}"),
                move |gpu, rng| quantize_shape(gpu, rng, rows, cols),
            ));
        }
        trials.push(trial(target, "quantize_e4m3::special_rows", |gpu, rng| {
            special_rows(gpu, rng)
        }));
    }
    trials
}

/// Random values, magnitudes log-uniform over 2^-12 .. 2^4, both signs.
fn random_spread(rng: &mut StdRng, rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |_| {
        let mag = 2f32.powf(rng.random_range(-12.0..4.0));
        if rng.random::<bool>() { mag } else { -mag }
    })
}

/// Quantises `x` (given as f32; bf16 inputs rounded first) both ways and compares with the
/// reference bit for bit; checks the dequantised error of the finite elements.
fn compare(gpu: &Gpu, x: &Array2<f32>, what: &str, failures: &mut Vec<String>) -> Check {
    let xb = x.mapv(bf16::from_f32);
    let xb32 = xb.mapv(|v| v.to_f32());
    for scaling in [Fp8Scaling::Tensor, Fp8Scaling::Row] {
        for (input, got) in [
            ("f32", gpu.quantize_e4m3(&gpu.upload_matrix(x)?, scaling)?),
            ("bf16", gpu.quantize_e4m3(&gpu.upload_matrix(&xb)?, scaling)?),
        ] {
            let source = if input == "f32" { x } else { &xb32 };
            let (want_q, want_s) = quantize_e4m3_reference(source, scaling);
            let (got_q, got_s) = (got.data.to_array()?, got.scales.to_vec()?);
            let label = format!("{what} {input} {}", scaling.name());
            if got_s
                .iter()
                .map(|s| s.to_bits())
                .ne(want_s.iter().map(|s| s.to_bits()))
            {
                failures.push(format!("{label}: scales {got_s:?}, want {want_s:?}"));
            }
            if let Some(((i, j), g)) = got_q
                .indexed_iter()
                .find(|&(ij, g)| g.to_bits() != want_q[ij].to_bits())
            {
                failures.push(format!(
                    "{label}: q({i}, {j}) = {g:?}, want {:?} (x = {})",
                    want_q[(i, j)],
                    source[(i, j)]
                ));
            }
            // The dequantised values: within half an E4M3 step of the input.
            for ((i, j), &q) in got_q.indexed_iter() {
                let s = got_s[if scaling == Fp8Scaling::Row { i } else { 0 }];
                let (v, back) = (source[(i, j)], q.to_f32() * s);
                if !v.is_finite() || !s.is_finite() || s == 1.0 {
                    continue;
                }
                let bound = (v.abs() * 2f32.powi(-4)).max(2f32.powi(-10) * s) * 1.0001;
                if (back - v).abs() > bound {
                    failures.push(format!("{label}: ({i}, {j}) = {v} came back as {back}"));
                    break;
                }
            }
        }
    }
    Ok(())
}

fn quantize_shape(gpu: &Gpu, rng: &mut StdRng, rows: usize, cols: usize) -> Check {
    let x = random_spread(rng, rows, cols);
    let mut failures = Vec::new();
    compare(gpu, &x, &format!("{rows}x{cols}"), &mut failures)?;
    all_passed(failures)
}

/// A row of zeros (scale 1), a row with +inf (saturates, scale 1), a row with a NaN, beside an
/// ordinary row: per row each keeps its own scale; per tensor the NaN makes the scale 1.
fn special_rows(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let mut x = random_spread(rng, 4, 33);
    x.row_mut(1).fill(0.0);
    x[(2, 5)] = f32::INFINITY;
    x[(3, 7)] = f32::NAN;
    let mut failures = Vec::new();
    compare(gpu, &x, "special rows", &mut failures)?;
    let q = gpu.quantize_e4m3(&gpu.upload_matrix(&x)?, Fp8Scaling::Row)?;
    let (data, scales) = (q.data.to_array()?, q.scales.to_vec()?);
    if scales[1] != 1.0 || scales[2] != 1.0 || scales[3] != 1.0 || scales[0] == 1.0 {
        failures.push(format!("special rows: scales {scales:?}"));
    }
    if data[(2, 5)] != E4M3::MAX || !data[(3, 7)].is_nan() || data[(1, 0)] != E4M3::ZERO {
        failures.push("special rows: inf, NaN or zero quantised wrong".to_string());
    }
    all_passed(failures)
}
