//! The simulator's checks of Hopper's asynchronous protocols (`gpukern_device::sim::Rule`), each
//! proved on a planted bug written as a user would write the kernel, next to its correct twin,
//! which must pass (with the right numbers). The kernels are those of the
//! `gpukern-device-hopper-checks` crate (`checks/hopper/src/`), included here file by file: the
//! same kernels run on a GPU under compute-sanitizer (`scripts/sanitize-hopper.sh`).
//!
//! One test per rule: `mbarrier` arrivals, transaction bytes (too many, and too few: a
//! deadlock), a wait that never completes, a phase reused, an uninitialised or invalidated
//! barrier, an init by every thread; tensor copies past the buffer, a misaligned destination, a
//! tensor map the driver would refuse (on the host and in a kernel), a stage read before its
//! barrier, a tensor store of unfenced writes, a tensor store's box rewritten before its reads
//! were waited for, a thread returning with a tensor store unwaited; `wgmma` operands written without a proxy fence,
//! accumulators stored in flight, a ring stage refilled before its product retired, a descriptor
//! that does not match the copied tile, a product skipped by part of the warpgroup; a named
//! barrier waiting for more threads than come (and a tensor store's box reused between named
//! barriers); `setmaxnreg` counts that do not add up; distributed shared memory written after the cluster barrier's
//! arrival, and read from a block that may have exited; a ring shared by a cluster through
//! multicast copies released in one block only, not drained before exit, or used before a
//! cluster barrier published its barriers.

#[path = "../checks/hopper/src/cluster.rs"]
mod cluster;
#[path = "../checks/hopper/src/mbarrier.rs"]
mod mbarrier;
#[path = "../checks/hopper/src/multicast.rs"]
mod multicast;
#[path = "../checks/hopper/src/named.rs"]
mod named;
#[path = "../checks/hopper/src/registers.rs"]
mod registers;
#[path = "../checks/hopper/src/tiles.rs"]
mod tiles;
#[path = "../checks/hopper/src/tma.rs"]
mod tma;
#[path = "../checks/hopper/src/wgmma.rs"]
mod wgmma;

use gpukern_device::bf16;
use gpukern_device::sim::{Dim3, Launch, LaunchConfig, Rule, SimError, Violation};
use gpukern_device::tma::{Swizzle, TiledMap};

/// One block of `threads` threads with `shared` bytes of dynamic shared memory.
fn block(threads: u32, shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes: shared,
    }
}

/// The report of a planted bug: checks it names `kernel` and `rule`, prints it, returns it.
#[track_caller]
fn report(result: Result<(), SimError>, kernel: &str, rule: Rule) -> SimError {
    let error = result.expect_err("the simulator must report the planted bug");
    println!("{error}");
    assert_eq!(error.kernel, kernel, "{error}");
    match &error.violation {
        Violation::Protocol { rule: got, .. } => assert_eq!(*got, rule, "{error}"),
        _ => panic!("want a {rule} report, got: {error}"),
    }
    error
}

/// The message of a `Protocol` report.
fn message(error: &SimError) -> &str {
    match &error.violation {
        Violation::Protocol { message, .. } => message,
        _ => "",
    }
}

// ----- mbarrier -----------------------------------------------------------------------------

/// Runs a bulk-copy kernel on `x = 1, 2, ..., 128`; the result and `y`.
fn run_bulk(name: &'static str, kernel: unsafe fn(*const f32, *mut f32)) -> (Result<(), SimError>, Vec<f32>) {
    let x: Vec<f32> = (1..=64 * mbarrier::TILES).map(|i| i as f32).collect();
    let mut y = vec![0.0f32; x.len()];
    let mut launch = Launch::new(name, block(mbarrier::THREADS, mbarrier::SHARED_BYTES));
    let (px, py) = (launch.input("x", &x), launch.output("y", &mut y));
    // SAFETY: `x` and `y` hold 64 floats per tile: the module's launch.
    let result = unsafe { launch.run(|| kernel(px, py)) };
    (result, y)
}

/// Runs the twin and checks its numbers: `y = 2 x`.
fn bulk_twin_passes(name: &'static str, kernel: unsafe fn(*const f32, *mut f32)) {
    let (result, y) = run_bulk(name, kernel);
    result.unwrap();
    let want: Vec<f32> = (1..=64 * mbarrier::TILES).map(|i| 2.0 * i as f32).collect();
    assert_eq!(y, want);
}

#[test]
fn more_arrivals_in_a_phase_than_the_count() {
    bulk_twin_passes("bulk_twin", mbarrier::bulk_twin);
    let (result, _) = run_bulk("mbarrier_arrivals_planted", mbarrier::mbarrier_arrivals_planted);
    let e = report(result, "mbarrier_arrivals_planted", Rule::MbarrierArrivals);
    assert_eq!((e.block, e.thread), (Dim3::new(0, 0, 0), Dim3::new(0, 0, 0)));
    assert!(message(&e).contains("the mbarrier at shared byte 0"), "{e}");
}

