//! The norm algorithms a caller chooses from, as small configs: how the row is held (a block's
//! registers, a warp, re-read from L2, a ring of shared-memory slots), and for each its
//! independent knobs (elements per thread, the loads' cache hints, the grid, the block size).
//!
//! A config has one spelling, its `name()` (`rows-16-el`: the bench label and the docs), made
//! of its knobs' tokens in a fixed order; its kernel entries are `{rms,layer}_norm_{stem}_{f32,bf16}`
//! with [`NormAlgorithm::kernel_stem`] the same tokens joined by `_` (`rows16_el`), less the
//! launch knobs the entry does not fix (a looped kernel's block size, `warp-1`'s one-warp
//! blocks) and less the width of the original in-register kernel (`rows`, 32 elements per thread,
//! older than its siblings). A test checks the two spellings against each other.

/// Elements per thread of a block-per-row in-register kernel (`*_rows16_*`, `*_rows_*`,
/// `*_rows64_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowsWidth {
    /// 16 elements per thread (4 f32 vectors, 2 bf16).
    W16,
    /// 32 elements per thread (8 f32 vectors, 4 bf16): the default kernel.
    W32,
    /// 64 elements per thread (16 f32 vectors, 8 bf16).
    W64,
}

impl RowsWidth {
    /// Elements a thread holds.
    pub const fn elements(self) -> usize {
        match self {
            RowsWidth::W16 => 16,
            RowsWidth::W32 => 32,
            RowsWidth::W64 => 64,
        }
    }
}

/// The cache hints of an in-register kernel's loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowLoads {
    /// Plain loads and stores.
    Plain,
    /// Evict-first (`.cs`) loads of `x` and stores of `y` (`-cs`, `_cs`).
    Streaming,
    /// `evict_last` (L1 and L2) loads of `x`, the weight and the bias, as torch.compile's
    /// kernels load them (`-el`, `_el`).
    EvictLast,
}

/// A block-per-row in-register kernel: the row held in registers as 16-byte vectors, read once
/// and written once, a block of `cols / width` threads (whole warps) per row, where that is at
/// most 1024 and the driver's limit for the kernel. Kernels exist for 16, 32 and 64 elements
/// with plain loads, 16 and 32 with streaming loads, 16 with `evict_last` loads; another
/// combination runs the default's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowsConfig {
    /// Elements per thread.
    pub width: RowsWidth,
    /// The loads' cache hints.
    pub loads: RowLoads,
}

impl RowsConfig {
    /// The in-register kernel of `width` elements per thread with `loads`.
    pub const fn new(width: RowsWidth, loads: RowLoads) -> RowsConfig {
        RowsConfig { width, loads }
    }

    /// `rows-{16,32,64}` with `-cs` (streaming) or `-el` (`evict_last`) after it.
    pub const fn name(self) -> &'static str {
        use RowLoads::*;
        use RowsWidth::*;
        match (self.width, self.loads) {
            (W16, Plain) => "rows-16",
            (W32, Plain) => "rows-32",
            (W64, Plain) => "rows-64",
            (W16, Streaming) => "rows-16-cs",
            (W32, Streaming) => "rows-32-cs",
            (W64, Streaming) => "rows-64-cs",
            (W16, EvictLast) => "rows-16-el",
            (W32, EvictLast) => "rows-32-el",
            (W64, EvictLast) => "rows-64-el",
        }
    }

    /// The stem of its kernel entries, if there is such a kernel.
    pub const fn kernel_stem(self) -> Option<&'static str> {
        use RowLoads::*;
        use RowsWidth::*;
        Some(match (self.width, self.loads) {
            (W16, Plain) => "rows16",
            (W32, Plain) => "rows",
            (W64, Plain) => "rows64",
            (W16, Streaming) => "rows16_cs",
            (W32, Streaming) => "rows_cs",
            (W16, EvictLast) => "rows16_el",
            (W64, Streaming) | (W32, EvictLast) | (W64, EvictLast) => return None,
        })
    }
}

/// The grid of a warp-per-row kernel (rows of up to 1024 columns, 32 elements per lane).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarpGrid {
    /// Blocks of 8 warps, a row each (`warp`, `*_norm_warp_*`).
    Blocks,
    /// A persistent grid (as many blocks as are resident at once) whose warps keep the weight
    /// (and bias) in registers across their rows (`warp-keep`, `*_norm_warp_keep_*`).
    Keep,
    /// A persistent grid whose warps issue the loads of their next row before the reductions of
    /// their current one (`warp-pipe`, `*_norm_warp_pipe_*`).
    Pipelined,
    /// The kernel of [`WarpGrid::Blocks`] in blocks of one warp, one row per block, as
    /// Inductor launches its persistent reductions of such rows (`warp-1`).
    Solo,
}

