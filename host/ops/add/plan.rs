//! The plan of an element-wise call: which kernel (its memory access) and whether the grid is
//! persistent, chosen once per call from the algorithm and the buffers' alignment.

use kernels_gpu::add as family;

/// Which kernel of a pair runs: the scalar one (4-byte accesses, one thread per element) or its
/// `_vec4` twin (16-byte accesses, several vectors per thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Scalar,
    Vec4,
    /// The `_vec4_streaming` twin (evict-first accesses).
    Vec4Streaming,
    /// The one-pass tile candidates: `_vec4_x2`, `_vec4_x4`, `_vec4_x8`, `_vec4_b512`,
    /// `_vec4_x4_cs_stores`.
    X2,
    X4,
    X8,
    B512,
    X4CsStores,
}

impl Access {
    /// `(threads per block, vectors per thread)` of the kernel (`None` for the scalar one).
    pub(crate) fn tile(self) -> Option<(u32, usize)> {
        Some(match self {
            Access::Scalar => return None,
            Access::Vec4 | Access::Vec4Streaming => (family::BLOCK, family::VEC_UNROLL),
            Access::X2 => family::TILE_X2,
            Access::X4 | Access::X4CsStores => family::TILE_X4,
            Access::X8 => family::TILE_X8,
            Access::B512 => family::TILE_B512,
        })
    }
}

/// What one element-wise call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AddPlan {
    /// The kernel of the pair.
    pub(crate) access: Access,
    /// Whether the grid is persistent (at most the device's resident blocks).
    pub(crate) persistent: bool,
}

impl AddPlan {
    /// The plan of `algorithm` on buffers that are all 16-byte aligned (`aligned`) or not: the
    /// `Vec4*` algorithms need them all aligned, which device allocations are; otherwise the
    /// scalar kernel runs.
    pub(crate) fn choose(algorithm: AddAlgorithm, aligned: bool) -> AddPlan {
        let access = match algorithm {
            AddAlgorithm::Scalar => Access::Scalar,
            _ if !aligned => Access::Scalar,
            AddAlgorithm::Vec4 | AddAlgorithm::Vec4Persistent => Access::Vec4,
            AddAlgorithm::Vec4Streaming | AddAlgorithm::Vec4StreamingPersistent => Access::Vec4Streaming,
            AddAlgorithm::Vec4X2 => Access::X2,
            AddAlgorithm::Vec4X4 => Access::X4,
            AddAlgorithm::Vec4X8 => Access::X8,
            AddAlgorithm::Vec4B512 => Access::B512,
            AddAlgorithm::Vec4X4CsStores => Access::X4CsStores,
        };
        let persistent = matches!(
            algorithm,
            AddAlgorithm::Vec4Persistent | AddAlgorithm::Vec4StreamingPersistent
        );
        AddPlan { access, persistent }
    }
}

/// Which element-wise kernel to run (for `add` and `increment_by_one` alike). All are exact (one
/// f32 rounding per element). The `Vec4*` algorithms need every buffer 16-byte aligned, which
/// device allocations are; otherwise [`AddAlgorithm::Scalar`] runs instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AddAlgorithm {
    /// One thread per element, 4-byte accesses (the first tutorial's kernel, `add`).
    Scalar,
    /// 16-byte accesses, four vectors of 4 floats per thread, a grid-stride loop and a scalar
    /// tail (`add_vec4`), one block per `VEC_TILE` vectors; the default.
    #[default]
    Vec4,
    /// `add_vec4` on a persistent grid: no more blocks than are resident on the device at once,
    /// each going round the grid-stride loop several times (no block launched after another
    /// ends, no tail wave).
    Vec4Persistent,
    /// `add_vec4_streaming`: [`AddAlgorithm::Vec4`] with evict-first (`.cs`) loads and stores.
    Vec4Streaming,
    /// `add_vec4_streaming` on a persistent grid.
    Vec4StreamingPersistent,
    /// Tuning candidate `add_vec4_x2`: 2 vectors per thread, blocks of 256, one pass (a block per
    /// 512 vectors), full tiles without bounds checks.
    Vec4X2,
    /// Tuning candidate `add_vec4_x4`: as [`AddAlgorithm::Vec4`] with full tiles unchecked.
    Vec4X4,
    /// `add_vec4_x8`: 8 vectors per thread, blocks of 256, one pass, full tiles unchecked (all
    /// loads before any store); [`AddAlgorithm::INCREMENT_DEFAULT`].
    Vec4X8,
    /// Tuning candidate `add_vec4_b512`: 4 vectors per thread, blocks of 512, one pass.
    Vec4B512,
    /// Tuning candidate `add_vec4_x4_cs_stores`: [`AddAlgorithm::Vec4X4`] with evict-first
    /// stores only.
    Vec4X4CsStores,
}

