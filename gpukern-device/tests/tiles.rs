//! `tile`'s fragment positions and descriptors, without a launch: every element of a warpgroup's
//! `64 x N` result is named by exactly one accumulator of one thread, as [`tile::pairs`] walks
//! them, and the descriptors are the ones the `wgmma` module documents for the 128-byte swizzle
//! (the simulator's products then decode them; `examples/user-kernels` runs them end to end).

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