impl WarpGrid {
    /// `warp`, `warp-keep`, `warp-pipe`, `warp-1`.
    pub const fn name(self) -> &'static str {
        match self {
            WarpGrid::Blocks => "warp",
            WarpGrid::Keep => "warp-keep",
            WarpGrid::Pipelined => "warp-pipe",
            WarpGrid::Solo => "warp-1",
        }
    }

    /// The stem of its kernel entries.
    pub const fn kernel_stem(self) -> &'static str {
        match self {
            WarpGrid::Blocks | WarpGrid::Solo => "warp",
            WarpGrid::Keep => "warp_keep",
            WarpGrid::Pipelined => "warp_pipe",
        }
    }
}

/// The looped kernels: vectors per thread per step and whether the loads carry eviction hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopKind {
    /// One vector per thread per step, `evict_last` on the re-read row's first loads and
    /// `evict_first` on its last (`*_norm_loop_*`).
    Hinted,
    /// Two vectors per thread per step, hints as [`LoopKind::Hinted`] (`*_norm_loop2_*`).
    Hinted2,
    /// One vector per thread per step, plain loads (`*_norm_loop_plain_*`): what the hints buy.
    Plain,
}

impl LoopKind {
    /// Vectors a thread loads per step.
    pub const fn vectors(self) -> usize {
        match self {
            LoopKind::Hinted | LoopKind::Plain => 1,
            LoopKind::Hinted2 => 2,
        }
    }

    /// The stem of its kernel entries.
    pub const fn kernel_stem(self) -> &'static str {
        match self {
            LoopKind::Hinted => "loop",
            LoopKind::Hinted2 => "loop2",
            LoopKind::Plain => "loop_plain",
        }
    }
}

/// Most threads per block of a looped kernel (fewer for short rows: whole warps, the row's
/// vectors at the kind's vectors per step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopBlock {
    /// 256 threads.
    T256,
    /// 512 threads.
    T512,
    /// 1024 threads.
    T1024,
}

impl LoopBlock {
    /// Threads.
    pub const fn threads(self) -> u32 {
        match self {
            LoopBlock::T256 => 256,
            LoopBlock::T512 => 512,
            LoopBlock::T1024 => 1024,
        }
    }
}

/// A looped L2 re-read kernel of torch.compile's formulation: a block per row, each pass over
/// the row in steps of `kind.vectors()` 16-byte vectors per thread, the row re-read (from L2)
/// for the output; any aligned row of a multiple of the vector width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LoopConfig {
    /// Which looped kernel.
    pub kind: LoopKind,
    /// Most threads per block.
    pub block: LoopBlock,
}

impl LoopConfig {
    /// The looped kernel `kind` in blocks of at most `block` threads.
    pub const fn new(kind: LoopKind, block: LoopBlock) -> LoopConfig {
        LoopConfig { kind, block }
    }

    /// `loop-{256,512,1024}`, `loop2-...` (two vectors per step), `loop-plain-...` (no hints).
    pub const fn name(self) -> &'static str {
        use LoopBlock::*;
        use LoopKind::*;
        match (self.kind, self.block) {
            (Hinted, T256) => "loop-256",
            (Hinted, T512) => "loop-512",
            (Hinted, T1024) => "loop-1024",
            (Hinted2, T256) => "loop2-256",
            (Hinted2, T512) => "loop2-512",
            (Hinted2, T1024) => "loop2-1024",
            (Plain, T256) => "loop-plain-256",
            (Plain, T512) => "loop-plain-512",
            (Plain, T1024) => "loop-plain-1024",
        }
    }
}