#[test]
fn copies_delivering_more_bytes_than_the_phase_expects() {
    let (result, _) = run_bulk("mbarrier_tx_over_planted", mbarrier::mbarrier_tx_over_planted);
    let e = report(result, "mbarrier_tx_over_planted", Rule::MbarrierTransactions);
    assert_eq!(e.thread, Dim3::new(0, 0, 0));
    assert!(message(&e).contains("128 byte(s) more than its expect_tx"), "{e}");
}

#[test]
fn copies_delivering_fewer_bytes_than_the_phase_expects_are_a_deadlock() {
    let (result, _) = run_bulk("mbarrier_tx_under_planted", mbarrier::mbarrier_tx_under_planted);
    let e = report(result, "mbarrier_tx_under_planted", Rule::MbarrierDeadlock);
    assert!(
        message(&e).contains("phase 0 (parity 0) of the mbarrier at shared byte 0, which still expects 0 of its 1 arrival(s) and 256 byte(s)"),
        "{e}"
    );
}

#[test]
fn a_wait_for_a_phase_nobody_arms_is_a_deadlock() {
    let (result, _) = run_bulk("mbarrier_deadlock_planted", mbarrier::mbarrier_deadlock_planted);
    let e = report(result, "mbarrier_deadlock_planted", Rule::MbarrierDeadlock);
    assert!(
        message(&e).contains("still expects 1 of its 1 arrival(s) and 0 byte(s)"),
        "{e}"
    );
}

#[test]
fn a_phase_reused_before_its_waiters_saw_it() {
    let (result, _) = run_bulk(
        "mbarrier_phase_reuse_planted",
        mbarrier::mbarrier_phase_reuse_planted,
    );
    let e = report(result, "mbarrier_phase_reuse_planted", Rule::MbarrierPhaseReuse);
    assert!(message(&e).contains("phases up to 1 have completed"), "{e}");
}

#[test]
fn an_uninitialised_barrier() {
    let (result, _) = run_bulk("mbarrier_uninit_planted", mbarrier::mbarrier_uninit_planted);
    let e = report(result, "mbarrier_uninit_planted", Rule::MbarrierUninitialized);
    assert!(
        message(&e).contains("the mbarrier at shared byte 8 was never initialised"),
        "{e}"
    );
}

#[test]
fn an_invalidated_barrier() {
    bulk_twin_passes("bulk_inval_twin", mbarrier::bulk_inval_twin);
    let (result, _) = run_bulk("mbarrier_inval_planted", mbarrier::mbarrier_inval_planted);
    let e = report(result, "mbarrier_inval_planted", Rule::MbarrierInvalidated);
    assert_eq!(e.thread, Dim3::new(1, 0, 0));
}

#[test]
fn an_init_by_more_than_one_thread() {
    let (result, _) = run_bulk("mbarrier_init_planted", mbarrier::mbarrier_init_planted);
    let e = report(result, "mbarrier_init_planted", Rule::MbarrierInit);
    assert_eq!(e.thread, Dim3::new(1, 0, 0));
    assert!(message(&e).contains("thread 0 initialised it"), "{e}");
}

// ----- tensor copies ------------------------------------------------------------------------

/// A row-sum kernel of `crate::tma`.
type RowSum = unsafe fn(*const u64, *const f32, usize, usize, *mut f32);

/// Runs a row-sum kernel on the `rows x cols` matrix of `x[r][c] = r + c / 64`; the result and
/// the row sums.
fn run_rowsum(
    name: &'static str,
    kernel: RowSum,
    rows: usize,
    cols: usize,
) -> (Result<(), SimError>, Vec<f32>) {
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| (i / cols) as f32 + (i % cols) as f32 / 64.0)
        .collect();
    let maps = vec![0u64; 16];
    let mut y = vec![0.0f32; tma::BOX];
    let mut launch = Launch::new(name, block(tma::THREADS, tma::SHARED_BYTES));
    let (pm, px, py) = (
        launch.input("map", &maps),
        launch.input("x", &x),
        launch.output("y", &mut y),
    );
    // SAFETY: `x` holds `rows x cols` floats, `y` one per thread.
    let result = unsafe { launch.run(|| kernel(pm, px, rows, cols, py)) };
    (result, y)
}

/// The sums of the first 32 columns of each of the 32 first rows of that matrix (zeros past it).
fn row_sums(rows: usize, cols: usize) -> Vec<f32> {
    (0..tma::BOX)
        .map(|r| match r < rows {
            true => (0..cols.min(tma::BOX)).map(|c| r as f32 + c as f32 / 64.0).sum(),
            false => 0.0,
        })
        .collect()
}

#[test]
fn a_box_reaching_past_the_buffer() {
    // 16 x 32: the box's rows 16..32 lie past the tensor, zero-filled.
    let (result, y) = run_rowsum("tma_rowsum_twin", tma::tma_rowsum_twin, 16, 32);
    result.unwrap();
    assert_eq!(y, row_sums(16, 32));
    let (result, _) = run_rowsum("tma_bounds_planted", tma::tma_bounds_planted, 16, 32);
    let e = report(result, "tma_bounds_planted", Rule::TmaBounds);
    assert!(
        message(&e).contains("past the end of buffer `x` (512 elements)"),
        "{e}"
    );
}

