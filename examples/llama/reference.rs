//! The CPU reference decoder: the same model in f32 on the same bf16 weights, token by token
//! with a KV cache per sequence, each activation rounded to bf16 where the device stores one
//! (so that the two differ only where their f32 sums, in different orders, round to different
//! neighbours).

use gpukern::bf16;

use crate::config::Config;
use crate::weights::Weights;

/// f32 to the nearest bf16 and back.
fn round(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}

fn floats(v: &[bf16]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// `y = round(W x)` for `W` `out x in`.
fn linear(x: &[f32], w: &[f32], out: usize) -> Vec<f32> {
    let k = x.len();
    (0..out)
        .map(|o| round(w[o * k..(o + 1) * k].iter().zip(x).map(|(a, b)| a * b).sum()))
        .collect()
}

/// RMSNorm of one row, rounded once.
fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let r = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| round(v * r * g)).collect()
}

/// `round(a + b)`.
fn add(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| round(x + y)).collect()
}

/// One block's weights in f32.
struct Layer {
    attn_norm: Vec<f32>,
    mlp_norm: Vec<f32>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    wv: Vec<f32>,
    wo: Vec<f32>,
    w_gate: Vec<f32>,
    w_up: Vec<f32>,
    w_down: Vec<f32>,
}

/// The reference model.
pub struct Reference {
    c: Config,
    embed: Vec<f32>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    lm_head: Vec<f32>,
    inv_freq: Vec<f32>,
}

/// One sequence's keys and values so far, per block (rounded, after RoPE for the keys).
pub struct Sequence {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

impl Reference {
    /// The reference of `w` (configuration `c`).
    pub fn new(c: Config, w: &Weights) -> Reference {
        Reference {
            c,
            embed: floats(&w.embed),
            layers: w
                .layers
                .iter()
                .map(|l| Layer {
                    attn_norm: floats(&l.attn_norm),
                    mlp_norm: floats(&l.mlp_norm),
                    wq: floats(&l.wq),
                    wk: floats(&l.wk),
                    wv: floats(&l.wv),
                    wo: floats(&l.wo),
                    w_gate: floats(&l.w_gate),
                    w_up: floats(&l.w_up),
                    w_down: floats(&l.w_down),
                })
                .collect(),
            norm: floats(&w.norm),
            lm_head: floats(&w.lm_head),
            inv_freq: (0..c.head_dim / 2)
                .map(|i| c.rope_theta.powf(-((2 * i) as f64) / c.head_dim as f64) as f32)
                .collect(),
        }
    }

    /// An empty sequence.
    pub fn sequence(&self) -> Sequence {
        Sequence {
            k: vec![Vec::new(); self.c.layers],
            v: vec![Vec::new(); self.c.layers],
        }
    }

    /// RoPE (half-split pairs `(x[i], x[i + d/2])`) of every head of `x` at `pos`, rounded.
    fn rope(&self, x: &mut [f32], pos: usize) {
        let d = self.c.head_dim;
        for head in x.chunks_exact_mut(d) {
            for (i, &f) in self.inv_freq.iter().enumerate() {
                let angle = f64::from(pos as f32 * f);
                let (sin, cos) = (angle.sin() as f32, angle.cos() as f32);
                let (a, b) = (head[i], head[i + d / 2]);
                head[i] = round(a * cos - b * sin);
                head[i + d / 2] = round(b * cos + a * sin);
            }
        }
    }

    /// Causal attention of the newest token's `q` over the sequence's keys and values of
    /// block `l` (grouped-query: query head `h` reads kv head `h / (heads / kv_heads)`).
    fn attend(&self, q: &[f32], s: &Sequence, l: usize) -> Vec<f32> {
        let c = &self.c;
        let (d, kvd) = (c.head_dim, c.kv_dim());
        let group = c.heads / c.kv_heads;
        let scale = 1.0 / (d as f32).sqrt();
        let n = s.k[l].len() / kvd;
        let mut out = vec![0.0; c.q_dim()];
        for h in 0..c.heads {
            let qh = &q[h * d..(h + 1) * d];
            let kh = (h / group) * d;
            let scores: Vec<f32> = (0..n)
                .map(|j| {
                    let key = &s.k[l][j * kvd + kh..j * kvd + kh + d];
                    scale * qh.iter().zip(key).map(|(a, b)| a * b).sum::<f32>()
                })
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let weights: Vec<f32> = scores.iter().map(|x| (x - max).exp()).collect();
            let total: f32 = weights.iter().sum();
            for (i, o) in out[h * d..(h + 1) * d].iter_mut().enumerate() {
                let acc: f32 = (0..n).map(|j| weights[j] * s.v[l][j * kvd + kh + i]).sum();
                *o = round(acc / total);
            }
        }
        out
    }

    /// Feeds `token` at position `pos` of sequence `s`; returns the logits that follow it.
    pub fn forward(&self, s: &mut Sequence, token: usize, pos: usize) -> Vec<f32> {
        let c = &self.c;
        let mut h = self.embed[token * c.hidden..(token + 1) * c.hidden].to_vec();
        let mut x = rms_norm(&h, &self.layers[0].attn_norm, c.eps);
        for (i, l) in self.layers.iter().enumerate() {
            let mut q = linear(&x, &l.wq, c.q_dim());
            let mut k = linear(&x, &l.wk, c.kv_dim());
            let v = linear(&x, &l.wv, c.kv_dim());
            self.rope(&mut q, pos);
            self.rope(&mut k, pos);
            s.k[i].extend(k);
            s.v[i].extend(v);
            let attn = self.attend(&q, s, i);
            let o = linear(&attn, &l.wo, c.hidden);
            let h2 = add(&o, &h);
            x = rms_norm(&h2, &l.mlp_norm, c.eps);
            let gate = linear(&x, &l.w_gate, c.mlp);
            let up = linear(&x, &l.w_up, c.mlp);
            let act: Vec<f32> = gate
                .iter()
                .zip(&up)
                .map(|(g, u)| round(g / (1.0 + (-g).exp()) * u))
                .collect();
            let down = linear(&act, &l.w_down, c.hidden);
            h = add(&down, &h2);
            let next = self.layers.get(i + 1).map_or(&self.norm, |n| &n.attn_norm);
            x = rms_norm(&h, next, c.eps);
        }
        let k = c.hidden;
        (0..c.vocab)
            .map(|o| {
                self.lm_head[o * k..(o + 1) * k]
                    .iter()
                    .zip(&x)
                    .map(|(a, b)| a * b)
                    .sum()
            })
            .collect()
    }
}

/// The bf16 roundings on the path from a token to its logits: 9 per block (q, k or v, RoPE,
/// attention, o, residual, norm, gate/up, SwiGLU, down, residual: the longest chain through a
/// block holds 9 of them once the norms are counted with the residuals they follow) and the
/// first and final norms.
pub fn roundings(c: &Config) -> usize {
    9 * c.layers + 2
}
