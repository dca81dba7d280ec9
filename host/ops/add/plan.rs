//! The plan of an element-wise call: which kernel (its memory access) and whether the grid is
//! persistent, chosen once per call from the algorithm and the buffers' alignment.

use kernels_gpu::add as family;

use super::AddAlgorithm;

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
