//! Attention backward against `cpu::attention_backward` (f64 on the same rounded inputs, the
//! forward's output and log-sum-exp from the f64 forward rounded as the GPU's are): per backend,
//! element type and rung, ragged shapes (sequences 1 to 300, not multiples of 64; head dims 8 and
//! 40 for the rows rung, 64 and 128 for the fused one), causal and not, grouped-query heads,
//! `q_len != kv_len` both ways (rows that see no key, keys no row sees), strided `d_out`; the
//! errors and the empty cases (`errors::attention_backward`); on CUDA, sequences of thousands
//! (fused against rows), the same bits twice (determinism, the deterministic rungs and `Auto`
//! asked to be deterministic), and the
//! free function. The one-kernel Hopper rung (`WgmmaFused`, `dQ` by atomics) runs beside the
//! others in every case where it applies, and is an error when asked to be deterministic.
//!
//! Tolerance, from 16-bit rounding (`UNIT`, half an ulp relative): each gradient element
//! within `UNIT |want| + 2 UNIT terms + 1e-5`, where `terms` is the reference's sum of the
//! absolute values of the element's terms (`cpu::AttentionBackward::*_terms`): the output's
//! own rounding, the `O` given rounded to `UNIT` (through `D = dO . O`), and the fused rung's
//! rounding of `P` and `dS` to the element type (each term off by at most `UNIT` of itself).
//! The planted faults (`attention_backward_faults`) show this check failing a wrong kernel.

use gpukern::{
    AttentionAlgorithm, AttentionElement, AttentionOptions, AttentionTensor, Error, Gpu, bf16, cpu, f16,
};
use libtest_mimic::Trial;
use ndarray::Array4;
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};

/// One trial's sizes: batch, q_len, kv_len, heads, kv_heads, head_dim, causal.
pub(crate) type Case = (usize, usize, usize, usize, usize, usize, bool);

/// Simulator cases: tiny and ragged; the fused rung's two query tiles (q_len 70) and a key
/// tile past its first (kv_len 70), at head dims 64 and 128.
const SIM_CASES: &[Case] = &[
    (1, 7, 7, 2, 1, 8, true),
    (2, 5, 9, 4, 2, 40, false),
    (1, 9, 1, 2, 1, 8, true),
    (1, 33, 17, 2, 1, 64, false),
    (1, 70, 50, 2, 1, 64, true),
    (1, 20, 70, 2, 2, 64, true),
    (1, 17, 30, 2, 1, 128, true),
    // f16 at head dim 128 (odd places run f16): the fused rung's d128 f16 kernels in the
    // simulator, whose coverage check wants every entry launched.
    (1, 9, 20, 1, 1, 128, false),
];

/// Simulator cases of the one-kernel rung alone (`WgmmaFused`): several 128-key blocks adding
/// into each query tile's `dQ` (its reductions from several blocks), ragged; causal with q_len <
/// kv_len (every row sees keys of every block), GQA, at each head dim and element type.
const SIM_FUSED_CASES: &[Case] = &[
    (1, 20, 300, 2, 1, 128, true),
    (1, 24, 200, 2, 2, 128, false),
    (1, 20, 270, 2, 1, 64, true),
    (2, 9, 140, 1, 1, 64, false),
];

/// Simulator cases of every rung with several key blocks and query tiles: among the slow trials
/// (`slow_trials.rs`); the cases above launch the same kernels.
const SIM_SLOW_CASES: &[Case] = &[(1, 70, 260, 2, 1, 128, true), (2, 65, 140, 2, 1, 64, false)];

/// CUDA cases against the f64 reference: ragged lengths past a 64-row tile, every head-dim
/// class, GQA and MQA.
const CUDA_CASES: &[Case] = &[
    (1, 1, 1, 1, 1, 8, false),
    (2, 129, 129, 4, 2, 64, true),
    (1, 129, 129, 4, 2, 64, false),
    (1, 200, 333, 4, 1, 128, true),
    (1, 333, 200, 2, 2, 128, true),
    (1, 257, 257, 2, 2, 256, false),
    (1, 100, 100, 3, 3, 96, true),
    (1, 65, 130, 2, 1, 40, false),
];

