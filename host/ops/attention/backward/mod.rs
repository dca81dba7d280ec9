//! Attention backward: the gradients `dq`, `dk`, `dv` of the forward's inputs from the gradient
//! `d_out` of its output, given the forward's output and row log-sum-exp. The operands checked
//! once ([`Gpu::attention_backward_into`], with the forward's checks), the plan chosen once
//! (`plan`), then the preparation kernel (each row's `dO . O`) and two launches: `dQ` per
//! query row or tile, `dK` and `dV` per key row or tile. The maths and the kernels are in
//! `kernels_gpu::attention::backward_rows`, `backward_flash` and (Hopper) `backward_wgmma`.
//! The one-kernel Hopper rung (`backward_wgmma_fused`, [`AttentionAlgorithm::WgmmaFused`] asked
//! for) launches the preparation, one kernel per 128 keys computing `dK`, `dV` and adding `dQ`
//! into a zeroed f32 buffer, and the conversion of that buffer to `dq`.
//!
//! Deterministic but for that rung: every other element summed by one thread in a fixed order,
//! so a call gives the same bits on every run; the fused rung's `dQ` additions (atomics) come in
//! an order that varies, so it never runs for [`AttentionOptions::deterministic`] calls.
//!
//! [`AttentionAlgorithm::WgmmaFused`]: super::AttentionAlgorithm::WgmmaFused

pub(crate) mod kernels;
mod plan;

use kernels_gpu::attention::backward_wgmma::{
    BWD_WGMMA_BLOCK, BWD_WGMMA_KEYS, BWD_WGMMA_Q_TILE, BWD_WGMMA_ROWS, bwd_wgmma_dkdv_shared_bytes,
    bwd_wgmma_dq_shared_bytes,
};
use kernels_gpu::attention::backward_wgmma_fused::{
    BWD_FUSED_MASKED_MAX_ROWS, DQ_CONVERT_BLOCK, bwd_wgmma_dq_accum_len, bwd_wgmma_fused_shared_bytes,
    dq_convert_threads,
};
use kernels_gpu::attention::wgmma::WGMMA_BOX_ROWS;
use kernels_gpu::attention::{
    BWD_FLASH_BLOCK, BWD_FLASH_TILE, BWD_Q_PAD, BWD_ROWS_BLOCK, BWD_ROWS_PER_BLOCK, bwd_flash_shared_bytes,
    prep_rows_per_block,
};
use plan::{BackwardFacts, BackwardPlan};

use std::sync::PoisonError;

use super::{
    AttentionElement, AttentionOptions, AttentionTensor, MaskBackwardLaunchers, MaskKernels, OP, Operands,
    attention_shape,
};
use crate::buffer::{DeviceVec, checked_len_of};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::ops::same_shape;
use crate::tensor_map::MAP_WORDS;
use crate::view::DeviceSlice;

/// The gradients of an attention call, on the device, in the inputs' type.
pub struct AttentionGradients<T> {
    /// `[batch, q_len, heads, head_dim]`, contiguous.
    pub dq: DeviceVec<T>,
    /// `[batch, kv_len, kv_heads, head_dim]`, contiguous: with grouped-query attention, the sum
    /// over the query heads of each key/value head's group.
    pub dk: DeviceVec<T>,
    /// As `dk`.
    pub dv: DeviceVec<T>,
}

