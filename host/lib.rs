//! # gpukern
//!
//! GPU kernels written in Rust, compiled to PTX by rustc's own NVPTX backend, launched from safe
//! Rust through [cudarc](https://docs.rs/cudarc), on `ndarray` data.
//!
//! ```no_run
//! use ndarray::Array2;
//! let a = Array2::<f32>::ones((1000, 1000));
//! let b = Array2::<f32>::ones((1000, 1000));
//! let c = gpukern::matmul(&a, &b)?;
//! # Ok::<(), gpukern::Error>(())
//! ```
//!
//! The path of a call: public function ([`api`]) -> the operation ([`ops`]: operands checked
//! once, a plan chosen once) -> upload ([`buffer`]) -> launch configuration ([`launch_config`])
//! -> the kernel's generated launcher on the `Gpu`'s library [`Module`] (kernels in the
//! `kernels-gpu` crate, re-exported as [`kernels`]) -> download.
//!
//! * [`Gpu`]: a CUDA device or the CPU simulator; [`Gpu::global`] is the default the free
//!   functions use (the simulator when there is no GPU).
//! * [`DeviceVec`], [`DeviceMatrix`]: data kept on the device between calls.
//! * [`PinnedBuffer`], [`Gpu::stream`], [`Event`]: page-locked host memory, several streams of
//!   one device and the ordering between them ([`pinned`], [`stream`]).
//! * [`tensor_map`]: [`Gpu::tensor_maps_2d`], the tensor maps a kernel's Hopper bulk tensor
//!   copies read (`gpukern_device::tma`, `gpukern_device::pipeline`).
//! * [`cpu`]: reference implementations (f64 accumulation) the tests compare against.
//! * [`ptx`]: the embedded PTX modules of gpukern's own kernels.
//! * [`Module`]: a kernel crate (yours, built by `gpukern-build`) loaded on a [`Gpu`]; its
//!   `#[kernel]`s launch through the typed launchers the attribute generates.
//!
//! ## Cargo features: pay for what you use
//!
//! One feature per kernel family, all on through `library` (the default): `add` (`add`,
//! `increment_by_one`), `matmul`, `softmax`, `norm` (`rms_norm`, `layer_norm`,
//! `residual_rms_norm`), `reduce` (`sum`, `max`, `argmax`), `transpose`, `glu` (`swiglu`,
//! `geglu`), `rotary` (`Gpu::rotary`), `embedding`, `sample` (`Gpu::sample`), `attention` and
//! `cross_entropy` (whose kernels reuse
//! softmax's, so it compiles the softmax kernels too, not softmax's operations). Each brings its
//! family's kernels, compiled for the simulator and to PTX and embedded (`build.rs` hands the list to
//! `gpukern_build::Builder::features`), and its operations: [`ops`]`::<family>`, the free
//! functions, the [`Gpu`] methods, the algorithm types and the [`cpu`] references. Nothing of a
//! family that is off is compiled. A crate that uses only matmul:
//!
//! ```toml
//! gpukern = { version = "0.1", default-features = false, features = ["matmul"] }
//! ```
//!
//! With no feature at all (`default-features = false`) gpukern compiles and embeds none of its
//! kernels: what a crate that launches only its own kernels wants.
//!
//! The modules stand on floors, each importing only its own floor and those below (checked by
//! `tests/floors.rs`): errors and faults ([`error`], `fault`); [`launch_config`]; the capture
//! registry (`capture`); [`ptx`] (PTX sets and their loading); the device ([`device`], with its
//! per-handle caches, `cache`); buffers and streams ([`stream`], [`buffer`], [`view`], [`copy`],
//! [`tensor_map`]);
//! [`pinned`] memory; [`module`]s with their one launch pipeline and launch counting; [`graph`]s
//! and several GPUs ([`multi`], [`dist`]); then [`ops`] and [`api`].

// Without the whole `library` (no family, or only some), the device facts and buffer helpers
// that only the missing families' operations use have no caller.
#![cfg_attr(not(feature = "library"), allow(dead_code))]

/// The PTX that `gpukern-build` compiled from the kernel crate `$krate` (its library name, as
/// in `use $krate::...`), as a [`PtxSet`] to load with [`Gpu::load`]:
///
/// ```ignore
/// static KERNELS: gpukern::PtxSet = gpukern::include_ptx!(my_kernels);
/// ```
///
/// The calling crate's `build.rs` must have run `gpukern_build::Builder::new("<path>").build()`
/// for that crate.
#[macro_export]
macro_rules! include_ptx {
    ($krate:ident) => {
        include!(concat!(
            env!("OUT_DIR"),
            "/gpukern_ptx/",
            stringify!($krate),
            ".rs"
        ))
    };
}

// `::gpukern::...` paths (what `include_ptx!` and gpukern-build's generated files name) resolve
// inside this crate too.
extern crate self as gpukern;

