//! Launch configuration and the launch builder: which buffers a kernel may touch, and running
//! its blocks on the CPU's cores.

use core::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::block::{run_cluster, StackPool};
use super::global::GlobalShadow;
use super::print::Output;
use super::release::Locations;
use super::{SimError, Violation, MAX_THREADS_PER_BLOCK};

/// A grid or block extent, or an index in one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dim3 {
    /// Fastest-varying dimension.
    pub x: u32,
    /// Second dimension.
    pub y: u32,
    /// Slowest dimension.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// `x * y * z`, without overflow.
    pub fn count(self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// The index whose linear position (x fastest) in an extent of `self` is `linear`.
    pub fn unflatten(self, linear: u64) -> Dim3 {
        let x = self.x.max(1) as u64;
        let y = self.y.max(1) as u64;
        Dim3::new(
            (linear % x) as u32,
            ((linear / x) % y) as u32,
            (linear / (x * y)) as u32,
        )
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub shared_mem_bytes: u32,
}

/// Where the simulator places the kernel-side address of the first registered buffer.
///
/// Kernels never see a host address: [`Launch::input`] and [`Launch::output`] hand out addresses
/// in a range no host allocation uses (above 2^62), one buffer every [`BUFFER_SPAN`] bytes. A
/// pointer derived from buffer `x` by any offset smaller than half the span therefore stays
/// nearer `x`'s address than any other buffer's, and the simulator names `x` in the report
/// instead of silently accepting an access that happens to land in a neighbouring buffer.
const FAKE_BASE: usize = 1 << 62;

/// Distance between the kernel-side addresses of two registered buffers: 1 TiB.
pub(super) const BUFFER_SPAN: usize = 1 << 40;

/// Low address bits kept from the host address, so that a buffer's alignment (what vector
/// accesses and the kernels' own alignment tests see) is the same as the host buffer's.
const KEPT_ALIGNMENT: usize = 256;

const _: () = assert!(
    usize::BITS == 64,
    "the simulator's address layout needs 64-bit pointers"
);

/// A buffer the kernel may touch.
pub(super) struct Region {
    pub(super) name: &'static str,
    /// The host address of its first byte.
    pub(super) start: usize,
    /// The address the kernel sees for its first byte.
    pub(super) fake_start: usize,
    pub(super) bytes: usize,
    pub(super) elem_size: usize,
    pub(super) writable: bool,
    /// Which thread last wrote (and read) each element during this launch; writable buffers only.
    pub(super) shadow: Option<GlobalShadow>,
}

/// What every block of a launch shares.
pub(super) struct LaunchInfo {
    pub(super) kernel: &'static str,
    pub(super) config: LaunchConfig,
    pub(super) regions: Vec<Region>,
    /// Where `print!` calls also go, when a test asked ([`Launch::capture_output`]).
    pub(super) output: Option<Output>,
    /// Blocks per cluster along each axis (`(1, 1, 1)`: no clusters).
    pub(super) cluster: Dim3,
    /// A cooperative launch ([`Launch::cooperative`]): every block runs at once, and
    /// [`crate::grid::sync`] is allowed.
    pub(super) cooperative: bool,
    /// A programmatic dependent launch ([`Launch::dependent`]): a thread's global-memory access
    /// before its [`crate::dependent::wait`] is reported.
    pub(super) dependent: bool,
    /// The releases published on each global word by device-scope atomics.
    pub(super) locations: Locations,
}

/// Most blocks a cluster may have: 8 is the portable limit, 16 needs the kernel's
/// non-portable-size attribute on an sm_90 GPU; the simulator takes up to 16.
pub const MAX_CLUSTER_BLOCKS: u64 = 16;

/// Most threads (all blocks together) of a cooperative launch in the simulator: every thread of
/// the grid is a coroutine alive at once, with its own stack, on one OS thread.
pub const MAX_COOPERATIVE_THREADS: u64 = 4096;

impl LaunchInfo {
    /// The buffer whose kernel-side address is nearest to `address`, and `address`'s byte offset
    /// from that buffer's start (negative below it); `None` when `address` is farther than half
    /// a [`BUFFER_SPAN`] from every registered buffer.
    pub(super) fn locate(&self, address: usize) -> Option<(&Region, isize)> {
        let slot = address.wrapping_sub(FAKE_BASE).wrapping_add(BUFFER_SPAN / 2) / BUFFER_SPAN;
        let region = self.regions.get(slot.checked_sub(1)?)?;
        Some((region, address.wrapping_sub(region.fake_start) as isize))
    }
}

/// One kernel launch in the simulator: register the buffers, then [`Launch::run`] the kernel.
///
/// ```
/// use gpukern_device::sim::{Dim3, Launch, LaunchConfig};
///
/// mod kernels {
///     use gpukern_device::{kernel, mem, thread};
///
///     /// `c[i] = a[i] + b[i]` for the first `n` elements.
///     #[kernel]
///     pub unsafe fn add(a: *const f32, b: *const f32, c: *mut f32, n: usize) {
///         let i = thread::index_1d();
///         if i < n {
///             unsafe { mem::store(c, i, mem::load(a, i) + mem::load(b, i)) }
///         }
///     }
/// }
///
/// let (a, b) = (vec![1.0f32; 5], vec![2.0f32; 5]);
/// let mut c = vec![0.0f32; 5];
/// let config = LaunchConfig { grid: Dim3::new(1, 1, 1), block: Dim3::new(8, 1, 1), shared_mem_bytes: 0 };
/// let mut launch = Launch::new("add", config);
/// let (pa, pb, pc) = (launch.input("a", &a), launch.input("b", &b), launch.output("c", &mut c));
/// // SAFETY: the buffers hold 5 floats and the closure only launches the kernel.
/// unsafe { launch.run(|| kernels::add(pa, pb, pc, 5)) }.unwrap();
/// assert_eq!(c, vec![3.0; 5]);
/// ```
pub struct Launch<'a> {
    info: LaunchInfo,
    _buffers: PhantomData<&'a mut [u8]>,
}

