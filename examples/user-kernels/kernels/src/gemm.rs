//! bf16 GEMM with a fused epilogue: `C = gelu(A B + bias)` (GELU's tanh form, `bias` f32 per
//! column, `C` bf16), on Hopper's tensor cores with the public tile vocabulary: a
//! [`Ring`] of copy stages, [`KMajor`] / [`NMajor`] operand tiles and the fragment stored
//! through the epilogue by [`tile::store_rows`]. sm_90a only (and the simulator).
//!
//! The schedule: 384 threads per block; warpgroup 0 is the producer (one thread issues the copies
//! of each stage: a `128 x 64` box of `A` and a `64 x 256` block of `B`), warpgroups 1 and 2 the
//! consumers (64 rows of the `128 x 256` tile each, `wgmma.m64n256k16`, 128 accumulators per
//! thread). Persistent: block `b` of `G` takes tiles `b, b + G, ...` in groups of 8 tile rows
//! (neighbours share `B` in L2); the ring runs on across tiles, so the producer fills the next
//! tile's stages while the consumers run the epilogue. Ragged `m` and `n` need no code: the copy
//! engine fills zeros past the matrices and the epilogue stores inside them.

use gpukern_device::pipeline::Ring;
use gpukern_device::tile::{self, KMajor, NMajor};
use gpukern_device::tma::Tensor2d;
use gpukern_device::vector::{self, LoadHint};
use gpukern_device::wgmma::{self, Accumulators};
use gpukern_device::{bf16, kernel, thread};

use crate::gelu;

/// Rows of `C` per tile: two consumers of 64.
pub const GEMM_BM: usize = 128;
/// Columns of `C` per tile: the `N` of `wgmma.m64n256k16`.
pub const GEMM_BN: usize = 256;
/// Step along `k` per stage: one 128-byte row of bf16.
pub const GEMM_BK: usize = 64;
/// Stages of the ring.
pub const GEMM_STAGES: usize = 4;
/// Threads per block: a producer and two consumer warpgroups.
pub const GEMM_THREADS: u32 = 384;
/// Tile rows per group of the tile order.
const GROUP: usize = 8;

/// A stage's tile of `A` (`128 x 64`, K-major) and of `B` (`64 x 256`, N-major).
type ATile = KMajor<bf16, GEMM_BM>;
type BTile = NMajor<bf16, GEMM_BN>;
/// Bytes of a stage: its tiles of `A` and `B` (48 KiB).
const STAGE: usize = ATile::BYTES + BTile::BYTES;
/// Dynamic shared memory per block: the ring of four stages (197,696 bytes).
pub const GEMM_SHARED_BYTES: u32 = Ring::shared_bytes(GEMM_STAGES, STAGE);
/// Words of one tensor map; the kernel reads two (`A`, then `B`).
pub const GEMM_MAP_WORDS: usize = 16;

/// The `(row, col)` of `C` where tile `id` starts: groups of [`GROUP`] tile rows, walked
/// column by column.
#[inline(always)]
fn tile_origin(id: usize, tiles_m: usize, tiles_n: usize) -> (usize, usize) {
    let first = id / (GROUP * tiles_n) * GROUP;
    let rows = (tiles_m - first).min(GROUP);
    let within = id - first * tiles_n;
    ((first + within % rows) * GEMM_BM, within / rows * GEMM_BN)
}

