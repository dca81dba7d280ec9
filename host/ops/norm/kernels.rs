//! The norm plan's kernel launched: `kernels_gpu::norm`'s kernels through the launchers
//! `#[kernel]` generates, one table per element type from a plan to its kernel.

use gpukern_device::launch::Kernel;
use half::bf16;
use kernels_gpu::norm as family;
use kernels_gpu::norm::NormElem;

use kernels_gpu::norm::{BLOCK, ROWS_SHARED_BYTES, SHARED_BYTES, WARP_BLOCK, WARP_ROWS, ring_shared_bytes};

use super::plan::NormPlan;
use super::variant::{LoopKind, RowLoads, RowsWidth, WarpGrid};
use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::{Backend, Gpu};
use crate::error::Result;
use crate::launch_config::LaunchConfig;
use crate::module::Module;
use crate::view::{DeviceSlice, DeviceSliceMut};

/// The launcher of an RMSNorm kernel `(x, w, y, rows, cols, eps)` on elements `T`.
pub type RmsLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    f32,
) -> Result<()>;

/// The launcher of a LayerNorm kernel `(x, w, b, y, rows, cols, eps)` on elements `T`.
pub type LayerLauncher<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSlice<'a, T>,
    DeviceSliceMut<'a, T>,
    usize,
    usize,
    f32,
) -> Result<()>;

