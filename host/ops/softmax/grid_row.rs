//! The grid-row path ([`OnePassPlan::GridRow`](super::OnePassPlan::GridRow)): `softmax_grid_row`
//! sized for the device (block, grid, shared memory) and launched cooperatively.

use kernels_gpu::softmax::softmax_grid_row;
use kernels_gpu::softmax::{GRID_ROW_BLOCK, GRID_ROW_SCRATCH_BYTES, GRID_ROW_VECTORS, grid_row_shared_bytes};

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

/// The operation's name in errors.
const OP: &str = "softmax";

/// The launch of `softmax_grid_row` for rows of some length on some device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GridRowShape {
    /// Threads per block: a multiple of 32, at most `GRID_ROW_BLOCK`.
    pub(crate) threads: u32,
    /// Blocks in the (cooperative) grid.
    pub(crate) blocks: u32,
    /// Vectors each block keeps in shared memory past its registers' share.
    pub(crate) shared_vecs: usize,
}

impl GridRowShape {
    /// The shape for rows of `cols` columns on a device of `multiprocessors`, whose blocks may
    /// have `max_threads` threads and `max_shared` bytes of dynamic shared memory, where
    /// `resident(threads, shared_bytes)` is the most blocks a cooperative launch may have.
    ///
    /// One block per multiprocessor (fewer for a row that fills fewer), each of the fewest
    /// threads (at most `GRID_ROW_BLOCK`) whose registers hold its share, else the most; shared memory for the
    /// rest of its share, up to `max_shared`; the rest is read twice.
    pub(crate) fn choose(
        cols: usize,
        multiprocessors: usize,
        (max_threads, max_shared): (u32, u32),
        resident: impl FnOnce(u32, u32) -> Result<u32>,
    ) -> Result<GridRowShape> {
        let vecs = cols / 4;
        let per_block = GRID_ROW_VECTORS * multiprocessors.max(1);
        let most_threads = max_threads.min(GRID_ROW_BLOCK) / 32 * 32;
        if most_threads == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the loaded PTX has no softmax_grid_row, or it cannot run 32 threads".into(),
            });
        }
        let threads = (vecs.div_ceil(per_block).next_multiple_of(32).max(32) as u32).min(most_threads);
        let held = GRID_ROW_VECTORS * threads as usize;
        let wanted = vecs.div_ceil(held).clamp(1, multiprocessors.max(1));
        let chunk = vecs.div_ceil(wanted);
        let max_vecs = (max_shared.saturating_sub(GRID_ROW_SCRATCH_BYTES) / 16) as usize;
        let shared_vecs = chunk.saturating_sub(held).min(max_vecs);
        let most = resident(threads, grid_row_shared_bytes(shared_vecs as u32))?;
        if most == 0 {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!(
                    "softmax_grid_row: not one block of {threads} threads and {} bytes of shared \
                     memory can be resident",
                    grid_row_shared_bytes(shared_vecs as u32)
                ),
            });
        }
        Ok(GridRowShape {
            threads,
            blocks: (wanted as u32).min(most),
            shared_vecs,
        })
    }
}

/// Runs `softmax_grid_row` on `x` and `y` (`rows x cols`, at the same address modulo 16 bytes,
/// checked by the caller): sizes the launch, allocates the partial statistics and the zeroed
/// barrier word, launches cooperatively.
pub(super) fn launch(
    gpu: &Gpu,
    x: &DeviceVec,
    y: &mut DeviceVec,
    (rows, cols): (usize, usize),
    t: f32,
) -> Result<()> {
    crate::graph::refuse(
        gpu,
        OP,
        "rows this long take the grid-row plan, which allocates per-block statistics and a \
         barrier word (use SoftmaxAlgorithm::BlockReduce); that is an allocation",
    )?;
    let library = gpu.library();
    let limits = (
        gpu.max_block_threads(&softmax_grid_row::KERNEL),
        gpu.limits().max_shared_mem_per_block_optin,
    );
    let shape = GridRowShape::choose(cols, gpu.multiprocessors()?, limits, |threads, shared| {
        library.cooperative_blocks(&softmax_grid_row::KERNEL, threads, shared)
    })?;
    let cfg = LaunchConfig {
        grid: (shape.blocks, 1, 1),
        block: (shape.threads, 1, 1),
        shared_mem_bytes: grid_row_shared_bytes(shape.shared_vecs as u32),
    };
    // Two floats, (m, s), per block and row; the barrier word starts at zero.
    let mut partials = gpu.alloc(2 * rows * shape.blocks as usize)?;
    let mut barrier = gpu.zeros::<u32>(1)?;
    // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16 (the caller),
    // `partials` 2*rows*blocks floats, `barrier` one zero; the launch is cooperative, of the
    // kernel's shape (blocks of a multiple of 32 threads, its shared memory for `shared_vecs`).
    unsafe {
        softmax_grid_row::launch(
            &library.cooperative(),
            cfg,
            x,
            y,
            &mut partials,
            &mut barrier,
            rows,
            cols,
            shape.shared_vecs,
            t,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An H200's block limits: 1024 threads, 227 KiB of dynamic shared memory (opted in).
    const H200: (u32, u32) = (1024, 232_448);
    /// Its multiprocessors.
    const SMS: usize = 132;

    #[test]
    fn a_row_of_2_24_takes_a_block_per_multiprocessor_and_all_the_shared_memory_it_may() {
        // Residency allowing two blocks per multiprocessor: the plan itself keeps to one.
        let shape = GridRowShape::choose(1 << 24, SMS, H200, |_, _| Ok(2 * SMS as u32)).expect("a shape");
        // 2^22 vectors over 132 blocks is 31776 each: 2048 in the registers of 512 threads, the
        // most the shared memory holds, and the rest read again.
        let most_vecs = ((H200.1 - GRID_ROW_SCRATCH_BYTES) / 16) as usize;
        assert_eq!(
            shape,
            GridRowShape {
                threads: GRID_ROW_BLOCK,
                blocks: SMS as u32,
                shared_vecs: most_vecs
            }
        );
    }

    #[test]
    fn a_short_row_takes_the_fewest_threads_and_blocks_that_hold_it() {
        // 1000 vectors: 32 threads of 4 held vectors each in 8 blocks, nothing in shared memory.
        let shape = GridRowShape::choose(4000, SMS, H200, |_, _| Ok(SMS as u32)).expect("a shape");
        assert_eq!(
            shape,
            GridRowShape {
                threads: 32,
                blocks: 8,
                shared_vecs: 0
            }
        );
    }

    #[test]
    fn the_grid_is_capped_at_the_resident_blocks_and_refused_when_none_fit() {
        let capped = GridRowShape::choose(1 << 24, SMS, H200, |_, _| Ok(100)).expect("a shape");
        assert_eq!(capped.blocks, 100);
        let none = GridRowShape::choose(1 << 24, SMS, H200, |_, _| Ok(0));
        assert!(matches!(none, Err(Error::TooLarge { .. })), "{none:?}");
        // A kernel that cannot run one warp.
        let tiny = GridRowShape::choose(1 << 24, SMS, (16, H200.1), |_, _| Ok(SMS as u32));
        assert!(matches!(tiny, Err(Error::InvalidArgument { .. })), "{tiny:?}");
    }
}
