//! gpukern's kernels, written once in Rust.
//!
//! A kernel crate like any user's: it depends on `gpukern-device` (re-exported here as [`gpu`])
//! and gpukern's `build.rs` compiles it with `gpukern-build`.
//!
//! * On `nvptx64-nvidia-cuda` (built with the pinned nightly) this crate is `no_std` and every
//!   `#[kernel]` becomes an entry point of the PTX module that the host loads.
//! * On any other target (stable Rust) the same kernel functions are plain `unsafe fn`s, and the
//!   device-side helpers in [`gpu`] are backed by [`sim`], a block/thread simulator that runs a
//!   launch on the CPU and checks memory accesses, barriers and shared-memory races.
//!
//! A module per kernel family, a folder with a file per rung of its ladder from the tutorial
//! version to faster ones ([`matmul`], [`softmax`], [`norm`], [`reduce`], [`transpose`],
//! [`cross_entropy`], [`glu`], [`rotary`], [`embedding`], [`sample`], [`attention`], [`decode_attention`]) or a single file ([`add`]); and [`grid_check`], a check of the grid-wide
//! barrier on the GPU. Each module is behind the cargo feature of its name, all on by default, so
//! that a crate using some families compiles (and gpukern embeds the PTX of) only those;
//! `cross_entropy` enables `softmax`, whose row statistics and split-stats kernel it reuses. Each kernel is declared once: where its variants differ in an element type
//! or a knob (vectors per thread, a tiling, a cache hint) it is a generic `#[kernel]` whose named
//! instances are the entry points (`rms_norm_rows16_f32` is `norm::rms_norm_rows::<f32, 4, PLAIN>`), and
//! each kernel states its block size and barrier count in its attribute, the registry's facts the
//! PTX tests check. A family's module re-exports its rungs' items, so that an entry's launcher is
//! `kernels_gpu::<family>::<entry>::launch`. Kernels touch memory only through [`gpu::mem`] (or
//! the checked copies of [`gpu::async_copy`]), so that the simulator sees every access.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

/// The device-side helpers: `gpukern-device`.
pub use gpukern_device as gpu;

/// `for $k in 0..$n { $body }` with `$n <= 8`, unrolled by hand so that `$k` is a literal in
/// each copy: register arrays indexed by `$k` stay in registers (LLVM's own full unrolling gives
/// up on 8 copies of a body with an exponential, and the array then goes to local memory). Used
/// by the softmax, matmul, norm and reduce families; defined here so that all of them see it.
///
/// A literal count of 2 writes the body out twice, not eight times guarded: the type checker's
/// time on the kernel crate goes with the number of copies (the code generated is the same).
// Unused when only families without it (add, transpose) are enabled.
#[cfg_attr(
    not(any(
        feature = "softmax",
        feature = "matmul",
        feature = "norm",
        feature = "reduce",
        feature = "attention",
        feature = "attention-generic",
        feature = "decode_attention"
    )),
    allow(unused_macros)
)]
macro_rules! unroll_8 {
    (2, |$k:ident| $body:block) => {{
        unroll_8!(@one 2, $k, 0, $body);
        unroll_8!(@one 2, $k, 1, $body);
    }};
    ($n:expr, |$k:ident| $body:block) => {{
        unroll_8!(@one $n, $k, 0, $body);
        unroll_8!(@one $n, $k, 1, $body);
        unroll_8!(@one $n, $k, 2, $body);
        unroll_8!(@one $n, $k, 3, $body);
        unroll_8!(@one $n, $k, 4, $body);
        unroll_8!(@one $n, $k, 5, $body);
        unroll_8!(@one $n, $k, 6, $body);
        unroll_8!(@one $n, $k, 7, $body);
    }};
    (@one $n:expr, $k:ident, $i:literal, $body:block) => {
        if $i < $n {
            let $k: usize = $i;
            $body
        }
    };
}

#[cfg(feature = "add")]
pub mod add;
#[cfg(any(feature = "attention", feature = "attention-generic"))]
pub mod attention;
#[cfg(feature = "cross_entropy")]
pub mod cross_entropy;
#[cfg(feature = "decode_attention")]
pub mod decode_attention;
#[cfg(feature = "embedding")]
pub mod embedding;
#[cfg(feature = "glu")]
pub mod glu;
#[cfg(feature = "grid_check")]
pub mod grid_check;
#[cfg(feature = "matmul")]
pub mod matmul;
#[cfg(feature = "norm")]
pub mod norm;
#[cfg(feature = "reduce")]
pub mod reduce;
#[cfg(feature = "rotary")]
pub mod rotary;
#[cfg(feature = "sample")]
pub mod sample;
#[cfg(feature = "softmax")]
pub mod softmax;
#[cfg(feature = "transpose")]
pub mod transpose;

/// The simulator of `gpukern-device`.
#[cfg(not(target_arch = "nvptx64"))]
pub use gpukern_device::sim;

pub use gpukern_device::kernel;
