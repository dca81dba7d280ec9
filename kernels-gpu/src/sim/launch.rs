//! Launch configuration and the launch builder: which buffers a kernel may touch, and running
//! its blocks on the CPU's cores.

use core::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::block::{run_block, StackPool};
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

/// A buffer the kernel may touch.
#[derive(Clone, Debug)]
pub(super) struct Region {
    pub(super) name: &'static str,
    pub(super) start: usize,
    pub(super) bytes: usize,
    pub(super) elem_size: usize,
    pub(super) writable: bool,
}

/// What every block of a launch shares.
pub(super) struct LaunchInfo {
    pub(super) kernel: &'static str,
    pub(super) config: LaunchConfig,
    pub(super) regions: Vec<Region>,
}

/// One kernel launch in the simulator: register the buffers, then [`Launch::run`] the kernel.
///
/// ```
/// use kernels_gpu::sim::{Dim3, Launch, LaunchConfig};
/// let (a, b) = (vec![1.0f32; 5], vec![2.0f32; 5]);
/// let mut c = vec![0.0f32; 5];
/// let config = LaunchConfig { grid: Dim3::new(1, 1, 1), block: Dim3::new(8, 1, 1), shared_mem_bytes: 0 };
/// let mut launch = Launch::new("add", config);
/// let (pa, pb, pc) = (launch.input("a", &a), launch.input("b", &b), launch.output("c", &mut c));
/// // SAFETY: the buffers hold 5 floats and the closure only launches the kernel.
/// unsafe { launch.run(|| kernels_gpu::add::add(pa, pb, pc, 5)) }.unwrap();
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
            },
            _buffers: PhantomData,
        }
    }

    /// Registers `data` as a read-only buffer named `name`; returns the pointer to pass to the kernel.
    pub fn input<T>(&mut self, name: &'static str, data: &'a [T]) -> *const T {
        self.register(
            name,
            data.as_ptr() as usize,
            std::mem::size_of_val(data),
            size_of::<T>(),
            false,
        );
        data.as_ptr()
    }

    /// Registers `data` as a writable buffer named `name`; returns the pointer to pass to the kernel.
    pub fn output<T>(&mut self, name: &'static str, data: &'a mut [T]) -> *mut T {
        self.register(
            name,
            data.as_ptr() as usize,
            std::mem::size_of_val(data),
            size_of::<T>(),
            true,
        );
        data.as_mut_ptr()
    }

    fn register(&mut self, name: &'static str, start: usize, bytes: usize, elem_size: usize, writable: bool) {
        self.info.regions.push(Region {
            name,
            start,
            bytes,
            elem_size,
            writable,
        });
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
        let info = self.info;
        validate(&info)?;
        let blocks = info.config.grid.count();
        let workers = worker_count().min(blocks).max(1) as usize;
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
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        if b >= blocks {
                            break;
                        }
                        let block_idx = info.config.grid.unflatten(b);
                        if let Err(e) = run_block(&info, block_idx, &mut stacks, &|| (body.0)()) {
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

/// Refuses a configuration no GPU would run.
fn validate(info: &LaunchInfo) -> Result<(), SimError> {
    let LaunchConfig { grid, block, .. } = info.config;
    let reason = if grid.count() == 0 {
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
