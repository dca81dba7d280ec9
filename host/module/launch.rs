//! The launch pipeline: every launch of a [`Module`] (plain, [`super::Cooperative`],
//! [`super::Clustered`], [`super::Dependent`]) is assembled by [`Launcher`]'s `begin`, its
//! arguments pushed (`module/args.rs`), then made by [`run`], each step once and in this order:
//!
//! 1. **check** the geometry against the device and the kernel: the grid, the block (against the
//!    device, the kernel's launch bounds and its own register-limited maximum) and the dynamic
//!    shared memory; a cluster's shape; a cooperative grid's residency;
//! 2. **opt in** the kernel to the shared memory it asks for above 48 KiB, and to non-portable
//!    cluster sizes;
//! 3. **order** the launch against the other streams its buffers live on ([`crate::stream`]);
//! 4. **launch**: `cuLaunchKernel`, or `cuLaunchKernelEx` with the cooperative, the
//!    cluster-dimension or (sm_90 on) the programmatic-serialization attribute of a dependent
//!    launch; in the simulator, the kernel's Rust code (or, inside a simulator capture, nothing:
//!    the checks were the point);
//! 5. **count** the launch ([`super::launch_count`]).
//!
//! Cooperative, cluster and dependent launches are options of the one pipeline ([`LaunchKind`]),
//! not detours: each adds its check in step 1, its opt-in in step 2 and its attribute in step 4.

use std::ffi::c_void;

use cudarc::driver::{DriverError, result, sys};
use gpukern_device::launch::{Declared, Kernel, Launcher, Scalar};

use super::args::{LaunchKind, MAX_PARAMS, ModuleArgs};
use super::cluster::{MAX_CLUSTER_BLOCKS, PORTABLE_CLUSTER_BLOCKS};
use super::launch_count;
use super::loaded::Module;
use crate::device::{Backend, CudaDevice};
use crate::error::{DriverContext, Error, Result};
use crate::fault;
use crate::launch_config::{DeviceLimits, LaunchConfig};
use crate::ptx::Function;
use crate::view::{At, AtMut, DeviceSlice, DeviceSliceMut};

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
        let mut args = ModuleArgs::new(self, kernel, config);
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

    unsafe fn launch<'a>(args: ModuleArgs<'a>, body: &dyn Fn()) -> Result<()>
    where
        Self: 'a,
    {
        // SAFETY: the caller upholds the kernel's contract.
        unsafe { run(args, body) }
    }
}

/// Makes the launch `args` assembled: the pipeline of the [module documentation](self).
///
/// # Safety
/// The caller upholds the kernel's contract; `body` calls the kernel with the pointers the
/// launch registered (the generated launcher's closure).
unsafe fn run(mut args: ModuleArgs<'_>, body: &dyn Fn()) -> Result<()> {
    if let Some(error) = args.error.take() {
        return Err(error);
    }
    let kernel = args.kernel;
    match (&args.module.backend, args.sim.take()) {
        (Backend::Simulator, Some(launch)) => {
            // 1. check (the simulator has every shared byte without opting in: no step 2, and
            // one stream: no step 3).
            let config = args
                .config
                .checked(kernel.name, &DeviceLimits::SIMULATOR.opted_in())?;
            if let LaunchKind::Clustered(shape) = args.kind {
                check_cluster(kernel.name, config, shape, None)?;
            }
            // 4. launch: inside a simulator capture, checked and not run (as a CUDA capture
            // records without executing).
            if crate::capture::simulator_dry_run() {
                return Ok(());
            }
            // SAFETY: the caller upholds the kernel's contract; `body` calls the kernel with
            // the pointers this launch registered.
            unsafe { launch.run(body) }?;
            // 5. count.
            launch_count::simulator(kernel);
            Ok(())
        }
        (Backend::Cuda(device), _) => {
            let function = &*args
                .module
                .function(kernel.name)?
                .ok_or_else(|| missing_entry(args.module, kernel.name))?;
            // 1. check.
            let config = check_on_device(args.config, kernel, args.kind, function, device)?;
            // 2. opt in.
            function.opt_in(config.shared_mem_bytes)?;
            if let LaunchKind::Clustered(shape) = args.kind {
                allow_cluster(function, shape)?;
            }
            // 3. order (nothing to do, and no driver call, when every buffer is on this stream).
            device
                .ctx
                .bind_to_thread()
                .map_err(|e| fault::launch_error(&device.ctx, kernel.name, e))?;
            let joined = match args.cross.is_empty() {
                true => None,
                false => Some(args.cross.before(&device.ctx, &device.stream)?),
            };
            // 4. launch.
            let mut pointers = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
            let words = args.words.as_mut_ptr();
            let count = args.count.min(MAX_PARAMS);
            for (pointer, &start) in pointers.iter_mut().zip(&args.starts[..count]) {
                // SAFETY: `start` is inside `args.words` (`push_value`).
                *pointer = unsafe { words.add(start) }.cast();
            }
            fault::launched(&device.ctx, kernel.name);
            // SAFETY: one pointer per parameter, in the kernel's order (the generated
            // launcher's), each to the parameter's bytes (`push_value`); the buffers are this
            // device's and live through the call; the caller upholds the kernel's own contract.
            unsafe { launch_on_device(function, config, args.kind, device, &mut pointers[..count]) }
                .map_err(|e| fault::launch_error(&device.ctx, kernel.name, e))?;
            if let Some(event) = joined {
                args.cross.after(event, &device.stream)?;
            }
            // 5. count.
            launch_count::cuda(kernel);
            Ok(())
        }
        (Backend::Simulator, None) => Err(Error::InvalidArgument {
            op: kernel.name,
            detail: "internal: a simulator launch without its simulator state".into(),
        }),
    }
}