/// CUDA cases of the fused rung against the rows rung (relative error norm within `4 UNIT`):
/// the bench's head dims at sequences of thousands, ragged.
const FUSED_VS_ROWS: &[Case] = &[
    (1, 2048, 2048, 4, 2, 128, true),
    (1, 1537, 3001, 4, 4, 64, true),
    (1, 2000, 1000, 2, 1, 128, false),
];

/// Every trial of the backward.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, cases) in [(sim, SIM_CASES), (cuda, CUDA_CASES)] {
        trials.push(trial(target, "errors::attention_backward", |gpu, _| errors(gpu)));
        trials.push(trial(target, "attention_backward::strided_d_out", strided_d_out));
        trials.push(trial(target, "attention_backward::unaligned_out", unaligned_out));
        let every = target.prefix != "sim";
        for (n, case) in cases.iter().enumerate() {
            let (name, case) = (case_name(case), *case);
            trials.push(if n % 2 == 0 {
                trial(
                    target,
                    &format!("attention_backward::bf16::{name}"),
                    move |gpu, rng| run_case::<bf16>(gpu, rng, case, every),
                )
            } else {
                trial(
                    target,
                    &format!("attention_backward::f16::{name}"),
                    move |gpu, rng| run_case::<f16>(gpu, rng, case, every),
                )
            });
        }
    }
    for (n, case) in SIM_FUSED_CASES.iter().enumerate() {
        let (name, case) = (case_name(case), *case);
        trials.push(if n % 2 == 0 {
            trial(
                sim,
                &format!("attention_backward::wgmma_fused::bf16::{name}"),
                move |gpu, rng| fused_case::<bf16>(gpu, rng, case),
            )
        } else {
            trial(
                sim,
                &format!("attention_backward::wgmma_fused::f16::{name}"),
                move |gpu, rng| fused_case::<f16>(gpu, rng, case),
            )
        });
    }
    for (n, case) in SIM_SLOW_CASES.iter().enumerate() {
        let (name, case) = (case_name(case), *case);
        trials.push(if n % 2 == 0 {
            trial(
                sim,
                &format!("attention_backward::bf16::{name}"),
                move |gpu, rng| run_case::<bf16>(gpu, rng, case, false),
            )
        } else {
            trial(
                sim,
                &format!("attention_backward::f16::{name}"),
                move |gpu, rng| run_case::<f16>(gpu, rng, case, false),
            )
        });
    }
    for (n, case) in FUSED_VS_ROWS.iter().enumerate() {
        let (name, case) = (case_name(case), *case);
        trials.push(if n % 2 == 0 {
            trial(
                cuda,
                &format!("attention_backward::flash_vs_rows::bf16::{name}"),
                move |gpu, rng| fused_vs_rows::<bf16>(gpu, rng, case),
            )
        } else {
            trial(
                cuda,
                &format!("attention_backward::flash_vs_rows::f16::{name}"),
                move |gpu, rng| fused_vs_rows::<f16>(gpu, rng, case),
            )
        });
    }
    trials.push(trial(cuda, "attention_backward::deterministic", deterministic));
    trials.extend(super::attention_backward_faults::trials(sim));
    trials.push(global_trial("attention_backward", global_backward));
    trials
}

/// The name of a case.
fn case_name(&(b, sq, skv, h, hk, d, causal): &Case) -> String {
    let mask = if causal { "causal" } else { "full" };
    format!("{b}x{sq}x{skv}x{h}h{hk}kv_d{d}_{mask}")
}

/// A test element: bf16 or f16, with its rounding unit (half an ulp relative).
pub(crate) trait TestElement: AttentionElement {
    const UNIT: f32;
}

impl TestElement for bf16 {
    const UNIT: f32 = 1.0 / 256.0;
}

impl TestElement for f16 {
    const UNIT: f32 = 1.0 / 2048.0;
}

/// A random `[b, s, h, d]` array of `T` in [-1, 1).
fn random4<T: TestElement>(rng: &mut StdRng, dims: [usize; 4]) -> Array4<T> {
    Array4::from_shape_fn(dims, |_| T::from_f32(rng.random_range(-1.0f32..1.0)))
}

