//! [`attention_mask_kernels!`](crate::attention_mask_kernels): the attention forward's kernels
//! instantiated with a mask of a kernel crate's own, in that crate.

/// Declares, in a kernel crate of your own, the attention forward's kernels instantiated with your
/// mask: `attention_mask_kernels!(name, MyMask)` makes a module `name` holding the rows rung
/// (`name::attention_rows`, every head dim), the `mma.sync` rung (`name::attention_flash`, head
/// dims 64 and 128) and the Hopper rung (`name::attention_wgmma`, sm_90a: the ping-pong at head
/// dims 64 and 128 and one tile at a time at 256), each for bf16 and f16: twelve PTX entries on
/// sm_90a (`attention_rows_bf16_mymask`, `attention_flash_bf16_64_mymask`,
/// `attention_wgmma_bf16_d64_pingpong_mymask`, ...; six elsewhere), the same kernels
/// the library runs with its general masks, and `name::Mask`, the mask's type. The host picks
/// among them as it does for the library's masks: `gpukern::attention_mask_kernels!(KERNELS,
/// my_kernels::name)` gathers their launchers for `AttentionMask::Custom`.
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
/// kernels_gpu::attention_mask_kernels!(banded, Banded);
/// ```
#[macro_export]
macro_rules! attention_mask_kernels {
    ($name:ident, $mask:ident) => {
        /// The attention forward's kernels with the mask
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
            #[allow(unused_imports)]
            use $crate::attention::{AttentionElement, FLASH_BLOCK, ROWS_BLOCK};
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
        }
    };
}
