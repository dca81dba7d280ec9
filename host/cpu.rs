//! CPU reference implementations of every kernel, accumulating in f64: what the tests and the
//! benchmarks compare the GPU against.

// Items are compiled per family feature: with only some families, the imports the others' items
// use have none (the full `library` build still checks them).
#![cfg_attr(not(feature = "library"), allow(unused_imports))]

use ndarray::{Array2, ArrayBase, Data, Ix2};

use crate::error::Result;

#[cfg(feature = "matmul")]
mod matmul_grouped;
#[cfg(feature = "sample")]
mod sample;
#[cfg(feature = "matmul")]
pub use matmul_grouped::{grouped_expert_rows, matmul_grouped_f64};
#[cfg(feature = "sample")]
pub use sample::{SampleRejection, sample_rows, sample_rows_rejected};

#[cfg(feature = "add")]
/// `a[i] + b[i]`.
///
/// Errors: [`crate::Error::ShapeMismatch`] if the lengths differ.
pub fn add(a: &[f32], b: &[f32]) -> Result<Vec<f32>> {
    crate::error::same_shape(
        "add",
        &[a.len()],
        &[b.len()],
        "operands must have the same length",
    )?;
    Ok(a.iter().zip(b).map(|(x, y)| x + y).collect())
}

#[cfg(feature = "add")]
/// `x[i] + 1`.
pub fn increment_by_one(x: &[f32]) -> Vec<f32> {
    x.iter().map(|v| v + 1.0).collect()
}

#[cfg(feature = "matmul")]
/// `A * B` with f64 accumulation, rounded to f32 once at the end.
///
/// Errors: [`crate::Error::ShapeMismatch`] unless `A`'s columns equal `B`'s rows.
pub fn matmul<S1, S2>(a: &ArrayBase<S1, Ix2>, b: &ArrayBase<S2, Ix2>) -> Result<Array2<f32>>
where
    S1: Data<Elem = f32>,
    S2: Data<Elem = f32>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    // The product is held in f64 (two f32 slots per element) before it is rounded: refuse a
    // result that could not exist on the host instead of letting the allocation panic.
    crate::buffer::checked_len("cpu::matmul", &[a.nrows(), b.ncols(), 2])?;
    let a64 = a.mapv(f64::from);
    let b64 = b.mapv(f64::from);
    Ok(a64.dot(&b64).mapv(|v| v as f32))
}

#[cfg(feature = "softmax")]
/// Softmax of each row of `x` scaled by the inverse temperature `t`, in f64.
pub fn softmax_rows<S: Data<Elem = f32>>(x: &ArrayBase<S, Ix2>, t: f32) -> Array2<f32> {
    let mut y = Array2::<f32>::zeros(x.raw_dim());
    for (row, mut out) in x.rows().into_iter().zip(y.rows_mut()) {
        let row: Vec<f32> = row.to_vec();
        for (o, v) in out.iter_mut().zip(softmax(&row, t)) {
            *o = v;
        }
    }
    y
}

#[cfg(feature = "softmax")]
/// Softmax of a vector scaled by the inverse temperature `t`, in f64, with the same rules at
/// the edges as the kernel (see [`crate::Gpu::softmax`]): entries equal to the reference value
/// (the max for `t >= 0`, the min for `t < 0`) get exponent 0, `t = 0` is uniform, a NaN makes
/// the whole vector NaN.
pub fn softmax(x: &[f32], t: f32) -> Vec<f32> {
    let m = if t >= 0.0 {
        x.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, nan_max)
    } else {
        x.iter().map(|&v| f64::from(v)).fold(f64::INFINITY, nan_min)
    };
    let t = f64::from(t);
    let exponent = |v: f64| {
        if m.is_nan() {
            f64::NAN
        } else if v == m || t == 0.0 {
            0.0
        } else {
            t * (v - m)
        }
    };
    let e: Vec<f64> = x.iter().map(|&v| exponent(f64::from(v)).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|v| (v / sum) as f32).collect()
}

