//! The grouped (mixture-of-experts) product `Y_e = X_e W_e^T` against
//! `cpu::matmul_grouped_f64` (f64 of the same bf16 operands):
//! * `{sim,cuda}::matmul_grouped::<case>`: both plans (tiles 128 x 256 and 128 x 128) and the
//!   default one, ragged and empty experts (`m_e = 0`), `k` and `n` ragged against the tiles; on
//!   CUDA 8 experts and 128 experts (a uniform and a skewed split), into `Y` filled with a
//!   sentinel: the rows past the last expert must keep it;
//! * `{sim,cuda}::matmul_grouped::offsets_out_of_order`: offsets on the device that decrease or
//!   pass the rows give `cpu::grouped_expert_rows`'s experts (and touch nothing else);
//! * `{sim,cuda}::matmul_grouped::errors`;
//! * `{sim,cuda}::matmul_grouped::planted_offset_fails`: the kernel given an off-by-one expert offset
//!   (a planted wrong kernel: one row moved to the next expert) fails the check;
//! * `cuda::matmul_grouped::graph_new_offsets`: the launch captured in a CUDA graph, replayed
//!   with new offsets written into the device buffer between replays.
//!
//! The bound, per element, is `matmul_half`'s (`half_violation`): `2^-8 |Y_ref| + 4 terms(k)
//! 2^-24 sum_l |X(i,l) W_e(j,l)|`: the result's rounding to bf16 and the f32 sums.

use gpukern::ops::matmul::GroupedPlan;
use gpukern::{DeviceMatrix, Gpu, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::{Array2, Array3, s};
use rand::Rng;
use rand::rngs::StdRng;

use super::half::{half_violation, random_of};
use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// How the rows are split over the experts.
#[derive(Clone, Copy, Debug)]
enum Split {
    /// Given counts.
    Counts(&'static [usize]),
    /// `rows / E` each, the remainder to the first experts.
    Uniform,
    /// Skewed: expert `e` gets a share `~ 1 / (e + 1)^2`, every fourth expert none.
    Skewed,
}

/// A case: experts, rows of `X` (the experts own all but the last 3), `k`, `n`, split.
#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    experts: usize,
    rows: usize,
    k: usize,
    n: usize,
    split: Split,
}

/// Simulator cases: a few seconds each. Ragged and empty experts, an expert over a row tile
/// (130 rows), `k` past a step of 64, `n` past a column tile of 128. The simulator's grid is 3
/// blocks, so the last two cases place the split tail (`tail_halves`) on both sides of its
/// rule: 4 row tiles of one wide column tile leave 1 tile for the last round, split into halves
/// (the second 72 columns wide in `tail_split`, past `n` and skipped in `tail_empty_half`). The
/// square tiles never split (`GroupedShape::SPLITS`): their plan runs the same cases whole.
const SIM_CASES: &[Case] = &[
    Case {
        name: "3_experts_ragged",
        experts: 3,
        rows: 138,
        k: 72,
        n: 40,
        split: Split::Counts(&[5, 0, 130]),
    },
    Case {
        name: "4_experts_empty_ends",
        experts: 4,
        rows: 133,
        k: 64,
        n: 136,
        split: Split::Counts(&[0, 129, 1, 0]),
    },
    Case {
        name: "tail_split",
        experts: 2,
        rows: 332,
        k: 136,
        n: 200,
        split: Split::Counts(&[129, 200]),
    },
    Case {
        name: "tail_empty_half",
        experts: 2,
        rows: 332,
        k: 64,
        n: 100,
        split: Split::Counts(&[129, 200]),
    },
];

/// CUDA cases: the simulator's, 8 experts, 128 experts uniform and skewed, and a deep `k` with
/// the issue's `n`.
const CUDA_CASES: &[Case] = &[
    SIM_CASES[0],
    SIM_CASES[1],
    Case {
        name: "8_experts",
        experts: 8,
        rows: 2003,
        k: 1032,
        n: 776,
        split: Split::Counts(&[300, 0, 511, 129, 1, 700, 256, 103]),
    },
    Case {
        name: "128_experts_uniform",
        experts: 128,
        rows: 8192,
        k: 512,
        n: 384,
        split: Split::Uniform,
    },
    Case {
        name: "128_experts_skewed",
        experts: 128,
        rows: 8192,
        k: 512,
        n: 392,
        split: Split::Skewed,
    },
    Case {
        name: "16_experts_k2048_n1536",
        experts: 16,
        rows: 2048,
        k: 2048,
        n: 1536,
        split: Split::Skewed,
    },
];

/// The value `Y` starts as (exact in bf16): rows past the last expert must keep it.
const SENTINEL: f32 = 1232.0;

/// Every trial of the grouped product.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, cases) in [(sim, SIM_CASES), (cuda, CUDA_CASES)] {
        for &case in cases {
            trials.push(trial(
                target,
                &format!("matmul_grouped::{}", case.name),
                move |gpu, rng| grouped_case(gpu, rng, case),
            ));
        }
        trials.push(trial(
            target,
            "matmul_grouped::offsets_out_of_order",
            offsets_out_of_order,
        ));
        trials.push(trial(target, "matmul_grouped::errors", |gpu, _| {
            grouped_errors(gpu)
        }));
    }
    trials.push(trial(sim, "matmul_grouped::planted_offset_fails", |gpu, rng| {
        planted_offset_fails(gpu, rng, (5, 150, 64, 40))
    }));
    trials.push(trial(cuda, "matmul_grouped::planted_offset_fails", |gpu, rng| {
        planted_offset_fails(gpu, rng, (8, 1000, 256, 264))
    }));
    trials.push(trial(cuda, "matmul_grouped::graph_new_offsets", |gpu, rng| {
        graph_new_offsets(gpu, rng)
    }));
    trials
}

