//! A norm algorithm's independent choices: [`NormAlgorithm`]'s 20 flat variants seen as the
//! dimensions they combine (how the row is held, how its loads are hinted, the grid), and the
//! one spelling each combination has in the bench labels and the docs ([`NormAlgorithm::name`])
//! and in the kernel entries (`{rms,layer}_norm_{stem}_{f32,bf16}`, [`NormVariant::kernel_stem`]).

use super::{NormAlgorithm, RowsWidth};

/// The cache hints of an in-register kernel's loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowLoads {
    /// Plain loads and stores.
    Plain,
    /// Evict-first (`.cs`) loads of `x` and stores of `y` (`-cs`, `_cs`).
    Streaming,
    /// `evict_last` loads of `x`, the weight and the bias, as torch.compile's (`-el`, `_el`).
    EvictLast,
}

/// The grid of a warp-per-row kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarpGrid {
    /// Blocks of 8 warps, a row each (`warp`).
    Blocks,
    /// A persistent grid whose warps keep the weight (and bias) in registers (`warp-keep`).
    Keep,
    /// A persistent grid whose warps load their next row before reducing the current one
    /// (`warp-pipe`).
    Pipelined,
    /// Blocks of one warp (`warp-1`).
    Solo,
}

/// The choices one [`NormAlgorithm`] makes, as independent dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NormVariant {
    /// The tutorial kernels: a block of 256 threads per row, tree reductions.
    BlockReduce,
    /// The default plan: the measured best kernel per row length ([`super::DEFAULT_RULES`]).
    Default,
    /// A block per row, the row in registers.
    Rows {
        /// Elements per thread.
        width: RowsWidth,
        /// The loads' cache hints.
        loads: RowLoads,
    },
    /// A warp per row.
    Warp {
        /// The grid.
        grid: WarpGrid,
    },
    /// A block per row, the row re-read from L2 for the output.
    TwoPass,
    /// torch.compile's looped L2 re-read.
    Loop {
        /// Vectors per thread per step: 1 or 2.
        vectors: usize,
        /// Most threads per block: 256, 512 or 1024.
        threads: u32,
        /// Whether the re-read row's loads carry `evict_last`/`evict_first`.
        hints: bool,
    },
    /// Rows streamed through a ring of shared-memory slots by the copy engine (sm_90a).
    Ring,
}

impl NormVariant {
    /// The stem of the variant's kernel entries, `{rms,layer}_norm_{stem}_{f32,bf16}` (`None`
    /// for the default, which is not one kernel).
    pub fn kernel_stem(self) -> Option<&'static str> {
        Some(match self {
            NormVariant::Default => return None,
            NormVariant::BlockReduce => "block_reduce",
            NormVariant::Rows { width, loads } => match (width, loads) {
                (RowsWidth::W16, RowLoads::Plain) => "rows16",
                (RowsWidth::W32, RowLoads::Plain) => "rows",
                (RowsWidth::W64, RowLoads::Plain) => "rows64",
                (RowsWidth::W16, RowLoads::Streaming) => "rows16_cs",
                (RowsWidth::W32, RowLoads::Streaming) => "rows_cs",
                (RowsWidth::W16, RowLoads::EvictLast) => "rows16_el",
                _ => return None,
            },
            NormVariant::Warp { grid } => match grid {
                WarpGrid::Blocks | WarpGrid::Solo => "warp",
                WarpGrid::Keep => "warp_keep",
                WarpGrid::Pipelined => "warp_pipe",
            },
            NormVariant::TwoPass => "two_pass",
            NormVariant::Loop { hints: false, .. } => "loop_plain",
            NormVariant::Loop { vectors: 2, .. } => "loop2",
            NormVariant::Loop { .. } => "loop",
            NormVariant::Ring => "ring",
        })
    }

    /// The algorithm that makes these choices, if one does (not every combination has a kernel:
    /// no 64-element kernel with hints, for one).
    pub fn algorithm(self) -> Option<NormAlgorithm> {
        NormAlgorithm::ALL.into_iter().find(|a| a.variant() == self)
    }
}

impl NormAlgorithm {
    /// The independent choices this algorithm makes.
    pub fn variant(self) -> NormVariant {
        use NormAlgorithm as A;
        let rows = |width, loads| NormVariant::Rows { width, loads };
        let warp = |grid| NormVariant::Warp { grid };
        let looped = |vectors, threads, hints| NormVariant::Loop {
            vectors,
            threads,
            hints,
        };
        match self {
            A::BlockReduce => NormVariant::BlockReduce,
            A::InRegisters => NormVariant::Default,
            A::Rows16 => rows(RowsWidth::W16, RowLoads::Plain),
            A::Rows32 => rows(RowsWidth::W32, RowLoads::Plain),
            A::Rows64 => rows(RowsWidth::W64, RowLoads::Plain),
            A::Rows16Stream => rows(RowsWidth::W16, RowLoads::Streaming),
            A::Rows32Stream => rows(RowsWidth::W32, RowLoads::Streaming),
            A::Rows16EvictLast => rows(RowsWidth::W16, RowLoads::EvictLast),
            A::Warp => warp(WarpGrid::Blocks),
            A::WarpKeep => warp(WarpGrid::Keep),
            A::WarpPipe => warp(WarpGrid::Pipelined),
            A::WarpSolo => warp(WarpGrid::Solo),
            A::TwoPass => NormVariant::TwoPass,
            A::Loop256 => looped(1, 256, true),
            A::Loop512 => looped(1, 512, true),
            A::Loop1024 => looped(1, 1024, true),
            A::Loop2x256 => looped(2, 256, true),
            A::Loop2x512 => looped(2, 512, true),
            A::LoopPlain512 => looped(1, 512, false),
            A::Ring => NormVariant::Ring,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every algorithm is one combination of choices and back; the names the bench records
    /// hold stay as they were.
    #[test]
    fn every_algorithm_is_one_variant_and_keeps_its_recorded_name() {
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
        for (algorithm, name) in NormAlgorithm::ALL.into_iter().zip(names) {
            assert_eq!(algorithm.variant().algorithm(), Some(algorithm));
            assert_eq!(algorithm.name(), name);
        }
        let none = NormVariant::Rows {
            width: RowsWidth::W64,
            loads: RowLoads::EvictLast,
        };
        assert_eq!(none.algorithm(), None);
        assert_eq!(none.kernel_stem(), None);
    }
}
