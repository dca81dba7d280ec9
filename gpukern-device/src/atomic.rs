//! Atomic read-modify-writes on one element of global or shared memory: [`add`], [`max`],
//! [`min`], [`exchange`] and compare-and-swap ([`cas`]), each returning the element's old value;
//! the reduction [`reduce_add`] on global memory, which returns nothing;
//! strong (relaxed) reads and writes of one element ([`load`], [`store`]) and the memory fence
//! ([`fence`]) with which blocks hand results to one another within a launch.
//!
//! Every call names its [`Scope`]: the set of threads it is atomic with respect to. CUDA's
//! `atomicAdd(p, v)` is `atomic::add(p, 0, v, Scope::Device)`.
//!
//! The memory order is relaxed, as CUDA's `atomicAdd`: the update itself is indivisible, but it
//! orders no other memory access. A thread that reads a result other threads built with atomics
//! must be ordered after them by other means: a barrier within a block; across blocks, the end of
//! the launch, or a release and an acquire. A release is a device-scope [`fence`] and then an
//! atomic (the writer's accesses before the fence, and its block's before a barrier that precedes
//! it, are released); an acquire is an atomic that reads what a release's atomic wrote, then a
//! [`fence`]. The simulator checks hand-offs so: a plain access of another block's data is no race
//! where such a release and acquire lie between (`tests/handoff.rs` has the pattern, and the
//! planted bugs it reports).
//!
//! On the GPU each call is one `atom.relaxed.<scope>.<op>.<type>` on a generic address, so the
//! same call works on global and shared memory; pass the scope as a constant (as written in the
//! call) so that the `match` on it folds away and one instruction remains. In the simulator each
//! call is a checked access of kind [`Access::Atomic`](crate::sim::Access::Atomic) (bounds,
//! writes to inputs, alignment, races with plain accesses; two atomics never race), then a real
//! atomic of the host on the element, so blocks running on several OS threads do not lose updates.
//!
//! Element types are chosen through sealed traits: [`AtomicAdd`] (f32, f64, u32, i32, u64, i64),
//! [`AtomicMinMax`] (u32, i32, u64, i64) and [`AtomicBits`] (exchange and CAS: u32, i32, u64,
//! i64, f32, f64).

/// Which threads an atomic is atomic with respect to (the PTX `.scope` qualifier).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The threads of this block (`.cta`): enough for shared memory, and for global memory that
    /// only this block's threads update.
    Block,
    /// Every thread of the GPU (`.gpu`): what CUDA's `atomicAdd` is; the scope for global memory
    /// that threads of several blocks update.
    Device,
    /// The GPU's threads, other GPUs' and the host's (`.sys`): for memory mapped from the host or
    /// a peer GPU that they update at the same time.
    System,
}

#[cfg(not(target_arch = "nvptx64"))]
use crate::sim::release::Handoff;

// The sealed trait's simulator method names the crate's own `Handoff`: nothing outside the
// crate can call or implement it.
#[allow(private_interfaces)]
mod sealed {
    /// Keeps the atomic element traits closed: each type needs its own PTX instruction.
    pub trait Sealed: Copy {
        /// In the simulator: checks an atomic on `p[i]` and replaces its value `old` with
        /// `f(old)` (left alone where `f` gives `None`) as one host atomic; returns `old`. A
        /// device- or system-scope atomic on global memory also acquires and publishes
        /// releases as `sync` says ([`crate::sim::release`]).
        #[cfg(not(target_arch = "nvptx64"))]
        #[track_caller]
        fn sim_update(
            p: *mut Self,
            i: usize,
            scope: super::Scope,
            sync: crate::sim::release::Handoff,
            f: impl Fn(Self) -> Option<Self>,
        ) -> Self;
    }
}