#[test]
fn a_copy_destination_not_aligned_for_the_swizzle() {
    let (result, _) = run_rowsum("tma_alignment_planted", tma::tma_alignment_planted, 32, 32);
    let e = report(result, "tma_alignment_planted", Rule::TmaAlignment);
    assert!(message(&e).contains("destination at shared byte 16"), "{e}");
}

#[test]
fn tensor_maps_the_driver_would_refuse() {
    let map = |cols: u64| {
        TiledMap {
            address: 0x7f00_0000_0000,
            element_bytes: 4,
            dims: &[cols, 32],
            strides: &[4 * cols],
            box_dims: &[32, 32],
            element_strides: &[1, 1],
            swizzle: Swizzle::B128,
        }
        .check()
    };
    assert_eq!(map(32), Ok(()));
    let refused = map(30).unwrap_err();
    println!("{refused}");
    assert_eq!(
        refused.rule,
        "every global stride is a multiple of 16 bytes and below 2^40"
    );
    // The same tensor given to a kernel's copy: the simulator refuses it as the driver would have.
    let (result, _) = run_rowsum("tma_rowsum_twin", tma::tma_rowsum_twin, 32, 30);
    let e = report(result, "tma_rowsum_twin", Rule::TensorMap);
    assert!(message(&e).contains("multiple of 16 bytes"), "{e}");
}

#[test]
fn a_stage_read_before_its_barrier_completed() {
    let (result, _) = run_rowsum("tma_early_planted", tma::tma_early_planted, 32, 32);
    let e = report(result, "tma_early_planted", Rule::TmaEarlyAccess);
    assert_eq!(e.thread, Dim3::new(0, 0, 0));
    let (result, y) = run_rowsum("tma_rowsum_twin", tma::tma_rowsum_twin, 32, 32);
    result.unwrap();
    assert_eq!(y, row_sums(32, 32));
}

/// A tensor-store kernel of `crate::tma`.
type Store = unsafe fn(*const u64, *mut f32, usize, usize);

#[test]
fn a_tensor_store_of_unfenced_writes() {
    let run = |name: &'static str, kernel: Store| {
        let (rows, cols) = (20, 24);
        let maps = vec![0u64; 16];
        let mut y = vec![-1.0f32; rows * cols];
        let mut launch = Launch::new(name, block(tma::THREADS, tma::SHARED_BYTES));
        let (pm, py) = (launch.input("map", &maps), launch.output("y", &mut y));
        // SAFETY: `y` holds `rows x cols` floats.
        let result = unsafe { launch.run(|| kernel(pm, py, rows, cols)) };
        (result, y)
    };
    let (result, y) = run("tma_store_twin", tma::tma_store_twin);
    result.unwrap();
    let want: Vec<f32> = (0..20 * 24).map(|i| (1000 * (i / 24) + i % 24) as f32).collect();
    assert_eq!(
        y, want,
        "the box's part inside the 20 x 24 tensor, the rest dropped"
    );
    let (result, _) = run("tma_store_unfenced_planted", tma::tma_store_unfenced_planted);
    let e = report(result, "tma_store_unfenced_planted", Rule::ProxyFence);
    assert!(message(&e).contains("the source of a bulk tensor store"), "{e}");
    // The box stored, rewritten and stored again: the twin waits for the first store's reads
    // before the barrier after which the threads rewrite it; the plant does not.
    let (result, reused) = run("tma_store_reuse_twin", tma::tma_store_reuse_twin);
    result.unwrap();
    assert_eq!(reused, want, "the second store's values");
    let (result, _) = run("tma_store_reuse_planted", tma::tma_store_reuse_planted);
    let e = report(result, "tma_store_reuse_planted", Rule::BulkStoreSource);
    assert!(message(&e).contains("bulk group 0 of thread 0"), "{e}");
    assert_eq!(e.thread, Dim3::new(0, 0, 0), "thread 0 rewrites its row first");
    // The same between named barriers: their completion hands thread 0's wait to the others.
    let (result, reused) = run("tma_store_named_reuse_twin", tma::tma_store_named_reuse_twin);
    result.unwrap();
    assert_eq!(reused, want, "the second store's values");
    let (result, _) = run(
        "tma_store_named_reuse_planted",
        tma::tma_store_named_reuse_planted,
    );
    let e = report(result, "tma_store_named_reuse_planted", Rule::BulkStoreSource);
    assert!(message(&e).contains("bulk group 0 of thread 0"), "{e}");
}

