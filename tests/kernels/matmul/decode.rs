//! Decode products `Y = X W^T` (bf16 `X` of `m x k`, bf16 `W` of `n x k`, the result bf16 or
//! f32) against `cpu::matmul_f64(X, W^T)` of the same operands: `{sim,cuda}::matmul_decode::MxKxN`
//! runs the default plan and every plan forced (the tensor-core rung whole and in 2 and 3
//! slices of `k`, the read-only-load kernels (`ld.global.nc`, and without an L1 line) where
//! `m <= 8`, the CUDA-core rung whole and in 2 and 3 slices where `m <= 8` and its comparison
//! variants at `m = 1`, the Hopper rung's two tiles whole and
//! in 2 and 3 slices, its stream-K form (`SIM_STREAM_K` in the simulator; on CUDA every tile on
//! 1, 2, 3, 7 blocks and one per SM), the tutorial rung), both result types; `{sim,cuda}::matmul_decode::errors`, `global::matmul_decode` (the free function on
//! views) and `matmul_decode_check::planted_kernels_fail` (the check refuses a kernel that loses
//! a step of 32 along `k`, or reads the wrong row of `X`).
//!
//! The bound, per element, is `matmul_half`'s (`half_violation`): `u_out |Y_ref| + 4 terms(k)
//! 2^-24 sum_l |X(i,l) W(j,l)|`, `u_out` = `2^-8` for a bf16 result, 0 for f32.

use gpukern::{DecodeLoads, DecodePlan, DecodeTile, Gpu, bf16, cpu};
use libtest_mimic::{Failed, Trial};
use ndarray::{Array2, s};
use rand::rngs::StdRng;

use super::half::{half_violation, random_of, references, widen};
use crate::common::check::*;
use crate::common::trial::{Target, global_trial, trial};

/// Shapes `(m, k, n)` in the simulator: one row and one MMA tile of each size (8, 16, 32, 64 rows
/// of `X`), `n` ragged past a block of 128 rows, `k` past a slice of 128 and ragged against the
/// unrolled step; `k` not a multiple of 8 and `m > 64` (the tutorial rung only); and `n = 232`, a
/// multiple of 8 past a block of 224 rows, so that the 224-row tile's consumers store every
/// column of their `m64n112` accumulators through the 16-bit epilogue.
const SIM_SHAPES: &[(usize, usize, usize)] = &[
    (1, 64, 40),
    (2, 520, 70),
    (3, 392, 130),
    (9, 256, 17),
    (17, 136, 33),
    (64, 96, 20),
    (7, 200, 300),
    (33, 72, 260),
    (5, 7, 9),
    (65, 16, 8),
    (3, 128, 232),
];

/// Shapes on CUDA: the simulator's, the weight at `m = 1` (28672 x 8192), a weight whose
/// plan splits `k` (8192 x 4096 at `m = 8`), `m = 64` deep in `k`, the 28672 rows at
/// `m = 64` (112 blocks of the Hopper rung), and ragged ones. `2 x 520 x 70` is the one aligned
/// shape at `m = 2`, so the only one that launches the CUDA-core rung's two-row kernels (a full
/// run at 6b3d612 without it left `matmul_decode_rows_{bf16,f32}_m2` unlaunched,
/// `bench/experiments/h200-logs/6b3d612-pages-kernels-cuda.log`).
const CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 64, 40),
    (2, 520, 70),
    (3, 392, 130),
    (9, 256, 17),
    (17, 136, 33),
    (64, 96, 20),
    (5, 7, 9),
    (65, 16, 8),
    (1, 8192, 28672),
    (8, 4096, 8192),
    (64, 2048, 4096),
    (33, 1000, 3000),
    (2, 1004, 300),
    (7, 200, 300),
    (33, 72, 260),
    (64, 1024, 28672),
    (48, 4104, 1000),
];

