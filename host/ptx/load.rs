//! Which PTX module a device loads, and loading it: a kernel crate's embedded PTX modules
//! ([`PtxSet`], one [`PtxModule`] per architecture), the one chosen for a device's compute
//! capability, and its entry points with the attributes their launches are checked against.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, sys};
use cudarc::nvrtc::Ptx;

use super::split::Split;
use crate::error::{DriverContext, Error, Result};
use crate::launch_config::DeviceLimits;

/// One kernel crate's PTX, one module per architecture, as `gpukern-build` embeds it
/// ([`crate::include_ptx!`]).
#[derive(Clone, Copy, Debug)]
pub struct PtxSet {
    /// The kernel crate's name as rustc knows it (`my_kernels`).
    pub krate: &'static str,
    /// The modules, oldest architecture first.
    pub modules: &'static [PtxModule],
}

/// One embedded PTX module.
#[derive(Clone, Copy, Debug)]
pub struct PtxModule {
    /// Target architecture, e.g. `"sm_90"`.
    pub arch: &'static str,
    /// Compute capability the module was built for, `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// The PTX text.
    pub ptx: &'static str,
}

impl PtxSet {
    /// A set with no PTX, for kernels that only ever run in the simulator (a test's planted
    /// kernels): `Gpu::simulator().load(&PtxSet::simulator_only(env!("CARGO_CRATE_NAME")))`. On
    /// a CUDA device loading it is [`Error::UnsupportedDevice`].
    pub const fn simulator_only(krate: &'static str) -> PtxSet {
        PtxSet { krate, modules: &[] }
    }

    /// The newest module that runs on a device of compute capability `cc`: the driver compiles
    /// PTX forward to any newer GPU, never back. An arch-specific module (`sm_90a`) runs only on
    /// a GPU of exactly its compute capability, and there it is preferred to the plain one of the
    /// same capability: built from the same sources, it has every entry point of that one plus
    /// those compiled for it alone (`#[cfg(target_feature = "sm_90a")]`).
    pub fn select(&self, cc: (i32, i32)) -> Option<&'static PtxModule> {
        self.modules
            .iter()
            .filter(|m| match m.is_arch_specific() {
                true => m.compute_capability == cc,
                false => m.compute_capability <= cc,
            })
            .max_by_key(|m| (m.compute_capability, m.is_arch_specific()))
    }
}

impl PtxModule {
    /// Whether the module is for an arch-specific target (`sm_90a`), which runs on exactly its
    /// compute capability and no other.
    pub fn is_arch_specific(&self) -> bool {
        self.arch.ends_with('a')
    }
}

/// The entry points of a PTX text, in order (`.entry name(`).
pub fn entry_names(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|line| {
            let rest = line
                .trim_start()
                .strip_prefix(".visible ")
                .unwrap_or(line.trim_start());
            let rest = rest.strip_prefix(".entry ")?;
            Some(rest.split('(').next().unwrap_or(rest).trim())
        })
        .collect()
}

/// A crate's PTX module split by entry point: the small module each entry is loaded as (its
/// own text, and every function and variable it reaches), as a `Gpu` hands it to the driver the
/// first time it launches the entry.
pub struct EntryModules<'a>(Split<'a>);

