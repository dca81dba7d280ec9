//! Scaled dot-product attention, forward, on bf16 or f16 (f32 inside): the operands checked
//! once ([`Gpu::attention_into`]), the plan ([`AttentionAlgorithm`]) chosen once, then one
//! launch. The kernels and the rules at the edges are in `kernels_gpu::attention`.
//!
//! # Layout
//! `q` is `[batch, q_len, heads, head_dim]`, `k` and `v` `[batch, kv_len, kv_heads, head_dim]`
//! (FlashAttention's layout), each an [`AttentionTensor`]: a device buffer, the offset of
//! element `[0, 0, 0, 0]` in it, and element strides along batch, sequence and heads (the head
//! dim is contiguous). So the three parts of a packed QKV projection `[batch, seq, 3, heads,
//! head_dim]` are read in place, with no copy:
//!
//! ```
//! use gpukern::{AttentionOptions, AttentionTensor, Gpu, bf16};
//! let gpu = Gpu::simulator();
//! let (b, s, h, d) = (1, 5, 2, 8);
//! let qkv = gpu.upload(&vec![bf16::from_f32(0.25); b * s * 3 * h * d])?;
//! let strides = [s * 3 * h * d, 3 * h * d, d]; // batch, seq, heads
//! let part = |p: usize| AttentionTensor::strided(&qkv, p * h * d, [b, s, h, d], strides);
//! let (q, k, v) = (part(0)?, part(1)?, part(2)?);
//! let out = gpu.attention(&q, &k, &v, &AttentionOptions { causal: true, ..Default::default() })?;
//! assert_eq!(out.lse.len(), b * h * s);
//! # Ok::<(), gpukern::Error>(())
//! ```
//!
//! The output is contiguous `[batch, q_len, heads, head_dim]` in the inputs' type, and the
//! row log-sum-exp contiguous `[batch, heads, q_len]` in f32 (what a backward pass needs).
//!
//! # What is supported
//! Head dims that are multiples of 8 from 8 to 256; `kv_heads` dividing `heads` (grouped-query
//! and multi-query attention); `q_len != kv_len` (causal aligned bottom-right, as
//! FlashAttention); any sequence length. Empty batch, `q_len` or head count: an empty result.
//! `kv_len = 0`: every row sees no key, output 0 and log-sum-exp `-inf`.
//!
//! # Variable-length batches
//! Sequences of different lengths packed one after another (FlashAttention's varlen layout,
//! `q` as `[total_q, heads, head_dim]` and `k`, `v` as `[total_k, kv_heads, head_dim]`) are a
//! batch of one with the mask [`AttentionMask::Varlen`], built once from the cumulative offsets
//! by [`Gpu::varlen_mask`] with the rule inside each sequence (none, causal or a sliding window,
//! aligned bottom-right per sequence):
//!
//! ```
//! use gpukern::{AttentionMask, AttentionOptions, AttentionTensor, Gpu, bf16};
//! let gpu = Gpu::simulator();
//! let (h, d) = (2, 8);
//! let (cu_q, cu_k) = ([0, 3, 7], [0, 5, 9]); // two sequences: 3 and 4 queries, 5 and 4 keys
//! let varlen = gpu.varlen_mask(&cu_q, &cu_k, AttentionMask::Causal)?;
//! let q = gpu.upload(&vec![bf16::from_f32(0.25); 7 * h * d])?;
//! let kv = gpu.upload(&vec![bf16::from_f32(0.5); 9 * h * d])?;
//! let q = AttentionTensor::contiguous(&q, [1, 7, h, d])?;
//! let kv = AttentionTensor::contiguous(&kv, [1, 9, h, d])?;
//! let options = AttentionOptions { mask: AttentionMask::Varlen(&varlen), ..Default::default() };
//! let out = gpu.attention(&q, &kv, &kv, &options)?;
//! assert_eq!(out.lse.len(), h * 7); // [1, heads, total_q]
//! # Ok::<(), gpukern::Error>(())
//! ```
//!
//! The backward takes varlen masks as it takes the other shipped masks (below).
//!
//! # Backward
//! [`Gpu::attention_backward`] takes the output's gradient, the inputs, the forward's output and
//! log-sum-exp, and returns `dq`, `dk` and `dv` ([`AttentionGradients`]; `dk` and `dv` in the
//! key/value heads' shape, summed over each group's query heads), with the same checks and the
//! same supported shapes; deterministic (no atomics) but for the one-kernel Hopper rung
//! [`AttentionAlgorithm::WgmmaFused`], which runs when asked for and by default at head dims 64
//! and 128, and never with [`AttentionOptions::deterministic`]. It takes every shipped mask
//! (custom masks are an error): on the `mma.sync` rung ([`AttentionAlgorithm::Flash`], head
//! dims 64 and 128), the rows rung and the one-kernel Hopper rung all of them (the last on
//! instances for the masks that drop pairs only, for ALiBi's bias and for the soft cap's bent
//! scores); [`Gpu::attention_backward`] has the plan's rules.

