//! `Gpu`: one device (or the CPU simulator) with its stream and loaded kernels, and the
//! process-wide default the free functions use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaStream, DriverError, sys};

use gpukern_device::launch::Kernel;
use gpukern_device::sim;

use crate::cache::Caches;
use crate::error::{DriverContext, Error, Result};
use crate::fault;
use crate::launch_config::DeviceLimits;
use crate::ptx::{self, Function, Functions};

/// Where kernels run: a CUDA device, or the CPU simulator.
///
/// Cheap to clone (the CUDA state is reference-counted) and safe to share between threads:
/// calls from several threads are queued on the one stream in the order they arrive.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) backend: Backend,
}

#[derive(Clone)]
pub(crate) enum Backend {
    Cuda(Arc<CudaDevice>),
    Simulator,
}

/// A CUDA device: context, the stream every call of this `Gpu` runs on, and gpukern's kernels.
pub(crate) struct CudaDevice {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// gpukern's own kernels (`kernels-gpu`), loaded once ([`Gpu::library`]).
    pub(crate) library: Arc<Functions>,
    pub(crate) limits: DeviceLimits,
    pub(crate) name: String,
    pub(crate) compute_capability: (i32, i32),
    pub(crate) arch: &'static str,
    /// Streaming multiprocessors: the plans size their grids against them, and the persistent
    /// softmax kernels launch as many blocks as fit on all of them at once.
    pub(crate) multiprocessors: u32,
    /// Blocks of a persistent kernel resident per multiprocessor, by kernel, block size and
    /// dynamic shared memory: asked of the driver once per shape, not on every launch.
    /// Shared by every stream handle of the device ([`Gpu::stream`]).
    pub(crate) residency: Arc<Mutex<HashMap<ResidencyKey, u32>>>,
    /// The kernel crates loaded with [`Gpu::load`], by crate name: each loaded once, and shared
    /// by every stream handle of the device.
    pub(crate) modules: Arc<Mutex<HashMap<&'static str, Arc<Functions>>>>,
    /// This handle's caches, one slot per cache type ([`Caches`]): pinned memory's staging
    /// buffers, the Hopper kernels' tensor maps, softmax's grid-row workspace. One set per
    /// stream handle, so that two streams never wait on each other's.
    pub(crate) caches: Caches,
}

impl CudaDevice {
    /// This handle's cache of type `T` (made empty on first use): see [`Caches::get`].
    pub(crate) fn cache<T: Default + Send + 'static>(&self) -> Arc<Mutex<T>> {
        self.caches.get::<T>()
    }
}

impl Gpu {
    /// The cache of type `T` of this stream handle (made empty on first use, see
    /// [`Caches::get`]); in the simulator one per process, every simulator handle being one
    /// device that runs calls in order. Lock it for as long as the cached value is used.
    pub(crate) fn handle_cache<T: Default + Send + 'static>(&self) -> Arc<Mutex<T>> {
        static SIMULATOR: OnceLock<Caches> = OnceLock::new();
        match &self.backend {
            Backend::Cuda(d) => d.cache::<T>(),
            Backend::Simulator => SIMULATOR.get_or_init(Caches::default).get::<T>(),
        }
    }
}

/// The PTX architecture of the module whose kernels may use `wgmma` ([`Gpu::has_wgmma`]): the
/// kernels compiled for it alone (`#[cfg(target_feature = "sm_90a")]`) are in no other module.
const WGMMA_ARCH: &str = "sm_90a";

/// Which backend [`Gpu::global`] picks: `GPUKERN_DEVICE` = `cuda`, `sim`, or unset (CUDA if
/// there is a device, else the simulator).
const DEVICE_ENV: &str = "GPUKERN_DEVICE";

