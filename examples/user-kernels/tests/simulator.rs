//! The user kernels in the simulator, as a user tests their own without a GPU: each against its
//! CPU reference on ragged shapes (lengths and rows that are no multiple of a vector, a tile or a
//! block; grids of one tile and of several); one planted bug per kernel, reported with kernel,
//! block, thread and what was broken; and the PTX assembled by ptxas without spills or stack.

use gpukern::{Error, Gpu, LaunchConfig, Module, PtxSet, bf16};
use gpukern_device::sim::{SimError, Violation};
use user_kernels::{KERNELS, reference};

/// The user kernels in the simulator.
fn simulator() -> Module {
    Gpu::simulator()
        .load(&KERNELS)
        .expect("a simulator module needs no PTX")
}

/// A deterministic stream of pseudo-random numbers (xorshift).
fn noise(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

#[test]
fn bias_gelu_matches_the_reference_on_ragged_shapes() {
    let module = simulator();
    let mut r = noise(3);
    for (rows, cols) in [(1, 1), (3, 7), (5, 24), (17, 130), (2, 1000)] {
        let x: Vec<bf16> = (0..rows * cols)
            .map(|_| bf16::from_f32((r() % 4001) as f32 / 500.0 - 4.0))
            .collect();
        let bias: Vec<f32> = (0..cols).map(|_| (r() % 101) as f32 / 100.0 - 0.5).collect();
        let gpu = module.gpu();
        let (xd, bd) = (gpu.upload(&x).unwrap(), gpu.upload(&bias).unwrap());
        let want = reference::bias_gelu(&x, &bias, cols);
        let (atol, rtol) = reference::GELU_TOL;
        for (name, gelu) in user_kernels::GELUS {
            // One element past the matrix that nothing may write.
            let mut yd = gpu.upload(&vec![bf16::from_f32(-9.0); rows * cols + 1]).unwrap();
            gelu(&module, &xd, &bd, &mut yd, rows, cols).unwrap();
            let y = yd.to_vec().unwrap();
            let ratio = reference::worst_ratio(y.iter().map(|v| f64::from(v.to_f32())), &want, atol, rtol);
            assert!(ratio <= 1.0, "{name}, {rows} x {cols}: {ratio} of the tolerance");
            assert_eq!(
                y[rows * cols],
                bf16::from_f32(-9.0),
                "{name}, {rows} x {cols}: wrote past the matrix"
            );
        }
    }
}

#[test]
fn stencil_matches_the_reference_on_ragged_grids() {
    let module = simulator();
    let mut r = noise(5);
    // Rows and columns below, at and past a tile (32 x 128; 32 x 1024 for the strips), aligned
    // (cols % 4 == 0) or not.
    for (rows, cols) in [
        (1, 1),
        (2, 3),
        (3, 5),
        (33, 129),
        (40, 260),
        (35, 131),
        (70, 256),
        (3, 1030),
    ] {
        let x: Vec<f32> = (0..rows * cols)
            .map(|_| (r() % 1000) as f32 / 250.0 - 2.0)
            .collect();
        let gpu = module.gpu();
        let xd = gpu.upload(&x).unwrap();
        let want = reference::stencil(&x, rows, cols);
        let (atol, rtol) = reference::STENCIL_TOL;
        for (name, stencil) in user_kernels::STENCILS {
            let mut out = gpu.upload(&vec![f32::NAN; rows * cols]).unwrap();
            stencil(&module, &xd, &mut out, rows, cols).unwrap();
            let ratio = reference::worst_ratio(
                out.to_vec().unwrap().iter().map(|&v| f64::from(v)),
                &want,
                atol,
                rtol,
            );
            assert!(ratio <= 1.0, "{name}, {rows} x {cols}: {ratio} of the tolerance");
        }
    }
}

#[test]
fn histogram_counts_every_byte_once() {
    let module = simulator();
    let mut r = noise(9);
    for n in [1, 15, 16, 17, 4099, 100_003] {
        let data: Vec<u8> = (0..n).map(|_| (r() >> 17) as u8).collect();
        let gpu = module.gpu();
        let dd = gpu.upload(&data).unwrap();
        let mut counts = gpu.zeros_of::<u32>(256).unwrap();
        for (name, (histogram, _)) in user_kernels::HISTOGRAMS {
            histogram(&module, &dd, &mut counts).unwrap();
            assert_eq!(
                counts.to_vec().unwrap(),
                reference::histogram(&data),
                "{name}, {n} bytes"
            );
        }
    }
}

/// The stream rungs on grids of 1 to 7 blocks (whatever the host would pick): runs that end one
/// strip and begin the next, runs of one row, runs shorter than the ring, and blocks with no
/// rows at all, on ragged shapes.
#[test]
fn stencil_stream_matches_the_reference_on_any_grid() {
    let module = simulator();
    let mut r = noise(7);
    for (rows, cols) in [(9, 1030), (13, 2050), (5, 7), (3, 2048)] {
        let x: Vec<f32> = (0..rows * cols)
            .map(|_| (r() % 1000) as f32 / 250.0 - 2.0)
            .collect();
        let gpu = module.gpu();
        let xd = gpu.upload(&x).unwrap();
        let want = reference::stencil(&x, rows, cols);
        let (atol, rtol) = reference::STENCIL_TOL;
        for blocks in [1, 2, 3, 7] {
            let config = linear(blocks, fast_kernels::STREAM_BLOCK);
            for evict in [false, true] {
                let mut out = gpu.upload(&vec![f32::NAN; rows * cols]).unwrap();
                // SAFETY: both hold `rows * cols` floats; any 1-D grid of `STREAM_BLOCK` threads.
                unsafe {
                    if evict {
                        fast_kernels::stencil_stream::<2, true>::launch(
                            &module, config, &xd, &mut out, rows, cols,
                        )
                    } else {
                        fast_kernels::stencil_stream::<2, false>::launch(
                            &module, config, &xd, &mut out, rows, cols,
                        )
                    }
                }
                .unwrap();
                let ratio = reference::worst_ratio(
                    out.to_vec().unwrap().iter().map(|&v| f64::from(v)),
                    &want,
                    atol,
                    rtol,
                );
                assert!(
                    ratio <= 1.0,
                    "stencil_stream (evict-first {evict}), {rows} x {cols} on {blocks} blocks: {ratio} of the tolerance"
                );
            }
        }
    }
}

/// The planted run that starts without the row above it: the check the stream rungs pass
/// (each block's run against the reference) fails on it as soon as a run starts below row 0.
#[test]
fn a_run_started_without_the_row_above_fails_the_reference_check() {
    let module = planted_module();
    let gpu = module.gpu();
    let (rows, cols) = (12, 20);
    let x: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 + 1.0).collect();
    let want = reference::column_mean(&x, rows, cols);
    let xd = gpu.upload(&x).unwrap();
    for (blocks, fails) in [(1, false), (3, true)] {
        let mut out = gpu.zeros_of::<f32>(rows * cols).unwrap();
        // SAFETY: both hold `rows * cols` floats, `cols <= 32`.
        unsafe {
            planted::column_mean_without_the_row_above::launch(
                &module,
                linear(blocks, 32),
                &xd,
                &mut out,
                rows,
                cols,
            )
        }
        .unwrap();
        let got = out.to_vec().unwrap();
        let ratio = reference::worst_ratio(got.iter().map(|&v| f64::from(v)), &want, 1e-6, 1e-6);
        assert_eq!(ratio > 1.0, fails, "{blocks} blocks: {ratio} of the tolerance");
    }
}

