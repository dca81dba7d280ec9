//! Reductions: `sum`, `max`, `argmax` of a vector; `sum_axis`, `max_axis`, `argmax_axis` of a
//! matrix.
//!
//! Rules (the kernels' module, `kernels_gpu::reduce`, says how they hold on the device):
//! * `sum` of an empty vector is `0.0`; `max` and `argmax` of one are an
//!   [`Error::InvalidArgument`] (there is no maximum to give). Along an axis the same: an empty
//!   axis sums to `0.0`, and its maximum or argmax is an error (unless there are no outputs).
//! * `max` is NaN if any element is NaN; `+-inf` are ordinary values.
//! * `argmax`: the index of the first NaN if there is one (as `torch.argmax`), else of the
//!   first occurrence of the largest value (`-0.0` and `0.0` are equal: the first wins).
//! * Deterministic: no float atomics; on one device a result is the same bit for bit every run.
//!   `max` and `argmax` are exact; the f32 `sum` rounds in an order fixed by `n` and the device
//!   (see [`Gpu::sum`] for its error).
//!
//! `mod.rs` holds the whole-vector reductions (operands checked once, the public methods),
//! `axis.rs` the reductions along an axis of a matrix, `plan.rs` both plans (pure:
//! `VectorPlan` and `AxisPlan`, unit-tested without a `Gpu`), `kernels.rs` the plans' kernels
//! launched.

mod axis;
mod kernels;
mod plan;
pub use plan::{ArgmaxAlgorithm, ReduceAlgorithm};

use plan::{Reduction, VectorPlan};

use kernels_gpu::reduce as family;

use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::{LaunchConfig, ceil_div};

impl Gpu {
    /// The sum of the elements of `x` (`0.0` if empty), with the default algorithm.
    ///
    /// Accumulated in f32 in a fixed order: each thread adds its elements in four running sums,
    /// then the sums meet in a tree. The error against the exact sum is at most about
    /// `(n / threads + 16) * 2^-24 * sum |x_i|`, with `threads` the launch's threads (tens of
    /// thousands on a large GPU); the same bits every run on one device.
    pub fn sum(&self, x: &DeviceVec) -> Result<f32> {
        self.sum_with(x, ReduceAlgorithm::default())
    }

    /// [`Gpu::sum`] with the given algorithm.
    pub fn sum_with(&self, x: &DeviceVec, algorithm: ReduceAlgorithm) -> Result<f32> {
        let mut out = self.alloc(1)?;
        self.reduce_into(Reduction::Sum, x, &mut out, algorithm)?;
        first(out.to_vec()?)
    }

    /// The sum of `x` into `out[0]` on the device (no download, no synchronisation), with the
    /// given algorithm; `out` must have length 1.
    pub fn sum_into_with(
        &self,
        x: &DeviceVec,
        out: &mut DeviceVec,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        self.reduce_into(Reduction::Sum, x, out, algorithm)
    }

    /// The largest element of `x`, NaN if `x` holds a NaN, with the default algorithm.
    ///
    /// Errors: [`Error::InvalidArgument`] if `x` is empty.
    pub fn max(&self, x: &DeviceVec) -> Result<f32> {
        self.max_with(x, ReduceAlgorithm::default())
    }

    /// [`Gpu::max`] with the given algorithm.
    pub fn max_with(&self, x: &DeviceVec, algorithm: ReduceAlgorithm) -> Result<f32> {
        let mut out = self.alloc(1)?;
        self.reduce_into(Reduction::Max, x, &mut out, algorithm)?;
        first(out.to_vec()?)
    }

    /// The index of the largest element of `x`: the first NaN if there is one, else the first of
    /// the largest value (see the module for the rules).
    ///
    /// Errors: [`Error::InvalidArgument`] if `x` is empty or not 16-byte aligned;
    /// [`Error::TooLarge`] past `u32::MAX` elements (indices are 32-bit on the device).
    pub fn argmax(&self, x: &DeviceVec) -> Result<usize> {
        self.argmax_with(x, ArgmaxAlgorithm::default())
    }