/// An element type with an atomic add: f32, f64, u32, i32, u64, i64 (integers wrap).
pub trait AtomicAdd: sealed::Sealed + Copy {
    /// See [`add`].
    ///
    /// # Safety
    /// As [`add`].
    #[doc(hidden)]
    unsafe fn atomic_add(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self;
    /// See [`reduce_add`].
    ///
    /// # Safety
    /// As [`reduce_add`].
    #[doc(hidden)]
    unsafe fn atomic_reduce_add(p: *mut Self, i: usize, v: Self, scope: Scope);
}

/// An element type with atomic maximum and minimum: u32, i32, u64, i64.
pub trait AtomicMinMax: sealed::Sealed + Copy {
    /// See [`max`].
    ///
    /// # Safety
    /// As [`max`].
    #[doc(hidden)]
    unsafe fn atomic_max(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self;
    /// See [`min`].
    ///
    /// # Safety
    /// As [`min`].
    #[doc(hidden)]
    unsafe fn atomic_min(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self;
}

/// An element type with atomic exchange and compare-and-swap, on its bits: u32, i32, u64, i64,
/// f32, f64.
pub trait AtomicBits: sealed::Sealed + Copy {
    /// See [`exchange`].
    ///
    /// # Safety
    /// As [`exchange`].
    #[doc(hidden)]
    unsafe fn atomic_exchange(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self;
    /// See [`cas`].
    ///
    /// # Safety
    /// As [`cas`].
    #[doc(hidden)]
    unsafe fn atomic_cas(p: *mut Self, i: usize, compare: Self, new: Self, scope: Scope) -> Self;
    /// See [`load`].
    ///
    /// # Safety
    /// As [`load`].
    #[doc(hidden)]
    unsafe fn atomic_load(p: *mut Self, i: usize, scope: Scope) -> Self;
    /// See [`store`].
    ///
    /// # Safety
    /// As [`store`].
    #[doc(hidden)]
    unsafe fn atomic_store(p: *mut Self, i: usize, v: Self, scope: Scope);
}

/// Adds `v` to `p[i]` as one indivisible update and returns the value `p[i]` had before.
///
/// Relaxed order, atomic with respect to `scope`'s threads; works on global and shared memory.
/// Integers wrap. On global memory the GPU's f32 add flushes subnormal operands and results to
/// zero (the simulator adds as the CPU does).
///
/// # Safety
/// `p.add(i)` must point to a writable `T` in global or shared memory, aligned to its size.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn add<T: AtomicAdd>(p: *mut T, i: usize, v: T, scope: Scope) -> T {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_add(p, i, v, scope) }
}

/// Adds `v` to `p[i]` in **global** memory as one indivisible update, returning nothing
/// (`red.relaxed.<scope>.global.add`): the form for sums whose old values nobody reads, such as
/// the shares many blocks add into one buffer (attention backward's `dQ`). Naming the state space
/// lets ptxas emit one `RED` with the address's constant offset folded in; [`add`] on a generic
/// address also serves shared memory, with a branch and a compare-and-swap loop per call.
///
/// Relaxed order, atomic with respect to `scope`'s threads, as [`add`] (and as [`add`], no
/// ordering of other accesses: the sums are read after the launch, or after a release and
/// acquire). Integers wrap; the GPU's f32 add flushes subnormals to zero. The simulator checks it
/// as [`add`] (an atomic access: bounds, alignment, races with plain accesses) and reports a
/// `p[i]` in shared memory.
///
/// # Safety
/// `p.add(i)` must point to a writable `T` in global memory, aligned to its size.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn reduce_add<T: AtomicAdd>(p: *mut T, i: usize, v: T, scope: Scope) {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_reduce_add(p, i, v, scope) }
}

/// Sets `p[i]` to the larger of `p[i]` and `v` as one indivisible update and returns the value
/// `p[i]` had before (relaxed order, atomic with respect to `scope`; global or shared memory).
///
/// # Safety
/// As [`add`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn max<T: AtomicMinMax>(p: *mut T, i: usize, v: T, scope: Scope) -> T {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_max(p, i, v, scope) }
}

/// Sets `p[i]` to the smaller of `p[i]` and `v` as one indivisible update and returns the value
/// `p[i]` had before (relaxed order, atomic with respect to `scope`; global or shared memory).
///
/// # Safety
/// As [`add`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn min<T: AtomicMinMax>(p: *mut T, i: usize, v: T, scope: Scope) -> T {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_min(p, i, v, scope) }
}