#[cfg(gpukern_family)]
pub mod api;
pub mod buffer;
mod cache;
mod capture;
pub mod copy;
#[cfg(gpukern_family)]
pub mod cpu;
pub mod device;
pub mod dist;
pub mod error;
mod fault;
pub mod graph;
pub mod launch_config;
pub mod module;
pub mod multi;
pub mod ops;
pub mod pinned;
pub mod ptx;
pub mod stream;
pub mod tensor_map;
pub mod view;

#[cfg(feature = "embedding")]
pub use api::embedding;
#[cfg(feature = "rotary")]
pub use api::rotary;
#[cfg(feature = "sample")]
pub use api::sample;
#[cfg(feature = "add")]
pub use api::{add, add_with, increment_by_one, increment_by_one_with};
#[cfg(feature = "reduce")]
pub use api::{argmax, argmax_axis, argmax_with, max, max_axis, max_with, sum, sum_axis, sum_with};
#[cfg(feature = "attention")]
pub use api::{attention, attention_backward, attention_lse};
#[cfg(feature = "cross_entropy")]
pub use api::{cross_entropy, cross_entropy_mean, cross_entropy_mean_with, cross_entropy_with};
#[cfg(feature = "glu")]
pub use api::{geglu, swiglu};
#[cfg(feature = "norm")]
pub use api::{layer_norm, layer_norm_with, residual_rms_norm, rms_norm, rms_norm_with};
#[cfg(feature = "matmul")]
pub use api::{matmul, matmul_decode, matmul_f32_out, matmul_fp8, matmul_half_with, matmul_with};
#[cfg(feature = "softmax")]
pub use api::{softmax, softmax_with};
#[cfg(feature = "transpose")]
pub use api::{transpose, transpose_with};
pub use buffer::Element;
pub use buffer::{DeviceMatrix, DeviceVec};
pub use device::Gpu;
pub use error::{Error, Result};
#[cfg(feature = "matmul")]
pub use gpukern_device::fp8::{E4M3, E5M2};
pub use gpukern_device::launch::Launcher;
pub use graph::{Graph, GraphBuffers};
pub use half::{bf16, f16};
#[cfg(gpukern_family)]
pub use kernels_gpu as kernels;
pub use launch_config::{DeviceLimits, LaunchConfig};
#[doc(hidden)]
pub use module::launch_count::{cuda_launch_counts, sim_launch_counts};
pub use module::{Cooperative, Dependent, Module, PtxModule, PtxSet};
pub use multi::{GpuGroup, gpus};
#[cfg(feature = "add")]
pub use ops::add::AddAlgorithm;
#[cfg(feature = "attention")]
pub use ops::attention::{
    AttentionAlgorithm, AttentionElement, AttentionGradients, AttentionMask, AttentionOptions,
    AttentionOutput, AttentionShape, AttentionTensor, CustomMask, DocumentMask, KeepReference, MaskKernels,
    MaskLaunchers, ScoreReference, VarlenMask,
};
#[cfg(feature = "cross_entropy")]
pub use ops::cross_entropy::{ClassLabels, CrossEntropyAlgorithm};
#[cfg(feature = "decode_attention")]
pub use ops::decode_attention::{
    DecodeAlgorithm, DecodeAttentionOutput, DecodeQuery, DecodeWorkspace, KvAppendAlgorithm, KvCacheShape,
    KvElement, PagedKvCache,
};
#[cfg(feature = "embedding")]
pub use ops::embedding::{EmbeddingAlgorithm, TokenIdElement, TokenIds};
#[cfg(feature = "glu")]
pub use ops::glu::{GeluApprox, GluAlgorithm, GluElement};
#[cfg(feature = "matmul")]
pub use ops::matmul::{
    DecodeLoads, DecodeOutput, DecodePlan, DecodeTile, Fp8Accumulation, Fp8Element, Fp8Matrix, Fp8Output,
    Fp8Plan, Fp8Scaling, Fp8Tile, HalfTile, MatmulAlgorithm, MatmulElement, MatmulOutput, Tf32Tile, WsTile,
    fp8_dequantize, matmul_fp8_reference, quantize_e4m3_reference, tf32_error_factor,
};
#[cfg(feature = "norm")]
pub use ops::norm::{NormAlgorithm, NormElement, ResidualNormAlgorithm, ResidualNormElement};
#[cfg(feature = "reduce")]
pub use ops::reduce::{ArgmaxAlgorithm, ReduceAlgorithm};
#[cfg(feature = "rotary")]
pub use ops::rotary::{PositionElement, RotaryAlgorithm, RotaryFrequencies, RotaryLayout, RotaryPositions};
#[cfg(feature = "sample")]
pub use ops::sample::{LogitElement, SampleAlgorithm, SampleOptions};
#[cfg(feature = "softmax")]
pub use ops::softmax::SoftmaxAlgorithm;
#[cfg(feature = "transpose")]
pub use ops::transpose::TransposeAlgorithm;
pub use pinned::PinnedBuffer;
pub use stream::Event;
pub use view::{DeviceSlice, DeviceSliceMut};

/// Re-exported for the launchers `#[kernel]` generates and for kernel crates' tests.
pub use gpukern_device;
