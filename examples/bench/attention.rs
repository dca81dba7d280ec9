//! Attention forward on bf16 (`gpu.attention_into`, head dim 128 and the shapes:
//! 16k tokens per batch, heads x head dim = 2048), causal and not: the plan's choice
//! (`gpukern`) and each rung asked for (`gpukern:wgmma` on a GPU with `wgmma`, `gpukern:flash`,
//! `gpukern:rows`; the rows rung only up to 4k keys, where it takes seconds, not minutes).
//!
//! Rates as FlashAttention counts them: `4 batch heads seq^2 head_dim` flops per forward,
//! halved with the causal mask. Each output is checked before it is timed, on sampled rows
//! (batch 0, the first and last heads, 32 query rows spread over the sequence, the last among
//! them) against the f64 reference of the same rounded inputs.

use gpukern::{AttentionAlgorithm, AttentionOptions, AttentionTensor, DeviceVec, Gpu, bf16};
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::Bench;
use crate::record::{Check, Record, Res, Sink};

/// Relative error (norm) a bf16 output passes with: its own rounding (`2^-9`) and the fused
/// rung's bf16 probabilities, with room.
const TOL: f64 = 1e-2;

/// Query rows per sampled head of the check.
const SAMPLED_ROWS: usize = 32;

/// Keys up to which the rows rung is timed.
const ROWS_MAX_SEQ: usize = 4096;

/// `(batch, seq, heads, head_dim)` measured.
pub fn shapes(quick: bool) -> Vec<[usize; 4]> {
    crate::suite::shapes("attention", quick)
        .into_iter()
        .map(|s| [s[0], s[1], s[2], s[3]])
        .collect()
}

/// The implementations of one shape: the plan's choice, the Hopper rung (`gpukern:wgmma`,
/// counted where it may not run: a GPU without `wgmma` records its error) and the fused
/// `mma.sync` rung where they apply, the rows rung up to [`ROWS_MAX_SEQ`].
fn algorithms(seq: usize, head_dim: usize) -> Vec<AttentionAlgorithm> {
    let mut all = vec![AttentionAlgorithm::Auto];
    if head_dim == 64 || head_dim == 128 || head_dim == 256 {
        all.push(AttentionAlgorithm::Wgmma);
        all.push(AttentionAlgorithm::WgmmaPingPong);
        all.push(AttentionAlgorithm::WgmmaPersistent);
    }
    if head_dim == 64 || head_dim == 128 {
        all.push(AttentionAlgorithm::Flash);
    }
    if seq <= ROWS_MAX_SEQ {
        all.push(AttentionAlgorithm::Rows);
    }
    all
}

/// Measurements [`attention`] makes.
pub fn planned(quick: bool) -> usize {
    shapes(quick)
        .iter()
        .map(|&[_, s, _, d]| 2 * algorithms(s, d).len())
        .sum()
}

/// The record's `impl`: `gpukern` for the plan's choice, `gpukern:<rung>` for a rung asked for.
pub fn impl_name(algorithm: AttentionAlgorithm) -> String {
    match algorithm {
        AttentionAlgorithm::Auto => "gpukern".to_string(),
        a => format!("gpukern:{}", a.name()),
    }
}

/// The forward's flops (FlashAttention's count, halved for causal).
pub fn flops([b, s, h, d]: [usize; 4], causal: bool) -> f64 {
    let full = crate::suite::flops(
        "attention_fwd",
        &[("b", b), ("seq", s), ("heads", h), ("head_dim", d)],
    );
    if causal { full / 2.0 } else { full }
}

/// The inputs of one shape: `q`, `k`, `v` on the host (bf16 in [-1, 1)) and on the device.
pub struct Operands {
    pub dims: [usize; 4],
    pub host: [Vec<bf16>; 3],
    pub dev: [DeviceVec<bf16>; 3],
    pub out: DeviceVec<bf16>,
    pub lse: DeviceVec<f32>,
}

