//! Attention forward with masks (`AttentionMask`), bf16, head dim 128, 16k tokens per batch
//! (`4x4096x16x128`): a sliding window of 1024 keys, 4 documents of equal length per sequence,
//! ALiBi (causal), and a soft cap of 30 with the causal mask; the plan's choice (`gpukern`) and
//! each fused rung asked for. The peer is FlexAttention compiled with the same masks
//! (`bench/peers_attention.py`, `flex_attention_masks`: the same constants). Records: kernel
//! `attention_fwd`, keys `causal` and `mask`; TFLOP/s from `4 b h d` times the pairs the mask
//! keeps (the same count for every implementation). Each output is checked on sampled rows
//! against the f64 reference with the same mask before it is timed.
//!
//! And a variable-length batch (`AttentionMask::Varlen`, mask `varlen`): the same 16k tokens as
//! [`SEQ_LENS`], sequences of ragged lengths packed in a batch of one (`1x16384x16x128`), causal
//! within each; the peers are torch's `varlen_attn` (FlashAttention's varlen kernels) and
//! FlexAttention with the sequences as documents and the causal mask (`bench/peers_attention.py`
//! `torch_varlen`, `flex_attention_masks`).
//!
//! And the backward with each mask (records `attention_bwd` with the key `mask`) on
//! [`MASK_SHAPES`], and with ALiBi at head dim 64 too (`8x2048x32x64`): the plan's choice
//! (`gpukern`: the one-kernel Hopper rung's masked instances where they apply, else the
//! `mma.sync` rung's general ones), the `mma.sync` rung
//! (`gpukern:flash`) and the rows rung (`gpukern:rows`); TFLOP/s 2.5 times the forward's count
//! of kept pairs; each checked on sampled rows of the three gradients against the f64 gradients
//! with the mask (`attention_bwd::reference`, the soft cap's derivative too). The peer is
//! FlexAttention's backward with the same mask (`bench/peers_attention.py`,
//! `flex_attention_masks_bwd`).

use gpukern::{AttentionAlgorithm, AttentionMask, AttentionOptions, bf16};

use super::attention::{Operands, Prepared, impl_name};
use crate::Bench;
use crate::record::{Record, Res, Sink};

/// Shapes of the mask rows (`bench/peers_attention.py` `MASK_SHAPES`).
const MASK_SHAPES: [[usize; 4]; 1] = [[4, 4096, 16, 128]];
/// The sliding window.
const WINDOW: usize = 1024;
/// Documents per sequence, of equal length.
const DOCUMENTS: usize = 4;
/// The soft cap.
const SOFT_CAP: f32 = 30.0;
/// The masks, by their record names.
const MASKS: [&str; 4] = ["sliding_window", "document", "alibi", "softcap"];

/// The sequences of the varlen row (`bench/peers_attention.py` `SEQ_LENS`): 16384 tokens.
pub const SEQ_LENS: [usize; 8] = [4096, 512, 3000, 1024, 2048, 3584, 1120, 1000];

/// The sequence of packed token `t` of the varlen row, and its position in it.
fn sequence_of(t: usize) -> (usize, usize) {
    let mut start = 0;
    for (n, len) in SEQ_LENS.iter().enumerate() {
        if t < start + len {
            return (n, t - start);
        }
        start += len;
    }
    (SEQ_LENS.len(), t - start)
}

/// The implementations timed per mask.
const ALGORITHMS: [AttentionAlgorithm; 3] = [
    AttentionAlgorithm::Auto,
    AttentionAlgorithm::WgmmaPingPong,
    AttentionAlgorithm::Flash,
];

/// The masks of the backward's rows on [`MASK_SHAPES`].
const BACKWARD_MASKS: [&str; 4] = ["sliding_window", "document", "alibi", "softcap"];

/// The backward's rows at head dim 64 (16k tokens, hidden 2048): the masks that modify scores,
/// [`BACKWARD_SCORE_MASKS`].
const BACKWARD_SCORE_SHAPES: [[usize; 4]; 1] = [[8, 2048, 32, 64]];

/// The masks of the backward's rows on [`BACKWARD_SCORE_SHAPES`]: ALiBi's bias and the soft cap.
const BACKWARD_SCORE_MASKS: [&str; 2] = ["alibi", "softcap"];

/// The implementations timed per mask in the backward.
const BACKWARD_ALGORITHMS: [AttentionAlgorithm; 3] = [
    AttentionAlgorithm::Auto,
    AttentionAlgorithm::Flash,
    AttentionAlgorithm::Rows,
];

/// Measurements [`attention_masks`] makes.
pub fn planned(_quick: bool) -> usize {
    (MASK_SHAPES.len() * MASKS.len() + 1) * ALGORITHMS.len()
        + (MASK_SHAPES.len() * BACKWARD_MASKS.len()
            + BACKWARD_SCORE_SHAPES.len() * BACKWARD_SCORE_MASKS.len())
            * BACKWARD_ALGORITHMS.len()
}

