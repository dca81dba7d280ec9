//! The block's shared memory: typed arrays and tiles a kernel declares, and the raw dynamic
//! window under them.
//!
//! A kernel declares what it needs in its attribute, each item with its element type and size:
//!
//! ```ignore
//! #[kernel(shared(tile: Tile<f32, 32, 32, 1>, sums: Array<f32, 32>))]
//! pub unsafe fn transpose(..) {
//!     // `tile` and `sums` are handles here, laid out one after the other
//!     unsafe { tile.store(ty, tx, v) };
//! }
//! ```
//!
//! The items sit one after another from the start of the block's dynamic shared memory, each at
//! its alignment ([`Layout`]); their bytes are part of the kernel's registry facts, and its
//! generated launcher adds them to the launch's `shared_mem_bytes` on its own. A handle is a
//! pointer: `Copy`, passed to helpers by value; its accesses go through [`crate::mem`], so the
//! simulator checks them as any other (races, uninitialised reads, bounds), and on the host an
//! index past the item's own extent is reported as a kernel panic naming it.
//!
//! [`dynamic`] is the raw window, for a size known only at run time (the host passes it in the
//! launch); a kernel that declares items and also takes such a window finds it past its items:
//! [`dynamic_after`].
//!
//! A `static mut` in a kernel crate is not shared memory: rustc makes it one global array shared
//! by every thread of the grid. `gpukern-build` refuses it.

/// The start of this block's dynamic shared memory, as a pointer to `T`.
///
/// Every call in a block returns the same address. Reading or writing past the launch's
/// `shared_mem_bytes` is out of bounds (the simulator reports it).
#[inline(always)]
pub fn dynamic<T>() -> *mut T {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::sim::device::shared_base().cast::<T>()
    }
}

/// The dynamic shared memory past the first `declared` bytes (a kernel's declared items: its
/// `__shared_bytes` binding), aligned to 16 bytes, as a pointer to `T`.
#[inline(always)]
pub fn dynamic_after<T>(declared: usize) -> *mut T {
    dynamic::<u8>()
        .wrapping_add(declared.next_multiple_of(16))
        .cast::<T>()
}

/// Where declared items go: one after another from byte 0, each at its alignment. A `const`
/// computation, so the host knows the bytes without running the kernel.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout {
    next: usize,
}

impl Layout {
    /// Nothing placed yet.
    pub const fn new() -> Layout {
        Layout { next: 0 }
    }

    /// Places an item of `bytes` at the next multiple of `align`; returns its offset.
    pub const fn place(&mut self, bytes: usize, align: usize) -> usize {
        let at = self.next.next_multiple_of(align);
        self.next = at + bytes;
        at
    }

    /// The bytes placed so far, rounded up to 16: what a launch reserves for the items, so that
    /// a window past them ([`dynamic_after`], which starts at the next multiple of 16) holds all
    /// of the launch's own `shared_mem_bytes`.
    pub const fn bytes(&self) -> usize {
        self.next.next_multiple_of(16)
    }
}

/// A kind of item a kernel can declare in `#[kernel(shared(..))]`: its bytes, alignment and
/// handle.
pub trait Declared: Copy {
    /// Its size in bytes.
    const BYTES: usize;
    /// Its alignment in bytes.
    const ALIGN: usize;
    /// The handle of the item at `at`.
    ///
    /// # Safety
    /// `at` is `ALIGN`-aligned shared memory of at least `BYTES` bytes, the item's alone.
    unsafe fn at(at: *mut u8) -> Self;
}

/// Fails (a kernel panic, which the simulator reports with kernel, block and thread) when `index`
/// is not below `extent`; on the GPU the check is left out, as for raw pointers.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
fn check_index(what: &str, index: usize, extent: usize) {
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(index < extent, "{what} index {index} is past its extent {extent}");
    #[cfg(target_arch = "nvptx64")]
    let _ = (what, index, extent);
}

/// `N` elements of `T` in the block's shared memory.
#[derive(Debug)]
pub struct Array<T, const N: usize> {
    ptr: *mut T,
}

impl<T, const N: usize> Clone for Array<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for Array<T, N> {}

