//! The host side of a typed launch (host only): what the launcher that `#[kernel]` generates for
//! each kernel is written against.
//!
//! For a kernel
//!
//! ```ignore
//! #[kernel]
//! pub unsafe fn scale(x: *const f32, y: *mut f32, factor: f32, n: usize) { ... }
//! ```
//!
//! `#[kernel]` also emits, on the host, a module of the same name with a launcher:
//!
//! ```ignore
//! pub mod scale {
//!     pub const KERNEL: Kernel = Kernel { name: "scale", krate: "my_kernels", params: &[...], .. };
//!     pub const MAX_THREADS: Option<u32> = None; // Some(384) with #[kernel(launch_bounds(384))]
//!     pub unsafe fn launch<L: Launcher>(on: &L, config: L::Config,
//!         x: impl BufferArg<L::Input<'_, f32>>, y: impl BufferArg<L::Output<'_, f32>>,
//!         factor: f32, n: usize) -> Result<(), L::Error> { ... }
//! }
//! ```
//!
//! Each `*const T` parameter takes anything that is a [`BufferArg`] of `L::Input<T>`, each
//! `*mut T` one of `L::Output<T>`, and a scalar is passed by value (its type must implement
//! [`Scalar`]). gpukern's `Module` is the [`Launcher`]: its `Input<T>` is a read view of device
//! memory (`DeviceSlice<T>`, made from a `&DeviceVec<T>`, a `&DeviceMatrix<T>` or a view
//! `v.slice(range)`), its `Output<T>` a write view (`DeviceSliceMut<T>`, from `&mut` of those or
//! `v.slice_mut(range)`), so a buffer of the wrong element type, `&` for `&mut`, a missing
//! argument or one too many is a compile error, and the launch runs on CUDA or in the simulator
//! with the same call. The launcher asks the `Launcher` for each argument in the
//! kernel's order, then hands it a closure that calls the kernel with the pointers and scalars
//! it got back: the simulator runs that closure once per simulated thread, CUDA never calls it.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::DeviceCopy;

/// A kernel as the host sees it: its entry point's name, the crate it lives in, its parameters,
/// and how many times it was launched in this process.
#[derive(Debug)]
pub struct Kernel {
    /// The PTX entry point's name (the function's name).
    pub name: &'static str,
    /// The kernel crate's name as rustc knows it (`my_kernels`): a `Module` built from another
    /// crate refuses to launch it.
    pub krate: &'static str,
    /// The parameters in order.
    pub params: &'static [Param],
    /// Its launch bounds, from `#[kernel(launch_bounds(..))]`: a launcher refuses a block of
    /// more threads before it reaches the device.
    pub bounds: Option<LaunchBounds>,
    /// Launches so far, counted by the [`Launcher`] (gpukern's coverage check reads them).
    pub launches: LaunchCounts,
    /// What the kernel declares about itself beside its code (`#[kernel(block(..), barriers(..),
    /// shared(..))]`), for the launcher and for the tests that read the registry.
    pub facts: Facts,
}

/// What a kernel declares about itself in its `#[kernel(..)]` attribute, read by its launcher
/// and by the tests that check every kernel of a crate ([`registered`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The most threads per block the host launches it with (`block(N)`; with launch bounds,
    /// their `MAX_THREADS` unless said otherwise): what its registers per thread must allow.
    pub block: Option<u32>,
    /// How many block barriers (`bar.sync` and kin) its PTX entry holds (`barriers(N)`): a barrier
    /// the compiler duplicated into two branches, or dropped, shows here.
    pub barriers: Option<u32>,
    /// Bytes of its declared (typed) shared memory (`shared(name: Array<T, N>, ..)`), rounded up
    /// to 16 (where `shared::dynamic_after` puts the launch's own window), which the launcher
    /// adds to the launch's dynamic shared memory.
    pub shared_bytes: u32,
}

/// An instance of a generic kernel (`#[kernel(instances(..))]`): the host's struct of the kernel
/// with the instance's arguments (`scale<bf16>`) implements it, and its `launch` needs it, so
/// that arguments with no instance are a compile error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an instance of its generic kernel",
    label = "no PTX entry for these arguments",
    note = "add the arguments to the kernel's `#[kernel(instances(..))]`, which makes one PTX entry per instance"
)]
pub trait Instance {
    /// The instance's entry point, crate, parameters and registry facts.
    const KERNEL: &'static Kernel;
}

