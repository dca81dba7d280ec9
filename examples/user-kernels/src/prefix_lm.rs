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

/// The prefix-LM mask's attention kernels, from this crate's PTX.
pub static PREFIX_LM: MaskKernels = gpukern::attention_mask_kernels!(crate::KERNELS, fast_kernels::prefix_lm);

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
    let PrefixCase {
        batch,
        q_len,
        kv_len,
        heads,
        kv_heads,
        head_dim,
        prefix,
        kernel_prefix,
    } = case;
    let mut s = seed | 1;
    let mut random = |n: usize| -> Vec<T> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                T::from_f32((s % 2001) as f32 / 1000.0 - 1.0)
            })
            .collect()
    };
    let (q_dims, kv_dims) = (
        [batch, q_len, heads, head_dim],
        [batch, kv_len, kv_heads, head_dim],
    );
    let (q, k, v) = (
        random(q_dims.iter().product()),
        random(kv_dims.iter().product()),
        random(kv_dims.iter().product()),
    );
    let (qd, kd, vd) = (gpu.upload(&q)?, gpu.upload(&k)?, gpu.upload(&v)?);
    let keep =
        move |_: usize, _: usize, i: usize, j: usize| reference::prefix_lm_keeps(prefix, q_len, kv_len, i, j);
    let reference_mask = CustomMask::new(&PREFIX_LM).int(prefix).reference(&keep);
    let kernel_mask = CustomMask::new(&PREFIX_LM).int(kernel_prefix);
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
    let array = |data: Vec<T>, [a, b, c, d]: [usize; 4]| {
        Array4::from_shape_vec((a, b, c, d), data).map_err(|e| Error::InvalidArgument {
            op: "prefix_lm_check",
            detail: e.to_string(),
        })
    };
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
