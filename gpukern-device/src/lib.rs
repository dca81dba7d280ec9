//! `gpukern-device`: what a GPU kernel written in Rust needs, the role `cuda_std` plays in
//! rust-cuda. A kernel crate depends on it and marks its entry points with [`kernel`].
//!
//! * On `nvptx64-nvidia-cuda` (built by `gpukern-build` with the pinned nightly) the crate is
//!   `no_std`, each helper is an inline wrapper over an NVPTX instruction, and every `#[kernel]`
//!   becomes an entry point of the PTX module.
//! * On any other target (stable Rust) the same helpers call into [`sim`], a block/thread
//!   simulator that runs a launch on the CPU and checks memory accesses, barriers and races, and
//!   every `#[kernel]` stays a plain `unsafe fn` the simulator calls once per thread.
//!
//! Names follow `cuda_std` where they fit (`thread::index_1d`, `thread::sync_threads`).
//!
//! * [`thread`]: thread, block and grid indices (1-D and 2-D), the block barrier.
//! * [`barrier`]: named barriers, among some of the block's warps (`bar.sync id, threads`).
//! * [`shared`]: the block's shared memory: typed arrays and tiles a kernel declares, and the raw
//!   dynamic window under them.
//! * [`mem`]: loads and stores through raw pointers; the only way kernels touch memory.
//! * [`vector`]: several consecutive elements of any lane type as one 4- to 16-byte access (and
//!   wider ones as several), with cache hints, and `map` over them.
//! * [`hint`]: [`hint::recompute`], a value LLVM may not hoist out of a loop.
//! * [`math`]: float functions `core` lacks on the GPU: `fast` (one approximate instruction
//!   each), `accurate` and `packed` (two 16-bit values at once).
//! * [`convert`]: half-precision elements ([`f16`](struct@f16), [`bf16`], re-exported from the
//!   `half` crate): conversions to and from f32, and pairs as one 32-bit access (`load_f16x2`).
//! * [`fp8`]: the 8-bit float elements of Hopper's FP8 tensor cores, [`fp8::E4M3`] and
//!   [`fp8::E5M2`] (OCP FP8, PyTorch's `float8_e4m3fn` and `float8_e5m2`), with exact
//!   round-to-nearest-even conversions from f32 (and f64 on the host) and to f32.
//! * [`warp`]: warp-scope collectives through shuffles of any value (`shfl_xor`, `reduce`,
//!   scans) and votes.
//! * [`block`]: block-scope collectives (reductions and scans through a shared scratch).
//! * [`atomic`]: atomic read-modify-writes on global or shared memory (`add`, `max`, `min`,
//!   `exchange`, `cas`) and reductions on global memory (`reduce_add`), with an explicit
//!   [`atomic::Scope`] (block, device, system).
//! * [`grid`]: [`grid::sync`], the grid-wide barrier of a cooperative launch.
//! * [`dependent`]: programmatic dependent launches (sm_90): [`dependent::wait`] for the kernel
//!   before, [`dependent::launch_dependents`] to let the next one start early.
//! * [`cluster`]: thread-block clusters (sm_90): the cluster barrier and the shared memory of the
//!   cluster's other blocks.
//! * [`async_copy`]: global-to-shared copies in the background (`cp_async_16`, `commit_group`,
//!   `wait_group`; `cp_async_16_after` and `wait_all` for threads that reuse their own slots).
//! * [`mma`]: the warp's tensor-core multiply-accumulate (`mma.sync`: TF32, BF16, FP16) and
//!   `ldmatrix`.
//! * [`bulk`]: Hopper's bulk copy of a contiguous range into shared memory (`cp.async.bulk`,
//!   the `sm_90a` module only), completing on an [`mbarrier`].
//! * [`mbarrier`], [`tma`], [`wgmma`]: Hopper's transaction barriers, bulk tensor copies and
//!   warpgroup tensor-core products (`wgmma` needs the `sm_90a` module: call it only from code
//!   under `#[cfg(target_feature = "sm_90a")]` on the GPU).
//! * [`pipeline`], [`tile`]: the user-level shape of those three: a ring of copy stages with its
//!   barriers and phases kept for the kernel ([`pipeline::Ring`], a producer and consumers), the
//!   `wgmma` operand tiles in shared memory with their descriptors ([`tile::KMajor`],
//!   [`tile::NMajor`]) and the accumulator fragment's element positions ([`tile::pairs`]).
//! * [`attention`]: masks and score modifications of attention written in Rust ([`attention::Mask`],
//!   FlexAttention's idea), which the attention kernels generic over them compile in.
//! * [`print`](mod@print): [`print!`] (CUDA's device `printf`, its format checked at compile
//!   time) and [`device_assert!`] (CUDA's device `assert`), on the GPU and in the simulator.
//! * [`random`]: Philox4x32-10, counter-based random numbers (the same on the GPU, in the
//!   simulator and on the host), and uniform floats from them.
//! * [`device_copy`]: [`DeviceCopy`], plain data a kernel may take by value or as the element of
//!   a buffer (`#[derive(DeviceCopy)]` for a struct of your own).
//! * `launch` (host only): what the typed launcher `#[kernel]` generates is written against.
//! * [`sim`] (host only): the simulator.

#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        stdarch_nvptx,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem,
        asm_experimental_arch
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod async_copy;
pub mod atomic;
pub mod attention;
pub mod barrier;
pub mod block;
pub mod bulk;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod cluster;
pub mod convert;
pub mod dependent;
pub mod device_copy;
pub mod fp8;
pub mod grid;
pub mod hint;
pub mod math;
pub mod mbarrier;
pub mod mem;
pub mod mma;
pub mod pipeline;
pub mod print;
pub mod random;
pub mod shared;
pub mod thread;
pub mod tile;
pub mod tma;
pub mod vector;
pub mod warp;
pub mod wgmma;

#[cfg(not(target_arch = "nvptx64"))]
pub mod launch;
/// The registry's collector, for the code `#[kernel]` generates (host only).
#[cfg(not(target_arch = "nvptx64"))]
#[doc(hidden)]
pub use inventory as __inventory;
#[cfg(not(target_arch = "nvptx64"))]
pub mod sim;

pub use device_copy::DeviceCopy;
pub use gpukern_device_macros::kernel;
/// `#[derive(DeviceCopy)]`: see [`device_copy`].
pub use gpukern_device_macros::DeviceCopy;
/// The `half` crate (no_std), whose [`f16`](struct@f16) and [`bf16`] are the 16-bit element types.
pub use half::{self, bf16, f16};

/// `-Cpanic=immediate-abort` turns panics into `trap`; this handler is never reached. It lives
/// here so that a kernel crate needs none of its own.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` ends the kernel with an error the host sees at its next synchronisation.
    unsafe { core::arch::nvptx::trap() }
}