mod backward;
mod custom;
mod kernels;
mod mask;
mod plan;
mod varlen;
pub use backward::AttentionGradients;
pub use custom::{CustomMask, KeepReference, ScoreReference};
pub use kernels::{AttentionElement, AttentionKernels, MaskBackwardLaunchers, MaskKernels, MaskLaunchers};
use mask::MaskSpec;
pub use mask::{AttentionMask, DocumentMask};
pub use plan::AttentionAlgorithm;
pub use varlen::VarlenMask;

/// Gathers the launchers of the attention kernels a kernel crate declared with
/// `kernels_gpu::attention_mask_kernels!(name, MyMask)` into a [`MaskKernels`]:
/// `gpukern::attention_mask_kernels!(PTX, path::to::name)`, `PTX` the crate's
/// `gpukern::include_ptx!` set, the path that module's; with `backward` after the path (for a
/// module declared with `backward`) the backward's kernels too, which
/// [`Gpu::attention_backward`](crate::Gpu::attention_backward) needs. A `const` expression, so
/// it may be a `static`.
#[macro_export]
macro_rules! attention_mask_kernels {
    ($ptx:expr, $($module:ident)::+) => {
        $crate::attention_mask_kernels!(@table $ptx, { None }, { None }, $($module)::+)
    };
    ($ptx:expr, $($module:ident)::+, backward) => {
        $crate::attention_mask_kernels!(
            @table $ptx,
            { Some($crate::attention_mask_kernels!(@backward $crate::ops::attention::mask_types::bf16, $($module)::+)) },
            { Some($crate::attention_mask_kernels!(@backward $crate::ops::attention::mask_types::f16, $($module)::+)) },
            $($module)::+
        )
    };
    (@table $ptx:expr, { $bf16:expr }, { $f16:expr }, $($module:ident)::+) => {
        $crate::ops::attention::MaskKernels::new(
            stringify!($($module)::+),
            &$ptx,
            $crate::attention_mask_kernels!(@one $crate::ops::attention::mask_types::bf16, { $bf16 }, $($module)::+),
            $crate::attention_mask_kernels!(@one $crate::ops::attention::mask_types::f16, { $f16 }, $($module)::+),
            <$($module)::+::Mask as $crate::ops::attention::mask_types::Mask>::CONTIGUOUS
                && <$($module)::+::Mask as $crate::ops::attention::mask_types::Mask>::MASKS
                && !<$($module)::+::Mask as $crate::ops::attention::mask_types::Mask>::SCORE_MOD,
            <$($module)::+::Mask as $crate::ops::attention::mask_types::Mask>::KEY_ROWS_EXACT
                && !<$($module)::+::Mask as $crate::ops::attention::mask_types::Mask>::SCORE_MOD,
        )
    };
    (@one $t:ty, { $backward:expr }, $($module:ident)::+) => {
        $crate::ops::attention::MaskLaunchers::<$t> {
            rows: $($module)::+::attention_rows::<$t, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
            flash: [
                $($module)::+::attention_flash::<$t, 64, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
                $($module)::+::attention_flash::<$t, 128, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
            ],
            wgmma: [
                $($module)::+::attention_wgmma::<
                    $t,
                    $crate::ops::attention::mask_types::D64,
                    $crate::ops::attention::mask_types::PingPong,
                    $($module)::+::Mask,
                >::launch_views::<$crate::module::Module>,
                $($module)::+::attention_wgmma::<
                    $t,
                    $crate::ops::attention::mask_types::D128,
                    $crate::ops::attention::mask_types::PingPong,
                    $($module)::+::Mask,
                >::launch_views::<$crate::module::Module>,
                $($module)::+::attention_wgmma::<
                    $t,
                    $crate::ops::attention::mask_types::D256,
                    $crate::ops::attention::mask_types::OneTile,
                    $($module)::+::Mask,
                >::launch_views::<$crate::module::Module>,
            ],
            backward: $backward,
        }
    };
    (@backward $t:ty, $($module:ident)::+) => {
        $crate::ops::attention::MaskBackwardLaunchers::<$t> {
            rows_dq: $($module)::+::attention_bwd_rows_dq::<$t, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
            rows_dkdv: $($module)::+::attention_bwd_rows_dkdv::<$t, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
            flash_dq: [
                $($module)::+::attention_bwd_flash_dq::<$t, 64, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
                $($module)::+::attention_bwd_flash_dq::<$t, 128, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
            ],
            flash_dkdv: [
                $($module)::+::attention_bwd_flash_dkdv::<$t, 64, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
                $($module)::+::attention_bwd_flash_dkdv::<$t, 128, $($module)::+::Mask>::launch_views::<$crate::module::Module>,
            ],
            wgmma_fused: [
                $($module)::+::attention_bwd_wgmma_fused_masked::<
                    $t,
                    $crate::ops::attention::mask_types::D64,
                    $crate::ops::attention::mask_types::KeysOf<$($module)::+::Mask>,
                >::launch_views::<$crate::module::Module>,
                $($module)::+::attention_bwd_wgmma_fused_masked::<
                    $t,
                    $crate::ops::attention::mask_types::D128,
                    $crate::ops::attention::mask_types::KeysOf<$($module)::+::Mask>,
                >::launch_views::<$crate::module::Module>,
            ],
        }
    };
}