/// Writes `v` to `p[i]` and returns the value `p[i]` had before, as one indivisible update
/// (relaxed order, atomic with respect to `scope`; global or shared memory).
///
/// # Safety
/// As [`add`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn exchange<T: AtomicBits>(p: *mut T, i: usize, v: T, scope: Scope) -> T {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_exchange(p, i, v, scope) }
}

/// Compare-and-swap: if `p[i]` equals `compare` bit for bit, writes `new`; either way returns the
/// value `p[i]` had before, so the swap happened exactly when the result equals `compare`.
/// One indivisible update (relaxed order, atomic with respect to `scope`; global or shared
/// memory). Floats compare as bits: `-0.0` is not `0.0`, and a NaN can equal itself.
///
/// # Safety
/// As [`add`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cas<T: AtomicBits>(p: *mut T, i: usize, compare: T, new: T, scope: Scope) -> T {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_cas(p, i, compare, new, scope) }
}

/// Reads `p[i]` as one indivisible access (`ld.relaxed.<scope>`): a strong read, which never
/// races with the atomics and strong writes ([`store`]) of other threads, as a plain load does.
/// With a [`fence`] after the read that saw another thread's release (its [`fence`], then a
/// write or atomic this thread observed), it sees that thread's writes before its fence: the
/// way one block reads what other blocks left for it in global memory.
///
/// # Safety
/// `p.add(i)` must point to a writable `T` in global or shared memory, aligned to its size.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load<T: AtomicBits>(p: *mut T, i: usize, scope: Scope) -> T {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_load(p, i, scope) }
}

/// Writes `v` to `p[i]` as one indivisible access (`st.relaxed.<scope>`): a strong write, which
/// never races with other threads' atomics and strong reads ([`load`]) of the element.
///
/// # Safety
/// As [`load`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store<T: AtomicBits>(p: *mut T, i: usize, v: T, scope: Scope) {
    // SAFETY: the caller's contract is the trait method's.
    unsafe { T::atomic_store(p, i, v, scope) }
}

