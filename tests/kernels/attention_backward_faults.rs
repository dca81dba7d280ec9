//! The backward's check can fail: the fused rung's schedule (`dK`/`dV` over 64-query tiles,
//! `P` and `dS` rounded to bf16 for the products that take them, `D = dO . O` from the output
//! rounded to bf16) emulated on the CPU, once as written and once with each planted fault (the
//! `D` term dropped from `dS`, query tile 1 skipped, an off-by-one causal edge), each put
//! through the trials' check (`check_all`, the tolerance derived from bf16 rounding). The
//! faithful emulation must pass and every fault must fail, so a kernel with one of these faults
//! fails the trials. And the reference itself is right: its gradients match central finite
//! differences of the f64 forward (`reference_finite_differences`).

use gpukern::{AttentionOptions, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::Array4;
use rand::Rng;
use rand::rngs::StdRng;

use super::attention_backward::{TestElement, check_all};
use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// Query rows per tile of the emulated schedule (`BWD_FLASH_TILE`).
const TILE: usize = 64;

/// A planted fault of the emulated kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// None: the schedule as the kernels run it.
    None,
    /// `dS = P dP`, without `- D`.
    DroppedDelta,
    /// Query tile 1 skipped by `dK`/`dV` and `dQ`.
    DroppedTile,
    /// The causal limit one key too far.
    CausalOffByOne,
}

/// The trials (simulator target only: no device work).
pub(crate) fn trials(sim: &Target) -> Vec<Trial> {
    [
        Fault::None,
        Fault::DroppedDelta,
        Fault::DroppedTile,
        Fault::CausalOffByOne,
    ]
    .into_iter()
    .map(|fault| {
        trial(
            sim,
            &format!("attention_backward::planted::{fault:?}"),
            move |_, rng| planted(rng, fault),
        )
    })
    .chain([trial(
        sim,
        "attention_backward::reference_finite_differences",
        |_, rng| finite_differences(rng),
    )])
    .collect()
}

/// `cpu::attention_backward` against central differences of `L = sum(dO * O)` through
/// `cpu::attention`, at every element of `q`, `k` and `v` of a small causal grouped-query case
/// (`q_len != kv_len`). The inputs are multiples of `2^-6`, so that the steps `+-2^-6` stay exact
/// in bf16; the differences' error (third order in the step, and the forward's f32 output) is
/// far below the tolerance `1e-3 + 1e-2 |gradient|`.
fn finite_differences(rng: &mut StdRng) -> Check {
    const STEP: f32 = 1.0 / 64.0;
    let (b, sq, skv, h, hk, d) = (1, 5, 7, 2, 1, 8);
    let grid = |rng: &mut StdRng, dims: [usize; 4]| {
        Array4::from_shape_fn(dims, |_| {
            bf16::from_f32(rng.random_range(-48i32..48) as f32 * STEP)
        })
    };
    let (q, k, v, g) = (
        grid(rng, [b, sq, h, d]),
        grid(rng, [b, skv, hk, d]),
        grid(rng, [b, skv, hk, d]),
        grid(rng, [b, sq, h, d]),
    );
    let options = AttentionOptions {
        causal: true,
        scale: Some(0.7),
        ..Default::default()
    };
    let want = cpu::attention_backward(&g, &q, &k, &v, &options)?;
    let loss = |q: &Array4<bf16>, k: &Array4<bf16>, v: &Array4<bf16>| -> gpukern::Result<f64> {
        let (out, _) = cpu::attention(q, k, v, &options)?;
        Ok(out
            .iter()
            .zip(g.iter())
            .map(|(&o, x)| f64::from(o) * f64::from(x.to_f32()))
            .sum())
    };
    let mut failures = Vec::new();
    for (which, grad) in [(0, &want.dq), (1, &want.dk), (2, &want.dv)] {
        for (idx, &gr) in grad.indexed_iter() {
            let mut diff = [0.0f64; 2];
            for (n, sign) in [1.0f32, -1.0].into_iter().enumerate() {
                let (mut qq, mut kk, mut vv) = (q.clone(), k.clone(), v.clone());
                let x = [&mut qq, &mut kk, &mut vv][which].get_mut(idx).ok_or("index")?;
                *x = bf16::from_f32(x.to_f32() + sign * STEP);
                diff[n] = loss(&qq, &kk, &vv)?;
            }
            let fd = (diff[0] - diff[1]) / (2.0 * f64::from(STEP));
            if (fd - f64::from(gr)).abs() > 1e-3 + 1e-2 * f64::from(gr).abs() {
                failures.push(format!(
                    "{} {idx:?}: reference {gr}, finite difference {fd}",
                    ["dq", "dk", "dv"][which]
                ));
            }
        }
    }
    all_passed(failures)
}

