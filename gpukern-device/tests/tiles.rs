//! `tile`'s fragment positions and descriptors, without a launch: every element of a warpgroup's
//! `64 x N` result is named by exactly one accumulator of one thread, as [`tile::pairs`] walks
//! them, the descriptors are the ones the `wgmma` module documents for the 128-byte swizzle
//! (the simulator's products then decode them; `examples/user-kernels` runs them end to end); and,
//! in one simulated launch, a fragment staged as tensor-store boxes (`tile::stage_boxes`) comes
//! out right through the simulator's tensor store.

use gpukern_device::bf16;
use gpukern_device::tile::{self, KMajor, NMajor};
use gpukern_device::wgmma;

/// Each of the `64 x N` elements once, for the three widths.
fn covers_once<A: wgmma::Accumulators>(acc: A) {
    let n = A::N;
    let mut seen = vec![0u8; 64 * n];
    for t in 0..128 {
        let mut pairs = 0;
        tile::pairs(&acc, t, |row, col, _| {
            assert_eq!(col % 2, 0, "pairs start on even columns");
            seen[row * n + col] += 1;
            seen[row * n + col + 1] += 1;
            pairs += 1;
        });
        assert_eq!(pairs, n / 4, "N / 4 pairs a thread");
    }
    assert!(
        seen.iter().all(|&c| c == 1),
        "every element of 64 x {n} exactly once"
    );
}

#[test]
fn the_fragment_positions_cover_the_result_once() {
    covers_once(<[f32; 128] as wgmma::Accumulators>::zeroed());
    covers_once(<[f32; 64] as wgmma::Accumulators>::zeroed());
    covers_once(<[f32; 32] as wgmma::Accumulators>::zeroed());
}

/// The layout of the `wgmma` module's documentation: `d[i]` of thread `t` is row
/// `16 w + g + 8 ((i / 2) % 2)`, column `8 (i / 4) + 2 q + i % 2`.
#[test]
fn positions_follow_the_documented_layout() {
    assert_eq!(tile::position(0, 0), (0, 0));
    assert_eq!(tile::position(1, 0), (0, 1));
    assert_eq!(tile::position(2, 0), (8, 0));
    assert_eq!(tile::position(4, 0), (0, 8));
    assert_eq!(tile::position(0, 5), (1, 2)); // g = 1, q = 1
    assert_eq!(tile::position(127, 127), (16 * 3 + 7 + 8, 8 * 31 + 6 + 1));
}

/// Sizes and descriptors: a K-major tile's quarter steps 32 bytes apart, 8-row groups 1024
/// apart; an N-major tile's boxes of 64 x 64 (8 KiB, the LBO), its quarter steps 16 rows apart.
#[test]
fn tile_sizes_and_descriptors() {
    assert_eq!(KMajor::<bf16, 128>::BYTES, 16 * 1024);
    assert_eq!(NMajor::<bf16, 256>::BYTES, 32 * 1024);
    assert_eq!(KMajor::<f32, 64>::K, 32);
    let base = 4096;
    let a = KMajor::<bf16, 128>::descriptors(base, 64);
    for (j, d) in a.into_iter().enumerate() {
        assert_eq!(d, wgmma::desc_sw128(base + 64 * 128 + 32 * j as u32, 16, 1024));
    }
    let b = NMajor::<bf16, 256>::descriptors(base, 128);
    for (j, d) in b.into_iter().enumerate() {
        assert_eq!(
            d,
            wgmma::desc_sw128(base + 2 * 8192 + 16 * 128 * j as u32, 8192, 1024)
        );
    }
    assert_eq!(tile::n_major_descriptors::<bf16>(base, 128), b);
    assert_eq!(tile::k_major_descriptors(base, 64), a);
}

