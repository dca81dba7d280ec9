//! The LLM building blocks of issue 37, bf16, at Llama-3-8B's shapes (hidden 4096, MLP 14336,
//! 32 heads and 8 kv heads of 128) for 1, 8 and 4096 tokens and a batch of 8 x 4096: one suite
//! per family, each timing every algorithm of the family (the tutorial and the fast rung) after a
//! check against the CPU reference, and a device-to-device copy of the same bytes (`impl` `copy`):
//!
//! * `residual_norm` (record `residual_rms_norm`): `gpu.residual_rms_norm_into_with`; minimum
//!   traffic: read `x` and `res`, write `h` and `y` (8 bytes per element), the weight once.
//! * `glu` (records `swiglu`, `geglu`): `gpu.swiglu_into_with`, `gpu.geglu_into_with` (tanh);
//!   read `rows x 2n`, write `rows x n` (6 bytes per output element).
//! * `rotary` (record `rotary`): `gpu.rotary_with`, half-split, i64 positions, theta 500000, in
//!   place; read and write `q` and `k` once (4 bytes per element), the positions once.
//! * `embedding` (record `embedding`): `gpu.embedding_into_with`, i64 ids, a 32000 x 4096 table;
//!   read the gathered rows and write them (4 bytes per element), the ids once.
//!
//! The peers (torch eager, torch.compile) are `bench/peers_llm_blocks.py`, with the same shapes
//! and byte models (`bench/suite.json`).

use gpukern::{
    DeviceMatrix, DeviceVec, EmbeddingAlgorithm, GeluApprox, GluAlgorithm, Gpu, ResidualNormAlgorithm,
    RotaryAlgorithm, RotaryLayout, bf16, cpu,
};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::memory::copy_of_traffic as copy;
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

/// `(tokens, heads, kv_heads, head_dim)` of the rotary embedding.
pub fn rotary_shapes(quick: bool) -> Vec<Vec<usize>> {
    crate::suite::shapes("rotary", quick)
}

/// `(tokens, vocab, hidden)` of the embedding gather.
pub fn embedding_shapes(quick: bool) -> Vec<(usize, usize, usize)> {
    crate::suite::shapes3("embedding", quick)
}

/// The records the `rotary` suite writes: each algorithm and a copy per shape.
pub fn rotary_planned(quick: bool) -> usize {
    rotary_shapes(quick).len() * (RotaryAlgorithm::ALL.len() + 1)
}

/// The records the `embedding` suite writes: each algorithm and a copy per shape.
pub fn embedding_planned(quick: bool) -> usize {
    embedding_shapes(quick).len() * (EmbeddingAlgorithm::ALL.len() + 1)
}

/// Llama 3's rotary base.
pub const THETA: f64 = 500_000.0;

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