/// Fails unless `got` is within `unit |want| + 2 unit terms + 1e-5` of `want` element by
/// element (the module documentation derives it).
pub(crate) fn check_gradient(what: &str, got: &[f32], want: &[f32], terms: &[f32], unit: f32) -> Check {
    if got.len() != want.len() || terms.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    match (0..got.len()).find(|&i| {
        let tol = 1e-5 + unit * want[i].abs() + 2.0 * unit * terms[i];
        let err = (got[i] - want[i]).abs();
        err.is_nan() || err > tol
    }) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: element {i} got {}, expected {} (terms {})",
            got[i], want[i], terms[i]
        )
        .into()),
    }
}

/// The three gradients against the reference.
pub(crate) fn check_all(what: &str, got: [&[f32]; 3], want: &cpu::AttentionBackward, unit: f32) -> Check {
    let flat = |a: &Array4<f32>| a.iter().copied().collect::<Vec<f32>>();
    check_gradient(
        &format!("{what}: dq"),
        got[0],
        &flat(&want.dq),
        &flat(&want.dq_terms),
        unit,
    )?;
    check_gradient(
        &format!("{what}: dk"),
        got[1],
        &flat(&want.dk),
        &flat(&want.dk_terms),
        unit,
    )?;
    check_gradient(
        &format!("{what}: dv"),
        got[2],
        &flat(&want.dv),
        &flat(&want.dv_terms),
        unit,
    )
}

/// The inputs of one case: `q`, `k`, `v`, `d_out`, and the forward's output (rounded to `T`)
/// and log-sum-exp from the f64 forward.
pub(crate) struct Inputs<T> {
    pub(crate) q: Array4<T>,
    pub(crate) k: Array4<T>,
    pub(crate) v: Array4<T>,
    pub(crate) d_out: Array4<T>,
    out: Array4<T>,
    lse: Vec<f32>,
}

pub(crate) fn inputs<T: TestElement>(
    rng: &mut StdRng,
    (b, sq, skv, h, hk, d, _): Case,
    options: &AttentionOptions,
) -> gpukern::Result<Inputs<T>> {
    let (q, k, v) = (
        random4::<T>(rng, [b, sq, h, d]),
        random4::<T>(rng, [b, skv, hk, d]),
        random4::<T>(rng, [b, skv, hk, d]),
    );
    let d_out = random4::<T>(rng, [b, sq, h, d]);
    let (out, lse) = cpu::attention(&q, &k, &v, options)?;
    Ok(Inputs {
        out: out.mapv(T::from_f32),
        lse: lse.iter().copied().collect(),
        q,
        k,
        v,
        d_out,
    })
}

/// The gradients of one call on the device, widened to f32.
pub(crate) fn backward<T: TestElement>(
    gpu: &Gpu,
    x: &Inputs<T>,
    options: &AttentionOptions,
) -> gpukern::Result<[Vec<f32>; 3]> {
    let up = |a: &Array4<T>| gpu.upload(a.as_slice().expect("standard layout"));
    let dims = |a: &Array4<T>| {
        let (b, s, h, d) = a.dim();
        [b, s, h, d]
    };
    let (qb, kb, vb, gb, ob) = (up(&x.q)?, up(&x.k)?, up(&x.v)?, up(&x.d_out)?, up(&x.out)?);
    let lse = gpu.upload(&x.lse)?;
    let t = |buf, a| AttentionTensor::contiguous(buf, dims(a));
    let grads = gpu.attention_backward(
        &t(&gb, &x.d_out)?,
        &t(&qb, &x.q)?,
        &t(&kb, &x.k)?,
        &t(&vb, &x.v)?,
        &t(&ob, &x.out)?,
        &lse,
        options,
    )?;
    let wide = |v: gpukern::DeviceVec<T>| -> gpukern::Result<Vec<f32>> {
        Ok(v.to_vec()?.iter().map(|e| e.to_f32()).collect())
    };
    Ok([wide(grads.dq)?, wide(grads.dk)?, wide(grads.dv)?])
}

