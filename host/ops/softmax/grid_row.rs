//! The grid-row path ([`OnePassPlan::GridRow`](super::OnePassPlan::GridRow)): `softmax_grid_row`
//! sized for the device (block, grid, shared memory) and launched cooperatively.
//!
//! A call allocates nothing, fills nothing and asks the driver nothing: the partial statistics
//! and the barrier word live in a [`Workspace`] kept per stream handle (made on its first call,
//! the barrier word zeroed then and never again: each launch leaves it ready for the next, see
//! `gpukern_device::grid`), and the launch shape of each row length is kept there too.

use kernels_gpu::softmax::softmax_grid_row;
use kernels_gpu::softmax::{GRID_ROW_BLOCK, GRID_ROW_SCRATCH_BYTES, GRID_ROW_VECTORS, grid_row_shared_bytes};

use std::collections::HashMap;
use std::sync::PoisonError;

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

/// Row lengths whose launch shape a [`Workspace`] remembers; past that it forgets them all (a
/// workload with this many distinct lengths pays one occupancy query per length again).
const SHAPES_KEPT: usize = 64;

/// The device memory and launch shapes `softmax_grid_row` reuses from call to call, one per
/// stream handle ([`Gpu::stream`]; one for the whole simulator, whose handles all run in call
/// order).
///
/// Why reuse is safe: every use is a launch queued on the handle's one stream, so the launches
/// that share it run one after another, never at once; the lock around [`with_workspace`] only
/// orders threads that queue on the same handle. Nothing is ever freed or moved while the
/// handle lives, so a CUDA graph that captured a launch keeps valid addresses.
pub(crate) struct Workspace {
    /// Two sets of per-block statistics `(m, s)` (alternate rows use alternate sets): 4 floats per
    /// block of the largest grid the plan makes, one block per multiprocessor.
    partials: DeviceVec<f32>,
    /// The grid barrier's word: zeroed when made; every launch leaves its low 31 bits 0, which
    /// is all the next launch needs (`gpukern_device::grid`'s reuse contract).
    barrier: DeviceVec<u32>,
    /// The launch shape of each row length seen ([`GridRowShape::choose`], whose occupancy query
    /// is the driver call a launch would otherwise make).
    shapes: HashMap<usize, GridRowShape>,
}

impl Workspace {
    /// Allocates the workspace for grids of up to `blocks` blocks, the barrier word zeroed.
    fn new(gpu: &Gpu, blocks: usize) -> Result<Workspace> {
        Ok(Workspace {
            partials: gpu.zeros(4 * blocks.max(1))?,
            barrier: gpu.zeros_of(1)?,
            shapes: HashMap::new(),
        })
    }
}

/// Runs `f` with the workspace of `gpu`'s stream handle, made on first use; the handle's other
/// callers of the grid-row path wait meanwhile.
///
/// Errors: [`Error::Capture`] when the workspace does not exist yet and `gpu` is being captured
/// (making it allocates); what making it or `f` returns.
fn with_workspace<R>(gpu: &Gpu, f: impl FnOnce(&mut Workspace) -> Result<R>) -> Result<R> {
    let slot = gpu.handle_cache::<Option<Workspace>>();
    // A panic while the lock was held left nothing half-made: a workspace is stored whole.
    let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
    let workspace = match &mut *guard {
        Some(workspace) => workspace,
        empty => {
            crate::capture::refuse(
                gpu,
                OP,
                "the first grid-row softmax on a stream handle allocates its workspace (per-block \
                 statistics and a barrier word): run one such softmax on this Gpu before \
                 capturing, or use SoftmaxAlgorithm::BlockReduce; that is an allocation",
            )?;
            empty.insert(Workspace::new(gpu, gpu.multiprocessors()?)?)
        }
    };
    f(workspace)
}

/// Runs `softmax_grid_row` on `x` and `y` (`rows x cols`, at the same address modulo 16 bytes,
/// checked by the caller) with the stream handle's [`Workspace`]: the launch shape for `cols`
/// (chosen once per length), launched cooperatively.
pub(super) fn launch(
    gpu: &Gpu,
    x: &DeviceVec,
    y: &mut DeviceVec,
    (rows, cols): (usize, usize),
    t: f32,
) -> Result<()> {
    let library = gpu.library();
    with_workspace(gpu, |workspace| {
        let shape = match workspace.shapes.get(&cols) {
            Some(&shape) => shape,
            None => {
                let limits = (
                    gpu.max_block_threads(&softmax_grid_row::KERNEL),
                    gpu.limits().max_shared_mem_per_block_optin,
                );
                let shape = GridRowShape::choose(cols, gpu.multiprocessors()?, limits, |threads, shared| {
                    library.cooperative_blocks(&softmax_grid_row::KERNEL, threads, shared)
                })?;
                if workspace.shapes.len() >= SHAPES_KEPT {
                    workspace.shapes.clear();
                }
                workspace.shapes.insert(cols, shape);
                shape
            }
        };
        if 4 * shape.blocks as usize > workspace.partials.len() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "internal: a grid-row grid of {} blocks past the workspace's {}",
                    shape.blocks,
                    workspace.partials.len() / 4
                ),
            });
        }
        let cfg = LaunchConfig {
            grid: (shape.blocks, 1, 1),
            block: (shape.threads, 1, 1),
            shared_mem_bytes: grid_row_shared_bytes(shape.shared_vecs as u32),
        };
        // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16 (the
        // caller); `partials` at least 4*blocks floats (checked above); `barrier` one word whose
        // low 31 bits are 0 (zeroed when made, left so by every launch since, all queued on
        // this handle's stream before this one: none in flight at once); the launch is
        // cooperative, of the kernel's shape (blocks of a multiple of 32 threads, its shared
        // memory for `shared_vecs`).
        unsafe {
            softmax_grid_row::launch(
                &library.cooperative(),
                cfg,
                x,
                y,
                &mut workspace.partials,
                &mut workspace.barrier,
                rows,
                cols,
                shape.shared_vecs,
                t,
            )
        }
    })
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
