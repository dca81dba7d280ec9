//! Matrix product `C = A * B` on Hopper's warpgroup tensor cores with warp specialisation (sm_90a
//! only): bf16 or f16 operands, row-major (`A` is `m x k`, `B` is `k x n`), f32 accumulation, the
//! result in the operands' type (rounded once) or f32; and TF32 (f32 operands read as TF32, `B`
//! given transposed, `n x k`: `wgmma` reads TF32 operands K-major only), an f32 result. The rung after [`super::wgmma`]: there
//! one warpgroup both waits for the copies and multiplies; here a producer warpgroup keeps the
//! copy engine busy while two consumer warpgroups keep the tensor cores busy, and each block
//! stays resident and walks over many tiles of `C`.
//!
//! Compiled into the `sm_90a` PTX only (and the simulator).
//!
//! # Design ([`WS_128X256`])
//! * **Block**: three warpgroups (384 threads), launch bounds `(384, 1)` so that ptxas knows the
//!   register budget at entry (168 per thread) and honours `setmaxnreg`: the producer gives
//!   registers back (40 per thread), the consumers take them (232 per thread).
//! * **Tile**: `BM x BN = 128 x 256` of `C` per tile, stepping `BK = 64` along `k`; consumer `c`
//!   (warpgroups 1 and 2) owns rows `64 c .. 64 c + 64` of the tile, 128 f32 accumulators per
//!   thread, and per step issues four `wgmma.m64n256k16` in one `asm!` block
//!   ([`wgmma::mma_bf16_m64n256k64`]). Per step a block moves `2 BK (BM + BN)` = 48 KiB and does
//!   `2 BM BN BK` = 4 MFLOP (85 flops per byte).
//! * **Copies**: thread 0 of the producer issues TMA copies of 128-byte swizzled boxes: per stage
//!   one box of `A` (128 rows x 64 columns, K-major) and four of `B` (64 rows x 64 columns each,
//!   N-major, read through the descriptor's transpose bit). Zero fill past the matrix, so ragged
//!   `m`, `n`, `k` need no code in the loop.
//! * **Ring**: `STAGES` (4) stages, each with a `full` barrier (the producer's arrival with the
//!   stage's bytes; the copies complete it) and an `empty` barrier (one arrival per consumer
//!   warp once its products have read the stage). The producer waits for `empty`, the consumers
//!   for `full`; the ring runs on across tiles, the phase of step `i` being `(i / STAGES) % 2`.
//! * **Persistent grid**: block `b` of `G` takes the tiles `b, b + G, b + 2G, ...` in the grouped
//!   order of the TF32 kernels' `grouped_tile` (neighbouring blocks share rows of `A` and columns of
//!   `B` in L2); the producer fills the next tile's stages while the consumers store the last.
//! * **Epilogue**: each consumer thread stores its 128 accumulators straight to `C`, as pairs
//!   where `n` is even, inside `m` and `n`.
//! * **Shared memory**: 1 KiB of alignment slack, `STAGES x 48 KiB` of stages, two barriers per
//!   stage: 197,696 bytes (one block per SM).
//!
//! Tensor maps: two in global memory, as [`super::wgmma`]: `A` (`m x k`, box `BM x BK`), then
//! `B` (`k x n`, box `BK x 64`) or, for an operand type that reads `B` K-major
//! ([`WgmmaOperand::B_K_MAJOR`]), `B^T` (`n x k`, box `BN x BK`); 128-byte swizzle, zero fill.

use super::half::GemmOutput;
use super::tf32::grouped_tile;
use super::wgmma::MAP_WORDS;
use crate::gpu::tma::{self, Tensor2d};
use crate::gpu::{bf16, f16, mbarrier, shared, thread, warp, wgmma};
use crate::kernel;

