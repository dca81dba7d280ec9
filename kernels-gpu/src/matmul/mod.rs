//! Matrix product `C = A * B` in f32, row-major: `A` is `m x k`, `B` is `k x n`, `C` is `m x n`.
//!
//! The ladder, one file per rung, from the tutorial version up:
//! 1. [`naive`]: [`matmul_naive`](fn@matmul_naive), one thread per element of `C`, operands
//!    straight from global memory.
//! 2. [`tiled`]: [`matmul_tiled`](fn@matmul_tiled), square tiles of `A` and `B` staged in shared
//!    memory, so each element loaded from global memory is used `TILE` times.
//! 3. [`register_tiled`]: [`fast_gemm`](fn@fast_gemm) (`matmul_fast_128x128` and friends). Each
//!    thread computes a register tile of `C` (an outer product per step along `k`, so each
//!    element read from shared memory is used 8 or 4 times), 16-byte loads, two shared-memory
//!    stages so one barrier per tile suffices; one instance per [`FastTiling`] and load width.
//!    [`stream_k`]: [`stream_k_gemm`](fn@stream_k_gemm) (`matmul_stream_k_128x128_vec4`), the
//!    same main loop ([`register_tiled::tile_product`]) on a persistent grid of the resident
//!    blocks that shares the last wave's tiles out evenly along `k` (stream-K), with
//!    [`matmul_stream_k_fixup`](fn@matmul_stream_k_fixup) adding up the tiles it splits.
//! 4. [`wide`]: [`wide_gemm`](fn@wide_gemm) (`matmul_fast_128x256` and its `_vec4` twin), a
//!    128 x 256 block tile fed by a `cp.async` pipeline.
//! 5. [`split_k`]: [`matmul_sum_splits`](fn@matmul_sum_splits) adds the partial products when
//!    rungs 3 and 4 split `k` over blocks.
//! 6. [`tf32`]: the opt-in TF32 tensor-core kernels (`mma.m16n8k8`), which trade precision for
//!    speed; their items stay under `matmul::tf32`.
//! 7. [`half`]: BF16 and FP16 operands on tensor cores (`mma.m16n8k16`, f32 accumulators, the
//!    result in the input type or f32), fragments loaded with `ldmatrix`; their items stay under
//!    `matmul::half`. Rungs 6 and 7 share one tile shape, [`mma_tiling::MmaTiling`] (their
//!    `Tf32Tiling` and `HalfTiling`), generic over the operand element.
//! 8. [`wgmma`]: BF16 on Hopper's warpgroup tensor cores (`wgmma`, TMA copies, `mbarrier`s),
//!    compiled into the `sm_90a` module only; its items stay under `matmul::wgmma`.
//! 9. [`wgmma_ws`]: BF16, FP16 and TF32 on `wgmma` with warp specialisation (a producer warpgroup
//!    issuing TMA, two consumer warpgroups, `setmaxnreg`) and a persistent grid, `sm_90a` only;
//!    items under `matmul::wgmma_ws`.
//! 10. [`decode`]: decode products `Y = X W^T` (`m <= 64` rows of `X` against a large bf16
//!     weight stored `n x k`, as `nn.Linear` stores it), the tutorial rung and a memory-bound
//!     `mma.sync` rung that streams the weight once with 16-byte loads; items under
//!     `matmul::decode`. [`decode_wgmma`]: the same product on Hopper (`sm_90a` only), the
//!     weight streamed through a TMA ring into shared memory and multiplied by `wgmma` with the
//!     box of `X` reused by the whole block, `k` split into slices sized to whole waves; items
//!     under `matmul::decode_wgmma`; [`decode_stream_k`] runs its block on a stream-K grid of one
//!     block per SM, split tiles handed to their last block through fences and counters.
//!     [`decode_rows`]: the same product at `m <= 8` on CUDA
//!     cores, each warp streaming whole rows of the weight, 512 contiguous bytes per load
//!     instruction; items under `matmul::decode_rows`.
//! 11. [`fp8_quant`]: f32 or bf16 matrices quantised to FP8 E4M3 with a per-tensor or per-row
//!     scale computed from the absolute maximum, the operands of an FP8 product; items under
//!     `matmul::fp8_quant`.
//! 12. [`grouped`]: the grouped (mixture-of-experts) product `Y_e = X_e W_e^T` of `E` experts
//!     in one launch, the experts' row offsets on the device (`torch._grouped_mm`'s convention),
//!     on rung 9's warp-specialised schedule, `sm_90a` only; items under `matmul::grouped`.
//! 13. [`fp8`]: the FP8 product on Hopper, E4M3 operands (`B` given transposed, `n x k`) with
//!     per-tensor, per-row or block scales, fast or promoted accumulation: rung 9's schedule on
//!     `wgmma.m64nNk32.e4m3`, `sm_90a` only; items under `matmul::fp8`.
//!
//! Every entry point of rungs 3 to 9 is an instance of its rung's generic `#[kernel]`, the
//! tiling's numbers and the element types its generic arguments. Rung 3's kernels and stream-K
//! share one main loop and one epilogue ([`register_tiled::tile_product`],
//! [`register_tiled::store_c`]). Rung 4 finds its block's tile and slice of `k` and writes its
//! register tiles back with rung 3's lines written out in its body: as shared inlined functions
//! they changed the wide kernels' epilogue in the PTX, and these kernels' PTX is what was measured.

