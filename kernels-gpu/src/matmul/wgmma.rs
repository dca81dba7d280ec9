//! Matrix product `C = A * B` on Hopper's warpgroup tensor cores (`wgmma`, sm_90a only): bf16
//! operands, row-major (`A` is `m x k`, `B` is `k x n`), f32 accumulation, the result in bf16
//! (rounded once) or f32. The first `wgmma` rung of the half-precision ladder; the host's plan
//! chooses it over [`super::half`]'s `mma.sync` kernels on a compute capability 9.0 GPU with the
//! `sm_90a` module loaded, for `k` and `n` multiples of 8 (the copy engine needs row strides of
//! whole 16 bytes).
//!
//! Compiled into the `sm_90a` PTX only (and the simulator): `#[cfg(target_feature = "sm_90a")]`
//! on the module keeps it out of the sm_80 and sm_90 modules.
//!
//! # Design ([`WGMMA_128X128`])
//! * **One warpgroup** (128 threads) per block tile of `BM x BN = 128 x 128`, stepping `BK = 64`
//!   along `k`: per step a block moves `2 BK (BM + BN)` = 32 KiB into shared memory and does
//!   `2 BM BN BK` = 2 MFLOP (64 flops per byte), as 8 `wgmma.m64n128k16` (two row halves of 64
//!   times four steps of 16) in one `asm!` block ([`wgmma::mma_bf16_m128n128k64`]).
//! * **Copies**: the bulk tensor copy engine (TMA), 128-byte swizzled boxes: per stage one box
//!   of `A` (128 rows x 64 columns, K-major as `wgmma` reads `A`) and two of `B` (64 rows x 64
//!   columns each, N-major: the descriptor's transpose bit reads them as `B`). Out-of-bounds
//!   parts land as zeros, so ragged `m`, `n`, `k` need no code in the main loop.
//! * **Pipeline**: `STAGES` (4) stages in a ring, each with an `mbarrier` that the copies complete
//!   (`expect_tx` of the stage's 32 KiB). Thread 0 fills every stage first; per tile, every thread
//!   waits for its stage's phase, the warpgroup runs the tile's products (waiting for them), a
//!   block barrier says everyone is done with the stage, and thread 0 refills it with the tile
//!   `STAGES` ahead. So `STAGES - 1` tiles are in flight while one is computed.
//! * **What one thread holds**: 128 f32 accumulators, rows `16 w + g (+ 8)` and columns
//!   `8 j + 2 q (+ 1)` of each 64-row half (the `wgmma` layout, [`crate::gpu::wgmma`]).
//! * **Epilogue**: each thread stores its accumulators straight to `C` as pairs, inside `m` and `n`.
//! * **Shared memory**: 1 KiB of slack to align the ring to 1024 bytes (what the 128-byte
//!   swizzle needs), `STAGES x 32 KiB` of tiles, and the barriers: 132,128 bytes.
//!
//! Tensor maps: the host encodes two (`A`, then `B`, 128 bytes each) with
//! `cuTensorMapEncodeTiled` and passes their address in global memory as `maps`.

use super::tf32::grouped_tile;
use crate::gpu::tile::Output;
use crate::gpu::tma::{self, Tensor2d};
use crate::gpu::{bf16, mbarrier, shared, thread, wgmma};
use crate::kernel;

/// Tile shape of the `wgmma` kernels; the host reads it to launch them and to encode the
/// tensor maps' boxes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgmmaTiling {
    /// Rows of `C` per block (`BM`): two `wgmma` row halves of 64.
    pub block_rows: usize,
    /// Columns of `C` per block (`BN`), the `N` of `wgmma.m64nNk16`.
    pub block_cols: usize,
    /// Step along `k` per stage (`BK`): one 128-byte swizzle row of bf16.
    pub block_k: usize,
    /// Stages of the copy ring.
    pub stages: usize,
}

impl WgmmaTiling {
    /// Threads per block: one warpgroup.
    pub const fn threads(&self) -> u32 {
        WARPGROUP as u32
    }

    /// Bytes of `A` per stage (one box of `BM x BK`).
    pub const fn a_bytes(&self) -> usize {
        self.block_rows * self.block_k * 2
    }

    /// Bytes of one box of `B` (`BK x` [`SWIZZLE_COLS`]).
    pub const fn b_box_bytes(&self) -> usize {
        self.block_k * SWIZZLE_COLS * 2
    }

    /// Bytes of one stage: `A`, then `B` as `BN /` [`SWIZZLE_COLS`] boxes.
    pub const fn stage_bytes(&self) -> usize {
        self.a_bytes() + self.block_cols / SWIZZLE_COLS * self.b_box_bytes()
    }

    /// Dynamic shared memory per block: alignment slack, the stages, one barrier per stage.
    pub const fn shared_bytes(&self) -> u32 {
        (ALIGN + self.stages * self.stage_bytes() + self.stages * 8) as u32
    }
}