/// Which norm kernels to run. Both norms follow the same rules (see
/// [`Gpu::layer_norm`](crate::Gpu::layer_norm)). Every choice but the default is a tuning
/// candidate: its own kernel where that kernel takes the row ([`NormAlgorithm::fits`]), the
/// default's plan elsewhere.
///
/// ```
/// use gpukern::ops::norm::{NormAlgorithm, RowLoads, RowsConfig, RowsWidth};
/// let el = NormAlgorithm::Rows(RowsConfig::new(RowsWidth::W16, RowLoads::EvictLast));
/// assert_eq!(el.name(), "rows-16-el");
/// assert_eq!(el.kernel_stem(), Some("rows16_el")); // rms_norm_rows16_el_f32, ...
/// assert_eq!(NormAlgorithm::from_name("rows-16-el"), Some(el));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NormAlgorithm {
    /// One block of 256 threads per row, the row re-read from memory for each pass, tree
    /// reductions in shared memory: the tutorial kernels `*_norm_block_reduce_*`.
    BlockReduce,
    /// The default: per row length, norm and element type, the kernel that measured fastest on
    /// the H200 ([`DEFAULT_RULES`](super::DEFAULT_RULES), first match wins), else the
    /// in-register kernel of 32 elements per thread at half its capacity; the tutorial kernel
    /// where the row's length is not a multiple of the vector width (4 f32, 8 bf16) or a buffer
    /// is not 16-byte aligned.
    #[default]
    InRegisters,
    /// A block per row, the row in registers.
    Rows(RowsConfig),
    /// A warp per row.
    Warp(WarpGrid),
    /// One block per row, the row read from memory for the statistics and again for the output
    /// (LayerNorm: three reads), the re-reads meant to hit L2 (`*_norm_two_pass_*`, the
    /// formulation torch.compile's kernel takes for long rows); any aligned row of a multiple
    /// of the vector width.
    TwoPass,
    /// torch.compile's looped L2 re-read.
    Loop(LoopConfig),
    /// The bulk-copy ring (`*_norm_ring_*`, the `sm_90a` module): a persistent grid whose blocks
    /// stream their rows through three shared-memory slots filled by the copy engine, 16
    /// elements per thread, the weight (and bias) in registers; rows of up to 16384 columns,
    /// on a compute capability 9.0 GPU (elsewhere the default's plan).
    Ring,
}

impl NormAlgorithm {
    /// The algorithms gpukern's bench and tests walk, slowest first (the tutorial, the default,
    /// the candidates in the order they were added).
    pub const ALL: [NormAlgorithm; 20] = {
        use LoopBlock::*;
        use LoopKind::{Hinted, Hinted2};
        use NormAlgorithm::{Loop, Rows, Warp};
        use RowLoads::{EvictLast, Plain, Streaming};
        use RowsWidth::*;
        [
            NormAlgorithm::BlockReduce,
            NormAlgorithm::InRegisters,
            Rows(RowsConfig::new(W16, Plain)),
            Rows(RowsConfig::new(W32, Plain)),
            Rows(RowsConfig::new(W64, Plain)),
            Warp(WarpGrid::Blocks),
            Warp(WarpGrid::Keep),
            Rows(RowsConfig::new(W16, Streaming)),
            Rows(RowsConfig::new(W32, Streaming)),
            Warp(WarpGrid::Pipelined),
            NormAlgorithm::TwoPass,
            Loop(LoopConfig::new(Hinted, T256)),
            Loop(LoopConfig::new(Hinted, T512)),
            Loop(LoopConfig::new(Hinted, T1024)),
            Loop(LoopConfig::new(Hinted2, T256)),
            Loop(LoopConfig::new(Hinted2, T512)),
            Loop(LoopConfig::new(LoopKind::Plain, T512)),
            NormAlgorithm::Ring,
            Rows(RowsConfig::new(W16, EvictLast)),
            Warp(WarpGrid::Solo),
        ]
    };