impl<T: Copy, const N: usize> Declared for Array<T, N> {
    const BYTES: usize = N * core::mem::size_of::<T>();
    const ALIGN: usize = core::mem::align_of::<T>();
    unsafe fn at(at: *mut u8) -> Self {
        Array { ptr: at.cast() }
    }
}

impl<T: Copy, const N: usize> Array<T, N> {
    /// Its length.
    pub const LEN: usize = N;

    /// Element `i`.
    ///
    /// # Safety
    /// `i < N`, and a barrier (or the thread itself) ordered the write it reads.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(self, i: usize) -> T {
        check_index("shared array", i, N);
        // SAFETY: `i < N` (the caller's contract, checked on the host).
        unsafe { crate::mem::load(self.ptr, i) }
    }

    /// Writes element `i`.
    ///
    /// # Safety
    /// `i < N`, and no other thread reads or writes it until a barrier.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store(self, i: usize, v: T) {
        check_index("shared array", i, N);
        // SAFETY: `i < N` (the caller's contract, checked on the host).
        unsafe { crate::mem::store(self.ptr, i, v) }
    }

    /// Its first element's address (for helpers that take a raw shared pointer).
    #[inline(always)]
    pub fn ptr(self) -> *mut T {
        self.ptr
    }
}

impl<T: SharedAdd, const N: usize> Array<T, N> {
    /// Adds `v` to element `i` as one indivisible update, for counters many threads of the block
    /// bump at once (a histogram's bins): `red.shared.add` on the GPU (no old value returned, the
    /// shared-memory form: one `ATOMS` per lane), an atomic of kind
    /// [`Access::Atomic`](crate::sim::Access::Atomic) in the simulator (it races with plain
    /// accesses of other threads that no barrier orders, never with other atomics).
    ///
    /// # Safety
    /// `i < N`, and the element was written (or set by a barrier-ordered store) before.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn atomic_add(self, i: usize, v: T) {
        check_index("shared array", i, N);
        // SAFETY: `i < N` (the caller's contract, checked on the host).
        unsafe { T::red_add(self.ptr, i, v) }
    }
}

/// An element type with a shared-memory atomic add without return (`red.shared.add`): u32,
/// i32, f32.
pub trait SharedAdd: Copy + crate::atomic::AtomicAdd {
    /// `p[i] += v` atomically, `p` in shared memory.
    ///
    /// # Safety
    /// `p.add(i)` is an aligned, initialised element of this block's shared memory.
    #[doc(hidden)]
    unsafe fn red_add(p: *mut Self, i: usize, v: Self);
}

/// [`SharedAdd`] for `$t`, whose PTX add type is `$ty`.
macro_rules! shared_add {
    ($t:ty, $ty:literal) => {
        impl SharedAdd for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn red_add(p: *mut Self, i: usize, v: Self) {
                #[cfg(target_arch = "nvptx64")]
                {
                    // The base's conversion is the same for every element: the compiler keeps
                    // one, and each element's address is a 32-bit add.
                    let address = crate::async_copy::shared_address(p) + (i * core::mem::size_of::<$t>()) as u32;
                    // SAFETY: the caller's contract: an aligned element of shared memory.
                    unsafe {
                        core::arch::asm!(
                            concat!("red.relaxed.cta.shared.add.", $ty, " [{a}], {v};"),
                            a = in(reg32) address,
                            v = in(reg32) v,
                            options(nostack, preserves_flags),
                        );
                    }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: forwarded contract.
                    unsafe { crate::atomic::add(p, i, v, crate::atomic::Scope::Block) };
                }
            }
        }
    };
}

shared_add!(u32, "u32");
shared_add!(i32, "s32");
shared_add!(f32, "f32");

/// A `ROWS x COLS` tile of `T` in the block's shared memory, row-major, each row padded by `PAD`
/// elements (a row pitch of `COLS + PAD`: a pad of one 4-byte element moves a column's entries
/// into different banks, the classic fix for a transpose's bank conflicts).
#[derive(Debug)]
pub struct Tile<T, const ROWS: usize, const COLS: usize, const PAD: usize = 0> {
    ptr: *mut T,
}

impl<T, const ROWS: usize, const COLS: usize, const PAD: usize> Clone for Tile<T, ROWS, COLS, PAD> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const ROWS: usize, const COLS: usize, const PAD: usize> Copy for Tile<T, ROWS, COLS, PAD> {}

