//! The attention plan's kernels launched, through the launchers `#[kernel]` generates: one
//! table per element type (bf16, f16) from a rung to its kernel.

use gpukern_device::attention::Shipped;
use half::{bf16, f16};
use kernels_gpu::attention as family;

use super::backward::kernels::{
    FlashDkdvLauncher as BwdFlashDkdvLauncher, FlashDqLauncher as BwdFlashDqLauncher,
    RowsDkdvLauncher as BwdRowsDkdvLauncher, RowsDqLauncher as BwdRowsDqLauncher,
    WgmmaFusedMaskedLauncher as BwdWgmmaFusedMaskedLauncher,
};
use super::plan::AttentionShape;
use crate::buffer::{DeviceVec, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;
use crate::module::{Module, PtxSet};
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The launcher of `attention_rows_*`: `(q, k, v, o, lse, rows, q_len, kv_len, heads, group,
/// head_dim, q strides (3), k strides (3), v strides (3), scale_log2, mask data, mask int,
/// mask float)`.
pub type RowsLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    DeviceSlice<'a, i32>,
    usize,
    f32,
) -> Result<()>;

/// The launcher of `attention_flash_*`: `(q, k, v, o, lse, q_len, kv_len, heads, group,
/// q strides (3), k strides (3), v strides (3), scale_log2, mask data, mask int, mask float)`.
pub type FlashLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    DeviceSlice<'a, i32>,
    usize,
    f32,
) -> Result<()>;

/// The launcher of `attention_wgmma_*`: `(maps, q, k, v, o, lse, q_len, kv_len, heads, group,
/// batch, q strides (3), k strides (3), v strides (3), scale_log2, mask data, mask int, mask
/// float)`, `maps` the three
/// tensor maps.
pub type WgmmaLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, u64>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSliceMut<'a, T>,
    DeviceSliceMut<'a, f32>,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    DeviceSlice<'a, i32>,
    usize,
    f32,
) -> Result<()>;

/// One element type's attention kernels. The fused rungs' tables hold three instances each,
/// indexed by the mask: no mask, the causal mask, and `General` (every shipped
/// mask, chosen at run time by the kernel's mask integer); the rows rung has the `General`
/// instance only, the one-tile `wgmma` schedule `CausalOrNot` (no mask or causal) only.
pub struct AttentionKernels<T: 'static> {
    /// `attention_rows_*`.
    pub(crate) rows: RowsLauncher<T>,
    /// `attention_flash_d64_*`, `attention_flash_causal_d64_*`, `attention_flash_general_d64_*`.
    pub(crate) flash64: [FlashLauncher<T>; INSTANCES],
    /// The same at head dim 128.
    pub(crate) flash128: [FlashLauncher<T>; INSTANCES],
    /// `attention_wgmma_d64_*` (one tile at a time, no mask or causal).
    pub(crate) wgmma64: WgmmaLauncher<T>,
    /// `attention_wgmma_d128_*`.
    pub(crate) wgmma128: WgmmaLauncher<T>,
    /// `attention_wgmma_pingpong_d64_*`, `..._causal_d64_*`, `..._general_d64_*`.
    pub(crate) wgmma64_ping_pong: [WgmmaLauncher<T>; INSTANCES],
    /// The same at head dim 128.
    pub(crate) wgmma128_ping_pong: [WgmmaLauncher<T>; INSTANCES],
    /// `attention_wgmma_three_d64_*` and `attention_wgmma_three_causal_d64_*` (three consumer
    /// warpgroups, no mask or the causal one).
    pub(crate) wgmma64_three: [WgmmaLauncher<T>; 2],
    /// `attention_wgmma_d256_*` (one tile at a time, no mask or causal) and
    /// `attention_wgmma_general_d256_*` (one tile at a time, `General`).
    pub(crate) wgmma256: [WgmmaLauncher<T>; 2],
    /// `attention_wgmma_pingpong_d256_*`, `..._causal_d256_*` (no `General` ping-pong at head
    /// dim 256: the plan runs its masks one tile at a time).
    pub(crate) wgmma256_ping_pong: [WgmmaLauncher<T>; 2],
    /// The backward's kernels.
    pub(crate) backward: &'static super::backward::kernels::BackwardKernels<T>,
}

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
    /// The backward's, where the kernel crate declared them (`attention_mask_kernels!(name,
    /// Mask, backward)`).
    pub backward: Option<MaskBackwardLaunchers<T>>,
}