impl Gpu {
    /// The CUDA device with this ordinal (0 is the first), with gpukern's kernels loaded.
    ///
    /// Errors: [`Error::NoDriver`] without the NVIDIA driver, [`Error::NoDevice`] without such a
    /// device, [`Error::UnsupportedDevice`] if it is older than every embedded PTX module, and
    /// [`Error::Driver`] when the driver and device are there but fail (a broken install, a
    /// context that cannot be created, a device out of memory...): that is never "no GPU", so
    /// [`Gpu::global`] does not hide it behind the simulator.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        let count = CudaContext::device_count().map_err(|e| open_error(ordinal, e))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoDevice {
                ordinal,
                reason: format!("the driver sees {count} device(s)"),
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| open_error(ordinal, e))?;
        // gpukern orders cross-stream uses of its buffers itself, only where streams differ
        // (`crate::stream`), so cudarc's per-buffer events would be pure overhead on each
        // allocation and launch.
        // SAFETY: called before this context allocated anything or launched anything; every use
        // of a buffer on a stream other than its own is ordered by `crate::stream::CrossStream`.
        unsafe { ctx.disable_event_tracking() };
        let compute_capability = ctx
            .compute_capability()
            .during("reading the compute capability")?;
        let limits = read_limits(&ctx)?;
        // gpukern's kernels: chosen now, each JIT-compiled by the driver when first launched.
        let library = Functions::select(&ctx, compute_capability, &limits, &ptx::KERNELS)?;
        let multiprocessors = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map(|v| v.max(0) as u32)
            .during("reading device limits")?;
        let name = ctx.name().during("reading the device name")?;
        let library = Arc::new(library);
        let stream = ctx.new_stream().during("creating a stream")?;
        Ok(Gpu {
            backend: Backend::Cuda(Arc::new(CudaDevice {
                ctx,
                stream,
                arch: library.arch,
                modules: Arc::new(Mutex::new(HashMap::from([(ptx::KERNELS.krate, library.clone())]))),
                library,
                limits,
                name,
                compute_capability,
                multiprocessors,
                residency: Arc::new(Mutex::new(HashMap::new())),
                caches: Caches::default(),
            })),
        })
    }

    /// The CPU simulator: runs the same kernel code block by block on the CPU, checking every
    /// memory access and barrier (see [`gpukern_device::sim`]). Slow; for machines without a GPU
    /// and for finding kernel bugs.
    pub fn simulator() -> Gpu {
        Gpu {
            backend: Backend::Simulator,
        }
    }

    /// The process-wide default used by the free functions ([`crate::matmul`] and friends),
    /// created on first use.
    ///
    /// With `GPUKERN_DEVICE` unset it is CUDA device 0, or, when there is no driver or no device
    /// ([`Error::is_no_gpu`]), the simulator (saying so once on stderr); a GPU that is present
    /// but failing is an error, never a silent fallback. `GPUKERN_DEVICE=cuda` makes a missing
    /// GPU an error instead; `GPUKERN_DEVICE=sim` always picks the simulator.
    pub fn global() -> Result<&'static Gpu> {
        static DEFAULT: OnceLock<Result<Gpu>> = OnceLock::new();
        DEFAULT.get_or_init(Self::from_env).as_ref().map_err(Clone::clone)
    }

    fn from_env() -> Result<Gpu> {
        match std::env::var(DEVICE_ENV).as_deref() {
            Ok("sim") => Ok(Gpu::simulator()),
            Ok("cuda") => Gpu::new(0),
            Ok(other) if !other.is_empty() => Err(Error::InvalidArgument {
                op: "Gpu::global",
                detail: format!("{DEVICE_ENV}={other}: expected `cuda` or `sim`"),
            }),
            _ => match Gpu::new(0) {
                Ok(gpu) => Ok(gpu),
                // Only "no GPU" falls back; a failing GPU is an error the user must see.
                Err(e) if e.is_no_gpu() => {
                    eprintln!("gpukern: {e}; running the kernels in the CPU simulator");
                    Ok(Gpu::simulator())
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Whether this runs on the CPU simulator.
    pub fn is_simulator(&self) -> bool {
        matches!(self.backend, Backend::Simulator)
    }

    /// Whether this `Gpu` runs the kernels written for `sm_90a` alone (`wgmma`, the tensor copy
    /// engine, warp specialisation: the Hopper rungs of matmul and attention): always in the
    /// simulator; on CUDA when the `sm_90a` module was loaded (a compute capability 9.0 GPU, and
    /// gpukern built for `sm_90a`, as it is by default).
    pub fn has_wgmma(&self) -> bool {
        match &self.backend {
            Backend::Simulator => true,
            Backend::Cuda(d) => d.arch == WGMMA_ARCH,
        }
    }

    /// A one-line description: device name, compute capability and PTX architecture, or
    /// "CPU simulator".
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Cuda(d) => format!(
                "{} (compute capability {}.{}, PTX {})",
                d.name, d.compute_capability.0, d.compute_capability.1, d.arch
            ),
            Backend::Simulator => "CPU simulator".to_string(),
        }
    }

    /// The launch limits kernels are checked against.
    pub fn limits(&self) -> DeviceLimits {
        match &self.backend {
            Backend::Cuda(d) => d.limits,
            Backend::Simulator => DeviceLimits::SIMULATOR,
        }
    }

    /// Waits until every call queued on this handle's stream has finished (not those of other
    /// [`Gpu::stream`] handles); reports an error a kernel raised.
    pub fn synchronize(&self) -> Result<()> {
        crate::capture::refuse(self, "Gpu::synchronize", "a synchronisation")?;
        match &self.backend {
            Backend::Cuda(d) => fault::synced(&d.ctx, "synchronising the stream", d.stream.synchronize()),
            Backend::Simulator => Ok(()),
        }
    }

    /// The cudarc context and stream, for interop with other cudarc code (e.g. cuBLAS, timing
    /// events); `None` for the simulator.
    ///
    /// # Safety
    /// gpukern switches cudarc's cross-stream event tracking off for this context and orders
    /// cross-stream uses of its buffers itself, in its own launches only ([`crate::stream`]),
    /// so neither cudarc nor gpukern orders what the caller queues with the raw stream. The
    /// caller must:
    /// * queue everything it does with the context on the returned stream (this handle's; each
    ///   [`Gpu::stream`] handle has its own), or order it against that stream with events it
    ///   records and waits on itself ([`Gpu::record`], [`Gpu::wait`]) or a full synchronisation;
    /// * never use a buffer of this device ([`crate::DeviceVec`], [`crate::DeviceMatrix`]) that
    ///   another handle made (another stream) without such ordering, nor memory it allocated
    ///   from the context on another stream, nor free it while work on another stream may still
    ///   use it;
    /// * not switch event tracking back on, nor destroy or reset the context or the stream.
    ///
    /// Work queued on the returned stream itself (cuBLAS on a handle bound to it, events recorded
    /// on it) needs nothing more: it runs in order with gpukern's own calls.
    ///
    /// Safe code cannot call it:
    ///
    /// ```compile_fail,E0133
    /// let gpu = gpukern::Gpu::simulator();
    /// let _ = gpu.cuda_stream();
    /// ```
    pub unsafe fn cuda_stream(&self) -> Option<(&Arc<CudaContext>, &Arc<CudaStream>)> {
        match &self.backend {
            Backend::Cuda(d) => Some((&d.ctx, &d.stream)),
            Backend::Simulator => None,
        }
    }
}

impl crate::capture::Queued for Gpu {
    /// This handle's stream: where its allocations, copies and launches are queued.
    fn queue(&self) -> Option<&Arc<CudaStream>> {
        match &self.backend {
            Backend::Cuda(d) => Some(&d.stream),
            Backend::Simulator => None,
        }
    }
}

/// Multiprocessors the plans assume in the simulator: an H200's (and H100 SXM's) 132, so that the
/// simulator runs the same plans as that GPU.
pub const SIMULATED_MULTIPROCESSORS: usize = 132;

/// Blocks the simulator runs a persistent kernel with (at most): few, so that every block loops
/// over several rows on small test shapes.
const SIM_RESIDENT_BLOCKS: u32 = 2;

/// The device facts the plans and launches read, each read off the device once (when the `Gpu`
/// was made, or once per kernel and block size) and answered here; the simulator's stand-ins
/// are those of an H200 ([`DeviceLimits::SIMULATOR`], [`SIMULATED_MULTIPROCESSORS`]).
impl Gpu {
    /// Streaming multiprocessors of the device ([`SIMULATED_MULTIPROCESSORS`] in the simulator):
    /// what [`crate::ops::matmul::FastPlan::choose`] sizes the grid against.
    /// Read once, when the `Gpu` was made.
    pub fn multiprocessors(&self) -> Result<usize> {
        match &self.backend {
            Backend::Cuda(d) => Ok(d.multiprocessors.max(1) as usize),
            Backend::Simulator => Ok(SIMULATED_MULTIPROCESSORS),
        }
    }

    /// The most threads a block of `kernel` (one of gpukern's own) may have: the CUDA limit,
    /// lowered by the driver when the kernel's registers do not fit the register file at 1024
    /// threads; read when the kernel is loaded (the first time it is asked for: 0 for a kernel
    /// the PTX lacks or the driver could not load, whose launch then reports why). The
    /// simulator's limit is the CUDA one.
    pub(crate) fn max_block_threads(&self, kernel: &Kernel) -> u32 {
        match &self.backend {
            Backend::Cuda(d) => d
                .library
                .get(kernel.name)
                .ok()
                .flatten()
                .map_or(0, |f| f.max_threads),
            Backend::Simulator => sim::MAX_THREADS_PER_BLOCK,
        }
    }

    /// How many blocks of `kernel` (one of gpukern's own), with `threads` threads and
    /// `shared_mem_bytes` of dynamic shared memory each, are resident on the whole device at
    /// once: the grid of a persistent launch, which then never waits for a block to finish
    /// before another starts. Asked of the driver once per kernel and block size. In the
    /// simulator, [`SIM_RESIDENT_BLOCKS`].
    ///
    /// Errors: a driver error, or [`Error::TooLarge`] if not one such block fits.
    pub(crate) fn resident_blocks(
        &self,
        op: &'static str,
        kernel: &'static Kernel,
        threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        let Backend::Cuda(d) = &self.backend else {
            return Ok(SIM_RESIDENT_BLOCKS);
        };
        let key = (kernel.name, threads, shared_mem_bytes);
        let cached = d.residency.lock().ok().and_then(|m| m.get(&key).copied());
        let per_sm = match cached {
            Some(n) => n,
            None => {
                let n = loaded(d, op, kernel)?.resident_per_sm(
                    &d.ctx,
                    threads,
                    shared_mem_bytes,
                    "asking the driver how many softmax blocks fit a multiprocessor",
                )?;
                if let Ok(mut m) = d.residency.lock() {
                    m.insert(key, n);
                }
                n
            }
        };
        if per_sm == 0 {
            return Err(Error::TooLarge {
                op,
                detail: format!(
                    "{}: not one block of {threads} threads and {shared_mem_bytes} bytes of shared memory fits a multiprocessor",
                    kernel.name
                ),
            });
        }
        Ok(per_sm * d.multiprocessors)
    }

    /// How many clusters of `blocks` blocks of `kernel` (one of gpukern's own), with `threads`
    /// threads and `shared_mem_bytes` of dynamic shared memory each, run on the device at once:
    /// the most clusters a persistent grid of clusters may have (`cuOccupancyMaxActiveClusters`;
    /// the multiprocessors of a GPC may not split evenly into clusters). In the simulator,
    /// [`SIM_RESIDENT_BLOCKS`] over `blocks`, at least one.
    ///
    /// Errors: a driver error, or [`Error::TooLarge`] if not one such cluster fits.
    pub(crate) fn resident_clusters(
        &self,
        op: &'static str,
        kernel: &'static Kernel,
        threads: u32,
        shared_mem_bytes: u32,
        blocks: u32,
    ) -> Result<u32> {
        let Backend::Cuda(d) = &self.backend else {
            return Ok((SIM_RESIDENT_BLOCKS / blocks.max(1)).max(1));
        };
        let n = loaded(d, op, kernel)?.resident_clusters(
            &d.ctx,
            (threads, shared_mem_bytes, blocks),
            "asking the driver how many clusters of a kernel run at once",
        )?;
        if n == 0 {
            return Err(Error::TooLarge {
                op,
                detail: format!(
                    "{}: not one cluster of {blocks} blocks of {threads} threads and {shared_mem_bytes} bytes of shared memory fits the device",
                    kernel.name
                ),
            });
        }
        Ok(n)
    }
}

/// `kernel` (one of gpukern's own) loaded on `d`, or the error of `op` saying the PTX lacks it.
fn loaded(d: &CudaDevice, op: &'static str, kernel: &'static Kernel) -> Result<Arc<Function>> {
    d.library.get(kernel.name)?.ok_or(Error::InvalidArgument {
        op,
        detail: format!("the PTX has no kernel {}", kernel.name),
    })
}

/// The key of [`CudaDevice::residency`]: a kernel's name, its threads per block and its dynamic
/// shared memory in bytes.
pub(crate) type ResidencyKey = (&'static str, u32, u32);

/// What a failure of the driver while opening device `ordinal` means. Only the driver's "no
/// such device" answers (`CUDA_ERROR_NO_DEVICE`: none visible; `CUDA_ERROR_INVALID_DEVICE`: no
/// device with that ordinal) are [`Error::NoDevice`]; everything else (`CUDA_ERROR_NOT_INITIALIZED`
/// or a version mismatch from a broken install, a context that cannot be created, out of memory)
/// means a GPU is there and failing: [`Error::Driver`].
pub(crate) fn open_error(ordinal: usize, e: DriverError) -> Error {
    use sys::CUresult::*;
    match e.0 {
        // The code's name: `DriverError`'s text asks libcuda, which may be what is missing.
        CUDA_ERROR_NO_DEVICE | CUDA_ERROR_INVALID_DEVICE => Error::NoDevice {
            ordinal,
            reason: format!("{:?}", e.0),
        },
        // A kernel of this process faulted earlier: CUDA stays unusable in this process.
        _ if fault::is_sticky(&e) => Error::KernelFailed {
            kernels: "(one launched earlier in this process)".to_string(),
            during: "opening the CUDA device",
            sticky: true,
            source: e,
        },
        _ => Error::Driver {
            during: OPENING_DEVICE,
            source: e,
        },
    }
}

/// What [`Error::Driver`] says gpukern was doing when opening a device failed.
const OPENING_DEVICE: &str = "opening the CUDA device (a device is present but failing: check \
     `nvidia-smi` and the driver install, or run on the CPU with Gpu::simulator())";

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gpu({})", self.describe())
    }
}

