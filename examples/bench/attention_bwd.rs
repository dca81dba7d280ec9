//! Attention backward on bf16 (`gpu.attention_backward_into`, the forward suite's shapes),
//! causal and not: the plan's choice (`gpukern`) and each rung asked for (`gpukern:wgmma`, its
//! one-kernel form `gpukern:wgmma-fused` (`dQ` by atomics, not deterministic), `gpukern:flash`,
//! `gpukern:rows`; the rows rung only up to 4k keys). The forward's output and log-sum-exp come
//! from one forward call before the timing; the timed call is the backward alone (its
//! preparation kernel, `dQ` and `dK`/`dV`, and the 8-byte-per-row workspace it allocates).
//!
//! Rates as FlashAttention counts them: 2.5 times the forward's `4 batch heads seq^2
//! head_dim`, halved with the causal mask. Each result is checked before it is timed, on sampled
//! rows of `dq` (batch 0, the first and last heads, 32 query rows) and of `dk` and `dv` (the same
//! heads, 32 key rows), against the f64 gradient of the same inputs (the backward's inputs: the
//! forward's output and log-sum-exp as given); the worst of the three relative errors is
//! recorded.

use gpukern::{AttentionAlgorithm, AttentionOptions, AttentionTensor, DeviceVec, Gpu, bf16};
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::Bench;
use crate::attention::{self as fwd, Operands};
use crate::record::{Check, Record, Res, Sink};

/// Relative error (norm) a bf16 gradient passes with: its own rounding (`2^-9`) and the fused
/// rung's bf16 `P` and `dS`, with room.
const TOL: f64 = 1e-2;

/// Rows (query or key) per sampled head of the check.
const SAMPLED_ROWS: usize = 32;

/// Keys up to which the rows rung is timed.
const ROWS_MAX_SEQ: usize = 4096;

/// The implementations of one shape: the plan's choice, the Hopper rung (`gpukern:wgmma`) and
/// its one-kernel form (`gpukern:wgmma-fused`; both counted where they may not run: a GPU
/// without `wgmma` records their errors) and the fused `mma.sync` rung where they apply, the rows
/// rung up to [`ROWS_MAX_SEQ`].
fn algorithms(seq: usize, head_dim: usize) -> Vec<AttentionAlgorithm> {
    let mut all = vec![AttentionAlgorithm::Auto];
    if head_dim == 64 || head_dim == 128 {
        all.push(AttentionAlgorithm::Wgmma);
        all.push(AttentionAlgorithm::WgmmaFused);
        all.push(AttentionAlgorithm::Flash);
    }
    if seq <= ROWS_MAX_SEQ {
        all.push(AttentionAlgorithm::Rows);
    }
    all
}

/// Measurements [`attention_bwd`] makes.
pub fn planned(quick: bool) -> usize {
    fwd::shapes(quick)
        .iter()
        .map(|&[_, s, _, d]| 2 * algorithms(s, d).len())
        .sum()
}

/// The backward's flops (2.5 times the forward's, halved for causal).
pub fn flops([b, s, h, d]: [usize; 4], causal: bool) -> f64 {
    let full = crate::suite::flops(
        "attention_bwd",
        &[("b", b), ("seq", s), ("heads", h), ("head_dim", d)],
    );
    if causal { full / 2.0 } else { full }
}

/// The backward's own inputs and outputs for one mask: `dO` (host and device), the forward's
/// output and log-sum-exp (device and host), the gradients.
pub struct Backward {
    d_out_host: Vec<bf16>,
    d_out: DeviceVec<bf16>,
    out_host: Vec<bf16>,
    lse_host: Vec<f32>,
    grads: [DeviceVec<bf16>; 3],
}