/// One element type's launchers of a mask's backward kernels (made by
/// [`attention_mask_kernels!`](crate::attention_mask_kernels) with `backward`).
#[doc(hidden)]
pub struct MaskBackwardLaunchers<T: 'static> {
    /// The rows rung: `<mask>::attention_bwd_rows_dq::<T, M>`.
    pub rows_dq: BwdRowsDqLauncher<T>,
    /// `<mask>::attention_bwd_rows_dkdv::<T, M>`.
    pub rows_dkdv: BwdRowsDkdvLauncher<T>,
    /// The `mma.sync` rung: `<mask>::attention_bwd_flash_dq::<T, 64, M>` and `<T, 128, M>`.
    pub flash_dq: [BwdFlashDqLauncher<T>; 2],
    /// `<mask>::attention_bwd_flash_dkdv::<T, 64, M>` and `<T, 128, M>`.
    pub flash_dkdv: [BwdFlashDkdvLauncher<T>; 2],
    /// The one-kernel Hopper rung: `<mask>::attention_bwd_wgmma_fused_masked::<T, D64,
    /// KeysOf<M>>` and `<T, D128, KeysOf<M>>` (sm_90a).
    pub wgmma_fused: [BwdWgmmaFusedMaskedLauncher<T>; 2],
}

/// The attention kernels instantiated with a mask of your own, in your kernel crate
/// (`crate::CustomMask` gives a call its parameters):
/// `static BANDED: MaskKernels = gpukern::attention_mask_kernels!(KERNELS, my_kernels::banded);`
/// where `KERNELS` is that crate's PTX (`gpukern::include_ptx!`) and `my_kernels::banded` the
/// module `kernels_gpu::attention_mask_kernels!(banded, Banded)` declared there. The same plan
/// runs them as the library's general masks: the rows rung, the `mma.sync` rung at head dims 64
/// and 128, the Hopper rung (the ping-pong at 64 and 128, one tile at a time at 256); a mask whose
/// type says `CONTIGUOUS` (and neither `SCORE_MOD` nor `!MASKS`) on the persistent walk up to
/// 4096 keys, as the causal mask (the prefix-LM mask of `examples/user-kernels` ran 552.1-560.4
/// TFLOP/s there against 521.9-527.3 with a block per tile on an H100,
/// `bench/experiments/user-kernels/user-mask-persistent-ef7ae94-{1,2,3}.jsonl`). The backward,
/// where the crate declared it and the macro gathers it (`backward` after the module's path in
/// both): the rows rung, the `mma.sync` rung at 64 and 128, and the one-kernel Hopper rung at 64
/// and 128 for a mask whose type says `KEY_ROWS_EXACT` and modifies no score.
pub struct MaskKernels {
    /// The mask's name (the module's), the bench's `mask` key.
    pub(crate) name: &'static str,
    /// The kernel crate's PTX, loaded on the call's device at its first call.
    pub(crate) ptx: &'static PtxSet,
    pub(crate) bf16: MaskLaunchers<bf16>,
    pub(crate) f16: MaskLaunchers<f16>,
    /// The mask's type says `CONTIGUOUS` and neither `SCORE_MOD` nor `!MASKS`: the Hopper rung's
    /// persistent walk snakes for it (`Work::walk`), and the plan runs it there as the causal mask.
    pub(crate) walks: bool,
    /// The mask's type says `KEY_ROWS_EXACT` and not `SCORE_MOD`: the backward's one-kernel
    /// Hopper rung takes it (its `KeysOf` instances).
    pub(crate) fused_backward: bool,
}

