//! One launch being assembled by a generated launcher ([`ModuleArgs`]): the parameters' bytes
//! in the kernel's order, the simulator's registered buffers, the other streams the buffers live
//! on, and the first problem found with an argument. The launch itself is `module/launch.rs`.

use std::sync::Arc;

use gpukern_device::launch::{Declared, Kernel};
use gpukern_device::sim;

use super::loaded::Module;
use crate::device::Backend;
use crate::error::Error;
use crate::launch_config::LaunchConfig;
use crate::stream::{CrossStream, MAX_FOREIGN};
use crate::view::CudaPlace;

/// The associated types and the argument and launch methods of a `Launcher` whose `Args` are
/// `ModuleArgs`: those of `Module` itself. A launcher that only changes how a launch is made
/// (`Clustered`, `Cooperative`, `Dependent`) writes its own `begin`, which sets its option of
/// the launch, and this.
macro_rules! forward_args_to_module {
    () => {
        type Config = LaunchConfig;
        type Input<'a, T: 'a>
            = DeviceSlice<'a, T>
        where
            Self: 'a;
        type Output<'a, T: 'a>
            = DeviceSliceMut<'a, T>
        where
            Self: 'a;
        type Error = Error;
        type Args<'a>
            = ModuleArgs<'a>
        where
            Self: 'a;

        fn input<'a, T: Copy + 'static>(
            args: &mut ModuleArgs<'a>,
            buffer: DeviceSlice<'a, T>,
            declared: Option<Declared>,
        ) -> *const T
        where
            Self: 'a,
        {
            <Module as Launcher>::input(args, buffer, declared)
        }

        fn output<'a, T: Copy + 'static>(
            args: &mut ModuleArgs<'a>,
            buffer: DeviceSliceMut<'a, T>,
            declared: Option<Declared>,
        ) -> *mut T
        where
            Self: 'a,
        {
            <Module as Launcher>::output(args, buffer, declared)
        }

        fn scalar<'a, S: Scalar>(args: &mut ModuleArgs<'a>, value: S)
        where
            Self: 'a,
        {
            <Module as Launcher>::scalar(args, value)
        }

        fn add_shared_bytes(config: LaunchConfig, bytes: u32) -> LaunchConfig {
            <Module as Launcher>::add_shared_bytes(config, bytes)
        }

        unsafe fn launch<'a>(args: ModuleArgs<'a>, body: &dyn Fn()) -> Result<()>
        where
            Self: 'a,
        {
            // SAFETY: forwarded contract.
            unsafe { <Module as Launcher>::launch(args, body) }
        }
    };
}

/// Most parameters a kernel may have through a generated launcher.
pub const MAX_PARAMS: usize = 32;

/// Most bytes of parameters a launch may pass (by-value structs included), as 8-byte words:
/// 4 KiB, CUDA's kernel-parameter limit before Volta (and still the portable one).
pub const MAX_PARAM_BYTES: usize = 4096;
pub(super) const PARAM_WORDS: usize = MAX_PARAM_BYTES / 8;

/// One launch being assembled by a generated launcher (see [`Launcher`](gpukern_device::launch::Launcher)).
pub struct ModuleArgs<'a> {
    pub(super) module: &'a Module,
    pub(super) kernel: &'static Kernel,
    pub(super) config: LaunchConfig,
    /// The first problem found with an argument; returned by the launch, which then does not run.
    pub(super) error: Option<Error>,
    /// Parameters added so far.
    pub(super) count: usize,
    /// CUDA: the parameters' bytes (a device address, a scalar, a struct), each from a word
    /// boundary, and where each starts.
    pub(super) words: [u64; PARAM_WORDS],
    pub(super) starts: [usize; MAX_PARAMS],
    /// Words of `words` used so far.
    pub(super) used: usize,
    /// Simulator: the launch with its registered buffers.
    pub(super) sim: Option<sim::Launch<'a>>,
    /// CUDA: the other streams of the device that the launch's buffers live on.
    pub(super) cross: CrossStream,
    /// How the launch groups its blocks: the option [`super::Cooperative`],
    /// [`super::Clustered`] and [`super::Dependent`] set in their `begin`.
    pub(super) kind: LaunchKind,
}

/// How a launch groups its blocks: options of the one launch pipeline (`module/launch.rs`),
/// each adding its own checks and launch attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LaunchKind {
    /// A plain launch (`cuLaunchKernel`).
    Plain,
    /// Every block of the grid resident at once ([`Module::cooperative`]).
    Cooperative,
    /// Blocks grouped into thread-block clusters of this shape ([`Module::clustered`]).
    Clustered((u32, u32, u32)),
    /// A programmatic dependent launch ([`Module::dependent`]): its blocks may start before the
    /// kernel before it on the stream has finished.
    Dependent,
}