/// The types `attention_mask_kernels!` names: the element types, and the Hopper rung's head
/// dims and schedules.
#[doc(hidden)]
pub mod mask_types {
    pub use gpukern_device::attention::{KeysOf, Mask};
    pub use half::{bf16, f16};
    pub use kernels_gpu::attention::wgmma::{D64, D128, D256, OneTile, PingPong};
}

use kernels_gpu::attention::wgmma::{
    WGMMA_BOX_ROWS, WGMMA_THREE_ROWS, wgmma_block, wgmma_keys, wgmma_shared_bytes_for,
};
use kernels_gpu::attention::{
    FLASH_BLOCK, FLASH_ROWS, HEAD_DIM_MULTIPLE, MAX_HEAD_DIM, ROWS_BLOCK, ROWS_PER_BLOCK, flash_shared_bytes,
};
pub use plan::AttentionShape;
use plan::{AttentionPlan, Facts, OP};

use super::same_shape;
use crate::buffer::{DeviceVec, checked_len_of};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::view::DeviceSlice;

/// What an attention call computes beyond its operands.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionOptions<'a> {
    /// Causal masking, aligned bottom-right: query row `i` sees the keys `j <= i + kv_len -
    /// q_len` (with `q_len == kv_len`, the keys up to its own position). The same as `mask:
    /// AttentionMask::Causal`; with another mask an error (the window and ALiBi masks are
    /// causal already, the soft cap takes its own flag).
    pub causal: bool,
    /// A mask or score modification ([`AttentionMask`]: sliding window, ALiBi, documents, soft
    /// cap), compiled into the kernels (`gpukern_device::attention`); none by default.
    pub mask: AttentionMask<'a>,
    /// The scale of the scores (the softmax's inverse temperature); `None`: `1 / sqrt(head_dim)`.
    /// Must be finite.
    pub scale: Option<f32>,
    /// Which rung runs the call ([`AttentionAlgorithm::Auto`] by default).
    pub algorithm: AttentionAlgorithm,
    /// The backward must give the same bits on every run ([`Gpu::attention_backward`]): keeps it
    /// off the rungs that add by atomics in an order that varies, today only
    /// [`AttentionAlgorithm::WgmmaFused`] (asked for with `deterministic: true`, an error). False
    /// by default, and then `Auto` runs that rung on Hopper at head dims 64 and 128 (the faster
    /// one there), so the bits of `dq` may differ between runs; set it for the two-kernel rung.
    /// The forward is deterministic always.
    pub deterministic: bool,
}

/// One operand of attention on the device: `[batch, seq, heads, head_dim]` elements of a
/// buffer, element `[b, s, h, d]` at index
/// `offset + b * strides[0] + s * strides[1] + h * strides[2] + d` (see the [module](self) for
/// the packed-QKV example).
pub struct AttentionTensor<'a, T> {
    data: &'a DeviceVec<T>,
    offset: usize,
    dims: [usize; 4],
    strides: [usize; 3],
}

