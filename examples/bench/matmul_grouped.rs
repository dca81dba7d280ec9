//! The grouped (mixture-of-experts) product (issue 36): `Y_e = X_e W_e^T` for `E` experts in
//! one launch, bf16, `X` the `tokens x k` packed tokens, `W` the experts' weights `E x n x k`, the
//! offsets on the device: gpukern's `gpu.matmul_grouped(x, w, offsets, y)` (the plan's choice)
//! and, with `--plans`, every [`GroupedPlan`] forced; and the dense product of the same flops
//! (`tokens x k` times a `k x n` weight, gpukern's bf16 `gpu.matmul_to`, impl `gpukern:dense`).
//! Peers: `bench/peers_matmul_grouped.py` (`torch._grouped_mm` and torch's dense matmul).
//!
//! Records: `kernel` `matmul_grouped`, keys `experts`, `tokens`, `n`, `k`, `split` (`uniform`:
//! `tokens / E` each; `skewed`: [`skewed_counts`], a Zipf split with every 16th expert empty;
//! `dense`: the dense rows). Counts: `2 tokens n k` flops (TFLOP/s = `2 sum(m_e) n k / t`);
//! minimum traffic `2 (tokens k + E n k + tokens n)` bytes (`E = 1` for the dense rows).
//!
//! Inputs: uniform in [-1, 1), rounded to bf16. The check: 256 rows spread over the tokens (so
//! over the experts) by 64 columns spread over `n` of `Y`, against the f64 product of the
//! rounded inputs on the CPU, relative error norm within three bf16 unit roundoffs (3 / 256).

use gpukern::ops::matmul::GroupedPlan;
use gpukern::{DeviceMatrix, DeviceVec, bf16};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::record::{Check, Record, Res, Sink};

/// The `kernel` of every record here.
const KERNEL: &str = "matmul_grouped";
/// Three bf16 unit roundoffs.
const TOL: f64 = 3.0 / 256.0;
/// Rows and columns of `Y` checked per shape.
const CHECKED_ROWS: usize = 256;
const CHECKED_COLUMNS: usize = 64;

/// A shape of the suite: experts, tokens, `n`, `k`, skewed (0 or 1).
type Shape = (usize, usize, usize, usize, bool);

/// The suite's shapes (`bench/suite.json`, family `matmul_grouped`).
pub fn shapes(quick: bool) -> Vec<Shape> {
    crate::suite::shapes(KERNEL, quick)
        .into_iter()
        .map(|s| (s[0], s[1], s[2], s[3], s[4] != 0))
        .collect()
}

/// What a record times: the grouped product with a plan (`None`: the default) or the dense one.
#[derive(Clone, Copy, Debug)]
enum Row {
    Grouped(Option<GroupedPlan>),
    Dense,
}

/// The rows at a shape: the default plan, every plan with `plans`, the dense product (once per
/// `(tokens, n, k)`: with the uniform split only).
fn rows_at(shape: Shape, plans: bool) -> Vec<Row> {
    let mut out = vec![Row::Grouped(None)];
    if plans {
        out.extend(GroupedPlan::ALL.map(|p| Row::Grouped(Some(p))));
    }
    if !shape.4 {
        out.push(Row::Dense);
    }
    out
}

/// Records this suite writes.
pub fn planned(quick: bool, plans: bool) -> usize {
    shapes(quick).into_iter().map(|s| rows_at(s, plans).len()).sum()
}

/// The experts' token counts of the skewed split: expert `e` weighs `4096 / (e + 1)` (a Zipf
/// law), but every 16th (`e % 16 == 15`) none; `tokens * weight / total` each (integer
/// division), the remainder to expert 0. `bench/peers_matmul_grouped.py` computes the same.
pub fn skewed_counts(experts: usize, tokens: usize) -> Vec<usize> {
    let weight = |e: usize| if e % 16 == 15 { 0 } else { 4096 / (e + 1) };
    let total: usize = (0..experts).map(weight).sum();
    let mut counts: Vec<usize> = (0..experts).map(|e| tokens * weight(e) / total.max(1)).collect();
    counts[0] += tokens - counts.iter().sum::<usize>();
    counts
}