/// Every trial of the decode products.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, shapes) in [(sim, SIM_SHAPES), (cuda, CUDA_SHAPES)] {
        for &shape in shapes {
            let (m, k, n) = shape;
            trials.push(trial(
                target,
                &format!("matmul_decode::{m}x{k}x{n}"),
                move |gpu, rng| decode_shape(gpu, rng, shape),
            ));
        }
        trials.push(trial(target, "matmul_decode::errors", |gpu, _| {
            decode_errors(gpu)
        }));
    }
    trials.push(global_trial("matmul_decode", global_decode));
    trials.push(Trial::test(
        "matmul_decode_check::planted_kernels_fail",
        planted_kernels_fail,
    ));
    trials
}

/// The stream-K plans tried in the simulator (few: each launch of 384 threads a block is slow
/// there): 224-row tiles on 3 blocks, 128-row tiles on 7, and 256-row tiles on 132 (one block
/// per step on these shapes: every tile split among all of its steps' blocks).
const SIM_STREAM_K: &[(DecodeTile, usize)] = &[
    (DecodeTile::Rows224, 3),
    (DecodeTile::Rows128, 7),
    (DecodeTile::Rows256, 132),
];

/// The stream-K plans tried on CUDA: every tile on one block (every tile whole, several a
/// block), on 2, 3 and 7 blocks, and on one block per SM of the GPU.
fn cuda_stream_k(sms: usize) -> Vec<(DecodeTile, usize)> {
    let mut plans = Vec::new();
    for tile in [DecodeTile::Rows256, DecodeTile::Rows224, DecodeTile::Rows128] {
        for blocks in [1, 2, 3, 7, sms] {
            plans.push((tile, blocks));
        }
    }
    plans
}

/// Every plan that applies at `(m, k)` with aligned matrices, beside the default; `stream_k`:
/// the stream-K plans among them.
fn plans(m: usize, n: usize, k: usize, stream_k: &[(DecodeTile, usize)]) -> Vec<DecodePlan> {
    let mut plans = vec![DecodePlan::Naive];
    if DecodePlan::mma_applies(m, n, k, true) {
        for slices in [1, 2, 3] {
            plans.push(DecodePlan::Mma {
                slices,
                loads: DecodeLoads::EvictFirst,
            });
        }
        if m <= 8 {
            for loads in [DecodeLoads::ReadOnly, DecodeLoads::NoAllocate] {
                plans.push(DecodePlan::Mma { slices: 1, loads });
            }
            for slices in [1, 2, 3] {
                plans.push(rows(slices, DecodeLoads::EvictFirst));
            }
        }
        if m == 1 {
            plans.push(rows(1, DecodeLoads::NoAllocate));
        }
        for tile in [DecodeTile::Rows256, DecodeTile::Rows128] {
            for slices in [1, 2, 3] {
                plans.push(DecodePlan::Wgmma { tile, slices });
            }
        }
        // The 224-row tile: one slice (bf16 out) and two (f32 partial planes).
        for slices in [1, 2] {
            plans.push(DecodePlan::Wgmma {
                tile: DecodeTile::Rows224,
                slices,
            });
        }
        for &(tile, blocks) in stream_k {
            plans.push(DecodePlan::StreamK { tile, blocks });
        }
    }
    plans
}

/// The CUDA-core rung's plan.
fn rows(slices: usize, loads: DecodeLoads) -> DecodePlan {
    DecodePlan::Rows { slices, loads }
}

/// Whether `plan` has a kernel writing f32: every plan but the comparison variants of one slice.
fn has_f32(plan: DecodePlan) -> bool {
    match plan {
        DecodePlan::Mma { loads, .. } => loads == DecodeLoads::EvictFirst,
        DecodePlan::Rows { loads, .. } => loads == DecodeLoads::EvictFirst,
        _ => true,
    }
}