/// `min`, NaN if either is NaN.
fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// `max`, NaN if either is NaN.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `||out - reference|| / ||reference||` in f64 (the relative error norm of BENCHMARKING.md);
/// infinite if the lengths differ, NaN if `out` holds a NaN; with an all-zero reference, the
/// absolute norm `||out||`.
pub fn rel_error(out: &[f32], reference: &[f32]) -> f64 {
    if out.len() != reference.len() {
        return f64::INFINITY;
    }
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&o, &r) in out.iter().zip(reference) {
        let d = f64::from(o) - f64::from(r);
        diff += d * d;
        norm += f64::from(r) * f64::from(r);
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

#[cfg(feature = "reduce")]
/// The sum of `x` in f64, rounded to f32 once (`0.0` if empty).
pub fn sum(x: &[f32]) -> f32 {
    sum_f64(x) as f32
}

#[cfg(feature = "reduce")]
/// The sum of `x` in f64 (the exact reference the f32 sums are measured against).
pub fn sum_f64(x: &[f32]) -> f64 {
    x.iter().map(|&v| f64::from(v)).sum()
}

#[cfg(feature = "reduce")]
/// The largest element of `x`, NaN if one is NaN; `None` if `x` is empty.
pub fn max(x: &[f32]) -> Option<f32> {
    let first = *x.first()?;
    Some(x.iter().fold(first, |m, &v| {
        if m.is_nan() || v.is_nan() {
            f32::NAN
        } else if v > m {
            v
        } else {
            m
        }
    }))
}

#[cfg(feature = "reduce")]
/// The index of the first NaN of `x` if there is one, else of the first occurrence of its
/// largest value (as `torch.argmax`); `None` if `x` is empty.
pub fn argmax(x: &[f32]) -> Option<usize> {
    if let Some(i) = x.iter().position(|v| v.is_nan()) {
        return Some(i);
    }
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in x.iter().enumerate() {
        match best {
            Some((_, b)) if v <= b => {}
            _ => best = Some((i, v)),
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(feature = "reduce")]
/// Sums of the rows (`axis = 1`) or columns (`axis = 0`) of `m` in f64, rounded once.
pub fn sum_axis<S: Data<Elem = f32>>(m: &ArrayBase<S, Ix2>, axis: ndarray::Axis) -> ndarray::Array1<f32> {
    m.mapv(f64::from).sum_axis(axis).mapv(|v| v as f32)
}

#[cfg(feature = "reduce")]
/// The largest entry of each row (`axis = 1`) or column (`axis = 0`) of `m`, NaN where the lane
/// holds one ([`max`]); `None` if the axis is empty and there is an output.
pub fn max_axis<S: Data<Elem = f32>>(
    m: &ArrayBase<S, Ix2>,
    axis: ndarray::Axis,
) -> Option<ndarray::Array1<f32>> {
    m.lanes(axis).into_iter().map(|l| max(&l.to_vec())).collect()
}

#[cfg(feature = "reduce")]
/// The index along the lane of each row's (`axis = 1`) or column's (`axis = 0`) largest entry,
/// by [`argmax`]'s rule; `None` if the axis is empty and there is an output.
pub fn argmax_axis<S: Data<Elem = f32>>(
    m: &ArrayBase<S, Ix2>,
    axis: ndarray::Axis,
) -> Option<ndarray::Array1<usize>> {
    m.lanes(axis).into_iter().map(|l| argmax(&l.to_vec())).collect()
}

#[cfg(feature = "transpose")]
/// `m^T` in standard (row-major) layout.
pub fn transpose<S: Data<Elem = f32>>(m: &ArrayBase<S, Ix2>) -> Array2<f32> {
    m.t().as_standard_layout().into_owned()
}

#[cfg(feature = "matmul")]
/// `A * B` of any element type widened exactly to f64 (f32, [`half::bf16`], [`half::f16`]),
/// in f64, unrounded: the reference of the half-precision products, whose errors are checked
/// against this with bounds of the size of the f32 sums' and the final rounding's.
///
/// Errors: [`crate::Error::ShapeMismatch`] unless `A`'s columns equal `B`'s rows.
pub fn matmul_f64<T, S1, S2>(a: &ArrayBase<S1, Ix2>, b: &ArrayBase<S2, Ix2>) -> Result<Array2<f64>>
where
    T: Copy + Into<f64>,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
{
    crate::ops::matmul::check_inner(a.dim(), b.dim())?;
    crate::buffer::checked_len("cpu::matmul_f64", &[a.nrows(), b.ncols(), 2])?;
    let a64 = a.mapv(Into::into);
    let b64 = b.mapv(Into::into);
    Ok(a64.dot(&b64))
}

#[cfg(feature = "norm")]
/// RMSNorm of each row of the row-major `rows x cols` matrix `x` with weight `w`, in f64:
/// `x / sqrt(mean(x^2) + eps) * w` (the kernels' rules at the edges follow from the formula).
pub fn rms_norm_rows(x: &[f32], cols: usize, w: &[f32], eps: f32) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let ms = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / cols as f64;
        let inv = 1.0 / (ms + f64::from(eps)).sqrt();
        y.extend(
            row.iter()
                .zip(w)
                .map(|(&v, &g)| (f64::from(v) * inv * f64::from(g)) as f32),
        );
    }
    y
}

#[cfg(feature = "norm")]
/// LayerNorm of each row of the row-major `rows x cols` matrix `x` with weight `w` and bias
/// `b`, in f64 with a two-pass variance: `(x - mean) / sqrt(var + eps) * w + b`, the biased
/// variance (as PyTorch). A row with an infinite entry is NaN (`inf - inf`).
pub fn layer_norm_rows(x: &[f32], cols: usize, w: &[f32], b: &[f32], eps: f32) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let n = cols as f64;
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = row.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / n;
        let rstd = 1.0 / (var + f64::from(eps)).sqrt();
        y.extend(
            row.iter().zip(w.iter().zip(b)).map(|(&v, (&g, &beta))| {
                ((f64::from(v) - mean) * rstd * f64::from(g) + f64::from(beta)) as f32
            }),
        );
    }
    y
}

