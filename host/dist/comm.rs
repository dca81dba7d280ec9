//! A communicator: one process's handle on a group of processes, one GPU each, and the
//! collectives NCCL runs among them on that GPU's stream.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cudarc::driver::sys as cu;
use cudarc::nccl::sys as nccl;

use super::rendezvous::Rendezvous;
use super::store::{self, PAYLOAD};
use crate::buffer::{DeviceVec, Element, Storage};
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};

/// How partial values combine in [`Communicator::all_reduce`] and
/// [`Communicator::reduce_scatter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The largest.
    Max,
    /// The smallest.
    Min,
    /// The mean (the sum divided by the world's size).
    Avg,
}

impl ReduceOp {
    fn nccl(self) -> nccl::ncclRedOp_t {
        match self {
            ReduceOp::Sum => nccl::ncclRedOp_t::ncclSum,
            ReduceOp::Max => nccl::ncclRedOp_t::ncclMax,
            ReduceOp::Min => nccl::ncclRedOp_t::ncclMin,
            ReduceOp::Avg => nccl::ncclRedOp_t::ncclAvg,
        }
    }
}

/// An element type of the collectives: NCCL's type for it. Sealed: f32, f64, f16, bf16 and the
/// 8-, 32- and 64-bit integers.
pub trait DistElement: Element + sealed::Sealed {
    /// NCCL's data type.
    #[doc(hidden)]
    fn nccl_type() -> nccl::ncclDataType_t;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! dist_elements {
    ($($t:ty => $n:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl DistElement for $t {
            fn nccl_type() -> nccl::ncclDataType_t {
                nccl::ncclDataType_t::$n
            }
        }
    )*};
}
dist_elements!(f32 => ncclFloat32, f64 => ncclFloat64, half::f16 => ncclFloat16, half::bf16 => ncclBfloat16,
               i8 => ncclInt8, u8 => ncclUint8, i32 => ncclInt32, u32 => ncclUint32, i64 => ncclInt64, u64 => ncclUint64);

/// An NCCL communicator handle, aborted when dropped (`ncclCommAbort` never waits, where
/// finalising could wait forever on a rank that is gone).
struct NcclComm(nccl::ncclComm_t);

// SAFETY: an NCCL communicator may be used from any thread, one call at a time: every use goes
// through the Communicator's mutex.
unsafe impl Send for NcclComm {}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // SAFETY: a communicator NCCL made and nobody else holds; dropped once.
        unsafe {
            nccl::ncclCommAbort(self.0);
        }
    }
}

/// What the collectives run on: NCCL on a CUDA device, or, in the simulator, a world of one whose
/// point-to-point messages to itself wait in a queue.
enum Transport {
    Nccl(Mutex<Option<NcclComm>>),
    Simulator(Mutex<VecDeque<Vec<u8>>>),
}

/// One process's membership of a group of processes, one GPU each (NCCL's communicator), and
/// the collectives among them. Every collective is queued on the [`Gpu`]'s stream, in order with
/// its other work, and returns before it is done (as a launch does): read the results after
/// [`Communicator::synchronize`], which also turns a rank that died into an error within the
/// timeout. Collectives queued inside [`Gpu::capture`] are recorded into the graph.
pub struct Communicator {
    gpu: Gpu,
    rank: usize,
    world: usize,
    timeout: Duration,
    transport: Arc<Transport>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator {{ rank: {}, world: {}, gpu: {:?} }}",
            self.rank, self.world, self.gpu
        )
    }
}

/// The `&[u8]` of a vector's elements in the simulator.
fn host_bytes<T: Element>(v: &[T]) -> Vec<u8> {
    // SAFETY: `T: Element` is plain data with no padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }.to_vec()
}

impl Communicator {
    /// Joins the job `r` describes on `gpu`: meets the other ranks (rank 0 makes NCCL's unique id
    /// and hands it out over TCP, see `store`), then makes the NCCL communicator. Every rank calls
    /// it, each with its own GPU; it returns once all have joined.
    ///
    /// The simulator takes a world of one (the collectives then act on the one rank's data).
    ///
    /// Errors: [`Error::Dist`] when a rank does not arrive (or NCCL's initialisation does not
    /// end) within `r.timeout`, on every rank that did; [`Error::NoNccl`] without libnccl;
    /// [`Error::InvalidArgument`] for the simulator with a world of more than one; [`Error::Nccl`]
    /// when NCCL fails.
    pub fn new(gpu: &Gpu, r: &Rendezvous) -> Result<Communicator> {
        let transport = match &gpu.backend {
            Backend::Simulator => {
                if r.world != 1 {
                    return Err(Error::InvalidArgument {
                        op: "dist::Communicator::new",
                        detail: format!("the simulator runs a world of one rank, not {}", r.world),
                    });
                }
                Transport::Simulator(Mutex::new(VecDeque::new()))
            }
            Backend::Cuda(d) => {
                if !crate::multi::nccl_available() {
                    return Err(Error::NoNccl);
                }
                let id = if r.rank == 0 { Some(unique_id()?) } else { None };
                let id = store::share(r, id)?;
                let ctx = d.ctx.clone();
                let comm = init_within(r, &ctx, id)?;
                Transport::Nccl(Mutex::new(Some(comm)))
            }
        };
        Ok(Communicator {
            gpu: gpu.clone(),
            rank: r.rank,
            world: r.world,
            timeout: r.timeout,
            transport: Arc::new(transport),
        })
    }

