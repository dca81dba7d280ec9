//! Attention with the crate's own mask ([`fast_kernels::PrefixLm`], compiled into the library's
//! attention kernels in `kernels/`): its kernels gathered for `AttentionMask::Custom`
//! ([`PREFIX_LM`]), and the check of a call against gpukern's CPU reference with the mask written
//! out apart ([`reference::prefix_lm_keeps`]).

use gpukern::gpukern_device::convert::Float;
use gpukern::{
    AttentionAlgorithm, AttentionElement, AttentionMask, AttentionOptions, AttentionTensor, CustomMask,
    Error, Gpu, MaskKernels, Result, bf16, f16,
};
use ndarray::Array4;

use crate::reference;

/// The prefix-LM mask's attention kernels, forward and backward, from this crate's PTX.
pub static PREFIX_LM: MaskKernels =
    gpukern::attention_mask_kernels!(crate::KERNELS, fast_kernels::prefix_lm, backward);

/// An element type of the check, with its unit roundoff.
pub trait Unit: AttentionElement + Float {
    /// Half the distance from 1 to the next number of the type.
    const UNIT: f64;
}

impl Unit for bf16 {
    const UNIT: f64 = 1.0 / 256.0;
}

impl Unit for f16 {
    const UNIT: f64 = 1.0 / 2048.0;
}

/// One prefix-LM call: `q` `[batch, q_len, heads, head_dim]`, `k` and `v` `[batch, kv_len,
/// kv_heads, head_dim]`, the mask's prefix as the reference sees it (`prefix`) and as the kernels
/// get it (`kernel_prefix`: the same but where a check plants a wrong one).
#[derive(Clone, Copy, Debug)]
pub struct PrefixCase {
    pub batch: usize,
    pub q_len: usize,
    pub kv_len: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub prefix: usize,
    pub kernel_prefix: usize,
}

impl PrefixCase {
    /// A case whose kernels get the reference's prefix.
    pub fn new([batch, q_len, kv_len, heads, kv_heads, head_dim]: [usize; 6], prefix: usize) -> PrefixCase {
        PrefixCase {
            batch,
            q_len,
            kv_len,
            heads,
            kv_heads,
            head_dim,
            prefix,
            kernel_prefix: prefix,
        }
    }
}

/// `n` random elements in `[-1, 1)` (xorshift from `state`, which moves on).
fn random<T: Unit>(state: &mut u64, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            T::from_f32((*state % 2001) as f32 / 1000.0 - 1.0)
        })
        .collect()
}

/// The operands of `case` (`q`, `k`, `v`, random from `seed`) and their dims (`q`'s, then `k`'s
/// and `v`'s).
#[allow(clippy::type_complexity)]
fn operands<T: Unit>(case: &PrefixCase, seed: u64) -> ((Vec<T>, Vec<T>, Vec<T>), ([usize; 4], [usize; 4])) {
    let (q_dims, kv_dims) = (
        [case.batch, case.q_len, case.heads, case.head_dim],
        [case.batch, case.kv_len, case.kv_heads, case.head_dim],
    );
    let mut state = seed | 1;
    let q = random(&mut state, q_dims.iter().product());
    let k = random(&mut state, kv_dims.iter().product());
    let v = random(&mut state, kv_dims.iter().product());
    ((q, k, v), (q_dims, kv_dims))
}

/// `data` as a 4-D array of `dims`.
fn array<T>(data: Vec<T>, [a, b, c, d]: [usize; 4]) -> Result<Array4<T>> {
    Array4::from_shape_vec((a, b, c, d), data).map_err(|e| Error::InvalidArgument {
        op: "prefix_lm_check",
        detail: e.to_string(),
    })
}

/// Random operands in `[-1, 1)` (xorshift from `seed`), attention on `gpu` with the prefix-LM
/// mask by `algorithm`, and gpukern's CPU reference (f64) with the mask written out: the worst
/// error over its tolerance, at most 1 when the call passes. The tolerances: the output within
/// `UNIT + 2 UNIT |want|` (the fused rungs' rounded probabilities, `|v| < 1`, and the output's
/// rounding), the log-sum-exp within `1e-4 + 1e-5 |want|`, infinities where the reference's are.
pub fn prefix_lm_check<T: Unit>(
    gpu: &Gpu,
    case: PrefixCase,
    algorithm: AttentionAlgorithm,
    seed: u64,
) -> Result<f64> {
    let ((q, k, v), (q_dims, kv_dims)) = operands::<T>(&case, seed);
    let (qd, kd, vd) = (gpu.upload(&q)?, gpu.upload(&k)?, gpu.upload(&v)?);
    let (prefix, q_len, kv_len) = (case.prefix, case.q_len, case.kv_len);
    let keep =
        move |_: usize, _: usize, i: usize, j: usize| reference::prefix_lm_keeps(prefix, q_len, kv_len, i, j);
    let reference_mask = CustomMask::new(&PREFIX_LM).int(prefix).reference(&keep);
    let kernel_mask = CustomMask::new(&PREFIX_LM).int(case.kernel_prefix);
    let options = |mask| AttentionOptions {
        mask: AttentionMask::Custom(mask),
        algorithm,
        ..Default::default()
    };
    let got = gpu.attention(
        &AttentionTensor::contiguous(&qd, q_dims)?,
        &AttentionTensor::contiguous(&kd, kv_dims)?,
        &AttentionTensor::contiguous(&vd, kv_dims)?,
        &options(&kernel_mask),
    )?;
    let (want_out, want_lse) = gpukern::cpu::attention(
        &array(q, q_dims)?,
        &array(k, kv_dims)?,
        &array(v, kv_dims)?,
        &options(&reference_mask),
    )?;
    // The references in their logical (row-major) order, as the kernels write theirs.
    let want_out: Vec<f64> = want_out.iter().map(|&x| f64::from(x)).collect();
    let want_lse: Vec<f64> = want_lse.iter().map(|&x| f64::from(x)).collect();
    let out = got.out.to_vec()?.into_iter().map(|x| f64::from(x.to_f32()));
    let lse = got.lse.to_vec()?.into_iter().map(f64::from);
    Ok(reference::worst_ratio(out, &want_out, T::UNIT, 2.0 * T::UNIT)
        .max(reference::worst_ratio(lse, &want_lse, 1e-4, 1e-5)))
}