/// The experts' row counts of a split of `rows` over `experts`.
fn counts(split: Split, rows: usize, experts: usize) -> Vec<usize> {
    match split {
        Split::Counts(c) => {
            assert_eq!((c.len(), c.iter().sum::<usize>()), (experts, rows));
            c.to_vec()
        }
        Split::Uniform => (0..experts)
            .map(|e| rows / experts + usize::from(e < rows % experts))
            .collect(),
        Split::Skewed => {
            let weight = |e: usize| {
                if e % 4 == 3 {
                    0.0
                } else {
                    1.0 / ((e + 1) * (e + 1)) as f64
                }
            };
            let total: f64 = (0..experts).map(weight).sum();
            let mut c: Vec<usize> = (0..experts)
                .map(|e| (weight(e) / total * rows as f64).floor() as usize)
                .collect();
            c[0] += rows - c.iter().sum::<usize>();
            c
        }
    }
}

/// Cumulative end rows of `counts`.
fn offsets_of(counts: &[usize]) -> Vec<u32> {
    counts
        .iter()
        .scan(0usize, |end, &c| {
            *end += c;
            Some(*end as u32)
        })
        .collect()
}

/// Random operands of a case: `X` (`rows x k`), `W` (`E x n x k`).
fn operands(
    rng: &mut StdRng,
    experts: usize,
    rows: usize,
    k: usize,
    n: usize,
) -> (Array2<bf16>, Array3<bf16>) {
    let x = random_of(rng, rows, k, bf16::from_f32);
    let w = random_of(rng, experts * n, k, bf16::from_f32)
        .into_shape_with_order((experts, n, k))
        .expect("E n x k is E x n x k");
    (x, w)
}