impl MaskKernels {
    /// What [`attention_mask_kernels!`](crate::attention_mask_kernels) builds.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        ptx: &'static PtxSet,
        bf16: MaskLaunchers<bf16>,
        f16: MaskLaunchers<f16>,
        walks: bool,
        fused_backward: bool,
    ) -> Self {
        MaskKernels {
            name,
            ptx,
            bf16,
            f16,
            walks,
            fused_backward,
        }
    }

    /// The mask's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// The shipped masks (`gpukern_device::attention::Shipped`, whose numbers `General` reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MaskKind {
    /// `NoMask`.
    None,
    /// `Causal`.
    Causal,
    /// `SlidingWindow`.
    Window,
    /// `Alibi`.
    Alibi,
    /// `Document`.
    Document,
    /// `SoftCap`.
    SoftCap,
    /// A custom mask (its own kernels: `CustomMask`).
    Custom,
}

/// Instances per fused rung and head dim: no mask, causal, `General`.
pub(crate) const INSTANCES: usize = 3;

impl MaskKind {
    /// The fused rungs' instance of the mask: its own (no mask, causal) or `General`'s (a custom
    /// mask's kernels stand in that place).
    pub(crate) fn instance(self) -> usize {
        match self {
            MaskKind::None => 0,
            MaskKind::Causal => 1,
            _ => 2,
        }
    }

    /// The device crate's number of the mask, which `General` reads.
    pub(crate) fn shipped(self) -> Shipped {
        match self {
            MaskKind::None => Shipped::None,
            MaskKind::Causal => Shipped::Causal,
            MaskKind::Window => Shipped::Window,
            MaskKind::Alibi => Shipped::Alibi,
            MaskKind::Document => Shipped::Document,
            MaskKind::SoftCap => Shipped::SoftCap,
            // Never read: a custom mask's kernels take its own integer (`MaskSpec::launch`).
            MaskKind::Custom => Shipped::None,
        }
    }
}

/// The bf16 kernels.
static BF16: AttentionKernels<bf16> = AttentionKernels {
    rows: family::attention_rows_bf16::launch_views::<Module>,
    flash64: [
        family::attention_flash_d64_bf16::launch_views::<Module>,
        family::attention_flash_causal_d64_bf16::launch_views::<Module>,
        family::attention_flash_general_d64_bf16::launch_views::<Module>,
    ],
    flash128: [
        family::attention_flash_d128_bf16::launch_views::<Module>,
        family::attention_flash_causal_d128_bf16::launch_views::<Module>,
        family::attention_flash_general_d128_bf16::launch_views::<Module>,
    ],
    wgmma64: family::wgmma::attention_wgmma_d64_bf16::launch_views::<Module>,
    wgmma128: family::wgmma::attention_wgmma_d128_bf16::launch_views::<Module>,
    wgmma64_ping_pong: [
        family::wgmma::attention_wgmma_pingpong_d64_bf16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_causal_d64_bf16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_general_d64_bf16::launch_views::<Module>,
    ],
    wgmma64_three: [
        family::wgmma::attention_wgmma_three_d64_bf16::launch_views::<Module>,
        family::wgmma::attention_wgmma_three_causal_d64_bf16::launch_views::<Module>,
    ],
    wgmma128_ping_pong: [
        family::wgmma::attention_wgmma_pingpong_d128_bf16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_causal_d128_bf16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_general_d128_bf16::launch_views::<Module>,
    ],
    wgmma256: [
        family::wgmma::attention_wgmma_d256_bf16::launch_views::<Module>,
        family::wgmma::attention_wgmma_general_d256_bf16::launch_views::<Module>,
    ],
    wgmma256_ping_pong: [
        family::wgmma::attention_wgmma_pingpong_d256_bf16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_causal_d256_bf16::launch_views::<Module>,
    ],
    backward: &super::backward::kernels::BF16,
};

