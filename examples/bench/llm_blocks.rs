//! The LLM building blocks of issue 37, bf16, at Llama-3-8B's shapes (hidden 4096, MLP 14336,
//! 32 heads and 8 kv heads of 128) for 1, 8 and 4096 tokens and a batch of 8 x 4096: one suite
//! per family, each timing every algorithm of the family (the tutorial and the fast rung) after a
//! check against the CPU reference, and a device-to-device copy of the same bytes (`impl` `copy`):
//!
//! * `residual_norm` (record `residual_rms_norm`): `gpu.residual_rms_norm_into_with`; minimum
//!   traffic: read `x` and `res`, write `h` and `y` (8 bytes per element), the weight once.
//! * `glu` (records `swiglu`, `geglu`): `gpu.swiglu_into_with`, `gpu.geglu_into_with` (tanh);
//!   read `rows x 2n`, write `rows x n` (6 bytes per output element).
//!
//! The peers (torch eager, torch.compile) are `bench/peers_llm_blocks.py`, with the same shapes
//! and byte models (`bench/suite.json`).

use gpukern::{DeviceMatrix, DeviceVec, GeluApprox, GluAlgorithm, Gpu, ResidualNormAlgorithm, bf16, cpu};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::memory::timed_copy;
use crate::record::{Check, Record, Res, Sink};

/// `eps` of the residual RMSNorm (Llama 3's `rms_norm_eps`).
pub const EPS: f32 = 1e-5;
/// One rounding to bf16 is at most 2^-9 relative: a right kernel's error norm stays below this.
pub const BF16_TOL: f64 = 1e-2;
/// Rows checked at most (spread over the matrix, first and last included), to keep the f64
/// reference cheap at 32768 rows.
const CHECK_ROWS: usize = 256;

/// `(tokens, hidden)` of the residual RMSNorm.
pub fn residual_shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("residual_norm", quick)
}

/// `(tokens, n)` of the GLUs (the output's width; the input is `2n`).
pub fn glu_shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("glu", quick)
}

/// The records the `residual_norm` suite writes: each algorithm and a copy per shape.
pub fn residual_planned(quick: bool) -> usize {
    residual_shapes(quick).len() * (ResidualNormAlgorithm::ALL.len() + 1)
}

/// The records the `glu` suite writes: two kernels, each algorithm and a copy per shape.
pub fn glu_planned(quick: bool) -> usize {
    glu_shapes(quick).len() * 2 * (GluAlgorithm::ALL.len() + 1)
}

/// The rows a check compares: all of them up to [`CHECK_ROWS`], else [`CHECK_ROWS`] spread
/// evenly from the first to the last.
pub fn check_rows(rows: usize) -> Vec<usize> {
    if rows <= CHECK_ROWS {
        return (0..rows).collect();
    }
    (0..CHECK_ROWS)
        .map(|i| i * (rows - 1) / (CHECK_ROWS - 1))
        .collect()
}

/// `n` random bf16 in `[lo, hi)`, and the same as f32.
fn random_bf16(n: usize, lo: f32, hi: f32) -> (Vec<bf16>, Vec<f32>) {
    let v: Vec<bf16> = random_vec(n, lo, hi).into_iter().map(bf16::from_f32).collect();
    let f = v.iter().map(|x| x.to_f32()).collect();
    (v, f)
}

/// A `rows x cols` device matrix of `v`.
fn matrix(gpu: &Gpu, v: &[bf16], (rows, cols): (usize, usize)) -> Res<DeviceMatrix<bf16>> {
    Ok(gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), v)?)?)
}

/// A `rows x cols` device matrix of NaN (an element never written fails the check).
fn poisoned(gpu: &Gpu, (rows, cols): (usize, usize)) -> Res<DeviceMatrix<bf16>> {
    matrix(gpu, &vec![bf16::NAN; rows * cols], (rows, cols))
}

/// Rows `picked` of a row-major matrix of `cols`, as f32.
fn rows_of(v: &[bf16], cols: usize, picked: &[usize]) -> Vec<f32> {
    picked
        .iter()
        .flat_map(|&r| v[r * cols..(r + 1) * cols].iter().map(|x| x.to_f32()))
        .collect()
}