/// The backward of one prefix-LM call by `algorithm` (the backward's rung) against gpukern's CPU
/// backward (f64 on the same rounded inputs): operands as [`prefix_lm_check`]'s, `d_out` random
/// too, the forward's output and log-sum-exp the CPU reference's (the output rounded to `T`), so
/// that the backward's kernels alone are checked. The worst error over its tolerance, at most 1
/// when the call passes: each element of `dq`, `dk`, `dv` within `UNIT |want| + 2 UNIT terms +
/// 1e-5`, `terms` the reference's sum of the absolute values of the element's terms
/// (`cpu::AttentionBackward::*_terms`: the gradient's own rounding, the output given rounded,
/// the `mma.sync` rung's `P` and `dS` rounded to `T`), the library's backward trials' measure.
pub fn prefix_lm_backward_check<T: Unit>(
    gpu: &Gpu,
    case: PrefixCase,
    algorithm: AttentionAlgorithm,
    seed: u64,
) -> Result<f64> {
    let ((q, k, v), (q_dims, kv_dims)) = operands::<T>(&case, seed);
    let d_out: Vec<T> = random(&mut (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1), q.len());
    let (prefix, q_len, kv_len) = (case.prefix, case.q_len, case.kv_len);
    let keep =
        move |_: usize, _: usize, i: usize, j: usize| reference::prefix_lm_keeps(prefix, q_len, kv_len, i, j);
    let reference_mask = CustomMask::new(&PREFIX_LM).int(prefix).reference(&keep);
    let kernel_mask = CustomMask::new(&PREFIX_LM).int(case.kernel_prefix);
    let reference_options = AttentionOptions {
        mask: AttentionMask::Custom(&reference_mask),
        ..Default::default()
    };
    let (qd, kd, vd, gd) = (
        gpu.upload(&q)?,
        gpu.upload(&k)?,
        gpu.upload(&v)?,
        gpu.upload(&d_out)?,
    );
    let (qa, ka, va, ga) = (
        array(q, q_dims)?,
        array(k, kv_dims)?,
        array(v, kv_dims)?,
        array(d_out, q_dims)?,
    );
    let (out, lse) = gpukern::cpu::attention(&qa, &ka, &va, &reference_options)?;
    let out: Vec<T> = out.iter().map(|&x| T::from_f32(x)).collect();
    let lse: Vec<f32> = lse.iter().copied().collect();
    let want = gpukern::cpu::attention_backward(&ga, &qa, &ka, &va, &reference_options)?;
    let (od, lsed) = (gpu.upload(&out)?, gpu.upload(&lse)?);
    let got = gpu.attention_backward(
        &AttentionTensor::contiguous(&gd, q_dims)?,
        &AttentionTensor::contiguous(&qd, q_dims)?,
        &AttentionTensor::contiguous(&kd, kv_dims)?,
        &AttentionTensor::contiguous(&vd, kv_dims)?,
        &AttentionTensor::contiguous(&od, q_dims)?,
        &lsed,
        &AttentionOptions {
            mask: AttentionMask::Custom(&kernel_mask),
            algorithm,
            ..Default::default()
        },
    )?;
    let mut worst: f64 = 0.0;
    for (got, want, terms) in [
        (&got.dq, &want.dq, &want.dq_terms),
        (&got.dk, &want.dk, &want.dk_terms),
        (&got.dv, &want.dv, &want.dv_terms),
    ] {
        for ((g, &w), &t) in got.to_vec()?.into_iter().zip(want.iter()).zip(terms.iter()) {
            let (g, w) = (f64::from(g.to_f32()), f64::from(w));
            let bound = T::UNIT * w.abs() + 2.0 * T::UNIT * f64::from(t) + 1e-5;
            let ratio = if g.is_finite() {
                (g - w).abs() / bound
            } else {
                f64::INFINITY
            };
            worst = worst.max(ratio);
        }
    }
    Ok(worst)
}