/// The f16 kernels.
static F16: AttentionKernels<f16> = AttentionKernels {
    rows: family::attention_rows_f16::launch_views::<Module>,
    flash64: [
        family::attention_flash_d64_f16::launch_views::<Module>,
        family::attention_flash_causal_d64_f16::launch_views::<Module>,
        family::attention_flash_general_d64_f16::launch_views::<Module>,
    ],
    flash128: [
        family::attention_flash_d128_f16::launch_views::<Module>,
        family::attention_flash_causal_d128_f16::launch_views::<Module>,
        family::attention_flash_general_d128_f16::launch_views::<Module>,
    ],
    wgmma64: family::wgmma::attention_wgmma_d64_f16::launch_views::<Module>,
    wgmma128: family::wgmma::attention_wgmma_d128_f16::launch_views::<Module>,
    wgmma64_ping_pong: [
        family::wgmma::attention_wgmma_pingpong_d64_f16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_causal_d64_f16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_general_d64_f16::launch_views::<Module>,
    ],
    wgmma64_three: [
        family::wgmma::attention_wgmma_three_d64_f16::launch_views::<Module>,
        family::wgmma::attention_wgmma_three_causal_d64_f16::launch_views::<Module>,
    ],
    wgmma128_ping_pong: [
        family::wgmma::attention_wgmma_pingpong_d128_f16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_causal_d128_f16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_general_d128_f16::launch_views::<Module>,
    ],
    wgmma256: [
        family::wgmma::attention_wgmma_d256_f16::launch_views::<Module>,
        family::wgmma::attention_wgmma_general_d256_f16::launch_views::<Module>,
    ],
    wgmma256_ping_pong: [
        family::wgmma::attention_wgmma_pingpong_d256_f16::launch_views::<Module>,
        family::wgmma::attention_wgmma_pingpong_causal_d256_f16::launch_views::<Module>,
    ],
    backward: &super::backward::kernels::F16,
};

/// An element type of attention: [`bf16`](struct@bf16) or [`f16`](struct@f16) in and out (f32
/// inside).
pub trait AttentionElement:
    Element + family::AttentionElement + crate::tensor_map::MapElement + sealed::Sealed
{
    /// The kernels of this element type.
    #[doc(hidden)]
    fn kernels() -> &'static AttentionKernels<Self>;
    /// A custom mask's kernels of this element type.
    #[doc(hidden)]
    fn custom(kernels: &MaskKernels) -> &MaskLaunchers<Self>;
}

mod sealed {
    /// Only the element types with attention kernels.
    pub trait Sealed {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

impl AttentionElement for bf16 {
    fn kernels() -> &'static AttentionKernels<bf16> {
        &BF16
    }
    fn custom(kernels: &MaskKernels) -> &MaskLaunchers<bf16> {
        &kernels.bf16
    }
}

impl AttentionElement for f16 {
    fn kernels() -> &'static AttentionKernels<f16> {
        &F16
    }
    fn custom(kernels: &MaskKernels) -> &MaskLaunchers<f16> {
        &kernels.f16
    }
}

/// One operand as the kernels take it: its elements (from the tensor's offset) and its strides
/// along batch, sequence and heads, in elements.
pub(crate) struct LaunchTensor<'a, T> {
    pub(crate) data: DeviceSlice<'a, T>,
    pub(crate) strides: [usize; 3],
}

/// The checked operands of one call as the kernels take them (built by `Operands::launch`).
pub(crate) struct Launch<'a, T> {
    pub(crate) q: LaunchTensor<'a, T>,
    pub(crate) k: LaunchTensor<'a, T>,
    pub(crate) v: LaunchTensor<'a, T>,
    pub(crate) shape: AttentionShape,
    /// `scale * log2(e)`.
    pub(crate) scale_log2: f32,
    /// The mask and its parameters.
    pub(crate) mask: MaskLaunch<'a>,
}