/// The banked histogram's copies are shared by the block's warps: a plain increment of lane `l`'s
/// copy races with lane `l` of the other warps, and the simulator reports it.
#[test]
fn banked_copies_bumped_without_an_atomic_are_reported_as_a_race() {
    let module = planted_module();
    let gpu = module.gpu();
    let data = gpu.upload(&[7u8; 64]).unwrap();
    let mut counts = gpu.zeros_of::<u32>(256).unwrap();
    let report = report_of(unsafe {
        planted::banked_plain_increment::launch(&module, linear(1, 64), &data, 64, &mut counts)
    });
    assert_eq!(report.kernel, "banked_plain_increment");
    assert!(
        matches!(report.violation, Violation::SharedRace { .. }),
        "{report}"
    );
}

/// One byte value over and over: each lane's 8-bit counter of it takes the most it can between
/// two folds (32 a trip), so folding too rarely overflows into the next bin and fails this (seen
/// with 9 trips between folds: 288 > 255). On one block, so that a lane makes many trips.
#[test]
fn histogram_lanes_folds_before_a_counter_overflows() {
    let module = simulator();
    let gpu = module.gpu();
    for (n, byte) in [(20 * 512 * 16 + 5, 7u8), (3 * 512 * 16, 255)] {
        let data = vec![byte; n];
        let dd = gpu.upload(&data).unwrap();
        let mut counts = gpu.zeros_of::<u32>(256).unwrap();
        let config = gpukern::LaunchConfig {
            grid: (1, 1, 1),
            block: (fast_kernels::HIST_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `data` holds `n` bytes, `counts` 256.
        unsafe { fast_kernels::histogram_lanes::launch(&module, config, &dd, n, &mut counts) }.unwrap();
        assert_eq!(
            counts.to_vec().unwrap(),
            reference::histogram(&data),
            "{n} bytes of {byte}"
        );
    }
}

/// One tile (128 x 256 x 128: two steps along `k`), then a ragged product of four tiles on the
/// simulator's two blocks (rows and columns past a tile, `k` past a step: three steps a tile,
/// six a block, so the ring of four stages wraps from one tile to the next).
#[test]
fn gemm_bias_gelu_matches_the_reference_on_a_tile_and_a_ragged_shape() {
    let module = simulator();
    let mut r = noise(17);
    for (m, n, k) in [(128, 256, 128), (136, 264, 136)] {
        let (a, b, bias) = reference::gemm_inputs(&mut r, (m, n, k));
        let gpu = module.gpu();
        let (ad, bd, biasd) = (
            gpu.upload(&a).unwrap(),
            gpu.upload(&b).unwrap(),
            gpu.upload(&bias).unwrap(),
        );
        // One element past the matrix that nothing may write.
        let mut cd = gpu.upload(&vec![bf16::from_f32(-9.0); m * n + 1]).unwrap();
        user_kernels::gemm_bias_gelu(&module, &ad, &bd, &biasd, &mut cd, (m, n, k)).unwrap();
        let c = cd.to_vec().unwrap();
        let want = reference::gemm_bias_gelu(&a, &b, &bias, (m, n, k));
        let (atol, rtol) = reference::GEMM_TOL;
        let ratio = reference::worst_ratio(c.iter().map(|v| f64::from(v.to_f32())), &want, atol, rtol);
        assert!(ratio <= 1.0, "{m} x {n} x {k}: {ratio} of the tolerance");
        assert_eq!(
            c[m * n],
            bf16::from_f32(-9.0),
            "{m} x {n} x {k}: wrote past the matrix"
        );
    }
}

/// Shapes the copy engine cannot take are refused with a clear error, before any launch.
#[test]
fn gemm_bias_gelu_refuses_what_the_copy_engine_cannot_read() {
    let module = simulator();
    let gpu = module.gpu();
    for (m, n, k) in [(0, 8, 8), (8, 8, 0), (8, 12, 8), (8, 8, 12)] {
        let a = gpu.zeros_of::<bf16>(m * k + 1).unwrap();
        let b = gpu.zeros_of::<bf16>(k * n + 1).unwrap();
        let bias = gpu.zeros_of::<f32>(n + 1).unwrap();
        let mut c = gpu.zeros_of::<bf16>(m * n + 1).unwrap();
        let err = user_kernels::gemm_bias_gelu(&module, &a, &b, &bias, &mut c, (m, n, k)).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { .. }),
            "{m} x {n} x {k}: {err}"
        );
    }
}

