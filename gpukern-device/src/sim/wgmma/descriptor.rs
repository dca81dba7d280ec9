//! The shared-memory matrix descriptors of `wgmma` operands, decoded as the PTX ISA defines them,
//! and the 128-byte swizzle of the canonical layouts.

/// A shared-memory matrix descriptor, decoded (PTX ISA, "Asynchronous Warpgroup Level Matrix
/// Shared Memory Layout", "Matrix Descriptor Format"): bits 0..14 start address >> 4, 16..30
/// leading dimension byte offset >> 4, 32..46 stride dimension byte offset >> 4, 49..52 base
/// offset, 62..64 swizzle mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Descriptor {
    /// Start address in the shared window, bytes.
    pub start: usize,
    /// Leading dimension byte offset.
    pub lbo: usize,
    /// Stride dimension byte offset.
    pub sbo: usize,
    /// Base offset (bits 49..52).
    pub base_offset: u64,
    /// Swizzle mode (bits 62..64).
    pub swizzle: u64,
}

impl Descriptor {
    /// Decodes `desc`.
    pub(crate) fn decode(desc: u64) -> Self {
        let bytes = |shift: u32| (((desc >> shift) & 0x3fff) << 4) as usize;
        Self {
            start: bytes(0),
            lbo: bytes(16),
            sbo: bytes(32),
            base_offset: (desc >> 49) & 7,
            swizzle: desc >> 62,
        }
    }

    /// The shared-window byte address of element (`mn`, `k`) of the operand this descriptor
    /// describes (`mn` the row of `A` or the column of `B`, `k` in `0..16`) of 16-bit
    /// elements, `mn_major` when the instruction's imm-trans bit of the operand is 1. The
    /// canonical layouts with 128-byte swizzle, in 16-bit elements (`T = 8` per 16 bytes):
    /// * K-major: `((8, m), (T, 2)) : ((8T, SBO), (1, T))`: row `mn % 8` of an 8-row group
    ///   128 bytes on, groups `SBO` apart, the 16 `k` contiguous (LBO unused);
    /// * MN-major: `((T, 8, m), (8, 2)) : ((1, T, LBO), (8T, SBO))`: 64 contiguous `mn`
    ///   (128 bytes), 64-element chunks `LBO` apart, row `k % 8` 128 bytes on, 8-`k` groups
    ///   `SBO` apart;
    ///
    /// then the 128-byte swizzle of the address: bits 4..7 (the 16-byte chunk) XOR bits
    /// 7..10 (the row within 8 rows of 128 bytes).
    ///
    /// Elements of `bytes` bytes: 2, or 4 for TF32, whose K-major layout is the same in
    /// bytes (`T = 4`, 32 elements per 128-byte row, `k` in `0..8`): element (`mn`, `k`) at
    /// `start + (mn % 8) 128 + (mn / 8) SBO + 4 k`, then the swizzle. TF32 has no MN-major
    /// form (`wgmma` cannot transpose 32-bit operands).
    #[track_caller]
    pub(crate) fn address_of(&self, mn: usize, k: usize, mn_major: bool, bytes: usize) -> usize {
        assert!(
            bytes == 2 || !mn_major,
            "wgmma descriptor {self:?}: an MN-major operand of {bytes}-byte elements (only 16-bit types transpose)"
        );
        assert_eq!(
            self.swizzle, 1,
            "wgmma descriptor {self:?}: the simulator models the 128-byte swizzle only"
        );
        assert_eq!(
            self.base_offset, 0,
            "wgmma descriptor {self:?}: the simulator models base offset 0 only (atoms 1024-byte aligned)"
        );
        let linear = if mn_major {
            self.start + 2 * (mn % 64) + (mn / 64) * self.lbo + (k % 8) * 128 + (k / 8) * self.sbo
        } else {
            self.start + (mn % 8) * 128 + (mn / 8) * self.sbo + bytes * k
        };
        swizzle_128b(linear)
    }
}

/// The 128-byte swizzle of a shared-window byte address (CUTLASS's `Swizzle<3, 4, 3>`):
/// written here again rather than shared with [`crate::tma::swizzle_128b`], so that a
/// mistake in one is not hidden by the other.
pub(crate) fn swizzle_128b(address: usize) -> usize {
    let row = (address >> 7) & 7;
    let chunk = (address >> 4) & 7;
    (address & !0x70) | ((chunk ^ row) << 4)
}