impl<T> Clone for AttentionTensor<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for AttentionTensor<'_, T> {}

impl<'a, T: AttentionElement> AttentionTensor<'a, T> {
    /// The whole of `data` as a contiguous (row-major) `[batch, seq, heads, head_dim]` array.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `data` holds exactly that many elements.
    pub fn contiguous(data: &'a DeviceVec<T>, dims: [usize; 4]) -> Result<Self> {
        let [_, s, h, d] = dims;
        let len = checked_len_of::<T>(OP, &dims)?;
        same_shape(
            OP,
            &[len],
            &[data.len()],
            "a contiguous [batch, seq, heads, head_dim] buffer",
        )?;
        Self::strided(data, 0, dims, [s * h * d, h * d, d])
    }

    /// `dims` elements of `data` from `offset` on, with the given element strides along batch,
    /// sequence and heads (the head dim contiguous).
    ///
    /// Errors: [`Error::InvalidArgument`] if an element the dims and strides reach lies past
    /// the end of `data` (or its index overflows).
    pub fn strided(
        data: &'a DeviceVec<T>,
        offset: usize,
        dims: [usize; 4],
        strides: [usize; 3],
    ) -> Result<Self> {
        let tensor = AttentionTensor {
            data,
            offset,
            dims,
            strides,
        };
        if let Some(last) = tensor.last_index() {
            if last >= data.len() {
                return Err(Error::InvalidArgument {
                    op: OP,
                    detail: format!(
                        "dims {dims:?} with strides {strides:?} from offset {offset} reach element {last}, past the buffer's {}",
                        data.len()
                    ),
                });
            }
        }
        Ok(tensor)
    }

    /// `[batch, seq, heads, head_dim]`.
    pub fn dims(&self) -> [usize; 4] {
        self.dims
    }

    /// The element strides along batch, sequence and heads.
    pub fn strides(&self) -> [usize; 3] {
        self.strides
    }

    /// The index of the last element reached (`None` for no element, or on overflow: an
    /// index past any buffer, which `strided` refuses as `usize::MAX`).
    fn last_index(&self) -> Option<usize> {
        if self.dims.contains(&0) {
            return None;
        }
        let [b, s, h, d] = self.dims;
        let [sb, ss, sh] = self.strides;
        let reach = (|| {
            let mut at = self.offset;
            for (n, stride) in [(b, sb), (s, ss), (h, sh), (d, 1)] {
                at = at.checked_add((n - 1).checked_mul(stride)?)?;
            }
            Some(at)
        })();
        Some(reach.unwrap_or(usize::MAX))
    }

    /// Whether the buffer is 16-byte aligned and the offset and strides are multiples of 8
    /// elements: every row of 8-element pieces starts 16-byte aligned.
    fn is_16_byte_aligned(&self) -> bool {
        self.data.is_16_byte_aligned() && self.offset % 8 == 0 && self.strides.iter().all(|s| s % 8 == 0)
    }

    /// The view of the buffer that the kernels index from 0.
    /// The tensor as a 4-D map sees it: the address of element `[0, 0, 0, 0]`, dims `[batch,
    /// heads, seq, head_dim]` and strides along batch, heads and seq.
    fn map_shape(&self) -> (usize, [usize; 4], [usize; 3]) {
        let [b, s, h, d] = self.dims;
        let [sb, ss, sh] = self.strides;
        let address = self.data.address() + self.offset * std::mem::size_of::<T>();
        (address, [b, h, s, d], [sb, sh, ss])
    }

    /// Whether the driver encodes this tensor's 4-D map with boxes of `box_rows` rows
    /// (`tensor_map::check_4d`).
    fn map_4d_ok(&self, box_rows: usize) -> bool {
        let (address, dims, strides) = self.map_shape();
        crate::tensor_map::check_4d(address, std::mem::size_of::<T>(), dims, strides, box_rows).is_ok()
    }

    fn view(&self) -> Result<DeviceSlice<'a, T>> {
        self.data.slice(self.offset.min(self.data.len())..)
    }
}

