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
//! # Tile shapes as parameters
//! [`ws_gemm`](fn@ws_gemm) takes its tile as a type ([`WsShape`]: a [`WsTiling`] and the consumers'
//! accumulator array), so one body serves every shape: [`WS_128X256`] (two consumers of
//! `64 x 256`, `wgmma.m64n256k16`), [`WS_128X128`] (two of `64 x 128`, `m64n128k16`, six stages)
//! and [`WS_64X128`] (two consumers side by side along `n`, each `64 x 64`, `m64n64k16`, eight
//! stages). Consumers sit in a grid of [`WsTiling::row_groups`] along `m` (64 rows each) by the
//! rest along `n` ([`WsTiling::consumer_cols`] each); the instruction width `N` is the consumer's
//! columns, picked by its accumulator array ([`wgmma::Accumulators`]: `[f32; N / 2]`). The
//! smaller tiles are for products with too few 128 x 256 tiles to fill the GPU (1024^3 has 32 for
//! 132 SMs; 64 of 128 x 128, 128 of 64 x 128); all keep one block of 384 threads per SM and the
//! same register split, and spend the shared memory the narrower stages free on more stages.
//!
//! # Design (as [`WS_128X256`]; the other tilings scale the numbers)
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
//!   The ring is `gpukern_device::pipeline::Ring` (its producer's `acquire`, its consumers'
//!   `wait` and `release` keep the barriers and phases), and the descriptors are
//!   `gpukern_device::tile`'s: the vocabulary a user's kernel has (the user-kernels example's
//!   `gemm_bias_gelu` is this kernel's schedule with a fused epilogue).
//! * **Persistent grid**: block `b` of `G` takes the tiles `b, b + G, b + 2G, ...` in the grouped
//!   order of the TF32 kernels' `grouped_tile` (neighbouring blocks share rows of `A` and columns of
//!   `B` in L2); the producer fills the next tile's stages while the consumers store the last.
//! * **Split tail** ([`tail_halves`]): where the last, partial round's `r` tiles fit one round as
//!   column halves (`2 r <= G`), they run as `2 r` half tiles (`BM x BN / 2`, half-width
//!   accumulators, each stage announcing its bytes: `Producer::acquire_bytes`), so that round
//!   takes half a tile's time; 16-bit operands (`B` N-major) on the 128-row tiles only (the
//!   64 x 128 tile's consumers sit side by side, and TF32's `B^T` box is a whole tile's).
//! * **Epilogue**: each consumer thread stores its 128 accumulators straight to `C`, as pairs
//!   where `n` is even, inside `m` and `n`.
//! * **Shared memory**: 1 KiB of alignment slack, `STAGES x 48 KiB` of stages, two barriers per
//!   stage: 197,696 bytes (one block per SM).
//!
//! Tensor maps: two in global memory, as [`super::wgmma`]: `A` (`m x k`, box `BM x BK`), then
//! `B` (`k x n`, box `BK x 64`) or, for an operand type that reads `B` K-major
//! ([`WgmmaOperand::B_K_MAJOR`]), `B^T` (`n x k`, box `BN x BK`); 128-byte swizzle, zero fill.

use core::marker::PhantomData;

use super::tf32::grouped_tile;
use super::wgmma::MAP_WORDS;
use crate::gpu::pipeline::Ring;
use crate::gpu::tile::{self, Output};
use crate::gpu::tma::{self, Tensor2d};
use crate::gpu::{bf16, f16, thread, wgmma};
use crate::kernel;

