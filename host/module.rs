//! `Module`: one kernel crate's PTX loaded on a [`Gpu`] (or its simulator twin), and the typed
//! launches of its kernels.
//!
//! A kernel crate's `#[kernel]` functions each come with a generated launcher,
//! `my_kernels::scale::launch(&module, config, &x, &mut y, 2.0, n)`, written against
//! [`gpukern_device::launch::Launcher`]; `Module` implements that trait. On CUDA the launch goes
//! to the entry point of that name in the module's PTX; in the simulator the launcher's closure
//! runs the kernel function once per simulated thread. gpukern's own kernels take the same path
//! ([`Gpu::library`]).
//!
//! Before anything is launched the module checks what a GPU would refuse or crash on:
//! every buffer belongs to the module's `Gpu`, the kernel comes from the crate the module was
//! built from, and the grid, the block (against the kernel's launch bounds and its own
//! register-limited maximum) and the dynamic shared memory (opting the kernel in above 48 KiB)
//! fit the device.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, DriverError, result, sys};
use gpukern_device::launch::{Declared, Kernel, Launcher, Scalar};
use gpukern_device::sim;

use crate::device::{Backend, CudaDevice, Gpu};
use crate::error::{Error, Result};
use crate::launch_config::{DeviceLimits, LaunchConfig};
use crate::raw::launch_count;
use crate::stream::{CrossStream, MAX_FOREIGN};
use crate::view::{At, AtMut, CudaPlace, DeviceSlice, DeviceSliceMut};