/// `fence.acq_rel.<scope>`: the thread's memory accesses before it are ordered before those
/// after it for the threads of `scope` that synchronise with it (through an atomic or a strong
/// access on either side, as CUDA's `__threadfence()` is `fence(Scope::Device)`). In the
/// simulator a sequentially consistent fence of the host, and, at device or system scope, the
/// thread's release for its next atomics and its acquire of the releases its atomics read since
/// its last fence ([`crate::sim`] orders accesses of different blocks by them).
#[inline(always)]
pub fn fence(scope: Scope) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence has no precondition. Not `nomem`: it orders memory accesses.
    unsafe {
        match scope {
            Scope::Block => core::arch::asm!("fence.acq_rel.cta;", options(nostack)),
            Scope::Device => core::arch::asm!("fence.acq_rel.gpu;", options(nostack)),
            Scope::System => core::arch::asm!("fence.acq_rel.sys;", options(nostack)),
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if scope != Scope::Block {
            crate::sim::device::device_fence();
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// One `atom.relaxed.<scope>.<op>.<ty>` on the generic address `$addr`, with one operand or,
/// for `cas`, two; the scope is matched here so that a constant scope leaves one instruction.
#[cfg(target_arch = "nvptx64")]
macro_rules! atom {
    ($scope:expr, $op:literal, $ty:literal, $class:ident, $t:ty, $addr:expr, $($v:expr),+) => {{
        let old: $t;
        let addr: u64 = $addr as u64;
        // SAFETY: the caller's contract: `addr` is the generic address of one writable, aligned
        // element. Not `nomem`: the instruction reads and writes memory, so the compiler must
        // keep it in place among other accesses.
        unsafe {
            match $scope {
                Scope::Block => atom!(@asm "cta", $op, $ty, $class, old, addr, $($v),+),
                Scope::Device => atom!(@asm "gpu", $op, $ty, $class, old, addr, $($v),+),
                Scope::System => atom!(@asm "sys", $op, $ty, $class, old, addr, $($v),+),
            }
        }
        old
    }};
    (@asm $s:literal, $op:literal, $ty:literal, $class:ident, $old:ident, $addr:ident, $v:expr) => {
        core::arch::asm!(
            concat!("atom.relaxed.", $s, ".", $op, ".", $ty, " {old}, [{addr}], {v};"),
            old = out($class) $old,
            addr = in(reg64) $addr,
            v = in($class) $v,
            options(nostack),
        )
    };
    (@asm $s:literal, $op:literal, $ty:literal, $class:ident, $old:ident, $addr:ident, $c:expr, $n:expr) => {
        core::arch::asm!(
            concat!("atom.relaxed.", $s, ".", $op, ".", $ty, " {old}, [{addr}], {c}, {n};"),
            old = out($class) $old,
            addr = in(reg64) $addr,
            c = in($class) $c,
            n = in($class) $n,
            options(nostack),
        )
    };
}

/// The simulator's side: check the access, then update the element with an atomic of the host.
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) mod host {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    use super::Scope;
    use crate::sim::release::Handoff;
    use crate::sim::{device, Access};

    /// Runs `update` (a host atomic returning what it read and whether it wrote) as an atomic
    /// of `scope`: one of the device or the system also hands releases between blocks.
    fn synced<R>(host: usize, scope: Scope, sync: Handoff, update: impl FnOnce() -> (R, bool)) -> R {
        match scope {
            Scope::Block => update().0,
            Scope::Device | Scope::System => device::atomic_sync(host, sync, update),
        }
    }

    /// Checks an atomic on the 4-byte element `i` from `p` and replaces its bits `old` with
    /// `f(old)` (left alone where `f` gives `None`); returns `old`.
    #[track_caller]
    pub(crate) fn rmw32(
        p: usize,
        i: usize,
        scope: Scope,
        sync: Handoff,
        f: impl FnMut(u32) -> Option<u32>,
    ) -> u32 {
        let host = device::check_access(p, i, 4, Access::Atomic);
        // SAFETY: the simulator checked that `host` is the address of 4 writable bytes inside a
        // registered buffer or shared memory, aligned to 4, alive for the whole launch.
        let word = unsafe { AtomicU32::from_ptr(host as *mut u32) };
        // Relaxed, as the GPU instruction: the simulator promises no more ordering than it.
        synced(host, scope, sync, || {
            match word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, f) {
                Ok(old) => (old, true),
                Err(old) => (old, false),
            }
        })
    }

    /// [`rmw32`] for an 8-byte element.
    #[track_caller]
    pub(crate) fn rmw64(
        p: usize,
        i: usize,
        scope: Scope,
        sync: Handoff,
        f: impl FnMut(u64) -> Option<u64>,
    ) -> u64 {
        let host = device::check_access(p, i, 8, Access::Atomic);
        // SAFETY: as in `rmw32`, for 8 bytes aligned to 8.
        let word = unsafe { AtomicU64::from_ptr(host as *mut u64) };
        synced(host, scope, sync, || {
            match word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, f) {
                Ok(old) => (old, true),
                Err(old) => (old, false),
            }
        })
    }
}