/// Step 1 on CUDA: `config` checked against the device and the kernel's own limits (its
/// register-limited block size, its static shared memory, the opt-in shared memory), then the
/// launch kind's own check.
fn check_on_device(
    config: LaunchConfig,
    kernel: &Kernel,
    kind: LaunchKind,
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
    match kind {
        LaunchKind::Plain | LaunchKind::Dependent => {}
        LaunchKind::Clustered(shape) => {
            check_cluster(kernel.name, config, shape, Some(device.compute_capability))?
        }
        LaunchKind::Cooperative => check_cooperative(kernel.name, config, function, device)?,
    }
    Ok(config)
}

/// Checks a cluster `shape` for `config`: every extent at least 1, the grid a whole number of
/// clusters, at most [`MAX_CLUSTER_BLOCKS`] blocks in one, and (on CUDA, `cc` given) a device
/// of compute capability 9.0 or newer.
fn check_cluster(
    op: &'static str,
    config: LaunchConfig,
    shape: (u32, u32, u32),
    cc: Option<(i32, i32)>,
) -> Result<()> {
    if let Some((major, minor)) = cc {
        if major < 9 {
            return Err(Error::InvalidArgument {
                op,
                detail: format!(
                    "thread-block clusters need a GPU of compute capability 9.0 or newer; this \
                     one is {major}.{minor}"
                ),
            });
        }
    }
    let (cx, cy, cz) = shape;
    let (gx, gy, gz) = config.grid;
    if cx == 0 || cy == 0 || cz == 0 {
        return Err(Error::InvalidArgument {
            op,
            detail: format!("cluster shape {shape:?} has an empty extent"),
        });
    }
    if gx % cx != 0 || gy % cy != 0 || gz % cz != 0 {
        return Err(Error::InvalidArgument {
            op,
            detail: format!(
                "grid {:?} does not divide into clusters of {shape:?}: each grid extent must be a \
                 multiple of the cluster's",
                config.grid
            ),
        });
    }
    let blocks = cx as u64 * cy as u64 * cz as u64;
    if blocks > MAX_CLUSTER_BLOCKS as u64 {
        return Err(Error::TooLarge {
            op,
            detail: format!(
                "clusters of {shape:?} have {blocks} blocks; at most {MAX_CLUSTER_BLOCKS} \
                 ({PORTABLE_CLUSTER_BLOCKS} portably)"
            ),
        });
    }
    Ok(())
}

/// Checks that `config`'s grid can be resident at once for a cooperative launch of `function`
/// on `device` (and that the device launches cooperatively).
fn check_cooperative(
    op: &'static str,
    config: LaunchConfig,
    function: &Function,
    device: &CudaDevice,
) -> Result<()> {
    let threads = config.block.0 * config.block.1 * config.block.2;
    let most = resident(op, function, device, threads, config.shared_mem_bytes)?;
    let (x, y, z) = config.grid;
    let blocks = u64::from(x) * u64::from(y) * u64::from(z);
    if blocks > u64::from(most) {
        return Err(Error::TooLarge {
            op,
            detail: format!(
                "a cooperative grid of {blocks} blocks {:?}: at most {most} blocks of {threads} \
                 threads and {} bytes of dynamic shared memory are resident at once on this \
                 device ({} multiprocessors); a grid barrier in a larger grid would hang",
                config.grid, config.shared_mem_bytes, device.multiprocessors
            ),
        });
    }
    Ok(())
}

