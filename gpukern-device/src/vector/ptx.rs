//! The hinted global loads and stores as single PTX instructions, one named wrapper each, on 1,
//! 2 or 4 32-bit words (`.b32`, `.v2.b32`, `.v4.b32`). GPU only: the simulator's accesses are
//! the plain ones of [`crate::mem`], since a hint changes no value.
//!
//! Each takes a generic address of global memory, converts it with `cvta.to.global` and accesses
//! `W` words there; `W` is a constant after inlining, so one instruction remains.

/// A load `$op` (`ld.global.nc`, ...) of `W` words at `q`.
macro_rules! load {
    ($(#[$doc:meta])* $name:ident, $op:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `q` is the generic address of `4 W` readable bytes of global memory, aligned to them.
        #[inline(always)]
        pub(super) unsafe fn $name<const W: usize>(q: *const u8) -> [u32; 4] {
            let (mut a, mut b, mut c, mut d) = (0u32, 0u32, 0u32, 0u32);
            // SAFETY: the caller's contract; the instruction reads `4 W` bytes at `q`.
            unsafe {
                match W {
                    1 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".b32 {a}, [g]; }}"),
                        q = in(reg64) q, a = out(reg32) a,
                        options(readonly, nostack, preserves_flags),
                    ),
                    2 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v2.b32 {{{a}, {b}}}, [g]; }}"),
                        q = in(reg64) q, a = out(reg32) a, b = out(reg32) b,
                        options(readonly, nostack, preserves_flags),
                    ),
                    _ => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v4.b32 {{{a}, {b}, {c}, {d}}}, [g]; }}"),
                        q = in(reg64) q, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                        options(readonly, nostack, preserves_flags),
                    ),
                }
            }
            [a, b, c, d]
        }
    };
}

/// A load `$op` with an L2 cache policy operand (`createpolicy`'s), sm_90 modules only.
macro_rules! load_policy {
    ($(#[$doc:meta])* $name:ident, $op:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `q` is the generic address of `4 W` readable bytes of global memory, aligned to them;
        /// `policy` a `createpolicy` result.
        #[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
        #[inline(always)]
        pub(super) unsafe fn $name<const W: usize>(q: *const u8, policy: u64) -> [u32; 4] {
            let (mut a, mut b, mut c, mut d) = (0u32, 0u32, 0u32, 0u32);
            // SAFETY: the caller's contract; the instruction reads `4 W` bytes at `q`.
            unsafe {
                match W {
                    1 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".b32 {a}, [g], {p}; }}"),
                        q = in(reg64) q, p = in(reg64) policy, a = out(reg32) a,
                        options(readonly, nostack, preserves_flags),
                    ),
                    2 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v2.b32 {{{a}, {b}}}, [g], {p}; }}"),
                        q = in(reg64) q, p = in(reg64) policy, a = out(reg32) a, b = out(reg32) b,
                        options(readonly, nostack, preserves_flags),
                    ),
                    _ => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v4.b32 {{{a}, {b}, {c}, {d}}}, [g], {p}; }}"),
                        q = in(reg64) q, p = in(reg64) policy,
                        a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                        options(readonly, nostack, preserves_flags),
                    ),
                }
            }
            [a, b, c, d]
        }
    };
}

/// A store `$op` (`st.global.cs`, ...) of the first `W` of `w` at `q`.
macro_rules! store {
    ($(#[$doc:meta])* $name:ident, $op:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `q` is the generic address of `4 W` writable bytes of global memory, aligned to them.
        #[inline(always)]
        pub(super) unsafe fn $name<const W: usize>(q: *mut u8, w: [u32; 4]) {
            let [a, b, c, d] = w;
            // SAFETY: the caller's contract; the instruction writes `4 W` bytes at `q`.
            unsafe {
                match W {
                    1 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".b32 [g], {a}; }}"),
                        q = in(reg64) q, a = in(reg32) a,
                        options(nostack, preserves_flags),
                    ),
                    2 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v2.b32 [g], {{{a}, {b}}}; }}"),
                        q = in(reg64) q, a = in(reg32) a, b = in(reg32) b,
                        options(nostack, preserves_flags),
                    ),
                    _ => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v4.b32 [g], {{{a}, {b}, {c}, {d}}}; }}"),
                        q = in(reg64) q, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d,
                        options(nostack, preserves_flags),
                    ),
                }
            }
        }
    };
}

/// A store `$op` with an L2 cache policy operand, sm_90 modules only.
macro_rules! store_policy {
    ($(#[$doc:meta])* $name:ident, $op:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `q` is the generic address of `4 W` writable bytes of global memory, aligned to them;
        /// `policy` a `createpolicy` result.
        #[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
        #[inline(always)]
        pub(super) unsafe fn $name<const W: usize>(q: *mut u8, w: [u32; 4], policy: u64) {
            let [a, b, c, d] = w;
            // SAFETY: the caller's contract; the instruction writes `4 W` bytes at `q`.
            unsafe {
                match W {
                    1 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".b32 [g], {a}, {p}; }}"),
                        q = in(reg64) q, p = in(reg64) policy, a = in(reg32) a,
                        options(nostack, preserves_flags),
                    ),
                    2 => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v2.b32 [g], {{{a}, {b}}}, {p}; }}"),
                        q = in(reg64) q, p = in(reg64) policy, a = in(reg32) a, b = in(reg32) b,
                        options(nostack, preserves_flags),
                    ),
                    _ => core::arch::asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {q}; ", $op, ".v4.b32 [g], {{{a}, {b}, {c}, {d}}}, {p}; }}"),
                        q = in(reg64) q, p = in(reg64) policy,
                        a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d,
                        options(nostack, preserves_flags),
                    ),
                }
            }
        }
    };
}

load!(
    /// `ld.global.nc`: through the read-only (non-coherent) path.
    ld_nc,
    "ld.global.nc"
);
load!(
    /// `ld.global.nc.L1::no_allocate.L2::256B`: read-only path, no L1 line, a 256-byte L2 fetch.
    /// sm_90 modules only (their PTX ISA is 7.8; the sm_80 module's 7.0 lacks both qualifiers).
    #[cfg(target_feature = "sm_90")]
    ld_nc_no_allocate,
    "ld.global.nc.L1::no_allocate.L2::256B"
);
load!(
    /// `ld.global.cs`: cache streaming, evict first.
    ld_cs,
    "ld.global.cs"
);
load_policy!(
    /// `ld.global.L1::evict_first.L2::cache_hint`.
    ld_evict_first,
    "ld.global.L1::evict_first.L2::cache_hint"
);
load_policy!(
    /// `ld.global.L1::evict_last.L2::cache_hint`.
    ld_evict_last,
    "ld.global.L1::evict_last.L2::cache_hint"
);
store!(
    /// `st.global.cs`: cache streaming, evict first.
    st_cs,
    "st.global.cs"
);
store_policy!(
    /// `st.global.L1::evict_first.L2::cache_hint`.
    st_evict_first,
    "st.global.L1::evict_first.L2::cache_hint"
);
store_policy!(
    /// `st.global.L1::evict_last.L2::cache_hint`.
    st_evict_last,
    "st.global.L1::evict_last.L2::cache_hint"
);