    /// [`Communicator::new`] with the rendezvous torchrun's environment describes
    /// ([`Rendezvous::from_env`]) on CUDA device `LOCAL_RANK`.
    ///
    /// Errors: those of [`Rendezvous::from_env`], [`Gpu::new`] and [`Communicator::new`].
    pub fn from_env() -> Result<Communicator> {
        let r = Rendezvous::from_env()?;
        let gpu = Gpu::new(r.local_rank)?;
        Communicator::new(&gpu, &r)
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> usize {
        self.world
    }

    /// The GPU this rank runs on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Errors unless `v` is on this rank's GPU and its stream (where the collectives run).
    fn check_buffer<T>(&self, op: &'static str, v: &DeviceVec<T>) -> Result<()> {
        if !self.gpu.owns(v) {
            return Err(Error::WrongDevice { op });
        }
        if !self.gpu.on_own_stream(v) {
            return Err(Error::InvalidArgument {
                op,
                detail: "the buffer lives on another stream handle of the GPU: use the \
                         communicator of that handle, or copy it to this one's stream"
                    .into(),
            });
        }
        Ok(())
    }

    /// Runs `f` with the NCCL communicator and the stream, or reports a broken one.
    fn with_nccl(
        &self,
        during: &'static str,
        f: impl FnOnce(nccl::ncclComm_t, nccl::cudaStream_t) -> nccl::ncclResult_t,
    ) -> Result<()> {
        let (Transport::Nccl(comm), Backend::Cuda(d)) = (&*self.transport, &self.gpu.backend) else {
            return Err(internal(during));
        };
        let guard = comm.lock().unwrap_or_else(|p| p.into_inner());
        let Some(c) = guard.as_ref() else {
            return Err(aborted(during));
        };
        let stream = d.stream.cu_stream() as nccl::cudaStream_t;
        check(during, f(c.0, stream))
    }

    /// `buf` combined over every rank by `op`, in place on every rank (NCCL's all-reduce).
    ///
    /// Errors: [`Error::WrongDevice`] / [`Error::InvalidArgument`] for a buffer of another GPU or
    /// stream; [`Error::Nccl`].
    pub fn all_reduce<T: DistElement>(&self, buf: &mut DeviceVec<T>, op: ReduceOp) -> Result<()> {
        const OP: &str = "dist::all_reduce";
        self.check_buffer(OP, buf)?;
        if let Storage::Host(_) = buf.storage {
            return Ok(());
        }
        let (p, n) = (buf.address(), buf.len());
        // SAFETY: the buffer holds `n` elements on this rank's GPU; NCCL reads and writes them in
        // order on the stream.
        self.with_nccl("queueing an all-reduce", |c, st| unsafe {
            nccl::ncclAllReduce(p as *const _, p as *mut _, n, T::nccl_type(), op.nccl(), c, st)
        })
    }

    /// Rank `k`'s share of `input` combined over every rank by `op`: `input` holds `world`
    /// chunks of `output.len()` elements, and rank `k` gets chunk `k` of the combination.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `input.len() == world * output.len()`; as
    /// [`Communicator::all_reduce`].
    pub fn reduce_scatter<T: DistElement>(
        &self,
        input: &DeviceVec<T>,
        output: &mut DeviceVec<T>,
        op: ReduceOp,
    ) -> Result<()> {
        const OP: &str = "dist::reduce_scatter";
        self.check_chunks(OP, output.len(), input.len())?;
        self.check_buffer(OP, input)?;
        self.check_buffer(OP, output)?;
        if let (Storage::Host(i), Storage::Host(o)) = (&input.storage, &mut output.storage) {
            o.copy_from_slice(i);
            return Ok(());
        }
        let (pi, po, n) = (input.address(), output.address(), output.len());
        // SAFETY: `input` holds `world * n` elements, `output` `n`, on this GPU.
        self.with_nccl("queueing a reduce-scatter", |c, st| unsafe {
            nccl::ncclReduceScatter(pi as *const _, po as *mut _, n, T::nccl_type(), op.nccl(), c, st)
        })
    }

    /// Every rank's `input`, one after another in rank order, into `output` on every rank.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `output.len() == world * input.len()`; as
    /// [`Communicator::all_reduce`].
    pub fn all_gather<T: DistElement>(&self, input: &DeviceVec<T>, output: &mut DeviceVec<T>) -> Result<()> {
        const OP: &str = "dist::all_gather";
        self.check_chunks(OP, input.len(), output.len())?;
        self.check_buffer(OP, input)?;
        self.check_buffer(OP, output)?;
        if let (Storage::Host(i), Storage::Host(o)) = (&input.storage, &mut output.storage) {
            o.copy_from_slice(i);
            return Ok(());
        }
        let (pi, po, n) = (input.address(), output.address(), input.len());
        // SAFETY: `input` holds `n` elements, `output` `world * n`, on this GPU.
        self.with_nccl("queueing an all-gather", |c, st| unsafe {
            nccl::ncclAllGather(pi as *const _, po as *mut _, n, T::nccl_type(), c, st)
        })
    }

    /// Rank `root`'s `buf` into `buf` on every rank.
    ///
    /// Errors: [`Error::InvalidArgument`] for a root outside the world; as
    /// [`Communicator::all_reduce`].
    pub fn broadcast<T: DistElement>(&self, buf: &mut DeviceVec<T>, root: usize) -> Result<()> {
        const OP: &str = "dist::broadcast";
        self.check_peer(OP, root)?;
        self.check_buffer(OP, buf)?;
        if let Storage::Host(_) = buf.storage {
            return Ok(());
        }
        let (p, n) = (buf.address(), buf.len());
        // SAFETY: the buffer holds `n` elements on this GPU.
        self.with_nccl("queueing a broadcast", |c, st| unsafe {
            nccl::ncclBroadcast(p as *const _, p as *mut _, n, T::nccl_type(), root as i32, c, st)
        })
    }

    /// Sends `buf` to rank `peer`, which receives it with [`Communicator::recv`] of a buffer of
    /// the same length. Several sends and receives that must proceed together (an exchange) go
    /// in one [`Communicator::group`].
    ///
    /// Errors: [`Error::InvalidArgument`] for a peer outside the world; as
    /// [`Communicator::all_reduce`].
    pub fn send<T: DistElement>(&self, buf: &DeviceVec<T>, peer: usize) -> Result<()> {
        const OP: &str = "dist::send";
        self.check_peer(OP, peer)?;
        self.check_buffer(OP, buf)?;
        if let (Storage::Host(v), Transport::Simulator(queue)) = (&buf.storage, &*self.transport) {
            queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(host_bytes(v));
            return Ok(());
        }
        let (p, n) = (buf.address(), buf.len());
        // SAFETY: the buffer holds `n` elements on this GPU.
        self.with_nccl("queueing a send", |c, st| unsafe {
            nccl::ncclSend(p as *const _, n, T::nccl_type(), peer as i32, c, st)
        })
    }

    /// Receives into `buf` what rank `peer` sends with [`Communicator::send`].
    ///
    /// Errors: as [`Communicator::send`]; in the simulator, a receive with nothing sent, or of
    /// another length.
    pub fn recv<T: DistElement>(&self, buf: &mut DeviceVec<T>, peer: usize) -> Result<()> {
        const OP: &str = "dist::recv";
        self.check_peer(OP, peer)?;
        self.check_buffer(OP, buf)?;
        if let (Storage::Host(v), Transport::Simulator(queue)) = (&mut buf.storage, &*self.transport) {
            let sent = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
            return match sent {
                Some(bytes) if bytes.len() == std::mem::size_of_val(v.as_slice()) => {
                    // SAFETY: as many bytes as the buffer holds, of plain data.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            bytes.as_ptr(),
                            v.as_mut_ptr().cast::<u8>(),
                            bytes.len(),
                        )
                    };
                    Ok(())
                }
                Some(bytes) => Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: vec![bytes.len()],
                    rhs: vec![std::mem::size_of_val(v.as_slice())],
                    rule: "a receive takes as many bytes as were sent",
                }),
                None => Err(Error::InvalidArgument {
                    op: OP,
                    detail: "nothing was sent to this rank (a send must come first)".into(),
                }),
            };
        }
        let (p, n) = (buf.address(), buf.len());
        // SAFETY: the buffer holds `n` elements on this GPU.
        self.with_nccl("queueing a receive", |c, st| unsafe {
            nccl::ncclRecv(p as *mut _, n, T::nccl_type(), peer as i32, c, st)
        })
    }

    /// Runs `f` as one NCCL group: its collectives and point-to-point operations are queued
    /// together (an exchange of sends and receives that would wait on each other one by one).
    ///
    /// Errors: what `f` returns, or [`Error::Nccl`] when the group cannot be started or ended.
    pub fn group<R>(&self, f: impl FnOnce(&Communicator) -> Result<R>) -> Result<R> {
        if let Transport::Simulator(_) = &*self.transport {
            return f(self);
        }
        // SAFETY: a group call around NCCL calls of this thread.
        check("starting a group call", unsafe { nccl::ncclGroupStart() })?;
        let out = f(self);
        // Always closed, whatever `f` returned.
        // SAFETY: as above.
        let ended = check("ending a group call", unsafe { nccl::ncclGroupEnd() });
        let out = out?;
        ended.map(|()| out)
    }

    /// Splits the world into groups: the ranks that pass the same `color` form a new
    /// communicator, ordered by `key` (then by rank); a rank that passes `None` joins none and
    /// gets `None`. Every rank calls it.
    ///
    /// Errors: [`Error::Nccl`]; in the simulator, only a world of one (which splits into itself).
    pub fn split(&self, color: Option<u32>, key: usize) -> Result<Option<Communicator>> {
        let transport = match &*self.transport {
            Transport::Simulator(_) => {
                return Ok(color.map(|_| Communicator {
                    gpu: self.gpu.clone(),
                    rank: 0,
                    world: 1,
                    timeout: self.timeout,
                    transport: Arc::new(Transport::Simulator(Mutex::new(VecDeque::new()))),
                }));
            }
            Transport::Nccl(comm) => comm,
        };
        let guard = transport.lock().unwrap_or_else(|p| p.into_inner());
        let Some(parent) = guard.as_ref() else {
            return Err(aborted("splitting a communicator"));
        };
        let color = color.map_or(-1, |c| c.min(i32::MAX as u32) as i32);
        let mut new = MaybeUninit::<nccl::ncclComm_t>::zeroed();
        // SAFETY: a live communicator; NCCL writes the new one (null for no color).
        check("splitting a communicator", unsafe {
            nccl::ncclCommSplit(
                parent.0,
                color,
                key.min(i32::MAX as usize) as i32,
                new.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })?;
        // SAFETY: written by NCCL (null where this rank joins none).
        let new = unsafe { new.assume_init() };
        if new.is_null() {
            return Ok(None);
        }
        let (mut rank, mut count) = (0i32, 0i32);
        // SAFETY: a live communicator NCCL just made.
        unsafe {
            check(
                "reading the new communicator's rank",
                nccl::ncclCommUserRank(new, &mut rank),
            )?;
            check(
                "reading the new communicator's size",
                nccl::ncclCommCount(new, &mut count),
            )?;
        }
        Ok(Some(Communicator {
            gpu: self.gpu.clone(),
            rank: rank as usize,
            world: count as usize,
            timeout: self.timeout,
            transport: Arc::new(Transport::Nccl(Mutex::new(Some(NcclComm(new))))),
        }))
    }

    /// Waits for the work queued on this rank's stream, the collectives included, checking NCCL
    /// for errors (a rank that died) as it waits: an error, or no end within the timeout, aborts
    /// the communicator (it cannot be used again) and returns [`Error::Dist`] instead of hanging.
    pub fn synchronize(&self) -> Result<()> {
        let (Transport::Nccl(comm), Backend::Cuda(d)) = (&*self.transport, &self.gpu.backend) else {
            return self.gpu.synchronize();
        };
        let deadline = Instant::now() + self.timeout;
        let stream = d.stream.cu_stream();
        loop {
            // SAFETY: this GPU's stream, alive as long as the Gpu.
            let status = unsafe { cu::cuStreamQuery(stream) };
            if status == cu::CUresult::CUDA_SUCCESS {
                return self.gpu.synchronize();
            }
            if status != cu::CUresult::CUDA_ERROR_NOT_READY {
                return self.gpu.synchronize();
            }
            let mut guard = comm.lock().unwrap_or_else(|p| p.into_inner());
            let Some(c) = guard.as_ref() else {
                return Err(aborted("waiting for a collective"));
            };
            let mut async_error = nccl::ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator.
            unsafe { nccl::ncclCommGetAsyncError(c.0, &mut async_error) };
            let failed = async_error != nccl::ncclResult_t::ncclSuccess
                && async_error != nccl::ncclResult_t::ncclInProgress;
            if failed || Instant::now() >= deadline {
                // Aborting makes NCCL's kernels leave, so that the stream can drain.
                guard.take();
                let why = if failed {
                    format!("NCCL reported {async_error:?} (a rank gone?)")
                } else {
                    format!(
                        "the collectives did not finish within {:.1} s (a rank gone?)",
                        self.timeout.as_secs_f64()
                    )
                };
                return Err(Error::Dist {
                    during: "waiting for a collective",
                    detail: format!(
                        "rank {} of {}: {why}; the communicator was aborted",
                        self.rank, self.world
                    ),
                });
            }
            drop(guard);
            thread::sleep(Duration::from_micros(200));
        }
    }

    /// Errors unless `peer` is a rank of the world.
    fn check_peer(&self, op: &'static str, peer: usize) -> Result<()> {
        if peer >= self.world {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("rank {peer} is outside the world of {}", self.world),
            });
        }
        Ok(())
    }

    /// Errors unless `whole == world * chunk`.
    fn check_chunks(&self, op: &'static str, chunk: usize, whole: usize) -> Result<()> {
        crate::error::same_shape(
            op,
            &[whole],
            &[chunk.saturating_mul(self.world)],
            "the whole holds one chunk per rank",
        )
    }
}

