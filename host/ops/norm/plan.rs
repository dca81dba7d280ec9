//! The plan of a norm: which kernel and block size a row length gets, chosen once per call.

use kernels_gpu::norm::ROW_BLOCK_MAX;

use super::{NormAlgorithm, NormElement};

/// What one norm call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormPlan {
    /// The tutorial kernel, a block of 256 threads per row.
    BlockReduce,
    /// The in-register kernel, a block of `threads` per row.
    Rows {
        /// A multiple of 32, at most 1024.
        threads: u32,
    },
}

/// Vectors per thread the plan aims for, as a fraction of what a thread can hold: half (16
/// floats, 64 bytes of f32 in flight per thread). Fewer threads per row with more vectors each
/// would leave short rows with blocks of one warp; more threads with fewer vectors, less in
/// flight per thread. Past what half fills (1024 threads), a thread takes up to all of them.
const TARGET_FRACTION: usize = 2;

impl NormPlan {
    /// The plan for rows of `cols >= 1` elements of `T` with `algorithm`; `aligned`: every
    /// buffer starts on a 16-byte boundary (device allocations are 256-byte aligned; host
    /// buffers of the simulator may not be); `max_threads`: the driver's block limit for the
    /// in-register kernel.
    pub fn choose<T: NormElement>(
        algorithm: NormAlgorithm,
        cols: usize,
        aligned: bool,
        max_threads: u32,
    ) -> NormPlan {
        if algorithm == NormAlgorithm::BlockReduce || !aligned || cols % T::LANES != 0 {
            return NormPlan::BlockReduce;
        }
        let vecs = cols / T::LANES;
        let limit = max_threads.min(ROW_BLOCK_MAX) as usize;
        let threads_for = |per_thread: usize| vecs.div_ceil(per_thread).next_multiple_of(32).max(32);
        let target = (T::VECTORS / TARGET_FRACTION).max(1);
        for per_thread in [target, T::VECTORS] {
            let threads = threads_for(per_thread);
            if threads <= limit {
                return NormPlan::Rows {
                    threads: threads as u32,
                };
            }
        }
        NormPlan::BlockReduce
    }
}