/// Lets the kernel closure, which captures raw pointers, be shared by the worker threads.
struct SharedBody<F>(F);
// SAFETY: `Launch::run`'s contract: the body may be called from several threads at once.
unsafe impl<F> Sync for SharedBody<F> {}

impl<'a> Launch<'a> {
    /// A launch of `kernel` (the name used in reports) with `config`.
    pub fn new(kernel: &'static str, config: LaunchConfig) -> Self {
        Launch {
            info: LaunchInfo {
                kernel,
                config,
                regions: Vec::new(),
                output: None,
                cluster: Dim3::new(1, 1, 1),
                cooperative: false,
                dependent: false,
                locations: Locations::default(),
            },
            _buffers: PhantomData,
        }
    }

    /// Groups the blocks into clusters of `shape` blocks (`cudaLaunchKernelEx` with a cluster
    /// dimension): each cluster's blocks run together, synchronised by the cluster barrier
    /// ([`crate::cluster`]), each able to reach the others' shared memory. The grid must divide
    /// into clusters, of at most [`MAX_CLUSTER_BLOCKS`] blocks (checked when the launch runs).
    pub fn cluster(&mut self, shape: Dim3) {
        self.info.cluster = shape;
    }

    /// Makes the launch cooperative (`cuLaunchKernelEx` with `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`):
    /// every block of the grid runs at once, its threads scheduled as one group, so that the
    /// grid-wide barrier [`crate::grid::sync`] really synchronises them all (a launch that is not
    /// cooperative and calls it is reported). Global-memory accesses of different blocks separated
    /// by a grid barrier are ordered; without one they race, as always. The grid may have at most
    /// [`MAX_COOPERATIVE_THREADS`] threads, and no clusters (checked when the launch runs).
    pub fn cooperative(&mut self) {
        self.info.cooperative = true;
    }