#[cfg(feature = "norm")]
/// The residual add fused into RMSNorm over row-major rows of `cols`: `h = round(x + res)` (the
/// sum in f32, then `round`, the element type's rounding: the identity for f32) and
/// `y = rms_norm_rows(h)` in f64, the statistic over the rounded `h` as the kernels take it.
/// Returns `(h, y)`.
pub fn residual_rms_norm_rows(
    x: &[f32],
    res: &[f32],
    cols: usize,
    w: &[f32],
    eps: f32,
    round: impl Fn(f32) -> f32,
) -> (Vec<f32>, Vec<f32>) {
    let h: Vec<f32> = x.iter().zip(res).map(|(&a, &b)| round(a + b)).collect();
    let y = rms_norm_rows(&h, cols, w, eps);
    (h, y)
}

#[cfg(feature = "cross_entropy")]
/// The cross-entropy loss of each row of the row-major `rows x cols` logits `x` with class
/// `labels` (each in `0..cols`), in f64: `logsumexp(x[r]) - x[r][labels[r]]`, with
/// `logsumexp = m + ln(sum exp(x - m))` for the row's max `m` (NaN if the row holds a NaN).
pub fn cross_entropy_rows(x: &[f32], cols: usize, labels: &[i64]) -> Vec<f32> {
    x.chunks(cols.max(1))
        .zip(labels)
        .map(|(row, &label)| {
            let m = row.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, nan_max);
            let s: f64 = row
                .iter()
                .map(|&v| {
                    if f64::from(v) == m {
                        1.0
                    } else {
                        (f64::from(v) - m).exp()
                    }
                })
                .sum();
            let picked = f64::from(row[label as usize]);
            ((m - picked) + s.ln()) as f32
        })
        .collect()
}

