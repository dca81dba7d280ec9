//! Rotary position embedding applied in place to `q` (`tokens x heads * head_dim`) and `k`
//! (`tokens x kv_heads * head_dim`), bf16: positions checked on the host when uploaded
//! ([`RotaryPositions`]), the frequency table computed once ([`RotaryFrequencies`]), the plan
//! ([`RotaryPlan`]) chosen once per call. Kernels, layouts and precision: `kernels_gpu::rotary`.

mod kernels;
mod plan;
pub use plan::{PER_ITEM_MAX_TOKENS_PER_SM, RotaryAlgorithm, RotaryLayout, RotaryPlan};

use half::bf16;
use kernels::RotaryKernels;
use kernels_gpu::rotary::{ROTARY_SCALAR_BLOCK, rotary_shared_bytes};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

/// The operation's name in errors.
const OP: &str = "rotary";

/// Positions at and past this are refused: an f32 holds every integer below `2^24` exactly.
pub const MAX_POSITION: i64 = 1 << 24;

/// A position's integer type: `i32` or `i64`.
pub trait PositionElement: Element + kernels_gpu::rotary::Position + sealed::Sealed {
    /// The position as i64, for the host's check.
    #[doc(hidden)]
    fn as_i64(self) -> i64;
    /// The kernels of this position type.
    #[doc(hidden)]
    fn kernels() -> &'static RotaryKernels<Self>;
}

mod sealed {
    /// Only the position types with rotary kernels.
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

impl PositionElement for i32 {
    fn as_i64(self) -> i64 {
        i64::from(self)
    }
    fn kernels() -> &'static RotaryKernels<i32> {
        &kernels::I32
    }
}

impl PositionElement for i64 {
    fn as_i64(self) -> i64 {
        self
    }
    fn kernels() -> &'static RotaryKernels<i64> {
        &kernels::I64
    }
}

/// One position per token on the device, each checked on the host to lie in
/// `0..`[`MAX_POSITION`] ([`Gpu::upload_positions`], [`RotaryPositions::update`]).
pub struct RotaryPositions<P: PositionElement> {
    positions: DeviceVec<P>,
}

/// A graph ([`crate::Gpu::capture_with`]) may hold them, so that a decode loop updates them
/// between replays.
impl<P: PositionElement> crate::graph::GraphBuffers for RotaryPositions<P> {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        self.positions.addresses(out);
    }
}

impl<P: PositionElement> RotaryPositions<P> {
    /// Number of positions (tokens).
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Overwrites the positions (no allocation: a decode loop's next step), checked as
    /// [`Gpu::upload_positions`] checks them.
    ///
    /// Errors: [`Error::InvalidArgument`] for a position out of range (nothing is written);
    /// [`Error::ShapeMismatch`] unless there is one per token.
    pub fn update(&mut self, positions: &[P]) -> Result<()> {
        check_positions(positions)?;
        same_shape(OP, &[self.len()], &[positions.len()], "one position per token")?;
        self.positions.copy_from_host(positions)
    }
}

/// The first position outside `0..MAX_POSITION`, as an error.
fn check_positions<P: PositionElement>(positions: &[P]) -> Result<()> {
    match positions
        .iter()
        .enumerate()
        .find(|&(_, &p)| !(0..MAX_POSITION).contains(&p.as_i64()))
    {
        Some((t, &p)) => Err(Error::InvalidArgument {
            op: OP,
            detail: format!(
                "position {} of token {t} is outside 0..{MAX_POSITION} (2^24: an f32 holds every position below it exactly)",
                p.as_i64()
            ),
        }),
        None => Ok(()),
    }
}

/// The rotary frequencies of a head size and a base `theta` on the device:
/// `inv_freq[i] = theta^(-2i / head_dim)` for `i < head_dim / 2`, computed in f64 and rounded
/// once to f32 ([`rotary_inv_freq`]).
pub struct RotaryFrequencies {
    inv_freq: DeviceVec<f32>,
    head_dim: usize,
}

impl RotaryFrequencies {
    /// The head size.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }
}

/// `theta^(-2i / head_dim)` for `i < head_dim / 2`, in f64, each rounded once to f32: the table
/// the kernels read (HF computes it in f32: `1 / theta ** (arange(0, d, 2) / d)`, which may
/// differ by an ulp).
pub fn rotary_inv_freq(head_dim: usize, theta: f64) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|i| theta.powf(-((2 * i) as f64) / head_dim as f64) as f32)
        .collect()
}

impl Gpu {
    /// Uploads one position per token (i32 or i64), each checked to lie in
    /// `0..`[`MAX_POSITION`].
    ///
    /// Errors: [`Error::InvalidArgument`] naming the first position out of range.
    pub fn upload_positions<P: PositionElement>(&self, positions: &[P]) -> Result<RotaryPositions<P>> {
        check_positions(positions)?;
        Ok(RotaryPositions {
            positions: self.upload(positions)?,
        })
    }

