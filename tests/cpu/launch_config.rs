//! Launch-configuration arithmetic against device limits: `ceil_div`, the grid shapes
//! (`linear`, `tiles_2d`, `block_tiles`, `per_row`), `checked` and the conversions.

use gpukern::launch_config::ceil_div;
use gpukern::{DeviceLimits, Error, LaunchConfig};

use crate::common::assert_too_large;

/// Small limits, so that the edges of every check are cheap to reach.
const SMALL: DeviceLimits = DeviceLimits {
    max_threads_per_block: 512,
    max_block_dim: [512, 256, 8],
    max_grid_dim: [100, 20, 5],
    max_shared_mem_per_block: 4096,
    max_shared_mem_per_block_optin: 8192,
};

/// A launch of `grid` blocks of `block` threads with `shared` bytes, unchecked.
fn launch(grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid,
        block,
        shared_mem_bytes: shared,
    }
}

#[test]
fn ceil_div_rounds_up() {
    for d in [1, 2, 7, 32, 256] {
        for n in 0..3 * d + 2 {
            let q = ceil_div(n, d);
            assert!(
                q * d >= n && (q == 0 || (q - 1) * d < n),
                "ceil_div({n}, {d}) = {q}"
            );
        }
    }
}

#[test]
fn linear_covers_every_element_with_the_fewest_blocks() {
    for limits in [DeviceLimits::COMMON, SMALL] {
        let block = 64;
        for (n, blocks) in [(1, 1), (63, 1), (64, 1), (65, 2), (640, 10), (641, 11)] {
            let cfg = LaunchConfig::linear("add", n, block, &limits).unwrap();
            assert_eq!(cfg, launch((blocks, 1, 1), (block, 1, 1), 0), "n = {n}");
            assert_eq!(cfg.threads(), u64::from(blocks) * u64::from(block));
        }
    }
}

#[test]
fn linear_at_the_grid_limit() {
    for (limits, block) in [(DeviceLimits::COMMON, 256u32), (SMALL, 64)] {
        let max = limits.max_grid_dim[0];
        let largest = max as usize * block as usize;
        let cfg = LaunchConfig::linear("add", largest, block, &limits).unwrap();
        assert_eq!(cfg.grid, (max, 1, 1));
        assert_too_large(
            LaunchConfig::linear("add", largest + 1, block, &limits),
            &["add", &max.to_string(), &(largest + 1).to_string()],
        );
    }
}

#[test]
fn linear_refuses_zero_elements_and_oversized_blocks() {
    assert!(matches!(
        LaunchConfig::linear("add", 0, 256, &DeviceLimits::COMMON),
        Err(Error::InvalidArgument { .. })
    ));
    assert_too_large(
        LaunchConfig::linear("add", 10, 1025, &DeviceLimits::COMMON),
        &["1025", "1024"],
    );
}