/// The argument and launch methods of a [`Launcher`] whose `Args` are [`ModuleArgs`]: those of
/// [`Module`] itself. A launcher that only changes how a launch is made ([`Clustered`],
/// [`Cooperative`]) writes its own `begin`, which marks the arguments, and this.
macro_rules! forward_args_to_module {
    () => {
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

mod cluster;
mod cooperative;
mod load;
mod occupancy;
mod split;

pub use cluster::{Clustered, MAX_CLUSTER_BLOCKS, PORTABLE_CLUSTER_BLOCKS};
pub use cooperative::Cooperative;
pub use load::{EntryModules, PtxModule, PtxSet, entry_names};
pub(crate) use load::{Function, Functions};
pub use occupancy::simulated_sm;

/// A kernel crate loaded on a [`Gpu`]: launch its kernels with their generated launchers.
///
/// Made by [`Gpu::load`]; cheap to clone. On the simulator it holds no PTX (the simulator runs
/// the kernels' Rust code). Errors from a kernel that faults on the device surface at the next
/// synchronisation ([`Gpu::synchronize`], a download) as [`Error::KernelFailed`], naming the
/// kernels launched since the last one.
#[derive(Clone)]
pub struct Module {
    backend: Backend,
    krate: &'static str,
    functions: Option<Arc<Functions>>,
}

impl Gpu {
    /// Loads a kernel crate's PTX (`gpukern::include_ptx!(my_kernels)`) on this device: the
    /// newest architecture in it that the device runs.
    ///
    /// Errors: [`Error::UnsupportedDevice`] if every module is for a newer GPU;
    /// [`Error::Driver`] if the driver refuses the PTX.
    ///
    /// A crate is loaded once per `Gpu`: loading it again returns the module loaded first.
    pub fn load(&self, ptx: &PtxSet) -> Result<Module> {
        let functions = match &self.backend {
            Backend::Cuda(d) => {
                let mut loaded = d.modules.lock().unwrap_or_else(|p| p.into_inner());
                match loaded.get(ptx.krate) {
                    Some(functions) => Some(functions.clone()),
                    None => {
                        let functions =
                            Arc::new(Functions::select(&d.ctx, d.compute_capability, &d.limits, ptx)?);
                        loaded.insert(ptx.krate, functions.clone());
                        Some(functions)
                    }
                }
            }
            Backend::Simulator => None,
        };
        Ok(Module {
            backend: self.backend.clone(),
            krate: ptx.krate,
            functions,
        })
    }

    /// gpukern's own kernels (`kernels-gpu`), loaded when the `Gpu` was made.
    pub fn library(&self) -> Module {
        match &self.backend {
            Backend::Cuda(d) => Module {
                backend: self.backend.clone(),
                krate: crate::ptx::KERNELS.krate,
                functions: Some(d.library.clone()),
            },
            Backend::Simulator => Module {
                backend: Backend::Simulator,
                krate: crate::ptx::KERNELS.krate,
                functions: None,
            },
        }
    }
}

impl Module {
    /// The `Gpu` this module is loaded on.
    pub fn gpu(&self) -> Gpu {
        Gpu {
            backend: self.backend.clone(),
        }
    }

    /// The kernel crate it was built from.
    pub fn krate(&self) -> &'static str {
        self.krate
    }

    /// The entry points of the loaded PTX, sorted (empty on the simulator, which has no PTX).
    pub fn kernel_names(&self) -> Vec<&str> {
        self.functions
            .iter()
            .flat_map(|f| f.names().iter().copied())
            .collect()
    }

    /// Whether the loaded PTX has the entry point `name` (CUDA only; nothing is loaded to answer).
    pub(crate) fn has_entry(&self, name: &str) -> bool {
        self.functions
            .as_ref()
            .is_some_and(|f| f.names().binary_search(&name).is_ok())
    }

    /// The entry point `name` (CUDA only), loaded on first use; `None` if the module lacks it.
    ///
    /// Errors: a driver error loading it.
    pub(crate) fn function(&self, name: &str) -> Result<Option<Arc<Function>>> {
        match &self.functions {
            Some(f) => f.get(name),
            None => Ok(None),
        }
    }
}

/// Most parameters a kernel may have through a generated launcher.
pub const MAX_PARAMS: usize = 32;

/// Most bytes of parameters a launch may pass (by-value structs included), as 8-byte words:
/// 4 KiB, CUDA's kernel-parameter limit before Volta (and still the portable one).
pub const MAX_PARAM_BYTES: usize = 4096;
const PARAM_WORDS: usize = MAX_PARAM_BYTES / 8;

/// One launch being assembled by a generated launcher (see [`Launcher`]).
pub struct ModuleArgs<'a> {
    module: &'a Module,
    kernel: &'static Kernel,
    config: LaunchConfig,
    /// The first problem found with an argument; returned by the launch, which then does not run.
    error: Option<Error>,
    /// Parameters added so far.
    count: usize,
    /// CUDA: the parameters' bytes (a device address, a scalar, a struct), each from a word
    /// boundary, and where each starts.
    words: [u64; PARAM_WORDS],
    starts: [usize; MAX_PARAMS],
    /// Words of `words` used so far.
    used: usize,
    /// Simulator: the launch with its registered buffers.
    sim: Option<sim::Launch<'a>>,
    /// CUDA: the other streams of the device that the launch's buffers live on.
    cross: CrossStream,
    /// Blocks per thread-block cluster, when the launch goes through [`Module::clustered`].
    cluster: Option<(u32, u32, u32)>,
    /// Whether the launch goes through [`Module::cooperative`].
    cooperative: bool,
}

