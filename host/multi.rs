//! Several GPUs in one process: every device as a [`Gpu`] ([`gpus`]), copies between devices
//! ([`DeviceVec::copy_to`]), and a sum all-reduce through NCCL over a [`GpuGroup`].
//!
//! ```no_run
//! # fn main() -> gpukern::Result<()> {
//! let group = gpukern::GpuGroup::all()?;
//! // One vector per GPU, each on its own device.
//! let mut parts = group
//!     .gpus()
//!     .iter()
//!     .map(|gpu| gpu.upload(&[1.0f32; 1024]))
//!     .collect::<gpukern::Result<Vec<_>>>()?;
//! group.all_reduce_sum(&mut parts)?; // every vector now holds the sum: n_gpus everywhere
//! # Ok(()) }
//! ```
//!
//! NCCL is loaded at run time, like the driver: cudarc looks for `libnccl.so` (and
//! `libnccl.so.12`, ...) on the library path, never `libnccl.so.2`, the name NCCL ships under
//! (PyTorch's wheel: `site-packages/nvidia/nccl/lib/libnccl.so.2`). `scripts/nccl-path.sh`
//! makes a `libnccl.so` link to it and prints the folder to put on `LD_LIBRARY_PATH`. Without
//! it an all-reduce over two or more GPUs is [`Error::NoNccl`]; nothing else needs it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaStream, sys};
use cudarc::nccl::safe::{Comm, ReduceOp};

use crate::buffer::{DeviceVec, Element, Storage, checked_len_of};
use crate::device::{Backend, Gpu};
use crate::error::{DriverContext, Error, Result};

/// Every CUDA device of this machine as a [`Gpu`], ordinal 0 first.
///
/// Errors: those of [`Gpu::new`] ([`Error::NoDriver`], [`Error::NoDevice`] when there is none).
pub fn gpus() -> Result<Vec<Gpu>> {
    Gpu::all()
}