    /// The frequency table of heads of `head_dim` and the base `theta` (Llama 3: 500000).
    ///
    /// Errors: [`Error::InvalidArgument`] for an odd or zero `head_dim`, or a `theta` that is not
    /// finite and above 1.
    pub fn rotary_frequencies(&self, head_dim: usize, theta: f64) -> Result<RotaryFrequencies> {
        if head_dim == 0 || head_dim % 2 != 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!("head_dim {head_dim}: it must be even and at least 2"),
            });
        }
        if !(theta.is_finite() && theta > 1.0) {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!("theta {theta}: it must be finite and above 1"),
            });
        }
        Ok(RotaryFrequencies {
            inv_freq: self.upload(&rotary_inv_freq(head_dim, theta))?,
            head_dim,
        })
    }

    /// Rotates `q` (`tokens x heads * head_dim`) and `k` (`tokens x kv_heads * head_dim`) in
    /// place: token `t`'s heads by the angles `positions[t] * inv_freq[i]` in `layout`, with the
    /// default algorithm. See `kernels_gpu::rotary` for the formula and its precision.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `q`, `k` and `positions` have one row (position)
    /// per token and `q`'s and `k`'s columns are whole heads of `freqs.head_dim()`.
    pub fn rotary<P: PositionElement>(
        &self,
        q: &mut DeviceMatrix<bf16>,
        k: &mut DeviceMatrix<bf16>,
        positions: &RotaryPositions<P>,
        freqs: &RotaryFrequencies,
        layout: RotaryLayout,
    ) -> Result<()> {
        self.rotary_with(q, k, positions, freqs, layout, RotaryAlgorithm::default())
    }

    /// [`Gpu::rotary`] with the given algorithm.
    pub fn rotary_with<P: PositionElement>(
        &self,
        q: &mut DeviceMatrix<bf16>,
        k: &mut DeviceMatrix<bf16>,
        positions: &RotaryPositions<P>,
        freqs: &RotaryFrequencies,
        layout: RotaryLayout,
        algorithm: RotaryAlgorithm,
    ) -> Result<()> {
        let head_dim = freqs.head_dim;
        let tokens = q.rows;
        same_shape(OP, &[tokens], &[k.rows], "q and k have one row per token")?;
        same_shape(OP, &[tokens], &[positions.len()], "one position per token")?;
        for (rule, cols) in [
            ("q's columns must be whole heads of head_dim", q.cols),
            ("k's columns must be whole heads of head_dim", k.cols),
        ] {
            if cols % head_dim != 0 {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: vec![tokens, cols],
                    rhs: vec![head_dim],
                    rule,
                });
            }
        }
        let owned = self.owns(&q.data)
            && self.owns(&k.data)
            && self.owns(&positions.positions)
            && self.owns(&freqs.inv_freq);
        if !owned {
            return Err(Error::WrongDevice { op: OP });
        }
        let (heads, kv_heads) = (q.cols / head_dim, k.cols / head_dim);
        if tokens == 0 || heads + kv_heads == 0 {
            return Ok(());
        }
        let aligned = q.data.is_16_byte_aligned() && k.data.is_16_byte_aligned();
        let plan = RotaryPlan::choose(
            algorithm,
            layout,
            (tokens, heads + kv_heads, head_dim),
            aligned,
            self.multiprocessors()?,
        );
        let limits = self.limits();
        let cfg = match plan {
            RotaryPlan::Scalar => {
                let pairs = crate::buffer::checked_len(OP, &[tokens, heads + kv_heads, head_dim / 2])?;
                LaunchConfig::linear(OP, pairs, ROTARY_SCALAR_BLOCK, &limits)?
            }
            RotaryPlan::Rows { block } => {
                LaunchConfig::per_row(OP, tokens, block, rotary_shared_bytes(head_dim), &limits)?
            }
        };
        let launcher = P::kernels().of(layout, plan);
        // SAFETY: `q` holds tokens * heads * head_dim elements and `k` tokens * kv_heads *
        // head_dim (whole heads, checked above), `positions` tokens, `inv_freq` head_dim / 2
        // (built with `head_dim`); the vector plan only for aligned buffers and the head size it
        // needs; `cfg` is the plan's kernel's shape (a shared-memory size over the device's limit
        // is refused by the launch).
        unsafe {
            kernels::launch(
                &self.library(),
                launcher,
                cfg,
                (&mut q.data, &mut k.data),
                &positions.positions,
                &freqs.inv_freq,
                (tokens, heads, kv_heads, head_dim),
            )
        }
    }
}
