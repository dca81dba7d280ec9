//! Matrix transpose: `gpu.transpose_into_with(a, b, algorithm)`, every algorithm, on a square
//! and a ragged shape.
//!
//! Minimum traffic: 8 bytes per element (read a once, write b once).

use gpukern::TransposeAlgorithm;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::record::{Check, Record, Res, Sink};

/// `(rows, cols)` measured: 8192^2 and a ragged shape of about the same size.
pub fn shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("transpose", quick)
}

/// `gpu.transpose_into_with(a, b, algorithm)`, every algorithm; exact against the host's
/// transpose.
pub fn transpose(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in shapes(b.quick) {
        let shape = format!("{rows}x{cols}");
        if !b.wants(&shape) {
            continue;
        }
        for algorithm in TransposeAlgorithm::ALL {
            let base = Record::new(
                "transpose",
                format!("gpukern:{}", algorithm.name()),
                shape.clone(),
            )
            .with("rows", rows)
            .with("cols", cols)
            // The kernel that runs: `vec4_64` falls back to `tiled_64` where a row is not 16-byte
            // aligned (the ragged shape).
            .with("runs", algorithm.effective(rows, cols, true).name());
            sink.item(base.clone(), || {
                let a = ndarray::Array2::from_shape_vec((rows, cols), random_vec(rows * cols, -1.0, 1.0))?;
                let reference = gpukern::cpu::transpose(&a);
                let reference = reference.as_slice().ok_or("layout")?;
                let sets = sets_for(8 * rows * cols);
                let mut bufs = Vec::with_capacity(sets);
                for _ in 0..sets {
                    bufs.push((b.gpu.upload_matrix(&a)?, b.gpu.zeros_matrix(cols, rows)?));
                }
                let (a0, t0) = &mut bufs[0];
                b.gpu.transpose_into_with(a0, t0, algorithm)?;
                let check = Check::new(&t0.as_vec().to_vec()?, reference, 0.0, "cpu_exact");
                let record = base.checked(&check).with("sets", sets);
                if !check.passed() {
                    return Ok(record);
                }
                let gpu = &b.gpu;
                let stats = b.timer.measure(|i| {
                    let (a, t) = &mut bufs[i % sets];
                    Ok(gpu.transpose_into_with(a, t, algorithm)?)
                })?;
                Ok(record.timed(
                    &stats,
                    Some(crate::suite::bytes(
                        "transpose",
                        &[("rows", rows), ("cols", cols)],
                    )),
                    None,
                ))
            })?;
        }
    }
    Ok(())
}