#[cfg(feature = "glu")]
/// `erf(x)` in f64: its Taylor series below 2.5 (at most 3 of 16 digits lost to cancellation),
/// the continued fraction of `erfc` above; NaN for NaN.
pub fn erf64(x: f64) -> f64 {
    let a = x.abs();
    let v = if a < 2.5 {
        let (mut term, mut sum, mut n) = (a, a, 0.0);
        while term.abs() > 1e-18 * sum.abs() {
            n += 1.0;
            term *= -a * a / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else if a.is_finite() {
        // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))).
        let mut f = a;
        for k in (1..200).rev() {
            f = a + (k as f64 / 2.0) / f;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / f
    } else {
        1.0
    };
    if x.is_nan() { x } else { v.copysign(x) }
}

#[cfg(feature = "glu")]
/// A GLU over row-major rows of `2 n` (gate first, then up), in f64: `act(gate) * up`, each
/// output rounded to f32 once. `act` is the activation in f64 ([`silu64`], [`gelu_tanh64`],
/// [`gelu_erf64`]).
pub fn glu_rows(x: &[f32], n: usize, act: impl Fn(f64) -> f64) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len() / 2);
    for row in x.chunks(2 * n.max(1)) {
        let (gate, up) = row.split_at(n);
        y.extend(
            gate.iter()
                .zip(up)
                .map(|(&g, &u)| (act(f64::from(g)) * f64::from(u)) as f32),
        );
    }
    y
}

#[cfg(feature = "glu")]
/// `silu(g) = g / (1 + e^-g)` in f64.
pub fn silu64(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

#[cfg(feature = "glu")]
/// The tanh GELU in f64: `g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))`.
pub fn gelu_tanh64(g: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * g * (1.0 + (k * (g + 0.044715 * g * g * g)).tanh())
}

#[cfg(feature = "glu")]
/// The erf GELU in f64: `g/2 (1 + erf(g / sqrt 2))`.
pub fn gelu_erf64(g: f64) -> f64 {
    0.5 * g * (1.0 + erf64(g / std::f64::consts::SQRT_2))
}

#[cfg(feature = "rotary")]
/// Rotary embedding of the row-major `tokens x heads * head_dim` values `x` (as f32), in f64:
/// pair `i` of each head of token `t` (half-split: `(x[i], x[i + head_dim/2])`, else `(x[2i],
/// x[2i + 1])`) rotated by the angle `f32(positions[t]) * inv_freq[i]`, rounded to f32 as the
/// kernels round it (the angle of HF's f32 `freqs`), then cos and sin in f64. Returns the rotated
/// values, each rounded to f32 once.
pub fn rotary_rows(
    x: &[f32],
    head_dim: usize,
    positions: &[i64],
    inv_freq: &[f32],
    half_split: bool,
) -> Vec<f32> {
    let mut y = x.to_vec();
    let per_token = if positions.is_empty() {
        0
    } else {
        x.len() / positions.len()
    };
    let half = head_dim / 2;
    for (t, &pos) in positions.iter().enumerate() {
        for head in y[t * per_token..(t + 1) * per_token].chunks_mut(head_dim.max(1)) {
            for (i, &f) in inv_freq.iter().enumerate().take(half) {
                let angle = f64::from(pos as f32 * f);
                let (s, c) = angle.sin_cos();
                let (a, b) = if half_split {
                    (i, i + half)
                } else {
                    (2 * i, 2 * i + 1)
                };
                let (x1, x2) = (f64::from(head[a]), f64::from(head[b]));
                head[a] = (x1 * c - x2 * s) as f32;
                head[b] = (x2 * c + x1 * s) as f32;
            }
        }
    }
    y
}

#[cfg(feature = "embedding")]
/// The rows of the row-major `vocab x hidden` table that `ids` name, zeros for an id outside
/// `0..vocab` (the kernels' guard).
pub fn embedding_rows<T: Copy + Default>(table: &[T], hidden: usize, ids: &[i64]) -> Vec<T> {
    let vocab = table.len().checked_div(hidden).unwrap_or(0);
    let mut y = Vec::with_capacity(ids.len() * hidden);
    for &id in ids {
        match usize::try_from(id).ok().filter(|&r| r < vocab) {
            Some(r) => y.extend_from_slice(&table[r * hidden..(r + 1) * hidden]),
            None => y.extend(std::iter::repeat_n(T::default(), hidden)),
        }
    }
    y
}

#[cfg(feature = "attention")]
/// Attention forward in f64 on the given (already rounded) inputs `[batch, seq, heads,
/// head_dim]`: the output `[batch, q_len, heads, head_dim]` and the row log-sum-exp `[batch,
/// heads, q_len]`, each rounded once to f32. The same rules as [`crate::Gpu::attention`]
/// (causal bottom-right; a row that sees no key gives 0 and `-inf`; the scale
/// `1 / sqrt(head_dim)` unless given), and the same masks ([`crate::ops::attention::AttentionMask`], written
/// out here in f64, not taken from the kernels; a custom mask through the reference it carries,
/// [`crate::CustomMask::reference`]).
///
/// Errors: those of [`crate::Gpu::attention`] on the shapes and the scale; a custom mask without
/// its reference.
#[allow(clippy::type_complexity)]
pub fn attention<T, S1, S2, S3>(
    q: &ArrayBase<S1, ndarray::Ix4>,
    k: &ArrayBase<S2, ndarray::Ix4>,
    v: &ArrayBase<S3, ndarray::Ix4>,
    options: &crate::ops::attention::AttentionOptions,
) -> Result<(ndarray::Array4<f32>, ndarray::Array3<f32>)>
where
    T: crate::ops::attention::AttentionElement,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
{
    let dims = |a: (usize, usize, usize, usize)| [a.0, a.1, a.2, a.3];
    let s = crate::ops::attention::attention_shape(dims(q.dim()), dims(k.dim()), dims(v.dim()))?;
    let scale = f64::from(options.scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt()));
    if !scale.is_finite() {
        return Err(crate::error::Error::InvalidArgument {
            op: "cpu::attention",
            detail: format!("the scale must be finite, not {scale}"),
        });
    }
    // The operands widened into flat row-major vectors, read by slices: indexing the 4-D arrays
    // element by element made this reference most of an attention trial's time in the
    // simulator's (unoptimised) test builds. The same products and sums, in the same order.
    let (q, k, v) = (widened(q), widened(k), widened(v));
    let (hd, group) = (s.head_dim, s.heads / s.kv_heads);
    let q_at = |b: usize, i: usize, h: usize| ((b * s.q_len + i) * s.heads + h) * hd;
    let kv_at = |b: usize, j: usize, h: usize| ((b * s.kv_len + j) * s.kv_heads + h) * hd;
    let mut out = vec![0.0f32; s.batch * s.q_len * s.heads * hd];
    let mut lse = ndarray::Array3::<f32>::from_elem((s.batch, s.heads, s.q_len), f32::NEG_INFINITY);
    let mask = attention_reference_mask(options, "cpu::attention")?;
    let mut scores = Vec::with_capacity(s.kv_len);
    for b in 0..s.batch {
        for h in 0..s.heads {
            let kvh = h / group;
            for i in 0..s.q_len {
                // The masks written out here, not taken from the kernels: row `i` sits at
                // position `p = i + kv_len - q_len` among the keys (bottom-right alignment).
                let p = i as i128 + s.kv_len as i128 - s.q_len as i128;
                let kept: Vec<usize> = (0..s.kv_len)
                    .filter(|&j| attention_mask_keeps(&mask, b, h, i, j, p))
                    .collect();
                if kept.is_empty() {
                    continue;
                }
                let q_row = &q[q_at(b, i, h)..][..hd];
                scores.clear();
                for &j in &kept {
                    let k_row = &k[kv_at(b, j, kvh)..][..hd];
                    let dot: f64 = q_row.iter().zip(k_row).map(|(x, y)| x * y).sum();
                    let score = scale * dot;
                    scores.push(attention_modified_score(&mask, score, (b, h, s.heads), (i, j, p)).0);
                }
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, |a, x| {
                    if x.is_nan() || a.is_nan() {
                        f64::NAN
                    } else {
                        a.max(x)
                    }
                });
                let weights: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
                let sum: f64 = weights.iter().sum();
                lse[[b, h, i]] = (m + sum.ln()) as f32;
                let out_row = &mut out[q_at(b, i, h)..][..hd];
                for (d, o) in out_row.iter_mut().enumerate() {
                    let acc: f64 = kept
                        .iter()
                        .zip(&weights)
                        .map(|(&j, w)| w * v[kv_at(b, j, kvh) + d])
                        .sum();
                    *o = (acc / sum) as f32;
                }
            }
        }
    }
    let out = ndarray::Array4::from_shape_vec((s.batch, s.q_len, s.heads, hd), out).map_err(|e| {
        crate::error::Error::InvalidArgument {
            op: "cpu::attention",
            detail: format!("the output's shape: {e}"),
        }
    })?;
    Ok((out, lse))
}