/// `dO` random, the forward (the plan's choice) run once with `options`' mask (`causal` or
/// `mask`; its algorithm unread).
pub fn prepare(gpu: &Gpu, ops: &mut Operands, options: &AttentionOptions) -> Res<Backward> {
    let n: usize = ops.dims.iter().product();
    let mut rng = StdRng::seed_from_u64(rand::rng().random());
    let d_out_host: Vec<bf16> = (0..n)
        .map(|_| bf16::from_f32(rng.random_range(-1.0f32..1.0)))
        .collect();
    let options = AttentionOptions {
        algorithm: AttentionAlgorithm::Auto,
        ..*options
    };
    fwd::run(gpu, ops, &options)?;
    Ok(Backward {
        d_out: gpu.upload(&d_out_host)?,
        d_out_host,
        out_host: ops.out.to_vec()?,
        lse_host: ops.lse.to_vec()?,
        grads: [gpu.zeros_of(n)?, gpu.zeros_of(n)?, gpu.zeros_of(n)?],
    })
}

/// One backward call into `bw.grads`.
pub fn run(gpu: &Gpu, ops: &Operands, bw: &mut Backward, options: &AttentionOptions) -> gpukern::Result<()> {
    let t = |x| AttentionTensor::contiguous(x, ops.dims);
    let [dq, dk, dv] = &mut bw.grads;
    gpu.attention_backward_into(
        &t(&bw.d_out)?,
        &t(&ops.dev[0])?,
        &t(&ops.dev[1])?,
        &t(&ops.dev[2])?,
        &t(&ops.out)?,
        &ops.lse,
        options,
        dq,
        dk,
        dv,
    )
}

/// The sampled rows of one sequence: 32 spread over it, the last among them.
fn sampled_rows(s: usize) -> Vec<usize> {
    (0..SAMPLED_ROWS.min(s))
        .map(|r| {
            if SAMPLED_ROWS >= s {
                r
            } else {
                r * (s - 1) / (SAMPLED_ROWS - 1)
            }
        })
        .collect()
}

/// The sampled heads of batch 0.
fn sampled_heads(h: usize) -> Vec<usize> {
    if h > 1 { vec![0, h - 1] } else { vec![0] }
}

/// The f64 gradients of the sampled rows (batch 0): `dq` of the sampled query rows, then `dk`
/// and `dv` of the sampled key rows, head after head, row after row of `head_dim` values; the
/// pairs row `i`, key `j` that `keeps(i, j)` (the mask, written out by the caller), each scaled
/// score `x` through `score(head, i, j, x)`, which gives the modified score and its derivative
/// (ALiBi's bias, the soft cap; [`plain_score`] for none); the derivative multiplies `dS`.
pub fn reference(
    ops: &Operands,
    bw: &Backward,
    keeps: impl Fn(usize, usize) -> bool,
    score: impl Fn(usize, usize, usize, f64) -> (f64, f64),
) -> [Vec<f32>; 3] {
    let [_, s, h, d] = ops.dims;
    let scale = 1.0 / (d as f64).sqrt();
    let at = |x: &[bf16], i: usize, hh: usize, c: usize| f64::from(x[(i * h + hh) * d + c].to_f32());
    let dot = |x: &[bf16], i: usize, y: &[bf16], j: usize, hh: usize| {
        (0..d).map(|c| at(x, i, hh, c) * at(y, j, hh, c)).sum::<f64>()
    };
    let (q, k, v, g, o) = (
        &ops.host[0],
        &ops.host[1],
        &ops.host[2],
        &bw.d_out_host,
        &bw.out_host,
    );
    let (mut dq, mut dk, mut dv) = (Vec::new(), Vec::new(), Vec::new());
    for hh in sampled_heads(h) {
        let lse = |i: usize| f64::from(bw.lse_host[hh * s + i]);
        let delta: Vec<f64> = (0..s).map(|i| dot(g, i, o, i, hh)).collect();
        for &i in &sampled_rows(s) {
            let mut acc = vec![0.0f64; d];
            for j in (0..s).filter(|&j| keeps(i, j)) {
                let (x, grad) = score(hh, i, j, scale * dot(q, i, k, j, hh));
                let p = (x - lse(i)).exp();
                let ds = p * (dot(g, i, v, j, hh) - delta[i]) * grad;
                acc.iter_mut()
                    .enumerate()
                    .for_each(|(c, a)| *a += scale * ds * at(k, j, hh, c));
            }
            dq.extend(acc.iter().map(|&x| x as f32));
        }
        for &j in &sampled_rows(s) {
            let (mut ak, mut av) = (vec![0.0f64; d], vec![0.0f64; d]);
            for (i, &delta_i) in delta.iter().enumerate().filter(|&(i, _)| keeps(i, j)) {
                let (x, grad) = score(hh, i, j, scale * dot(q, i, k, j, hh));
                let p = (x - lse(i)).exp();
                let ds = p * (dot(g, i, v, j, hh) - delta_i) * grad;
                for c in 0..d {
                    ak[c] += scale * ds * at(q, i, hh, c);
                    av[c] += p * at(g, i, hh, c);
                }
            }
            dk.extend(ak.iter().map(|&x| x as f32));
            dv.extend(av.iter().map(|&x| x as f32));
        }
    }
    [dq, dk, dv]
}