/// The output of an attention call on the device.
pub struct AttentionOutput<T> {
    /// `[batch, q_len, heads, head_dim]`, contiguous.
    pub out: DeviceVec<T>,
    /// The row log-sum-exp `[batch, heads, q_len]` (natural log of the sum of
    /// `exp(scale * q . k)` over the keys the row sees; `-inf` for a row that sees none).
    pub lse: DeviceVec<f32>,
}

/// The checked operands of one call.
pub(crate) struct Operands<'a, T> {
    pub(crate) q: AttentionTensor<'a, T>,
    pub(crate) k: AttentionTensor<'a, T>,
    pub(crate) v: AttentionTensor<'a, T>,
    pub(crate) shape: AttentionShape,
    /// `scale * log2(e)`: the kernels' exponentials are base 2.
    pub(crate) scale_log2: f32,
    /// The scale of the scores (the backward's gradients take it as such).
    pub(crate) scale: f32,
    pub(crate) causal: bool,
    /// The mask (the causal flag folded in).
    pub(crate) mask: MaskSpec<'a>,
}

impl<'a, T: AttentionElement> Operands<'a, T> {
    /// The operands as the kernels take them: each tensor's elements from its offset, and its
    /// strides.
    fn launch(&self) -> Result<kernels::Launch<'_, T>> {
        let tensor = |t: &AttentionTensor<'a, T>| -> Result<kernels::LaunchTensor<'a, T>> {
            Ok(kernels::LaunchTensor {
                data: t.view()?,
                strides: t.strides,
            })
        };
        Ok(kernels::Launch {
            q: tensor(&self.q)?,
            k: tensor(&self.k)?,
            v: tensor(&self.v)?,
            shape: self.shape,
            scale_log2: self.scale_log2,
            mask: self.mask.launch()?,
        })
    }
}

/// The shape of `q`, `k`, `v` checked against each other: same batch and head dim, `k` and `v`
/// the same dims, key/value heads dividing query heads, a supported head dim.
///
/// Errors: [`Error::ShapeMismatch`] naming the rule broken; [`Error::InvalidArgument`] for a
/// head dim outside `8..=256` or not a multiple of 8 (what is supported is in the message).
pub fn attention_shape(q: [usize; 4], k: [usize; 4], v: [usize; 4]) -> Result<AttentionShape> {
    same_shape(
        OP,
        &k,
        &v,
        "k and v have the same [batch, kv_len, kv_heads, head_dim]",
    )?;
    same_shape(OP, &[q[0]], &[k[0]], "q and k have the same batch")?;
    same_shape(OP, &[q[3]], &[k[3]], "q and k have the same head dim")?;
    let (heads, kv_heads) = (q[2], k[2]);
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: q.to_vec(),
            rhs: k.to_vec(),
            rule: "the key/value heads (at least 1) divide the query heads",
        });
    }
    let head_dim = q[3];
    if head_dim == 0 || head_dim % HEAD_DIM_MULTIPLE != 0 || head_dim > MAX_HEAD_DIM {
        return Err(Error::InvalidArgument {
            op: OP,
            detail: format!(
                "head dim {head_dim} is not supported: multiples of {HEAD_DIM_MULTIPLE} from {HEAD_DIM_MULTIPLE} to {MAX_HEAD_DIM} are"
            ),
        });
    }
    Ok(AttentionShape {
        batch: q[0],
        q_len: q[1],
        kv_len: k[1],
        heads,
        kv_heads,
        head_dim,
    })
}

impl Gpu {
    /// Attention forward: `softmax(scale * q k^T) v` per batch and head (see the
    /// [module](crate::ops::attention) for the layout and what is supported), with its row
    /// log-sum-exp. Options: causal (bottom-right), the scale (`1 / sqrt(head_dim)` by
    /// default), the algorithm.
    ///
    /// Rules: a row that sees no key gives output 0 and log-sum-exp `-inf`; a NaN in `q`, `k`
    /// or `v` makes NaN the rows it enters and no other; an empty batch, query length or head
    /// count gives an empty result.
    ///
    /// Errors: [`Error::ShapeMismatch`] (different batch or head dim, `k` and `v` unlike, key
    /// heads not dividing query heads); [`Error::InvalidArgument`] (a head dim not a multiple of
    /// 8 in `8..=256`, a scale not finite); [`Error::WrongDevice`].
    pub fn attention<T: AttentionElement>(
        &self,
        q: &AttentionTensor<'_, T>,
        k: &AttentionTensor<'_, T>,
        v: &AttentionTensor<'_, T>,
        options: &AttentionOptions,
    ) -> Result<AttentionOutput<T>> {
        let shape = attention_shape(q.dims, k.dims, v.dims)?;
        let mut out = self.zeros_of::<T>(checked_len_of::<T>(OP, &q.dims)?)?;
        let mut lse = self.zeros_of::<f32>(checked_len_of::<f32>(OP, &[shape.rows()])?)?;
        self.attention_into(q, k, v, options, &mut out, &mut lse)?;
        Ok(AttentionOutput { out, lse })
    }

