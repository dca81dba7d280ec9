//! Cooperative launches and the grid barrier ([`gpukern::Module::cooperative`],
//! `gpukern_device::grid::sync`) through the check kernel `grid_exchange`: every thread of the
//! grid writes a slot, passes the barrier, reads the next block's slot, passes it again, for many
//! rounds; the sums must match the host's. Per backend (`{sim,cuda}::grid::exchange_BxT_rR`),
//! with the largest grid the device keeps resident on CUDA (`cuda::grid::exchange_resident`),
//! and a grid one block past that refused with `Error::TooLarge` (`{sim,cuda}::grid::too_large`),
//! never launched to hang. Then `softmax_grid_row`, one row split over a cooperative grid:
//! launched directly on ragged shapes that reach each part of a block's share (registers,
//! shared memory, the re-read rest; rows off 16-byte boundaries; a row shorter than the grid)
//! at several temperatures (`{sim,cuda}::grid::softmax_row::..`), the edge rows
//! (`{sim,cuda}::grid::softmax_row_edges::RxC`), and through the one-pass plan's switch
//! `grid_row_max_rows` (`{sim,cuda}::grid::softmax_row_plan::RxC`, on CUDA 1 x 2^24); launches
//! one after another on one barrier word zeroed once (`{sim,cuda}::grid::softmax_row_one_word`),
//! the plan called again and again on one `Gpu`, the same length and others, so that its
//! workspace is reused (`{sim,cuda}::grid::softmax_row_reuse`), and inside a graph capture
//! (`{sim,cuda}::grid::softmax_row_graph`). The
//! simulator's own checks of the barrier (planted bugs: a barrier
//! removed, a launch not cooperative, a thread gone) are in `gpukern-device/tests/grid.rs`.

