//! The Hopper `wgmma` kernels forced through `Gpu::matmul_to_with`, against
//! `cpu::matmul_f64`: the one-warpgroup kernel (`HalfTile::Wgmma`, bf16 operands) as
//! `{sim,cuda}::matmul_wgmma::MxKxN`, the warp-specialised persistent kernel
//! on 128 x 256 tiles (`HalfTile::WarpSpecializedTile(WsTile::Wide)`, bf16 and f16 operands) as
//! `{sim,cuda}::matmul_wgmma_ws::{bf16,f16}::MxKxN`, on its smaller tiles as
//! `{sim,cuda}::matmul_wgmma_ws_{128x128,64x128}::{bf16,f16}::MxKxN`, and with the tile the plan
//! picks (`HalfTile::WarpSpecialized`) as `{sim,cuda}::matmul_wgmma_ws_auto::...`; each with both
//! result types (the operands' own and f32). In the simulator the copies, barriers and products are the device helpers'
//! fallbacks (`gpukern_device::{tma, mbarrier, wgmma}`: the products interpret the very PTX text
//! the GPU runs, descriptors and swizzle decoded as the PTX ISA defines them, so a wrong scale-d,
//! transpose bit or descriptor offset fails here too; the barriers' waits poll, so the producer
//! and consumer warpgroups wait at different places as on the GPU, and a wait that never
//! completes is reported as a deadlock); on CUDA the trial runs on a compute capability 9.0 GPU
//! only (elsewhere the sm_90a module is not loaded and the trial checks that the launch is
//! refused with a clear error). A failure names the first wrong element (row, column) and its
//! neighbours in the row, so a layout mistake (a swizzle, a descriptor offset, the accumulator
//! layout) shows its pattern.
//!
//! Bound per element, `matmul/half.rs`'s `element_bound`: `|C - C_ref| <= u_out |C_ref| + eta +
//! 4 terms(k) 2^-24 sum_l |A(i,l) B(l,j)|`, `u_out` the unit roundoff of the result type (0 for
//! f32), `eta` half its subnormal spacing.

use gpukern::ops::matmul::{HalfTile, WsTile};
use gpukern::{Element, Gpu, MatmulOutput, bf16, cpu, f16};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_matrix;
use crate::common::trial::{Target, trial};

/// Simulator shapes `(m, k, n)`, `k` and `n` multiples of 8: one row; two row blocks with a
/// ragged last one, six tiles of `k` (the 4-stage ring wraps, the last tile ragged), two column
/// blocks; a narrow `n`.
const SIM_SHAPES: &[(usize, usize, usize)] = &[(1, 8, 8), (130, 328, 136), (65, 64, 24)];

/// CUDA shapes: the simulator's, 256^3, 4096^3, and every edge ragged with `k`, `n` multiples of 8.
const CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 8, 8),
    (130, 328, 136),
    (65, 64, 24),
    (256, 256, 256),
    (4096, 4096, 4096),
    (4097, 4104, 4088),
];

/// Simulator shapes of the warp-specialised kernel, first with `k`, `n` multiples of 8: one element; four
/// tiles of 128 x 256 over the simulator's two persistent blocks, each block walking two tiles
/// of four steps along `k` (the 4-stage ring wraps across tiles, the last step and both edges
/// ragged); the same with seven steps (the ring wraps within a tile, so that the simulator's
/// producer refills a stage while a consumer's products of it may still be in flight: a stage
/// released too early shows in the numbers); a narrow `n`; three tiles, so that the last round's
/// tile runs as two column halves (`wgmma_ws::tail_halves`: one tile left over on two blocks),
/// the second half ragged (columns 128 to 199).
///
/// Then shapes whose `k` or `n` is not a multiple of 8: the operands go through padded copies
/// (rows of whole 16 bytes) first.
const WS_SIM_SHAPES: &[(usize, usize, usize)] = &[
    (1, 8, 8),
    (130, 200, 264),
    (130, 392, 264),
    (65, 64, 24),
    (257, 72, 200),
    (1, 1, 1),
    (130, 203, 261),
    (65, 64, 19),
];

