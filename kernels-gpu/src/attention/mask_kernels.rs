//! [`attention_mask_kernels!`](crate::attention_mask_kernels): the attention forward's and
//! backward's kernels instantiated with a mask of a kernel crate's own, in that crate.

/// Declares, in a kernel crate of your own, the attention kernels instantiated with your mask:
/// `attention_mask_kernels!(name, MyMask)` makes a module `name` holding the forward's rows rung
/// (`name::attention_rows`, every head dim), its `mma.sync` rung (`name::attention_flash`, head
/// dims 64 and 128) and its Hopper rung (`name::attention_wgmma`, sm_90a: the ping-pong at head
/// dims 64 and 128 and one tile at a time at 256), each for bf16 and f16: 12 PTX entries on
/// sm_90a (`attention_rows_bf16_mymask`, `attention_flash_bf16_64_mymask`,
/// `attention_wgmma_bf16_d64_pingpong_mymask`, ...; 6 elsewhere), the same kernels the library
/// runs with its general masks, and `name::Mask`, the mask's type. The host picks among them as
/// it does for the library's masks: `gpukern::attention_mask_kernels!(KERNELS,
/// my_kernels::name)` gathers their launchers for `AttentionMask::Custom`.
///
/// `attention_mask_kernels!(name, MyMask, backward)` adds the backward's kernels: its rows rung
/// (`name::attention_bwd_rows_dq`, `name::attention_bwd_rows_dkdv`, every head dim), its
/// `mma.sync` rung (`name::attention_bwd_flash_dq`, `name::attention_bwd_flash_dkdv`, head dims
/// 64 and 128) and its one-kernel Hopper rung (`name::attention_bwd_wgmma_fused_masked`, sm_90a,
/// head dims 64 and 128, on the mask's keys: `KeysOf<MyMask>`), 16 entries more on sm_90a, 12
/// elsewhere (each one PTX that the driver compiles when a program loads the module: a crate that
/// runs no backward leaves them out); `gpukern::attention_mask_kernels!(KERNELS,
/// my_kernels::name, backward)` gathers them too. The host runs the one-kernel rung only for a
/// mask whose type says `KEY_ROWS_EXACT` and modifies no score.
///
/// The backward multiplies each pair's gradient by the mask's
/// [`score_grad`](crate::gpu::attention::Mask::score_grad), 1 by default: a mask whose
/// [`score`](crate::gpu::attention::Mask::score) is not the score plus a bias must give its own
/// derivative, or its gradients are wrong.
///
/// `MyMask` is a type name in scope (it names the entries, lowercased: two masks of one crate
/// need two names) implementing `gpukern_device::attention::Mask`. The crate depends on
/// `gpukern-device` and on `kernels-gpu` with its `attention-generic` feature (and without
/// `default-features`: the library's own entries stay out of its PTX).
///
/// ```ignore
/// use gpukern_device::attention::{Mask, MaskArgs, MaskShape};
/// #[derive(Clone, Copy)]
/// pub struct Banded { width: usize }
/// impl Mask for Banded { /* new, keep, keys, ... */ }
/// kernels_gpu::attention_mask_kernels!(banded, Banded); // or (banded, Banded, backward)
/// ```
#[macro_export]
macro_rules! attention_mask_kernels {
    ($name:ident, $mask:ident) => {
        $crate::attention_mask_kernels!(@module $name, $mask, {});
    };
    ($name:ident, $mask:ident, backward) => {
        $crate::attention_mask_kernels!(@module $name, $mask, {
            $crate::attention_mask_kernels!(@backward $mask);
        });
    };
    (@module $name:ident, $mask:ident, { $($backward:tt)* }) => {
        /// The attention kernels with the mask
        #[doc = concat!("[`", stringify!($mask), "`]")]
        /// (`kernels_gpu::attention_mask_kernels!`).
        #[allow(clippy::too_many_arguments)]
        pub mod $name {
            #[allow(unused_imports)]
            use super::$mask;
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
            #[allow(unused_imports)]
            use $crate::attention::wgmma::{
                forward_barriers, OneTile, PingPong, WgmmaElement, WgmmaHead, WgmmaSchedule, D128, D256, D64,
            };
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
            #[allow(unused_imports)]
            use $crate::attention::backward_wgmma::{BwdWgmmaElement, BwdWgmmaHead};
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
            #[allow(unused_imports)]
            use $crate::attention::backward_wgmma_fused::fused_barriers;
            #[allow(unused_imports)]
            use $crate::gpu::attention::KeysOf;
            #[allow(unused_imports)]
            use $crate::attention::{AttentionElement, BWD_FLASH_BLOCK, BWD_ROWS_BLOCK, FLASH_BLOCK, ROWS_BLOCK};
            #[allow(unused_imports)]
            use $crate::gpu::attention::Mask as MaskTrait;
            #[allow(unused_imports)]
            use $crate::gpu::{bf16, f16};
            use $crate::kernel;

            /// The mask these kernels are instantiated with.
            pub type Mask = $mask;

            /// `kernels_gpu::attention::attention_rows` with this mask.
            ///
            /// # Safety
            /// That kernel's contract.
            #[kernel(instances((bf16, $mask), (f16, $mask)), block(ROWS_BLOCK), barriers(0))]
            pub unsafe fn attention_rows<T: AttentionElement, M: MaskTrait>(
                q: *const T,
                k: *const T,
                v: *const T,
                o: *mut T,
                lse: *mut f32,
                rows: usize,
                q_len: usize,
                kv_len: usize,
                heads: usize,
                group: usize,
                head_dim: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                scale_log2: f32,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::attention_rows::<T, M>(
                        q, k, v, o, lse, rows, q_len, kv_len, heads, group, head_dim, q_sb, q_ss, q_sh, k_sb,
                        k_ss, k_sh, v_sb, v_ss, v_sh, scale_log2, mask_data, mask_int, mask_float,
                    )
                }
            }

            /// `kernels_gpu::attention::attention_flash` with this mask.
            ///
            /// # Safety
            /// That kernel's contract.
            #[kernel(
                        instances((bf16, 64, $mask), (bf16, 128, $mask), (f16, 64, $mask), (f16, 128, $mask)),
                        block(FLASH_BLOCK),
                        barriers(2)
                    )]
            pub unsafe fn attention_flash<T: AttentionElement, const D: usize, M: MaskTrait>(
                q: *const T,
                k: *const T,
                v: *const T,
                o: *mut T,
                lse: *mut f32,
                q_len: usize,
                kv_len: usize,
                heads: usize,
                group: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                scale_log2: f32,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::attention_flash::<T, D, M>(
                        q, k, v, o, lse, q_len, kv_len, heads, group, q_sb, q_ss, q_sh, k_sb, k_ss, k_sh,
                        v_sb, v_ss, v_sh, scale_log2, mask_data, mask_int, mask_float,
                    )
                }
            }

            /// `kernels_gpu::attention::wgmma::attention_wgmma` with this mask (sm_90a).
            ///
            /// # Safety
            /// That kernel's contract.
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
            #[kernel(
                        launch_bounds(384, 1),
                        instances(
                            (bf16, D64, PingPong, $mask),
                            (bf16, D128, PingPong, $mask),
                            (bf16, D256, OneTile, $mask),
                            (f16, D64, PingPong, $mask),
                            (f16, D128, PingPong, $mask),
                            (f16, D256, OneTile, $mask)
                        ),
                        barriers(forward_barriers(S::NAMED_TURNS))
                    )]
            pub unsafe fn attention_wgmma<T: WgmmaElement, H: WgmmaHead, S: WgmmaSchedule, M: MaskTrait>(
                maps: *const u64,
                q: *const T,
                k: *const T,
                v: *const T,
                o: *mut T,
                lse: *mut f32,
                q_len: usize,
                kv_len: usize,
                heads: usize,
                group: usize,
                batch: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                scale_log2: f32,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                const {
                    assert!(
                        $crate::attention::wgmma::WGMMA_BLOCK == 384,
                        "launch_bounds above is the library's block"
                    )
                };
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::wgmma::attention_wgmma::<T, H, S, M>(
                        maps, q, k, v, o, lse, q_len, kv_len, heads, group, batch, q_sb, q_ss, q_sh, k_sb,
                        k_ss, k_sh, v_sb, v_ss, v_sh, scale_log2, mask_data, mask_int, mask_float,
                    )
                }
            }

            $($backward)*
        }
    };
    (@backward $mask:ident) => {
            /// `kernels_gpu::attention::attention_bwd_rows_dq` with this mask (the backward's
            /// rows rung, `dQ`).
            ///
            /// # Safety
            /// That kernel's contract.
            #[kernel(instances((bf16, $mask), (f16, $mask)), block(BWD_ROWS_BLOCK), barriers(0))]
            pub unsafe fn attention_bwd_rows_dq<T: AttentionElement, M: MaskTrait>(
                q: *const T,
                k: *const T,
                v: *const T,
                d_o: *const T,
                lse2: *const f32,
                delta: *const f32,
                dq: *mut T,
                rows: usize,
                q_len: usize,
                kv_len: usize,
                q_pad: usize,
                heads: usize,
                group: usize,
                head_dim: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                do_sb: usize,
                do_ss: usize,
                do_sh: usize,
                scale_log2: f32,
                scale: f32,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::attention_bwd_rows_dq::<T, M>(
                        q, k, v, d_o, lse2, delta, dq, rows, q_len, kv_len, q_pad, heads, group, head_dim, q_sb,
                        q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh, scale_log2, scale,
                        mask_data, mask_int, mask_float,
                    )
                }
            }

            /// `kernels_gpu::attention::attention_bwd_rows_dkdv` with this mask (the backward's
            /// rows rung, `dK` and `dV`).
            ///
            /// # Safety
            /// That kernel's contract.
            #[kernel(instances((bf16, $mask), (f16, $mask)), block(BWD_ROWS_BLOCK), barriers(0))]
            pub unsafe fn attention_bwd_rows_dkdv<T: AttentionElement, M: MaskTrait>(
                q: *const T,
                k: *const T,
                v: *const T,
                d_o: *const T,
                lse2: *const f32,
                delta: *const f32,
                dk: *mut T,
                dv: *mut T,
                key_rows: usize,
                q_len: usize,
                kv_len: usize,
                q_pad: usize,
                kv_heads: usize,
                group: usize,
                head_dim: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                do_sb: usize,
                do_ss: usize,
                do_sh: usize,
                scale_log2: f32,
                scale: f32,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::attention_bwd_rows_dkdv::<T, M>(
                        q, k, v, d_o, lse2, delta, dk, dv, key_rows, q_len, kv_len, q_pad, kv_heads, group,
                        head_dim, q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh,
                        scale_log2, scale, mask_data, mask_int, mask_float,
                    )
                }
            }

            /// `kernels_gpu::attention::attention_bwd_flash_dq` with this mask (the backward's
            /// `mma.sync` rung, `dQ`).
            ///
            /// # Safety
            /// That kernel's contract (`causal` is not read: the mask is).
            #[kernel(
                        instances((bf16, 64, $mask), (bf16, 128, $mask), (f16, 64, $mask), (f16, 128, $mask)),
                        block(BWD_FLASH_BLOCK),
                        barriers(2)
                    )]
            pub unsafe fn attention_bwd_flash_dq<T: AttentionElement, const D: usize, M: MaskTrait>(
                q: *const T,
                k: *const T,
                v: *const T,
                d_o: *const T,
                lse2: *const f32,
                delta: *const f32,
                dq: *mut T,
                q_len: usize,
                kv_len: usize,
                q_pad: usize,
                group: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                do_sb: usize,
                do_ss: usize,
                do_sh: usize,
                scale_log2: f32,
                scale: f32,
                causal: bool,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::attention_bwd_flash_dq::<T, D, M>(
                        q, k, v, d_o, lse2, delta, dq, q_len, kv_len, q_pad, group, q_sb, q_ss, q_sh, k_sb, k_ss,
                        k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh, scale_log2, scale, causal, mask_data,
                        mask_int, mask_float,
                    )
                }
            }

            /// `kernels_gpu::attention::attention_bwd_flash_dkdv` with this mask (the backward's
            /// `mma.sync` rung, `dK` and `dV`).
            ///
            /// # Safety
            /// That kernel's contract (`causal` is not read: the mask is).
            #[kernel(
                        instances((bf16, 64, $mask), (bf16, 128, $mask), (f16, 64, $mask), (f16, 128, $mask)),
                        block(BWD_FLASH_BLOCK),
                        barriers(2)
                    )]
            pub unsafe fn attention_bwd_flash_dkdv<T: AttentionElement, const D: usize, M: MaskTrait>(
                q: *const T,
                k: *const T,
                v: *const T,
                d_o: *const T,
                lse2: *const f32,
                delta: *const f32,
                dk: *mut T,
                dv: *mut T,
                q_len: usize,
                kv_len: usize,
                q_pad: usize,
                group: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                do_sb: usize,
                do_ss: usize,
                do_sh: usize,
                scale_log2: f32,
                scale: f32,
                causal: bool,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::attention_bwd_flash_dkdv::<T, D, M>(
                        q, k, v, d_o, lse2, delta, dk, dv, q_len, kv_len, q_pad, group, q_sb, q_ss, q_sh, k_sb,
                        k_ss, k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh, scale_log2, scale, causal, mask_data,
                        mask_int, mask_float,
                    )
                }
            }

            /// `kernels_gpu::attention::backward_wgmma_fused::attention_bwd_wgmma_fused_masked`
            /// with this mask's keys (`KeysOf`: no score modification), the backward's one-kernel
            /// Hopper rung (sm_90a), which the host runs only for a mask whose type says
            /// `KEY_ROWS_EXACT` and modifies no score.
            ///
            /// # Safety
            /// That kernel's contract.
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
            #[kernel(
                        launch_bounds(384, 1),
                        instances(
                            (bf16, D64, KeysOf<$mask>),
                            (bf16, D128, KeysOf<$mask>),
                            (f16, D64, KeysOf<$mask>),
                            (f16, D128, KeysOf<$mask>)
                        ),
                        barriers(fused_barriers(true))
                    )]
            pub unsafe fn attention_bwd_wgmma_fused_masked<T: BwdWgmmaElement, H: BwdWgmmaHead, M: MaskTrait>(
                maps: *const u64,
                q: *const T,
                k: *const T,
                v: *const T,
                d_o: *const T,
                lse2: *const f32,
                delta: *const f32,
                dk: *mut T,
                dv: *mut T,
                dq_accum: *mut f32,
                q_len: usize,
                kv_len: usize,
                heads: usize,
                group: usize,
                batch: usize,
                q_sb: usize,
                q_ss: usize,
                q_sh: usize,
                k_sb: usize,
                k_ss: usize,
                k_sh: usize,
                v_sb: usize,
                v_ss: usize,
                v_sh: usize,
                do_sb: usize,
                do_ss: usize,
                do_sh: usize,
                scale_log2: f32,
                scale: f32,
                mask_data: *const i32,
                mask_int: usize,
                mask_float: f32,
            ) {
                const {
                    assert!(
                        $crate::attention::backward_wgmma::BWD_WGMMA_BLOCK == 384,
                        "launch_bounds above is the library's block"
                    )
                };
                // SAFETY: the kernel's contract, forwarded.
                unsafe {
                    $crate::attention::backward_wgmma_fused::attention_bwd_wgmma_fused_masked::<T, H, M>(
                        maps, q, k, v, d_o, lse2, delta, dk, dv, dq_accum, q_len, kv_len, heads, group, batch,
                        q_sb, q_ss, q_sh, k_sb, k_ss, k_sh, v_sb, v_ss, v_sh, do_sb, do_ss, do_sh, scale_log2,
                        scale, mask_data, mask_int, mask_float,
                    )
                }
            }
    };
}