/// The pairs one head of one sequence of `s` tokens keeps under `mask` (ALiBi and the soft cap
/// with the causal mask; until BENCHMARKS.md's thirty-eighth round the soft cap's rows counted
/// all `s^2` pairs, twice its work).
fn pairs(mask: &str, s: usize) -> f64 {
    match mask {
        "sliding_window" => (0..s).map(|i| (i + 1).min(WINDOW) as f64).sum(),
        "document" => (DOCUMENTS * (s / DOCUMENTS).pow(2)) as f64,
        "alibi" | "softcap" => (s * (s + 1) / 2) as f64,
        "varlen" => SEQ_LENS.iter().map(|&l| (l * (l + 1) / 2) as f64).sum(),
        _ => (s * s) as f64,
    }
}

/// Whether row `i` sees key `j` under `mask`, and the score `x` (scaled) modified.
fn keeps(mask: &str, s: usize, i: usize, j: usize) -> bool {
    match mask {
        "sliding_window" => j <= i && i - j < WINDOW,
        "document" => i / (s / DOCUMENTS) == j / (s / DOCUMENTS),
        "varlen" => {
            let ((si, pi), (sj, pj)) = (sequence_of(i), sequence_of(j));
            si == sj && pj <= pi
        }
        _ => j <= i,
    }
}

fn modified(mask: &str, x: f64, h: usize, heads: usize, i: usize, j: usize) -> f64 {
    match mask {
        "alibi" => x + (-8.0 * (h + 1) as f64 / heads as f64).exp2() * (j as f64 - i as f64),
        "softcap" => f64::from(SOFT_CAP) * (x / f64::from(SOFT_CAP)).tanh(),
        _ => x,
    }
}

/// The derivative of [`modified`] in `x`: the soft cap's `1 - tanh^2`, 1 for the others.
fn modified_grad(mask: &str, x: f64) -> f64 {
    match mask {
        "softcap" => 1.0 - (x / f64::from(SOFT_CAP)).tanh().powi(2),
        _ => 1.0,
    }
}

/// The f64 reference of the sampled rows (batch 0, heads 0 and last, 32 rows) under `mask`.
fn reference(ops: &Operands, mask: &str) -> Vec<f32> {
    let [_, s, h, d] = ops.dims;
    let scale = 1.0 / (d as f64).sqrt();
    let at = |x: &Vec<bf16>, i: usize, hh: usize, j: usize| f64::from(x[(i * h + hh) * d + j].to_f32());
    let mut out = Vec::new();
    for (hh, i) in super::attention::samples(ops.dims) {
        let kept: Vec<usize> = (0..s).filter(|&j| keeps(mask, s, i, j)).collect();
        let scores: Vec<f64> = kept
            .iter()
            .map(|&j| {
                let dot: f64 = (0..d)
                    .map(|x| at(&ops.host[0], i, hh, x) * at(&ops.host[1], j, hh, x))
                    .sum();
                modified(mask, scale * dot, hh, h, i, j)
            })
            .collect();
        let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
        let sum: f64 = w.iter().sum();
        for x in 0..d {
            let acc: f64 = kept
                .iter()
                .zip(&w)
                .map(|(&j, w)| w * at(&ops.host[2], j, hh, x))
                .sum();
            out.push((acc / sum) as f32);
        }
    }
    out
}

/// Every mask of every shape, every implementation; then the varlen row; then the backward's.
pub fn attention_masks(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    shipped_masks(b, sink)?;
    varlen(b, sink)?;
    backward_masks(b, sink)
}