impl AddAlgorithm {
    /// What [`Gpu::increment_by_one`](crate::Gpu::increment_by_one) runs: [`AddAlgorithm::Vec4X8`], the fastest in place at
    /// every benchmarked size on the H200 (`bench/results/latest.jsonl`); `add`, three streams
    /// instead of two, keeps [`AddAlgorithm::Vec4`] (the variants were within 1% of each other at
    /// 2^28 and `Vec4` was ahead at 2^24).
    pub const INCREMENT_DEFAULT: AddAlgorithm = AddAlgorithm::Vec4X8;

    /// Every algorithm, the tutorial's first.
    pub const ALL: [AddAlgorithm; 10] = [
        AddAlgorithm::Scalar,
        AddAlgorithm::Vec4,
        AddAlgorithm::Vec4Persistent,
        AddAlgorithm::Vec4Streaming,
        AddAlgorithm::Vec4StreamingPersistent,
        AddAlgorithm::Vec4X2,
        AddAlgorithm::Vec4X4,
        AddAlgorithm::Vec4X8,
        AddAlgorithm::Vec4B512,
        AddAlgorithm::Vec4X4CsStores,
    ];

    /// A short name: `scalar`, `vec4`, `vec4_persistent`, `vec4_streaming`,
    /// `vec4_streaming_persistent`, `vec4_x2`, `vec4_x4`, `vec4_x8`, `vec4_b512`,
    /// `vec4_x4_cs_stores`.
    pub fn name(self) -> &'static str {
        match self {
            AddAlgorithm::Scalar => "scalar",
            AddAlgorithm::Vec4 => "vec4",
            AddAlgorithm::Vec4Persistent => "vec4_persistent",
            AddAlgorithm::Vec4Streaming => "vec4_streaming",
            AddAlgorithm::Vec4StreamingPersistent => "vec4_streaming_persistent",
            AddAlgorithm::Vec4X2 => "vec4_x2",
            AddAlgorithm::Vec4X4 => "vec4_x4",
            AddAlgorithm::Vec4X8 => "vec4_x8",
            AddAlgorithm::Vec4B512 => "vec4_b512",
            AddAlgorithm::Vec4X4CsStores => "vec4_x4_cs_stores",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every algorithm's kernel on aligned buffers, and the scalar kernel on unaligned ones.
    #[test]
    fn each_algorithm_takes_its_kernel_and_unaligned_buffers_the_scalar_one() {
        let expected = [
            (AddAlgorithm::Scalar, Access::Scalar, false),
            (AddAlgorithm::Vec4, Access::Vec4, false),
            (AddAlgorithm::Vec4Persistent, Access::Vec4, true),
            (AddAlgorithm::Vec4Streaming, Access::Vec4Streaming, false),
            (AddAlgorithm::Vec4StreamingPersistent, Access::Vec4Streaming, true),
            (AddAlgorithm::Vec4X2, Access::X2, false),
            (AddAlgorithm::Vec4X4, Access::X4, false),
            (AddAlgorithm::Vec4X8, Access::X8, false),
            (AddAlgorithm::Vec4B512, Access::B512, false),
            (AddAlgorithm::Vec4X4CsStores, Access::X4CsStores, false),
        ];
        assert_eq!(expected.len(), AddAlgorithm::ALL.len());
        for (algorithm, access, persistent) in expected {
            assert_eq!(AddPlan::choose(algorithm, true), AddPlan { access, persistent });
            assert_eq!(AddPlan::choose(algorithm, false).access, Access::Scalar);
        }
    }

    /// The tiles: the scalar kernel has none, the `_b512` candidate blocks of 512.
    #[test]
    fn tiles_follow_the_kernels() {
        assert_eq!(Access::Scalar.tile(), None);
        assert_eq!(Access::Vec4.tile(), Some((family::BLOCK, family::VEC_UNROLL)));
        assert_eq!(Access::B512.tile(), Some(family::TILE_B512));
    }
}
