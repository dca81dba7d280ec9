//! Empty products and the `k` rules of the tensor-core kernels, on every kernel a caller can
//! force: `{sim,cuda}::matmul_empty::half` (bf16 and f16 operands, the operands' type and f32
//! out, each `HalfTile` and `WsTile` and the plan's own choice, `m`, `n` or `k` of 0 with the
//! other sizes ragged or multiples of 8) and `{sim,cuda}::matmul_empty::tf32` (each `Tf32Tile`
//! on empty products, and the `wgmma` tilings refusing a `k` that is not a multiple of 4).
//!
//! Every product writes into a poisoned output, so that a `k = 0` product that leaves it as it
//! was fails; an empty result must come back empty and a forced kernel must not fail where the
//! product is empty (no tensor map of an empty operand is ever encoded).

use gpukern::ops::matmul::{HalfTile, Tf32Tile, WsTile};
use gpukern::{Element, Error, Gpu, MatmulElement, MatmulOutput, bf16, f16};
use libtest_mimic::Trial;
use ndarray::Array2;

use crate::common::check::*;
use crate::common::trial::{Target, trial};

/// `(m, k, n)` of empty products: each size 0 alone, with the others multiples of 8 (the
/// `wgmma` kernels' rule) or ragged, and all three.
const EMPTY_SHAPES: &[(usize, usize, usize)] = &[
    (0, 16, 8),
    (0, 5, 7),
    (16, 0, 8),
    (4, 0, 8),
    (4, 0, 7),
    (130, 0, 136),
    (16, 8, 0),
    (4, 5, 0),
    (0, 0, 0),
];

/// `k` the TF32 `wgmma` tilings refuse: not a multiple of 4.
const TF32_BAD_K: &[usize] = &[1, 3, 6];

/// The half-precision kernels a caller can force, `None` the plan's choice.
const HALF_TILES: &[Option<HalfTile>] = &[
    None,
    Some(HalfTile::Square),
    Some(HalfTile::Wgmma),
    Some(HalfTile::WarpSpecialized),
    Some(HalfTile::WarpSpecializedTile(WsTile::Wide)),
    Some(HalfTile::WarpSpecializedTile(WsTile::Square)),
    Some(HalfTile::WarpSpecializedTile(WsTile::Narrow)),
];

/// Every trial of the module.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for target in [sim, cuda] {
        trials.push(trial(target, "matmul_empty::half", |gpu, _| half_empties(gpu)));
        trials.push(trial(target, "matmul_empty::tf32", |gpu, _| tf32_rules(gpu)));
    }
    trials
}

/// What a product gave, for messages.
fn outcome<T>(r: &gpukern::Result<T>) -> String {
    match r {
        Ok(_) => "Ok".into(),
        Err(e) => format!("{e}"),
    }
}

/// Every half-precision empty product of [`EMPTY_SHAPES`] with every tile of [`HALF_TILES`],
/// both element types and both result types.
fn half_empties(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    half_type(gpu, bf16::ONE, &mut failures)?;
    half_type(gpu, f16::ONE, &mut failures)?;
    all_passed(failures)
}

/// [`half_empties`] for operands of `T` (`one` a nonzero value of it).
fn half_type<T>(gpu: &Gpu, one: T, failures: &mut Vec<String>) -> Check
where
    T: MatmulElement + Element + PartialEq + std::fmt::Debug,
    f32: MatmulOutput<T>,
{
    for &(m, k, n) in EMPTY_SHAPES {
        let a = gpu.upload_matrix(&Array2::from_elem((m, k), one))?;
        let b = gpu.upload_matrix(&Array2::from_elem((k, n), one))?;
        let what =
            |tile: Option<HalfTile>, out: &str| format!("{} {m}x{k}x{n} -> {out}, tile {tile:?}", T::NAME);
        // The plan's own choice through the allocating call.
        let c = gpu.matmul(&a, &b).and_then(|c| c.to_array());
        match c {
            Ok(c) if c == Array2::from_elem((m, n), T::default()) => {}
            other => failures.push(format!("matmul {}: {other:?}", what(None, T::NAME))),
        }
        for &tile in HALF_TILES {
            // The one-warpgroup kernel takes bf16 only: refused for f16 whatever the shape.
            let refused = tile == Some(HalfTile::Wgmma) && T::NAME == "f16";
            into_poisoned(
                gpu,
                (&a, &b),
                (m, n),
                one,
                tile,
                refused,
                &what(tile, T::NAME),
                failures,
            )?;
            into_poisoned(
                gpu,
                (&a, &b),
                (m, n),
                2.0f32,
                tile,
                refused,
                &what(tile, "f32"),
                failures,
            )?;
        }
    }
    Ok(())
}