/// The backward's rows: each mask of [`BACKWARD_MASKS`] on each shape of [`MASK_SHAPES`], those
/// of [`BACKWARD_SCORE_MASKS`] on [`BACKWARD_SCORE_SHAPES`], the forward run once with it, each
/// implementation checked and timed.
fn backward_masks(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    use super::attention_bwd as bwd;
    let rows = MASK_SHAPES.iter().map(|&dims| (dims, &BACKWARD_MASKS[..])).chain(
        BACKWARD_SCORE_SHAPES
            .iter()
            .map(|&dims| (dims, &BACKWARD_SCORE_MASKS[..])),
    );
    for (dims, masks) in rows {
        let [batch, seq, heads, head_dim] = dims;
        let shape = format!("{batch}x{seq}x{heads}x{head_dim}");
        if !b.wants(&shape) {
            continue;
        }
        let ids: Vec<i32> = (0..batch * seq)
            .map(|t| ((t % seq) / (seq / DOCUMENTS)) as i32)
            .collect();
        let doc = b.gpu.document_mask(&ids, batch, seq)?;
        let mut prepared: Option<Operands> = None;
        for &name in masks {
            let mask = match name {
                "sliding_window" => AttentionMask::SlidingWindow { window: WINDOW },
                "alibi" => AttentionMask::Alibi,
                "softcap" => AttentionMask::SoftCap {
                    cap: SOFT_CAP,
                    causal: true,
                },
                _ => AttentionMask::Document(&doc),
            };
            let flops = 2.5 * 4.0 * (batch * heads * head_dim) as f64 * pairs(name, seq);
            let mut state: Option<(bwd::Backward, [Vec<f32>; 3])> = None;
            for algorithm in BACKWARD_ALGORITHMS {
                let options = AttentionOptions {
                    mask,
                    algorithm,
                    ..Default::default()
                };
                let base = Record::new("attention_bwd", impl_name(algorithm), shape.clone())
                    .with("b", batch)
                    .with("seq", seq)
                    .with("heads", heads)
                    .with("head_dim", head_dim)
                    .with("causal", name != "document")
                    .with("mask", name)
                    .with("dtype", "bf16")
                    .with("call", "gpu.attention_backward_into");
                sink.item(base.clone(), || {
                    let gpu = &b.gpu;
                    if prepared.is_none() {
                        prepared = Some(super::attention::prepare(gpu, dims)?);
                    }
                    let Some(ops) = prepared.as_mut() else {
                        return Err("attention operands were not prepared".into());
                    };
                    if state.is_none() {
                        let bw = bwd::prepare(gpu, ops, &options)?;
                        let want = bwd::reference(
                            ops,
                            &bw,
                            |i, j| keeps(name, seq, i, j),
                            |hh, i, j, x| (modified(name, x, hh, heads, i, j), modified_grad(name, x)),
                        );
                        state = Some((bw, want));
                    }
                    let Some((bw, want)) = state.as_mut() else {
                        return Err("no backward inputs".into());
                    };
                    let check = bwd::check(gpu, ops, bw, &options, want)?;
                    let record = base.checked(&check);
                    if !check.passed() {
                        return Ok(record);
                    }
                    let stats = b.timer.measure(|_| {
                        bwd::run(gpu, ops, bw, &options)?;
                        Ok(())
                    })?;
                    Ok(record.timed(&stats, None, Some(flops)))
                })?;
            }
        }
    }
    Ok(())
}

/// The varlen row: [`SEQ_LENS`] packed, causal within each sequence, every implementation.
fn varlen(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    let (heads, head_dim) = (MASK_SHAPES[0][2], MASK_SHAPES[0][3]);
    let total: usize = SEQ_LENS.iter().sum();
    let dims = [1, total, heads, head_dim];
    let shape = format!("1x{total}x{heads}x{head_dim}");
    if !b.wants(&shape) {
        return Ok(());
    }
    let cu: Vec<usize> = std::iter::once(0)
        .chain(SEQ_LENS.iter().scan(0, |end, len| {
            *end += len;
            Some(*end)
        }))
        .collect();
    let varlen = b.gpu.varlen_mask(&cu, &cu, AttentionMask::Causal)?;
    let mut prepared = Prepared::new(dims);
    let flops = 4.0 * (heads * head_dim) as f64 * pairs("varlen", total);
    for algorithm in ALGORITHMS {
        let options = AttentionOptions {
            mask: AttentionMask::Varlen(&varlen),
            algorithm,
            ..Default::default()
        };
        let base = Record::new("attention_fwd", impl_name(algorithm), shape.clone())
            .with("b", 1)
            .with("seq", total)
            .with("heads", heads)
            .with("head_dim", head_dim)
            .with("causal", true)
            .with("mask", "varlen")
            .with("sequences", SEQ_LENS.len())
            .with("dtype", "bf16")
            .with("call", "gpu.attention_into");
        sink.item(base.clone(), || {
            prepared.check_and_time(b, base, &options, |ops| reference(ops, "varlen"), flops)
        })?;
    }
    Ok(())
}

/// The shipped masks' rows.
fn shipped_masks(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for dims in MASK_SHAPES {
        let [batch, seq, heads, head_dim] = dims;
        let shape = format!("{batch}x{seq}x{heads}x{head_dim}");
        if !b.wants(&shape) {
            continue;
        }
        let mut prepared = Prepared::new(dims);
        let ids: Vec<i32> = (0..batch * seq)
            .map(|t| ((t % seq) / (seq / DOCUMENTS)) as i32)
            .collect();
        let doc = b.gpu.document_mask(&ids, batch, seq)?;
        for name in MASKS {
            let mask = match name {
                "sliding_window" => AttentionMask::SlidingWindow { window: WINDOW },
                "document" => AttentionMask::Document(&doc),
                "alibi" => AttentionMask::Alibi,
                _ => AttentionMask::SoftCap {
                    cap: SOFT_CAP,
                    causal: true,
                },
            };
            let flops = 4.0 * (batch * heads * head_dim) as f64 * pairs(name, seq);
            prepared.want = None;
            for algorithm in ALGORITHMS {
                let options = AttentionOptions {
                    mask,
                    algorithm,
                    ..Default::default()
                };
                let base = Record::new("attention_fwd", impl_name(algorithm), shape.clone())
                    .with("b", batch)
                    .with("seq", seq)
                    .with("heads", heads)
                    .with("head_dim", head_dim)
                    .with("causal", name != "document")
                    .with("mask", name)
                    .with("dtype", "bf16")
                    .with("call", "gpu.attention_into");
                sink.item(base.clone(), || {
                    prepared.check_and_time(b, base, &options, |ops| reference(ops, name), flops)
                })?;
            }
        }
    }
    Ok(())
}