/// Every shape of the rotary embedding (half-split, i64 positions below 8192), every algorithm,
/// and a copy of its bytes.
pub fn rotary(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for dims in rotary_shapes(b.quick) {
        let [tokens, heads, kv, d] = dims[..] else {
            return Err("bench/suite.json: rotary shapes are tokens, heads, kv_heads, head_dim".into());
        };
        let shape = format!("{tokens}x{heads}x{kv}x{d}");
        if !b.wants(&shape) {
            continue;
        }
        let vars = [
            ("tokens", tokens),
            ("heads", heads),
            ("kv_heads", kv),
            ("head_dim", d),
        ];
        let bytes = crate::suite::bytes("rotary", &vars);
        for algorithm in RotaryAlgorithm::ALL {
            let mut base = Record::new("rotary", format!("gpukern:{}", algorithm.name()), shape.clone())
                .with("tokens", tokens)
                .with("heads", heads)
                .with("kv_heads", kv)
                .with("head_dim", d)
                .with("theta", THETA)
                .with("layout", "half-split")
                .with("call", "gpu.rotary_with (in place)");
            base.dtype = "bf16";
            sink.item(base.clone(), || {
                let gpu = &b.gpu;
                let (q, qf) = random_bf16(tokens * heads * d, -1.0, 1.0);
                let (k, kf) = random_bf16(tokens * kv * d, -1.0, 1.0);
                let wide: Vec<i64> = random_vec(tokens, 0.0, 8192.0)
                    .into_iter()
                    .map(|p| p as i64)
                    .collect();
                let positions = gpu.upload_positions(&wide)?;
                let freqs = gpu.rotary_frequencies(d, THETA)?;
                let sets = sets_for(bytes as usize);
                let mut ops = Vec::with_capacity(sets);
                for _ in 0..sets {
                    ops.push((
                        matrix(gpu, &q, (tokens, heads * d))?,
                        matrix(gpu, &k, (tokens, kv * d))?,
                    ));
                }
                let run = |ops: &mut [Set2], i: usize| -> gpukern::Result<()> {
                    let (q, k) = &mut ops[i % sets];
                    gpu.rotary_with(q, k, &positions, &freqs, RotaryLayout::HalfSplit, algorithm)
                };
                run(&mut ops, 0)?;
                let picked = check_rows(tokens);
                let inv_freq = gpukern::ops::rotary::rotary_inv_freq(d, THETA);
                let (gq, gk) = (ops[0].0.as_vec().to_vec()?, ops[0].1.as_vec().to_vec()?);
                let (mut want, mut got) = (Vec::new(), Vec::new());
                for &t in &picked {
                    let (wq, wk) = (
                        &qf[t * heads * d..(t + 1) * heads * d],
                        &kf[t * kv * d..(t + 1) * kv * d],
                    );
                    want.extend(cpu::rotary_rows(wq, d, &wide[t..t + 1], &inv_freq, true));
                    want.extend(cpu::rotary_rows(wk, d, &wide[t..t + 1], &inv_freq, true));
                    got.extend(rows_of(&gq, heads * d, &[t]));
                    got.extend(rows_of(&gk, kv * d, &[t]));
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
        copy(b, sink, "rotary", &shape, bytes)?;
    }
    Ok(())
}

/// Every shape of the embedding gather (i64 ids), every algorithm, and a copy of its bytes.
pub fn embedding(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (tokens, vocab, hidden) in embedding_shapes(b.quick) {
        let shape = format!("{tokens}x{vocab}x{hidden}");
        if !b.wants(&shape) {
            continue;
        }
        let bytes = crate::suite::bytes(
            "embedding",
            &[("tokens", tokens), ("vocab", vocab), ("hidden", hidden)],
        );
        for algorithm in EmbeddingAlgorithm::ALL {
            let mut base = Record::new(
                "embedding",
                format!("gpukern:{}", algorithm.name()),
                shape.clone(),
            )
            .with("tokens", tokens)
            .with("vocab", vocab)
            .with("hidden", hidden)
            .with("call", "gpu.embedding_into_with");
            base.dtype = "bf16";
            sink.item(base.clone(), || {
                let gpu = &b.gpu;
                let (table, _) = random_bf16(vocab * hidden, -1.0, 1.0);
                let dt = matrix(gpu, &table, (vocab, hidden))?;
                let wide: Vec<i64> = random_vec(tokens, 0.0, vocab as f32)
                    .into_iter()
                    .map(|p| (p as i64).min(vocab as i64 - 1))
                    .collect();
                let ids = gpu.upload_token_ids(&wide, vocab)?;
                // The table is shared (as a model's is); the outputs rotate.
                let sets = sets_for(bytes as usize);
                let mut ys = Vec::with_capacity(sets);
                for _ in 0..sets {
                    ys.push(poisoned(gpu, (tokens, hidden))?);
                }
                let run = |ys: &mut [DeviceMatrix<bf16>], i: usize| -> gpukern::Result<()> {
                    gpu.embedding_into_with(&dt, &ids, &mut ys[i % sets], algorithm)
                };
                run(&mut ys, 0)?;
                let picked = check_rows(tokens);
                let y = ys[0].as_vec().to_vec()?;
                let picked_ids: Vec<i64> = picked.iter().map(|&t| wide[t]).collect();
                let want: Vec<f32> = cpu::embedding_rows(&table, hidden, &picked_ids)
                    .iter()
                    .map(|v| v.to_f32())
                    .collect();
                let check = Check::new(&rows_of(&y, hidden, &picked), &want, 0.0, "cpu_f64");
                let record = base
                    .checked(&check)
                    .with("sets", sets)
                    .with("checked_rows", picked.len());
                if !check.passed() {
                    return Ok(record);
                }
                let stats = b.timer.measure(|i| Ok(run(&mut ys, i)?))?;
                Ok(record.timed(&stats, Some(bytes), None))
            })?;
        }
        copy(b, sink, "embedding", &shape, bytes)?;
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
            vec![
                (1, 14336),
                (8, 14336),
                (16, 14336),
                (32, 14336),
                (64, 14336),
                (128, 14336),
                (4096, 14336),
                (32768, 14336)
            ]
        );
        let vars = [("rows", 2), ("cols", 3), ("e", 2)];
        assert_eq!(
            crate::suite::bytes("residual_rms_norm", &vars),
            (2 * 4 * 6 + 6) as f64
        );
        let vars = [("rows", 2), ("n", 3), ("e", 2)];
        assert_eq!(crate::suite::bytes("swiglu", &vars), (2 * 3 * 6) as f64);
        assert_eq!(rotary_shapes(false)[7], vec![4096, 32, 8, 128]);
        assert_eq!(embedding_shapes(false)[0], (1, 32000, 4096));
        let vars = [("tokens", 2), ("heads", 3), ("kv_heads", 1), ("head_dim", 4)];
        assert_eq!(
            crate::suite::bytes("rotary", &vars),
            (4 * 2 * 4 * 4 + 8 * 2) as f64
        );
        let vars = [("tokens", 2), ("vocab", 7), ("hidden", 4)];
        assert_eq!(
            crate::suite::bytes("embedding", &vars),
            (4 * 2 * 4 + 8 * 2) as f64
        );
        assert_eq!(check_rows(8).len(), 8);
        let picked = check_rows(32768);
        assert_eq!(
            (picked.len(), picked[0], picked[CHECK_ROWS - 1]),
            (CHECK_ROWS, 0, 32767)
        );
    }
}
