//! A softmax plan launched: its kernels, their launch shapes, the raw launches.

use kernels_gpu::softmax::{
    BLOCK, CLUSTER_SHARED_BYTES, GROUP_KERNEL_BLOCK, PERSIST_WARP_SHARED_BYTES, SHARED_BYTES,
    STATS_SHARED_BYTES, STREAM_BLOCK, WARP_KERNEL_BLOCK, WARP_KERNEL_ROWS, persist_block_shared_bytes,
};

use super::plan::{OnePassPlan, SoftmaxPlan};
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::raw;
use crate::raw::softmax::RowKernel;

/// The operation's name in errors.
const OP: &str = "softmax";

impl Gpu {
    /// Runs `plan` on `x` and `y`, which hold `rows x cols` (`rows, cols >= 1`) on this `Gpu`,
    /// at the same address modulo 16 bytes unless the plan is [`SoftmaxPlan::BlockReduce`].
    pub(super) fn launch_softmax(
        &self,
        plan: SoftmaxPlan,
        x: &DeviceVec,
        y: &mut DeviceVec,
        (rows, cols): (usize, usize),
        t: f32,
    ) -> Result<()> {
        let limits = self.limits();
        let warp_rows = WARP_KERNEL_ROWS as usize;
        let one_pass = match plan {
            SoftmaxPlan::BlockReduce => {
                let cfg = LaunchConfig::per_row(OP, rows, BLOCK, SHARED_BYTES, &limits)?;
                // SAFETY: `x` and `y` hold rows*cols elements; `cfg` is the kernel's per-row shape.
                return unsafe {
                    raw::softmax::row_kernel(self, RowKernel::BlockReduce, cfg, x, y, rows, cols, t)
                };
            }
            SoftmaxPlan::OnePass(plan) => plan,
        };
        let (kernel, cfg) = match one_pass {
            OnePassPlan::Warp { vectors } => {
                let cfg = LaunchConfig::rows_per_block(OP, rows, warp_rows, WARP_KERNEL_BLOCK, 0, &limits)?;
                (RowKernel::warp(vectors), cfg)
            }
            OnePassPlan::Group { lanes } => {
                let group_rows = GROUP_KERNEL_BLOCK as usize / lanes;
                let cfg = LaunchConfig::rows_per_block(OP, rows, group_rows, GROUP_KERNEL_BLOCK, 0, &limits)?;
                (RowKernel::group(lanes), cfg)
            }
            OnePassPlan::PersistentWarp => {
                let kernel = RowKernel::PersistWarp8;
                let shape = (WARP_KERNEL_BLOCK, PERSIST_WARP_SHARED_BYTES);
                (kernel, self.persistent_config(kernel, (rows, warp_rows), shape)?)
            }
            OnePassPlan::Block { vectors, threads } => {
                let cfg = LaunchConfig::per_row(OP, rows, threads, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::block(vectors), cfg)
            }
            OnePassPlan::BlockEvictLast { vectors, threads } => {
                let cfg = LaunchConfig::per_row(OP, rows, threads, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::block_evict_last(vectors), cfg)
            }
            OnePassPlan::PersistentBlock { vectors, threads } => {
                let kernel = RowKernel::persist_block(vectors);
                let shape = (threads, persist_block_shared_bytes(vectors as u32, threads));
                (kernel, self.persistent_config(kernel, (rows, 1), shape)?)
            }
            OnePassPlan::Cluster {
                vectors,
                blocks,
                threads,
            } => {
                let cfg = LaunchConfig::row_chunks(
                    OP,
                    rows,
                    blocks as usize,
                    threads,
                    CLUSTER_SHARED_BYTES,
                    &limits,
                )?;
                // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16
                // (checked by the caller); `cfg` is rows*blocks blocks of `threads`, which with
                // `vectors` per thread hold a row (the plan).
                return unsafe {
                    raw::softmax::softmax_cluster(self, (vectors, blocks), cfg, x, y, rows, cols, t)
                };
            }
            OnePassPlan::Stream => {
                let cfg = LaunchConfig::per_row(OP, rows, STREAM_BLOCK, STATS_SHARED_BYTES, &limits)?;
                (RowKernel::Stream, cfg)
            }
            OnePassPlan::Split {
                chunks,
                chunk_vecs,
                streaming,
            } => {
                return self.softmax_split(x, y, (rows, cols), t, (chunks, chunk_vecs, streaming));
            }
            OnePassPlan::GridRow => return self.softmax_grid_row(x, y, (rows, cols), t),
        };
        // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16 (checked by
        // the caller); the plan fits `cols` to the kernel and `cfg` is its documented shape.
        unsafe { raw::softmax::row_kernel(self, kernel, cfg, x, y, rows, cols, t) }
    }

    /// The launch of a persistent kernel over `rows`, `rows_per_block` at a time, in blocks of
    /// `(threads, shared)`: as many as are resident at once (its shared memory opted in).
    fn persistent_config(
        &self,
        kernel: RowKernel,
        rows: (usize, usize),
        (threads, shared): (u32, u32),
    ) -> Result<LaunchConfig> {
        let resident = self.resident_blocks(OP, kernel.kernel(), threads, shared)?;
        LaunchConfig::persistent(OP, rows, resident, threads, shared, &self.limits().opted_in())
    }

    /// The split path: per-chunk statistics into a temporary buffer, then the writes (with the
    /// evict-first hint if `streaming`).
    fn softmax_split(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        (rows, cols): (usize, usize),
        t: f32,
        (chunks, chunk_vecs, streaming): (usize, usize, bool),
    ) -> Result<()> {
        let cfg =
            LaunchConfig::row_chunks(OP, rows, chunks, STREAM_BLOCK, STATS_SHARED_BYTES, &self.limits())?;
        crate::capture::refuse(
            self,
            OP,
            "rows this long take the split plan, which allocates per-chunk statistics (use \
             SoftmaxAlgorithm::BlockReduce); that is an allocation",
        )?;
        // Two floats, (m, s), per block: one block per chunk of a row.
        let mut partials = self.alloc(2 * cfg.grid.0 as usize)?;
        // SAFETY: `x` and `y` hold rows*cols elements at the same address modulo 16, `partials`
        // 2*rows*chunks; `cfg` is rows*chunks blocks of the kernels' shape and chunks*chunk_vecs
        // covers cols/4 (the plan).
        unsafe {
            raw::softmax::softmax_split(
                self,
                cfg,
                x,
                &mut partials,
                y,
                (rows, cols),
                (chunks, chunk_vecs),
                t,
                streaming,
            )
        }
    }

    /// The grid-row path (`softmax_grid_row`): see [`super::grid_row`].
    fn softmax_grid_row(
        &self,
        x: &DeviceVec,
        y: &mut DeviceVec,
        shape: (usize, usize),
        t: f32,
    ) -> Result<()> {
        super::grid_row::launch(self, x, y, shape, t)
    }
}