/// CUDA shapes of the warp-specialised kernel: the simulator's, 256^3, a grid of more tiles than
/// multiprocessors with every edge ragged, 4096^3, 2180 x 264 x 2040 (144 tiles: the last round's
/// 12 split into column halves on 132 SMs, the last half ragged); then padded copies: one element, a ragged
/// one, and 4097 x 4093 x 4095 (the benchmark's ragged shape).
const WS_CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 8, 8),
    (130, 200, 264),
    (65, 64, 24),
    (256, 256, 256),
    (4097, 4104, 4088),
    (4096, 4096, 4096),
    (2180, 264, 2040),
    (1, 1, 1),
    (130, 203, 261),
    (4097, 4093, 4095),
];

/// Simulator shapes of the 128 x 128 tile (6 stages): one element; exactly one tile, then one row
/// more (a second row of tiles holding one row: the tile-count boundary); four tiles over the
/// simulator's two blocks with seven steps along `k` (the ring wraps within a tile), both edges
/// ragged; three tiles, the last round's one split into column halves (the second ragged:
/// columns 64 to 119); a padded copy (`k`, `n` not multiples of 8).
const SQUARE_SIM_SHAPES: &[(usize, usize, usize)] = &[
    (1, 8, 8),
    (128, 64, 128),
    (129, 64, 128),
    (130, 392, 136),
    (257, 64, 120),
    (130, 203, 133),
];

/// Simulator shapes of the 64 x 128 tile (8 stages, two consumers side by side along `n`): one
/// element; exactly one tile, then one column more (the boundary); six tiles with ten steps along
/// `k` (the ring wraps within a tile), both edges ragged, the last column tile's second consumer
/// holding columns past `n` only; a padded copy.
const NARROW_SIM_SHAPES: &[(usize, usize, usize)] = &[
    (1, 8, 8),
    (64, 64, 128),
    (64, 64, 136),
    (65, 584, 264),
    (70, 203, 61),
];

/// CUDA shapes of the smaller tiles: 256^3, 1024^3 (the shape they are for), every edge ragged
/// over more tiles than multiprocessors, 2180 x 264 x 2040 (288 tiles of 128 x 128: the last
/// round's 24 split into halves; the 64 x 128 tile never splits), and the padded ragged shape.
const SMALL_TILE_CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 8, 8),
    (256, 256, 256),
    (1024, 1024, 1024),
    (4097, 4104, 4088),
    (2180, 264, 2040),
    (4097, 4093, 4095),
];

/// Simulator and CUDA shapes of the tile the plan picks: a small product (the smallest tile)
/// and, on CUDA, 2048^3 and 4096^3 (the largest).
const AUTO_SIM_SHAPES: &[(usize, usize, usize)] = &[(130, 72, 136)];
/// See [`AUTO_SIM_SHAPES`].
const AUTO_CUDA_SHAPES: &[(usize, usize, usize)] = &[(1024, 1024, 1024), (2048, 2048, 2048)];