/// One norm's kernels, one per plan, each with its description and launcher `L`.
pub struct NormSet<L: 'static> {
    /// `*_norm_block_reduce_*`.
    pub(crate) block_reduce: (&'static Kernel, L),
    /// `*_norm_rows16_*`.
    pub(crate) rows16: (&'static Kernel, L),
    /// `*_norm_rows_*`.
    pub(crate) rows: (&'static Kernel, L),
    /// `*_norm_rows64_*`.
    pub(crate) rows64: (&'static Kernel, L),
    /// `*_norm_warp_*`.
    pub(crate) warp: (&'static Kernel, L),
    /// `*_norm_warp_keep_*`.
    pub(crate) warp_keep: (&'static Kernel, L),
    /// `*_norm_rows16_cs_*`.
    pub(crate) rows16_cs: (&'static Kernel, L),
    /// `*_norm_rows_cs_*`.
    pub(crate) rows_cs: (&'static Kernel, L),
    /// `*_norm_warp_pipe_*`.
    pub(crate) warp_pipe: (&'static Kernel, L),
    /// `*_norm_two_pass_*`.
    pub(crate) two_pass: (&'static Kernel, L),
    /// `*_norm_loop_*`.
    pub(crate) looped: (&'static Kernel, L),
    /// `*_norm_loop2_*`.
    pub(crate) looped2: (&'static Kernel, L),
    /// `*_norm_loop_plain_*`.
    pub(crate) looped_plain: (&'static Kernel, L),
    /// `*_norm_ring_*`.
    pub(crate) ring: (&'static Kernel, L),
    /// `*_norm_rows16_el_*`.
    pub(crate) rows16_el: (&'static Kernel, L),
}

impl<L: Copy> NormSet<L> {
    /// The kernel a plan launches and its launcher.
    pub(crate) fn of(&self, plan: NormPlan) -> (&'static Kernel, L) {
        use RowLoads::*;
        use RowsWidth::*;
        match plan {
            NormPlan::BlockReduce => self.block_reduce,
            NormPlan::Rows { config, .. } => match (config.width, config.loads) {
                (W16, Plain) => self.rows16,
                (W32, Plain) => self.rows,
                (W16, Streaming) => self.rows16_cs,
                (W32, Streaming) => self.rows_cs,
                (W16, EvictLast) => self.rows16_el,
                // No plan holds a config without its own kernel (`RowsConfig::kernel_stem`);
                // these are the 64-element kernel and the 32-element one it would have been.
                (W64, _) => self.rows64,
                (W32, EvictLast) => self.rows,
            },
            NormPlan::Warp { grid } => match grid {
                WarpGrid::Blocks | WarpGrid::Solo => self.warp,
                WarpGrid::Keep => self.warp_keep,
                WarpGrid::Pipelined => self.warp_pipe,
            },
            NormPlan::TwoPass { .. } => self.two_pass,
            NormPlan::Loop { kind, .. } => match kind {
                LoopKind::Hinted => self.looped,
                LoopKind::Hinted2 => self.looped2,
                LoopKind::Plain => self.looped_plain,
            },
            NormPlan::Ring { .. } => self.ring,
        }
    }
}

/// The norm kernels of one element type: for RMSNorm and LayerNorm each, the tutorial
/// (`block_reduce`), the in-register rungs (`rows`, 32 elements per thread; `rows16`, `rows64`)
/// and the warp-per-row rung (`warp`, `warp_keep`, `warp_pipe`); the streaming candidates
/// `rows16_cs`, `rows_cs`; the L2 re-read candidates `two_pass` and the looped `looped`,
/// `looped2`, `looped_plain`. The one table from an element type to its
/// kernels.
pub struct NormKernels<T: 'static> {
    /// The RMSNorm kernels.
    pub(crate) rms: NormSet<RmsLauncher<T>>,
    /// The LayerNorm kernels.
    pub(crate) layer: NormSet<LayerLauncher<T>>,
}

/// One [`NormSet`] from its kernels' names.
macro_rules! norm_set {
    ($($field:ident = $kernel:ident),+ $(,)?) => {
        NormSet {
            $($field: (&family::$kernel::KERNEL, family::$kernel::launch_views::<Module>)),+
        }
    };
}

/// The f32 kernels.
pub(crate) static F32: NormKernels<f32> = NormKernels {
    rms: norm_set!(
        block_reduce = rms_norm_block_reduce_f32,
        rows16 = rms_norm_rows16_f32,
        rows = rms_norm_rows_f32,
        rows64 = rms_norm_rows64_f32,
        warp = rms_norm_warp_f32,
        warp_keep = rms_norm_warp_keep_f32,
        rows16_cs = rms_norm_rows16_cs_f32,
        rows_cs = rms_norm_rows_cs_f32,
        warp_pipe = rms_norm_warp_pipe_f32,
        two_pass = rms_norm_two_pass_f32,
        looped = rms_norm_loop_f32,
        looped2 = rms_norm_loop2_f32,
        looped_plain = rms_norm_loop_plain_f32,
        ring = rms_norm_ring_f32,
        rows16_el = rms_norm_rows16_el_f32,
    ),
    layer: norm_set!(
        block_reduce = layer_norm_block_reduce_f32,
        rows16 = layer_norm_rows16_f32,
        rows = layer_norm_rows_f32,
        rows64 = layer_norm_rows64_f32,
        warp = layer_norm_warp_f32,
        warp_keep = layer_norm_warp_keep_f32,
        rows16_cs = layer_norm_rows16_cs_f32,
        rows_cs = layer_norm_rows_cs_f32,
        warp_pipe = layer_norm_warp_pipe_f32,
        two_pass = layer_norm_two_pass_f32,
        looped = layer_norm_loop_f32,
        looped2 = layer_norm_loop2_f32,
        looped_plain = layer_norm_loop_plain_f32,
        ring = layer_norm_ring_f32,
        rows16_el = layer_norm_rows16_el_f32,
    ),
};

/// The bf16 kernels.
pub(crate) static BF16: NormKernels<half::bf16> = NormKernels {
    rms: norm_set!(
        block_reduce = rms_norm_block_reduce_bf16,
        rows16 = rms_norm_rows16_bf16,
        rows = rms_norm_rows_bf16,
        rows64 = rms_norm_rows64_bf16,
        warp = rms_norm_warp_bf16,
        warp_keep = rms_norm_warp_keep_bf16,
        rows16_cs = rms_norm_rows16_cs_bf16,
        rows_cs = rms_norm_rows_cs_bf16,
        warp_pipe = rms_norm_warp_pipe_bf16,
        two_pass = rms_norm_two_pass_bf16,
        looped = rms_norm_loop_bf16,
        looped2 = rms_norm_loop2_bf16,
        looped_plain = rms_norm_loop_plain_bf16,
        ring = rms_norm_ring_bf16,
        rows16_el = rms_norm_rows16_el_bf16,
    ),
    layer: norm_set!(
        block_reduce = layer_norm_block_reduce_bf16,
        rows16 = layer_norm_rows16_bf16,
        rows = layer_norm_rows_bf16,
        rows64 = layer_norm_rows64_bf16,
        warp = layer_norm_warp_bf16,
        warp_keep = layer_norm_warp_keep_bf16,
        rows16_cs = layer_norm_rows16_cs_bf16,
        rows_cs = layer_norm_rows_cs_bf16,
        warp_pipe = layer_norm_warp_pipe_bf16,
        two_pass = layer_norm_two_pass_bf16,
        looped = layer_norm_loop_bf16,
        looped2 = layer_norm_loop2_bf16,
        looped_plain = layer_norm_loop_plain_bf16,
        ring = layer_norm_ring_bf16,
        rows16_el = layer_norm_rows16_el_bf16,
    ),
};

impl<T> NormKernels<T> {
    /// The RMSNorm (`layer = false`) or LayerNorm kernel a plan launches, for the driver's facts
    /// (block limit, residency).
    pub(crate) fn kernel(&self, plan: NormPlan, layer: bool) -> &'static Kernel {
        if layer {
            self.layer.of(plan).0
        } else {
            self.rms.of(plan).0
        }
    }
}

/// Launches an RMSNorm kernel.
///
/// # Safety
/// `x` and `y` hold `rows * cols` elements, `w` `cols`; for a `rows`
/// kernel all three 16-byte aligned and `cols` a multiple of its vector width; `cfg` the
/// kernel's documented shape.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rms<T: Element>(
    library: &Module,
    launcher: RmsLauncher<T>,
    cfg: LaunchConfig,
    x: &DeviceVec<T>,
    w: &DeviceVec<T>,
    y: &mut DeviceVec<T>,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { launcher(library, cfg, x.view(), w.view(), y.view_mut(), rows, cols, eps) }
}

/// Launches a LayerNorm kernel.
///
/// # Safety
/// As [`rms`], `b` like `w`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn layer<T: Element>(
    library: &Module,
    launcher: LayerLauncher<T>,
    cfg: LaunchConfig,
    x: &DeviceVec<T>,
    (w, b): (&DeviceVec<T>, &DeviceVec<T>),
    y: &mut DeviceVec<T>,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<()> {
    // SAFETY: per the contract.
    unsafe {
        launcher(
            library,
            cfg,
            x.view(),
            w.view(),
            b.view(),
            y.view_mut(),
            rows,
            cols,
            eps,
        )
    }
}

impl Gpu {
    /// Whether this `Gpu` can launch `kernel`: always in the simulator; on CUDA when the loaded
    /// module of gpukern's kernels has it (the ring kernels are in the `sm_90a` module only).
    pub(super) fn has_norm_kernel(&self, kernel: &Kernel) -> bool {
        match &self.backend {
            Backend::Simulator => true,
            Backend::Cuda(_) => self.library().has_entry(kernel.name),
        }
    }

    /// Launches `plan` on checked operands (`rows, cols >= 1`) into `y`: the plan's launch
    /// shape, then its kernel.
    pub(super) fn launch_norm_plan<T: NormElement>(
        &self,
        op: &'static str,
        plan: NormPlan,
        ops: Operands<'_, T>,
        y: &mut DeviceMatrix<T>,
    ) -> Result<()> {
        let (rows, cols) = (ops.rows, ops.cols);
        let kernels = T::kernels();
        let is_layer = ops.b.is_some();
        let limits = self.limits();
        let library = self.library();
        let cfg = match plan {
            NormPlan::BlockReduce => LaunchConfig::per_row(op, rows, BLOCK, SHARED_BYTES, &limits)?,
            NormPlan::Rows { threads, .. }
            | NormPlan::TwoPass { threads }
            | NormPlan::Loop { threads, .. } => {
                LaunchConfig::per_row(op, rows, threads, ROWS_SHARED_BYTES, &limits)?
            }
            NormPlan::Warp {
                grid: WarpGrid::Blocks,
            } => LaunchConfig::rows_per_block(op, rows, WARP_ROWS as usize, WARP_BLOCK, 0, &limits)?,
            NormPlan::Warp { grid: WarpGrid::Solo } => {
                LaunchConfig::rows_per_block(op, rows, 1, 32, 0, &limits)?
            }
            NormPlan::Warp {
                grid: WarpGrid::Keep | WarpGrid::Pipelined,
            } => {
                let resident = self.resident_blocks(op, kernels.kernel(plan, is_layer), WARP_BLOCK, 0)?;
                LaunchConfig::persistent(op, (rows, WARP_ROWS as usize), resident, WARP_BLOCK, 0, &limits)?
            }
            NormPlan::Ring { threads } => {
                // A row is at most RING_MAX_COLS elements of at most 4 bytes (the plan's bound).
                let row_bytes = (cols * core::mem::size_of::<T>()) as u32;
                let shared = ring_shared_bytes(row_bytes);
                let resident = self.resident_blocks(op, kernels.kernel(plan, is_layer), threads, shared)?;
                // The kernels are opted in to more than the default 48 KiB when they are launched.
                LaunchConfig::persistent(op, (rows, 1), resident, threads, shared, &limits.opted_in())?
            }
        };
        let shape = (rows, cols);
        // SAFETY: `x` and `y` hold rows*cols elements, `w` (and `b`) cols (checked above); the
        // plan admits the in-register and warp kernels only for aligned buffers, `cols` a
        // multiple of the vector width and `cols / LANES` within what the block (or warp) holds;
        // `cfg` is the kernel's shape.
        unsafe {
            match ops.b {
                None => rms(
                    &library,
                    kernels.rms.of(plan).1,
                    cfg,
                    ops.x,
                    ops.w,
                    &mut y.data,
                    shape,
                    ops.eps,
                ),
                Some(b) => layer(
                    &library,
                    kernels.layer.of(plan).1,
                    cfg,
                    ops.x,
                    (ops.w, b),
                    &mut y.data,
                    shape,
                    ops.eps,
                ),
            }
        }
    }
}

/// The operands of one norm call once checked.
pub(crate) struct Operands<'a, T: 'static> {
    /// The input, `rows x cols`.
    pub(crate) x: &'a DeviceVec<T>,
    /// The weight, `cols`.
    pub(crate) w: &'a DeviceVec<T>,
    /// LayerNorm's bias; `None` for RMSNorm.
    pub(crate) b: Option<&'a DeviceVec<T>>,
    /// Rows of `x`.
    pub(crate) rows: usize,
    /// Columns of `x`.
    pub(crate) cols: usize,
    /// The epsilon under the square root.
    pub(crate) eps: f32,
}

/// An element type the norms take: `f32` or [`bf16`] (statistics in f32 either way).
pub trait NormElement: Element + NormElem + sealed::Sealed {
    /// The kernels of this element type.
    #[doc(hidden)]
    fn kernels() -> &'static NormKernels<Self>;
}

mod sealed {
    /// Only the element types with norm kernels.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
}

impl NormElement for f32 {
    fn kernels() -> &'static NormKernels<f32> {
        &F32
    }
}

impl NormElement for bf16 {
    fn kernels() -> &'static NormKernels<bf16> {
        &BF16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::norm::NormAlgorithm;

    /// Each algorithm's plan launches the kernel its config names: one spelling from the
    /// config to the PTX entry (`rows-16-el`, `rms_norm_rows16_el_f32`).
    #[test]
    fn every_algorithm_launches_the_kernel_its_config_names() {
        for algorithm in NormAlgorithm::ALL {
            let Some(stem) = algorithm.kernel_stem() else {
                continue;
            };
            let plan = NormPlan::choose::<f32>(algorithm, 1024, true, false, |_| 1024);
            assert_eq!(
                F32.kernel(plan, false).name,
                format!("rms_norm_{stem}_f32"),
                "{algorithm:?}"
            );
            assert_eq!(
                F32.kernel(plan, true).name,
                format!("layer_norm_{stem}_f32"),
                "{algorithm:?}"
            );
            let plan = NormPlan::choose::<half::bf16>(algorithm, 1024, true, false, |_| 1024);
            assert_eq!(
                BF16.kernel(plan, false).name,
                format!("rms_norm_{stem}_bf16"),
                "{algorithm:?}"
            );
        }
    }
}

/// The kernels the norm plans choose, pinned: what a refactoring of the plan or of its
/// algorithm types must leave as it is. Each chosen plan is described by what it launches (the
/// PTX entry and the launch shape), never by the plan's Rust spelling, so that the pins outlive
/// a rename.
#[cfg(test)]
mod pins {
    use super::*;
    use crate::ops::norm::NormAlgorithm;

    /// What `plan` launches: its PTX entry (RMSNorm or LayerNorm, f32 or bf16 by `set`) and its
    /// launch shape.
    fn launched<T>(set: &NormKernels<T>, plan: NormPlan, layer: bool) -> (&'static str, String) {
        let shape = match plan {
            NormPlan::BlockReduce => "a block per row".to_string(),
            NormPlan::Rows { threads, .. }
            | NormPlan::TwoPass { threads }
            | NormPlan::Loop { threads, .. } => {
                format!("{threads} threads per row")
            }
            NormPlan::Warp {
                grid: WarpGrid::Blocks,
            } => "8 rows per block".to_string(),
            NormPlan::Warp { grid: WarpGrid::Solo } => "1 row per block".to_string(),
            NormPlan::Warp {
                grid: WarpGrid::Keep | WarpGrid::Pipelined,
            } => "persistent warps".to_string(),
            NormPlan::Ring { threads } => format!("persistent, {threads} threads"),
        };
        (set.kernel(plan, layer).name, shape)
    }

    /// The default plan's choice at each end of each rule's range and one vector past it, for
    /// both norms and element types (every width allowed 1024 threads).
    #[test]
    fn the_default_plan_at_the_rules_boundaries() {
        let mut got = Vec::new();
        for (layer, norm) in [(false, "rms"), (true, "layer")] {
            for cols in [
                4, 508, 512, 516, 1016, 1020, 1024, 1028, 1032, 4088, 4092, 4096, 4100, 4104,
            ] {
                let p = NormPlan::choose::<f32>(NormAlgorithm::default(), cols, true, layer, |_| 1024);
                got.push(format!("{norm} f32 {cols}: {:?}", launched(&F32, p, layer)));
            }
            for cols in [8184, 8192, 8200, 16380, 16384, 16388, 32768] {
                let p = NormPlan::choose::<f32>(NormAlgorithm::default(), cols, true, layer, |_| 1024);
                got.push(format!("{norm} f32 {cols}: {:?}", launched(&F32, p, layer)));
            }
            for cols in [
                8, 1016, 1024, 1032, 4088, 4096, 4104, 8184, 8192, 8200, 16384, 32768,
            ] {
                let p = NormPlan::choose::<half::bf16>(NormAlgorithm::default(), cols, true, layer, |_| 1024);
                got.push(format!("{norm} bf16 {cols}: {:?}", launched(&BF16, p, layer)));
            }
        }
        let want = PINNED_DEFAULTS;
        assert_eq!(got.join("\n"), want.trim(), "the default norm plan changed");
    }

    /// Every algorithm's plan (by its name, as the bench records it) over rows of 1 to 17000
    /// columns and multiples of 4 to 70000, both norms, both element types, aligned or not, four
    /// sets of block limits: an FNV-1a digest of what each launches.
    #[test]
    fn every_algorithm_plans_as_before() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for &b in bytes {
                hash ^= b as u64;
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        let limits: [fn(RowsWidth) -> u32; 4] = [
            |_| 1024,
            |w| match w {
                RowsWidth::W16 => 1024,
                RowsWidth::W32 => 512,
                RowsWidth::W64 => 256,
            },
            |_| 384,
            |_| 64,
        ];
        let cols = (1..=17000).chain((17004..=70000).step_by(4));
        for cols in cols {
            for algorithm in NormAlgorithm::ALL {
                for (l, limit) in limits.iter().enumerate() {
                    for layer in [false, true] {
                        for aligned in [true, false] {
                            if !aligned && (l > 0 || cols % 97 != 0) {
                                continue;
                            }
                            let p = NormPlan::choose::<f32>(algorithm, cols, aligned, layer, limit);
                            let (entry, shape) = launched(&F32, p, layer);
                            let q = NormPlan::choose::<half::bf16>(algorithm, cols, aligned, layer, limit);
                            let (entry16, shape16) = launched(&BF16, q, layer);
                            let key = format!(
                                "{} {cols} {l} {layer} {aligned}: {entry} {shape}; {entry16} {shape16}\n",
                                algorithm.name()
                            );
                            feed(key.as_bytes());
                        }
                    }
                }
            }
        }
        assert_eq!(format!("{hash:016x}"), PINNED_DIGEST, "a norm plan changed");
    }

    /// [`the_default_plan_at_the_rules_boundaries`]'s table, as the plan chose before the
    /// algorithm types became configs.
    const PINNED_DEFAULTS: &str = r#"
rms f32 4: ("rms_norm_rows16_f32", "32 threads per row")
rms f32 508: ("rms_norm_rows16_f32", "32 threads per row")
rms f32 512: ("rms_norm_rows16_f32", "32 threads per row")
rms f32 516: ("rms_norm_rows16_f32", "64 threads per row")
rms f32 1016: ("rms_norm_rows16_f32", "64 threads per row")
rms f32 1020: ("rms_norm_rows16_f32", "64 threads per row")
rms f32 1024: ("rms_norm_loop2_f32", "128 threads per row")
rms f32 1028: ("rms_norm_loop2_f32", "160 threads per row")
rms f32 1032: ("rms_norm_loop2_f32", "160 threads per row")
rms f32 4088: ("rms_norm_loop2_f32", "512 threads per row")
rms f32 4092: ("rms_norm_loop2_f32", "512 threads per row")
rms f32 4096: ("rms_norm_rows16_el_f32", "256 threads per row")
rms f32 4100: ("rms_norm_rows16_el_f32", "288 threads per row")
rms f32 4104: ("rms_norm_rows16_el_f32", "288 threads per row")
rms f32 8184: ("rms_norm_rows16_el_f32", "512 threads per row")
rms f32 8192: ("rms_norm_rows16_el_f32", "512 threads per row")
rms f32 8200: ("rms_norm_rows16_el_f32", "544 threads per row")
rms f32 16380: ("rms_norm_rows16_el_f32", "1024 threads per row")
rms f32 16384: ("rms_norm_rows16_el_f32", "1024 threads per row")
rms f32 16388: ("rms_norm_rows_f32", "544 threads per row")
rms f32 32768: ("rms_norm_rows_f32", "1024 threads per row")
rms bf16 8: ("rms_norm_rows16_bf16", "32 threads per row")
rms bf16 1016: ("rms_norm_rows16_bf16", "64 threads per row")
rms bf16 1024: ("rms_norm_warp_bf16", "1 row per block")
rms bf16 1032: ("rms_norm_loop2_bf16", "96 threads per row")
rms bf16 4088: ("rms_norm_loop2_bf16", "256 threads per row")
rms bf16 4096: ("rms_norm_loop2_bf16", "256 threads per row")
rms bf16 4104: ("rms_norm_rows16_bf16", "288 threads per row")
rms bf16 8184: ("rms_norm_rows16_bf16", "512 threads per row")
rms bf16 8192: ("rms_norm_rows16_bf16", "512 threads per row")
rms bf16 8200: ("rms_norm_rows_bf16", "288 threads per row")
rms bf16 16384: ("rms_norm_rows_bf16", "512 threads per row")
rms bf16 32768: ("rms_norm_rows_bf16", "1024 threads per row")
layer f32 4: ("layer_norm_rows16_f32", "32 threads per row")
layer f32 508: ("layer_norm_rows16_f32", "32 threads per row")
layer f32 512: ("layer_norm_rows16_f32", "32 threads per row")
layer f32 516: ("layer_norm_warp_keep_f32", "persistent warps")
layer f32 1016: ("layer_norm_warp_keep_f32", "persistent warps")
layer f32 1020: ("layer_norm_warp_keep_f32", "persistent warps")
layer f32 1024: ("layer_norm_loop2_f32", "128 threads per row")
layer f32 1028: ("layer_norm_rows16_f32", "96 threads per row")
layer f32 1032: ("layer_norm_rows16_f32", "96 threads per row")
layer f32 4088: ("layer_norm_rows16_f32", "256 threads per row")
layer f32 4092: ("layer_norm_rows16_f32", "256 threads per row")
layer f32 4096: ("layer_norm_rows16_el_f32", "256 threads per row")
layer f32 4100: ("layer_norm_rows16_f32", "288 threads per row")
layer f32 4104: ("layer_norm_rows16_f32", "288 threads per row")
layer f32 8184: ("layer_norm_rows16_f32", "512 threads per row")
layer f32 8192: ("layer_norm_rows16_f32", "512 threads per row")
layer f32 8200: ("layer_norm_rows16_f32", "544 threads per row")
layer f32 16380: ("layer_norm_rows16_f32", "1024 threads per row")
layer f32 16384: ("layer_norm_rows16_f32", "1024 threads per row")
layer f32 16388: ("layer_norm_rows_f32", "544 threads per row")
layer f32 32768: ("layer_norm_rows_f32", "1024 threads per row")
layer bf16 8: ("layer_norm_rows16_bf16", "32 threads per row")
layer bf16 1016: ("layer_norm_rows16_bf16", "64 threads per row")
layer bf16 1024: ("layer_norm_warp_bf16", "1 row per block")
layer bf16 1032: ("layer_norm_rows16_bf16", "96 threads per row")
layer bf16 4088: ("layer_norm_rows16_bf16", "256 threads per row")
layer bf16 4096: ("layer_norm_rows_bf16", "128 threads per row")
layer bf16 4104: ("layer_norm_rows_bf16", "160 threads per row")
layer bf16 8184: ("layer_norm_rows_bf16", "256 threads per row")
layer bf16 8192: ("layer_norm_rows_bf16", "256 threads per row")
layer bf16 8200: ("layer_norm_rows_bf16", "288 threads per row")
layer bf16 16384: ("layer_norm_rows_bf16", "512 threads per row")
layer bf16 32768: ("layer_norm_rows_bf16", "1024 threads per row")
"#;

    /// [`every_algorithm_plans_as_before`]'s digest, as the plan chose before the algorithm
    /// types became configs.
    const PINNED_DIGEST: &str = "eb4f47bc3c0fdeb5";
}
