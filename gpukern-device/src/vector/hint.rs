//! Cache hints of the vector accesses: what a load or a store tells the caches about the data.
//! A hint changes no value; it decides which lines the L1 and L2 keep.

/// How a [`super::load_hinted`] reads global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadHint {
    /// A plain load (`ld.global`): cached in L1 and L2 as usual.
    Default,
    /// Through the read-only (texture) path, `ld.global.nc`: for data no thread of the grid
    /// writes during the kernel (a weight, a bias, an input read by several threads). Reading
    /// data the kernel also writes this way is undefined on the GPU; the simulator reports a
    /// read-only load from a buffer the launch may write, and from shared memory.
    ReadOnly,
    /// Streaming, `ld.global.cs` (cache, evict first): data read once, whose lines should be
    /// the first to go, so that a long stream displaces less of what the caches hold.
    Streaming,
    /// Evict first from L1 and L2 (`ld.global.L1::evict_first.L2::cache_hint` with an
    /// `evict_first` L2 policy; Triton's `eviction_policy="evict_first"`). Where
    /// [`super::EVICT_HINTS`] is false (the sm_80 module), [`LoadHint::Streaming`].
    EvictFirst,
    /// Evict last (`ld.global.L1::evict_last.L2::cache_hint` with an `evict_last` policy): data
    /// read again soon, which L2 should keep. Where [`super::EVICT_HINTS`] is false, a plain load.
    EvictLast,
    /// Through the read-only path without allocating in L1, with L2 fetching the whole aligned
    /// 256 bytes around the access (`ld.global.nc.L1::no_allocate.L2::256B`, sm_80 and newer):
    /// for a stream read once in pieces that cover each 256 bytes soon after one another (a
    /// weight read row by row). As [`LoadHint::ReadOnly`], no thread of the grid may write the
    /// data during the kernel (the simulator checks it alike). Where [`super::EVICT_HINTS`] is
    /// false (the sm_80 module, whose PTX ISA 7.0 lacks both qualifiers), [`LoadHint::ReadOnly`].
    NoAllocate,
}

/// How a [`super::store_hinted`] writes global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreHint {
    /// A plain store (`st.global`).
    Default,
    /// Streaming, `st.global.cs`: results no kernel reads soon.
    Streaming,
    /// Evict first (`st.global.L1::evict_first.L2::cache_hint`, `evict_first` policy); where
    /// [`super::EVICT_HINTS`] is false, [`StoreHint::Streaming`].
    EvictFirst,
    /// Evict last (`st.global.L1::evict_last.L2::cache_hint`, `evict_last` policy): results the
    /// next kernel reads, which L2 should keep; where [`super::EVICT_HINTS`] is false, a plain
    /// store.
    EvictLast,
}