#[cfg(feature = "attention")]
/// `a`'s elements in f64, in row-major order whatever its strides.
fn widened<T, S>(a: &ArrayBase<S, ndarray::Ix4>) -> Vec<f64>
where
    T: crate::ops::attention::AttentionElement,
    S: Data<Elem = T>,
{
    a.iter().map(|x| f64::from(x.to_f32())).collect()
}

#[cfg(feature = "attention")]
/// The mask of `options` as the references write it out: the causal flag folded into it.
///
/// Errors: [`crate::Error::InvalidArgument`] (for `op`) for a custom mask without its
/// reference written out ([`crate::CustomMask::reference`]).
fn attention_reference_mask<'a>(
    options: &crate::ops::attention::AttentionOptions<'a>,
    op: &'static str,
) -> Result<crate::ops::attention::AttentionMask<'a>> {
    match (options.causal, options.mask) {
        (true, crate::ops::attention::AttentionMask::None) => {
            Ok(crate::ops::attention::AttentionMask::Causal)
        }
        (_, crate::ops::attention::AttentionMask::Custom(custom)) if custom.keep.is_none() => {
            Err(crate::error::Error::InvalidArgument {
                op,
                detail: format!(
                    "the custom mask {} has no reference written out (CustomMask::reference)",
                    custom.name()
                ),
            })
        }
        (_, m) => Ok(m),
    }
}