/// Every score as it is, derivative 1 ([`reference`]).
pub fn plain_score(_: usize, _: usize, _: usize, x: f64) -> (f64, f64) {
    (x, 1.0)
}

/// The pairs of the causal mask (`j <= i`), or every pair.
fn causal_keeps(causal: bool) -> impl Fn(usize, usize) -> bool {
    move |i, j| !causal || j <= i
}

/// The sampled rows of the gradients on the device, in [`reference`]'s order.
fn sampled(ops: &Operands, bw: &Backward) -> Res<[Vec<f32>; 3]> {
    let [_, s, h, d] = ops.dims;
    let pick = |x: &DeviceVec<bf16>| -> Res<Vec<f32>> {
        let all = x.to_vec()?;
        Ok(sampled_heads(h)
            .into_iter()
            .flat_map(|hh| sampled_rows(s).into_iter().map(move |i| (hh, i)))
            .flat_map(|(hh, i)| {
                all[(i * h + hh) * d..][..d]
                    .iter()
                    .map(|x| x.to_f32())
                    .collect::<Vec<_>>()
            })
            .collect())
    };
    Ok([pick(&bw.grads[0])?, pick(&bw.grads[1])?, pick(&bw.grads[2])?])
}

/// One call with `options` (the gradients zeroed first) checked on the sampled rows: the worst
/// of the three gradients' checks.
pub fn check(
    gpu: &Gpu,
    ops: &Operands,
    bw: &mut Backward,
    options: &AttentionOptions,
    want: &[Vec<f32>; 3],
) -> Res<Check> {
    let n = bw.grads[0].len();
    bw.grads = [gpu.zeros_of(n)?, gpu.zeros_of(n)?, gpu.zeros_of(n)?];
    run(gpu, ops, bw, options)?;
    let got = sampled(ops, bw)?;
    let checks: Vec<Check> = (0..3)
        .map(|x| Check::new(&got[x], &want[x], TOL, "cpu_f64"))
        .collect();
    let worst = checks
        .into_iter()
        .max_by(|a, b| {
            let key = |c: &Check| {
                if c.rel_err.is_nan() {
                    f64::INFINITY
                } else {
                    c.rel_err
                }
            };
            key(a).total_cmp(&key(b))
        })
        .ok_or("no check")?;
    Ok(worst)
}