/// A tensor store whose issuing thread returns without waiting for it (written here, not among
/// the GPU's plants: on a GPU it usually works, the block's other threads outliving the copy):
/// thread 0 stores a fenced box and commits, and returns.
unsafe fn store_left_reading(map: *const u64, y: *mut f32, rows: usize, cols: usize) {
    use gpukern_device::{bulk, mem, thread};
    let t = thread::thread_idx_x() as usize;
    let b = tiles::aligned(1024).cast::<f32>();
    for c in 0..tma::BOX {
        let at = gpukern_device::tma::swizzle_128b(4 * (tma::BOX * t + c));
        // SAFETY: inside the box, after the 1 KiB header of `tma::SHARED_BYTES`.
        unsafe { mem::store(b.cast::<u8>().wrapping_add(at).cast::<f32>(), 0, c as f32) };
    }
    bulk::fence_shared();
    thread::sync_threads();
    if t == 0 {
        let out = gpukern_device::tma::Tensor2d {
            map,
            data: y.cast_const(),
            rows,
            cols,
            stride: cols,
            box_rows: tma::BOX,
            box_cols: tma::BOX,
        };
        // SAFETY: the box is written and fenced before the barrier; `y` holds `rows x cols`.
        unsafe { gpukern_device::tma::store_2d(&out, b, 0, 0) };
        bulk::commit_group();
    }
}

#[test]
fn a_thread_returning_before_its_tensor_store_read_the_box() {
    let (rows, cols) = (32, 32);
    let maps = vec![0u64; 16];
    let mut y = vec![0.0f32; rows * cols];
    let mut launch = Launch::new("store_left_reading", block(tma::THREADS, tma::SHARED_BYTES));
    let (pm, py) = (launch.input("map", &maps), launch.output("y", &mut y));
    // SAFETY: `y` holds `rows x cols` floats.
    let result = unsafe { launch.run(|| store_left_reading(pm, py, rows, cols)) };
    let e = report(result, "store_left_reading", Rule::BulkStoreSource);
    assert!(
        message(&e).contains("returned with 1 bulk group(s) not waited for"),
        "{e}"
    );
    assert_eq!(e.thread, Dim3::new(0, 0, 0));
}

// ----- wgmma --------------------------------------------------------------------------------

/// `A` and `B` for the products: small integers, exact in bf16, and `C = A B` exactly.
fn operands() -> (Vec<bf16>, Vec<bf16>, Vec<f32>) {
    let a: Vec<f32> = (0..64 * 64)
        .map(|i| ((i * 7 + i / 64) % 9) as f32 - 4.0)
        .collect();
    let b: Vec<f32> = (0..64 * 64)
        .map(|i| ((i * 5 + i / 64 * 3) % 7) as f32 - 3.0)
        .collect();
    let c = (0..64 * 64)
        .map(|i| (0..64).map(|k| a[i / 64 * 64 + k] * b[k * 64 + i % 64]).sum())
        .collect();
    let to = |v: Vec<f32>| v.into_iter().map(bf16::from_f32).collect();
    (to(a), to(b), c)
}

/// A product kernel of `crate::wgmma` with its operands given as matrices.
type Product = unsafe fn(*const bf16, *const bf16, *mut f32);

/// Runs a product kernel; the result and `C`.
fn run_product(name: &'static str, kernel: Product) -> (Result<(), SimError>, Vec<f32>, Vec<f32>) {
    let (a, b, want) = operands();
    let mut c = vec![0.0f32; 64 * 64];
    let mut launch = Launch::new(name, block(wgmma::THREADS, wgmma::SHARED_BYTES));
    let (pa, pb, pc) = (
        launch.input("a", &a),
        launch.input("b", &b),
        launch.output("c", &mut c),
    );
    // SAFETY: `a`, `b`, `c` hold 64 x 64 elements.
    let result = unsafe { launch.run(|| kernel(pa, pb, pc)) };
    (result, c, want)
}

#[test]
fn wgmma_operands_stored_without_a_proxy_fence() {
    let (result, c, want) = run_product("wgmma_stores_twin", wgmma::wgmma_stores_twin);
    result.unwrap();
    assert_eq!(c, want);
    let (result, _, _) = run_product("wgmma_proxy_planted", wgmma::wgmma_proxy_planted);
    let e = report(result, "wgmma_proxy_planted", Rule::ProxyFence);
    assert!(message(&e).contains("read as a wgmma operand"), "{e}");
}

#[test]
fn accumulators_stored_while_their_product_is_in_flight() {
    let (result, c, want) = run_product("wgmma_async_twin", wgmma::wgmma_async_twin);
    result.unwrap();
    assert_eq!(c, want);
    let (result, _, _) = run_product("wgmma_accumulators_planted", wgmma::wgmma_accumulators_planted);
    let e = report(result, "wgmma_accumulators_planted", Rule::WgmmaAccumulators);
    assert_eq!(e.thread, Dim3::new(0, 0, 0));
}