/// A kernel in the registry of the process: `#[kernel]` registers every kernel (every instance
/// of a generic one) on the host, so that tests loop over the kernels a crate declares instead
/// of lists of names.
#[derive(Debug)]
pub struct Registered(pub &'static Kernel);

inventory::collect!(Registered);

/// Every kernel of the crates linked into this process (every instance of a generic kernel), in
/// no particular order; filter by [`Kernel::krate`].
pub fn registered() -> impl Iterator<Item = &'static Kernel> {
    inventory::iter::<Registered>.into_iter().map(|r| r.0)
}

/// The kernels of the kernel crate `krate` (its name as rustc knows it, `my_kernels`), sorted by
/// name.
pub fn registered_in(krate: &str) -> Vec<&'static Kernel> {
    let mut kernels: Vec<&'static Kernel> = registered().filter(|k| k.krate == krate).collect();
    kernels.sort_by_key(|k| k.name);
    kernels
}

/// CUDA's `__launch_bounds__(max_threads, min_blocks)` of a kernel: `.maxntid max_threads, 1, 1`
/// and `.minnctapersm min_blocks` in its PTX entry. ptxas then keeps the kernel's registers per
/// thread within `65536 / (max_threads * min_blocks)` (rounded down to a multiple of 8, at most
/// 255), and the driver refuses a launch of more than `max_threads` threads per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchBounds {
    /// Most threads per block.
    pub max_threads: u32,
    /// Blocks of `max_threads` threads that must fit on one multiprocessor at once.
    pub min_blocks: u32,
}

/// Launches of one kernel in this process, per backend.
#[derive(Debug, Default)]
pub struct LaunchCounts {
    cuda: AtomicU64,
    simulator: AtomicU64,
}

impl LaunchCounts {
    /// No launches yet.
    pub const fn new() -> LaunchCounts {
        LaunchCounts {
            cuda: AtomicU64::new(0),
            simulator: AtomicU64::new(0),
        }
    }

    /// Counts a launch on a CUDA device; returns the count before it.
    pub fn count_cuda(&self) -> u64 {
        self.cuda.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a launch in the simulator; returns the count before it.
    pub fn count_simulator(&self) -> u64 {
        self.simulator.fetch_add(1, Ordering::Relaxed)
    }

    /// `(cuda, simulator)` launches so far.
    pub fn get(&self) -> (u64, u64) {
        (
            self.cuda.load(Ordering::Relaxed),
            self.simulator.load(Ordering::Relaxed),
        )
    }
}

/// One parameter of a [`Kernel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name in the kernel's signature (used in simulator reports and errors).
    pub name: &'static str,
    /// How the host passes it.
    pub kind: ParamKind,
    /// The type as written in the kernel (`*const f32`, `usize`).
    pub ty: &'static str,
    /// Its `#[len(..)]` expression, for a pointer whose kernel declares how many elements it
    /// may touch through it.
    pub len: Option<&'static str>,
}

/// How the host passes a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `*const T`: a device buffer the kernel reads.
    Input,
    /// `*mut T`: a device buffer the kernel may write.
    Output,
    /// Anything else: a value copied into the launch.
    Scalar,
}

/// What kernels are launched on: gpukern's `Module` implements it for CUDA and the simulator.
///
/// The generated launcher calls [`Launcher::begin`], then [`Launcher::input`],
/// [`Launcher::output`] or [`Launcher::scalar`] once per parameter in order, then
/// [`Launcher::launch`]. An implementation may record an error on the way (a buffer of another
/// device, say) and return it from `launch` without launching.
pub trait Launcher {
    /// Grid, block and dynamic shared memory of a launch.
    type Config;
    /// What a `*const T` parameter takes: a view of device memory the kernel reads (gpukern's
    /// `DeviceSlice<'a, T>`).
    type Input<'a, T: 'a>
    where
        Self: 'a;
    /// What a `*mut T` parameter takes: a view of device memory the kernel may write (gpukern's
    /// `DeviceSliceMut<'a, T>`).
    type Output<'a, T: 'a>
    where
        Self: 'a;
    /// Why a launch failed.
    type Error;
    /// One launch being assembled.
    type Args<'a>
    where
        Self: 'a;

    /// Starts a launch of `kernel` with `config`.
    fn begin<'a>(&'a self, kernel: &'static Kernel, config: Self::Config) -> Self::Args<'a>;