/// The element type `$t`: in the simulator, `$raw`/`$rmw` are the host word and its update, and
/// `$to`/`$from` convert to and from its bits.
macro_rules! element {
    ($t:ty, $raw:ty, $rmw:ident, $to:expr, $from:expr) => {
        #[allow(private_interfaces)]
        impl sealed::Sealed for $t {
            #[cfg(not(target_arch = "nvptx64"))]
            #[track_caller]
            fn sim_update(
                p: *mut $t,
                i: usize,
                scope: Scope,
                sync: crate::sim::release::Handoff,
                f: impl Fn($t) -> Option<$t>,
            ) -> $t {
                let (to, from): (fn($t) -> $raw, fn($raw) -> $t) = ($to, $from);
                from(host::$rmw(p as usize, i, scope, sync, |old| {
                    f(from(old)).map(to)
                }))
            }
        }
    };
}

/// One `red.relaxed.<scope>.global.add.<ty>` of `$v` at the generic address `$addr`, converted
/// to the global state space in the same block (`cvta.to.global`, a move on sm_90).
#[cfg(target_arch = "nvptx64")]
macro_rules! red_add {
    ($scope:expr, $ty:literal, $class:ident, $addr:expr, $v:expr) => {{
        let addr: u64 = $addr as u64;
        // SAFETY: the caller's contract: `addr` is the generic address of one writable, aligned
        // element of global memory. Not `nomem`: the instruction writes memory.
        unsafe {
            match $scope {
                Scope::Block => red_add!(@asm "cta", $ty, $class, addr, $v),
                Scope::Device => red_add!(@asm "gpu", $ty, $class, addr, $v),
                Scope::System => red_add!(@asm "sys", $ty, $class, addr, $v),
            }
        }
    }};
    (@asm $s:literal, $ty:literal, $class:ident, $addr:ident, $v:expr) => {
        core::arch::asm!(
            concat!(
                "{{ .reg .b64 g; cvta.to.global.u64 g, {addr}; red.relaxed.",
                $s,
                ".global.add.",
                $ty,
                " [g], {v}; }}"
            ),
            addr = in(reg64) $addr,
            v = in($class) $v,
            options(nostack),
        )
    };
}

/// [`AtomicAdd`] for `$t`, whose PTX add type is `$ty`, adding with `$op` in the simulator.
macro_rules! add {
    ($t:ty, $ty:literal, $class:ident, $op:expr) => {
        impl AtomicAdd for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_reduce_add(p: *mut Self, i: usize, v: Self, scope: Scope) {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds, in global memory.
                    red_add!(scope, $ty, $class, unsafe { p.add(i) }, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    crate::sim::device::check_global_only(
                        p.wrapping_add(i) as usize,
                        "atomic::reduce_add (red.global)",
                    );
                    let op: fn($t, $t) -> $t = $op;
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Update, |old| Some(op(old, v)));
                }
            }

            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_add(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds.
                    atom!(scope, "add", $ty, $class, $t, unsafe { p.add(i) }, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let op: fn($t, $t) -> $t = $op;
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Update, |old| Some(op(old, v)))
                }
            }
        }
    };
}

/// [`AtomicMinMax`] for `$t`, whose PTX type is `$ty`.
macro_rules! min_max {
    ($t:ty, $ty:literal, $class:ident) => {
        impl AtomicMinMax for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_max(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds.
                    atom!(scope, "max", $ty, $class, $t, unsafe { p.add(i) }, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Update, |old| Some(old.max(v)))
                }
            }

            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_min(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds.
                    atom!(scope, "min", $ty, $class, $t, unsafe { p.add(i) }, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Update, |old| Some(old.min(v)))
                }
            }
        }
    };
}