/// The failures of `y` against the reference for `offsets`: the experts' rows within
/// `half_violation`'s bound, the other rows still [`SENTINEL`].
fn compare(
    what: &str,
    y: &Array2<bf16>,
    x: &Array2<bf16>,
    w: &Array3<bf16>,
    offsets: &[u32],
) -> gpukern::Result<Option<String>> {
    let (rows, k) = x.dim();
    let (want, abs) = cpu::matmul_grouped_f64(&x.view(), &w.view(), offsets)?;
    let ranges = cpu::grouped_expert_rows(offsets, rows);
    for (e, r) in ranges.iter().enumerate() {
        if r.is_empty() {
            continue;
        }
        let got: Vec<f64> = y.slice(s![r.clone(), ..]).iter().map(|v| v.to_f64()).collect();
        let (we, ae) = (
            want.slice(s![r.clone(), ..]).to_owned(),
            abs.slice(s![r.clone(), ..]).to_owned(),
        );
        if let Some(err) = half_violation(&got, &we, &ae, k, f64::powi(2.0, -8)) {
            return Ok(Some(format!("{what}: expert {e} (rows {r:?}): {err}")));
        }
    }
    let owned = ranges.last().map_or(0, |r| r.end);
    if let Some((i, v)) = y
        .slice(s![owned.., ..])
        .iter()
        .enumerate()
        .find(|(_, v)| v.to_f32() != SENTINEL)
    {
        let n = y.ncols();
        return Ok(Some(format!(
            "{what}: row {} (past the last expert's end {owned}) column {} was written: {v}",
            owned + i / n,
            i % n
        )));
    }
    Ok(None)
}

/// `W` (`E x n x k`) as the `(E n) x k` device matrix the product takes.
fn upload_w(gpu: &Gpu, w: &Array3<bf16>) -> gpukern::Result<DeviceMatrix<bf16>> {
    let (e, n, k) = w.dim();
    let flat = w
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((e * n, k))
        .expect("E x n x k is E n x k");
    gpu.upload_matrix(&flat)
}

/// A `Y` of `rows x n` filled with the sentinel.
fn sentinel_y(gpu: &Gpu, rows: usize, n: usize) -> gpukern::Result<DeviceMatrix<bf16>> {
    gpu.upload_matrix(&Array2::from_elem((rows, n), bf16::from_f32(SENTINEL)))
}

/// One case: the default plan, every plan, and the host-offsets form.
fn grouped_case(gpu: &Gpu, rng: &mut StdRng, case: Case) -> Check {
    let Case {
        experts, rows, k, n, ..
    } = case;
    // Rows past the last expert: a few spare rows that no expert owns.
    let spare = 3;
    let offsets = offsets_of(&counts(case.split, rows - spare, experts));
    let (x, w) = operands(rng, experts, rows, k, n);
    let (dx, dw) = (gpu.upload_matrix(&x)?, upload_w(gpu, &w)?);
    let doffsets = gpu.upload(&offsets)?;
    let mut failures = Vec::new();
    let mut y = sentinel_y(gpu, rows, n)?;
    gpu.matmul_grouped(&dx, &dw, &doffsets, &mut y)?;
    failures.extend(compare("default plan", &y.to_array()?, &x, &w, &offsets)?);
    for plan in GroupedPlan::ALL {
        let mut y = sentinel_y(gpu, rows, n)?;
        gpu.matmul_grouped_with(&dx, &dw, &doffsets, &mut y, plan)?;
        failures.extend(compare(plan.name(), &y.to_array()?, &x, &w, &offsets)?);
    }
    // The host form: zeros past the last expert.
    let y = gpu.matmul_grouped_with_offsets(&dx, &dw, &offsets)?.to_array()?;
    let owned = *offsets.last().unwrap_or(&0) as usize;
    let mut y_sentinel = y.clone();
    y_sentinel
        .slice_mut(s![owned.., ..])
        .fill(bf16::from_f32(SENTINEL));
    if y.slice(s![owned.., ..]).iter().any(|v| v.to_f32() != 0.0) {
        failures.push("matmul_grouped_with_offsets: rows past the last expert are not zeros".into());
    }
    failures.extend(compare("host offsets", &y_sentinel, &x, &w, &offsets)?);
    all_passed(
        failures
            .into_iter()
            .map(|f| format!("{}: {f}", case.name))
            .collect(),
    )
}