impl Gpu {
    /// Attention backward: the gradients of `q`, `k` and `v` given the gradient `d_out` of the
    /// output, the forward's output `out` and its row log-sum-exp `lse` (`[batch, heads,
    /// q_len]`, as [`Gpu::attention`] returns them), with the forward's options (causal, scale;
    /// the algorithm picks the backward's rung: auto, rows or flash). `d_out` and `out` have
    /// `q`'s dims, any strides; the gradients are contiguous (see [`AttentionGradients`]).
    /// bf16 or f16, f32 inside. Deterministic (the same inputs give the same bits) but for the
    /// one-kernel Hopper rung, which runs when asked for and by default at head dims 64 and 128
    /// unless `options.deterministic` asks for the same bits.
    ///
    /// Masks: the causal one on every rung; every shipped mask on the fused `mma.sync` rung
    /// (its general instances, at head dims 64 and 128 with aligned operands, deterministic)
    /// and on the rows rung; every one also on the one-kernel Hopper rung (its masked
    /// instances: those that drop pairs only, ALiBi's bias, the soft cap's bent scores; by
    /// default where it applies, the call is not deterministic and `q_len` is at most 65,535;
    /// else the `mma.sync` rung by default, else rows). Each score modification's
    /// derivative ([`Mask::score_grad`](gpukern_device::attention::Mask::score_grad))
    /// multiplies its pair's gradient. A custom mask ([`AttentionMask::Custom`](super::AttentionMask::Custom))
    /// runs its own instances of the rungs (`kernels_gpu::attention_mask_kernels!(name, Mask,
    /// backward)` declares them with the forward's): the one-kernel rung by default where its
    /// type says `KEY_ROWS_EXACT` and modifies no score, else the `mma.sync` rung (head dims 64
    /// and 128, aligned operands) or rows; its type's `score_grad` is the derivative.
    ///
    /// Rules: the forward's; a row that sees no key contributes nothing; keys no row sees get
    /// zero gradients. Allocates the gradients. Its workspace (8 bytes per query row, the rows
    /// of each head padded to 64; the one-kernel rung 4 bytes per element of `dq` more, its f32
    /// `dQ`) belongs to this stream handle: made by the first call, kept for the next ones and
    /// grown when a call needs more, so that it stays allocated (the largest call's size) until
    /// the handle is dropped.
    ///
    /// Rungs (the algorithm of `options`): on Hopper (sm_90a) at head dims 64 and 128 the
    /// `wgmma` rung by default ([`AttentionAlgorithm::Wgmma`](super::AttentionAlgorithm::Wgmma)
    /// and its schedules all ask for it), its one-kernel form by default when the call is not
    /// deterministic, else the fused `mma.sync` rung at those head dims
    /// (`Flash`), else the rows rung (`Rows`). [`AttentionAlgorithm::WgmmaFused`](super::AttentionAlgorithm::WgmmaFused)
    /// asks for the `wgmma` rung's one-kernel form (`dQ` added by the copy engine's atomic bulk
    /// reductions: not deterministic; on an H100 at 4 x 4096 x 16 x 128, 469.2 against 375.2
    /// TFLOP/s without a mask and 415.1 against 344.6 causal,
    /// `bench/experiments/third-wave/53c2c9a-attention-bwd-gpukern.jsonl`).
    ///
    /// Errors: those of [`Gpu::attention`]; [`Error::ShapeMismatch`] if `d_out` or `out` are
    /// not `q`'s dims or `lse` not `batch * heads * q_len` floats; [`Error::InvalidArgument`]
    /// for a rung asked for where it does not apply (the wgmma rungs on another GPU, at another
    /// head dim, with unaligned strides or tensor maps the driver refuses; the one-kernel rung
    /// with `deterministic`; the fused rung at another head dim or unaligned; with a mask other
    /// than causal, a rung other than those three, or the one-kernel rung where it does not
    /// apply, a custom mask's among them), and for a custom mask whose kernels were gathered
    /// without `backward`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_backward<T: AttentionElement>(
        &self,
        d_out: &AttentionTensor<'_, T>,
        q: &AttentionTensor<'_, T>,
        k: &AttentionTensor<'_, T>,
        v: &AttentionTensor<'_, T>,
        out: &AttentionTensor<'_, T>,
        lse: &DeviceVec<f32>,
        options: &AttentionOptions,
    ) -> Result<AttentionGradients<T>> {
        let shape = attention_shape(q.dims, k.dims, v.dims)?;
        // Written whole by `attention_backward_into` (every rung, the empty cases included): no
        // memset; the simulator starts them as NaN, so that an element left unwritten shows.
        let nan = T::from_f32(f32::NAN);
        let mut dq = self.alloc_poisoned(checked_len_of::<T>(OP, &q.dims)?, nan)?;
        let kv = checked_len_of::<T>(OP, &[shape.batch, shape.kv_len, shape.kv_heads, shape.head_dim])?;
        let (mut dk, mut dv) = (self.alloc_poisoned(kv, nan)?, self.alloc_poisoned(kv, nan)?);
        self.attention_backward_into(d_out, q, k, v, out, lse, options, &mut dq, &mut dk, &mut dv)?;
        Ok(AttentionGradients { dq, dk, dv })
    }

    /// [`Gpu::attention_backward`] into existing buffers: `dq` of `batch * q_len * heads *
    /// head_dim` elements, `dk` and `dv` of `batch * kv_len * kv_heads * head_dim` each (all
    /// contiguous, every element written). Allocates no buffer of its own once the handle's
    /// workspace is as large as the call needs (see [`Gpu::attention_backward`]).
    ///
    /// Errors: those of [`Gpu::attention_backward`]; [`Error::ShapeMismatch`] for gradients of
    /// another length.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_backward_into<T: AttentionElement>(
        &self,
        d_out: &AttentionTensor<'_, T>,
        q: &AttentionTensor<'_, T>,
        k: &AttentionTensor<'_, T>,
        v: &AttentionTensor<'_, T>,
        out: &AttentionTensor<'_, T>,
        lse: &DeviceVec<f32>,
        options: &AttentionOptions,
        dq: &mut DeviceVec<T>,
        dk: &mut DeviceVec<T>,
        dv: &mut DeviceVec<T>,
    ) -> Result<()> {
        let ops = self.attention_inputs(q, k, v, options)?;
        // A custom mask's backward launchers and its crate's module, checked once: declared and
        // gathered with `backward`.
        let custom = match ops.mask.custom() {
            Some((kernels, module)) => Some((custom_backward::<T>(kernels)?, module, kernels.fused_backward)),
            None => None,
        };
        let s = ops.shape;
        same_shape(
            OP,
            &q.dims,
            &d_out.dims,
            "d_out has q's [batch, q_len, heads, head_dim]",
        )?;
        same_shape(
            OP,
            &q.dims,
            &out.dims,
            "out has q's [batch, q_len, heads, head_dim]",
        )?;
        same_shape(OP, &[s.rows()], &[lse.len()], "lse holds [batch, heads, q_len]")?;
        same_shape(
            OP,
            &[s.out_len()],
            &[dq.len()],
            "dq holds [batch, q_len, heads, head_dim]",
        )?;
        let kv = s.batch * s.kv_len * s.kv_heads * s.head_dim;
        same_shape(
            OP,
            &[kv],
            &[dk.len()],
            "dk holds [batch, kv_len, kv_heads, head_dim]",
        )?;
        same_shape(
            OP,
            &[kv],
            &[dv.len()],
            "dv holds [batch, kv_len, kv_heads, head_dim]",
        )?;
        if !(self.owns(d_out.data)
            && self.owns(out.data)
            && self.owns(lse)
            && self.owns(dq)
            && self.owns(dk)
            && self.owns(dv))
        {
            return Err(Error::WrongDevice { op: OP });
        }
        let aligned = [&ops.q, &ops.k, &ops.v, d_out]
            .iter()
            .all(|t| t.is_16_byte_aligned())
            && [&*dq, &*dk, &*dv].iter().all(|x| x.is_16_byte_aligned());
        let masked = !ops.mask.plain();
        let facts = BackwardFacts {
            aligned,
            wgmma: self.has_wgmma(),
            tensor_maps: s.kv_len > 0
                && [&ops.q, &ops.k, &ops.v, d_out]
                    .iter()
                    .all(|t| t.map_4d_ok(WGMMA_BOX_ROWS))
                && [&ops.q, d_out].iter().all(|t| t.map_4d_ok(BWD_WGMMA_Q_TILE)),
            masked,
            fused_mask: custom.is_none_or(|(_, _, fused)| fused),
            short: s.q_len <= BWD_FUSED_MASKED_MAX_ROWS,
        };
        let plan = BackwardPlan::choose(options.algorithm, s.head_dim, facts, options.deterministic)
            .map_err(|detail| Error::InvalidArgument { op: OP, detail })?;
        let key_rows = s.batch * s.kv_heads * s.kv_len;
        if s.rows() == 0 && key_rows == 0 {
            return Ok(());
        }

        // The handle's workspace (`Workspace`): each row's `lse2` and `delta`, its (batch,
        // head)'s rows padded to `BWD_Q_PAD`, written whole by the preparation; then the
        // one-kernel rung's f32 `dQ` (its kernel's fragment order within each block of padded
        // rows), one row of `head_dim` floats per padded row, zeroed by the preparation; none for
        // the other rungs.
        let q_pad = s.q_len.div_ceil(BWD_Q_PAD) * BWD_Q_PAD;
        let padded_rows = s.batch * s.heads * q_pad;
        let (accum_rows, per_row) = match plan {
            BackwardPlan::WgmmaFused { head_dim } => (padded_rows, 2 + head_dim),
            _ => (0, 2),
        };
        let needed = checked_len_of::<f32>(OP, &[padded_rows, per_row])?;
        debug_assert!(
            accum_rows == 0
                || needed - 2 * padded_rows == bwd_wgmma_dq_accum_len(s.batch, s.heads, q_pad, s.head_dim)
        );
        let slot = self.handle_cache::<Workspace>();
        // A panic while the lock was held left nothing half-made: the buffer is stored whole.
        let mut workspace = slot.lock().unwrap_or_else(PoisonError::into_inner);
        let (stats_part, mut dq_accum) = workspace
            .take(self, needed)?
            .slice_mut(..needed)?
            .split_at_mut(2 * padded_rows)?;
        let (mut lse2, mut delta) = stats_part.split_at_mut(padded_rows)?;
        let launch = Launch {
            ops: &ops,
            d_out: d_out.view()?,
            d_out_strides: d_out.strides,
        };
        let table = T::kernels().backward;
        let library = self.library();
        let limits = self.limits();
        if padded_rows > 0 {
            let cfg = LaunchConfig::rows_per_block(
                OP,
                padded_rows,
                prep_rows_per_block(s.head_dim),
                BWD_ROWS_BLOCK,
                0,
                &limits,
            )?;
            // 16-byte loads of `o` and `dO` where both allow them (8 scalar loads a lane otherwise).
            let vectors = out.is_16_byte_aligned() && d_out.is_16_byte_aligned();
            let [ob, os, oh] = out.strides;
            let [db, ds, dh] = d_out.strides;
            // SAFETY: `out` and `d_out` have q's dims (checked) and reach only elements of their
            // buffers (`AttentionTensor::strided`); `lse` holds `rows` floats; `lse2` and
            // `delta` `padded_rows`, `dq_accum` `accum_rows * head_dim` with `accum_rows` 0 or
            // `padded_rows` (16-byte aligned: the workspace is, and `2 padded_rows` floats
            // precede it); `vectors` only where `out` and `d_out` are aligned; `cfg` covers
            // `padded_rows` rows at `prep_rows_per_block`.
            unsafe {
                (table.prep)(
                    &library,
                    cfg,
                    out.view()?,
                    launch.d_out,
                    lse.view(),
                    lse2.reborrow(),
                    delta.reborrow(),
                    dq_accum.reborrow(),
                    padded_rows,
                    accum_rows,
                    s.q_len,
                    q_pad,
                    s.heads,
                    s.head_dim,
                    ob,
                    os,
                    oh,
                    db,
                    ds,
                    dh,
                    vectors,
                )?
            };
        }
        let stats = (lse2.as_slice(), delta.as_slice());
        match plan {
            BackwardPlan::Rows => {
                let mask = ops.mask.launch()?;
                // A custom mask's instances, in its crate's module; the library's `General` ones
                // otherwise (which the no-mask and causal calls run too).
                let (rows_dq, rows_dkdv, module) = match custom {
                    Some((launchers, module, _)) => (launchers.rows_dq, launchers.rows_dkdv, module),
                    None => (table.rows_dq, table.rows_dkdv, &library),
                };
                if s.rows() > 0 {
                    let cfg = LaunchConfig::rows_per_block(
                        OP,
                        s.rows(),
                        BWD_ROWS_PER_BLOCK as usize,
                        BWD_ROWS_BLOCK,
                        0,
                        &limits,
                    )?;
                    let ([qb, qs, qh], [kb, ks, kh], [vb, vs, vh], [db, ds, dh]) = launch.strides();
                    // SAFETY: the operands are checked (`attention_inputs` and the above), the
                    // statistics hold `batch * heads * q_pad` floats, `dq` `rows * head_dim`
                    // elements, `cfg` covers `rows` warps.
                    unsafe {
                        (rows_dq)(
                            module,
                            cfg,
                            launch.view(&ops.q)?,
                            launch.view(&ops.k)?,
                            launch.view(&ops.v)?,
                            launch.d_out,
                            stats.0,
                            stats.1,
                            dq.view_mut(),
                            s.rows(),
                            s.q_len,
                            s.kv_len,
                            q_pad,
                            s.heads,
                            s.heads / s.kv_heads,
                            s.head_dim,
                            qb,
                            qs,
                            qh,
                            kb,
                            ks,
                            kh,
                            vb,
                            vs,
                            vh,
                            db,
                            ds,
                            dh,
                            ops.scale_log2,
                            launch.scale(),
                            mask.data,
                            mask.int,
                            mask.float,
                        )?
                    };
                }
                if key_rows > 0 {
                    let cfg = LaunchConfig::rows_per_block(
                        OP,
                        key_rows,
                        BWD_ROWS_PER_BLOCK as usize,
                        BWD_ROWS_BLOCK,
                        0,
                        &limits,
                    )?;
                    let ([qb, qs, qh], [kb, ks, kh], [vb, vs, vh], [db, ds, dh]) = launch.strides();
                    // SAFETY: as for `dQ`; `dk` and `dv` hold `key_rows * head_dim` elements
                    // each, `cfg` covers `key_rows` warps.
                    unsafe {
                        (rows_dkdv)(
                            module,
                            cfg,
                            launch.view(&ops.q)?,
                            launch.view(&ops.k)?,
                            launch.view(&ops.v)?,
                            launch.d_out,
                            stats.0,
                            stats.1,
                            dk.view_mut(),
                            dv.view_mut(),
                            key_rows,
                            s.q_len,
                            s.kv_len,
                            q_pad,
                            s.kv_heads,
                            s.heads / s.kv_heads,
                            s.head_dim,
                            qb,
                            qs,
                            qh,
                            kb,
                            ks,
                            kh,
                            vb,
                            vs,
                            vh,
                            db,
                            ds,
                            dh,
                            ops.scale_log2,
                            launch.scale(),
                            mask.data,
                            mask.int,
                            mask.float,
                        )?
                    };
                }
            }
            BackwardPlan::Flash { head_dim } => {
                let which = usize::from(head_dim == 128);
                let shared = bwd_flash_shared_bytes(head_dim) as u32;
                let opted = limits.opted_in();
                // With a mask other than none and causal, the general instances, which read
                // the mask (the unmasked ones read `causal` and ignore it).
                let mask = ops.mask.launch()?;
                let (dq_kernel, dkdv_kernel, module) = match custom {
                    Some((launchers, module, _)) => {
                        (launchers.flash_dq[which], launchers.flash_dkdv[which], module)
                    }
                    None if masked => (
                        table.flash_dq_general[which],
                        table.flash_dkdv_general[which],
                        &library,
                    ),
                    None => (table.flash_dq[which], table.flash_dkdv[which], &library),
                };
                if s.rows() > 0 {
                    let cfg = LaunchConfig::grid_3d(
                        OP,
                        (s.q_len, s.heads, s.batch),
                        (BWD_FLASH_TILE, 1, 1),
                        (BWD_FLASH_BLOCK, 1, 1),
                        shared,
                        &opted,
                    )?;
                    let ([qb, qs, qh], [kb, ks, kh], [vb, vs, vh], [db, ds, dh]) = launch.strides();
                    // SAFETY: as for the rows rung; the plan checked the head dim and the
                    // alignment of every operand, offset and stride; `q_pad` is a multiple of
                    // 64; `cfg` is the kernel's grid.
                    unsafe {
                        (dq_kernel)(
                            module,
                            cfg,
                            launch.view(&ops.q)?,
                            launch.view(&ops.k)?,
                            launch.view(&ops.v)?,
                            launch.d_out,
                            stats.0,
                            stats.1,
                            dq.view_mut(),
                            s.q_len,
                            s.kv_len,
                            q_pad,
                            s.heads / s.kv_heads,
                            qb,
                            qs,
                            qh,
                            kb,
                            ks,
                            kh,
                            vb,
                            vs,
                            vh,
                            db,
                            ds,
                            dh,
                            ops.scale_log2,
                            launch.scale(),
                            ops.causal,
                            mask.data,
                            mask.int,
                            mask.float,
                        )?
                    };
                }
                if key_rows > 0 {
                    let cfg = LaunchConfig::grid_3d(
                        OP,
                        (s.kv_len, s.kv_heads, s.batch),
                        (BWD_FLASH_TILE, 1, 1),
                        (BWD_FLASH_BLOCK, 1, 1),
                        shared,
                        &opted,
                    )?;
                    let ([qb, qs, qh], [kb, ks, kh], [vb, vs, vh], [db, ds, dh]) = launch.strides();
                    // SAFETY: as for `dQ`, with `cfg` the key tiles' grid.
                    unsafe {
                        (dkdv_kernel)(
                            module,
                            cfg,
                            launch.view(&ops.q)?,
                            launch.view(&ops.k)?,
                            launch.view(&ops.v)?,
                            launch.d_out,
                            stats.0,
                            stats.1,
                            dk.view_mut(),
                            dv.view_mut(),
                            s.q_len,
                            s.kv_len,
                            q_pad,
                            s.heads / s.kv_heads,
                            qb,
                            qs,
                            qh,
                            kb,
                            ks,
                            kh,
                            vb,
                            vs,
                            vh,
                            db,
                            ds,
                            dh,
                            ops.scale_log2,
                            launch.scale(),
                            ops.causal,
                            mask.data,
                            mask.int,
                            mask.float,
                        )?
                    };
                }
            }
            BackwardPlan::Wgmma { head_dim } => {
                let which = usize::from(head_dim == 128);
                let maps = self.backward_maps(&ops, d_out)?;
                let opted = limits.opted_in();
                let ([qb, qs, qh], [kb, ks, kh], [vb, vs, vh], [db, ds, dh]) = launch.strides();
                if s.rows() > 0 {
                    let cfg = LaunchConfig::grid_3d(
                        OP,
                        (s.q_len, s.heads, s.batch),
                        (BWD_WGMMA_ROWS, 1, 1),
                        (BWD_WGMMA_BLOCK, 1, 1),
                        bwd_wgmma_dq_shared_bytes(head_dim) as u32,
                        &opted,
                    )?;
                    // SAFETY: as for the fused rung; the plan checked that the GPU has `wgmma`
                    // and that the maps encode, which `backward_maps` did from the same views
                    // (`K`, `V`, `Q`, `dO` of 128-row boxes from word `2 MAP_WORDS` on);
                    // `kv_len >= 1` (the plan's fact); `cfg` is the kernel's grid.
                    unsafe {
                        (table.wgmma_dq[which])(
                            &library,
                            cfg,
                            maps.view().slice(2 * MAP_WORDS..)?,
                            launch.view(&ops.q)?,
                            launch.view(&ops.k)?,
                            launch.view(&ops.v)?,
                            launch.d_out,
                            stats.0,
                            stats.1,
                            dq.view_mut(),
                            s.q_len,
                            s.kv_len,
                            q_pad,
                            s.heads,
                            s.heads / s.kv_heads,
                            s.batch,
                            qb,
                            qs,
                            qh,
                            kb,
                            ks,
                            kh,
                            vb,
                            vs,
                            vh,
                            db,
                            ds,
                            dh,
                            ops.scale_log2,
                            launch.scale(),
                            ops.causal,
                        )?
                    };
                }
                if key_rows > 0 {
                    let cfg = LaunchConfig::grid_3d(
                        OP,
                        (s.kv_len, s.kv_heads, s.batch),
                        (BWD_WGMMA_KEYS, 1, 1),
                        (BWD_WGMMA_BLOCK, 1, 1),
                        bwd_wgmma_dkdv_shared_bytes(head_dim) as u32,
                        &opted,
                    )?;
                    // SAFETY: as for `dQ`, with the maps `Q`, `dO` (64-row boxes), `K`, `V` from
                    // word 0 and `cfg` the key blocks' grid.
                    unsafe {
                        (table.wgmma_dkdv[which])(
                            &library,
                            cfg,
                            maps.view(),
                            launch.view(&ops.q)?,
                            launch.view(&ops.k)?,
                            launch.view(&ops.v)?,
                            launch.d_out,
                            stats.0,
                            stats.1,
                            dk.view_mut(),
                            dv.view_mut(),
                            s.q_len,
                            s.kv_len,
                            q_pad,
                            s.heads,
                            s.heads / s.kv_heads,
                            s.batch,
                            qb,
                            qs,
                            qh,
                            kb,
                            ks,
                            kh,
                            vb,
                            vs,
                            vh,
                            db,
                            ds,
                            dh,
                            ops.scale_log2,
                            launch.scale(),
                            ops.causal,
                        )?
                    };
                }
            }
            BackwardPlan::WgmmaFused { head_dim } => {
                let which = usize::from(head_dim == 128);
                let maps = self.backward_maps(&ops, d_out)?;
                let opted = limits.opted_in();
                let ([qb, qs, qh], [kb, ks, kh], [vb, vs, vh], [db, ds, dh]) = launch.strides();
                if key_rows > 0 {
                    let cfg = LaunchConfig::grid_3d(
                        OP,
                        (s.kv_len, s.kv_heads, s.batch),
                        (BWD_WGMMA_KEYS, 1, 1),
                        (BWD_WGMMA_BLOCK, 1, 1),
                        bwd_wgmma_fused_shared_bytes(head_dim) as u32,
                        &opted,
                    )?;
                    // SAFETY: as for the `dK`/`dV` kernel of the two-kernel rung (the same maps
                    // from word 0, the same checks by the plan, `kv_len >= 1`); `dq_accum` holds
                    // `bwd_wgmma_dq_accum_len(batch, heads, q_pad, head_dim)` floats, zeroed by
                    // the preparation before on the same stream (none where `q_len` is 0), and
                    // nothing else touches it during the launch; with a mask, the masked entry
                    // (the plan checked that the mask drops pairs only and `q_len` fits), the
                    // statistics padded to the `q_pad` it computes (the same as this one).
                    unsafe {
                        if masked {
                            let mask = ops.mask.launch()?;
                            // A custom mask's `KeysOf` instances (the plan checked that the mask
                            // modifies no score and says `KEY_ROWS_EXACT`), in its crate's module.
                            // The library's table's order: d64, d128, bias d128, bent d64, bent
                            // d128. At head dim 128 a bias has entries of its own; a score that
                            // bends (the soft cap) has its own at both.
                            let (kernel, module) = match custom {
                                Some((launchers, module, _)) => (launchers.wgmma_fused[which], module),
                                None => {
                                    let which = match (ops.mask.modifies_scores(), ops.mask.score_is_bias()) {
                                        (true, false) => 3 + which,
                                        (true, true) => 2 * which,
                                        (false, _) => which,
                                    };
                                    (table.wgmma_fused_masked[which], &library)
                                }
                            };
                            (kernel)(
                                module,
                                cfg,
                                maps.view(),
                                launch.view(&ops.q)?,
                                launch.view(&ops.k)?,
                                launch.view(&ops.v)?,
                                launch.d_out,
                                stats.0,
                                stats.1,
                                dk.view_mut(),
                                dv.view_mut(),
                                dq_accum.reborrow(),
                                s.q_len,
                                s.kv_len,
                                s.heads,
                                s.heads / s.kv_heads,
                                s.batch,
                                qb,
                                qs,
                                qh,
                                kb,
                                ks,
                                kh,
                                vb,
                                vs,
                                vh,
                                db,
                                ds,
                                dh,
                                ops.scale_log2,
                                launch.scale(),
                                mask.data,
                                mask.int,
                                mask.float,
                            )?
                        } else {
                            (table.wgmma_fused[which])(
                                &library,
                                cfg,
                                maps.view(),
                                launch.view(&ops.q)?,
                                launch.view(&ops.k)?,
                                launch.view(&ops.v)?,
                                launch.d_out,
                                stats.0,
                                stats.1,
                                dk.view_mut(),
                                dv.view_mut(),
                                dq_accum.reborrow(),
                                s.q_len,
                                s.kv_len,
                                q_pad,
                                s.heads,
                                s.heads / s.kv_heads,
                                s.batch,
                                qb,
                                qs,
                                qh,
                                kb,
                                ks,
                                kh,
                                vb,
                                vs,
                                vh,
                                db,
                                ds,
                                dh,
                                ops.scale_log2,
                                launch.scale(),
                                ops.causal,
                            )?
                        }
                    };
                }
                if s.rows() > 0 {
                    // A thread per 8 dims of a pair of query rows.
                    let threads = dq_convert_threads(s.batch, s.q_len, s.heads, head_dim);
                    let cfg = LaunchConfig::linear(OP, threads, DQ_CONVERT_BLOCK, &limits)?;
                    // SAFETY: `dq_accum` holds the buffer's floats, 16-byte aligned (as the
                    // fused kernel's bulk reductions need), written by the launch before on the
                    // same stream; `dq` holds `batch q_len heads head_dim` elements (checked),
                    // 16-byte aligned (the plan's fact); head dim 64 or 128, `q_pad >= q_len` a
                    // multiple of 64; `cfg` covers `threads` threads.
                    unsafe {
                        (table.wgmma_dq_convert)(
                            &library,
                            cfg,
                            dq_accum.as_slice(),
                            dq.view_mut(),
                            threads,
                            s.q_len,
                            q_pad,
                            s.heads,
                            head_dim,
                            launch.scale(),
                        )?
                    };
                }
            }
        }
        Ok(())
    }

    /// The 4-D tensor maps of the Hopper backward in device memory, side by side: `q` and
    /// `d_out` with boxes of 64 rows, then `k`, `v`, `q` and `d_out` with boxes of 128 (the
    /// `dK`/`dV` kernel reads the first four, the `dQ` kernel the last four;
    /// [`Gpu::encoded_maps`]).
    fn backward_maps<T: AttentionElement>(
        &self,
        ops: &Operands<'_, T>,
        d_out: &AttentionTensor<'_, T>,
    ) -> Result<std::sync::Arc<DeviceVec<u64>>> {
        self.encoded_maps(&[
            (&ops.q, BWD_WGMMA_Q_TILE),
            (d_out, BWD_WGMMA_Q_TILE),
            (&ops.k, WGMMA_BOX_ROWS),
            (&ops.v, WGMMA_BOX_ROWS),
            (&ops.q, WGMMA_BOX_ROWS),
            (d_out, WGMMA_BOX_ROWS),
        ])
    }
}