/// Tile shape of the warp-specialised kernels; the host reads it to launch them and to encode
/// the tensor maps' boxes. The step along `k` is one 128-byte swizzle row of the element type
/// (64 for 16-bit elements, 32 for 32-bit ones): [`WsTiling::block_k`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WsTiling {
    /// Rows of `C` per tile (`BM`): 64 per consumer warpgroup.
    pub block_rows: usize,
    /// Columns of `C` per tile (`BN`), the `N` of `wgmma.m64nNk*`.
    pub block_cols: usize,
    /// Stages of the copy ring.
    pub stages: usize,
    /// Consumer warpgroups (the producer is one more).
    pub consumers: usize,
}

impl WsTiling {
    /// Threads per block: the producer and the consumers, a warpgroup each.
    pub const fn threads(&self) -> u32 {
        ((self.consumers + 1) * WARPGROUP) as u32
    }

    /// The step along `k` per stage (`BK`) for elements of `bytes` bytes: one 128-byte row.
    pub const fn block_k(bytes: usize) -> usize {
        SWIZZLE_ROW / bytes
    }

    /// Bytes of `A` per stage (one box of `BM x BK`, 128 bytes per row).
    pub const fn a_bytes(&self) -> usize {
        self.block_rows * SWIZZLE_ROW
    }

    /// Bytes of one stage: `A`, then `B` (`BN x BK`, 128 bytes per `BN`), whatever the type.
    pub const fn stage_bytes(&self) -> usize {
        (self.block_rows + self.block_cols) * SWIZZLE_ROW
    }

    /// Dynamic shared memory per block: alignment slack, the stages, two barriers per stage.
    pub const fn shared_bytes(&self) -> u32 {
        (ALIGN + self.stages * self.stage_bytes() + 2 * self.stages * 8) as u32
    }

    /// Tiles of `C` for an `m x n` product.
    pub const fn tiles(&self, m: usize, n: usize) -> usize {
        m.div_ceil(self.block_rows) * n.div_ceil(self.block_cols)
    }
}

/// 128 x 256 per tile, four stages of 48 KiB, two consumers (197,696 bytes of shared memory).
pub const WS_128X256: WsTiling = WsTiling {
    block_rows: 128,
    block_cols: 256,
    stages: 4,
    consumers: 2,
};

/// Bytes of one row of a 128-byte swizzled box.
const SWIZZLE_ROW: usize = 128;
/// Threads of a warpgroup.
const WARPGROUP: usize = 128;
/// Alignment of the 128-byte swizzle pattern's atoms (8 rows of 128 bytes).
const ALIGN: usize = 1024;
/// Registers per thread the producer keeps.
const PRODUCER_REGISTERS: u32 = 40;
/// Registers per thread the consumers ask for: `128 x 40 + 256 x 232 <= 65536`.
const CONSUMER_REGISTERS: u32 = 232;

/// An operand type of the warp-specialised kernels: its size, how `B` sits in shared memory, and
/// its `m64n256` product over one 128-byte step of `k`.
pub trait WgmmaOperand: Copy {
    /// Bytes per element.
    const BYTES: usize;
    /// Whether the kernel reads `B` K-major: from a `B^T` (`n x k`, row-major) matrix, boxes of
    /// `BN x BK` (TF32, which `wgmma` reads K-major only). Otherwise N-major from `B` itself
    /// (`k x n`), boxes of `BK x 64` side by side, read through the descriptor's transpose bit.
    const B_K_MAJOR: bool;

    /// `C(64 x 256) (+)= A(64 x BK) * B(BK x 256)` on the calling warpgroup, four products of
    /// one quarter of `BK` each ([`wgmma::mma_bf16_m64n256k64`]).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n256k64`].
    unsafe fn mma_m64n256(acc: [f32; 128], a: [u64; 4], b: [u64; 4], accumulate: bool) -> [f32; 128];

    /// [`WgmmaOperand::mma_m64n256`] issued and committed as one group but not waited for
    /// ([`wgmma::mma_bf16_m64n256k64_async`]); [`wgmma::wait_accumulators`] retires it. By
    /// default the product waited for (a type without an asynchronous twin).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n256k64_async`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma_m64n256_async(acc: [f32; 128], a: [u64; 4], b: [u64; 4], accumulate: bool) -> [f32; 128] {
        // SAFETY: forwarded contract.
        unsafe { Self::mma_m64n256(acc, a, b, accumulate) }
    }
}

