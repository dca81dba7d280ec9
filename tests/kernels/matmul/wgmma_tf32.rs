//! The TF32 `wgmma` kernel (`Tf32Tile::Wgmma`: the warp-specialised persistent kernel on f32
//! operands, `B` transposed into a workspace) forced through `Gpu::matmul_tf32_into`, as
//! `{sim,cuda}::matmul_tf32_wgmma::MxKxN` on 128 x 256 tiles (`Tf32Tile::WgmmaTile(WsTile::Wide)`),
//! `{sim,cuda}::matmul_tf32_wgmma_{128x128,64x128}::MxKxN` on the smaller tiles and
//! `cuda::matmul_tf32_wgmma_auto::MxKxN` with the tile by shape, against the f64 product: every element within the
//! truncation bound (`Tf32Tile::error_factor`, `u = 2^-10`) and the RMS error within a small
//! factor of what truncated TF32 operands give (`tf32_statistical_violation`: a dropped step of
//! 8 along `k`, a wrong descriptor or a bf16-like operand fails it), into a poisoned output. In
//! the simulator the copies, barriers and products are the device helpers' fallbacks (the
//! products interpret the very PTX text the GPU runs, TF32 operands truncated as the tensor core
//! reads them); on CUDA the trials run on a compute capability 9.0 GPU only (elsewhere they check
//! that the launch is refused with a clear error).
//!
//! `{sim,cuda}::matmul_tf32_wgmma::rounding` pins down how the operands become TF32: on the GPU
//! the `TFLOAT32` tensor maps make the copy engine round them to nearest; the simulator's copies
//! move bits, so there the tensor core's truncation shows.

use gpukern::Gpu;
use gpukern::ops::matmul::{Tf32Tile, WsTile};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, trial};
use crate::common::{TF32_TRUNCATED, random_matrix, tf32_statistical_violation};

/// Simulator shapes `(m, k, n)`, `k` a multiple of 4: one element; four tiles of 128 x 256
/// over the simulator's two persistent blocks, each walking two tiles of four steps of 32 along
/// `k` (the 4-stage ring wraps across tiles, the last step ragged: 100 = 3 x 32 + 4), both edges
/// ragged; an odd `n` (single stores) with one step; `k = 0` (zeros).
const SIM_SHAPES: &[(usize, usize, usize)] = &[(1, 4, 1), (130, 100, 264), (65, 36, 23), (3, 0, 5)];

/// CUDA shapes: the simulator's, 256^3, every edge ragged with more tiles than multiprocessors,
/// 4096^3.
const CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 4, 1),
    (130, 100, 264),
    (65, 36, 23),
    (3, 0, 5),
    (256, 256, 256),
    (4097, 4100, 4092),
    (4096, 4096, 4096),
];

/// Simulator shapes of the 128 x 128 tile (6 stages): one element; four tiles with eight steps
/// along `k` (the ring wraps within a tile), both edges ragged; an odd `n`.
const SQUARE_SIM_SHAPES: &[(usize, usize, usize)] = &[(1, 4, 1), (130, 232, 136), (65, 36, 23)];
/// Simulator shapes of the 64 x 128 tile (8 stages, consumers side by side along `n`): one
/// element; six tiles with ten steps along `k`, the last column tile's second consumer past `n`;
/// an odd `n`.
const NARROW_SIM_SHAPES: &[(usize, usize, usize)] = &[(1, 4, 1), (65, 292, 264), (65, 36, 23)];
/// CUDA shapes of the smaller tiles and of the tile by shape.
const SMALL_TILE_CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 4, 1),
    (130, 232, 136),
    (256, 256, 256),
    (1024, 1024, 1024),
    (4097, 4100, 4092),
];

/// A product's `(m, k, n)`.
type Shape = (usize, usize, usize);

/// Every trial of the TF32 `wgmma` kernel.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    let wide = Tf32Tile::WgmmaTile(WsTile::Wide);
    let groups: [(&str, Tf32Tile, &[Shape], &[Shape]); 4] = [
        ("matmul_tf32_wgmma", wide, SIM_SHAPES, CUDA_SHAPES),
        (
            "matmul_tf32_wgmma_128x128",
            Tf32Tile::WgmmaTile(WsTile::Square),
            SQUARE_SIM_SHAPES,
            SMALL_TILE_CUDA_SHAPES,
        ),
        (
            "matmul_tf32_wgmma_64x128",
            Tf32Tile::WgmmaTile(WsTile::Narrow),
            NARROW_SIM_SHAPES,
            SMALL_TILE_CUDA_SHAPES,
        ),
        (
            "matmul_tf32_wgmma_auto",
            Tf32Tile::Wgmma,
            &[],
            &[(1024, 1024, 1024), (2048, 2048, 2048)],
        ),
    ];
    for (group, tile, sim_shapes, cuda_shapes) in groups {
        for (target, shapes) in [(sim, sim_shapes), (cuda, cuda_shapes)] {
            for &shape in shapes {
                let (m, k, n) = shape;
                trials.push(trial(
                    target,
                    &format!("{group}::{m}x{k}x{n}"),
                    move |gpu, rng| tf32_wgmma_shape(gpu, rng, shape, tile),
                ));
            }
        }
    }
    for target in [sim, cuda] {
        trials.push(trial(target, "matmul_tf32_wgmma::rounding", |gpu, _| {
            rounding(gpu)
        }));
        trials.push(trial(target, "matmul_tf32_wgmma::errors", |gpu, _| errors(gpu)));
    }
    trials
}