    /// Its one spelling, the bench label and the docs' name: `block-reduce`, `in-registers`,
    /// `two-pass`, `ring`, or its config's ([`RowsConfig::name`], [`WarpGrid::name`],
    /// [`LoopConfig::name`]).
    pub const fn name(self) -> &'static str {
        match self {
            NormAlgorithm::BlockReduce => "block-reduce",
            NormAlgorithm::InRegisters => "in-registers",
            NormAlgorithm::Rows(c) => c.name(),
            NormAlgorithm::Warp(g) => g.name(),
            NormAlgorithm::TwoPass => "two-pass",
            NormAlgorithm::Loop(c) => c.name(),
            NormAlgorithm::Ring => "ring",
        }
    }

    /// The algorithm spelt `name` ([`NormAlgorithm::name`]), any config included.
    pub fn from_name(name: &str) -> Option<NormAlgorithm> {
        use LoopBlock::*;
        use LoopKind::{Hinted, Hinted2};
        use RowLoads::{EvictLast, Plain, Streaming};
        use RowsWidth::*;
        let rows = [W16, W32, W64]
            .into_iter()
            .flat_map(|w| [Plain, Streaming, EvictLast].map(|l| NormAlgorithm::Rows(RowsConfig::new(w, l))));
        let warps = [
            WarpGrid::Blocks,
            WarpGrid::Keep,
            WarpGrid::Pipelined,
            WarpGrid::Solo,
        ]
        .map(NormAlgorithm::Warp);
        let loops = [Hinted, Hinted2, LoopKind::Plain]
            .into_iter()
            .flat_map(|k| [T256, T512, T1024].map(|b| NormAlgorithm::Loop(LoopConfig::new(k, b))));
        [
            NormAlgorithm::BlockReduce,
            NormAlgorithm::InRegisters,
            NormAlgorithm::TwoPass,
            NormAlgorithm::Ring,
        ]
        .into_iter()
        .chain(rows)
        .chain(warps)
        .chain(loops)
        .find(|a| a.name() == name)
    }

    /// The stem of its kernel entries, `{rms,layer}_norm_{stem}_{f32,bf16}` (`None` for the
    /// default, which is not one kernel, and for a config no kernel was written for).
    pub const fn kernel_stem(self) -> Option<&'static str> {
        Some(match self {
            NormAlgorithm::BlockReduce => "block_reduce",
            NormAlgorithm::InRegisters => return None,
            NormAlgorithm::Rows(c) => return c.kernel_stem(),
            NormAlgorithm::Warp(g) => g.kernel_stem(),
            NormAlgorithm::TwoPass => "two_pass",
            NormAlgorithm::Loop(c) => c.kind.kernel_stem(),
            NormAlgorithm::Ring => "ring",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the bench records hold stay as they were, in `ALL`'s order.
    #[test]
    fn every_algorithm_keeps_its_recorded_name() {
        let names = [
            "block-reduce",
            "in-registers",
            "rows-16",
            "rows-32",
            "rows-64",
            "warp",
            "warp-keep",
            "rows-16-cs",
            "rows-32-cs",
            "warp-pipe",
            "two-pass",
            "loop-256",
            "loop-512",
            "loop-1024",
            "loop2-256",
            "loop2-512",
            "loop-plain-512",
            "ring",
            "rows-16-el",
            "warp-1",
        ];
        let got: Vec<_> = NormAlgorithm::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(got, names);
        for a in NormAlgorithm::ALL {
            assert_eq!(NormAlgorithm::from_name(a.name()), Some(a));
        }
        assert_eq!(NormAlgorithm::from_name("rows-48"), None);
    }

    /// The name and the kernel stem are one spelling: the stem is the name's tokens joined by
    /// `_` with the width fused to `rows` (`rows16`; `rows` alone for 32), less the block size
    /// of a looped kernel and `warp-1`'s `-1`. Every config with a kernel, and none without.
    #[test]
    fn the_kernel_stem_is_the_name_spelt_for_an_entry() {
        let mut with_kernel = 0;
        for name in every_name() {
            let a = NormAlgorithm::from_name(&name).expect("a name of a config");
            let Some(stem) = a.kernel_stem() else {
                assert!(
                    matches!(a, NormAlgorithm::InRegisters | NormAlgorithm::Rows(_)),
                    "{name}"
                );
                continue;
            };
            with_kernel += 1;
            let mut tokens: Vec<&str> = name.split('-').collect();
            if matches!(a, NormAlgorithm::Loop(_)) || name == "warp-1" {
                tokens.pop();
            }
            let mut spelt = tokens.join("_");
            for (from, to) in [("rows_16", "rows16"), ("rows_32", "rows"), ("rows_64", "rows64")] {
                if let Some(rest) = spelt.strip_prefix(from) {
                    spelt = format!("{to}{rest}");
                }
            }
            assert_eq!(spelt, stem, "{name}");
        }
        // 6 in-register kernels, 4 warp grids, 9 looped configs, the tutorial, two-pass, ring.
        assert_eq!(with_kernel, 22);
    }

    /// Every name [`NormAlgorithm::from_name`] takes.
    fn every_name() -> Vec<String> {
        let mut names: Vec<String> = ["block-reduce", "in-registers", "two-pass", "ring"]
            .into_iter()
            .chain(["warp", "warp-keep", "warp-pipe", "warp-1"])
            .map(String::from)
            .collect();
        for w in ["16", "32", "64"] {
            for l in ["", "-cs", "-el"] {
                names.push(format!("rows-{w}{l}"));
            }
        }
        for k in ["loop", "loop2", "loop-plain"] {
            for b in ["256", "512", "1024"] {
                names.push(format!("{k}-{b}"));
            }
        }
        names
    }
}