/// The token counts of a shape's split.
fn counts((experts, tokens, _, _, skewed): Shape) -> Vec<usize> {
    if skewed {
        skewed_counts(experts, tokens)
    } else {
        (0..experts)
            .map(|e| tokens / experts + usize::from(e < tokens % experts))
            .collect()
    }
}

/// The shape's name: `E{experts}xTxNxK`.
fn shape_name((experts, tokens, n, k, _): Shape) -> String {
    format!("e{experts}x{tokens}x{n}x{k}")
}

fn split_name(shape: Shape, row: Row) -> &'static str {
    match (row, shape.4) {
        (Row::Dense, _) => "dense",
        (_, true) => "skewed",
        (_, false) => "uniform",
    }
}

/// The record of `row` at `shape`, nothing measured yet.
fn base(shape: Shape, row: Row, chosen: GroupedPlan) -> Record {
    let (experts, tokens, n, k, _) = shape;
    let imp = match row {
        Row::Grouped(None) => "gpukern".to_string(),
        Row::Grouped(Some(p)) => format!("gpukern:{}", p.name()),
        Row::Dense => "gpukern:dense".to_string(),
    };
    let plan = match row {
        Row::Grouped(p) => p.unwrap_or(chosen).name(),
        Row::Dense => "matmul_to",
    };
    let mut r = Record::new(
        KERNEL,
        imp,
        format!("{}-{}", shape_name(shape), split_name(shape, row)),
    )
    .with("experts", experts)
    .with("tokens", tokens)
    .with("n", n)
    .with("k", k)
    .with("split", split_name(shape, row))
    .with("math", "bf16")
    .with("layout", "w E x n x k")
    .with("plan", plan);
    r.dtype = "bf16";
    r
}

/// Minimum bytes and flops (`experts` 1 for the dense product).
fn rates((experts, tokens, n, k, _): Shape, row: Row) -> (Option<f64>, Option<f64>) {
    let experts = if let Row::Dense = row { 1 } else { experts };
    let vars = [("experts", experts), ("tokens", tokens), ("n", n), ("k", k)];
    (
        Some(crate::suite::bytes(KERNEL, &vars)),
        Some(crate::suite::flops(KERNEL, &vars)),
    )
}

/// One set of buffers: `X`, `W` (`(E n) x k`; for the dense rows `k x n`), offsets, `Y`.
type Bufs = (
    DeviceMatrix<bf16>,
    DeviceMatrix<bf16>,
    DeviceVec<u32>,
    DeviceMatrix<bf16>,
);

/// Inputs and the reference of the checked elements.
struct Inputs {
    x: Vec<bf16>,
    w: Vec<bf16>,
    offsets: Vec<u32>,
    /// `(row, col)` of the checked elements, and their reference (the grouped product).
    checked: Vec<(usize, usize)>,
    reference: Vec<f32>,
}

fn inputs(shape: Shape) -> Inputs {
    let (experts, tokens, n, k, _) = shape;
    let to_bf16 = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let x = to_bf16(random_vec(tokens * k, -1.0, 1.0));
    let w = to_bf16(random_vec(experts * n * k, -1.0, 1.0));
    let offsets: Vec<u32> = counts(shape)
        .iter()
        .scan(0usize, |end, &c| {
            *end += c;
            Some(*end as u32)
        })
        .collect();
    let rows: Vec<usize> = (0..tokens)
        .step_by(tokens.div_ceil(CHECKED_ROWS).max(1))
        .collect();
    let cols: Vec<usize> = (0..n).step_by(n.div_ceil(CHECKED_COLUMNS).max(1)).collect();
    let mut checked = Vec::new();
    let mut reference = Vec::new();
    for &i in &rows {
        let e = offsets
            .iter()
            .position(|&o| i < o as usize)
            .unwrap_or(experts - 1);
        for &j in &cols {
            let wr = &w[(e * n + j) * k..(e * n + j + 1) * k];
            let s: f64 = (0..k)
                .map(|l| f64::from(x[i * k + l].to_f32()) * f64::from(wr[l].to_f32()))
                .sum();
            checked.push((i, j));
            reference.push(s as f32);
        }
    }
    Inputs {
        x,
        w,
        offsets,
        checked,
        reference,
    }
}