/// One shape: the default plan and every plan, bf16 and f32 results, into NaN-filled outputs.
fn decode_shape(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let x = random_of(rng, m, k, bf16::from_f32);
    let w = random_of(rng, n, k, bf16::from_f32);
    let (want, abs) = references(&x.view(), &w.t())?;
    let (dx, dw) = (gpu.upload_matrix(&x)?, gpu.upload_matrix(&w)?);
    let u_bf16 = f64::powi(2.0, -8);
    let mut failures = Vec::new();
    let mut check = |what: String, got: Vec<f64>, u: f64| {
        if let Some(e) = half_violation(&got, &want, &abs, k, u) {
            failures.push(format!("{m}x{k}x{n} {what}: {e}"));
        }
    };
    let y = gpu.matmul_decode(&dx, &dw)?;
    check_dim("matmul_decode", y.dim(), (m, n))?;
    check("matmul_decode".into(), widen(&y.to_array()?), u_bf16);
    let mut y32 = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN))?;
    gpu.matmul_decode_to(&dx, &dw, &mut y32)?;
    check("matmul_decode_to f32".into(), widen(&y32.to_array()?), 0.0);
    let stream_k = if gpu.is_simulator() {
        SIM_STREAM_K.to_vec()
    } else {
        cuda_stream_k(gpu.multiprocessors()?)
    };
    for plan in plans(m, n, k, &stream_k) {
        let mut y = gpu.upload_matrix(&Array2::from_elem((m, n), bf16::NAN))?;
        gpu.matmul_decode_with(&dx, &dw, &mut y, plan)?;
        check(format!("{} bf16", plan.name()), widen(&y.to_array()?), u_bf16);
        if !has_f32(plan) {
            continue;
        }
        let mut y = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN))?;
        gpu.matmul_decode_with(&dx, &dw, &mut y, plan)?;
        check(format!("{} f32", plan.name()), widen(&y.to_array()?), 0.0);
    }
    all_passed(failures)
}