use gpukern::kernels::grid_check::{self as kg, grid_exchange_value};
use gpukern::kernels::softmax::{self as ksoft, GRID_ROW_VECTORS};
use gpukern::ops::softmax::{OnePassConfig, OnePassPlan};
use gpukern::{Error, Gpu, LaunchConfig, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_matrix;
use crate::common::trial::{Target, trial};

/// Most relative error of a softmax entry (the softmax family's tolerance).
const SOFTMAX_MAX_REL: f32 = 5e-5;

/// One direct launch of `softmax_grid_row`.
#[derive(Clone, Copy, Debug)]
struct RowCase {
    rows: usize,
    cols: usize,
    blocks: u32,
    threads: u32,
    shared_vecs: usize,
}

const fn row_case(rows: usize, cols: usize, blocks: u32, threads: u32, shared_vecs: usize) -> RowCase {
    RowCase {
        rows,
        cols,
        blocks,
        threads,
        shared_vecs,
    }
}

/// Simulator cases. With 32 threads a block holds 128 vectors in registers: 1 x 5 is shorter
/// than the grid (and than a vector per block); 1 x 1027 fits the registers of 3 blocks; 2 x
/// 4099 (rows off 16-byte boundaries) overflows into 40 shared vectors then the re-read rest;
/// 3 x 3001 keeps nothing in shared memory; 1 x 20_003 on 8 blocks of 64 threads, most of it
/// re-read; 1 x 9_000 on 16 blocks of 256 threads, all in registers; 1 x 40_003 and 2 x 12_003
/// (shares of 2500 and 1000 vectors) with whole groups of `GRID_ROW_GROUP` loads per thread in
/// both the shared part and the re-read rest, not only a last partial group.
const SIM_ROW_CASES: &[RowCase] = &[
    row_case(1, 5, 4, 32, 8),
    row_case(1, 1027, 3, 32, 0),
    row_case(2, 4099, 4, 32, 40),
    row_case(3, 3001, 5, 32, 0),
    row_case(1, 20_003, 8, 64, 100),
    row_case(1, 9_000, 16, 256, 16),
    row_case(1, 40_003, 4, 32, 500),
    row_case(2, 12_003, 3, 32, 300),
];

/// CUDA cases: 132 blocks (one per H200 multiprocessor) of 512 threads, with and without shared
/// memory, ragged lengths; rows shorter than the grid.
const CUDA_ROW_CASES: &[RowCase] = &[
    row_case(1, 7, 132, 512, 0),
    row_case(3, 1_000_003, 132, 512, 1000),
    row_case(1, (1 << 22) + 1, 132, 512, 0),
    row_case(1, (1 << 22) + 3, 132, 512, 8000),
    row_case(2, 5_000_001, 66, 256, 13_000),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (blocks, threads, rounds) in [(1, 32, 3), (3, 64, 4), (7, 96, 2), (16, 256, 2)] {
        let name = format!("grid::exchange_{blocks}x{threads}_r{rounds}");
        trials.push(trial(sim, &name, move |gpu, _| {
            exchange(gpu, blocks, threads, rounds)
        }));
    }
    for (blocks, threads, rounds) in [(1, 32, 3), (2, 1024, 50), (132, 256, 100), (264, 128, 200)] {
        let name = format!("grid::exchange_{blocks}x{threads}_r{rounds}");
        trials.push(trial(cuda, &name, move |gpu, _| {
            exchange(gpu, blocks, threads, rounds)
        }));
    }
    trials.push(trial(cuda, "grid::exchange_resident", |gpu, _| {
        let blocks = gpu
            .library()
            .cooperative_blocks(&kg::grid_exchange::KERNEL, 256, 0)?;
        exchange(gpu, blocks, 256, 500)
    }));
    for target in [sim, cuda] {
        trials.push(trial(target, "grid::too_large", |gpu, _| too_large(gpu)));
    }
    for (target, cases) in [(sim, SIM_ROW_CASES), (cuda, CUDA_ROW_CASES)] {
        for &c in cases {
            let name = format!(
                "grid::softmax_row::{}x{}_g{}x{}_s{}",
                c.rows, c.cols, c.blocks, c.threads, c.shared_vecs
            );
            trials.push(trial(target, &name, move |gpu, rng| {
                softmax_row_case(gpu, rng, c)
            }));
        }
    }
    let edges: [(&Target, &[RowCase]); 2] = [
        (
            sim,
            &[row_case(5, 4001, 5, 32, 16), row_case(5, 40_001, 3, 32, 300)],
        ),
        (
            cuda,
            &[
                row_case(5, 4001, 5, 32, 16),
                row_case(5, 3_000_001, 132, 512, 8000),
            ],
        ),
    ];
    for (target, cases) in edges {
        for &c in cases {
            let name = format!("grid::softmax_row_edges::{}x{}", c.rows, c.cols);
            trials.push(trial(target, &name, move |gpu, _| softmax_row_edges(gpu, c)));
        }
    }
    let one_word: [(&Target, &[RowCase]); 2] = [(sim, &SIM_ROW_CASES[2..5]), (cuda, &CUDA_ROW_CASES[1..5])];
    for (target, cases) in one_word {
        trials.push(trial(target, "grid::softmax_row_one_word", move |gpu, rng| {
            softmax_row_one_word(gpu, rng, cases)
        }));
    }
    let reuse: [(&Target, &[(usize, usize)]); 2] = [
        (sim, &[(1, 70_001), (2, 33_003), (1, 70_001)]),
        (
            cuda,
            &[
                (1, 1 << 24),
                (1, 1 << 24),
                (3, 3_000_001),
                (1, 262_149),
                (1, 1 << 24),
            ],
        ),
    ];
    for (target, shapes) in reuse {
        trials.push(trial(target, "grid::softmax_row_reuse", move |gpu, rng| {
            softmax_row_reuse(gpu, rng, shapes)
        }));
    }
    for (target, shape) in [(sim, (1, 70_001)), (cuda, (1, 1 << 24))] {
        trials.push(trial(target, "grid::softmax_row_graph", move |gpu, rng| {
            softmax_row_graph(gpu, rng, shape)
        }));
    }
    let plan_shapes: [(&Target, &[(usize, usize)]); 2] = [
        (sim, &[(1, 70_001), (2, 33_003)]),
        (cuda, &[(1, 1 << 24), (4, 3_000_001), (1, 262_149)]),
    ];
    for (target, shapes) in plan_shapes {
        for &(rows, cols) in shapes {
            let name = format!("grid::softmax_row_plan::{rows}x{cols}");
            trials.push(trial(target, &name, move |gpu, rng| {
                softmax_row_plan(gpu, rng, (rows, cols))
            }));
        }
    }
    trials
}

/// `softmax_grid_row` on `x` at `t` with the shape of `c` (a fresh zeroed barrier word).
fn run_grid_row(gpu: &Gpu, x: &Array2<f32>, t: f32, c: RowCase) -> gpukern::Result<Vec<f32>> {
    run_grid_row_on(gpu, x, t, c, &mut gpu.zeros_of::<u32>(1)?)
}

/// [`run_grid_row`] on the barrier word `barrier`, whose low 31 bits are 0 (zeroed, or left so
/// by an earlier launch).
fn run_grid_row_on(
    gpu: &Gpu,
    x: &Array2<f32>,
    t: f32,
    c: RowCase,
    barrier: &mut gpukern::DeviceVec<u32>,
) -> gpukern::Result<Vec<f32>> {
    let (rows, cols) = x.dim();
    let dx = gpu.upload(x.as_slice().unwrap_or_default())?;
    let mut dy = gpu.upload(&vec![f32::NAN; rows * cols])?;
    // Two sets of (m, s) per block, whatever the rows.
    let mut partials = gpu.upload(&vec![f32::NAN; 4 * c.blocks as usize])?;
    let config = LaunchConfig {
        grid: (c.blocks, 1, 1),
        block: (c.threads, 1, 1),
        shared_mem_bytes: ksoft::grid_row_shared_bytes(c.shared_vecs as u32),
    };
    let library = gpu.library();
    // SAFETY: `x` and `y` hold rows*cols floats, both device allocations (same alignment);
    // `partials` 4*blocks, `barrier` a word with its low bits 0 (the caller); cooperative,
    // blocks of a multiple of 32.
    unsafe {
        ksoft::softmax_grid_row::launch(
            &library.cooperative(),
            config,
            &dx,
            &mut dy,
            &mut partials,
            barrier,
            rows,
            cols,
            c.shared_vecs,
            t,
        )?
    };
    dy.to_vec()
}

/// A random `rows x cols` input through [`run_grid_row`] at several temperatures, against
/// `cpu::softmax_rows`.
fn softmax_row_case(gpu: &Gpu, rng: &mut StdRng, c: RowCase) -> Check {
    let x = random_matrix(rng, c.rows, c.cols);
    let held = GRID_ROW_VECTORS * c.threads as usize;
    let mut failures = Vec::new();
    for t in [1.0f32, 0.5, 0.0, -1.0] {
        let got = run_grid_row(gpu, &x, t, c)?;
        let want = cpu::softmax_rows(&x, t);
        let what = format!("softmax_grid_row {c:?} (held {held} vectors), t = {t}");
        if let Err(e) = check_rel_each(&what, &got, want.as_slice().unwrap_or_default(), SOFTMAX_MAX_REL) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// Rows at the edges through `softmax_grid_row` with the shape of `c` (5 rows), the values
/// spread over several blocks and parts of a block's share (4001 columns on 5 blocks of 32: a
/// share of 200 vectors, 128 in registers, 16 in shared memory, the rest re-read, every group a
/// last partial one; the longer cases with whole groups too): `+inf` entries in the first and
/// last blocks' shares, a NaN in the last block's, all `-inf`, an ordinary row, and one `-inf`
/// mid-row (the reference for `t < 0`); each row gets the documented result
/// (`cpu::softmax_rows` follows the rules).
fn softmax_row_edges(gpu: &Gpu, c: RowCase) -> Check {
    let cols = c.cols;
    let mut x = Array2::from_shape_fn((c.rows, cols), |(r, j)| {
        ((r * 31 + j * 7) % 23) as f32 / 7.0 - 1.5
    });
    x[(0, 3)] = f32::INFINITY;
    x[(0, cols - 101)] = f32::INFINITY;
    x[(1, cols - 2)] = f32::NAN;
    x.row_mut(2).fill(f32::NEG_INFINITY);
    x[(4, cols / 2)] = f32::NEG_INFINITY;
    let mut failures = Vec::new();
    for t in [1.0f32, 0.0, -2.0] {
        let got = run_grid_row(gpu, &x, t, c)?;
        let want = cpu::softmax_rows(&x, t);
        for (r, (g, w)) in got.chunks(cols).zip(want.rows()).enumerate() {
            for (j, (&g, &w)) in g.iter().zip(w.iter()).enumerate() {
                let same =
                    (g.is_nan() && w.is_nan()) || (g - w).abs() <= SOFTMAX_MAX_REL * w.abs().max(1e-30);
                if !same && failures.len() < 4 {
                    failures.push(format!("t = {t}, row {r}, column {j}: {g} (want {w})"));
                }
            }
        }
    }
    all_passed(failures)
}

/// The one-pass plan's settings that send rows of up to 4 past the block and cluster kernels to
/// `softmax_grid_row` (their limits lowered on the simulator, so that short rows get there).
fn grid_row_config(gpu: &Gpu) -> OnePassConfig {
    OnePassConfig {
        grid_row_max_rows: 4,
        ..if gpu.is_simulator() {
            OnePassConfig {
                warp_max_cols: 32,
                block_max_cols: 64,
                cluster_min_cols: usize::MAX,
                ..OnePassConfig::default()
            }
        } else {
            OnePassConfig::default()
        }
    }
}

/// The one-pass plan with `grid_row_max_rows` set takes `softmax_grid_row` for rows past the
/// block and cluster kernels (their limits lowered on the simulator, so that short rows get
/// there), and the result matches the reference.
fn softmax_row_plan(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let config = grid_row_config(gpu);
    let plan = config.plan(rows, cols);
    if plan != OnePassPlan::GridRow {
        return Err(format!("{rows} x {cols}: plan {plan:?}, not GridRow").into());
    }
    let x = random_matrix(rng, rows, cols);
    let dx = gpu.upload_matrix(&x)?;
    let mut dy = poisoned_matrix(gpu, rows, cols)?;
    let mut failures = Vec::new();
    for t in [1.0f32, -0.5] {
        gpu.softmax_into_one_pass(&dx, &mut dy, t, &config)?;
        let got = dy.to_array()?;
        let want = cpu::softmax_rows(&x, t);
        let what = format!("grid-row plan, {rows} x {cols}, t = {t}");
        if let Err(e) = check_rel_each(
            &what,
            got.as_slice().unwrap_or_default(),
            want.as_slice().unwrap_or_default(),
            SOFTMAX_MAX_REL,
        ) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// Launches of `softmax_grid_row` one after another on one barrier word, zeroed once: each
/// launch must leave it ready for the next (its low bits 0), whatever the grid and the rows (an
/// odd and an even number of rows, so the word's top bit is left at either value).
fn softmax_row_one_word(gpu: &Gpu, rng: &mut StdRng, cases: &[RowCase]) -> Check {
    let mut barrier = gpu.zeros_of::<u32>(1)?;
    let mut failures = Vec::new();
    for (i, &c) in cases.iter().chain(cases.iter().rev()).enumerate() {
        let x = random_matrix(rng, c.rows, c.cols);
        let t = if i % 2 == 0 { 1.0 } else { -0.5 };
        let got = run_grid_row_on(gpu, &x, t, c, &mut barrier)?;
        let want = cpu::softmax_rows(&x, t);
        let what = format!("launch {i} on one barrier word: {c:?}, t = {t}");
        if let Err(e) = check_rel_each(&what, &got, want.as_slice().unwrap_or_default(), SOFTMAX_MAX_REL) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// The grid-row plan called again and again on one `Gpu`, on shapes one after another (the
/// same one twice, then others, then the first again): the workspace (partial statistics,
/// barrier word, launch shapes) made by the first call and reused by the next, with no zeroing
/// in between; each result against the reference. On the simulator the barrier word is added to
/// as on the GPU, so a launch that left it wrong fails the next.
fn softmax_row_reuse(gpu: &Gpu, rng: &mut StdRng, shapes: &[(usize, usize)]) -> Check {
    let config = grid_row_config(gpu);
    let mut failures = Vec::new();
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        let plan = config.plan(rows, cols);
        if plan != OnePassPlan::GridRow {
            return Err(format!("{rows} x {cols}: plan {plan:?}, not GridRow").into());
        }
        let x = random_matrix(rng, rows, cols);
        let dx = gpu.upload_matrix(&x)?;
        let mut dy = poisoned_matrix(gpu, rows, cols)?;
        let t = if i % 2 == 0 { 1.0 } else { -0.5 };
        gpu.softmax_into_one_pass(&dx, &mut dy, t, &config)?;
        let got = dy.to_array()?;
        let want = cpu::softmax_rows(&x, t);
        let what = format!("call {i} of the grid-row plan on one Gpu, {rows} x {cols}, t = {t}");
        if let Err(e) = check_rel_each(
            &what,
            got.as_slice().unwrap_or_default(),
            want.as_slice().unwrap_or_default(),
            SOFTMAX_MAX_REL,
        ) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// The grid-row plan inside a graph capture, on a handle of its own: on CUDA refused while the
/// handle has no workspace yet (making it allocates), captured once one call has made it; the
/// graph replayed twice (the barrier word reused by the replays, with the eager call between
/// them) gives the reference both times.
fn softmax_row_graph(gpu: &Gpu, rng: &mut StdRng, (rows, cols): (usize, usize)) -> Check {
    let gpu = gpu.stream()?;
    let config = grid_row_config(&gpu);
    let x = random_matrix(rng, rows, cols);
    let dx = gpu.upload_matrix(&x)?;
    let mut dy = poisoned_matrix(&gpu, rows, cols)?;
    if !gpu.is_simulator() {
        // (The simulator's workspace is one for the process: another trial may have made it.)
        let first = gpu.capture(|g| g.softmax_into_one_pass(&dx, &mut dy, 1.0, &config));
        if !matches!(first, Err(Error::Capture { .. })) {
            return Err(format!(
                "a capture before the handle's first grid-row call: {:?}",
                first.err()
            )
            .into());
        }
    }
    gpu.softmax_into_one_pass(&dx, &mut dy, 1.0, &config)?;
    let mut graph = gpu.capture_with((dx, poisoned_matrix(&gpu, rows, cols)?), move |g, (x, y)| {
        g.softmax_into_one_pass(x, y, 1.0, &config)
    })?;
    let want = cpu::softmax_rows(&x, 1.0);
    let mut failures = Vec::new();
    for replay in 0..2 {
        graph.launch()?;
        let (dx, _) = graph.buffers();
        // An eager call between the replays, on the same workspace.
        gpu.softmax_into_one_pass(dx, &mut dy, 1.0, &config)?;
        for (what, got) in [
            ("replay", graph.buffers().1.to_array()?),
            ("eager call", dy.to_array()?),
        ] {
            let what = format!("{what} {replay} of a captured grid-row softmax, {rows} x {cols}");
            if let Err(e) = check_rel_each(
                &what,
                got.as_slice().unwrap_or_default(),
                want.as_slice().unwrap_or_default(),
                SOFTMAX_MAX_REL,
            ) {
                failures.push(e.to_string());
            }
        }
    }
    all_passed(failures)
}

/// Launches `grid_exchange` on `blocks` blocks of `threads` for `rounds` rounds and compares
/// every thread's sum with the host's.
fn exchange(gpu: &Gpu, blocks: u32, threads: u32, rounds: u32) -> Check {
    let n = (blocks * threads) as usize;
    let mut slots = gpu.zeros_of::<u32>(n)?;
    let mut out = gpu.upload(&vec![u32::MAX; n])?;
    let mut barrier = gpu.zeros_of::<u32>(1)?;
    let config = LaunchConfig {
        grid: (blocks, 1, 1),
        block: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let library = gpu.library();
    // SAFETY: a cooperative launch; `slots` and `out` hold a word per thread, `barrier` one zero.
    unsafe {
        kg::grid_exchange::launch(
            &library.cooperative(),
            config,
            &mut slots,
            &mut out,
            &mut barrier,
            rounds,
        )?
    };
    let got = out.to_vec()?;
    let mut wrong = Vec::new();
    for b in 0..blocks {
        let next = (b + 1) % blocks;
        for t in 0..threads {
            let want = (0..rounds).fold(0u32, |s, r| s.wrapping_add(grid_exchange_value(r, next, t)));
            let at = (b * threads + t) as usize;
            if got[at] != want && wrong.len() < 4 {
                wrong.push(format!("block {b} thread {t}: {} (want {want})", got[at]));
            }
        }
    }
    all_passed(wrong)
}

/// A cooperative grid one block larger than the device keeps resident is refused before launch.
fn too_large(gpu: &Gpu) -> Check {
    let library = gpu.library();
    let most = library.cooperative_blocks(&kg::grid_exchange::KERNEL, 128, 0)?;
    let blocks = most + 1;
    let n = blocks as usize * 128;
    let (mut slots, mut out, mut barrier) = (
        gpu.zeros_of::<u32>(n)?,
        gpu.zeros_of::<u32>(n)?,
        gpu.zeros_of::<u32>(1)?,
    );
    let config = LaunchConfig {
        grid: (blocks, 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: refused before it runs (checked below); sized as the kernel needs otherwise.
    let result = unsafe {
        kg::grid_exchange::launch(
            &library.cooperative(),
            config,
            &mut slots,
            &mut out,
            &mut barrier,
            1,
        )
    };
    match result {
        Err(Error::TooLarge { .. }) if !gpu.is_simulator() => Ok(()),
        Err(Error::Simulator(e)) if gpu.is_simulator() && e.to_string().contains("cooperative grid") => {
            Ok(())
        }
        other => {
            Err(format!("a cooperative grid of {blocks} blocks (at most {most} resident): {other:?}").into())
        }
    }
}