/// The budget: the GEMM kernel, written with the public vocabulary only, in at most 200
/// lines (its whole file: documentation, constants, the kernel and its epilogue).
#[test]
fn the_gemm_kernel_is_at_most_200_lines() {
    let source = include_str!("../kernels/src/gemm.rs");
    let lines = source.lines().count();
    assert!(lines <= 200, "kernels/src/gemm.rs has {lines} lines");
    assert!(
        !source.contains("asm!"),
        "the public vocabulary only: no inline assembly"
    );
}

mod planted {
    use gpukern_device::shared::{Array, Tile};
    use gpukern_device::{bf16, kernel, mem, thread, vector};

    /// `bias_gelu` with its bias read as a whole vector at the chunk's column, as if every row
    /// started on a vector boundary: wrong (misaligned) when `cols % 8 != 0`.
    ///
    /// # Safety
    /// None when `cols % 8 != 0`: the planted bug.
    #[kernel]
    pub unsafe fn bias_gelu_assuming_aligned_rows(
        x: *const bf16,
        bias: *const f32,
        y: *mut bf16,
        rows: usize,
        cols: usize,
    ) {
        unsafe {
            vector::map::<bf16, bf16, 8>(x, y, rows * cols, |chunk, v| {
                let b: [f32; 8] = vector::load(bias, chunk.column(cols));
                core::array::from_fn(|k| v[k] + b[k])
            })
        }
    }

    /// The stencil's shared tile without the barrier between its stores and the reads of other
    /// threads' elements (a 1-D smoothing of one row per block, 64 threads).
    ///
    /// # Safety
    /// `x` and `out` hold `64 * gridDim.x` floats; the missing barrier is the planted bug.
    #[kernel(shared(tile: Tile<f32, 1, 66>))]
    pub unsafe fn smooth_without_barrier(x: *const f32, out: *mut f32) {
        let t = thread::thread_idx_x() as usize;
        let i = thread::index_1d();
        unsafe {
            tile.store(0, t + 1, mem::load(x, i));
            if t == 0 {
                tile.store(0, 0, 0.0);
                tile.store(0, 65, 0.0);
            }
            // thread::sync_threads() belongs here.
            let v = (tile.load(0, t) + tile.load(0, t + 1) + tile.load(0, t + 2)) / 3.0;
            mem::store(out, i, v);
        }
    }

    /// A vertical mean `out[r][c] = (x[r-1][c] + x[r+1][c]) / 2` (the input on the first and
    /// last rows), each block a run of consecutive rows as in `stencil_stream`, with the rows
    /// above, at and below in registers; one thread a column.
    ///
    /// # Safety
    /// `x` and `out` hold `rows * cols` floats, `cols <= blockDim.x`; starting each run with
    /// zeros as the row above, instead of loading it, is the planted bug.
    #[kernel]
    pub unsafe fn column_mean_without_the_row_above(x: *const f32, out: *mut f32, rows: usize, cols: usize) {
        let c = thread::thread_idx_x() as usize;
        let (b, blocks) = (thread::block_idx_x() as usize, thread::grid_dim_x() as usize);
        let (r0, r1) = (b * rows / blocks, (b + 1) * rows / blocks);
        if c >= cols || r0 >= r1 {
            return;
        }
        unsafe {
            let load = |r: usize| if r < rows { mem::load(x, r * cols + c) } else { 0.0 };
            let mut up = 0.0; // The bug: `load(r0 - 1)` where `r0 > 0`.
            let mut mid = load(r0);
            for r in r0..r1 {
                let down = load(r + 1);
                let v = if r == 0 || r + 1 == rows {
                    mid
                } else {
                    0.5 * (up + down)
                };
                mem::store(out, r * cols + c, v);
                up = mid;
                mid = down;
            }
        }
    }