/// Whether the NCCL library can be loaded (what an all-reduce over two or more CUDA devices
/// needs; see the [module documentation](self)).
pub fn nccl_available() -> bool {
    // SAFETY: only probes whether the library can be loaded.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

impl Gpu {
    /// Every CUDA device of this machine as a [`Gpu`] (see [`gpus`]).
    pub fn all() -> Result<Vec<Gpu>> {
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        let count = CudaContext::device_count().map_err(|e| crate::device::open_error(0, e))?;
        if count <= 0 {
            return Err(Error::NoDevice {
                ordinal: 0,
                reason: "the driver sees no device".into(),
            });
        }
        (0..count as usize).map(Gpu::new).collect()
    }

    /// The device's ordinal (`None` for the simulator).
    pub fn ordinal(&self) -> Option<usize> {
        match &self.backend {
            Backend::Cuda(d) => Some(d.ctx.ordinal()),
            Backend::Simulator => None,
        }
    }
}

impl<T: Element> DeviceVec<T> {
    /// Copies the vector to a new vector on `gpu` (another device, or the same one).
    ///
    /// Between two CUDA devices the copy is one `cuMemcpyPeerAsync`: direct over NVLink or PCIe
    /// where the devices can access each other's memory (switched on once per pair), staged
    /// through host memory by the driver where they cannot. It is queued in order with the work
    /// of both devices' streams: after what was queued on this vector's `Gpu`, before what is
    /// queued on either afterwards. Between the simulator and a CUDA device, through the host.
    ///
    /// Errors: [`Error::OutOfMemory`]; a driver error; [`Error::Capture`] inside a capture (an
    /// allocation).
    pub fn copy_to(&self, gpu: &Gpu) -> Result<DeviceVec<T>> {
        checked_len_of::<T>("copy_to", &[self.len])?;
        crate::capture::refuse(gpu, "copy_to", "an allocation (copy_to)")?;
        match (&self.storage, &gpu.backend) {
            (Storage::Cuda(src), Backend::Cuda(dst_device)) => {
                let mut dst = dst_device.alloc::<T>(self.len)?;
                if self.len > 0 {
                    peer_copy(
                        src.stream(),
                        &dst_device.stream,
                        self.len * size_of::<T>(),
                        |s, d| {
                            use cudarc::driver::{DevicePtr, DevicePtrMut};
                            (src.device_ptr(s).0, dst.device_ptr_mut(d).0)
                        },
                    )?;
                }
                Ok(DeviceVec {
                    storage: Storage::Cuda(dst),
                    len: self.len,
                })
            }
            (Storage::Host(v), Backend::Simulator) => Ok(DeviceVec {
                storage: Storage::Host(v.clone()),
                len: self.len,
            }),
            _ => gpu.upload(&self.to_vec()?),
        }
    }
}

/// Queues a copy of `bytes` from `src_stream`'s device to `dst_stream`'s on `dst_stream`,
/// ordered after the work queued on `src_stream` so far, and before what either queues next.
/// `pointers` gives (source, destination) device addresses.
fn peer_copy(
    src_stream: &Arc<CudaStream>,
    dst_stream: &Arc<CudaStream>,
    bytes: usize,
    pointers: impl FnOnce(&Arc<CudaStream>, &Arc<CudaStream>) -> (sys::CUdeviceptr, sys::CUdeviceptr),
) -> Result<()> {
    const DURING: &str = "copying between devices";
    let (src_ctx, dst_ctx) = (src_stream.context(), dst_stream.context());
    enable_peer_access(src_ctx, dst_ctx);
    // The copy waits for the source's writers...
    let ready = src_stream.record_event(None).during(DURING)?;
    dst_stream.wait(&ready).during(DURING)?;
    let (src, dst) = pointers(src_stream, dst_stream);
    dst_ctx.bind_to_thread().during(DURING)?;
    // SAFETY: `src` and `dst` are live allocations of at least `bytes` bytes in their contexts
    // (the callers'); the events order the copy after the source's writers.
    unsafe {
        cudarc::driver::result::memcpy_peer_async(
            dst_ctx.cu_ctx(),
            dst,
            src_ctx.cu_ctx(),
            src,
            bytes,
            dst_stream.cu_stream(),
        )
    }
    .during(DURING)?;
    // ...and the source's later writers (or its freeing) wait for the copy.
    let copied = dst_stream.record_event(None).during(DURING)?;
    src_stream.wait(&copied).during(DURING)
}

/// Switches on direct access between two devices' memory, both ways, once per pair, where the
/// hardware allows; otherwise (or if it fails) peer copies are staged through the host by the
/// driver, which is slower but correct.
fn enable_peer_access(a: &Arc<CudaContext>, b: &Arc<CudaContext>) {
    static DONE: Mutex<Option<HashSet<(usize, usize)>>> = Mutex::new(None);
    if a.ordinal() == b.ordinal() {
        return;
    }
    let key = (a.cu_ctx() as usize, b.cu_ctx() as usize);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if !done.get_or_insert_with(HashSet::new).insert(key) {
        return;
    }
    for (from, to) in [(a, b), (b, a)] {
        let mut can = 0;
        // SAFETY: plain queries on valid device handles; enabling is per context pair and
        // idempotent (an "already enabled" answer is ignored).
        unsafe {
            if sys::cuDeviceCanAccessPeer(&mut can, from.cu_device(), to.cu_device())
                != sys::CUresult::CUDA_SUCCESS
                || can == 0
            {
                continue;
            }
            if from.bind_to_thread().is_ok() {
                let _ = sys::cuCtxEnablePeerAccess(to.cu_ctx(), 0);
            }
        }
    }
}

/// Several `Gpu`s working together: a sum all-reduce over one vector per `Gpu` through NCCL,
/// with one communicator per device (single process), created on the first all-reduce and
/// kept for the group's life. All CUDA devices (distinct) or all simulators.
pub struct GpuGroup {
    gpus: Vec<Gpu>,
    comms: Mutex<Option<Comms>>,
}

/// NCCL communicators, one per device of a group, in the group's order.
struct Comms(Vec<Comm>);

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; the group's
// mutex serialises every use.
unsafe impl Send for Comms {}

impl GpuGroup {
    /// A group of `gpus`: at least one, all CUDA devices with distinct ordinals, or all
    /// simulators.
    ///
    /// Errors: [`Error::InvalidArgument`] for an empty list, a mix of CUDA and simulator, or a
    /// device listed twice.
    pub fn new(gpus: Vec<Gpu>) -> Result<GpuGroup> {
        let invalid = |detail: &str| Error::InvalidArgument {
            op: "GpuGroup::new",
            detail: detail.to_string(),
        };
        if gpus.is_empty() {
            return Err(invalid("a group needs at least one Gpu"));
        }
        let simulators = gpus.iter().filter(|g| g.is_simulator()).count();
        if simulators != 0 && simulators != gpus.len() {
            return Err(invalid("a group is all CUDA devices or all simulators"));
        }
        let ordinals: HashSet<_> = gpus.iter().filter_map(Gpu::ordinal).collect();
        if simulators == 0 && ordinals.len() != gpus.len() {
            return Err(invalid(
                "a device is listed twice: NCCL needs one Gpu per device (Gpu::new(i) once per i)",
            ));
        }
        Ok(GpuGroup {
            gpus,
            comms: Mutex::new(None),
        })
    }

    /// Every CUDA device of the machine ([`gpus`]).
    pub fn all() -> Result<GpuGroup> {
        GpuGroup::new(gpus()?)
    }

    /// The group's `Gpu`s, in rank order.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Number of `Gpu`s.
    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    /// Whether the group is empty (never: [`GpuGroup::new`] refuses that).
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// Sums the vectors element by element, in place: `parts[i]` lives on `gpus()[i]`, all of
    /// one length; afterwards every one holds the sum. Queued on each `Gpu`'s stream in order
    /// with its other work (like a launch, it returns before the sums are done).
    ///
    /// CUDA: one NCCL all-reduce per device in one group call (the communicators made on the
    /// first call); a group of one device has nothing to add. Simulator: the plain f32 sum in
    /// rank order (NCCL's order of additions is its own, so results can differ in the last bits).
    ///
    /// Errors: [`Error::ShapeMismatch`] for a wrong count or unequal lengths;
    /// [`Error::WrongDevice`] if `parts[i]` is not `gpus()[i]`'s; [`Error::NoNccl`] without
    /// libnccl (two or more devices); [`Error::Nccl`] when NCCL fails.
    pub fn all_reduce_sum(&self, parts: &mut [DeviceVec<f32>]) -> Result<()> {
        const OP: &str = "all_reduce_sum";
        crate::error::same_shape(
            OP,
            &[parts.len()],
            &[self.gpus.len()],
            "one vector per Gpu of the group",
        )?;
        let len = parts.first().map_or(0, DeviceVec::len);
        for (gpu, part) in self.gpus.iter().zip(parts.iter()) {
            crate::error::same_shape(OP, &[len], &[part.len()], "every vector has the same length")?;
            if !gpu.owns(part) {
                return Err(Error::WrongDevice { op: OP });
            }
        }
        if len == 0 || parts.len() == 1 {
            return Ok(());
        }
        if self.gpus[0].is_simulator() {
            return simulated_sum(parts);
        }
        if !nccl_available() {
            return Err(Error::NoNccl);
        }
        let mut comms = self.comms.lock().unwrap_or_else(|p| p.into_inner());
        if comms.is_none() {
            let streams = self
                .gpus
                .iter()
                .filter_map(|g| match &g.backend {
                    Backend::Cuda(d) => Some(d.stream.clone()),
                    Backend::Simulator => None,
                })
                .collect();
            *comms = Some(Comms(
                Comm::from_devices(streams).map_err(|e| nccl_error("creating the communicators", e))?,
            ));
        }
        let Some(Comms(comms)) = comms.as_ref() else {
            return Err(Error::Nccl {
                during: "creating the communicators",
                code: "none made".into(),
            });
        };
        cudarc::nccl::result::group_start().map_err(|e| nccl_error("starting a group call", e))?;
        let mut first_error = None;
        for (comm, part) in comms.iter().zip(parts.iter_mut()) {
            if let Storage::Cuda(s) = &mut part.storage {
                if let Err(e) = comm.all_reduce_in_place(s, &ReduceOp::Sum) {
                    first_error.get_or_insert(nccl_error("queueing an all-reduce", e));
                }
            }
        }
        // Always close the group, whatever happened inside it.
        let ended = cudarc::nccl::result::group_end().map_err(|e| nccl_error("ending a group call", e));
        match first_error {
            Some(e) => Err(e),
            None => ended.map(|_| ()),
        }
    }

    /// Waits until every `Gpu` of the group has finished its queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.gpus.iter().try_for_each(Gpu::synchronize)
    }
}

/// The simulator's all-reduce: the sum in rank order, written to every part.
fn simulated_sum(parts: &mut [DeviceVec<f32>]) -> Result<()> {
    let mut sum = parts[0].to_vec()?;
    for part in &parts[1..] {
        for (s, x) in sum.iter_mut().zip(part.to_vec()?) {
            *s += x;
        }
    }
    for part in parts.iter_mut() {
        if let Storage::Host(v) = &mut part.storage {
            v.copy_from_slice(&sum);
        }
    }
    Ok(())
}

fn nccl_error(during: &'static str, e: cudarc::nccl::result::NcclError) -> Error {
    Error::Nccl {
        during,
        code: format!("{:?}", e.0),
    }
}

impl std::fmt::Debug for GpuGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.gpus).finish()
    }
}