/// Wrong shapes and plans that do not apply are refused; an empty product is fine.
fn decode_errors(gpu: &Gpu) -> Check {
    let x = gpu.upload_matrix(&Array2::from_elem((2, 16), bf16::ONE))?;
    let w = gpu.upload_matrix(&Array2::from_elem((3, 8), bf16::ONE))?;
    expect_shape_mismatch("matmul_decode", gpu.matmul_decode(&x, &w), &[2, 16], &[3, 8])?;
    let w = gpu.upload_matrix(&Array2::from_elem((3, 16), bf16::ONE))?;
    let mut y = gpu.zeros_matrix_of::<bf16>(3, 2)?;
    if !matches!(
        gpu.matmul_decode_to(&x, &w, &mut y),
        Err(gpukern::Error::ShapeMismatch { .. })
    ) {
        return Err("matmul_decode_to into a 3x2 result of a 2x3 product was not refused".into());
    }
    let mut y = gpu.zeros_matrix_of::<bf16>(2, 3)?;
    let mut y32 = gpu.zeros_matrix_of::<f32>(2, 3)?;
    let invalid = |what: &str, r: gpukern::Result<()>| -> Check {
        match r {
            Err(gpukern::Error::InvalidArgument { .. }) => Ok(()),
            other => Err(format!("{what}: {other:?}, not InvalidArgument").into()),
        }
    };
    let zero = DecodePlan::Mma {
        slices: 0,
        loads: DecodeLoads::EvictFirst,
    };
    invalid("0 slices", gpu.matmul_decode_with(&x, &w, &mut y, zero))?;
    let zero_wgmma = DecodePlan::Wgmma {
        tile: DecodeTile::Rows128,
        slices: 0,
    };
    invalid(
        "0 slices of the Hopper rung",
        gpu.matmul_decode_with(&x, &w, &mut y, zero_wgmma),
    )?;
    let zero_blocks = DecodePlan::StreamK {
        tile: DecodeTile::Rows224,
        blocks: 0,
    };
    invalid(
        "a stream-K grid of 0 blocks",
        gpu.matmul_decode_with(&x, &w, &mut y, zero_blocks),
    )?;
    let nc = DecodePlan::Mma {
        slices: 1,
        loads: DecodeLoads::ReadOnly,
    };
    invalid(
        "read-only with an f32 result",
        gpu.matmul_decode_with(&x, &w, &mut y32, nc),
    )?;
    let x9 = gpu.upload_matrix(&Array2::from_elem((9, 16), bf16::ONE))?;
    let mut y9 = gpu.zeros_matrix_of::<bf16>(9, 3)?;
    invalid(
        "read-only with m = 9",
        gpu.matmul_decode_with(&x9, &w, &mut y9, nc),
    )?;
    let x12 = gpu.upload_matrix(&Array2::from_elem((2, 12), bf16::ONE))?;
    let w12 = gpu.upload_matrix(&Array2::from_elem((3, 12), bf16::ONE))?;
    let mma = DecodePlan::Mma {
        slices: 1,
        loads: DecodeLoads::EvictFirst,
    };
    invalid(
        "k = 12 on tensor cores",
        gpu.matmul_decode_with(&x12, &w12, &mut y, mma),
    )?;
    let hopper = DecodePlan::Wgmma {
        tile: DecodeTile::Rows256,
        slices: 1,
    };
    invalid(
        "k = 12 on the Hopper rung",
        gpu.matmul_decode_with(&x12, &w12, &mut y, hopper),
    )?;
    invalid(
        "0 slices of the CUDA-core rung",
        gpu.matmul_decode_with(&x, &w, &mut y, rows(0, DecodeLoads::EvictFirst)),
    )?;
    let x1 = gpu.upload_matrix(&Array2::from_elem((1, 16), bf16::ONE))?;
    let mut y1 = gpu.zeros_matrix_of::<bf16>(1, 3)?;
    let mut y1_32 = gpu.zeros_matrix_of::<f32>(1, 3)?;
    invalid(
        "no-allocate loads with an f32 result",
        gpu.matmul_decode_with(&x1, &w, &mut y1_32, rows(1, DecodeLoads::NoAllocate)),
    )?;
    // k = 256: two slices of 128 (with k = 16 a plan of 2 slices launches one).
    let x256 = gpu.upload_matrix(&Array2::from_elem((1, 256), bf16::ONE))?;
    let w256 = gpu.upload_matrix(&Array2::from_elem((3, 256), bf16::ONE))?;
    invalid(
        "no-allocate loads in 2 slices",
        gpu.matmul_decode_with(&x256, &w256, &mut y1, rows(2, DecodeLoads::NoAllocate)),
    )?;
    invalid(
        "no-allocate loads at m = 2",
        gpu.matmul_decode_with(&x, &w, &mut y, rows(1, DecodeLoads::NoAllocate)),
    )?;
    invalid(
        "the CUDA-core rung with m = 9",
        gpu.matmul_decode_with(&x9, &w, &mut y9, rows(1, DecodeLoads::EvictFirst)),
    )?;
    invalid(
        "k = 12 on the CUDA-core rung",
        gpu.matmul_decode_with(&x12, &w12, &mut y, rows(1, DecodeLoads::EvictFirst)),
    )?;
    let x65 = gpu.upload_matrix(&Array2::from_elem((65, 16), bf16::ONE))?;
    let mut y65 = gpu.zeros_matrix_of::<bf16>(65, 3)?;
    invalid(
        "m = 65 on the Hopper rung",
        gpu.matmul_decode_with(&x65, &w, &mut y65, hopper),
    )?;
    // k = 0: zeros, by the tutorial rung.
    let x0 = gpu.upload_matrix(&Array2::<bf16>::zeros((2, 0)))?;
    let w0 = gpu.upload_matrix(&Array2::<bf16>::zeros((3, 0)))?;
    let y0 = gpu.matmul_decode(&x0, &w0)?.to_array()?;
    if y0 != Array2::<bf16>::zeros((2, 3)) {
        return Err(format!("k = 0 gave {y0:?}, not zeros").into());
    }
    Ok(())
}