    /// `histogram_banked`'s copies (word `byte * 32 + lane`) bumped with a plain increment.
    ///
    /// # Safety
    /// `data` holds `n` bytes, `counts` 256, `blockDim.x` a power of two from 32 to 256; the
    /// plain increment is the planted bug.
    #[kernel(shared(bins: Array<u32, { 256 * 32 }>))]
    pub unsafe fn banked_plain_increment(data: *const u8, n: usize, counts: *mut u32) {
        let t = thread::thread_idx_x() as usize;
        let lane = t % 32;
        unsafe {
            let threads = thread::block_dim_x() as usize;
            for k in 0..256 * 32 / threads {
                bins.store(k * threads + t, 0);
            }
            thread::sync_threads();
            if t < n {
                let at = mem::load(data, t) as usize * 32 + lane;
                bins.store(at, bins.load(at) + 1);
            }
            thread::sync_threads();
            let total: u32 = (0..32).map(|k| bins.load(t * 32 + k)).sum();
            mem::store(counts, t, total);
        }
    }

    /// The histogram with plain shared increments instead of `atomic_add`.
    ///
    /// # Safety
    /// `data` holds `n` bytes, `counts` 256; the plain increment is the planted bug.
    #[kernel(shared(bins: Array<u32, 256>))]
    pub unsafe fn histogram_plain_increment(data: *const u8, n: usize, counts: *mut u32) {
        let t = thread::thread_idx_x() as usize;
        let i = thread::index_1d();
        unsafe {
            bins.store(t, 0);
            thread::sync_threads();
            if i < n {
                let b = mem::load(data, i) as usize;
                bins.store(b, bins.load(b) + 1);
            }
            thread::sync_threads();
            mem::store(counts, t, bins.load(t));
        }
    }
}

/// The GEMM's consumer loop with the planted bug that each stage is released as soon as its
/// products are issued, not once they are retired: the producer refills it under products still
/// reading it. One consumer warpgroup of 64 x 256, a ring of two stages, four steps along `k`.
mod planted_gemm {
    use gpukern_device::pipeline::Ring;
    use gpukern_device::tile::{KMajor, NMajor};
    use gpukern_device::tma::Tensor2d;
    use gpukern_device::wgmma::{self, Accumulators};
    use gpukern_device::{bf16, kernel, mem, thread};

    type ATile = KMajor<bf16, 64>;
    type BTile = NMajor<bf16, 256>;
    pub const STAGE: usize = ATile::BYTES + BTile::BYTES;

    /// `c[t] = ` the first accumulator of thread `t` of `A (64 x k) B (k x 256)`.
    ///
    /// # Safety
    /// `a` holds `64 k`, `b` `256 k` bf16, `c` 128 floats; 256 threads, one block,
    /// `Ring::shared_bytes(2, STAGE)`; the early release is the planted bug.
    #[kernel(barriers(1))]
    pub unsafe fn gemm_releasing_stages_early(a: *const bf16, b: *const bf16, c: *mut f32, k: usize) {
        let ring = unsafe { Ring::new(2, STAGE, 4) };
        let tid = thread::thread_idx_x() as usize;
        if tid < 128 {
            if tid == 0 {
                let ta = Tensor2d {
                    map: a.cast(),
                    data: a,
                    rows: 64,
                    cols: k,
                    stride: k,
                    box_rows: 64,
                    box_cols: 64,
                };
                let tb = Tensor2d {
                    map: b.cast(),
                    data: b,
                    rows: k,
                    cols: 256,
                    stride: 256,
                    box_rows: 64,
                    box_cols: 64,
                };
                let mut producer = ring.producer();
                for s in 0..k / 64 {
                    unsafe {
                        let stage = producer.acquire();
                        ATile::load(&stage, 0, &ta, 0, 64 * s);
                        BTile::load(&stage, ATile::BYTES, &tb, 64 * s, 0);
                    }
                }
            }
            return;
        }
        let mut consumer = ring.consumer();
        let mut acc = <[f32; 128]>::zeroed();
        for s in 0..k / 64 {
            unsafe {
                let stage = consumer.wait();
                let (a_desc, b_desc) = (
                    ATile::descriptors(stage.address(0), 0),
                    BTile::descriptors(stage.address(ATile::BYTES), 0),
                );
                acc = acc.mma_bf16_async(a_desc, b_desc, s > 0);
                consumer.release(&stage); // The bug: the products still read the stage.
                acc = wgmma::wait_accumulators::<0, _>(acc);
            }
        }
        unsafe { mem::store(c, tid - 128, acc[0]) };
    }
}