#[cfg(feature = "attention")]
/// The scaled score `score` of row `i` (at position `p` among the keys) and key `j` of head `h`
/// (of `heads`) in batch `b`, modified by `mask` (ALiBi's bias, the soft cap, a custom mask's
/// reference), and the modification's derivative with respect to `score` (1 where none
/// modifies it; `None` for a custom mask's without its derivative written out,
/// [`crate::CustomMask::score_grad_reference`]).
fn attention_modified_score(
    mask: &crate::ops::attention::AttentionMask<'_>,
    score: f64,
    (b, h, heads): (usize, usize, usize),
    (i, j, p): (usize, usize, i128),
) -> (f64, Option<f64>) {
    match mask {
        crate::ops::attention::AttentionMask::Alibi => {
            let slope = (-8.0 * (h + 1) as f64 / heads as f64).exp2();
            (score + slope * (j as i128 - p) as f64, Some(1.0))
        }
        crate::ops::attention::AttentionMask::SoftCap { cap, .. } => {
            let (cap, t) = (f64::from(*cap), (score / f64::from(*cap)).tanh());
            (cap * t, Some(1.0 - t * t))
        }
        crate::ops::attention::AttentionMask::Custom(custom) => match custom.score {
            Some(modify) => (
                modify(score, b, h, i, j),
                custom.score_grad.map(|grad| grad(score, b, h, i, j)),
            ),
            None => (score, Some(1.0)),
        },
        _ => (score, Some(1.0)),
    }
}

#[cfg(feature = "attention")]
/// Whether row `i` of head `h` of batch `b` (at position `p` among the keys) sees key `j`
/// under `mask` (a custom mask's reference checked to be there).
fn attention_mask_keeps(
    mask: &crate::ops::attention::AttentionMask<'_>,
    b: usize,
    h: usize,
    i: usize,
    j: usize,
    p: i128,
) -> bool {
    let j = j as i128;
    match mask {
        crate::ops::attention::AttentionMask::None => true,
        crate::ops::attention::AttentionMask::Causal | crate::ops::attention::AttentionMask::Alibi => j <= p,
        crate::ops::attention::AttentionMask::SlidingWindow { window } => j <= p && j > p - *window as i128,
        crate::ops::attention::AttentionMask::SoftCap { causal, .. } => !causal || j <= p,
        crate::ops::attention::AttentionMask::Document(doc) => {
            let ids = doc.ids();
            let seq = doc.dims()[1];
            ids[b * seq + i] == ids[b * seq + j as usize]
        }
        crate::ops::attention::AttentionMask::Varlen(varlen) => varlen.keeps(i, j as usize),
        crate::ops::attention::AttentionMask::Custom(custom) => {
            custom.keep.is_some_and(|keep| keep(b, h, i, j as usize))
        }
    }
}

#[cfg(feature = "attention")]
/// The gradients of attention in f64 ([`attention_backward`]), each rounded once to f32, with
/// the size of what each element sums: `*_terms` holds the sum of the absolute values of the
/// terms (the scale of any rounding of them, for tolerances).
pub struct AttentionBackward {
    /// `[batch, q_len, heads, head_dim]`.
    pub dq: ndarray::Array4<f32>,
    /// `[batch, kv_len, kv_heads, head_dim]`, summed over each key/value head's query heads.
    pub dk: ndarray::Array4<f32>,
    /// As `dk`.
    pub dv: ndarray::Array4<f32>,
    /// `scale sum_j P_ij (|dP_ij| + sum_d |dO_id O_id|) |k_j|` per element of `dq`.
    pub dq_terms: ndarray::Array4<f32>,
    /// `scale sum_i P_ij (|dP_ij| + sum_d |dO_id O_id|) |q_i|` per element of `dk`.
    pub dk_terms: ndarray::Array4<f32>,
    /// `sum_i P_ij |dO_i|` per element of `dv`.
    pub dv_terms: ndarray::Array4<f32>,
}