/// [`WgmmaOperand`] for a 16-bit type, its products `$sync` and `$async` of [`wgmma`].
macro_rules! half_operand {
    ($t:ty: $sync:ident, $async:ident) => {
        impl WgmmaOperand for $t {
            const BYTES: usize = 2;
            const B_K_MAJOR: bool = false;
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_m64n256(acc: [f32; 128], a: [u64; 4], b: [u64; 4], accumulate: bool) -> [f32; 128] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$sync(acc, a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_m64n256_async(
                acc: [f32; 128],
                a: [u64; 4],
                b: [u64; 4],
                accumulate: bool,
            ) -> [f32; 128] {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$async(acc, a, b, accumulate) }
            }
        }
    };
}

half_operand!(bf16: mma_bf16_m64n256k64, mma_bf16_m64n256k64_async);
half_operand!(f16: mma_f16_m64n256k64, mma_f16_m64n256k64_async);

/// The body of the warp-specialised kernels (see the module documentation). What one thread
/// does: thread 0 initialises the barriers; after a block barrier, the producer warpgroup lowers
/// its registers and its thread 0 walks the block's tiles and their steps along `k`, waiting for
/// each stage to be empty and refilling it by TMA; each consumer thread raises its registers and
/// walks the same steps, waiting for each stage to be full, taking part in its warpgroup's four
/// products, lane 0 of each warp then marking the stage empty; after a tile's last step it
/// stores its 128 accumulators inside `C` as `O`.
///
/// # Safety
/// * `maps` holds two tensor maps of [`MAP_WORDS`] words each, 64-byte aligned, encoded for `a`
///   (`m x k`, box `BM x BK`) and `b` (`k x n`, box `BK x 64`; or, where `I::B_K_MAJOR`, `b` is
///   `B^T`, `n x k`, box `BN x BK`), element type `I`, 128-byte swizzle, zero fill; `a`, `b`, `c`
///   hold `m x k`, `k x n` (or `n x k`) and `m x n` elements, the rows of `a` `lda` and those of `b`
///   `ldb` elements apart (as the maps say), `c` dense and overlapping neither; `a` and `b` 16-byte aligned, `c`
///   aligned to a pair of `O` when `n` is even; `m, n >= 1`.
/// * The launch: [`WsTiling::threads`] threads, a grid of `(G, 1)` blocks with
///   `1 <= G <= tiles`, [`WsTiling::shared_bytes`] of dynamic shared memory; a compute
///   capability 9.0 GPU.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn ws_gemm<I: WgmmaOperand, O: GemmOutput, const STAGES: usize>(
    maps: *const u64,
    a: *const I,
    b: *const I,
    c: *mut O,
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
) {
    const BM: usize = WS_128X256.block_rows;
    const BN: usize = WS_128X256.block_cols;
    const { assert!(STAGES >= 2, "a ring of at least two stages") };
    let bk = WsTiling::block_k(I::BYTES);
    // Columns of one N-major box of `B`: one 128-byte row.
    let box_cols = SWIZZLE_ROW / I::BYTES;
    let t = WsTiling {
        stages: STAGES,
        ..WS_128X256
    };
    let (a_bytes, stage_bytes) = (t.a_bytes(), t.stage_bytes());
    // Bytes of one N-major box of `B` (`BK` rows of 128 bytes).
    let b_box = bk * SWIZZLE_ROW;
    let tid = thread::thread_idx_x() as usize;
    let group = tid / WARPGROUP;

    let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(BN));
    let tiles = tiles_m * tiles_n;
    let (first, step) = (thread::block_idx_x() as usize, thread::grid_dim_x() as usize);
    let k_tiles = k.div_ceil(bk);

    // The ring starts at the first 1024-byte boundary of the shared window; the barriers follow.
    let base = shared::dynamic::<u64>().cast::<u8>();
    let base_address = wgmma::shared_address(base) as usize;
    let pad = (ALIGN - base_address % ALIGN) % ALIGN;
    let ring = base.wrapping_add(pad);
    let ring_address = (base_address + pad) as u32;
    let bars = ring.wrapping_add(STAGES * stage_bytes).cast::<u64>();
    let full = |s: usize| bars.wrapping_add(s);
    let empty = |s: usize| bars.wrapping_add(STAGES + s);

    if tid == 0 {
        for s in 0..STAGES {
            // SAFETY: 16 bytes of shared memory past the ring per stage, used by nothing else.
            unsafe {
                mbarrier::init(full(s), 1);
                mbarrier::init(empty(s), (t.consumers * WARPGROUP / 32) as u32);
            }
        }
        mbarrier::fence_init();
    }
    thread::sync_threads();

    if group == 0 {
        wgmma::setmaxnreg_dec::<PRODUCER_REGISTERS>();
        if tid != 0 {
            return;
        }
        let ta = Tensor2d {
            map: maps,
            data: a,
            rows: m,
            cols: k,
            stride: lda,
            box_rows: BM,
            box_cols: bk,
        };
        // `B` itself (`k x n`, N-major boxes), or `B^T` (`n x k`, one K-major box per stage).
        let tb = if I::B_K_MAJOR {
            Tensor2d {
                map: maps.wrapping_add(MAP_WORDS),
                data: b,
                rows: n,
                cols: k,
                stride: ldb,
                box_rows: BN,
                box_cols: bk,
            }
        } else {
            Tensor2d {
                map: maps.wrapping_add(MAP_WORDS),
                data: b,
                rows: k,
                cols: n,
                stride: ldb,
                box_rows: bk,
                box_cols,
            }
        };
        tma::prefetch_map(ta.map);
        tma::prefetch_map(tb.map);
        let mut it = 0usize;
        let mut tile = first;
        while tile < tiles {
            let (tile_m, tile_n) = grouped_tile(tile, tiles_m, tiles_n);
            let (row0, col0) = (tile_m * BM, tile_n * BN);
            for kt in 0..k_tiles {
                let s = it % STAGES;
                let stage = ring.wrapping_add(s * stage_bytes);
                // SAFETY: initialised barriers; stage `s` is 1024-byte aligned inside the ring,
                // and free once its `empty` phase completed (every consumer warp is done with
                // it; a fresh barrier's "previous" phase counts as complete); the maps are the
                // kernel's (its contract).
                unsafe {
                    mbarrier::wait_parity(empty(s), (((it / STAGES) & 1) ^ 1) as u32);
                    mbarrier::arrive_expect_tx(full(s), stage_bytes as u32);
                    tma::load_2d(stage.cast::<I>(), &ta, full(s), row0 as u32, (kt * bk) as u32);
                    let b_stage = stage.wrapping_add(a_bytes).cast::<I>();
                    if I::B_K_MAJOR {
                        tma::load_2d(b_stage, &tb, full(s), col0 as u32, (kt * bk) as u32);
                    } else {
                        for j in 0..BN / box_cols {
                            let dst = b_stage.cast::<u8>().wrapping_add(j * b_box).cast::<I>();
                            let col = (col0 + j * box_cols) as u32;
                            tma::load_2d(dst, &tb, full(s), (kt * bk) as u32, col);
                        }
                    }
                }
                it += 1;
            }
            tile += step;
        }
        return;
    }

    wgmma::setmaxnreg_inc::<CONSUMER_REGISTERS>();
    let consumer = group - 1;
    let lane = tid % 32;
    // Zeroed as one memset (see `super::wgmma`); the first product of every tile overwrites them.
    // SAFETY: all-zero bits are 0.0 for f32.
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
    let mut it = 0usize;
    let mut tile = first;
    while tile < tiles {
        let (tile_m, tile_n) = grouped_tile(tile, tiles_m, tiles_n);
        let (row0, col0) = (tile_m * BM + 64 * consumer, tile_n * BN);
        if k_tiles == 0 {
            // `k = 0`: zeros, from an array of their own (nothing but products may write the
            // accumulators, or ptxas serialises the products: warning C7515).
            // SAFETY: all-zero bits are 0.0 for f32; the contract's shapes and alignment.
            unsafe { store_tile(&core::mem::zeroed(), c, (row0, col0), m, n, tid % WARPGROUP) };
            tile += step;
            continue;
        }
        for kt in 0..k_tiles {
            let s = it % STAGES;
            // SAFETY: an initialised barrier.
            unsafe { mbarrier::wait_parity(full(s), ((it / STAGES) & 1) as u32) };
            let stage = ring_address + (s * stage_bytes) as u32;
            // A: this consumer's 64 rows start 64 rows (8 KiB) into the box; the four quarter
            // steps along k 32 bytes apart, 8-row groups 1024 bytes apart. B N-major: boxes of
            // 64 columns `b_box` apart (LBO), 8-row groups 1024 bytes apart, the quarter steps
            // `BK / 4` rows apart; B K-major: as A, over all `BN` rows.
            let a_desc: [u64; 4] = core::array::from_fn(|j| {
                wgmma::desc_sw128(stage + (consumer * 64 * SWIZZLE_ROW + j * 32) as u32, 16, 1024)
            });
            let b_desc: [u64; 4] = core::array::from_fn(|j| {
                if I::B_K_MAJOR {
                    wgmma::desc_sw128(stage + (a_bytes + j * 32) as u32, 16, 1024)
                } else {
                    let start = a_bytes + j * (bk / 4) * SWIZZLE_ROW;
                    wgmma::desc_sw128(stage + start as u32, b_box as u32, 1024)
                }
            });
            // SAFETY: the whole warpgroup is here; the stage's copies have landed (the wait)
            // and nothing writes it before this warp's arrival for it, after the wait that
            // retires these products. Then the previous step's products are done (at most this
            // step's group in flight): its stage is released while this one's run.
            unsafe {
                acc = I::mma_m64n256_async(acc, a_desc, b_desc, kt > 0);
                acc = wgmma::wait_accumulators::<1>(acc);
            }
            if kt > 0 && lane == 0 {
                // SAFETY: an initialised barrier expecting one arrival per consumer warp.
                unsafe { mbarrier::arrive(empty((it - 1) % STAGES)) };
            }
            it += 1;
        }
        // SAFETY: the whole warpgroup is here, the last step's products in flight.
        acc = unsafe { wgmma::wait_accumulators::<0>(acc) };
        if lane == 0 {
            // SAFETY: as above, for the last step's stage (`k_tiles >= 1`, so `it >= 1`).
            unsafe { mbarrier::arrive(empty((it - 1) % STAGES)) };
        }
        // SAFETY: the contract's shapes and alignment.
        unsafe { store_tile(&acc, c, (row0, col0), m, n, tid % WARPGROUP) };
        tile += step;
    }
}