/// Tile shape of the warp-specialised kernels; the host reads it to launch them and to encode
/// the tensor maps' boxes. The step along `k` is one 128-byte swizzle row of the element type
/// (64 for 16-bit elements, 32 for 32-bit ones): [`WsTiling::block_k`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WsTiling {
    /// Rows of `C` per tile (`BM`): 64 per consumer warpgroup.
    pub block_rows: usize,
    /// Columns of `C` per tile (`BN`): the `N` of `wgmma.m64nNk*` per consumer column group
    /// ([`WsTiling::consumer_cols`]).
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

    /// Consumers along the tile's rows, 64 rows each (the `M` of `wgmma.m64nNk*`).
    pub const fn row_groups(&self) -> usize {
        self.block_rows / CONSUMER_ROWS
    }

    /// Columns of `C` per consumer: the `N` of its `wgmma.m64nNk*` (the consumers not along the
    /// rows sit side by side along the columns).
    pub const fn consumer_cols(&self) -> usize {
        self.block_cols * self.row_groups() / self.consumers
    }

    /// Whether the consumers tile the block exactly, each `64 x N` with `N` a width `wgmma` has
    /// here (64, 128 or 256) and a whole number of 64-column boxes of `B` (read N-major), and the
    /// block within one SM's shared memory (227 KiB).
    pub const fn is_valid(&self) -> bool {
        let n = self.consumer_cols();
        self.fits() && (n == 64 || n == 128 || n == 256)
    }

    /// As [`WsTiling::is_valid`] for `B` read K-major (boxes of whole rows of `B^T`, no 64-column
    /// boxes): `N` of 112 and 192 too, the decode rung's 224-row tile and the FP8 promoted
    /// product's 128 x 192 one.
    pub const fn is_valid_k_major(&self) -> bool {
        let n = self.consumer_cols();
        self.fits() && (n == 64 || n == 112 || n == 128 || n == 192 || n == 256)
    }

    /// The consumers tile the block (`64 x N` each), at least two stages, the block within one
    /// SM's shared memory.
    #[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
    const fn fits(&self) -> bool {
        let rows = self.row_groups();
        self.block_rows % CONSUMER_ROWS == 0
            && rows >= 1
            && self.consumers % rows == 0
            && self.consumer_cols() * (self.consumers / rows) == self.block_cols
            && self.stages >= 2
            && self.shared_bytes() <= MAX_SHARED
    }
}

/// 128 x 256 per tile, four stages of 48 KiB, two consumers (197,696 bytes of shared memory).
pub const WS_128X256: WsTiling = WsTiling {
    block_rows: 128,
    block_cols: 256,
    stages: 4,
    consumers: 2,
};

/// 128 x 128 per tile, six stages of 32 KiB, two consumers of 64 x 128 (197,728 bytes).
pub const WS_128X128: WsTiling = WsTiling {
    block_rows: 128,
    block_cols: 128,
    stages: 6,
    consumers: 2,
};

/// 128 x 192 per tile, five stages of 40 KiB, two consumers of 64 x 192 (205,904 bytes): the
/// FP8 promoted product's wider tile (`B` K-major only).
pub const WS_128X192: WsTiling = WsTiling {
    block_rows: 128,
    block_cols: 192,
    stages: 5,
    consumers: 2,
};

/// 64 x 128 per tile, eight stages of 24 KiB, two consumers side by side of 64 x 64 each
/// (197,760 bytes).
pub const WS_64X128: WsTiling = WsTiling {
    block_rows: 64,
    block_cols: 128,
    stages: 8,
    consumers: 2,
};

const _: () = assert!(
    WS_128X256.is_valid() && WS_128X128.is_valid() && WS_64X128.is_valid(),
    "every warp-specialised tiling tiles its block with 64 x N consumers and fits shared memory"
);

// The shared memory the tilings' documentation states.
const _: () = assert!(
    WS_128X256.shared_bytes() == 197_696
        && WS_128X128.shared_bytes() == 197_728
        && WS_64X128.shared_bytes() == 197_760
);

/// A tile shape of [`ws_gemm`](fn@ws_gemm): the tiling, and the accumulator array of one consumer (its
/// `wgmma` width).
pub trait WsShape {
    /// The tiling.
    const TILING: WsTiling;
    /// One consumer thread's accumulators: `[f32; N / 2]` for `N` = [`WsTiling::consumer_cols`].
    type Acc: wgmma::Accumulators;
    /// One consumer thread's accumulators of a half tile (`BM x BN / 2`, the split tail's:
    /// [`tail_halves`]), half of [`WsShape::Acc`]'s; a shape whose tail is never split names
    /// [`WsShape::Acc`] again.
    type HalfAcc: wgmma::Accumulators;
}