#[test]
fn zero_sized_blocks_are_refused_not_divided_by() {
    let limits = DeviceLimits::COMMON;
    for result in [
        LaunchConfig::linear("add", 100, 0, &limits),
        LaunchConfig::tiles_2d("matmul", 10, 10, 0, 0, &limits),
    ] {
        match result {
            Err(Error::InvalidArgument { detail, .. }) => assert!(detail.contains("0 threads"), "{detail}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn tiles_2d_covers_rows_and_columns() {
    let tile = 16;
    for (rows, cols, gy, gx) in [
        (1, 1, 1, 1),
        (16, 16, 1, 1),
        (17, 16, 2, 1),
        (16, 33, 1, 3),
        (100, 1, 7, 1),
    ] {
        let cfg = LaunchConfig::tiles_2d("matmul", rows, cols, tile, 128, &SMALL).unwrap();
        assert_eq!(cfg, launch((gx, gy, 1), (tile, tile, 1), 128), "{rows} x {cols}");
    }
}

#[test]
fn tiles_2d_at_the_grid_limits() {
    for limits in [DeviceLimits::COMMON, SMALL] {
        let tile = 16u32;
        let [max_x, max_y, _] = limits.max_grid_dim;
        let (rows, cols) = (max_y as usize * tile as usize, max_x as usize * tile as usize);
        let cfg = LaunchConfig::tiles_2d("matmul", rows, cols, tile, 0, &limits).unwrap();
        assert_eq!(cfg.grid, (max_x, max_y, 1));
        assert_too_large(
            LaunchConfig::tiles_2d("matmul", rows + 1, cols, tile, 0, &limits),
            &["rows", &max_y.to_string()],
        );
        assert_too_large(
            LaunchConfig::tiles_2d("matmul", rows, cols + 1, tile, 0, &limits),
            &["columns", &max_x.to_string()],
        );
    }
}

#[test]
fn block_tiles_cover_the_output_and_repeat_x() {
    // (rows, cols, repeat_x) -> (grid x, grid y) for 128 x 64 tiles.
    for (rows, cols, repeat, gx, gy) in [
        (1, 1, 1, 1, 1),
        (128, 64, 1, 1, 1),
        (129, 64, 1, 1, 2),
        (128, 65, 1, 2, 1),
        (300, 200, 3, 12, 3),
    ] {
        let cfg =
            LaunchConfig::block_tiles("matmul", (rows, cols), (128, 64), repeat, 256, 1024, &SMALL).unwrap();
        assert_eq!(
            cfg,
            launch((gx, gy, 1), (256, 1, 1), 1024),
            "{rows} x {cols} x {repeat}"
        );
    }
}

#[test]
fn block_tiles_at_the_grid_limits() {
    for limits in [DeviceLimits::COMMON, SMALL] {
        let [max_x, max_y, _] = limits.max_grid_dim;
        let (rows, cols) = (max_y as usize * 2, max_x as usize * 4);
        let cfg = LaunchConfig::block_tiles("matmul", (rows, cols), (2, 4), 1, 32, 0, &limits).unwrap();
        assert_eq!(cfg.grid, (max_x, max_y, 1));
        assert_too_large(
            LaunchConfig::block_tiles("matmul", (rows + 1, cols), (2, 4), 1, 32, 0, &limits),
            &["row tiles", &max_y.to_string()],
        );
        assert_too_large(
            LaunchConfig::block_tiles("matmul", (rows, cols + 1), (2, 4), 1, 32, 0, &limits),
            &["column tiles", &max_x.to_string()],
        );
        // The slices of a split `k` multiply the column tiles.
        assert_too_large(
            LaunchConfig::block_tiles("matmul", (rows, cols), (2, 4), 2, 32, 0, &limits),
            &["column tiles", &max_x.to_string()],
        );
    }
}

#[test]
fn tiles_2d_checks_the_block_and_shared_memory() {
    // 32 x 32 = 1024 threads: too many for SMALL's 512.
    assert_too_large(
        LaunchConfig::tiles_2d("matmul", 64, 64, 32, 0, &SMALL),
        &["1024", "512"],
    );
    assert_too_large(
        LaunchConfig::tiles_2d("matmul", 64, 64, 16, SMALL.max_shared_mem_per_block + 1, &SMALL),
        &["shared memory", &SMALL.max_shared_mem_per_block.to_string()],
    );
    assert!(matches!(
        LaunchConfig::tiles_2d("matmul", 0, 5, 16, 0, &SMALL),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn per_row_is_one_block_per_row() {
    for rows in [1, 2, 99, 100] {
        let cfg = LaunchConfig::per_row("softmax", rows, 128, 512, &SMALL).unwrap();
        assert_eq!(cfg, launch((rows as u32, 1, 1), (128, 1, 1), 512));
    }
    let max = DeviceLimits::COMMON.max_grid_dim[0];
    let cfg = LaunchConfig::per_row("softmax", max as usize, 256, 1024, &DeviceLimits::COMMON).unwrap();
    assert_eq!(cfg.grid, (max, 1, 1));
    assert_too_large(
        LaunchConfig::per_row("softmax", max as usize + 1, 256, 1024, &DeviceLimits::COMMON),
        &["softmax", "rows", &max.to_string()],
    );
    assert_too_large(LaunchConfig::per_row("softmax", 101, 128, 0, &SMALL), &["100"]);
}

#[test]
fn checked_accepts_exactly_the_limits() {
    let at_limits = [
        launch((100, 20, 5), (512, 1, 1), 4096),
        launch((1, 1, 1), (2, 256, 1), 0),
        launch((1, 1, 1), (1, 64, 8), 0),
    ];
    for cfg in at_limits {
        assert_eq!(cfg.checked("op", &SMALL).unwrap(), cfg);
    }
}

#[test]
fn checked_refuses_each_limit_with_a_message_naming_it() {
    let cases: [(LaunchConfig, &[&str]); 8] = [
        (
            launch((1, 1, 1), (513, 1, 1), 0),
            &["513 threads per block", "512"],
        ),
        // Each extent fits, the product does not.
        (
            launch((1, 1, 1), (32, 32, 1), 0),
            &["1024 threads per block", "512"],
        ),
        (launch((1, 1, 1), (1, 257, 1), 0), &["block y extent 257", "256"]),
        (launch((1, 1, 1), (1, 1, 9), 0), &["block z extent 9", "8"]),
        (launch((101, 1, 1), (1, 1, 1), 0), &["grid x extent 101", "100"]),
        (launch((1, 21, 1), (1, 1, 1), 0), &["grid y extent 21", "20"]),
        (launch((1, 1, 6), (1, 1, 1), 0), &["grid z extent 6", "5"]),
        (
            launch((1, 1, 1), (1, 1, 1), 4097),
            &["4097 bytes of shared memory", "4096"],
        ),
    ];
    for (cfg, needles) in cases {
        assert_too_large(cfg.checked("op", &SMALL), needles);
    }
    // The x extent of a block alone over its limit, with the thread limit raised out of the way.
    let wide = DeviceLimits {
        max_threads_per_block: 4096,
        ..SMALL
    };
    assert_too_large(
        launch((1, 1, 1), (513, 1, 1), 0).checked("op", &wide),
        &["block x extent 513", "512"],
    );
}

#[test]
fn checked_refuses_zero_extents() {
    let one = (1, 1, 1);
    for extent in [(0, 1, 1), (1, 0, 1), (1, 1, 0)] {
        for cfg in [launch(extent, one, 0), launch(one, extent, 0)] {
            match cfg.checked("op", &SMALL) {
                Err(e @ Error::InvalidArgument { .. }) => assert!(e.to_string().contains("empty launch")),
                other => panic!("{cfg:?}: expected InvalidArgument, got {other:?}"),
            }
        }
    }
}

#[test]
fn conversions_keep_the_launch_shape() {
    let cfg = launch((3, 4, 5), (6, 7, 8), 96);
    assert_eq!(cfg.threads(), 3 * 4 * 5 * 6 * 7 * 8);
    let sim = cfg.to_sim();
    assert_eq!((sim.grid.x, sim.grid.y, sim.grid.z), cfg.grid);
    assert_eq!((sim.block.x, sim.block.y, sim.block.z), cfg.block);
    assert_eq!(sim.shared_mem_bytes, cfg.shared_mem_bytes);
    let cuda = cfg.to_cuda();
    assert_eq!(
        (cuda.grid_dim, cuda.block_dim, cuda.shared_mem_bytes),
        (cfg.grid, cfg.block, 96)
    );
}
