//! gpukern's kernels, written once in Rust.
//!
//! * On `nvptx64-nvidia-cuda` (built by gpukern's `build.rs` with a pinned nightly) this crate is
//!   `no_std` and every `#[kernel]` becomes an entry point of the PTX module that the host loads.
//! * On any other target (stable Rust) the same kernel functions are plain `unsafe fn`s, and the
//!   device-side helpers in [`gpu`] are backed by [`sim`], a block/thread simulator that runs a
//!   launch on the CPU and checks memory accesses, barriers and shared-memory races.
//!
//! One file per kernel family ([`add`], [`matmul`], [`softmax`]), each ordered from the tutorial
//! version to faster ones. Kernels touch memory only through [`gpu::mem`], so that the simulator
//! sees every access.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        stdarch_nvptx,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem,
        asm_experimental_arch
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod gpu;

pub mod add;
pub mod matmul;
pub mod softmax;

#[cfg(not(target_arch = "nvptx64"))]
pub mod sim;

pub use kernels_gpu_macros::kernel;

/// `-Cpanic=immediate-abort` turns panics into `trap`; this handler is never reached.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` ends the kernel with an error the host sees at its next synchronisation.
    unsafe { core::arch::nvptx::trap() }
}