/// Tiles of a persistent kernel's list that it splits into column halves on a grid of `blocks`
/// blocks: the `r = tiles % blocks` tiles of the last, partial round when their `2 r` halves
/// fit one round (`2 r <= blocks`), else none (0). With the split, the last round takes half a
/// tile's time where it took a whole one (3,072 wide tiles on 132 blocks: 23 whole rounds and
/// 36 tiles, as 72 halves); without it (`2 r > blocks`), halves would take two half rounds, no
/// shorter. A pure function: the kernels compute it on the device (the grouped product from the
/// list it builds there), the host's tests from shapes.
pub const fn tail_halves(tiles: usize, blocks: usize) -> usize {
    if blocks == 0 {
        return 0;
    }
    let r = tiles % blocks;
    if 2 * r <= blocks {
        r
    } else {
        0
    }
}

/// Item `item` of a block's walk over a list whose tail is split ([`tail_halves`]), the items
/// `0 .. whole` whole tiles: `(tile, None)` for a whole tile (`item < whole`), else `(tile,
/// Some(half))`, half `0` or `1` of tile `whole + (item - whole) / 2`.
#[inline(always)]
pub fn tail_item(item: usize, whole: usize) -> (usize, Option<usize>) {
    if item < whole {
        (item, None)
    } else {
        let h = item - whole;
        (whole + h / 2, Some(h % 2))
    }
}

