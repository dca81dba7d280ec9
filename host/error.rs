//! gpukern's one error type.

use cudarc::driver::DriverError;
use gpukern_device::sim::SimError;

/// Everything that can go wrong in gpukern. Each message says what to do about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The NVIDIA driver library (`libcuda.so`) could not be loaded.
    #[error(
        "no CUDA driver: libcuda could not be loaded. Install the NVIDIA driver (and check \
         LD_LIBRARY_PATH), or run on the CPU with Gpu::simulator() / GPUKERN_DEVICE=sim"
    )]
    NoDriver,
    /// The driver loaded, but has no device with that ordinal (or none at all). A device that is
    /// there but fails is [`Error::Driver`] instead.
    #[error(
        "no CUDA device {ordinal}: {reason}. Check `nvidia-smi`, or run on the CPU with Gpu::simulator()"
    )]
    NoDevice {
        /// The ordinal that was asked for.
        ordinal: usize,
        /// What the driver said.
        reason: String,
    },
    /// The device is older than every PTX module gpukern was built with.
    #[error(
        "the device has compute capability {major}.{minor}, older than the PTX gpukern was built \
         for ({built}); rebuild with GPUKERN_PTX_ARCHS=sm_{major}{minor}"
    )]
    UnsupportedDevice {
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
        /// The architectures that were built.
        built: String,
    },
    /// Operand shapes do not fit together.
    #[error("shape mismatch in {op}: {lhs:?} and {rhs:?} ({rule})")]
    ShapeMismatch {
        /// The operation.
        op: &'static str,
        /// Shape of the first operand.
        lhs: Vec<usize>,
        /// Shape of the second operand.
        rhs: Vec<usize>,
        /// What the shapes must satisfy.
        rule: &'static str,
    },
    /// The problem does not fit one launch on this device (grid, block or shared-memory limits),
    /// or a buffer it needs (an input, or a result such as matmul's `m x n`) would have more
    /// elements than [`crate::buffer::MAX_ELEMENTS`]: a byte size past `isize::MAX`, which no
    /// host `Vec<f32>` could hold. Checked before anything is allocated.
    #[error("{op} is too large for the device: {detail}")]
    TooLarge {
        /// The operation.
        op: &'static str,
        /// Which limit, and by how much.
        detail: String,
    },
    /// The device ran out of memory.
    #[error("out of device memory allocating {bytes} bytes: free device buffers or use smaller inputs")]
    OutOfMemory {
        /// The allocation that failed.
        bytes: usize,
    },
    /// An argument is outside what the operation accepts.
    #[error("invalid argument to {op}: {detail}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A buffer was used with a `Gpu` other than the one that made it.
    #[error("a buffer of {op} belongs to another device: upload it with the Gpu you compute on")]
    WrongDevice {
        /// The operation.
        op: &'static str,
    },
    /// The CUDA driver returned an error, e.g. a device present but failing (a broken driver
    /// install, a context that cannot be created) or a failed launch.
    #[error("CUDA driver error while {during}: {source}")]
    Driver {
        /// What gpukern was doing.
        during: &'static str,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// A kernel failed: the driver refused its launch, or it faulted on the device (a device
    /// assertion, a trap, an illegal address...). A fault surfaces at the next synchronisation
    /// ([`crate::Gpu::synchronize`], a download), so `kernels` names every kernel launched on the
    /// device since the last one. After a fault (`sticky`) CUDA is unusable for the rest of the
    /// process, as CUDA documents for these errors ("to continue using CUDA, the process must be
    /// terminated and relaunched"): every later call fails the same way, `Gpu::new` included;
    /// the simulator still works.
    #[error(
        "kernel {kernels} failed ({during}): {source}{}",
        if *sticky {
            ". CUDA cannot be used again in this process (a sticky error: every later CUDA call \
             fails the same way, and a new Gpu too); restart the process to use the GPU, and run \
             the kernel in the simulator (Gpu::simulator(), which still works here) to find the bug"
        } else {
            ""
        }
    )]
    KernelFailed {
        /// The kernel, or the kernels launched since the last synchronisation.
        kernels: String,
        /// What gpukern was doing when the driver said so.
        during: &'static str,
        /// Whether the context is unusable from now on.
        sticky: bool,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// Something a CUDA graph cannot hold was asked for inside [`crate::Gpu::capture`] (an
    /// allocation, a host copy, a synchronisation), the driver refused the capture, or a graph's
    /// buffers were replaced since it was captured (see [`crate::graph`]).
    #[error("{op}: {detail}")]
    Capture {
        /// The operation refused.
        op: &'static str,
        /// What was refused and what to do instead.
        detail: String,
    },
    /// NCCL (`libnccl.so`) could not be loaded, so there is no all-reduce across GPUs.
    #[error(
        "no NCCL: libnccl could not be loaded (cudarc looks for libnccl.so, libnccl.so.12, ...: \
         put a folder with libnccl.so on LD_LIBRARY_PATH, e.g. a link to the libnccl.so.2 of \
         PyTorch's nvidia/nccl/lib; scripts/nccl-path.sh prints one)"
    )]
    NoNccl,
    /// Processes of a distributed job did not come together, or one of them was lost: a rank
    /// that never arrived at the rendezvous, a collective that did not finish within the timeout
    /// (see [`crate::dist`]).
    #[error("distributed job, {during}: {detail}")]
    Dist {
        /// What gpukern was doing.
        during: &'static str,
        /// What went wrong, and where.
        detail: String,
    },
    /// NCCL returned an error.
    #[error("NCCL error while {during}: {code}")]
    Nccl {
        /// What gpukern was doing.
        during: &'static str,
        /// NCCL's result code.
        code: String,
    },
    /// The CPU simulator caught a kernel breaking a rule (a bug in the kernel, never in the input).
    #[error("simulator: {0}")]
    Simulator(#[from] SimError),
}

impl Error {
    /// Whether this says there is no GPU to use ([`Error::NoDriver`], [`Error::NoDevice`]), as
    /// opposed to a GPU that is there but failing ([`Error::Driver`] and the rest). Only these
    /// make [`crate::Gpu::global`] fall back to the simulator, and only these make the CUDA tests
    /// "ignored" rather than failed.
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, Error::NoDriver | Error::NoDevice { .. })
    }
}

/// `Result` with gpukern's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches what gpukern was doing to a driver error.
pub(crate) trait DriverContext<T> {
    fn during(self, during: &'static str) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn during(self, during: &'static str) -> Result<T> {
        self.map_err(|source| Error::Driver { during, source })
    }
}

/// Errors unless `lhs == rhs`: [`Error::ShapeMismatch`] naming `op` and the `rule` they break.
pub(crate) fn same_shape(op: &'static str, lhs: &[usize], rhs: &[usize], rule: &'static str) -> Result<()> {
    if lhs == rhs {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op,
            lhs: lhs.to_vec(),
            rhs: rhs.to_vec(),
            rule,
        })
    }
}