/// Data that happens to carry an accumulator marker's bits (a quiet NaN with the signature
/// `0x55` in payload bits 15..22: one random 32-bit word in 2^17) stored by a kernel that issued
/// no `wgmma` is data, not an accumulator in flight (random `u32`s of another check once tripped
/// this).
#[test]
fn marker_bits_in_a_kernel_without_wgmma_are_data() {
    let words: Vec<u32> = (0..64u32).map(|i| 0x7fea_8000 | (i << 7) | i).collect();
    let mut out = vec![0u32; 64];
    let mut launch = Launch::new("copy_words", block(64, 0));
    let (src, dst) = (launch.input("src", &words), launch.output("out", &mut out));
    // SAFETY: both hold 64 words; one thread each.
    let result = unsafe {
        launch.run(|| {
            let i = gpukern_device::thread::thread_idx_x() as usize;
            gpukern_device::mem::store(dst, i, gpukern_device::mem::load(src, i));
        })
    };
    result.unwrap();
    assert_eq!(out, words);
}

#[test]
fn a_ring_stage_refilled_before_its_product_retired() {
    // `A` 64 x 256 and `B` 256 x 64 as four pairs of swizzled tiles.
    let a: Vec<f32> = (0..64 * 256)
        .map(|i| ((i * 3 + i / 256) % 5) as f32 - 2.0)
        .collect();
    let b: Vec<f32> = (0..256 * 64)
        .map(|i| ((i * 7 + i / 64) % 5) as f32 - 2.0)
        .collect();
    let want: Vec<f32> = (0..64 * 64)
        .map(|i| (0..256).map(|k| a[i / 64 * 256 + k] * b[k * 64 + i % 64]).sum())
        .collect();
    let swizzled = |tile: &dyn Fn(usize, usize) -> f32| {
        let mut out = vec![bf16::ZERO; 64 * 64];
        for r in 0..64 {
            for c in 0..64 {
                out[gpukern_device::tma::swizzle_128b(r * 128 + 2 * c) / 2] = bf16::from_f32(tile(r, c));
            }
        }
        out
    };
    let a_tiles: Vec<bf16> = (0..4)
        .flat_map(|s| swizzled(&|r, c| a[r * 256 + 64 * s + c]))
        .collect();
    let b_tiles: Vec<bf16> = (0..4)
        .flat_map(|s| swizzled(&|r, c| b[(64 * s + r) * 64 + c]))
        .collect();
    let run = |name: &'static str, kernel: Product| {
        let mut c = vec![0.0f32; 64 * 64];
        let mut launch = Launch::new(name, block(wgmma::RING_THREADS, wgmma::RING_SHARED_BYTES));
        let (pa, pb, pc) = (
            launch.input("a", &a_tiles),
            launch.input("b", &b_tiles),
            launch.output("c", &mut c),
        );
        // SAFETY: the tiles of `A` and `B`, and `c` of 64 x 64.
        let result = unsafe { launch.run(|| kernel(pa, pb, pc)) };
        (result, c)
    };
    let (result, c) = run("wgmma_ring_twin", wgmma::wgmma_ring_twin);
    result.unwrap();
    assert_eq!(c, want);
    let (result, _) = run("wgmma_operands_planted", wgmma::wgmma_operands_planted);
    let e = report(result, "wgmma_operands_planted", Rule::WgmmaOperands);
    assert_eq!(e.thread, Dim3::new(0, 0, 0), "the producer's copy is the write");
    assert!(message(&e).contains("group 0 of warpgroup 1"), "{e}");
}

/// A tensor-copy product kernel of `crate::wgmma`.
type TmaProduct = unsafe fn(*const u64, *const bf16, *const bf16, *mut f32);

#[test]
fn a_descriptor_that_does_not_read_the_tile_as_it_was_copied() {
    let run = |name: &'static str, kernel: TmaProduct| {
        let (a, b, want) = operands();
        let maps = vec![0u64; 32];
        let mut c = vec![0.0f32; 64 * 64];
        let mut launch = Launch::new(name, block(wgmma::THREADS, wgmma::SHARED_BYTES));
        let pm = launch.input("maps", &maps);
        let (pa, pb, pc) = (
            launch.input("a", &a),
            launch.input("b", &b),
            launch.output("c", &mut c),
        );
        // SAFETY: `a`, `b`, `c` hold 64 x 64 elements.
        let result = unsafe { launch.run(|| kernel(pm, pa, pb, pc)) };
        (result, c, want)
    };
    let (result, c, want) = run("wgmma_tma_twin", wgmma::wgmma_tma_twin);
    result.unwrap();
    assert_eq!(c, want);
    let (result, _, _) = run("wgmma_descriptor_planted", wgmma::wgmma_descriptor_planted);
    let e = report(result, "wgmma_descriptor_planted", Rule::WgmmaDescriptor);
    assert!(message(&e).contains("operand A's descriptor"), "{e}");
}