impl<T: Copy, const ROWS: usize, const COLS: usize, const PAD: usize> Declared for Tile<T, ROWS, COLS, PAD> {
    const BYTES: usize = ROWS * (COLS + PAD) * core::mem::size_of::<T>();
    const ALIGN: usize = core::mem::align_of::<T>();
    unsafe fn at(at: *mut u8) -> Self {
        Tile { ptr: at.cast() }
    }
}

impl<T: Copy, const ROWS: usize, const COLS: usize, const PAD: usize> Tile<T, ROWS, COLS, PAD> {
    /// Elements from one row's start to the next's.
    pub const PITCH: usize = COLS + PAD;

    /// Element `(r, c)`.
    ///
    /// # Safety
    /// `r < ROWS`, `c < COLS`, and a barrier (or the thread itself) ordered the write it reads.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(self, r: usize, c: usize) -> T {
        check_index("shared tile row", r, ROWS);
        check_index("shared tile column", c, COLS);
        // SAFETY: inside the tile (the caller's contract, checked on the host).
        unsafe { crate::mem::load(self.ptr, r * Self::PITCH + c) }
    }

    /// Writes element `(r, c)`.
    ///
    /// # Safety
    /// `r < ROWS`, `c < COLS`, and no other thread reads or writes it until a barrier.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store(self, r: usize, c: usize, v: T) {
        check_index("shared tile row", r, ROWS);
        check_index("shared tile column", c, COLS);
        // SAFETY: inside the tile (the caller's contract, checked on the host).
        unsafe { crate::mem::store(self.ptr, r * Self::PITCH + c, v) }
    }

    /// Row `r`'s first element's address.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn row(self, r: usize) -> *mut T {
        check_index("shared tile row", r, ROWS);
        self.ptr.wrapping_add(r * Self::PITCH)
    }
}

/// A `ROWS x COLS` tile of `T` in the block's shared memory with its columns swizzled: element
/// `(r, c)` sits at column `c ^ (r % COLS)` of row `r` (`COLS` a power of two), so that a column
/// read by a warp touches every bank once with no padding.
#[derive(Debug)]
pub struct SwizzledTile<T, const ROWS: usize, const COLS: usize> {
    ptr: *mut T,
}

impl<T, const ROWS: usize, const COLS: usize> Clone for SwizzledTile<T, ROWS, COLS> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const ROWS: usize, const COLS: usize> Copy for SwizzledTile<T, ROWS, COLS> {}

impl<T: Copy, const ROWS: usize, const COLS: usize> Declared for SwizzledTile<T, ROWS, COLS> {
    const BYTES: usize = ROWS * COLS * core::mem::size_of::<T>();
    const ALIGN: usize = core::mem::align_of::<T>();
    unsafe fn at(at: *mut u8) -> Self {
        const {
            assert!(
                COLS.is_power_of_two(),
                "a SwizzledTile's COLS must be a power of two"
            )
        };
        SwizzledTile { ptr: at.cast() }
    }
}

impl<T: Copy, const ROWS: usize, const COLS: usize> SwizzledTile<T, ROWS, COLS> {
    /// Where element `(r, c)` is stored, in elements from the tile's start.
    #[inline(always)]
    pub const fn offset(r: usize, c: usize) -> usize {
        r * COLS + (c ^ (r % COLS))
    }

    /// Element `(r, c)`.
    ///
    /// # Safety
    /// `r < ROWS`, `c < COLS`, and a barrier (or the thread itself) ordered the write it reads.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(self, r: usize, c: usize) -> T {
        check_index("swizzled tile row", r, ROWS);
        check_index("swizzled tile column", c, COLS);
        // SAFETY: inside the tile (the caller's contract, checked on the host).
        unsafe { crate::mem::load(self.ptr, Self::offset(r, c)) }
    }

    /// Writes element `(r, c)`.
    ///
    /// # Safety
    /// `r < ROWS`, `c < COLS`, and no other thread reads or writes it until a barrier.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store(self, r: usize, c: usize, v: T) {
        check_index("swizzled tile row", r, ROWS);
        check_index("swizzled tile column", c, COLS);
        // SAFETY: inside the tile (the caller's contract, checked on the host).
        unsafe { crate::mem::store(self.ptr, Self::offset(r, c), v) }
    }
}