/// Blocks of `function` of `threads` threads and `shared_mem_bytes` each resident on the whole
/// device at once; [`Error::InvalidArgument`] where the device cannot launch cooperatively.
/// (The occupancy query opts the kernel in to `shared_mem_bytes` itself: the driver's answer
/// depends on it.)
pub(super) fn resident(
    op: &'static str,
    function: &Function,
    device: &CudaDevice,
    threads: u32,
    shared_mem_bytes: u32,
) -> Result<u32> {
    // (The device attribute needs no current context; `resident_per_sm` makes it current for
    // the occupancy query.)
    let supported = device
        .ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)
        .during("asking the device whether it launches cooperatively")?;
    if supported != 1 {
        return Err(Error::InvalidArgument {
            op,
            detail: "the device does not support cooperative launches \
                     (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)"
                .into(),
        });
    }
    let per_sm = function.resident_per_sm(
        &device.ctx,
        threads,
        shared_mem_bytes,
        "asking the driver how many blocks of a cooperative launch fit a multiprocessor",
    )?;
    Ok(per_sm.saturating_mul(device.multiprocessors))
}

/// Step 2 for clusters: above [`PORTABLE_CLUSTER_BLOCKS`] blocks the kernel must allow
/// non-portable cluster sizes (set once; harmless to repeat).
fn allow_cluster(function: &Function, (x, y, z): (u32, u32, u32)) -> Result<()> {
    if x * y * z <= PORTABLE_CLUSTER_BLOCKS {
        return Ok(());
    }
    use sys::CUfunction_attribute::*;
    function
        .func
        .set_attribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        .during("allowing a kernel non-portable cluster sizes")
}

/// Step 4 on CUDA: `function` launched with `config` on `device`'s stream, `cuLaunchKernel` for
/// a plain launch, `cuLaunchKernelEx` with the launch kind's attribute otherwise.
///
/// # Safety
/// As `cuLaunchKernel`: one pointer per kernel parameter, to a value of its size; the caller
/// upholds the kernel's contract.
unsafe fn launch_on_device(
    function: &Function,
    config: LaunchConfig,
    kind: LaunchKind,
    device: &CudaDevice,
    params: &mut [*mut c_void],
) -> std::result::Result<(), DriverError> {
    // SAFETY: an all-zero attribute is a valid value of the plain-data union, then set.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    // SAFETY (the plain launch's): the caller's contract.
    let plain = |params: &mut [*mut c_void]| unsafe {
        result::launch_kernel(
            function.func.cu_function(),
            config.grid,
            config.block,
            config.shared_mem_bytes,
            device.stream.cu_stream(),
            params,
        )
    };
    match kind {
        LaunchKind::Plain => return plain(params),
        // Before sm_90 a dependent launch is a plain one (its kernel's `dependent::wait` is a
        // no-op there, and the stream orders the two kernels).
        LaunchKind::Dependent if device.compute_capability.0 < 9 => return plain(params),
        LaunchKind::Cooperative => {
            attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attribute.value.cooperative = 1;
        }
        LaunchKind::Clustered((x, y, z)) => {
            attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attribute.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
        }
        LaunchKind::Dependent => {
            attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attribute.value.programmaticStreamSerializationAllowed = 1;
        }
    }
    let cu = sys::CUlaunchConfig {
        gridDimX: config.grid.0,
        gridDimY: config.grid.1,
        gridDimZ: config.grid.2,
        blockDimX: config.block.0,
        blockDimY: config.block.1,
        blockDimZ: config.block.2,
        sharedMemBytes: config.shared_mem_bytes,
        hStream: device.stream.cu_stream(),
        attrs: &mut attribute,
        numAttrs: 1,
    };
    // SAFETY: the caller's contract; `cu` and `attribute` live through the call.
    unsafe {
        sys::cuLaunchKernelEx(
            &cu,
            function.func.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
        .result()
    }
}

/// The error for a kernel the module's PTX lacks: none was built into the program (gpukern's own
/// kernels without the `library` or a family feature), or it is of another version of the crate.
fn missing_entry(module: &Module, kernel: &'static str) -> Error {
    let detail = if module.kernel_names().is_empty() {
        format!(
            "the PTX of `{}` was not built into this program{}",
            module.krate,
            if module.krate == crate::ptx::KERNELS.krate {
                ": gpukern's own kernels need its `library` feature (on by default) or their \
                 family's (`matmul`, `softmax`, ...), and a build without `GPUKERN_PTX_SKIP=1`; \
                 enable it, or run them in the simulator"
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
pub(super) fn beyond_bounds(kernel: &Kernel, config: &LaunchConfig) -> Option<Error> {
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