    /// Makes the launch a programmatic dependent launch (`cuLaunchKernelEx` with
    /// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`), whose blocks on a GPU may start
    /// before the kernel before it has finished. The simulator runs launches one after another,
    /// so nothing can go wrong here that would on the GPU: instead it reports a thread that reads
    /// or writes a global buffer of the launch before it has called [`crate::dependent::wait`]
    /// (on the GPU that access may see the previous kernel's writes half done). A kernel whose
    /// work before the wait touches only buffers the previous kernel does not write is still
    /// reported: call `wait` first.
    pub fn dependent(&mut self) {
        self.info.dependent = true;
    }

    /// Registers `data` as a read-only buffer named `name`; returns the pointer to pass to the
    /// kernel.
    ///
    /// The pointer is the buffer's address in the simulated device's memory, not `data`'s host
    /// address: only the kernel's accesses through [`crate::mem`] (and the helpers built on
    /// it) may use it, never a plain dereference.
    pub fn input<T>(&mut self, name: &'static str, data: &'a [T]) -> *const T {
        let fake = self.register(
            name,
            data.as_ptr() as usize,
            std::mem::size_of_val(data),
            size_of::<T>(),
            false,
        );
        std::ptr::without_provenance(fake)
    }

    /// Registers `data` as a writable buffer named `name`; returns the pointer to pass to the
    /// kernel (a simulated device address, as for [`Launch::input`]).
    pub fn output<T>(&mut self, name: &'static str, data: &'a mut [T]) -> *mut T {
        let fake = self.register(
            name,
            data.as_ptr() as usize,
            std::mem::size_of_val(data),
            size_of::<T>(),
            true,
        );
        std::ptr::without_provenance_mut(fake)
    }

    /// Captures the text of the launch's `print!` calls (which still go to stdout as well): read
    /// it from the returned handle after [`Launch::run`]. Calling it again returns the same one.
    pub fn capture_output(&mut self) -> Output {
        self.info.output.get_or_insert_with(Output::default).clone()
    }

    /// Adds a buffer; returns the address the kernel sees for its start.
    fn register(
        &mut self,
        name: &'static str,
        start: usize,
        bytes: usize,
        elem_size: usize,
        writable: bool,
    ) -> usize {
        let slot = self.info.regions.len() + 1;
        let fake_start = FAKE_BASE + slot * BUFFER_SPAN + start % KEPT_ALIGNMENT;
        self.info.regions.push(Region {
            name,
            start,
            fake_start,
            bytes,
            elem_size,
            writable,
            shadow: writable.then(|| GlobalShadow::new(bytes, elem_size)),
        });
        fake_start
    }

    /// Runs the grid: `body` is called once per simulated thread, and must launch the kernel
    /// with the pointers returned by [`Launch::input`] and [`Launch::output`].
    ///
    /// Blocks run on up to `GPUKERN_SIM_THREADS` OS threads (default: all cores). The first
    /// violation stops the launch; with several, the one in the lowest block is returned.
    ///
    /// # Safety
    /// `body` is called concurrently from several OS threads; it must only call a kernel with
    /// pointers registered on this launch (the kernel's own safety contract applies).
    pub unsafe fn run(self, body: impl Fn()) -> Result<(), SimError> {
        let mut info = self.info;
        validate(&info)?;
        if info.cooperative {
            for shadow in info.regions.iter_mut().filter_map(|r| r.shadow.as_mut()) {
                shadow.order_by_grid_barriers();
            }
        }
        // A cooperative launch is one group of every block; otherwise one group per cluster.
        let clusters = match info.cooperative {
            true => 1,
            false => info.config.grid.count() / info.cluster.count().max(1),
        };
        let workers = worker_count().min(clusters).max(1) as usize;
        let body = SharedBody(body);
        let next = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let errors = Mutex::new(Vec::<(u64, SimError)>::new());

        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    let mut stacks = StackPool::default();
                    let body = &body;
                    // `stop` is read before taking a block, never after: a taken block always
                    // runs, so every block below a failing one runs and the lowest error wins.
                    while !stop.load(Ordering::Relaxed) {
                        let c = next.fetch_add(1, Ordering::Relaxed);
                        if c >= clusters {
                            break;
                        }
                        let blocks = match info.cooperative {
                            true => (0..info.config.grid.count()).collect(),
                            false => cluster_blocks(&info, c),
                        };
                        let b = blocks[0];
                        if let Err(e) = run_cluster(&info, &blocks, &mut stacks, &|| (body.0)()) {
                            stop.store(true, Ordering::Relaxed);
                            errors.lock().unwrap_or_else(|p| p.into_inner()).push((b, e));
                        }
                    }
                });
            }
        });

        let mut errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
        errors.sort_by_key(|(b, _)| *b);
        match errors.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }
}