/// Offsets on the device that decrease and pass the rows: the kernel's experts are
/// `cpu::grouped_expert_rows`'s, and nothing outside them is written.
fn offsets_out_of_order(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (experts, rows, k, n) = (5, 150, 64, 24);
    let offsets = [70u32, 20, 140, 1000, 5];
    let (x, w) = operands(rng, experts, rows, k, n);
    let (dx, dw) = (gpu.upload_matrix(&x)?, upload_w(gpu, &w)?);
    let mut failures = Vec::new();
    for plan in GroupedPlan::ALL {
        let mut y = sentinel_y(gpu, rows, n)?;
        gpu.matmul_grouped_with(&dx, &dw, &gpu.upload(&offsets)?, &mut y, plan)?;
        failures.extend(compare(plan.name(), &y.to_array()?, &x, &w, &offsets)?);
    }
    // The host form refuses them.
    if gpu.matmul_grouped_with_offsets(&dx, &dw, &offsets).is_ok() {
        failures.push("matmul_grouped_with_offsets took decreasing offsets".into());
    }
    all_passed(failures)
}

/// Wrong shapes, no experts, too many, `k` not a multiple of 8 are refused.
fn grouped_errors(gpu: &Gpu) -> Check {
    let x = gpu.upload_matrix(&Array2::from_elem((6, 16), bf16::ONE))?;
    let w = gpu.upload_matrix(&Array2::from_elem((2 * 3, 16), bf16::ONE))?;
    let offsets = gpu.upload(&[2u32, 6])?;
    let mut y = gpu.zeros_matrix_of::<bf16>(6, 3)?;
    gpu.matmul_grouped(&x, &w, &offsets, &mut y)?;
    let invalid = |what: &str, r: gpukern::Result<()>| -> Check {
        match r {
            Err(gpukern::Error::InvalidArgument { .. }) => Ok(()),
            other => Err(format!("{what}: {other:?}, not InvalidArgument").into()),
        }
    };
    let shape = |what: &str, r: gpukern::Result<()>| -> Check {
        match r {
            Err(gpukern::Error::ShapeMismatch { .. }) => Ok(()),
            other => Err(format!("{what}: {other:?}, not ShapeMismatch").into()),
        }
    };
    let mut y4 = gpu.zeros_matrix_of::<bf16>(6, 4)?;
    shape(
        "n = 4 with W of 2 x 3 rows",
        gpu.matmul_grouped(&x, &w, &offsets, &mut y4),
    )?;
    let three = gpu.upload(&[1u32, 2, 6])?;
    shape(
        "3 offsets for 2 weights",
        gpu.matmul_grouped(&x, &w, &three, &mut y),
    )?;
    let mut y5 = gpu.zeros_matrix_of::<bf16>(5, 3)?;
    shape(
        "Y of 5 rows for X of 6",
        gpu.matmul_grouped(&x, &w, &offsets, &mut y5),
    )?;
    let none = gpu.upload(&[] as &[u32])?;
    let w0 = gpu.zeros_matrix_of::<bf16>(0, 16)?;
    invalid("no experts", gpu.matmul_grouped(&x, &w0, &none, &mut y))?;
    let many = gpu.upload(&vec![
        6u32;
        gpukern::kernels::matmul::grouped::GROUPED_MAX_EXPERTS + 1
    ])?;
    let wm = gpu.zeros_matrix_of::<bf16>(3 * many.len(), 16)?;
    invalid("too many experts", gpu.matmul_grouped(&x, &wm, &many, &mut y))?;
    let x12 = gpu.upload_matrix(&Array2::from_elem((6, 12), bf16::ONE))?;
    let w12 = gpu.upload_matrix(&Array2::from_elem((6, 12), bf16::ONE))?;
    invalid("k = 12", gpu.matmul_grouped(&x12, &w12, &offsets, &mut y))?;
    let dec = gpu.matmul_grouped_with_offsets(&x, &w, &[4, 2]).map(|_| ());
    invalid("decreasing host offsets", dec)?;
    let past = gpu.matmul_grouped_with_offsets(&x, &w, &[4, 7]).map(|_| ());
    invalid("host offsets past the rows", past)?;
    Ok(())
}

