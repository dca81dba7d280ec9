//! A mask of your own ([`AttentionMask::Custom`](super::AttentionMask::Custom)): a type of your
//! kernel crate implementing `gpukern_device::attention::Mask`, compiled into the attention
//! forward's kernels there (`kernels_gpu::attention_mask_kernels!`), whose launchers
//! [`attention_mask_kernels!`](crate::attention_mask_kernels) gathers (`MaskKernels`, a table of
//! `kernels.rs`) and whose parameters a call gives ([`CustomMask`]).

use super::kernels::MaskKernels;
use crate::buffer::DeviceVec;

/// The CPU reference's form of a custom mask: whether row `q` of head `h` of batch `b` sees key
/// `kv`.
pub type KeepReference<'a> = &'a (dyn Fn(usize, usize, usize, usize) -> bool + Sync);

/// The CPU reference's form of a custom score modification: the score `s` (already scaled) of
/// row `q`, head `h`, batch `b`, key `kv`, modified (or, for
/// [`CustomMask::score_grad_reference`], the modification's derivative at `s`).
pub type ScoreReference<'a> = &'a (dyn Fn(f64, usize, usize, usize, usize) -> f64 + Sync);

/// One call's custom mask: its kernels and the three parameters the mask reads
/// (`gpukern_device::attention::MaskArgs`: device records, an integer, a float), and, for
/// [`cpu::attention`](crate::cpu::attention), the mask written out on the host.
///
/// ```ignore
/// let mask = CustomMask::new(&BANDED).int(width).reference(&|_, _, q, kv| q.abs_diff(kv) < width);
/// let options = AttentionOptions { mask: AttentionMask::Custom(&mask), ..Default::default() };
/// ```
#[derive(Clone, Copy)]
pub struct CustomMask<'a> {
    pub(crate) kernels: &'a MaskKernels,
    pub(crate) data: Option<&'a DeviceVec<i32>>,
    pub(crate) int: usize,
    pub(crate) float: f32,
    pub(crate) keep: Option<KeepReference<'a>>,
    pub(crate) score: Option<ScoreReference<'a>>,
    pub(crate) score_grad: Option<ScoreReference<'a>>,
}

impl<'a> CustomMask<'a> {
    /// The mask of `kernels`, reading no records, its integer 0 and its float 0.
    pub fn new(kernels: &'a MaskKernels) -> Self {
        CustomMask {
            kernels,
            data: None,
            int: 0,
            float: 0.0,
            keep: None,
            score: None,
            score_grad: None,
        }
    }

    /// The device records the mask reads (`MaskArgs::data`), on the call's device.
    pub fn data(self, data: &'a DeviceVec<i32>) -> Self {
        CustomMask {
            data: Some(data),
            ..self
        }
    }

    /// The mask's integer (`MaskArgs::int`).
    pub fn int(self, int: usize) -> Self {
        CustomMask { int, ..self }
    }

    /// The mask's float (`MaskArgs::float`).
    pub fn float(self, float: f32) -> Self {
        CustomMask { float, ..self }
    }

    /// The mask written out for [`cpu::attention`](crate::cpu::attention), apart from the
    /// kernels' (`keep(b, h, q, kv)`); without it the CPU reference refuses the mask.
    pub fn reference(self, keep: KeepReference<'a>) -> Self {
        CustomMask {
            keep: Some(keep),
            ..self
        }
    }

    /// The score modification written out for [`cpu::attention`](crate::cpu::attention)
    /// (`score(s, b, h, q, kv)`); none (the score itself) by default.
    pub fn score_reference(self, score: ScoreReference<'a>) -> Self {
        CustomMask {
            score: Some(score),
            ..self
        }
    }

    /// The derivative of the score modification written out for
    /// [`cpu::attention_backward`](crate::cpu::attention_backward) (`grad(s, b, h, q, kv)`, the
    /// derivative of [`CustomMask::score_reference`]'s at `s`): without it the CPU backward
    /// refuses a mask with a score modification (the kernels take the mask type's
    /// `Mask::score_grad`).
    pub fn score_grad_reference(self, grad: ScoreReference<'a>) -> Self {
        CustomMask {
            score_grad: Some(grad),
            ..self
        }
    }

    /// The mask's name (its kernels').
    pub fn name(&self) -> &'static str {
        self.kernels.name
    }
}

impl std::fmt::Debug for CustomMask<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomMask")
            .field("name", &self.kernels.name)
            .field("int", &self.int)
            .field("float", &self.float)
            .field("data", &self.data.map(|d| d.len()))
            .finish()
    }
}

impl PartialEq for CustomMask<'_> {
    /// The same mask (the same value).
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}
