//! What the direct simulator trials of softmax share: their tolerance, temperatures and
//! comparison, the one-pass softmax on the simulator, and the configurations that force each
//! path of the plan.

use gpukern::ops::softmax::OnePassConfig;
use gpukern::{DeviceMatrix, Gpu};
use ndarray::Array2;

/// Per element, relative to the reference (plus a floor for entries that underflow): the
/// simulator's `exp2` is the CPU's, so only f32 rounding of exponents and sums remains.
pub(super) const REL_TOL: f32 = 1e-5;
pub(super) const ABS_FLOOR: f32 = 1e-30;

/// Inverse temperatures every shape runs with: plain, uniform, reversed, sharp.
pub(super) const TEMPERATURES: [f32; 4] = [1.0, 0.0, -2.5, 10.0];

/// Asserts `got` matches `want` element by element: NaN where `want` is NaN, else within
/// `REL_TOL` relative.
#[track_caller]
pub(super) fn assert_softmax_close(what: &str, got: &Array2<f32>, want: &Array2<f32>) {
    assert_eq!(got.dim(), want.dim(), "{what}: shape");
    for ((r, c), &w) in want.indexed_iter() {
        let g = got[(r, c)];
        if w.is_nan() {
            assert!(g.is_nan(), "{what}: [{r}, {c}] = {g}, want NaN");
        } else {
            let err = (g - w).abs();
            assert!(
                err <= REL_TOL * w.abs() + ABS_FLOOR,
                "{what}: [{r}, {c}] = {g}, want {w} (error {err:e})"
            );
        }
    }
}

/// The one-pass softmax of `x` on the simulator with `config`.
pub(super) fn one_pass(gpu: &Gpu, x: &Array2<f32>, t: f32, config: &OnePassConfig) -> Array2<f32> {
    let dx = gpu.upload_matrix(x).unwrap();
    let mut dy: DeviceMatrix = gpu.upload_matrix(&Array2::<f32>::zeros(x.dim())).unwrap();
    gpu.softmax_into_one_pass(&dx, &mut dy, t, config).unwrap();
    dy.to_array().unwrap()
}

/// Defaults with rows of up to `warp_max_cols` on warps and the rest as given.
pub(super) fn config(
    warp_max_cols: usize,
    block_max_cols: usize,
    split_max_rows: usize,
    split_chunk: usize,
) -> OnePassConfig {
    OnePassConfig {
        warp_max_cols,
        block_max_cols,
        split_max_rows,
        split_chunk,
        ..classic()
    }
}

/// The default thresholds with neither lane groups, persistent kernels nor the grid-row kernel,
/// and warps up to 1024 columns (the default until `warp_max_cols` moved to 512): the
/// register-held warp and block kernels that load, reduce and write one row each.
pub(super) fn classic() -> OnePassConfig {
    OnePassConfig {
        warp_max_cols: 1024,
        grid_row_max_rows: 0,
        group_lanes: 0,
        persistent_min_cols: usize::MAX,
        cluster_min_cols: usize::MAX,
        // 4 vectors per thread up to 512 threads (the default until the H200 run at 6088228
        // showed 8 vectors from 1025 columns on faster).
        block_4_max_threads: 512,
        ..OnePassConfig::default()
    }
}

/// Forces the cluster kernels, with `vectors` per thread, on every row past a warp's (a cluster
/// of at least 2 blocks, of 32 threads for short rows).
pub(super) fn clusters_only(vectors: usize) -> OnePassConfig {
    OnePassConfig {
        warp_max_cols: 0,
        cluster_min_cols: 0,
        cluster_vectors: vectors,
        ..classic()
    }
}

/// Forces the block-per-row kernels on any row that fits them.
pub(super) fn blocks_only() -> OnePassConfig {
    config(0, usize::MAX, 0, 16)
}

/// [`classic`] with rows of up to 131 columns on lane groups of `lanes`.
pub(super) fn groups(lanes: usize) -> OnePassConfig {
    OnePassConfig {
        group_lanes: lanes,
        ..classic()
    }
}

/// [`classic`] with the persistent kernels for every row they hold.
pub(super) fn persistent() -> OnePassConfig {
    OnePassConfig {
        persistent_min_cols: 0,
        ..classic()
    }
}

/// Forces the persistent block-per-row kernels on any row that fits them.
pub(super) fn persistent_blocks_only() -> OnePassConfig {
    OnePassConfig {
        persistent_min_cols: 0,
        ..blocks_only()
    }
}

/// Forces `softmax_stream` on every shape.
pub(super) fn stream_only() -> OnePassConfig {
    config(0, 0, 0, 16)
}

/// Forces the split path on every shape, with chunks of `chunk` columns.
pub(super) fn split_only(chunk: usize) -> OnePassConfig {
    config(0, 0, usize::MAX, chunk)
}
