//! The stream-K form of the Hopper decode rung (`kernels_gpu::matmul::decode_stream_k`,
//! sm_90a): [`DecodePlan::StreamK`]'s checks, its workspace (the split tiles' partial sums and
//! the hand-off counters, kept per stream handle) and its launch.

use std::sync::PoisonError;

use half::bf16;
use kernels_gpu::matmul::decode_stream_k::{DecodeStreamK, STREAM_K_CONSUMER_THREADS};
use kernels_gpu::matmul::decode_wgmma::{DECODE_WGMMA_BK, DECODE_WGMMA_ROWS};

use super::decode::{DecodeOutput, DecodePlan, DecodeTile, stream_k_launcher};
use super::wgmma::check_copy_engine_dims;
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};

/// The operation's name in errors.
const OP: &str = "matmul_decode";

/// The stream-K launches' scratch on one stream handle: the partial sums of split tiles and the
/// counters of their hand-offs. Made on the first stream-K call for the largest slots of its grid
/// (64 rows of the widest tile: 17.3 MB for 132 blocks), grown (never shrunk, never freed while
/// the handle lives: a captured graph keeps its addresses) only for a larger grid.
///
/// Why sharing is safe: the launches that use it are queued on the handle's one stream, so they
/// run one after another; every launch leaves the counters zero, as the next one needs them.
#[derive(Default)]
struct StreamKWorkspace {
    /// The partial sums: [`DecodeStreamK::slot_floats`] floats at least.
    slots: Option<DeviceVec<f32>>,
    /// The counters, zeroed when made: [`DecodeStreamK::counter_words`] words at least.
    counters: Option<DeviceVec<u32>>,
    /// Buffers outgrown, kept for the graphs that captured them.
    retired: Vec<(DeviceVec<f32>, DeviceVec<u32>)>,
}

impl StreamKWorkspace {
    /// The buffers, grown to `floats` and `words` first if smaller (an allocation, refused
    /// inside a capture).
    fn reserve(
        &mut self,
        gpu: &Gpu,
        floats: usize,
        words: usize,
    ) -> Result<(&mut DeviceVec<f32>, &mut DeviceVec<u32>)> {
        let fits = matches!((&self.slots, &self.counters), (Some(s), Some(c)) if s.len() >= floats && c.len() >= words);
        if !fits {
            crate::capture::refuse(
                gpu,
                OP,
                "the first stream-K decode product of a shape on a stream handle allocates its \
                 workspace (partial sums and counters): run it once before capturing; that is an \
                 allocation",
            )?;
            let slots = gpu.alloc(floats.max(1))?;
            let counters = gpu.zeros_of::<u32>(words.max(1))?;
            if let (Some(s), Some(c)) = (self.slots.take(), self.counters.take()) {
                self.retired.push((s, c));
            }
            self.slots = Some(slots);
            self.counters = Some(counters);
        }
        match (&mut self.slots, &mut self.counters) {
            (Some(s), Some(c)) => Ok((s, c)),
            _ => Err(Error::InvalidArgument {
                op: OP,
                detail: "the stream-K workspace was not made".to_string(),
            }),
        }
    }
}

/// Runs `f` with the stream-K workspace of `gpu`'s stream handle, the handle's other stream-K
/// callers waiting meanwhile.
fn with_workspace<R>(gpu: &Gpu, f: impl FnOnce(&mut StreamKWorkspace) -> Result<R>) -> Result<R> {
    let slot = gpu.handle_cache::<StreamKWorkspace>();
    // A panic while the lock was held left nothing half-made: buffers are stored whole.
    let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
    f(&mut guard)
}

impl DecodePlan {
    /// The stream-K plan of `tile` on one block per SM of a GPU of `multiprocessors` SMs.
    pub fn stream_k(tile: DecodeTile, multiprocessors: usize) -> DecodePlan {
        DecodePlan::StreamK {
            tile,
            blocks: multiprocessors.max(1),
        }
    }