#[cfg(feature = "attention")]
/// Attention backward in f64 on the given (already rounded) inputs `[batch, seq, heads,
/// head_dim]`: the forward recomputed exactly (probabilities `P`, output `O`), then `dV = P^T
/// dO`, `dS = P (dO V^T - rowsum(dO O))`, `dQ = scale dS K`, `dK = scale dS^T Q`, over the pairs
/// the mask keeps (the same rules as [`crate::Gpu::attention_backward`]; the shipped masks
/// written out as in [`attention`], a score modification's derivative multiplying `dS`).
///
/// A custom mask ([`crate::CustomMask`]) is written out by its [`reference`](crate::CustomMask::reference),
/// its score modification by [`score_reference`](crate::CustomMask::score_reference) and that
/// modification's derivative by [`score_grad_reference`](crate::CustomMask::score_grad_reference).
///
/// Errors: those of [`crate::Gpu::attention`] on the shapes and the scale; a `d_out` not of
/// `q`'s shape is [`crate::Error::ShapeMismatch`]; a custom mask without its reference, or with a
/// score modification without its derivative, is [`crate::Error::InvalidArgument`].
pub fn attention_backward<T, S0, S1, S2, S3>(
    d_out: &ArrayBase<S0, ndarray::Ix4>,
    q: &ArrayBase<S1, ndarray::Ix4>,
    k: &ArrayBase<S2, ndarray::Ix4>,
    v: &ArrayBase<S3, ndarray::Ix4>,
    options: &crate::ops::attention::AttentionOptions,
) -> Result<AttentionBackward>
where
    T: crate::ops::attention::AttentionElement,
    S0: Data<Elem = T>,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    S3: Data<Elem = T>,
{
    let dims = |a: (usize, usize, usize, usize)| [a.0, a.1, a.2, a.3];
    let s = crate::ops::attention::attention_shape(dims(q.dim()), dims(k.dim()), dims(v.dim()))?;
    crate::ops::same_shape(
        "cpu::attention_backward",
        &dims(q.dim()),
        &dims(d_out.dim()),
        "d_out has q's shape",
    )?;
    let scale = f64::from(options.scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt()));
    if !scale.is_finite() {
        return Err(crate::error::Error::InvalidArgument {
            op: "cpu::attention_backward",
            detail: format!("the scale must be finite, not {scale}"),
        });
    }
    // Flat row-major vectors read by slices, as in `attention`: the same operations in the
    // same order as indexing the 4-D arrays, at a fraction of the time in test builds.
    let (g, q, k, v) = (widened(d_out), widened(q), widened(k), widened(v));
    let group = s.heads / s.kv_heads;
    let dd = s.head_dim;
    let q_at = |b: usize, i: usize, h: usize| ((b * s.q_len + i) * s.heads + h) * dd;
    let kv_at = |b: usize, j: usize, h: usize| ((b * s.kv_len + j) * s.kv_heads + h) * dd;
    let (q_elems, kv_elems) = (
        s.batch * s.q_len * s.heads * dd,
        s.batch * s.kv_len * s.kv_heads * dd,
    );
    let (mut dq, mut dq_t) = (vec![0.0f64; q_elems], vec![0.0f64; q_elems]);
    let (mut dk, mut dk_t) = (vec![0.0f64; kv_elems], vec![0.0f64; kv_elems]);
    let (mut dv, mut dv_t) = (vec![0.0f64; kv_elems], vec![0.0f64; kv_elems]);
    let mask = attention_reference_mask(options, "cpu::attention_backward")?;
    let (mut p, mut grad) = (Vec::with_capacity(s.kv_len), Vec::with_capacity(s.kv_len));
    for b in 0..s.batch {
        for h in 0..s.heads {
            let kvh = h / group;
            for i in 0..s.q_len {
                // The mask written out, as in `attention` (row `i` at position `pos` among the
                // keys), with each score's modification and its derivative.
                let pos = i as i128 + s.kv_len as i128 - s.q_len as i128;
                let kept: Vec<usize> = (0..s.kv_len)
                    .filter(|&j| attention_mask_keeps(&mask, b, h, i, j, pos))
                    .collect();
                if kept.is_empty() {
                    continue;
                }
                let qi = q_at(b, i, h);
                let (q_row, g_row) = (&q[qi..][..dd], &g[qi..][..dd]);
                p.clear();
                grad.clear();
                for &j in &kept {
                    let k_row = &k[kv_at(b, j, kvh)..][..dd];
                    let score = scale * q_row.iter().zip(k_row).map(|(x, y)| x * y).sum::<f64>();
                    // Every shipped mask has its derivative; a custom one where it is written out.
                    let (modified, derivative) =
                        attention_modified_score(&mask, score, (b, h, s.heads), (i, j, pos));
                    p.push(modified);
                    grad.push(derivative.ok_or_else(|| crate::error::Error::InvalidArgument {
                        op: "cpu::attention_backward",
                        detail: "a custom score modification has no derivative written out".into(),
                    })?);
                }
                let m = p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                p.iter_mut().for_each(|x| *x = (*x - m).exp());
                let sum: f64 = p.iter().sum();
                p.iter_mut().for_each(|x| *x /= sum);
                let o: Vec<f64> = (0..dd)
                    .map(|d| {
                        kept.iter()
                            .zip(&p)
                            .map(|(&j, pj)| pj * v[kv_at(b, j, kvh) + d])
                            .sum()
                    })
                    .collect();
                let delta: f64 = g_row.iter().zip(&o).map(|(x, y)| x * y).sum();
                let delta_abs: f64 = g_row.iter().zip(&o).map(|(x, y)| (x * y).abs()).sum();
                for ((&j, &pj), &dj) in kept.iter().zip(&p).zip(&grad) {
                    let kj = kv_at(b, j, kvh);
                    let (k_row, v_row) = (&k[kj..][..dd], &v[kj..][..dd]);
                    let dp: f64 = g_row.iter().zip(v_row).map(|(x, y)| x * y).sum();
                    let ds = pj * (dp - delta) * dj;
                    let ds_abs = pj * (dp.abs() + delta_abs) * dj.abs();
                    for d in 0..dd {
                        dq[qi + d] += scale * ds * k_row[d];
                        dq_t[qi + d] += scale * ds_abs * k_row[d].abs();
                        dk[kj + d] += scale * ds * q_row[d];
                        dk_t[kj + d] += scale * ds_abs * q_row[d].abs();
                        dv[kj + d] += pj * g_row[d];
                        dv_t[kj + d] += pj * g_row[d].abs();
                    }
                }
            }
        }
    }
    let qshape = (s.batch, s.q_len, s.heads, dd);
    let kshape = (s.batch, s.kv_len, s.kv_heads, dd);
    let narrow = |shape: (usize, usize, usize, usize), a: Vec<f64>| {
        ndarray::Array4::from_shape_vec(shape, a.into_iter().map(|x| x as f32).collect()).map_err(|e| {
            crate::error::Error::InvalidArgument {
                op: "cpu::attention_backward",
                detail: format!("a gradient's shape: {e}"),
            }
        })
    };
    Ok(AttentionBackward {
        dq: narrow(qshape, dq)?,
        dk: narrow(kshape, dk)?,
        dv: narrow(kshape, dv)?,
        dq_terms: narrow(qshape, dq_t)?,
        dk_terms: narrow(kshape, dk_t)?,
        dv_terms: narrow(kshape, dv_t)?,
    })
}

