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
    DQ_CONVERT_BLOCK, bwd_wgmma_dq_accum_len, bwd_wgmma_fused_shared_bytes,
};
use kernels_gpu::attention::wgmma::WGMMA_BOX_ROWS;
use kernels_gpu::attention::{
    BWD_FLASH_BLOCK, BWD_FLASH_TILE, BWD_Q_PAD, BWD_ROWS_BLOCK, BWD_ROWS_PER_BLOCK, bwd_flash_shared_bytes,
};
use plan::{BackwardFacts, BackwardPlan};

use super::{AttentionElement, AttentionOptions, AttentionTensor, OP, Operands, attention_shape};
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
    /// Rules: the forward's; a row that sees no key contributes nothing; keys no row sees get
    /// zero gradients. Allocates the gradients and a workspace of 8 bytes per query row (the
    /// one-kernel rung 4 bytes per element of `dq` more, its f32 `dQ`, rows padded to 64).
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
    /// with `deterministic`; the fused rung at another head dim or unaligned).
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
    /// contiguous, every element written). Allocates only the workspace (8 bytes per query row).
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
        if !ops.mask.plain() {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!(
                    "the backward takes no mask but the causal one, not {}",
                    options.mask.name()
                ),
            });
        }
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
        let facts = BackwardFacts {
            aligned,
            wgmma: self.has_wgmma(),
            tensor_maps: s.kv_len > 0
                && [&ops.q, &ops.k, &ops.v, d_out]
                    .iter()
                    .all(|t| t.map_4d_ok(WGMMA_BOX_ROWS))
                && [&ops.q, d_out].iter().all(|t| t.map_4d_ok(BWD_WGMMA_Q_TILE)),
        };
        let plan = BackwardPlan::choose(options.algorithm, s.head_dim, facts, options.deterministic)
            .map_err(|detail| Error::InvalidArgument { op: OP, detail })?;
        let key_rows = s.batch * s.kv_heads * s.kv_len;
        if s.rows() == 0 && key_rows == 0 {
            return Ok(());
        }

        // Each row's `lse2` and `delta`, its (batch, head)'s rows padded to `BWD_Q_PAD`, written
        // whole by the preparation (no memset before it).
        let q_pad = s.q_len.div_ceil(BWD_Q_PAD) * BWD_Q_PAD;
        let padded_rows = s.batch * s.heads * q_pad;
        let mut lse2 = self.alloc_poisoned(checked_len_of::<f32>(OP, &[padded_rows])?, f32::NAN)?;
        let mut delta = self.alloc_poisoned(padded_rows, f32::NAN)?;
        // The one-kernel rung's f32 `dQ` (its kernel's fragment order within each padded row
        // block), one row of `head_dim` floats per padded row, zeroed by the preparation; empty
        // for the other rungs.
        let accum_rows = match plan {
            BackwardPlan::WgmmaFused { .. } => padded_rows,
            _ => 0,
        };
        let accum_len = checked_len_of::<f32>(OP, &[accum_rows, s.head_dim])?;
        debug_assert!(
            accum_rows == 0 || accum_len == bwd_wgmma_dq_accum_len(s.batch, s.heads, q_pad, s.head_dim)
        );
        let mut dq_accum = self.alloc_poisoned(accum_len, f32::NAN)?;
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
                BWD_ROWS_PER_BLOCK as usize,
                BWD_ROWS_BLOCK,
                0,
                &limits,
            )?;
            let [ob, os, oh] = out.strides;
            let [db, ds, dh] = d_out.strides;
            // SAFETY: `out` and `d_out` have q's dims (checked) and reach only elements of their
            // buffers (`AttentionTensor::strided`); `lse` holds `rows` floats; `lse2` and
            // `delta` `padded_rows`, `dq_accum` `accum_rows * head_dim` with `accum_rows` 0 or
            // `padded_rows`; `cfg` covers `padded_rows` warps.
            unsafe {
                (table.prep)(
                    &library,
                    cfg,
                    out.view()?,
                    launch.d_out,
                    lse.view(),
                    lse2.view_mut(),
                    delta.view_mut(),
                    dq_accum.view_mut(),
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
                )?
            };
        }
        let stats = (lse2.view(), delta.view());
        match plan {
            BackwardPlan::Rows => {
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
                        (table.rows_dq)(
                            &library,
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
                            ops.causal,
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
                        (table.rows_dkdv)(
                            &library,
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
                            ops.causal,
                        )?
                    };
                }
            }
            BackwardPlan::Flash { head_dim } => {
                let which = usize::from(head_dim == 128);
                let shared = bwd_flash_shared_bytes(head_dim) as u32;
                let opted = limits.opted_in();
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
                        (table.flash_dq[which])(
                            &library,
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
                        (table.flash_dkdv[which])(
                            &library,
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
                    // nothing else touches it during the launch.
                    unsafe {
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
                            dq_accum.view_mut(),
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
                if s.rows() > 0 {
                    let pairs = s.out_len() / 2;
                    let cfg = LaunchConfig::linear(OP, pairs, DQ_CONVERT_BLOCK, &limits)?;
                    // SAFETY: `dq_accum` holds the buffer's floats, written by the launch before
                    // on the same stream; `dq` holds `2 pairs` elements (checked), 16-byte
                    // aligned (the plan's fact); head dim 64 or 128, `q_pad >= q_len` a multiple
                    // of 64; `cfg` covers `pairs` threads.
                    unsafe {
                        (table.wgmma_dq_convert)(
                            &library,
                            cfg,
                            dq_accum.view(),
                            dq.view_mut(),
                            pairs,
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