/// Fresh random operands of `dims`.
pub fn prepare(gpu: &Gpu, dims: [usize; 4]) -> Res<Operands> {
    let n: usize = dims.iter().product();
    let mut rng = StdRng::seed_from_u64(rand::rng().random());
    let mut random = || -> Vec<bf16> {
        (0..n)
            .map(|_| bf16::from_f32(rng.random_range(-1.0f32..1.0)))
            .collect()
    };
    let host = [random(), random(), random()];
    let dev = [
        gpu.upload(&host[0])?,
        gpu.upload(&host[1])?,
        gpu.upload(&host[2])?,
    ];
    let [b, s, h, _] = dims;
    Ok(Operands {
        dims,
        host,
        dev,
        out: gpu.zeros_of(n)?,
        lse: gpu.zeros_of(b * h * s)?,
    })
}

/// One call into `ops.out` / `ops.lse`.
pub fn run(gpu: &Gpu, ops: &mut Operands, options: &AttentionOptions) -> gpukern::Result<()> {
    let t = |x| AttentionTensor::contiguous(x, ops.dims);
    let (q, k, v) = (t(&ops.dev[0])?, t(&ops.dev[1])?, t(&ops.dev[2])?);
    gpu.attention_into(&q, &k, &v, options, &mut ops.out, &mut ops.lse)
}

/// The sampled `(head, row)` pairs of batch 0.
pub fn samples([_, s, h, _]: [usize; 4]) -> Vec<(usize, usize)> {
    let rows: Vec<usize> = (0..SAMPLED_ROWS.min(s))
        .map(|r| {
            if SAMPLED_ROWS >= s {
                r
            } else {
                r * (s - 1) / (SAMPLED_ROWS - 1)
            }
        })
        .collect();
    let heads = if h > 1 { vec![0, h - 1] } else { vec![0] };
    heads
        .into_iter()
        .flat_map(|hh| rows.iter().map(move |&i| (hh, i)))
        .collect()
}

/// The f64 reference of the sampled rows (batch 0), row after row of `head_dim` values.
pub fn reference(ops: &Operands, options: &AttentionOptions) -> Vec<f32> {
    let [_, s, h, d] = ops.dims;
    let scale = f64::from(options.scale.unwrap_or(1.0 / (d as f32).sqrt()));
    let at = |x: &Vec<bf16>, i: usize, hh: usize, j: usize| f64::from(x[(i * h + hh) * d + j].to_f32());
    let mut out = Vec::new();
    for (hh, i) in samples(ops.dims) {
        let keys = if options.causal { i + 1 } else { s };
        let scores: Vec<f64> = (0..keys)
            .map(|j| {
                scale
                    * (0..d)
                        .map(|x| at(&ops.host[0], i, hh, x) * at(&ops.host[1], j, hh, x))
                        .sum::<f64>()
            })
            .collect();
        let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
        let sum: f64 = w.iter().sum();
        for x in 0..d {
            let acc: f64 = (0..keys).map(|j| w[j] * at(&ops.host[2], j, hh, x)).sum();
            out.push((acc / sum) as f32);
        }
    }
    out
}

/// The sampled rows of the output on the device.
pub fn sampled_output(ops: &Operands) -> Res<Vec<f32>> {
    let [_, _, h, d] = ops.dims;
    let all = ops.out.to_vec()?;
    Ok(samples(ops.dims)
        .into_iter()
        .flat_map(|(hh, i)| {
            all[(i * h + hh) * d..][..d]
                .iter()
                .map(|x| x.to_f32())
                .collect::<Vec<_>>()
        })
        .collect())
}

/// One call with `options` (the output zeroed first) checked on the sampled rows.
pub fn check(gpu: &Gpu, ops: &mut Operands, options: &AttentionOptions, want: &[f32]) -> Res<Check> {
    ops.out = gpu.zeros_of(ops.out.len())?;
    run(gpu, ops, options)?;
    Ok(Check::new(&sampled_output(ops)?, want, TOL, "cpu_f64"))
}

/// One shape's operands, made at its first item, and the reference of the options timed,
/// computed at the first item that needs it (`want`: cleared by the caller when the options
/// change the reference).
pub struct Prepared {
    dims: [usize; 4],
    ops: Option<Operands>,
    pub want: Option<Vec<f32>>,
}