#[test]
fn a_stage_released_before_its_products_retire_is_reported() {
    let module = planted_module();
    let gpu = module.gpu();
    let k = 256;
    let a = gpu.upload(&vec![bf16::ONE; 64 * k]).unwrap();
    let b = gpu.upload(&vec![bf16::ONE; k * 256]).unwrap();
    let mut c = gpu.zeros_of::<f32>(128).unwrap();
    let config = LaunchConfig {
        grid: (1, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: gpukern_device::pipeline::Ring::shared_bytes(2, planted_gemm::STAGE),
    };
    let report = report_of(unsafe {
        planted_gemm::gemm_releasing_stages_early::launch(&module, config, &a, &b, &mut c, k)
    });
    assert_eq!(report.kernel, "gemm_releasing_stages_early");
}

/// Planted kernels live in this test crate: the module is this crate's, with no PTX.
fn planted_module() -> Module {
    Gpu::simulator()
        .load(&PtxSet::simulator_only(env!("CARGO_CRATE_NAME")))
        .unwrap()
}

fn report_of(result: gpukern::Result<()>) -> SimError {
    match result {
        Err(Error::Simulator(report)) => {
            println!("{report}");
            report
        }
        other => panic!("the simulator should have caught the planted bug, got {other:?}"),
    }
}

fn linear(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (blocks, 1, 1),
        block: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[test]
fn a_bias_read_as_whole_vectors_is_reported_on_rows_of_odd_length() {
    let module = planted_module();
    let (rows, cols) = (4, 12);
    let gpu = module.gpu();
    let x = gpu.upload(&vec![bf16::ONE; rows * cols]).unwrap();
    let bias = gpu.upload(&vec![0.5f32; cols]).unwrap();
    let mut y = gpu.zeros_of::<bf16>(rows * cols).unwrap();
    let report = report_of(unsafe {
        planted::bias_gelu_assuming_aligned_rows::launch(
            &module,
            linear(1, 32),
            &x,
            &bias,
            &mut y,
            rows,
            cols,
        )
    });
    assert_eq!(report.kernel, "bias_gelu_assuming_aligned_rows");
    // The chunk at element 8 starts at column 8: a vector of 8 floats from there runs past the
    // 12 of the bias (and chunk 16 starts at column 4, not 32-byte aligned).
    assert!(
        matches!(&report.violation, Violation::OutOfBounds { buffer, .. } if buffer == "bias")
            || matches!(&report.violation, Violation::Panic { message } if message.contains("misaligned")),
        "{report}"
    );
}

#[test]
fn a_shared_tile_read_without_its_barrier_is_reported_as_a_race() {
    let module = planted_module();
    let gpu = module.gpu();
    let x = gpu
        .upload(&(0..128).map(|i| i as f32).collect::<Vec<_>>())
        .unwrap();
    let mut out = gpu.zeros_of::<f32>(128).unwrap();
    let report =
        report_of(unsafe { planted::smooth_without_barrier::launch(&module, linear(2, 64), &x, &mut out) });
    assert_eq!(report.kernel, "smooth_without_barrier");
    assert!(
        matches!(
            report.violation,
            Violation::SharedRace { .. } | Violation::UninitializedSharedRead { .. }
        ),
        "{report}"
    );
}

#[test]
fn a_histogram_with_plain_shared_increments_is_reported_as_a_race() {
    let module = planted_module();
    let gpu = module.gpu();
    let data = gpu.upload(&[7u8; 256]).unwrap();
    let mut counts = gpu.zeros_of::<u32>(256).unwrap();
    let report = report_of(unsafe {
        planted::histogram_plain_increment::launch(&module, linear(1, 256), &data, 256, &mut counts)
    });
    assert_eq!(report.kernel, "histogram_plain_increment");
    assert!(
        matches!(report.violation, Violation::SharedRace { index: 7, .. }),
        "{report}"
    );
}

/// The crate's prefix-LM mask through each rung the plan runs it on in the simulator (rows, the
/// `mma.sync` rung at head dims 64 and 128, the Hopper rung at 64, 128 and 256 by `Auto`), on
/// ragged shapes: rows and keys no multiple of a tile, fewer rows than keys, grouped-query heads,
/// a prefix inside the first tile and one past the rows' positions; f16 on one of them.
#[test]
fn prefix_lm_attention_matches_the_reference_on_every_rung() {
    use gpukern::AttentionAlgorithm as A;
    use user_kernels::prefix_lm::{PrefixCase, prefix_lm_check};
    let gpu = Gpu::simulator();
    for (algorithm, head_dim, dims, prefix) in [
        (A::Rows, 64, [1, 70, 90, 2, 1, 64], 37),
        (A::Flash, 64, [1, 70, 90, 2, 1, 64], 37),
        (A::Flash, 128, [2, 65, 65, 1, 1, 128], 80),
        (A::Auto, 64, [1, 130, 150, 2, 1, 64], 37),
        (A::Auto, 128, [1, 130, 150, 2, 2, 128], 140),
        (A::Auto, 256, [1, 70, 100, 1, 1, 256], 5),
    ] {
        let ratio =
            prefix_lm_check::<bf16>(&gpu, PrefixCase::new(dims, prefix), algorithm, head_dim as u64).unwrap();
        assert!(
            ratio <= 1.0,
            "{} at {dims:?}: {ratio} of the tolerance",
            algorithm.name()
        );
    }
    let ratio =
        prefix_lm_check::<gpukern::f16>(&gpu, PrefixCase::new([1, 70, 90, 2, 1, 64], 37), A::Flash, 3)
            .unwrap();
    assert!(ratio <= 1.0, "f16: {ratio} of the tolerance");
    // The mask's own kernels ran, each rung's (the tests of this binary run in threads of one
    // process: the counts include the other prefix-LM tests').
    let launched: Vec<&str> = gpukern::sim_launch_counts("fast_kernels")
        .into_iter()
        .filter(|(name, count)| name.starts_with("attention_") && *count > 0)
        .map(|(name, _)| name)
        .collect();
    for entry in [
        "attention_rows_bf16_prefixlm",
        "attention_flash_bf16_64_prefixlm",
        "attention_flash_bf16_128_prefixlm",
        "attention_flash_f16_64_prefixlm",
        "attention_wgmma_bf16_d64_pingpong_prefixlm",
        "attention_wgmma_bf16_d128_pingpong_prefixlm",
        "attention_wgmma_bf16_d256_onetile_prefixlm",
    ] {
        assert!(launched.contains(&entry), "{entry} did not run: {launched:?}");
    }
}

/// The check fails a planted wrong kernel: the kernels given a prefix one key longer than the
/// reference's (one key more seen by the rows before it), on the Hopper rung and the rows rung.
#[test]
fn a_prefix_one_key_off_fails_the_reference_check() {
    use gpukern::AttentionAlgorithm as A;
    use user_kernels::prefix_lm::{PrefixCase, prefix_lm_check};
    let gpu = Gpu::simulator();
    for algorithm in [A::Auto, A::Rows] {
        let mut case = PrefixCase::new([1, 70, 90, 2, 1, 64], 37);
        case.kernel_prefix += 1;
        let ratio = prefix_lm_check::<bf16>(&gpu, case, algorithm, 11).unwrap();
        assert!(
            ratio > 1.0,
            "{}: the planted prefix passed ({ratio})",
            algorithm.name()
        );
    }
}

/// The crate's prefix-LM mask through every rung of the backward (its own instances of the rows
/// rung, of the `mma.sync` rung and of the one-kernel Hopper rung, the latter two at head dims 64
/// and 128, in both element types: every backward entry of the mask), on ragged shapes: rows and
/// keys no multiple of a tile, fewer keys than rows, grouped-query heads, a prefix inside the
/// first tile and one past a key block; `Auto` takes the one-kernel rung for it.
#[test]
fn prefix_lm_backward_matches_the_reference_on_every_rung() {
    use gpukern::AttentionAlgorithm as A;
    use user_kernels::prefix_lm::{PrefixCase, prefix_lm_backward_check};
    let gpu = Gpu::simulator();
    for (algorithm, dims, prefix, f16) in [
        (A::Rows, [1, 37, 45, 2, 1, 40], 10, false),
        (A::Rows, [1, 20, 33, 2, 2, 64], 7, true),
        (A::Flash, [1, 70, 90, 2, 1, 64], 37, false),
        (A::Flash, [1, 33, 20, 2, 2, 64], 5, true),
        (A::Flash, [1, 20, 70, 2, 1, 128], 30, false),
        (A::Flash, [1, 17, 30, 1, 1, 128], 9, true),
        // The one-kernel rung (`Auto` takes it: the mask says `KEY_ROWS_EXACT`): several
        // 128-key blocks adding into each query tile, keys in and past the prefix.
        (A::Auto, [1, 20, 270, 2, 1, 128], 150, false),
        (A::WgmmaFused, [1, 70, 140, 2, 2, 128], 20, true),
        (A::WgmmaFused, [1, 65, 200, 2, 1, 64], 131, false),
        (A::WgmmaFused, [2, 9, 140, 1, 1, 64], 3, true),
    ] {
        let (case, seed) = (PrefixCase::new(dims, prefix), dims[5] as u64 + prefix as u64);
        let ratio = if f16 {
            prefix_lm_backward_check::<gpukern::f16>(&gpu, case, algorithm, seed)
        } else {
            prefix_lm_backward_check::<bf16>(&gpu, case, algorithm, seed)
        }
        .unwrap();
        assert!(
            ratio <= 1.0,
            "{} at {dims:?} (f16 {f16}): {ratio} of the tolerance",
            algorithm.name()
        );
    }
    let launched: Vec<&str> = gpukern::sim_launch_counts("fast_kernels")
        .into_iter()
        .filter(|(name, count)| name.starts_with("attention_bwd") && *count > 0)
        .map(|(name, _)| name)
        .collect();
    for entry in [
        "attention_bwd_rows_dq_bf16_prefixlm",
        "attention_bwd_rows_dkdv_bf16_prefixlm",
        "attention_bwd_rows_dq_f16_prefixlm",
        "attention_bwd_rows_dkdv_f16_prefixlm",
        "attention_bwd_flash_dq_bf16_64_prefixlm",
        "attention_bwd_flash_dkdv_bf16_64_prefixlm",
        "attention_bwd_flash_dq_f16_64_prefixlm",
        "attention_bwd_flash_dkdv_f16_64_prefixlm",
        "attention_bwd_flash_dq_bf16_128_prefixlm",
        "attention_bwd_flash_dkdv_bf16_128_prefixlm",
        "attention_bwd_flash_dq_f16_128_prefixlm",
        "attention_bwd_flash_dkdv_f16_128_prefixlm",
        "attention_bwd_wgmma_fused_masked_bf16_d64_keysofprefixlm",
        "attention_bwd_wgmma_fused_masked_bf16_d128_keysofprefixlm",
        "attention_bwd_wgmma_fused_masked_f16_d64_keysofprefixlm",
        "attention_bwd_wgmma_fused_masked_f16_d128_keysofprefixlm",
    ] {
        assert!(launched.contains(&entry), "{entry} did not run: {launched:?}");
    }
}

/// The prefix-LM mask's `rows` of each key is exactly the rows that see it (what its
/// `KEY_ROWS_EXACT` promises the backward's one-kernel rung), on the CPU against the mask written
/// out apart: square, more rows than keys and more keys than rows, prefixes from none to past
/// the keys.
#[test]
fn prefix_lm_rows_of_a_key_are_exact() {
    use fast_kernels::PrefixLm;
    use gpukern_device::attention::{Mask, MaskArgs, MaskShape};
    const { assert!(<PrefixLm as Mask>::KEY_ROWS_EXACT && !<PrefixLm as Mask>::SCORE_MOD) };
    for (q_len, kv_len) in [(40, 40), (45, 20), (20, 77)] {
        for prefix in [0, 1, 7, 19, 20, 100] {
            let args = MaskArgs {
                data: core::ptr::null(),
                int: prefix,
                float: 0.0,
            };
            let mask = PrefixLm::new(
                args,
                MaskShape {
                    q_len,
                    kv_len,
                    heads: 2,
                },
            );
            for h in 0..2 {
                for kv in 0..kv_len {
                    let band = mask.rows(0, h, kv..kv + 1);
                    for q in 0..q_len {
                        assert_eq!(
                            band.contains(&q),
                            reference::prefix_lm_keeps(prefix, q_len, kv_len, q, kv),
                            "{q_len}x{kv_len}, prefix {prefix}, key {kv}, row {q}: rows {band:?}"
                        );
                    }
                }
            }
        }
    }
}

/// The backward's check fails a planted wrong kernel: the kernels given a prefix one key longer
/// than the reference's, on the `mma.sync` rung, the rows rung and the one-kernel rung.
#[test]
fn a_prefix_one_key_off_fails_the_backward_check() {
    use gpukern::AttentionAlgorithm as A;
    use user_kernels::prefix_lm::{PrefixCase, prefix_lm_backward_check};
    let gpu = Gpu::simulator();
    for algorithm in [A::Flash, A::Rows, A::WgmmaFused] {
        let mut case = PrefixCase::new([1, 70, 90, 2, 1, 64], 37);
        case.kernel_prefix += 1;
        let ratio = prefix_lm_backward_check::<bf16>(&gpu, case, algorithm, 11).unwrap();
        assert!(
            ratio > 1.0,
            "{}: the planted prefix passed ({ratio})",
            algorithm.name()
        );
    }
}

/// A custom mask's errors: its records on another device, the causal flag beside it, the
/// backward of kernels gathered without it, and the CPU references without the mask written out
/// (the one-kernel rung asked for a mask whose type does not allow it: the plan's unit tests).
#[test]
fn a_custom_mask_refuses_what_it_cannot_run() {
    use gpukern::{AttentionMask, AttentionOptions, AttentionTensor, CustomMask};
    use user_kernels::prefix_lm::PREFIX_LM;
    let gpu = Gpu::simulator();
    let data = gpu.upload(&vec![bf16::from_f32(0.5); 2 * 8 * 64]).unwrap();
    let t = AttentionTensor::contiguous(&data, [1, 8, 2, 64]).unwrap();
    let mask = CustomMask::new(&PREFIX_LM).int(3);
    let options = AttentionOptions {
        mask: AttentionMask::Custom(&mask),
        causal: true,
        ..Default::default()
    };
    assert!(matches!(
        gpu.attention(&t, &t, &t, &options),
        Err(Error::InvalidArgument { .. })
    ));
    let options = AttentionOptions {
        causal: false,
        ..options
    };
    let out = gpu.attention(&t, &t, &t, &options).unwrap();
    let o = AttentionTensor::contiguous(&out.out, [1, 8, 2, 64]).unwrap();
    // The same kernels gathered without their backward: the forward runs, the backward says
    // how to declare it.
    static FORWARD_ONLY: gpukern::MaskKernels =
        gpukern::attention_mask_kernels!(user_kernels::KERNELS, fast_kernels::prefix_lm);
    let forward_only = CustomMask::new(&FORWARD_ONLY).int(3);
    let options_forward_only = AttentionOptions {
        mask: AttentionMask::Custom(&forward_only),
        ..options
    };
    let out = gpu.attention(&t, &t, &t, &options_forward_only).unwrap();
    let grads = gpu.attention_backward(&t, &t, &t, &t, &o, &out.lse, &options_forward_only);
    assert!(
        matches!(&grads, Err(Error::InvalidArgument { detail, .. }) if detail.contains("no backward kernels")),
        "{:?}",
        grads.map(|_| ())
    );
    let host = ndarray::Array4::from_elem((1, 8, 2, 64), bf16::from_f32(0.5));
    let reference = gpukern::cpu::attention(&host, &host, &host, &options);
    assert!(matches!(reference, Err(Error::InvalidArgument { .. })));
    let reference = gpukern::cpu::attention_backward(&host, &host, &host, &host, &options);
    assert!(matches!(reference, Err(Error::InvalidArgument { .. })));
}

/// The checks' error measure: a NaN or an infinity where the reference has a number fails, the
/// same infinity (a row that sees no key) and NaN where the reference is NaN pass.
#[test]
fn worst_ratio_fails_a_nan_and_passes_equal_infinities() {
    let ratio = |got: &[f64], want: &[f64]| reference::worst_ratio(got.iter().copied(), want, 1e-3, 1e-3);
    assert_eq!(ratio(&[1.0, f64::NAN], &[1.0, 1.0]), f64::INFINITY);
    assert_eq!(ratio(&[f64::INFINITY], &[1.0]), f64::INFINITY);
    assert_eq!(ratio(&[1.0], &[f64::NEG_INFINITY]), f64::INFINITY);
    assert_eq!(
        ratio(&[f64::NEG_INFINITY, f64::NAN], &[f64::NEG_INFINITY, f64::NAN]),
        0.0
    );
    assert!((ratio(&[1.002], &[1.0]) - 1.0).abs() < 1e-9);
}

/// ptxas: the one from `GPUKERN_PTXAS`, the repository's `.tools`, or PATH.
fn ptxas() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("GPUKERN_PTXAS")
        .map(Into::into)
        .or_else(|| Some(root.join(".tools/ptxas/bin/ptxas")).filter(|p| p.is_file()))
        .expect("ptxas not found: run `bash scripts/test.sh` (it installs it) or set GPUKERN_PTXAS")
}

#[test]
fn the_ptx_assembles_for_every_architecture_without_spills_or_stack() {
    assert!(!KERNELS.modules.is_empty());
    for module in KERNELS.modules {
        let mut names = gpukern::ptx::entry_names(module.ptx);
        names.sort_unstable();
        let common = [
            "attention_bwd_flash_dkdv_bf16_128_prefixlm",
            "attention_bwd_flash_dkdv_bf16_64_prefixlm",
            "attention_bwd_flash_dkdv_f16_128_prefixlm",
            "attention_bwd_flash_dkdv_f16_64_prefixlm",
            "attention_bwd_flash_dq_bf16_128_prefixlm",
            "attention_bwd_flash_dq_bf16_64_prefixlm",
            "attention_bwd_flash_dq_f16_128_prefixlm",
            "attention_bwd_flash_dq_f16_64_prefixlm",
            "attention_bwd_rows_dkdv_bf16_prefixlm",
            "attention_bwd_rows_dkdv_f16_prefixlm",
            "attention_bwd_rows_dq_bf16_prefixlm",
            "attention_bwd_rows_dq_f16_prefixlm",
            "attention_flash_bf16_128_prefixlm",
            "attention_flash_bf16_64_prefixlm",
            "attention_flash_f16_128_prefixlm",
            "attention_flash_f16_64_prefixlm",
            "attention_rows_bf16_prefixlm",
            "attention_rows_f16_prefixlm",
            "histogram",
            "histogram_banked_x2",
            "histogram_banked_x4",
            "histogram_lanes",
            "histogram_spread",
            "stencil",
            "stencil_columns",
            "stencil_stream_x2",
            "stencil_stream_x2_evict",
        ];
        let mut want = vec!["bias_gelu"];
        if module.arch == "sm_90a" {
            want.push("gemm_bias_gelu");
            want.extend([
                "attention_bwd_wgmma_fused_masked_bf16_d128_keysofprefixlm",
                "attention_bwd_wgmma_fused_masked_bf16_d64_keysofprefixlm",
                "attention_bwd_wgmma_fused_masked_f16_d128_keysofprefixlm",
                "attention_bwd_wgmma_fused_masked_f16_d64_keysofprefixlm",
                "attention_wgmma_bf16_d128_pingpong_prefixlm",
                "attention_wgmma_bf16_d256_onetile_prefixlm",
                "attention_wgmma_bf16_d64_pingpong_prefixlm",
                "attention_wgmma_f16_d128_pingpong_prefixlm",
                "attention_wgmma_f16_d256_onetile_prefixlm",
                "attention_wgmma_f16_d64_pingpong_prefixlm",
            ]);
        }
        want.extend(common);
        want.sort_unstable();
        assert_eq!(names, want);
        let file =
            std::env::temp_dir().join(format!("user-kernels-{}-{}.ptx", module.arch, std::process::id()));
        std::fs::write(&file, module.ptx).unwrap();
        let out = std::process::Command::new(ptxas())
            .args(["-v", &format!("-arch={}", module.arch), "-o", "/dev/null"])
            .arg(&file)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&file);
        let report = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ptxas failed for {}: {report}", module.arch);
        // No `wgmma` serialised by ptxas (warnings C7510, C7514, C7515, C7517...: the entries'
        // names hold "wgmma" too, so the warnings are what is looked for).
        assert!(
            !report
                .lines()
                .any(|l| l.contains("warning") && l.contains("wgmma")),
            "{}: {report}",
            module.arch
        );
        for line in report.lines().filter(|l| l.contains("spill")) {
            assert!(
                line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"),
                "{}: {line}",
                module.arch
            );
        }
    }
}