/// `tile::stage_boxes` then tensor stores, in the simulator: each thread of a warpgroup holds
/// `1000 row + col` at each position of a `64 x 128` fragment, stages it as the boxes of a
/// 128-byte-swizzled tensor store, and after each writer's proxy fence and a named barrier thread
/// 0 stores the boxes into a `50 x 104` matrix at (0, 0) (rows and columns past it dropped), as
/// bf16 (two boxes of 64 x 64) and as f32 (four of 64 x 32). `planted`: thread 0 stages its pairs
/// one row down, which the comparison must catch.
fn staged_store<O: tile::Output + gpukern_device::device_copy::DeviceCopy + Default>(
    planted: bool,
) -> Vec<O> {
    use gpukern_device::sim::{Dim3, Launch, LaunchConfig};
    use gpukern_device::tma::{self, Tensor2d};
    use gpukern_device::{barrier, bulk, shared, thread};
    let (rows, cols) = (50usize, 104usize);
    let boxes = 128 * std::mem::size_of::<O>() / 128;
    let maps = vec![0u64; 16];
    let mut y = vec![O::default(); rows * cols];
    let config = LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(128, 1, 1),
        shared_mem_bytes: (1024 + boxes * tile::STAGED_BOX_BYTES) as u32,
    };
    let mut launch = Launch::new("staged_store", config);
    let (pm, py) = (launch.input("map", &maps), launch.output("y", &mut y));
    let box_cols = 128 / std::mem::size_of::<O>();
    let body = || {
        let t = thread::thread_idx_x() as usize;
        let mut acc = <[f32; 64] as wgmma::Accumulators>::zeroed();
        for (i, a) in acc.iter_mut().enumerate() {
            let (r, c) = tile::position(i, t);
            *a = (1000 * r + c) as f32;
        }
        let window = shared::dynamic::<u8>();
        let pad = (1024 - wgmma::shared_address(window) as usize % 1024) % 1024;
        let staging = window.wrapping_add(pad);
        let shift = if planted && t == 0 { 1 } else { 0 };
        // SAFETY: `boxes` boxes after the 1024-byte alignment, inside the launch's shared memory;
        // the warpgroup (the whole block) at named barrier 1; `y` holds `rows x cols`.
        unsafe {
            tile::stage_boxes::<O, _>(&acc, t, staging, |r, c, v| {
                if shift == 1 && r + 1 < 64 {
                    [(1000 * (r + 1) + c) as f32, (1000 * (r + 1) + c + 1) as f32]
                } else {
                    v
                }
            });
            bulk::fence_shared();
            barrier::sync(1, 128);
            if t == 0 {
                let out = Tensor2d {
                    map: pm,
                    data: py.cast_const(),
                    rows,
                    cols,
                    stride: cols,
                    box_rows: 64,
                    box_cols,
                };
                for b in 0..boxes {
                    let src = staging.wrapping_add(b * tile::STAGED_BOX_BYTES).cast::<O>();
                    tma::store_2d(&out, src, 0, (b * box_cols) as u32);
                }
                bulk::commit_group();
                bulk::wait_group::<0>();
            }
        }
    };
    // SAFETY: as above.
    let result = unsafe { launch.run(body) };
    result.unwrap_or_else(|e| panic!("{e}"));
    y
}

#[test]
fn staged_boxes_are_what_a_tensor_store_writes_out() {
    let want = |r: usize, c: usize| (1000 * r + c) as f32;
    let y = staged_store::<f32>(false);
    for (i, &v) in y.iter().enumerate() {
        assert_eq!(v, want(i / 104, i % 104), "f32 element {i}");
    }
    let y = staged_store::<bf16>(false);
    for (i, &v) in y.iter().enumerate() {
        assert_eq!(v, bf16::from_f32(want(i / 104, i % 104)), "bf16 element {i}");
    }
    // Thread 0's pairs one row down: rows 0 and 8 of its columns come out wrong.
    let y = staged_store::<f32>(true);
    assert_ne!(y[0], want(0, 0), "a planted shift must show");
}