/// Every rung (and, on CUDA, the plan's choice) on one case against the reference; the fused
/// rung asked for where it does not apply must be an error.
fn run_case<T: TestElement>(gpu: &Gpu, rng: &mut StdRng, case: Case, every: bool) -> Check {
    let (d, causal) = (case.5, case.6);
    let mut options = AttentionOptions {
        causal,
        ..Default::default()
    };
    let x = inputs::<T>(rng, case, &options)?;
    let want = cpu::attention_backward(&x.d_out, &x.q, &x.k, &x.v, &options)?;
    let mut algorithms = vec![
        AttentionAlgorithm::Rows,
        AttentionAlgorithm::Flash,
        AttentionAlgorithm::Wgmma,
        AttentionAlgorithm::WgmmaFused,
    ];
    if every {
        algorithms.push(AttentionAlgorithm::Auto);
    }
    for algorithm in algorithms {
        options.algorithm = algorithm;
        let result = backward(gpu, &x, &options);
        let applies = match algorithm {
            AttentionAlgorithm::Flash => d == 64 || d == 128,
            AttentionAlgorithm::Wgmma | AttentionAlgorithm::WgmmaFused => {
                (d == 64 || d == 128) && gpu.has_wgmma()
            }
            _ => true,
        };
        if !applies {
            match result {
                Err(Error::InvalidArgument { .. }) => continue,
                other => {
                    return Err(
                        format!("{} at head dim {d}: {:?}", algorithm.name(), other.map(|_| ())).into(),
                    );
                }
            }
        }
        let [dq, dk, dv] = result?;
        check_all(algorithm.name(), [&dq, &dk, &dv], &want, T::UNIT)?;
    }
    Ok(())
}

/// The one-kernel rung (`WgmmaFused`) alone on one case against the reference, where it applies
/// (a GPU with `wgmma`; elsewhere it must be an error).
fn fused_case<T: TestElement>(gpu: &Gpu, rng: &mut StdRng, case: Case) -> Check {
    let options = AttentionOptions {
        causal: case.6,
        algorithm: AttentionAlgorithm::WgmmaFused,
        ..Default::default()
    };
    let x = inputs::<T>(rng, case, &options)?;
    let result = backward(gpu, &x, &options);
    if !gpu.has_wgmma() {
        return match result {
            Err(Error::InvalidArgument { .. }) => Ok(()),
            other => Err(format!("wgmma-fused without wgmma: {:?}", other.map(|_| ())).into()),
        };
    }
    let want = cpu::attention_backward(&x.d_out, &x.q, &x.k, &x.v, &options)?;
    let [dq, dk, dv] = result?;
    check_all("wgmma-fused", [&dq, &dk, &dv], &want, T::UNIT)
}

/// The fused rung against the rows rung on one case: relative error norms within `4 UNIT`
/// (both rungs' errors are sums of independent roundings of at most `UNIT` of each term).
fn fused_vs_rows<T: TestElement>(gpu: &Gpu, rng: &mut StdRng, case: Case) -> Check {
    let (b, sq, skv, h, hk, d, causal) = case;
    let (q, k, v) = (
        random4::<T>(rng, [b, sq, h, d]),
        random4::<T>(rng, [b, skv, hk, d]),
        random4::<T>(rng, [b, skv, hk, d]),
    );
    let d_out = random4::<T>(rng, [b, sq, h, d]);
    let up = |a: &Array4<T>| gpu.upload(a.as_slice().expect("standard layout"));
    let (qb, kb, vb, gb) = (up(&q)?, up(&k)?, up(&v)?, up(&d_out)?);
    let (qt, kt, vt, gt) = (
        AttentionTensor::contiguous(&qb, [b, sq, h, d])?,
        AttentionTensor::contiguous(&kb, [b, skv, hk, d])?,
        AttentionTensor::contiguous(&vb, [b, skv, hk, d])?,
        AttentionTensor::contiguous(&gb, [b, sq, h, d])?,
    );
    let options = |algorithm| AttentionOptions {
        causal,
        scale: None,
        algorithm,
        ..Default::default()
    };
    let fwd = gpu.attention(&qt, &kt, &vt, &options(AttentionAlgorithm::Rows))?;
    let ot = AttentionTensor::contiguous(&fwd.out, [b, sq, h, d])?;
    let run = |algorithm| gpu.attention_backward(&gt, &qt, &kt, &vt, &ot, &fwd.lse, &options(algorithm));
    let rows = run(AttentionAlgorithm::Rows)?;
    let wide = |x: &gpukern::DeviceVec<T>| -> gpukern::Result<Vec<f32>> {
        Ok(x.to_vec()?.iter().map(|e| e.to_f32()).collect())
    };
    let tol = 4.0 * f64::from(T::UNIT);
    let mut fused = vec![AttentionAlgorithm::Flash];
    if gpu.has_wgmma() {
        fused.push(AttentionAlgorithm::Wgmma);
        fused.push(AttentionAlgorithm::WgmmaFused);
    }
    for algorithm in fused {
        let got = run(algorithm)?;
        let name = algorithm.name();
        check_rel_error(
            &format!("{name} vs rows: dq"),
            &wide(&got.dq)?,
            &wide(&rows.dq)?,
            tol,
        )?;
        check_rel_error(
            &format!("{name} vs rows: dk"),
            &wide(&got.dk)?,
            &wide(&rows.dk)?,
            tol,
        )?;
        check_rel_error(
            &format!("{name} vs rows: dv"),
            &wide(&got.dv)?,
            &wide(&rows.dv)?,
            tol,
        )?;
    }
    Ok(())
}

