//! A generic kernel written once and launched for each of its instances, with typed shared
//! memory the launcher adds on its own.

use gpukern::{Gpu, LaunchConfig, PtxSet};
use gpukern_device::shared::Array;
use gpukern_device::{kernel, mem, thread};

/// `x[i] = value` for `i < n`, staged through a shared array.
///
/// # Safety
/// `x` holds `n <= 32` elements; one block of 32 threads.
#[kernel(instances(f32, u32), block(32), barriers(1), shared(stage: Array<T, 32>))]
pub unsafe fn fill<T: Copy>(x: *mut T, value: T, n: usize) {
    let i = thread::thread_idx_x() as usize;
    unsafe {
        stage.store(i, value);
        thread::sync_threads();
        if i < n {
            mem::store(x, i, stage.load(i));
        }
    }
}

/// Launches it in the simulator and checks the result.
pub fn run() -> gpukern::Result<()> {
    let module = Gpu::simulator().load(&PtxSet::simulator_only(env!("CARGO_CRATE_NAME")))?;
    let config = LaunchConfig {
        grid: (1, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut a = module.gpu().zeros_of::<f32>(5)?;
    unsafe { fill::<f32>::launch(&module, config, &mut a, 2.5, 5) }?;
    assert_eq!(a.to_vec()?, vec![2.5; 5]);
    let mut b = module.gpu().zeros_of::<u32>(5)?;
    unsafe { fill::<u32>::launch(&module, config, &mut b, 7, 3) }?;
    assert_eq!(b.to_vec()?, vec![7, 7, 7, 0, 0]);
    assert_eq!(fill_f32::KERNEL.facts.shared_bytes, 128);
    assert_eq!(fill_u32::KERNEL.facts.barriers, Some(1));
    Ok(())
}