/// Reads the launch limits off the device.
fn read_limits(ctx: &Arc<CudaContext>) -> Result<DeviceLimits> {
    use sys::CUdevice_attribute::*;
    let get = |a| ctx.attribute(a).map(|v| v as u32).during("reading device limits");
    Ok(DeviceLimits {
        max_threads_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dim: [
            get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid_dim: [
            get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_shared_mem_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_mem_per_block_optin: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every driver answer `Gpu::new` can get while opening a device, and whether it means "no
    /// GPU" (fall back, ignore the CUDA tests) rather than "a GPU failing" (report it).
    const ANSWERS: [(sys::CUresult, bool); 10] = {
        use sys::CUresult::*;
        [
            (CUDA_ERROR_NO_DEVICE, true),
            (CUDA_ERROR_INVALID_DEVICE, true),
            (CUDA_ERROR_NOT_INITIALIZED, false),
            (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, false),
            (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, false),
            (CUDA_ERROR_INVALID_CONTEXT, false),
            (CUDA_ERROR_OUT_OF_MEMORY, false),
            (CUDA_ERROR_DEVICE_UNAVAILABLE, false),
            (CUDA_ERROR_ECC_UNCORRECTABLE, false),
            (CUDA_ERROR_UNKNOWN, false),
        ]
    };

    /// The first answer `mapping` classifies wrongly, if any.
    fn misclassified(mapping: impl Fn(usize, DriverError) -> Error) -> Option<String> {
        ANSWERS.iter().find_map(|&(code, no_gpu)| {
            let e = mapping(2, DriverError(code));
            let right = match &e {
                Error::NoDevice { ordinal, .. } => no_gpu && *ordinal == 2,
                Error::Driver { during, .. } => !no_gpu && during.contains("present but failing"),
                // A sticky error (an earlier kernel's fault, or ECC): a GPU that is there.
                Error::KernelFailed { sticky: true, .. } => !no_gpu,
                _ => false,
            };
            // The code, not `e`: a DriverError's text asks libcuda, which may be missing here.
            (!right || e.is_no_gpu() != no_gpu).then(|| format!("{code:?} -> no GPU: {}", e.is_no_gpu()))
        })
    }

    #[test]
    fn only_missing_devices_are_no_device() {
        assert_eq!(misclassified(open_error), None);
    }

    /// The mapping gpukern had (every failure to open a context is `NoDevice`) is caught.
    #[test]
    fn every_failure_as_no_device_is_caught() {
        let old = |ordinal, e: DriverError| Error::NoDevice {
            ordinal,
            reason: format!("{:?}", e.0),
        };
        let caught = misclassified(old);
        assert!(
            caught.as_deref().is_some_and(|m| m.contains("NOT_INITIALIZED")),
            "{caught:?}"
        );
    }
}
