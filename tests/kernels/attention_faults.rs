//! The attention check can fail: the fused rungs' schedule (online softmax over 128-key tiles,
//! probabilities rounded to the element type, as `attention_wgmma` runs it) emulated on the CPU,
//! once as written and once with each planted fault of the issue (a dropped KV tile, a stale row
//! maximum: the accumulators and the sum not rescaled when the maximum grows, an off-by-one
//! causal edge), each put through the same comparison with the same tolerance as the CUDA and
//! simulator trials (`check_attention_abs`). The faithful emulation must pass and every fault
//! must fail, so a kernel with one of these faults fails the trials.

use gpukern::{AttentionOptions, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::Array4;
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// Keys per tile of the emulated schedule (`attention_wgmma`'s `WGMMA_KEYS`).
const TILE: usize = 128;

/// A planted fault of the emulated kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// None: the schedule as the kernels run it.
    None,
    /// KV tile 1 skipped.
    DroppedTile,
    /// The running maximum updated but the output and the sum not rescaled from the old one.
    StaleMax,
    /// The causal limit one key too far.
    CausalOffByOne,
}

/// The trials (simulator target only: no device work).
pub(crate) fn trials(sim: &Target) -> Vec<Trial> {
    [
        Fault::None,
        Fault::DroppedTile,
        Fault::StaleMax,
        Fault::CausalOffByOne,
    ]
    .into_iter()
    .map(|fault| {
        trial(sim, &format!("attention::planted::{fault:?}"), move |_, rng| {
            planted(rng, fault)
        })
    })
    .collect()
}

/// The emulation with `fault` against the f64 reference: passes the check exactly when
/// `fault` is `None`.
fn planted(rng: &mut StdRng, fault: Fault) -> Check {
    let (b, s, h, d) = (1, 200, 2, 64);
    let random = |rng: &mut StdRng| {
        Array4::from_shape_fn([b, s, h, d], |_| bf16::from_f32(rng.random_range(-1.0f32..1.0)))
    };
    let (q, k, v) = (random(rng), random(rng), random(rng));
    // Scores of a few units, so that the row maximum grows from tile to tile.
    let options = AttentionOptions {
        causal: true,
        scale: Some(0.5),
        ..Default::default()
    };
    let (want_out, want_lse) = cpu::attention(&q, &k, &v, &options)?;
    let (out, lse) = emulate(&q, &k, &v, 0.5, fault);
    let out: Vec<bf16> = out.iter().map(|&x| bf16::from_f32(x)).collect();
    let result = super::attention::check_fused(
        &format!("emulated {fault:?}"),
        (&out, &lse),
        (
            &want_out.into_raw_vec_and_offset().0,
            &want_lse.into_raw_vec_and_offset().0,
        ),
    );
    match (fault, result) {
        (Fault::None, r) => r,
        (_, Err(_)) => Ok(()),
        (_, Ok(())) => Err(format!("the planted fault {fault:?} passes the check").into()),
    }
}

/// The online softmax over 128-key tiles (causal, bottom-right aligned; one KV head per query
/// head), `P` rounded to bf16 before `P V`, with `fault` planted: output `[b, s, h, d]` and
/// log-sum-exp `[b, h, s]`.
fn emulate(
    q: &Array4<bf16>,
    k: &Array4<bf16>,
    v: &Array4<bf16>,
    scale: f32,
    fault: Fault,
) -> (Vec<f32>, Vec<f32>) {
    let [b, s, h, d] = [q.dim().0, q.dim().1, q.dim().2, q.dim().3];
    let kv = k.dim().1;
    // Flat f32 copies read by slices (indexing the 4-D arrays element by element made this
    // emulation most of the trial's time in test builds): the same products in the same order.
    let wide = |a: &Array4<bf16>| a.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let (q, k, v) = (wide(q), wide(k), wide(v));
    let q_at = |bi: usize, i: usize, hi: usize| ((bi * s + i) * h + hi) * d;
    let kv_at = |bi: usize, j: usize, hi: usize| ((bi * kv + j) * h + hi) * d;
    let mut out = vec![0.0f32; b * s * h * d];
    let mut lse = vec![0.0f32; b * h * s];
    let scale_log2 = scale * std::f32::consts::LOG2_E;
    for bi in 0..b {
        for hi in 0..h {
            for i in 0..s {
                let mut limit = (i + 1 + kv).saturating_sub(s).min(kv);
                if fault == Fault::CausalOffByOne {
                    limit = (limit + 1).min(kv);
                }
                let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
                let mut acc = vec![0.0f32; d];
                for t in 0..kv.div_ceil(TILE) {
                    if fault == Fault::DroppedTile && t == 1 {
                        continue;
                    }
                    let keys = t * TILE..((t + 1) * TILE).min(limit);
                    if keys.is_empty() {
                        continue;
                    }
                    let scores: Vec<f32> = keys
                        .clone()
                        .map(|j| {
                            let (q_row, k_row) = (&q[q_at(bi, i, hi)..][..d], &k[kv_at(bi, j, hi)..][..d]);
                            let dot: f32 = q_row.iter().zip(k_row).map(|(x, y)| x * y).sum();
                            dot * scale_log2
                        })
                        .collect();
                    let m_new = scores.iter().copied().fold(m, f32::max);
                    let rescale = if fault == Fault::StaleMax {
                        1.0
                    } else {
                        (m - m_new).exp2()
                    };
                    m = m_new;
                    l *= rescale;
                    acc.iter_mut().for_each(|a| *a *= rescale);
                    for (j, &u) in keys.zip(&scores) {
                        let p = (u - m).exp2();
                        l += p;
                        let p = bf16::from_f32(p).to_f32();
                        let v_row = &v[kv_at(bi, j, hi)..][..d];
                        for (a, x) in acc.iter_mut().zip(v_row) {
                            *a += p * x;
                        }
                    }
                }
                let row = q_at(bi, i, hi);
                for c in 0..d {
                    out[row + c] = if l > 0.0 { acc[c] / l } else { 0.0 };
                }
                lse[(bi * h + hi) * s + i] = if l > 0.0 {
                    m * std::f32::consts::LN_2 + l.ln()
                } else {
                    f32::NEG_INFINITY
                };
            }
        }
    }
    (out, lse)
}