/// `C = A * B` into an `m x n` `C` full of `poison` with `tile`: zeros, or (`refused`)
/// `InvalidArgument`.
#[allow(clippy::too_many_arguments)]
fn into_poisoned<T: Element, O>(
    gpu: &Gpu,
    (a, b): (&gpukern::DeviceMatrix<T>, &gpukern::DeviceMatrix<T>),
    (m, n): (usize, usize),
    poison: O,
    tile: Option<HalfTile>,
    refused: bool,
    what: &str,
    failures: &mut Vec<String>,
) -> Check
where
    O: MatmulOutput<T> + PartialEq + std::fmt::Debug,
{
    let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), poison))?;
    let r = match tile {
        None => gpu.matmul_to(a, b, &mut c),
        Some(tile) => gpu.matmul_to_with(a, b, &mut c, tile),
    };
    match (refused, &r) {
        (true, Err(Error::InvalidArgument { .. })) => {}
        (true, _) => failures.push(format!("{what}: {} where InvalidArgument was due", outcome(&r))),
        (false, Ok(())) => {
            let got = c.to_array()?;
            if got != Array2::from_elem((m, n), O::default()) {
                failures.push(format!("{what}: not zeros"));
            }
        }
        (false, Err(_)) => failures.push(format!("{what}: {}", outcome(&r))),
    }
    Ok(())
}

/// Each TF32 tiling on the empty products into a poisoned `C` (zeros, or an empty result), and
/// the `wgmma` tilings refusing `k` of [`TF32_BAD_K`] with `InvalidArgument` (the copy engine's
/// rows of `A` and `B^T` must be whole 16 bytes).
fn tf32_rules(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    let mut tiles = Tf32Tile::ALL.to_vec();
    tiles.push(Tf32Tile::Wgmma);
    tiles.extend(WsTile::ALL.map(Tf32Tile::WgmmaTile));
    for tile in tiles {
        for &(m, k, n) in EMPTY_SHAPES {
            let a = gpu.upload_matrix(&Array2::from_elem((m, k), 1.0f32))?;
            let b = gpu.upload_matrix(&Array2::from_elem((k, n), 1.0f32))?;
            let mut c = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN))?;
            let what = format!("tf32 {m}x{k}x{n}, tile {tile:?}");
            match gpu.matmul_tf32_into(&a, &b, &mut c, tile) {
                Ok(()) if c.to_array()? == Array2::zeros((m, n)) => {}
                Ok(()) => failures.push(format!("{what}: not zeros")),
                Err(e) => failures.push(format!("{what}: {e}")),
            }
        }
        if !matches!(tile, Tf32Tile::Wgmma | Tf32Tile::WgmmaTile(_)) {
            continue;
        }
        for &k in TF32_BAD_K {
            let (m, n) = (9, 12);
            let a = gpu.upload_matrix(&Array2::from_elem((m, k), 1.0f32))?;
            let b = gpu.upload_matrix(&Array2::from_elem((k, n), 1.0f32))?;
            let mut c = gpu.zeros_matrix(m, n)?;
            let r = gpu.matmul_tf32_into(&a, &b, &mut c, tile);
            if !matches!(r, Err(Error::InvalidArgument { .. })) {
                failures.push(format!(
                    "tf32 {m}x{k}x{n}, tile {tile:?}: {} where InvalidArgument was due",
                    outcome(&r)
                ));
            }
        }
    }
    all_passed(failures)
}
