//! A kernel that declares `#[len(..)]` for every pointer has a safe launcher (no `unsafe` at the
//! call), takes a `#[derive(DeviceCopy)]` struct by value and as a buffer element, and a view.

use gpukern::{Gpu, LaunchConfig, PtxSet};

mod kernels {
    use gpukern_device::{DeviceCopy, kernel, mem, thread};

    /// An affine map of one coordinate.
    #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
    #[repr(C)]
    pub struct Affine {
        pub scale: f32,
        pub shift: f32,
    }

    /// `out[i] = map(x[i])` for `i < n`; `map` by value, `x` a buffer of pairs.
    ///
    /// # Safety
    /// `x` and `out` hold `n` elements.
    #[kernel]
    pub unsafe fn apply(map: Affine, #[len(n)] x: *const [f32; 2], #[len(n)] out: *mut f32, n: usize) {
        let i = thread::index_1d();
        if i < n {
            unsafe {
                let [a, b] = mem::load(x, i);
                mem::store(out, i, map.scale * (a + b) + map.shift);
            }
        }
    }
}

/// Launches it in the simulator and checks the result.
pub fn run() -> gpukern::Result<()> {
    let gpu = Gpu::simulator();
    let module = gpu.load(&PtxSet::simulator_only(env!("CARGO_CRATE_NAME")))?;
    let x = gpu.upload(&[[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
    let mut out = gpu.zeros(4)?;
    let config = LaunchConfig {
        grid: (1, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    let map = kernels::Affine {
        scale: 2.0,
        shift: 1.0,
    };
    kernels::apply::launch(&module, config, map, &x, out.slice_mut(1..)?, 3)?;
    assert_eq!(out.to_vec()?, [0.0, 7.0, 15.0, 23.0]);
    Ok(())
}