    /// Adds a buffer the kernel reads; returns the pointer the simulator passes to the kernel
    /// (on CUDA, any pointer: the kernel closure is never called there).
    /// `declared`: the elements the kernel declares it may touch through this parameter
    /// (`#[len(..)]`), if it does.
    fn input<'a, T: Copy + 'static>(
        args: &mut Self::Args<'a>,
        buffer: Self::Input<'a, T>,
        declared: Option<Declared>,
    ) -> *const T
    where
        Self: 'a;

    /// Adds a buffer the kernel may write; returns the pointer the simulator passes to the kernel.
    /// `declared` as for [`Launcher::input`].
    fn output<'a, T: Copy + 'static>(
        args: &mut Self::Args<'a>,
        buffer: Self::Output<'a, T>,
        declared: Option<Declared>,
    ) -> *mut T
    where
        Self: 'a;

    /// Adds a value parameter.
    fn scalar<'a, S: Scalar>(args: &mut Self::Args<'a>, value: S)
    where
        Self: 'a;

    /// `config` with `bytes` more dynamic shared memory: the kernel's declared (typed) shared
    /// memory, which the generated launcher adds to what the caller asked for.
    fn add_shared_bytes(config: Self::Config, bytes: u32) -> Self::Config;

    /// Launches: on CUDA the entry point named by the kernel with the arguments gathered, in
    /// the simulator `body` once per simulated thread (`body` calls the kernel function with the
    /// pointers [`Launcher::input`] and [`Launcher::output`] returned).
    ///
    /// # Safety
    /// The kernel's own safety contract, for the arguments given: the generated launcher is as
    /// `unsafe` as the kernel (it cannot know how many elements the kernel touches).
    unsafe fn launch<'a>(args: Self::Args<'a>, body: &dyn Fn()) -> Result<(), Self::Error>
    where
        Self: 'a;
}

/// A host value that stands for a buffer argument of a launch: `Target` is the launcher's view
/// type of a `*const T` parameter ([`Launcher::Input`]) or a `*mut T` one ([`Launcher::Output`]).
/// gpukern implements it for its buffers (`&DeviceVec<T>`, `&DeviceMatrix<T>`, `&mut` of them)
/// and their views (`v.slice(range)`, `v.slice_mut(range)`), so that a launch takes any of them.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed where the kernel takes `{Target}`",
    label = "not a device buffer of the parameter's element type and access",
    note = "a `*const T` parameter takes `&DeviceVec<T>`, `&DeviceMatrix<T>` or a view (`v.slice(range)?`); a `*mut T` parameter takes `&mut DeviceVec<T>`, `&mut DeviceMatrix<T>` or `v.slice_mut(range)?`"
)]
pub trait BufferArg<Target> {
    /// The view the launcher registers.
    fn into_target(self) -> Target;
}

/// A value a kernel can take by value: the host copies its bytes into the launch's parameters.
/// Every [`DeviceCopy`] type (the primitive numbers, `f16`, `bf16`, arrays of them, your
/// `#[derive(DeviceCopy)]` structs) and `bool`.
///
/// # Safety
/// `Self` is plain data whose bytes are its PTX parameter's (`.param .align A .b8 p[size]` for a
/// struct, as rustc's NVPTX backend passes it by value).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel's by-value parameter",
    label = "not a `Scalar`",
    note = "a by-value parameter is a primitive number, `bool`, `f16`, `bf16`, an array of them, or a `#[repr(C)]` struct with `#[derive(Clone, Copy, DeviceCopy)]`"
)]
pub unsafe trait Scalar: Copy + Send + Sync + 'static {}

// SAFETY: plain data without padding (the `DeviceCopy` contract); its bytes are the value.
unsafe impl<T: DeviceCopy> Scalar for T {}

// SAFETY: one byte, 0 or 1, passed as a `.b8` parameter.
unsafe impl Scalar for bool {}

/// How many elements a kernel declares it may touch through one pointer parameter, from its
/// `#[len(expr)]`: the expression's value for this launch's scalar arguments and its text (for
/// messages). A generated launcher hands it to [`Launcher::input`] / [`Launcher::output`], which
/// refuse a shorter buffer and (in the simulator) register exactly `len` elements, so that an
/// access past them is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The expression as written in `#[len(..)]`.
    pub expr: &'static str,
    /// Its value; `None` when it is negative or does not fit `usize`.
    pub len: Option<usize>,
}

impl Declared {
    /// `value` of the expression `expr`, any integer type.
    pub fn new<V: TryInto<usize>>(expr: &'static str, value: V) -> Declared {
        Declared {
            expr,
            len: value.try_into().ok(),
        }
    }
}