/// Stores thread `t` (of its warpgroup)'s 128 accumulators of the `64 x 256` tile at `(row0,
/// col0)` into `C` (`m x n`), the elements inside it. Where `n` is a multiple of 8 (every row of
/// `C` starts 16-byte aligned), the four threads of a quad first trade pairs (three shuffles per
/// group of four pairs: a 4 x 4 transpose within the quad), so that each holds 8 consecutive
/// elements of one row and writes them as 16 bytes: a warp then writes whole 32-byte sectors
/// (64 bytes of each of 8 rows) instead of 16 bytes of each. Elsewhere pairs
/// ([`store_tile_pairs`]).
///
/// # Safety
/// `c` holds `m * n` elements, 16-byte aligned; every lane of the warp calls it (the shuffles).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
unsafe fn store_tile<O: GemmOutput>(
    acc: &[f32; 128],
    c: *mut O,
    (row0, col0): (usize, usize),
    m: usize,
    n: usize,
    t: usize,
) {
    if n % 8 != 0 {
        // SAFETY: forwarded contract.
        unsafe { store_tile_pairs(acc, c, (row0, col0), m, n, t) };
        return;
    }
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    // Element `k` of four, picked by selects (a run-time index into a register array would put
    // it in local memory).
    let pick = |[a0, a1, a2, a3]: [[u32; 2]; 4], k: usize| -> [u32; 2] {
        let (odd, upper) = (k & 1 != 0, k & 2 != 0);
        core::array::from_fn(|h| {
            let low = if odd { a1[h] } else { a0[h] };
            let high = if odd { a3[h] } else { a2[h] };
            if upper {
                high
            } else {
                low
            }
        })
    };
    let shuffle = |v: [u32; 2], mask: u32| -> [u32; 2] {
        let lo = warp::shfl_xor_u32(v[0], mask);
        let hi = if O::PAIR_WORDS > 1 {
            warp::shfl_xor_u32(v[1], mask)
        } else {
            0
        };
        [lo, hi]
    };
    unroll_8!(2, |r| {
        let row = row0 + 16 * w + g + 8 * r;
        unroll_8!(8, |group| {
            // This thread's pairs of row `row` at columns `8 j + 2 q` for the four `j` of the
            // group.
            let mine: [[u32; 2]; 4] = core::array::from_fn(|jj| {
                let i = 4 * (4 * group + jj) + 2 * r;
                O::pack([acc[i], acc[i + 1]])
            });
            // `got[i]`: lane `q ^ i`'s pair for `j = 4 group + q` (each lane sends the pair the
            // receiving lane `q ^ i` needs).
            let got = [
                pick(mine, q),
                shuffle(pick(mine, q ^ 1), 1),
                shuffle(pick(mine, q ^ 2), 2),
                shuffle(pick(mine, q ^ 3), 3),
            ];
            // Lane `k`'s pair (columns `2k`, `2k + 1` of the 8) is `got[k ^ q]`.
            let octet: [[u32; 2]; 4] = core::array::from_fn(|k| pick(got, k ^ q));
            let col = col0 + 8 * (4 * group + q);
            if row < m && col < n {
                // SAFETY: `row < m`, `col < n` with `col` and `n` multiples of 8: the 8 elements
                // are inside the row, 16-byte aligned (`c` is).
                unsafe { O::store_octet(c, row * n + col, octet) };
            }
        });
    });
}