/// A custom mask's backward launchers, or the error that says how to declare them.
fn custom_backward<T: AttentionElement>(custom: &MaskKernels) -> Result<&MaskBackwardLaunchers<T>> {
    T::custom(custom)
        .backward
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument {
            op: OP,
            detail: format!(
                "the custom mask {} has no backward kernels: declare them with \
                 kernels_gpu::attention_mask_kernels!(name, Mask, backward) in its kernel crate \
                 and gather them with gpukern::attention_mask_kernels!(PTX, path, backward)",
                custom.name()
            ),
        })
}

/// The checked operands of one backward call as the kernels take them.
struct Launch<'o, 'a, T> {
    ops: &'o Operands<'a, T>,
    d_out: DeviceSlice<'a, T>,
    d_out_strides: [usize; 3],
}

impl<'a, T: AttentionElement> Launch<'_, 'a, T> {
    /// The strides of `q`, `k`, `v` and `d_out`.
    fn strides(&self) -> ([usize; 3], [usize; 3], [usize; 3], [usize; 3]) {
        (
            self.ops.q.strides,
            self.ops.k.strides,
            self.ops.v.strides,
            self.d_out_strides,
        )
    }

    /// A tensor's elements from its offset.
    fn view(&self, t: &AttentionTensor<'a, T>) -> Result<DeviceSlice<'a, T>> {
        t.view()
    }

    /// The scale of the scores.
    fn scale(&self) -> f32 {
        self.ops.scale
    }
}

/// The backward's workspace of one stream handle ([`Gpu::handle_cache`]), kept from call to call:
/// the per-row statistics and the one-kernel rung's f32 `dQ` of the largest call so far. Every
/// call on the handle runs in its stream's order, so the next call's preparation starts after
/// the last call's kernels are done with it; a call as large as one before allocates nothing.
#[derive(Default)]
struct Workspace(Option<DeviceVec<f32>>);

impl Workspace {
    /// At least `len` floats, allocated (or grown) if the workspace holds fewer. In the
    /// simulator every float starts as NaN on each call, as in a new buffer, so that a kernel's
    /// missed write shows whether or not the buffer is reused.
    ///
    /// Errors: those of allocating (`Error::Capture` while capturing, out of memory).
    fn take(&mut self, gpu: &Gpu, len: usize) -> Result<&mut DeviceVec<f32>> {
        let buffer = match self.0.take() {
            Some(buffer) if buffer.len() >= len => self.0.insert(buffer),
            old => {
                // The old buffer goes first, so that the two are never held at once.
                drop(old);
                self.0.insert(gpu.alloc_poisoned(len, f32::NAN)?)
            }
        };
        buffer.poison_simulated(f32::NAN);
        Ok(buffer)
    }
}
