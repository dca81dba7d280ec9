//! Reductions of a vector: `gpu.sum_into_with(x, out, algorithm)` for every algorithm and
//! `gpu.argmax_into_with(x, index, algorithm)` for every first-pass kernel, device-resident, the result left on the device.
//!
//! Minimum traffic: 4 bytes per element (read x once; the partials are a few KB).

use gpukern::{ArgmaxAlgorithm, ReduceAlgorithm};

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};

/// Vector lengths of the reductions.
pub fn sizes(quick: bool) -> Vec<usize> {
    crate::suite::sizes("reduce", quick)
}

/// `gpu.sum_into_with(x, out, algorithm)`, every algorithm. Inputs in [0, 1), so that the sum is
/// far from 0 and its relative error meaningful.
pub fn sum(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for n in sizes(b.quick) {
        for algorithm in ReduceAlgorithm::ALL {
            let base =
                Record::new("sum", format!("gpukern:{}", algorithm.name()), n.to_string()).with("n", n);
            sink.item(base.clone(), || {
                let x = random_vec(n, 0.0, 1.0);
                let reference = gpukern::cpu::sum(&x);
                let sets = sets_for(4 * n);
                let mut bufs = Vec::with_capacity(sets);
                for _ in 0..sets {
                    bufs.push((b.gpu.upload(&x)?, b.gpu.upload(&[f32::NAN])?));
                }
                let (x0, out0) = &mut bufs[0];
                b.gpu.sum_into_with(x0, out0, algorithm)?;
                let check = Check::new(&out0.to_vec()?, &[reference], F32_TOL, "cpu_f64");
                let record = base.checked(&check).with("sets", sets);
                if !check.passed() {
                    return Ok(record);
                }
                let gpu = &b.gpu;
                let stats = b.timer.measure(|i| {
                    let (x, out) = &mut bufs[i % sets];
                    Ok(gpu.sum_into_with(x, out, algorithm)?)
                })?;
                Ok(record.timed(&stats, Some(crate::suite::bytes("sum", &[("n", n)])), None))
            })?;
        }
    }
    Ok(())
}

/// `gpu.argmax_into_with(x, index, algorithm)`, every first-pass kernel; the index must equal
/// `cpu::argmax`'s exactly.
pub fn argmax(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for n in sizes(b.quick) {
        for algorithm in ArgmaxAlgorithm::ALL {
            let base =
                Record::new("argmax", format!("gpukern:{}", algorithm.name()), n.to_string()).with("n", n);
            sink.item(base.clone(), || {
                let x = random_vec(n, -1.0, 1.0);
                let want = gpukern::cpu::argmax(&x).ok_or("empty input")?;
                let sets = sets_for(4 * n);
                let mut bufs = Vec::with_capacity(sets);
                for _ in 0..sets {
                    bufs.push((b.gpu.upload(&x)?, b.gpu.zeros_of::<u32>(1)?));
                }
                let (x0, out0) = &mut bufs[0];
                b.gpu.argmax_into_with(x0, out0, algorithm)?;
                let got = out0.to_vec()?.first().copied().map(|i| i as usize);
                let check = Check {
                    rel_err: if got == Some(want) { 0.0 } else { f64::INFINITY },
                    tol: 0.0,
                    reference: "cpu_exact",
                };
                let record = base.checked(&check).with("sets", sets);
                if !check.passed() {
                    return Ok(record);
                }
                let gpu = &b.gpu;
                let stats = b.timer.measure(|i| {
                    let (x, out) = &mut bufs[i % sets];
                    Ok(gpu.argmax_into_with(x, out, algorithm)?)
                })?;
                Ok(record.timed(&stats, Some(crate::suite::bytes("argmax", &[("n", n)])), None))
            })?;
        }
    }
    Ok(())
}

/// Shapes of the axis reductions, both axes: 8192 x 8192 (256 MiB read), and matrices of the
/// same size with few rows or few columns: 16 rows (a thread per column; along the rows, the
/// rows cut into spans), 16 columns (a thread per row; along the columns, the rows cut into
/// spans), 64 columns (a warp per 4 rows).
pub fn axis_shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("axis", quick)
}

/// Records of [`axis`]: three reductions, two axes, per shape.
pub const AXIS_RECORDS_PER_SHAPE: usize = 6;

/// `gpu.sum_axis`, `max_axis` and `argmax_axis` along `Axis(1)` (`gpukern:rows`, a warp per
/// row) and `Axis(0)` (`gpukern:cols`), device-resident, each call allocating its output as a
/// user's call does. The sums within the f32 tolerance of `cpu::sum_axis`, the maxima and indices
/// exact. Minimum traffic: 4 bytes per element read, 4 per output written.
pub fn axis(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in axis_shapes(b.quick) {
        let shape = format!("{rows}x{cols}");
        if !b.wants(&shape) {
            continue;
        }
        let m = ndarray::Array2::from_shape_vec((rows, cols), random_vec(rows * cols, -1.0, 1.0))?;
        for kernel in ["sum_axis", "max_axis", "argmax_axis"] {
            for (axis, side) in [(ndarray::Axis(1), "rows"), (ndarray::Axis(0), "cols")] {
                let outputs = if side == "rows" { rows } else { cols };
                let base = Record::new(kernel, format!("gpukern:{side}"), shape.clone());
                sink.item(base.clone(), || {
                    let d = b.gpu.upload_matrix(&m)?;
                    let ok = match kernel {
                        "sum_axis" => {
                            let got = b.gpu.sum_axis(&d, axis)?.to_vec()?;
                            let want = gpukern::cpu::sum_axis(&m, axis).to_vec();
                            Check::new(&got, &want, F32_TOL, "cpu_f64")
                        }
                        "max_axis" => {
                            let got = b.gpu.max_axis(&d, axis)?.to_vec()?;
                            let want = gpukern::cpu::max_axis(&m, axis).ok_or("empty axis")?.to_vec();
                            exact(got == want)
                        }
                        _ => {
                            let got: Vec<usize> = b
                                .gpu
                                .argmax_axis(&d, axis)?
                                .to_vec()?
                                .into_iter()
                                .map(|i| i as usize)
                                .collect();
                            let want = gpukern::cpu::argmax_axis(&m, axis).ok_or("empty axis")?.to_vec();
                            exact(got == want)
                        }
                    };
                    let record = base.checked(&ok);
                    if !ok.passed() {
                        return Ok(record);
                    }
                    let gpu = &b.gpu;
                    let stats = b.timer.measure(|_| {
                        match kernel {
                            "sum_axis" => drop(gpu.sum_axis(&d, axis)?),
                            "max_axis" => drop(gpu.max_axis(&d, axis)?),
                            _ => drop(gpu.argmax_axis(&d, axis)?),
                        }
                        Ok(())
                    })?;
                    let vars = [("rows", rows), ("cols", cols), ("outputs", outputs)];
                    Ok(record.timed(&stats, Some(crate::suite::bytes(kernel, &vars)), None))
                })?;
            }
        }
    }
    Ok(())
}

/// An exact comparison as a [`Check`].
fn exact(equal: bool) -> Check {
    Check {
        rel_err: if equal { 0.0 } else { f64::INFINITY },
        tol: 0.0,
        reference: "cpu_exact",
    }
}