impl Prepared {
    /// Nothing made yet for a shape of `dims`.
    pub fn new(dims: [usize; 4]) -> Self {
        Prepared {
            dims,
            ops: None,
            want: None,
        }
    }

    /// One item: the operands and the reference (`reference`) made if not yet, one call with
    /// `options` checked on the sampled rows ([`check`]), then timed if it passed, `flops` a call.
    pub fn check_and_time(
        &mut self,
        b: &mut Bench,
        base: Record,
        options: &AttentionOptions,
        reference: impl FnOnce(&Operands) -> Vec<f32>,
        flops: f64,
    ) -> Res<Record> {
        let gpu = &b.gpu;
        if self.ops.is_none() {
            self.ops = Some(prepare(gpu, self.dims)?);
        }
        let Some(ops) = self.ops.as_mut() else {
            return Err("attention operands were not prepared".into());
        };
        if self.want.is_none() {
            self.want = Some(reference(ops));
        }
        let Some(want) = self.want.as_ref() else {
            return Err("no reference".into());
        };
        let check = check(gpu, ops, options, want)?;
        let record = base.checked(&check);
        if !check.passed() {
            return Ok(record);
        }
        let stats = b.timer.measure(|_| {
            run(gpu, ops, options)?;
            Ok(())
        })?;
        Ok(record.timed(&stats, None, Some(flops)))
    }
}

/// Every shape, causal and not, every implementation.
pub fn attention(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for dims in shapes(b.quick) {
        let [batch, seq, heads, head_dim] = dims;
        let shape = format!("{batch}x{seq}x{heads}x{head_dim}");
        if !b.wants(&shape) {
            continue;
        }
        let mut prepared = Prepared::new(dims);
        for causal in [false, true] {
            prepared.want = None;
            for algorithm in algorithms(seq, head_dim) {
                let options = AttentionOptions {
                    causal,
                    scale: None,
                    algorithm,
                    ..Default::default()
                };
                let base = Record::new("attention_fwd", impl_name(algorithm), shape.clone())
                    .with("b", batch)
                    .with("seq", seq)
                    .with("heads", heads)
                    .with("head_dim", head_dim)
                    .with("causal", causal)
                    .with("dtype", "bf16")
                    .with("call", "gpu.attention_into");
                sink.item(base.clone(), || {
                    let flops = flops(dims, causal);
                    prepared.check_and_time(b, base, &options, |ops| reference(ops, &options), flops)
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
    fn shapes_and_flops() {
        assert!(shapes(false).contains(&[1, 16384, 16, 128]));
        assert_eq!(flops([1, 4, 2, 8], false), (4 * 2 * 4 * 4 * 8) as f64);
        assert_eq!(flops([1, 4, 2, 8], true), (2 * 2 * 4 * 4 * 8) as f64);
        assert_eq!(samples([1, 5, 3, 8]).len(), 10);
        assert_eq!(samples([1, 1000, 1, 8]).last(), Some(&(0, 999)));
    }

    /// The prepare-and-check path on the simulator (a ragged shape, both rungs, causal and
    /// not; small, as the simulator runs every lane); a reference of other inputs must fail the check.
    #[test]
    fn checks_pass_on_the_simulator_and_can_fail() {
        let gpu = Gpu::simulator();
        let mut ops = prepare(&gpu, [1, 33, 1, 64]).unwrap();
        for causal in [false, true] {
            let options = AttentionOptions {
                causal,
                ..Default::default()
            };
            let want = reference(&ops, &options);
            for algorithm in [
                AttentionAlgorithm::Wgmma,
                AttentionAlgorithm::Flash,
                AttentionAlgorithm::Rows,
            ] {
                let options = AttentionOptions { algorithm, ..options };
                let c = check(&gpu, &mut ops, &options, &want).unwrap();
                assert!(c.passed(), "{algorithm:?} causal {causal}: {}", c.rel_err);
            }
            let other = AttentionOptions {
                causal: !causal,
                ..options
            };
            let wrong = reference(&ops, &other);
            let c = check(&gpu, &mut ops, &options, &wrong).unwrap();
            assert!(!c.passed(), "the other mask's reference passed");
        }
    }
}