/// The same call twice on each deterministic rung gives the same bits (no atomics, fixed
/// order), and so does `Auto` asked to be deterministic (at head dim 128 it would otherwise take
/// the one-kernel rung); the one-kernel rung's `dQ` additions come in any order, so it is not
/// among them.
fn deterministic(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let case = (1, 300, 400, 4, 2, 128, true);
    for algorithm in [
        AttentionAlgorithm::Wgmma,
        AttentionAlgorithm::Flash,
        AttentionAlgorithm::Rows,
        AttentionAlgorithm::Auto,
    ] {
        if algorithm == AttentionAlgorithm::Wgmma && !gpu.has_wgmma() {
            continue;
        }
        let options = AttentionOptions {
            causal: true,
            scale: None,
            algorithm,
            deterministic: algorithm == AttentionAlgorithm::Auto,
            ..Default::default()
        };
        let x = inputs::<bf16>(rng, case, &options)?;
        let (a, b) = (backward(gpu, &x, &options)?, backward(gpu, &x, &options)?);
        for (n, (a, b)) in a.iter().zip(&b).enumerate() {
            if a.iter().map(|x| x.to_bits()).ne(b.iter().map(|x| x.to_bits())) {
                return Err(format!("{}: gradient {n} differs between two calls", algorithm.name()).into());
            }
        }
    }
    Ok(())
}

/// `d_out` and `out` read through strides (heads outer in memory) and an explicit scale: the
/// same gradients as the reference.
fn strided_d_out(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (b, s, h, d) = (1, 12, 2, 64);
    let options = AttentionOptions {
        causal: true,
        scale: Some(0.3),
        algorithm: AttentionAlgorithm::Auto,
        ..Default::default()
    };
    let x = inputs::<bf16>(rng, (b, s, s, h, h, d, true), &options)?;
    let want = cpu::attention_backward(&x.d_out, &x.q, &x.k, &x.v, &options)?;
    // `[b, h, s, d]` copies of d_out and out, read as strided `[b, s, h, d]` views.
    let bhsd = |a: &Array4<bf16>| {
        a.view()
            .permuted_axes([0, 2, 1, 3])
            .as_standard_layout()
            .into_owned()
    };
    let up = |a: &Array4<bf16>| gpu.upload(a.as_slice().expect("standard layout"));
    let (gb, ob) = (up(&bhsd(&x.d_out))?, up(&bhsd(&x.out))?);
    let (qb, kb, vb) = (up(&x.q)?, up(&x.k)?, up(&x.v)?);
    let strided = |buf| AttentionTensor::strided(buf, 0, [b, s, h, d], [h * s * d, d, s * d]);
    let t = |buf| AttentionTensor::contiguous(buf, [b, s, h, d]);
    let lse = gpu.upload(&x.lse)?;
    let g = gpu.attention_backward(
        &strided(&gb)?,
        &t(&qb)?,
        &t(&kb)?,
        &t(&vb)?,
        &strided(&ob)?,
        &lse,
        &options,
    )?;
    let wide = |v: &gpukern::DeviceVec<bf16>| -> gpukern::Result<Vec<f32>> {
        Ok(v.to_vec()?.iter().map(|e| e.to_f32()).collect())
    };
    check_all(
        "strided d_out",
        [&wide(&g.dq)?, &wide(&g.dk)?, &wide(&g.dv)?],
        &want,
        bf16::UNIT,
    )
}