/// A mask as the kernels take it: which instance, and its three parameters
/// (`gpukern_device::attention::MaskArgs`; `int` as `General` reads it, the kind in its low
/// bits, which the no-mask and causal instances ignore).
#[derive(Clone, Copy)]
pub(crate) struct MaskLaunch<'a> {
    pub(crate) kind: MaskKind,
    pub(crate) data: DeviceSlice<'a, i32>,
    pub(crate) int: usize,
    pub(crate) float: f32,
    /// A custom mask's kernels and the module they are loaded in (its kernel crate's).
    pub(crate) custom: Option<(&'a MaskKernels, &'a Module)>,
}

/// Launches `attention_rows_*` on checked operands: a warp per query row.
///
/// # Safety
/// `ops` was checked by `Gpu::attention_operands` (every element its dims and strides reach is
/// inside its buffer; head dim at most 256; at least one row), `o` holds `rows * head_dim`
/// elements and `lse` `rows` floats, `cfg` covers `rows` warps of the kernel's shape.
pub(crate) unsafe fn rows<T: AttentionElement>(
    gpu: &Gpu,
    cfg: LaunchConfig,
    ops: &Launch<'_, T>,
    o: &mut DeviceVec<T>,
    lse: &mut DeviceVec<f32>,
) -> Result<()> {
    let s = ops.shape;
    let (q, k, v) = (ops.q.data, ops.k.data, ops.v.data);
    let [qb, qs, qh] = ops.q.strides;
    let [kb, ks, kh] = ops.k.strides;
    let [vb, vs, vh] = ops.v.strides;
    let library = gpu.library();
    let (launcher, module) = match ops.mask.custom {
        Some((custom, module)) => (T::custom(custom).rows, module),
        None => (T::kernels().rows, &library),
    };
    // SAFETY: per the contract.
    unsafe {
        launcher(
            module,
            cfg,
            q,
            k,
            v,
            o.view_mut(),
            lse.view_mut(),
            s.rows(),
            s.q_len,
            s.kv_len,
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
            ops.scale_log2,
            ops.mask.data,
            ops.mask.int,
            ops.mask.float,
        )
    }
}

/// Launches `attention_flash_d<head_dim>_*` on checked operands: a block per 64 query rows of
/// each (batch, head).
///
/// # Safety
/// As [`rows`], with `head_dim` 64 or 128, every operand 16-byte aligned with offsets and
/// strides multiples of 8 elements, and `cfg` the grid `(ceil(q_len / 64), heads, batch)` of
/// the kernel's block and shared memory.
pub(crate) unsafe fn flash<T: AttentionElement>(
    gpu: &Gpu,
    cfg: LaunchConfig,
    ops: &Launch<'_, T>,
    o: &mut DeviceVec<T>,
    lse: &mut DeviceVec<f32>,
) -> Result<()> {
    let s = ops.shape;
    let (q, k, v) = (ops.q.data, ops.k.data, ops.v.data);
    let [qb, qs, qh] = ops.q.strides;
    let [kb, ks, kh] = ops.k.strides;
    let [vb, vs, vh] = ops.v.strides;
    let library = gpu.library();
    let wide = usize::from(s.head_dim != 64);
    let (launcher, module) = match ops.mask.custom {
        Some((custom, module)) => (T::custom(custom).flash[wide], module),
        None if wide == 0 => (T::kernels().flash64[ops.mask.kind.instance()], &library),
        None => (T::kernels().flash128[ops.mask.kind.instance()], &library),
    };
    // SAFETY: per the contract.
    unsafe {
        launcher(
            module,
            cfg,
            q,
            k,
            v,
            o.view_mut(),
            lse.view_mut(),
            s.q_len,
            s.kv_len,
            s.heads,
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
            ops.scale_log2,
            ops.mask.data,
            ops.mask.int,
            ops.mask.float,
        )
    }
}