/// The emulation with `fault` against the f64 reference: passes exactly when `fault` is `None`.
fn planted(rng: &mut StdRng, fault: Fault) -> Check {
    let (s, d) = (150, 64);
    let random = |rng: &mut StdRng| {
        Array4::from_shape_fn([1, s, 1, d], |_| bf16::from_f32(rng.random_range(-1.0f32..1.0)))
    };
    let (q, k, v, g) = (random(rng), random(rng), random(rng), random(rng));
    let options = AttentionOptions {
        causal: true,
        scale: Some(0.5),
        ..Default::default()
    };
    let want = cpu::attention_backward(&g, &q, &k, &v, &options)?;
    let (out, lse) = cpu::attention(&q, &k, &v, &options)?;
    let got = emulate([&q, &k, &v, &g], &out, lse.as_slice().unwrap_or(&[]), 0.5, fault);
    let result = check_all(
        &format!("emulated {fault:?}"),
        [&got[0], &got[1], &got[2]],
        &want,
        bf16::UNIT,
    );
    match (fault, result) {
        (Fault::None, r) => r,
        (_, Err(_)) => Ok(()),
        (_, Ok(())) => Err(format!("the planted fault {fault:?} passes the check").into()),
    }
}

/// The fused schedule on one head (causal, bottom-right, `q_len == kv_len`) with `fault`
/// planted: `[dq, dk, dv]` rounded to bf16 and widened.
fn emulate(x: [&Array4<bf16>; 4], out: &Array4<f32>, lse: &[f32], scale: f32, fault: Fault) -> [Vec<f32>; 3] {
    let [q, k, v, g] = x.map(|a| a.mapv(|e| e.to_f32()));
    let (s, d) = (q.dim().1, q.dim().3);
    let round = |x: f32| bf16::from_f32(x).to_f32();
    let delta: Vec<f32> = (0..s)
        .map(|i| (0..d).map(|c| g[[0, i, 0, c]] * round(out[[0, i, 0, c]])).sum())
        .collect();
    let (mut dq, mut dk, mut dv) = (vec![0.0f32; s * d], vec![0.0f32; s * d], vec![0.0f32; s * d]);
    let scale_log2 = scale * std::f32::consts::LOG2_E;
    for i in 0..s {
        if fault == Fault::DroppedTile && i / TILE == 1 {
            continue;
        }
        let mut limit = i + 1;
        if fault == Fault::CausalOffByOne {
            limit = (limit + 1).min(s);
        }
        let l2 = lse[i] * std::f32::consts::LOG2_E;
        for j in 0..limit {
            let sc: f32 = (0..d).map(|c| q[[0, i, 0, c]] * k[[0, j, 0, c]]).sum();
            let p = (sc * scale_log2 - l2).exp2();
            let dp: f32 = (0..d).map(|c| g[[0, i, 0, c]] * v[[0, j, 0, c]]).sum();
            let dd = if fault == Fault::DroppedDelta {
                0.0
            } else {
                delta[i]
            };
            let ds = round(p * (dp - dd));
            let p16 = round(p);
            for c in 0..d {
                dv[j * d + c] += p16 * g[[0, i, 0, c]];
                dk[j * d + c] += ds * q[[0, i, 0, c]];
                dq[i * d + c] += ds * k[[0, j, 0, c]];
            }
        }
    }
    [
        dq.iter().map(|&x| round(x * scale)).collect(),
        dk.iter().map(|&x| round(x * scale)).collect(),
        dv.iter().map(|&x| round(x)).collect(),
    ]
}