/// Rank 0's new NCCL unique id, as the bytes the rendezvous hands out.
fn unique_id() -> Result<[u8; PAYLOAD]> {
    let mut id = MaybeUninit::<nccl::ncclUniqueId>::zeroed();
    // SAFETY: NCCL writes the id.
    check("making a unique id", unsafe {
        nccl::ncclGetUniqueId(id.as_mut_ptr())
    })?;
    // SAFETY: written above.
    let id = unsafe { id.assume_init() };
    let mut out = [0u8; PAYLOAD];
    for (o, c) in out.iter_mut().zip(id.internal.iter()) {
        *o = *c as u8;
    }
    Ok(out)
}

/// NCCL's communicator of rank `r.rank` for the id, made on a thread of its own so that a rank
/// that never starts NCCL (it died after the rendezvous) is an error after the timeout rather than
/// a hang; such a thread is left waiting.
fn init_within(
    r: &Rendezvous,
    ctx: &Arc<cudarc::driver::CudaContext>,
    id: [u8; PAYLOAD],
) -> Result<NcclComm> {
    let (tx, rx) = mpsc::channel();
    let (rank, world, ctx) = (r.rank, r.world, ctx.clone());
    thread::spawn(move || {
        let made = (|| {
            ctx.bind_to_thread().map_err(|e| Error::Driver {
                during: "making the context current for NCCL",
                source: e,
            })?;
            let mut internal = [0 as std::ffi::c_char; PAYLOAD];
            for (i, b) in internal.iter_mut().zip(id.iter()) {
                *i = *b as std::ffi::c_char;
            }
            let mut comm = MaybeUninit::<nccl::ncclComm_t>::zeroed();
            // SAFETY: the id every rank got from rank 0; NCCL writes the communicator.
            check("making the communicator", unsafe {
                nccl::ncclCommInitRank(
                    comm.as_mut_ptr(),
                    world as i32,
                    nccl::ncclUniqueId { internal },
                    rank as i32,
                )
            })?;
            // SAFETY: written by a successful init.
            Ok(NcclComm(unsafe { comm.assume_init() }))
        })();
        let _ = tx.send(made);
    });
    rx.recv_timeout(r.timeout).unwrap_or_else(|_| {
        Err(Error::Dist {
            during: "making the communicator",
            detail: format!(
                "rank {} of {}: NCCL's initialisation did not end within {:.1} s (a rank that met the \
                 others did not start NCCL: it failed or died)",
                r.rank,
                r.world,
                r.timeout.as_secs_f64()
            ),
        })
    })
}

/// An NCCL result as a `Result`.
fn check(during: &'static str, r: nccl::ncclResult_t) -> Result<()> {
    match r {
        nccl::ncclResult_t::ncclSuccess => Ok(()),
        code => Err(Error::Nccl {
            during,
            code: format!("{code:?}"),
        }),
    }
}

/// The error of a communicator aborted by an earlier failure.
fn aborted(during: &'static str) -> Error {
    Error::Dist {
        during,
        detail: "the communicator was aborted after an earlier failure: make a new one".into(),
    }
}

/// A state the API cannot reach (a CUDA buffer in a simulator communicator, say).
fn internal(op: &'static str) -> Error {
    Error::InvalidArgument {
        op,
        detail: "internal: a buffer of another backend than the communicator's".into(),
    }
}