/// OS threads that run blocks: `GPUKERN_SIM_THREADS`, or the number of cores.
fn worker_count() -> u64 {
    std::env::var("GPUKERN_SIM_THREADS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64))
}

/// The linear indices of the blocks of cluster `c` (clusters numbered x fastest), by rank (x
/// fastest within the cluster).
fn cluster_blocks(info: &LaunchInfo, c: u64) -> Vec<u64> {
    let (grid, shape) = (info.config.grid, info.cluster);
    let clusters = Dim3::new(grid.x / shape.x, grid.y / shape.y, grid.z / shape.z);
    let at = clusters.unflatten(c);
    (0..shape.count())
        .map(|rank| {
            let r = shape.unflatten(rank);
            let (x, y, z) = (
                (at.x * shape.x + r.x) as u64,
                (at.y * shape.y + r.y) as u64,
                (at.z * shape.z + r.z) as u64,
            );
            x + grid.x as u64 * (y + grid.y as u64 * z)
        })
        .collect()
}

/// Refuses a configuration no GPU would run.
fn validate(info: &LaunchInfo) -> Result<(), SimError> {
    let LaunchConfig { grid, block, .. } = info.config;
    let cluster = info.cluster;
    let divides = cluster.x > 0
        && cluster.y > 0
        && cluster.z > 0
        && grid.x % cluster.x.max(1) == 0
        && grid.y % cluster.y.max(1) == 0
        && grid.z % cluster.z.max(1) == 0;
    let reason = if !divides {
        Some(format!("grid {grid} does not divide into clusters of {cluster}"))
    } else if cluster.count() > MAX_CLUSTER_BLOCKS {
        Some(format!(
            "clusters of {cluster}: {} blocks, more than {MAX_CLUSTER_BLOCKS}",
            cluster.count()
        ))
    } else if info.cooperative && cluster.count() > 1 {
        Some(format!(
            "a cooperative launch in clusters of {cluster}: the simulator runs cooperative grids \
             without clusters"
        ))
    } else if info.cooperative && grid.count() * block.count() > MAX_COOPERATIVE_THREADS {
        Some(format!(
            "a cooperative grid {grid} of blocks {block}: {} threads, more than the simulator's \
             {MAX_COOPERATIVE_THREADS}",
            grid.count() * block.count()
        ))
    } else if grid.count() == 0 {
        Some(format!("grid {grid} has no blocks"))
    } else if block.count() == 0 {
        Some(format!("block {block} has no threads"))
    } else if block.count() > MAX_THREADS_PER_BLOCK as u64 {
        Some(format!(
            "block {block} has {} threads, more than {MAX_THREADS_PER_BLOCK}",
            block.count()
        ))
    } else {
        None
    };
    match reason {
        Some(reason) => Err(SimError {
            kernel: info.kernel.to_string(),
            block: Dim3::default(),
            thread: Dim3::default(),
            violation: Violation::InvalidLaunch { reason },
        }),
        None => Ok(()),
    }
}
