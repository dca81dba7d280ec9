//! The plan of a grouped product ([`crate::Gpu::matmul_grouped`]): which tile, and how many
//! persistent blocks. A pure function of the shapes and the multiprocessors, so that it is
//! unit-tested without a GPU. The experts' row counts are on the device, so the plan sees only
//! their total (`rows`) and number (`experts`): the row tiles of the list are at most
//! `ceil(rows / BM) + experts` (each expert's last tile may be partial).

use kernels_gpu::matmul::wgmma_ws::{WS_128X128, WS_128X256, WsTiling};

/// The tile of a grouped product's kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupedPlan {
    /// `matmul_grouped_bf16_128x256`: tiles of 128 x 256 (the wgmma_ws kernel's widest).
    Wide,
    /// `matmul_grouped_bf16_128x128`: tiles of 128 x 128, twice the tiles for the same product.
    Square,
}

/// [`GroupedPlan::choose`] takes the wide tile when it gives at least this many tiles per
/// multiprocessor (a guess, to be settled by the bench's rows of both plans): with fewer, the
/// last wave of wide tiles leaves too many multiprocessors idle. `n <= 128` always takes the
/// square tile (a wide one would be half empty).
pub const GROUPED_WIDE_TILES_PER_SM: usize = 4;

impl GroupedPlan {
    /// Every plan, for tests and benches that must reach every kernel.
    pub const ALL: [GroupedPlan; 2] = [GroupedPlan::Wide, GroupedPlan::Square];

    /// The plan for `rows` rows of `X` over `experts` experts, `n` columns, on `multiprocessors`
    /// SMs: [`GroupedPlan::Wide`] when `n > 128` and the wide tiles of a dense `rows x n` product
    /// are at least [`GROUPED_WIDE_TILES_PER_SM`] per SM, else [`GroupedPlan::Square`]. On an
    /// H200 (132 SMs), 65,536 rows and `n = 1536` (the MoE layer) are 3,072 wide tiles:
    /// wide.
    pub fn choose(rows: usize, n: usize, multiprocessors: usize) -> GroupedPlan {
        let wide = WS_128X256;
        let tiles = rows.div_ceil(wide.block_rows) * n.div_ceil(wide.block_cols);
        if n > 128 && tiles >= GROUPED_WIDE_TILES_PER_SM * multiprocessors.max(1) {
            GroupedPlan::Wide
        } else {
            GroupedPlan::Square
        }
    }

    /// The tiling of the plan's kernel.
    pub fn tiling(self) -> WsTiling {
        match self {
            GroupedPlan::Wide => WS_128X256,
            GroupedPlan::Square => WS_128X128,
        }
    }

    /// The most tiles the list can have: `(ceil(rows / BM) + experts) ceil(n / BN)`.
    pub fn max_tiles(self, rows: usize, n: usize, experts: usize) -> usize {
        let t = self.tiling();
        (rows.div_ceil(t.block_rows) + experts).saturating_mul(n.div_ceil(t.block_cols))
    }

    /// Blocks of the persistent grid: one per resident slot (`resident`, the multiprocessors on
    /// a GPU), never more than [`GroupedPlan::max_tiles`], at least one.
    pub fn grid(self, rows: usize, n: usize, experts: usize, resident: usize) -> usize {
        self.max_tiles(rows, n, experts).min(resident).max(1)
    }

    /// The tile's name: `128x256` or `128x128` (the entry point's suffix).
    pub fn name(self) -> &'static str {
        match self {
            GroupedPlan::Wide => "128x256",
            GroupedPlan::Square => "128x128",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GroupedPlan;

    /// The layer on an H200 is wide; small products and narrow `n` are square; each
    /// side of the threshold (132 SMs want 528 wide tiles).
    #[test]
    fn choose() {
        assert_eq!(GroupedPlan::choose(65_536, 1536, 132), GroupedPlan::Wide);
        assert_eq!(GroupedPlan::choose(65_536, 128, 132), GroupedPlan::Square);
        assert_eq!(GroupedPlan::choose(256, 1536, 132), GroupedPlan::Square);
        // 88 row tiles x 6 column tiles = 528: wide; 87 x 6 = 522: square.
        assert_eq!(GroupedPlan::choose(88 * 128, 1536, 132), GroupedPlan::Wide);
        assert_eq!(GroupedPlan::choose(87 * 128, 1536, 132), GroupedPlan::Square);
        assert_eq!(GroupedPlan::choose(0, 1536, 132), GroupedPlan::Square);
        assert_eq!(GroupedPlan::choose(1 << 20, 1536, 0), GroupedPlan::Wide);
    }

    /// The grid: the resident blocks, fewer when the list is short, never 0; the bound on the
    /// list counts a partial tile per expert.
    #[test]
    fn grid() {
        let p = GroupedPlan::Wide;
        assert_eq!(p.max_tiles(300, 1536, 8), (3 + 8) * 6);
        assert_eq!(p.grid(65_536, 1536, 128, 132), 132);
        assert_eq!(p.grid(10, 100, 1, 132), 2);
        assert_eq!(p.grid(0, 0, 1, 132), 1);
        assert_eq!(GroupedPlan::Square.max_tiles(129, 129, 2), (2 + 2) * 2);
        assert_eq!(p.max_tiles(usize::MAX, 1 << 20, 1), usize::MAX);
    }

    /// The split tail (`tail_halves`, computed by the kernel on the device): the layer
    /// (3,072 wide tiles on 132 blocks) splits its last 36 tiles; each side of `2 r <= blocks`;
    /// a list shorter than the grid splits all of it when the halves fit; none without a rest.
    #[test]
    fn tail_halves() {
        use kernels_gpu::matmul::wgmma_ws::tail_halves;
        assert_eq!(tail_halves(3072, 132), 36);
        assert_eq!(tail_halves(132 * 23 + 66, 132), 66);
        assert_eq!(tail_halves(132 * 23 + 67, 132), 0);
        assert_eq!(tail_halves(132 * 23, 132), 0);
        assert_eq!(tail_halves(3, 6), 3);
        assert_eq!(tail_halves(4, 5), 0);
        assert_eq!(tail_halves(1, 3), 1);
        assert_eq!(tail_halves(2, 3), 0);
        assert_eq!(tail_halves(0, 132), 0);
        assert_eq!(tail_halves(7, 0), 0);
    }

    /// Each plan's kernel launches with one shared-memory size whatever the experts (room for
    /// the tables of the most): the H200 refused a 3-expert launch (`CUDA_ERROR_INVALID_VALUE`)
    /// while other trials launched the same kernel with other sizes, racing the opt-in. Within
    /// the 227 KiB a block may have on compute capability 9.0.
    #[test]
    fn one_shared_size_per_kernel() {
        use kernels_gpu::matmul::grouped::grouped_shared_bytes;
        for plan in GroupedPlan::ALL {
            let t = plan.tiling();
            let bytes = grouped_shared_bytes(t);
            assert!(bytes <= 232_448, "{plan:?}: {bytes}");
            assert!(
                bytes as usize >= t.shared_bytes() as usize + 2 * 4 * 1025,
                "{plan:?}: {bytes}"
            );
        }
    }
}