/// `C = gelu(A B + bias)`: `A` `m x k`, `B` `k x n`, `C` `m x n`, row-major bf16; `bias` `n`
/// f32; f32 accumulation, one rounding to bf16.
///
/// One thread: thread 0 of the producer warpgroup walks the block's tiles and their steps of 64
/// along `k`, acquiring each stage and copying into it (48 KiB per stage, by TMA); a consumer
/// thread waits for each stage, takes part in its warpgroup's four `wgmma.m64n256k16` (4 MFLOP
/// per stage and block), releases the stage it used one step before, and after a tile's last
/// step stores its 128 accumulators as `gelu(acc + bias[col])`, 8 bf16 per 16-byte store
/// inside `C` (the quad's pairs traded by shuffles).
/// Traffic: at least `2 (m k + k n + m n) + 4 n` bytes; `A` read `n / 256` times and `B`
/// `m / 128` times (L2 serves most of them).
///
/// Launch: [`GEMM_THREADS`] threads, a persistent grid of `1..=tiles` blocks (one per SM),
/// [`GEMM_SHARED_BYTES`] of dynamic shared memory; sm_90a.
///
/// # Safety
/// `maps` holds two tensor maps of [`GEMM_MAP_WORDS`] words each (64-byte aligned): `a` (`m x k`,
/// box `128 x 64`) and `b` (`k x n`, box `64 x 64`), bf16, 128-byte swizzle, zero fill;
/// `k >= 1`, `k` and `n` multiples of 8, `m >= 1`; `a`, `b`, `c` hold `m k`, `k n`, `m n`
/// elements (16-byte aligned), `bias` `n`; `c` overlaps none of them.
#[kernel(launch_bounds(384, 1), barriers(1))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bias_gelu(
    maps: *const u64,
    a: *const bf16,
    b: *const bf16,
    bias: *const f32,
    c: *mut bf16,
    m: usize,
    n: usize,
    k: usize,
) {
    // SAFETY: every thread, first; the launch's shared memory; 8 consumer warps release stages.
    let ring = unsafe { Ring::new(GEMM_STAGES, STAGE, 8) };
    let tid = thread::thread_idx_x() as usize;
    let (tiles_m, tiles_n) = (m.div_ceil(GEMM_BM), n.div_ceil(GEMM_BN));
    let (first, step) = (thread::block_idx_x() as usize, thread::grid_dim_x() as usize);
    let k_steps = k.div_ceil(GEMM_BK);

    if tid < 128 {
        // The producer: 40 registers are plenty; one thread issues every copy.
        wgmma::setmaxnreg_dec::<40>();
        if tid != 0 {
            return;
        }
        let ta = Tensor2d {
            map: maps,
            data: a,
            rows: m,
            cols: k,
            stride: k,
            box_rows: GEMM_BM,
            box_cols: GEMM_BK,
        };
        let tb = Tensor2d {
            map: maps.wrapping_add(GEMM_MAP_WORDS),
            data: b,
            rows: k,
            cols: n,
            stride: n,
            box_rows: GEMM_BK,
            box_cols: BTile::K,
        };
        let mut producer = ring.producer();
        let mut id = first;
        while id < tiles_m * tiles_n {
            let (row0, col0) = tile_origin(id, tiles_m, tiles_n);
            for s in 0..k_steps {
                // SAFETY: the producer thread; the maps and boxes of the contract.
                unsafe {
                    let stage = producer.acquire();
                    ATile::load(&stage, 0, &ta, row0, s * GEMM_BK);
                    BTile::load(&stage, ATile::BYTES, &tb, s * GEMM_BK, col0);
                }
            }
            id += step;
        }
        return;
    }

    // A consumer: 232 registers for 128 accumulators (128 x 40 + 256 x 232 <= 65536).
    wgmma::setmaxnreg_inc::<232>();
    let (group, t) = (tid / 128 - 1, tid % 128);
    let mut consumer = ring.consumer();
    let mut acc = <[f32; 128]>::zeroed();
    let mut id = first;
    while id < tiles_m * tiles_n {
        let (row0, col0) = tile_origin(id, tiles_m, tiles_n);
        let mut used = None;
        for s in 0..k_steps {
            // SAFETY: the whole warpgroup; the stage has landed; the previous step's products
            // are retired by the wait for all but this step's group, so its stage is released.
            unsafe {
                let stage = consumer.wait();
                let a_desc = ATile::descriptors(stage.address(0), 64 * group);
                let b_desc = BTile::descriptors(stage.address(ATile::BYTES), 0);
                acc = acc.mma_bf16_async(a_desc, b_desc, s > 0);
                acc = wgmma::wait_accumulators::<1, _>(acc);
                if let Some(done) = used.replace(stage) {
                    consumer.release(&done);
                }
            }
        }
        // SAFETY: the whole warpgroup, the last step's products in flight (k_steps >= 1).
        unsafe {
            acc = wgmma::wait_accumulators::<0, _>(acc);
            if let Some(done) = used {
                consumer.release(&done);
            }
        }
        // The fused epilogue: each pair of accumulators (row, col), (row, col + 1) plus the
        // bias, through GELU; `store_rows` writes 8 consecutive bf16 per 16-byte access.
        // SAFETY: the whole warpgroup; `C` holds `m n` 16-byte aligned bf16; the epilogue reads
        // `bias[col..col + 2]`, inside it (`n` even), 8-byte aligned (`col` even).
        unsafe {
            tile::store_rows(&acc, t, c, (row0 + 64 * group, col0), (m, n), |_, col, v| {
                let bb: [f32; 2] = vector::load_hinted(bias, col, LoadHint::ReadOnly);
                [gelu(v[0] + bb[0]), gelu(v[1] + bb[1])]
            });
        }
        id += step;
    }
}