/// `gpukern::matmul_decode` on a contiguous weight and on a transposed, sliced view of one.
fn global_decode(rng: &mut StdRng) -> Check {
    let x = random_of(rng, 3, 24, bf16::from_f32);
    let w = random_of(rng, 40, 24, bf16::from_f32);
    let wt = random_of(rng, 24, 80, bf16::from_f32);
    let mut failures = Vec::new();
    for (what, w) in [
        ("contiguous", w.view()),
        ("transposed ..;2", wt.slice(s![.., ..;2]).reversed_axes()),
    ] {
        let (want, abs) = references(&x.view(), &w.t())?;
        let got = gpukern::matmul_decode(&x, &w)?;
        if let Some(e) = half_violation(&widen(&got), &want, &abs, 24, f64::powi(2.0, -8)) {
            failures.push(format!("{what}: {e}"));
        }
    }
    all_passed(failures)
}

/// The check against planted wrong decode kernels (CPU functions giving their results) at
/// `m = 8, k = 4096, n = 64`: the exact product rounded to bf16 passes; the product less one
/// step of 32 along `k` (a lost `k` tile), the product with row 1 of `X` read for row 0, with a
/// slice of `k` added twice (a split's sum), and with a row of zeros (the copy engine's fill
/// stored for a row of `Y`), fail, with either result type.
fn planted_kernels_fail() -> Result<(), Failed> {
    let mut rng = crate::common::rng_for("matmul_decode_check");
    let (m, k, n) = (8, 4096, 64);
    let x = random_of(&mut rng, m, k, bf16::from_f32);
    let w = random_of(&mut rng, n, k, bf16::from_f32);
    let (want, abs) = references(&x.view(), &w.t()).map_err(|e| e.to_string())?;
    let round = |c: &Array2<f64>, to: fn(f64) -> f64| c.iter().map(|&v| to(v)).collect::<Vec<f64>>();
    let as_f32 = |v: f64| f64::from(v as f32);
    let as_bf16 = |v: f64| gpukern::gpukern_device::convert::f64_to_bf16(v).to_f64();
    let u_bf16 = f64::powi(2.0, -8);
    if let Some(e) = half_violation(&round(&want, as_bf16), &want, &abs, k, u_bf16) {
        return Err(format!("the honest bf16 result was refused: {e}").into());
    }
    // A lost step of 32 along k: columns 2048..2080 dropped.
    let mut x_lost = x.clone();
    x_lost.slice_mut(s![.., 2048..2080]).fill(bf16::ZERO);
    let lost = cpu::matmul_f64(&x_lost, &w.t()).map_err(|e| e.to_string())?;
    // Row 1 of X read for row 0.
    let mut x_row = x.clone();
    let row1 = x.row(1).to_owned();
    x_row.row_mut(0).assign(&row1);
    let wrong_row = cpu::matmul_f64(&x_row, &w.t()).map_err(|e| e.to_string())?;
    // A slice of k added twice (a split's sum reading one partial plane twice): columns
    // 0..512 doubled.
    let mut x_twice = x.clone();
    x_twice
        .slice_mut(s![.., 0..512])
        .mapv_inplace(|v| bf16::from_f32(2.0 * v.to_f32()));
    let twice = cpu::matmul_f64(&x_twice, &w.t()).map_err(|e| e.to_string())?;
    // A row of Y computed from the copy engine's zero fill instead of its row of X (the Hopper
    // rung's box of X loaded one row short): the last row all zeros.
    let mut x_zero = x.clone();
    x_zero.row_mut(m - 1).fill(bf16::ZERO);
    let zero_row = cpu::matmul_f64(&x_zero, &w.t()).map_err(|e| e.to_string())?;
    for (what, wrong) in [
        ("losing a k step", &lost),
        ("reading the wrong row of X", &wrong_row),
        ("adding a slice of k twice", &twice),
        ("storing a zero row", &zero_row),
    ] {
        for (result, got, u) in [
            ("f32", round(wrong, as_f32), 0.0),
            ("bf16", round(wrong, as_bf16), u_bf16),
        ] {
            if half_violation(&got, &want, &abs, k, u).is_none() {
                return Err(format!("a kernel {what} with a {result} result passed the check").into());
            }
        }
    }
    Ok(())
}