    /// The schedule a [`DecodePlan::StreamK`] of `tile` and `blocks` blocks runs for `n x k`
    /// weights: `ceil(n / rows)` tiles of `ceil(k / 64)` steps, the blocks at most the steps.
    pub fn stream_k_schedule(tile: DecodeTile, blocks: usize, n: usize, k: usize) -> DecodeStreamK {
        DecodeStreamK::new(n.div_ceil(tile.rows()), k.div_ceil(DECODE_WGMMA_BK), blocks)
    }
}

impl Gpu {
    /// Runs the stream-K form of the Hopper rung on checked operands (`1 <= m`, `1 <= n`,
    /// `blocks >= 1`): the applicability checks, the maps, the workspace, one launch.
    pub(super) fn launch_decode_stream_k<O: DecodeOutput>(
        &self,
        tile: DecodeTile,
        blocks: usize,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        y: &mut DeviceMatrix<O>,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        self.check_decode_wgmma(x, w, (m, k, n))?;
        let schedule = DecodePlan::stream_k_schedule(tile, blocks, n, k);
        if !schedule.fits() {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!(
                    "{} steps of 64 along k on {} blocks: the schedule's products pass 64 bits",
                    schedule.steps(),
                    schedule.blocks
                ),
            });
        }
        let t = tile.tiling();
        let grid = u32::try_from(schedule.blocks).map_err(|_| Error::TooLarge {
            op: OP,
            detail: format!("{blocks} blocks exceed the grid's limits"),
        })?;
        let cfg = self.decode_launch(tile, (grid, 1))?;
        let maps = self.decode_maps(x, w, (m, k, n), t.block_cols)?;
        // Room for the largest slots of this many blocks (64 rows of the widest tile), so that
        // calls of other `m` or tiles on the same grid reuse the workspace rather than outgrow it.
        let widest = DecodeTile::Rows256.rows();
        let floats = crate::buffer::checked_len(OP, &[2, schedule.blocks, DECODE_WGMMA_ROWS, widest])?;
        debug_assert!(floats >= schedule.slot_floats(m, t.block_cols));
        let words = crate::buffer::checked_len(OP, &[schedule.blocks, STREAM_K_CONSUMER_THREADS])?;
        debug_assert_eq!(words, schedule.counter_words());
        with_workspace(self, |workspace| {
            let (slots, counters) = workspace.reserve(self, floats, words)?;
            // SAFETY: `maps` holds the maps of `x` (m x k, box 64 x 64) and `w` (n x k, box
            // BN x 64), bf16, 128-byte swizzle, zero fill, BN the tile's; `x`, `w` hold m*k,
            // n*k bf16, 16-byte aligned, read only; `y` m*n elements; `slots` and `counters` at
            // least the schedule's floats and words, the counters zero (made so, left so by
            // every launch), used by this launch alone (the handle's lock, its one stream);
            // `1 <= m <= 64`, `k % 8 == 0`; `cfg` is the kernel's launch (384 threads, the
            // schedule's blocks, its shared memory) on the sm_90a module (or the simulator).
            unsafe {
                stream_k_launcher::<O>(tile)(
                    &self.library(),
                    cfg,
                    maps.view(),
                    x.data.view(),
                    w.data.view(),
                    y.data.view_mut(),
                    // The parts this launch uses (the simulator checks those only).
                    slots.slice_mut(..schedule.slot_floats(m, t.block_cols))?,
                    counters.slice_mut(..schedule.counter_words())?,
                    m,
                    n,
                    k,
                )
            }
        })
    }

    /// The checks of the Hopper rung, either form: a GPU with the sm_90a module, `1 <= m <= 64`,
    /// `k` a positive multiple of 8, 16-byte aligned matrices, dimensions the copy engine takes.
    pub(super) fn check_decode_wgmma(
        &self,
        x: &DeviceMatrix<bf16>,
        w: &DeviceMatrix<bf16>,
        (m, k, n): (usize, usize, usize),
    ) -> Result<()> {
        let invalid = |detail: String| Err(Error::InvalidArgument { op: OP, detail });
        if !self.has_wgmma() {
            return invalid(
                "the Hopper decode kernels are in the sm_90a PTX module only, which loads on a \
                 compute capability 9.0 GPU: use DecodePlan::Mma"
                    .to_string(),
            );
        }
        let aligned = x.data.is_16_byte_aligned() && w.data.is_16_byte_aligned();
        if !DecodePlan::mma_applies(m, n, k, aligned) || m > DECODE_WGMMA_ROWS {
            return invalid(format!(
                "the Hopper decode kernels need 1 <= m <= {DECODE_WGMMA_ROWS}, k a positive \
                 multiple of 8 and 16-byte aligned matrices (m = {m}, k = {k}): use \
                 DecodePlan::Naive"
            ));
        }
        check_copy_engine_dims((m, k, n))
    }
}