/// Threads of a warp ([`crate::gpu::warp::SIZE`], as a `usize` for index arithmetic).
const WARP: usize = crate::gpu::warp::SIZE as usize;

/// Most steps along `k` per tile (`BK`) that [`unrolled!`] unrolls.
const MAX_UNROLL: usize = 16;

/// `for $i in $lo..$hi $body` with the body written out once per step (steps below
/// [`MAX_UNROLL`]; `$lo` and `$hi` must be constants). Rust has no `#pragma unroll`, and LLVM
/// keeps a loop of `BK` outer products (~600 instructions) rolled; unrolled, `ptxas` can issue
/// the shared loads of step `i + 1` while the FMAs of step `i` run, instead of waiting for them
/// at the top of each step.
///
/// `unrolled!($i in 0..$hi == N, $body)` with a literal `N` of 2, 4 or 8 (checked equal to `$hi`
/// at compile time) writes the body out exactly `N` times instead of [`MAX_UNROLL`] guarded
/// times: for the nested loops of [`wide_gemm`], whose bounds are constants, that is 96 copies
/// of the innermost body instead of 4,352, and the type checker's time on the kernel crate goes
/// with the number of copies. The code generated is the same.
macro_rules! unrolled {
    ($i:ident in 0..$hi:tt == 2, $body:block) => {
        const { assert!($hi == 2, "unrolled!: the literal count must equal the bound") };
        unrolled!(@exact $i, $body, 0 1)
    };
    ($i:ident in 0..$hi:tt == 4, $body:block) => {
        const { assert!($hi == 4, "unrolled!: the literal count must equal the bound") };
        unrolled!(@exact $i, $body, 0 1 2 3)
    };
    ($i:ident in 0..$hi:tt == 8, $body:block) => {
        const { assert!($hi == 8, "unrolled!: the literal count must equal the bound") };
        unrolled!(@exact $i, $body, 0 1 2 3 4 5 6 7)
    };
    (@exact $i:ident, $body:block, $($step:literal)*) => {
        $(
            {
                let $i: usize = $step;
                $body
            }
        )*
    };
    ($i:ident in $lo:tt..$hi:expr, $body:block) => {
        unrolled!(@steps $i, $lo, $hi, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@steps $i:ident, $lo:expr, $hi:expr, $body:block, $($step:literal)*) => {
        $(
            if $lo <= $step && $step < $hi {
                let $i: usize = $step;
                $body
            }
        )*
    };
}

pub mod decode;
pub mod decode_rows;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod decode_stream_k;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod decode_wgmma;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod fp8;
pub mod fp8_quant;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod grouped;
pub mod half;
pub mod mma_tiling;
pub mod naive;
pub mod register_tiled;
pub mod split_k;
pub mod stream_k;
pub mod tf32;
pub mod tiled;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod wgmma;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod wgmma_ws;
pub mod wide;

// The f32 rungs' items (their kernels' launcher modules among them) at the family's level; the
// tensor-core rungs' stay in their modules.
pub use naive::*;
pub use register_tiled::*;
pub use split_k::*;
pub use stream_k::*;
pub use tiled::*;
pub use wide::*;

/// The most rows of `C` one block of any f32 matmul kernel here covers (the grid's `y` extent is
/// the rows divided by this, at most).
pub const MAX_BLOCK_ROWS: usize = FAST_128.block_rows;