impl<'a> ModuleArgs<'a> {
    /// A launch of `kernel` on `module` with `config`, no argument pushed yet.
    pub(super) fn new(module: &'a Module, kernel: &'static Kernel, config: LaunchConfig) -> ModuleArgs<'a> {
        let sim = match module.backend {
            Backend::Simulator => Some(sim::Launch::new(kernel.name, config.to_sim())),
            Backend::Cuda(_) => None,
        };
        ModuleArgs {
            module,
            kernel,
            config,
            error: None,
            count: 0,
            words: [0; PARAM_WORDS],
            starts: [0; MAX_PARAMS],
            used: 0,
            sim,
            cross: CrossStream::default(),
            kind: LaunchKind::Plain,
        }
    }

    pub(super) fn note(&mut self, error: Error) {
        self.error.get_or_insert(error);
    }

    /// The next parameter's name, for simulator reports.
    pub(super) fn param_name(&self) -> &'static str {
        self.kernel.params.get(self.count).map_or("?", |p| p.name)
    }

    pub(super) fn push_slot(&mut self, value: u64) {
        self.push_value(&value);
    }

    /// Adds a parameter whose bytes are `value`'s (a `Scalar`: plain data, no padding).
    pub(super) fn push_value<S: Copy>(&mut self, value: &S) {
        let words = std::mem::size_of::<S>().div_ceil(8).max(1);
        let start = self.used;
        if self.count >= MAX_PARAMS {
            self.note(Error::InvalidArgument {
                op: self.kernel.name,
                detail: format!("more than {MAX_PARAMS} parameters: gpukern launches at most {MAX_PARAMS}"),
            });
        } else if start + words > PARAM_WORDS {
            self.note(Error::TooLarge {
                op: self.kernel.name,
                detail: format!(
                    "more than {MAX_PARAM_BYTES} bytes of parameters (at `{}`): pass large data in a \
                     buffer",
                    self.param_name()
                ),
            });
        } else {
            // SAFETY: `words` 8-byte words from `start` lie inside `self.words` (checked above)
            // and hold `size_of::<S>()` bytes; `S` is plain data whose bytes are the parameter.
            unsafe {
                let dst = self.words.as_mut_ptr().add(start).cast::<u8>();
                std::ptr::copy_nonoverlapping(
                    (value as *const S).cast::<u8>(),
                    dst,
                    std::mem::size_of::<S>(),
                );
            }
            self.starts[self.count] = start;
            self.used += words;
        }
        self.count += 1;
    }

    /// The elements of a buffer of `len` that the launch registers: all of them, or, when the
    /// kernel declares `#[len(..)]` for the parameter, that many, after checking the buffer
    /// holds them (an error otherwise, and no element registered).
    pub(super) fn declared_len(
        &mut self,
        name: &'static str,
        len: usize,
        declared: Option<Declared>,
    ) -> usize {
        let Some(declared) = declared else {
            return len;
        };
        match declared.len {
            Some(want) if want <= len => want,
            Some(want) => {
                self.note(Error::InvalidArgument {
                    op: self.kernel.name,
                    detail: format!(
                        "`{name}` holds {len} elements; the kernel declares #[len({})] = {want} of them \
                         for it: pass a buffer of at least {want}",
                        declared.expr
                    ),
                });
                0
            }
            None => {
                self.note(Error::InvalidArgument {
                    op: self.kernel.name,
                    detail: format!(
                        "`{name}`: the kernel's #[len({})] is negative or too large for this launch's \
                         arguments",
                        declared.expr
                    ),
                });
                0
            }
        }
    }

    /// The address of a buffer argument's first element: the device address on CUDA (after
    /// checking the buffer is this device's, and noting its stream when it is another), 0 in the
    /// simulator, where the kernel gets the simulator's own pointer instead.
    pub(super) fn buffer_address(&mut self, place: Option<CudaPlace<'_>>) -> u64 {
        // On the launch path: the backend itself, not a `Gpu` handle cloned for the question.
        match (&self.module.backend, place) {
            (Backend::Cuda(d), Some(p)) if Arc::ptr_eq(p.ctx, &d.ctx) => {
                // A buffer of another stream of this device: the launch orders itself
                // against that stream (`crate::stream`). One pointer comparison otherwise.
                if !Arc::ptr_eq(p.stream, &d.stream) && !self.cross.note(p.stream) {
                    self.note(Error::InvalidArgument {
                        op: self.kernel.name,
                        detail: format!(
                            "buffers on more than {MAX_FOREIGN} other streams in one launch: \
                             copy some to the launching stream's buffers first"
                        ),
                    });
                }
                p.address
            }
            (Backend::Simulator, None) => 0,
            _ => {
                self.note(Error::WrongDevice { op: self.kernel.name });
                0
            }
        }
    }
}