/// A planted wrong kernel: the product run with expert 3's end one row late (its last row
/// taken from expert 4) must fail the check against the true offsets, while the honest run
/// passes, on both plans. `(experts, rows, k, n)`: at least 5 experts' worth of rows.
fn planted_offset_fails(
    gpu: &Gpu,
    rng: &mut StdRng,
    (experts, rows, k, n): (usize, usize, usize, usize),
) -> Check {
    let offsets = offsets_of(&counts(Split::Uniform, rows, experts));
    let mut shifted = offsets.clone();
    shifted[3] += 1;
    let (x, w) = operands(rng, experts, rows, k, n);
    let (dx, dw) = (gpu.upload_matrix(&x)?, upload_w(gpu, &w)?);
    for plan in GroupedPlan::ALL {
        let mut y = sentinel_y(gpu, rows, n)?;
        gpu.matmul_grouped_with(&dx, &dw, &gpu.upload(&offsets)?, &mut y, plan)?;
        if let Some(e) = compare("honest", &y.to_array()?, &x, &w, &offsets)? {
            return Err(format!("{}: the honest run failed: {e}", plan.name()).into());
        }
        let mut y = sentinel_y(gpu, rows, n)?;
        gpu.matmul_grouped_with(&dx, &dw, &gpu.upload(&shifted)?, &mut y, plan)?;
        if compare("planted", &y.to_array()?, &x, &w, &offsets)?.is_none() {
            return Err(format!("{}: an off-by-one expert offset passed the check", plan.name()).into());
        }
    }
    Ok(())
}

/// The launch captured in a CUDA graph on a `Gpu` of its own, replayed with three sets of
/// offsets written into the captured buffer between replays (each checked against its
/// reference), after one direct call (which makes the tensor maps the capture reuses).
fn graph_new_offsets(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let gpu = match gpu.ordinal() {
        Some(ordinal) => Gpu::new(ordinal)?,
        None => gpu.clone(),
    };
    let (experts, rows, k, n) = (16, 3000, 512, 520);
    let (x, w) = operands(rng, experts, rows, k, n);
    let (dx, dw) = (gpu.upload_matrix(&x)?, upload_w(&gpu, &w)?);
    let first = offsets_of(&counts(Split::Uniform, rows, experts));
    let doffsets = gpu.upload(&first)?;
    let mut y = sentinel_y(&gpu, rows, n)?;
    gpu.matmul_grouped(&dx, &dw, &doffsets, &mut y)?;
    let mut graph = gpu.capture_with((doffsets, y), |g, (o, y)| g.matmul_grouped(&dx, &dw, o, y))?;
    let mut failures = Vec::new();
    let mut splits = vec![first];
    splits.push(offsets_of(&counts(Split::Skewed, rows - 7, experts)));
    // Random counts, expert 5 empty, their total past the rows (the kernel clamps the ends).
    let mut random: Vec<usize> = (0..experts).map(|_| rng.random_range(0..300)).collect();
    random[5] = 0;
    splits.push(offsets_of(&random));
    for (i, offsets) in splits.iter().enumerate() {
        let (o, y) = graph.buffers_mut();
        o.copy_from_host(offsets)?;
        y.fill(bf16::from_f32(SENTINEL))?;
        graph.launch()?;
        let got = graph.buffers().1.to_array()?;
        failures.extend(compare(&format!("replay {i}"), &got, &x, &w, offsets)?);
    }
    all_passed(failures)
}
