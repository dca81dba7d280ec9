//! Sampling the next token of each row of f32 logits (`gpu.sample_into_with`), greedy, at
//! temperature 1, and with the usual decode filters (t = 0.8, top-k 50, top-p 0.9), with every
//! `SampleAlgorithm`.
//!
//! Minimum traffic: the logits read once (4 bytes per element) and one i32 token written per
//! row. The tutorial kernel reads each row more often than that (once per bisection step, from
//! L2 after the first), which is what the GB/s shows.

use gpukern::{DeviceMatrix, DeviceVec, SampleAlgorithm, SampleOptions, cpu};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::random_vec;
use crate::record::{Check, Record, Res, Sink};

/// Logits are uniform in `[-RANGE, RANGE)`.
const RANGE: f32 = 6.0;

/// How far the reference's uniform number is nudged when a token differs (see
/// `tests/kernels/sample.rs`).
const NUDGE: f64 = 1e-5;

/// `(rows, cols)` measured.
pub fn shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("sample", quick)
}

/// The option sets and their labels (the records' `options` key).
pub fn option_sets() -> [(&'static str, SampleOptions); 3] {
    let base = SampleOptions {
        seed: 2024,
        offset: 1,
        ..SampleOptions::default()
    };
    [
        ("greedy", SampleOptions::greedy()),
        ("t1", base),
        (
            "t0.8-k50-p0.9",
            SampleOptions {
                temperature: 0.8,
                top_k: 50,
                top_p: 0.9,
                ..base
            },
        ),
    ]
}

/// Measurements [`sample`] makes.
pub fn planned(quick: bool) -> usize {
    shapes(quick).len() * option_sets().len() * SampleAlgorithm::ALL.len()
}

/// Minimum bytes of one call.
pub fn traffic(rows: usize, cols: usize) -> f64 {
    crate::suite::bytes("sample", &[("rows", rows), ("cols", cols)])
}

/// The share of rows whose token is neither the reference's nor between the reference's at
/// `u - NUDGE` and `u + NUDGE`, as a [`Check`] that passes at 0.
pub fn check(got: &[i32], x: &[f32], cols: usize, options: &SampleOptions) -> Check {
    let rows = x.len() / cols.max(1);
    let wrong = cpu::sample_rows_rejected(got, x, cols, options, NUDGE).len();
    Check {
        rel_err: wrong as f64 / rows.max(1) as f64,
        tol: 0.0,
        reference: "cpu_f64",
    }
}

/// Every shape, option set and algorithm.
pub fn sample(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in shapes(b.quick) {
        if !b.wants(&format!("{rows}x{cols}")) {
            continue;
        }
        let mut prepared: Option<(Vec<f32>, DeviceMatrix, DeviceVec<i32>)> = None;
        for (label, options) in option_sets() {
            for algorithm in SampleAlgorithm::ALL {
                let base = Record::new(
                    "sample",
                    format!("gpukern:{}", algorithm.name()),
                    format!("{rows}x{cols}"),
                )
                .with("rows", rows)
                .with("cols", cols)
                .with("options", label)
                .with("call", "gpu.sample_into_with");
                sink.item(base.clone(), || {
                    let gpu = &b.gpu;
                    if prepared.is_none() {
                        let x = random_vec(rows * cols, -RANGE, RANGE);
                        let dx = gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &x)?)?;
                        prepared = Some((x, dx, gpu.zeros_of::<i32>(rows)?));
                    }
                    let Some((x, dx, tokens)) = prepared.as_mut() else {
                        return Err("sampling operands were not prepared".into());
                    };
                    gpu.sample_into_with(dx, &options, tokens, algorithm)?;
                    let check = check(&tokens.to_vec()?, x, cols, &options);
                    let record = base.checked(&check);
                    if !check.passed() {
                        return Ok(record);
                    }
                    let stats = b.timer.measure(|_| {
                        gpu.sample_into_with(dx, &options, tokens, algorithm)?;
                        Ok(())
                    })?;
                    Ok(record.timed(&stats, Some(traffic(rows, cols)), None))
                })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check passes the simulator's tokens and fails a wrong one.
    #[test]
    fn checks_pass_on_the_simulator_and_can_fail() {
        let gpu = gpukern::Gpu::simulator();
        let (rows, cols) = (3, 40);
        let x = random_vec(rows * cols, -RANGE, RANGE);
        let dx = gpu
            .upload_matrix(&ArrayView2::from_shape((rows, cols), &x).unwrap())
            .unwrap();
        for (_, options) in option_sets() {
            let mut got = gpu.sample(&dx, &options).unwrap().to_vec().unwrap();
            assert!(check(&got, &x, cols, &options).passed());
            got[1] = (got[1] + 1) % cols as i32;
            assert!(!check(&got, &x, cols, &options).passed());
        }
        assert_eq!(traffic(2, 3), 32.0);
    }
}