impl ModuleArgs<'_> {
    fn note(&mut self, error: Error) {
        self.error.get_or_insert(error);
    }

    /// The next parameter's name, for simulator reports.
    fn param_name(&self) -> &'static str {
        self.kernel.params.get(self.count).map_or("?", |p| p.name)
    }

    fn push_slot(&mut self, value: u64) {
        self.push_value(&value);
    }

    /// Adds a parameter whose bytes are `value`'s (a `Scalar`: plain data, no padding).
    fn push_value<S: Copy>(&mut self, value: &S) {
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
    fn declared_len(&mut self, name: &'static str, len: usize, declared: Option<Declared>) -> usize {
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
    fn buffer_address(&mut self, place: Option<CudaPlace<'_>>) -> u64 {
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

impl Launcher for Module {
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
    type Args<'a> = ModuleArgs<'a>;

    fn begin<'a>(&'a self, kernel: &'static Kernel, config: LaunchConfig) -> ModuleArgs<'a> {
        let sim = match self.backend {
            Backend::Simulator => Some(sim::Launch::new(kernel.name, config.to_sim())),
            Backend::Cuda(_) => None,
        };
        let mut args = ModuleArgs {
            module: self,
            kernel,
            config,
            error: None,
            count: 0,
            words: [0; PARAM_WORDS],
            starts: [0; MAX_PARAMS],
            used: 0,
            sim,
            cross: CrossStream::default(),
            cluster: None,
            cooperative: false,
        };
        if kernel.krate != self.krate {
            args.note(Error::InvalidArgument {
                op: kernel.name,
                detail: format!(
                    "the kernel is from crate `{}`, the module was loaded from `{}`: load that \
                     crate's PTX with Gpu::load(&gpukern::include_ptx!({}))",
                    kernel.krate, self.krate, kernel.krate
                ),
            });
        }
        if let Some(error) = beyond_bounds(kernel, &config) {
            args.note(error);
        }
        args
    }

    fn input<'a, T: Copy + 'static>(
        args: &mut ModuleArgs<'a>,
        buffer: DeviceSlice<'a, T>,
        declared: Option<Declared>,
    ) -> *const T
    where
        Self: 'a,
    {
        let name = args.param_name();
        let len = args.declared_len(name, buffer.len, declared);
        let address = args.buffer_address(buffer.at.cuda());
        args.push_slot(address);
        // The simulator registers exactly the view's elements (or the declared ones): an access
        // past them is reported.
        match (&mut args.sim, buffer.at) {
            (Some(launch), At::Host(v)) => launch.input(name, &v[..len]),
            _ => std::ptr::null(),
        }
    }

    fn output<'a, T: Copy + 'static>(
        args: &mut ModuleArgs<'a>,
        buffer: DeviceSliceMut<'a, T>,
        declared: Option<Declared>,
    ) -> *mut T
    where
        Self: 'a,
    {
        let name = args.param_name();
        let len = args.declared_len(name, buffer.len, declared);
        let address = args.buffer_address(buffer.at.cuda());
        args.push_slot(address);
        match (&mut args.sim, buffer.at) {
            (Some(launch), AtMut::Host(v)) => launch.output(name, &mut v[..len]),
            _ => std::ptr::null_mut(),
        }
    }

    fn scalar<'a, S: Scalar>(args: &mut ModuleArgs<'a>, value: S)
    where
        Self: 'a,
    {
        args.push_value(&value);
    }

    fn add_shared_bytes(config: LaunchConfig, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_mem_bytes: config.shared_mem_bytes.saturating_add(bytes),
            ..config
        }
    }

    unsafe fn launch<'a>(mut args: ModuleArgs<'a>, body: &dyn Fn()) -> Result<()>
    where
        Self: 'a,
    {
        if let Some(error) = args.error.take() {
            return Err(error);
        }
        let kernel = args.kernel;
        match (&args.module.backend, args.sim.take()) {
            (Backend::Simulator, Some(launch)) => {
                let config = args
                    .config
                    .checked(kernel.name, &DeviceLimits::SIMULATOR.opted_in())?;
                if let Some(shape) = args.cluster {
                    cluster::check(kernel.name, config, shape, None)?;
                }
                // A simulator graph being captured: checked, not run (as a CUDA capture records).
                if crate::graph::simulator_dry_run() {
                    return Ok(());
                }
                // SAFETY: the caller upholds the kernel's contract; `body` calls the kernel with
                // the pointers this launch registered.
                unsafe { launch.run(body) }?;
                launch_count::simulator(kernel);
                Ok(())
            }
            (Backend::Cuda(device), _) => {
                let function = &*args
                    .module
                    .function(kernel.name)?
                    .ok_or_else(|| missing_entry(args.module, kernel.name))?;
                let config = checked_on_device(args.config, kernel, function, device)?;
                if let Some(shape) = args.cluster {
                    cluster::check(kernel.name, config, shape, Some(device.compute_capability))?;
                    function.allow_cluster(shape)?;
                }
                if args.cooperative {
                    cooperative::check(kernel.name, config, args.cluster, function, device)?;
                }
                let mut pointers = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
                let words = args.words.as_mut_ptr();
                for (pointer, &start) in pointers
                    .iter_mut()
                    .zip(&args.starts[..args.count.min(MAX_PARAMS)])
                {
                    // SAFETY: `start` is inside `args.words` (`push_value`).
                    *pointer = unsafe { words.add(start) }.cast();
                }
                faults::launched(&device.ctx, kernel.name);
                device
                    .ctx
                    .bind_to_thread()
                    .map_err(|e| faults::launch_error(&device.ctx, kernel.name, e))?;
                let joined = match args.cross.is_empty() {
                    true => None,
                    false => Some(args.cross.before(&device.ctx, &device.stream)?),
                };
                // SAFETY: one pointer per parameter, in the kernel's order (the generated
                // launcher's), each to the parameter's bytes (`push_value`); the
                // buffers are this device's and live through the call; the caller upholds the
                // kernel's own contract.
                unsafe {
                    let params = &mut pointers[..args.count.min(MAX_PARAMS)];
                    match args.cluster {
                        None if args.cooperative => cooperative::launch(function, config, device, params),
                        None => result::launch_kernel(
                            function.func.cu_function(),
                            config.grid,
                            config.block,
                            config.shared_mem_bytes,
                            device.stream.cu_stream(),
                            params,
                        ),
                        Some(shape) => cluster::launch(function, config, shape, device, params),
                    }
                }
                .map_err(|e| faults::launch_error(&device.ctx, kernel.name, e))?;
                if let Some(event) = joined {
                    args.cross.after(event, &device.stream)?;
                }
                launch_count::cuda(kernel);
                Ok(())
            }
            (Backend::Simulator, None) => Err(Error::InvalidArgument {
                op: kernel.name,
                detail: "internal: a simulator launch without its simulator state".into(),
            }),
        }
    }
}