/// Declares a [`WsShape`].
macro_rules! ws_shape {
    ($(#[$doc:meta])* $name:ident: $tiling:ident, $acc:ty, $half:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;
        impl WsShape for $name {
            const TILING: WsTiling = $tiling;
            type Acc = $acc;
            type HalfAcc = $half;
        }
    };
}

ws_shape!(
    /// [`WS_128X256`]: `wgmma.m64n256k16`, 128 accumulators per consumer thread.
    Ws128x256: WS_128X256, [f32; 128], [f32; 64]
);
ws_shape!(
    /// [`WS_128X128`]: `wgmma.m64n128k16`, 64 accumulators per consumer thread.
    Ws128x128: WS_128X128, [f32; 64], [f32; 32]
);
ws_shape!(
    /// [`WS_128X192`]: `wgmma.m64n192k32` (FP8, `B` K-major), 96 accumulators per consumer thread.
    Ws128x192: WS_128X192, [f32; 96], [f32; 96]
);
ws_shape!(
    /// [`WS_64X128`]: `wgmma.m64n64k16`, 32 accumulators per consumer thread.
    Ws64x128: WS_64X128, [f32; 32], [f32; 32]
);

/// Rows of `C` per consumer warpgroup (the `M` of `wgmma.m64nNk*`).
const CONSUMER_ROWS: usize = 64;
/// Most dynamic shared memory one block may opt in to on compute capability 9.0 (227 KiB).
pub(super) const MAX_SHARED: u32 = 232_448;
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
/// its `m64nN` product over one 128-byte step of `k` (`N` by the accumulator array).
pub trait WgmmaOperand: Copy {
    /// Bytes per element.
    const BYTES: usize;
    /// Whether the kernel reads `B` K-major: from a `B^T` (`n x k`, row-major) matrix, boxes of
    /// `BN x BK` (TF32, which `wgmma` reads K-major only). Otherwise N-major from `B` itself
    /// (`k x n`), boxes of `BK x 64` side by side, read through the descriptor's transpose bit.
    const B_K_MAJOR: bool;

    /// `C(64 x N) (+)= A(64 x BK) * B(BK x N)` on the calling warpgroup, four products of one
    /// quarter of `BK` each ([`wgmma::mma_bf16_m64n256k64`] and its kin of other widths).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n256k64`].
    unsafe fn mma<A: wgmma::Accumulators>(acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A;

    /// [`WgmmaOperand::mma`] issued and committed as one group but not waited for
    /// ([`wgmma::mma_bf16_m64n256k64_async`]); [`wgmma::wait_accumulators`] retires it. By
    /// default the product waited for (a type without an asynchronous twin).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n256k64_async`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma_async<A: wgmma::Accumulators>(acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A {
        // SAFETY: forwarded contract.
        unsafe { Self::mma(acc, a, b, accumulate) }
    }
}

/// [`WgmmaOperand`] for a 16-bit type, its products `$sync` and `$async` of
/// [`wgmma::Accumulators`].
macro_rules! half_operand {
    ($t:ty: $sync:ident, $async:ident) => {
        impl WgmmaOperand for $t {
            const BYTES: usize = 2;
            const B_K_MAJOR: bool = false;
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma<A: wgmma::Accumulators>(acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A {
                // SAFETY: forwarded contract.
                unsafe { acc.$sync(a, b, accumulate) }
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn mma_async<A: wgmma::Accumulators>(
                acc: A,
                a: [u64; 4],
                b: [u64; 4],
                accumulate: bool,
            ) -> A {
                // SAFETY: forwarded contract.
                unsafe { acc.$async(a, b, accumulate) }
            }
        }
    };
}

half_operand!(bf16: mma_bf16, mma_bf16_async);
half_operand!(f16: mma_f16, mma_f16_async);

/// The body of the warp-specialised kernels (see the module documentation). What one thread
/// does: thread 0 initialises the barriers; after a block barrier, the producer warpgroup lowers
/// its registers and its thread 0 walks the block's tiles and their steps along `k`, waiting for
/// each stage to be empty and refilling it by TMA; each consumer thread raises its registers and
/// walks the same steps, waiting for each stage to be full, taking part in its warpgroup's four
/// products, lane 0 of each warp then marking the stage empty; after a tile's last step it
/// stores its `N / 2` accumulators (`N` = [`WsTiling::consumer_cols`] of `S`'s tiling) inside
/// `C` as `O`. Per stage a block moves `(BM + BN) 128` bytes ([`WsTiling::stage_bytes`]) and
/// does `2 BM BN BK` flops.
///
/// # Safety
/// * `maps` holds two tensor maps of [`MAP_WORDS`] words each, 64-byte aligned, encoded for `a`
///   (`m x k`, box `BM x BK`) and `b` (`k x n`, box `BK x 64`; or, where `I::B_K_MAJOR`, `b` is
///   `B^T`, `n x k`, box `BN x BK`), element type `I`, 128-byte swizzle, zero fill; `a`, `b`, `c`
///   hold `m x k`, `k x n` (or `n x k`) and `m x n` elements, the rows of `a` `lda` and those of `b`
///   `ldb` elements apart (as the maps say), `c` dense and overlapping neither; `a` and `b` 16-byte aligned, `c`
///   aligned to a pair of `O` when `n` is even; `m, n >= 1`.
/// * The launch: [`WsTiling::threads`] threads of `S::TILING`, a grid of `(G, 1)` blocks with
///   `1 <= G <= tiles`, [`WsTiling::shared_bytes`] of dynamic shared memory; a compute
///   capability 9.0 GPU.
///
/// Instances (`I`, `O`, `S`), one PTX entry each (in the sm_90a module), launch bounds `(384, 1)`:
/// * on [`WS_128X256`] ([`Ws128x256`]): `matmul_ws_bf16_128x256` (bf16 operands and result: per
///   step of 64 along `k` a tile moves 48 KiB by TMA and does 4,194,304 flops; launch: 384
///   threads, a persistent grid of at most the tile count, `WS_128X256.shared_bytes()` of
///   dynamic shared memory; minimum traffic `2 (m k + k n + m n)` bytes),
///   `matmul_ws_bf16_f32out_128x256` (an f32 result, the accumulators unrounded: minimum traffic
///   `2 (m k + k n) + 4 m n` bytes), `matmul_ws_f16_128x256` (f16's range: sums past 65504 become
///   infinite), `matmul_ws_f16_f32out_128x256`;
/// * `matmul_ws_tf32_128x256` (f32 operands multiplied as TF32 and an f32 result, `b` = `B^T`,
///   `n x k` row-major: TF32 `wgmma` reads both operands K-major; `k` a multiple of 4, 16-byte
///   rows for the copy engine): per step of 32 along `k` a tile moves 48 KiB by TMA (a box of
///   `A`, 128 x 32, and one of `B^T`, 256 x 32) and does four `wgmma.m64n256k8` per consumer:
///   2,097,152 flops (43 flops per byte); minimum traffic `4 (m k + n k + m n)` bytes;
/// * on [`WS_128X128`] ([`Ws128x128`]): `matmul_ws_bf16_128x128`, `matmul_ws_bf16_f32out_128x128`,
///   `matmul_ws_f16_128x128`, `matmul_ws_f16_f32out_128x128` (per step of 64 along `k` a tile
///   moves `WS_128X128.stage_bytes()` by TMA and does 2,097,152 flops), and
///   `matmul_ws_tf32_128x128` (boxes of `A`, 128 x 32, and of `B^T`, 128 x 32: 32 KiB per step
///   of 32, four `wgmma.m64n128k8` per consumer, 1,048,576 flops);
/// * on [`WS_64X128`] ([`Ws64x128`], two consumers of 64 x 64 side by side):
///   `matmul_ws_bf16_64x128`, `matmul_ws_bf16_f32out_64x128`, `matmul_ws_f16_64x128`,
///   `matmul_ws_f16_f32out_64x128` (1,048,576 flops per step of 64), and `matmul_ws_tf32_64x128`
///   (boxes of 64 x 32 and 128 x 32: 24 KiB per step of 32, four `wgmma.m64n64k8` per consumer,
///   524,288 flops).
// Launch bounds: the block of every tiling's `threads()` (checked below and in the body) and one
// block per multiprocessor: ptxas then knows the register budget at entry, which `setmaxnreg`
// needs. Barriers: one, after the barriers' initialisation; the ring runs on mbarriers only.
#[kernel(
    launch_bounds(384, 1),
    instances(
        matmul_ws_bf16_128x256 = (bf16, bf16, Ws128x256),
        matmul_ws_bf16_f32out_128x256 = (bf16, f32, Ws128x256),
        matmul_ws_f16_128x256 = (f16, f16, Ws128x256),
        matmul_ws_f16_f32out_128x256 = (f16, f32, Ws128x256),
        matmul_ws_tf32_128x256 = (f32, f32, Ws128x256),
        matmul_ws_bf16_128x128 = (bf16, bf16, Ws128x128),
        matmul_ws_bf16_f32out_128x128 = (bf16, f32, Ws128x128),
        matmul_ws_f16_128x128 = (f16, f16, Ws128x128),
        matmul_ws_f16_f32out_128x128 = (f16, f32, Ws128x128),
        matmul_ws_tf32_128x128 = (f32, f32, Ws128x128),
        matmul_ws_bf16_64x128 = (bf16, bf16, Ws64x128),
        matmul_ws_bf16_f32out_64x128 = (bf16, f32, Ws64x128),
        matmul_ws_f16_64x128 = (f16, f16, Ws64x128),
        matmul_ws_f16_f32out_64x128 = (f16, f32, Ws64x128),
        matmul_ws_tf32_64x128 = (f32, f32, Ws64x128),
    ),
    barriers(1)
)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn ws_gemm<I: WgmmaOperand, O: Output, S: WsShape>(
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
    let t = S::TILING;
    const {
        assert!(
            S::TILING.is_valid(),
            "a tiling of 64 x N consumers that fits shared memory"
        );
        assert!(
            <S::Acc as wgmma::Accumulators>::N == S::TILING.consumer_cols(),
            "the accumulators' wgmma width is the consumer's columns"
        );
        assert!(
            S::TILING.threads() == 384,
            "the entries' launch bounds are 384 threads"
        );
    };
    let (bm, bn, stages) = (t.block_rows, t.block_cols, t.stages);
    let bk = WsTiling::block_k(I::BYTES);
    // Columns of one N-major box of `B`: one 128-byte row.
    let box_cols = SWIZZLE_ROW / I::BYTES;
    let (a_bytes, stage_bytes) = (t.a_bytes(), t.stage_bytes());
    // Bytes of one N-major box of `B` (`BK` rows of 128 bytes).
    let b_box = bk * SWIZZLE_ROW;
    let tid = thread::thread_idx_x() as usize;
    let group = tid / WARPGROUP;
    const {
        assert!(
            S::TILING.shared_bytes() == Ring::shared_bytes(S::TILING.stages, S::TILING.stage_bytes()),
            "the tiling's shared memory is its ring's"
        )
    };

    let (tiles_m, tiles_n) = (m.div_ceil(bm), n.div_ceil(bn));
    let tiles = tiles_m * tiles_n;
    let (first, step) = (thread::block_idx_x() as usize, thread::grid_dim_x() as usize);
    let k_tiles = k.div_ceil(bk);
    // The split tail ([`tail_halves`]): items `0 .. whole` are whole tiles, `whole + h` (`h < 2
    // halves`) is half `h % 2` (`BN / 2` columns) of tile `whole + h / 2`; `whole` is a
    // multiple of the grid, so every block reaches its half item (at most one) last. Only where
    // `B` is N-major (a half is whole boxes of 64 columns), every consumer is along the rows,
    // and the shape has half-width accumulators; a constant per instance.
    let splits = !I::B_K_MAJOR
        && t.row_groups() == t.consumers
        && 2 * <S::HalfAcc as wgmma::Accumulators>::N == <S::Acc as wgmma::Accumulators>::N
        && (bn / 2) % box_cols == 0;
    let halves = if splits && k_tiles > 0 {
        tail_halves(tiles, step)
    } else {
        0
    };
    let (whole, items) = (tiles - halves, tiles + halves);
    let half_cols = bn / 2;
    // Where item `item` lies: its tile's first row and first column, and whether it is a half.
    let place = |item: usize| -> (usize, usize, bool) {
        let (tile, half) = tail_item(item, whole);
        let (tile_m, tile_n) = grouped_tile(tile, tiles_m, tiles_n);
        (
            tile_m * bm,
            tile_n * bn + half.unwrap_or(0) * half_cols,
            half.is_some(),
        )
    };

    // The ring (`pipeline::Ring`): `stages` stages from the first 1024-byte boundary of the
    // shared window, a `full` barrier per stage (the producer's arrival, the copies' bytes) and an
    // `empty` one (an arrival per consumer warp); the producer and consumers keep the phases.
    // SAFETY: every thread, first; the launch's `shared_bytes()` is the ring's (checked above);
    // stages of whole 1024-byte atoms (`stage_bytes` is `(BM + BN) 128`, both multiples of 64).
    let ring = unsafe { Ring::new(stages, stage_bytes, (t.consumers * WARPGROUP / 32) as u32) };

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
            box_rows: bm,
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
                box_rows: bn,
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
        let mut producer = ring.producer();
        let mut item = first;
        while item < items {
            let (row0, col0, half) = place(item);
            // A half past `n` (the last column tile's second half) has nothing to compute.
            if col0 < n {
                // N-major boxes of `B` this item's stages take: a whole tile's or a half's.
                let boxes = if half { half_cols / box_cols } else { bn / box_cols };
                for kt in 0..k_tiles {
                    // SAFETY: the one producer thread; the stage is free (`acquire` waited for
                    // its consumers) and expects exactly the bytes copied into it: `A` at 0, `B`
                    // at `a_bytes` (one K-major box, or `boxes` N-major ones; a half tile's stage
                    // announces its own bytes), every box 1024-byte aligned; the maps are the
                    // kernel's (its contract).
                    unsafe {
                        let stage = if half {
                            producer.acquire_bytes(a_bytes + boxes * b_box)
                        } else {
                            producer.acquire()
                        };
                        stage.load(0, &ta, row0, kt * bk);
                        if I::B_K_MAJOR {
                            stage.load(a_bytes, &tb, col0, kt * bk);
                        } else {
                            for j in 0..boxes {
                                stage.load(a_bytes + j * b_box, &tb, kt * bk, col0 + j * box_cols);
                            }
                        }
                    }
                }
            }
            item += step;
        }
        return;
    }

    wgmma::setmaxnreg_inc::<CONSUMER_REGISTERS>();
    // This consumer's place in the tile: row group `cr` (64 rows), column group `cc` (`cn`
    // columns, its `wgmma` width).
    let consumer = group - 1;
    let rows = t.row_groups();
    // (A constant branch: with every consumer along the rows, `cc` is 0 without arithmetic.)
    let (cr, cc) = if rows == t.consumers {
        (consumer, 0)
    } else {
        (consumer % rows, consumer / rows)
    };
    let cn = t.consumer_cols();
    // Zeroed as one memset (see `super::wgmma`); the first product of every tile overwrites them.
    let mut acc = <S::Acc as wgmma::Accumulators>::zeroed();
    let mut consumer = ring.consumer();
    let mut item = first;
    while item < whole {
        let (tile_row, tile_col, _) = place(item);
        let (row0, col0) = (tile_row + CONSUMER_ROWS * cr, tile_col + cn * cc);
        if k_tiles == 0 {
            // `k = 0`: zeros, from an array of their own (nothing but products may write the
            // accumulators, or ptxas serialises the products: warning C7515).
            let zeros = <S::Acc as wgmma::Accumulators>::zeroed();
            // SAFETY: the contract's shapes and alignment.
            unsafe { tile::store_rows(&zeros, tid % WARPGROUP, c, (row0, col0), (m, n), |_, _, v| v) };
            item += step;
            continue;
        }
        // SAFETY: every thread of the consumer warpgroup; the producer fills the next `k_tiles`
        // stages with this tile's boxes.
        let product = OperandStep::<I>::at(cn * cc);
        acc = unsafe { tile_product(acc, &mut consumer, (cr, product), a_bytes, k_tiles) };
        // SAFETY: the contract's shapes and alignment; every lane of the warpgroup.
        unsafe { tile::store_rows(&acc, tid % WARPGROUP, c, (row0, col0), (m, n), |_, _, v| v) };
        item += step;
    }
    // The split tail: at most one half tile per block (only where `splits`: every consumer along
    // the rows, so `cc` is 0), with accumulators of half the width, live only here.
    // (`splits` is a constant: instances that never split have no such loop.)
    if splits {
        while item < items {
            let (tile_row, col0, _) = place(item);
            if col0 < n {
                let row0 = tile_row + CONSUMER_ROWS * cr;
                let half_acc = <S::HalfAcc as wgmma::Accumulators>::zeroed();
                // SAFETY: as above; the producer fills these stages with the half's boxes.
                let product = OperandStep::<I>::at(0);
                let half_acc =
                    unsafe { tile_product(half_acc, &mut consumer, (cr, product), a_bytes, k_tiles) };
                // SAFETY: as the whole tiles' store.
                unsafe { tile::store_rows(&half_acc, tid % WARPGROUP, c, (row0, col0), (m, n), |_, _, v| v) };
            }
            item += step;
        }
    }
}

/// What differs between the steps of the persistent kernels' tiles ([`tile_product`]): where
/// `B`'s four descriptors point in a stage and which asynchronous `wgmma` multiplies on them.
pub(super) trait StepProduct<A: wgmma::Accumulators>: Copy {
    /// `B`'s four descriptors (one per quarter step along `k`), its boxes at shared address `b`.
    fn b_descriptors(self, b: u32) -> [u64; 4];

    /// `C (+)= A B` on the calling warpgroup: four products issued and committed as one group,
    /// not waited for ([`wgmma::wait_accumulators`] retires them).
    ///
    /// # Safety
    /// As [`wgmma::mma_bf16_m64n256k64_async`].
    unsafe fn mma_async(self, acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A;
}

/// [`StepProduct`] of [`ws_gemm`](fn@ws_gemm): operands of type `I`, `B` from column (or, where
/// `I::B_K_MAJOR`, `B^T` row) `b_col`.
#[derive(Clone, Copy)]
struct OperandStep<I> {
    b_col: usize,
    operand: PhantomData<I>,
}

impl<I> OperandStep<I> {
    /// `B` from column (or `B^T` row) `b_col`.
    #[inline(always)]
    fn at(b_col: usize) -> Self {
        Self {
            b_col,
            operand: PhantomData,
        }
    }
}

impl<I: WgmmaOperand, A: wgmma::Accumulators> StepProduct<A> for OperandStep<I> {
    #[inline(always)]
    fn b_descriptors(self, b: u32) -> [u64; 4] {
        // N-major: the columns start at box `b_col / 64`, boxes of 64 columns `b_box` apart
        // (LBO), 8-row groups 1024 bytes apart, the quarter steps `BK / 4` rows apart. K-major:
        // as `A`, over the rows of `B^T` from row `b_col`.
        if I::B_K_MAJOR {
            tile::k_major_descriptors(b, self.b_col)
        } else {
            tile::n_major_descriptors::<I>(b, self.b_col)
        }
    }

    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma_async(self, acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A {
        // SAFETY: forwarded contract.
        unsafe { I::mma_async(acc, a, b, accumulate) }
    }
}

/// One tile's product along `k` into `acc` (its first step overwrites it): `k_tiles` stages of
/// the ring in turn, this consumer's 64 rows (row group `cr`) of the box of `A` at 0 against
/// `B`'s boxes at `a_bytes` as `step` reads them, as wide as `A`'s products; each step's four
/// products left in flight and the previous step's retired and its stage released; the last
/// step's retired and released before it returns. What one thread does: its part of its
/// warpgroup's products. The loop of [`ws_gemm`](fn@ws_gemm) and of the grouped product.
///
/// # Safety
/// Every thread of one consumer warpgroup calls it; the ring's next `k_tiles` stages hold the
/// tile's boxes (at least `A::N` columns of `B` where `step` reads them); `k_tiles >= 1`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(super) unsafe fn tile_product<A: wgmma::Accumulators, P: StepProduct<A>>(
    mut acc: A,
    consumer: &mut crate::gpu::pipeline::Consumer,
    (cr, step): (usize, P),
    a_bytes: usize,
    k_tiles: usize,
) -> A {
    // The stage of the previous step, released once its products have retired.
    let mut used = None;
    for kt in 0..k_tiles {
        // SAFETY: every thread of the consumer warps, each stage released once below.
        let stage = unsafe { consumer.wait() };
        // A: this consumer's 64 rows start `64 cr` rows (8 KiB each 64) into the box; the
        // four quarter steps along k 32 bytes apart, 8-row groups 1024 bytes apart.
        let a_desc = tile::k_major_descriptors(stage.address(0), cr * CONSUMER_ROWS);
        let b_desc = step.b_descriptors(stage.address(a_bytes));
        // SAFETY: the whole warpgroup is here; the stage's copies have landed (the wait)
        // and nothing writes it before this warp's arrival for it, after the wait that
        // retires these products. Then the previous step's products are done (at most this
        // step's group in flight): its stage is released while this one's run.
        unsafe {
            acc = step.mma_async(acc, a_desc, b_desc, kt > 0);
            acc = wgmma::wait_accumulators::<1, _>(acc);
        }
        if let Some(done) = used.replace(stage) {
            // SAFETY: the whole warp, once for the stage it waited for one step ago.
            unsafe { consumer.release(&done) };
        }
    }
    // SAFETY: the whole warpgroup is here, the last step's products in flight.
    acc = unsafe { wgmma::wait_accumulators::<0, _>(acc) };
    if let Some(done) = used {
        // SAFETY: as above, for the last step's stage.
        unsafe { consumer.release(&done) };
    }
    acc
}

// The launch bounds of `ws_gemm` are the block of every tiling's `threads()`.
const _: () =
    assert!(WS_128X256.threads() == 384 && WS_128X128.threads() == 384 && WS_64X128.threads() == 384);

/// f32 operands of the warp-specialised kernels, multiplied as TF32 (`wgmma...tf32.tf32`): 4
/// bytes each, so `BK = 32` (one 128-byte row), and `B` read K-major from `B^T` (TF32 `wgmma`
/// cannot transpose). The tensor core reads each f32 with its low 13 bits ignored (truncation);
/// the host's `TFLOAT32` tensor maps have the copy engine round them to nearest first.
impl WgmmaOperand for f32 {
    const BYTES: usize = 4;
    const B_K_MAJOR: bool = true;
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn mma<A: wgmma::Accumulators>(acc: A, a: [u64; 4], b: [u64; 4], accumulate: bool) -> A {
        // SAFETY: forwarded contract.
        unsafe { acc.mma_tf32(a, b, accumulate) }
    }
}