/// Every trial of the `wgmma` kernels.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, shapes) in [(sim, SIM_SHAPES), (cuda, CUDA_SHAPES)] {
        for &shape in shapes {
            let (m, k, n) = shape;
            trials.push(trial(
                target,
                &format!("matmul_wgmma::{m}x{k}x{n}"),
                move |gpu, rng| wgmma_shape::<bf16>(gpu, rng, shape, HalfTile::Wgmma),
            ));
        }
    }
    for (target, shapes) in [(sim, WS_SIM_SHAPES), (cuda, WS_CUDA_SHAPES)] {
        for &shape in shapes {
            let (m, k, n) = shape;
            let tile = HalfTile::WarpSpecializedTile(WsTile::Wide);
            trials.push(trial(
                target,
                &format!("matmul_wgmma_ws::bf16::{m}x{k}x{n}"),
                move |gpu, rng| wgmma_shape::<bf16>(gpu, rng, shape, tile),
            ));
            trials.push(trial(
                target,
                &format!("matmul_wgmma_ws::f16::{m}x{k}x{n}"),
                move |gpu, rng| wgmma_shape::<f16>(gpu, rng, shape, tile),
            ));
        }
    }
    let groups = [
        (
            "matmul_wgmma_ws_128x128",
            HalfTile::WarpSpecializedTile(WsTile::Square),
            SQUARE_SIM_SHAPES,
            SMALL_TILE_CUDA_SHAPES,
        ),
        (
            "matmul_wgmma_ws_64x128",
            HalfTile::WarpSpecializedTile(WsTile::Narrow),
            NARROW_SIM_SHAPES,
            SMALL_TILE_CUDA_SHAPES,
        ),
        (
            "matmul_wgmma_ws_auto",
            HalfTile::WarpSpecialized,
            AUTO_SIM_SHAPES,
            AUTO_CUDA_SHAPES,
        ),
    ];
    for (group, tile, sim_shapes, cuda_shapes) in groups {
        for (target, shapes) in [(sim, sim_shapes), (cuda, cuda_shapes)] {
            for &shape in shapes {
                let (m, k, n) = shape;
                trials.push(trial(
                    target,
                    &format!("{group}::bf16::{m}x{k}x{n}"),
                    move |gpu, rng| wgmma_shape::<bf16>(gpu, rng, shape, tile),
                ));
                trials.push(trial(
                    target,
                    &format!("{group}::f16::{m}x{k}x{n}"),
                    move |gpu, rng| wgmma_shape::<f16>(gpu, rng, shape, tile),
                ));
            }
        }
    }
    trials.extend(crate::common::trial::plain_trials!(
        "matmul_wgmma_ws_plan",
        [ws_tiles_for_benchmark_shapes]
    ));
    trials
}

/// `WsTile::choose` on an H200's 132 SMs: 128 x 256 from 2048^3 on (the default for large
/// products unchanged), 128 x 128 where it gives about a wave and 128 x 256 does not, 64 x 128
/// below; the smallest tile when none fills the GPU.
fn ws_tiles_for_benchmark_shapes() {
    let sms = 132;
    for (m, n, want) in [
        (8192, 8192, WsTile::Wide),
        (4096, 4096, WsTile::Wide),
        (4097, 4093, WsTile::Wide),
        (2048, 2048, WsTile::Wide),
        (1536, 1536, WsTile::Square),
        (2048, 1024, WsTile::Square),
        (1024, 1024, WsTile::Narrow),
        (1, 1, WsTile::Narrow),
    ] {
        assert_eq!(WsTile::choose(m, n, sms), want, "{m} x {n}");
    }
    // Each tile's count at the boundary: 119 tiles (90% of 132 is 118.8) is a wave, 118 not.
    let wide = WsTile::Wide.tiling();
    assert_eq!(wide.tiles(128 * 7, 256 * 17), 119);
    assert_eq!(WsTile::choose(128 * 7, 256 * 17, sms), WsTile::Wide);
    assert_eq!(WsTile::choose(128 * 2, 256 * 59, sms), WsTile::Square);
}

/// A 16-bit operand type of these trials.
trait Half: Element + MatmulOutput<Self> + Into<f64> + Copy {
    /// The type's name in failures.
    const NAME: &'static str;
    /// Unit roundoff of a result of this type.
    const UNIT: f64;
    /// `x` rounded to the type.
    fn of(x: f32) -> Self;
    /// Not a number.
    const NAN: Self;
}

impl Half for bf16 {
    const NAME: &'static str = "bf16";
    const UNIT: f64 = 1.0 / 256.0;
    fn of(x: f32) -> Self {
        bf16::from_f32(x)
    }
    const NAN: Self = bf16::NAN;
}