    /// [`Gpu::attention`] into existing buffers: `out` of `batch * q_len * heads * head_dim`
    /// elements (`[batch, q_len, heads, head_dim]`) and `lse` of `batch * heads * q_len` floats
    /// (`[batch, heads, q_len]`). No allocation.
    ///
    /// Errors: those of [`Gpu::attention`]; [`Error::ShapeMismatch`] for outputs of another
    /// length.
    pub fn attention_into<T: AttentionElement>(
        &self,
        q: &AttentionTensor<'_, T>,
        k: &AttentionTensor<'_, T>,
        v: &AttentionTensor<'_, T>,
        options: &AttentionOptions,
        out: &mut DeviceVec<T>,
        lse: &mut DeviceVec<f32>,
    ) -> Result<()> {
        let ops = self.attention_operands(q, k, v, options, out, lse)?;
        let s = ops.shape;
        if s.rows() == 0 {
            return Ok(());
        }
        let aligned =
            [&ops.q, &ops.k, &ops.v].iter().all(|t| t.is_16_byte_aligned()) && out.is_16_byte_aligned();
        let facts = Facts {
            aligned,
            wgmma: self.has_wgmma(),
            tensor_maps: s.kv_len > 0
                && ops.q.map_4d_ok(WGMMA_BOX_ROWS)
                && ops.q.map_4d_ok(WGMMA_THREE_ROWS)
                && [&ops.k, &ops.v]
                    .iter()
                    .all(|t| t.map_4d_ok(wgmma_keys(s.head_dim))),
            positive_scale: ops.scale_log2 > 0.0,
            uniform: ops.mask.uniform(),
            plain: ops.mask.plain(),
            walks: ops.mask.walks(),
            kv_len: s.kv_len,
        };
        let plan = AttentionPlan::choose(options.algorithm, s.head_dim, facts)
            .map_err(|detail| Error::InvalidArgument { op: OP, detail })?;
        match plan {
            AttentionPlan::Rows => {
                let cfg = LaunchConfig::rows_per_block(
                    OP,
                    s.rows(),
                    ROWS_PER_BLOCK as usize,
                    ROWS_BLOCK,
                    0,
                    &self.limits(),
                )?;
                // SAFETY: the operands are checked (`attention_operands`), `out` and `lse`
                // have the output's lengths, `rows >= 1`, `cfg` covers `rows` warps.
                unsafe { kernels::rows(self, cfg, &ops.launch()?, out, lse) }
            }
            AttentionPlan::Flash { head_dim } => {
                let cfg = LaunchConfig::grid_3d(
                    OP,
                    (s.q_len, s.heads, s.batch),
                    (FLASH_ROWS, 1, 1),
                    (FLASH_BLOCK, 1, 1),
                    flash_shared_bytes(head_dim) as u32,
                    &self.limits().opted_in(),
                )?;
                // SAFETY: as for the rows rung; the plan checked the head dim and the
                // alignment of every operand, offset and stride; `cfg` is the kernel's grid.
                unsafe { kernels::flash(self, cfg, &ops.launch()?, out, lse) }
            }
            AttentionPlan::Wgmma {
                head_dim,
                ping_pong,
                persistent,
                consumers,
            } => {
                // A block per block tile (64 query rows per consumer warpgroup), or
                // (persistent) one per multiprocessor (each holds one: the kernel's shared
                // memory) walking the tiles.
                let (rows, block) = wgmma_block(consumers);
                let tiles = s.q_len.div_ceil(rows) * s.heads * s.batch;
                let resident = if persistent {
                    u32::try_from(self.multiprocessors()?).unwrap_or(u32::MAX)
                } else {
                    u32::MAX
                };
                let cfg = LaunchConfig::persistent(
                    OP,
                    (tiles, 1),
                    resident,
                    block,
                    wgmma_shared_bytes_for(head_dim, consumers) as u32,
                    &self.limits().opted_in(),
                )?;
                let maps = self.attention_maps(&ops, rows)?;
                // SAFETY: as for the fused rung; the plan checked that the GPU has `wgmma` and
                // that the three maps encode, which `attention_maps` did from the same views.
                unsafe { kernels::wgmma(self, cfg, &maps, (ping_pong, consumers), &ops.launch()?, out, lse) }
            }
        }
    }