/// Launches `attention_wgmma_d<head_dim>_*` on checked operands: a block of three warpgroups per
/// 128 query rows of each (batch, head); with three consumers `attention_wgmma_three_*`, four
/// warpgroups per 192 rows.
///
/// # Safety
/// As [`flash`] (but head dim 64, 128 or 256), with `maps` the three 4-D tensor maps of `q`, `k`
/// and `v` (`encode_4d` of the launch's views and strides, boxes of 128 rows for `q` and of
/// `wgmma_keys(head_dim)` rows for `k` and `v`), a GPU running the sm_90a module, and `cfg`
/// a grid of `1 ..= ceil(q_len / rows) heads batch` blocks along `x` of the kernel's block and
/// shared memory (`rows` 128, 192 with three consumers, also the rows of `q`'s boxes).
/// `ping_pong` picks the consumers' ping-pong schedule, `consumers` (3 at head dim 64 with the
/// ping-pong and no mask or the causal one; else 2) the kernel.
pub(crate) unsafe fn wgmma<T: AttentionElement>(
    gpu: &Gpu,
    cfg: LaunchConfig,
    maps: &DeviceVec<u64>,
    (ping_pong, consumers): (bool, usize),
    ops: &Launch<'_, T>,
    o: &mut DeviceVec<T>,
    lse: &mut DeviceVec<f32>,
) -> Result<()> {
    let s = ops.shape;
    let (q, k, v) = (ops.q.data, ops.k.data, ops.v.data);
    let [qb, qs, qh] = ops.q.strides;
    let [kb, ks, kh] = ops.k.strides;
    let [vb, vs, vh] = ops.v.strides;
    let kernels = T::kernels();
    let m = ops.mask.kind.instance();
    let library = gpu.library();
    let (launcher, module) = match ops.mask.custom {
        // A custom mask's kernels: the ping-pong at 64 and 128, one tile at a time at 256, what
        // the plan runs for masks other than none and causal.
        Some((custom, module)) => {
            let c = T::custom(custom);
            let launcher = match (s.head_dim, ping_pong, consumers) {
                (64, true, 2) => c.wgmma[0],
                (128, true, 2) => c.wgmma[1],
                (256, false, 2) => c.wgmma[2],
                _ => {
                    return Err(Error::InvalidArgument {
                        op: super::plan::OP,
                        detail: "a custom mask's Hopper kernels are the ping-pong at head dims 64 and 128 \
                                 and one tile at a time at 256 (AttentionAlgorithm::Auto picks them)"
                            .to_string(),
                    });
                }
            };
            (launcher, module)
        }
        None => {
            let launcher = match (s.head_dim, ping_pong) {
                (64, true) if consumers == 3 => {
                    *kernels
                        .wgmma64_three
                        .get(m)
                        .ok_or_else(|| Error::InvalidArgument {
                            op: super::plan::OP,
                            detail: "three consumer warpgroups run no mask but the causal one".to_string(),
                        })?
                }
                (64, false) => kernels.wgmma64,
                (128, false) => kernels.wgmma128,
                (_, false) => kernels.wgmma256[usize::from(m == 2)],
                (64, true) => kernels.wgmma64_ping_pong[m],
                (128, true) => kernels.wgmma128_ping_pong[m],
                (_, true) => *kernels
                    .wgmma256_ping_pong
                    .get(m)
                    .ok_or_else(|| Error::InvalidArgument {
                        op: super::plan::OP,
                        detail: "the wgmma ping-pong at head dim 256 runs no mask but the causal one"
                            .to_string(),
                    })?,
            };
            (launcher, &library)
        }
    };
    // SAFETY: per the contract.
    unsafe {
        launcher(
            module,
            cfg,
            maps.view(),
            q,
            k,
            v,
            o.view_mut(),
            lse.view_mut(),
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
            ops.scale_log2,
            ops.mask.data,
            ops.mask.int,
            ops.mask.float,
        )
    }
}