/// `out` one element into its buffer (not 16-byte aligned: the preparation reads it element by
/// element, `o` and `dO` 16 bytes at a time otherwise), the other operands contiguous, so that
/// the plan's rung is the one an aligned call gets; ragged rows (padding rows in the
/// statistics): the same gradients as the reference.
fn unaligned_out(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (b, s, h, d) = (2, 70, 2, 64);
    let options = AttentionOptions::default();
    let x = inputs::<bf16>(rng, (b, s, s, h, h, d, false), &options)?;
    let want = cpu::attention_backward(&x.d_out, &x.q, &x.k, &x.v, &options)?;
    let up = |a: &[bf16]| gpu.upload(a);
    let shifted: Vec<bf16> = std::iter::once(bf16::ZERO).chain(x.out.iter().copied()).collect();
    let plain = |a: &Array4<bf16>| up(a.as_slice().expect("standard layout"));
    let (qb, kb, vb, gb, ob) = (
        plain(&x.q)?,
        plain(&x.k)?,
        plain(&x.v)?,
        plain(&x.d_out)?,
        up(&shifted)?,
    );
    let t = |buf| AttentionTensor::contiguous(buf, [b, s, h, d]);
    let out = AttentionTensor::strided(&ob, 1, [b, s, h, d], [s * h * d, h * d, d])?;
    let lse = gpu.upload(&x.lse)?;
    let g = gpu.attention_backward(&t(&gb)?, &t(&qb)?, &t(&kb)?, &t(&vb)?, &out, &lse, &options)?;
    let wide = |v: &gpukern::DeviceVec<bf16>| -> gpukern::Result<Vec<f32>> {
        Ok(v.to_vec()?.iter().map(|e| e.to_f32()).collect())
    };
    check_all(
        "unaligned out",
        [&wide(&g.dq)?, &wide(&g.dk)?, &wide(&g.dv)?],
        &want,
        bf16::UNIT,
    )
}