/// The operands of one residual RMSNorm call: `x`, `res`, `h`, `y`.
type Set4 = (
    DeviceMatrix<bf16>,
    DeviceMatrix<bf16>,
    DeviceMatrix<bf16>,
    DeviceMatrix<bf16>,
);
/// The operands of one GLU call: `x`, `y`.
type Set2 = (DeviceMatrix<bf16>, DeviceMatrix<bf16>);

/// A device-to-device copy of `bytes` (record `kernel`, `impl` `copy`): what a copy of the
/// kernel's traffic reaches at this size.
fn copy(b: &mut Bench, sink: &mut Sink, kernel: &str, shape: &str, bytes: f64) -> Res<()> {
    let mut base = Record::new(kernel, "copy", shape).with("call", "cuMemcpyDtoDAsync");
    base.dtype = "bf16";
    // Half the bytes read, half written: a copy of `bytes / 2` moves `bytes`.
    let n = (bytes / 2.0 / 4.0).ceil() as usize;
    sink.item(base.clone(), || timed_copy(b, base, n.max(1)))
}

/// Every shape of the residual RMSNorm, every algorithm, and a copy of its bytes.
pub fn residual_norm(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in residual_shapes(b.quick) {
        let shape = format!("{rows}x{cols}");
        if !b.wants(&shape) {
            continue;
        }
        let bytes = crate::suite::bytes("residual_rms_norm", &[("rows", rows), ("cols", cols), ("e", 2)]);
        for algorithm in ResidualNormAlgorithm::ALL {
            let mut base = Record::new(
                "residual_rms_norm",
                format!("gpukern:{}", algorithm.name()),
                shape.clone(),
            )
            .with("rows", rows)
            .with("cols", cols)
            .with("eps", 1e-5)
            .with("call", "gpu.residual_rms_norm_into_with");
            base.dtype = "bf16";
            sink.item(base.clone(), || {
                let gpu = &b.gpu;
                let (x, xf) = random_bf16(rows * cols, -2.0, 2.0);
                let (r, rf) = random_bf16(rows * cols, -2.0, 2.0);
                let (w, wf) = random_bf16(cols, 0.5, 1.5);
                let dw: DeviceVec<bf16> = gpu.upload(&w)?;
                let sets = sets_for(bytes as usize);
                let mut ops = Vec::with_capacity(sets);
                for _ in 0..sets {
                    ops.push((
                        matrix(gpu, &x, (rows, cols))?,
                        matrix(gpu, &r, (rows, cols))?,
                        poisoned(gpu, (rows, cols))?,
                        poisoned(gpu, (rows, cols))?,
                    ));
                }
                let run = |ops: &mut [Set4], i: usize| -> gpukern::Result<()> {
                    let (x, r, h, y) = &mut ops[i % sets];
                    gpu.residual_rms_norm_into_with(x, r, &dw, EPS, (h, y), algorithm)
                };
                run(&mut ops, 0)?;
                let picked = check_rows(rows);
                let (hs, ys) = (&ops[0].2, &ops[0].3);
                let (h, y) = (hs.as_vec().to_vec()?, ys.as_vec().to_vec()?);
                let (mut want, mut got) = (Vec::new(), Vec::new());
                for &row in &picked {
                    let at = row * cols..(row + 1) * cols;
                    let (wh, wy) =
                        cpu::residual_rms_norm_rows(&xf[at.clone()], &rf[at], cols, &wf, EPS, |v| {
                            bf16::from_f32(v).to_f32()
                        });
                    want.extend(wh.into_iter().chain(wy));
                    got.extend(
                        rows_of(&h, cols, &[row])
                            .into_iter()
                            .chain(rows_of(&y, cols, &[row])),
                    );
                }
                let check = Check::new(&got, &want, BF16_TOL, "cpu_f64");
                let record = base
                    .checked(&check)
                    .with("sets", sets)
                    .with("checked_rows", picked.len());
                if !check.passed() {
                    return Ok(record);
                }
                let stats = b.timer.measure(|i| Ok(run(&mut ops, i)?))?;
                Ok(record.timed(&stats, Some(bytes), None))
            })?;
        }
        copy(b, sink, "residual_rms_norm", &shape, bytes)?;
    }
    Ok(())
}