/// [`AtomicBits`] for `$t`, whose PTX bit type is `$ty`.
macro_rules! bits {
    ($t:ty, $ty:literal, $class:ident, $to:expr) => {
        impl AtomicBits for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_exchange(p: *mut Self, i: usize, v: Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds.
                    atom!(scope, "exch", $ty, $class, $t, unsafe { p.add(i) }, v)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Update, |_| Some(v))
                }
            }

            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_cas(p: *mut Self, i: usize, compare: Self, new: Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds.
                    atom!(
                        scope,
                        "cas",
                        $ty,
                        $class,
                        $t,
                        unsafe { p.add(i) },
                        compare,
                        new
                    )
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let to: fn($t) -> _ = $to;
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Update, |old| {
                        (to(old) == to(compare)).then_some(new)
                    })
                }
            }

            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_load(p: *mut Self, i: usize, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let v: $t;
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds, aligned.
                    let addr = unsafe { p.add(i) } as u64;
                    // SAFETY: as above; reads memory (not `nomem`).
                    unsafe {
                        match scope {
                            Scope::Block => core::arch::asm!(concat!("ld.relaxed.cta.", $ty, " {v}, [{a}];"), v = out($class) v, a = in(reg64) addr, options(nostack)),
                            Scope::Device => core::arch::asm!(concat!("ld.relaxed.gpu.", $ty, " {v}, [{a}];"), v = out($class) v, a = in(reg64) addr, options(nostack)),
                            Scope::System => core::arch::asm!(concat!("ld.relaxed.sys.", $ty, " {v}, [{a}];"), v = out($class) v, a = in(reg64) addr, options(nostack)),
                        }
                    }
                    v
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Update, |_| None)
                }
            }

            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn atomic_store(p: *mut Self, i: usize, v: Self, scope: Scope) {
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: the caller's contract: `p.add(i)` is in bounds, aligned.
                    let addr = unsafe { p.add(i) } as u64;
                    // SAFETY: as above; writes memory (not `nomem`).
                    unsafe {
                        match scope {
                            Scope::Block => core::arch::asm!(concat!("st.relaxed.cta.", $ty, " [{a}], {v};"), v = in($class) v, a = in(reg64) addr, options(nostack)),
                            Scope::Device => core::arch::asm!(concat!("st.relaxed.gpu.", $ty, " [{a}], {v};"), v = in($class) v, a = in(reg64) addr, options(nostack)),
                            Scope::System => core::arch::asm!(concat!("st.relaxed.sys.", $ty, " [{a}], {v};"), v = in($class) v, a = in(reg64) addr, options(nostack)),
                        }
                    }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    <$t as sealed::Sealed>::sim_update(p, i, scope, Handoff::Store, |_| Some(v));
                }
            }
        }
    };
}

element!(u32, u32, rmw32, |v| v, |r| r);
element!(i32, u32, rmw32, |v| v as u32, |r| r as i32);
element!(u64, u64, rmw64, |v| v, |r| r);
element!(i64, u64, rmw64, |v| v as u64, |r| r as i64);
element!(f32, u32, rmw32, f32::to_bits, f32::from_bits);
element!(f64, u64, rmw64, f64::to_bits, f64::from_bits);

add!(u32, "u32", reg32, u32::wrapping_add);
add!(i32, "s32", reg32, i32::wrapping_add);
add!(u64, "u64", reg64, u64::wrapping_add);
// PTX has no `atom.add.s64`; a two's-complement add is the same bits as the unsigned one.
add!(i64, "u64", reg64, i64::wrapping_add);
add!(f32, "f32", reg32, |a, b| a + b);
add!(f64, "f64", reg64, |a, b| a + b);

min_max!(u32, "u32", reg32);
min_max!(i32, "s32", reg32);
min_max!(u64, "u64", reg64);
min_max!(i64, "s64", reg64);

bits!(u32, "b32", reg32, |v| v);
bits!(i32, "b32", reg32, |v| v as u32);
bits!(u64, "b64", reg64, |v| v);
bits!(i64, "b64", reg64, |v| v as u64);
bits!(f32, "b32", reg32, f32::to_bits);
bits!(f64, "b64", reg64, f64::to_bits);
