//! Attention forward with masks (`AttentionMask`), bf16, head dim 128, 16k tokens per batch
//! (`4x4096x16x128`): a sliding window of 1024 keys, 4 documents of equal length per sequence,
//! ALiBi (causal), and a soft cap of 30 with the causal mask; the plan's choice (`gpukern`) and
//! each fused rung asked for. The peer is FlexAttention compiled with the same masks
//! (`bench/peers_attention.py`, `flex_attention_masks`: the same constants). Records: kernel
//! `attention_fwd`, keys `causal` and `mask`; TFLOP/s from `4 b h d` times the pairs the mask
//! keeps (the same count for every implementation). Each output is checked on sampled rows
//! against the f64 reference with the same mask before it is timed.

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

/// The implementations timed per mask.
const ALGORITHMS: [AttentionAlgorithm; 3] = [
    AttentionAlgorithm::Auto,
    AttentionAlgorithm::WgmmaPingPong,
    AttentionAlgorithm::Flash,
];

/// Measurements [`attention_masks`] makes.
pub fn planned(_quick: bool) -> usize {
    MASK_SHAPES.len() * MASKS.len() * ALGORITHMS.len()
}

/// The pairs one head of one sequence of `s` tokens keeps under `mask`.
fn pairs(mask: &str, s: usize) -> f64 {
    match mask {
        "sliding_window" => (0..s).map(|i| (i + 1).min(WINDOW) as f64).sum(),
        "document" => (DOCUMENTS * (s / DOCUMENTS).pow(2)) as f64,
        "alibi" => (s * (s + 1) / 2) as f64,
        _ => (s * s) as f64,
    }
}

/// Whether row `i` sees key `j` under `mask`, and the score `x` (scaled) modified.
fn keeps(mask: &str, s: usize, i: usize, j: usize) -> bool {
    match mask {
        "sliding_window" => j <= i && i - j < WINDOW,
        "document" => i / (s / DOCUMENTS) == j / (s / DOCUMENTS),
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

/// Every mask of every shape, every implementation.
pub fn attention_masks(b: &mut Bench, sink: &mut Sink) -> Res<()> {
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