/// The error for a kernel the module's PTX lacks: none was built into the program (gpukern's own
/// kernels without the `library` feature), or it is of another version of the crate.
fn missing_entry(module: &Module, kernel: &'static str) -> Error {
    let detail = if module.kernel_names().is_empty() {
        format!(
            "the PTX of `{}` was not built into this program{}",
            module.krate,
            if module.krate == crate::ptx::KERNELS.krate {
                ": gpukern's own kernels need its `library` feature (on by default; enable it, or \
                 run them in the simulator)"
            } else {
                ""
            }
        )
    } else {
        format!(
            "the loaded PTX of `{}` has no entry point `{kernel}`: was it built from this version \
             of the crate?",
            module.krate
        )
    };
    Error::InvalidArgument { op: kernel, detail }
}

/// The error for a launch of more threads per block than the kernel's launch bounds allow
/// (`#[kernel(launch_bounds(..))]`), on either backend: the driver would refuse it with a bare
/// `CUDA_ERROR_INVALID_VALUE`.
fn beyond_bounds(kernel: &Kernel, config: &LaunchConfig) -> Option<Error> {
    let bounds = kernel.bounds?;
    let (x, y, z) = config.block;
    let threads = u64::from(x) * u64::from(y) * u64::from(z);
    (threads > u64::from(bounds.max_threads)).then(|| Error::InvalidArgument {
        op: kernel.name,
        detail: format!(
            "a block of {threads} threads {:?}; the kernel's launch bounds \
             (#[kernel(launch_bounds({}, {}))]) allow at most {} threads per block",
            config.block, bounds.max_threads, bounds.min_blocks, bounds.max_threads
        ),
    })
}

/// `config` checked against the device and the kernel's own limits; a kernel that needs more
/// than 48 KiB of dynamic shared memory is opted in to it (once per size) first.
fn checked_on_device(
    config: LaunchConfig,
    kernel: &Kernel,
    function: &Function,
    device: &CudaDevice,
) -> Result<LaunchConfig> {
    let limits = DeviceLimits {
        max_threads_per_block: function.max_threads.min(device.limits.max_threads_per_block),
        max_shared_mem_per_block: device
            .limits
            .max_shared_mem_per_block_optin
            .saturating_sub(function.static_shared),
        ..device.limits
    };
    let config = config.checked(kernel.name, &limits)?;
    function.opt_in(config.shared_mem_bytes)?;
    Ok(config)
}