impl<'a> EntryModules<'a> {
    /// Splits `ptx` (one architecture's module, [`PtxModule::ptx`]).
    pub fn new(ptx: &'a str) -> EntryModules<'a> {
        EntryModules(Split::new(ptx))
    }

    /// The module of the entry point `entry` alone; `None` if `ptx` has no such entry.
    pub fn module_of(&self, entry: &str) -> Option<String> {
        self.0.module_of(entry)
    }
}

/// A loaded entry point and what its launches are checked against.
pub(crate) struct Function {
    pub(crate) func: CudaFunction,
    /// The module the entry was loaded in (its own: see [`Functions`]), alive while it is.
    _module: Arc<CudaModule>,
    /// The most threads a block may have: the device limit, lowered by the driver when the
    /// kernel's registers do not fit the register file at that many.
    pub(crate) max_threads: u32,
    /// Bytes of static shared memory the kernel declares (counted against the block's limit).
    pub(crate) static_shared: u32,
    /// Dynamic shared memory the kernel has been opted in to so far.
    opted_in: AtomicU32,
    /// Held while the limit is raised ([`Function::opt_in`]), so that raises do not interleave.
    opting: Mutex<()>,
    /// Blocks resident per multiprocessor by (threads, dynamic shared bytes), as the driver
    /// answered ([`Function::resident_per_sm`]): a cooperative launch checks its grid against it
    /// on every launch, which then asks the driver once per block shape.
    resident: Mutex<HashMap<(u32, u32), u32>>,
    /// Clusters resident on the device at once by (threads, dynamic shared bytes, blocks per
    /// cluster), as the driver answered ([`Function::resident_clusters`]).
    clusters: Mutex<HashMap<(u32, u32, u32), u32>>,
}

/// The entry points of one kernel crate's PTX module on one device, each loaded the first time
/// it is asked for: its own small module cut out of the whole (`split`), which the driver
/// JIT-compiles then. Choosing the module and listing its entries asks nothing of the driver, so
/// making a `Gpu` compiles no kernel, and a program pays for the kernels it launches.
pub(crate) struct Functions {
    ctx: Arc<CudaContext>,
    /// The dynamic shared memory every kernel may use without opting in.
    default_shared: u32,
    /// The chosen module's PTX and architecture.
    ptx: &'static str,
    pub(crate) arch: &'static str,
    /// Its entry points, sorted.
    entries: Vec<&'static str>,
    /// The module's items, split when the first kernel is loaded.
    split: OnceLock<Split<'static>>,
    /// The entries loaded so far.
    loaded: Mutex<HashMap<&'static str, Arc<Function>>>,
}

impl Functions {
    /// The module of `set` for a device of compute capability `cc` with `limits`; nothing is
    /// loaded yet. A set without modules gives no entries.
    ///
    /// Errors: [`Error::UnsupportedDevice`] if every module is for a newer GPU.
    pub(crate) fn select(
        ctx: &Arc<CudaContext>,
        cc: (i32, i32),
        limits: &DeviceLimits,
        set: &PtxSet,
    ) -> Result<Functions> {
        if set.modules.is_empty() {
            // A crate built without its PTX (gpukern without its `library` feature): nothing to
            // choose, and every entry is missing (the launch says why).
            return Ok(Functions {
                ctx: ctx.clone(),
                default_shared: limits.max_shared_mem_per_block,
                ptx: "",
                arch: "none",
                entries: Vec::new(),
                split: OnceLock::new(),
                loaded: Mutex::new(HashMap::new()),
            });
        }
        let module = set.select(cc).ok_or_else(|| Error::UnsupportedDevice {
            major: cc.0,
            minor: cc.1,
            built: set.modules.iter().map(|m| m.arch).collect::<Vec<_>>().join(", "),
        })?;
        let mut entries = entry_names(module.ptx);
        entries.sort_unstable();
        Ok(Functions {
            ctx: ctx.clone(),
            default_shared: limits.max_shared_mem_per_block,
            ptx: module.ptx,
            arch: module.arch,
            entries,
            split: OnceLock::new(),
            loaded: Mutex::new(HashMap::new()),
        })
    }

    /// The entry points of the module, sorted.
    pub(crate) fn names(&self) -> &[&'static str] {
        &self.entries
    }

    /// The entry point `name`, loaded (JIT-compiled by the driver) on first use; `None` if the
    /// module has no such entry.
    ///
    /// Errors: a driver error loading it.
    pub(crate) fn get(&self, name: &str) -> Result<Option<Arc<Function>>> {
        let Ok(at) = self.entries.binary_search(&name) else {
            return Ok(None);
        };
        let name = self.entries[at];
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = loaded.get(name) {
            return Ok(Some(f.clone()));
        }
        let split = self.split.get_or_init(|| Split::new(self.ptx));
        let text = split.module_of(name).ok_or_else(|| Error::InvalidArgument {
            op: "loading a kernel",
            detail: format!("the PTX lists the entry `{name}` but has no body for it"),
        })?;
        // On a thread of its own: a `Gpu::capture` records this thread's stream in thread-local
        // mode, where the driver may refuse calls that are no stream work (a module load) from
        // the capturing thread; a kernel first launched inside a capture loads like any other.
        let function =
            std::thread::scope(|s| s.spawn(|| self.load(name, text)).join()).unwrap_or_else(|_| {
                Err(Error::InvalidArgument {
                    op: "loading a kernel",
                    detail: format!("the thread loading `{name}` panicked"),
                })
            })?;
        let function = Arc::new(function);
        loaded.insert(name, function.clone());
        Ok(Some(function))
    }

