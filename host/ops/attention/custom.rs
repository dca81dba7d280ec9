//! A mask of your own ([`AttentionMask::Custom`](super::AttentionMask::Custom)): a type of your
//! kernel crate implementing `gpukern_device::attention::Mask`, compiled into the attention
//! forward's kernels there (`kernels_gpu::attention_mask_kernels!`), whose launchers
//! [`attention_mask_kernels!`](crate::attention_mask_kernels) gathers ([`MaskKernels`]) and
//! whose parameters a call gives ([`CustomMask`]).

use half::{bf16, f16};

use super::kernels::{FlashLauncher, RowsLauncher, WgmmaLauncher};
use crate::buffer::DeviceVec;
use crate::module::PtxSet;

/// One element type's launchers of a mask's kernels (made by
/// [`attention_mask_kernels!`](crate::attention_mask_kernels)).
#[doc(hidden)]
pub struct MaskLaunchers<T: 'static> {
    /// `<mask>::attention_rows::<T, M>`.
    pub rows: RowsLauncher<T>,
    /// `<mask>::attention_flash::<T, 64, M>` and `<mask>::attention_flash::<T, 128, M>`.
    pub flash: [FlashLauncher<T>; 2],
    /// `<mask>::attention_wgmma::<T, D64, PingPong, M>`, `<T, D128, PingPong, M>` and
    /// `<T, D256, OneTile, M>`.
    pub wgmma: [WgmmaLauncher<T>; 3],
}

/// The attention forward's kernels instantiated with a mask of your own, in your kernel crate:
/// `static BANDED: MaskKernels = gpukern::attention_mask_kernels!(KERNELS, my_kernels::banded);`
/// where `KERNELS` is that crate's PTX (`gpukern::include_ptx!`) and `my_kernels::banded` the
/// module `kernels_gpu::attention_mask_kernels!(banded, Banded)` declared there. The same plan
/// runs them as the library's general masks: the rows rung, the `mma.sync` rung at head dims 64
/// and 128, the Hopper rung (the ping-pong at 64 and 128, one tile at a time at 256).
pub struct MaskKernels {
    /// The mask's name (the module's), the bench's `mask` key.
    pub(crate) name: &'static str,
    /// The kernel crate's PTX, loaded on the call's device at its first call.
    pub(crate) ptx: &'static PtxSet,
    pub(crate) bf16: MaskLaunchers<bf16>,
    pub(crate) f16: MaskLaunchers<f16>,
}

impl MaskKernels {
    /// What [`attention_mask_kernels!`](crate::attention_mask_kernels) builds.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        ptx: &'static PtxSet,
        bf16: MaskLaunchers<bf16>,
        f16: MaskLaunchers<f16>,
    ) -> Self {
        MaskKernels { name, ptx, bf16, f16 }
    }

    /// The mask's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Gathers the launchers of the attention kernels a kernel crate declared with
/// `kernels_gpu::attention_mask_kernels!(name, MyMask)` into a [`MaskKernels`]:
/// `gpukern::attention_mask_kernels!(PTX, path::to::name)`, `PTX` the crate's
/// `gpukern::include_ptx!` set, the path that module's. A `const` expression, so it may be a
/// `static`.
#[macro_export]
macro_rules! attention_mask_kernels {
    ($ptx:expr, $($module:ident)::+) => {
        $crate::MaskKernels::new(
            stringify!($($module)::+),
            &$ptx,
            $crate::attention_mask_kernels!(@one $crate::bf16, $($module)::+),
            $crate::attention_mask_kernels!(@one $crate::f16, $($module)::+),
        )
    };
    (@one $t:ty, $($module:ident)::+) => {
        $crate::MaskLaunchers::<$t> {
            rows: $($module)::+::attention_rows::<$t, $($module)::+::Mask>::launch_views::<$crate::Module>,
            flash: [
                $($module)::+::attention_flash::<$t, 64, $($module)::+::Mask>::launch_views::<$crate::Module>,
                $($module)::+::attention_flash::<$t, 128, $($module)::+::Mask>::launch_views::<$crate::Module>,
            ],
            wgmma: [
                $($module)::+::attention_wgmma::<
                    $t,
                    $crate::kernels::attention::wgmma::D64,
                    $crate::kernels::attention::wgmma::PingPong,
                    $($module)::+::Mask,
                >::launch_views::<$crate::Module>,
                $($module)::+::attention_wgmma::<
                    $t,
                    $crate::kernels::attention::wgmma::D128,
                    $crate::kernels::attention::wgmma::PingPong,
                    $($module)::+::Mask,
                >::launch_views::<$crate::Module>,
                $($module)::+::attention_wgmma::<
                    $t,
                    $crate::kernels::attention::wgmma::D256,
                    $crate::kernels::attention::wgmma::OneTile,
                    $($module)::+::Mask,
                >::launch_views::<$crate::Module>,
            ],
        }
    };
}

/// The CPU reference's form of a custom mask: whether row `q` of head `h` of batch `b` sees key
/// `kv`.
pub type KeepReference<'a> = &'a (dyn Fn(usize, usize, usize, usize) -> bool + Sync);

/// The CPU reference's form of a custom score modification: the score `s` (already scaled) of
/// row `q`, head `h`, batch `b`, key `kv`, modified.
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