/// Stores thread `t` (of its warpgroup)'s 128 accumulators of the `64 x 256` tile at `(row0,
/// col0)` into `C` (`m x n`), the elements inside it: pairs where `n` is even, else one by one.
///
/// # Safety
/// `c` holds `m * n` elements, aligned to a pair when `n` is even.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
unsafe fn store_tile_pairs<O: GemmOutput>(
    acc: &[f32; 128],
    c: *mut O,
    (row0, col0): (usize, usize),
    m: usize,
    n: usize,
    t: usize,
) {
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    let pairs = n % 2 == 0;
    unroll_8!(2, |r| {
        let row = row0 + 16 * w + g + 8 * r;
        if row < m {
            unroll_8!(4, |j0| {
                unroll_8!(8, |j1| {
                    let j = 8 * j0 + j1;
                    let col = col0 + 8 * j + 2 * q;
                    let i = 4 * j + 2 * r;
                    if pairs && col < n {
                        // SAFETY: `row < m`, `col < n`, `n` and `col` even: both elements inside
                        // the row, aligned to a pair.
                        unsafe { O::store_pair(c, row * n + col, [acc[i], acc[i + 1]]) };
                    } else if !pairs {
                        if col < n {
                            // SAFETY: inside `C`.
                            unsafe { O::store(c, row * n + col, acc[i]) };
                        }
                        if col + 1 < n {
                            // SAFETY: inside `C`.
                            unsafe { O::store(c, row * n + col + 1, acc[i + 1]) };
                        }
                    }
                });
            });
        }
    });
}