/// Every shape of SwiGLU and GeGLU (tanh), every algorithm, and a copy of their bytes.
pub fn glu(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, n) in glu_shapes(b.quick) {
        let shape = format!("{rows}x{n}");
        if !b.wants(&shape) {
            continue;
        }
        for kernel in ["swiglu", "geglu"] {
            let bytes = crate::suite::bytes(kernel, &[("rows", rows), ("n", n), ("e", 2)]);
            for algorithm in GluAlgorithm::ALL {
                let call = if kernel == "swiglu" {
                    "gpu.swiglu_into_with"
                } else {
                    "gpu.geglu_into_with(GeluApprox::Tanh)"
                };
                let mut base = Record::new(kernel, format!("gpukern:{}", algorithm.name()), shape.clone())
                    .with("rows", rows)
                    .with("n", n)
                    .with("call", call);
                base.dtype = "bf16";
                sink.item(base.clone(), || {
                    let gpu = &b.gpu;
                    let (x, xf) = random_bf16(rows * 2 * n, -4.0, 4.0);
                    let sets = sets_for(bytes as usize);
                    let mut ops = Vec::with_capacity(sets);
                    for _ in 0..sets {
                        ops.push((matrix(gpu, &x, (rows, 2 * n))?, poisoned(gpu, (rows, n))?));
                    }
                    let run = |ops: &mut [Set2], i: usize| -> gpukern::Result<()> {
                        let (x, y) = &mut ops[i % sets];
                        if kernel == "swiglu" {
                            gpu.swiglu_into_with(x, y, algorithm)
                        } else {
                            gpu.geglu_into_with(x, GeluApprox::Tanh, y, algorithm)
                        }
                    };
                    run(&mut ops, 0)?;
                    let picked = check_rows(rows);
                    let y = ops[0].1.as_vec().to_vec()?;
                    let act = if kernel == "swiglu" {
                        cpu::silu64
                    } else {
                        cpu::gelu_tanh64
                    };
                    let input: Vec<f32> = picked
                        .iter()
                        .flat_map(|&r| xf[r * 2 * n..(r + 1) * 2 * n].iter().copied())
                        .collect();
                    let want = cpu::glu_rows(&input, n, act);
                    let check = Check::new(&rows_of(&y, n, &picked), &want, BF16_TOL, "cpu_f64");
                    let record = base
                        .checked(&check)
                        .with("sets", sets)
                        .with("checked_rows", picked.len());
                    if !check.passed() {
                        return Ok(record);
                    }
                    let stats = b.timer.measure(|i| Ok(run(&mut ops, i)?))?;
                    Ok(record.timed(&stats, Some(bytes), None))
                })?;
            }
            copy(b, sink, kernel, &shape, bytes)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_traffic() {
        assert_eq!(
            residual_shapes(false),
            vec![(1, 4096), (8, 4096), (4096, 4096), (32768, 4096)]
        );
        assert_eq!(
            glu_shapes(false),
            vec![(1, 14336), (8, 14336), (4096, 14336), (32768, 14336)]
        );
        let vars = [("rows", 2), ("cols", 3), ("e", 2)];
        assert_eq!(
            crate::suite::bytes("residual_rms_norm", &vars),
            (2 * 4 * 6 + 6) as f64
        );
        let vars = [("rows", 2), ("n", 3), ("e", 2)];
        assert_eq!(crate::suite::bytes("swiglu", &vars), (2 * 3 * 6) as f64);
        assert_eq!(check_rows(8).len(), 8);
        let picked = check_rows(32768);
        assert_eq!(
            (picked.len(), picked[0], picked[CHECK_ROWS - 1]),
            (CHECK_ROWS, 0, 32767)
        );
    }
}