#[test]
fn a_product_skipped_by_part_of_its_warpgroup() {
    let run = |name: &'static str, kernel: unsafe fn(*const bf16, *const bf16, *mut f32, usize)| {
        let (a, b, want) = operands();
        let mut c = vec![0.0f32; 64 * 64];
        let mut launch = Launch::new(name, block(wgmma::THREADS, wgmma::SHARED_BYTES));
        let (pa, pb, pc) = (
            launch.input("a", &a),
            launch.input("b", &b),
            launch.output("c", &mut c),
        );
        // SAFETY: `a`, `b`, `c` hold 64 x 64 elements; `m = 40`.
        let result = unsafe { launch.run(|| kernel(pa, pb, pc, 40)) };
        (result, c, want)
    };
    let (result, c, want) = run("wgmma_rows_twin", wgmma::wgmma_rows_twin);
    result.unwrap();
    assert_eq!(&c[..40 * 64], &want[..40 * 64]);
    let (result, _, _) = run("wgmma_order_planted", wgmma::wgmma_order_planted);
    let e = report(result, "wgmma_order_planted", Rule::WgmmaOrder);
    assert_eq!(
        e.thread,
        Dim3::new(96, 0, 0),
        "the first thread of the warp that skipped"
    );
}

// ----- named barriers -----------------------------------------------------------------------

#[test]
fn a_named_barrier_waiting_for_more_threads_than_come() {
    let run = |name: &'static str, kernel: unsafe fn(*mut f32)| {
        let mut y = vec![0.0f32; named::THREADS as usize];
        let mut launch = Launch::new(name, block(named::THREADS, named::SHARED_BYTES));
        let py = launch.output("y", &mut y);
        // SAFETY: `y` holds one float per thread.
        let result = unsafe { launch.run(|| kernel(py)) };
        (result, y)
    };
    let (result, y) = run("named_barrier_twin", named::named_barrier_twin);
    result.unwrap();
    assert_eq!(y, (0..384).map(|t| t as f32).collect::<Vec<_>>());
    let (result, _) = run("named_barrier_planted", named::named_barrier_planted);
    let e = report(result, "named_barrier_planted", Rule::NamedBarrier);
    assert_eq!(e.thread, Dim3::new(256, 0, 0), "the last warpgroup waits forever");
    assert!(message(&e).contains("128 of its 256 threads"), "{e}");
}

// ----- setmaxnreg ---------------------------------------------------------------------------

#[test]
fn setmaxnreg_counts_that_do_not_add_up() {
    let run = |name: &'static str, kernel: unsafe fn(*mut f32)| {
        let mut y = vec![0.0f32; registers::THREADS as usize];
        let mut launch = Launch::new(name, block(registers::THREADS, 0));
        let py = launch.output("y", &mut y);
        // SAFETY: `y` holds one float per thread.
        let result = unsafe { launch.run(|| kernel(py)) };
        (result, y)
    };
    let (result, y) = run("registers_twin", registers::registers_twin);
    result.unwrap();
    assert_eq!(y, (0..384).map(|t| t as f32).collect::<Vec<_>>());
    let (result, _) = run("registers_planted", registers::registers_planted);
    let e = report(result, "registers_planted", Rule::Setmaxnreg);
    assert_eq!(
        e.thread,
        Dim3::new(256, 0, 0),
        "the second consumer waits forever"
    );
    assert!(message(&e).contains("deadlock"), "{e}");
}

// ----- clusters -----------------------------------------------------------------------------

/// Runs a cluster kernel on one cluster of two blocks; the result and `y[0]`.
fn run_cluster(name: &'static str, kernel: unsafe fn(*mut f32)) -> (Result<(), SimError>, f32) {
    let mut y = vec![0.0f32; 1];
    let mut launch = Launch::new(
        name,
        LaunchConfig {
            grid: Dim3::new(2, 1, 1),
            block: Dim3::new(cluster::THREADS, 1, 1),
            shared_mem_bytes: 4,
        },
    );
    launch.cluster(Dim3::new(2, 1, 1));
    let py = launch.output("y", &mut y);
    // SAFETY: `y` holds one float.
    let result = unsafe { launch.run(|| kernel(py)) };
    (result, y[0])
}

#[test]
fn distributed_shared_memory_written_after_the_barrier_arrival() {
    let (result, y) = run_cluster("cluster_publish_twin", cluster::cluster_publish_twin);
    result.unwrap();
    assert_eq!(y, 7.0);
    let (result, _) = run_cluster("cluster_publish_planted", cluster::cluster_publish_planted);
    let e = report(result, "cluster_publish_planted", Rule::ClusterPublish);
    assert_eq!((e.block, e.thread), (Dim3::new(1, 0, 0), Dim3::new(0, 0, 0)));
}

#[test]
fn distributed_shared_memory_of_a_block_that_may_have_exited() {
    let (result, y) = run_cluster("cluster_exit_twin", cluster::cluster_exit_twin);
    result.unwrap();
    assert_eq!(y, 2.0);
    let (result, _) = run_cluster("cluster_exit_planted", cluster::cluster_exit_planted);
    let e = report(result, "cluster_exit_planted", Rule::ClusterExit);
    assert_eq!((e.block, e.thread), (Dim3::new(0, 0, 0), Dim3::new(0, 0, 0)));
}

// ----- a stage filled in part -----------------------------------------------------------------