/// The dense rows' reference: the same checked elements of `X W_0^T` (the weight of expert 0
/// transposed to `k x n`).
fn dense_reference(inputs: &Inputs, (_, _, n, k, _): Shape) -> (Vec<bf16>, Vec<f32>) {
    let mut wt = vec![bf16::ZERO; k * n];
    for j in 0..n {
        for l in 0..k {
            wt[l * n + j] = inputs.w[j * k + l];
        }
    }
    let reference = inputs
        .checked
        .iter()
        .map(|&(i, j)| {
            (0..k)
                .map(|l| f64::from(inputs.x[i * k + l].to_f32()) * f64::from(wt[l * n + j].to_f32()))
                .sum::<f64>() as f32
        })
        .collect();
    (wt, reference)
}

/// Every row at one shape.
fn rows(b: &mut Bench, sink: &mut Sink, shape: Shape) -> Res<()> {
    let (experts, tokens, n, k, _) = shape;
    let chosen = GroupedPlan::choose(tokens, n, b.gpu.multiprocessors()?);
    let rows = rows_at(shape, b.plans);
    if sink.expired() {
        for row in rows {
            sink.item(base(shape, row, chosen), || Err("time budget spent".into()))?;
        }
        return Ok(());
    }
    sink.note(&format!(
        "{KERNEL} {}: preparing inputs and the reference",
        shape_name(shape)
    ));
    let inputs = inputs(shape);
    let gpu = b.gpu.clone();
    for row in rows {
        let (bytes, flops) = rates(shape, row);
        let sets = sets_for(bytes.unwrap_or(0.0) as usize);
        sink.item(base(shape, row, chosen), || {
            let record = base(shape, row, chosen).with("sets", sets);
            let (w, wshape, reference) = match row {
                Row::Grouped(_) => (inputs.w.clone(), (experts * n, k), inputs.reference.clone()),
                Row::Dense => {
                    let (wt, reference) = dense_reference(&inputs, shape);
                    (wt, (k, n), reference)
                }
            };
            let mut bufs: Vec<Bufs> = Vec::new();
            for _ in 0..sets {
                bufs.push((
                    gpu.upload_matrix(&ArrayView2::from_shape((tokens, k), &inputs.x)?)?,
                    gpu.upload_matrix(&ArrayView2::from_shape(wshape, &w)?)?,
                    gpu.upload(&inputs.offsets)?,
                    gpu.upload_matrix(&ArrayView2::from_shape(
                        (tokens, n),
                        &vec![bf16::NAN; tokens * n],
                    )?)?,
                ));
            }
            let call = |(x, w, o, y): &mut Bufs| -> Res<()> {
                match row {
                    Row::Grouped(None) => gpu.matmul_grouped(x, w, o, y)?,
                    Row::Grouped(Some(p)) => gpu.matmul_grouped_with(x, w, o, y, p)?,
                    Row::Dense => gpu.matmul_to(x, w, y)?,
                }
                Ok(())
            };
            call(&mut bufs[0])?;
            let y = bufs[0].3.as_vec().to_vec()?;
            let out: Vec<f32> = inputs
                .checked
                .iter()
                .map(|&(i, j)| y[i * n + j].to_f32())
                .collect();
            let check = Check::new(&out, &reference, TOL, "cpu_f64_elements");
            let record = record.checked(&check).with("checked_elements", out.len());
            if !check.passed() {
                return Ok(record);
            }
            let stats = b.timer.measure(|i| call(&mut bufs[i % sets]))?;
            Ok(record.timed(&stats, bytes, flops))
        })?;
    }
    Ok(())
}

/// Every shape of the suite.
pub fn matmul_grouped(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for shape in shapes(b.quick) {
        if !b.wants(&shape_name(shape)) {
            continue;
        }
        rows(b, sink, shape)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The skewed split adds up, leaves every 16th expert empty, and falls with the expert.
    #[test]
    fn skewed_split() {
        let c = super::skewed_counts(128, 65_536);
        assert_eq!(c.iter().sum::<usize>(), 65_536);
        assert!(c.iter().skip(15).step_by(16).all(|&x| x == 0));
        assert!(c[0] > c[1] && c[1] > c[2]);
    }
}
