//! A generic kernel launched with arguments it has no instance for (no PTX entry): a compile
//! error that names the missing instance, not a run-time "no such function".

use gpukern::{Gpu, LaunchConfig, PtxSet};
use gpukern_device::kernel;

/// `x[i] = value` for `i < n`.
///
/// # Safety
/// `x` holds `n` elements.
#[kernel(instances(f32, u32))]
pub unsafe fn fill<T: Copy>(x: *mut T, value: T, n: usize) {
    let _ = (x, value, n);
}

fn main() -> gpukern::Result<()> {
    let module = Gpu::simulator().load(&PtxSet::simulator_only(env!("CARGO_CRATE_NAME")))?;
    let mut x = module.gpu().zeros_of::<u8>(4)?;
    let config = LaunchConfig { grid: (1, 1, 1), block: (4, 1, 1), shared_mem_bytes: 0 };
    unsafe { fill::<u8>::launch(&module, config, &mut x, 1u8, 4) }
}
