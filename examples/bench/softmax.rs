//! Row softmax with an inverse temperature: `gpu.softmax_into_with(x, y, t, algorithm)`, every algorithm.
//!
//! Minimum traffic: 8 bytes per element (read x once, write y once).

use gpukern::SoftmaxAlgorithm;
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for, softmax_reference};
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};

/// Inverse temperatures measured.
pub const TEMPERATURES: [f32; 2] = [1.0, 0.5];
/// Inputs are uniform in `[-RANGE, RANGE)`: a spread of e^10 within a row at t = 1.
const RANGE: f32 = 5.0;

/// `(rows, cols)` of BENCHMARKING.md.
pub fn shapes(quick: bool) -> Vec<(usize, usize)> {
    if quick {
        return vec![(8192, 128)];
    }
    let mut s: Vec<_> = [128, 1024, 4096, 8192, 32768]
        .iter()
        .map(|&c| (8192, c))
        .collect();
    s.push((1, 1 << 24));
    s
}

/// Every shape at every temperature.
pub fn softmax(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in shapes(b.quick) {
        if !b.wants(&format!("{rows}x{cols}")) {
            continue;
        }
        for (t, algorithm) in TEMPERATURES
            .into_iter()
            .flat_map(|t| SoftmaxAlgorithm::ALL.map(|a| (t, a)))
        {
            let n = rows * cols;
            let base = Record::new(
                "softmax",
                format!("gpukern:{}", algorithm.name()),
                format!("{rows}x{cols}"),
            )
            .with("rows", rows)
            .with("cols", cols)
            .with("t", f64::from(t));
            sink.item(base.clone(), || {
                let x = random_vec(n, -RANGE, RANGE);
                let reference = softmax_reference(&x, cols, t);
                let nan = vec![f32::NAN; n];
                let sets = sets_for(8 * n);
                let gpu = &b.gpu;
                let mut bufs = Vec::with_capacity(sets);
                for _ in 0..sets {
                    bufs.push((
                        gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &x)?)?,
                        gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &nan)?)?,
                    ));
                }
                let (dx, dy) = &mut bufs[0];
                gpu.softmax_into_with(dx, dy, t, algorithm)?;
                let check = Check::new(&dy.as_vec().to_vec()?, &reference, F32_TOL, "cpu_f64");
                let record = base.checked(&check).with("sets", sets);
                if !check.passed() {
                    return Ok(record);
                }
                let stats = b.timer.measure(|i| {
                    let (dx, dy) = &mut bufs[i % sets];
                    Ok(gpu.softmax_into_with(dx, dy, t, algorithm)?)
                })?;
                Ok(record.timed(&stats, Some(8.0 * n as f64), None))
            })?;
        }
    }
    Ok(())
}