/// Declares one warp-specialised entry point.
// The launch bounds are the block of `WS_128X256.threads()` (checked below) and one block per
// multiprocessor: ptxas then knows the register budget at entry, which `setmaxnreg` needs.
const _: () = assert!(WS_128X256.threads() == 384);

macro_rules! ws_kernel {
    ($(#[$doc:meta])* $name:ident: $in:ty => $out:ty) => {
        $(#[$doc])*
        #[kernel(launch_bounds(384, 1))]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name(maps: *const u64, a: *const $in, b: *const $in, c: *mut $out, m: usize, n: usize, k: usize, lda: usize, ldb: usize) {
            // SAFETY: forwarded contract.
            unsafe { ws_gemm::<$in, $out, { WS_128X256.stages }>(maps, a, b, c, m, n, k, lda, ldb) }
        }
    };
}

ws_kernel!(
    /// [`ws_gemm`] for bf16 operands and a bf16 result: `C = A * B`, `A` `m x k`, `B` `k x n`.
    /// Per step of 64 along `k` a tile moves 48 KiB by TMA and does 4,194,304 flops. Launch: 384
    /// threads, a persistent grid of at most the tile count, `WS_128X256.shared_bytes()` of
    /// dynamic shared memory, a compute capability 9.0 GPU. Minimum traffic:
    /// `2 (m k + k n + m n)` bytes.
    ///
    /// # Safety
    /// As [`ws_gemm`].
    matmul_ws_bf16_128x256: bf16 => bf16
);

ws_kernel!(
    /// [`matmul_ws_bf16_128x256`](fn@matmul_ws_bf16_128x256) with an f32 result (the accumulators
    /// unrounded). Minimum traffic: `2 (m k + k n) + 4 m n` bytes.
    ///
    /// # Safety
    /// As [`ws_gemm`].
    matmul_ws_bf16_f32out_128x256: bf16 => f32
);

ws_kernel!(
    /// [`ws_gemm`] for f16 operands and an f16 result (f16's range: sums past 65504 become
    /// infinite). Minimum traffic: `2 (m k + k n + m n)` bytes.
    ///
    /// # Safety
    /// As [`ws_gemm`].
    matmul_ws_f16_128x256: f16 => f16
);

ws_kernel!(
    /// [`matmul_ws_f16_128x256`](fn@matmul_ws_f16_128x256) with an f32 result. Minimum traffic:
    /// `2 (m k + k n) + 4 m n` bytes.
    ///
    /// # Safety
    /// As [`ws_gemm`].
    matmul_ws_f16_f32out_128x256: f16 => f32
);

/// f32 operands of the warp-specialised kernels, multiplied as TF32 (`wgmma...tf32.tf32`): 4
/// bytes each, so `BK = 32` (one 128-byte row), and `B` read K-major from `B^T` (TF32 `wgmma`
/// cannot transpose). The tensor core reads each f32 with its low 13 bits ignored (truncation);
/// the host's `TFLOAT32` tensor maps have the copy engine round them to nearest first.
impl WgmmaOperand for f32 {
    const BYTES: usize = 4;
    const B_K_MAJOR: bool = true;
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma_m64n256(acc: [f32; 128], a: [u64; 4], b: [u64; 4], accumulate: bool) -> [f32; 128] {
        // SAFETY: forwarded contract.
        unsafe { wgmma::mma_tf32_m64n256k32(acc, a, b, accumulate) }
    }
}

ws_kernel!(
    /// [`ws_gemm`] for f32 operands multiplied as TF32 and an f32 result: `C = A * B` with `a` =
    /// `A` (`m x k`) and `b` = `B^T` (`n x k`, row-major: TF32 `wgmma` reads both operands
    /// K-major), `k` a multiple of 4 (16-byte rows for the copy engine). Per step of 32 along `k`
    /// a tile moves 48 KiB by TMA (a box of `A`, 128 x 32, and one of `B^T`, 256 x 32) and does
    /// four `wgmma.m64n256k8` per consumer: 2,097,152 flops (43 flops per byte). Launch: 384
    /// threads, a persistent grid of at most the tile count, `WS_128X256.shared_bytes()` of
    /// dynamic shared memory, a compute capability 9.0 GPU. Minimum traffic:
    /// `4 (m k + n k + m n)` bytes.
    ///
    /// # Safety
    /// As [`ws_gemm`] (`b` is `B^T`, its map `n x k` with boxes of 256 x 32).
    matmul_ws_tf32_128x256: f32 => f32
);