    /// [`Gpu::argmax`] with the given first-pass kernel (the same index from each).
    pub fn argmax_with(&self, x: &DeviceVec, algorithm: ArgmaxAlgorithm) -> Result<usize> {
        let mut index = self.zeros_of::<u32>(1)?;
        self.argmax_into_with(x, &mut index, algorithm)?;
        let v = index.to_vec()?;
        v.first().map(|&i| i as usize).ok_or_else(|| internal("argmax"))
    }

    /// [`Gpu::argmax`] into `index[0]` on the device (no download, no synchronisation); `index`
    /// must have length 1.
    pub fn argmax_into(&self, x: &DeviceVec, index: &mut DeviceVec<u32>) -> Result<()> {
        self.argmax_into_with(x, index, ArgmaxAlgorithm::default())
    }

    /// [`Gpu::argmax_into`] with the given first-pass kernel (the same index from each).
    pub fn argmax_into_with(
        &self,
        x: &DeviceVec,
        index: &mut DeviceVec<u32>,
        algorithm: ArgmaxAlgorithm,
    ) -> Result<()> {
        const OP: &str = "argmax";
        self.check_reduce(OP, x, index.len(), self.owns(index))?;
        let n = x.len();
        if n == 0 {
            return Err(empty(OP));
        }
        if u32::try_from(n).is_err() {
            return Err(Error::TooLarge {
                op: OP,
                detail: format!("{n} elements: argmax indexes at most u32::MAX"),
            });
        }
        if !x.is_16_byte_aligned() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "the input must be 16-byte aligned (device allocations are)".into(),
            });
        }
        let (kernel, tile) = kernels::argmax_kernel(algorithm);
        let cfg = self.vec4_config_tiled(OP, kernel, tile, n)?;
        let mut value = self.alloc(1)?;
        if cfg.grid.0 == 1 {
            // SAFETY: `x` holds `n` aligned floats; one block writes one pair.
            return unsafe { kernels::argmax_vec4(self, algorithm, cfg, x, &mut value, index, n) };
        }
        let g = cfg.grid.0 as usize;
        let (mut values, mut indices) = (self.alloc(g)?, self.zeros_of::<u32>(g)?);
        // SAFETY: `x` holds `n` aligned floats; the partials hold one pair per block; then one
        // block reduces the `g` pairs into `(value, index)`.
        unsafe {
            kernels::argmax_vec4(self, algorithm, cfg, x, &mut values, &mut indices, n)?;
            kernels::argmax_pairs(
                self,
                one_block(OP, self)?,
                (&values, &indices),
                (&mut value, index),
                g,
            )
        }
    }

    /// The one validation of a whole-vector reduction into an output of `out_len` elements.
    fn check_reduce(&self, op: &'static str, x: &DeviceVec, out_len: usize, out_owned: bool) -> Result<()> {
        if out_len != 1 {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("the output must have length 1, not {out_len}"),
            });
        }
        if !out_owned {
            return Err(Error::WrongDevice { op });
        }
        self.check_owner(op, &[x])
    }

    /// `reduction` of `x` into `out[0]`, `algorithm`'s way.
    pub(crate) fn reduce_into(
        &self,
        reduction: Reduction,
        x: &DeviceVec,
        out: &mut DeviceVec,
        algorithm: ReduceAlgorithm,
    ) -> Result<()> {
        let op = match reduction {
            Reduction::Sum => "sum",
            Reduction::Max => "max",
        };
        self.check_reduce(op, x, out.len(), self.owns(out))?;
        let n = x.len();
        if n == 0 && reduction == Reduction::Max {
            return Err(empty(op));
        }
        match VectorPlan::choose(algorithm, x.is_16_byte_aligned()) {
            VectorPlan::Vec4 => self.reduce_vec4(op, reduction, x, out),
            VectorPlan::Tree => self.reduce_tree(op, reduction, x, out),
        }
    }

    /// The two launches of the fast rung: partials of the resident blocks, then one block on
    /// them (one launch when one block suffices).
    fn reduce_vec4(
        &self,
        op: &'static str,
        reduction: Reduction,
        x: &DeviceVec,
        out: &mut DeviceVec,
    ) -> Result<()> {
        let kernel = match reduction {
            Reduction::Sum => &family::sum_vec4::KERNEL,
            Reduction::Max => &family::max_vec4::KERNEL,
        };
        let n = x.len();
        let cfg = self.vec4_config(op, kernel, n)?;
        if cfg.grid.0 == 1 {
            // SAFETY: `x` holds `n` aligned floats, `out` one.
            return unsafe { kernels::vec4(self, reduction, cfg, x, out, n) };
        }
        let g = cfg.grid.0 as usize;
        let mut partials = self.alloc(g)?;
        // SAFETY: `x` holds `n` aligned floats, `partials` one per block (a fresh, aligned
        // allocation), `out` one.
        unsafe {
            kernels::vec4(self, reduction, cfg, x, &mut partials, n)?;
            kernels::vec4(self, reduction, one_block(op, self)?, &partials, out, g)
        }
    }

    /// The tutorial: the tree kernel on `x`, then on its partials, until one value is left.
    fn reduce_tree(
        &self,
        op: &'static str,
        reduction: Reduction,
        x: &DeviceVec,
        out: &mut DeviceVec,
    ) -> Result<()> {
        let limits = self.limits();
        let block = family::TREE_BLOCK as usize;
        let mut len = x.len();
        let mut current: Option<DeviceVec> = None;
        loop {
            let blocks = ceil_div(len, block).max(1);
            let cfg =
                LaunchConfig::per_row(op, blocks, family::TREE_BLOCK, family::TREE_SHARED_BYTES, &limits)?;
            let src = current.as_ref().unwrap_or(x);
            if blocks == 1 {
                // SAFETY: `src` holds `len` floats, `out` one; one block.
                return unsafe { kernels::tree(self, reduction, cfg, src, out, len) };
            }
            let mut partials = self.alloc(blocks)?;
            // SAFETY: `src` holds `len` floats, `partials` one per block.
            unsafe { kernels::tree(self, reduction, cfg, src, &mut partials, len)? };
            current = Some(partials);
            len = blocks;
        }
    }

    /// The grid of a vector-load reduction over `n` elements: one block per `VEC_TILE` vectors,
    /// at most the blocks of `kernel` resident on the device at once, at least one.
    fn vec4_config(
        &self,
        op: &'static str,
        kernel: &'static gpukern_device::launch::Kernel,
        n: usize,
    ) -> Result<LaunchConfig> {
        self.vec4_config_tiled(op, kernel, family::vec4::VEC_TILE, n)
    }

    /// [`Gpu::vec4_config`] for a kernel whose block covers `tile` vectors per sweep.
    fn vec4_config_tiled(
        &self,
        op: &'static str,
        kernel: &'static gpukern_device::launch::Kernel,
        tile: usize,
        n: usize,
    ) -> Result<LaunchConfig> {
        let limits = self.limits();
        let resident =
            self.resident_blocks(op, kernel, family::VEC_BLOCK, family::VEC_SHARED_BYTES)? as usize;
        let blocks = ceil_div(n / 4, tile).clamp(1, resident.max(1));
        LaunchConfig::per_row(op, blocks, family::VEC_BLOCK, family::VEC_SHARED_BYTES, &limits)
    }
}

/// One block of the vector-load kernels: their second pass.
fn one_block(op: &'static str, gpu: &Gpu) -> Result<LaunchConfig> {
    LaunchConfig::per_row(op, 1, family::VEC_BLOCK, family::VEC_SHARED_BYTES, &gpu.limits())
}

/// The error of a maximum of nothing.
pub(super) fn empty(op: &'static str) -> Error {
    Error::InvalidArgument {
        op,
        detail: "the input is empty: it has no maximum".into(),
    }
}

/// The one element of a downloaded result.
fn first(v: Vec<f32>) -> Result<f32> {
    v.first().copied().ok_or_else(|| internal("reduction"))
}

/// A result buffer that came back empty: a bug of gpukern, reported rather than a panic.
fn internal(op: &'static str) -> Error {
    Error::InvalidArgument {
        op,
        detail: "internal: the one-element result came back empty".into(),
    }
}