#[cfg(test)]
mod tests {
    use kernels_gpu::matmul::decode_stream_k::DecodeStreamK;

    /// Every step in exactly one block's range, shares differing by at most one step, and
    /// `block_of` the inverse of `start`.
    #[test]
    fn ranges_cover_the_line() {
        for (tiles, iters, blocks) in [
            (128, 128, 132),
            (1, 10, 3),
            (2, 10, 7),
            (64, 128, 132),
            (3, 1, 5),
            (5, 3, 1),
        ] {
            let s = DecodeStreamK::new(tiles, iters, blocks);
            assert!(s.fits());
            assert!(s.blocks >= 1 && s.blocks <= s.steps());
            assert_eq!(s.start(0), 0);
            assert_eq!(s.start(s.blocks), s.steps());
            let (lo, hi) = (s.steps() / s.blocks, s.steps().div_ceil(s.blocks));
            for b in 0..s.blocks {
                let len = s.start(b + 1) - s.start(b);
                assert!(len == lo || len == hi, "{s:?} block {b}: {len} steps");
                for step in s.start(b)..s.start(b + 1) {
                    assert_eq!(s.block_of(step), b, "{s:?} step {step}");
                }
            }
        }
    }

    /// The shape on an H200: 128 tiles of 128 steps on 132 blocks of 124 or 125 steps,
    /// every tile split between two or three blocks, each block's split tiles in its two slots.
    #[test]
    fn h200_shape() {
        let s = DecodeStreamK::new(128, 128, 132);
        for t in 0..s.tiles {
            let (j0, j1) = s.contributors(t);
            assert!(j1 > j0 && j1 - j0 <= 2, "tile {t}: {j0}..={j1}");
            let slots: Vec<usize> = (j0..=j1).map(|q| s.slot(q, t)).collect();
            for (q, slot) in (j0..=j1).zip(&slots) {
                assert!(*slot == 2 * q || *slot == 2 * q + 1);
            }
        }
        // A block's two slots are its first and its last tile's: never one slot for two tiles.
        for q in 0..s.blocks {
            let first = s.start(q) / s.iters;
            let last = (s.start(q + 1) - 1) / s.iters;
            if last != first {
                assert_eq!(s.slot(q, first), 2 * q);
                assert_eq!(s.slot(q, last), 2 * q + 1);
            }
        }
    }

    /// A tile inside one block's range is whole; blocks clamp to the steps.
    #[test]
    fn whole_tiles_and_clamped_blocks() {
        let s = DecodeStreamK::new(10, 4, 2);
        assert_eq!(s.contributors(0), (0, 0));
        assert_eq!(s.contributors(4), (0, 0));
        assert_eq!(s.contributors(5), (1, 1));
        assert_eq!(DecodeStreamK::new(2, 3, 100).blocks, 6);
        assert_eq!(DecodeStreamK::new(2, 3, 0).blocks, 1);
        assert!(!DecodeStreamK::new(1 << 40, 1 << 20, 1 << 20).fits());
    }
}