/// A one-block ring of two stages of two `64 x 64` bf16 boxes of `A` (`128 x 64`): step 0 fills
/// a stage whole (`Producer::acquire`: rows 0-63 and 64-127), step 1 only its first box
/// (`Producer::acquire_bytes`: rows 0-63); with `PLANTED` step 1 copies both boxes into a stage
/// that expects one. Thread 0 is the producer, warp 1 the consumer: it sums the step's boxes
/// into `y[step]` (a sum, so the swizzle does not matter) and releases the stage.
///
/// # Safety
/// One block of 64 threads, `Ring::shared_bytes(2, 2 TILE_BYTES)` of dynamic shared memory;
/// `a` holds `128 x 64` bf16, `y` two floats.
unsafe fn partial_stage<const PLANTED: bool>(a: *const bf16, y: *mut f32) {
    use gpukern_device::pipeline::Ring;
    use gpukern_device::tma::Tensor2d;
    use gpukern_device::{mem, thread, warp};
    let tile = tiles::TILE_BYTES;
    // SAFETY: every thread, first; the launch gives the ring's bytes.
    let ring = unsafe { Ring::new(2, 2 * tile, 1) };
    let tid = thread::thread_idx_x() as usize;
    if tid < 32 {
        if tid != 0 {
            return;
        }
        let ta = Tensor2d {
            map: core::ptr::null(),
            data: a,
            rows: 128,
            cols: 64,
            stride: 64,
            box_rows: 64,
            box_cols: 64,
        };
        let mut producer = ring.producer();
        // SAFETY: the one producer; each stage expects what is copied into it (but the planted
        // second step's).
        unsafe {
            let stage = producer.acquire();
            stage.load(0, &ta, 0, 0);
            stage.load(tile, &ta, 64, 0);
            let stage = producer.acquire_bytes(tile);
            stage.load(0, &ta, 0, 0);
            if PLANTED {
                stage.load(tile, &ta, 64, 0);
            }
        }
        return;
    }
    let mut consumer = ring.consumer();
    let lane = tid % 32;
    for (step, boxes) in [(0, 2), (1, 1)] {
        // SAFETY: the consumer warp; the stage is read after its copies landed, then released.
        unsafe {
            let stage = consumer.wait();
            let v = stage.ptr::<bf16>(0);
            let mut sum = 0.0f32;
            let mut i = lane;
            while i < boxes * tile / 2 {
                sum += mem::load(v, i).to_f32();
                i += 32;
            }
            let sum = warp::reduce_sum(sum);
            if lane == 0 {
                mem::store(y, step, sum);
            }
            consumer.release(&stage);
        }
    }
}

/// A stage filled in part (`Producer::acquire_bytes`) completes with the bytes it expects, and
/// the consumer reads them; a copy past what the stage expects is reported.
#[test]
fn a_stage_filled_in_part_expects_its_bytes() {
    use gpukern_device::pipeline::Ring;
    let a: Vec<bf16> = (0..128 * 64).map(|i| bf16::from_f32((i % 7) as f32)).collect();
    let run = |name: &'static str, kernel: unsafe fn(*const bf16, *mut f32)| {
        let mut y = vec![0.0f32; 2];
        let mut launch = Launch::new(name, block(64, Ring::shared_bytes(2, 2 * tiles::TILE_BYTES)));
        let (pa, py) = (launch.input("a", &a), launch.output("y", &mut y));
        // SAFETY: the launch of `partial_stage`.
        let result = unsafe { launch.run(|| kernel(pa, py)) };
        (result, y)
    };
    let (result, y) = run("partial_stage_twin", partial_stage::<false>);
    result.unwrap();
    let sum = |rows: usize| (0..rows * 64).map(|i| (i % 7) as f32).sum::<f32>();
    assert_eq!(y, vec![sum(128), sum(64)]);
    let (result, _) = run("partial_stage_planted", partial_stage::<true>);
    report(result, "partial_stage_planted", Rule::MbarrierTransactions);
}

// ----- a ring shared by a cluster -------------------------------------------------------------

/// A kernel of `crate::multicast`.
type Multicast = unsafe fn(*const u64, *const bf16, *const bf16, *mut f32);

/// Runs a multicast ring kernel on one cluster of two blocks; the result and `C`.
fn run_multicast(name: &'static str, kernel: Multicast) -> (Result<(), SimError>, Vec<f32>) {
    let a: Vec<bf16> = (0..128 * 256)
        .map(|i| bf16::from_f32(((i * 3 + i / 256) % 5) as f32 - 2.0))
        .collect();
    let b: Vec<bf16> = (0..256 * 64)
        .map(|i| bf16::from_f32(((i * 7 + i / 64) % 5) as f32 - 2.0))
        .collect();
    let maps = vec![0u64; 32];
    let mut c = vec![0.0f32; 128 * 64];
    let mut launch = Launch::new(
        name,
        LaunchConfig {
            grid: Dim3::new(2, 1, 1),
            block: Dim3::new(multicast::THREADS, 1, 1),
            shared_mem_bytes: multicast::SHARED_BYTES,
        },
    );
    launch.cluster(Dim3::new(2, 1, 1));
    let pm = launch.input("maps", &maps);
    let (pa, pb, pc) = (
        launch.input("a", &a),
        launch.input("b", &b),
        launch.output("c", &mut c),
    );
    // SAFETY: `a` 128 x 256, `b` 256 x 64, `c` 128 x 64; two blocks in one cluster.
    let result = unsafe { launch.run(|| kernel(pm, pa, pb, pc)) };
    (result, c)
}