    /// The 4-D tensor maps of `q`, `k` and `v` (`gpukern_device::tma::Tensor4d`, boxes of
    /// `q_rows` rows of 64 dims for `q`, the kernel's block tile, and of `wgmma_keys(head_dim)`
    /// rows for `k` and `v`) in device memory, side by side ([`Gpu::encoded_maps`]).
    fn attention_maps<T: AttentionElement>(
        &self,
        ops: &Operands<'_, T>,
        q_rows: usize,
    ) -> Result<std::sync::Arc<DeviceVec<u64>>> {
        let keys = wgmma_keys(ops.shape.head_dim);
        self.encoded_maps(&[(&ops.q, q_rows), (&ops.k, keys), (&ops.v, keys)])
    }

    /// The 4-D tensor maps of `tensors` (each with its boxes' rows, of 64 dims) in device
    /// memory, side by side, for the Hopper rungs of the forward and the backward; cached per set
    /// of maps ([`Gpu::cached_maps`]). Zeros in the simulator, whose copies read the operands
    /// directly.
    fn encoded_maps<T: AttentionElement>(
        &self,
        tensors: &[(&AttentionTensor<'_, T>, usize)],
    ) -> Result<std::sync::Arc<DeviceVec<u64>>> {
        use crate::tensor_map::{MAP_WORDS, MapElement, encode_4d};
        let mut words = vec![0u64; tensors.len() * MAP_WORDS];
        if !self.is_simulator() {
            for (n, (t, rows)) in tensors.iter().enumerate() {
                let map = encode_4d(
                    OP,
                    <T as MapElement>::KIND,
                    std::mem::size_of::<T>(),
                    t.map_shape(),
                    *rows,
                )?;
                words[n * MAP_WORDS..(n + 1) * MAP_WORDS].copy_from_slice(&map);
            }
        }
        self.cached_maps(&words)
    }

    /// The checks of every attention call: shapes, head dim, scale, outputs' lengths, owners.
    fn attention_operands<'a, T: AttentionElement>(
        &self,
        q: &AttentionTensor<'a, T>,
        k: &AttentionTensor<'a, T>,
        v: &AttentionTensor<'a, T>,
        options: &AttentionOptions<'a>,
        out: &DeviceVec<T>,
        lse: &DeviceVec<f32>,
    ) -> Result<Operands<'a, T>> {
        let ops = self.attention_inputs(q, k, v, options)?;
        same_shape(
            OP,
            &[ops.shape.out_len()],
            &[out.len()],
            "out holds [batch, q_len, heads, head_dim]",
        )?;
        same_shape(
            OP,
            &[ops.shape.rows()],
            &[lse.len()],
            "lse holds [batch, heads, q_len]",
        )?;
        if !(self.owns(out) && self.owns(lse)) {
            return Err(Error::WrongDevice { op: OP });
        }
        Ok(ops)
    }

    /// The checks of the inputs of every attention call, forward and backward: shapes, head
    /// dim, scale, owners.
    fn attention_inputs<'a, T: AttentionElement>(
        &self,
        q: &AttentionTensor<'a, T>,
        k: &AttentionTensor<'a, T>,
        v: &AttentionTensor<'a, T>,
        options: &AttentionOptions<'a>,
    ) -> Result<Operands<'a, T>> {
        let shape = attention_shape(q.dims, k.dims, v.dims)?;
        let scale = options.scale.unwrap_or(1.0 / (shape.head_dim as f32).sqrt());
        if !scale.is_finite() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!("the scale must be finite, not {scale}"),
            });
        }
        if !(self.owns(q.data) && self.owns(k.data) && self.owns(v.data)) {
            return Err(Error::WrongDevice { op: OP });
        }
        let mask = MaskSpec::new(self, options.causal, options.mask, &shape)?;
        Ok(Operands {
            q: *q,
            k: *k,
            v: *v,
            shape,
            scale_log2: scale * core::f32::consts::LOG2_E,
            scale,
            causal: options.causal,
            mask,
        })
    }
}
