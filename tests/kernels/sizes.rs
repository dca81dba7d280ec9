//! The shapes each backend's trials run: small ones in the simulator, ragged and large ones on
//! CUDA.

/// Shapes one backend's trials use.
pub(crate) struct Sizes {
    /// Vector lengths of the element-wise kernels and of `softmax_vec`.
    pub(crate) lengths: &'static [usize],
    /// `(m, k, n)` of the matrix products.
    pub(crate) matmul: &'static [(usize, usize, usize)],
    /// `(m, k, n)` of the products run with every plan of the fast kernels.
    pub(crate) fast: &'static [(usize, usize, usize)],
    /// `(m, k, n)` of the products run with every tiling of the TF32 kernels (16-byte copies
    /// where `k` and `n` are multiples of 4, 4-byte copies elsewhere).
    pub(crate) tf32: &'static [(usize, usize, usize)],
    /// `(rows, cols)` of the row-wise softmax.
    pub(crate) softmax: &'static [(usize, usize)],
    /// Shapes of the chained test: vector length, then `A: m x k`, `B: k x n`, `B2: n x p`.
    pub(crate) chain: (usize, [usize; 4]),
}

/// Small enough that the whole simulator part runs in seconds in a debug build.
pub(crate) const SIM_SIZES: Sizes = Sizes {
    // 1024: a multiple of 4, for element-wise kernels with 16-byte accesses.
    lengths: &[1, 7, 31, 33, 257, 1024, 1025],
    matmul: &[
        (1, 1, 1),
        (7, 31, 33),
        (33, 7, 31),
        (65, 33, 47),
        (31, 64, 2),
        (32, 32, 32),
        // Long enough k for the fast kernels' automatic split of k, with and without 16-byte
        // accesses (those need k and n multiples of 4).
        (33, 520, 17),
        (20, 516, 36),
    ],
    fast: &[(1, 1, 1), (7, 31, 33), (65, 33, 47), (20, 516, 36), (33, 520, 17)],
    // Every MMA is 32 warp shuffles in the simulator: small shapes, but past the 128-row and
    // 128/256-column block tiles and the 32-deep k tile.
    tf32: &[
        (1, 1, 1),
        (17, 33, 65),
        (129, 131, 37),
        (200, 300, 72),
        (128, 64, 256),
    ],
    softmax: &[(1, 1), (7, 31), (5, 300), (2, 1025)],
    chain: (300, [20, 33, 17, 9]),
};

/// The simulator's one row past 2048 vectors (4 per thread of 512 threads at most): the
/// block-per-row paths take 8 vectors per thread.
pub(crate) const SIM_BLOCK_8_ROW: (usize, usize) = (1, 8196);

/// Ragged shapes around the block sizes (256 threads, 32x32 tiles) and large ones.
pub(crate) const CUDA_SIZES: Sizes = Sizes {
    lengths: &[1, 7, 31, 33, 1000, 1025, 4097, 1 << 20],
    matmul: &[
        (1, 1, 1),
        (7, 31, 33),
        (33, 7, 31),
        (1000, 1000, 1000),
        (1025, 1, 1025),
        (4097, 33, 31),
        (31, 4097, 7),
        (64, 4096, 64),
        (96, 128, 160),
        (257, 65, 129),
        // Enough 128x128 blocks to fill an H200's 132 multiprocessors: the large fast tiling.
        (1537, 129, 1409),
        (2048, 256, 1152),
    ],
    fast: &[
        (1, 1, 1),
        (7, 31, 33),
        (257, 65, 129),
        (1000, 1000, 1000),
        (31, 4097, 7),
        (64, 4096, 64),
    ],
    tf32: &[
        (1, 1, 1),
        (17, 33, 65),
        (129, 131, 37),
        (200, 300, 70),
        (1000, 1000, 1000),
        (1024, 1024, 1024),
        (2048, 256, 1152),
        (1537, 1029, 1409),
        (31, 4097, 7),
    ],
    softmax: &[
        (1, 1),
        (7, 31),
        (33, 1025),
        (1000, 4097),
        // More rows than the persistent warp kernel has warps resident: each loops.
        (5000, 999),
        (3, 100_000),
        (1, 1 << 20),
    ],
    chain: (100_003, [300, 200, 150, 70]),
};