#[test]
fn a_ring_shared_by_a_cluster_through_multicast_copies() {
    let (result, c) = run_multicast("multicast_ring_twin", multicast::multicast_ring_twin);
    result.unwrap();
    let a = |r: usize, k: usize| (((r * 256 + k) * 3 + r) % 5) as f32 - 2.0;
    let b = |k: usize, n: usize| (((k * 64 + n) * 7 + k) % 5) as f32 - 2.0;
    let want: Vec<f32> = (0..128 * 64)
        .map(|i| (0..256).map(|k| a(i / 64, k) * b(k, i % 64)).sum())
        .collect();
    assert_eq!(c, want);

    let (result, _) = run_multicast("multicast_release_planted", multicast::multicast_release_planted);
    let e = report(result, "multicast_release_planted", Rule::WgmmaOperands);
    assert_eq!(
        e.thread,
        Dim3::new(0, 0, 0),
        "a producer's multicast copy is the write"
    );
    assert!(message(&e).contains("multicast copy"), "{e}");

    let (result, _) = run_multicast("multicast_drain_planted", multicast::multicast_drain_planted);
    let e = report(result, "multicast_drain_planted", Rule::ClusterExit);
    assert!(e.thread.x >= 128, "a consumer's arrival is the use: {e}");

    let (result, _) = run_multicast("multicast_publish_planted", multicast::multicast_publish_planted);
    let e = report(result, "multicast_publish_planted", Rule::MbarrierUninitialized);
    assert!(message(&e).contains("cluster barrier"), "{e}");
}

// ----- warp arrivals ------------------------------------------------------------------------

/// Warps of the warp-arrival kernels: the barrier counts them.
const ARRIVING_WARPS: u32 = 2;

/// Every thread of `ARRIVING_WARPS` warps: thread 0 initialises a barrier counting
/// `count` arrivals; the lanes below `lanes` of each warp call `warp_arrive` (the others return),
/// then wait for the phase and store 1 into `y`.
///
/// # Safety
/// One block of `32 * ARRIVING_WARPS` threads, 8 bytes of dynamic shared memory; `y` holds one
/// float per thread.
unsafe fn warp_arrivals(y: *mut f32, count: u32, lanes: u32) {
    use gpukern_device::{mbarrier as mb, mem, shared, thread};
    let bar = shared::dynamic::<u64>();
    let t = thread::thread_idx_x();
    if t == 0 {
        // SAFETY: 8 bytes of shared memory, untouched before the block barrier below.
        unsafe { mb::init(bar, count) };
        mb::fence_init();
    }
    thread::sync_threads();
    if t % 32 >= lanes {
        return;
    }
    // SAFETY: an initialised barrier; the launch above (the planted kernels break the contract).
    unsafe {
        mb::warp_arrive(bar);
        mb::wait_parity(bar, 0);
        mem::store(y, t as usize, 1.0);
    }
}

/// Runs [`warp_arrivals`] as kernel `name`; the result and `y`.
fn run_warp_arrivals(name: &'static str, count: u32, lanes: u32) -> (Result<(), SimError>, Vec<f32>) {
    let mut y = vec![0.0f32; 32 * ARRIVING_WARPS as usize];
    let mut launch = Launch::new(name, block(32 * ARRIVING_WARPS, 8));
    let py = launch.output("y", &mut y);
    // SAFETY: the launch `warp_arrivals` documents.
    let result = unsafe { launch.run(|| warp_arrivals(py, count, lanes)) };
    (result, y)
}

/// `mbarrier::warp_arrive`: one arrival per warp completes a barrier counting warps; a warp of
/// which some lanes skip the call is reported (as at a shuffle), and a barrier counting threads
/// never completes (a deadlock).
#[test]
fn a_warp_arrives_once_with_all_its_lanes() {
    let (result, y) = run_warp_arrivals("warp_arrive_twin", ARRIVING_WARPS, 32);
    result.unwrap();
    assert!(y.iter().all(|&v| v == 1.0));

    let (result, _) = run_warp_arrivals("warp_arrive_half_warp_planted", ARRIVING_WARPS, 16);
    let e = result.expect_err("a half warp at warp_arrive must be reported");
    println!("{e}");
    assert!(matches!(e.violation, Violation::ShuffleNotReached { .. }), "{e}");
    assert!(e.to_string().contains("sim_hopper.rs"), "{e}");

    let (result, _) = run_warp_arrivals("warp_arrive_counts_threads_planted", 32 * ARRIVING_WARPS, 32);
    report(
        result,
        "warp_arrive_counts_threads_planted",
        Rule::MbarrierDeadlock,
    );
}