impl DeviceLimits {
    /// These limits with the opt-in shared memory as the per-block limit: what a kernel opted in
    /// to all of it may use.
    pub fn opted_in(self) -> DeviceLimits {
        DeviceLimits {
            max_shared_mem_per_block: self.max_shared_mem_per_block_optin,
            ..self
        }
    }
}

/// Which kernels may have faulted: the names launched on each device since its last
/// successful synchronisation, so that a fault reported later names them.
pub(crate) mod faults {
    use super::*;

    /// Most names remembered per device (the oldest are dropped, and the message says so).
    const REMEMBERED: usize = 8;

    type Recent = HashMap<usize, (Vec<&'static str>, bool)>;

    fn recent() -> &'static Mutex<Recent> {
        static RECENT: std::sync::OnceLock<Mutex<Recent>> = std::sync::OnceLock::new();
        RECENT.get_or_init(|| Mutex::new(HashMap::new()))
    }

    fn key(ctx: &Arc<CudaContext>) -> usize {
        Arc::as_ptr(ctx) as usize
    }

    /// Notes a launch of `kernel` in `ctx`.
    pub(crate) fn launched(ctx: &Arc<CudaContext>, kernel: &'static str) {
        let mut recent = recent().lock().unwrap_or_else(|p| p.into_inner());
        let (names, dropped) = recent.entry(key(ctx)).or_default();
        if names.last() != Some(&kernel) {
            if names.len() == REMEMBERED {
                names.remove(0);
                *dropped = true;
            }
            names.push(kernel);
        }
    }

    /// Forgets the launches in `ctx`: they all finished.
    pub(crate) fn synchronized(ctx: &Arc<CudaContext>) {
        let mut recent = recent().lock().unwrap_or_else(|p| p.into_inner());
        recent.remove(&key(ctx));
    }

    /// Whether a driver error means a kernel faulted on the device, leaving the context unusable.
    pub(crate) fn is_sticky(e: &DriverError) -> bool {
        use sys::CUresult::*;
        matches!(
            e.0,
            CUDA_ERROR_ASSERT
                | CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_LAUNCH_TIMEOUT
                | CUDA_ERROR_ECC_UNCORRECTABLE
        )
    }

    /// The error for a launch of `kernel` that the driver refused with `e`: an earlier kernel's
    /// fault if `e` is one, else `kernel`'s own failure.
    pub(crate) fn launch_error(ctx: &Arc<CudaContext>, kernel: &'static str, e: DriverError) -> Error {
        if is_sticky(&e) {
            return error(ctx, "launching a kernel", e);
        }
        Error::KernelFailed {
            kernels: kernel.to_string(),
            during: "launching it",
            sticky: false,
            source: e,
        }
    }

    /// The error for `e`, seen while `during`: [`Error::KernelFailed`] naming the kernels
    /// launched since the last synchronisation when a kernel faulted, else [`Error::Driver`].
    pub(crate) fn error(ctx: &Arc<CudaContext>, during: &'static str, e: DriverError) -> Error {
        if !is_sticky(&e) {
            return Error::Driver { during, source: e };
        }
        let recent = recent().lock().unwrap_or_else(|p| p.into_inner());
        let kernels = match recent.get(&key(ctx)) {
            Some((names, dropped)) => format!("{}{}", if *dropped { "... " } else { "" }, names.join(", ")),
            None => "(none recorded)".to_string(),
        };
        Error::KernelFailed {
            kernels,
            during,
            sticky: true,
            source: e,
        }
    }

    /// `r` with a fault mapped by [`error`]; a success forgets the launches (`r` came from a
    /// synchronisation of the device's stream).
    pub(crate) fn synced<T>(
        ctx: &Arc<CudaContext>,
        during: &'static str,
        r: std::result::Result<T, DriverError>,
    ) -> Result<T> {
        match r {
            Ok(v) => {
                synchronized(ctx);
                Ok(v)
            }
            Err(e) => Err(error(ctx, during, e)),
        }
    }
}