#[cfg(feature = "decode_attention")]
/// Decode attention in f64 over contiguous K and V (`gpukern::PagedKvCache`'s layout is paged;
/// this takes each sequence's rows gathered in order): `q` is `[batch, q_len, heads, head_dim]`,
/// `k[b]` and `v[b]` are `[lens[b], kv_heads, head_dim]`; query `i` of sequence `b` sees keys
/// `0 ..= lens[b] - q_len + i` (`lens[b] = k[b].len() / (kv_heads * head_dim) >= q_len`), q
/// head `h` kv head `h / (heads / kv_heads)`. Returns the output (`q`'s shape) and each row's
/// log-sum-exp (`[batch, q_len, heads]`, natural log of the scaled scores' exponentials).
#[allow(clippy::too_many_arguments)]
pub fn decode_attention(
    q: &[f32],
    k: &[Vec<f32>],
    v: &[Vec<f32>],
    (q_len, heads, kv_heads, head_dim): (usize, usize, usize, usize),
    scale: f64,
) -> (Vec<f64>, Vec<f64>) {
    let batch = k.len();
    let mut out = vec![0.0f64; batch * q_len * heads * head_dim];
    let mut lse = vec![0.0f64; batch * q_len * heads];
    for b in 0..batch {
        let len = k[b].len() / (kv_heads * head_dim);
        for i in 0..q_len {
            for h in 0..heads {
                let row = (b * q_len + i) * heads + h;
                let kvh = h / (heads / kv_heads);
                let qr = &q[row * head_dim..(row + 1) * head_dim];
                let at = |j: usize| (j * kv_heads + kvh) * head_dim;
                let scores: Vec<f64> = (0..=len - q_len + i)
                    .map(|j| {
                        let kr = &k[b][at(j)..at(j) + head_dim];
                        scale
                            * qr.iter()
                                .zip(kr)
                                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                                .sum::<f64>()
                    })
                    .collect();
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, nan_max);
                let w: Vec<f64> = scores.iter().map(|&s| (s - m).exp()).collect();
                let sum: f64 = w.iter().sum();
                for d in 0..head_dim {
                    out[row * head_dim + d] = w
                        .iter()
                        .enumerate()
                        .map(|(j, &p)| p * f64::from(v[b][at(j) + d]))
                        .sum::<f64>()
                        / sum;
                }
                lse[row] = m + sum.ln();
            }
        }
    }
    (out, lse)
}