/// Whether `gpu` runs the kernel; if not, checks that a launch is refused with the `sm_90a`
/// error (`Ok(false)`).
fn runs_here(gpu: &Gpu) -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    if gpu.has_wgmma() {
        return Ok(true);
    }
    let (a, b) = (gpu.zeros_matrix(8, 8)?, gpu.zeros_matrix(8, 8)?);
    let mut c = gpu.zeros_matrix(8, 8)?;
    match gpu.matmul_tf32_into(&a, &b, &mut c, Tf32Tile::Wgmma) {
        Err(gpukern::Error::InvalidArgument { detail, .. }) if detail.contains("sm_90a") => Ok(false),
        other => Err(format!("a TF32 wgmma launch off compute capability 9.0 gave {other:?}").into()),
    }
}

/// One product through the `wgmma` tile `tile` into a poisoned output, within its bound.
fn tf32_wgmma_shape(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize), tile: Tf32Tile) -> Check {
    if !runs_here(gpu)? {
        return Ok(());
    }
    let (a, b) = (random_matrix(rng, m, k), random_matrix(rng, k, n));
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut c = poisoned_matrix(gpu, m, n)?;
    gpu.matmul_tf32_into(&da, &db, &mut c, tile)?;
    let got = c.to_array()?;
    let got = got.as_slice().unwrap_or_default();
    let factor = tile.error_factor(k);
    match tf32_statistical_violation(&a.view(), &b.view(), got, factor, TF32_TRUNCATED) {
        None => Ok(()),
        Some(e) => Err(format!("{m}x{k}x{n} matmul_tf32_into(wgmma): {e}").into()),
    }
}

/// `A` of `x = 1 + 2^-11 + 2^-12` (low 13 bits set: TF32 to nearest gives `1 + 2^-10`,
/// truncated `1`) times `B` of ones, `k = 64`: every element is `64 (1 + 2^-10)` where the copy
/// engine rounds (CUDA, `TFLOAT32` maps), `64` where the tensor core truncates (the simulator),
/// and never the exact `64 x`.
fn rounding(gpu: &Gpu) -> Check {
    if !runs_here(gpu)? {
        return Ok(());
    }
    let (m, k, n) = (130, 64, 264);
    let x = 1.0 + f32::powi(2.0, -11) + f32::powi(2.0, -12);
    let a = gpu.upload_matrix(&Array2::from_elem((m, k), x))?;
    let b = gpu.upload_matrix(&Array2::from_elem((k, n), 1.0f32))?;
    let mut c = poisoned_matrix(gpu, m, n)?;
    gpu.matmul_tf32_into(&a, &b, &mut c, Tf32Tile::Wgmma)?;
    let (want, how) = if gpu.is_simulator() {
        (
            64.0,
            "truncated by the tensor core (the simulator's copies move bits)",
        )
    } else {
        (
            64.0 * (1.0 + f32::powi(2.0, -10)),
            "rounded to nearest by the copy engine (TFLOAT32 maps)",
        )
    };
    let got = c.to_array()?;
    match got.iter().position(|&v| v != want) {
        None => Ok(()),
        Some(i) => Err(format!(
            "C[{}][{}] = {} (truncated operands give 64, rounded ones {}, exact {}): want the operands {how}",
            i / n,
            i % n,
            got.as_slice().unwrap_or_default()[i],
            64.0 * (1.0 + f32::powi(2.0, -10)),
            64.0 * x,
        )
        .into()),
    }
}

/// Refusals: `k` not a multiple of 4, with the way out named; nothing written.
fn errors(gpu: &Gpu) -> Check {
    if !runs_here(gpu)? {
        return Ok(());
    }
    let (a, b) = (gpu.zeros_matrix(4, 6)?, gpu.zeros_matrix(6, 8)?);
    let mut c = poisoned_matrix(gpu, 4, 8)?;
    match gpu.matmul_tf32_into(&a, &b, &mut c, Tf32Tile::Wgmma) {
        Err(gpukern::Error::InvalidArgument { detail, .. })
            if detail.contains("multiple of 4") && detail.contains("Tf32Tile::Wide") => {}
        other => return Err(format!("k = 6 through Tf32Tile::Wgmma gave {other:?}").into()),
    }
    if c.to_array()?.iter().any(|v| !v.is_nan()) {
        return Err("a refused launch wrote its output".into());
    }
    Ok(())
}