/// 128 x 128 x 64, four stages (132,128 bytes of shared memory: one block per SM).
pub const WGMMA_128X128: WgmmaTiling = WgmmaTiling {
    block_rows: 128,
    block_cols: 128,
    block_k: 64,
    stages: 4,
};

/// bf16 elements in one 128-byte swizzle row: the columns of every box.
pub const SWIZZLE_COLS: usize = 64;
/// Threads of a warpgroup.
const WARPGROUP: usize = 128;
/// Alignment of the 128-byte swizzle pattern's atoms (8 rows of 128 bytes).
const ALIGN: usize = 1024;
/// `u64` words from one tensor map to the next in `maps`.
pub const MAP_WORDS: usize = 16;

/// The body of the `wgmma` kernels (see the module documentation): block `(bx, by)` computes
/// the `128 x 128` tile `grouped_tile(by * gridDim.x + bx)` of `C`. What one thread does:
/// thread 0 initialises the stages' barriers and issues the first `STAGES` tiles' copies; then
/// per tile of 64 along `k` every thread waits for the tile's barrier phase, takes part in the
/// warpgroup's 8 products, and meets the others at a block barrier, after which thread 0 issues
/// the copies of the tile `STAGES` ahead into the stage just used. At the end it stores its
/// 128 accumulators inside `C` as `O`, in pairs.
///
/// # Safety
/// * `maps` holds two tensor maps of [`MAP_WORDS`] words each, 64-byte aligned, encoded for `a`
///   (`m x k`, box `BM x 64`) and `b` (`k x n`, box `BK x 64`), bf16, 128-byte swizzle, zero
///   fill; `a`, `b`, `c` hold `m*k`, `k*n`, `m*n` elements (the rows of `a` `lda` and those of
///   `b` `ldb` elements apart, as the maps say; `c` dense), `c` overlaps neither; `k % 8 == 0`,
///   `n % 8 == 0`, `a` and `b` 16-byte aligned, `c` aligned to a pair of `O`; `m, n >= 1`.
/// * The launch: 128 threads, a grid of `(ceil(n / BN), ceil(m / BM))`,
///   [`WgmmaTiling::shared_bytes`] of dynamic shared memory; a compute capability 9.0 GPU.
///
/// Instances ([`WGMMA_128X128`]'s numbers), one PTX entry each (in the sm_90a module):
/// * `matmul_wgmma_bf16_128x128` (a bf16 result): `C = A * B` for bf16 `A` (`m x k`) and `B`
///   (`k x n`), `k` and `n` multiples of 8. Per tile of 64 along `k` a block moves 32 KiB by TMA
///   and does 2,097,152 flops. Launch: 128 threads, grid `(ceil(n/128), ceil(m/128))`,
///   `WGMMA_128X128.shared_bytes()` bytes of dynamic shared memory, a compute capability 9.0
///   GPU. Minimum traffic: `2 (m k + k n + m n)` bytes.
/// * `matmul_wgmma_bf16_f32out_128x128` (an f32 result, the accumulators unrounded). Minimum
///   traffic: `2 (m k + k n) + 4 m n` bytes.
// Barriers: two, one after the barriers' initialisation, one per tile (everyone is done with the
// stage before thread 0 refills it).
#[kernel(
    instances(
        matmul_wgmma_bf16_128x128 = (
            bf16,
            WGMMA_128X128.block_rows,
            WGMMA_128X128.block_cols,
            WGMMA_128X128.block_k,
            WGMMA_128X128.stages,
        ),
        matmul_wgmma_bf16_f32out_128x128 = (
            f32,
            WGMMA_128X128.block_rows,
            WGMMA_128X128.block_cols,
            WGMMA_128X128.block_k,
            WGMMA_128X128.stages,
        ),
    ),
    block(WGMMA_128X128.threads()),
    barriers(2)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn wgmma_gemm<
    O: Output,
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const STAGES: usize,
>(
    maps: *const u64,
    a: *const bf16,
    b: *const bf16,
    c: *mut O,
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
) {
    const {
        assert!(BM == 128 && BN == 128 && BK == 64, "the products are m128n128k64");
        assert!(STAGES >= 2, "a ring of at least two stages");
    }
    let t = WgmmaTiling {
        block_rows: BM,
        block_cols: BN,
        block_k: BK,
        stages: STAGES,
    };
    let (a_bytes, b_box, stage_bytes) = (t.a_bytes(), t.b_box_bytes(), t.stage_bytes());
    let tid = thread::thread_idx_x() as usize;

    let tiles_n = thread::grid_dim_x() as usize;
    let tiles_m = thread::grid_dim_y() as usize;
    let id = thread::block_idx_y() as usize * tiles_n + thread::block_idx_x() as usize;
    let (tile_m, tile_n) = grouped_tile(id, tiles_m, tiles_n);
    let (row0, col0) = (tile_m * BM, tile_n * BN);
    let k_tiles = k.div_ceil(BK);

    // The ring starts at the first 1024-byte boundary of the shared window.
    let base = shared::dynamic::<u64>().cast::<u8>();
    let base_address = wgmma::shared_address(base) as usize;
    let pad = (ALIGN - base_address % ALIGN) % ALIGN;
    let ring = base.wrapping_add(pad);
    let ring_address = (base_address + pad) as u32;
    let bars = ring.wrapping_add(STAGES * stage_bytes).cast::<u64>();
    let bar = |s: usize| bars.wrapping_add(s);

    let ta = Tensor2d {
        map: maps,
        data: a,
        rows: m,
        cols: k,
        stride: lda,
        box_rows: BM,
        box_cols: SWIZZLE_COLS,
    };
    let tb = Tensor2d {
        map: maps.wrapping_add(MAP_WORDS),
        data: b,
        rows: k,
        cols: n,
        stride: ldb,
        box_rows: BK,
        box_cols: SWIZZLE_COLS,
    };
    // Thread 0 fills stage `s` with tile `kt`: the A box, then B's boxes side by side.
    let issue = |kt: usize, s: usize| {
        let stage = ring.wrapping_add(s * stage_bytes);
        // SAFETY: stage `s` is 1024-byte aligned inside the ring and free (no thread reads it
        // until the wait for this phase); the maps are the kernel's (its contract); the barrier
        // was initialised and expects these bytes.
        unsafe {
            mbarrier::arrive_expect_tx(bar(s), stage_bytes as u32);
            tma::load_2d(stage.cast::<bf16>(), &ta, bar(s), row0 as u32, (kt * BK) as u32);
            for j in 0..BN / SWIZZLE_COLS {
                let dst = stage.wrapping_add(a_bytes + j * b_box).cast::<bf16>();
                tma::load_2d(
                    dst,
                    &tb,
                    bar(s),
                    (kt * BK) as u32,
                    (col0 + j * SWIZZLE_COLS) as u32,
                );
            }
        }
    };
    if tid == 0 {
        tma::prefetch_map(ta.map);
        tma::prefetch_map(tb.map);
        for s in 0..STAGES {
            // SAFETY: 8 bytes of shared memory past the ring, used by nothing else.
            unsafe { mbarrier::init(bar(s), 1) };
        }
        mbarrier::fence_init();
    }
    thread::sync_threads();
    if tid == 0 {
        for s in 0..STAGES {
            if s < k_tiles {
                issue(s, s);
            }
        }
    }

    // Zeroed as one memset: rustc writes `[0.0f32; 128]` as a store loop, whose variable index
    // keeps LLVM from promoting the accumulators to registers (a 512-byte stack frame).
    // SAFETY: all-zero bits are 0.0 for f32.
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
    for kt in 0..k_tiles {
        let s = kt % STAGES;
        // SAFETY: an initialised barrier; every thread waits here.
        unsafe { mbarrier::wait_parity(bar(s), ((kt / STAGES) & 1) as u32) };
        let stage = ring_address + (s * stage_bytes) as u32;
        // A: 8-row groups 1024 bytes apart, steps of 16 along k 32 bytes apart, the row halves
        // 64 rows (8 KiB) apart. B: 64-column boxes `b_box` apart, 8-row groups 1024 bytes
        // apart, steps of 16 along k 16 rows (2 KiB) apart.
        let a_desc: [[u64; 4]; 2] = core::array::from_fn(|h| {
            core::array::from_fn(|j| wgmma::desc_sw128(stage + (h * 64 * 128 + j * 32) as u32, 16, 1024))
        });
        let b_desc: [u64; 4] = core::array::from_fn(|j| {
            wgmma::desc_sw128(stage + (a_bytes + j * 16 * 128) as u32, b_box as u32, 1024)
        });
        // SAFETY: the block is one warpgroup, all here; the stage's copies have landed (the
        // wait) and nothing writes it before the barrier below.
        acc = unsafe { wgmma::mma_bf16_m128n128k64(acc, a_desc, b_desc, kt > 0) };
        thread::sync_threads();
        if tid == 0 && kt + STAGES < k_tiles {
            issue(kt + STAGES, s);
        }
    }

    let (w, g, q) = (tid / 32, (tid % 32) / 4, tid % 4);
    unroll_8!(2, |h| {
        unroll_8!(2, |r| {
            let row = row0 + 64 * h + 16 * w + g + 8 * r;
            if row < m {
                unroll_8!(8, |j0| {
                    unroll_8!(2, |j1| {
                        let j = 2 * j0 + j1;
                        let col = col0 + 8 * j + 2 * q;
                        let i = 64 * h + 4 * j + 2 * r;
                        if col < n {
                            // SAFETY: `row < m`, `col < n` and `n` even with `col` even: both
                            // elements inside the row, aligned to a pair.
                            unsafe { O::store_pair(c, row * n + col, [acc[i], acc[i + 1]]) };
                        }
                    });
                });
            }
        });
    });
}