/// Every shape, causal and not, every implementation.
pub fn attention_bwd(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for dims in fwd::shapes(b.quick) {
        let [batch, seq, heads, head_dim] = dims;
        let shape = format!("{batch}x{seq}x{heads}x{head_dim}");
        if !b.wants(&shape) {
            continue;
        }
        let mut prepared: Option<Operands> = None;
        for causal in [false, true] {
            let mut state: Option<(Backward, [Vec<f32>; 3])> = None;
            for algorithm in algorithms(seq, head_dim) {
                let options = AttentionOptions {
                    causal,
                    scale: None,
                    algorithm,
                    ..Default::default()
                };
                let base = Record::new("attention_bwd", fwd::impl_name(algorithm), shape.clone())
                    .with("b", batch)
                    .with("seq", seq)
                    .with("heads", heads)
                    .with("head_dim", head_dim)
                    .with("causal", causal)
                    .with("dtype", "bf16")
                    .with("call", "gpu.attention_backward_into");
                sink.item(base.clone(), || {
                    let gpu = &b.gpu;
                    if prepared.is_none() {
                        prepared = Some(fwd::prepare(gpu, dims)?);
                    }
                    let Some(ops) = prepared.as_mut() else {
                        return Err("attention operands were not prepared".into());
                    };
                    if state.is_none() {
                        let bw = prepare(gpu, ops, &options)?;
                        let want = reference(ops, &bw, causal_keeps(causal), plain_score);
                        state = Some((bw, want));
                    }
                    let Some((bw, want)) = state.as_mut() else {
                        return Err("no backward inputs".into());
                    };
                    let check = check(gpu, ops, bw, &options, want)?;
                    let record = base.checked(&check);
                    if !check.passed() {
                        return Ok(record);
                    }
                    let stats = b.timer.measure(|_| {
                        run(gpu, ops, bw, &options)?;
                        Ok(())
                    })?;
                    Ok(record.timed(&stats, None, Some(flops(dims, causal))))
                })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_are_two_and_a_half_forwards() {
        assert_eq!(flops([1, 4, 2, 8], false), 2.5 * fwd::flops([1, 4, 2, 8], false));
        assert_eq!(flops([1, 4, 2, 8], true), 2.5 * fwd::flops([1, 4, 2, 8], true));
    }

    /// The prepare-and-check path on the simulator (a ragged shape, both rungs, causal and
    /// not); the reference of the other mask must fail the check.
    #[test]
    fn checks_pass_on_the_simulator_and_can_fail() {
        let gpu = Gpu::simulator();
        let mut ops = fwd::prepare(&gpu, [1, 33, 1, 64]).unwrap();
        for causal in [false, true] {
            let plain = AttentionOptions {
                causal,
                ..Default::default()
            };
            let mut bw = prepare(&gpu, &mut ops, &plain).unwrap();
            let want = reference(&ops, &bw, causal_keeps(causal), plain_score);
            for algorithm in [
                AttentionAlgorithm::Wgmma,
                AttentionAlgorithm::WgmmaFused,
                AttentionAlgorithm::Flash,
                AttentionAlgorithm::Rows,
            ] {
                let options = AttentionOptions {
                    causal,
                    scale: None,
                    algorithm,
                    ..Default::default()
                };
                let c = check(&gpu, &ops, &mut bw, &options, &want).unwrap();
                assert!(c.passed(), "{algorithm:?} causal {causal}: {}", c.rel_err);
            }
            let wrong = reference(&ops, &bw, causal_keeps(!causal), no_bias);
            let options = AttentionOptions {
                causal,
                ..Default::default()
            };
            let c = check(&gpu, &ops, &mut bw, &options, &wrong).unwrap();
            assert!(!c.passed(), "the other mask's reference passed");
        }
    }

    /// The same with a sliding window (the masked rows of `attention_masks`): the plan's choice
    /// (the one-kernel rung's masked instance) and the rows rung pass against the window's
    /// reference, and fail against the causal one's.
    #[test]
    fn masked_checks_pass_on_the_simulator_and_can_fail() {
        let gpu = Gpu::simulator();
        let mut ops = fwd::prepare(&gpu, [1, 70, 1, 64]).unwrap();
        let window = AttentionOptions {
            mask: gpukern::AttentionMask::SlidingWindow { window: 9 },
            ..Default::default()
        };
        let mut bw = prepare(&gpu, &mut ops, &window).unwrap();
        let want = reference(&ops, &bw, |i, j| j <= i && i - j < 9, no_bias);
        for algorithm in [AttentionAlgorithm::Auto, AttentionAlgorithm::Rows] {
            let options = AttentionOptions { algorithm, ..window };
            let c = check(&gpu, &ops, &mut bw, &options, &want).unwrap();
            assert!(c.passed(), "{algorithm:?}: {}", c.rel_err);
        }
        let wrong = reference(&ops, &bw, causal_keeps(true), no_bias);
        let c = check(&gpu, &ops, &mut bw, &window, &wrong).unwrap();
        assert!(!c.passed(), "the causal reference passed a window");
    }
}