impl Half for f16 {
    const NAME: &'static str = "f16";
    const UNIT: f64 = 1.0 / 2048.0;
    fn of(x: f32) -> Self {
        f16::from_f32(x)
    }
    const NAN: Self = f16::NAN;
}

/// The first element of `got` outside the bound, with its neighbours in the row; `None` when
/// every element is inside.
fn first_wrong(got: &[f64], want: &Array2<f64>, abs: &Array2<f64>, k: usize, u_out: f64) -> Option<String> {
    let (m, n) = want.dim();
    let bound_of = super::half::element_bound(k, u_out);
    if got.len() != m * n {
        return Some(format!("{} elements, want {}", got.len(), m * n));
    }
    let wrong = (0..m * n).filter(|&i| {
        let (w, s) = (want[(i / n, i % n)], abs[(i / n, i % n)]);
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let outside = !((got[i] - w).abs() <= bound_of(w, s));
        outside
    });
    let count = wrong.clone().count();
    let i = wrong.clone().next()?;
    let (r, c) = (i / n, i % n);
    let around: Vec<String> = (c.saturating_sub(3)..(c + 4).min(n))
        .map(|j| format!("[{r},{j}] {:.5} want {:.5}", got[r * n + j], want[(r, j)]))
        .collect();
    Some(format!(
        "{count} of {} elements wrong; first at row {r}, column {c} (row block {}, column block {}, \
         row {} / column {} in the block): {}",
        m * n,
        r / 128,
        c / 128,
        r % 128,
        c % 128,
        around.join(", ")
    ))
}

/// One product with both result types through the `wgmma` kernel `tile`.
fn wgmma_shape<T: Half>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (m, k, n): (usize, usize, usize),
    tile: HalfTile,
) -> Check
where
    f32: MatmulOutput<T>,
{
    let a = random_matrix(rng, m, k).mapv(T::of);
    let b = random_matrix(rng, k, n).mapv(T::of);
    let (da, db) = (gpu.upload_matrix(&a)?, gpu.upload_matrix(&b)?);
    let mut c16 = gpu.upload_matrix(&Array2::from_elem((m, n), T::NAN))?;
    let launched = gpu.matmul_to_with(&da, &db, &mut c16, tile);
    if !gpu.has_wgmma() {
        // The sm_90a module is not loaded here: the launch must be refused, clearly.
        return match launched {
            Err(gpukern::Error::InvalidArgument { detail, .. }) if detail.contains("sm_90a") => Ok(()),
            other => Err(format!("a wgmma launch off compute capability 9.0 gave {other:?}").into()),
        };
    }
    launched?;
    let mut c32 = gpu.upload_matrix(&Array2::from_elem((m, n), f32::NAN))?;
    gpu.matmul_to_with(&da, &db, &mut c32, tile)?;
    let (a64, b64) = (a.mapv(Into::<f64>::into), b.mapv(Into::<f64>::into));
    let want = cpu::matmul_f64(&a64.view(), &b64.view())?;
    let abs = cpu::matmul_f64(&a64.mapv(f64::abs).view(), &b64.mapv(f64::abs).view())?;
    let mut failures = Vec::new();
    let name = T::NAME;
    let got16: Vec<f64> = c16.to_array()?.iter().map(|&x| x.into()).collect();
    if let Some(e) = first_wrong(&got16, &want, &abs, k, T::UNIT) {
        failures.push(format!("{m}x{k}x{n} {name} result: {e}"));
    }
    let got32: Vec<f64> = c32.to_array()?.iter().map(|&x| f64::from(x)).collect();
    if let Some(e) = first_wrong(&got32, &want, &abs, k, 0.0) {
        failures.push(format!("{m}x{k}x{n} f32 result: {e}"));
    }
    all_passed(failures)
}
