//! The decode-attention plan's kernels launched, through the launchers `#[kernel]` generates:
//! one table per element type ([`KvElement`]) from a plan to its kernels.

use half::{bf16, f16};
use kernels_gpu::decode_attention as family;

use crate::buffer::{DeviceVec, Element};
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::DeviceSlice;

/// The scalars of an attention launch: `(batch, q_len, heads, kv_heads, head_dim, shift,
/// max_blocks, scale)`.
pub(crate) type AttnScalars = (usize, usize, usize, usize, usize, u32, usize, f32);

/// The element types of a paged KV cache and its attention: [`bf16`] and [`f16`](struct@half::f16), each with its
/// kernels' instances.
pub trait KvElement: Element + sealed::Sealed {
    /// A NaN of the type: the simulator's fill for outputs a kernel writes whole.
    #[doc(hidden)]
    const NAN: Self;
    /// `kv_cache_append_*` (`VEC = false`) or `kv_cache_append_vec_*` (`VEC = true`).
    ///
    /// # Safety
    /// As the kernels': the buffers hold what their doc says for the scalars, the table's
    /// entries for the positions written are block ids of the pools.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn append(
        module: &Module,
        cfg: LaunchConfig,
        vectorised: bool,
        new_rows: (&DeviceVec<Self>, &DeviceVec<Self>),
        pools: (&mut DeviceVec<Self>, &mut DeviceVec<Self>),
        paging: (DeviceSlice<'_, i32>, DeviceSlice<'_, i32>),
        sizes: (usize, usize, usize, usize, u32, usize),
    ) -> Result<()>;

    /// `decode_attention_warp_*`.
    ///
    /// # Safety
    /// As the kernel's.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn warp(
        module: &Module,
        cfg: LaunchConfig,
        q: &DeviceVec<Self>,
        pools: (&DeviceVec<Self>, &DeviceVec<Self>),
        paging: (&DeviceVec<i32>, &DeviceVec<i32>),
        outputs: (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
        scalars: AttnScalars,
    ) -> Result<()>;

    /// `decode_attention_split_*_<head_dim>` then `decode_attention_combine_*`.
    ///
    /// # Safety
    /// As the kernels'; `head_dim` is 64, 128 or 256.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn split(
        module: &Module,
        cfgs: (LaunchConfig, LaunchConfig),
        q: &DeviceVec<Self>,
        pools: (&DeviceVec<Self>, &DeviceVec<Self>),
        paging: (&DeviceVec<i32>, &DeviceVec<i32>),
        partials: (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
        outputs: (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
        scalars: AttnScalars,
        splits: (usize, usize),
    ) -> Result<()>;

    /// `decode_attention_tiles_*_<head_dim>` then `decode_attention_tiles_combine_*`.
    ///
    /// # Safety
    /// As the kernels'; `head_dim` is 64, 128 or 256.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tiles(
        module: &Module,
        cfgs: (LaunchConfig, LaunchConfig),
        q: &DeviceVec<Self>,
        pools: (&DeviceVec<Self>, &DeviceVec<Self>),
        paging: (&DeviceVec<i32>, &DeviceVec<i32>),
        partials: (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
        outputs: (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
        scalars: AttnScalars,
        splits: (usize, usize),
    ) -> Result<()>;

    /// `decode_attention_tensor_*_<head_dim>` then `decode_attention_tiles_combine_*`.
    ///
    /// # Safety
    /// As the kernels'; `head_dim` is 64, 128 or 256.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tensor(
        module: &Module,
        cfgs: (LaunchConfig, LaunchConfig),
        q: &DeviceVec<Self>,
        pools: (&DeviceVec<Self>, &DeviceVec<Self>),
        paging: (&DeviceVec<i32>, &DeviceVec<i32>),
        partials: (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
        outputs: (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
        scalars: AttnScalars,
        splits: (usize, usize),
    ) -> Result<()>;

    /// `decode_attention_tensor_fused_*_<head_dim>`: one launch, its hand-off on `counters`.
    ///
    /// # Safety
    /// As the kernel's (the counters zero, used by no other launch in flight); `head_dim` is
    /// 64, 128 or 256.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tensor_fused(
        module: &Module,
        cfg: LaunchConfig,
        q: &DeviceVec<Self>,
        pools: (&DeviceVec<Self>, &DeviceVec<Self>),
        paging: (&DeviceVec<i32>, &DeviceVec<i32>),
        partials: (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
        counters: &mut DeviceVec<u32>,
        outputs: (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
        scalars: AttnScalars,
        splits: (usize, usize),
    ) -> Result<()>;
}

mod sealed {
    /// Keeps [`super::KvElement`] to the types with kernels.
    pub trait Sealed {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

/// [`KvElement`] for one element type from its kernels' instance names.
macro_rules! kv_element {
    (
        $t:ty,
        $append:ident,
        $append_vec:ident,
        $warp:ident,
        [$s64:ident, $s128:ident, $s256:ident],
        $combine:ident,
        [$t64:ident, $t128:ident, $t256:ident],
        $tcombine:ident,
        [$m64:ident, $m128:ident, $m256:ident],
        [$f64:ident, $f128:ident, $f256:ident]
    ) => {
        impl KvElement for $t {
            const NAN: Self = <$t>::NAN;
            unsafe fn append(
                module: &Module,
                cfg: LaunchConfig,
                vectorised: bool,
                (k_new, v_new): (&DeviceVec<Self>, &DeviceVec<Self>),
                (k_pool, v_pool): (&mut DeviceVec<Self>, &mut DeviceVec<Self>),
                (table, lens): (DeviceSlice<'_, i32>, DeviceSlice<'_, i32>),
                (batch, new, kv_heads, head_dim, shift, max_blocks): (usize, usize, usize, usize, u32, usize),
            ) -> Result<()> {
                // SAFETY: the caller's contract.
                unsafe {
                    if vectorised {
                        family::$append_vec::launch(
                            module, cfg, k_new, v_new, k_pool, v_pool, table, lens, batch, new, kv_heads,
                            head_dim, shift, max_blocks,
                        )
                    } else {
                        family::$append::launch(
                            module, cfg, k_new, v_new, k_pool, v_pool, table, lens, batch, new, kv_heads,
                            head_dim, shift, max_blocks,
                        )
                    }
                }
            }

            unsafe fn warp(
                module: &Module,
                cfg: LaunchConfig,
                q: &DeviceVec<Self>,
                (k_pool, v_pool): (&DeviceVec<Self>, &DeviceVec<Self>),
                (table, lens): (&DeviceVec<i32>, &DeviceVec<i32>),
                (out, lse): (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
                (batch, q_len, heads, kv_heads, head_dim, shift, max_blocks, scale): AttnScalars,
            ) -> Result<()> {
                // SAFETY: the caller's contract.
                unsafe {
                    family::$warp::launch(
                        module, cfg, q, k_pool, v_pool, table, lens, out, lse, batch, q_len, heads, kv_heads,
                        head_dim, shift, max_blocks, scale,
                    )
                }
            }

            unsafe fn split(
                module: &Module,
                (split, combine): (LaunchConfig, LaunchConfig),
                q: &DeviceVec<Self>,
                (k_pool, v_pool): (&DeviceVec<Self>, &DeviceVec<Self>),
                (table, lens): (&DeviceVec<i32>, &DeviceVec<i32>),
                (ml, acc): (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
                (out, lse): (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
                (batch, q_len, heads, kv_heads, head_dim, shift, max_blocks, scale): AttnScalars,
                (splits, chunk): (usize, usize),
            ) -> Result<()> {
                // SAFETY: the caller's contract; the combine reads the partials the split
                // wrote (in order on the one stream).
                unsafe {
                    match head_dim {
                        64 => family::$s64::launch(
                            module, split, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len, heads,
                            kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                        128 => family::$s128::launch(
                            module, split, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len, heads,
                            kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                        _ => family::$s256::launch(
                            module, split, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len, heads,
                            kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                    }
                    family::$combine::launch(
                        module,
                        combine,
                        &*ml,
                        &*acc,
                        out,
                        lse,
                        batch * q_len * heads,
                        splits,
                        head_dim,
                    )
                }
            }

            unsafe fn tiles(
                module: &Module,
                (tiles, combine): (LaunchConfig, LaunchConfig),
                q: &DeviceVec<Self>,
                (k_pool, v_pool): (&DeviceVec<Self>, &DeviceVec<Self>),
                (table, lens): (&DeviceVec<i32>, &DeviceVec<i32>),
                (ml, acc): (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
                (out, lse): (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
                (_batch, q_len, heads, kv_heads, head_dim, shift, max_blocks, scale): AttnScalars,
                (splits, chunk): (usize, usize),
            ) -> Result<()> {
                // SAFETY: the caller's contract; the combine reads the partials the first step
                // wrote: launched dependent on it (programmatic dependent launch, sm_90), it waits
                // for the first step's completion before reading them.
                unsafe {
                    match head_dim {
                        64 => family::$t64::launch(
                            module, tiles, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len, heads,
                            kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                        128 => family::$t128::launch(
                            module, tiles, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len, heads,
                            kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                        _ => family::$t256::launch(
                            module, tiles, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len, heads,
                            kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                    }
                    family::$tcombine::launch(
                        &module.dependent(),
                        combine,
                        &*ml,
                        &*acc,
                        out,
                        lse,
                        splits,
                        head_dim,
                    )
                }
            }

            unsafe fn tensor(
                module: &Module,
                (tensor, combine): (LaunchConfig, LaunchConfig),
                q: &DeviceVec<Self>,
                (k_pool, v_pool): (&DeviceVec<Self>, &DeviceVec<Self>),
                (table, lens): (&DeviceVec<i32>, &DeviceVec<i32>),
                (ml, acc): (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
                (out, lse): (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
                (_batch, q_len, heads, kv_heads, head_dim, shift, max_blocks, scale): AttnScalars,
                (splits, chunk): (usize, usize),
            ) -> Result<()> {
                // SAFETY: the caller's contract; the combine reads the partials the first step
                // wrote: launched dependent on it (programmatic dependent launch, sm_90), it waits
                // for the first step's completion before reading them.
                unsafe {
                    match head_dim {
                        64 => family::$m64::launch(
                            module, tensor, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len,
                            heads, kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                        128 => family::$m128::launch(
                            module, tensor, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len,
                            heads, kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                        _ => family::$m256::launch(
                            module, tensor, q, k_pool, v_pool, table, lens, &mut *ml, &mut *acc, q_len,
                            heads, kv_heads, shift, max_blocks, splits, chunk, scale,
                        )?,
                    }
                    family::$tcombine::launch(
                        &module.dependent(),
                        combine,
                        &*ml,
                        &*acc,
                        out,
                        lse,
                        splits,
                        head_dim,
                    )
                }
            }

            unsafe fn tensor_fused(
                module: &Module,
                cfg: LaunchConfig,
                q: &DeviceVec<Self>,
                (k_pool, v_pool): (&DeviceVec<Self>, &DeviceVec<Self>),
                (table, lens): (&DeviceVec<i32>, &DeviceVec<i32>),
                (ml, acc): (&mut DeviceVec<f32>, &mut DeviceVec<f32>),
                counters: &mut DeviceVec<u32>,
                (out, lse): (&mut DeviceVec<Self>, &mut DeviceVec<f32>),
                (_batch, q_len, heads, kv_heads, head_dim, shift, max_blocks, scale): AttnScalars,
                (splits, chunk): (usize, usize),
            ) -> Result<()> {
                // SAFETY: the caller's contract.
                unsafe {
                    match head_dim {
                        64 => family::$f64::launch(
                            module, cfg, q, k_pool, v_pool, table, lens, ml, acc, out, lse, counters, q_len,
                            heads, kv_heads, shift, max_blocks, splits, chunk, scale,
                        ),
                        128 => family::$f128::launch(
                            module, cfg, q, k_pool, v_pool, table, lens, ml, acc, out, lse, counters, q_len,
                            heads, kv_heads, shift, max_blocks, splits, chunk, scale,
                        ),
                        _ => family::$f256::launch(
                            module, cfg, q, k_pool, v_pool, table, lens, ml, acc, out, lse, counters, q_len,
                            heads, kv_heads, shift, max_blocks, splits, chunk, scale,
                        ),
                    }
                }
            }
        }
    };
}

kv_element!(
    bf16,
    kv_cache_append_bf16,
    kv_cache_append_vec_bf16,
    decode_attention_warp_bf16,
    [
        decode_attention_split_bf16_64,
        decode_attention_split_bf16_128,
        decode_attention_split_bf16_256
    ],
    decode_attention_combine_bf16,
    [
        decode_attention_tiles_bf16_64,
        decode_attention_tiles_bf16_128,
        decode_attention_tiles_bf16_256
    ],
    decode_attention_tiles_combine_bf16,
    [
        decode_attention_tensor_bf16_64,
        decode_attention_tensor_bf16_128,
        decode_attention_tensor_bf16_256
    ],
    [
        decode_attention_tensor_fused_bf16_64,
        decode_attention_tensor_fused_bf16_128,
        decode_attention_tensor_fused_bf16_256
    ]
);
kv_element!(
    f16,
    kv_cache_append_f16,
    kv_cache_append_vec_f16,
    decode_attention_warp_f16,
    [
        decode_attention_split_f16_64,
        decode_attention_split_f16_128,
        decode_attention_split_f16_256
    ],
    decode_attention_combine_f16,
    [
        decode_attention_tiles_f16_64,
        decode_attention_tiles_f16_128,
        decode_attention_tiles_f16_256
    ],
    decode_attention_tiles_combine_f16,
    [
        decode_attention_tensor_f16_64,
        decode_attention_tensor_f16_128,
        decode_attention_tensor_f16_256
    ],
    [
        decode_attention_tensor_fused_f16_64,
        decode_attention_tensor_fused_f16_128,
        decode_attention_tensor_fused_f16_256
    ]
);