    /// Loads the module `text` holding the entry `name`, and the entry with its attributes.
    fn load(&self, name: &str, text: String) -> Result<Function> {
        use sys::CUfunction_attribute::*;
        let module = self
            .ctx
            .load_module(Ptx::from_src(text))
            .during("loading a kernel's PTX module")?;
        let func = module.load_function(name).during("loading a kernel")?;
        let attribute = |a| {
            func.get_attribute(a)
                .map(|v| v.max(0) as u32)
                .during("reading a kernel's attributes")
        };
        let max_threads = attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
        let static_shared = attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        Ok(Function {
            func,
            _module: module,
            max_threads,
            static_shared,
            opted_in: AtomicU32::new(self.default_shared),
            opting: Mutex::new(()),
            resident: Mutex::new(HashMap::new()),
            clusters: Mutex::new(HashMap::new()),
        })
    }
}

impl Function {
    /// Lets the kernel launch with `shared` bytes of dynamic shared memory: above the 48 KiB
    /// every kernel may use, the kernel must opt in (once per larger size). `shared` is within
    /// the device's opt-in limit (checked by the caller).
    pub(crate) fn opt_in(&self, shared: u32) -> Result<()> {
        if shared <= self.opted_in.load(Ordering::Acquire) {
            return Ok(());
        }
        // One opt-in at a time: two threads raising the limit at once could otherwise leave the
        // driver's attribute at the smaller size while `opted_in` records the larger (seen on the
        // H200: parallel trials launching one kernel with different sizes, the larger launch
        // refused with CUDA_ERROR_INVALID_VALUE).
        let _one = self
            .opting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if shared <= self.opted_in.load(Ordering::Acquire) {
            return Ok(());
        }
        use sys::CUfunction_attribute::*;
        self.func
            .set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared as i32)
            .during("opting a kernel in to more shared memory")?;
        // The largest carveout, so that as many blocks of this size as possible fit an SM.
        self.func
            .set_attribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100)
            .during("opting a kernel in to more shared memory")?;
        self.opted_in.store(shared, Ordering::Release);
        Ok(())
    }

    /// Blocks of `threads` threads and `shared` bytes of dynamic shared memory that fit one
    /// multiprocessor at once (the driver's occupancy query, after opting the kernel in to
    /// `shared`, so that the count is one the kernel may launch with). The query needs the
    /// context current on this thread, which a query made before any allocation or launch on the
    /// thread would not find: `ctx` is made current first. `during` names the caller's purpose in
    /// a driver error. Asked once per block shape, then answered from memory.
    pub(crate) fn resident_per_sm(
        &self,
        ctx: &CudaContext,
        threads: u32,
        shared: u32,
        during: &'static str,
    ) -> Result<u32> {
        let known = |m: &HashMap<(u32, u32), u32>| m.get(&(threads, shared)).copied();
        if let Some(n) = self.resident.lock().ok().as_deref().and_then(known) {
            return Ok(n);
        }
        ctx.bind_to_thread()
            .during("making the device's context current")?;
        self.opt_in(shared)?;
        let n = self
            .func
            .occupancy_max_active_blocks_per_multiprocessor(threads, shared as usize, None)
            .during(during)?;
        if let Ok(mut m) = self.resident.lock() {
            m.insert((threads, shared), n);
        }
        Ok(n)
    }

    /// Clusters of `blocks` blocks (along x) of `threads` threads and `shared` bytes of dynamic
    /// shared memory each that the device runs at once (`cuOccupancyMaxActiveClusters`, after
    /// opting the kernel in to `shared`): what a persistent grid of clusters may hold, as the
    /// GPCs' multiprocessors group into clusters unevenly. `ctx` is made current first; asked
    /// once per shape, then answered from memory.
    pub(crate) fn resident_clusters(
        &self,
        ctx: &CudaContext,
        (threads, shared, blocks): (u32, u32, u32),
        during: &'static str,
    ) -> Result<u32> {
        let key = (threads, shared, blocks);
        if let Some(n) = self.clusters.lock().ok().and_then(|m| m.get(&key).copied()) {
            return Ok(n);
        }
        ctx.bind_to_thread()
            .during("making the device's context current")?;
        self.opt_in(shared)?;
        // SAFETY: an all-zero attribute is a valid value of the plain-data union, then set.
        let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attribute.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
            x: blocks,
            y: 1,
            z: 1,
        };
        let config = sys::CUlaunchConfig {
            gridDimX: blocks,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: threads,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: shared,
            hStream: std::ptr::null_mut(),
            attrs: &mut attribute,
            numAttrs: 1,
        };
        let mut n: std::ffi::c_int = 0;
        // SAFETY: `n` and `config` (and the attribute it points to) live through the call; the
        // function is loaded in the current context.
        unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, self.func.cu_function(), &config) }
            .result()
            .during(during)?;
        let n = n.max(0) as u32;
        if let Ok(mut m) = self.clusters.lock() {
            m.insert(key, n);
        }
        Ok(n)
    }
}