/// The errors: operands of the wrong shapes, a rung that does not apply; and the empty cases
/// (no query row: zero `dk`, `dv`; no key: zero `dq`).
fn errors(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    let buf = |n: usize| gpu.zeros_of::<bf16>(n);
    let run = |qd: [usize; 4], kd: [usize; 4], gd: [usize; 4], lse_len: usize, o: &AttentionOptions| {
        let (qb, kb, gb) = (
            buf(qd.iter().product())?,
            buf(kd.iter().product())?,
            buf(gd.iter().product())?,
        );
        let lse = gpu.zeros_of::<f32>(lse_len)?;
        let (q, k, g) = (
            AttentionTensor::contiguous(&qb, qd)?,
            AttentionTensor::contiguous(&kb, kd)?,
            AttentionTensor::contiguous(&gb, gd)?,
        );
        gpu.attention_backward(&g, &q, &k, &k, &q, &lse, o)
    };
    let opts = AttentionOptions::default();
    let mut expect =
        |what: &str, result: gpukern::Result<gpukern::AttentionGradients<bf16>>, shape: bool| match result {
            Err(Error::ShapeMismatch { .. }) if shape => {}
            Err(Error::InvalidArgument { .. }) if !shape => {}
            other => failures.push(format!("{what}: {:?}", other.map(|_| ()))),
        };
    expect(
        "d_out of another length",
        run([1, 4, 2, 8], [1, 4, 2, 8], [1, 5, 2, 8], 8, &opts),
        true,
    );
    expect(
        "lse too short",
        run([1, 4, 2, 8], [1, 4, 2, 8], [1, 4, 2, 8], 7, &opts),
        true,
    );
    expect(
        "kv heads 3 of 4",
        run([1, 4, 4, 8], [1, 4, 3, 8], [1, 4, 4, 8], 16, &opts),
        true,
    );
    expect(
        "head dim 12",
        run([1, 4, 1, 12], [1, 4, 1, 12], [1, 4, 1, 12], 4, &opts),
        false,
    );
    let with = |algorithm| AttentionOptions {
        algorithm,
        ..Default::default()
    };
    expect(
        "wgmma backward at head dim 40",
        run(
            [1, 4, 1, 40],
            [1, 4, 1, 40],
            [1, 4, 1, 40],
            4,
            &with(AttentionAlgorithm::Wgmma),
        ),
        false,
    );
    expect(
        "wgmma-fused backward at head dim 40",
        run(
            [1, 4, 1, 40],
            [1, 4, 1, 40],
            [1, 4, 1, 40],
            4,
            &with(AttentionAlgorithm::WgmmaFused),
        ),
        false,
    );
    let fused_deterministic = AttentionOptions {
        algorithm: AttentionAlgorithm::WgmmaFused,
        deterministic: true,
        ..Default::default()
    };
    expect(
        "wgmma-fused backward asked to be deterministic",
        run(
            [1, 4, 1, 64],
            [1, 4, 1, 64],
            [1, 4, 1, 64],
            4,
            &fused_deterministic,
        ),
        false,
    );
    expect(
        "flash at head dim 8",
        run(
            [1, 4, 1, 8],
            [1, 4, 1, 8],
            [1, 4, 1, 8],
            4,
            &with(AttentionAlgorithm::Flash),
        ),
        false,
    );
    let nan = AttentionOptions {
        scale: Some(f32::NAN),
        ..Default::default()
    };
    expect(
        "scale NaN",
        run([1, 4, 1, 8], [1, 4, 1, 8], [1, 4, 1, 8], 4, &nan),
        false,
    );
    // No query row: dk and dv are zeros (the buffers start poisoned by a first call); no key:
    // dq is zeros.
    for algorithm in [AttentionAlgorithm::Rows, AttentionAlgorithm::Auto] {
        match run([1, 0, 2, 64], [1, 5, 1, 64], [1, 0, 2, 64], 0, &with(algorithm)) {
            Ok(g) => {
                let (dk, dv) = (g.dk.to_vec()?, g.dv.to_vec()?);
                if dk.len() != 5 * 64 || dk.iter().chain(&dv).any(|x| x.to_f32() != 0.0) {
                    failures.push(format!("{}: q_len 0 gave nonzero dk/dv", algorithm.name()));
                }
            }
            Err(e) => failures.push(format!("q_len 0: {e}")),
        }
        match run([1, 3, 2, 64], [1, 0, 1, 64], [1, 3, 2, 64], 6, &with(algorithm)) {
            Ok(g) => {
                let dq = g.dq.to_vec()?;
                if dq.len() != 3 * 2 * 64 || dq.iter().any(|x| x.to_f32() != 0.0) {
                    failures.push(format!("{}: kv_len 0 gave nonzero dq", algorithm.name()));
                }
            }
            Err(e) => failures.push(format!("kv_len 0: {e}")),
        }
    }
    all_passed(failures)
}

/// `gpukern::attention_backward` on host arrays against the reference.
fn global_backward(rng: &mut StdRng) -> Check {
    let case = (1, 6, 9, 2, 1, 8, true);
    let options = AttentionOptions {
        causal: true,
        ..Default::default()
    };
    let x = inputs::<f16>(rng, case, &options)?;
    let lse = ndarray::Array3::from_shape_vec((1, 2, 6), x.lse.clone())?;
    let (dq, dk, dv) = gpukern::attention_backward(&x.d_out, &x.q, &x.k, &x.v, &x.out, &lse, &options)?;
    let want = cpu::attention_backward(&x.d_out, &x.q, &x.k, &x.v, &options)?;
    let wide = |a: &Array4<f16>| a.iter().map(|e| e.to_f32()).collect::<Vec<f32>>();
    check_all("global", [&wide(&dq), &wide(&dk), &wide(&dv)], &want, f16::UNIT)
}
